// SPDX-License-Identifier: Apache-2.0
//! nova's PCI passthrough bookkeeping as the scheduler sees it: device pools parsed
//! once from `compute_nodes.pci_stats`, the instance's PCI requests (from the wire or
//! from a flavor's `pci_passthrough:alias` with the `[pci] alias` option), and
//! `PciDeviceStats.support_requests` / `apply_requests`. Pure: no I/O.

pub mod alias;
pub mod pools;
pub mod request;
pub mod stats;

pub use alias::{parse_aliases, requests_from_flavor, Alias, AliasError, Aliases};
pub use pools::{PciStats, PciValue, Pool};
pub use request::{PciRequest, PciRequestError};
pub use stats::{NumaContext, PciApplyError, ProviderMapping};

use crate::numa::{InstanceCell, NumaError, NumaTopology};

/// What `_filter_pools_for_numa_cells` sees when `numa_fit_instance_to_host` hands
/// it the chosen instance cells: their ids (host cell ids by then) and, for the
/// `socket` policy, the host's cells with their socket. nova reads `cell.socket`
/// in `any(cell.socket is None ...)`: a cell whose socket field is unset (a pre-1.5
/// primitive) raises there unless an earlier cell's socket is None, which ends
/// the `any` first; the raise is given as `host_cells: None`, which the socket
/// policy reports as raised.
pub fn numa_context(host: &NumaTopology, cells: &[InstanceCell]) -> NumaContext {
    let mut host_cells = Vec::with_capacity(host.cells.len());
    let mut raises = false;
    let mut seen_none = false;
    for cell in &host.cells {
        match cell.socket {
            None if !seen_none => raises = true,
            None => host_cells.push((cell.id, None)),
            Some(socket) => {
                seen_none |= socket.is_none();
                host_cells.push((cell.id, socket));
            }
        }
        if raises {
            break;
        }
    }
    NumaContext {
        cell_ids: cells.iter().map(|c| c.id).collect(),
        host_cells: (!raises).then_some(host_cells),
    }
}

/// Budget of pool × spec comparisons the PCI checks of one NUMA fit may spend
/// (each permutation that fits runs one); far above real requests (a few requests
/// with a spec or two over a few pools: tens per check), it bounds hostile ones.
pub const MAX_NUMA_PCI_WORK: usize = 2_000_000;

/// `pci_stats.support_requests(pci_requests, provider_mapping, chosen_instance_cells)`
/// as `numa_fit_instance_to_host` calls it, once per fitting permutation; `Err`
/// where nova raises, and [`NumaError::TooComplex`] once the checks of this fit
/// have spent [`MAX_NUMA_PCI_WORK`].
pub struct NumaPciCheck<'a> {
    pub stats: &'a PciStats,
    pub requests: &'a [PciRequest],
    pub mapping: Option<&'a ProviderMapping>,
    pub host: &'a NumaTopology,
    spent: std::cell::Cell<usize>,
}

impl<'a> NumaPciCheck<'a> {
    pub fn new(
        stats: &'a PciStats,
        requests: &'a [PciRequest],
        mapping: Option<&'a ProviderMapping>,
        host: &'a NumaTopology,
    ) -> Self {
        NumaPciCheck {
            stats,
            requests,
            mapping,
            host,
            spent: std::cell::Cell::new(0),
        }
    }

    pub fn check(&self, cells: &[InstanceCell]) -> Result<bool, NumaError> {
        let per_pool: usize = self.requests.iter().map(|r| r.spec.len() + 1).sum();
        let cost = per_pool.saturating_mul(self.stats.pools.len() + 1);
        let spent = self.spent.get().saturating_add(cost);
        self.spent.set(spent);
        if spent > MAX_NUMA_PCI_WORK {
            return Err(NumaError::TooComplex);
        }
        self.stats
            .support_requests(
                self.requests,
                self.mapping,
                Some(&numa_context(self.host, cells)),
            )
            .map_err(|e| NumaError::Pci(e.to_string()))
    }
}
