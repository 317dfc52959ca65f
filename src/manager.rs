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

mod args;
mod batch_claims;
pub mod candidates;
mod casts;
mod claims;
mod encode;
mod explain;
#[doc(hidden)]
pub mod fuzzing;
mod host_states;
mod read_ahead;
mod redelivery;
pub mod request_filter;
mod schedule;

pub use encode::ALLOCATION_REQUEST_VERSION;
pub use request_filter::PrefilterOptions;

use args::SelectArgs;
use candidates::{AskIndex, AskPlacement, CandidateSource};
use explain::{CallTrace, CandidatesSeen};
use host_states::{index_by_provider, FromCache, HostStateSource, ReadPerRequest, RequestHosts};
use schedule::{Candidates, ClaimBatched, ClaimPath, ClaimPerInstance};

use crate::model::{AllocationCandidate, RequestSpec};
use crate::notifications::{NotifiedSpec, Notifier, Phase};
use crate::observe::metrics::{metrics, CallResult};
use crate::placement::index::LiveIndex;
use crate::placement::{query, PlacementClient};
use crate::rpc::{Endpoint, EndpointFuture, IncomingCall, RemoteError, RequestContext};
use crate::scheduler::{ClaimError, ScheduleError, ScheduleOutcome, ScheduleRequest, Scheduler};
use crate::state::{Consumption, HostStateCache, HostStateStore};
use chrono::Utc;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tracing::{debug, info, info_span, warn, Instrument};

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
    /// `[nova_scheduler_rs] decision_ring_size`: recent decisions kept for
    /// `explain` (0: none).
    pub decision_ring_size: usize,
}

/// How a call reached the manager: what its delivery says beyond its arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct Delivery {
    /// When the caller stops waiting; no claim is made after it.
    pub deadline: Option<Instant>,
    /// Delivered before to a consumer that did not answer it.
    pub redelivered: bool,
}

