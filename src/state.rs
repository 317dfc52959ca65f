// SPDX-License-Identifier: Apache-2.0
//! Host states from nova's databases (MySQL through sqlx), as nova's `HostManager`
//! reads them for every request.
//!
//! - The API database gives the cells (`cell_mappings`, cell0 excluded) and the
//!   aggregates (`aggregates` + `aggregate_hosts` + `aggregate_metadata`), cached in
//!   memory like nova's `aggs_by_id` / `host_aggregates_map`.
//! - Each cell database gives the `nova-compute` services, the compute nodes and the
//!   instances on their hosts: read per request by [`HostStateStore::host_states`] (as
//!   nova does), or kept warm by the cache in [`cache`], which reads only what changed.
//!
//! The store writes to a cell database only what nova's scheduler writes while
//! reading: allocation ratios that are NULL/0.0 get the configured value
//! (`ratio_backfill`). nova also rewrites a pre-Liberty `numa_topology`; we read
//! that format but leave the row alone.

mod aggregates;
pub mod cache;
mod cells;
mod compute;
pub mod discover;
mod group_hosts;
pub mod instance_images;
mod queries;
mod ratio_backfill;
mod rows;
pub mod service_row;

pub use cache::{CacheOptions, Consumption, HostStateCache, RefreshStats};
pub use cells::{mask_url, Cell, CellUrlResolver};

use crate::model::{Aggregate, HostState};
use aggregates::AggregateCache;
use cells::{CellDb, CellSet};
use compute::RatioDefaults;
use futures_util::future::join_all;
use rows::{CellRows, ComputeNodeRow};
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// nova's `CELL_TIMEOUT`: a cell that has not answered within this time is skipped.
pub const DEFAULT_CELL_TIMEOUT: Duration = Duration::from_secs(60);

/// Each cell of `cell_mappings` (cell0 excluded) with its database's sqlx URL, or why
/// the URL cannot be used; for checks that connect to every cell once. The error
/// names the API database without its password.
pub async fn cell_databases(
    opts: &StateOptions,
) -> Result<Vec<(String, Result<String, String>)>, String> {
    let masked = mask_url(&opts.api_database_url);
    let api = MySqlPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&opts.api_database_url)
        .await
        .map_err(|e| format!("API database {masked}: {e}"))?;
    let rows = cells::load_mappings(&api)
        .await
        .map_err(|e| format!("API database {masked}: {e}"));
    api.close().await;
    Ok(rows?
        .into_iter()
        .map(|row| {
            let name = row.name.clone().unwrap_or_else(|| row.uuid.clone());
            let url = match &row.database_connection {
                Some(url) => (opts.cell_url_resolver)(url),
                None => Err("cell_mappings has no database_connection for it".to_string()),
            };
            (name, url)
        })
        .collect())
}

/// What the store needs from nova.conf.
#[derive(Clone)]
pub struct StateOptions {
    /// `[api_database] connection`, already in sqlx form (`mysql://user:pass@host:port/db`).
    pub api_database_url: String,
    /// `[database] connection` (usually cell0), sqlx form. Only read for the minimum
    /// compute service version, which nova gathers from every cell including cell0.
    pub main_database_url: String,
    /// `[DEFAULT] cpu_allocation_ratio`: replaces NULL/0.0 ratios of compute nodes.
    pub cpu_allocation_ratio: Option<f64>,
    pub ram_allocation_ratio: Option<f64>,
    pub disk_allocation_ratio: Option<f64>,
    /// `[DEFAULT] initial_cpu_allocation_ratio` (4.0): used when the above is unset or 0.
    pub initial_cpu_allocation_ratio: f64,
    /// `[DEFAULT] initial_ram_allocation_ratio` (1.0).
    pub initial_ram_allocation_ratio: f64,
    /// `[DEFAULT] initial_disk_allocation_ratio` (1.0).
    pub initial_disk_allocation_ratio: f64,
    /// Turns a `cell_mappings.database_connection` (an SQLAlchemy URL, maybe a
    /// `{username}`-style template) into an sqlx URL.
    pub cell_url_resolver: CellUrlResolver,
    /// Per-cell time limit of one scatter-gather ([`DEFAULT_CELL_TIMEOUT`]).
    pub cell_timeout: Duration,
    /// Write nothing, not even nova's allocation-ratio write-back (the operator
    /// tools `capacity` and `snapshot`); the daemon leaves it false.
    pub read_only: bool,
}

