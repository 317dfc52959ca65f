// SPDX-License-Identifier: Apache-2.0
//! The SQL nova runs against one cell database for a scheduling request.

use super::rows::{ComputeNodeRow, HostInstance, ServiceRow};
use chrono::NaiveDateTime;
use sqlx::mysql::{MySqlPool, MySqlRow};
use sqlx::{AssertSqlSafe, Row};
use std::collections::BTreeSet;

/// Bind parameters per `IN (...)` query; larger lists are split.
const MAX_IN_LIST: usize = 10_000;

const SERVICE_COLUMNS: &str = "id, host, disabled, disabled_reason, forced_down, \
     last_seen_up, created_at, updated_at, version";

const COMPUTE_COLUMNS: &str = "id, host, hypervisor_hostname, uuid, vcpus, vcpus_used, \
     memory_mb, free_ram_mb, local_gb, local_gb_used, free_disk_gb, disk_available_least, \
     hypervisor_type, hypervisor_version, cpu_info, host_ip, supported_instances, metrics, \
     pci_stats, numa_topology, stats, cpu_allocation_ratio, ram_allocation_ratio, \
     disk_allocation_ratio, updated_at";

pub(super) type CellAnswer = (Vec<ServiceRow>, Vec<ComputeNodeRow>, Vec<HostInstance>);

fn host_instance(row: &MySqlRow) -> Result<Option<HostInstance>, sqlx::Error> {
    let host: Option<String> = row.try_get("host")?;
    Ok(match host {
        Some(host) => Some(HostInstance {
            host,
            uuid: row.try_get("uuid")?,
            flavor_id: row.try_get("instance_type_id")?,
        }),
        None => None,
    })
}

/// Services and compute nodes (concurrently), then the instances on the nodes' hosts.
/// `uuids = None` reads every live node (`ORDER BY id`, as nova's `get_all`).
pub(super) async fn cell_rows(
    pool: &MySqlPool,
    uuids: Option<&[String]>,
) -> Result<CellAnswer, sqlx::Error> {
    let (services, nodes) = tokio::try_join!(services(pool), compute_nodes(pool, uuids))?;
    let hosts: BTreeSet<&str> = nodes.iter().filter_map(|n| n.host.as_deref()).collect();
    let instances = instances_on_hosts(pool, &hosts.into_iter().collect::<Vec<_>>()).await?;
    Ok((services, nodes, instances))
}

async fn services(pool: &MySqlPool) -> Result<Vec<ServiceRow>, sqlx::Error> {
    let sql = format!(
        "SELECT {SERVICE_COLUMNS} FROM services WHERE `binary` = 'nova-compute' AND deleted = 0"
    );
    sqlx::query(AssertSqlSafe(sql))
        .fetch_all(pool)
        .await?
        .iter()
        .map(service_row)
        .collect()
}

fn service_row(row: &MySqlRow) -> Result<ServiceRow, sqlx::Error> {
    Ok(ServiceRow {
        id: row.try_get("id")?,
        host: row.try_get("host")?,
        disabled: row.try_get("disabled")?,
        disabled_reason: row.try_get("disabled_reason")?,
        forced_down: row.try_get("forced_down")?,
        last_seen_up: row.try_get("last_seen_up")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        version: row.try_get("version")?,
    })
}

pub(super) async fn compute_nodes(
    pool: &MySqlPool,
    uuids: Option<&[String]>,
) -> Result<Vec<ComputeNodeRow>, sqlx::Error> {
    let Some(uuids) = uuids else {
        let sql =
            format!("SELECT {COMPUTE_COLUMNS} FROM compute_nodes WHERE deleted = 0 ORDER BY id");
        let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(pool).await?;
        return rows.iter().map(compute_node_row).collect();
    };
    let mut nodes = Vec::new();
    for chunk in uuids.chunks(MAX_IN_LIST) {
        // The SQL text only holds placeholders; the uuids are bound.
        let sql = format!(
            "SELECT {COMPUTE_COLUMNS} FROM compute_nodes WHERE deleted = 0 AND uuid IN ({}) ORDER BY id",
            placeholders(chunk.len())
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).persistent(false);
        for uuid in chunk {
            query = query.bind(uuid);
        }
        for row in query.fetch_all(pool).await? {
            nodes.push(compute_node_row(&row)?);
        }
    }
    if uuids.len() > MAX_IN_LIST {
        nodes.sort_by_key(|n| n.id);
    }
    Ok(nodes)
}

