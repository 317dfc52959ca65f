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

use super::cells::CellDb;
use super::compute;
use super::queries::{self, Change, InstanceRow, Window};
use super::rows::{ComputeNodeRow, HostInstance, ServiceRow};
use super::{lock, read, write, HostStateStore, StateError};
use crate::model::{HostState, InstanceFlavorIds, ServiceInfo};
use crate::scheduler::HostTable;
use chrono::{DateTime, Duration as ChronoDuration, NaiveDateTime, SubsecRound, Utc};
use futures_util::future::join_all;
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::future::Future;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// How late a row may commit after its stamp (and a writer's clock lag behind the
/// database's) and still be seen by an incremental pass.
const WATERMARK_MARGIN_SECS: i64 = 5;

/// Where the next incremental pass of a cell reads from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Watermarks {
    /// The previous read's database clock less a second.
    fresh: NaiveDateTime,
    /// Rows stamped up to here were read at least the margin after their stamp.
    lagged: NaiveDateTime,
}

impl Watermarks {
    /// After a read of everything at database time `now`.
    fn after_full_read(now: NaiveDateTime) -> Self {
        Watermarks {
            fresh: now - ChronoDuration::seconds(1),
            lagged: now - ChronoDuration::seconds(WATERMARK_MARGIN_SECS),
        }
    }

    /// What a pass at database time `now` reads.
    fn window(&self, now: NaiveDateTime) -> Window {
        Window {
            fresh: self.fresh,
            lagged_from: self.lagged,
            lagged_to: self.lagged_to(now),
        }
    }

    /// After a pass at database time `now` succeeded.
    fn after_pass(&self, now: NaiveDateTime) -> Self {
        Watermarks {
            fresh: now - ChronoDuration::seconds(1),
            lagged: self.lagged_to(now),
        }
    }

    fn lagged_to(&self, now: NaiveDateTime) -> NaiveDateTime {
        self.lagged
            .max(now - ChronoDuration::seconds(WATERMARK_MARGIN_SECS))
    }
}

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

/// The resources one of our decisions took on a host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Consumption {
    pub memory_mb: i64,
    pub root_gb: i64,
    pub ephemeral_gb: i64,
    pub vcpus: i64,
}

#[derive(Debug, Clone, Copy)]
struct Retained {
    at: DateTime<Utc>,
    what: Consumption,
}

/// One compute node: its HostState from the row alone, and our retained decisions.
struct CachedNode {
    /// `state.uuid`, shared with `node_by_uuid`'s key.
    uuid: Option<Arc<str>>,
    row_updated: Option<NaiveDateTime>,
    state: HostState,
    retained: Vec<Retained>,
}