impl StateOptions {
    /// Options with nova's defaults for everything but the URLs and the resolver.
    pub fn new(
        api_database_url: impl Into<String>,
        main_database_url: impl Into<String>,
        cell_url_resolver: CellUrlResolver,
    ) -> Self {
        StateOptions {
            api_database_url: api_database_url.into(),
            main_database_url: main_database_url.into(),
            cpu_allocation_ratio: None,
            ram_allocation_ratio: None,
            disk_allocation_ratio: None,
            initial_cpu_allocation_ratio: 4.0,
            initial_ram_allocation_ratio: 1.0,
            initial_disk_allocation_ratio: 1.0,
            cell_url_resolver,
            cell_timeout: DEFAULT_CELL_TIMEOUT,
            read_only: false,
        }
    }
}

impl fmt::Debug for StateOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateOptions")
            .field("api_database_url", &mask_url(&self.api_database_url))
            .field("main_database_url", &mask_url(&self.main_database_url))
            .field("cpu_allocation_ratio", &self.cpu_allocation_ratio)
            .field("ram_allocation_ratio", &self.ram_allocation_ratio)
            .field("disk_allocation_ratio", &self.disk_allocation_ratio)
            .field(
                "initial_cpu_allocation_ratio",
                &self.initial_cpu_allocation_ratio,
            )
            .field(
                "initial_ram_allocation_ratio",
                &self.initial_ram_allocation_ratio,
            )
            .field(
                "initial_disk_allocation_ratio",
                &self.initial_disk_allocation_ratio,
            )
            .field("cell_timeout", &self.cell_timeout)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

/// Errors of the state store. URLs in them are masked; passwords never appear.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The API database did not answer (fatal at startup, as in nova).
    #[error("API database {url}: {source}")]
    ApiDatabase {
        url: String,
        #[source]
        source: sqlx::Error,
    },
    /// A URL could not be used (bad syntax or the resolver refused it).
    #[error("invalid database URL {url}: {message}")]
    InvalidUrl { url: String, message: String },
    /// A request named a cell that the API database does not know.
    #[error("cell {0} is not in cell_mappings")]
    UnknownCell(String),
    /// A read from the scheduler's own `[database]` failed.
    #[error("main database: {0}")]
    MainDatabase(#[source] sqlx::Error),
}

/// Host states for the scheduler, read per request from the cell databases.
pub struct HostStateStore {
    api: MySqlPool,
    api_url_masked: String,
    main: Option<MySqlPool>,
    cells: RwLock<Arc<CellSet>>,
    aggregates: RwLock<AggregateCache>,
    ratios: RatioDefaults,
    resolver: CellUrlResolver,
    cell_timeout: Duration,
    min_version: Mutex<MinVersionReading>,
    read_only: bool,
}

/// The minimum compute service version as last read, for the OWNER_NOVA request
/// filter. nova reads it from every cell per request; with the host state cache on,
/// the cache's refresh pass reads it instead and requests use that reading while it
/// is younger than `max_age` (as old as the host states they are decided on), so
/// no request waits on three database round trips before asking Placement.
#[derive(Debug, Default)]
struct MinVersionReading {
    /// `None`: every request reads it (nova's way; the cache is off).
    max_age: Option<Duration>,
    last: Option<(Instant, Option<i64>)>,
}

// === impl HostStateStore ===

