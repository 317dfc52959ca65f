// SPDX-License-Identifier: Apache-2.0
//! The scheduler's own `services` row, judged by nova's own code: the `Service` object
//! and the DB servicegroup driver from the pinned nova package say it is up while the
//! heartbeat runs, and down once it stops for longer than `service_down_time`.
//! nova's schema is created by nova-manage (tests/common/nova_schema.rs).

use crate::nova_schema;
use crate::venv;

use nova_scheduler::state::service_row::{ServiceRow, ServiceRowError, SERVICE_VERSION};
use sqlx::{MySqlPool, Row};
use std::path::Path;
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

    let row = ServiceRow::register(pool.clone(), HOST)
        .await
        .expect("register");
    let again = ServiceRow::register(pool.clone(), HOST)
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
    match ServiceRow::register(pool.clone(), "third-host").await {
        Err(ServiceRowError::TooOld { ours, minimum }) => {
            assert_eq!((ours, minimum), (SERVICE_VERSION, SERVICE_VERSION + 1))
        }
        other => panic!("expected TooOld, got {other:?}"),
    }
}