/// What the cache holds of one cell.
#[derive(Default)]
struct CellCache {
    /// The row's id and the `ServiceInfo` every request's host states carry, built
    /// once per row.
    // Fx-hashed: every request looks up each candidate in several of these maps, and
    // their keys (host names, uuids) come from the cell database, not from users.
    services: FxHashMap<String, (i64, ServiceInfo)>,
    /// Compute nodes by id: the order of nova's `ComputeNodeList.get_all`. Boxed:
    /// a B-tree node holds 11 entries and is half empty after in-order inserts,
    /// which for a 600-byte entry is half of the cache's node memory.
    nodes: BTreeMap<i64, Box<CachedNode>>,
    node_by_uuid: FxHashMap<Arc<str>, i64>,
    instance_host: FxHashMap<String, String>,
    instances_by_host: FxHashMap<String, Arc<BTreeSet<String>>>,
    /// The flavor id of each instance of `instances_by_host` whose flavor is known.
    flavors_by_host: FxHashMap<String, Arc<InstanceFlavorIds>>,
    watermarks: Option<Watermarks>,
    /// Where the scan for soft-deleted instances reads from, and when it last ran.
    deleted_scan: Option<(Watermarks, Instant)>,
    last_full: Option<Instant>,
    texts: compute::RowInterner,
    /// Hosts whose joined state may have changed since the decision table last
    /// read them (their node, instances or retained decisions).
    changed_hosts: FxHashSet<String>,
    /// Hosts whose service row alone changed since (a heartbeat, mostly).
    changed_services: FxHashSet<String>,
    /// A node or a host's service came or went: the decision table's rows are
    /// built again.
    rows_changed: bool,
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

/// The host states of every enabled cell as a request would read them (see
/// [`HostStateCache::table`]), and what is needed to keep them up to date.
struct DecisionTable {
    table: Arc<HostTable>,
    /// The cells read, by uuid, in table order.
    cells: Vec<(String, Arc<RwLock<CellCache>>)>,
    /// `AggregateCache::generation` when read.
    aggregates: u64,
    /// (cell position, host) → its rows and their node ids.
    rows_of_host: FxHashMap<(usize, String), Vec<(usize, i64)>>,
    /// When a retained decision stops applying to a host: (time, cell position, host).
    expiries: BTreeSet<(DateTime<Utc>, usize, String)>,
}

// === impl CellCache ===

impl CellCache {
    fn from_rows(
        cell_uuid: &str,
        ratios: &compute::RatioDefaults,
        services: Vec<ServiceRow>,
        nodes: Vec<ComputeNodeRow>,
        instances: Vec<HostInstance>,
        previous: Option<&CellCache>,
    ) -> Self {
        let mut cache = CellCache::default();
        for svc in services {
            cache.upsert_service(svc);
        }
        for node in nodes {
            cache.upsert_node(cell_uuid, ratios, node, true);
        }
        // Keep our retained decisions across a full re-read; the row rule drops them.
        if let Some(prev) = previous {
            for (id, node) in cache.nodes.iter_mut() {
                if let Some(old) = prev.nodes.get(id) {
                    node.retained = still_pending(&old.retained, node.row_updated);
                }
            }
        }
        let mut by_host: HashMap<String, BTreeSet<String>> = HashMap::new();
        let mut flavors: HashMap<String, InstanceFlavorIds> = HashMap::new();
        for inst in instances {
            by_host
                .entry(inst.host.clone())
                .or_default()
                .insert(inst.uuid.clone());
            flavors
                .entry(inst.host.clone())
                .or_default()
                .insert(inst.uuid.clone(), inst.flavor_id);
            cache.instance_host.insert(inst.uuid, inst.host);
        }
        cache.instances_by_host = by_host.into_iter().map(|(h, s)| (h, Arc::new(s))).collect();
        cache.flavors_by_host = flavors.into_iter().map(|(h, f)| (h, Arc::new(f))).collect();
        cache.rows_changed = true;
        cache
    }

    fn upsert_service(&mut self, svc: ServiceRow) {
        if let Some(host) = svc.host.clone() {
            let info = compute::service_info(&svc);
            match self.services.get(&host) {
                // Read again unchanged (a pass's overlap): the table keeps its row.
                Some((id, cached)) if *id == svc.id && *cached == info => return,
                Some(_) => {
                    self.changed_services.insert(host.clone());
                }
                None => self.rows_changed = true,
            }
            self.services.insert(host, (svc.id, info));
        }
    }

    fn delete_service(&mut self, svc: &ServiceRow) {
        if let Some(host) = &svc.host {
            if self.services.get(host).is_some_and(|s| s.0 == svc.id) {
                self.services.remove(host);
                self.rows_changed = true;
            }
        }
    }

