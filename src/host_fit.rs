// SPDX-License-Identifier: Apache-2.0
//! How a request meets a host's NUMA cells and PCI pools: the views of a
//! [`HostState`] and a [`RequestSpec`] that NUMATopologyFilter, PciPassthroughFilter
//! and nova's `HostState.consume_from_request` share, and that request's NUMA and
//! PCI steps. Above `model`, `numa` and `pci`, which know nothing of one another's
//! types beyond what they hold; pure: no I/O.

use crate::model::{HostState, RequestSpec};
use crate::numa::{InstanceCell, NumaError};
use crate::pci::{
    numa_context, NumaContext, NumaPciCheck, PciRequest, PciRequestError, PciStats, ProviderMapping,
};
use serde_json::Value;
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
    match spec
        .pci_requests
        .as_ref()
        .map(crate::pci::request::from_primitive)
    {
        None | Some(Ok(None)) => Ok(None),
        Some(Ok(Some(requests))) if requests.is_empty() => Ok(None),
        Some(Ok(Some(requests))) => Ok(Some(requests)),
        Some(Err(e)) => Err(e),
    }
}

/// `consume_from_request`'s NUMA step: fit the request's topology (with the
/// limits NUMATopologyFilter left on this host, if any, and the request's PCI
/// requests against the host's current pools under the request groups' provider
/// mapping), write the fitted topology back into the request (`None` when it no
/// longer fits) and add its usage to the host. `Err` is where nova raises (it
/// then skips the rest of the consumption); the request's topology is already
/// replaced by then.
pub fn consume_numa(
    host: &mut HostState,
    spec_numa: &mut Option<Value>,
    pci_requests: Option<&[PciRequest]>,
    mapping: &ProviderMapping,
    pack: bool,
) -> Result<(), NumaError> {
    use crate::numa::fit::PciSupportCheck;
    use crate::numa::{
        numa_fit_instance_to_host, numa_usage_from_instance, InstanceCell, InstanceTopology,
        Limits, PciContext,
    };
    let Some(host_topology) = host.numa.get(host.numa_topology.as_deref())? else {
        return Ok(());
    };
    let Some(raw) = spec_numa.as_ref() else {
        return Ok(());
    };
    let mut requested = InstanceTopology::from_primitive(raw)?;
    if !host_topology.is_truthy() || !requested.is_truthy() {
        return Ok(());
    }
    let limits = host
        .limits
        .get("numa_topology")
        .map(Limits::from_primitive)
        .transpose()?;
    let stats = host_pools(host);
    let pools = stats.numa_counts();
    let numa_pci = pci_requests
        .map(|requests| NumaPciCheck::new(&stats, requests, Some(mapping), &host_topology));
    let check = |cells: &[InstanceCell]| numa_pci.as_ref().map_or(Ok(true), |c| c.check(cells));
    let pci = PciContext {
        pools: Some(&pools),
        support_requests: numa_pci.is_some().then_some(&check as PciSupportCheck<'_>),
    };
    let fitted = match numa_fit_instance_to_host(
        &host_topology,
        &mut requested,
        limits.as_ref(),
        pack,
        &pci,
    ) {
        Ok(f) => f,
        Err(e) => {
            // nova's fit mutates the request's cells in place before raising.
            *spec_numa = Some(requested.to_primitive());
            return Err(e);
        }
    };
    *spec_numa = fitted.as_ref().map(InstanceTopology::to_primitive);
    if let Some(fitted) = fitted {
        let used = numa_usage_from_instance(&host_topology, &fitted)?;
        host.numa.set(used);
    }
    Ok(())
}

/// The PCI step of nova's `HostState.consume_from_request`: the requests are applied
/// under the request groups' provider mapping and, when the instance has a (fitted)
/// NUMA topology, with its cells (`instance_cells`), as nova does. Returns false when
/// nova's step raises; nova then swallows the exception and leaves the rest of the
/// consume (`num_io_ops`, `updated`) undone, with the requests applied before the
/// failing one still consumed.
pub fn consume_pci(
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
