// SPDX-License-Identifier: Apache-2.0
//! "Why NoValidHost?" and "why not this host?": what each `select_destinations`
//! call saw is kept in a bounded ring of recent decisions
//! (`[nova_scheduler_rs] decision_ring_size`), served by the HTTP listener's
//! `/decisions` and printed by `nova-scheduler-rs explain`.
//!
//! A NoValidHost is explained when it happens: the filters are run again over the
//! request's candidates (fresh host states, the request's own allocation
//! candidates) with each removed host and its filter's reason, and one INFO line
//! carries the account. A placed request keeps only what it was asked and what was
//! chosen; asking about it later runs the filters and weighers again on the host
//! states as they are then, and says so (`as_of: now`).

use super::host_states::{CandidatesByProvider, HostStateSource};
use crate::model::{HostState, RequestSpec};
use crate::observe::listener::DecisionQuery;
use crate::observe::metrics::CallResult;
use crate::rpc::RemoteError;
use crate::scheduler::explain::Explanation;
use crate::scheduler::Scheduler;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use tracing::{info, warn};

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    Placed,
    NoValidHost,
    Error,
}

impl Outcome {
    pub(super) fn of(result: &Result<Value, RemoteError>) -> Outcome {
        match result {
            Ok(_) => Outcome::Placed,
            Err(e) if e.class == "NoValidHost" => Outcome::NoValidHost,
            Err(_) => Outcome::Error,
        }
    }

    /// The `result` of the ring and of `explain`.
    pub(super) fn label(self) -> &'static str {
        match self {
            Outcome::Placed => "placed",
            Outcome::NoValidHost => "no_valid_host",
            Outcome::Error => "error",
        }
    }

    pub(super) fn metric(self) -> CallResult {
        match self {
            Outcome::Placed => CallResult::placed,
            Outcome::NoValidHost => CallResult::no_valid_host,
            Outcome::Error => CallResult::error,
        }
    }
}

/// Removed hosts listed per filter in an explanation.
const LISTED_PER_FILTER: usize = 20;
/// Hosts in an explanation's weigher table.
const WEIGHED_HOSTS: usize = 5;

/// What one call asked and got, as the ring keeps it.
#[derive(Debug, Default)]
pub(super) struct CallTrace {
    pub at: Option<DateTime<Utc>>,
    pub request_id: Option<String>,
    pub global_request_id: Option<String>,
    pub instance_uuids: Vec<String>,
    /// The spec as the filters saw it (after the request filters).
    pub spec: Option<RequestSpec>,
    /// The filters and weighers it was decided with (the release's at the time),
    /// set with `spec`: explaining it later runs these, not the ones of now.
    pub decided_by: Option<Arc<Scheduler>>,
    pub cell: Option<String>,
    /// `None`: no candidates question (a rebuild).
    pub candidates: Option<CandidatesSeen>,
    /// The allocation requests, kept only when a filter of this request reads them.
    pub allocation_candidates: Option<CandidatesByProvider>,
    pub selected: Vec<String>,
    pub claim_mode: &'static str,
}

/// The candidates question of a call.
#[derive(Debug, Clone, Default)]
pub(super) struct CandidatesSeen {
    pub from_index: bool,
    pub query: String,
    pub allocation_requests: usize,
    /// The providers returned, in order.
    pub providers: Arc<Vec<String>>,
}

/// A call's record in the ring.
#[derive(Debug)]
struct Decision {
    trace: CallTrace,
    result: Outcome,
    message: Option<String>,
    /// The explanation made when the call failed.
    explanation: Option<Value>,
}

/// The recent decisions, oldest dropped first.
#[derive(Debug)]
pub(super) struct DecisionRing {
    size: usize,
    ring: Mutex<VecDeque<Arc<Decision>>>,
}

impl DecisionRing {
    pub(super) fn new(size: usize) -> DecisionRing {
        DecisionRing {
            size,
            ring: Mutex::new(VecDeque::with_capacity(size.min(1024))),
        }
    }

    fn push(&self, decision: Decision) {
        if self.size == 0 {
            return;
        }
        let evicted = {
            let mut ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
            let evicted = (ring.len() >= self.size)
                .then(|| ring.pop_front())
                .flatten();
            ring.push_back(Arc::new(decision));
            evicted
        };
        // Freeing a decision (its spec, thousands of provider uuids) is kept off the
        // answer's path.
        if let (Some(old), Ok(runtime)) = (evicted, tokio::runtime::Handle::try_current()) {
            runtime.spawn_blocking(move || drop(old));
        }
    }

