// SPDX-License-Identifier: Apache-2.0
//! The scheduler's own `services` row, judged by nova's own code: the `Service` object
//! and the DB servicegroup driver from the pinned nova package say it is up while the
//! heartbeat runs, and down once it stops for longer than `service_down_time`. Its
//! service version is the control plane's (the newest nova-conductor, capped at nova
//! 34's), so an older release's nova-scheduler can start on the same host again.
//! nova's schema is created by nova-manage (tests/common/nova_schema.rs).

use crate::nova_schema;
use crate::venv;

use nova_scheduler::state::service_row::{
    choose_version, release_name, DatabaseVersions, ServiceRow, ServiceRowError, VersionSource,
    NOVA_RELEASES, SERVICE_VERSION,
};
use nova_scheduler::state::{CellUrlResolver, HostStateStore, StateOptions};
use sqlx::{MySqlPool, Row};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

const PREFIX: &str = "nsrs_t_svc";
const HOST: &str = "nsrs-svc-test";

/// Asks nova 34 whether `host`'s nova-scheduler service is up (servicegroup DB driver,
/// report_interval 1 s, service_down_time 3 s).
async fn nova_says_up(venv: &Path, dir: &Path) -> bool {
    let conf = dir.join("servicegroup.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\nreport_interval = 1\nservice_down_time = 3\n[database]\nconnection = {}\n",
            nova_schema::sqla_url(&format!("{PREFIX}_cell0"))
        ),
    )
    .expect("write conf");
    let script = format!(
        "import sys\n\
         import nova.config, nova.context, nova.objects\n\
         from nova import servicegroup\n\
         nova.objects.register_all()\n\
         nova.config.parse_args(['t', '--config-file', {conf:?}], init_rpc=False)\n\
         ctxt = nova.context.get_admin_context()\n\
         svc = nova.objects.Service.get_by_host_and_binary(ctxt, {HOST:?}, 'nova-scheduler')\n\
         assert svc.topic == 'scheduler', svc.topic\n\
         print('UP' if servicegroup.API().service_is_up(svc) else 'DOWN')\n",
        conf = conf.to_string_lossy()
    );
    let out = tokio::process::Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(script)
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .output()
        .await
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "nova's servicegroup check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.trim_end().ends_with("UP")
}

#[tokio::test(flavor = "multi_thread")]
async fn row_is_up_for_nova_while_heartbeating_and_down_after() {
    let venv = venv::find();
    let dir = nova_schema::create(&venv, PREFIX, &[])
        .await
        .expect("nova schema");
    let pool = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{PREFIX}_cell0")))
        .await
        .expect("db");

    let row = ServiceRow::register(pool.clone(), HOST, SERVICE_VERSION)
        .await
        .expect("register");
    let again = ServiceRow::register(pool.clone(), HOST, SERVICE_VERSION)
        .await
        .expect("register twice");
    assert_eq!(
        row.id, again.id,
        "registration is idempotent per (host, binary)"
    );
    let heartbeat = tokio::spawn(row.heartbeat(Duration::from_secs(1)));
    tokio::time::sleep(Duration::from_millis(2500)).await;

    let r = sqlx::query("SELECT `binary`, topic, version, report_count, disabled, forced_down FROM services WHERE host = ?")
        .bind(HOST)
        .fetch_one(&pool)
        .await
        .expect("row");
    assert_eq!(r.get::<String, _>("binary"), "nova-scheduler");
    assert_eq!(r.get::<String, _>("topic"), "scheduler");
    assert_eq!(i64::from(r.get::<i32, _>("version")), SERVICE_VERSION);
    assert!(r.get::<i32, _>("report_count") >= 1);
    assert!(
        nova_says_up(&venv, &dir).await,
        "nova should see the scheduler up while it heartbeats"
    );

    heartbeat.abort();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !nova_says_up(&venv, &dir).await,
        "nova should see the scheduler down once heartbeats stop"
    );

    // Every live nova-scheduler of the deployment is newer than us (the minimum of
    // their versions is above ours): nova refuses to start (ServiceTooOld).
    sqlx::query(
        "INSERT INTO services (created_at, host, `binary`, topic, report_count, disabled, deleted, version, forced_down) \
         VALUES (UTC_TIMESTAMP(), 'newer-host', 'nova-scheduler', 'scheduler', 0, 0, 0, ?, 0)",
    )
    .bind(SERVICE_VERSION + 1)
    .execute(&pool)
    .await
    .expect("insert newer");
    sqlx::query("UPDATE services SET version = ? WHERE host = ?")
        .bind(SERVICE_VERSION + 1)
        .bind(HOST)
        .execute(&pool)
        .await
        .expect("upgrade");
    match ServiceRow::register(pool.clone(), "third-host", SERVICE_VERSION).await {
        Err(ServiceRowError::TooOld { ours, minimum }) => {
            assert_eq!((ours, minimum), (SERVICE_VERSION, SERVICE_VERSION + 1))
        }
        other => panic!("expected TooOld, got {other:?}"),
    }
}

