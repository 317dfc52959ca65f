// SPDX-License-Identifier: Apache-2.0
//! nova's `PciDeviceStats._filter_pools`, `support_requests` and `apply_requests`
//! over the parsed pools.

use super::pools::{PciStats, PciValue, Pool};
use super::request::PciRequest;
use std::collections::BTreeMap;

/// Keys of a request spec that the pool matching ignores. nova declares two lists
/// but builds them as one object, so both `rp_uuids` and `rp_uuid` are skipped.
const IGNORED_SPEC_TAGS: [&str; 4] = ["resource_class", "traits", "rp_uuids", "rp_uuid"];

/// A `{group id: [rp uuids]}` mapping: a Placement candidate's `mappings`, or
/// `RequestSpec.get_request_group_mapping()` (whose keys may be None). Empty is falsy.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderMapping(pub Vec<(Option<String>, Vec<String>)>);

impl ProviderMapping {
    /// Python dict assignment: a repeated key keeps its place and takes the new value.
    pub fn insert(&mut self, key: Option<String>, rps: Vec<String>) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = rps,
            None => self.0.push((key, rps)),
        }
    }

    /// A candidate's `mappings` JSON (`None` when it is not a dict of lists of strings).
    pub fn from_json(v: &serde_json::Value) -> Option<Self> {
        let mut m = ProviderMapping::default();
        for (k, rps) in v.as_object()? {
            let rps = rps
                .as_array()?
                .iter()
                .map(|r| r.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()?;
            m.insert(Some(k.clone()), rps);
        }
        Some(m)
    }
}

/// What the NUMA side hands in: the host cell ids the instance's cells were fitted
/// to (`numa_cells`) and the host's cells with their socket (`host_cells`; None when
/// the host has no NUMA topology, which the `socket` policy cannot work with).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NumaContext {
    pub cell_ids: Vec<i64>,
    pub host_cells: Option<Vec<(i64, Option<i64>)>>,
}

/// Why applying requests stopped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PciApplyError {
    /// nova's `PciDeviceRequestFailed`: the host cannot satisfy the requests.
    #[error("PCI device request failed")]
    Failed,
    /// Where nova's code raises something else (TypeError, IndexError, ...).
    #[error("nova would raise: {0}")]
    Raised(String),
}

fn count(pools: &[&Pool]) -> i64 {
    pools.iter().map(|p| p.count).sum()
}

/// `strutils.bool_from_string(value)` (not strict, default False); `None` is
/// `str(None)`, which is not a true word.
fn bool_from_string(value: Option<&str>) -> bool {
    value.is_some_and(crate::py::strutils::bool_from_string)
}

/// `utils.pci_device_prop_match(pool, specs)` for string specs: any spec whose every
/// key equals the pool's (strings compared lower-cased; a missing key is None).
fn spec_matches(pool: &Pool, spec: &BTreeMap<String, Option<String>>) -> bool {
    spec.iter()
        .filter(|(k, _)| !IGNORED_SPEC_TAGS.contains(&k.as_str()))
        // The pool dict's `count` is an int, never equal to a spec string or None.
        .all(|(k, want)| {
            k != "count"
                && match (pool.get(k), want) {
                    (None | Some(PciValue::Null), None) => true,
                    (Some(PciValue::Str(have)), Some(want)) => {
                        have.to_lowercase() == want.to_lowercase()
                    }
                    _ => false,
                }
        })
}

/// `pci_device_prop_match(pool, [{'numa_node': cell}])` for an int or None cell.
fn numa_matches(pool: &Pool, cell: Option<i64>) -> bool {
    match (pool.get("numa_node"), cell) {
        (None | Some(PciValue::Null), None) => true,
        (Some(PciValue::Int(n)), Some(c)) => *n == c,
        _ => false,
    }
}

