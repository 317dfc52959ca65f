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

/// The PCI step of nova's `HostState.consume_from_request` (without an instance NUMA
/// topology: devices are taken with no NUMA cells, as nova does when the instance has
/// none). Returns false when nova's step raises; nova then swallows the exception and
/// leaves the rest of the consume (`num_io_ops`, `updated`) undone, with the requests
/// applied before the failing one still consumed.
pub fn consume_from_request(host: &mut HostState, spec: &RequestSpec) -> bool {
    let requests = match spec.pci_requests.as_ref().map(request::from_primitive) {
        None | Some(Ok(None)) => return true,
        Some(Ok(Some(requests))) => requests,
        Some(Err(_)) => return false,
    };
    if requests.is_empty() {
        return true;
    }
    let mapping = request_group_mapping(spec);
    let stats = host
        .pci
        .get_or_insert_with(|| Arc::new(PciStats::from_raw(host.pci_stats.as_deref())));
    Arc::make_mut(stats)
        .apply_requests(&requests, Some(&mapping), None)
        .is_ok()
}
