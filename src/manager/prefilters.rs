// SPDX-License-Identifier: Apache-2.0
//! Everything nova's manager does before it has allocation candidates:
//! the request filters of `request_filter.py` in nova's order
//! ([`process`]), then the Placement question(s) ([`allocation_candidates`]):
//! `resources_from_request_spec` with the target-node lookup, `GET
//! /allocation_candidates`, and for `hw:cpu_policy=dedicated` the second, VCPU
//! question whose answer is merged into the first.
//!
//! Request filters, with the option that enables each (nova's defaults):
//!  1. `require_tenant_aggregate` — `[scheduler] limit_tenants_to_placement_aggregate`
//!     (False), `placement_aggregate_required_for_tenants` (False); API DB
//!  2. `map_az_to_placement_aggregate` — always; API DB
//!  3. `require_image_type_support` — `query_placement_for_image_type_support` (False)
//!  4. `compute_status_filter` — always
//!  5. `isolate_aggregates` — `enable_isolated_aggregate_filtering` (False); API DB
//!  6. `transform_image_metadata` — `image_metadata_prefilter` (False)
//!  7. `accelerators_filter`, 8. `packed_virtqueue_filter` — always
//!  9. `routed_networks_filter` — `query_placement_for_routed_network_aggregates`
//!     (False). Needs Neutron, which this daemon does not talk to: enabling it is
//!     refused at startup ([`PrefilterOptions::check`]).
//! 10. `remote_managed_ports_filter` — always, but asks Neutron about each requested
//!     port. Not done here: a request with ports gets a warning and no
//!     `COMPUTE_REMOTE_MANAGED_PORTS` (nova adds it for remote-managed ports).
//! 11. `ephemeral_encryption_filter`, 12. `virtio_sound_filter`,
//!     13. `tpm_secret_security_filter` — always
//! 14. `owner_nova_filter` — always, once every nova-compute is at version ≥ 73.

use crate::model::{Destination, RequestSpec};
use crate::placement::index::LiveIndex;
use crate::placement::request_filters::{self, RequestFailure};
use crate::placement::{
    destination_target, resources_from_request_spec, AllocationCandidates, PlacementClient,
    PlacementError, QueryOptions, RequestError, ResourceRequest, TargetNode,
};
use crate::state::HostStateStore;
use sqlx::Row;
use std::collections::BTreeSet;
use tracing::{debug, info, warn};

/// nova 34's minimum compute service version for the `OWNER_NOVA` trait.
const OWNER_NOVA_MIN_COMPUTE_VERSION: i64 = 73;
/// nova's `TENANT_METADATA_KEY`.
const TENANT_METADATA_KEY: &str = "filter_tenant_id";

/// The `[scheduler]` / `[workarounds]` options of the request filters and queries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PrefilterOptions {
    pub limit_tenants_to_placement_aggregate: bool,
    pub placement_aggregate_required_for_tenants: bool,
    pub query_placement_for_image_type_support: bool,
    pub enable_isolated_aggregate_filtering: bool,
    pub image_metadata_prefilter: bool,
    pub query_placement_for_routed_network_aggregates: bool,
    /// `[workarounds] disable_fallback_pcpu_query`.
    pub disable_fallback_pcpu_query: bool,
}

impl PrefilterOptions {
    /// Options this daemon cannot honour: refused at startup rather than deciding
    /// differently from nova.
    pub fn check(&self) -> Result<(), String> {
        if self.query_placement_for_routed_network_aggregates {
            return Err(
                "[scheduler] query_placement_for_routed_network_aggregates = True needs \
                        Neutron segment lookups, which nova-scheduler-rs does not do; run \
                        nova-scheduler for routed networks"
                    .into(),
            );
        }
        Ok(())
    }
}

/// Why the request stops before the filters run.
#[derive(Debug, thiserror::Error)]
pub enum PrefilterError {
    /// Answered as nova's `NoValidHost(reason)`.
    #[error("No valid host was found. {0}")]
    NoValidHost(String),
    /// A nova exception that fails the call as it is (class, text, code).
    #[error("{0}")]
    Nova(RequestError),
    /// The API database did not answer (nova would raise the DB error).
    #[error("{0}")]
    Database(String),
}

impl From<RequestFailure> for PrefilterError {
    fn from(f: RequestFailure) -> Self {
        match f {
            RequestFailure::Filter(_) => PrefilterError::NoValidHost(f.to_string()),
            RequestFailure::Error(e) => e.into(),
        }
    }
}

