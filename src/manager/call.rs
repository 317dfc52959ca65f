// SPDX-License-Identifier: Apache-2.0
//! The record of one `select_destinations` call: how it was delivered, how long each
//! step took, what it decided on and what `explain` needs. It is finished once, so
//! the metrics, the log lines and the ring of recent decisions tell the same story.

use super::explain::{CallTrace, CandidatesSeen, DecisionRing, Outcome, Rerun};
use super::host_states::{index_by_provider, RequestHosts};
use super::schedule::{ClaimTotals, Scheduled};
use crate::model::{AllocationCandidate, RequestSpec};
use crate::observe::metrics::metrics;
use crate::placement::index::PathCounts;
use crate::rpc::{RemoteError, RequestContext};
use crate::scheduler::{ScheduleOutcome, Scheduler};
use chrono::Utc;
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{debug, info};

/// The steps of a call that are timed, nova's steps less the notifications.
#[derive(Debug, Clone, Copy)]
pub(super) enum Phase {
    Decode,
    RequestFilters,
    Candidates,
    HostStates,
    /// Filters, weighers and claims, interleaved per instance as nova runs them.
    Schedule,
    Encode,
}

/// Time spent in each phase.
#[derive(Default)]
struct Phases {
    decode: Duration,
    prefilters: Duration,
    placement: Duration,
    state: Duration,
    schedule: Duration,
    /// The part of `schedule` spent waiting on Placement's answers to the claims.
    claims: Duration,
    encode: Duration,
}

/// Running totals the done line reports beside the call's own figures.
pub(super) struct RunningTotals {
    /// Candidates questions answered by the provider index / sent to Placement.
    pub candidates: PathCounts,
    pub claims: ClaimTotals,
}

/// One `select_destinations` call, from its arrival to its answer.
pub(super) struct Call {
    started: Instant,
    /// The end of the last timed phase.
    mark: Instant,
    /// The RPC envelope's version, under which the call is counted.
    version: Option<String>,
    phases: Phases,
    hosts: usize,
    instances: usize,
    decided_on: &'static str,
    claim_attempts: u32,
    trace: CallTrace,
}

impl Call {
    pub(super) fn new(ctx: &RequestContext, version: Option<&str>) -> Call {
        let started = Instant::now();
        Call {
            started,
            mark: started,
            version: version.map(str::to_string),
            phases: Phases::default(),
            hosts: 0,
            instances: 0,
            decided_on: "copies",
            claim_attempts: 0,
            trace: CallTrace {
                at: Some(Utc::now()),
                request_id: ctx.request_id().map(str::to_string),
                global_request_id: ctx.global_request_id().map(str::to_string),
                claim_mode: "none",
                ..CallTrace::default()
            },
        }
    }

    /// The time since the previous phase ended is `phase`'s.
    pub(super) fn lap(&mut self, phase: Phase) {
        let now = Instant::now();
        let took = now - self.mark;
        self.mark = now;
        let p = &mut self.phases;
        match phase {
            Phase::Decode => p.decode = took,
            Phase::RequestFilters => p.prefilters = took,
            Phase::Candidates => p.placement = took,
            Phase::HostStates => p.state = took,
            Phase::Schedule => p.schedule = took,
            Phase::Encode => p.encode = took,
        }
    }

    /// The time since the previous phase ended is no phase's (the notifications).
    pub(super) fn skip(&mut self) {
        self.mark = Instant::now();
    }

    /// What the call asked and got so far.
    pub(super) fn trace(&self) -> &CallTrace {
        &self.trace
    }

    pub(super) fn instances(&mut self, instance_uuids: Option<&[String]>) {
        self.trace.instance_uuids = instance_uuids.map(<[String]>::to_vec).unwrap_or_default();
    }

    pub(super) fn candidates(&mut self, seen: Option<CandidatesSeen>) {
        self.trace.candidates = seen;
    }

