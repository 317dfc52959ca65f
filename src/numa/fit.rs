// SPDX-License-Identifier: Apache-2.0
//! nova's `hardware.numa_fit_instance_to_host` and the per-cell helpers it uses
//! (`_numa_fit_instance_cell`, `_numa_cell_supports_pagesize_request`,
//! `_pack_instance_onto_cores`, `_numa_cells_support_network_metadata`).
//!
//! nova mutates the instance cells while it tries permutations (the chosen page
//! size, the pinning, the reserved CPUs and the id stay on the object even when a
//! later permutation is the one returned). Callers that need nova's results must
//! therefore hand in the same mutable topology nova would: the filter a clone per
//! host shared by all candidates, consumption the request's own topology.

use super::host::{NetworkMetadata, NumaCell, NumaTopology};
use super::instance::{
    CpuPolicy, InstanceCell, InstanceTopology, Limits, ThreadPolicy, MEMPAGES_ANY, MEMPAGES_LARGE,
    MEMPAGES_SMALL,
};
use super::{NumaError, MAX_FIT_STEPS};
use crate::py::set::PySet;
use std::collections::{BTreeMap, BTreeSet};

/// `PciDeviceStats.support_requests(requests, provider_mapping, cells)` for the
/// chosen instance cells; `Err` where nova raises (the fit then raises too).
pub type PciSupportCheck<'a> = &'a dyn Fn(&[InstanceCell]) -> Result<bool, NumaError>;

/// What the fit needs to know about the host's PCI devices.
pub struct PciContext<'a> {
    /// `(numa_node, count)` of each pool of the host's `PciDeviceStats`, in pool
    /// order. `None` when the host has no stats object at all (nova: `pci_stats`
    /// None); an empty slice is an object without pools (still "truthy" in nova).
    pub pools: Option<&'a [(Option<i64>, i64)]>,
    /// When the request has PCI requests: `PciDeviceStats.support_requests` for the
    /// chosen instance cells (under the candidate's provider mapping).
    pub support_requests: Option<PciSupportCheck<'a>>,
}

impl PciContext<'_> {
    /// A host with an empty `PciDeviceStats` and a request without PCI devices.
    pub const NONE: PciContext<'static> = PciContext {
        pools: Some(&[]),
        support_requests: None,
    };
}

/// `numa_fit_instance_to_host`. `inst` is mutated as nova mutates it; the
/// returned topology holds copies of the chosen (mutated) cells.
pub fn numa_fit_instance_to_host(
    host: &NumaTopology,
    inst: &mut InstanceTopology,
    limits: Option<&Limits>,
    pack: bool,
    pci: &PciContext<'_>,
) -> Result<Option<InstanceTopology>, NumaError> {
    if !(host.is_truthy() && inst.is_truthy()) || host.cells.len() < inst.cells.len() {
        return Ok(None);
    }
    let emulator_threads_policy = inst.emulator_threads_policy.clone().flatten();
    let network_metadata = limits.and_then(|l| l.network_metadata.as_ref());

    let mut order: Vec<usize> = (0..host.cells.len()).collect();
    if host.cells.len() > inst.cells.len() {
        // Python's stable sorts, applied in sequence: the last one is the primary key.
        sort_by_key(&mut order, !pack, |i| host.cells[i].avail_memory());
        if matches!(inst.cells[0].cpu_policy, None | Some(CpuPolicy::Shared)) {
            sort_by_key(&mut order, pack, |i| host.cells[i].cpu_usage);
        } else {
            let mut free = Vec::with_capacity(host.cells.len());
            for c in &host.cells {
                free.push(c.free_pcpus()?.len() as i64);
            }
            sort_by_key(&mut order, !pack, |i| free[i]);
        }
        if let Some(pools) = pci.pools {
            let mut per_node: BTreeMap<Option<i64>, i64> = BTreeMap::new();
            for &(node, count) in pools {
                *per_node.entry(node).or_insert(0) += count;
            }
            let devices = |i: usize| per_node.get(&Some(host.cells[i].id)).copied().unwrap_or(0);
            sort_by_key(&mut order, pci.support_requests.is_some(), devices);
        }
    }

    // `itertools.permutations(host_cells, len(inst))` in lexicographic order, with
    // nova's caches keyed by (host cell id, *current* instance cell id): the fit
    // rewrites instance cell ids, so keys move as the walk goes on. Walked exactly
    // as nova does (no pruning), within a step budget.
    let k = inst.cells.len();
    let mut perm: Vec<usize> = (0..k).collect();
    let mut not_fit: BTreeSet<(i64, i64)> = BTreeSet::new();
    let mut fit: BTreeSet<(i64, i64)> = BTreeSet::new();
    let mut steps = 0usize;
    loop {
        let mut chosen = 0;
        for pos in 0..k {
            steps += 1;
            if steps > MAX_FIT_STEPS {
                return Err(NumaError::TooComplex);
            }
            let host_cell = &host.cells[order[perm[pos]]];
            let pair = (host_cell.id, inst.cells[pos].id);
            if not_fit.contains(&pair) {
                break;
            }
            if fit.contains(&pair) {
                inst.cells[pos].id = host_cell.id;
                chosen += 1;
                continue;
            }
            let reserved = usize::from(inst.emulator_threads_isolated() && chosen == 0);
            if numa_fit_instance_cell(host_cell, &mut inst.cells[pos], limits, reserved)? {
                fit.insert(pair);
                chosen += 1;
            } else {
                not_fit.insert(pair);
                break;
            }
        }
        if chosen == k {
            let chosen_cells: Vec<&NumaCell> =
                perm.iter().map(|&i| &host.cells[order[i]]).collect();
            if leaf_accepts(host, &chosen_cells, inst, network_metadata, pci)? {
                return Ok(Some(InstanceTopology {
                    cells: inst.cells.clone(),
                    emulator_threads_policy: Some(emulator_threads_policy),
                    instance_uuid: None,
                    id: None,
                }));
            }
        }
        if !next_permutation(&mut perm, order.len()) {
            return Ok(None);
        }
    }
}

