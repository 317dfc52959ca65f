// SPDX-License-Identifier: Apache-2.0
//! nova's `SchedulerManager` RPC endpoint (target version 4.5, no namespace).
//!
//! Supported RPC versions of `select_destinations` (from nova's `rpcapi.py` history):
//! - 4.5: `spec_obj`, `instance_uuids`, `return_objects`, `return_alternates` (supported)
//! - 4.4 / 4.3: `spec_obj` with or without `instance_uuids` (supported: no claim
//!   without uuids, legacy dicts returned)
//! - 4.0–4.2: legacy `request_spec` / `filter_properties` dicts, hydrated as nova's
//!   `RequestSpec.from_primitives` does (no claim: no instance uuids)
//!
//! Fanout casts: `update_aggregates` / `delete_aggregate` (4.1) update the aggregate
//! cache; `update_instance_info` / `delete_instance_info` / `sync_instance_info` (4.2)
//! update the instances of the warm host-state cache (without the cache, instances
//! are read per request and the casts need no state).

// `Result<_, RemoteError>` is the endpoint's contract (see `rpc::dispatcher`): the
// error is a few strings and JSON values, built only on failure paths.
#![allow(clippy::result_large_err)]

mod batch_claims;
mod claims;
pub mod prefilters;
mod read_ahead;
mod redelivery;

pub use prefilters::PrefilterOptions;

use crate::model::{
    pyjson, Aggregate, AllocationCandidate, HostState, RequestSpec, SchedulerLimits, Selection,
};
use crate::notifications::{NotifiedSpec, Notifier, Phase};
use crate::placement::index::LiveIndex;
use crate::placement::{query, PlacementClient};
use crate::rpc::{Endpoint, EndpointFuture, IncomingCall, RemoteError, RequestContext};
use crate::scheduler::{
    ClaimError, Claimer, HostTable, RowCandidates, ScheduleError, ScheduleOutcome, ScheduleRequest,
    Scheduler,
};
use crate::state::{Consumption, HostStateCache, HostStateStore};
use chrono::Utc;
use rand::rngs::StdRng;
use rand::SeedableRng;
use rustc_hash::FxHashMap;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tracing::{debug, info, info_span, warn, Instrument};

/// The Placement microversion nova uses for candidates and claims.
pub const ALLOCATION_REQUEST_VERSION: &str = "1.36";

/// Decisions made for one batched request: the first, plus a new one on a refreshed
/// index after each refused `POST /allocations`. Each refusal means another
/// scheduler took the room first; three rounds let a request step past two such
/// races while a request that keeps losing ends in NoValidHost (as nova's
/// per-instance claims end when every host refused) instead of looping.
const BATCH_CLAIM_ATTEMPTS: u32 = 3;

/// Options the manager reads, from nova.conf.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// `[scheduler] max_placement_results`.
    pub max_placement_results: u32,
    /// `[DEFAULT] default_availability_zone`.
    pub default_availability_zone: String,
    /// Seed for `host_subset_size` / shuffle randomness; `None` = from entropy.
    pub rng_seed: Option<u64>,
    /// The request filters' options and `[workarounds] disable_fallback_pcpu_query`.
    pub prefilters: PrefilterOptions,
    /// Read the instances' system metadata for ImagePropertiesWeigher (only when
    /// `image_props_weight_multiplier` is not 0.0; nova's weigher reads nothing then).
    pub load_instance_system_metadata: bool,
    /// `[nova_scheduler_rs] indexed_decision`: with the warm cache, decide over its
    /// table of host states (`Scheduler::schedule_table`) instead of a copy of
    /// every candidate's state.
    pub indexed_decision: bool,
    /// `[nova_scheduler_rs] read_allocations_ahead`: without the provider index,
    /// read the instances' current allocations beside the candidates question.
    pub read_allocations_ahead: bool,
    /// `[nova_scheduler_rs] max_instances_per_request`.
    pub max_instances_per_request: u32,
}

/// How a call reached the manager: what its delivery says beyond its arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct Delivery {
    /// When the caller stops waiting; no claim is made after it.
    pub deadline: Option<Instant>,
    /// Delivered before to a consumer that did not answer it.
    pub redelivered: bool,
}

/// A request's candidate hosts: copies of their states, or rows of the cache's
/// decision table with the request's allocation candidates.
enum RequestHosts {
    States(Vec<HostState>),
    Table {
        table: Arc<HostTable>,
        rows: RowCandidates,
    },
}

impl RequestHosts {
    fn len(&self) -> usize {
        match self {
            RequestHosts::States(states) => states.len(),
            RequestHosts::Table { rows, .. } => rows.len(),
        }
    }
}

pub struct SchedulerManager {
    scheduler: Scheduler,
    store: Arc<HostStateStore>,
    placement: Arc<PlacementClient>,
    options: ManagerOptions,
    rng: Mutex<StdRng>,
    /// The warm host states; `None` reads the cell databases per request, as nova.
    cache: Option<Arc<HostStateCache>>,
    /// `scheduler.select_destinations.start` / `.end` notifications.
    notifier: Option<Arc<Notifier>>,
    /// The Placement provider index (fast path); `None` asks Placement, as nova.
    placement_index: Option<Arc<LiveIndex>>,
    /// Set when Placement answered a batched claim with 406: claim per instance from
    /// then on.
    batch_unsupported: AtomicBool,
    /// Requests claimed with one `POST /allocations`, and POSTs Placement refused.
    batched_claims: AtomicU64,
    batch_conflicts: AtomicU64,
}

/// How the claims of one request were made (the "select_destinations done" line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ClaimMode {
    /// No claim: no Placement candidates (rebuild) or no instance uuids (RPC < 4.4).
    None,
    /// nova's way: `GET` + `PUT /allocations/{uuid}` per instance.
    PerInstance,
    /// One `POST /allocations` for the whole request.
    Batched,
}

