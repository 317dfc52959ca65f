// SPDX-License-Identifier: Apache-2.0
//! nova's `_schedule` with its claims: the decision over the request's host states,
//! claiming each instance as nova does (`GET` + `PUT /allocations/{uuid}` during the
//! decision), or, when the provider index answered the request and its instances are
//! new consumers, recording the claims in the index and sending them to Placement
//! in one `POST /allocations` after the decision.

use super::candidates::{self, CandidateSource};
use super::claims::{self, ClaimTime};
use super::host_states::{HostStateSource, RequestHosts};
use super::read_ahead::AllocationReadAhead;
use super::redelivery::Delivery;
use super::request_filter::PrefilterOptions;
use super::{batch_claims, redelivery};
use crate::model::HostState;
use crate::model::RequestSpec;
use crate::placement::index::LiveIndex;
use crate::placement::{query, PlacementClient};
use crate::rpc::{RemoteError, RequestContext};
use crate::scheduler::{
    ClaimError, Claimer, ScheduleError, ScheduleOutcome, ScheduleRequest, Scheduler,
};
use futures_util::future::BoxFuture;
use rand::rngs::StdRng;
use rand::SeedableRng;
use rustc_hash::FxHashMap;
use serde_json::{json, Map};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tracing::{debug, info, warn};

/// Decisions made for one batched request: the first, plus a new one on a refreshed
/// index after each refused `POST /allocations`. Each refusal means another
/// scheduler took the room first; three rounds let a request step past two such
/// races while a request that keeps losing ends in NoValidHost (as nova's
/// per-instance claims end when every host refused) instead of looping.
const BATCH_CLAIM_ATTEMPTS: u32 = 3;

/// How the claims of one request were made (the "select_destinations done" line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ClaimMode {
    /// No claim: no Placement candidates (rebuild) or no instance uuids (RPC < 4.4).
    None,
    /// nova's way: `GET` + `PUT /allocations/{uuid}` per instance.
    PerInstance,
    /// One `POST /allocations` for the whole request.
    Batched,
}

impl ClaimMode {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            ClaimMode::None => "none",
            ClaimMode::PerInstance => "per-instance",
            ClaimMode::Batched => "batched",
        }
    }
}

/// Running totals of a claim path's batched requests and of the batched POSTs
/// Placement refused.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct ClaimTotals {
    pub batched: u64,
    pub conflicts: u64,
}

/// How a request's claims are made.
pub(super) trait ClaimPath: Send + Sync {
    /// The index to batch this request's claims with, or `None` for nova's
    /// per-instance claims.
    fn batch_index<'a: 'b, 'b>(
        &'a self,
        instance_uuids: Option<&'b [String]>,
    ) -> BoxFuture<'b, Option<&'a LiveIndex>>;
    /// The index per-instance claims are recorded in, if any.
    fn index(&self) -> Option<&LiveIndex>;
    /// The spec as the candidates question starts from, kept where a refused claim
    /// asks that question again.
    fn spec_to_ask_again(&self, _spec: &RequestSpec) -> Option<RequestSpec> {
        None
    }
    /// The instances' allocations, read beside the candidates question where this
    /// path's claims read them.
    fn read_ahead(
        &self,
        _placement: &Arc<PlacementClient>,
        _instance_uuids: &[String],
        _global_request_id: Option<&str>,
    ) -> Option<AllocationReadAhead> {
        None
    }
    /// Placement refused the batched claim's microversion.
    fn batch_unsupported(&self) {}
    /// Placement committed a batched claim (`refused: false`) or refused it.
    fn batch_committed(&self, _refused: bool) {}
    fn totals(&self) -> ClaimTotals {
        ClaimTotals::default()
    }
    /// False for a path that claims nothing (the shadow's decisions).
    fn writes(&self) -> bool {
        true
    }
}

/// The shadow's way: no claim at all. Each instance's claim is taken as made, so the
/// decision goes on as nova's does after a successful claim; nothing is written to
/// Placement or recorded in the provider index.
pub(super) struct ClaimNothing;

