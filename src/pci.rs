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

use crate::model::{HostState, RequestSpec};
use crate::numa::{InstanceCell, NumaError, NumaTopology};
use std::borrow::Cow;
use std::sync::Arc;

/// The host's pools: the parsed cache when the loader filled it, else parsed now
/// from the raw column (nova builds a `PciDeviceStats` for every host; no column
/// means no pools).
pub fn host_pools(host: &HostState) -> Cow<'_, PciStats> {
    match &host.pci {
        Some(stats) => Cow::Borrowed(stats.as_ref()),
        None => Cow::Owned(PciStats::from_raw(host.pci_stats.as_deref())),
    }
}

/// nova's `RequestSpec.get_request_group_mapping()`: requester id → provider uuids of
/// the request groups (a later group with the same requester replaces the earlier).
pub fn request_group_mapping(spec: &RequestSpec) -> ProviderMapping {
    let mut mapping = ProviderMapping::default();
    for group in &spec.requested_resources {
        mapping.insert(group.requester_id.clone(), group.provider_uuids.clone());
    }
    mapping
}

/// The request's PCI requests when it has any (nova: `pci_requests.requests`, falsy
/// when None or empty); `Err` when they cannot be decoded.
pub fn spec_requests(spec: &RequestSpec) -> Result<Option<Vec<PciRequest>>, PciRequestError> {
    match spec.pci_requests.as_ref().map(request::from_primitive) {
        None | Some(Ok(None)) => Ok(None),
        Some(Ok(Some(requests))) if requests.is_empty() => Ok(None),
        Some(Ok(Some(requests))) => Ok(Some(requests)),
        Some(Err(e)) => Err(e),
    }
}

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

/// The PCI step of nova's `HostState.consume_from_request`: the requests are applied
/// under the request groups' provider mapping and, when the instance has a (fitted)
/// NUMA topology, with its cells (`instance_cells`), as nova does. Returns false when
/// nova's step raises; nova then swallows the exception and leaves the rest of the
/// consume (`num_io_ops`, `updated`) undone, with the requests applied before the
/// failing one still consumed.
pub fn consume_from_request(
    host: &mut HostState,
    spec: &RequestSpec,
    instance_cells: Option<&[InstanceCell]>,
) -> bool {
    let requests = match spec_requests(spec) {
        Ok(None) => return true,
        Ok(Some(requests)) => requests,
        Err(_) => return false,
    };
    let numa = match instance_cells {
        None => None,
        Some(cells) => match host.numa.get(host.numa_topology.as_deref()) {
            Ok(Some(topology)) => Some(numa_context(&topology, cells)),
            // nova's pci_stats holds the host topology it was built with; none
            // there and the `socket` policy raises (host_cells None says so).
            Ok(None) => Some(NumaContext {
                cell_ids: cells.iter().map(|c| c.id).collect(),
                host_cells: None,
            }),
            Err(_) => return false,
        },
    };
    let mapping = request_group_mapping(spec);
    let stats = host
        .pci
        .get_or_insert_with(|| Arc::new(PciStats::from_raw(host.pci_stats.as_deref())));
    Arc::make_mut(stats)
        .apply_requests(&requests, Some(&mapping), numa.as_ref())
        .is_ok()
}
