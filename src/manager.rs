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
//!
//! `select_destinations` is nova's steps in nova's order (decode, request filters,
//! candidates, host states, schedule, notify, encode), so it reads against nova's
//! `manager.py`; what a call took and decided goes into its record (`call.rs`).

// `Result<_, RemoteError>` is the endpoint's contract (see `rpc::dispatcher`): the
// error is a few strings and JSON values, built only on failure paths.
#![allow(clippy::result_large_err)]

mod args;
mod batch_claims;
mod call;
pub mod candidates;
mod casts;
mod claims;
mod encode;
mod explain;
#[doc(hidden)]
pub mod fuzzing;
mod host_states;
mod notify;
mod read_ahead;
mod redelivery;
pub mod request_filter;
mod schedule;

pub use encode::ALLOCATION_REQUEST_VERSION;
pub use redelivery::Delivery;
pub use request_filter::PrefilterOptions;

use args::SelectArgs;
use call::{Call, Phase, RunningTotals};
use candidates::{AskIndex, AskPlacement, CandidateSource};
use explain::{CandidatesSeen, Rerun};
use host_states::{FromCache, HostStateSource, ReadPerRequest, RequestHosts};
use notify::Notice;
use schedule::{Candidates, ClaimBatched, ClaimPath, ClaimPerInstance, Decider};

use crate::model::{AllocationCandidate, RequestSpec};
use crate::notifications::Notifier;
use crate::observe::listener::{DecisionQuery, Explainer};
use crate::placement::index::LiveIndex;
use crate::placement::{for_caller, query, PlacementClient};
use crate::recording::{AnsweredBy, Recorder};
use crate::rpc::{Endpoint, EndpointFuture, IncomingCall, RemoteError, RequestContext};
use crate::scheduler::compare::Answer;
use crate::scheduler::explain::Explanation;
use crate::scheduler::{ScheduleOutcome, ScheduleRequest, Scheduler};
use crate::state::{HostStateCache, HostStateStore};
use chrono::Utc;
use futures_util::future::BoxFuture;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{Map, Value};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, RwLock};
use tracing::{info_span, warn, Instrument};

/// Options the manager reads, from nova.conf.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// `[scheduler] max_placement_results`.
    pub max_placement_results: u32,
    /// `[DEFAULT] default_availability_zone`.
    pub default_availability_zone: String,
    /// Seed for `host_subset_size` / shuffle randomness; `None` = from entropy.
    pub rng_seed: Option<u64>,
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

/// What the manager decides as: one nova release's filters, weighers and request
/// filters. A call decides with the profile it started with; the daemon replaces the
/// whole profile ([`SchedulerManager::set_profile`]) when the cloud's release changes.
pub struct Profile {
    /// Shared with the records of the calls decided by it, which `explain` runs again.
    pub scheduler: Arc<Scheduler>,
    /// The request filters' options (with the release) and `[workarounds]
    /// disable_fallback_pcpu_query`.
    pub prefilters: PrefilterOptions,
    /// Read the instances' system metadata for ImagePropertiesWeigher (only when
    /// `image_props_weight_multiplier` is not 0.0; nova's weigher reads nothing then).
    pub load_instance_system_metadata: bool,
}

impl Profile {
    /// The release decided as.
    pub fn release(&self) -> crate::release::NovaSeries {
        self.prefilters.release
    }
}

pub struct SchedulerManager {
    profile: RwLock<Arc<Profile>>,
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
    /// Decides without a claim and keeps no consumption (`shadow`).
    read_only: bool,
    /// Where the RPC calls and their answers are recorded (`record_calls`).
    recorder: Option<Arc<Recorder>>,
}

/// A copy of a call decided by [`SchedulerManager::shadow_decide`].
#[derive(Debug)]
pub struct ShadowDecision {
    pub instance_uuids: Vec<String>,
    /// The hosts the request excludes (an evacuation's source host).
    pub ignore_hosts: Vec<String>,
    /// Ours, per instance.
    pub answers: Vec<Answer>,
    /// The filters' and weighers' account of the first instance (every removed
    /// host, every survivor weighed); `None` when there was no candidate question.
    pub account: Option<Explanation>,
    /// The failure it was answered with, if any.
    pub failure: Option<RemoteError>,
}