impl ClaimPath for ClaimNothing {
    fn batch_index<'a: 'b, 'b>(
        &'a self,
        _: Option<&'b [String]>,
    ) -> BoxFuture<'b, Option<&'a LiveIndex>> {
        Box::pin(std::future::ready(None))
    }

    fn index(&self) -> Option<&LiveIndex> {
        None
    }

    fn writes(&self) -> bool {
        false
    }
}

/// Claims taken as made, without a request (see [`ClaimNothing`]).
struct AssumedClaims;

impl Claimer for AssumedClaims {
    async fn claim(
        &mut self,
        _: &str,
        _: &HostState,
        _: &serde_json::Value,
    ) -> Result<bool, ClaimError> {
        Ok(true)
    }

    async fn release(&mut self, _: &[String]) -> Result<(), ClaimError> {
        Ok(())
    }
}

/// nova's way: `GET` + `PUT /allocations/{uuid}` per instance, during the decision.
pub(super) struct ClaimPerInstance {
    /// `[nova_scheduler_rs] read_allocations_ahead`: the `GET`s go out beside the
    /// candidates question.
    pub read_ahead: bool,
}

impl ClaimPath for ClaimPerInstance {
    fn batch_index<'a: 'b, 'b>(
        &'a self,
        _: Option<&'b [String]>,
    ) -> BoxFuture<'b, Option<&'a LiveIndex>> {
        Box::pin(std::future::ready(None))
    }

    fn index(&self) -> Option<&LiveIndex> {
        None
    }

    /// nova's claims read each instance's allocations before their `PUT`; those
    /// reads go out beside the candidates question (after the request filters,
    /// whose work they would only slow).
    fn read_ahead(
        &self,
        placement: &Arc<PlacementClient>,
        instance_uuids: &[String],
        global_request_id: Option<&str>,
    ) -> Option<AllocationReadAhead> {
        self.read_ahead.then(|| {
            AllocationReadAhead::start(
                Arc::clone(placement),
                instance_uuids,
                global_request_id.map(str::to_string),
            )
        })
    }
}

/// With the provider index: the claims recorded in the index during the decision,
/// then one `POST /allocations` for the request, where it can be batched.
pub(super) struct ClaimBatched {
    pub index: Arc<LiveIndex>,
    /// Set when Placement answered a batched claim with 406: per instance from then on.
    pub unsupported: AtomicBool,
    /// Requests claimed with one `POST /allocations`, and POSTs Placement refused.
    pub batched: AtomicU64,
    pub conflicts: AtomicU64,
}

