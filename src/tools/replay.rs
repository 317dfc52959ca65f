// SPDX-License-Identifier: Apache-2.0
//! `nova-scheduler-rs replay --recording FILE --snapshot SNAP`: the calls of a
//! recording (`[nova_scheduler_rs] record_calls`) decided again, in recording order,
//! on a snapshot with nova.conf's filters and weighers, as `simulate --snapshot`
//! decides (nova's request filters, the candidates computed as the provider index
//! computes them, claims in memory, host states consumed decision after decision),
//! and each instance compared with the recorded answer: where the two part, the
//! first step of the decision at which they do.
//!
//! The snapshot is the cloud of every call: liveness is judged at its `taken_at`,
//! and nothing changes between calls but the replay's own placements. On the cloud
//! the recording was made on, with the same configuration, it gives the recorded
//! answers wherever the cloud did not change between calls.

use super::plan::MemoryClaims;
use super::snapshot::{candidates, provider_index, Snapshot};
use super::{boot_spec, describe_flavor};
use crate::config::{Config, ReplayArgs};
use crate::manager::{request_filter, select_destinations_request, PrefilterOptions};
use crate::model::{HostState, RequestSpec};
use crate::placement::index::ProviderIndex;
use crate::recording::{self, RecordedCall, Recording};
use crate::scheduler::compare::{compare, Answer, Step, Verdict};
use crate::scheduler::explain::Explanation;
use crate::scheduler::{HostTable, RowCandidates, ScheduleError, ScheduleRequest, Scheduler};
use crate::state::StateSnapshot;
use chrono::{DateTime, Utc};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// Examples shown per differing step unless `--show` says otherwise.
pub const DEFAULT_SHOW: usize = 10;