impl SchedulerManager {
    pub fn new(
        profile: Profile,
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
            }),
            claim_path: Box::new(ClaimPerInstance {
                read_ahead: options.read_allocations_ahead,
            }),
            decisions: explain::DecisionRing::new(options.decision_ring_size),
            read_only: false,
            profile: RwLock::new(Arc::new(profile)),
            store,
            placement,
            options,
            rng: Mutex::new(rng),
            cache: None,
            notifier: None,
            recorder: None,
        }
    }

    /// The profile calls now start with.
    pub fn profile(&self) -> Arc<Profile> {
        Arc::clone(&self.profile.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Calls from now on decide as `profile`; calls in flight finish with theirs.
    pub fn set_profile(&self, profile: Profile) {
        *self.profile.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(profile);
    }

    /// Records every `select_destinations` call that comes over RPC, and its answer.
    pub fn with_recorder(mut self, recorder: Arc<Recorder>) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Sends nova's `scheduler.select_destinations` notifications through `notifier`.
    pub fn with_notifier(mut self, notifier: Arc<Notifier>) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// Serves host states from `cache` (which must share this manager's store).
    pub fn with_cache(mut self, cache: Arc<HostStateCache>) -> Self {
        self.host_state_source = Box::new(FromCache {
            cache: Arc::clone(&cache),
            store: Arc::clone(&self.store),
            table: self.options.indexed_decision,
        });
        self.cache = Some(cache);
        self
    }

    /// Decides without claiming (no Placement write, nothing recorded in the
    /// provider index) and keeps no consumption on cached host states: the
    /// `shadow`'s manager. Set before [`with_placement_index`](Self::with_placement_index).
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self.claim_path = Box::new(schedule::ClaimNothing);
        self
    }

    /// Answers the common allocation-candidate questions from `index`, records
    /// claims in it and batches them where it can (unless read-only).
    pub fn with_placement_index(mut self, index: Arc<LiveIndex>) -> Self {
        self.candidate_source = Arc::new(AskIndex {
            index: Arc::clone(&index),
            placement: Arc::clone(&self.placement),
        });
        if self.read_only {
            return self;
        }
        self.claim_path = Box::new(ClaimBatched {
            index,
            unsupported: AtomicBool::new(false),
            batched: Default::default(),
            conflicts: Default::default(),
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
        self.select_destinations_call(ctx, args, delivery, None)
            .await
    }

    /// One call, recorded from its arrival to its answer; counted under `version`,
    /// the RPC envelope's, when it came over RPC.
    async fn select_destinations_call(
        &self,
        ctx: &RequestContext,
        args: &Map<String, Value>,
        delivery: Delivery,
        version: Option<&str>,
    ) -> Result<Value, RemoteError> {
        let (result, call) = self.run_call(ctx, args, delivery, version).await;
        self.finish_call(call, &result).await;
        result
    }

    /// The call decided, and its record (not yet finished).
    async fn run_call(
        &self,
        ctx: &RequestContext,
        args: &Map<String, Value>,
        delivery: Delivery,
        version: Option<&str>,
    ) -> (Result<Value, RemoteError>, Call) {
        let mut call = Call::new(ctx, version);
        // Placement's questions and claims wait as long as the caller does.
        let result = for_caller(
            delivery.deadline,
            self.select_destinations_traced(ctx, args, delivery, &mut call),
        )
        .await;
        (result, call)
    }

    /// The metrics, the log lines and the ring of recent decisions of a call.
    async fn finish_call(&self, call: Call, result: &Result<Value, RemoteError>) {
        let totals = RunningTotals {
            candidates: self.candidate_source.counts(),
            claims: self.claim_path.totals(),
        };
        call.finish(result, &self.decisions, self.rerun(), totals)
            .await;
    }

    /// A copy of a `select_destinations` call decided without a claim, a reply or a
    /// notification (the manager must be [`read_only`](Self::read_only)), with the
    /// filters' and weighers' account of its first instance over the hosts as they
    /// are right after the decision (which claimed and retained nothing), for
    /// comparing with another scheduler's answer.
    pub async fn shadow_decide(
        &self,
        ctx: &RequestContext,
        args: &Map<String, Value>,
        version: &str,
    ) -> ShadowDecision {
        debug_assert!(self.read_only, "shadow_decide on a manager that claims");
        let (result, call) = self
            .run_call(ctx, args, Delivery::default(), Some(version))
            .await;
        let trace = call.trace();
        let instance_uuids = trace.instance_uuids.clone();
        let ignore_hosts = trace
            .spec
            .as_ref()
            .map(|s| s.ignore_hosts.clone())
            .unwrap_or_default();
        let account = self.rerun().account(trace).await;
        self.finish_call(call, &result).await;
        ShadowDecision {
            answers: answers_of(&result, &instance_uuids),
            instance_uuids,
            ignore_hosts,
            account,
            failure: result.err(),
        }
    }

    /// nova's `SchedulerManager.select_destinations`, step by step, noting in
    /// `call` what the metrics, the log and an explanation need.
    async fn select_destinations_traced(
        &self,
        ctx: &RequestContext,
        args: &Map<String, Value>,
        delivery: Delivery,
        call: &mut Call,
    ) -> Result<Value, RemoteError> {
        let SelectArgs {
            mut spec,
            instance_uuids,
            return_objects,
            return_alternates,
        } = self.decode(args)?;
        let profile = self.profile();
        if profile.scheduler.reads_request_objects() {
            spec.primitive = Some(SelectArgs::primitive_text(args));
        }
        let mut notice = Notice::new(self.notifier.as_deref(), args, &spec, profile.release());
        call.instances(instance_uuids.as_deref());
        let request_id = ctx.global_request_id().or(ctx.request_id());
        call.lap(Phase::Decode);

        self.request_filters(&profile, &mut spec).await?;
        call.lap(Phase::RequestFilters);

        let mut asked = self
            .candidates(
                &profile,
                &mut spec,
                instance_uuids.as_deref(),
                request_id,
                delivery,
            )
            .await?;
        call.candidates(asked.seen.take());
        if asked.found_none() {
            return Err(RemoteError::no_valid_host(String::new()));
        }
        call.lap(Phase::Candidates);

        // nova's `_select_destinations` starts here, with the spec as the request
        // filters left it.
        notice.start(ctx, &spec);
        call.skip();

        let cell = target_cell(&spec);
        let now = Utc::now();
        let mut hosts = self
            .host_states(&profile, &mut spec, &mut asked, cell.as_deref(), now, call)
            .await?;
        call.lap(Phase::HostStates);

        let host_count = hosts.len();
        let last_instance = instance_uuids.as_ref().and_then(|u| u.last()).cloned();
        let consumption = host_states::consumption(&spec.flavor);
        let request = ScheduleRequest {
            spec,
            instance_uuids,
            use_placement: asked.providers.is_some(),
            return_alternates: return_alternates && return_objects,
            now,
        };
        let scheduled = self
            .decider(&profile, ctx, delivery)
            .schedule(&mut hosts, request, asked.claims, cell.as_deref())
            .await;
        call.lap(Phase::Schedule);
        call.scheduled(host_count, &hosts, &scheduled);
        let outcome = scheduled.outcome.map_err(schedule::into_remote)?;
        call.placed(&outcome);

        notice.end(ctx, last_instance.as_deref());
        if !self.read_only {
            self.host_state_source.retain(&outcome, consumption, now);
        }
        call.skip();

        let az = &self.options.default_availability_zone;
        let answer = encode::encode(&outcome, return_objects, az);
        call.lap(Phase::Encode);
        free_off_path(outcome, hosts, host_count);
        Ok(answer)
    }

    /// The call's arguments at its RPC version, within `max_instances_per_request`.
    fn decode(&self, args: &Map<String, Value>) -> Result<SelectArgs, RemoteError> {
        let decoded = SelectArgs::decode(args)?;
        decoded.check_size(self.options.max_instances_per_request)?;
        Ok(decoded)
    }

    /// nova's request filters (`request_filter.process_reqspec`); none on a rebuild.
    async fn request_filters(
        &self,
        profile: &Profile,
        spec: &mut RequestSpec,
    ) -> Result<(), RemoteError> {
        if spec.is_rebuild() {
            return Ok(());
        }
        request_filter::process(spec, &*self.store, &profile.prefilters)
            .await
            .map_err(request_filter::PrefilterError::into_remote)
    }

    /// The allocation candidates (`get_allocation_candidates`, with the PCPU
    /// fallback question), and the instances' allocations read beside them where
    /// the claims read them. Nothing is asked on a rebuild.
    async fn candidates(
        &self,
        profile: &Profile,
        spec: &mut RequestSpec,
        instance_uuids: Option<&[String]>,
        global_request_id: Option<&str>,
        delivery: Delivery,
    ) -> Result<Asked, RemoteError> {
        if spec.is_rebuild() {
            return Ok(Asked::default());
        }
        let spec_before = self.claim_path.spec_to_ask_again(spec);
        let read_ahead = instance_uuids
            .filter(|uuids| !uuids.is_empty() && !delivery.redelivered)
            .and_then(|uuids| {
                self.claim_path
                    .read_ahead(&self.placement, uuids, global_request_id)
            });
        let answer = candidates::allocation_candidates(
            spec,
            &self.store,
            self.candidate_source.as_ref(),
            &self.query_options(profile),
            &profile.prefilters,
            global_request_id,
        )
        .await
        .map_err(request_filter::PrefilterError::into_remote)?;
        let found = answer.found;
        // Shared with the ring of recent decisions, never copied.
        let providers = Arc::new(found.provider_uuids);
        Ok(Asked {
            seen: Some(CandidatesSeen {
                from_index: answer.from_index,
                query: answer.query,
                allocation_requests: found.allocation_requests.len(),
                providers: Arc::clone(&providers),
            }),
            found: Some(found.allocation_requests),
            providers: Some(providers),
            claims: Candidates {
                spec_before,
                from_index: answer.from_index,
                read_ahead,
            },
        })
    }

    /// The host states of the providers Placement returned (every node's on a
    /// rebuild), each with its allocation requests, and the server group's hosts.
    async fn host_states(
        &self,
        profile: &Profile,
        spec: &mut RequestSpec,
        asked: &mut Asked,
        cell: Option<&str>,
        now: chrono::DateTime<Utc>,
        call: &mut Call,
    ) -> Result<RequestHosts, RemoteError> {
        call.request(spec, cell, asked.found.as_ref(), &profile.scheduler);
        let hosts = self
            .host_state_source
            .host_states(
                asked.providers.as_deref().map(Vec::as_slice),
                cell,
                now,
                asked.found.take(),
                profile.load_instance_system_metadata,
            )
            .await?;
        self.store.load_unset_group_hosts(spec).await.map_err(|e| {
            RemoteError::runtime_error(format!("could not load the server group's hosts: {e}"))
        })?;
        Ok(hosts)
    }

    fn query_options(&self, profile: &Profile) -> query::QueryOptions {
        query::QueryOptions {
            max_placement_results: self.options.max_placement_results,
            release: profile.release(),
        }
    }

    fn decider<'a>(
        &'a self,
        profile: &'a Profile,
        ctx: &'a RequestContext,
        delivery: Delivery,
    ) -> Decider<'a> {
        Decider {
            ctx,
            delivery,
            scheduler: &profile.scheduler,
            placement: &self.placement,
            store: &self.store,
            candidate_source: self.candidate_source.as_ref(),
            host_state_source: self.host_state_source.as_ref(),
            claim_path: self.claim_path.as_ref(),
            query_options: self.query_options(profile),
            prefilters: &profile.prefilters,
            system_metadata: profile.load_instance_system_metadata,
            rng: &self.rng,
        }
    }

    fn rerun(&self) -> Rerun<'_> {
        Rerun {
            hosts: self.host_state_source.as_ref(),
        }
    }

    /// The methods of nova's manager this daemon serves.
    pub fn has_method(&self, method: &str) -> bool {
        method == "select_destinations" || casts::serves(method)
    }

    /// The fanout casts (nova-api's aggregate changes, nova-compute's instance info).
    pub fn cast(&self, method: &str, args: &Map<String, Value>) -> Result<Value, RemoteError> {
        casts::cast(&self.store, self.cache.as_ref(), method, args)
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

/// What a `select_destinations` answer (or failure) says of each of `instance_uuids`,
/// in order: the chosen host and node of a Selection list or a legacy host dict; a
/// NoValidHost for all; `Unknown` for any other failure or a missing entry.
pub fn answers_of(result: &Result<Value, RemoteError>, instance_uuids: &[String]) -> Vec<Answer> {
    let entries = match result {
        Ok(Value::Array(entries)) => entries.as_slice(),
        Ok(_) => &[],
        Err(e) if e.class == "NoValidHost" => {
            return vec![Answer::NoValidHost; instance_uuids.len()];
        }
        Err(_) => return vec![Answer::Unknown; instance_uuids.len()],
    };
    (0..instance_uuids.len())
        .map(|i| {
            let chosen = match entries.get(i) {
                // RPC 4.5 with return_objects: a list of Selections, the chosen first.
                Some(Value::Array(list)) => list.first().map(|s| &s["nova_object.data"]),
                Some(dict @ Value::Object(_)) => Some(dict),
                _ => None,
            };
            let field = |v: &Value, keys: &[&str]| {
                keys.iter()
                    .find_map(|k| v.get(*k).and_then(Value::as_str))
                    .map(str::to_string)
            };
            match chosen.and_then(|c| {
                Some((
                    field(c, &["service_host", "host"])?,
                    field(c, &["nodename"])?,
                ))
            }) {
                Some((host, node)) => Answer::Placed { host, node },
                None => Answer::Unknown,
            }
        })
        .collect()
}

/// A `select_destinations` call's request and instance uuids, decoded at its RPC
/// version as the manager decodes them (before any I/O).
pub fn select_destinations_request(
    args: &Map<String, Value>,
    max_instances_per_request: u32,
) -> Result<(RequestSpec, Option<Vec<String>>), RemoteError> {
    let decoded = SelectArgs::decode(args)?;
    decoded.check_size(max_instances_per_request)?;
    Ok((decoded.spec, decoded.instance_uuids))
}

/// From this many host states on, a request's outcome is freed on a blocking thread;
/// a smaller one is freed in place.
const DROP_OFF_PATH_HOSTS: usize = 1000;

/// Frees every candidate host's state (or allocation candidates), which takes
/// milliseconds at thousands of hosts, on a blocking thread, off the reply's path.
fn free_off_path(outcome: ScheduleOutcome, hosts: RequestHosts, host_count: usize) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) if host_count >= DROP_OFF_PATH_HOSTS => {
            runtime.spawn_blocking(move || drop((outcome, hosts)));
        }
        _ => drop((outcome, hosts)),
    }
}

