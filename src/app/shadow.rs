// SPDX-License-Identifier: Apache-2.0
//! `nova-scheduler-rs shadow`: a read-only scheduler beside the one that answers
//! (nova's own, or this daemon with another nova.conf). It consumes a copy of every
//! call and cast of the `scheduler` topic (see `rpc::tap`), decides each call with
//! the whole pipeline (request filters, candidates, filters, weighers, virtual
//! consumption across the call's instances), then learns where the answering
//! scheduler put each instance (`nova_answer`) and compares (`scheduler::compare`):
//! `agree`, `tie`, `differ` with the first step where the two part, or `unknown`.
//!
//! It claims nothing, replies nothing, sends no notification, registers no
//! `services` row and writes no database row (the host-state store is opened
//! read-only); the casts it consumes (aggregates, instance info) keep its host
//! states following the cloud. What it found is in its metrics
//! (`nova_scheduler_shadow_*`), one WARN line per `differ`, the listener's
//! `/shadow` (printed by `shadow report`) and `/decisions` (`explain`). With
//! `--record FILE` every call is recorded with where the answering scheduler put its
//! instances, for `replay`.

mod nova_answer;
pub mod tally;

use super::{fast_paths, manager_options, readiness_bounds, AppError, Prepared};
use crate::config::Config;
use crate::manager::{SchedulerManager, ShadowDecision};
use crate::observe::health::Health;
use crate::observe::listener::{self, DecisionQuery, Explainer};
use crate::observe::metrics;
use crate::placement::PlacementClient;
use crate::recording::{AnsweredBy, Recorder};
use crate::rpc::envelope::Request;
use crate::rpc::tap::{self, Copy, CopyHandler, TapOptions};
use crate::scheduler::compare::{compare, Answer, Verdict};
use crate::state::HostStateStore;
use chrono::Utc;
use futures_util::future::BoxFuture;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tally::{Example, Tally};
use tracing::{info, info_span, warn, Instrument};

/// What the shadow's command line sets.
#[derive(Debug, Clone)]
pub struct ShadowOptions {
    /// Its queue (`scheduler_shadow.<host>` by default).
    pub queue: String,
    /// Copies the broker keeps for it when it falls behind (the oldest dropped).
    pub max_queue: u32,
    /// How long to wait for the answering scheduler's claims of a call.
    pub settle: Duration,
    /// Record every call and the answering scheduler's answer here (`--record`,
    /// else `[nova_scheduler_rs] record_calls`).
    pub record: Option<std::path::PathBuf>,
}

/// The shadow's parts, shared by the copies in flight.
struct Shadow {
    manager: SchedulerManager,
    placement: Arc<PlacementClient>,
    store: Arc<HostStateStore>,
    tally: Tally,
    recorder: Option<Arc<Recorder>>,
    settle: Duration,
    host_subset_size: usize,
}