impl PciStats {
    /// `_filter_pools`: the pools (indices into `self.pools`, in nova's order) that
    /// can serve `request`, or None when too few devices are left.
    fn filter_pools(
        &self,
        request: &PciRequest,
        numa: Option<&NumaContext>,
        rp_uuids: &[String],
    ) -> Result<Option<Vec<usize>>, PciApplyError> {
        let want = request.count;
        let all: Vec<usize> = (0..self.pools.len()).collect();
        let refs = |ix: &[usize]| -> Vec<&Pool> { ix.iter().map(|&i| &self.pools[i]).collect() };

        let mut pools: Vec<usize> = all
            .iter()
            .copied()
            .filter(|&i| request.spec.iter().any(|s| spec_matches(&self.pools[i], s)))
            .collect();
        if count(&refs(&pools)) < want {
            return Ok(None);
        }

        if let Some(numa) = numa.filter(|n| !n.cell_ids.is_empty()) {
            pools = self.filter_for_numa(pools, request, numa)?;
            if count(&refs(&pools)) < want {
                return Ok(None);
            }
        }

        let is = |spec: &BTreeMap<String, Option<String>>, key: &str, value: &str| {
            spec.get(key).and_then(Option::as_deref) == Some(value)
        };
        if request.spec.iter().all(|s| !is(s, "dev_type", "type-PF")) {
            pools.retain(|&i| !self.pools[i].str_is("dev_type", "type-PF"));
        }
        if count(&refs(&pools)) < want {
            return Ok(None);
        }
        if request.spec.iter().all(|s| !is(s, "dev_type", "vdpa")) {
            pools.retain(|&i| !self.pools[i].str_is("dev_type", "vdpa"));
        }
        if request
            .spec
            .iter()
            .all(|s| !bool_from_string(s.get("remote_managed").and_then(Option::as_deref)))
        {
            pools.retain(|&i| {
                !bool_from_string(
                    self.pools[i]
                        .get("remote_managed")
                        .and_then(PciValue::as_str),
                )
            });
        }
        if !rp_uuids.is_empty() {
            let wanted = occurrences(rp_uuids);
            pools.retain(|&i| {
                let pool = &self.pools[i];
                match pool.get("rp_uuid") {
                    Some(PciValue::Str(rp)) => {
                        wanted.get(rp.as_str()).is_some_and(|&n| pool.count >= n)
                    }
                    _ => false,
                }
            });
        }
        if request
            .spec
            .iter()
            .all(|s| is(s, "live_migratable", "true"))
        {
            pools.retain(|&i| self.pools[i].str_is("live_migratable", "true"));
        } else if request
            .spec
            .iter()
            .all(|s| is(s, "live_migratable", "false"))
        {
            pools.retain(|&i| self.pools[i].str_is("live_migratable", "false"));
        }
        if count(&refs(&pools)) < want {
            return Ok(None);
        }
        Ok(Some(pools))
    }

    /// `_filter_pools_for_numa_cells` (with `_filter_pools_for_socket_affinity`).
    fn filter_for_numa(
        &self,
        pools: Vec<usize>,
        request: &PciRequest,
        numa: &NumaContext,
    ) -> Result<Vec<usize>, PciApplyError> {
        let policy = request
            .numa_policy
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("legacy");
        let total = |ix: &[usize]| -> i64 { ix.iter().map(|&i| self.pools[i].count).sum() };
        let strict: Vec<usize> = pools
            .iter()
            .copied()
            .filter(|&i| {
                numa.cell_ids
                    .iter()
                    .any(|&c| numa_matches(&self.pools[i], Some(c)))
            })
            .collect();
        if policy == "required" || total(&strict) >= request.count {
            return Ok(strict);
        }
        if policy == "socket" {
            let host_cells = numa.host_cells.as_ref().ok_or_else(|| {
                PciApplyError::Raised(
                    "'NoneType' object has no attribute 'cells' (socket policy on a host without NUMA topology)".into(),
                )
            })?;
            if host_cells.iter().any(|(_, socket)| socket.is_none()) {
                return Ok(Vec::new());
            }
            let sockets: Vec<Option<i64>> = numa
                .cell_ids
                .iter()
                .flat_map(|g| host_cells.iter().filter(move |(id, _)| id == g))
                .map(|(_, s)| *s)
                .collect();
            let nodes: Vec<i64> = host_cells
                .iter()
                .filter(|(_, s)| sockets.contains(s))
                .map(|(id, _)| *id)
                .collect();
            return Ok(pools
                .into_iter()
                .filter(|&i| nodes.iter().any(|&n| numa_matches(&self.pools[i], Some(n))))
                .collect());
        }
        let affine = |i: usize| {
            numa_matches(&self.pools[i], None)
                || numa
                    .cell_ids
                    .iter()
                    .any(|&c| numa_matches(&self.pools[i], Some(c)))
        };
        let legacy: Vec<usize> = pools.iter().copied().filter(|&i| affine(i)).collect();
        if policy == "legacy" || total(&legacy) >= request.count {
            return Ok(legacy);
        }
        // `preferred`: everything, affine pools first (stable).
        let mut all = pools;
        all.sort_by_key(|&i| !affine(i));
        Ok(all)
    }

