// SPDX-License-Identifier: Apache-2.0
//! The Placement question(s) of nova's `select_destinations` (steps 3.2–3.5): the
//! resource request with the target-node lookup, `GET /allocation_candidates`, and
//! for `hw:cpu_policy=dedicated` the second, VCPU question whose answer is merged
//! into the first. Who answers each question is a [`CandidateSource`] chosen once at
//! startup: Placement ([`AskPlacement`], nova's way) or the provider index with
//! Placement behind it for the shapes the index does not answer ([`AskIndex`]).

use super::request_filter::{self, PrefilterError, PrefilterOptions};
use crate::model::RequestSpec;
use crate::placement::index::{LiveIndex, PathCounts};
use crate::placement::{
    destination_target, resources_from_request_spec, AllocationCandidates, PlacementClient,
    PlacementError, QueryOptions, TargetNode,
};
use crate::state::HostStateStore;
use futures_util::future::BoxFuture;
use std::sync::Arc;
use tracing::{debug, info, warn};

/// Who answers a `GET /allocation_candidates` question.
pub trait CandidateSource: Send + Sync {
    /// One question's answer, and true when it was answered without Placement.
    fn ask<'a>(
        &'a self,
        params: &'a [(String, String)],
        global_request_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(AllocationCandidates, bool), PlacementError>>;

    /// Running totals of the questions answered locally / by Placement (0 where
    /// every question goes to Placement).
    fn counts(&self) -> PathCounts {
        PathCounts::default()
    }
}

/// nova's way: every question goes to Placement.
pub struct AskPlacement(pub Arc<PlacementClient>);

impl CandidateSource for AskPlacement {
    fn ask<'a>(
        &'a self,
        params: &'a [(String, String)],
        global_request_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(AllocationCandidates, bool), PlacementError>> {
        Box::pin(async move {
            crate::observe::metrics().candidates_question("placement", "no_index");
            let found = self
                .0
                .get_allocation_candidates(params, global_request_id)
                .await?;
            Ok((found, false))
        })
    }
}

/// The provider index answers the shapes it holds (every candidate, no `limit`);
/// Placement answers the rest.
pub struct AskIndex {
    pub index: Arc<LiveIndex>,
    pub placement: Arc<PlacementClient>,
}

impl CandidateSource for AskIndex {
    fn ask<'a>(
        &'a self,
        params: &'a [(String, String)],
        global_request_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(AllocationCandidates, bool), PlacementError>> {
        Box::pin(async move {
            let metrics = crate::observe::metrics();
            match self.index.candidates(params) {
                Ok(found) => {
                    metrics.candidates_question("index", "");
                    return Ok((found, true));
                }
                Err(reason) => metrics.candidates_question("placement", reason.kind.label()),
            }
            let found = self
                .placement
                .get_allocation_candidates(params, global_request_id)
                .await?;
            Ok((found, false))
        })
    }

    fn counts(&self) -> PathCounts {
        self.index.counts()
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
        cell = store
            .cell_of_host(h)
            .await
            .map_err(|e| request_filter::db_error("could not read host_mappings", e))?;
    }
    let states = store
        .host_states(None, cell.as_deref())
        .await
        .map_err(|e| request_filter::db_error("could not look up the target host", e))?;
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
    source: &dyn CandidateSource,
    query: &QueryOptions,
    opts: &PrefilterOptions,
    global_request_id: Option<&str>,
) -> Result<FoundCandidates, PrefilterError> {
    let nodes = target_nodes(spec, store).await?;
    let first = resources_from_request_spec(spec, query, true, nodes.as_deref())?;
    let mut from_index = true;
    let params = first.query_params();
    let asked = params
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    let mut found = match source.ask(&params, global_request_id).await {
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
        match source.ask(&second.query_params(), global_request_id).await {
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
    Ok(FoundCandidates {
        found,
        from_index,
        query: asked,
    })
}

/// The candidates of one request and where they came from.
#[derive(Debug, Clone, Default)]
pub struct FoundCandidates {
    pub found: AllocationCandidates,
    /// True when the provider index answered every question of the request (the
    /// claims may then be batched, see `batch_claims`).
    pub from_index: bool,
    /// The first question's query string (the one an explanation shows).
    pub query: String,
}
