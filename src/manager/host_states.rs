// SPDX-License-Identifier: Apache-2.0
//! Step 7 of nova's `select_destinations`: the host states of the candidates
//! Placement returned, each with its allocation requests. With the warm cache and
//! the indexed decision they are rows of the cache's table (nothing is copied); else
//! copies of the states, from the cache or read from the cells per request (nova's
//! way). Which is a [`HostStateSource`] chosen once at startup; the decision then
//! runs over whichever it got.

use crate::model::{AllocationCandidate, Flavor, HostState};
use crate::rpc::RemoteError;
use crate::scheduler::{
    Claimer, HostTable, RowCandidates, ScheduleError, ScheduleOutcome, ScheduleRequest, Scheduler,
};
use crate::state::{Consumption, HostStateCache, HostStateStore};
use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use rand::rngs::StdRng;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// A request's candidate hosts: copies of their states, or rows of the cache's
/// decision table with the request's allocation candidates.
pub(super) enum RequestHosts {
    States(Vec<HostState>),
    Table {
        table: Arc<HostTable>,
        rows: RowCandidates,
    },
}

impl RequestHosts {
    pub(super) fn len(&self) -> usize {
        match self {
            RequestHosts::States(states) => states.len(),
            RequestHosts::Table { rows, .. } => rows.len(),
        }
    }

    /// What the decision ran over (the `decided_on` of the done line).
    pub(super) fn decided_on(&self) -> &'static str {
        match self {
            RequestHosts::States(_) => "copies",
            RequestHosts::Table { .. } => "table",
        }
    }

    /// The decision over these hosts (a table's rows stay here, to be freed by the
    /// caller).
    pub(super) async fn decide<C: Claimer>(
        &mut self,
        scheduler: &Scheduler,
        request: ScheduleRequest,
        claimer: &mut C,
        rng: &mut StdRng,
    ) -> Result<ScheduleOutcome, ScheduleError> {
        match self {
            RequestHosts::States(states) => {
                scheduler
                    .schedule(std::mem::take(states), request, claimer, rng)
                    .await
            }
            RequestHosts::Table { table, rows } => {
                scheduler
                    .schedule_table(table, rows, request, claimer, rng)
                    .await
            }
        }
    }
}

/// A request's allocation requests by provider uuid. Fx-hashed: it is built and
/// read once per candidate on every request, and its keys are provider uuids from
/// Placement, not from users.
pub(super) type CandidatesByProvider = FxHashMap<Arc<str>, Vec<AllocationCandidate>>;

/// The allocation requests under each provider they allocate from, in Placement's
/// order. A request naming several providers (sharing or nested) is listed under
/// each; only those are copied.
pub(super) fn index_by_provider(
    allocation_requests: Vec<AllocationCandidate>,
) -> CandidatesByProvider {
    let mut index = CandidatesByProvider::with_capacity_and_hasher(
        allocation_requests.len(),
        Default::default(),
    );
    for ar in allocation_requests {
        if let Some(rp) = ar.single_provider_uuid() {
            index.entry(Arc::clone(rp)).or_default().push(ar);
            continue;
        }
        let providers = ar.providers();
        let Some((last, others)) = providers.split_last() else {
            continue;
        };
        for rp in others {
            index.entry(Arc::clone(rp)).or_default().push(ar.clone());
        }
        index.entry(Arc::clone(last)).or_default().push(ar);
    }
    index
}

/// Where a request's host states come from.
pub(super) trait HostStateSource: Send + Sync {
    /// Step 7: the host states of `uuids` (every node when `None`) in `cell` (every
    /// cell when `None`), each with the allocation candidates (Placement's list,
    /// moved in) that allocate from it; with `system_metadata`, the instances' system
    /// metadata attached (ImagePropertiesWeigher reads it).
    fn host_states<'a>(
        &'a self,
        uuids: Option<&'a [String]>,
        cell: Option<&'a str>,
        now: DateTime<Utc>,
        candidates: Option<Vec<AllocationCandidate>>,
        system_metadata: bool,
    ) -> BoxFuture<'a, Result<RequestHosts, RemoteError>>;

    /// Copies of the states of `uuids` in `cell` as they are now, without
    /// allocation candidates (an explanation's filters run over them).
    fn copies<'a>(
        &'a self,
        uuids: &'a [String],
        cell: Option<&'a str>,
        now: DateTime<Utc>,
    ) -> BoxFuture<'a, Result<Vec<HostState>, String>>;

    /// Keeps what `outcome` consumed on the states it came from, where they are
    /// kept between requests.
    fn retain(&self, _outcome: &ScheduleOutcome, _consumption: Consumption, _now: DateTime<Utc>) {}
}

