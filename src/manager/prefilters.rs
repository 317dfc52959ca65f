// SPDX-License-Identifier: Apache-2.0
//! nova's request filters (`request_filter.py`) that run before the Placement query.
//!
//! Implemented (in nova's order): `map_az_to_placement_aggregate`,
//! `compute_status_filter`, `owner_nova_filter`. The ones behind options that default
//! to off (tenant isolation, image type, isolated aggregates, image metadata, routed
//! networks) and the flavor/image/port driven ones (accelerators, packed virtqueue,
//! remote-managed ports, ephemeral encryption, virtio sound, TPM secret security)
//! belong to the Placement-fidelity work and are not applied yet.

use crate::model::{Destination, RequestSpec};
use crate::state::HostStateStore;
use tracing::{debug, warn};

/// nova 34's minimum compute service version for the `OWNER_NOVA` trait.
const OWNER_NOVA_MIN_COMPUTE_VERSION: i64 = 73;

/// Runs the prefilters on the request. An error is the NoValidHost reason.
pub async fn process(spec: &mut RequestSpec, store: &HostStateStore) -> Result<(), String> {
    map_az_to_placement_aggregate(spec, store).await?;
    // compute_status_filter: never land on a compute whose provider is disabled.
    spec.request_level_params
        .root_forbidden
        .insert("COMPUTE_STATUS_DISABLED".into());
    owner_nova_filter(spec, store).await;
    Ok(())
}

async fn map_az_to_placement_aggregate(
    spec: &mut RequestSpec,
    store: &HostStateStore,
) -> Result<(), String> {
    let Some(az) = spec.availability_zone.clone().filter(|az| !az.is_empty()) else {
        return Ok(());
    };
    let uuids = store.aggregate_uuids_for_az(&az).await.map_err(|e| {
        warn!(error = %e, "could not map the availability zone to aggregates");
        format!("Scheduling failed: could not read aggregates for availability zone {az}")
    })?;
    if uuids.is_empty() {
        // nova adds nothing when no aggregate carries the AZ.
        return Ok(());
    }
    debug!(az = %az, aggregates = ?uuids, "requiring aggregates for the availability zone");
    let dest = spec
        .requested_destination
        .get_or_insert_with(Destination::default);
    dest.aggregates.push(uuids.join(","));
    Ok(())
}

async fn owner_nova_filter(spec: &mut RequestSpec, store: &HostStateStore) {
    if spec
        .request_level_params
        .root_required
        .contains("OWNER_NOVA")
    {
        return;
    }
    match store.min_compute_service_version().await {
        Some(v) if v >= OWNER_NOVA_MIN_COMPUTE_VERSION => {
            spec.request_level_params
                .root_required
                .insert("OWNER_NOVA".into());
        }
        other => {
            warn!(min_version = ?other, "not every nova-compute reports OWNER_NOVA yet; not requiring it")
        }
    }
}