impl ClaimPath for ClaimBatched {
    /// Batching needs new consumers: an instance that already has a consumer in
    /// Placement (an evacuation keeps its source allocation, which nova's claim
    /// doubles; a retried request may have claimed already) must go through nova's
    /// `GET` + `PUT`, which reads and keeps what it holds. One read-only query of
    /// Placement's `consumers` table tells, for all instances at once; the request
    /// spec cannot (an evacuation looks like a boot there). When that query fails
    /// the request is claimed per instance, which is always right.
    fn batch_index<'a: 'b, 'b>(
        &'a self,
        instance_uuids: Option<&'b [String]>,
    ) -> BoxFuture<'b, Option<&'a LiveIndex>> {
        Box::pin(async move {
            let uuids = instance_uuids.filter(|u| !u.is_empty())?;
            if self.unsupported.load(Ordering::Relaxed) {
                return None;
            }
            match self.index.existing_consumers(uuids).await {
                Ok(existing) if existing.is_empty() => Some(&*self.index),
                Ok(existing) => {
                    debug!(consumers = ?existing, "instances already known to Placement: claims per instance");
                    None
                }
                Err(e) => {
                    warn!(error = %e, "could not read Placement's consumers; claims per instance");
                    None
                }
            }
        })
    }

    fn index(&self) -> Option<&LiveIndex> {
        Some(&self.index)
    }

    /// A batched request whose claim is refused asks again (see `schedule_batched`).
    fn spec_to_ask_again(&self, spec: &RequestSpec) -> Option<RequestSpec> {
        Some(spec.clone())
    }

    fn batch_unsupported(&self) {
        self.unsupported.store(true, Ordering::Relaxed);
    }

    fn batch_committed(&self, refused: bool) {
        let counter = if refused {
            &self.conflicts
        } else {
            &self.batched
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn totals(&self) -> ClaimTotals {
        ClaimTotals {
            batched: self.batched.load(Ordering::Relaxed),
            conflicts: self.conflicts.load(Ordering::Relaxed),
        }
    }
}

/// What the decision and its claims of one call use: the call's context and
/// delivery, and the manager's parts.
pub(super) struct Decider<'a> {
    pub ctx: &'a RequestContext,
    pub delivery: Delivery,
    pub scheduler: &'a Scheduler,
    pub placement: &'a Arc<PlacementClient>,
    pub store: &'a crate::state::HostStateStore,
    pub candidate_source: &'a dyn CandidateSource,
    pub host_state_source: &'a dyn HostStateSource,
    pub claim_path: &'a dyn ClaimPath,
    pub query_options: query::QueryOptions,
    pub prefilters: &'a PrefilterOptions,
    /// The profile's `load_instance_system_metadata`.
    pub system_metadata: bool,
    /// Seeds each request's own RNG.
    pub rng: &'a Mutex<StdRng>,
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

/// What the schedule step needs of the candidates step.
#[derive(Default)]
pub(super) struct Candidates {
    pub spec_before: Option<RequestSpec>,
    pub from_index: bool,
    pub read_ahead: Option<AllocationReadAhead>,
}

/// What the schedule step did.
pub(super) struct Scheduled {
    pub outcome: Result<ScheduleOutcome, ScheduleError>,
    pub claim_mode: ClaimMode,
    pub claim_attempts: u32,
    /// Time the claims (and their release) waited on Placement.
    pub claims_waited: std::time::Duration,
}

/// What [`Decider::schedule_batched`] did.
struct Batched {
    outcome: Result<ScheduleOutcome, ScheduleError>,
    /// Decisions made (a per-instance fallback counts as one more).
    attempts: u32,
    /// False when it fell back to per-instance claims.
    batched: bool,
}

impl Decider<'_> {
    /// The decision and its claims: one `POST /allocations` for the whole request
    /// when the provider index answered it and its instances are new consumers,
    /// else nova's claim per instance during the decision.
    pub(super) async fn schedule(
        &self,
        hosts: &mut RequestHosts,
        request: ScheduleRequest,
        candidates: Candidates,
        cell: Option<&str>,
    ) -> Scheduled {
        let (ctx, delivery) = (self.ctx, self.delivery);
        let global_request_id = ctx
            .global_request_id()
            .or(ctx.request_id())
            .map(str::to_string);
        let project_id = request.spec.project_id.clone().unwrap_or_default();
        let user_id = request
            .spec
            .user_id
            .clone()
            .or_else(|| ctx.user_id().map(str::to_string))
            .unwrap_or_default();
        // A request delivered before may find its earlier delivery's claims.
        let earlier_claims = match (
            &request.instance_uuids,
            delivery.redelivered,
            request.use_placement,
        ) {
            (Some(uuids), true, true) => {
                redelivery::earlier_claims(
                    self.placement,
                    self.store,
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
        let claiming =
            request.use_placement && request.instance_uuids.is_some() && self.claim_path.writes();
        let batch_index = match (&candidates.spec_before, candidates.from_index && claiming) {
            (Some(_), true) if claims.earlier_claims.is_empty() => {
                self.claim_path
                    .batch_index(request.instance_uuids.as_deref())
                    .await
            }
            _ => None,
        };
        let mut claim_mode = if claiming {
            ClaimMode::PerInstance
        } else {
            ClaimMode::None
        };
        let mut claim_attempts = 0;
        let outcome = match (batch_index, candidates.spec_before) {
            (Some(index), Some(spec_before)) => {
                let batched = self
                    .schedule_batched(index, hosts, request, spec_before, cell, &claims, &mut rng)
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
                self.schedule_per_instance(hosts, request, &claims, candidates.read_ahead, &mut rng)
                    .await
            }
        };
        Scheduled {
            outcome,
            claim_mode,
            claim_attempts,
            claims_waited: claims.waited.total(),
        }
    }

    /// nova's way: each instance claimed with its own `PUT` during the decision.
    async fn schedule_per_instance(
        &self,
        hosts: &mut RequestHosts,
        request: ScheduleRequest,
        claims: &ClaimContext,
        read_ahead: Option<AllocationReadAhead>,
        rng: &mut StdRng,
    ) -> Result<ScheduleOutcome, ScheduleError> {
        if !self.claim_path.writes() {
            return hosts
                .decide(self.scheduler, request, &mut AssumedClaims, rng)
                .await;
        }
        let mut claimer = claims::PlacementClaims::new(
            self.placement,
            self.claim_path.index(),
            claims.project_id.clone(),
            claims.user_id.clone(),
            claims.global_request_id.clone(),
            &claims.waited,
        )
        .with_read_ahead(read_ahead)
        .with_deadline(claims.deadline)
        .with_earlier_claims(claims.earlier_claims.clone());
        hosts
            .decide(self.scheduler, request, &mut claimer, rng)
            .await
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
        // The candidates asked again on a refreshed index, with their hosts' states
        // read again (the decision consumed the first ones; a retry is rare, so the
        // first states are not kept aside).
        let fresh_hosts = || async {
            if let Err(e) = index.refresh().await {
                warn!(error = %e, "could not refresh the placement provider index");
            }
            let mut spec_q = spec_before_candidates.clone();
            let fresh = candidates::allocation_candidates(
                &mut spec_q,
                self.store,
                self.candidate_source,
                &self.query_options,
                self.prefilters,
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
            match self
                .host_state_source
                .host_states(
                    Some(&found.provider_uuids),
                    cell,
                    now,
                    Some(found.allocation_requests),
                    self.system_metadata,
                )
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
            let outcome = match hosts
                .decide(self.scheduler, request(&spec), &mut claimer, rng)
                .await
            {
                Ok(outcome) => outcome,
                // The decision itself failed (NoValidHost, a weigher): the claimer
                // took its claims back out of the index.
                Err(e) => return done(Err(e), attempt, true),
            };
            let posted = Instant::now();
            let committed = claimer
                .commit(
                    self.placement,
                    &claims.project_id,
                    &claims.user_id,
                    claims.global_request_id.as_deref(),
                )
                .await;
            claims.waited.add(posted);
            crate::observe::metrics().claim(
                "batched",
                match &committed {
                    Ok(()) => "claimed",
                    Err(batch_claims::CommitError::Refused(_)) => "conflict",
                    Err(_) => "failed",
                },
            );
            match committed {
                Ok(()) => {
                    self.claim_path.batch_committed(false);
                    return done(Ok(outcome), attempt, true);
                }
                Err(batch_claims::CommitError::Refused(reason)) => {
                    self.claim_path.batch_committed(true);
                    info!(attempt, %reason, "batched claim refused; deciding again on a refreshed index");
                }
                Err(batch_claims::CommitError::Consumer(e)) => {
                    return done(Err(e.into()), attempt, true)
                }
                Err(batch_claims::CommitError::Unsupported) => {
                    warn!("Placement refused the microversion of POST /allocations; claims per instance from now on");
                    self.claim_path.batch_unsupported();
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
}

/// nova's exception for a failed decision.
pub(super) fn into_remote(e: ScheduleError) -> RemoteError {
    match e {
        ScheduleError::NoValidHost { reason } => RemoteError::no_valid_host(reason),
        // A weigher plugin that fails closed refuses the request as nova refuses one.
        ScheduleError::Weigher(w) if w.class == "NoValidHost" => {
            RemoteError::no_valid_host(w.message)
        }
        ScheduleError::Weigher(w) => RemoteError::nova(w.class, w.message, 404, Map::new()),
        ScheduleError::FilterRaised(e) => RemoteError::new(e.class, e.module, e.message),
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
