// SPDX-License-Identifier: Apache-2.0
//! The scheduler's own `services` row in the main database (`[database] connection`),
//! registered and heartbeated as nova's `Service` + DB servicegroup driver do, so
//! `openstack compute service list` shows `nova-scheduler` on this host as `up`.
//!
//! This is the one write the daemon makes to nova's databases (nova-scheduler makes it
//! too). Every nova-scheduler worker of a host heartbeats the same row; a Python
//! scheduler and this daemon with the same `[DEFAULT] host` share it the same way.

use sqlx::mysql::MySqlPool;
use sqlx::Row;
use std::time::Duration;
use tracing::{debug, info, warn};

/// nova 34's `SERVICE_VERSION` (nova/objects/service.py).
pub const SERVICE_VERSION: i64 = 74;
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

/// The registered row.
#[derive(Debug, Clone)]
pub struct ServiceRow {
    pool: MySqlPool,
    pub id: i64,
    pub host: String,
}

impl ServiceRow {
    /// Finds or creates the `(host, nova-scheduler)` row, as `Service.create`/`save`
    /// do at service start: refuse if live rows of this binary are newer than us,
    /// update the version of an existing row, insert otherwise (a sibling's insert
    /// winning the race is re-read).
    pub async fn register(pool: MySqlPool, host: &str) -> Result<Self, ServiceRowError> {
        let minimum: Option<i64> = sqlx::query(
            "SELECT MIN(version) AS v FROM services WHERE `binary` = ? AND deleted = 0",
        )
        .bind(BINARY)
        .fetch_one(&pool)
        .await?
        .try_get("v")?;
        if let Some(minimum) = minimum.filter(|m| *m > SERVICE_VERSION) {
            return Err(ServiceRowError::TooOld {
                ours: SERVICE_VERSION,
                minimum,
            });
        }
        for _ in 0..2 {
            if let Some(id) = Self::find(&pool, host).await? {
                sqlx::query("UPDATE services SET version = ? WHERE id = ? AND version <> ?")
                    .bind(SERVICE_VERSION)
                    .bind(id)
                    .bind(SERVICE_VERSION)
                    .execute(&pool)
                    .await?;
                info!(host, id, "nova-scheduler service row found");
                return Ok(ServiceRow {
                    pool,
                    id,
                    host: host.to_string(),
                });
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
            .bind(SERVICE_VERSION)
            .execute(&pool)
            .await;
            match inserted {
                Ok(done) => {
                    let id = done.last_insert_id() as i64;
                    info!(host, id, "nova-scheduler service row created");
                    return Ok(ServiceRow {
                        pool,
                        id,
                        host: host.to_string(),
                    });
                }
                // Unique (host, binary, deleted): another worker created it first.
                Err(sqlx::Error::Database(e)) if e.is_unique_violation() => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Self::find(&pool, host)
            .await?
            .map(|id| ServiceRow {
                pool,
                id,
                host: host.to_string(),
            })
            .ok_or_else(|| ServiceRowError::Sql(sqlx::Error::RowNotFound))
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
        .bind(SERVICE_VERSION)
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