impl HostStateStore {
    /// Connects to the API database, reads the cells and the aggregates. Cell
    /// databases are opened lazily; one that is down only logs a warning.
    pub async fn connect(opts: StateOptions) -> Result<Self, StateError> {
        let api_url_masked = mask_url(&opts.api_database_url);
        let api = MySqlPoolOptions::new()
            .max_connections(5)
            .acquire_timeout(Duration::from_secs(30))
            .connect(&opts.api_database_url)
            .await
            .map_err(|source| StateError::ApiDatabase {
                url: api_url_masked.clone(),
                source,
            })?;
        let main = match cells::open_pool(&opts.main_database_url) {
            Ok(pool) => Some(pool),
            Err(message) => {
                tracing::warn!(url = %mask_url(&opts.main_database_url), %message,
                    "main database URL unusable; cell0 is left out of version checks");
                None
            }
        };
        let store = HostStateStore {
            api,
            api_url_masked,
            main,
            cells: RwLock::new(Arc::new(CellSet::default())),
            aggregates: RwLock::new(AggregateCache::default()),
            ratios: RatioDefaults::from_options(&opts),
            resolver: opts.cell_url_resolver,
            cell_timeout: opts.cell_timeout,
            min_version: Mutex::new(MinVersionReading::default()),
            read_only: opts.read_only,
        };
        store.load_cells(true).await?;
        let aggs = aggregates::load(&store.api)
            .await
            .map_err(|e| store.api_error(e))?;
        tracing::info!(count = aggs.len(), "loaded host aggregates");
        *write(&store.aggregates) = AggregateCache::new(aggs);
        Ok(store)
    }

    /// Re-reads `cell_mappings` (nova does this on SIGHUP). Pools of unchanged cells
    /// are kept. On failure the previous cells stay and a warning is logged.
    pub async fn reload_cells(&self) {
        if let Err(e) = self.load_cells(false).await {
            tracing::warn!(error = %e, "could not reload cell mappings; keeping the old ones");
        }
    }

    /// The known cells (cell0 excluded), in `cell_mappings.id` order.
    pub fn cells(&self) -> Vec<Cell> {
        self.cell_set()
            .cells
            .iter()
            .map(|c| c.cell.clone())
            .collect()
    }

    async fn load_cells(&self, startup: bool) -> Result<(), StateError> {
        let rows = cells::load_mappings(&self.api)
            .await
            .map_err(|e| self.api_error(e))?;
        let previous = self.cell_set();
        let set = CellSet::build(rows, &self.resolver, &previous);
        if startup {
            set.probe().await;
        }
        tracing::info!(
            cells = set.cells.len(),
            enabled = set.cells.iter().filter(|c| !c.cell.disabled).count(),
            "loaded cell mappings"
        );
        *write(&self.cells) = Arc::new(set);
        Ok(())
    }

    fn cell_set(&self) -> Arc<CellSet> {
        self.cells
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    fn api_error(&self, source: sqlx::Error) -> StateError {
        StateError::ApiDatabase {
            url: self.api_url_masked.clone(),
            source,
        }
    }
}

impl HostStateStore {
    /// nova's `get_host_states_by_uuids` + `_get_host_states` for one request.
    ///
    /// `uuids`: compute node uuids (the provider summary keys), or `None` for every
    /// node (rebuild). `cell`: restrict to this cell uuid (used even if disabled);
    /// otherwise every enabled cell. Cells are read concurrently; a cell that fails
    /// or exceeds the cell timeout is skipped with a warning.
    ///
    /// nova's order is arbitrary (a set); ours is by cell uuid, then compute node id.
    pub async fn host_states(
        &self,
        uuids: Option<&[String]>,
        cell: Option<&str>,
    ) -> Result<Vec<HostState>, StateError> {
        let selected = self.select_cells(cell).await?;
        let fetches = selected.iter().map(|db| self.fetch_cell(db, uuids));
        let mut results: Vec<CellRows> = join_all(fetches).await.into_iter().flatten().collect();
        results.sort_by(|a, b| a.cell_uuid.cmp(&b.cell_uuid));
        Ok(self.join(results))
    }