impl ClaimMode {
    fn as_str(self) -> &'static str {
        match self {
            ClaimMode::None => "none",
            ClaimMode::PerInstance => "per-instance",
            ClaimMode::Batched => "batched",
        }
    }
}

impl SchedulerManager {
    pub fn new(
        scheduler: Scheduler,
        store: Arc<HostStateStore>,
        placement: Arc<PlacementClient>,
        options: ManagerOptions,
    ) -> Self {
        let rng = match options.rng_seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::seed_from_u64(rand::random()),
        };
        SchedulerManager {
            scheduler,
            store,
            placement,
            options,
            rng: Mutex::new(rng),
            cache: None,
            notifier: None,
            placement_index: None,
            batch_unsupported: AtomicBool::new(false),
            batched_claims: AtomicU64::new(0),
            batch_conflicts: AtomicU64::new(0),
        }
    }

    /// Sends nova's `scheduler.select_destinations` notifications through `notifier`.
    pub fn with_notifier(mut self, notifier: Arc<Notifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// Serves host states from `cache` (which must share this manager's store).
    pub fn with_cache(mut self, cache: Arc<HostStateCache>) -> Self {
        self.cache = Some(cache);
        self
    }

    /// Answers the common allocation-candidate questions from `index` and records
    /// claims in it.
    pub fn with_placement_index(mut self, index: Arc<LiveIndex>) -> Self {
        self.placement_index = Some(index);
        self
    }

    /// `select_destinations` as nova 34's manager runs it (see the boundary facts §2.1),
    /// for a call delivered once and without a deadline.
    pub async fn select_destinations(
        &self,
        ctx: &RequestContext,
        args: &Map<String, Value>,
    ) -> Result<Value, RemoteError> {
        self.select_destinations_delivered(ctx, args, Delivery::default())
            .await
    }

    /// `select_destinations` for a call delivered as `delivery` says.
    pub async fn select_destinations_delivered(
        &self,
        ctx: &RequestContext,
        args: &Map<String, Value>,
        delivery: Delivery,
    ) -> Result<Value, RemoteError> {
        let started = Instant::now();
        let mut phases = Phases::default();
        // The notifications are built from the spec primitive, as nova builds them from
        // its RequestSpec object (4.0–4.2 requests carry no primitive: none is sent).
        let notifier = self.notifier.as_ref().filter(|n| n.is_active());
        let raw_spec = notifier.and_then(|_| args.get("spec_obj").cloned());
        if notifier.is_some() && raw_spec.is_none() {
            debug!("select_destinations without spec_obj (RPC < 4.3): no notifications");
        }
        let args = SelectArgs::decode(args)?;
        args.check_size(self.options.max_instances_per_request)?;
        phases.decode = started.elapsed();
        let mut spec = args.spec;
        let aggregates_before = spec
            .requested_destination
            .as_ref()
            .map(|d| d.aggregates.clone());
        let is_rebuild = spec.is_rebuild();
        let global_request_id = ctx
            .global_request_id()
            .or(ctx.request_id())
            .map(str::to_string);

        // Steps 3–4: prefilters, Placement query, candidates indexed by provider.
        let mut candidates_by_rp: Option<CandidatesByProvider> = None;
        let mut compute_uuids: Option<Vec<String>> = None;
        // With the index, the spec as the candidates question starts from: a batched
        // request whose claim is refused asks again (see `schedule_batched`).
        let mut spec_before_candidates = None;
        let mut from_index = false;
        let mut read_ahead = None;
        if !is_rebuild {
            let mark = Instant::now();
            prefilters::process(&mut spec, &self.store, &self.options.prefilters)
                .await
                .map_err(prefilters::PrefilterError::into_remote)?;
            phases.prefilters = mark.elapsed();
            let mark = Instant::now();
            let query_options = query::QueryOptions {
                max_placement_results: self.options.max_placement_results,
            };
            if self.placement_index.is_some() {
                spec_before_candidates = Some(spec.clone());
            }
            // nova's claims read each instance's allocations before their PUT; asking
            // Placement for the candidates, those reads go out now, beside that
            // question (after the prefilters, whose work they would only slow).
            read_ahead = args
                .instance_uuids
                .as_deref()
                .filter(|uuids| {
                    !uuids.is_empty()
                        && self.options.read_allocations_ahead
                        && self.placement_index.is_none()
                        && !delivery.redelivered
                })
                .map(|uuids| {
                    read_ahead::AllocationReadAhead::start(
                        Arc::clone(&self.placement),
                        uuids,
                        global_request_id.clone(),
                    )
                });
            let answer = prefilters::allocation_candidates(
                &mut spec,
                &self.store,
                &self.placement,
                self.placement_index.as_deref(),
                &query_options,
                &self.options.prefilters,
                global_request_id.as_deref(),
            )
            .await
            .map_err(prefilters::PrefilterError::into_remote)?;
            from_index = answer.from_index;
            let found = answer.found;
            if found.allocation_requests.is_empty() {
                return Err(no_valid_host(String::new()));
            }
            compute_uuids = Some(found.provider_uuids);
            candidates_by_rp = Some(index_by_provider(found.allocation_requests));
            phases.placement = mark.elapsed();
        }

        // nova's `_select_destinations` starts here, with the spec as the request filters
        // left it.
        let mut notified = match (notifier, raw_spec) {
            (Some(n), Some(raw)) => {
                let mut notified = NotifiedSpec::new(raw);
                let aggregates_after = spec
                    .requested_destination
                    .as_ref()
                    .map(|d| d.aggregates.clone());
                if aggregates_after != aggregates_before {
                    notified.set_destination_aggregates(&aggregates_after.unwrap_or_default());
                }
                n.select_destinations(ctx, &mut notified, Phase::Start);
                Some((n, notified))
            }
            _ => None,
        };

        // Step 7: host states for the providers Placement returned (all nodes on rebuild).
        let cell = spec
            .requested_destination
            .as_ref()
            .filter(|d| !d.allow_cross_cell_move)
            .and_then(|d| d.cell_uuid.clone());
        let mark = Instant::now();
        let now = Utc::now();
        let use_placement = candidates_by_rp.is_some();
        let mut hosts = self
            .host_states(
                compute_uuids.as_deref(),
                cell.as_deref(),
                now,
                candidates_by_rp,
            )
            .await?;
        self.store
            .load_unset_group_hosts(&mut spec)
            .await
            .map_err(|e| {
                RemoteError::runtime_error(format!("could not load the server group's hosts: {e}"))
            })?;
        phases.state = mark.elapsed();
        let host_count = hosts.len();

        let return_alternates = args.return_alternates && args.return_objects;
        let last_instance = args.instance_uuids.as_ref().and_then(|u| u.last()).cloned();
        let request = ScheduleRequest {
            spec,
            instance_uuids: args.instance_uuids,
            use_placement,
            return_alternates,
            now,
        };
        let flavor = &request.spec.flavor;
        let consumption = Consumption {
            memory_mb: flavor.memory_mb,
            root_gb: flavor.root_gb,
            ephemeral_gb: flavor.ephemeral_gb,
            vcpus: flavor.vcpus,
        };
        let project_id = request.spec.project_id.clone().unwrap_or_default();
        let user_id = request
            .spec
            .user_id
            .clone()
            .or_else(|| ctx.user_id().map(str::to_string))
            .unwrap_or_default();
        // A request delivered before may find its earlier delivery's claims.
        let earlier_claims = match (&request.instance_uuids, delivery.redelivered, use_placement) {
            (Some(uuids), true, true) => {
                redelivery::earlier_claims(
                    &self.placement,
                    &self.store,
                    &request.spec.ignore_hosts,
                    uuids,
                    global_request_id.as_deref(),
                )
                .await
            }
            _ => FxHashMap::default(),
        };
        let claims = ClaimContext {
            project_id,
            user_id,
            global_request_id,
            waited: ClaimTime::default(),
            deadline: delivery.deadline,
            earlier_claims,
        };
        // The RNG lock is held only for the synchronous parts; a fresh RNG per request
        // is derived so concurrent requests never wait on each other's claims.
        let mut rng = {
            let mut shared = self.rng.lock().unwrap_or_else(|p| p.into_inner());
            StdRng::seed_from_u64(rand::RngExt::random(&mut *shared))
        };
        let claiming = request.use_placement && request.instance_uuids.is_some();
        let batch_index = match (&spec_before_candidates, from_index && claiming) {
            (Some(_), true) if claims.earlier_claims.is_empty() => {
                self.batch_index(request.instance_uuids.as_deref()).await
            }
            _ => None,
        };
        let mark = Instant::now();
        let mut claim_mode = if claiming {
            ClaimMode::PerInstance
        } else {
            ClaimMode::None
        };
        let mut claim_attempts = 0;
        let outcome = match (batch_index, spec_before_candidates) {
            (Some(index), Some(spec_before)) => {
                let batched = self
                    .schedule_batched(
                        index,
                        &mut hosts,
                        request,
                        spec_before,
                        cell.as_deref(),
                        &claims,
                        &mut rng,
                    )
                    .await;
                claim_attempts = batched.attempts;
                if batched.batched {
                    claim_mode = ClaimMode::Batched;
                }
                batched.outcome
            }
            _ => {
                if claiming {
                    claim_attempts = 1;
                }
                self.schedule_per_instance(&mut hosts, request, &claims, read_ahead, &mut rng)
                    .await
            }
        }
        .map_err(schedule_error);
        let decided_on = match &hosts {
            RequestHosts::States(_) => "copies",
            RequestHosts::Table { .. } => "table",
        };
        phases.schedule = mark.elapsed();
        phases.claims = claims.waited.total();
        let outcome = outcome?;
        if let Some((n, notified)) = notified.as_mut() {
            // nova's `_schedule` set `spec_obj.instance_uuid` to each instance in turn.
            if let Some(uuid) = &last_instance {
                notified.set_instance_uuid(uuid);
            }
            n.select_destinations(ctx, notified, Phase::End);
        }
        if let Some(cache) = &self.cache {
            for chosen in outcome.destinations.iter().filter_map(|list| list.first()) {
                let host = &outcome.hosts[chosen.host];
                if let Some(uuid) = &host.uuid {
                    cache.retain(&host.cell_uuid, uuid, consumption, now);
                }
            }
        }
        let mark = Instant::now();
        let answer = self.encode(&outcome, args.return_objects);
        phases.encode = mark.elapsed();
        let instances = outcome.destinations.len();
        // Freeing every candidate host's state (or allocation candidates) takes
        // milliseconds at thousands of hosts; it runs on a blocking thread, off the
        // reply's path.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if host_count >= DROP_OFF_PATH_HOSTS => {
                runtime.spawn_blocking(move || drop((outcome, hosts)));
            }
            _ => drop((outcome, hosts)),
        }
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
        // Running totals of the candidate questions answered locally / by Placement.
        let counts = self
            .placement_index
            .as_ref()
            .map(|i| i.counts())
            .unwrap_or_default();
        info!(
            hosts = host_count,
            instances,
            phase_decode_ms = ms(phases.decode),
            phase_prefilters_ms = ms(phases.prefilters),
            phase_placement_ms = ms(phases.placement),
            phase_state_ms = ms(phases.state),
            phase_schedule_ms = ms(phases.schedule),
            phase_claims_ms = ms(phases.claims),
            phase_encode_ms = ms(phases.encode),
            total_ms = ms(started.elapsed()),
            candidates_fast = counts.fast,
            candidates_fallback = counts.fallback,
            claim_mode = claim_mode.as_str(),
            decided_on,
            claim_attempts,
            claims_batched = self.batched_claims.load(Ordering::Relaxed),
            claim_conflicts = self.batch_conflicts.load(Ordering::Relaxed),
            "select_destinations done"
        );
        Ok(answer)
    }

    /// Step 7: the host states of `uuids` (every node when `None`) in `cell` (every
    /// cell when `None`), each with its allocation candidates moved out of
    /// `candidates_by_rp`.
    async fn host_states(
        &self,
        uuids: Option<&[String]>,
        cell: Option<&str>,
        now: chrono::DateTime<Utc>,
        candidates_by_rp: Option<CandidatesByProvider>,
    ) -> Result<RequestHosts, RemoteError> {
        // The cache's table holds every enabled cell; a request bound to one cell
        // (a move), or one that needs the instances' system metadata, gets copies.
        let table_cache = self.cache.as_ref().filter(|_| {
            self.options.indexed_decision && !self.options.load_instance_system_metadata
        });
        if let (Some(cache), Some(uuids), None, true) =
            (table_cache, uuids, cell, candidates_by_rp.is_some())
        {
            let mut by_rp = candidates_by_rp.unwrap_or_default();
            let table = cache.table_for(uuids, now).await.map_err(|e| {
                RemoteError::runtime_error(format!("could not read host states: {e}"))
            })?;
            let mut rows = RowCandidates::new(table.len());
            for uuid in uuids {
                if let Some(row) = table.row_of_uuid(uuid) {
                    if !rows.contains(row) {
                        // Moved, not copied, as into the host states below.
                        rows.insert(row, by_rp.remove(uuid.as_str()).unwrap_or_default());
                    }
                }
            }
            return Ok(RequestHosts::Table { table, rows });
        }
        let hosts = match &self.cache {
            Some(cache) => cache.host_states(uuids, cell, now).await,
            None => self.store.host_states(uuids, cell).await,
        };
        let mut hosts = hosts
            .map_err(|e| RemoteError::runtime_error(format!("could not read host states: {e}")))?;
        if let Some(mut index) = candidates_by_rp {
            for h in &mut hosts {
                // Moved, not copied: each compute node uuid names one host state.
                h.allocation_candidates = h
                    .uuid
                    .as_ref()
                    .and_then(|u| index.remove(u))
                    .unwrap_or_default();
            }
        }
        if self.options.load_instance_system_metadata {
            self.store.attach_instance_system_metadata(&mut hosts).await;
        }
        Ok(RequestHosts::States(hosts))
    }

    /// The decision over `hosts` (a table's rows stay with `hosts`, to be freed by
    /// the caller).
    async fn decide<C: Claimer>(
        &self,
        hosts: &mut RequestHosts,
        request: ScheduleRequest,
        claimer: &mut C,
        rng: &mut StdRng,
    ) -> Result<ScheduleOutcome, ScheduleError> {
        match hosts {
            RequestHosts::States(states) => {
                self.scheduler
                    .schedule(std::mem::take(states), request, claimer, rng)
                    .await
            }
            RequestHosts::Table { table, rows } => {
                self.scheduler
                    .schedule_table(table, rows, request, claimer, rng)
                    .await
            }
        }
    }

    /// nova's way: each instance claimed with its own `PUT` during the decision.
    async fn schedule_per_instance(
        &self,
        hosts: &mut RequestHosts,
        request: ScheduleRequest,
        claims: &ClaimContext,
        read_ahead: Option<read_ahead::AllocationReadAhead>,
        rng: &mut StdRng,
    ) -> Result<ScheduleOutcome, ScheduleError> {
        let mut claimer = claims::PlacementClaims::new(
            &self.placement,
            self.placement_index.as_deref(),
            claims.project_id.clone(),
            claims.user_id.clone(),
            claims.global_request_id.clone(),
            &claims.waited,
        )
        .with_read_ahead(read_ahead)
        .with_deadline(claims.deadline)
        .with_earlier_claims(claims.earlier_claims.clone());
        self.decide(hosts, request, &mut claimer, rng).await
    }

    /// The index to batch this request's claims with, or `None` for nova's
    /// per-instance claims. Batching needs new consumers: an instance that already
    /// has a consumer in Placement (an evacuation keeps its source allocation, which
    /// nova's claim doubles; a retried request may have claimed already) must go
    /// through nova's `GET` + `PUT`, which reads and keeps what it holds. One
    /// read-only query of Placement's `consumers` table tells, for all instances at
    /// once; the request spec cannot (an evacuation looks like a boot there). When
    /// that query fails the request is claimed per instance, which is always right.
    async fn batch_index(&self, instance_uuids: Option<&[String]>) -> Option<&LiveIndex> {
        let index = self.placement_index.as_deref()?;
        let uuids = instance_uuids.filter(|u| !u.is_empty())?;
        if self.batch_unsupported.load(Ordering::Relaxed) {
            return None;
        }
        match index.existing_consumers(uuids).await {
            Ok(existing) if existing.is_empty() => Some(index),
            Ok(existing) => {
                debug!(consumers = ?existing, "instances already known to Placement: claims per instance");
                None
            }
            Err(e) => {
                warn!(error = %e, "could not read Placement's consumers; claims per instance");
                None
            }
        }
    }

    /// The decision with its claims recorded in the index, then one `POST
    /// /allocations` for all of them. A refused POST wrote nothing: the index is
    /// refreshed, the candidates asked again and the decision re-run, at most
    /// [`BATCH_CLAIM_ATTEMPTS`] times in all, then NoValidHost. A consumer
    /// generation conflict fails the request (nova's `AllocationUpdateFailed`); a
    /// Placement without the microversion gets nova's per-instance claims.
    ///
    /// Nothing here holds a lock across the POST: other requests decide meanwhile,
    /// seeing this request's claims in the index.
    // Each argument is a distinct part of the request in flight; a struct would
    // only rename them.
    #[allow(clippy::too_many_arguments)]
    async fn schedule_batched(
        &self,
        index: &LiveIndex,
        hosts: &mut RequestHosts,
        request: ScheduleRequest,
        spec_before_candidates: RequestSpec,
        cell: Option<&str>,
        claims: &ClaimContext,
        rng: &mut StdRng,
    ) -> Batched {
        let ScheduleRequest {
            spec,
            instance_uuids,
            use_placement,
            return_alternates,
            now,
        } = request;
        let request = |spec: &RequestSpec| ScheduleRequest {
            spec: spec.clone(),
            instance_uuids: instance_uuids.clone(),
            use_placement,
            return_alternates,
            now,
        };
        let query_options = query::QueryOptions {
            max_placement_results: self.options.max_placement_results,
        };
        // The candidates asked again on a refreshed index, with their hosts' states
        // read again (the decision consumed the first ones; a retry is rare, so the
        // first states are not kept aside).
        let fresh_hosts = || async {
            if let Err(e) = index.refresh().await {
                warn!(error = %e, "could not refresh the placement provider index");
            }
            let mut spec_q = spec_before_candidates.clone();
            let fresh = prefilters::allocation_candidates(
                &mut spec_q,
                &self.store,
                &self.placement,
                Some(index),
                &query_options,
                &self.options.prefilters,
                claims.global_request_id.as_deref(),
            )
            .await;
            let found = match fresh {
                Ok(fresh) => fresh.found,
                Err(e) => {
                    warn!(error = %e, "could not ask for allocation candidates again");
                    return None;
                }
            };
            let by_rp = index_by_provider(found.allocation_requests);
            match self
                .host_states(Some(&found.provider_uuids), cell, now, Some(by_rp))
                .await
            {
                Ok(hosts) => Some(hosts),
                Err(e) => {
                    warn!(error = %e.message, "could not read host states again");
                    None
                }
            }
        };
        let done = |outcome, attempts, batched| Batched {
            outcome,
            attempts,
            batched,
        };
        for attempt in 1..=BATCH_CLAIM_ATTEMPTS {
            if attempt > 1 {
                match fresh_hosts().await {
                    Some(fresh) => *hosts = fresh,
                    None => break,
                }
            }
            let mut claimer = batch_claims::BatchClaims::new(index, claims.deadline);
            let outcome = match self.decide(hosts, request(&spec), &mut claimer, rng).await {
                Ok(outcome) => outcome,
                // The decision itself failed (NoValidHost, a weigher): the claimer
                // took its claims back out of the index.
                Err(e) => return done(Err(e), attempt, true),
            };
            let posted = Instant::now();
            let committed = claimer
                .commit(
                    &self.placement,
                    &claims.project_id,
                    &claims.user_id,
                    claims.global_request_id.as_deref(),
                )
                .await;
            claims.waited.add(posted);
            match committed {
                Ok(()) => {
                    self.batched_claims.fetch_add(1, Ordering::Relaxed);
                    return done(Ok(outcome), attempt, true);
                }
                Err(batch_claims::CommitError::Refused(reason)) => {
                    self.batch_conflicts.fetch_add(1, Ordering::Relaxed);
                    info!(attempt, %reason, "batched claim refused; deciding again on a refreshed index");
                }
                Err(batch_claims::CommitError::Consumer(e)) => {
                    return done(Err(e.into()), attempt, true)
                }
                Err(batch_claims::CommitError::Unsupported) => {
                    warn!("Placement refused the microversion of POST /allocations; claims per instance from now on");
                    self.batch_unsupported.store(true, Ordering::Relaxed);
                    // The refused POST wrote nothing and the claimer took its claims
                    // back out of the index: the same question, claimed nova's way.
                    let Some(fresh) = fresh_hosts().await else {
                        break;
                    };
                    *hosts = fresh;
                    let outcome = self
                        .schedule_per_instance(hosts, request(&spec), claims, None, rng)
                        .await;
                    return done(outcome, attempt + 1, false);
                }
            }
        }
        debug!("Unable to successfully claim against any host.");
        done(
            Err(ScheduleError::NoValidHost {
                reason: "There are not enough hosts available.".into(),
            }),
            BATCH_CLAIM_ATTEMPTS,
            true,
        )
    }

    /// A `select_destinations` that was in flight when the daemon died (a poison
    /// message), answered without being decided again: the claims its earlier
    /// attempts left on its instances are taken back (the same rule as a
    /// redelivered request's, see `redelivery`), then it fails. Only the instance
    /// uuids and `ignore_hosts` are read from it, never the whole request, which
    /// may be what killed the daemon.
    pub async fn abandon_select_destinations(
        &self,
        args: &Map<String, Value>,
        failure: RemoteError,
    ) -> RemoteError {
        let strings = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default()
        };
        let uuids: Vec<String> = strings(args.get("instance_uuids"))
            .into_iter()
            .filter(|u| uuid::Uuid::try_parse(u).is_ok())
            .take(self.options.max_instances_per_request as usize)
            .collect();
        let ignore_hosts = strings(
            args.get("spec_obj")
                .and_then(|s| s.get("nova_object.data"))
                .and_then(|d| d.get("ignore_hosts")),
        );
        if uuids.is_empty() {
            return failure;
        }
        let earlier =
            redelivery::earlier_claims(&self.placement, &self.store, &ignore_hosts, &uuids, None)
                .await;
        if earlier.is_empty() {
            return failure;
        }
        let project_id = args
            .get("spec_obj")
            .and_then(|s| s["nova_object.data"]["project_id"].as_str())
            .unwrap_or_default()
            .to_string();
        let user_id = args
            .get("spec_obj")
            .and_then(|s| s["nova_object.data"]["user_id"].as_str())
            .unwrap_or_default()
            .to_string();
        let waited = ClaimTime::default();
        let mut claims =
            claims::PlacementClaims::new(&self.placement, None, project_id, user_id, None, &waited)
                .with_earlier_claims(earlier);
        if let Err(e) = crate::scheduler::Claimer::release(&mut claims, &[]).await {
            warn!(error = %e, "could not take back the claims of an abandoned request");
        }
        failure
    }

    /// The methods of nova's manager this daemon serves.
    pub fn has_method(&self, method: &str) -> bool {
        matches!(
            method,
            "select_destinations"
                | "update_aggregates"
                | "delete_aggregate"
                | "update_instance_info"
                | "delete_instance_info"
                | "sync_instance_info"
        )
    }

    /// The fanout casts (nova-api's aggregate changes, nova-compute's instance info).
    pub fn cast(&self, method: &str, args: &Map<String, Value>) -> Result<Value, RemoteError> {
        match method {
            "update_aggregates" => {
                let aggregates = args
                    .get("aggregates")
                    .map(Aggregate::list_from_primitive)
                    .transpose()
                    .map_err(|e| RemoteError::value_error(format!("invalid aggregates: {e}")))?
                    .unwrap_or_default();
                info!(aggregates = ?aggregates.iter().map(|a| a.id).collect::<Vec<_>>(), "aggregates updated");
                self.store.update_aggregates(aggregates);
            }
            "delete_aggregate" => {
                let aggregate = args
                    .get("aggregate")
                    .map(Aggregate::from_primitive)
                    .transpose()
                    .map_err(|e| RemoteError::value_error(format!("invalid aggregate: {e}")))?
                    .ok_or_else(|| {
                        RemoteError::type_error(
                            "delete_aggregate() missing required argument: 'aggregate'",
                        )
                    })?;
                info!(aggregate = aggregate.id, "aggregate deleted");
                self.store.delete_aggregate(aggregate.id);
            }
            "update_instance_info" | "delete_instance_info" | "sync_instance_info" => {
                let host = args
                    .get("host_name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| {
                        RemoteError::type_error(format!(
                            "{method}() missing required argument: 'host_name'"
                        ))
                    })?;
                // Without the cache, instances are read from the cell database for each
                // request (nova's path when a host's info is not marked updated).
                let Some(cache) = &self.cache else {
                    debug!(
                        method,
                        host, "instance info cast received; instances are read per request"
                    );
                    return Ok(Value::Null);
                };
                match method {
                    "update_instance_info" => {
                        let instances = instance_list(args.get("instance_info"))?;
                        debug!(host, count = instances.len(), "instance info updated");
                        cache.update_instance_info(host, &instances);
                    }
                    "delete_instance_info" => {
                        let uuid = args
                            .get("instance_uuid")
                            .and_then(Value::as_str)
                            .ok_or_else(|| {
                                RemoteError::type_error(
                                    "delete_instance_info() missing required argument: 'instance_uuid'",
                                )
                            })?;
                        debug!(host, instance = uuid, "instance info deleted");
                        cache.delete_instance_info(host, uuid);
                    }
                    _ => {
                        let uuids = string_list(args.get("instance_uuids"), "instance_uuids")?;
                        if cache.sync_instance_info(host, &uuids) {
                            debug!(host, "Successfully synced instances from host");
                        }
                    }
                }
                // A claim or a deletion: the compute wrote its node just before the
                // cast; read it now, not at the next pass (a periodic sync follows no
                // write).
                if method != "sync_instance_info" {
                    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                        let cache = Arc::clone(cache);
                        let host = host.to_string();
                        runtime.spawn(async move { cache.reread_host(&host).await });
                    }
                }
            }
            _ => debug!(method, "cast ignored"),
        }
        Ok(Value::Null)
    }

    /// Step 11: Selections (objects) or the legacy list of dicts.
    fn encode(&self, outcome: &ScheduleOutcome, return_objects: bool) -> Value {
        let selection = |d: &crate::scheduler::Destination| {
            to_selection(
                &outcome.hosts[d.host],
                d.allocation_request.as_ref(),
                &self.options.default_availability_zone,
            )
        };
        if return_objects {
            Value::Array(
                outcome
                    .destinations
                    .iter()
                    .map(|list| {
                        Value::Array(list.iter().map(|d| selection(d).to_primitive()).collect())
                    })
                    .collect(),
            )
        } else {
            Value::Array(
                outcome
                    .destinations
                    .iter()
                    .filter_map(|list| list.first())
                    .map(|d| selection(d).to_legacy_dict())
                    .collect(),
            )
        }
    }
}

