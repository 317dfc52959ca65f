// SPDX-License-Identifier: Apache-2.0
//! End to end: `ram_weight_multiplier = 1.0` spreads and `-1.0` packs, through the
//! real path. nova-manage builds the databases, `scripts/seed_cloud.py` seeds six
//! compute hosts (cell database rows + Placement providers in the real Placement),
//! the daemon binary runs on its own RabbitMQ vhost, and nova's own
//! `SchedulerAPI.select_destinations` (the client nova-conductor uses) asks it
//! where to boot. Spread must pick the host with the most free RAM, pack the one
//! with the least, and the two answers differ.

use crate::daemon_proc;
use crate::nova_schema;
use crate::placement_server;
use crate::venv;

use daemon_proc::{nova_client, nova_conf_on, own_vhost, placement_section, seed_cloud, Daemon};
use sqlx::mysql::MySqlPool;
use sqlx::{AssertSqlSafe, Executor, Row};
use std::path::Path;

/// nova's SchedulerAPI client: one single-instance boot request, prints the host.
const CLIENT: &str = r#"
import sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[2])
import nsrs_helpers as H
H.init_nova_client(sys.argv[1])
from nova.scheduler import rpcapi
ctxt = H.user_context()
uuids = [H.new_uuid()]
spec = H.make_spec(ctxt, H.make_flavor(1, 2048, 20), uuids)
sel = rpcapi.SchedulerAPI().select_destinations(
    ctxt, spec, uuids, return_objects=True, return_alternates=False)
print(sel[0][0].service_host)
"#;

fn pick_host(venv: &Path, client_conf: &Path) -> String {
    let out = nova_client(venv, CLIENT, client_conf, &[]);
    assert!(
        out.status.success(),
        "select_destinations failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ram_multiplier_sign_turns_spread_into_pack() {
    let venv = venv::find();
    let prefix = nova_schema::tagged("nsrs_weigh_e2e");
    let dir = nova_schema::create(&venv, &prefix, &["cell1"])
        .await
        .expect("nova-manage schema");
    let placement = placement_server::url().await;
    let transport = own_vhost(&prefix);
    // nova.conf of the schema + Placement: what seed_cloud.py, the client and the
    // daemon read (each daemon run adds its [filter_scheduler] below).
    let common = format!(
        "{}{}",
        nova_conf_on(&dir, &transport),
        placement_section(placement)
    );
    let client_conf = dir.join("client.conf");
    std::fs::write(&client_conf, &common).expect("client.conf");
    seed_cloud(&venv, &client_conf, &dir, 6, 7);

    let cell = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_cell1")))
        .await
        .expect("cell db");
    let rows =
        sqlx::query("SELECT hypervisor_hostname, free_ram_mb FROM compute_nodes WHERE deleted = 0")
            .fetch_all(&cell)
            .await
            .expect("compute nodes");
    let mut free: Vec<(i64, String)> = rows
        .iter()
        .map(|r| (r.get("free_ram_mb"), r.get("hypervisor_hostname")))
        .collect();
    free.sort();
    assert!(
        free.len() == 6 && free[0].0 < free[1].0 && free[4].0 < free[5].0,
        "{free:?}"
    );
    let (least, most) = (free[0].1.clone(), free[5].1.clone());

    let mut picks = Vec::new();
    for multiplier in ["1.0", "-1.0"] {
        let conf = dir.join(format!("daemon{multiplier}.conf"));
        std::fs::write(
            &conf,
            format!(
                "{common}\n[filter_scheduler]\n\
                 weight_classes = nova.scheduler.weights.ram.RAMWeigher\n\
                 ram_weight_multiplier = {multiplier}\n"
            ),
        )
        .expect("daemon conf");
        // ComputeFilter wants a heartbeat younger than service_down_time.
        cell.execute(AssertSqlSafe(
            "UPDATE services SET last_seen_up = UTC_TIMESTAMP() WHERE deleted = 0",
        ))
        .await
        .expect("heartbeat");
        let daemon = Daemon::start(&conf, dir.join(format!("daemon{multiplier}.log")), &[]);
        daemon.wait_ready();
        picks.push(pick_host(&venv, &client_conf));
        // Decided over the cache's table, with the weigh index (the multiplier's
        // sign flips the index's bounds).
        let log = daemon.log_text();
        assert!(log.contains("decided_on=\"table\""), "{log}");
        drop(daemon);
    }
    assert_eq!(
        picks[0], most,
        "spread (+1.0) picks the host with the most free RAM"
    );
    assert_eq!(
        picks[1], least,
        "pack (-1.0) picks the host with the least free RAM"
    );
    assert_ne!(picks[0], picks[1]);
    cell.close().await;
}
