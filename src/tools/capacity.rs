// SPDX-License-Identifier: Apache-2.0
//! `nova-scheduler-rs capacity`: how many more instances of a flavor fit, and
//! where, decided as the daemon decides them one request after another.
//!
//! The request filters run once on the request; the candidates are asked once
//! without a limit (Placement's `GET /allocation_candidates`, or the provider index
//! when `[placement_database] connection` is set), with the providers' capacity and
//! usage. Then, one single-instance decision at a time, the candidates whose
//! providers still have room (capacity less usage less the claims made so far in
//! memory) go through nova.conf's filters and weighers over host states read once
//! and consumed by each decision (the daemon's `retain_virtual_consumption`), until
//! no host is found or `--max` is reached. Nothing is written anywhere.

use super::plan::{by_provider, ByProvider, Ledger, Placed, Planner, Room};
use super::{boot_spec, describe_flavor, find_flavor, parse_extra_specs, read_flavors, Live};
use crate::config::{CapacityArgs, Config};
use crate::manager::candidates::{allocation_candidates, CandidateSource};
use crate::manager::request_filter;
use crate::model::{Flavor, HostState};
use crate::placement::index::{candidates::provider_summary, LiveIndex};
use crate::placement::query::QueryOptions;
use crate::placement::{AllocationCandidates, PlacementClient, PlacementError};
use crate::scheduler::ScheduleError;
use futures_util::future::BoxFuture;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// `--max` when not given.
pub const DEFAULT_MAX: u64 = 10_000;
/// `--show` when not given.
pub const DEFAULT_SHOW: u64 = 10;

/// Answers the candidates questions as the daemon's source would (the index
/// first when there is one, else Placement) and keeps the providers' summaries.
struct SummarizingSource {
    placement: Arc<PlacementClient>,
    index: Option<Arc<LiveIndex>>,
    room: Mutex<Room>,
    asked: Mutex<Vec<&'static str>>,
}

impl CandidateSource for SummarizingSource {
    fn ask<'a>(
        &'a self,
        params: &'a [(String, String)],
        global_request_id: Option<&'a str>,
    ) -> BoxFuture<'a, Result<(AllocationCandidates, bool), PlacementError>> {
        Box::pin(async move {
            if let Some(index) = &self.index {
                if let Ok(found) = index.candidates(params) {
                    let snapshot = index.snapshot();
                    let summaries: Map<String, Value> = found
                        .provider_uuids
                        .iter()
                        .filter_map(|u| {
                            let p = snapshot.provider(u)?;
                            Some((u.clone(), provider_summary(&snapshot, p)))
                        })
                        .collect();
                    lock(&self.room).add_summaries(&summaries);
                    lock(&self.asked).push("the provider index");
                    return Ok((found, true));
                }
            }
            let (found, summaries) = self
                .placement
                .get_allocation_candidates_with_summaries(params, global_request_id)
                .await?;
            lock(&self.room).add_summaries(&summaries);
            lock(&self.asked).push("Placement (GET /allocation_candidates)");
            Ok((found, false))
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// One host's part of the answer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HostCount {
    pub host: String,
    pub nodename: String,
    pub cell: String,
    pub availability_zone: String,
    pub aggregates: Vec<String>,
    pub instances: u64,
    /// The classes whose room is smaller than the flavor's amount at the end.
    pub exhausted: Vec<String>,
}

/// Hosts of the same Placement capacity.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HostClass {
    /// Capacity per class of the provider.
    pub resources: BTreeMap<String, i64>,
    pub hosts: usize,
    pub instances: u64,
    /// What ran out first on its hosts (class, or `filters`, or `not reached`),
    /// and on how many of them.
    pub runs_out_first: BTreeMap<String, usize>,
}

/// What `capacity` found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CapacityReport {
    pub flavor: Value,
    pub availability_zone: Option<String>,
    pub filters: Vec<String>,
    pub weighers: Vec<String>,
    pub candidates_from: Vec<String>,
    pub candidate_hosts: usize,
    pub count: u64,
    pub max: u64,
    /// Why counting stopped: `max reached`, or the NoValidHost (or other) error.
    pub stopped: String,
    pub by_cell: BTreeMap<String, u64>,
    pub by_availability_zone: BTreeMap<String, u64>,
    pub by_aggregate: BTreeMap<String, u64>,
    pub host_classes: Vec<HostClass>,
    pub hosts: Vec<HostCount>,
    /// The hosts that take the first `--show` instances, in order.
    pub first: Vec<String>,
    pub read_only: String,
}

