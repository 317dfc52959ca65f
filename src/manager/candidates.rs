// SPDX-License-Identifier: Apache-2.0
//! The Placement question(s) of nova's `select_destinations` (steps 3.2–3.5): the
//! resource request with the target-node lookup, `GET /allocation_candidates`, and
//! for `hw:cpu_policy=dedicated` the second, VCPU question whose answer is merged
//! into the first. Each question is answered by the provider index when there is
//! one and the request's shape allows it, else by Placement.

use super::request_filter::PrefilterError;
use crate::model::RequestSpec;
use crate::placement::index::LiveIndex;
use crate::placement::{
    destination_target, resources_from_request_spec, AllocationCandidates, PlacementClient,
    PlacementError, QueryOptions, TargetNode,
};
use crate::state::HostStateStore;
use tracing::{debug, info, warn};

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
        cell = store
            .cell_of_host(h)
            .await
            .map_err(|e| super::request_filter::db_error("could not read host_mappings", e))?;
    }
    let states = store
        .host_states(None, cell.as_deref())
        .await
        .map_err(|e| super::request_filter::db_error("could not look up the target host", e))?;
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
    opts: &super::request_filter::PrefilterOptions,
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
