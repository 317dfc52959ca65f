// SPDX-License-Identifier: Apache-2.0
//! The warm host-state cache: every cell read once, then refreshed from the rows
//! that moved since the last pass, so a request never scans a cell database.
//!
//! - Per cell it keeps the `nova-compute` services by host, the compute nodes (as
//!   HostStates built from their row alone) and the live instances by host. The
//!   service, aggregates and instances are joined to a node when a request asks.
//! - A pass reads the rows whose `created_at`, `updated_at` or `deleted_at` moved
//!   after the previous pass's database clock less a second (stamps have whole
//!   seconds; a row stamped in that second may have committed after the read), and
//!   the rows stamped in the slice of time that has just become
//!   `WATERMARK_MARGIN_SECS` old: nova's services stamp rows with their own clocks
//!   and commit a little later, so a row can land with a stamp already behind a
//!   pass. Such a row is seen once the lagged slice reaches it, at most the margin
//!   and one interval after its stamp; any other row at the next pass. Each change
//!   is read two or three times rather than once a pass for the whole margin (the
//!   heartbeats of 5,000 services, every 10 s, were read six times). Applying a
//!   row twice is harmless. A full re-read every `full_resync_interval` heals
//!   anything an incremental pass cannot see (rows deleted outright, a commit later
//!   than the margin).
//! - nova's schema indexes none of these columns on `services` and `compute_nodes`
//!   (one row per host: each pass scans them), but it does index the instances'
//!   `updated_at` and `(deleted, created_at)`, and instances are most of a cell's
//!   rows. So instances updated or created are read at each pass through those
//!   indexes, and those soft-deleted without `updated_at` moving only by a scan of
//!   `deleted_at` every `deleted_instances_scan_interval`. nova's own delete saves
//!   the instance just before it soft-deletes it, and the compute casts the
//!   deletion to the scheduler, so the scan is the fallback.
//! - nova-compute's `update_instance_info` and `delete_instance_info` casts follow
//!   a write of the host's compute node by its resource tracker: that host's nodes
//!   are read again at once ([`HostStateCache::reread_host`]).
//! - A request's uuids that the cache does not know (a node created since the last
//!   pass) are read from the cell databases at once, so the cache never hides a
//!   provider Placement returned. Uuids that are not compute nodes (nested or
//!   sharing providers) are remembered for a while so they cost one query only.
//! - Our own decisions are retained: the virtual consumption of each selected host
//!   is re-applied to its cached state until the compute node row is written after
//!   the decision (nova's `HostState.updated` rule; a row stamped in the
//!   decision's second counts as after it, see [`still_pending`]) or
//!   `consumption_ttl` passes.
//!
//! Here: the refresh loop and a request's host states. Beside it: `cell` (one
//! cell's rows and how a row read is applied), `watermarks` (what a pass reads),
//! `updates` (our retained decisions and nova-compute's instance casts) and
//! `decision_table` (every cell's hosts as one table for the indexed decision).

use super::cells::CellDb;
use super::queries::{self, Change};
use super::{read, write, HostStateStore, StateError};
use crate::model::{HostState, InstanceFlavorIds};
use cell::CellCache;
pub use cell::Consumption;
use chrono::{DateTime, Utc};
use decision_table::DecisionTable;
use futures_util::future::join_all;
use rustc_hash::FxHashSet;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};
use watermarks::Watermarks;

/// How long a uuid that matched no compute node is not looked up again. New nodes
/// reach the cache through the incremental pass well before this.
const UNKNOWN_UUID_TTL: Duration = Duration::from_secs(60);

/// The cache's settings (`[nova_scheduler_rs]`).
#[derive(Debug, Clone)]
pub struct CacheOptions {
    /// Time between incremental passes.
    pub refresh_interval: Duration,
    /// Time between full re-reads of every cell and of the aggregates.
    pub full_resync_interval: Duration,
    /// Time between reads of soft-deleted instances (a scan of the table).
    pub deleted_instances_scan_interval: Duration,
    /// Re-apply our decisions' consumption until the database shows it.
    pub retain_consumption: bool,
    /// Age after which a retained consumption is dropped anyway.
    pub consumption_ttl: Duration,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            refresh_interval: Duration::from_secs(1),
            full_resync_interval: Duration::from_secs(300),
            deleted_instances_scan_interval: Duration::from_secs(10),
            retain_consumption: true,
            consumption_ttl: Duration::from_secs(120),
        }
    }
}

/// Counters of the cache's work, for logs and the benchmark report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RefreshStats {
    pub services: usize,
    pub nodes: usize,
    pub instances: usize,
}

