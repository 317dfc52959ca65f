// SPDX-License-Identifier: Apache-2.0
//! The `GET /allocation_candidates` query string: nova's `to_querystring` sorting
//! and Python's `urlencode`. The request itself is built by
//! [`crate::placement::resource_request`]. Pure: no I/O.

use super::resource_request::{resources_from_request_spec, RequestError};
use crate::model::RequestSpec;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

/// `[scheduler] max_placement_results` default.
pub const DEFAULT_MAX_PLACEMENT_RESULTS: u32 = 1000;

/// Options of the query builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueryOptions {
    /// `[scheduler] max_placement_results`, sent as `limit`.
    pub max_placement_results: u32,
}

impl Default for QueryOptions {
    fn default() -> Self {
        QueryOptions {
            max_placement_results: DEFAULT_MAX_PLACEMENT_RESULTS,
        }
    }
}

/// The first (pinning-translated) query nova sends for `spec`, sorted by key then
/// value, without a target-node lookup (a target host/node is not turned into
/// `in_tree`; the manager does that lookup and calls
/// [`resources_from_request_spec`] itself).
pub fn allocation_candidates_query(
    spec: &RequestSpec,
    opts: &QueryOptions,
) -> Result<Vec<(String, String)>, RequestError> {
    let mut spec = spec.clone();
    Ok(resources_from_request_spec(&mut spec, opts, true, None)?.query_params())
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