/// The live compute nodes of `host` (served by nova's unique key on `(host,
/// hypervisor_hostname, deleted)`).
pub(super) async fn compute_nodes_of_host(
    pool: &MySqlPool,
    host: &str,
) -> Result<Vec<ComputeNodeRow>, sqlx::Error> {
    let sql = format!(
        "SELECT {COMPUTE_COLUMNS} FROM compute_nodes WHERE host = ? AND deleted = 0 ORDER BY id"
    );
    sqlx::query(AssertSqlSafe(sql))
        .persistent(false)
        .bind(host)
        .fetch_all(pool)
        .await?
        .iter()
        .map(compute_node_row)
        .collect()
}

fn compute_node_row(row: &MySqlRow) -> Result<ComputeNodeRow, sqlx::Error> {
    Ok(ComputeNodeRow {
        id: row.try_get("id")?,
        host: row.try_get("host")?,
        hypervisor_hostname: row.try_get("hypervisor_hostname")?,
        uuid: row.try_get("uuid")?,
        vcpus: row.try_get("vcpus")?,
        vcpus_used: row.try_get("vcpus_used")?,
        memory_mb: row.try_get("memory_mb")?,
        free_ram_mb: row.try_get("free_ram_mb")?,
        local_gb: row.try_get("local_gb")?,
        local_gb_used: row.try_get("local_gb_used")?,
        free_disk_gb: row.try_get("free_disk_gb")?,
        disk_available_least: row.try_get("disk_available_least")?,
        hypervisor_type: row.try_get("hypervisor_type")?,
        hypervisor_version: row.try_get("hypervisor_version")?,
        cpu_info: row.try_get("cpu_info")?,
        host_ip: row.try_get("host_ip")?,
        supported_instances: row.try_get("supported_instances")?,
        metrics: row.try_get("metrics")?,
        pci_stats: row.try_get("pci_stats")?,
        numa_topology: row.try_get("numa_topology")?,
        stats: row.try_get("stats")?,
        cpu_allocation_ratio: float_column(row, "cpu_allocation_ratio")?,
        ram_allocation_ratio: float_column(row, "ram_allocation_ratio")?,
        disk_allocation_ratio: float_column(row, "disk_allocation_ratio")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// A MySQL `FLOAT` column as nova sees it: PyMySQL reads the text form (`1.2`), not
/// the 4-byte value (`1.2000000476…`), so go through the shortest decimal form.
fn float_column(row: &MySqlRow, column: &str) -> Result<Option<f64>, sqlx::Error> {
    let value: Option<f32> = row.try_get(column)?;
    Ok(value.map(|v| v.to_string().parse().unwrap_or(f64::from(v))))
}

/// `SELECT host, uuid, instance_type_id FROM instances WHERE deleted = 0 AND host IN
/// (...)`, one query (per 10,000 hosts) for all hosts of the cell; nova runs it per host.
async fn instances_on_hosts(
    pool: &MySqlPool,
    hosts: &[&str],
) -> Result<Vec<HostInstance>, sqlx::Error> {
    let mut out = Vec::new();
    for chunk in hosts.chunks(MAX_IN_LIST) {
        let sql = format!(
            "SELECT host, uuid, instance_type_id FROM instances WHERE deleted = 0 AND host IN ({})",
            placeholders(chunk.len())
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).persistent(false);
        for host in chunk {
            query = query.bind(*host);
        }
        for row in query.fetch_all(pool).await? {
            out.extend(host_instance(&row)?);
        }
    }
    Ok(out)
}

/// nova's `service_get_minimum_version` for `nova-compute` in one database.
pub(super) async fn min_compute_version(pool: &MySqlPool) -> Result<Option<i64>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT MIN(version) AS v FROM services \
         WHERE `binary` = 'nova-compute' AND deleted = 0 AND forced_down = 0",
    )
    .fetch_one(pool)
    .await?;
    row.try_get("v")
}

fn placeholders(n: usize) -> String {
    let mut s = "?,".repeat(n);
    s.pop();
    s
}

// --- The warm cache's reads (see `cache.rs`) ---

/// The database server's clock (UTC), so watermarks never depend on ours.
pub(super) async fn db_utc_now(pool: &MySqlPool) -> Result<NaiveDateTime, sqlx::Error> {
    sqlx::query_scalar("SELECT UTC_TIMESTAMP()")
        .fetch_one(pool)
        .await
}

/// A row that changed since a watermark: either live, or soft-deleted.
pub(super) enum Change<T> {
    Live(T),
    Deleted(T),
}

/// What an incremental pass reads: the rows created, updated or soft-deleted
/// after `fresh`, and those stamped in `(lagged_from, lagged_to]`, a slice of
/// time old enough by now that a late commit stamped in it has landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Window {
    pub fresh: NaiveDateTime,
    pub lagged_from: NaiveDateTime,
    pub lagged_to: NaiveDateTime,
}