/// The warm cache over a [`HostStateStore`] (which owns the pools, cells and aggregates).
pub struct HostStateCache {
    store: Arc<HostStateStore>,
    opts: CacheOptions,
    cells: RwLock<HashMap<String, Arc<RwLock<CellCache>>>>,
    unknown_uuids: Mutex<HashMap<String, Instant>>,
    last_aggregate_load: Mutex<Instant>,
    /// Every enabled cell's host states as a table for the indexed decision; built
    /// on first use, then kept up to date from the changed hosts.
    decision_table: Mutex<Option<DecisionTable>>,
    /// Hosts whose nodes are being read again (see [`HostStateCache::reread_host`]),
    /// each with whether a cast came meanwhile (the read then runs once more).
    rereads: Mutex<HashMap<String, bool>>,
}

// === impl HostStateCache ===

impl HostStateCache {
    /// A cache over `store`; nothing is read until [`HostStateCache::warm`].
    /// The cache also keeps the minimum compute version read (see [`Self::run`]);
    /// requests use a reading up to two passes old, then read it themselves.
    pub fn new(store: Arc<HostStateStore>, opts: CacheOptions) -> Self {
        store.keep_min_compute_version(opts.refresh_interval.saturating_mul(2));
        HostStateCache {
            store,
            opts,
            cells: RwLock::new(HashMap::new()),
            unknown_uuids: Mutex::new(HashMap::new()),
            decision_table: Mutex::new(None),
            rereads: Mutex::new(HashMap::new()),
            last_aggregate_load: Mutex::new(Instant::now()),
        }
    }

    pub fn store(&self) -> &Arc<HostStateStore> {
        &self.store
    }

    pub fn options(&self) -> &CacheOptions {
        &self.opts
    }

    /// Reads every enabled cell in full (concurrently). A cell that fails is logged
    /// and retried by the next pass; requests meanwhile go without it, as nova's do.
    pub async fn warm(&self) {
        let started = Instant::now();
        let cells: Vec<Arc<CellDb>> = self
            .store
            .cell_set()
            .cells
            .iter()
            .filter(|c| !c.cell.disabled)
            .cloned()
            .collect();
        let loads = join_all(cells.iter().map(|db| self.full_load(db)));
        tokio::join!(loads, self.store.refresh_min_compute_version());
        let nodes: usize = read(&self.cells)
            .values()
            .map(|c| read(c).nodes.len())
            .sum();
        let m = crate::observe::metrics();
        m.cache_pass_seconds
            .observe(started.elapsed().as_secs_f64());
        m.cache_last_pass.set(crate::observe::metrics::unix_now());
        tracing::info!(
            cells = cells.len(),
            nodes,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "host state cache warm"
        );
    }

    /// One pass: cells due for a full re-read get one, the others an incremental
    /// read; the aggregates are re-read with the full pass.
    pub async fn refresh(&self) -> RefreshStats {
        let set = self.store.cell_set();
        let cached: HashSet<String> = read(&self.cells).keys().cloned().collect();
        let targets: Vec<Arc<CellDb>> = set
            .cells
            .iter()
            .filter(|c| !c.cell.disabled || cached.contains(&c.cell.uuid))
            .cloned()
            .collect();
        let passes = targets.iter().map(|db| async move {
            let due = match self.cell(&db.cell.uuid) {
                None => true,
                Some(c) => {
                    let c = read(&c);
                    c.watermarks.is_none()
                        || c.last_full
                            .is_none_or(|t| t.elapsed() >= self.opts.full_resync_interval)
                }
            };
            if due {
                self.full_load(db).await;
                RefreshStats::default()
            } else {
                self.incremental(db).await
            }
        });
        let stats = join_all(passes)
            .await
            .into_iter()
            .fold(RefreshStats::default(), |a, b| RefreshStats {
                services: a.services + b.services,
                nodes: a.nodes + b.nodes,
                instances: a.instances + b.instances,
            });
        // Cells removed from cell_mappings (after a reload) leave the cache.
        let known: HashSet<&str> = set.cells.iter().map(|c| c.cell.uuid.as_str()).collect();
        write(&self.cells).retain(|uuid, _| known.contains(uuid.as_str()));
        self.refresh_aggregates_if_due().await;
        stats
    }

