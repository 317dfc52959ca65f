// SPDX-License-Identifier: Apache-2.0
//! Cells: `cell_mappings` rows of the API database and one small pool per cell DB.

use futures_util::future::join_all;
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::Row;
use std::sync::Arc;
use std::time::Duration;

/// Turns a `cell_mappings.database_connection` value (an SQLAlchemy URL such as
/// `mysql+pymysql://root:@127.0.0.1/nova_cell1?charset=utf8`, possibly a
/// `{username}`-style template) into an sqlx URL. The integrator passes one built
/// on the config module, so this module does not depend on it. The error text must
/// not contain the password.
pub type CellUrlResolver = Arc<dyn Fn(&str) -> Result<String, String> + Send + Sync>;

/// nova's uuid of cell0, which is never scheduled to.
pub const CELL0_UUID: &str = "00000000-0000-0000-0000-000000000000";

/// Connections per cell pool: a request runs at most two queries at once per cell,
/// and many requests may run at once; roomy so that waiting for one is rare.
const CELL_POOL_SIZE: u32 = 20;

/// How long a query waits for a connection. sqlx retries a *refused* connection
/// until then (nova fails at once), so this is also how long a cell whose server is
/// down delays each request before it is skipped. Other connect errors (unknown
/// database, access denied, unreachable) fail at once.
const CELL_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Time allowed to the startup probe of each cell database.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// A cell as the scheduler sees it (`CellMapping` without the URLs).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Cell {
    pub uuid: String,
    pub name: Option<String>,
    pub disabled: bool,
}

/// One `cell_mappings` row.
pub(super) struct MappingRow {
    pub uuid: String,
    pub name: Option<String>,
    pub database_connection: Option<String>,
    pub disabled: bool,
}

/// A cell and its (lazily connected) pool. `pool` is `None` when the URL is unusable.
pub(super) struct CellDb {
    pub cell: Cell,
    pub pool: Option<MySqlPool>,
    pub masked_url: String,
    /// The `database_connection` as stored, to reuse the pool on reload.
    source: Option<String>,
}

/// The cells known since the last (re)load, in `cell_mappings.id` order.
#[derive(Default)]
pub(super) struct CellSet {
    pub cells: Vec<Arc<CellDb>>,
}

pub(super) async fn load_mappings(api: &MySqlPool) -> Result<Vec<MappingRow>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT uuid, name, database_connection, disabled FROM cell_mappings ORDER BY id",
    )
    .fetch_all(api)
    .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let uuid: String = row.try_get("uuid")?;
        if uuid == CELL0_UUID {
            continue;
        }
        out.push(MappingRow {
            uuid,
            name: row.try_get("name")?,
            database_connection: row.try_get("database_connection")?,
            disabled: row.try_get::<Option<bool>, _>("disabled")?.unwrap_or(false),
        });
    }
    Ok(out)
}

/// The uuid of the cell `host_mappings` maps `host` to.
pub(super) async fn cell_of_host(
    api: &MySqlPool,
    host: &str,
) -> Result<Option<String>, sqlx::Error> {
    let row = sqlx::query(
        "SELECT c.uuid FROM host_mappings h JOIN cell_mappings c ON c.id = h.cell_id \
         WHERE h.host = ?",
    )
    .bind(host)
    .fetch_optional(api)
    .await?;
    Ok(row.and_then(|r| r.try_get::<Option<String>, _>("uuid").ok().flatten()))
}

/// `(id, uuid, name)` of every cell but cell0, for host mappings (`cell_id`).
pub(super) async fn load_mapping_ids(
    api: &MySqlPool,
) -> Result<Vec<(i64, String, Option<String>)>, sqlx::Error> {
    let rows = sqlx::query("SELECT id, uuid, name FROM cell_mappings ORDER BY id")
        .fetch_all(api)
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let uuid: String = row.try_get("uuid")?;
        if uuid != CELL0_UUID {
            out.push((row.try_get("id")?, uuid, row.try_get("name")?));
        }
    }
    Ok(out)
}

/// A lazily connecting pool for one cell (or the main) database.
pub(super) fn open_pool(url: &str) -> Result<MySqlPool, String> {
    MySqlPoolOptions::new()
        .max_connections(CELL_POOL_SIZE)
        .min_connections(0)
        .acquire_timeout(CELL_ACQUIRE_TIMEOUT)
        .idle_timeout(Duration::from_secs(600))
        .connect_lazy(url)
        .map_err(|e| e.to_string())
}

// === impl CellDb ===