/// What the replay found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub recordings: Vec<String>,
    pub snapshot: String,
    /// The release decided as (`2025.1`): `nova_release`, else the snapshot's.
    pub nova_release: String,
    pub filters: Vec<String>,
    pub weighers: Vec<String>,
    /// `select_destinations` calls in the recording.
    pub calls: usize,
    /// Calls decided again (the others are in `decode_errors` or `not_replayed`).
    pub calls_replayed: usize,
    /// Instances decided again and compared.
    pub instances: usize,
    /// Instances given the recorded answer.
    pub identical: usize,
    pub changed: Changed,
    /// The changes of verdict `differ`, by first differing step (`Step::key`),
    /// most frequent first.
    pub steps: Vec<StepGroup>,
    pub decode_errors: Vec<CallProblem>,
    /// Calls that decode but cannot be decided offline (a rebuild, a question the
    /// provider index cannot answer, an error of the decision other than NoValidHost).
    pub not_replayed: Vec<CallProblem>,
    /// What the recording's reader ignored.
    pub warnings: Vec<String>,
    pub packing: Packing,
    pub seconds: f64,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Changed {
    pub tie: usize,
    pub differ: usize,
    pub unknown: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepGroup {
    pub step: String,
    pub count: usize,
    pub examples: Vec<Example>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Example {
    pub call_id: u64,
    pub instance_uuid: String,
    pub recorded: String,
    pub replayed: String,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct CallProblem {
    pub call_id: u64,
    pub at: DateTime<Utc>,
    pub error: String,
}

/// The cloud after the replay, as a cell-compaction view.
#[derive(Debug, Clone, Serialize)]
pub struct Packing {
    /// Compute nodes holding at least one instance at the end: the snapshot's own
    /// (its instance rows) or placed by the replay.
    pub hosts_used: usize,
    pub hosts: usize,
    pub definition: &'static str,
    /// The largest flavor of the snapshot (by memory, then VCPUs) that one more
    /// instance could still be placed with, and on how many nodes.
    pub largest_placeable_flavor: Option<String>,
    pub nodes_for_it: usize,
}

const USED: &str = "a compute node is used when it holds at least one instance at the end \
                    of the replay: one of the snapshot's or one the replay placed there";

/// Runs `replay`; returns the process exit code.
pub async fn run(args: &ReplayArgs, config: Config) -> i32 {
    let result = async {
        let recording = recording::read(&args.recordings).map_err(|e| e.to_string())?;
        let snapshot = Snapshot::read(&args.snapshot)?;
        let mut report = replay(
            &recording,
            &snapshot,
            &config,
            args.show.unwrap_or(DEFAULT_SHOW),
            args.seed.unwrap_or(42),
        )
        .await?;
        report.recordings = args
            .recordings
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        report.snapshot = args.snapshot.display().to_string();
        Ok::<_, String>(report)
    }
    .await;
    match result {
        Ok(report) if args.json => match serde_json::to_string_pretty(&report) {
            Ok(text) => {
                println!("{text}");
                0
            }
            Err(e) => {
                eprintln!("replay: {e}");
                1
            }
        },
        Ok(report) => {
            print!("{}", text(&report));
            0
        }
        Err(e) => {
            eprintln!("replay: {e}");
            1
        }
    }
}

/// What the decision needs besides the snapshot, from nova.conf.
struct Setup {
    prefilters: PrefilterOptions,
    max_placement_results: u32,
    max_instances_per_request: u32,
    host_subset_size: usize,
}

/// Replays `recording` on `snapshot` with `config`'s filters and weighers.
pub async fn replay(
    recording: &Recording,
    snapshot: &Snapshot,
    config: &Config,
    show: usize,
    seed: u64,
) -> Result<Report, String> {
    let started = Instant::now();
    let release = snapshot.release_for(config)?;
    let scheduler = crate::app::build_scheduler_as(config, release).map_err(|e| e.to_string())?;
    let setup = Setup {
        prefilters: crate::app::prefilter_options_as(config, release).map_err(|e| e.to_string())?,
        max_placement_results: config.scheduler.max_placement_results,
        max_instances_per_request: config.guards.max_instances_per_request,
        host_subset_size: scheduler.host_subset_size,
    };
    let names = |v: Vec<&'static str>| v.into_iter().map(str::to_string).collect::<Vec<_>>();
    let filters = names(scheduler.filters.names());
    let weighers = names(scheduler.weighers.names());
    let mut index = provider_index(snapshot);
    let mut replayer = Replayer::new(scheduler, snapshot.state.host_states(), seed);
    let now = snapshot.taken_at;
    let mut report = Report {
        recordings: Vec::new(),
        snapshot: String::new(),
        nova_release: release.name().to_string(),
        filters,
        weighers,
        calls: 0,
        calls_replayed: 0,
        instances: 0,
        identical: 0,
        changed: Changed::default(),
        steps: Vec::new(),
        decode_errors: Vec::new(),
        not_replayed: Vec::new(),
        warnings: recording.warnings.clone(),
        packing: Packing {
            hosts_used: 0,
            hosts: 0,
            definition: USED,
            largest_placeable_flavor: None,
            nodes_for_it: 0,
        },
        seconds: 0.0,
    };
    let mut groups: BTreeMap<String, StepGroup> = BTreeMap::new();
    for call in recording
        .calls
        .iter()
        .filter(|c| c.method == "select_destinations")
    {
        report.calls += 1;
        let problem = |error: String| CallProblem {
            call_id: call.id,
            at: call.at,
            error,
        };
        let (spec, uuids) =
            match select_destinations_request(&call.args, setup.max_instances_per_request) {
                Ok(decoded) => decoded,
                Err(e) => {
                    report
                        .decode_errors
                        .push(problem(format!("{}: {}", e.class, e.message)));
                    continue;
                }
            };
        // The candidates are kept for an explanation only where there is an answer
        // to compare with.
        let keep_candidates = call.reference_answer().is_some();
        let mut decided = match replayer
            .decide(
                &snapshot.state,
                &mut index,
                &setup,
                spec,
                uuids,
                now,
                keep_candidates,
            )
            .await
        {
            Ok(d) => d,
            Err(e) => {
                report.not_replayed.push(problem(e));
                continue;
            }
        };
        report.calls_replayed += 1;
        let consumed = std::mem::take(&mut decided.consumed);
        compare_call(
            call,
            decided,
            &replayer.scheduler,
            &replayer.table,
            &setup,
            now,
            show,
            &mut report,
            &mut groups,
        );
        replayer.consume(consumed);
    }
    let mut steps: Vec<StepGroup> = groups.into_values().collect();
    steps.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.step.cmp(&b.step)));
    report.steps = steps;
    report.packing = packing(&replayer, &index, snapshot, &setup, now).await;
    report.seconds = started.elapsed().as_secs_f64();
    Ok(report)
}

/// One call decided again.
struct Decided {
    spec: RequestSpec,
    uuids: Vec<String>,
    /// Our answer per instance, in `uuids` order.
    ours: Vec<Answer>,
    /// The request's candidates (when kept), from which its hosts as they were are
    /// rebuilt when an explanation is needed, before `consumed` is applied.
    candidates: Option<RowCandidates>,
    /// The chosen hosts' rows after the call's consumption.
    consumed: Vec<(usize, Arc<HostState>)>,
}

/// Decides calls one after the other over a [`HostTable`] as the daemon's indexed
/// decision does: each decision sees the virtual consumption of the earlier ones
/// (the rows of the hosts it chose are replaced, as the daemon's warm cache keeps
/// them with `retain_virtual_consumption`), claims are taken from the provider
/// index in memory.
struct Replayer {
    scheduler: Scheduler,
    table: HostTable,
    rng: StdRng,
}

impl Replayer {
    /// `hosts` in nova's host order, as [`StateSnapshot::host_states`] gives them.
    fn new(scheduler: Scheduler, hosts: Vec<HostState>, seed: u64) -> Self {
        Replayer {
            scheduler,
            table: HostTable::new(hosts),
            rng: StdRng::seed_from_u64(seed),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn decide(
        &mut self,
        state: &StateSnapshot,
        index: &mut ProviderIndex,
        setup: &Setup,
        mut spec: RequestSpec,
        uuids: Option<Vec<String>>,
        now: DateTime<Utc>,
        keep_candidates: bool,
    ) -> Result<Decided, String> {
        if spec.is_rebuild() {
            return Err("a rebuild: decided on the instance's own host, not replayed".into());
        }
        let uuids = match uuids {
            Some(u) if !u.is_empty() => u,
            // Calls without uuids (RPC < 4.3, or none sent) get uuids of their own.
            _ => (0..spec.num_instances.max(1))
                .map(|_| uuid::Uuid::new_v4().to_string())
                .collect(),
        };
        let nvh = |spec: RequestSpec, uuids: Vec<String>| Decided {
            ours: vec![Answer::NoValidHost; uuids.len()],
            spec,
            uuids,
            candidates: None,
            consumed: Vec::new(),
        };
        match request_filter::process(&mut spec, state, &setup.prefilters).await {
            Ok(()) => {}
            Err(request_filter::PrefilterError::NoValidHost(_)) => return Ok(nvh(spec, uuids)),
            Err(e) => return Err(format!("request filters: {}", e.into_remote().message)),
        }
        let found = candidates(
            &mut spec,
            index,
            &setup.prefilters,
            setup.max_placement_results,
        )?;
        if found.allocation_requests.is_empty() {
            return Ok(nvh(spec, uuids));
        }
        let table = &self.table;
        let mut rows = RowCandidates::from_candidates(
            table.len(),
            &found.provider_uuids,
            found.allocation_requests,
            |u| table.row_of_uuid(u),
        );
        if rows.is_empty() {
            return Ok(nvh(spec, uuids));
        }
        // A decision over copied states takes the candidates: kept apart first.
        let kept = keep_candidates.then(|| rows.clone());
        let request = ScheduleRequest {
            spec: spec.clone(),
            instance_uuids: Some(uuids.clone()),
            use_placement: true,
            return_alternates: true,
            now,
        };
        let mut claimer = MemoryClaims::new(index);
        let outcome = match self
            .scheduler
            .schedule_table(table, &mut rows, request, &mut claimer, &mut self.rng)
            .await
        {
            Ok(outcome) => outcome,
            Err(ScheduleError::NoValidHost { .. }) => return Ok(nvh(spec, uuids)),
            Err(e) => return Err(format!("the decision failed: {e}")),
        };
        let mut ours = vec![Answer::NoValidHost; uuids.len()];
        let mut changes: Vec<(usize, Arc<HostState>)> = Vec::new();
        for (answer, list) in ours.iter_mut().zip(&outcome.destinations) {
            let Some(first) = list.first() else { continue };
            let h = &outcome.hosts[first.host];
            *answer = Answer::Placed {
                host: h.host.to_string(),
                node: h.nodename.to_string(),
            };
            let Some(row) = h.uuid.as_deref().and_then(|u| table.row_of_uuid(u)) else {
                continue;
            };
            if changes.iter().any(|(r, _)| *r == row) {
                continue;
            }
            // What a request leaves on a host beyond its consumption is not kept:
            // the next request reads it afresh.
            let mut consumed = h.clone();
            consumed.allocation_candidates = Vec::new();
            consumed.limits = BTreeMap::new();
            changes.push((row, Arc::new(consumed)));
        }
        Ok(Decided {
            spec,
            uuids,
            ours,
            candidates: kept,
            consumed: changes,
        })
    }

    /// Keeps a call's consumption for the calls after it.
    fn consume(&mut self, consumed: Vec<(usize, Arc<HostState>)>) {
        if !consumed.is_empty() {
            self.table.change_rows(consumed);
        }
    }
}

/// The states of a request's candidate rows of `table`, each holding its
/// candidates, in table order (the host list a copied decision runs over).
fn request_states(table: &HostTable, candidates: RowCandidates) -> Vec<HostState> {
    candidates
        .into_sorted()
        .into_iter()
        .map(|(row, list)| {
            let mut h = (**table.row(row)).clone();
            h.allocation_candidates = list;
            h
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn compare_call(
    call: &RecordedCall,
    mut decided: Decided,
    scheduler: &Scheduler,
    table: &HostTable,
    setup: &Setup,
    now: DateTime<Utc>,
    show: usize,
    report: &mut Report,
    groups: &mut BTreeMap<String, StepGroup>,
) {
    let recorded = call.reference_answer();
    let mut explanation: Option<Option<Explanation>> = None;
    for (uuid, ours) in decided.uuids.iter().zip(&decided.ours) {
        report.instances += 1;
        let theirs = recorded
            .and_then(|a| a.instances.iter().find(|(u, _)| u == uuid))
            .map_or(Answer::Unknown, |(_, a)| a.clone());
        let both_placed_apart = matches!(
            (ours, &theirs),
            (Answer::Placed { host: h1, node: n1 }, Answer::Placed { host: h2, node: n2 })
                if !(h1.eq_ignore_ascii_case(h2) && n1 == n2)
        );
        let verdict = if both_placed_apart {
            // Costly (every candidate filtered and weighed, reasons listed): only
            // where our answer is not the recorded one, once per call.
            let e = explanation.get_or_insert_with(|| {
                let candidates = decided.candidates.take()?;
                let hosts = request_states(table, candidates);
                scheduler
                    .explain(&hosts, &decided.spec, now, usize::MAX, usize::MAX)
                    .ok()
            });
            match e {
                Some(e) => compare(e, ours, &theirs, setup.host_subset_size),
                None => Verdict::Unknown,
            }
        } else {
            compare(
                &Explanation::default(),
                ours,
                &theirs,
                setup.host_subset_size,
            )
        };
        match &verdict {
            Verdict::Agree => report.identical += 1,
            Verdict::Tie => report.changed.tie += 1,
            Verdict::Unknown => report.changed.unknown += 1,
            Verdict::Differ(step) => {
                report.changed.differ += 1;
                let key = step.key();
                let group = groups.entry(key.clone()).or_insert_with(|| StepGroup {
                    step: key,
                    count: 0,
                    examples: Vec::new(),
                });
                group.count += 1;
                if group.examples.len() < show {
                    group.examples.push(Example {
                        call_id: call.id,
                        instance_uuid: uuid.clone(),
                        recorded: describe(&theirs),
                        replayed: describe(ours),
                        detail: detail(step),
                    });
                }
            }
        }
    }
}

fn describe(answer: &Answer) -> String {
    match answer {
        Answer::Placed { host, node } if host == node => host.clone(),
        Answer::Placed { host, node } => format!("{host} ({node})"),
        Answer::NoValidHost => "NoValidHost".into(),
        Answer::Unknown => "unknown".into(),
    }
}

fn detail(step: &Step) -> String {
    match step {
        Step::Outcome { ours_placed: true } => "the replay placed it; the recording found no host".into(),
        Step::Outcome { ours_placed: false } => "the replay found no host; the recording placed it".into(),
        Step::Candidates => "the recorded host was not among the replay's candidates".into(),
        Step::Filter { filter, reason } => format!("{filter} removed the recorded host: {reason}"),
        Step::Weigher {
            weigher,
            ours,
            theirs,
        } => format!(
            "{weigher}: replayed host {:.4} (multiplier {} × {:.4}), recorded host {:.4} (multiplier {} × {:.4})",
            ours.value, ours.multiplier, ours.normalized, theirs.value, theirs.multiplier, theirs.normalized
        ),
        Step::Consumption => {
            "the recorded host weighed at least as much before the call: the call's earlier instances moved it".into()
        }
    }
}

/// Hosts used at the end, and the largest flavor one more instance could still take.
async fn packing(
    replayer: &Replayer,
    index: &ProviderIndex,
    snapshot: &Snapshot,
    setup: &Setup,
    now: DateTime<Utc>,
) -> Packing {
    let table = &replayer.table;
    let hosts_used = table
        .rows()
        .iter()
        .filter(|h| h.num_instances > 0 || !h.instances.is_empty())
        .count();
    let mut flavors: Vec<_> = snapshot.flavors.iter().collect();
    flavors.sort_by_key(|f| std::cmp::Reverse((f.memory_mb, f.vcpus)));
    let mut largest = None;
    let mut nodes_for_it = 0;
    for f in flavors {
        let mut spec = boot_spec(f.flavor(), 1, None, None, None);
        if request_filter::process(&mut spec, &snapshot.state, &setup.prefilters)
            .await
            .is_err()
        {
            continue;
        }
        let Ok(found) = candidates(
            &mut spec,
            index,
            &setup.prefilters,
            setup.max_placement_results,
        ) else {
            continue;
        };
        let rows = RowCandidates::from_candidates(
            table.len(),
            &found.provider_uuids,
            found.allocation_requests,
            |u| table.row_of_uuid(u),
        );
        if rows.is_empty() {
            continue;
        }
        let hosts = request_states(table, rows);
        let Ok(e) = replayer.scheduler.explain(&hosts, &spec, now, 0, 0) else {
            continue;
        };
        if e.survivors > 0 {
            largest = Some(describe_flavor(&spec.flavor));
            nodes_for_it = e.survivors;
            break;
        }
    }
    Packing {
        hosts_used,
        hosts: table.len(),
        definition: USED,
        largest_placeable_flavor: largest,
        nodes_for_it,
    }
}

/// The report as text.
pub fn text(r: &Report) -> String {
    let mut out = Vec::new();
    out.push(format!(
        "replay of {} on snapshot {}",
        r.recordings.join(", "),
        r.snapshot
    ));
    out.push(format!("decided as nova release {}", r.nova_release));
    out.push(format!("filters: {}", r.filters.join(", ")));
    out.push(format!("weighers: {}", r.weighers.join(", ")));
    for w in &r.warnings {
        out.push(format!("warning: {w}"));
    }
    out.push(format!(
        "{} call(s) recorded, {} replayed ({} decode error(s), {} not replayed); {} instance(s) compared",
        r.calls,
        r.calls_replayed,
        r.decode_errors.len(),
        r.not_replayed.len(),
        r.instances
    ));
    let changed = r.changed.tie + r.changed.differ + r.changed.unknown;
    out.push(format!(
        "identical: {} (agree); changed: {changed} (tie {}, differ {}, unknown {})",
        r.identical, r.changed.tie, r.changed.differ, r.changed.unknown
    ));
    for g in &r.steps {
        out.push(format!("differ at {}: {}", g.step, g.count));
        for e in &g.examples {
            out.push(format!(
                "  call {} instance {}: recorded {}, replayed {}: {}",
                e.call_id, e.instance_uuid, e.recorded, e.replayed, e.detail
            ));
        }
    }
    for (what, list) in [
        ("decode error", &r.decode_errors),
        ("not replayed", &r.not_replayed),
    ] {
        for p in list {
            out.push(format!(
                "{what}: call {} at {}: {}",
                p.call_id,
                p.at.to_rfc3339(),
                p.error
            ));
        }
    }
    let p = &r.packing;
    out.push(format!(
        "packing: {} of {} compute node(s) used ({})",
        p.hosts_used, p.hosts, p.definition
    ));
    out.push(match &p.largest_placeable_flavor {
        Some(f) => format!(
            "largest flavor still placeable: {f}, on {} node(s)",
            p.nodes_for_it
        ),
        None => "largest flavor still placeable: none of the snapshot's flavors".into(),
    });
    out.push(format!("{:.1} s; nothing was written (offline)", r.seconds));
    out.join("\n") + "\n"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recording::{AnsweredBy, Recorder, RecorderOptions};
    use crate::tools::plan::{by_provider, Planner};
    use crate::tools::FlavorRecord;
    use serde_json::{json, Map, Value};
    use std::path::{Path, PathBuf};

    const CELL: &str = "7a1f0c3e-6b2d-4e8f-9a0b-1c2d3e4f5a6b";

    fn node_uuid(i: usize) -> String {
        format!("00000000-0000-4000-8000-{i:012}")
    }

    fn flavor(id: i64, name: &str, vcpus: i64, memory_mb: i64, root_gb: i64) -> FlavorRecord {
        FlavorRecord {
            id,
            flavorid: name.into(),
            name: name.into(),
            vcpus,
            memory_mb,
            root_gb,
            ephemeral_gb: 0,
            swap: 0,
            extra_specs: BTreeMap::new(),
        }
    }

    /// `hosts` compute nodes alike but for the RAM already used on them (and, on
    /// some, instances), with their providers, taken at `taken_at`.
    fn snapshot(hosts: usize, taken_at: DateTime<Utc>) -> Snapshot {
        let seen = taken_at.naive_utc().format("%Y-%m-%dT%H:%M:%S").to_string();
        let used_mb = |i: usize| ((i * 7919) % 97) as i64 * 1024;
        let name = |i: usize| format!("cmp{i:05}");
        let services: Vec<Value> = (0..hosts)
            .map(|i| {
                json!({"id": i + 1, "host": name(i), "disabled": false, "forced_down": false,
                       "last_seen_up": seen, "created_at": seen, "updated_at": seen, "version": 66})
            })
            .collect();
        let nodes: Vec<Value> = (0..hosts)
            .map(|i| {
                let instances = if i % 3 == 0 { 1 } else { 0 };
                json!({"id": i + 1, "host": name(i), "hypervisor_hostname": name(i),
                       "uuid": node_uuid(i), "vcpus": 64, "vcpus_used": 0, "memory_mb": 262_144,
                       "free_ram_mb": 262_144 - used_mb(i), "local_gb": 4000, "local_gb_used": 0,
                       "free_disk_gb": 4000, "hypervisor_type": "QEMU", "hypervisor_version": 8_002_000,
                       "host_ip": "192.0.2.1",
                       "stats": json!({"num_instances": instances.to_string()}).to_string(),
                       "cpu_allocation_ratio": 4.0, "ram_allocation_ratio": 1.0,
                       "disk_allocation_ratio": 1.0, "updated_at": seen})
            })
            .collect();
        let inventory = |total: i64, ratio: f64| {
            json!({"total": total, "reserved": 0, "min_unit": 1, "max_unit": total,
                   "step_size": 1, "allocation_ratio": ratio})
        };
        let providers: Vec<Value> = (0..hosts)
            .map(|i| {
                json!({"uuid": node_uuid(i), "name": name(i), "generation": 1,
                       "root_provider_uuid": node_uuid(i),
                       "inventories": {"VCPU": inventory(64, 4.0), "MEMORY_MB": inventory(262_144, 1.0),
                                       "DISK_GB": inventory(4000, 1.0)},
                       "usages": {"VCPU": 0, "MEMORY_MB": used_mb(i), "DISK_GB": 0},
                       "traits": ["COMPUTE_NODE"], "aggregates": []})
            })
            .collect();
        let doc = json!({
            "format": crate::tools::snapshot::FORMAT,
            "taken_at": taken_at,
            "providers_from": "placement",
            "state": {
                "cells": [{"uuid": CELL, "name": "cell1", "disabled": false}],
                "rows": [{"cell_uuid": CELL, "services": services, "nodes": nodes, "instances": []}],
                "aggregates": [],
                "ratios": {"cpu": 4.0, "ram": 1.0, "disk": 1.0},
                "min_compute_service_version": 66,
            },
            "providers": providers,
            "traits": ["COMPUTE_NODE", "COMPUTE_STATUS_DISABLED"],
            "resource_classes": ["VCPU", "MEMORY_MB", "DISK_GB"],
            "flavors": [flavor(1, "m1.small", 1, 2048, 20), flavor(2, "m1.large", 4, 8192, 40),
                        flavor(3, "m1.huge", 64, 262_144, 100)],
        });
        serde_json::from_value(doc).expect("a snapshot")
    }

    /// A `select_destinations` call at RPC 4.5 for `uuids`, as nova-conductor sends it.
    fn call_args(f: &FlavorRecord, uuids: &[String]) -> Map<String, Value> {
        let obj = |name: &str, version: &str, data: Value| {
            json!({"nova_object.name": name, "nova_object.namespace": "nova",
                   "nova_object.version": version, "nova_object.data": data})
        };
        let flavor = obj(
            "Flavor",
            "1.2",
            json!({"id": f.id, "flavorid": f.flavorid, "name": f.name, "memory_mb": f.memory_mb,
                   "vcpus": f.vcpus, "root_gb": f.root_gb, "ephemeral_gb": 0, "swap": 0,
                   "extra_specs": {}}),
        );
        let image = obj(
            "ImageMeta",
            "1.8",
            json!({"properties": obj("ImageMetaProps", "1.31", json!({}))}),
        );
        let spec = obj(
            "RequestSpec",
            "1.15",
            json!({"num_instances": uuids.len(), "project_id": "p1", "user_id": "u1",
                   "flavor": flavor, "image": image, "scheduler_hints": {}, "is_bfv": false}),
        );
        match json!({"spec_obj": spec, "instance_uuids": uuids, "return_objects": true,
                     "return_alternates": true})
        {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn uuid_of(call: usize, i: usize) -> String {
        format!("{call:08x}-0000-4000-8000-{i:012x}")
    }

    /// `n` calls of one or two instances of the snapshot's small and large flavors.
    fn calls(snapshot: &Snapshot, n: usize) -> Vec<Map<String, Value>> {
        (0..n)
            .map(|c| {
                let f = &snapshot.flavors[c % 2];
                let uuids: Vec<String> = (0..1 + c % 2).map(|i| uuid_of(c, i)).collect();
                call_args(f, &uuids)
            })
            .collect()
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "nsrs-replay-{name}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Decides `calls` on `snapshot` with `config` as the daemon's copied-state
    /// decision would ([`Planner`], another path than the replay's table), and
    /// records them with those answers (the daemon's) in a recording at `path`.
    async fn record(
        snapshot: &Snapshot,
        config: &Config,
        calls: &[Map<String, Value>],
        path: &Path,
    ) {
        let scheduler = crate::app::build_scheduler(config).unwrap();
        let prefilters = crate::app::prefilter_options(config).unwrap();
        let mut index = provider_index(snapshot);
        let mut planner = Planner::new(scheduler, snapshot.state.host_states(), 7);
        let recorder = Recorder::open(RecorderOptions {
            path: path.to_path_buf(),
            max_bytes: 1 << 30,
            keep: 1,
            host: "sched-1".into(),
        })
        .unwrap();
        let context = match json!({"request_id": "req-1", "auth_token": "secret"}) {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        for args in calls {
            let id = recorder.call(
                snapshot.taken_at,
                "select_destinations",
                "4.5",
                &context,
                args,
            );
            let Ok((mut spec, Some(uuids))) = select_destinations_request(args, 1000) else {
                continue;
            };
            request_filter::process(&mut spec, &snapshot.state, &prefilters)
                .await
                .expect("request filters");
            let found = candidates(
                &mut spec,
                &index,
                &prefilters,
                config.scheduler.max_placement_results,
            )
            .expect("candidates");
            let by_rp = by_provider(found.allocation_requests);
            let placed = planner
                .decide(&spec, uuids.clone(), &by_rp, &mut index, snapshot.taken_at)
                .await
                .unwrap_or_default();
            let instances: Vec<(String, Answer)> = uuids
                .iter()
                .map(|u| {
                    let answer = match placed.iter().find(|p| &p.instance_uuid == u) {
                        Some(p) => Answer::Placed {
                            host: planner.hosts[p.host].host.to_string(),
                            node: planner.hosts[p.host].nodename.to_string(),
                        },
                        None => Answer::NoValidHost,
                    };
                    (u.clone(), answer)
                })
                .collect();
            recorder.answer(id, AnsweredBy::Daemon, &instances);
        }
        recorder.close();
        assert_eq!(recorder.dropped(), 0);
    }

    #[tokio::test]
    async fn the_same_config_reproduces_the_recording_and_a_changed_weigher_is_named() {
        let snapshot = snapshot(24, Utc::now());
        let dir = scratch("same");
        let path = dir.join("calls.gz");
        let mut calls = calls(&snapshot, 40);
        // One call the replay cannot decode: counted and listed, the others go on.
        calls.insert(5, {
            let mut bad = Map::new();
            bad.insert("spec_obj".into(), json!({"nova_object.name": "Flavor"}));
            bad
        });
        // nova's defaults but IoOpsWeigher: the replay with another RAM multiplier
        // places instances elsewhere, and IoOpsWeigher would then also part the hosts
        // by the replay's own builds (as it should), which this test does not look at.
        let recorded_with =
            crate::config::from_ini_str("[filter_scheduler]\nio_ops_weight_multiplier = 0.0\n")
                .unwrap();
        record(&snapshot, &recorded_with, &calls, &path).await;
        let recording = recording::read(std::slice::from_ref(&path)).unwrap();
        assert_eq!(recording.calls.len(), 41);

        let same = replay(&recording, &snapshot, &recorded_with, 10, 42)
            .await
            .unwrap();
        assert_eq!((same.calls, same.calls_replayed), (41, 40));
        assert_eq!(same.decode_errors.len(), 1, "{:?}", same.decode_errors);
        assert_eq!(same.decode_errors[0].call_id, 6);
        assert!(same.not_replayed.is_empty(), "{:?}", same.not_replayed);
        assert_eq!(same.instances, 60);
        assert_eq!(same.identical, 60, "{}", text(&same));
        assert_eq!(
            (same.changed.tie, same.changed.differ, same.changed.unknown),
            (0, 0, 0)
        );
        assert!(same.packing.hosts_used >= 8 && same.packing.hosts_used <= 24);
        // Every node has RAM used on it: m1.huge (all of a node's RAM) fits nowhere.
        let largest = same.packing.largest_placeable_flavor.clone().unwrap();
        assert!(largest.starts_with("m1.large"), "{largest}");
        // A snapshot that names no release is decided as the newest; one taken of a
        // 2024.1 cloud as nova 29 (no ImagePropertiesWeigher), unless nova.conf names one.
        assert_eq!(same.nova_release, "2026.2");
        assert!(same.weighers.iter().any(|w| w == "ImagePropertiesWeigher"));
        let mut caracal = snapshot.clone();
        caracal.nova_release = Some("2024.1".into());
        let old = replay(&recording, &caracal, &recorded_with, 0, 42)
            .await
            .unwrap();
        assert_eq!(old.nova_release, "2024.1");
        assert!(!old.weighers.iter().any(|w| w == "ImagePropertiesWeigher"));
        assert!(text(&old).contains("decided as nova release 2024.1"));
        let pinned = crate::config::from_ini_str(
            "[filter_scheduler]\nio_ops_weight_multiplier = 0.0\n\
             [nova_scheduler_rs]\nnova_release = 2025.1\n",
        )
        .unwrap();
        let pinned = replay(&recording, &caracal, &pinned, 0, 42).await.unwrap();
        assert_eq!(pinned.nova_release, "2025.1");
        caracal.nova_release = Some("2019.1".into());
        assert!(replay(&recording, &caracal, &recorded_with, 0, 42)
            .await
            .unwrap_err()
            .contains("\"2019.1\" is not a release known here"));

        let stacking = crate::config::from_ini_str(
            "[filter_scheduler]\nio_ops_weight_multiplier = 0.0\nram_weight_multiplier = -1.0\n",
        )
        .unwrap();
        let changed = replay(&recording, &snapshot, &stacking, 3, 42)
            .await
            .unwrap();
        assert_eq!(changed.instances, 60);
        assert!(changed.changed.differ > 0, "{}", text(&changed));
        assert_eq!(
            changed.identical + changed.changed.differ,
            60,
            "{}",
            text(&changed)
        );
        let steps: Vec<&str> = changed.steps.iter().map(|g| g.step.as_str()).collect();
        assert_eq!(steps, ["weigher:RAMWeigher"], "{}", text(&changed));
        let group = &changed.steps[0];
        assert_eq!(group.count, changed.changed.differ);
        assert_eq!(group.examples.len(), 3);
        let e = &group.examples[0];
        assert_ne!(e.recorded, e.replayed);
        assert!(
            e.detail.starts_with("RAMWeigher: replayed host"),
            "{}",
            e.detail
        );
        assert!(e.detail.contains("multiplier -1"), "{}", e.detail);
        let shown = text(&changed);
        assert!(shown.contains("differ at weigher:RAMWeigher"), "{shown}");
        assert!(shown.contains("decode error: call 6"), "{shown}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// The replay's speed at scale: `NSRS_REPLAY_HOSTS` compute nodes (10,000) and
    /// `NSRS_REPLAY_CALLS` recorded calls (100,000), without recorded answers (every
    /// instance is `unknown`: the decisions alone are timed). Run with
    /// `cargo test --release --lib replay_speed -- --ignored --nocapture`.
    #[tokio::test]
    #[ignore]
    async fn replay_speed() {
        let var = |name: &str, default: usize| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let (hosts, n) = (
            var("NSRS_REPLAY_HOSTS", 10_000),
            var("NSRS_REPLAY_CALLS", 100_000),
        );
        let snapshot = snapshot(hosts, Utc::now());
        let dir = scratch("speed");
        let path = dir.join("calls.gz");
        let started = Instant::now();
        let recorder = Recorder::open(RecorderOptions {
            path: path.clone(),
            max_bytes: 1 << 40,
            keep: 0,
            host: "sched-1".into(),
        })
        .unwrap();
        for (sent, args) in calls(&snapshot, n).iter().enumerate() {
            while sent as u64 > recorder.written() + 5_000 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            recorder.call(
                snapshot.taken_at,
                "select_destinations",
                "4.5",
                &Map::new(),
                args,
            );
        }
        recorder.close();
        assert_eq!(recorder.dropped(), 0);
        let written = started.elapsed();
        let started = Instant::now();
        let recording = recording::read(std::slice::from_ref(&path)).unwrap();
        let read = started.elapsed();
        let config = crate::config::from_ini_str("").unwrap();
        let report = replay(&recording, &snapshot, &config, 10, 42)
            .await
            .unwrap();
        assert_eq!(report.calls_replayed, n);
        println!(
            "{hosts} hosts, {n} calls ({} instances): recorded in {:.1} s ({} bytes), read in {:.1} s, \
             replayed in {:.1} s ({:.3} ms per call); {} nodes used",
            report.instances,
            written.as_secs_f64(),
            std::fs::metadata(&path).unwrap().len(),
            read.as_secs_f64(),
            report.seconds,
            report.seconds * 1000.0 / n as f64,
            report.packing.hosts_used,
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