fn reading(database: &str, conductor: Option<i64>, any: Option<(i64, &str)>) -> DatabaseVersions {
    DatabaseVersions {
        database: database.to_string(),
        conductor,
        any_service: any.map(|(v, b)| (v, b.to_string())),
    }
}

#[test]
fn version_is_the_newest_conductor_capped_at_ours() {
    // The newest conductor of every database, whatever the other services say.
    let chosen = choose_version(&[
        reading("database of cell c1", Some(67), Some((74, "nova-compute"))),
        reading("main database", Some(68), None),
    ]);
    assert_eq!(chosen.version, 68);
    assert_eq!(
        chosen.source,
        VersionSource::Conductor {
            newest: 68,
            database: "main database".into()
        }
    );
    assert_eq!(
        chosen.to_string(),
        "nova-scheduler service row version 68 (nova 31 (2025.1): \
         the control plane's nova-conductor, in the main database)"
    );
    // A control plane newer than nova 34 gets nova 34's version, as nova-scheduler 34 writes.
    let newer = choose_version(&[reading("main database", Some(SERVICE_VERSION + 3), None)]);
    assert_eq!(newer.version, SERVICE_VERSION);
    assert!(
        newer.to_string().contains("the control plane has 77"),
        "{newer}"
    );
    // No conductor row anywhere: the newest other nova service.
    let no_conductor = choose_version(&[
        reading("main database", None, None),
        reading("database of cell c1", None, Some((67, "nova-compute"))),
    ]);
    assert_eq!(no_conductor.version, 67);
    assert_eq!(
        no_conductor.to_string(),
        "nova-scheduler service row version 67 (nova 29/30 (2024.1/2024.2): no nova-conductor \
         row; the newest nova service, nova-compute in the database of cell c1)"
    );
    // Nothing at all (a new deployment), or no database answered: nova 34's.
    for readings in [vec![reading("main database", None, None)], vec![]] {
        let chosen = choose_version(&readings);
        assert_eq!(
            (chosen.version, chosen.source),
            (SERVICE_VERSION, VersionSource::Default)
        );
    }
}

#[test]
fn releases_are_named_from_the_table() {
    assert_eq!(
        NOVA_RELEASES.last().map(|r| r.service_version),
        Some(SERVICE_VERSION)
    );
    assert!(NOVA_RELEASES
        .windows(2)
        .all(|w| w[0].major + 1 == w[1].major && w[0].service_version <= w[1].service_version));
    assert_eq!(release_name(74), "nova 34 (2026.2)");
    assert_eq!(release_name(69), "between nova 31 and nova 32");
    assert_eq!(release_name(66), "older than nova 29");
}

const VPREFIX: &str = "nsrs_t_svcver";