    /// The newest decision that matches `query`.
    fn find(&self, query: &DecisionQuery) -> Option<Arc<Decision>> {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        ring.iter()
            .rev()
            .find(|d| {
                let t = &d.trace;
                query
                    .instance
                    .as_ref()
                    .is_none_or(|u| t.instance_uuids.iter().any(|i| i == u))
                    && query.request_id.as_ref().is_none_or(|r| {
                        t.request_id.as_deref() == Some(r)
                            || t.global_request_id.as_deref() == Some(r)
                    })
            })
            .cloned()
    }

    fn recent(&self) -> Vec<Value> {
        let ring = self.ring.lock().unwrap_or_else(|p| p.into_inner());
        ring.iter()
            .rev()
            .map(|d| {
                json!({
                    "at": d.trace.at.map(|t| t.to_rfc3339()),
                    "request_id": d.trace.request_id,
                    "instance_uuids": d.trace.instance_uuids,
                    "result": d.result.label(),
                })
            })
            .collect()
    }
}

impl DecisionRing {
    /// Records a finished call, with the explanation made when it failed.
    pub(super) fn record(
        &self,
        mut trace: CallTrace,
        result: Outcome,
        message: Option<String>,
        explanation: Option<Value>,
    ) {
        if explanation.is_some() || self.size == 0 {
            // Kept for the explanation only.
            trace.allocation_candidates = None;
        }
        self.push(Decision {
            trace,
            result,
            message,
            explanation,
        });
    }

    /// `explain`'s answer to `query`: the recent decisions, or the newest one that
    /// matches with its account (the one kept, or `rerun`'s now).
    pub(super) async fn answer(&self, query: DecisionQuery, rerun: Rerun<'_>) -> Option<Value> {
        if query.instance.is_none() && query.request_id.is_none() {
            return Some(json!({ "decisions": self.recent() }));
        }
        let decision = self.find(&query)?;
        let t = &decision.trace;
        let mut out = json!({
            "at": t.at.map(|t| t.to_rfc3339()),
            "request_id": t.request_id,
            "global_request_id": t.global_request_id,
            "instance_uuids": t.instance_uuids,
            "result": decision.result.label(),
            "message": decision.message,
            "selected": t.selected,
            "claim_mode": t.claim_mode,
            "candidates": t.candidates.as_ref().map(|c| json!({
                "source": source(c),
                "providers": c.providers.len(),
                "allocation_requests": c.allocation_requests,
                "query": c.query,
            })),
        });
        let account = match (&decision.explanation, &query.host) {
            (Some(kept), None) => {
                let mut kept = kept.clone();
                kept["as_of"] = json!("decision");
                kept
            }
            (_, host) => rerun.now(t, host.as_deref()).await,
        };
        out["explanation"] = account;
        Some(out)
    }
}

/// A call's filters and weighers run again over its candidates.
#[derive(Clone, Copy)]
pub(super) struct Rerun<'a> {
    pub hosts: &'a dyn HostStateSource,
}