    async fn select_cells(&self, cell: Option<&str>) -> Result<Vec<Arc<CellDb>>, StateError> {
        let set = self.cell_set();
        let Some(uuid) = cell else {
            return Ok(set
                .cells
                .iter()
                .filter(|c| !c.cell.disabled)
                .cloned()
                .collect());
        };
        if let Some(db) = set.cells.iter().find(|c| c.cell.uuid == uuid) {
            return Ok(vec![db.clone()]);
        }
        // nova uses the CellMapping carried by the request; a cell created after our
        // last (re)load is read from the API database for this request only.
        let rows = cells::load_mappings(&self.api)
            .await
            .map_err(|e| self.api_error(e))?;
        let row = rows
            .into_iter()
            .find(|r| r.uuid == uuid)
            .ok_or_else(|| StateError::UnknownCell(uuid.to_string()))?;
        Ok(vec![Arc::new(CellDb::open(row, &self.resolver))])
    }

    /// nova's allocation-ratio write-back for `nodes` just read from `db`; a failure
    /// is logged and changes nothing in memory (see `ratio_backfill`).
    async fn backfill_ratios(&self, pool: &MySqlPool, db: &CellDb, nodes: &[ComputeNodeRow]) {
        if let Err(e) = ratio_backfill::backfill(pool, nodes, &self.ratios).await {
            tracing::warn!(cell = %db.display_name(), error = %e, "could not write allocation ratios back to compute nodes");
        }
    }

    /// Services, compute nodes and instances of one cell, within the cell timeout.
    async fn fetch_cell(&self, db: &CellDb, uuids: Option<&[String]>) -> Option<CellRows> {
        let name = db.display_name();
        let Some(pool) = db.pool.as_ref() else {
            tracing::warn!(cell = %name, url = %db.masked_url, "Failed to get computes for cell (unusable database URL)");
            return None;
        };
        match tokio::time::timeout(self.cell_timeout, queries::cell_rows(pool, uuids)).await {
            Ok(Ok((services, nodes, instances))) => {
                if !self.read_only {
                    self.backfill_ratios(pool, db, &nodes).await;
                }
                Some(CellRows {
                    cell_uuid: db.cell.uuid.clone(),
                    services,
                    nodes,
                    instances,
                })
            }
            Ok(Err(e)) => {
                tracing::warn!(cell = %name, url = %db.masked_url, error = %e, "Failed to get computes for cell");
                None
            }
            Err(_) => {
                tracing::warn!(cell = %name, url = %db.masked_url, "Timeout getting computes for cell");
                None
            }
        }
    }

    /// Joins nodes to services by host name over all answered cells, as nova does.
    fn join(&self, results: Vec<CellRows>) -> Vec<HostState> {
        join_rows(results, &read(&self.aggregates), &self.ratios)
    }

