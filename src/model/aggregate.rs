// SPDX-License-Identifier: Apache-2.0
//! Host aggregates from the API database (`aggregates`, `aggregate_hosts`, `aggregate_metadata`).

use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Aggregate {
    pub id: i64,
    pub uuid: String,
    pub name: String,
    pub hosts: BTreeSet<String>,
    /// Metadata values are strings, as nova stores them.
    pub metadata: BTreeMap<String, String>,
}

impl Aggregate {
    /// The `availability_zone` metadata, if any.
    pub fn availability_zone(&self) -> Option<&str> {
        self.metadata.get("availability_zone").map(String::as_str)
    }
}