/// The condition of every incremental read (a query-level soft delete keeps
/// `updated_at`, so `deleted_at` is asked too); bound by [`bind_window`].
const MOVED_IN_WINDOW: &str = "(updated_at > ? OR (updated_at > ? AND updated_at <= ?) \
     OR created_at > ? OR (created_at > ? AND created_at <= ?) \
     OR deleted_at > ? OR (deleted_at > ? AND deleted_at <= ?))";

fn bind_window<'q>(
    mut query: sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments>,
    window: Window,
) -> sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments> {
    for _ in 0..3 {
        query = bind_column_window(query, window);
    }
    query
}

/// Rows of `sql` (which ends in [`MOVED_IN_WINDOW`] and selects `deleted`) moved
/// in `window`, each mapped by `row_fn` and sorted into live or soft-deleted.
async fn moved_in<T>(
    pool: &MySqlPool,
    sql: String,
    window: Window,
    row_fn: fn(&MySqlRow) -> Result<T, sqlx::Error>,
) -> Result<Vec<Change<T>>, sqlx::Error> {
    let rows = bind_window(sqlx::query(AssertSqlSafe(sql)), window)
        .fetch_all(pool)
        .await?;
    rows.iter()
        .map(|row| {
            let value = row_fn(row)?;
            let deleted: i64 = row.try_get("deleted")?;
            Ok(if deleted == 0 {
                Change::Live(value)
            } else {
                Change::Deleted(value)
            })
        })
        .collect()
}

/// `nova-compute` services created, updated or deleted in `window`.
pub(super) async fn changed_services(
    pool: &MySqlPool,
    window: Window,
) -> Result<Vec<Change<ServiceRow>>, sqlx::Error> {
    let sql = format!(
        "SELECT {SERVICE_COLUMNS}, deleted FROM services \
         WHERE `binary` = 'nova-compute' AND {MOVED_IN_WINDOW}"
    );
    moved_in(pool, sql, window, service_row).await
}

/// Compute nodes created, updated or deleted in `window`.
pub(super) async fn changed_compute_nodes(
    pool: &MySqlPool,
    window: Window,
) -> Result<Vec<Change<ComputeNodeRow>>, sqlx::Error> {
    let sql =
        format!("SELECT {COMPUTE_COLUMNS}, deleted FROM compute_nodes WHERE {MOVED_IN_WINDOW}");
    moved_in(pool, sql, window, compute_node_row).await
}

