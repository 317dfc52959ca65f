// SPDX-License-Identifier: Apache-2.0
//! The `GET /allocation_candidates` query string: its options and Python's
//! `urlencode`. The request itself is built (and sorted as nova's `to_querystring`
//! sorts it) by [`crate::placement::resource_request`]. Pure: no I/O.

use crate::release::NovaSeries;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// `[scheduler] max_placement_results` default.
pub const DEFAULT_MAX_PLACEMENT_RESULTS: u32 = 1000;

/// Options of the query builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryOptions {
    /// `[scheduler] max_placement_results`, sent as `limit`.
    pub max_placement_results: u32,
    /// The nova release whose `ResourceRequest` is built.
    pub release: NovaSeries,
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            max_placement_results: DEFAULT_MAX_PLACEMENT_RESULTS,
            release: NovaSeries::NEWEST,
        }
    }
}

/// Characters Python's `quote_plus` leaves alone: letters, digits and `_.-~`.
const QUOTE_PLUS: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'.')
    .remove(b'-')
    .remove(b'~');

/// Python's `urllib.parse.urlencode` of the pairs, in the given order: `,` → `%2C`,
/// `:` → `%3A`, `!` → `%21`, space → `+`.
pub fn encode_query(params: &[(String, String)]) -> String {
    let quote = |s: &str| {
        utf8_percent_encode(s, QUOTE_PLUS)
            .to_string()
            .replace("%20", "+")
    };
    params
        .iter()
        .map(|(k, v)| format!("{}={}", quote(k), quote(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests;
