// SPDX-License-Identifier: Apache-2.0
//! Creates nova's REAL schema with nova-manage (never hand-written tables):
//! `api_db sync`, `cell_v2 map_cell0`, `cell_v2 create_cell` per cell, `db sync`
//! per cell database — the same order as `scripts/stack.sh`.
#![allow(dead_code)]

use sqlx::{AssertSqlSafe, Connection, Executor, MySqlConnection};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

/// MariaDB the tests use (root without password, as on the test machine).
pub const MYSQL_BASE: &str = "127.0.0.1:3306";
const SQLA_BASE: &str = "mysql+pymysql://root:@127.0.0.1:3306";

/// SQLAlchemy URL of a database, as nova stores it in `cell_mappings`.
pub fn sqla_url(db: &str) -> String {
    format!("{SQLA_BASE}/{db}?charset=utf8")
}

/// `name`, suffixed with `_$NSRS_TEST_DB_TAG` when that is set, so two checkouts on
/// one machine can run the same integration tests at once without sharing databases.
pub fn tagged(name: &str) -> String {
    match std::env::var("NSRS_TEST_DB_TAG") {
        Ok(tag) if !tag.is_empty() => format!("{name}_{tag}"),
        _ => name.to_string(),
    }
}

/// sqlx URL of a database.
pub fn sqlx_url(db: &str) -> String {
    format!("mysql://root@{MYSQL_BASE}/{db}")
}

/// Drops and creates the databases `<prefix>_api`, `<prefix>_cell0` and
/// `<prefix>_<cell>` for each cell, then builds nova's schema into them with
/// nova-manage from `venv`. Returns the working directory holding nova.conf.
pub async fn create(venv: &Path, prefix: &str, cells: &[&str]) -> Result<PathBuf, String> {
    let mut dbs = vec![format!("{prefix}_api"), format!("{prefix}_cell0")];
    dbs.extend(cells.iter().map(|c| format!("{prefix}_{c}")));
    recreate_databases(&dbs).await?;

    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let conf = dir.join("nova.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/\n\
             [database]\nconnection = {}\n[api_database]\nconnection = {}\n",
            sqla_url(&dbs[1]),
            sqla_url(&dbs[0])
        ),
    )
    .map_err(|e| e.to_string())?;
    let conf_arg = conf.to_string_lossy().into_owned();
    let nm = |args: &[&str]| {
        let mut all = vec!["--config-file", conf_arg.as_str()];
        all.extend_from_slice(args);
        nova_manage(venv, all.iter().map(|s| s.to_string()).collect())
    };
    nm(&["api_db", "sync"]).await?;
    nm(&[
        "cell_v2",
        "map_cell0",
        "--database_connection",
        &sqla_url(&dbs[1]),
    ])
    .await?;
    for cell in cells {
        let url = sqla_url(&format!("{prefix}_{cell}"));
        // nova-manage wants a distinct transport URL per cell; it is never used here.
        let transport = format!("rabbit://guest:guest@127.0.0.1:5672/{prefix}_{cell}");
        nm(&[
            "cell_v2",
            "create_cell",
            "--name",
            cell,
            "--database_connection",
            &url,
            "--transport-url",
            &transport,
        ])
        .await?;
    }
    nm(&["db", "sync"]).await?;
    for cell in cells {
        let overlay = dir.join(format!("db-{cell}.conf"));
        let url = sqla_url(&format!("{prefix}_{cell}"));
        std::fs::write(&overlay, format!("[database]\nconnection = {url}\n"))
            .map_err(|e| e.to_string())?;
        nm(&["--config-file", &overlay.to_string_lossy(), "db", "sync"]).await?;
    }
    Ok(dir)
}