/// The cell a move is bound to, if any.
fn target_cell(spec: &RequestSpec) -> Option<String> {
    spec.requested_destination
        .as_ref()
        .filter(|d| !d.allow_cross_cell_move)
        .and_then(|d| d.cell_uuid.clone())
}

/// What the candidates step found.
#[derive(Default)]
struct Asked {
    /// The question and its answer, as an explanation shows them.
    seen: Option<CandidatesSeen>,
    /// The allocation requests in Placement's order (`None`: Placement was not
    /// asked), until the host states take them.
    found: Option<Vec<AllocationCandidate>>,
    /// The providers Placement returned, in its order.
    providers: Option<Arc<Vec<String>>>,
    /// What the claims need of the question.
    claims: Candidates,
}

impl Asked {
    fn found_none(&self) -> bool {
        self.found.as_ref().is_some_and(Vec::is_empty)
    }
}

impl Explainer for SchedulerManager {
    fn explain<'a>(&'a self, query: DecisionQuery) -> BoxFuture<'a, Option<Value>> {
        Box::pin(async move { self.decisions.answer(query, self.rerun()).await })
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
                let delivery = Delivery {
                    deadline: call.deadline,
                    redelivered: call.redelivered,
                };
                let recorded = manager.recorder.as_ref().map(|r| {
                    let id = r.call(
                        Utc::now(),
                        &call.method,
                        &call.version,
                        call.context.as_map(),
                        &call.args,
                    );
                    (r, id)
                });
                let result = manager
                    .select_destinations_call(
                        &call.context,
                        &call.args,
                        delivery,
                        Some(&call.version),
                    )
                    .await;
                if let Some((recorder, id)) = recorded {
                    let uuids: Vec<String> = call
                        .args
                        .get("instance_uuids")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_string)
                                .collect()
                        })
                        .unwrap_or_default();
                    let answers = answers_of(&result, &uuids);
                    let instances: Vec<(String, Answer)> = uuids.into_iter().zip(answers).collect();
                    recorder.answer(id, AnsweredBy::Daemon, &instances);
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

    #[test]
    fn answers_are_read_from_selections_legacy_dicts_and_failures() {
        let uuids = vec!["u1".to_string(), "u2".to_string()];
        let selection = |host: &str| json!({"nova_object.data": {"service_host": host, "nodename": format!("{host}.node")}});
        let objects = Ok(json!([[selection("a"), selection("b")], [selection("c")]]));
        assert_eq!(
            answers_of(&objects, &uuids),
            vec![
                Answer::Placed {
                    host: "a".into(),
                    node: "a.node".into()
                },
                Answer::Placed {
                    host: "c".into(),
                    node: "c.node".into()
                },
            ]
        );
        let legacy = Ok(json!([{"host": "d", "nodename": "d", "limits": {}}]));
        assert_eq!(
            answers_of(&legacy, &uuids),
            vec![
                Answer::Placed {
                    host: "d".into(),
                    node: "d".into()
                },
                Answer::Unknown
            ]
        );
        let nvh = Err(RemoteError::no_valid_host(String::new()));
        assert_eq!(answers_of(&nvh, &uuids), vec![Answer::NoValidHost; 2]);
        let other = Err(RemoteError::runtime_error("boom".to_string()));
        assert_eq!(answers_of(&other, &uuids), vec![Answer::Unknown; 2]);
    }
}