    /// Every enabled cell's rows as the host states are built from them (no write,
    /// whatever `read_only` says), with the aggregates, the cells and the ratio
    /// defaults: what [`StateSnapshot::host_states`] rebuilds the host states from.
    pub async fn snapshot(&self) -> Result<StateSnapshot, StateError> {
        let selected = self.select_cells(None).await?;
        let fetches = selected.iter().map(|db| async move {
            let pool = db.pool.as_ref()?;
            match tokio::time::timeout(self.cell_timeout, queries::cell_rows(pool, None)).await {
                Ok(Ok((services, nodes, instances))) => Some(CellRows {
                    cell_uuid: db.cell.uuid.clone(),
                    services,
                    nodes,
                    instances,
                }),
                Ok(Err(e)) => {
                    tracing::warn!(cell = %db.display_name(), error = %e, "Failed to get computes for cell");
                    None
                }
                Err(_) => {
                    tracing::warn!(cell = %db.display_name(), "Timeout getting computes for cell");
                    None
                }
            }
        });
        let mut cells: Vec<CellRows> = join_all(fetches).await.into_iter().flatten().collect();
        cells.sort_by(|a, b| a.cell_uuid.cmp(&b.cell_uuid));
        let mut aggregates: Vec<Aggregate> =
            self.aggregates().iter().map(|a| (**a).clone()).collect();
        aggregates.sort_by_key(|a| a.id);
        Ok(StateSnapshot {
            cells: self.cells(),
            rows: cells,
            aggregates,
            ratios: self.ratios,
            min_compute_service_version: self.min_compute_service_version().await,
        })
    }
}

/// The host states' inputs as read from the databases at one moment: every enabled
/// cell's `services`, `compute_nodes` and instance rows, the aggregates, the cells
/// and the configured allocation ratios. Serializable (no URL, no password), so that
/// decisions can be replayed offline on exactly what the daemon would read.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StateSnapshot {
    pub cells: Vec<Cell>,
    rows: Vec<CellRows>,
    pub aggregates: Vec<Aggregate>,
    ratios: RatioDefaults,
    /// What the OWNER_NOVA request filter reads.
    pub min_compute_service_version: Option<i64>,
}

impl StateSnapshot {
    /// The host states of every node, as [`HostStateStore::host_states`] builds them
    /// from the same rows (ordered by cell uuid, then compute node id).
    pub fn host_states(&self) -> Vec<HostState> {
        let aggregates = AggregateCache::new(self.aggregates.clone());
        join_rows(self.rows.clone(), &aggregates, &self.ratios)
    }

    /// Hosts, compute nodes, services and instances held.
    pub fn counts(&self) -> (usize, usize, usize) {
        let nodes = self.rows.iter().map(|r| r.nodes.len()).sum();
        let services = self.rows.iter().map(|r| r.services.len()).sum();
        let instances = self.rows.iter().map(|r| r.instances.len()).sum();
        (nodes, services, instances)
    }
}

/// nova's join of nodes to services by host name over all answered cells.
fn join_rows(
    results: Vec<CellRows>,
    aggregates: &AggregateCache,
    ratios: &RatioDefaults,
) -> Vec<HostState> {
    let mut services = HashMap::new();
    for rows in &results {
        for svc in &rows.services {
            if let Some(host) = &svc.host {
                services.insert(host.clone(), svc.clone());
            }
        }
    }
    let mut seen = HashSet::new();
    let mut states = Vec::new();
    let mut texts = compute::RowInterner::default();
    for rows in results {
        let instances = rows.instances_by_host();
        for node in rows.nodes {
            let Some(host) = node.host.clone() else {
                tracing::warn!(
                    compute_node_id = node.id,
                    "compute node without host; skipped"
                );
                continue;
            };
            let Some(service) = services.get(&host) else {
                tracing::warn!(%host, "No compute service record found for host");
                continue;
            };
            if !seen.insert((host.clone(), node.hypervisor_hostname.clone())) {
                tracing::warn!(%host, node = ?node.hypervisor_hostname, cell = %rows.cell_uuid,
                    "compute node seen in more than one cell; keeping the first");
                continue;
            }
            let insts = instances.get(&host).cloned().unwrap_or_default();
            let mut state = compute::host_state(
                node,
                service,
                &rows.cell_uuid,
                ratios,
                aggregates.for_host(&host),
                insts.uuids,
                &mut texts,
            );
            state.instance_flavor_ids = insts.flavor_ids;
            states.push(state);
        }
    }
    states
}