/// Like [`create`], but nova-manage runs once per test binary and cell list (into
/// template databases); each caller then gets a copy made with the template's own
/// `SHOW CREATE TABLE` DDL and rows, and `cell_mappings` pointing at its copies.
/// Tests that each need fresh databases pay a second instead of a minute.
pub async fn create_from_template(venv: &Path, prefix: &str, cells: &[&str]) -> Result<(), String> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    /// Per template name, its creation, run once.
    type Templates = HashMap<String, Arc<tokio::sync::OnceCell<Result<(), String>>>>;
    static TEMPLATES: Mutex<Option<Templates>> = Mutex::new(None);
    let binary = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "tests".into())
        .split('-')
        .next()
        .unwrap_or("tests")
        .to_string();
    let template = tagged(&format!("nsrs_tpl_{binary}_{}", cells.join("_")));
    let once = TEMPLATES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_or_insert_with(HashMap::new)
        .entry(template.clone())
        .or_default()
        .clone();
    once.get_or_init(|| async { create(venv, &template, cells).await.map(|_| ()) })
        .await
        .clone()?;
    let mut suffixes = vec!["api".to_string(), "cell0".to_string()];
    suffixes.extend(cells.iter().map(|c| c.to_string()));
    let dbs: Vec<String> = suffixes.iter().map(|s| format!("{prefix}_{s}")).collect();
    recreate_databases(&dbs).await?;
    let mut conn = MySqlConnection::connect(&format!("mysql://root@{MYSQL_BASE}"))
        .await
        .map_err(|e| e.to_string())?;
    conn.execute("SET FOREIGN_KEY_CHECKS = 0")
        .await
        .map_err(|e| e.to_string())?;
    for suffix in &suffixes {
        let (src, dst) = (format!("{template}_{suffix}"), format!("{prefix}_{suffix}"));
        let tables: Vec<String> = sqlx::query_scalar(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? \
             AND table_type = 'BASE TABLE'",
        )
        .bind(&src)
        .fetch_all(&mut conn)
        .await
        .map_err(|e| e.to_string())?;
        conn.execute(AssertSqlSafe(format!("USE `{dst}`")))
            .await
            .map_err(|e| e.to_string())?;
        for table in tables {
            let row: (String, String) = sqlx::query_as(AssertSqlSafe(format!(
                "SHOW CREATE TABLE `{src}`.`{table}`"
            )))
            .fetch_one(&mut conn)
            .await
            .map_err(|e| format!("{src}.{table}: {e}"))?;
            conn.execute(AssertSqlSafe(row.1))
                .await
                .map_err(|e| format!("{dst}.{table}: {e}"))?;
            conn.execute(AssertSqlSafe(format!(
                "INSERT INTO `{dst}`.`{table}` SELECT * FROM `{src}`.`{table}`"
            )))
            .await
            .map_err(|e| format!("{dst}.{table}: {e}"))?;
        }
    }
    conn.execute(AssertSqlSafe(format!(
        "UPDATE `{prefix}_api`.cell_mappings SET database_connection = \
         REPLACE(database_connection, '/{template}_', '/{prefix}_')"
    )))
    .await
    .map_err(|e| e.to_string())?;
    conn.close().await.map_err(|e| e.to_string())
}

pub async fn recreate_databases(dbs: &[String]) -> Result<(), String> {
    let mut conn = MySqlConnection::connect(&format!("mysql://root@{MYSQL_BASE}"))
        .await
        .map_err(|e| format!("MariaDB at {MYSQL_BASE} (root, no password): {e}"))?;
    for db in dbs {
        for sql in [
            format!("DROP DATABASE IF EXISTS `{db}`"),
            format!("CREATE DATABASE `{db}` CHARACTER SET utf8"),
        ] {
            conn.execute(AssertSqlSafe(sql))
                .await
                .map_err(|e| format!("{db}: {e}"))?;
        }
    }
    conn.close().await.map_err(|e| e.to_string())
}

async fn nova_manage(venv: &Path, args: Vec<String>) -> Result<(), String> {
    run(&venv.join("bin/nova-manage"), &args, &[]).await
}

/// Runs a venv tool with eventlet patching off; its output is shown only on failure.
pub async fn run(tool: &Path, args: &[String], env: &[(&str, &str)]) -> Result<(), String> {
    let mut cmd = tokio::process::Command::new(tool);
    cmd.args(args)
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .env("PYTHONWARNINGS", "ignore")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd
        .output()
        .await
        .map_err(|e| format!("{}: {e}", tool.display()))?;
    if out.status.success() {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    let tail: Vec<&str> = text.lines().rev().take(30).collect();
    Err(format!(
        "{} {} failed ({}):\n{}",
        tool.display(),
        args.join(" "),
        out.status,
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    ))
}