impl Rerun<'_> {
    /// A NoValidHost explained, and logged in one INFO line that carries nova's
    /// message (`No valid host was found. …`).
    pub(super) async fn no_valid_host(&self, trace: &CallTrace, message: &str) -> Value {
        let explained = self.now(trace, None).await;
        let emptied_by = explained["emptied_by"].as_str().unwrap_or("-").to_string();
        info!(
            request_id = trace.request_id.as_deref().unwrap_or("-"),
            instance_uuids = ?trace.instance_uuids,
            candidates = trace.candidates.as_ref().map(|c| c.providers.len()),
            candidates_from = trace.candidates.as_ref().map(|c| source(c)),
            query = trace.candidates.as_ref().map(|c| c.query.as_str()),
            emptied_by,
            filters = %explained["filters"],
            "NoValidHost explained: {message}"
        );
        explained
    }

    /// Every removed host with its filter's reason and every survivor weighed, over
    /// `trace`'s candidates as their host states are now (the shadow's comparison);
    /// `None` without a candidates question or host states.
    pub(super) async fn account(&self, trace: &CallTrace) -> Option<Explanation> {
        let (scheduler, spec, hosts, now) = self.candidate_hosts(trace).await.ok()?;
        scheduler
            .explain(&hosts, spec, now, usize::MAX, usize::MAX)
            .ok()
    }

    /// `trace`'s candidates with their host states as they are now (each with its
    /// allocation candidates where they were kept), or what the explanation says
    /// instead.
    async fn candidate_hosts<'t>(
        &self,
        trace: &'t CallTrace,
    ) -> Result<
        (
            &'t Scheduler,
            &'t RequestSpec,
            Vec<HostState>,
            DateTime<Utc>,
        ),
        Value,
    > {
        let mut out = json!({ "as_of": "now", "filters": [] });
        let Some(seen) = &trace.candidates else {
            out["note"] = json!("no Placement question (a rebuild): not explained");
            return Err(out);
        };
        if seen.providers.is_empty() {
            out["emptied_by"] = json!("Placement");
            return Err(out);
        }
        let (Some(spec), Some(scheduler)) = (&trace.spec, &trace.decided_by) else {
            out["note"] = json!("the request failed before its hosts were read");
            return Err(out);
        };
        let now = Utc::now();
        let mut hosts = match self
            .hosts
            .copies(&seen.providers, trace.cell.as_deref(), now)
            .await
        {
            Ok(hosts) => hosts,
            Err(e) => {
                warn!(error = %e, "could not read host states to explain a decision");
                out["error"] = json!(format!("could not read host states: {e}"));
                return Err(out);
            }
        };
        if let Some(by_rp) = &trace.allocation_candidates {
            for h in &mut hosts {
                if let Some(found) = h.uuid.as_ref().and_then(|u| by_rp.get(u)) {
                    h.allocation_candidates = found.clone();
                }
            }
        }
        Ok((scheduler, spec, hosts, now))
    }

    /// The filters and weighers run again over `trace`'s candidates as their host
    /// states are now; with `host`, only that host.
    async fn now(&self, trace: &CallTrace, host: Option<&str>) -> Value {
        let mut out = json!({ "as_of": "now", "filters": [] });
        let (scheduler, spec, mut hosts, now) = match self.candidate_hosts(trace).await {
            Ok(found) => found,
            Err(said) => return said,
        };
        if let Some(name) = host {
            hosts.retain(|h| *h.host == *name || *h.nodename == *name);
            if hosts.is_empty() {
                out["host"] = json!({
                    "name": name,
                    "verdict": "not a candidate: Placement (or the provider index) did not return it for this request",
                });
                return out;
            }
        }
        let top = if host.is_some() { 1 } else { WEIGHED_HOSTS };
        match scheduler.explain(&hosts, spec, now, LISTED_PER_FILTER, top) {
            Ok(explanation) => {
                fill(&mut out, &explanation);
                if let Some(name) = host {
                    out["host"] = host_verdict(name, &explanation);
                }
            }
            Err(e) => out["error"] = json!(e.to_string()),
        }
        out
    }
}

fn source(seen: &CandidatesSeen) -> &'static str {
    if seen.from_index {
        "index"
    } else {
        "placement"
    }
}

fn fill(out: &mut Value, e: &Explanation) {
    out["filters"] = serde_json::to_value(&e.filters).unwrap_or_default();
    out["survivors"] = json!(e.survivors);
    if let Some(by) = e.emptied_by() {
        out["emptied_by"] = json!(by);
    }
    if let Some(w) = &e.weighing {
        out["weighing"] = json!({
            "weighers": w.weighers,
            "hosts": w.hosts.iter().map(|h| json!({
                "host": h.host,
                "node": h.nodename,
                "weight": h.weight,
                "scores": h.scores.iter().map(|s| json!({
                    "weigher": s.weigher,
                    "raw": s.raw,
                    "normalized": s.normalized,
                    "multiplier": s.multiplier,
                    "contribution": s.contribution,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
    }
}

fn host_verdict(name: &str, e: &Explanation) -> Value {
    match e.filters.iter().find(|f| !f.removed.is_empty()) {
        Some(f) => json!({
            "name": name,
            "verdict": format!("removed by {}", f.filter),
            "reason": f.removed[0].reason,
        }),
        None => json!({ "name": name, "verdict": "passes every filter now" }),
    }
}