impl From<RequestError> for PrefilterError {
    fn from(e: RequestError) -> Self {
        if e.class == "NoValidHost" {
            let reason = e
                .message
                .strip_prefix("No valid host was found. ")
                .unwrap_or(&e.message)
                .to_string();
            PrefilterError::NoValidHost(reason)
        } else {
            PrefilterError::Nova(e)
        }
    }
}

fn db_error(what: &str, e: impl std::fmt::Display) -> PrefilterError {
    warn!(error = %e, "{what}");
    PrefilterError::Database(format!("{what}: {e}"))
}

/// nova's `process_reqspec`: every request filter, in order, on the spec.
pub async fn process(
    spec: &mut RequestSpec,
    store: &HostStateStore,
    opts: &PrefilterOptions,
) -> Result<(), PrefilterError> {
    require_tenant_aggregate(spec, store, opts).await?;
    map_az_to_placement_aggregate(spec, store).await?;
    request_filters::require_image_type_support(spec, opts.query_placement_for_image_type_support);
    request_filters::compute_status_filter(spec);
    isolate_aggregates(spec, store, opts).await?;
    request_filters::transform_image_metadata(spec, opts.image_metadata_prefilter);
    request_filters::accelerators_filter(spec);
    request_filters::packed_virtqueue_filter(spec)?;
    // routed_networks_filter: refused at startup when enabled (PrefilterOptions::check).
    remote_managed_ports_filter(spec);
    request_filters::ephemeral_encryption_filter(spec)?;
    request_filters::virtio_sound_filter(spec)?;
    request_filters::tpm_secret_security_filter(spec)?;
    owner_nova_filter(spec, store).await;
    Ok(())
}

fn destination(spec: &mut RequestSpec) -> &mut Destination {
    spec.requested_destination
        .get_or_insert_with(Destination::default)
}

/// `require_tenant_aggregate`: aggregates with a `filter_tenant_id*` metadata row
/// whose value is the project (nova's `AggregateList.get_by_metadata(value=...)`
/// loads only the matching rows, then tests the key prefix in Python).
pub async fn require_tenant_aggregate(
    spec: &mut RequestSpec,
    store: &HostStateStore,
    opts: &PrefilterOptions,
) -> Result<(), PrefilterError> {
    if !opts.limit_tenants_to_placement_aggregate {
        return Ok(());
    }
    let project = spec.project_id.clone().unwrap_or_default();
    let rows = sqlx::query(
        "SELECT a.uuid, m.`key` FROM aggregates a \
         JOIN aggregate_metadata m ON m.aggregate_id = a.id WHERE m.value = ?",
    )
    .bind(&project)
    .fetch_all(store.api_pool())
    .await
    .map_err(|e| db_error("could not read tenant aggregates", e))?;
    let mut uuids = BTreeSet::new();
    for row in rows {
        let key: String = row.try_get("key").unwrap_or_default();
        if key.starts_with(TENANT_METADATA_KEY) {
            let uuid: Option<String> = row.try_get("uuid").unwrap_or_default();
            uuids.insert(uuid.unwrap_or_default());
        }
    }
    if !uuids.is_empty() {
        debug!(aggregates = ?uuids, project = %project, "require_tenant_aggregate request filter added aggregates");
        let joined = uuids.into_iter().collect::<Vec<_>>().join(",");
        destination(spec).aggregates.push(joined);
    } else if opts.placement_aggregate_required_for_tenants {
        warn!(tenant = %project, "Tenant has no available aggregates");
        return Err(PrefilterError::NoValidHost(
            "Scheduling failed: No hosts available for tenant".into(),
        ));
    }
    Ok(())
}

/// `map_az_to_placement_aggregate`: nothing added when no aggregate has the AZ.
pub async fn map_az_to_placement_aggregate(
    spec: &mut RequestSpec,
    store: &HostStateStore,
) -> Result<(), PrefilterError> {
    let Some(az) = spec.availability_zone.clone().filter(|az| !az.is_empty()) else {
        return Ok(());
    };
    let uuids = store
        .aggregate_uuids_for_az(&az)
        .await
        .map_err(|e| db_error("could not map the availability zone to aggregates", e))?;
    if uuids.is_empty() {
        return Ok(());
    }
    debug!(az = %az, aggregates = ?uuids, "map_az_to_placement_aggregate request filter added aggregates");
    destination(spec).aggregates.push(uuids.join(","));
    Ok(())
}