/// Advances `perm` (distinct values below `n`) to the next k-permutation in
/// lexicographic order; false after the last one.
fn next_permutation(perm: &mut [usize], n: usize) -> bool {
    let k = perm.len();
    for i in (0..k).rev() {
        let prefix = &perm[..i];
        let next = (perm[i] + 1..n).find(|v| !prefix.contains(v));
        if let Some(v) = next {
            perm[i] = v;
            for j in i + 1..k {
                match (0..n).find(|v| !perm[..j].contains(v)) {
                    Some(v) => perm[j] = v,
                    None => return false,
                }
            }
            return true;
        }
    }
    false
}

/// `sorted(cells, key=..., reverse=...)` over indices: stable, and `reverse`
/// keeps equal elements in their original order, as Python's does.
fn sort_by_key<K: Ord, F: Fn(usize) -> K>(order: &mut [usize], reverse: bool, key: F) {
    if reverse {
        order.sort_by_key(|&a| std::cmp::Reverse(key(a)));
    } else {
        order.sort_by_key(|&a| key(a));
    }
}

/// The checks on a permutation whose cells all fit: PCI devices, network affinity.
fn leaf_accepts(
    host: &NumaTopology,
    chosen: &[&NumaCell],
    inst: &InstanceTopology,
    network_metadata: Option<&NetworkMetadata>,
    pci: &PciContext<'_>,
) -> Result<bool, NumaError> {
    if let (Some(check), Some(_)) = (pci.support_requests, pci.pools) {
        if !check(&inst.cells)? {
            return Ok(false);
        }
    }
    if let Some(nm) = network_metadata {
        if !cells_support_network_metadata(host, chosen, nm) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// `_numa_cells_support_network_metadata`.
pub fn cells_support_network_metadata(
    host: &NumaTopology,
    chosen: &[&NumaCell],
    nm: &NetworkMetadata,
) -> bool {
    let mut required: BTreeSet<String> = nm.physnets.clone().unwrap_or_default();
    let required_tunnel = nm.tunneled.unwrap_or(false);
    if !required.is_empty() {
        for cell in chosen {
            if let Some(cnm) = &cell.network_metadata {
                if let Some(p) = &cnm.physnets {
                    required.retain(|r| !p.contains(r));
                }
            }
        }
        for cell in &host.cells {
            if let Some(cnm) = &cell.network_metadata {
                let provides = cnm
                    .physnets
                    .as_ref()
                    .is_some_and(|p| required.iter().any(|r| p.contains(r)));
                if provides {
                    return false;
                }
            }
        }
    }
    if required_tunnel {
        let tunneled = |c: &NumaCell| {
            c.network_metadata
                .as_ref()
                .is_some_and(|m| m.tunneled.unwrap_or(false))
        };
        if chosen.iter().any(|c| tunneled(c)) {
            return true;
        }
        if host.cells.iter().any(tunneled) {
            return false;
        }
    }
    true
}

/// `_numa_fit_instance_cell`: `Ok(true)` when it fits (the cell then carries the
/// host cell id, and pinning for pinned policies).
pub fn numa_fit_instance_cell(
    host_cell: &NumaCell,
    cell: &mut InstanceCell,
    limits: Option<&Limits>,
    reserved: usize,
) -> Result<bool, NumaError> {
    let memory_kb = cell.memory.saturating_mul(1024);
    match cell.pagesize {
        Some(requested) if requested != 0 => {
            match supported_pagesize(host_cell, requested, memory_kb)? {
                Some(size) if size != 0 => cell.pagesize = Some(size),
                _ => return Ok(false),
            }
        }
        _ => {
            if !host_cell.mempages.is_empty() {
                let smallest = smallest_pagesize(host_cell).unwrap_or(0);
                check_page_size(smallest)?;
                let use_free = cell.is_pinned_policy();
                if host_cell.can_fit_pagesize(smallest, memory_kb, use_free) != Some(true) {
                    return Ok(false);
                }
            } else if cell.is_pinned_policy() {
                if host_cell.avail_memory() < cell.memory {
                    return Ok(false);
                }
            } else if host_cell.memory < cell.memory {
                return Ok(false);
            }
        }
    }

    if cell.is_pinned_policy() {
        let required = cell.pcpuset()?.len() + reserved;
        if required > host_cell.pcpuset()?.len() {
            return Ok(false);
        }
    }
    if cell.is_shared_policy() && cell.cpuset.len() > host_cell.cpuset.len() {
        return Ok(false);
    }
    if cell.is_pinned_policy() {
        let required = cell.pcpuset()?.len() + reserved;
        if required > host_cell.avail_pcpus()? {
            return Ok(false);
        }
        if !pack_instance_onto_cores(host_cell, cell, reserved)? {
            return Ok(false);
        }
        // nova tests the returned cell's truthiness: `len()` of a cell without
        // CPUs is 0, so such a cell "fails" (after being pinned and renumbered).
        if cell.cpuset.is_empty() && cell.pcpuset()?.is_empty() {
            return Ok(false);
        }
    }
    if let (true, Some(limits)) = (cell.is_shared_policy(), limits) {
        let cpu_usage = host_cell.cpu_usage.saturating_add(cell.cpuset.len() as i64);
        let cpu_limit = host_cell.cpuset.len() as f64 * limits.cpu_allocation_ratio;
        if (cpu_usage as f64) > cpu_limit {
            return Ok(false);
        }
        let ram_usage = host_cell.memory_usage.saturating_add(cell.memory);
        let ram_limit = host_cell.memory as f64 * limits.ram_allocation_ratio;
        if (ram_usage as f64) > ram_limit {
            return Ok(false);
        }
    }
    cell.id = host_cell.id;
    Ok(true)
}

fn check_page_size(size: i64) -> Result<(), NumaError> {
    if size == 0 {
        return Err(NumaError::ZeroPageSize);
    }
    Ok(())
}

/// `_get_smallest_pagesize`.
pub fn smallest_pagesize(host_cell: &NumaCell) -> Option<i64> {
    host_cell.mempages.iter().map(|p| p.size_kb).min()
}

/// `_numa_cell_supports_pagesize_request`: the first size (largest first) that
/// fits; `None` when none does or the explicit size is not on the host.
fn supported_pagesize(
    host_cell: &NumaCell,
    requested: i64,
    memory_kb: i64,
) -> Result<Option<i64>, NumaError> {
    let mut sizes: Vec<i64> = host_cell.mempages.iter().map(|p| p.size_kb).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let candidates: Vec<i64> = match requested {
        MEMPAGES_SMALL => sizes.last().copied().into_iter().collect(),
        MEMPAGES_LARGE => sizes[..sizes.len().saturating_sub(1)].to_vec(),
        MEMPAGES_ANY => sizes,
        explicit => vec![explicit],
    };
    for size in candidates {
        check_page_size(size)?;
        match host_cell.can_fit_pagesize(size, memory_kb, true) {
            Some(true) => return Ok(Some(size)),
            Some(false) => {}
            // MemoryPageSizeNotSupported: nova counts the pair as not fitting.
            None => return Ok(None),
        }
    }
    Ok(None)
}

/// `_get_pinning`: the first `threads` CPUs (in set order) of each set, zipped
/// with the sorted vCPUs. `None` when there are too few.
fn get_pinning(threads: usize, sets: &[&PySet], vcpus: &BTreeSet<i64>) -> Option<Vec<(i64, i64)>> {
    if threads.saturating_mul(sets.len()) < vcpus.len() {
        return None;
    }
    let pcpus = sets.iter().flat_map(|s| s.iter().take(threads));
    Some(vcpus.iter().copied().zip(pcpus).collect())
}

/// `_get_reserved`: the first `num` CPUs left over once the pinned ones (or, for
/// `isolate`, their whole sibling sets) are taken out. Mirrors Python's list
/// mutation while iterating (a removed set makes the loop skip the next one).
fn get_reserved(
    sets: &[&PySet],
    pinning: Option<&[(i64, i64)]>,
    num: usize,
    isolate: bool,
) -> Option<PySet> {
    let pinning = pinning.filter(|p| !p.is_empty())?;
    if num == 0 {
        return None;
    }
    let mut usable: Vec<Vec<i64>> = sets.iter().map(|s| s.to_vec()).collect();
    for &(_, pcpu) in pinning {
        let mut i = 0;
        while i < usable.len() {
            if usable[i].contains(&pcpu) {
                if isolate {
                    let first_equal = usable.iter().position(|s| *s == usable[i]).unwrap_or(i);
                    usable.remove(first_equal);
                } else if let Some(j) = usable[i].iter().position(|&c| c == pcpu) {
                    usable[i].remove(j);
                }
            }
            i += 1;
        }
    }
    let reserved: PySet = usable.iter().flatten().copied().take(num).collect();
    if reserved.is_empty() {
        None
    } else {
        Some(reserved)
    }
}

/// `_pack_instance_onto_cores`: `Ok(true)` when pinned (the cell then carries
/// the pinning, the host cell id and the reserved CPUs).
fn pack_instance_onto_cores(
    host_cell: &NumaCell,
    cell: &mut InstanceCell,
    reserved: usize,
) -> Result<bool, NumaError> {
    let threads_per_core = host_cell
        .siblings
        .iter()
        .map(PySet::len)
        .max()
        .ok_or(NumaError::NoSiblings(host_cell.id))?
        .max(1);
    let free_siblings = host_cell.free_siblings()?;
    // sibling_sets[k]: free sibling sets with at least k free CPUs, in siblings order.
    let mut sibling_sets: BTreeMap<usize, Vec<&PySet>> = BTreeMap::new();
    for sib in &free_siblings {
        for k in 1..=sib.len() {
            sibling_sets.entry(k).or_default().push(sib);
        }
    }
    let vcpus = cell.pcpuset()?.clone();
    let policy = cell.cpu_thread_policy;
    let empty: Vec<&PySet> = Vec::new();
    let ones = sibling_sets.get(&1).unwrap_or(&empty).clone();

    let (pinning, cpuset_reserved) = if policy == Some(ThreadPolicy::Isolate) {
        let Some(full) = sibling_sets.get(&threads_per_core) else {
            return Ok(false);
        };
        if threads_per_core != 1 && host_cell.pcpuset()? != &host_cell.cpuset {
            return Ok(false);
        }
        let pinning = get_pinning(1, full, &vcpus);
        let res = get_reserved(&ones, pinning.as_deref(), reserved, true);
        if pinning.as_ref().is_none_or(|p| p.is_empty()) || (reserved > 0 && res.is_none()) {
            (None, None)
        } else {
            (pinning, res)
        }
    } else {
        if policy == Some(ThreadPolicy::Require) && threads_per_core <= 1 {
            return Ok(false);
        }
        let mut threads_no = 1;
        let mut pinning = None;
        let mut res = None;
        for (&k, sets) in sibling_sets.iter().rev() {
            threads_no = k;
            if policy == Some(ThreadPolicy::Require) && k <= 1 {
                continue;
            }
            pinning = get_pinning(k, sets, &vcpus);
            res = get_reserved(&ones, pinning.as_deref(), reserved, false);
            if pinning.is_none() || (reserved > 0 && res.is_none()) {
                continue;
            }
            break;
        }
        if policy != Some(ThreadPolicy::Require) && pinning.as_ref().is_none_or(|p| p.is_empty()) {
            // Linear fallback: every free CPU as its own core.
            let singles: Vec<PySet> = ones
                .iter()
                .flat_map(|s| s.iter())
                .map(|c| std::iter::once(c).collect())
                .collect();
            let refs: Vec<&PySet> = singles.iter().collect();
            pinning = get_pinning(threads_no, &refs, &vcpus);
            res = get_reserved(&refs, pinning.as_deref(), reserved, false);
        }
        (pinning, res)
    };
    let Some(pinning) = pinning else {
        return Ok(false);
    };
    if reserved > 0 && cpuset_reserved.is_none() {
        return Ok(false);
    }
    cell.pin_vcpus(&pinning);
    cell.id = host_cell.id;
    cell.cpuset_reserved = cpuset_reserved.map(|s| s.coerced());
    Ok(true)
}

#[cfg(test)]
mod tests;