/// From this many host states on, a request's outcome is freed on a blocking thread;
/// a smaller one is freed in place.
const DROP_OFF_PATH_HOSTS: usize = 1000;

/// A request's allocation requests by provider uuid. Fx-hashed: it is built and
/// read once per candidate on every request, and its keys are provider uuids from
/// Placement, not from users.
type CandidatesByProvider = FxHashMap<Arc<str>, Vec<AllocationCandidate>>;

/// The allocation requests under each provider they allocate from, in Placement's
/// order. A request naming several providers (sharing or nested) is listed under
/// each; only those are copied.
fn index_by_provider(allocation_requests: Vec<AllocationCandidate>) -> CandidatesByProvider {
    let mut index = CandidatesByProvider::with_capacity_and_hasher(
        allocation_requests.len(),
        Default::default(),
    );
    for ar in allocation_requests {
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

/// Who the claims of a request are made for, and the time they waited on Placement.
struct ClaimContext {
    project_id: String,
    user_id: String,
    global_request_id: Option<String>,
    waited: ClaimTime,
    /// When the caller stops waiting.
    deadline: Option<Instant>,
    /// Per instance, providers an earlier delivery of the request claimed.
    earlier_claims: FxHashMap<String, Vec<String>>,
}

/// Time a request's claims (and their release) spent waiting on Placement: the
/// part of the schedule phase that is not our own work.
#[derive(Default)]
pub(crate) struct ClaimTime(AtomicU64);

impl ClaimTime {
    pub(crate) fn add(&self, since: Instant) {
        let nanos = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, Ordering::Relaxed);
    }

    fn total(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

/// What [`SchedulerManager::schedule_batched`] did.
struct Batched {
    outcome: Result<ScheduleOutcome, ScheduleError>,
    /// Decisions made (a per-instance fallback counts as one more).
    attempts: u32,
    /// False when it fell back to per-instance claims.
    batched: bool,
}

/// Time spent in each phase of one `select_destinations`.
#[derive(Default)]
struct Phases {
    decode: std::time::Duration,
    prefilters: std::time::Duration,
    placement: std::time::Duration,
    state: std::time::Duration,
    /// Filters, weighers and claims, interleaved per instance as nova runs them.
    schedule: std::time::Duration,
    /// The part of `schedule` spent waiting on Placement's answers to the claims.
    claims: std::time::Duration,
    encode: std::time::Duration,
}

/// An instance uuid with its `instance_type_id` as a cast carries it (see [`instance_list`]).
type InstanceFlavor = (String, Option<Option<i64>>);

/// The instances of an `InstanceList` primitive (or of a single `Instance`) sent by
/// nova-compute's `update_instance_info`: each uuid with its `instance_type_id` when
/// the object carries that field (`Some(None)` for a null one), `None` when it does
/// not.
fn instance_list(value: Option<&Value>) -> Result<Vec<InstanceFlavor>, RemoteError> {
    let bad = || RemoteError::value_error("instance_info must be an InstanceList or Instance");
    let value = value.ok_or_else(bad)?;
    let data = value.get("nova_object.data").ok_or_else(bad)?;
    let instance_of = |obj: &Value| {
        let data = obj.get("nova_object.data")?;
        let uuid = data.get("uuid").and_then(Value::as_str)?.to_string();
        let flavor = match data.get("instance_type_id") {
            None => None,
            Some(Value::Null) => Some(None),
            // An integer field; anything else is not trusted as a flavor id.
            Some(v) => v.as_i64().map(Some),
        };
        Some((uuid, flavor))
    };
    match value.get("nova_object.name").and_then(Value::as_str) {
        Some("Instance") => instance_of(value).map(|i| vec![i]).ok_or_else(bad),
        _ => data
            .get("objects")
            .and_then(Value::as_array)
            .ok_or_else(bad)?
            .iter()
            .map(|o| instance_of(o).ok_or_else(bad))
            .collect(),
    }
}

fn string_list(value: Option<&Value>, name: &str) -> Result<Vec<String>, RemoteError> {
    let bad = || RemoteError::value_error(format!("{name} must be a list of strings"));
    value
        .and_then(Value::as_array)
        .ok_or_else(bad)?
        .iter()
        .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
        .collect()
}

/// nova's `Selection.from_host_state`.
fn to_selection(
    host: &HostState,
    allocation_request: Option<&Value>,
    default_az: &str,
) -> Selection {
    Selection {
        compute_node_uuid: host.uuid.as_deref().unwrap_or_default().to_string(),
        service_host: host.host.to_string(),
        nodename: host.nodename.to_string(),
        cell_uuid: host.cell_uuid.to_string(),
        limits: SchedulerLimits {
            numa_topology: host.limits.get("numa_topology").cloned(),
            // Written by the legacy Core/Ram/Disk filters; SchedulerLimits holds ints.
            vcpu: legacy_limit(host, "vcpu"),
            memory_mb: legacy_limit(host, "memory_mb"),
            disk_gb: legacy_limit(host, "disk_gb"),
        },
        allocation_request: allocation_request.map(pyjson::dumps),
        allocation_request_version: allocation_request
            .map(|_| ALLOCATION_REQUEST_VERSION.to_string()),
        availability_zone: Some(host.availability_zone(default_az)),
    }
}

/// `SchedulerLimits.from_dict`: the float limit truncated by the IntegerField.
fn legacy_limit(host: &HostState, key: &str) -> Option<i64> {
    host.limits
        .get(key)
        .and_then(serde_json::Value::as_f64)
        .map(|f| f.trunc() as i64)
}

fn no_valid_host(reason: String) -> RemoteError {
    RemoteError::no_valid_host(reason)
}

fn schedule_error(e: ScheduleError) -> RemoteError {
    match e {
        ScheduleError::NoValidHost { reason } => no_valid_host(reason),
        ScheduleError::Weigher(w) => RemoteError::nova(w.class, w.message, 404, Map::new()),
        ScheduleError::Claim(c) => {
            let (class, consumer_uuid, error) = match &c {
                ClaimError::AllocationUpdateFailed {
                    consumer_uuid,
                    error,
                } => ("AllocationUpdateFailed", consumer_uuid, error),
                ClaimError::AllocationDeleteFailed {
                    consumer_uuid,
                    error,
                } => ("AllocationDeleteFailed", consumer_uuid, error),
                ClaimError::Stopped { reason } => {
                    return RemoteError::runtime_error(reason.clone());
                }
            };
            let mut kwargs = Map::new();
            kwargs.insert("consumer_uuid".into(), json!(consumer_uuid));
            kwargs.insert("error".into(), json!(error));
            RemoteError::nova(class, c.to_string(), 500, kwargs)
        }
    }
}

/// The arguments of `select_destinations` at RPC 4.3–4.5.
struct SelectArgs {
    spec: RequestSpec,
    instance_uuids: Option<Vec<String>>,
    return_objects: bool,
    return_alternates: bool,
}

impl SelectArgs {
    fn decode(args: &Map<String, Value>) -> Result<Self, RemoteError> {
        // RPC 4.3+ sends `spec_obj`; 4.0–4.2 the legacy dicts (nova's `from_primitives`).
        let spec = match args.get("spec_obj") {
            Some(spec_obj) => RequestSpec::from_primitive(spec_obj)
                .map_err(|e| RemoteError::value_error(format!("invalid spec_obj: {e}")))?,
            None => {
                let request_spec = args.get("request_spec").filter(|v| !v.is_null()).ok_or_else(|| {
                    RemoteError::type_error("select_destinations() needs spec_obj (RPC 4.3+) or request_spec (RPC 4.0)")
                })?;
                let filter_properties = args.get("filter_properties").unwrap_or(&Value::Null);
                RequestSpec::from_legacy(request_spec, filter_properties).map_err(|e| {
                    RemoteError::value_error(format!("invalid legacy request_spec: {e}"))
                })?
            }
        };
        let instance_uuids = match args.get("instance_uuids") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|v| match v.as_str() {
                        // They name Placement consumers (in URLs): nothing but a UUID.
                        Some(s) if uuid::Uuid::try_parse(s).is_ok() => Ok(s.to_string()),
                        Some(s) => Err(RemoteError::value_error(format!(
                            "instance_uuids: {:?} is not a UUID",
                            s.chars().take(64).collect::<String>()
                        ))),
                        None => Err(RemoteError::value_error(
                            "instance_uuids must be a list of strings",
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(_) => {
                return Err(RemoteError::value_error(
                    "instance_uuids must be a list of strings",
                ))
            }
        };
        let flag = |name: &str| {
            args.get(name)
                .map(|v| crate::model::object::flexible_bool(v).unwrap_or(false))
                .unwrap_or(false)
        };
        Ok(SelectArgs {
            spec,
            instance_uuids,
            return_objects: flag("return_objects"),
            return_alternates: flag("return_alternates"),
        })
    }

    /// The instances asked for are within `[nova_scheduler_rs] max_instances_per_request`
    /// (the uuids, or `num_instances` without them: nova's loop runs that often).
    fn check_size(&self, max: u32) -> Result<(), RemoteError> {
        let asked = match &self.instance_uuids {
            Some(uuids) if !uuids.is_empty() => uuids.len() as i64,
            _ => self.spec.num_instances,
        };
        if asked > i64::from(max) {
            return Err(no_valid_host(format!(
                "The request asks for {asked} instances; this scheduler places at most {max} \
                 per request ([nova_scheduler_rs] max_instances_per_request)."
            )));
        }
        Ok(())
    }
}

/// The RPC endpoint wrapper: `Endpoint::call` needs `'static` futures, so it holds an `Arc`.
pub struct ManagerEndpoint(pub Arc<SchedulerManager>);

impl Endpoint for ManagerEndpoint {
    fn namespace(&self) -> Option<&str> {
        None
    }

    fn version(&self) -> (u32, u32) {
        (4, 5)
    }

    fn has_method(&self, method: &str) -> bool {
        self.0.has_method(method)
    }

    fn abandon(&self, call: IncomingCall, crashes: u32) -> EndpointFuture {
        let failure = crate::rpc::dispatcher::poisoned(&call.method, crashes);
        if call.method != "select_destinations" {
            return Box::pin(std::future::ready(Err(failure)));
        }
        let manager = Arc::clone(&self.0);
        Box::pin(async move {
            Err(manager
                .abandon_select_destinations(&call.args, failure)
                .await)
        })
    }

    fn call(&self, call: IncomingCall) -> EndpointFuture {
        let manager = Arc::clone(&self.0);
        let span = info_span!(
            "select_destinations",
            request_id = call.context.request_id().unwrap_or("-")
        );
        if call.method != "select_destinations" {
            let result = manager.cast(&call.method, &call.args);
            return Box::pin(async move { result });
        }
        Box::pin(
            async move {
                let started = Instant::now();
                let delivery = Delivery {
                    deadline: call.deadline,
                    redelivered: call.redelivered,
                };
                let result = manager
                    .select_destinations_delivered(&call.context, &call.args, delivery)
                    .await;
                match &result {
                    Ok(_) => debug!(elapsed_ms = started.elapsed().as_millis() as u64, "select_destinations answered"),
                    Err(e) => info!(elapsed_ms = started.elapsed().as_millis() as u64, class = %e.class, message = %e.message, "select_destinations failed"),
                }
                result
            }
            .instrument(span),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn instance(data: Value) -> Value {
        json!({"nova_object.name": "Instance", "nova_object.namespace": "nova",
               "nova_object.version": "2.8", "nova_object.data": data})
    }

    #[test]
    fn update_instance_info_carries_each_instance_flavor_id_when_set() {
        let list = json!({"nova_object.name": "InstanceList", "nova_object.namespace": "nova",
        "nova_object.version": "2.6", "nova_object.data": {"objects": [
            instance(json!({"uuid": "a", "instance_type_id": 7})),
            instance(json!({"uuid": "b", "instance_type_id": null})),
            instance(json!({"uuid": "c"})),
        ]}});
        assert_eq!(
            instance_list(Some(&list)).unwrap(),
            vec![
                ("a".to_string(), Some(Some(7))),
                ("b".to_string(), Some(None)),
                ("c".to_string(), None),
            ]
        );
        let single = instance(json!({"uuid": "d", "instance_type_id": 3}));
        assert_eq!(
            instance_list(Some(&single)).unwrap(),
            vec![("d".to_string(), Some(Some(3)))]
        );
        assert!(instance_list(Some(&json!({"nova_object.data": {}}))).is_err());
        assert!(instance_list(None).is_err());
    }
}