/// An instance's placement as the cache tracks it: uuid, host, flavor id, and
/// whether the row still counts (`deleted = 0`).
pub(super) struct InstanceRow {
    pub uuid: String,
    pub host: Option<String>,
    pub flavor_id: Option<i64>,
    pub live: bool,
}

/// Every live instance of the cell that has a host.
pub(super) async fn all_instances(pool: &MySqlPool) -> Result<Vec<HostInstance>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT host, uuid, instance_type_id FROM instances WHERE deleted = 0 AND host IS NOT NULL",
    )
    .fetch_all(pool)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        out.extend(host_instance(row)?);
    }
    Ok(out)
}

/// Instances updated in `window`, or created in it and not deleted: ranges on
/// nova's indexes (`instances_updated_at_project_id_idx`,
/// `instances_deleted_created_at_idx`), so the read costs the rows that moved, not
/// the table. nova's delete saves the instance (moving `updated_at`) just before
/// its query-level soft delete (which keeps `updated_at`), so the pass that reads
/// the save, or the lagged slice of a later one, usually sees the deletion too;
/// [`deleted_instances`] reads the rest.
pub(super) async fn changed_instances(
    pool: &MySqlPool,
    window: Window,
) -> Result<Vec<InstanceRow>, sqlx::Error> {
    let sql = format!(
        "SELECT {INSTANCE_COLUMNS} FROM instances WHERE {UPDATED_IN_WINDOW} \
         UNION \
         SELECT {INSTANCE_COLUMNS} FROM instances WHERE deleted = 0 AND {CREATED_IN_WINDOW}"
    );
    let query = bind_column_window(
        bind_column_window(sqlx::query(AssertSqlSafe(sql)), window),
        window,
    );
    instance_rows(query.fetch_all(pool).await?)
}

/// Instances soft-deleted in `window`. nova indexes no `deleted_at`, so this scans
/// the table; the cache runs it less often than [`changed_instances`].
pub(super) async fn deleted_instances(
    pool: &MySqlPool,
    window: Window,
) -> Result<Vec<InstanceRow>, sqlx::Error> {
    let sql = format!("SELECT {INSTANCE_COLUMNS} FROM instances WHERE {DELETED_IN_WINDOW}");
    let query = bind_column_window(sqlx::query(AssertSqlSafe(sql)), window);
    instance_rows(query.fetch_all(pool).await?)
}

const INSTANCE_COLUMNS: &str = "uuid, host, instance_type_id, deleted";
const UPDATED_IN_WINDOW: &str = "(updated_at > ? OR (updated_at > ? AND updated_at <= ?))";
const CREATED_IN_WINDOW: &str = "(created_at > ? OR (created_at > ? AND created_at <= ?))";
const DELETED_IN_WINDOW: &str = "(deleted_at > ? OR (deleted_at > ? AND deleted_at <= ?))";

/// Binds the three values of one `*_IN_WINDOW` condition.
fn bind_column_window<'q>(
    query: sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments>,
    window: Window,
) -> sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments> {
    query
        .bind(window.fresh)
        .bind(window.lagged_from)
        .bind(window.lagged_to)
}

fn instance_rows(rows: Vec<MySqlRow>) -> Result<Vec<InstanceRow>, sqlx::Error> {
    rows.iter()
        .map(|row| {
            let deleted: i64 = row.try_get("deleted")?;
            Ok(InstanceRow {
                uuid: row.try_get("uuid")?,
                host: row.try_get("host")?,
                flavor_id: row.try_get("instance_type_id")?,
                live: deleted == 0,
            })
        })
        .collect()
}

/// Everything the cache holds for one cell, read in one go.
pub(super) async fn full_cell(pool: &MySqlPool) -> Result<CellAnswer, sqlx::Error> {
    let (services, nodes, instances) = tokio::try_join!(
        services(pool),
        compute_nodes(pool, None),
        all_instances(pool)
    )?;
    Ok((services, nodes, instances))
}