pub struct SchedulerManager {
    scheduler: Scheduler,
    store: Arc<HostStateStore>,
    placement: Arc<PlacementClient>,
    options: ManagerOptions,
    rng: Mutex<StdRng>,
    /// The warm host states, which the instance-info casts update; `None` reads the
    /// cell databases per request, as nova.
    cache: Option<Arc<HostStateCache>>,
    /// `scheduler.select_destinations.start` / `.end` notifications.
    notifier: Option<Arc<Notifier>>,
    // The fast paths, each chosen when the manager is built (nova's way unless the
    // provider index or the cache is given).
    /// Who answers the candidates questions: Placement, or the provider index first.
    candidate_source: Arc<dyn CandidateSource>,
    /// Where host states come from: the cells per request, or the warm cache.
    host_state_source: Box<dyn HostStateSource>,
    /// How claims are made: per instance, or batched through the provider index.
    claim_path: Box<dyn ClaimPath>,
    /// Recent decisions, for `explain`.
    decisions: explain::DecisionRing,
    /// Requests claimed with one `POST /allocations`, and POSTs Placement refused.
    batched_claims: AtomicU64,
    batch_conflicts: AtomicU64,
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
            candidate_source: Arc::new(AskPlacement(Arc::clone(&placement))),
            host_state_source: Box::new(ReadPerRequest {
                store: Arc::clone(&store),
                system_metadata: options.load_instance_system_metadata,
            }),
            claim_path: Box::new(ClaimPerInstance),
            decisions: explain::DecisionRing::new(options.decision_ring_size),
            scheduler,
            store,
            placement,
            options,
            rng: Mutex::new(rng),
            cache: None,
            notifier: None,
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
        let system_metadata = self.options.load_instance_system_metadata;
        self.host_state_source = Box::new(FromCache {
            cache: Arc::clone(&cache),
            store: Arc::clone(&self.store),
            // The table has no system metadata; requests that need it get copies.
            table: self.options.indexed_decision && !system_metadata,
            system_metadata,
        });
        self.cache = Some(cache);
        self
    }

    /// Answers the common allocation-candidate questions from `index`, records
    /// claims in it and batches them where it can.
    pub fn with_placement_index(mut self, index: Arc<LiveIndex>) -> Self {
        self.candidate_source = Arc::new(AskIndex {
            index: Arc::clone(&index),
            placement: Arc::clone(&self.placement),
        });
        self.claim_path = Box::new(ClaimBatched {
            index,
            unsupported: AtomicBool::new(false),
        });
        self
    }

    /// `select_destinations` as nova 34's manager runs it (nova's `nova/scheduler/manager.py`),
    /// for a call delivered once and without a deadline.
    pub async fn select_destinations(
        &self,
        ctx: &RequestContext,
        args: &Map<String, Value>,
    ) -> Result<Value, RemoteError> {
        self.select_destinations_delivered(ctx, args, Delivery::default())
            .await
    }

    /// `select_destinations` for a call delivered as `delivery` says, recorded in
    /// the ring of recent decisions (a NoValidHost explained first).
    pub async fn select_destinations_delivered(
        &self,
        ctx: &RequestContext,
        args: &Map<String, Value>,
        delivery: Delivery,
    ) -> Result<Value, RemoteError> {
        let mut trace = CallTrace {
            at: Some(Utc::now()),
            request_id: ctx.request_id().map(str::to_string),
            global_request_id: ctx.global_request_id().map(str::to_string),
            claim_mode: "none",
            ..CallTrace::default()
        };
        let result = self
            .select_destinations_traced(ctx, args, delivery, &mut trace)
            .await;
        let (outcome, message) = match &result {
            Ok(_) => ("placed", None),
            Err(e) if e.class == "NoValidHost" => ("no_valid_host", Some(e.message.clone())),
            Err(e) => ("error", Some(e.message.clone())),
        };
        self.record_decision(trace, outcome, message).await;
        result
    }

    /// nova's `SchedulerManager.select_destinations`, step by step, noting in
    /// `trace` what an explanation needs.
    async fn select_destinations_traced(
        &self,
        ctx: &RequestContext,
        args: &Map<String, Value>,
        delivery: Delivery,
        trace: &mut CallTrace,
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
        let SelectArgs {
            mut spec,
            instance_uuids,
            return_objects,
            return_alternates,
        } = args;
        trace.instance_uuids = instance_uuids.clone().unwrap_or_default();
        let aggregates_before = spec
            .requested_destination
            .as_ref()
            .map(|d| d.aggregates.clone());
        let global_request_id = ctx
            .global_request_id()
            .or(ctx.request_id())
            .map(str::to_string);

        // The request filters and the Placement question (none on a rebuild).
        let asked = self
            .ask_for_candidates(
                &mut spec,
                instance_uuids.as_deref(),
                global_request_id.as_deref(),
                delivery,
                &mut phases,
                trace,
            )
            .await?;
        // nova's `_select_destinations` starts here, with the spec as the request
        // filters left it.
        let mut notified = notifier.zip(raw_spec).map(|(n, raw)| {
            let mut notified = NotifiedSpec::new(raw);
            let aggregates_after = spec
                .requested_destination
                .as_ref()
                .map(|d| d.aggregates.clone());
            if aggregates_after != aggregates_before {
                notified.set_destination_aggregates(&aggregates_after.unwrap_or_default());
            }
            n.select_destinations(ctx, &mut notified, Phase::Start);
            (n, notified)
        });

        // Host states for the providers Placement returned (all nodes on rebuild).
        let cell = spec
            .requested_destination
            .as_ref()
            .filter(|d| !d.allow_cross_cell_move)
            .and_then(|d| d.cell_uuid.clone());
        let mark = Instant::now();
        let now = Utc::now();
        let use_placement = asked.candidates.is_some();
        trace.cell = cell.clone();
        trace.spec = Some(spec.clone());
        if let Some(candidates) = &asked.candidates {
            let filters = self.scheduler.filters.filters();
            if filters.iter().any(|f| f.reads_allocation_candidates(&spec)) {
                trace.allocation_candidates = Some(index_by_provider(candidates.clone()));
            }
        }
        let mut hosts = self
            .host_state_source
            .host_states(
                asked.compute_uuids.as_deref().map(Vec::as_slice),
                cell.as_deref(),
                now,
                asked.candidates,
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

        // nova's `_schedule`: filter, weigh, pick and claim, instance by instance.
        let last_instance = instance_uuids.as_ref().and_then(|u| u.last()).cloned();
        let request = ScheduleRequest {
            spec,
            instance_uuids,
            use_placement,
            return_alternates: return_alternates && return_objects,
            now,
        };
        let flavor = &request.spec.flavor;
        let consumption = Consumption {
            memory_mb: flavor.memory_mb,
            root_gb: flavor.root_gb,
            ephemeral_gb: flavor.ephemeral_gb,
            vcpus: flavor.vcpus,
        };
        let mark = Instant::now();
        let scheduled = self
            .schedule(
                ctx,
                &mut hosts,
                request,
                Candidates {
                    spec_before: asked.spec_before,
                    from_index: asked.from_index,
                    read_ahead: asked.read_ahead,
                },
                cell.as_deref(),
                global_request_id,
                delivery,
            )
            .await;
        phases.schedule = mark.elapsed();
        phases.claims = scheduled.claims_waited;
        trace.claim_mode = scheduled.claim_mode.as_str();
        let outcome = scheduled.outcome.map_err(schedule_error)?;
        trace.selected = outcome
            .destinations
            .iter()
            .filter_map(|list| list.first())
            .map(|d| outcome.hosts[d.host].host.to_string())
            .collect();

        if let Some((n, notified)) = notified.as_mut() {
            // nova's `_schedule` set `spec_obj.instance_uuid` to each instance in turn.
            if let Some(uuid) = &last_instance {
                notified.set_instance_uuid(uuid);
            }
            n.select_destinations(ctx, notified, Phase::End);
        }
        self.retain_consumption(&outcome, consumption, now);
        let mark = Instant::now();
        let answer = encode::encode(
            &outcome,
            return_objects,
            &self.options.default_availability_zone,
        );
        phases.encode = mark.elapsed();
        let instances = outcome.destinations.len();
        let decided_on = match &hosts {
            RequestHosts::States(_) => "copies",
            RequestHosts::Table { .. } => "table",
        };
        // Freeing every candidate host's state (or allocation candidates) takes
        // milliseconds at thousands of hosts; it runs on a blocking thread, off the
        // reply's path.
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) if host_count >= DROP_OFF_PATH_HOSTS => {
                runtime.spawn_blocking(move || drop((outcome, hosts)));
            }
            _ => drop((outcome, hosts)),
        }
        let m = metrics();
        for (phase, took) in [
            ("decode", phases.decode),
            ("request_filters", phases.prefilters),
            ("candidates", phases.placement),
            ("host_states", phases.state),
            // The decision less the claims it waited on.
            (
                "filter_weigh",
                phases.schedule.saturating_sub(phases.claims),
            ),
            ("claims", phases.claims),
            ("encode", phases.encode),
        ] {
            m.phase(phase, took);
        }
        m.candidate_hosts.observe(host_count as f64);
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
        // Running totals of the candidate questions answered locally / by Placement.
        let counts = self
            .claim_path
            .index()
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
            claim_mode = scheduled.claim_mode.as_str(),
            decided_on,
            claim_attempts = scheduled.claim_attempts,
            claims_batched = self.batched_claims.load(Ordering::Relaxed),
            claim_conflicts = self.batch_conflicts.load(Ordering::Relaxed),
            "select_destinations done"
        );
        Ok(answer)
    }

    /// nova's request filters (`request_filter.process_reqspec`), then the
    /// allocation candidates (`get_allocation_candidates`, with the PCPU fallback
    /// question), indexed by provider. Nothing is asked on a rebuild. Without
    /// candidates the request is NoValidHost.
    async fn ask_for_candidates(
        &self,
        spec: &mut RequestSpec,
        instance_uuids: Option<&[String]>,
        global_request_id: Option<&str>,
        delivery: Delivery,
        phases: &mut Phases,
        trace: &mut CallTrace,
    ) -> Result<Asked, RemoteError> {
        if spec.is_rebuild() {
            return Ok(Asked::default());
        }
        let mark = Instant::now();
        request_filter::process(spec, &self.store, &self.options.prefilters)
            .await
            .map_err(request_filter::PrefilterError::into_remote)?;
        phases.prefilters = mark.elapsed();
        let mark = Instant::now();
        let query_options = query::QueryOptions {
            max_placement_results: self.options.max_placement_results,
        };
        // With the index, the spec as the candidates question starts from: a batched
        // request whose claim is refused asks again (see `schedule_batched`).
        let spec_before = self.claim_path.index().is_some().then(|| spec.clone());
        // nova's claims read each instance's allocations before their PUT; asking
        // Placement for the candidates, those reads go out now, beside that
        // question (after the request filters, whose work they would only slow).
        let read_ahead = instance_uuids
            .filter(|uuids| {
                !uuids.is_empty()
                    && self.options.read_allocations_ahead
                    && self.claim_path.index().is_none()
                    && !delivery.redelivered
            })
            .map(|uuids| {
                read_ahead::AllocationReadAhead::start(
                    Arc::clone(&self.placement),
                    uuids,
                    global_request_id.map(str::to_string),
                )
            });
        let answer = candidates::allocation_candidates(
            spec,
            &self.store,
            self.candidate_source.as_ref(),
            &query_options,
            &self.options.prefilters,
            global_request_id,
        )
        .await
        .map_err(request_filter::PrefilterError::into_remote)?;
        let found = answer.found;
        // Shared with the ring of recent decisions, never copied.
        let providers = Arc::new(found.provider_uuids);
        trace.candidates = Some(CandidatesSeen {
            from_index: answer.from_index,
            query: answer.query,
            allocation_requests: found.allocation_requests.len(),
            providers: Arc::clone(&providers),
        });
        if found.allocation_requests.is_empty() {
            return Err(no_valid_host(String::new()));
        }
        phases.placement = mark.elapsed();
        Ok(Asked {
            candidates: Some(found.allocation_requests),
            compute_uuids: Some(providers),
            spec_before,
            from_index: answer.from_index,
            read_ahead,
        })
    }

    /// Our deliberate difference from nova: the consumption of the chosen hosts is
    /// kept on the cached host states until their compute node rows move.
    fn retain_consumption(
        &self,
        outcome: &ScheduleOutcome,
        consumption: Consumption,
        now: chrono::DateTime<Utc>,
    ) {
        let Some(cache) = &self.cache else {
            return;
        };
        for chosen in outcome.destinations.iter().filter_map(|list| list.first()) {
            let host = &outcome.hosts[chosen.host];
            if let Some(uuid) = &host.uuid {
                cache.retain(&host.cell_uuid, uuid, consumption, now);
            }
        }
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
        let waited = claims::ClaimTime::default();
        let mut claims =
            claims::PlacementClaims::new(&self.placement, None, project_id, user_id, None, &waited)
                .with_earlier_claims(earlier);
        if let Err(e) = crate::scheduler::Claimer::release(&mut claims, &[]).await {
            warn!(error = %e, "could not take back the claims of an abandoned request");
        }
        failure
    }
}

/// From this many host states on, a request's outcome is freed on a blocking thread;
/// a smaller one is freed in place.
const DROP_OFF_PATH_HOSTS: usize = 1000;

/// What the candidates step found.
#[derive(Default)]
struct Asked {
    /// The allocation requests in Placement's order (`None`: Placement was not asked).
    candidates: Option<Vec<AllocationCandidate>>,
    /// The providers Placement returned, in its order.
    compute_uuids: Option<Arc<Vec<String>>>,
    /// The spec as the candidates question started from (with the provider index).
    spec_before: Option<RequestSpec>,
    /// The provider index answered every question.
    from_index: bool,
    /// The instances' allocations, read beside the question.
    read_ahead: Option<read_ahead::AllocationReadAhead>,
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
                let outcome = match &result {
                    Ok(_) => CallResult::placed,
                    Err(e) if e.class == "NoValidHost" => CallResult::no_valid_host,
                    Err(_) => CallResult::error,
                };
                metrics().call(outcome, &call.version, started.elapsed());
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
