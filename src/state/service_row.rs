// SPDX-License-Identifier: Apache-2.0
//! The scheduler's own `services` row in the main database (`[database] connection`),
//! registered and heartbeated as nova's `Service` + DB servicegroup driver do, so
//! `openstack compute service list` shows `nova-scheduler` on this host as `up`.
//!
//! This is the one write the daemon makes to nova's databases (nova-scheduler makes it
//! too). Every nova-scheduler worker of a host heartbeats the same row; a Python
//! scheduler and this daemon with the same `[DEFAULT] host` share it the same way.
//!
//! The row carries the service version of the release the control plane runs, never
//! more than nova 34's: nova's own nova-scheduler refuses to start while a live
//! nova-scheduler row is newer than itself (`ServiceTooOld`), so a row at 74 on a
//! nova 29 cloud would bar the way back to nova's scheduler. See [`choose_version`].

use sqlx::mysql::MySqlPool;
use sqlx::Row;
use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing::{debug, info, warn};

/// nova 34's `SERVICE_VERSION` (nova/objects/service.py): the newest this daemon speaks.
pub const SERVICE_VERSION: i64 = 74;

pub use crate::release::{NovaRelease, NOVA_RELEASES};

/// The releases whose service version is `version` ("nova 29/30 (2024.1/2024.2)"),
/// or where it falls between them (a development version).
pub fn release_name(version: i64) -> String {
    let same: Vec<&NovaRelease> = NOVA_RELEASES
        .iter()
        .filter(|r| r.service_version == version)
        .collect();
    if !same.is_empty() {
        let majors: Vec<String> = same.iter().map(|r| r.major.to_string()).collect();
        let series: Vec<&str> = same.iter().map(|r| r.name).collect();
        return format!("nova {} ({})", majors.join("/"), series.join("/"));
    }
    let below = NOVA_RELEASES
        .iter()
        .rev()
        .find(|r| r.service_version < version);
    let above = NOVA_RELEASES.iter().find(|r| r.service_version > version);
    match (below, above) {
        (Some(b), Some(a)) => format!("between nova {} and nova {}", b.major, a.major),
        (Some(b), None) => format!("newer than nova {}", b.major),
        (None, Some(a)) => format!("older than nova {}", a.major),
        (None, None) => "an unknown nova release".to_string(),
    }
}

/// The newest service versions one nova database holds (non-deleted rows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseVersions {
    /// How logs name the database ("main database", a cell).
    pub database: String,
    /// Newest `nova-conductor` row.
    pub conductor: Option<i64>,
    /// Newest row of any other nova service but `nova-scheduler` (whose row may be
    /// our own, and would then only echo the version we wrote last time).
    pub any_service: Option<(i64, String)>,
}

/// Reads one database's [`DatabaseVersions`]. Versions 0 and NULL (rows older than
/// service versions) count as none.
pub async fn read_versions(
    database: impl Into<String>,
    pool: &MySqlPool,
) -> Result<DatabaseVersions, sqlx::Error> {
    let conductor: Option<i64> = sqlx::query(
        "SELECT MAX(version) AS v FROM services \
         WHERE `binary` = 'nova-conductor' AND deleted = 0",
    )
    .fetch_one(pool)
    .await?
    .try_get("v")?;
    let any_service = sqlx::query(
        "SELECT version, `binary` FROM services \
         WHERE deleted = 0 AND `binary` LIKE 'nova-%' AND `binary` <> ? AND version > 0 \
         ORDER BY version DESC, `binary` LIMIT 1",
    )
    .bind(BINARY)
    .fetch_optional(pool)
    .await?
    .map(|r| -> Result<(i64, String), sqlx::Error> {
        Ok((r.try_get("version")?, r.try_get("binary")?))
    })
    .transpose()?;
    Ok(DatabaseVersions {
        database: database.into(),
        conductor: conductor.filter(|v| *v > 0),
        any_service,
    })
}

/// Where the row's service version came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionSource {
    /// The newest live `nova-conductor` row of every database read.
    Conductor { newest: i64, database: String },
    /// No conductor row anywhere: the newest row of any other nova service.
    AnyService {
        newest: i64,
        binary: String,
        database: String,
    },
    /// No nova service row at all (a new deployment): nova 34's.
    Default,
}

/// The service version the row carries, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChosenVersion {
    pub version: i64,
    pub source: VersionSource,
}