    /// Applies a node row unless the cached one is newer (a targeted read that raced
    /// a refresh). `force` is for full loads, which replace everything.
    fn upsert_node(
        &mut self,
        cell_uuid: &str,
        ratios: &compute::RatioDefaults,
        row: ComputeNodeRow,
        force: bool,
    ) {
        let id = row.id;
        let previous = self.nodes.get(&id);
        if !force {
            if let Some(prev) = previous {
                if let (Some(old), Some(new)) = (prev.row_updated, row.updated_at) {
                    if old > new {
                        return;
                    }
                }
            }
        }
        match previous {
            Some(p) if row.host.as_deref() == Some(&*p.state.host) => {
                self.changed_hosts.insert(p.state.host.to_string());
            }
            _ => self.rows_changed = true,
        }
        let previous = self.nodes.get(&id);
        let retained = previous
            .map(|p| still_pending(&p.retained, row.updated_at))
            .unwrap_or_default();
        if let Some(old_uuid) = previous.and_then(|p| p.uuid.clone()) {
            if row.uuid.as_deref() != Some(&*old_uuid) {
                self.node_by_uuid.remove(&old_uuid);
            }
        }
        let row_updated = row.updated_at;
        let uuid: Option<Arc<str>> = row.uuid.as_deref().map(Arc::from);
        let mut state = compute::host_state(
            row,
            &ServiceRow::default(),
            cell_uuid,
            ratios,
            Vec::new(),
            Arc::new(BTreeSet::new()),
            &mut self.texts,
        );
        // Parse the NUMA topology once here: every request's copy then shares the
        // parsed form instead of parsing it again (a malformed one is kept as its error).
        let _ = state.numa.get(state.numa_topology.as_deref());
        // One allocation for the row's uuid (the state has it once the node reported usage).
        if state.uuid.is_some() {
            state.uuid.clone_from(&uuid);
        }
        if let Some(u) = &uuid {
            self.node_by_uuid.insert(u.clone(), id);
        }
        self.nodes.insert(
            id,
            Box::new(CachedNode {
                uuid,
                row_updated,
                state,
                retained,
            }),
        );
    }

    fn delete_node(&mut self, id: i64) {
        if let Some(node) = self.nodes.remove(&id) {
            self.rows_changed = true;
            if let Some(u) = node.uuid {
                if self.node_by_uuid.get(&u) == Some(&id) {
                    self.node_by_uuid.remove(&u);
                }
            }
        }
    }

    fn apply_instance(&mut self, row: InstanceRow) {
        let new_host = row.host.filter(|_| row.live);
        if let Some(old) = self.instance_host.get(&row.uuid) {
            if Some(old) != new_host.as_ref() {
                let old = old.clone();
                self.remove_instance(&old, &row.uuid);
            }
        }
        if let Some(host) = new_host {
            self.add_instance(&host, &row.uuid, Some(row.flavor_id));
        }
    }

    /// `flavor`: the instance's flavor id (itself None for a NULL column), or None
    /// when the source did not say (a cast without `instance_type_id`): a flavor
    /// already known for the instance on this host is then kept.
    fn add_instance(&mut self, host: &str, uuid: &str, flavor: Option<Option<i64>>) {
        if let Some(old) = self.instance_host.get(uuid) {
            if old != host {
                let old = old.clone();
                self.remove_instance(&old, uuid);
            }
        }
        self.instance_host
            .insert(uuid.to_string(), host.to_string());
        self.changed_hosts.insert(host.to_string());
        let set = self.instances_by_host.entry(host.to_string()).or_default();
        if !set.contains(uuid) {
            Arc::make_mut(set).insert(uuid.to_string());
        }
        if let Some(flavor) = flavor {
            let flavors = self.flavors_by_host.entry(host.to_string()).or_default();
            if flavors.get(uuid) != Some(&flavor) {
                Arc::make_mut(flavors).insert(uuid.to_string(), flavor);
            }
        }
    }

    fn remove_instance(&mut self, host: &str, uuid: &str) {
        self.changed_hosts.insert(host.to_string());
        if self.instance_host.get(uuid).is_some_and(|h| h == host) {
            self.instance_host.remove(uuid);
        }
        if let Some(set) = self.instances_by_host.get_mut(host) {
            if set.contains(uuid) {
                Arc::make_mut(set).remove(uuid);
            }
            if set.is_empty() {
                self.instances_by_host.remove(host);
            }
        }
        if let Some(flavors) = self.flavors_by_host.get_mut(host) {
            if flavors.contains_key(uuid) {
                Arc::make_mut(flavors).remove(uuid);
            }
            if flavors.is_empty() {
                self.flavors_by_host.remove(host);
            }
        }
    }

