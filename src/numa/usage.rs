// SPDX-License-Identifier: Apache-2.0
//! nova's `hardware.numa_usage_from_instance_numa` (the virtual consumption of a
//! fitted instance on a host topology) and the `NUMACell.pin_cpus*` it calls.

use super::fit::smallest_pagesize;
use super::host::{NumaCell, NumaTopology, PagesTopology};
use super::instance::{CpuPolicy, InstanceTopology, ThreadPolicy};
use super::NumaError;
use crate::py::set::PySet;

/// `numa_usage_from_instance_numa(host, instance, free=False)`: a new host
/// topology with the instance's memory, pages, shared-CPU usage and pinned CPUs
/// added. Errors are the exceptions nova raises there (which its consumption
/// logs and swallows, leaving the host topology as it was).
pub fn numa_usage_from_instance(
    host: &NumaTopology,
    inst: &InstanceTopology,
) -> Result<NumaTopology, NumaError> {
    if !host.is_truthy() || !inst.is_truthy() {
        return Ok(host.clone());
    }
    let mut cells = Vec::with_capacity(host.cells.len());
    for host_cell in &host.cells {
        let mut memory_usage = host_cell.memory_usage;
        let mut shared_usage = host_cell.cpu_usage;
        // The NUMACell(...) constructor coerces (copies by iteration) every set.
        let mut cell = NumaCell {
            id: host_cell.id,
            cpuset: host_cell.cpuset.coerced(),
            pcpuset: Some(host_cell.pcpuset()?.coerced()),
            memory: host_cell.memory,
            socket: Some(
                host_cell
                    .socket
                    .ok_or(NumaError::FieldNotSet("NUMACell.socket"))?,
            ),
            cpu_usage: 0,
            memory_usage: 0,
            mempages: host_cell.mempages.clone(),
            pinned_cpus: host_cell.pinned_cpus.coerced(),
            siblings: host_cell.siblings.iter().map(PySet::coerced).collect(),
            network_metadata: host_cell.network_metadata.clone(),
        };
        for inst_cell in inst.cells.iter().filter(|c| c.id == host_cell.id) {
            let pagesize = match inst_cell.pagesize {
                Some(p) if p != 0 => p,
                _ => smallest_pagesize(&cell).ok_or(NumaError::NoPages(cell.id))?,
            };
            cell.mempages = cell
                .mempages
                .iter()
                .map(|pages| {
                    if pages.size_kb != pagesize {
                        return Ok(pages.clone());
                    }
                    if pages.size_kb == 0 {
                        return Err(NumaError::ZeroPageSize);
                    }
                    // Python: max(0, used + memory * 1024 / size_kb), a float that
                    // IntegerField truncates.
                    let used = pages.used as f64
                        + (inst_cell.memory as f64 * 1024.0) / pages.size_kb as f64;
                    Ok(PagesTopology {
                        size_kb: pages.size_kb,
                        total: pages.total,
                        used: if used > 0.0 { used.trunc() as i64 } else { 0 },
                        reserved: Some(pages.reserved.unwrap_or(0)),
                    })
                })
                .collect::<Result<_, _>>()?;
            memory_usage = memory_usage.saturating_add(inst_cell.memory);
            shared_usage = shared_usage.saturating_add(inst_cell.cpuset.len() as i64);
            if matches!(inst_cell.cpu_policy, None | Some(CpuPolicy::Shared)) {
                continue;
            }
            let mut pinned: PySet = match &inst_cell.cpu_pinning {
                Some(pairs) if !pairs.is_empty() => pairs.iter().map(|&(_, p)| p).collect(),
                _ => PySet::new(),
            };
            if let Some(reserved) = inst_cell.cpuset_reserved.as_ref().filter(|r| !r.is_empty()) {
                pinned.merge(reserved);
            }
            if inst_cell.cpu_thread_policy == Some(ThreadPolicy::Isolate) {
                pin_cpus_with_siblings(&mut cell, &pinned)?;
            } else {
                pin_cpus(&mut cell, &pinned)?;
            }
        }
        cell.memory_usage = memory_usage.max(0);
        cell.cpu_usage = shared_usage.max(0);
        cells.push(cell);
    }
    Ok(NumaTopology { cells })
}

/// `NUMACell.pin_cpus`.
pub fn pin_cpus(cell: &mut NumaCell, cpus: &PySet) -> Result<(), NumaError> {
    let pcpuset = cell.pcpuset()?;
    if !cpus.difference(pcpuset).is_empty() {
        return Err(NumaError::PinningUnknown {
            requested: cpus.sorted(),
            available: pcpuset.sorted(),
        });
    }
    if !cell.pinned_cpus.is_disjoint(cpus) {
        return Err(NumaError::PinningInvalid {
            requested: cpus.sorted(),
            available: pcpuset.difference(&cell.pinned_cpus).sorted(),
        });
    }
    // `self.pinned_cpus |= cpus` (CoercedSet.__ior__ merges a set rebuilt from
    // `cpus`), then the field assignment coerces.
    let mut merged = std::mem::take(&mut cell.pinned_cpus);
    merged.merge(&cpus.iter().collect());
    cell.pinned_cpus = merged.coerced();
    Ok(())
}

/// `NUMACell.pin_cpus_with_siblings`: pins every sibling set touching `cpus`.
pub fn pin_cpus_with_siblings(cell: &mut NumaCell, cpus: &PySet) -> Result<(), NumaError> {
    let mut with_siblings = PySet::new();
    for sib in &cell.siblings {
        if !cpus.intersection(sib).is_empty() {
            with_siblings.merge(sib);
        }
    }
    pin_cpus(cell, &with_siblings)
}
