// SPDX-License-Identifier: Apache-2.0
//! nova's `_discover_hosts_in_cells` periodic task (`[scheduler]
//! discover_hosts_in_cells_interval`): the leader among the live `nova-scheduler`
//! services maps every compute node not yet mapped to its cell, as
//! `nova-manage cell_v2 discover_hosts` does. This is the only place where the
//! daemon writes to nova's databases besides its own service row: `host_mappings`
//! in the API database and `compute_nodes.mapped` in the cell.

use super::{cells, HostStateStore, StateError};
use crate::model::ServiceInfo;
use crate::release::{Behaviour, NovaSeries};
use chrono::{NaiveDateTime, Utc};
use sqlx::mysql::MySqlPool;
use sqlx::Row;

/// One new host mapping: `(cell name or uuid, host)`.
pub type Discovered = (String, String);

/// Why discovery stopped early.
#[derive(Debug, thiserror::Error)]
pub enum DiscoverError {
    #[error(transparent)]
    State(#[from] StateError),
    /// nova's `HostMappingExists`: someone else (nova-manage, another scheduler)
    /// created the mapping between our check and our insert.
    #[error("Host '{0}' mapping already exists")]
    HostMappingExists(String),
    #[error("cell {cell}: {source}")]
    Cell {
        cell: String,
        #[source]
        source: sqlx::Error,
    },
}

/// nova's warning when another discoverer mapped a host first, as `series` words it
/// (`%s`: the exception).
pub fn host_mapping_exists_warning(series: NovaSeries) -> &'static str {
    if series.has(Behaviour::DiscoverHostsLeaderOnly) {
        "This periodic task should only be enabled if discover hosts is not run via \
         nova-manage, schedulers: %s"
    } else {
        "This periodic task should only be enabled on a single scheduler to prevent \
         collisions between multiple schedulers: %s"
    }
}

/// The leader rule: the first, by host name, of the `nova-scheduler` services that
/// are up. `None` when none is up (nova's task would fail on an empty list).
pub async fn scheduler_leader(
    main: &MySqlPool,
    service_down_time: i64,
    report_interval: i64,
) -> Result<Option<String>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT id, host, forced_down, last_seen_up, created_at, updated_at FROM services \
         WHERE `binary` = 'nova-scheduler' AND deleted = 0",
    )
    .fetch_all(main)
    .await?;
    let now = Utc::now();
    let mut up = Vec::new();
    for row in rows {
        let utc = |name: &str| -> Result<_, sqlx::Error> {
            Ok(row
                .try_get::<Option<NaiveDateTime>, _>(name)?
                .map(|t| t.and_utc()))
        };
        let info = ServiceInfo {
            id: row.try_get("id")?,
            host: row
                .try_get::<Option<String>, _>("host")?
                .unwrap_or_default()
                .into(),
            forced_down: row
                .try_get::<Option<bool>, _>("forced_down")?
                .unwrap_or(false),
            last_seen_up: utc("last_seen_up")?,
            created_at: utc("created_at")?,
            updated_at: utc("updated_at")?,
            ..ServiceInfo::default()
        };
        if info.is_up(now, service_down_time, report_interval) {
            up.push(info.host.to_string());
        }
    }
    up.sort();
    Ok(up.into_iter().next())
}

impl HostStateStore {
    /// nova's `host_mapping.discover_hosts` over every cell but cell0 (disabled
    /// cells included, as `CellMappingList.get_all`): each compute node with
    /// `mapped = 0` whose host has no mapping gets one, and is marked mapped.
    pub async fn discover_hosts(&self) -> Result<Vec<Discovered>, DiscoverError> {
        let mappings = cells::load_mapping_ids(&self.api)
            .await
            .map_err(|e| self.api_error(e))?;
        let set = self.cell_set();
        let mut found = Vec::new();
        for (cell_id, uuid, name) in mappings {
            let Some(db) = set.cells.iter().find(|c| c.cell.uuid == uuid) else {
                continue;
            };
            let Some(pool) = db.pool.as_ref() else {
                continue;
            };
            let label = name.clone().unwrap_or_else(|| uuid.clone());
            let cell_err = |source| DiscoverError::Cell {
                cell: label.clone(),
                source,
            };
            let unmapped = sqlx::query(
                "SELECT id, host FROM compute_nodes WHERE deleted = 0 AND mapped < 1 ORDER BY id",
            )
            .fetch_all(pool)
            .await
            .map_err(cell_err)?;
            for row in unmapped {
                let id: i64 = row.try_get("id").map_err(cell_err)?;
                let Some(host) = row.try_get::<Option<String>, _>("host").map_err(cell_err)? else {
                    continue;
                };
                let exists: Option<i64> =
                    sqlx::query_scalar("SELECT id FROM host_mappings WHERE host = ?")
                        .bind(&host)
                        .fetch_optional(&self.api)
                        .await
                        .map_err(|e| self.api_error(e))?;
                if exists.is_some() {
                    continue;
                }
                let inserted = sqlx::query(
                    "INSERT INTO host_mappings (created_at, cell_id, host) \
                     VALUES (UTC_TIMESTAMP(), ?, ?)",
                )
                .bind(cell_id)
                .bind(&host)
                .execute(&self.api)
                .await;
                match inserted {
                    Ok(_) => {}
                    Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                        return Err(DiscoverError::HostMappingExists(host));
                    }
                    Err(e) => return Err(self.api_error(e).into()),
                }
                // nova's ComputeNode.save() always moves updated_at.
                sqlx::query(
                    "UPDATE compute_nodes SET mapped = 1, updated_at = UTC_TIMESTAMP() WHERE id = ?",
                )
                .bind(id)
                .execute(pool)
                .await
                .map_err(cell_err)?;
                found.push((label.clone(), host));
            }
        }
        Ok(found)
    }
}