/// Runs the shadow until `shutdown` resolves, from what `preflight::prepare` made
/// of nova.conf (the same checks as `run`).
pub async fn run(
    config: Config,
    prepared: Prepared,
    options: ShadowOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), AppError> {
    for warning in config.warnings() {
        warn!("{warning}");
    }
    let Prepared {
        scheduler,
        state: mut state_options,
        placement: placement_options,
        prefilters,
        databases,
        placement_index_url,
        notification_transport: _,
        rpc: rpc_options,
    } = prepared;
    state_options.read_only = true;
    let host_subset_size = scheduler.host_subset_size;
    info!(
        filters = ?scheduler.filters.names(), weighers = ?scheduler.weighers.names(),
        queue = %options.queue, "shadow: pipeline built; it claims, answers and writes nothing"
    );
    let health = Health::new(readiness_bounds(&config));
    let mut observers = vec![tokio::spawn(Arc::clone(&health).beat())];
    let explainer = listener::ExplainerSlot::default();
    if let Some(addr) = config.nova_scheduler_rs.http_listen {
        let listener = listener::bind(addr).await.map_err(|e| {
            AppError::Config(format!("[nova_scheduler_rs] http_listen = {addr}: {e}"))
        })?;
        observers.push(tokio::spawn(listener::serve(
            listener,
            Arc::clone(&health),
            Arc::clone(&explainer),
        )));
    }
    let mut shutdown = Box::pin(shutdown);
    for target in databases {
        health.starting(format!("waiting for the database {}", target.what));
        tokio::select! {
            waited = target.wait() => waited?,
            () = &mut shutdown => return Ok(()),
        }
    }
    health.started();
    let store = Arc::new(HostStateStore::connect(state_options).await?);
    let placement = Arc::new(PlacementClient::new(placement_options)?);
    if let Err(e) = placement.probe().await {
        warn!(error = %e, "Placement cannot serve the shadow's questions yet");
    }
    health.placement(placement.problem());
    let manager = SchedulerManager::new(
        super::profile(&config, scheduler, prefilters),
        Arc::clone(&store),
        Arc::clone(&placement),
        manager_options(&config),
    )
    .read_only();
    // nova's host manager builds its host states afresh for each request (what it
    // placed before is seen once the compute reports it); a read-only manager keeps
    // none of its own decisions either.
    let (manager, _cache, background) =
        fast_paths(&config, manager, &store, placement_index_url.as_deref()).await?;
    let record = options
        .record
        .clone()
        .or_else(|| config.nova_scheduler_rs.record_calls.clone());
    let recorder = match &record {
        Some(path) => Some(super::open_recorder(&config, path)?),
        None => None,
    };
    let shadow = Arc::new(Shadow {
        recorder: recorder.clone(),
        manager,
        placement,
        store,
        tally: Tally::default(),
        settle: options.settle,
        host_subset_size,
    });
    let _ = explainer.set(Arc::clone(&shadow) as Arc<dyn Explainer>);
    let handler: CopyHandler = {
        let shadow = Arc::clone(&shadow);
        Arc::new(move |copy: Copy| {
            let shadow = Arc::clone(&shadow);
            Box::pin(async move { shadow.handle(copy).await }) as BoxFuture<'static, ()>
        })
    };
    let tap = TapOptions {
        queue: options.queue,
        max_length: options.max_queue,
        prefetch: u16::try_from(config.default.executor_thread_pool_size.clamp(1, 1024))
            .unwrap_or(64),
    };
    let served = tap::run(rpc_options, tap, handler, shutdown).await;
    for task in background.into_iter().chain(observers) {
        task.abort();
    }
    // The recording's last records and gzip trailer, before the process exits.
    if let Some(recorder) = recorder {
        recorder.close();
    }
    served?;
    info!("shadow stopped");
    Ok(())
}

impl Shadow {
    /// One copy: a call decided and compared (the comparison waits in its own task
    /// for the answering scheduler's claims), a cast applied.
    async fn handle(self: Arc<Self>, copy: Copy) {
        let request = match copy.request {
            Ok(request) => request,
            Err(e) => {
                self.tally.undecodable();
                warn!(error = %e, "shadow: a copy could not be decoded");
                return;
            }
        };
        if request.method != "select_destinations" {
            if self.manager.has_method(&request.method) {
                if let Err(e) = self.manager.cast(&request.method, &request.args) {
                    warn!(method = %request.method, error = %e.message, "shadow: a cast could not be applied");
                }
                self.tally.cast();
            } else {
                self.tally.undecodable();
            }
            return;
        }
        let span = info_span!(
            "shadow",
            request_id = request.context.request_id().unwrap_or("-")
        );
        let recorded = self.recorder.as_ref().map(|r| {
            r.call(
                Utc::now(),
                &request.method,
                &request.version,
                request.context.as_map(),
                &request.args,
            )
        });
        async move {
            // Boxed: the decision's future is deep, and this one nests it again.
            let decision = Box::pin(self.manager.shadow_decide(
                &request.context,
                &request.args,
                &request.version,
            ))
            .await;
            let lag = copy.received.elapsed();
            metrics().shadow_calls.inc();
            metrics().shadow_lag_seconds.observe(lag.as_secs_f64());
            let comparable = !decision.instance_uuids.is_empty();
            let moves = !decision.ignore_hosts.is_empty();
            self.tally.call(lag, comparable, moves);
            if comparable {
                // The answering scheduler's claims come after ours: wait for them
                // off the copy's path, so the next copies are decided meanwhile.
                let shadow = Arc::clone(&self);
                tokio::spawn(
                    async move { shadow.compare(&request, decision, recorded).await }
                        .instrument(tracing::Span::current()),
                );
            }
        }
        .instrument(span)
        .await;
    }