/// What one instance of `flavor` consumes on its host.
pub(super) fn consumption(flavor: &Flavor) -> Consumption {
    Consumption {
        memory_mb: flavor.memory_mb,
        root_gb: flavor.root_gb,
        ephemeral_gb: flavor.ephemeral_gb,
        vcpus: flavor.vcpus,
    }
}

/// nova's way: copies read from the cell databases for each request.
pub(super) struct ReadPerRequest {
    pub store: Arc<HostStateStore>,
}

impl HostStateSource for ReadPerRequest {
    fn host_states<'a>(
        &'a self,
        uuids: Option<&'a [String]>,
        cell: Option<&'a str>,
        _now: DateTime<Utc>,
        candidates: Option<Vec<AllocationCandidate>>,
        system_metadata: bool,
    ) -> BoxFuture<'a, Result<RequestHosts, RemoteError>> {
        Box::pin(async move {
            let hosts = self.store.host_states(uuids, cell).await;
            copies(hosts, candidates, &self.store, system_metadata).await
        })
    }

    fn copies<'a>(
        &'a self,
        uuids: &'a [String],
        cell: Option<&'a str>,
        _now: DateTime<Utc>,
    ) -> BoxFuture<'a, Result<Vec<HostState>, String>> {
        Box::pin(async move {
            self.store
                .host_states(Some(uuids), cell)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// The warm cache: rows of its decision table when `table` is set and the request
/// spans every enabled cell and needs no system metadata (the table has none), else
/// copies of its states.
pub(super) struct FromCache {
    pub cache: Arc<HostStateCache>,
    pub store: Arc<HostStateStore>,
    /// `[nova_scheduler_rs] indexed_decision`.
    pub table: bool,
}

impl HostStateSource for FromCache {
    fn host_states<'a>(
        &'a self,
        uuids: Option<&'a [String]>,
        cell: Option<&'a str>,
        now: DateTime<Utc>,
        candidates: Option<Vec<AllocationCandidate>>,
        system_metadata: bool,
    ) -> BoxFuture<'a, Result<RequestHosts, RemoteError>> {
        Box::pin(async move {
            // The table holds every enabled cell; a request bound to one cell (a
            // move) gets copies.
            let table = self.table && !system_metadata;
            let table_uuids = uuids.filter(|_| table && cell.is_none() && candidates.is_some());
            if let Some(uuids) = table_uuids {
                let table = self.cache.table_for(uuids, now).await.map_err(|e| {
                    RemoteError::runtime_error(format!("could not read host states: {e}"))
                })?;
                // Moved, not copied, as into the host states below.
                let candidates = candidates.unwrap_or_default();
                let rows = RowCandidates::from_candidates(table.len(), uuids, candidates, |u| {
                    table.row_of_uuid(u)
                });
                return Ok(RequestHosts::Table { table, rows });
            }
            let hosts = self.cache.host_states(uuids, cell, now).await;
            copies(hosts, candidates, &self.store, system_metadata).await
        })
    }

    fn copies<'a>(
        &'a self,
        uuids: &'a [String],
        cell: Option<&'a str>,
        now: DateTime<Utc>,
    ) -> BoxFuture<'a, Result<Vec<HostState>, String>> {
        Box::pin(async move {
            self.cache
                .host_states(Some(uuids), cell, now)
                .await
                .map_err(|e| e.to_string())
        })
    }

    /// Our deliberate difference from nova: the consumption of the chosen hosts is
    /// kept on the cached host states until their compute node rows move.
    fn retain(&self, outcome: &ScheduleOutcome, consumption: Consumption, now: DateTime<Utc>) {
        for chosen in outcome.destinations.iter().filter_map(|list| list.first()) {
            let host = &outcome.hosts[chosen.host];
            if let Some(uuid) = &host.uuid {
                self.cache.retain(&host.cell_uuid, uuid, consumption, now);
            }
        }
    }
}

/// Copies of the host states, each with its allocation candidates.
async fn copies<E: std::fmt::Display>(
    hosts: Result<Vec<HostState>, E>,
    candidates: Option<Vec<AllocationCandidate>>,
    store: &HostStateStore,
    system_metadata: bool,
) -> Result<RequestHosts, RemoteError> {
    let mut hosts = hosts
        .map_err(|e| RemoteError::runtime_error(format!("could not read host states: {e}")))?;
    if let Some(candidates) = candidates {
        let mut index = index_by_provider(candidates);
        for h in &mut hosts {
            // Moved, not copied: each compute node uuid names one host state.
            h.allocation_candidates = h
                .uuid
                .as_ref()
                .and_then(|u| index.remove(u))
                .unwrap_or_default();
        }
    }
    if system_metadata {
        store.attach_instance_system_metadata(&mut hosts).await;
    }
    Ok(RequestHosts::States(hosts))
}