impl CellDb {
    /// Resolves the URL and opens a lazy pool; failures leave `pool` empty (warned).
    pub fn open(row: MappingRow, resolver: &crate::state::CellUrlResolver) -> Self {
        let cell = Cell {
            uuid: row.uuid,
            name: row.name,
            disabled: row.disabled,
        };
        let source = row.database_connection;
        let raw = source.as_deref().unwrap_or("");
        let masked_url = mask_url(raw);
        let pool = match resolver(raw).and_then(|url| open_pool(&url)) {
            Ok(pool) => Some(pool),
            Err(message) => {
                tracing::warn!(cell = %display_name(&cell), url = %masked_url, %message,
                    "cell database URL unusable; the cell will be skipped");
                None
            }
        };
        CellDb {
            cell,
            pool,
            masked_url,
            source,
        }
    }

    /// The cell's name, or its uuid when unnamed (nova's `CellMapping.identity`).
    pub fn display_name(&self) -> String {
        display_name(&self.cell)
    }
}

fn display_name(cell: &Cell) -> String {
    match &cell.name {
        Some(name) => format!("{}({})", cell.uuid, name),
        None => cell.uuid.clone(),
    }
}

// === impl CellSet ===

impl CellSet {
    /// Builds the set from fresh rows, reusing the pools of cells whose
    /// `database_connection` did not change.
    pub fn build(
        rows: Vec<MappingRow>,
        resolver: &crate::state::CellUrlResolver,
        previous: &CellSet,
    ) -> Self {
        let cells =
            rows.into_iter()
                .map(|row| {
                    let reusable = previous.cells.iter().find(|old| {
                        old.cell.uuid == row.uuid && old.source == row.database_connection
                    });
                    match reusable {
                        Some(old) => Arc::new(CellDb {
                            cell: Cell {
                                uuid: row.uuid,
                                name: row.name,
                                disabled: row.disabled,
                            },
                            pool: old.pool.clone(),
                            masked_url: old.masked_url.clone(),
                            source: old.source.clone(),
                        }),
                        None => Arc::new(CellDb::open(row, resolver)),
                    }
                })
                .collect();
        CellSet { cells }
    }

    /// Tries every cell database once so that a down cell shows up in the log at
    /// startup. Never fails: nova also starts with a cell down.
    pub async fn probe(&self) {
        let probes = self.cells.iter().filter_map(|db| {
            let pool = db.pool.as_ref()?;
            Some(async move {
                let ping = sqlx::query("SELECT 1").execute(pool);
                match tokio::time::timeout(PROBE_TIMEOUT, ping).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => tracing::warn!(cell = %db.display_name(), url = %db.masked_url,
                        error = %e, "cell database is not reachable; it is skipped until it answers"),
                    Err(_) => tracing::warn!(cell = %db.display_name(), url = %db.masked_url,
                        "cell database did not answer within 3s; it is skipped until it answers"),
                }
            })
        });
        join_all(probes).await;
    }
}

/// The URL with its password replaced by `***` (`scheme://user:***@host/db`).
/// Anything that does not look like a URL with credentials is returned unchanged.
pub fn mask_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let userinfo = &authority[..at];
    let masked_userinfo = match userinfo.find(':') {
        Some(colon) => format!("{}:***", &userinfo[..colon]),
        None => userinfo.to_string(),
    };
    format!(
        "{}{}{}",
        &url[..scheme_end + 3],
        masked_userinfo,
        &rest[at..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_passwords_only() {
        assert_eq!(
            mask_url("mysql://nova:s3cr:et@db.example:3306/nova_cell1?charset=utf8"),
            "mysql://nova:***@db.example:3306/nova_cell1?charset=utf8"
        );
        assert_eq!(
            mask_url("mysql+pymysql://root:@127.0.0.1/nova"),
            "mysql+pymysql://root:***@127.0.0.1/nova"
        );
        assert_eq!(mask_url("mysql://nova@db/nova"), "mysql://nova@db/nova");
        assert_eq!(mask_url("mysql://db/nova"), "mysql://db/nova");
        assert_eq!(mask_url("not a url"), "not a url");
        // An '@' in the path is not credentials.
        assert_eq!(mask_url("mysql://db/a@b"), "mysql://db/a@b");
    }

    #[test]
    fn unusable_url_leaves_no_pool() {
        let resolver: crate::state::CellUrlResolver =
            Arc::new(|_| Err("template needs [database] connection".to_string()));
        let row = MappingRow {
            uuid: "u".into(),
            name: Some("cell1".into()),
            database_connection: Some("mysql+pymysql://{username}:{password}@h/c".into()),
            disabled: false,
        };
        let db = CellDb::open(row, &resolver);
        assert!(db.pool.is_none());
        assert_eq!(db.display_name(), "u(cell1)");
    }
}