impl HostStateStore {
    /// For ImagePropertiesWeigher: the system metadata of every instance on these
    /// hosts, read from their cells now (nova reads it per request too). Each host's
    /// map is shared by its nodes. A cell that fails leaves its hosts without data
    /// (the weigher then logs and weighs 0, as nova does when it cannot read a cell).
    pub async fn attach_instance_system_metadata(&self, states: &mut [HostState]) {
        let set = self.cell_set();
        let mut hosts_by_cell: HashMap<String, BTreeSet<String>> = HashMap::new();
        for s in states.iter() {
            hosts_by_cell
                .entry(s.cell_uuid.to_string())
                .or_default()
                .insert(s.host.to_string());
        }
        let reads = hosts_by_cell.into_iter().filter_map(|(cell, hosts)| {
            let db = set.cells.iter().find(|c| c.cell.uuid == cell)?.clone();
            Some(async move {
                let pool = db.pool.as_ref()?;
                let hosts: Vec<String> = hosts.into_iter().collect();
                match tokio::time::timeout(
                    self.cell_timeout,
                    instance_images::instance_system_metadata_by_host(pool, &hosts),
                )
                .await
                {
                    Ok(Ok(by_host)) => Some((cell, hosts, by_host)),
                    Ok(Err(e)) => {
                        tracing::warn!(cell = %db.display_name(), error = %e, "could not read instance system metadata");
                        None
                    }
                    Err(_) => {
                        tracing::warn!(cell = %db.display_name(), "timeout reading instance system metadata");
                        None
                    }
                }
            })
        });
        let mut shared: HashMap<(String, String), Arc<crate::model::InstanceSystemMetadata>> =
            HashMap::new();
        for (cell, hosts, mut by_host) in join_all(reads).await.into_iter().flatten() {
            for host in hosts {
                let map = by_host.remove(&host).unwrap_or_default();
                shared.insert((cell.clone(), host), Arc::new(map));
            }
        }
        for s in states.iter_mut() {
            if let Some(m) = shared.get(&(s.cell_uuid.to_string(), s.host.to_string())) {
                s.instance_system_metadata = Some(Arc::clone(m));
            }
        }
    }

    /// Minimum `services.version` of live, not forced-down `nova-compute` services
    /// across every cell (disabled cells and the main database included), as nova's
    /// `get_minimum_version_all_cells` computes it for the OWNER_NOVA prefilter: per
    /// database the SQL minimum; databases that fail or whose minimum is 0/NULL are
    /// ignored. `None` when nothing qualifies (nova reports 0).
    ///
    /// The last reading when [`keep_min_compute_version`](Self::keep_min_compute_version)
    /// was called and it is recent enough; otherwise read now (and kept).
    pub async fn min_compute_service_version(&self) -> Option<i64> {
        {
            let reading = lock(&self.min_version);
            if let (Some(max_age), Some((at, version))) = (reading.max_age, reading.last) {
                if at.elapsed() <= max_age {
                    return version;
                }
            }
        }
        self.refresh_min_compute_version().await
    }

    /// Lets requests use a reading of the minimum compute version up to `max_age`
    /// old; whoever calls this keeps it fresh with
    /// [`refresh_min_compute_version`](Self::refresh_min_compute_version).
    pub fn keep_min_compute_version(&self, max_age: Duration) {
        lock(&self.min_version).max_age = Some(max_age);
    }

    /// Reads the minimum compute version from every database and keeps the reading.
    pub async fn refresh_min_compute_version(&self) -> Option<i64> {
        let started = Instant::now();
        let version = self.read_min_compute_service_version().await;
        lock(&self.min_version).last = Some((started, version));
        version
    }

    async fn read_min_compute_service_version(&self) -> Option<i64> {
        let set = self.cell_set();
        let mut targets: Vec<(String, &MySqlPool)> = set
            .cells
            .iter()
            .filter_map(|c| c.pool.as_ref().map(|p| (c.display_name(), p)))
            .collect();
        if let Some(main) = &self.main {
            targets.push(("main database".to_string(), main));
        }
        let queries = targets.into_iter().map(|(name, pool)| async move {
            match tokio::time::timeout(self.cell_timeout, queries::min_compute_version(pool)).await {
                Ok(Ok(v)) => v.filter(|v| *v != 0),
                Ok(Err(e)) => {
                    tracing::warn!(cell = %name, error = %e, "Failed to get minimum service version for cell");
                    None
                }
                Err(_) => {
                    tracing::warn!(cell = %name, "Cell did not respond when getting minimum service version");
                    None
                }
            }
        });
        join_all(queries).await.into_iter().flatten().min()
    }