    /// `flavors`: each uuid's flavor id when the source carries them (a cell read).
    fn replace_host_instances(
        &mut self,
        host: &str,
        uuids: &BTreeSet<String>,
        flavors: Option<&InstanceFlavorIds>,
    ) {
        let current: Vec<String> = self
            .instances_by_host
            .get(host)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for uuid in current.iter().filter(|u| !uuids.contains(*u)) {
            self.remove_instance(host, uuid);
        }
        for uuid in uuids {
            let flavor = flavors.and_then(|f| f.get(uuid).copied());
            self.add_instance(host, uuid, flavor);
        }
    }

    /// The HostState of node `id` as a request sees it, or `None` when nova would
    /// skip it (no service record for its host).
    fn host_state(
        &self,
        id: i64,
        aggregates: &super::aggregates::AggregateCache,
        retain: Option<(DateTime<Utc>, Duration)>,
    ) -> Option<HostState> {
        let node = self.nodes.get(&id)?;
        let host: &str = &node.state.host;
        let Some(service) = self.services.get(host) else {
            tracing::warn!(%host, "No compute service record found for host");
            return None;
        };
        let mut state = node.state.clone();
        state.service = service.1.clone();
        state.aggregates = aggregates.for_host(host);
        if let Some(insts) = self.instances_by_host.get(host) {
            state.instances = Arc::clone(insts);
        }
        if let Some(flavors) = self.flavors_by_host.get(host) {
            state.instance_flavor_ids = Arc::clone(flavors);
        }
        if let Some((now, ttl)) = retain {
            let ttl = ChronoDuration::from_std(ttl).unwrap_or(ChronoDuration::MAX);
            for r in still_pending(&node.retained, node.row_updated) {
                if now - r.at < ttl {
                    let c = r.what;
                    state.consume(c.memory_mb, c.root_gb, c.ephemeral_gb, c.vcpus, r.at);
                }
            }
        }
        Some(state)
    }
}

impl CellCache {
    /// When the earliest of node `id`'s retained decisions applied at `now` stops
    /// applying (its `ttl` runs out).
    fn retained_until(&self, id: i64, now: DateTime<Utc>, ttl: Duration) -> Option<DateTime<Utc>> {
        let node = self.nodes.get(&id)?;
        let ttl = ChronoDuration::from_std(ttl).ok()?;
        still_pending(&node.retained, node.row_updated)
            .iter()
            .filter(|r| now - r.at < ttl)
            .filter_map(|r| r.at.checked_add_signed(ttl))
            .min()
    }
}

/// nova's rule: a compute node row written after a decision already shows it.
///
/// `updated_at` has whole seconds (the database truncates or rounds the writer's
/// clock) and a decision's time has not: a row stamped in the decision's second,
/// or later, may have been written after it (the compute's claim, a fraction of
/// a second later) and is taken to show it. Only a row stamped in an earlier
/// second is known to predate the decision. In doubt the decision is dropped:
/// the host is then what nova reads, where keeping it would count the claim
/// twice, a state nova never sees.
fn still_pending(retained: &[Retained], row_updated: Option<NaiveDateTime>) -> Vec<Retained> {
    retained
        .iter()
        .filter(|r| row_updated.is_none_or(|u| u.and_utc() < r.at.trunc_subsecs(0)))
        .copied()
        .collect()
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

    /// The host states of every enabled cell, as [`host_states`](Self::host_states)
    /// gives them for `now` with no uuid and no cell, as a table (same order,
    /// same states). Built once, then brought up to date from the hosts changed
    /// since (a refresh pass, an instance cast, a retained decision, a retained
    /// decision running out); built again when nodes, services, cells or
    /// aggregates come or go.
    pub async fn table(&self, now: DateTime<Utc>) -> Result<Arc<HostTable>, StateError> {
        let mut selected = self.store.select_cells(None).await?;
        selected.sort_by(|a, b| a.cell.uuid.cmp(&b.cell.uuid));
        for db in &selected {
            if self.cell(&db.cell.uuid).is_none() {
                self.full_load(db).await;
            }
        }
        let cells: Vec<(String, Arc<RwLock<CellCache>>)> = selected
            .iter()
            .filter_map(|db| Some((db.cell.uuid.clone(), self.cell(&db.cell.uuid)?)))
            .collect();
        Ok(self.table_of(cells, now))
    }

    /// [`table`](Self::table), after reading from the cells any of `uuids` the
    /// table does not hold (as `host_states` does for a request's providers).
    pub async fn table_for(
        &self,
        uuids: &[String],
        now: DateTime<Utc>,
    ) -> Result<Arc<HostTable>, StateError> {
        let table = self.table(now).await?;
        let missing: Vec<String> = uuids
            .iter()
            .filter(|u| table.row_of_uuid(u).is_none())
            .cloned()
            .collect();
        if missing.is_empty() {
            return Ok(table);
        }
        let selected = self.store.select_cells(None).await?;
        self.fetch_unknown(&selected, &missing).await;
        self.table(now).await
    }

    /// Brings the table up to date when one was built (after a refresh pass, so
    /// that requests seldom have to).
    async fn update_table(&self, now: DateTime<Utc>) {
        let built = lock(&self.decision_table).is_some();
        if built {
            if let Err(e) = self.table(now).await {
                tracing::debug!(error = %e, "decision table not updated");
            }
        }
    }

    fn table_of(
        &self,
        cells: Vec<(String, Arc<RwLock<CellCache>>)>,
        now: DateTime<Utc>,
    ) -> Arc<HostTable> {
        let retain = self
            .opts
            .retain_consumption
            .then_some((now, self.opts.consumption_ttl));
        let aggregates = read(&self.store.aggregates);
        let mut kept = lock(&self.decision_table);
        if let Some(dt) = kept.as_mut() {
            let same_cells = dt.cells.len() == cells.len()
                && dt
                    .cells
                    .iter()
                    .zip(&cells)
                    .all(|(a, b)| a.0 == b.0 && Arc::ptr_eq(&a.1, &b.1));
            if same_cells && dt.aggregates == aggregates.generation() {
                if let Some(table) = dt.bring_up_to_date(&aggregates, retain, now) {
                    return table;
                }
            }
        }
        let built = DecisionTable::build(cells, &aggregates, retain, now);
        let table = Arc::clone(&built.table);
        *kept = Some(built);
        table
    }

    /// Retains one decision: `what` was consumed on node `node_uuid` of `cell_uuid` at `at`.
    pub fn retain(&self, cell_uuid: &str, node_uuid: &str, what: Consumption, at: DateTime<Utc>) {
        if !self.opts.retain_consumption {
            return;
        }
        let Some(cache) = self.cell(cell_uuid) else {
            return;
        };
        let mut c = write(&cache);
        let Some(id) = c.node_by_uuid.get(node_uuid).copied() else {
            return;
        };
        if let Some(node) = c.nodes.get_mut(&id) {
            node.retained.push(Retained { at, what });
            let host = node.state.host.to_string();
            c.changed_hosts.insert(host);
        }
    }

    fn cell_of_host(&self, host: &str) -> Option<Arc<RwLock<CellCache>>> {
        read(&self.cells)
            .values()
            .find(|c| read(c).services.contains_key(host))
            .cloned()
    }

    /// nova's `update_instance_info` cast: these instances are on `host`, each with
    /// its flavor id when the Instance object carried `instance_type_id`.
    pub fn update_instance_info(&self, host: &str, instances: &[(String, Option<Option<i64>>)]) {
        if let Some(cache) = self.cell_of_host(host) {
            let mut c = write(&cache);
            for (uuid, flavor) in instances {
                c.add_instance(host, uuid, *flavor);
            }
        }
    }

    /// nova's `delete_instance_info` cast: the instance left `host`.
    pub fn delete_instance_info(&self, host: &str, instance_uuid: &str) {
        if let Some(cache) = self.cell_of_host(host) {
            write(&cache).remove_instance(host, instance_uuid);
        }
    }

    /// Reads the compute nodes of `host` again now rather than at the next pass.
    /// nova-compute casts `update_instance_info` and `delete_instance_info` after
    /// its resource tracker wrote the host's node (a claim, a deletion), so a
    /// request that follows (another boot right after a delete) sees the row
    /// nova would read, not the one of the last pass. A row older than the
    /// cached one is ignored, as on any targeted read. Reads of one host do not
    /// run side by side: a call during a read has it run once more after.
    pub async fn reread_host(&self, host: &str) {
        {
            let mut pending = lock(&self.rereads);
            if let Some(again) = pending.get_mut(host) {
                *again = true;
                return;
            }
            pending.insert(host.to_string(), false);
        }
        loop {
            self.read_host_nodes(host).await;
            let mut pending = lock(&self.rereads);
            match pending.get_mut(host) {
                Some(again) if *again => *again = false,
                _ => {
                    pending.remove(host);
                    return;
                }
            }
        }
    }

    async fn read_host_nodes(&self, host: &str) {
        let Some((cell_uuid, cache)) = read(&self.cells)
            .iter()
            .find(|(_, c)| read(c).services.contains_key(host))
            .map(|(u, c)| (u.clone(), Arc::clone(c)))
        else {
            return;
        };
        let set = self.store.cell_set();
        let Some(db) = set.cells.iter().find(|d| d.cell.uuid == cell_uuid) else {
            return;
        };
        let Some(pool) = db.pool.as_ref() else {
            return;
        };
        let read_nodes = async {
            let nodes = queries::compute_nodes_of_host(pool, host).await?;
            self.store.backfill_ratios(pool, db, &nodes).await;
            Ok::<_, sqlx::Error>(nodes)
        };
        match tokio::time::timeout(self.store.cell_timeout, read_nodes).await {
            Ok(Ok(nodes)) => {
                let mut c = write(&cache);
                for n in nodes {
                    c.upsert_node(&cell_uuid, &self.store.ratios, n, false);
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(%host, cell = %db.display_name(), error = %e, "could not read the host's compute nodes again; the next pass will");
            }
            Err(_) => {
                tracing::warn!(%host, cell = %db.display_name(), "timeout reading the host's compute nodes again; the next pass will");
            }
        }
    }

    /// nova's `sync_instance_info` cast: the full list of `host`'s instances. On a
    /// mismatch nova re-reads the host from its cell; the compute's list is newer
    /// than any read, so we take it.
    pub fn sync_instance_info(&self, host: &str, instance_uuids: &[String]) -> bool {
        let Some(cache) = self.cell_of_host(host) else {
            return false;
        };
        let mut c = write(&cache);
        let wanted: BTreeSet<String> = instance_uuids.iter().cloned().collect();
        let matches = c
            .instances_by_host
            .get(host)
            .map_or(wanted.is_empty(), |s| **s == wanted);
        if !matches {
            tracing::info!(%host, "The instance sync for host did not match. Re-created its InstanceList.");
            c.replace_host_instances(host, &wanted, None);
        }
        matches
    }

    /// Number of compute nodes cached, over every cell.
    pub fn node_count(&self) -> usize {
        read(&self.cells)
            .values()
            .map(|c| read(c).nodes.len())
            .sum()
    }
}

// === impl DecisionTable ===

impl DecisionTable {
    /// Every node of `cells` that a request would see, as `host_states` reads them.
    fn build(
        cells: Vec<(String, Arc<RwLock<CellCache>>)>,
        aggregates: &super::aggregates::AggregateCache,
        retain: Option<(DateTime<Utc>, Duration)>,
        now: DateTime<Utc>,
    ) -> DecisionTable {
        let mut rows: Vec<Arc<HostState>> = Vec::new();
        let mut rows_of_host: FxHashMap<(usize, String), Vec<(usize, i64)>> = FxHashMap::default();
        let mut expiries = BTreeSet::new();
        let mut seen: FxHashSet<(Arc<str>, Arc<str>)> = FxHashSet::default();
        for (k, (_, cell)) in cells.iter().enumerate() {
            let mut c = write(cell);
            c.rows_changed = false;
            c.changed_hosts.clear();
            c.changed_services.clear();
            let c = &*c;
            for &id in c.nodes.keys() {
                let Some(state) = c.host_state(id, aggregates, retain) else {
                    continue;
                };
                // As `host_states`: a node seen in an earlier cell is skipped.
                if !seen.insert((state.host.clone(), state.nodename.clone())) {
                    continue;
                }
                if let Some((_, ttl)) = retain {
                    if let Some(until) = c.retained_until(id, now, ttl) {
                        expiries.insert((until, k, state.host.to_string()));
                    }
                }
                rows_of_host
                    .entry((k, state.host.to_string()))
                    .or_default()
                    .push((rows.len(), id));
                rows.push(Arc::new(state));
            }
        }
        DecisionTable {
            table: Arc::new(HostTable::from_shared(rows)),
            cells,
            aggregates: aggregates.generation(),
            rows_of_host,
            expiries,
        }
    }

    /// The table with the changed hosts read again; `None` when it must be built
    /// again (rows came or went).
    fn bring_up_to_date(
        &mut self,
        aggregates: &super::aggregates::AggregateCache,
        retain: Option<(DateTime<Utc>, Duration)>,
        now: DateTime<Utc>,
    ) -> Option<Arc<HostTable>> {
        let mut hosts: BTreeSet<(usize, String)> = BTreeSet::new();
        while let Some(first) = self.expiries.first() {
            if first.0 > now {
                break;
            }
            let (_, k, host) = self.expiries.pop_first()?;
            hosts.insert((k, host));
        }
        let mut services: Vec<(usize, String)> = Vec::new();
        for (k, (_, cell)) in self.cells.iter().enumerate() {
            let mut c = write(cell);
            if c.rows_changed {
                return None;
            }
            hosts.extend(c.changed_hosts.drain().map(|h| (k, h)));
            services.extend(c.changed_services.drain().map(|h| (k, h)));
        }
        // A service change alone (a heartbeat, mostly): the row with its new
        // service; no join, and no weigher reads it. Written in place when no
        // request holds the table (between requests), else on a copy.
        let mut service_changes: Vec<(usize, ServiceInfo)> = Vec::new();
        for (k, host) in services {
            if hosts.contains(&(k, host.clone())) {
                continue;
            }
            let Some(rows) = self.rows_of_host.get(&(k, host)) else {
                continue;
            };
            let c = read(&self.cells[k].1);
            for &(row, _) in rows {
                let service = c.services.get(&*self.table.row(row).host)?.1.clone();
                service_changes.push((row, service));
            }
        }
        if !service_changes.is_empty() {
            match Arc::get_mut(&mut self.table) {
                Some(table) => table.set_services(service_changes),
                None => {
                    let changes = service_changes
                        .into_iter()
                        .map(|(row, service)| {
                            let current = self.table.row(row);
                            (
                                row,
                                Arc::new(HostState {
                                    service,
                                    ..(**current).clone()
                                }),
                            )
                        })
                        .collect();
                    self.table = Arc::new(self.table.with_service_changes(changes));
                }
            }
        }
        if hosts.is_empty() {
            return Some(Arc::clone(&self.table));
        }
        let mut changes = Vec::new();
        for (k, host) in hosts {
            let Some(rows) = self.rows_of_host.get(&(k, host)) else {
                // A host without a node in the table (a service alone).
                continue;
            };
            let c = read(&self.cells[k].1);
            for &(row, id) in rows {
                let state = c.host_state(id, aggregates, retain)?;
                if let Some((_, ttl)) = retain {
                    if let Some(until) = c.retained_until(id, now, ttl) {
                        self.expiries.insert((until, k, state.host.to_string()));
                    }
                }
                changes.push((row, Arc::new(state)));
            }
        }
        if !changes.is_empty() {
            self.table = Arc::new(self.table.with_changes(changes));
        }
        Some(Arc::clone(&self.table))
    }
}

#[cfg(test)]
mod tests;
