// SPDX-License-Identifier: Apache-2.0
//! End to end: `ram_weight_multiplier = 1.0` spreads and `-1.0` packs, through the
//! real path. nova-manage builds the databases, `scripts/seed_cloud.py` seeds six
//! compute hosts (cell database rows + Placement providers in the real Placement),
//! the daemon binary runs on its own RabbitMQ vhost, and nova's own
//! `SchedulerAPI.select_destinations` (the client nova-conductor uses) asks it
//! where to boot. Spread must pick the host with the most free RAM, pack the one
//! with the least, and the two answers differ.

#[path = "common/nova_schema.rs"]
mod nova_schema;
#[path = "common/placement_server.rs"]
mod placement_server;
#[path = "common/venv.rs"]
mod venv;

use sqlx::mysql::MySqlPool;
use sqlx::{AssertSqlSafe, Executor, Row};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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

fn rabbitmqctl(args: &[&str]) {
    let out = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .expect("rabbitmqctl");
    assert!(
        out.status.success() || String::from_utf8_lossy(&out.stderr).contains("already"),
        "rabbitmqctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

struct Daemon {
    child: Child,
    log: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_daemon(conf: &Path, log: PathBuf) -> Daemon {
    let file = std::fs::File::create(&log).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_nova-scheduler-rs"))
        .arg("--config-file")
        .arg(conf)
        .env("RUST_LOG", "info")
        .stdin(Stdio::null())
        .stdout(file.try_clone().expect("log file"))
        .stderr(file)
        .spawn()
        .expect("start the daemon");
    let daemon = Daemon { child, log };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = std::fs::read_to_string(&daemon.log).unwrap_or_default();
        if text.contains("scheduler ready") {
            return daemon;
        }
        assert!(
            Instant::now() < deadline,
            "daemon not ready in 60 s:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn pick_host(venv: &Path, client_conf: &Path) -> String {
    let out = Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(CLIENT)
        .arg(client_conf)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance"))
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .output()
        .expect("python client");
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
    let vhost = prefix.clone();
    rabbitmqctl(&["add_vhost", &vhost]);
    rabbitmqctl(&["set_permissions", "-p", &vhost, "guest", ".*", ".*", ".*"]);
    let transport = format!("rabbit://guest:guest@127.0.0.1:5672/{vhost}");

    // nova.conf of the schema + Placement: what seed_cloud.py, the client and the
    // daemon read (each daemon run adds its [filter_scheduler] below).
    let base = std::fs::read_to_string(dir.join("nova.conf")).expect("nova.conf");
    let base = base.replace(
        "transport_url = rabbit://guest:guest@127.0.0.1:5672/",
        &format!("transport_url = {transport}"),
    );
    let common = format!(
        "{base}\n[placement]\nauth_type = admin_token\ntoken = admin\n\
         endpoint = {placement}\nendpoint_override = {placement}\n"
    );
    let client_conf = dir.join("client.conf");
    std::fs::write(&client_conf, &common).expect("client.conf");
    let out = Command::new(venv.join("bin/python"))
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/seed_cloud.py"
        ))
        .args(["--config-file", &client_conf.to_string_lossy()])
        .args(["--state-dir", &dir.to_string_lossy()])
        .args(["--hosts", "6", "--cells", "1", "--big-hosts", "0"])
        .args(["--disabled-hosts", "0", "--seed", "7"])
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .output()
        .expect("seed_cloud.py");
    assert!(
        out.status.success(),
        "seeding failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );

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
        let daemon = start_daemon(&conf, dir.join(format!("daemon{multiplier}.log")));
        picks.push(pick_host(&venv, &client_conf));
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