/// The control plane's service version, capped at ours: the newest `nova-conductor`
/// (conductors are upgraded first and run the release the cloud runs), else the
/// newest other nova service, else [`SERVICE_VERSION`]. Never above it: a newer
/// control plane still gets nova 34's version, as a nova-scheduler 34 would write.
pub fn choose_version(readings: &[DatabaseVersions]) -> ChosenVersion {
    let newest = |pick: &dyn Fn(&DatabaseVersions) -> Option<i64>| {
        readings
            .iter()
            .filter_map(|r| pick(r).map(|v| (v, r)))
            .max_by_key(|(v, _)| *v)
    };
    let source = if let Some((v, r)) = newest(&|r| r.conductor) {
        VersionSource::Conductor {
            newest: v,
            database: r.database.clone(),
        }
    } else if let Some((v, r)) = newest(&|r| r.any_service.as_ref().map(|(v, _)| *v)) {
        VersionSource::AnyService {
            newest: v,
            binary: r
                .any_service
                .as_ref()
                .map(|(_, b)| b.clone())
                .unwrap_or_default(),
            database: r.database.clone(),
        }
    } else {
        VersionSource::Default
    };
    let version = match &source {
        VersionSource::Conductor { newest, .. } | VersionSource::AnyService { newest, .. } => {
            (*newest).min(SERVICE_VERSION)
        }
        VersionSource::Default => SERVICE_VERSION,
    };
    ChosenVersion { version, source }
}

impl VersionSource {
    /// The control plane's newest service version read, if any row was.
    pub fn newest(&self) -> Option<i64> {
        match self {
            VersionSource::Conductor { newest, .. } | VersionSource::AnyService { newest, .. } => {
                Some(*newest)
            }
            VersionSource::Default => None,
        }
    }
}