/// Runs `capacity`; returns the process exit code.
pub async fn run(args: &CapacityArgs, config: Config) -> i32 {
    match report(args, config).await {
        Ok(report) => {
            if args.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => println!("{text}"),
                    Err(e) => {
                        eprintln!("capacity: {e}");
                        return 1;
                    }
                }
            } else {
                print!("{}", render(&report));
            }
            0
        }
        Err(e) => {
            eprintln!("capacity: {e}");
            if e.starts_with("usage:") {
                64
            } else {
                1
            }
        }
    }
}

/// The flavor the command line names or describes.
async fn flavor_of(args: &CapacityArgs, live: &Live) -> Result<Flavor, String> {
    let extra = parse_extra_specs(&args.extra_specs).map_err(|e| format!("usage: {e}"))?;
    let mut flavor = match &args.flavor {
        Some(name) => {
            let flavors = read_flavors(live.store.api_pool())
                .await
                .map_err(|e| format!("could not read the flavors: {e}"))?;
            find_flavor(&flavors, name)
                .ok_or_else(|| format!("usage: no flavor {name:?} in the API database"))?
                .flavor()
        }
        None => {
            let (Some(vcpus), Some(ram)) = (args.vcpus, args.ram) else {
                return Err("usage: give --flavor NAME, or --vcpus N --ram MB [--disk GB]".into());
            };
            Flavor {
                vcpus: vcpus as i64,
                memory_mb: ram as i64,
                root_gb: args.disk.unwrap_or(0) as i64,
                ..Flavor::default()
            }
        }
    };
    flavor.extra_specs.extend(extra);
    Ok(flavor)
}

/// Counts; the report of [`run`].
pub async fn report(args: &CapacityArgs, config: Config) -> Result<CapacityReport, String> {
    let default_az = config.default.default_availability_zone.clone();
    let live = Live::connect(config).await.map_err(|e| e.to_string())?;
    let flavor = flavor_of(args, &live).await?;
    let max = args.max.unwrap_or(DEFAULT_MAX);
    let show = args.show.unwrap_or(DEFAULT_SHOW) as usize;
    let mut spec = boot_spec(
        flavor.clone(),
        1,
        args.availability_zone.clone(),
        args.project.clone(),
        None,
    );
    let mut report = CapacityReport {
        flavor: json!({
            "name": flavor.name, "vcpus": flavor.vcpus, "memory_mb": flavor.memory_mb,
            "root_gb": flavor.root_gb, "ephemeral_gb": flavor.ephemeral_gb, "swap": flavor.swap,
            "extra_specs": flavor.extra_specs,
        }),
        availability_zone: args.availability_zone.clone(),
        filters: live
            .scheduler
            .filters
            .names()
            .iter()
            .map(|s| s.to_string())
            .collect(),
        weighers: live
            .scheduler
            .weighers
            .names()
            .iter()
            .map(|s| s.to_string())
            .collect(),
        candidates_from: Vec::new(),
        candidate_hosts: 0,
        count: 0,
        max,
        stopped: String::new(),
        by_cell: BTreeMap::new(),
        by_availability_zone: BTreeMap::new(),
        by_aggregate: BTreeMap::new(),
        host_classes: Vec::new(),
        hosts: Vec::new(),
        first: Vec::new(),
        read_only: super::READ_ONLY.to_string(),
    };
    // nova's request filters, then the candidates question, once.
    if let Err(e) = request_filter::process(&mut spec, &*live.store, &live.prefilters).await {
        report.stopped = e.to_string();
        return Ok(report);
    }
    let source = SummarizingSource {
        placement: Arc::clone(&live.placement),
        index: live.index.clone(),
        room: Mutex::new(Room::default()),
        asked: Mutex::new(Vec::new()),
    };
    let found = allocation_candidates(
        &mut spec,
        &live.store,
        &source,
        &QueryOptions {
            max_placement_results: u32::MAX,
            release: live.prefilters.release,
        },
        &live.prefilters,
        None,
    )
    .await
    .map_err(|e| e.to_string())?
    .found;
    report.candidates_from = lock(&source.asked).iter().map(|s| s.to_string()).collect();
    let mut room = std::mem::take(&mut *lock(&source.room));
    let provider_uuids = found.provider_uuids.clone();
    let candidates = by_provider(found.allocation_requests);
    if candidates.is_empty() {
        report.stopped = "No valid host was found. (no allocation candidates)".into();
        return Ok(report);
    }
    let hosts = live
        .store
        .host_states(Some(&provider_uuids), None)
        .await
        .map_err(|e| format!("could not read host states: {e}"))?;
    let cells: BTreeMap<String, String> = live
        .store
        .cells()
        .into_iter()
        .map(|c| (c.uuid.clone(), c.name.unwrap_or(c.uuid)))
        .collect();
    let mut planner = Planner::new(live.scheduler, hosts, 0);
    report.candidate_hosts = planner
        .hosts
        .iter()
        .filter(|h| {
            h.uuid
                .as_deref()
                .is_some_and(|u| candidates.contains_key(u))
        })
        .count();
    let mut placed: Vec<Placed> = Vec::new();
    report.stopped = loop {
        if placed.len() as u64 >= max {
            break format!("--max {max} reached");
        }
        let fitting = with_room(&candidates, &room);
        if fitting.is_empty() {
            break "No valid host was found. (no provider has room left in Placement)".into();
        }
        let uuid = uuid::Uuid::new_v4().to_string();
        match planner
            .decide(&spec, vec![uuid], &fitting, &mut room, chrono::Utc::now())
            .await
        {
            Ok(p) => placed.extend(p),
            Err(e @ ScheduleError::NoValidHost { .. }) => break e.to_string(),
            Err(e) => break format!("the decision failed: {e}"),
        }
    };
    summarize(
        &mut report,
        &planner.hosts,
        &placed,
        &candidates,
        &room,
        &cells,
        &default_az,
        show,
    );
    Ok(report)
}