async fn exec(pool: &MySqlPool, sql: &str) {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// The service version in HOST's live nova-scheduler row.
async fn live_row_version(pool: &MySqlPool) -> i64 {
    sqlx::query_scalar(
        "SELECT version FROM services WHERE host = ? AND `binary` = 'nova-scheduler' AND deleted = 0",
    )
    .bind(HOST)
    .fetch_one(pool)
    .await
    .expect("row")
}

fn insert_service(host: &str, binary: &str, version: i64, deleted: i64) -> String {
    let topic = binary.trim_start_matches("nova-");
    format!(
        "INSERT INTO services (created_at, host, `binary`, topic, report_count, disabled, deleted, \
         uuid, version, forced_down) VALUES (UTC_TIMESTAMP(), '{host}', '{binary}', '{topic}', 0, 0, \
         {deleted}, UUID(), {version}, 0)"
    )
}

/// Whether nova 34's own `Service` code, with `SERVICE_VERSION` set to `version` (what
/// that release's nova-scheduler runs at start on an existing row), updates `host`'s
/// nova-scheduler row or raises ServiceTooOld.
async fn nova_release_can_take_over(venv: &Path, dir: &Path, host: &str, version: i64) -> String {
    let conf = dir.join("takeover.conf");
    std::fs::write(
        &conf,
        format!(
            "[database]\nconnection = {}\n",
            nova_schema::sqla_url(&format!("{VPREFIX}_cell0"))
        ),
    )
    .expect("write conf");
    let script = format!(
        "import nova.config, nova.context, nova.objects, nova.exception\n\
         from nova.objects import service as service_obj\n\
         from nova import service\n\
         nova.objects.register_all()\n\
         nova.config.parse_args(['t', '--config-file', {conf:?}], init_rpc=False)\n\
         service_obj.SERVICE_VERSION = {version}\n\
         ctxt = nova.context.get_admin_context()\n\
         svc = nova.objects.Service.get_by_host_and_binary(ctxt, {host:?}, 'nova-scheduler')\n\
         try:\n    service._update_service_ref(svc)\n    print('STARTED', svc.version)\n\
         except nova.exception.ServiceTooOld as e:\n    print('ServiceTooOld:', e)\n",
        conf = conf.to_string_lossy()
    );
    let out = tokio::process::Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(script)
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .output()
        .await
        .expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "nova's take-over check failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .trim_end()
        .lines()
        .last()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn row_takes_the_control_planes_version_so_its_scheduler_can_come_back() {
    let venv = venv::find();
    let dir = nova_schema::create(&venv, VPREFIX, &["cell1"])
        .await
        .expect("nova schema");
    let main = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{VPREFIX}_cell0")))
        .await
        .expect("cell0");
    let cell1 = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{VPREFIX}_cell1")))
        .await
        .expect("cell1");
    let resolver: CellUrlResolver =
        Arc::new(|url: &str| Ok(url.replace("mysql+pymysql://", "mysql://")));
    let store = HostStateStore::connect(StateOptions::new(
        nova_schema::sqlx_url(&format!("{VPREFIX}_api")),
        nova_schema::sqlx_url(&format!("{VPREFIX}_cell0")),
        resolver,
    ))
    .await
    .expect("store");

    // A nova 2024.1 control plane: its super-conductor in the main database, a cell
    // conductor and computes in cell1; a deleted conductor row of a newer release and a
    // nova-scheduler row at 74 (an earlier build of this daemon) do not count.
    exec(&main, &insert_service("ctl-1", "nova-conductor", 67, 0)).await;
    exec(&main, &insert_service("ctl-gone", "nova-conductor", 74, 1)).await;
    exec(&main, &insert_service("old-sched", "nova-scheduler", 74, 0)).await;
    exec(
        &cell1,
        &insert_service("cell1-cond", "nova-conductor", 66, 0),
    )
    .await;
    exec(&cell1, &insert_service("cmp-1", "nova-compute", 67, 0)).await;
    let chosen = choose_version(&store.newest_service_versions().await);
    assert_eq!(chosen.version, 67, "{chosen}");
    assert_eq!(
        chosen.source,
        VersionSource::Conductor {
            newest: 67,
            database: "main database".into()
        }
    );

    // nova's refusal holds: a live nova-scheduler row newer than the control plane
    // (here 74) bars us as it bars nova-scheduler 29 ...
    match ServiceRow::register(main.clone(), HOST, chosen.version).await {
        Err(ServiceRowError::TooOld { ours, minimum }) => assert_eq!((ours, minimum), (67, 74)),
        other => panic!("expected TooOld, got {other:?}"),
    }
    // ... unless that row is forced down or deleted (nova's get_minimum_version).
    exec(
        &main,
        "UPDATE services SET forced_down = 1 WHERE host = 'old-sched'",
    )
    .await;
    let row = ServiceRow::register(main.clone(), HOST, chosen.version)
        .await
        .expect("register at the control plane's version");
    assert_eq!(row.version(), 67);
    row.report().await.expect("report");
    assert_eq!(
        live_row_version(&main).await,
        67,
        "the heartbeat keeps the registered version"
    );

    // The release's own nova-scheduler starts on the row we left (nova's own Service
    // code at that release's SERVICE_VERSION); at 74 it would not have.
    assert_eq!(
        nova_release_can_take_over(&venv, &dir, HOST, 67).await,
        "STARTED 67"
    );
    exec(
        &main,
        &format!("UPDATE services SET version = 74 WHERE host = '{HOST}'"),
    )
    .await;
    assert!(nova_release_can_take_over(&venv, &dir, HOST, 67)
        .await
        .starts_with("ServiceTooOld:"));

    // No conductor row anywhere: the newest other nova service (nova-scheduler rows,
    // possibly our own, left out).
    exec(
        &main,
        "UPDATE services SET deleted = id WHERE `binary` = 'nova-conductor'",
    )
    .await;
    exec(
        &cell1,
        "UPDATE services SET deleted = id WHERE `binary` = 'nova-conductor'",
    )
    .await;
    exec(&cell1, &insert_service("cmp-2", "nova-compute", 68, 0)).await;
    let chosen = choose_version(&store.newest_service_versions().await);
    assert_eq!(chosen.version, 68, "{chosen}");
    assert!(matches!(
        &chosen.source,
        VersionSource::AnyService { binary, database, .. }
            if binary == "nova-compute" && database.starts_with("database of cell ")
    ));
    // Nothing left: nova 34's.
    exec(&cell1, "UPDATE services SET deleted = id").await;
    exec(&main, "UPDATE services SET deleted = id").await;
    let chosen = choose_version(&store.newest_service_versions().await);
    assert_eq!(
        (chosen.version, chosen.source),
        (SERVICE_VERSION, VersionSource::Default)
    );

    // A daemon that started on such empty databases registered at nova 34's version;
    // the first rows of a 2024.1 control plane lower it (through a clone, as the daemon
    // does beside the heartbeat), and the heartbeat keeps the lowered version.
    let row = ServiceRow::register(main.clone(), HOST, SERVICE_VERSION)
        .await
        .expect("register at nova 34's version");
    let follower = row.clone();
    assert!(follower.set_version(67).await.expect("lowered"));
    assert!(!follower.set_version(67).await.expect("unchanged"));
    row.report().await.expect("report");
    assert_eq!((row.version(), live_row_version(&main).await), (67, 67));
    assert_eq!(
        nova_release_can_take_over(&venv, &dir, HOST, 67).await,
        "STARTED 67"
    );
}