/// `isolate_aggregates`: forbid aggregates that require (`trait:<T>=required`) a
/// trait the request does not ask for (`AggregateList.get_non_matching_by_metadata_keys`).
pub async fn isolate_aggregates(
    spec: &mut RequestSpec,
    store: &HostStateStore,
    opts: &PrefilterOptions,
) -> Result<(), PrefilterError> {
    if !opts.enable_isolated_aggregate_filtering {
        return Ok(());
    }
    let required = ResourceRequest::from_request_spec(spec, true, &QueryOptions::default())?
        .all_required_traits();
    let keys: Vec<String> = required.iter().map(|t| format!("trait:{t}")).collect();
    let mut sql = String::from(
        "SELECT DISTINCT a.id, a.uuid FROM aggregates a \
         JOIN aggregate_metadata m ON m.aggregate_id = a.id \
         WHERE m.value = 'required' AND m.`key` LIKE 'trait:%'",
    );
    if !keys.is_empty() {
        sql.push_str(" AND m.`key` NOT IN (");
        sql.push_str(&vec!["?"; keys.len()].join(","));
        sql.push(')');
    }
    // Only `?` placeholders are added to the text; the keys are bound.
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for k in &keys {
        query = query.bind(k);
    }
    let rows = query
        .fetch_all(store.api_pool())
        .await
        .map_err(|e| db_error("could not read isolated aggregates", e))?;
    let uuids: BTreeSet<String> = rows
        .iter()
        .map(|r| {
            r.try_get::<Option<String>, _>("uuid")
                .ok()
                .flatten()
                .unwrap_or_default()
        })
        .collect();
    if !uuids.is_empty() {
        debug!(aggregates = ?uuids, "isolate_aggregates forbids aggregates");
        destination(spec).forbidden_aggregates.extend(uuids);
    }
    Ok(())
}

/// `remote_managed_ports_filter` needs Neutron (`is_remote_managed_port`): not done.
fn remote_managed_ports_filter(spec: &RequestSpec) {
    if spec.requested_networks.iter().any(|n| n.port_id.is_some()) {
        warn!(
            "the request names ports; nova-scheduler-rs cannot ask Neutron whether they are \
               remote-managed, so COMPUTE_REMOTE_MANAGED_PORTS is not required"
        );
    }
}

/// `owner_nova_filter`.
async fn owner_nova_filter(spec: &mut RequestSpec, store: &HostStateStore) {
    if spec
        .request_level_params
        .root_required
        .contains("OWNER_NOVA")
    {
        return;
    }
    match store.min_compute_service_version().await {
        Some(v) if v >= OWNER_NOVA_MIN_COMPUTE_VERSION => request_filters::require_owner_nova(spec),
        other => warn!(
            min_version = other.unwrap_or(0),
            need = OWNER_NOVA_MIN_COMPUTE_VERSION,
            "OWNER_NOVA trait not added to scheduling request: not all nova-compute services are upgraded"
        ),
    }
}

/// nova's `get_compute_nodes_by_host_or_node`: the cell named by the destination,
/// else the host's cell from `host_mappings`, else every enabled cell.
async fn target_nodes(
    spec: &RequestSpec,
    store: &HostStateStore,
) -> Result<Option<Vec<TargetNode>>, PrefilterError> {
    let Some(target) = destination_target(spec) else {
        return Ok(None);
    };
    let host = target.host.as_deref().filter(|h| !h.is_empty());
    let node = target.node.as_deref().filter(|n| !n.is_empty());
    let mut cell = target.cell_uuid.clone();
    if let (Some(h), None) = (host, &cell) {
        cell = sqlx::query(
            "SELECT c.uuid FROM host_mappings h JOIN cell_mappings c ON c.id = h.cell_id \
             WHERE h.host = ?",
        )
        .bind(h)
        .fetch_optional(store.api_pool())
        .await
        .map_err(|e| db_error("could not read host_mappings", e))?
        .and_then(|r| r.try_get::<Option<String>, _>("uuid").ok().flatten());
    }
    let states = store
        .host_states(None, cell.as_deref())
        .await
        .map_err(|e| db_error("could not look up the target host", e))?;
    let nodes = states
        .into_iter()
        .filter(|s| match (host, node) {
            (Some(h), Some(n)) => &*s.host == h && &*s.nodename == n,
            (Some(h), None) => &*s.host == h,
            (None, Some(n)) => &*s.nodename == n,
            (None, None) => false,
        })
        .map(|s| TargetNode {
            uuid: s.uuid.as_deref().unwrap_or_default().to_string(),
            host: s.host.to_string(),
            hypervisor_hostname: s.nodename.to_string(),
        })
        .collect::<Vec<_>>();
    // A host and node name one compute node (`get_by_host_and_nodename`), a node
    // alone the first with that name (`get_by_nodename`).
    let nodes = if node.is_some() {
        nodes.into_iter().take(1).collect()
    } else {
        nodes
    };
    Ok(Some(nodes))
}