/// The candidates whose providers still have room.
fn with_room(candidates: &ByProvider, room: &Room) -> ByProvider {
    candidates
        .iter()
        .filter_map(|(rp, list)| {
            let left: Vec<_> = list
                .iter()
                .filter(|c| room.fits(c.json()))
                .cloned()
                .collect();
            (!left.is_empty()).then(|| (rp.clone(), left))
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    report: &mut CapacityReport,
    hosts: &[HostState],
    placed: &[Placed],
    candidates: &ByProvider,
    room: &Room,
    cells: &BTreeMap<String, String>,
    default_az: &str,
    show: usize,
) {
    report.count = placed.len() as u64;
    let mut per_host: BTreeMap<usize, u64> = BTreeMap::new();
    for p in placed {
        *per_host.entry(p.host).or_default() += 1;
    }
    let cell_name = |h: &HostState| {
        cells
            .get(&*h.cell_uuid)
            .cloned()
            .unwrap_or_else(|| h.cell_uuid.to_string())
    };
    let not_reached = report.stopped.starts_with("--max");
    let mut classes: BTreeMap<Vec<(String, i64)>, HostClass> = BTreeMap::new();
    for (i, h) in hosts.iter().enumerate() {
        let Some(uuid) = h.uuid.as_deref() else {
            continue;
        };
        let Some(list) = candidates.get(uuid) else {
            continue;
        };
        let n = per_host.get(&i).copied().unwrap_or(0);
        // The classes the flavor asks of this provider that have less room than asked.
        let mut exhausted: Vec<String> = list
            .first()
            .map(|c| super::plan::amounts(c.json()))
            .unwrap_or_default()
            .into_iter()
            .filter(|(rp, rc, amount)| rp == uuid && room.left(rp, rc) < *amount)
            .map(|(_, rc, _)| rc)
            .collect();
        exhausted.sort();
        exhausted.dedup();
        let aggregates: Vec<String> = h.aggregates.iter().map(|a| a.name.clone()).collect();
        let az = h.availability_zone(default_az);
        if n > 0 {
            *report.by_cell.entry(cell_name(h)).or_default() += n;
            *report.by_availability_zone.entry(az.clone()).or_default() += n;
            for a in &aggregates {
                *report.by_aggregate.entry(a.clone()).or_default() += n;
            }
        }
        let resources: BTreeMap<String, i64> = room
            .providers
            .get(uuid)
            .map(|p| p.iter().map(|(rc, c)| (rc.clone(), c.capacity)).collect())
            .unwrap_or_default();
        let class = classes
            .entry(resources.clone().into_iter().collect())
            .or_insert_with(|| HostClass {
                resources,
                hosts: 0,
                instances: 0,
                runs_out_first: BTreeMap::new(),
            });
        class.hosts += 1;
        class.instances += n;
        let why = if !exhausted.is_empty() {
            exhausted.join("+")
        } else if not_reached {
            "not reached".to_string()
        } else {
            "filters".to_string()
        };
        *class.runs_out_first.entry(why).or_default() += 1;
        report.hosts.push(HostCount {
            host: h.host.to_string(),
            nodename: h.nodename.to_string(),
            cell: cell_name(h),
            availability_zone: az,
            aggregates,
            instances: n,
            exhausted,
        });
    }
    let mut classes: Vec<HostClass> = classes.into_values().collect();
    classes.sort_by_key(|c| std::cmp::Reverse(c.instances));
    report.host_classes = classes;
    report.first = placed
        .iter()
        .take(show)
        .map(|p| hosts[p.host].host.to_string())
        .collect();
}

/// The text form of the report.
pub fn render(r: &CapacityReport) -> String {
    let mut out = String::new();
    let flavor = Flavor {
        name: r.flavor["name"].as_str().map(str::to_string),
        vcpus: r.flavor["vcpus"].as_i64().unwrap_or(0),
        memory_mb: r.flavor["memory_mb"].as_i64().unwrap_or(0),
        root_gb: r.flavor["root_gb"].as_i64().unwrap_or(0),
        ephemeral_gb: r.flavor["ephemeral_gb"].as_i64().unwrap_or(0),
        swap: r.flavor["swap"].as_i64().unwrap_or(0),
        extra_specs: serde_json::from_value(r.flavor["extra_specs"].clone()).unwrap_or_default(),
        ..Flavor::default()
    };
    out.push_str(&format!("flavor: {}\n", describe_flavor(&flavor)));
    if let Some(az) = &r.availability_zone {
        out.push_str(&format!("availability zone: {az}\n"));
    }
    out.push_str(&format!("filters: {}\n", r.filters.join(", ")));
    out.push_str(&format!("weighers: {}\n", r.weighers.join(", ")));
    if !r.candidates_from.is_empty() {
        out.push_str(&format!(
            "candidates: {} host(s), from {}\n",
            r.candidate_hosts,
            r.candidates_from.join(" and ")
        ));
    }
    out.push_str(&format!(
        "\n{} more instance(s) fit (stopped: {})\n",
        r.count, r.stopped
    ));
    let section = |out: &mut String, title: &str, counts: &BTreeMap<String, u64>| {
        if counts.is_empty() {
            return;
        }
        out.push_str(&format!("\nby {title}:\n"));
        let width = counts.keys().map(String::len).max().unwrap_or(0);
        for (k, n) in counts {
            out.push_str(&format!("  {k:<width$}  {n}\n"));
        }
    };
    section(&mut out, "cell", &r.by_cell);
    section(&mut out, "availability zone", &r.by_availability_zone);
    section(&mut out, "aggregate", &r.by_aggregate);
    if !r.host_classes.is_empty() {
        out.push_str("\nby host class (same Placement capacity):\n");
        for c in &r.host_classes {
            let resources: Vec<String> = c
                .resources
                .iter()
                .map(|(rc, n)| format!("{rc}={n}"))
                .collect();
            let first: Vec<String> = c
                .runs_out_first
                .iter()
                .map(|(why, n)| format!("{why} on {n} host(s)"))
                .collect();
            out.push_str(&format!(
                "  {}: {} host(s), {} instance(s); runs out first: {}\n",
                resources.join(" "),
                c.hosts,
                c.instances,
                first.join(", ")
            ));
        }
    }
    if !r.first.is_empty() {
        out.push_str(&format!("\nfirst {} placement(s):\n", r.first.len()));
        for (i, h) in r.first.iter().enumerate() {
            out.push_str(&format!("  {:>3}  {h}\n", i + 1));
        }
    }
    out.push_str(&format!("\n{}\n", r.read_only));
    out
}
