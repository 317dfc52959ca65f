// SPDX-License-Identifier: Apache-2.0
//! The `GET /allocation_candidates` query nova builds from a RequestSpec
//! (`ResourceRequest.from_request_spec` + `resources_from_request_spec` +
//! `ResourceRequest.to_querystring`). Pure: no I/O.
//!
//! Covered: the unsuffixed group's flavor resources (`VCPU`, `MEMORY_MB`, `DISK_GB`
//! with swap rounded up and root disk left out when booting from volume), zero
//! amounts removed, image `traits_required`, `root_required` from
//! `request_level_params` (so the prefilters' additions are in), `same_subtree`,
//! `member_of` from `requested_destination.aggregates` / `forbidden_aggregates`, and
//! `limit` (dropped for the `group` / `same_host` / `different_host` hints).
//!
//! Not yet (later issues; a spec using them gets a query without them):
//! - flavor extra specs `resources[S]:<RC>` / `trait[S]:<T>` overrides and granular
//!   (suffixed) groups, `group_policy` (and its `none` default for ≥ 2 suffixed groups);
//! - `spec.requested_resources` groups (ports, device profiles, PCI in Placement);
//! - CPU pinning translation (`PCPU`, `HW_CPU_HYPERTHREADING`) and the second,
//!   non-pinned fallback query;
//! - memory encryption, vPMEM, vTPM, PCI NUMA socket, secure boot, maxphysaddr and
//!   stateless firmware translations;
//! - target host/node (`in_tree`, and dropping `limit` for a multi-node host), which
//!   needs a compute node lookup.

use crate::model::RequestSpec;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::collections::{BTreeMap, BTreeSet};

/// `[scheduler] max_placement_results` default.
pub const DEFAULT_MAX_PLACEMENT_RESULTS: u32 = 1000;

/// Hints that make nova drop `limit` (affinity needs every candidate).
const UNLIMITED_HINTS: [&str; 3] = ["group", "same_host", "different_host"];

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

/// The unsuffixed request group (`RequestGroup` with `requester_id=None`).
#[derive(Default)]
struct Group {
    resources: BTreeMap<&'static str, i64>,
    required: BTreeSet<String>,
    member_of: Vec<Vec<String>>,
    forbidden_aggregates: BTreeSet<String>,
}

impl Group {
    /// nova's `RequestGroup.is_empty` (after `strip_zeros`).
    fn is_empty(&self) -> bool {
        self.resources.is_empty()
            && self.required.is_empty()
            && self.member_of.is_empty()
            && self.forbidden_aggregates.is_empty()
    }

    /// nova's `RequestGroup.to_queryparams` for the unsuffixed group.
    fn push_params(&self, params: &mut Vec<(String, String)>) {
        let resources: Vec<String> = self
            .resources
            .iter()
            .map(|(rc, n)| format!("{rc}:{n}"))
            .collect();
        params.push(("resources".into(), resources.join(",")));
        if !self.required.is_empty() {
            params.push(("required".into(), join(&self.required)));
        }
        for ored in &self.member_of {
            let sorted: BTreeSet<&String> = ored.iter().collect();
            let uuids: Vec<&str> = sorted.into_iter().map(String::as_str).collect();
            params.push(("member_of".into(), format!("in:{}", uuids.join(","))));
        }
        if !self.forbidden_aggregates.is_empty() {
            params.push((
                "member_of".into(),
                format!("!in:{}", join(&self.forbidden_aggregates)),
            ));
        }
    }
}

/// The query parameters nova sends for `spec`, sorted by key then value as nova
/// sorts them before encoding.
pub fn allocation_candidates_query(
    spec: &RequestSpec,
    opts: &QueryOptions,
) -> Vec<(String, String)> {
    let mut params = Vec::new();
    if !drops_limit(spec) {
        params.push(("limit".into(), opts.max_placement_results.to_string()));
    }
    let rlp = &spec.request_level_params;
    if !rlp.root_required.is_empty() || !rlp.root_forbidden.is_empty() {
        let mut vals: Vec<String> = rlp.root_required.iter().cloned().collect();
        vals.extend(rlp.root_forbidden.iter().map(|t| format!("!{t}")));
        params.push(("root_required".into(), vals.join(",")));
    }
    for suffixes in &rlp.same_subtree {
        let sorted: BTreeSet<&String> = suffixes.iter().collect();
        let vals: Vec<&str> = sorted.into_iter().map(String::as_str).collect();
        params.push(("same_subtree".into(), vals.join(",")));
    }
    if let Some(group) = unsuffixed_group(spec) {
        group.push_params(&mut params);
    }
    params.sort();
    params
}

/// Builds the unsuffixed group; `None` when nova would have dropped it as empty.
fn unsuffixed_group(spec: &RequestSpec) -> Option<Group> {
    let flavor = &spec.flavor;
    let mut group = Group::default();
    group.required.extend(image_required_traits(spec));
    let disk =
        flavor.ephemeral_gb + swap_gb(flavor.swap) + if spec.is_bfv { 0 } else { flavor.root_gb };
    for (rc, amount) in [
        ("VCPU", flavor.vcpus),
        ("MEMORY_MB", flavor.memory_mb),
        ("DISK_GB", disk),
    ] {
        // `strip_zeros` (and DISK_GB is only added when non-zero anyway).
        if amount != 0 {
            group.resources.insert(rc, amount);
        }
    }
    // `from_request_spec` drops an empty group before the destination is applied;
    // `get_request_group(None)` then recreates it with only aggregates.
    let mut exists = !group.is_empty();
    if let Some(dest) = &spec.requested_destination {
        if !dest.aggregates.is_empty() {
            group.member_of = dest
                .aggregates
                .iter()
                .map(|ored| ored.split(',').map(str::to_string).collect())
                .collect();
            exists = true;
        }
        if !dest.forbidden_aggregates.is_empty() {
            group
                .forbidden_aggregates
                .extend(dest.forbidden_aggregates.iter().cloned());
            exists = true;
        }
    }
    exists.then_some(group)
}

/// `traits_required` of the image properties (nova's `_process_image_meta`).
fn image_required_traits(spec: &RequestSpec) -> Vec<String> {
    spec.image
        .as_ref()
        .and_then(|image| image.properties.get("traits_required"))
        .and_then(|v| v.as_array())
        .map(|traits| {
            traits
                .iter()
                .filter_map(|t| t.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// nova's `convert_mb_to_ceil_gb`.
fn swap_gb(swap_mb: i64) -> i64 {
    if swap_mb == 0 {
        0
    } else {
        (swap_mb + 1023).div_euclid(1024)
    }
}

fn drops_limit(spec: &RequestSpec) -> bool {
    spec.scheduler_hints
        .as_ref()
        .is_some_and(|hints| UNLIMITED_HINTS.iter().any(|k| hints.contains_key(*k)))
}

fn join(set: &BTreeSet<String>) -> String {
    set.iter().map(String::as_str).collect::<Vec<_>>().join(",")
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