    /// Runs [`refresh`](Self::refresh) every `refresh_interval` until `shutdown`,
    /// reading the minimum compute version beside each pass.
    pub async fn run(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        let mut tick = tokio::time::interval(self.opts.refresh_interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                _ = tick.tick() => {}
            }
            let started = Instant::now();
            let (stats, _) = tokio::join!(self.refresh(), self.store.refresh_min_compute_version());
            self.update_table(Utc::now()).await;
            let m = crate::observe::metrics();
            m.cache_pass_seconds
                .observe(started.elapsed().as_secs_f64());
            m.cache_rows_read
                .inc_by((stats.services + stats.nodes + stats.instances) as u64);
            m.cache_last_pass.set(crate::observe::metrics::unix_now());
            tracing::trace!(
                services = stats.services,
                nodes = stats.nodes,
                instances = stats.instances,
                elapsed_ms = started.elapsed().as_millis() as u64,
                "host state cache refreshed"
            );
        }
    }

    /// Re-reads the cell list (SIGHUP) and then every cell in full.
    pub async fn reset(&self) {
        self.store.reload_cells().await;
        for cell in read(&self.cells).values() {
            write(cell).last_full = None;
        }
        self.refresh().await;
        self.reload_aggregates().await;
    }

    fn cell(&self, uuid: &str) -> Option<Arc<RwLock<CellCache>>> {
        read(&self.cells).get(uuid).cloned()
    }

    async fn full_load(&self, db: &CellDb) -> bool {
        let name = db.display_name();
        let Some(pool) = db.pool.as_ref() else {
            tracing::warn!(cell = %name, url = %db.masked_url, "Failed to get computes for cell (unusable database URL)");
            return false;
        };
        let read_all = async {
            let now = queries::db_utc_now(pool).await?;
            let rows = queries::full_cell(pool).await?;
            self.store.backfill_ratios(pool, db, &rows.1).await;
            Ok::<_, sqlx::Error>((now, rows))
        };
        match tokio::time::timeout(self.store.cell_timeout, read_all).await {
            Ok(Ok((now, (services, nodes, instances)))) => {
                let previous = self.cell(&db.cell.uuid);
                let prev_guard = previous.as_ref().map(|p| read(p));
                let mut fresh = CellCache::from_rows(
                    &db.cell.uuid,
                    &self.store.ratios,
                    services,
                    nodes,
                    instances,
                    prev_guard.as_deref(),
                );
                drop(prev_guard);
                fresh.watermarks = Some(Watermarks::after_full_read(now));
                fresh.deleted_scan = Some((Watermarks::after_full_read(now), Instant::now()));
                fresh.last_full = Some(Instant::now());
                match previous {
                    Some(p) => *write(&p) = fresh,
                    None => {
                        write(&self.cells)
                            .insert(db.cell.uuid.clone(), Arc::new(RwLock::new(fresh)));
                    }
                }
                true
            }
            Ok(Err(e)) => {
                tracing::warn!(cell = %name, url = %db.masked_url, error = %e, "Failed to get computes for cell");
                false
            }
            Err(_) => {
                tracing::warn!(cell = %name, url = %db.masked_url, "Timeout getting computes for cell");
                false
            }
        }
    }

    async fn incremental(&self, db: &CellDb) -> RefreshStats {
        let Some(cache) = self.cell(&db.cell.uuid) else {
            return RefreshStats::default();
        };
        let (Some(marks), deleted_scan) = ({
            let c = read(&cache);
            (c.watermarks, c.deleted_scan)
        }) else {
            return RefreshStats::default();
        };
        // Deletions that did not move `updated_at` cost a scan of the instances:
        // read less often than the rest (nova's compute also casts each deletion).
        let deleted_marks = deleted_scan
            .filter(|(_, at)| at.elapsed() >= self.opts.deleted_instances_scan_interval)
            .map(|(m, _)| m);
        let Some(pool) = db.pool.as_ref() else {
            return RefreshStats::default();
        };
        let read_changes = async {
            let now = queries::db_utc_now(pool).await?;
            let window = marks.window(now);
            let deleted = async {
                match deleted_marks {
                    Some(m) => queries::deleted_instances(pool, m.window(now))
                        .await
                        .map(Some),
                    None => Ok(None),
                }
            };
            let (services, nodes, instances, deleted) = tokio::try_join!(
                queries::changed_services(pool, window),
                queries::changed_compute_nodes(pool, window),
                queries::changed_instances(pool, window),
                deleted,
            )?;
            let live: Vec<_> = nodes
                .iter()
                .filter_map(|c| match c {
                    Change::Live(n) if n.has_missing_ratio() => Some(n.clone()),
                    _ => None,
                })
                .collect();
            self.store.backfill_ratios(pool, db, &live).await;
            Ok::<_, sqlx::Error>((now, services, nodes, instances, deleted))
        };
        let (now, services, nodes, instances, deleted) = match tokio::time::timeout(
            self.store.cell_timeout,
            read_changes,
        )
        .await
        {
            Ok(Ok(changes)) => changes,
            Ok(Err(e)) => {
                tracing::warn!(cell = %db.display_name(), error = %e, "host state refresh failed; keeping the cached states");
                return RefreshStats::default();
            }
            Err(_) => {
                tracing::warn!(cell = %db.display_name(), "host state refresh timed out; keeping the cached states");
                return RefreshStats::default();
            }
        };
        let stats = RefreshStats {
            services: services.len(),
            nodes: nodes.len(),
            instances: instances.len() + deleted.as_ref().map_or(0, Vec::len),
        };
        let mut c = write(&cache);
        for change in services {
            match change {
                Change::Live(s) => c.upsert_service(s),
                Change::Deleted(s) => c.delete_service(&s),
            }
        }
        for change in nodes {
            match change {
                Change::Live(n) => c.upsert_node(&db.cell.uuid, &self.store.ratios, n, false),
                Change::Deleted(n) => c.delete_node(n.id),
            }
        }
        for row in instances {
            c.apply_instance(row);
        }
        // After the other rows: a deletion is final, whatever a read of the same row
        // from an older snapshot said.
        if let (Some(rows), Some(m)) = (deleted, deleted_marks) {
            for row in rows {
                c.apply_instance(row);
            }
            c.deleted_scan = Some((m.after_pass(now), Instant::now()));
        }
        c.watermarks = Some(marks.after_pass(now));
        stats
    }

    async fn refresh_aggregates_if_due(&self) {
        let due = {
            let last = self
                .last_aggregate_load
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            last.elapsed() >= self.opts.full_resync_interval
        };
        if due {
            self.reload_aggregates().await;
        }
    }

    async fn reload_aggregates(&self) {
        *self
            .last_aggregate_load
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Instant::now();
        match super::aggregates::load(&self.store.api).await {
            Ok(aggs) => {
                *write(&self.store.aggregates) = super::aggregates::AggregateCache::new(aggs)
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not re-read aggregates; keeping the cached ones")
            }
        }
    }

    /// The host states of a request, from the cache: `uuids` (the providers
    /// Placement returned) or every node (`None`), in `cell` or every enabled cell.
    /// Ordered by cell uuid, then compute node id, like [`HostStateStore::host_states`].
    pub async fn host_states(
        &self,
        uuids: Option<&[String]>,
        cell: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Vec<HostState>, StateError> {
        let mut selected = self.store.select_cells(cell).await?;
        selected.sort_by(|a, b| a.cell.uuid.cmp(&b.cell.uuid));
        // A cell never read (down at startup, or disabled and now named) is read now.
        for db in &selected {
            if self.cell(&db.cell.uuid).is_none() {
                self.full_load(db).await;
            }
        }
        // The node ids of the wanted uuids, per selected cell: one lookup per uuid and
        // cell (this runs over every candidate on every request); the uuids no cell
        // holds are read from the databases, then looked up again.
        let mut ids_by_cell: Vec<Option<Vec<i64>>> = vec![None; selected.len()];
        if let Some(uuids) = uuids {
            let mut found = vec![false; uuids.len()];
            let lookup = |ids_by_cell: &mut Vec<Option<Vec<i64>>>,
                          found: &mut Vec<bool>,
                          only_missing: bool| {
                for (k, db) in selected.iter().enumerate() {
                    let Some(cache) = self.cell(&db.cell.uuid) else {
                        continue;
                    };
                    let c = read(&cache);
                    let ids = ids_by_cell[k].get_or_insert_with(Vec::new);
                    for (j, u) in uuids.iter().enumerate() {
                        if only_missing && found[j] {
                            continue;
                        }
                        if let Some(&id) = c.node_by_uuid.get(u.as_str()) {
                            ids.push(id);
                            found[j] = true;
                        }
                    }
                }
            };
            lookup(&mut ids_by_cell, &mut found, false);
            let missing: Vec<String> = uuids
                .iter()
                .zip(&found)
                .filter(|(_, f)| !**f)
                .map(|(u, _)| u.clone())
                .collect();
            if !missing.is_empty() {
                self.fetch_unknown(&selected, &missing).await;
                lookup(&mut ids_by_cell, &mut found, true);
            }
        }
        let retain = self
            .opts
            .retain_consumption
            .then_some((now, self.opts.consumption_ttl));
        let aggregates = read(&self.store.aggregates);
        let mut seen: FxHashSet<(Arc<str>, Arc<str>)> = FxHashSet::with_capacity_and_hasher(
            uuids.map_or(0, <[String]>::len),
            Default::default(),
        );
        let mut states = Vec::with_capacity(uuids.map_or(0, <[String]>::len));
        for (db, wanted_ids) in selected.iter().zip(ids_by_cell) {
            let Some(cache) = self.cell(&db.cell.uuid) else {
                continue;
            };
            let c = read(&cache);
            let ids: Vec<i64> = match wanted_ids {
                None if uuids.is_none() => c.nodes.keys().copied().collect(),
                None => Vec::new(),
                Some(mut ids) => {
                    ids.sort_unstable();
                    ids.dedup();
                    ids
                }
            };
            for id in ids {
                let Some(state) = c.host_state(id, &aggregates, retain) else {
                    continue;
                };
                if !seen.insert((state.host.clone(), state.nodename.clone())) {
                    tracing::warn!(host = %state.host, node = %state.nodename, cell = %db.cell.uuid,
                        "compute node seen in more than one cell; keeping the first");
                    continue;
                }
                states.push(state);
            }
        }
        Ok(states)
    }

    /// Reads the requested uuids the cache does not hold from the selected cells.
    async fn fetch_unknown(&self, selected: &[Arc<CellDb>], uuids: &[String]) {
        // One read lock per cell, not one per uuid: this runs on every request.
        let caches: Vec<Arc<RwLock<CellCache>>> = selected
            .iter()
            .filter_map(|db| self.cell(&db.cell.uuid))
            .collect();
        let missing: Vec<String> = {
            let guards: Vec<_> = caches.iter().map(|c| read(c)).collect();
            let known = |u: &str| guards.iter().any(|c| c.node_by_uuid.contains_key(u));
            let mut unknown = self.unknown_uuids.lock().unwrap_or_else(|p| p.into_inner());
            unknown.retain(|_, at| at.elapsed() < UNKNOWN_UUID_TTL);
            uuids
                .iter()
                .filter(|u| !known(u) && !unknown.contains_key(u.as_str()))
                .cloned()
                .collect()
        };
        if missing.is_empty() {
            return;
        }
        let reads = selected.iter().map(|db| {
            let missing = &missing;
            async move {
                let pool = db.pool.as_ref()?;
                let fetched = tokio::time::timeout(
                    self.store.cell_timeout,
                    queries::cell_rows(pool, Some(missing)),
                )
                .await;
                match fetched {
                    Ok(Ok(rows)) => {
                        self.store.backfill_ratios(pool, db, &rows.1).await;
                        Some((db, rows))
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(cell = %db.display_name(), error = %e, "Failed to get computes for cell");
                        None
                    }
                    Err(_) => {
                        tracing::warn!(cell = %db.display_name(), "Timeout getting computes for cell");
                        None
                    }
                }
            }
        });
        let mut found: HashSet<String> = HashSet::new();
        for (db, (services, nodes, instances)) in join_all(reads).await.into_iter().flatten() {
            let Some(cache) = self.cell(&db.cell.uuid) else {
                continue;
            };
            let mut c = write(&cache);
            for s in services {
                c.upsert_service(s);
            }
            let hosts: HashSet<String> = nodes.iter().filter_map(|n| n.host.clone()).collect();
            for n in nodes {
                if let Some(u) = &n.uuid {
                    found.insert(u.clone());
                }
                c.upsert_node(&db.cell.uuid, &self.store.ratios, n, false);
            }
            let mut by_host: HashMap<String, (BTreeSet<String>, InstanceFlavorIds)> =
                HashMap::new();
            for inst in instances {
                let (uuids, flavors) = by_host.entry(inst.host).or_default();
                uuids.insert(inst.uuid.clone());
                flavors.insert(inst.uuid, inst.flavor_id);
            }
            for host in hosts {
                let (uuids, flavors) = by_host.remove(&host).unwrap_or_default();
                c.replace_host_instances(&host, &uuids, Some(&flavors));
            }
        }
        let mut unknown = self.unknown_uuids.lock().unwrap_or_else(|p| p.into_inner());
        for u in missing.into_iter().filter(|u| !found.contains(u)) {
            unknown.insert(u, Instant::now());
        }
    }

    /// Number of compute nodes cached, over every cell.
    pub fn node_count(&self) -> usize {
        read(&self.cells)
            .values()
            .map(|c| read(c).nodes.len())
            .sum()
    }
}

mod cell;
mod decision_table;
mod updates;
mod watermarks;

#[cfg(test)]
mod tests;