/// Steps 3.2–3.5 of nova's `select_destinations`: the resource request, the
/// candidates query, the PCPU fallback query and the merge. An empty answer is
/// returned as is (the caller raises `NoValidHost("")`). Placement failures
/// count as "no candidates", as nova's report client makes them.
pub async fn allocation_candidates(
    spec: &mut RequestSpec,
    store: &HostStateStore,
    placement: &PlacementClient,
    index: Option<&LiveIndex>,
    query: &QueryOptions,
    opts: &PrefilterOptions,
    global_request_id: Option<&str>,
) -> Result<FoundCandidates, PrefilterError> {
    let nodes = target_nodes(spec, store).await?;
    let first = resources_from_request_spec(spec, query, true, nodes.as_deref())?;
    let mut from_index = true;
    let mut found = match ask(placement, index, &first.query_params(), global_request_id).await {
        Ok((found, local)) => {
            from_index &= local;
            found
        }
        // The client logs an outage once when it starts, not per request.
        Err(e @ PlacementError::Unreachable(_)) => {
            from_index = false;
            debug!(error = %e, "Failed to retrieve allocation candidates from placement API");
            AllocationCandidates::default()
        }
        Err(e) => {
            from_index = false;
            warn!(error = %e, "Failed to retrieve allocation candidates from placement API");
            AllocationCandidates::default()
        }
    };
    if first.cpu_pinning_requested && !opts.disable_fallback_pcpu_query {
        debug!("Requesting fallback allocation candidates with VCPU instead of PCPU");
        let second = resources_from_request_spec(spec, query, false, nodes.as_deref())?;
        match ask(placement, index, &second.query_params(), global_request_id).await {
            Ok((more, local)) => {
                from_index &= local;
                found.merge(more)
            }
            // nova: a connection failure skips the merge; an HTTP error makes its
            // merge fail with a TypeError. We keep the first answer either way.
            Err(e @ PlacementError::Unreachable(_)) => {
                from_index = false;
                debug!(error = %e, "Failed to retrieve fallback allocation candidates")
            }
            Err(e) => {
                from_index = false;
                warn!(error = %e, "Failed to retrieve fallback allocation candidates")
            }
        }
    }
    if found.allocation_requests.is_empty() {
        info!("Got no allocation candidates from the Placement API. This could be due to insufficient resources or a temporary occurrence as compute nodes start up.");
    }
    Ok(FoundCandidates { found, from_index })
}

/// The candidates of one request and where they came from.
#[derive(Debug, Clone, Default)]
pub struct FoundCandidates {
    pub found: AllocationCandidates,
    /// True when the provider index answered every question of the request (the
    /// claims may then be batched, see `batch_claims`).
    pub from_index: bool,
}

/// One `GET /allocation_candidates` question: answered from the provider index when
/// there is one and the shape allows it (every candidate, no `limit`), else by
/// Placement. True with the answer when it came from the index.
async fn ask(
    placement: &PlacementClient,
    index: Option<&LiveIndex>,
    params: &[(String, String)],
    global_request_id: Option<&str>,
) -> Result<(AllocationCandidates, bool), crate::placement::PlacementError> {
    if let Some(found) = index.and_then(|i| i.candidates(params).ok()) {
        return Ok((found, true));
    }
    placement
        .get_allocation_candidates(params, global_request_id)
        .await
        .map(|found| (found, false))
}

impl PrefilterError {
    /// The RPC failure nova would send for it.
    pub fn into_remote(self) -> crate::rpc::RemoteError {
        use crate::rpc::RemoteError;
        match self {
            PrefilterError::NoValidHost(reason) => RemoteError::no_valid_host(reason),
            PrefilterError::Nova(e) if e.is_builtin() => RemoteError::value_error(e.message),
            PrefilterError::Nova(e) => {
                RemoteError::nova(e.class, e.message.clone(), e.code(), Default::default())
            }
            PrefilterError::Database(m) => RemoteError::runtime_error(m),
        }
    }
}