    /// `_get_rp_uuids_for_request`.
    fn rp_uuids_for(
        request: &PciRequest,
        mapping: Option<&ProviderMapping>,
    ) -> Result<Vec<String>, PciApplyError> {
        if request.from_neutron_port() {
            return Ok(Vec::new());
        }
        match mapping.filter(|m| !m.0.is_empty()) {
            None => {
                let first = request.spec.first().ok_or_else(|| {
                    PciApplyError::Raised("IndexError: list index out of range (empty spec)".into())
                })?;
                Ok(match first.get("rp_uuids").and_then(Option::as_deref) {
                    None | Some("") => Vec::new(),
                    Some(list) => list.split(',').map(str::to_string).collect(),
                })
            }
            Some(mapping) => {
                let prefix = request.request_id.as_deref().ok_or_else(|| {
                    PciApplyError::Raised(
                        "TypeError: startswith first arg must be str, not None".into(),
                    )
                })?;
                let mut out = Vec::new();
                for (group, rps) in &mapping.0 {
                    let group = group.as_deref().ok_or_else(|| {
                        PciApplyError::Raised(
                            "AttributeError: 'NoneType' object has no attribute 'startswith'"
                                .into(),
                        )
                    })?;
                    if group.starts_with(prefix) {
                        out.push(rps.first().cloned().ok_or_else(|| {
                            PciApplyError::Raised("IndexError: list index out of range".into())
                        })?);
                    }
                }
                Ok(out)
            }
        }
    }

    /// `_assert_one_pool_per_rp_uuid` over all pools (a present `rp_uuid` key counts,
    /// whatever its value).
    fn one_pool_per_rp_uuid(&self) -> bool {
        let mut seen: Vec<&PciValue> = Vec::new();
        for pool in &self.pools {
            if let Some(rp) = pool.get("rp_uuid") {
                if seen.contains(&rp) {
                    return false;
                }
                seen.push(rp);
            }
        }
        true
    }

    /// `_apply_request`: false when the request cannot be met.
    fn apply_request(
        &mut self,
        request: &PciRequest,
        rp_uuids: &[String],
        numa: Option<&NumaContext>,
    ) -> Result<bool, PciApplyError> {
        let filtered = match self.filter_pools(request, numa, rp_uuids)? {
            Some(f) if !f.is_empty() => f,
            _ => return Ok(false),
        };
        // Work on indices; emptied pools are dropped at the end, keeping the order.
        let mut removed = vec![false; self.pools.len()];
        if rp_uuids.is_empty() {
            let mut want = request.count;
            for i in filtered {
                // `_decrease_pool_count`
                let pool = &mut self.pools[i];
                if pool.count > want {
                    pool.count -= want;
                    want = 0;
                } else {
                    want -= pool.count;
                    removed[i] = true;
                }
                if want == 0 {
                    break;
                }
            }
        } else {
            if !self.one_pool_per_rp_uuid() {
                return Ok(false);
            }
            let mut wanted = occurrences(rp_uuids);
            for i in filtered {
                let pool = &mut self.pools[i];
                let rp = pool.get("rp_uuid").and_then(PciValue::as_str).unwrap_or("");
                let n = wanted.remove(rp).unwrap_or(0);
                pool.count -= n;
                if pool.count == 0 {
                    removed[i] = true;
                }
            }
        }
        let mut i = 0;
        self.pools.retain(|_| {
            i += 1;
            !removed[i - 1]
        });
        Ok(true)
    }

    /// `apply_requests`: consumes the requests in order. On failure the requests
    /// applied before the failing one stay consumed, as in nova.
    pub fn apply_requests(
        &mut self,
        requests: &[PciRequest],
        mapping: Option<&ProviderMapping>,
        numa: Option<&NumaContext>,
    ) -> Result<(), PciApplyError> {
        if let Some(reason) = &self.broken {
            if !requests.is_empty() {
                return Err(PciApplyError::Raised(reason.clone()));
            }
        }
        for request in requests {
            let rp_uuids = Self::rp_uuids_for(request, mapping)?;
            if !self.apply_request(request, &rp_uuids, numa)? {
                return Err(PciApplyError::Failed);
            }
        }
        Ok(())
    }

    /// `support_requests`: whether the requests apply to a copy of the pools.
    /// `Err` where nova raises something other than `PciDeviceRequestFailed`.
    pub fn support_requests(
        &self,
        requests: &[PciRequest],
        mapping: Option<&ProviderMapping>,
        numa: Option<&NumaContext>,
    ) -> Result<bool, PciApplyError> {
        let mut copy = self.clone();
        match copy.apply_requests(requests, mapping, numa) {
            Ok(()) => Ok(true),
            Err(PciApplyError::Failed) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

/// `collections.Counter(rp_uuids)`.
fn occurrences(rp_uuids: &[String]) -> BTreeMap<&str, i64> {
    let mut m = BTreeMap::new();
    for rp in rp_uuids {
        *m.entry(rp.as_str()).or_insert(0) += 1;
    }
    m
}

#[cfg(test)]
mod tests;