    /// The request as the filters see it; its allocation candidates are kept only
    /// when one of its filters reads them.
    pub(super) fn request(
        &mut self,
        spec: &RequestSpec,
        cell: Option<&str>,
        candidates: Option<&Vec<AllocationCandidate>>,
        scheduler: &Arc<Scheduler>,
    ) {
        self.trace.cell = cell.map(str::to_string);
        self.trace.spec = Some(spec.clone());
        self.trace.decided_by = Some(Arc::clone(scheduler));
        if let Some(candidates) = candidates {
            let filters = scheduler.filters.filters();
            if filters.iter().any(|f| f.reads_allocation_candidates(spec)) {
                self.trace.allocation_candidates = Some(index_by_provider(candidates.clone()));
            }
        }
    }

    /// The decision's hosts (counted before it ran) and its claims.
    pub(super) fn scheduled(&mut self, host_count: usize, hosts: &RequestHosts, s: &Scheduled) {
        self.hosts = host_count;
        self.decided_on = hosts.decided_on();
        self.phases.claims = s.claims_waited;
        self.claim_attempts = s.claim_attempts;
        self.trace.claim_mode = s.claim_mode.as_str();
    }

    pub(super) fn placed(&mut self, outcome: &ScheduleOutcome) {
        self.instances = outcome.destinations.len();
        self.trace.selected = outcome
            .destinations
            .iter()
            .filter_map(|list| list.first())
            .map(|d| outcome.hosts[d.host].host.to_string())
            .collect();
    }

    /// The call answered `result`: a NoValidHost explained (its one INFO line), the
    /// metrics, the done (or failed) line, the decision kept in `ring`.
    pub(super) async fn finish(
        self,
        result: &Result<Value, RemoteError>,
        ring: &DecisionRing,
        rerun: Rerun<'_>,
        totals: RunningTotals,
    ) {
        let outcome = Outcome::of(result);
        let explanation = match outcome {
            Outcome::NoValidHost => {
                let message = result.as_ref().err().map_or("", |e| e.message.as_str());
                Some(rerun.no_valid_host(&self.trace, message).await)
            }
            _ => None,
        };
        let took = self.started.elapsed();
        if let Some(version) = &self.version {
            metrics().call(outcome.metric(), version, took);
        }
        let elapsed_ms = took.as_millis() as u64;
        match result {
            Ok(_) => self.done(took, totals),
            Err(e) if outcome == Outcome::NoValidHost => {
                debug!(elapsed_ms, class = %e.class, message = %e.message, "select_destinations failed")
            }
            Err(e) => {
                info!(elapsed_ms, class = %e.class, message = %e.message, "select_destinations failed")
            }
        }
        let message = result.as_ref().err().map(|e| e.message.clone());
        ring.record(self.trace, outcome, message, explanation);
    }

    /// The phase metrics and the `select_destinations done` line of an answered call.
    fn done(&self, took: Duration, totals: RunningTotals) {
        let p = &self.phases;
        let m = metrics();
        for (phase, took) in [
            ("decode", p.decode),
            ("request_filters", p.prefilters),
            ("candidates", p.placement),
            ("host_states", p.state),
            // The decision less the claims it waited on.
            ("filter_weigh", p.schedule.saturating_sub(p.claims)),
            ("claims", p.claims),
            ("encode", p.encode),
        ] {
            m.phase(phase, took);
        }
        m.candidate_hosts.observe(self.hosts as f64);
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        info!(
            hosts = self.hosts,
            instances = self.instances,
            phase_decode_ms = ms(p.decode),
            phase_prefilters_ms = ms(p.prefilters),
            phase_placement_ms = ms(p.placement),
            phase_state_ms = ms(p.state),
            phase_schedule_ms = ms(p.schedule),
            phase_claims_ms = ms(p.claims),
            phase_encode_ms = ms(p.encode),
            total_ms = ms(took),
            candidates_fast = totals.candidates.fast,
            candidates_fallback = totals.candidates.fallback,
            claim_mode = self.trace.claim_mode,
            decided_on = self.decided_on,
            claim_attempts = self.claim_attempts,
            claims_batched = totals.claims.batched,
            claim_conflicts = totals.claims.conflicts,
            "select_destinations done"
        );
    }
}