    /// The newest service versions of every database the store reads (each cell,
    /// disabled ones too, and the main database), from which the scheduler's own
    /// `services` row takes its version ([`service_row::choose_version`]). A database
    /// that fails or does not answer within the cell timeout is left out, with a warning.
    pub async fn newest_service_versions(&self) -> Vec<service_row::DatabaseVersions> {
        let set = self.cell_set();
        let mut targets: Vec<(String, &MySqlPool)> = set
            .cells
            .iter()
            .filter_map(|c| {
                c.pool
                    .as_ref()
                    .map(|p| (format!("database of cell {}", c.display_name()), p))
            })
            .collect();
        if let Some(main) = &self.main {
            targets.push(("main database".to_string(), main));
        }
        let reads = targets.into_iter().map(|(name, pool)| async move {
            let read = service_row::read_versions(name.clone(), pool);
            match tokio::time::timeout(self.cell_timeout, read).await {
                Ok(Ok(versions)) => Some(versions),
                Ok(Err(e)) => {
                    tracing::warn!(database = %name, error = %e, "could not read service versions; left out of the service row's version");
                    None
                }
                Err(_) => {
                    tracing::warn!(database = %name, "no answer when reading service versions; left out of the service row's version");
                    None
                }
            }
        });
        join_all(reads).await.into_iter().flatten().collect()
    }

    /// Uuids of the aggregates whose `availability_zone` metadata equals `az`
    /// (API database, read per request as nova's AZ prefilter does).
    pub async fn aggregate_uuids_for_az(&self, az: &str) -> Result<Vec<String>, StateError> {
        aggregates::uuids_for_az(&self.api, az)
            .await
            .map_err(|e| self.api_error(e))
    }

    /// `(aggregate uuid, metadata key)` of the aggregates with a metadata row whose
    /// value is `value` (the tenant-isolation request filter, read per request).
    pub async fn aggregates_with_metadata_value(
        &self,
        value: &str,
    ) -> Result<Vec<(String, String)>, StateError> {
        aggregates::with_metadata_value(&self.api, value)
            .await
            .map_err(|e| self.api_error(e))
    }

    /// Uuids of the aggregates that require a trait whose `trait:<T>` key is not in
    /// `keys` (the isolated-aggregates request filter, read per request).
    pub async fn aggregates_requiring_traits_other_than(
        &self,
        keys: &[String],
    ) -> Result<std::collections::BTreeSet<String>, StateError> {
        aggregates::requiring_traits_other_than(&self.api, keys)
            .await
            .map_err(|e| self.api_error(e))
    }

    /// The cell `host_mappings` maps `host` to, by uuid.
    pub async fn cell_of_host(&self, host: &str) -> Result<Option<String>, StateError> {
        cells::cell_of_host(&self.api, host)
            .await
            .map_err(|e| self.api_error(e))
    }

    /// The API database, for tests and tools that read it directly.
    pub fn api_pool(&self) -> &MySqlPool {
        &self.api
    }

    /// nova's `update_aggregates` fanout cast: replace each aggregate by id and
    /// move its host memberships to the given hosts.
    pub fn update_aggregates(&self, aggregates: Vec<Aggregate>) {
        let mut cache = write(&self.aggregates);
        for agg in aggregates {
            cache.update(agg);
        }
    }

    /// nova's `delete_aggregate` fanout cast: forget the aggregate everywhere.
    pub fn delete_aggregate(&self, aggregate_id: i64) {
        write(&self.aggregates).delete(aggregate_id);
    }

    /// The cached aggregates, by id.
    pub fn aggregates(&self) -> Vec<Arc<Aggregate>> {
        read(&self.aggregates).all()
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