    /// Learns where the answering scheduler put each instance, records it (under
    /// the call's id in the recording) and compares.
    async fn compare(&self, request: &Request, decision: ShadowDecision, recorded: Option<u64>) {
        let theirs = nova_answer::learn(
            &self.placement,
            &self.store,
            &decision.instance_uuids,
            &decision.ignore_hosts,
            self.settle,
        )
        .await;
        if let (Some(recorder), Some(id)) = (&self.recorder, recorded) {
            let instances: Vec<(String, Answer)> = decision
                .instance_uuids
                .iter()
                .cloned()
                .zip(theirs.iter().cloned())
                .collect();
            recorder.answer(id, AnsweredBy::Nova, &instances);
        }
        let no_account = crate::scheduler::explain::Explanation::default();
        let account = decision.account.as_ref().unwrap_or(&no_account);
        for ((uuid, ours), theirs) in decision
            .instance_uuids
            .iter()
            .zip(&decision.answers)
            .zip(&theirs)
        {
            let verdict = compare(account, ours, theirs, self.host_subset_size);
            metrics().shadow_instance(verdict.label());
            if let Verdict::Differ(step) = &verdict {
                warn!(
                    instance = %uuid,
                    ours = %host_of(ours),
                    theirs = %host_of(theirs),
                    step = %step.key(),
                    detail = %serde_json::to_string(step).unwrap_or_default(),
                    "shadow: the answering scheduler chose differently"
                );
            }
            self.tally.instance(&verdict, || Example {
                at: Utc::now(),
                instance_uuid: uuid.clone(),
                request_id: request.context.request_id().map(str::to_string),
                ours: ours.clone(),
                theirs: theirs.clone(),
                step: match &verdict {
                    Verdict::Differ(step) => step.clone(),
                    _ => unreachable!("examples are kept for differences only"),
                },
            });
        }
        self.tally.compared();
    }
}

fn host_of(answer: &Answer) -> String {
    match answer {
        Answer::Placed { host, node } if host == node => host.clone(),
        Answer::Placed { host, node } => format!("{host} ({node})"),
        Answer::NoValidHost => "NoValidHost".into(),
        Answer::Unknown => "unknown".into(),
    }
}

impl Explainer for Shadow {
    fn explain<'a>(&'a self, query: DecisionQuery) -> BoxFuture<'a, Option<Value>> {
        self.manager.explain(query)
    }

    fn shadow_report(&self) -> Option<Value> {
        Some(self.tally.report())
    }
}

/// `shadow report`: the running shadow's `/shadow`, as text or JSON.
pub async fn report(base_url: &str, json: bool) -> Result<String, String> {
    let url = format!("{}/shadow", base_url.trim_end_matches('/'));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let resp = client
        .get(&url)
        .send()
        .await
        .map_err(|e| format!("cannot reach the shadow's listener at {base_url}: {e}"))?;
    let status = resp.status().as_u16();
    let body: Value = resp
        .json()
        .await
        .map_err(|e| format!("{url}: not a JSON answer: {e}"))?;
    match status {
        200 if json => Ok(serde_json::to_string_pretty(&body).unwrap_or_default() + "\n"),
        200 => Ok(tally::render(&body)),
        _ => Err(format!("{url}: HTTP {status}: {body}")),
    }
}