impl fmt::Display for ChosenVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "nova-scheduler service row version {} ({}",
            self.version,
            release_name(self.version)
        )?;
        let capped = |newest: i64| {
            if newest > SERVICE_VERSION {
                format!(", the newest this daemon speaks; the control plane has {newest}")
            } else {
                String::new()
            }
        };
        match &self.source {
            VersionSource::Conductor { newest, database } => write!(
                f,
                ": the control plane's nova-conductor, in the {database}{})",
                capped(*newest)
            ),
            VersionSource::AnyService {
                newest,
                binary,
                database,
            } => write!(
                f,
                ": no nova-conductor row; the newest nova service, {binary} in the {database}{})",
                capped(*newest)
            ),
            VersionSource::Default => f.write_str(": no nova service row in any database)"),
        }
    }
}
const BINARY: &str = "nova-scheduler";
const TOPIC: &str = "scheduler";
/// nova's servicegroup DB driver reports for the first time 5 s after start.
const FIRST_REPORT_DELAY: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ServiceRowError {
    #[error("database error on the services table: {0}")]
    Sql(#[from] sqlx::Error),
    /// nova's `ServiceTooOld`: a newer nova-scheduler already runs in this deployment.
    #[error("This service is older (v{ours}) than the minimum (v{minimum}) version of the rest of the deployment. Unable to continue.")]
    TooOld { ours: i64, minimum: i64 },
}

/// The registered row. Clones share it: one heartbeats, another may change its version
/// ([`ServiceRow::set_version`]) and the next report carries that.
#[derive(Debug, Clone)]
pub struct ServiceRow {
    pool: MySqlPool,
    pub id: i64,
    pub host: String,
    /// The service version written at registration and with every report.
    version: Arc<AtomicI64>,
}

impl ServiceRow {
    /// Finds or creates the `(host, nova-scheduler)` row with service version
    /// `version` (see [`choose_version`]), as `Service.create`/`save` do at service
    /// start: refuse if the live rows of this binary (nova's `get_minimum_version`:
    /// not deleted, not forced down) are all newer, update the version of an existing
    /// row, insert otherwise (a sibling's insert winning the race is re-read).
    pub async fn register(
        pool: MySqlPool,
        host: &str,
        version: i64,
    ) -> Result<Self, ServiceRowError> {
        let minimum: Option<i64> = sqlx::query(
            "SELECT MIN(version) AS v FROM services \
             WHERE `binary` = ? AND deleted = 0 AND forced_down = 0",
        )
        .bind(BINARY)
        .fetch_one(&pool)
        .await?
        .try_get("v")?;
        if let Some(minimum) = minimum.filter(|m| *m > version) {
            return Err(ServiceRowError::TooOld {
                ours: version,
                minimum,
            });
        }
        for _ in 0..2 {
            if let Some(id) = Self::find(&pool, host).await? {
                sqlx::query("UPDATE services SET version = ? WHERE id = ? AND version <> ?")
                    .bind(version)
                    .bind(id)
                    .bind(version)
                    .execute(&pool)
                    .await?;
                info!(host, id, "nova-scheduler service row found");
                return Ok(ServiceRow::new(pool, id, host, version));
            }
            let inserted = sqlx::query(
                "INSERT INTO services (created_at, host, `binary`, topic, report_count, disabled, \
                 deleted, uuid, version, forced_down) \
                 VALUES (UTC_TIMESTAMP(), ?, ?, ?, 0, 0, 0, ?, ?, 0)",
            )
            .bind(host)
            .bind(BINARY)
            .bind(TOPIC)
            .bind(uuid::Uuid::new_v4().to_string())
            .bind(version)
            .execute(&pool)
            .await;
            match inserted {
                Ok(done) => {
                    let id = done.last_insert_id() as i64;
                    info!(host, id, "nova-scheduler service row created");
                    return Ok(ServiceRow::new(pool, id, host, version));
                }
                // Unique (host, binary, deleted): another worker created it first.
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Self::find(&pool, host)
            .await?
            .map(|id| ServiceRow::new(pool, id, host, version))
            .ok_or_else(|| ServiceRowError::Sql(sqlx::Error::RowNotFound))
    }

    fn new(pool: MySqlPool, id: i64, host: &str, version: i64) -> Self {
        ServiceRow {
            pool,
            id,
            host: host.to_string(),
            version: Arc::new(AtomicI64::new(version)),
        }
    }

    /// The service version the row carries.
    pub fn version(&self) -> i64 {
        self.version.load(Ordering::Relaxed)
    }

    /// Writes `version` into the row now if it differs from the one it carries (every
    /// later report keeps it). The caller keeps it at or below the control plane's, so
    /// that release's own nova-scheduler can start on it. Returns whether it changed.
    pub async fn set_version(&self, version: i64) -> Result<bool, sqlx::Error> {
        if self.version() == version {
            return Ok(false);
        }
        sqlx::query("UPDATE services SET version = ? WHERE id = ?")
            .bind(version)
            .bind(self.id)
            .execute(&self.pool)
            .await?;
        self.version.store(version, Ordering::Relaxed);
        Ok(true)
    }

    async fn find(pool: &MySqlPool, host: &str) -> Result<Option<i64>, sqlx::Error> {
        let row =
            sqlx::query("SELECT id FROM services WHERE host = ? AND `binary` = ? AND deleted = 0")
                .bind(host)
                .bind(BINARY)
                .fetch_optional(pool)
                .await?;
        row.map(|r| r.try_get::<i32, _>("id").map(i64::from))
            .transpose()
    }

    /// One report: nova increments `report_count`, and the DB layer then sets
    /// `last_seen_up` (what the servicegroup driver judges) and `updated_at`.
    pub async fn report(&self) -> Result<(), sqlx::Error> {
        sqlx::query(
            "UPDATE services SET report_count = report_count + 1, last_seen_up = UTC_TIMESTAMP(), \
             updated_at = UTC_TIMESTAMP(), version = ? WHERE id = ?",
        )
        .bind(self.version())
        .bind(self.id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Reports 5 s after start, then every `report_interval`, until dropped. A failed
    /// report is logged and retried at the next tick (nova does the same).
    pub async fn heartbeat(self, report_interval: Duration) {
        tokio::time::sleep(FIRST_REPORT_DELAY.min(report_interval)).await;
        let mut tick = tokio::time::interval(report_interval.max(Duration::from_millis(100)));
        let mut failing = false;
        loop {
            tick.tick().await;
            match self.report().await {
                Ok(()) => {
                    if failing {
                        info!("service heartbeat recovered");
                    }
                    failing = false;
                    debug!(id = self.id, "service heartbeat");
                }
                Err(e) if !failing => {
                    warn!(error = %e, "service heartbeat failed; the service will show as down until it recovers");
                    failing = true;
                }
                Err(_) => {}
            }
        }
    }
}
