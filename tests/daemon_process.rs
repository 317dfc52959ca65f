// SPDX-License-Identifier: Apache-2.0
//! The daemon binary as a process, end to end (nova-manage databases, the real Placement,
//! seeded hosts, its own RabbitMQ vhost, nova's `SchedulerAPI` as the caller):
//!
//! 1. With `[oslo_messaging_notifications] driver = messagingv2` and
//!    `[notifications] notification_format = both`, a select_destinations makes the daemon
//!    send the four `scheduler.select_destinations` notifications; oslo.messaging's own
//!    notification listener receives exactly what nova's code sends for the same
//!    RequestSpec and context (`tests/oracle/notification_oracle.py`).
//! 2. SIGTERM while a call is in flight (its Placement query held back by a delaying
//!    proxy in front of the real Placement): the daemon stops consuming, finishes the
//!    call (the caller gets its answer and the `.end` notifications are flushed), deletes
//!    its private fanout queue and exits 0.
//! 3. Robustness (section "Hostile input and faults"), the daemon run with one runtime
//!    thread and the fault-injecting gate of tests/common/claims_cloud.rs in front of
//!    Placement: over a thousand generated hostile messages each get an answer (or, when
//!    no reply address survives, none) while a normal call after every batch is
//!    answered within a second and memory stays bounded; a request that asks for 10⁹
//!    instances is refused at once; calls in flight at a kill -9 are handled
//!    again after the restart and placed, their dead attempts' claims replaced; a call
//!    in flight at two kills is failed and acknowledged instead of being handled a
//!    third time; a call whose claim was committed when the daemon was killed is
//!    decided again onto another host without keeping the first claim; a reply to a vanished queue
//!    is logged once; SIGTERM is honoured within `graceful_shutdown_timeout`.
//! 4. Logging as oslo.log's options say (RabbitMQ and the nova schema only, no
//!    Placement): `--log-file PATH --use-json` writes one JSON object per line with
//!    oslo's keys and the call's request id; `debug` rewritten in the file and a
//!    SIGHUP turn debug lines on and off without a restart.
//! 5. systemd's notification protocol: `READY=1`, `WATCHDOG=1` at half the period,
//!    `STOPPING=1` on SIGTERM, on the socket `NOTIFY_SOCKET` names.
//! 6. A database that is down at startup (RabbitMQ and the nova schema only): with
//!    `max_retries = 1` a refused port is named (host:port, "refused") and the daemon
//!    exits non-zero within seconds; with `max_retries = -1` it retries, `/readyz`
//!    answers 503 naming the awaited database, and it becomes ready once the port
//!    forwards to MariaDB.
//! 7. An operator's own plugins (`daemon_process/custom_plugins.rs`): the example
//!    WebAssembly filter and weigher and a Python filter class, in the binary, for
//!    nova's client.

#[path = "common/amqp_client.rs"]
mod amqp_client;
#[path = "common/notification_check.rs"]
mod check;
#[path = "common/claims_cloud.rs"]
mod claims_cloud;
#[path = "common/daemon_proc.rs"]
mod daemon_proc;
#[path = "common/http_stub.rs"]
mod http_stub;
#[path = "common/nova_schema.rs"]
mod nova_schema;
#[path = "common/placement_admin.rs"]
mod placement_admin;
#[path = "common/placement_server.rs"]
mod placement_server;
#[path = "common/private_rabbit.rs"]
mod private_rabbit;
#[path = "common/venv.rs"]
mod venv;
#[path = "common/wasm_example.rs"]
mod wasm_example;

#[path = "daemon_process/capacity_tools.rs"]
mod capacity_tools;
#[path = "daemon_process/custom_plugins.rs"]
mod custom_plugins;

use daemon_proc::{
    nova_client, nova_conf_on, own_vhost, placement_section, rabbitmqctl, seed_cloud, Daemon,
};
use std::io::{BufRead, BufReader, Read as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use sqlx::mysql::MySqlPool;
use sqlx::{AssertSqlSafe, Executor};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const SCHEDULER_HOST: &str = "nsrs-e2e-scheduler";

/// nova's SchedulerAPI client: one single-instance boot request; prints the chosen host
/// and what was sent (the spec primitive, the serialized context, the instance uuid).
const CLIENT: &str = r#"
import json, sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[2])
import nsrs_helpers as H
H.init_nova_client(sys.argv[1])
from nova.scheduler import rpcapi
ctxt = H.user_context()
uuids = [H.new_uuid()]
spec = H.make_spec(ctxt, H.make_flavor(1, 2048, 20), uuids)
sent = spec.obj_to_primitive()
sel = rpcapi.SchedulerAPI().select_destinations(
    ctxt, spec, uuids, return_objects=True, return_alternates=False)
from oslo_serialization import jsonutils
print(jsonutils.dumps({"host": sel[0][0].service_host, "spec": sent,
                       "context": ctxt.to_dict(), "instance_uuid": uuids[-1]}))
"#;

/// A TCP proxy in front of Placement that, while `hold` is set, delays every request
/// for allocation candidates by `delay` and reports it on `seen`.
struct SlowPlacement {
    url: String,
    hold: Arc<AtomicBool>,
    seen: tokio::sync::mpsc::UnboundedReceiver<()>,
}

async fn slow_placement(upstream: &str, delay: Duration) -> SlowPlacement {
    let upstream_addr = upstream
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let hold = Arc::new(AtomicBool::new(false));
    let (tx, seen) = tokio::sync::mpsc::unbounded_channel();
    let path = upstream
        .trim_start_matches("http://")
        .split_once('/')
        .map(|(_, p)| format!("/{p}"))
        .unwrap_or_default();
    let hold2 = hold.clone();
    tokio::spawn(async move {
        loop {
            let Ok((client, _)) = listener.accept().await else {
                return;
            };
            let (hold, tx, upstream_addr) = (hold2.clone(), tx.clone(), upstream_addr.clone());
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&upstream_addr).await else {
                    return;
                };
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut sr, &mut cw).await;
                    let _ = cw.shutdown().await;
                });
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = match cr.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    let chunk = &buf[..n];
                    if hold.load(Ordering::SeqCst)
                        && String::from_utf8_lossy(chunk).contains("allocation_candidates")
                    {
                        let _ = tx.send(());
                        tokio::time::sleep(delay).await;
                    }
                    if sw.write_all(chunk).await.is_err() {
                        break;
                    }
                }
                let _ = sw.shutdown().await;
            });
        }
    });
    SlowPlacement {
        url: format!("http://127.0.0.1:{port}{path}"),
        hold,
        seen,
    }
}

fn select(venv: &Path, client_conf: &Path) -> Value {
    let out = nova_client(venv, CLIENT, client_conf, &[]);
    assert!(
        out.status.success(),
        "select_destinations failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap()).unwrap()
}

/// The listener, started before the calls; its output is read when it exits.
fn start_listener(venv: &Path, conf: &Path, count: usize) -> Child {
    let mut child = Command::new(venv.join("bin/python"))
        .arg(check::listener_script())
        .arg("--config-file")
        .arg(conf)
        .args(["--exchange", "nova"])
        .args(["--topics", "notifications,versioned_notifications"])
        .args(["--count", &count.to_string(), "--timeout", "90"])
        .env("PYTHONWARNINGS", "ignore")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(
        line.trim(),
        "READY",
        "the notification listener did not start"
    );
    child
}

fn finish_listener(mut child: Child) -> Vec<Value> {
    let status = child.wait().unwrap();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "listener ({status}): {err}\n{out}");
    serde_json::from_str(out.lines().last().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_and_sigterm_grace_of_the_daemon() {
    let venv = venv::find();
    let prefix = nova_schema::tagged("nsrs_daemon_e2e");
    let dir = nova_schema::create(&venv, &prefix, &["cell1"])
        .await
        .expect("nova-manage schema");
    let placement = placement_server::url().await;
    let proxy = slow_placement(placement, Duration::from_secs(3)).await;
    let vhost = prefix.clone();
    let transport = own_vhost(&vhost);
    let base = nova_conf_on(&dir, &transport);
    let client_conf = dir.join("client.conf");
    std::fs::write(
        &client_conf,
        format!("{base}{}", placement_section(placement)),
    )
    .unwrap();
    let daemon_conf = dir.join("daemon.conf");
    std::fs::write(
        &daemon_conf,
        format!(
            "{}{}\n[oslo_messaging_notifications]\ndriver = messagingv2\n\
             [notifications]\nnotification_format = both\n",
            base.replace(
                "[DEFAULT]\n",
                &format!("[DEFAULT]\nhost = {SCHEDULER_HOST}\n")
            ),
            placement_section(&proxy.url)
        ),
    )
    .unwrap();
    seed_cloud(&venv, &client_conf, &dir, 3, 7);
    let cell = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_cell1")))
        .await
        .unwrap();
    cell.execute(AssertSqlSafe(
        "UPDATE services SET last_seen_up = UTC_TIMESTAMP() WHERE deleted = 0",
    ))
    .await
    .unwrap();

    let listener = start_listener(&venv, &client_conf, 8);
    let mut daemon = Daemon::start(&daemon_conf, dir.join("daemon.log"), &[]);
    daemon.wait_ready();
    let fanout_queue = daemon
        .log_text()
        .lines()
        .find(|l| l.contains("scheduler ready"))
        .and_then(|l| l.split("fanout_queue=").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .expect("fanout queue name in the log")
        .to_string();
    assert!(
        fanout_queue.starts_with("scheduler_fanout_"),
        "{fanout_queue}"
    );

    // 1. A call, and nova's notifications for what it sent.
    let (v2, c2) = (venv.clone(), client_conf.clone());
    let first = tokio::task::spawn_blocking(move || select(&v2, &c2))
        .await
        .unwrap();
    assert!(
        first["host"].as_str().is_some_and(|h| !h.is_empty()),
        "{first}"
    );

    // 2. A second call held in Placement; SIGTERM while it is in flight.
    let mut proxy = proxy;
    proxy.hold.store(true, Ordering::SeqCst);
    let (v2, c2) = (venv.clone(), client_conf.clone());
    let second = tokio::task::spawn_blocking(move || select(&v2, &c2));
    tokio::time::timeout(Duration::from_secs(30), proxy.seen.recv())
        .await
        .expect("the second call never reached Placement");
    let pid = daemon.child.id().to_string();
    let kill = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(kill.success());
    let second = tokio::time::timeout(Duration::from_secs(60), second)
        .await
        .expect("the in-flight call was not answered")
        .unwrap();
    assert!(
        second["host"].as_str().is_some_and(|h| !h.is_empty()),
        "{second}"
    );
    let deadline = Instant::now() + Duration::from_secs(45);
    let status = loop {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "the daemon did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let log = daemon.log_text();
    assert!(status.success(), "exit status {status}:\n{log}");
    let stopping = log
        .find("RPC server stopping")
        .expect("no 'RPC server stopping'");
    let stopped = log
        .find("RPC server stopped")
        .expect("no 'RPC server stopped'");
    assert!(stopping < stopped);

    // The private fanout queue is gone; nobody consumes the topic queue any more.
    let queues = rabbitmqctl(&["list_queues", "-q", "-p", &vhost, "name", "consumers"]);
    assert!(
        !queues
            .lines()
            .any(|l| l.split_whitespace().next() == Some(fanout_queue.as_str())),
        "fanout queue {fanout_queue} left behind:\n{queues}"
    );
    for line in queues.lines() {
        let mut parts = line.split_whitespace();
        if let (Some("scheduler"), Some(consumers)) = (parts.next(), parts.next()) {
            assert_eq!(consumers, "0", "{queues}");
        }
    }

    // Both calls' notifications, .end of the second included (flushed at shutdown).
    let got = tokio::task::spawn_blocking(move || finish_listener(listener))
        .await
        .unwrap();
    let cases = json!([
        {"spec": first["spec"], "context": first["context"], "instance_uuid": first["instance_uuid"]},
        {"spec": second["spec"], "context": second["context"], "instance_uuid": second["instance_uuid"]},
    ]);
    let expected: Vec<check::Comparable> =
        check::nova_expects(&venv.join("bin/python"), &cases, SCHEDULER_HOST)
            .iter()
            .flat_map(|per_case| per_case.as_array().unwrap().clone())
            .map(|n| check::nova_side(&n))
            .collect();
    assert_eq!(expected.len(), 8);
    check::assert_same_multiset(got.iter().map(check::listener_side).collect(), expected);

    cell.close().await;
    rabbitmqctl(&["delete_vhost", &vhost]);
}

// ---------------------------------------------------------------------------------------
// Hostile input and faults.

use amqp_client::{failure_of, TestClient, SECRET_TOKEN};
use claims_cloud::{uuid, Cloud, Exchange, Fault, FaultPlan, Gate};
use http_stub::Recorded;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::Map;
use std::sync::Mutex;

/// What the gate does to candidates questions and to claims, changed while a test runs.
#[derive(Default)]
struct Faults {
    candidates: Option<Fault>,
    claims: Option<Fault>,
    /// `GET /allocations/{consumer}` (a claim's read, and the read after a lost answer).
    consumer_reads: Option<Fault>,
    candidates_seen: usize,
    claims_seen: usize,
}

/// One test's cloud, gate, broker vhost and daemon configuration.
struct Rig {
    cloud: Cloud,
    gate: Gate,
    faults: Arc<Mutex<Faults>>,
    dir: std::path::PathBuf,
    conf: std::path::PathBuf,
    amqp: String,
    vhost: String,
    hosts: Vec<(String, String)>,
}

impl Rig {
    /// `hosts` hosts with room for 16 small instances each; `extra` is appended to
    /// the daemon's nova.conf.
    async fn new(name: &str, hosts: usize, extra: &str) -> Rig {
        let cloud = Cloud::new(name).await;
        let mut made = Vec::new();
        for i in 0..hosts {
            let host = format!("{name}-{i}");
            let rp = cloud.host(&host, (16, 1.0), 16384, 200).await;
            made.push((host, rp));
        }
        let faults: Arc<Mutex<Faults>> = Arc::default();
        let f = faults.clone();
        let plan: FaultPlan = Arc::new(move |r: &Recorded, _: &[Exchange]| {
            let mut f = f.lock().unwrap();
            if r.method == "GET" && r.path.starts_with("/allocation_candidates") {
                f.candidates_seen += 1;
                return f.candidates.unwrap_or(Fault::Pass);
            }
            if r.method == "PUT" && r.path.starts_with("/allocations/") {
                f.claims_seen += 1;
                return f.claims.unwrap_or(Fault::Pass);
            }
            if r.method == "GET" && r.path.starts_with("/allocations/") {
                return f.consumer_reads.unwrap_or(Fault::Pass);
            }
            Fault::Pass
        });
        let gate = Gate::start_faulty(name, plan).await;
        let vhost = nova_schema::tagged(&format!("nsrs_robust_{name}"));
        let _ = Command::new("rabbitmqctl")
            .args(["delete_vhost", &vhost])
            .output();
        let amqp = format!("amqp://guest:guest@127.0.0.1:5672/{vhost}");
        let transport = own_vhost(&vhost);
        let dir = std::env::temp_dir().join(format!("nsrs-robust-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("nova.conf");
        std::fs::write(
            &conf,
            format!(
                "[DEFAULT]\ntransport_url = {transport}\nhost = nsrs-robust-{name}\n\
                 service_down_time = 3600\ngraceful_shutdown_timeout = 3\n\
                 [database]\nconnection = {cell0}\n[api_database]\nconnection = {api}\n\
                 [scheduler]\nworkers = 1\ndiscover_hosts_in_cells_interval = -1\n\
                 [filter_scheduler]\nenabled_filters = ComputeFilter,ComputeCapabilitiesFilter,\
                 ImagePropertiesFilter,ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter,\
                 JsonFilter,SameHostFilter,DifferentHostFilter,SimpleCIDRAffinityFilter,\
                 AggregateInstanceExtraSpecsFilter,AggregateMultiTenancyIsolation,\
                 NUMATopologyFilter,PciPassthroughFilter,IsolatedHostsFilter,MetricsFilter\n\
                 [oslo_messaging_rabbit]\nkombu_missing_consumer_retry_timeout = 3\n\
                 [nova_scheduler_rs]\nstate_dir = {state}\n{extra}\n{placement}",
                cell0 = nova_schema::sqla_url(&cloud.cell0_db),
                api = nova_schema::sqla_url(&cloud.api_db),
                state = dir.join("state").display(),
                placement = placement_section(&gate.url),
            ),
        )
        .unwrap();
        Rig {
            cloud,
            gate,
            faults,
            dir,
            conf,
            amqp,
            vhost,
            hosts: made,
        }
    }

    fn start(&self, log: &str) -> Daemon {
        let daemon = Daemon::start(&self.conf, self.dir.join(log), &[]);
        daemon.wait_ready();
        daemon
    }

    fn set(&self, change: impl FnOnce(&mut Faults)) {
        change(&mut self.faults.lock().unwrap());
    }

    fn seen(&self) -> (usize, usize) {
        let f = self.faults.lock().unwrap();
        (f.candidates_seen, f.claims_seen)
    }

    /// A boot of `uuids` that any host of this rig takes.
    fn boot_args(&self, uuids: &[String], version: &str) -> Value {
        let mut args = json!({
            "spec_obj": self.cloud.spec((1, 512, 1), json!({}), uuids),
            "return_objects": true,
            "return_alternates": true,
        });
        if version != "4.3" {
            args["instance_uuids"] = json!(uuids);
        }
        args
    }

    /// A normal single-instance call: answered with a host, in how long. Its claim
    /// is deleted afterwards.
    async fn normal_call(&self, client: &mut TestClient) -> Duration {
        let uuids = vec![uuid()];
        let started = Instant::now();
        let reply = client
            .call(
                "nova",
                "scheduler",
                "select_destinations",
                self.boot_args(&uuids, "4.5"),
                "4.5",
            )
            .await;
        let took = started.elapsed();
        assert_eq!(reply.inner["failure"], Value::Null, "{}", reply.inner);
        self.cloud.admin.delete_allocations(&uuids[0]).await;
        took
    }

    async fn finish(self) {
        rabbitmqctl(&["delete_vhost", &self.vhost]);
        let _ = std::fs::remove_dir_all(&self.dir);
        self.cloud.cell.close().await;
    }
}

/// The messages of the `scheduler` queue: (ready, unacknowledged).
fn scheduler_queue(vhost: &str) -> (u64, u64) {
    let out = rabbitmqctl(&[
        "list_queues",
        "-q",
        "-p",
        vhost,
        "name",
        "messages_ready",
        "messages_unacknowledged",
    ]);
    out.lines()
        .filter_map(|l| {
            let mut p = l.split_whitespace();
            (p.next() == Some("scheduler")).then(|| {
                let n = |s: Option<&str>| s.and_then(|s| s.parse().ok()).unwrap_or(0);
                (n(p.next()), n(p.next()))
            })
        })
        .next()
        .unwrap_or((0, 0))
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

async fn wait_until(what: &str, secs: u64, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn kill_9(daemon: &mut Daemon) {
    daemon.child.kill().unwrap();
    daemon.child.wait().unwrap();
}

/// One generated message: its raw body and properties, and the `_msg_id` of the
/// reply it must get (`None`: no reply address survives in it).
struct Hostile {
    body: Vec<u8>,
    props: lapin::BasicProperties,
    expect_reply: Option<String>,
    kind: &'static str,
}

/// A value of a random kind, at the limits: numbers at the edges of JSON's and
/// Python's ranges, long and unusual strings, lists, objects, deep nesting.
fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    let strings = [
        "",
        " ",
        "None",
        "True",
        "0x10",
        "1e999",
        "-0",
        "../../etc",
        "\u{202e}evil",
        "\u{200b}",
        "e\u{301}",
        "🚀🔥",
        "\u{ffff}",
        "名前",
        "<script>",
        "%00",
        "\\",
        "\"",
        "a\nb",
    ];
    match rng.random_range(0..16u32) {
        0 => Value::Null,
        1 => json!(rng.random_bool(0.5)),
        2 => json!(i64::MAX),
        3 => json!(i64::MIN),
        4 => json!(u64::MAX),
        5 => json!(-1),
        6 => json!(1e308),
        7 => json!(-2.5e-308),
        8 => json!(strings[rng.random_range(0..strings.len())]),
        9 => json!("x".repeat(rng.random_range(1..20_000))),
        10 => json!("é🚀".repeat(rng.random_range(1..2_000))),
        11 if depth < 4 => Value::Array(
            (0..rng.random_range(0..20))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        12 if depth < 4 => Value::Object(
            (0..rng.random_range(0..10))
                .map(|i| {
                    (
                        format!("k{i}{}", strings[i % strings.len()]),
                        random_value(rng, depth + 1),
                    )
                })
                .collect(),
        ),
        13 => {
            let mut v = json!(1);
            for _ in 0..rng.random_range(20..200) {
                v = json!([v]);
            }
            v
        }
        14 => json!(Value::Array(
            (0..rng.random_range(1000..20_000))
                .map(|i| json!(i))
                .collect()
        )),
        _ => json!(rng.random_range(-1_000_000..1_000_000i64)),
    }
}

/// Replaces one randomly chosen node of `v` (any depth) by `with`.
fn replace_random_node(rng: &mut StdRng, v: &mut Value, with: Value) {
    let descend = match v {
        Value::Object(m) if !m.is_empty() => rng.random_bool(0.75),
        Value::Array(a) if !a.is_empty() => rng.random_bool(0.75),
        _ => false,
    };
    if !descend {
        *v = with;
        return;
    }
    match v {
        Value::Object(m) => {
            let k = m.keys().nth(rng.random_range(0..m.len())).cloned().unwrap();
            replace_random_node(rng, m.get_mut(&k).unwrap(), with);
        }
        Value::Array(a) => {
            let i = rng.random_range(0..a.len());
            replace_random_node(rng, &mut a[i], with);
        }
        _ => unreachable!(),
    }
}

fn deep(levels: usize) -> String {
    format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
}

/// The `n`-th hostile message, made from a valid call (`base`, whose `_msg_id` is
/// replaced) by one of the kinds below.
fn hostile(n: usize, rng: &mut StdRng, base: &Map<String, Value>) -> Hostile {
    let msg_id = format!("hostile{n:05}{}", uuid::Uuid::new_v4().simple());
    let mut m = base.clone();
    m.insert("_msg_id".into(), json!(msg_id));
    m.insert(
        "_unique_id".into(),
        json!(uuid::Uuid::new_v4().simple().to_string()),
    );
    let plain = TestClient::properties(false, Some("60000"));
    let envelope = |m: &Map<String, Value>| {
        nova_scheduler::rpc::envelope::encode_envelope(&Value::Object(m.clone()))
    };
    let reply = Some(msg_id.clone());
    let (body, props, expect_reply, kind): (Vec<u8>, _, Option<String>, &str) = match n % 14 {
        // The spec, one node replaced by anything.
        0..=2 => {
            let with = random_value(rng, 0);
            let spec = m.get_mut("args").unwrap().get_mut("spec_obj").unwrap();
            replace_random_node(rng, spec, with);
            (envelope(&m), plain, reply, "spec node")
        }
        // Scheduler hints of every shape (JsonFilter queries, CIDRs, host lists).
        3 => {
            let hints = match rng.random_range(0..6u32) {
                0 => json!({"query": [deep(rng.random_range(10..150))]}),
                1 => {
                    json!({"query": [format!("[\"and\", {}]", "[\">=\", \"$free_ram_mb\", 1], ".repeat(rng.random_range(1..500)).trim_end_matches(", "))]})
                }
                2 => {
                    json!({"query": [json!(["or", ["=", "$hypervisor_hostname", "🚀"], ["in", "$x"], ["not"], ["<", "$free_disk_mb", "x"]]).to_string()]})
                }
                3 => {
                    json!({"build_near_host_ip": [random_value(rng, 0)], "cidr": [random_value(rng, 0)]})
                }
                4 => {
                    json!({"same_host": [random_value(rng, 0)], "different_host": random_value(rng, 0)})
                }
                _ => {
                    json!({format!("h{}", "x".repeat(rng.random_range(1..300))): [random_value(rng, 0)]})
                }
            };
            m["args"]["spec_obj"]["nova_object.data"]["scheduler_hints"] = hints;
            (envelope(&m), plain, reply, "hints")
        }
        // Image properties and flavor extra specs with odd values.
        4 => {
            let key = [
                "hw_cpu_policy",
                "hw_numa_nodes",
                "hw_mem_page_size",
                "img_hv_requested_version",
                "hw_architecture",
                "hw_pci_numa_affinity_policy",
                "hw_cpu_max_sockets",
                "os_secure_boot",
            ][rng.random_range(0..8)];
            m["args"]["spec_obj"]["nova_object.data"]["image"]["nova_object.data"]["properties"]
                ["nova_object.data"][key] = random_value(rng, 0);
            let spec_key = [
                "hw:cpu_policy",
                "hw:numa_nodes",
                "hw:mem_page_size",
                "pci_passthrough:alias",
                "resources:VCPU",
                "trait:CUSTOM_X",
                "capabilities:cpu_info:arch",
                "aggregate_instance_extra_specs:x",
            ][rng.random_range(0..8)];
            let value = match random_value(rng, 0) {
                Value::String(s) => s,
                other => other.to_string(),
            };
            m["args"]["spec_obj"]["nova_object.data"]["flavor"]["nova_object.data"]
                ["extra_specs"][spec_key] = json!(value);
            (envelope(&m), plain, reply, "image and extra specs")
        }
        // Numbers at the limits where nova reads integers.
        5 => {
            let field = [
                "vcpus",
                "memory_mb",
                "root_gb",
                "ephemeral_gb",
                "swap",
                "id",
            ][rng.random_range(0..6)];
            let value = [
                json!(i64::MAX),
                json!(i64::MIN),
                json!(u64::MAX),
                json!(-1),
                json!(1e300),
                json!(0.5),
                json!("12"),
                json!(""),
            ][rng.random_range(0..8)]
            .clone();
            m["args"]["spec_obj"]["nova_object.data"]["flavor"]["nova_object.data"][field] = value;
            (envelope(&m), plain, reply, "flavor numbers")
        }
        // How many instances, and which.
        6 => {
            match rng.random_range(0..5u32) {
                0 => {
                    m["args"]["spec_obj"]["nova_object.data"]["num_instances"] =
                        json!(1_000_000_000u64)
                }
                1 => m["args"]["spec_obj"]["nova_object.data"]["num_instances"] = json!(i64::MIN),
                2 => {
                    m["args"]["instance_uuids"] = json!(["not-a-uuid", "../../resource_providers"])
                }
                3 => {
                    m["args"]["instance_uuids"] =
                        json!((0..5000).map(|_| uuid()).collect::<Vec<_>>())
                }
                _ => m["args"]["instance_uuids"] = random_value(rng, 0),
            }
            m.insert("version".into(), json!("4.5"));
            (envelope(&m), plain, reply, "instances")
        }
        // Object versions and names.
        7 => {
            let path = ["spec_obj", "flavor", "image"][rng.random_range(0..3)];
            let obj = match path {
                "spec_obj" => &mut m["args"]["spec_obj"],
                other => &mut m["args"]["spec_obj"]["nova_object.data"][other],
            };
            let field = [
                "nova_object.version",
                "nova_object.name",
                "nova_object.namespace",
                "nova_object.data",
            ][rng.random_range(0..4)];
            obj[field] = [
                json!("2.0"),
                json!("1.999"),
                json!("x"),
                Value::Null,
                json!({}),
                json!("Instance"),
            ][rng.random_range(0..6)]
            .clone();
            (envelope(&m), plain, reply, "object versions")
        }
        // The request context.
        8 => {
            let key = [
                "_context_request_id",
                "_context_roles",
                "_context_user_id",
                "_context_is_admin",
                "_context_global_request_id",
                "_context_service_catalog",
                "_context_timestamp",
            ][rng.random_range(0..7)];
            m.insert(key.into(), random_value(rng, 0));
            (envelope(&m), plain, reply, "context")
        }
        // Method, version, namespace, args.
        9 => {
            match rng.random_range(0..6u32) {
                0 => m.insert(
                    "method".into(),
                    json!(["_private", "nope", "", "__init__"][rng.random_range(0..4)]),
                ),
                1 => m.insert(
                    "version".into(),
                    json!(["5.0", "4.99", "x", "4", ""][rng.random_range(0..5)]),
                ),
                2 => m.insert("namespace".into(), json!("baseapi")),
                3 => m.insert("args".into(), random_value(rng, 0)),
                4 => m.insert("_timeout".into(), random_value(rng, 0)),
                _ => m.insert("method".into(), random_value(rng, 0)),
            };
            (envelope(&m), plain, reply, "dispatch")
        }
        // Envelopes that cannot be read, with the reply address still findable.
        10 => {
            let inner = Value::Object(m.clone()).to_string();
            let (body, kind) = match rng.random_range(0..5u32) {
                0 => (json!({"oslo.version": "3.0", "oslo.message": inner}).to_string(), "envelope version"),
                1 => (json!({"oslo.version": "2.0", "oslo.message": format!("{inner}}}")}).to_string(), "inner not JSON"),
                2 => (json!({"oslo.version": "2.0", "oslo.message": inner.replacen("{", &format!("{{\"deep\": {}, ", deep(400)), 1)}).to_string(), "depth 400"),
                3 => (json!({"oslo.version": "2.0", "oslo.message": inner.replacen("{", "{\"bad\": \"\\ud800\", ", 1)}).to_string(), "lone surrogate"),
                _ => (format!("{{\"oslo.version\": \"2.0\", \"oslo.message\": {}", serde_json::to_string(&inner).unwrap()), "outer truncated"),
            };
            (body.into_bytes(), plain, reply, kind)
        }
        // Sizes: over the bound, plain and compressed (a zlib bomb).
        11 => {
            m["args"]["spec_obj"]["nova_object.data"]["scheduler_hints"] =
                json!({"pad": ["p".repeat(3 * 1024 * 1024)]});
            if rng.random_bool(0.5) {
                (envelope(&m), plain, reply, "too large")
            } else {
                let body = nova_scheduler::rpc::envelope::compress_zlib(&envelope(&m));
                // The reply address comes after the padding: it cannot be found
                // in what the bound lets through, so no reply is expected.
                (
                    body,
                    TestClient::properties(true, Some("60000")),
                    None,
                    "zlib bomb",
                )
            }
        }
        // Bodies with no reply address at all, and wrong content types.
        12 => {
            let body: Vec<u8> = match rng.random_range(0..4u32) {
                0 => b"\xff\xfe not json".to_vec(),
                1 => b"[]".to_vec(),
                2 => Vec::new(),
                _ => (0..rng.random_range(1..4000))
                    .map(|_| rng.random::<u8>())
                    .collect(),
            };
            (body, plain, None, "garbage")
        }
        // Unicode everywhere it is a string.
        _ => {
            let weird = [
                "名前🚀",
                "\u{202e}\u{200b}",
                "e\u{301}\u{301}\u{301}",
                "\u{10ffff}",
            ][rng.random_range(0..4)];
            let data = &mut m["args"]["spec_obj"]["nova_object.data"];
            data["availability_zone"] = json!(weird);
            data["flavor"]["nova_object.data"]["name"] = json!(weird);
            data["image"]["nova_object.data"]["name"] = json!(weird);
            data["project_id"] = json!(weird);
            m.insert("_context_request_id".into(), json!(format!("req-{weird}")));
            (envelope(&m), plain, reply, "unicode")
        }
    };
    Hostile {
        body,
        props,
        expect_reply,
        kind,
    }
}

/// Over a thousand hostile messages, in batches, with one runtime thread: each that
/// names its reply queue gets a reply within the batch's bound, a normal call after
/// every batch is answered within a second, the process stays under 256 MiB, and
/// no log line carries the context's token. Before them, a request for 10⁹
/// instances without uuids (nova's loop would run that often) is refused at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_messages_are_answered_and_never_stall_the_daemon() {
    const MESSAGES: usize = 1050;
    const BATCH: usize = 75;
    const RSS_CEILING_KIB: u64 = 256 * 1024;
    let rig = Rig::new("hostile", 3, "").await;
    let mut daemon = rig.start("daemon.log");
    let mut client = TestClient::on(&rig.amqp).await;
    rig.normal_call(&mut client).await;

    let mut huge = rig.boot_args(&[uuid()], "4.3");
    huge["spec_obj"]["nova_object.data"]["num_instances"] = json!(1_000_000_000u64);
    let started = Instant::now();
    let reply = client
        .call("nova", "scheduler", "select_destinations", huge, "4.3")
        .await;
    let failure = failure_of(&reply);
    assert_eq!(failure["class"], "NoValidHost", "{failure}");
    assert!(
        failure["message"]
            .as_str()
            .unwrap()
            .contains("max_instances_per_request"),
        "{failure}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let normal = rig.normal_call(&mut client).await;
    assert!(
        normal < Duration::from_secs(1),
        "normal call after the huge one: {normal:?}"
    );

    let (req, _) = client.as_call(
        TestClient::request(
            "select_destinations",
            rig.boot_args(&[uuid()], "4.3"),
            Some("4.3"),
        ),
        json!(60),
    );
    let mut rng = StdRng::seed_from_u64(
        std::env::var("NSRS_HOSTILE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(27),
    );
    let mut answered = 0;
    let mut unanswerable = 0;
    let mut max_rss = 0;
    let mut slowest_normal = Duration::ZERO;
    let mut kinds: std::collections::BTreeMap<&str, usize> = Default::default();
    for batch in 0..MESSAGES.div_ceil(BATCH) {
        let mut waiting = std::collections::BTreeSet::new();
        for n in batch * BATCH..((batch + 1) * BATCH).min(MESSAGES) {
            let h = hostile(n, &mut rng, &req);
            *kinds.entry(h.kind).or_default() += 1;
            client
                .publish_raw("nova", "scheduler", &h.body, h.props)
                .await;
            match h.expect_reply {
                Some(id) => {
                    waiting.insert(id);
                }
                None => unanswerable += 1,
            }
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while !waiting.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(reply) = client.next_reply(left).await else {
                panic!(
                    "batch {batch}: no reply within 60 s for {} messages, e.g. {:?}\n{}",
                    waiting.len(),
                    waiting.iter().next(),
                    daemon
                        .log_text()
                        .lines()
                        .rev()
                        .take(30)
                        .collect::<Vec<_>>()
                        .join("\n")
                );
            };
            if reply.inner["ending"] == true {
                if let Some(id) = reply.inner["_msg_id"].as_str() {
                    if waiting.remove(id) {
                        answered += 1;
                    }
                }
            }
        }
        assert!(
            daemon.child.try_wait().unwrap().is_none(),
            "the daemon exited"
        );
        max_rss = max_rss.max(rss_kib(daemon.child.id()));
        assert!(
            max_rss < RSS_CEILING_KIB,
            "RSS {max_rss} KiB after batch {batch}"
        );
        let took = rig.normal_call(&mut client).await;
        slowest_normal = slowest_normal.max(took);
        assert!(
            took < Duration::from_secs(1),
            "normal call after batch {batch}: {took:?}"
        );
    }
    let log = daemon.log_text();
    assert!(
        !log.contains(SECRET_TOKEN),
        "the context's token is in the log"
    );
    assert!(
        log.lines().count() < 20 * MESSAGES,
        "{} log lines",
        log.lines().count()
    );
    eprintln!(
        "hostile messages: {MESSAGES} sent ({answered} answered, {unanswerable} without a reply \
         address), kinds {kinds:?}; max RSS {} MiB; slowest normal call {slowest_normal:?}",
        max_rss / 1024
    );
    kill_9(&mut daemon);
    rig.finish().await;
}

/// A call in flight when the daemon is killed (its candidates question hangs in the
/// gate) comes back after the restart and is handled again; the daemon is killed
/// with it in flight a second time. After that second death the record of requests
/// in flight says it was there at both, so it is answered with a failure and
/// acknowledged, not handled a third time: Placement is not asked again and the
/// queue is empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_at_two_crashes_is_failed_not_handled_again() {
    let rig = Rig::new("poison", 2, "").await;
    let mut daemon = rig.start("daemon.log");
    let mut client = TestClient::on(&rig.amqp).await;
    rig.set(|f| f.candidates = Some(Fault::Hang));
    let uuids = vec![uuid()];
    let (req, msg_id) = client.as_call(
        TestClient::request(
            "select_destinations",
            rig.boot_args(&uuids, "4.5"),
            Some("4.5"),
        ),
        json!(60),
    );
    client.publish("nova", "scheduler", &req).await;
    wait_until("the candidates question", 30, || rig.seen().0 == 1).await;
    kill_9(&mut daemon);
    assert_eq!(
        scheduler_queue(&rig.vhost),
        (1, 0),
        "the call is back in the queue"
    );

    let mut second = rig.start("daemon2.log");
    wait_until("the call handled again after one death", 30, || {
        rig.seen().0 == 2
    })
    .await;
    kill_9(&mut second);
    rig.set(|f| f.candidates = None);

    let restarted = rig.start("daemon3.log");
    let replies = client.replies_until_ending(&msg_id).await;
    let failure = failure_of(replies.last().unwrap());
    assert!(
        failure["message"]
            .as_str()
            .unwrap()
            .contains("stopped 2 time(s)"),
        "{failure}"
    );
    assert_eq!(rig.seen().0, 2, "the poison call was not handled again");
    wait_until("the queue to empty", 10, || {
        scheduler_queue(&rig.vhost) == (0, 0)
    })
    .await;
    assert_eq!(
        rig.cloud.admin.allocations(&uuids[0]).await["allocations"],
        json!({})
    );
    let log = restarted.log_text();
    assert_eq!(log.matches("max_message_crashes").count(), 1, "{log}");
    assert!(rig.normal_call(&mut client).await < Duration::from_secs(1));
    drop(restarted);
    rig.finish().await;
}

/// The final reply to each of `msg_ids`, whatever order they come in.
async fn final_replies(
    client: &mut TestClient,
    msg_ids: &[String],
) -> std::collections::HashMap<String, Value> {
    let mut done = std::collections::HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(120);
    while done.len() < msg_ids.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(reply) = client.next_reply(left).await else {
            panic!("{} of {} calls answered", done.len(), msg_ids.len());
        };
        let id = reply.inner["_msg_id"].as_str().unwrap().to_string();
        assert!(
            msg_ids.contains(&id),
            "a reply to no call of this test: {id}"
        );
        if reply.inner["ending"] == true {
            assert!(
                done.insert(id, reply.inner).is_none(),
                "a call answered twice"
            );
        }
    }
    done
}

/// kill -9 with ten 2-instance calls in flight, each with its first claim committed
/// in Placement and unanswered (the gate holds the claims' answers). After the
/// restart every call is handled again, as one death is not enough to call a
/// request poison: 10/10 are placed, and each instance is held by exactly the host
/// its answer names (the dead attempts' claims were replaced, none leaked, none
/// doubled).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_flight_at_one_crash_are_placed_after_the_restart() {
    const CALLS: usize = 10;
    let rig = Rig::new("crashretry", 4, "").await;
    let mut daemon = rig.start("daemon.log");
    let mut client = TestClient::on(&rig.amqp).await;
    rig.set(|f| f.claims = Some(Fault::HoldAnswer));
    let mut calls = Vec::new();
    for _ in 0..CALLS {
        let uuids = vec![uuid(), uuid()];
        let (req, msg_id) = client.as_call(
            TestClient::request(
                "select_destinations",
                rig.boot_args(&uuids, "4.5"),
                Some("4.5"),
            ),
            json!(120),
        );
        client.publish("nova", "scheduler", &req).await;
        calls.push((msg_id, uuids));
    }
    wait_until("a committed claim of every call", 60, || {
        let held: std::collections::HashSet<String> = rig
            .gate
            .puts()
            .into_iter()
            .filter(|(_, status)| *status == 0)
            .map(|(consumer, _)| consumer)
            .collect();
        calls.iter().all(|(_, uuids)| held.contains(&uuids[0]))
    })
    .await;
    kill_9(&mut daemon);
    for (_, uuids) in &calls {
        assert_eq!(
            rig.cloud.admin.providers_held(&uuids[0]).await.len(),
            1,
            "the dead attempt's claim was committed"
        );
    }
    rig.set(|f| f.claims = None);

    let restarted = rig.start("daemon2.log");
    let msg_ids: Vec<String> = calls.iter().map(|(id, _)| id.clone()).collect();
    let replies = final_replies(&mut client, &msg_ids).await;
    for (msg_id, uuids) in &calls {
        let inner = &replies[msg_id];
        assert_eq!(inner["failure"], Value::Null, "{inner}");
        let result = inner["result"].as_array().unwrap();
        assert_eq!(result.len(), uuids.len(), "{inner}");
        for (uuid, alternates) in uuids.iter().zip(result) {
            let chosen = alternates[0]["nova_object.data"]["compute_node_uuid"]
                .as_str()
                .unwrap()
                .to_string();
            assert_eq!(
                rig.cloud.admin.providers_held(uuid).await,
                vec![chosen],
                "{uuid} is held by the host its answer names, and only by it"
            );
        }
    }
    let log = restarted.log_text();
    assert!(
        !log.contains("max_message_crashes"),
        "no call was poison: {log}"
    );
    wait_until("the queue to empty", 10, || {
        scheduler_queue(&rig.vhost) == (0, 0)
    })
    .await;
    for (_, uuids) in &calls {
        for uuid in uuids {
            rig.cloud.admin.delete_allocations(uuid).await;
        }
    }
    drop(restarted);
    rig.finish().await;
}

/// kill -9 after Placement committed a claim and before the reply went out (the
/// gate holds the claim's answer); the claimed host is disabled before the restart.
/// By default (one death is below `max_message_crashes`) the call is decided again
/// onto the other host, and that claim replaces the first instead of adding to it.
/// With `max_message_crashes = 1` the call is answered with a failure, and the claim
/// its dead attempt committed is taken back. Either way the instance ends on at most
/// one host.
async fn kill_with_a_committed_claim(name: &str, guard: &str) {
    let rig = Rig::new(name, 2, guard).await;
    let mut daemon = rig.start("daemon.log");
    let mut client = TestClient::on(&rig.amqp).await;
    rig.set(|f| f.claims = Some(Fault::HoldAnswer));
    let uuids = vec![uuid()];
    let (req, msg_id) = client.as_call(
        TestClient::request(
            "select_destinations",
            rig.boot_args(&uuids, "4.5"),
            Some("4.5"),
        ),
        json!(60),
    );
    client.publish("nova", "scheduler", &req).await;
    wait_until("the committed claim", 30, || {
        rig.gate
            .puts()
            .iter()
            .any(|(c, s)| c == &uuids[0] && *s == 0)
    })
    .await;
    kill_9(&mut daemon);
    let first = rig.cloud.admin.providers_held(&uuids[0]).await;
    assert_eq!(first.len(), 1, "the claim was committed: {first:?}");
    let first_host = &rig.hosts.iter().find(|(_, rp)| rp == &first[0]).unwrap().0;
    sqlx::query("UPDATE services SET disabled = 1 WHERE host = ?")
        .bind(first_host)
        .execute(&rig.cloud.cell)
        .await
        .unwrap();
    rig.set(|f| f.claims = None);

    let restarted = rig.start("daemon2.log");
    let replies = client.replies_until_ending(&msg_id).await;
    let last = replies.last().unwrap();
    if guard == "max_message_crashes = 1" {
        let failure = failure_of(last);
        assert!(
            failure["message"]
                .as_str()
                .unwrap()
                .contains("stopped 1 time(s)"),
            "{failure}"
        );
        assert_eq!(
            rig.cloud.admin.allocations(&uuids[0]).await["allocations"],
            json!({}),
            "the dead attempt's claim was taken back"
        );
    } else {
        assert_eq!(last.inner["failure"], Value::Null, "{}", last.inner);
        let chosen = &last.inner["result"][0][0]["nova_object.data"]["compute_node_uuid"];
        assert_ne!(chosen, &json!(first[0]));
        assert_eq!(
            rig.cloud.admin.providers_held(&uuids[0]).await,
            vec![chosen.as_str().unwrap().to_string()],
            "one host holds the instance"
        );
        assert!(restarted.log_text().contains("replaced, not kept"));
        rig.cloud.admin.delete_allocations(&uuids[0]).await;
    }
    drop(restarted);
    rig.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_call_replaces_the_claim_its_first_delivery_committed() {
    kill_with_a_committed_claim("killclaim", "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poisoned_call_takes_back_the_claim_its_dead_attempt_committed() {
    kill_with_a_committed_claim("killpoison", "max_message_crashes = 1").await;
}

/// The caller's reply queue is deleted while its call is handled (a conductor
/// restarted): the daemon retries the reply for kombu_missing_consumer_retry_timeout
/// and logs it once when it starts and once when it gives up, never the body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_to_a_vanished_queue_is_logged_once() {
    let rig = Rig::new("goneq", 1, "").await;
    let daemon = rig.start("daemon.log");
    let client = TestClient::on(&rig.amqp).await;
    rig.set(|f| f.candidates = Some(Fault::Delay(Duration::from_secs(2))));
    let uuids = vec![uuid()];
    let (req, _) = client.as_call(
        TestClient::request(
            "select_destinations",
            rig.boot_args(&uuids, "4.5"),
            Some("4.5"),
        ),
        json!(60),
    );
    client.publish("nova", "scheduler", &req).await;
    wait_until("the candidates question", 30, || rig.seen().0 == 1).await;
    client.delete_reply_queue().await;
    wait_until("the reply to be abandoned", 30, || {
        daemon.log_text().contains("Abandoning")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let log = daemon.log_text();
    assert_eq!(log.matches("reply queue is missing").count(), 1, "{log}");
    assert_eq!(log.matches("Abandoning").count(), 1, "{log}");
    assert!(!log.contains("Server returned us a message"), "{log}");
    assert!(!log.contains("oslo.message"), "a body was logged:\n{log}");
    assert!(log.len() < 64 * 1024, "{} bytes of log", log.len());
    rig.cloud.admin.delete_allocations(&uuids[0]).await;
    drop(daemon);
    rig.finish().await;
}

/// SIGTERM while a call hangs in Placement: the daemon stops consuming, waits
/// graceful_shutdown_timeout (3 s here) for the call, then exits 0 without answering
/// it; the broker holds the call again for the next daemon.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_is_honoured_within_graceful_shutdown_timeout() {
    let rig = Rig::new("sigterm", 1, "").await;
    let mut daemon = rig.start("daemon.log");
    let client = TestClient::on(&rig.amqp).await;
    rig.set(|f| f.candidates = Some(Fault::Hang));
    let (req, _) = client.as_call(
        TestClient::request(
            "select_destinations",
            rig.boot_args(&[uuid()], "4.5"),
            Some("4.5"),
        ),
        json!(60),
    );
    client.publish("nova", "scheduler", &req).await;
    wait_until("the candidates question", 30, || rig.seen().0 == 1).await;
    let pid = daemon.child.id().to_string();
    let signalled = Instant::now();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = loop {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            signalled.elapsed() < Duration::from_secs(15),
            "still running {:?} after SIGTERM:\n{}",
            signalled.elapsed(),
            daemon.log_text()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let took = signalled.elapsed();
    assert!(status.success(), "{status}");
    assert!(
        took >= Duration::from_secs(3),
        "exited before the grace period: {took:?}"
    );
    assert!(daemon
        .log_text()
        .contains("graceful_shutdown_timeout is over"));
    wait_until("the call to be back in the queue", 10, || {
        scheduler_queue(&rig.vhost) == (1, 0)
    })
    .await;
    eprintln!("SIGTERM with a hung call: exited after {took:?}");
    rig.finish().await;
}

/// One call of the soak: what was asked, and how it ended.
struct SoakCall {
    uuids: Vec<String>,
    placed: Option<Vec<String>>,
}

/// Mixed calls from four callers for `NSRS_SOAK_SECONDS` (60 by default; the
/// documented long run is 1,800), while the gate cycles through Placement faults
/// every few seconds: a slow candidates question, claims whose answers are lost
/// or replaced by 502, claims that hang past `[placement] timeout`, claims whose
/// outcome cannot be read back, candidates refused with 503. Then a kill -9 with
/// calls in flight and a restart. Every call gets its final reply (0 lost);
/// Placement holds, for every instance, exactly the host its reply named or
/// nothing (0 leaked); memory is flat (the largest RSS of the last quarter is
/// within 16 MiB of the largest of the second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_mixed_calls_with_faults_loses_nothing_and_leaks_nothing() {
    let seconds: u64 = std::env::var("NSRS_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let rig = Arc::new(Rig::new("soak", 4, "[placement]\ntimeout = 2\n").await);
    let mut daemon = rig.start("daemon.log");
    let phases: [(&str, Faults); 7] = [
        ("none", Faults::default()),
        (
            "slow candidates",
            Faults {
                candidates: Some(Fault::Delay(Duration::from_millis(400))),
                ..Default::default()
            },
        ),
        (
            "claim answers lost",
            Faults {
                claims: Some(Fault::DropAnswer),
                ..Default::default()
            },
        ),
        (
            "claim answers 502",
            Faults {
                claims: Some(Fault::ReplaceAnswer(502)),
                ..Default::default()
            },
        ),
        (
            "claims hang",
            Faults {
                claims: Some(Fault::Hang),
                ..Default::default()
            },
        ),
        (
            "outcome unreadable",
            Faults {
                claims: Some(Fault::DropAnswer),
                consumer_reads: Some(Fault::Refuse(503)),
                ..Default::default()
            },
        ),
        (
            "candidates refused",
            Faults {
                candidates: Some(Fault::Refuse(503)),
                ..Default::default()
            },
        ),
    ];
    let period = Duration::from_secs((seconds / 14).clamp(4, 120));
    let stop = Arc::new(AtomicBool::new(false));
    let mut callers = Vec::new();
    for caller in 0..4u64 {
        let (rig, stop) = (rig.clone(), stop.clone());
        callers.push(tokio::spawn(async move {
            let mut client = TestClient::on(&rig.amqp).await;
            let mut calls = Vec::new();
            let mut n = 0u64;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let count = if (n + caller).is_multiple_of(5) { 3 } else { 1 };
                let uuids: Vec<String> = (0..count).map(|_| uuid()).collect();
                let mut args = rig.boot_args(&uuids, "4.5");
                if n.is_multiple_of(7) {
                    // Nothing fits: NoValidHost.
                    args["spec_obj"]["nova_object.data"]["flavor"]["nova_object.data"]["vcpus"] =
                        json!(64);
                }
                let (req, msg_id) = client.as_call(
                    TestClient::request("select_destinations", args, Some("4.5")),
                    json!(60),
                );
                client.publish("nova", "scheduler", &req).await;
                let replies = client.replies_until_ending(&msg_id).await;
                let last = replies.last().unwrap();
                let placed = (last.inner["failure"] == Value::Null).then(|| {
                    last.inner["result"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|l| {
                            l[0]["nova_object.data"]["compute_node_uuid"]
                                .as_str()
                                .unwrap()
                                .to_string()
                        })
                        .collect::<Vec<_>>()
                });
                let call = SoakCall { uuids, placed };
                check_and_free(&rig, &call).await;
                calls.push(call);
            }
            calls
        }));
    }
    let started = Instant::now();
    let mut rss = Vec::new();
    let mut phase = 0;
    while started.elapsed() < Duration::from_secs(seconds) {
        let (name, faults) = &phases[phase % phases.len()];
        rig.set(|f| {
            f.candidates = faults.candidates;
            f.claims = faults.claims;
            f.consumer_reads = faults.consumer_reads;
        });
        eprintln!("soak {:>5.0?}: {name}", started.elapsed());
        let until = Instant::now() + period;
        while Instant::now() < until && started.elapsed() < Duration::from_secs(seconds) {
            assert!(
                daemon.child.try_wait().unwrap().is_none(),
                "the daemon exited"
            );
            rss.push(rss_kib(daemon.child.id()));
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        phase += 1;
    }
    // A kill -9 with calls in flight: they come back to the restarted daemon, which
    // handles them again (one death is below max_message_crashes) rather than losing
    // them, replacing whatever their dead attempts claimed.
    rig.set(|f| {
        *f = Faults {
            candidates: Some(Fault::Delay(Duration::from_secs(1))),
            ..Default::default()
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    kill_9(&mut daemon);
    rig.set(|f| *f = Faults::default());
    let restarted = rig.start("daemon2.log");
    stop.store(true, Ordering::SeqCst);
    let mut calls = Vec::new();
    for c in callers {
        calls.extend(
            tokio::time::timeout(Duration::from_secs(120), c)
                .await
                .expect("a call was lost")
                .unwrap(),
        );
    }
    let placed = calls.iter().filter(|c| c.placed.is_some()).count();
    for (_, rp) in &rig.hosts {
        assert_eq!(
            rig.cloud.admin.usages(rp).await,
            json!({"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0}),
            "a claim was left on {rp}"
        );
    }
    let quarter = rss.len() / 4;
    let second = rss[quarter..2 * quarter].iter().max().copied().unwrap_or(0);
    let last = rss[3 * quarter..].iter().max().copied().unwrap_or(0);
    eprintln!(
        "soak: {seconds} s, {} calls ({placed} placed), {phase} fault phases; RSS max {} MiB \
         (second quarter {} MiB, last quarter {} MiB)",
        calls.len(),
        rss.iter().max().unwrap_or(&0) / 1024,
        second / 1024,
        last / 1024
    );
    assert!(
        calls.len() > 10 && placed > 0,
        "{} calls, {placed} placed",
        calls.len()
    );
    assert!(
        last <= second + 16 * 1024,
        "RSS grew: {second} KiB then {last} KiB"
    );
    drop(restarted);
    match Arc::try_unwrap(rig) {
        Ok(rig) => rig.finish().await,
        Err(_) => panic!("the rig is still shared"),
    }
}

/// A call's instances hold what its reply says: the named host each, or nothing.
/// The claims are then deleted so the cloud never fills up.
async fn check_and_free(rig: &Rig, call: &SoakCall) {
    match &call.placed {
        Some(hosts) => {
            for (uuid, rp) in call.uuids.iter().zip(hosts) {
                assert_eq!(
                    rig.cloud.admin.providers_held(uuid).await,
                    vec![rp.clone()],
                    "{uuid} must hold its host only"
                );
                rig.cloud.admin.delete_allocations(uuid).await;
            }
        }
        None => {
            for uuid in &call.uuids {
                assert_eq!(
                    rig.cloud.admin.allocations(uuid).await["allocations"],
                    json!({}),
                    "{uuid} failed but holds allocations"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// The HTTP listener: /metrics, /healthz, /readyz

/// Reads an OpenMetrics exposition with prometheus_client's own (strict) parser and
/// prints `{"name{label="v",...}": value}` for every sample.
const PARSE_METRICS: &str = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = {}
for family in text_string_to_metric_families(sys.stdin.read()):
    for s in family.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        out[f"{s.name}{{{labels}}}"] = s.value
print(json.dumps(out))
"#;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let resp = reqwest::get(format!("http://127.0.0.1:{port}{path}"))
        .await
        .ok()?;
    let status = resp.status().as_u16();
    Some((status, resp.text().await.ok()?))
}

/// The samples of `/metrics`, as the Prometheus client library parses them.
async fn scrape(venv: &Path, port: u16) -> serde_json::Map<String, Value> {
    let (status, text) = http_get(port, "/metrics").await.expect("/metrics answers");
    assert_eq!(status, 200, "{text}");
    let mut child = Command::new(venv.join("bin/python"))
        .args(["-c", PARSE_METRICS])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python");
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the exposition does not parse: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    match serde_json::from_slice(&out.stdout).unwrap() {
        Value::Object(samples) => samples,
        other => panic!("{other}"),
    }
}

fn sample(samples: &serde_json::Map<String, Value>, key: &str) -> f64 {
    samples.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// One placed call and one NoValidHost move the counters and histograms by exactly
/// that; the exposition parses with Prometheus' own parser; the daemon is live and
/// ready. A daemon whose broker cannot be reached is live but not ready, and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_health_and_readiness_over_http() {
    let venv = venv::find();
    let port = free_port();
    let rig = Rig::new("obs", 2, &format!("http_listen = 127.0.0.1:{port}")).await;
    let daemon = rig.start("daemon.log");
    let mut client = TestClient::on(&rig.amqp).await;
    let (status, body) = http_get(port, "/healthz").await.expect("/healthz");
    assert_eq!(status, 200, "{body}");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) = http_get(port, "/readyz").await.expect("/readyz");
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "never ready: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let before = scrape(&venv, port).await;
    rig.normal_call(&mut client).await;
    let uuids = vec![uuid()];
    // More VCPUs than any host has: Placement returns no candidates.
    let too_big = json!({
        "spec_obj": rig.cloud.spec((64, 512, 1), json!({}), &uuids),
        "instance_uuids": uuids,
        "return_objects": true,
        "return_alternates": true,
    });
    let reply = client
        .call("nova", "scheduler", "select_destinations", too_big, "4.5")
        .await;
    let failure = reply.inner["failure"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(failure.contains("NoValidHost"), "{}", reply.inner);
    let after = scrape(&venv, port).await;
    let moved = |key: &str| sample(&after, key) - sample(&before, key);

    let calls = "nova_scheduler_select_destinations_total";
    assert_eq!(
        moved(&format!("{calls}{{result=\"placed\",version=\"4.5\"}}")),
        1.0
    );
    assert_eq!(
        moved(&format!(
            "{calls}{{result=\"no_valid_host\",version=\"4.5\"}}"
        )),
        1.0
    );
    assert_eq!(
        moved(&format!("{calls}{{result=\"error\",version=\"4.5\"}}")),
        0.0
    );
    assert_eq!(
        moved("nova_scheduler_select_destinations_duration_seconds_count{}"),
        2.0
    );
    // Only the placed call went through every phase.
    for phase in [
        "decode",
        "candidates",
        "host_states",
        "filter_weigh",
        "claims",
        "encode",
    ] {
        let key = format!(
            "nova_scheduler_select_destinations_phase_duration_seconds_count{{phase=\"{phase}\"}}"
        );
        assert_eq!(moved(&key), 1.0, "{key}");
    }
    assert_eq!(
        moved("nova_scheduler_claims_total{mode=\"per_instance\",result=\"claimed\"}"),
        1.0
    );
    assert_eq!(
        moved(
            "nova_scheduler_placement_requests_total{method=\"GET\",path=\"/allocation_candidates\",status=\"200\"}"
        ),
        2.0
    );
    assert_eq!(
        moved("nova_scheduler_allocation_candidates_questions_total{reason=\"no_index\",source=\"placement\"}"),
        2.0
    );
    assert_eq!(
        moved("nova_scheduler_filter_hosts_in_total{filter=\"ComputeFilter\"}"),
        2.0,
        "the placed call's two candidates entered ComputeFilter"
    );
    assert_eq!(sample(&after, "nova_scheduler_rpc_consuming{}"), 1.0);
    assert!(
        sample(
            &after,
            "nova_scheduler_host_state_cache_last_pass_timestamp_seconds{}"
        ) > 0.0
    );
    let build = after
        .keys()
        .find(|k| k.starts_with("nova_scheduler_build_info{"))
        .expect("build info");
    assert!(build.contains("nova=\"34\""), "{build}");
    let (status, _) = http_get(port, "/nope").await.unwrap();
    assert_eq!(status, 404);
    drop(daemon);

    // The same daemon configuration with a broker port nobody listens on.
    let dead_port = free_port();
    let port = free_port();
    let conf = std::fs::read_to_string(&rig.conf).unwrap();
    let conf = conf
        .lines()
        .map(|l| {
            if l.starts_with("transport_url") {
                format!("transport_url = rabbit://guest:guest@127.0.0.1:{dead_port}/")
            } else if l.starts_with("http_listen") {
                format!("http_listen = 127.0.0.1:{port}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let dead_conf = rig.dir.join("nova-dead-broker.conf");
    std::fs::write(&dead_conf, conf).unwrap();
    let daemon = Daemon::start(&dead_conf, rig.dir.join("dead-broker.log"), &[]);
    let mut live = None;
    for _ in 0..100 {
        if let Some(answer) = http_get(port, "/healthz").await {
            live = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, body) = live.unwrap_or_else(|| panic!("no /healthz:\n{}", daemon.log_text()));
    assert_eq!(status, 200, "{body}");
    let (status, body) = http_get(port, "/readyz").await.unwrap();
    assert_eq!(status, 503, "{body}");
    let reason: Value = serde_json::from_str(&body).unwrap();
    assert!(
        reason["reasons"].to_string().contains("not consuming"),
        "{body}"
    );
    drop(daemon);
    rig.finish().await;
}

/// The daemon's JSON log (oslo.log's `--log-file PATH --use-json`) and SIGHUP's
/// `debug`: Placement is unreachable and there is no compute host, so the calls
/// fail, which is all this needs (RabbitMQ and the nova schema only).
struct LogRig {
    /// The nova databases' names: `{prefix}_api`, `{prefix}_cell0`, `{prefix}_cell1`.
    prefix: String,
    dir: std::path::PathBuf,
    conf: std::path::PathBuf,
    vhost: String,
    amqp: String,
    text: String,
}

impl LogRig {
    async fn new(name: &str) -> LogRig {
        let venv = venv::find();
        let prefix = nova_schema::tagged(&format!("nsrs_log_{name}"));
        nova_schema::create_from_template(&venv, &prefix, &["cell1"])
            .await
            .unwrap_or_else(|e| panic!("nova schema: {e}"));
        let vhost = nova_schema::tagged(&format!("nsrs_log_{name}"));
        let _ = Command::new("rabbitmqctl")
            .args(["delete_vhost", &vhost])
            .output();
        let transport = own_vhost(&vhost);
        let amqp = format!("amqp://guest:guest@127.0.0.1:5672/{vhost}");
        let dir = std::env::temp_dir().join(format!("nsrs-log-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let text = format!(
            "[DEFAULT]\ntransport_url = {transport}\nhost = nsrs-log-{name}\n\
             report_interval = 1\ngraceful_shutdown_timeout = 1\ndebug = false\n\
             [database]\nconnection = {cell0}\n[api_database]\nconnection = {api}\n\
             [scheduler]\nworkers = 1\ndiscover_hosts_in_cells_interval = -1\n\
             [nova_scheduler_rs]\nstate_dir = {state}\n\
             [placement]\nauth_type = admin_token\ntoken = admin\n\
             endpoint = http://127.0.0.1:9/\nendpoint_override = http://127.0.0.1:9/\n",
            cell0 = nova_schema::sqla_url(&format!("{prefix}_cell0")),
            api = nova_schema::sqla_url(&format!("{prefix}_api")),
            state = dir.join("state").display(),
        );
        let conf = dir.join("nova.conf");
        std::fs::write(&conf, &text).unwrap();
        LogRig {
            prefix,
            dir,
            conf,
            vhost,
            amqp,
            text,
        }
    }

    fn set_debug(&self, debug: bool) {
        let text = self
            .text
            .replace("debug = false", &format!("debug = {debug}"));
        std::fs::write(&self.conf, text).unwrap();
    }

    /// The daemon with `args` after `--config-file`; its stderr and stdout go to
    /// `stderr.log`; [`Daemon::log`] is `log` (what `wait_ready` reads).
    fn start(&self, args: &[&str], log: &Path) -> Daemon {
        let out = std::fs::File::create(self.dir.join("stderr.log")).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_nova-scheduler-rs"))
            .arg("--config-file")
            .arg(&self.conf)
            .args(args)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start the daemon");
        let daemon = Daemon {
            child,
            log: log.to_path_buf(),
        };
        daemon.wait_ready();
        daemon
    }

    /// A select_destinations call (request id `req-test-1234`); its reply.
    async fn call(&self, client: &mut TestClient) -> amqp_client::Reply {
        let uuids = vec![uuid()];
        let spec = claims_cloud::envelope(
            "RequestSpec",
            "1.14",
            json!({
                "instance_uuid": uuids[0], "num_instances": 1,
                "project_id": "p1", "user_id": "u1", "availability_zone": null,
                "is_bfv": false,
                "flavor": claims_cloud::envelope("Flavor", "1.2", json!({
                    "id": 7, "flavorid": "f7", "name": "m1.test", "vcpus": 1,
                    "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0, "swap": 0,
                    "extra_specs": {},
                })),
                "image": claims_cloud::envelope("ImageMeta", "1.8", json!({
                    "name": "cirros",
                    "properties": claims_cloud::envelope("ImageMetaProps", "1.44", json!({})),
                })),
            }),
        );
        let args = json!({
            "spec_obj": spec, "instance_uuids": uuids,
            "return_objects": true, "return_alternates": true,
        });
        client
            .call("nova", "scheduler", "select_destinations", args, "4.5")
            .await
    }

    fn hup(daemon: &Daemon) {
        assert!(Command::new("kill")
            .args(["-HUP", &daemon.child.id().to_string()])
            .status()
            .unwrap()
            .success());
    }

    fn finish(self) {
        rabbitmqctl(&["delete_vhost", &self.vhost]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The JSON lines of a log file, each checked to be an object with oslo's keys.
fn json_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}\n{text}"));
            for key in ["levelname", "name", "message", "asctime", "process"] {
                assert!(v.get(key).is_some(), "no {key:?} in {line}");
            }
            v
        })
        .collect()
}

/// `--log-file PATH --use-json`: every line of the file is a JSON object with
/// oslo's keys, the call's lines carry its request id in `context`, and nothing
/// goes to stderr. `debug = true` written to the file and a SIGHUP turn debug lines
/// on without a restart (the heartbeat's, every second here); `debug = false` and a
/// second SIGHUP turn them off again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oslo_log_json_file_and_sighup_debug_without_a_restart() {
    let rig = LogRig::new("json").await;
    let log = rig.dir.join("scheduler.json.log");
    let mut daemon = rig.start(&["--log-file", &log.to_string_lossy(), "--use-json"], &log);
    let mut client = TestClient::on(&rig.amqp).await;
    let reply = rig.call(&mut client).await;
    assert_ne!(
        reply.inner["failure"],
        Value::Null,
        "Placement is unreachable"
    );
    let lines = json_lines(&log);
    let of_call: Vec<&Value> = lines
        .iter()
        .filter(|l| l["context"]["request_id"] == "req-test-1234")
        .collect();
    assert!(
        of_call.iter().any(|l| l["message"]
            .as_str()
            .unwrap()
            .contains("No valid host was found")),
        "{lines:#?}"
    );
    assert!(of_call
        .iter()
        .all(|l| l["extra"]["method"] == "select_destinations"));
    assert!(lines.iter().any(|l| l["levelname"] == "INFO"));
    assert!(
        !lines.iter().any(|l| l["levelname"] == "DEBUG"),
        "debug = false: {lines:#?}"
    );

    let heartbeats_after = |from: usize| {
        json_lines(&log)[from..]
            .iter()
            .filter(|l| l["levelname"] == "DEBUG" && l["message"] == "service heartbeat")
            .count()
    };
    rig.set_debug(true);
    LogRig::hup(&daemon);
    wait_until("debug lines after SIGHUP", 15, || heartbeats_after(0) >= 2).await;
    let reloaded = json_lines(&log)
        .iter()
        .filter(|l| {
            l["message"]
                .as_str()
                .unwrap()
                .starts_with("SIGHUP: log levels reloaded")
        })
        .count();
    assert_eq!(reloaded, 1);

    rig.set_debug(false);
    LogRig::hup(&daemon);
    wait_until("the second reload", 15, || {
        json_lines(&log)
            .iter()
            .filter(|l| {
                l["message"]
                    .as_str()
                    .unwrap()
                    .starts_with("SIGHUP: log levels reloaded")
            })
            .count()
            == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mark = json_lines(&log).len();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(
        heartbeats_after(mark),
        0,
        "debug = false again after SIGHUP"
    );
    assert!(
        daemon.child.try_wait().unwrap().is_none(),
        "the same process throughout"
    );
    let stderr = std::fs::read_to_string(rig.dir.join("stderr.log")).unwrap();
    assert!(stderr.trim().is_empty(), "lines went to stderr:\n{stderr}");
    json_lines(&log);
    drop(daemon);
    rig.finish();
}

/// The release followed live, in one process: started before any nova service
/// (`nova_release = auto`), the daemon schedules as nova 34 with its row at 74; a
/// 2024.1 conductor registering makes it schedule as nova 29 (the pipeline without
/// ImagePropertiesWeigher) with its row at 67, within a report interval; the conductor
/// upgraded (its row at 74) and a SIGHUP make it schedule as nova 34 again, row 74.
/// A call is answered after each switch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_release_is_followed_live_from_the_first_rows_and_on_sighup() {
    let rig = LogRig::new("release").await;
    let main = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{}_cell0", rig.prefix)))
        .await
        .expect("main database");
    main.execute("DELETE FROM services").await.expect("no rows");
    let log = rig.dir.join("scheduler.json.log");
    let daemon = rig.start(&["--log-file", &log.to_string_lossy(), "--use-json"], &log);
    let row_version = || async {
        sqlx::query_scalar::<_, i32>(
            "SELECT version FROM services WHERE `binary` = 'nova-scheduler' AND deleted = 0",
        )
        .fetch_one(&main)
        .await
        .expect("our row")
    };
    assert_eq!(row_version().await, 74, "no nova service row: nova 34's");
    let mut client = TestClient::on(&rig.amqp).await;

    main.execute(
        "INSERT INTO services (created_at, host, `binary`, topic, report_count, disabled, \
         deleted, uuid, version, forced_down) VALUES (UTC_TIMESTAMP(), 'ctl-1', \
         'nova-conductor', 'conductor', 0, 0, 0, UUID(), 67, 0)",
    )
    .await
    .expect("a 2024.1 conductor");
    let weighers = switched_release(
        &log,
        "the first nova service rows appeared",
        "nova 29 (2024.1)",
        "nova 34 (2026.2)",
    )
    .await;
    assert!(!weighers.contains("ImagePropertiesWeigher") && weighers.contains("RAMWeigher"));
    line_once(
        &log,
        "the first nova service rows appeared: nova-scheduler service row version 67",
    )
    .await;
    assert_eq!(row_version().await, 67);
    assert_eq!(
        failure_of(&rig.call(&mut client).await)["class"],
        "NoValidHost",
        "answered as nova 29"
    );

    main.execute("UPDATE services SET version = 74 WHERE `binary` = 'nova-conductor'")
        .await
        .expect("the conductor upgraded");
    LogRig::hup(&daemon);
    let weighers = switched_release(&log, "SIGHUP", "nova 34 (2026.2)", "nova 29 (2024.1)").await;
    assert!(weighers.contains("ImagePropertiesWeigher"), "{weighers}");
    line_once(&log, "SIGHUP: nova-scheduler service row version 74").await;
    assert_eq!(row_version().await, 74);
    assert_eq!(
        failure_of(&rig.call(&mut client).await)["class"],
        "NoValidHost",
        "answered as nova 34"
    );
    // A second SIGHUP with nothing changed says so and changes nothing.
    LogRig::hup(&daemon);
    line_once(&log, "SIGHUP: still scheduling as nova 34 (2026.2)").await;
    assert_eq!(
        lines_starting(&log, "SIGHUP: nova-scheduler service row version").len(),
        1
    );
    drop(daemon);
    rig.finish();
}

/// The JSON log lines whose message starts with `start`.
fn lines_starting(log: &Path, start: &str) -> Vec<Value> {
    json_lines(log)
        .into_iter()
        .filter(|l| l["message"].as_str().unwrap().starts_with(start))
        .collect()
}

/// The first JSON log line starting with `start`, waited for (15 s).
async fn line_once(log: &Path, start: &str) -> Value {
    wait_until(start, 15, || !lines_starting(log, start).is_empty()).await;
    lines_starting(log, start).remove(0)
}

/// The line saying that, for `why`, the daemon now schedules as `to` (was `was`); the
/// weighers it names.
async fn switched_release(log: &Path, why: &str, to: &str, was: &str) -> String {
    let line = line_once(log, &format!("{why}: scheduling as {to}")).await;
    let message = line["message"].as_str().unwrap();
    assert!(
        message.ends_with(&format!("from now on (was {was})")),
        "{message}"
    );
    line["extra"]["weighers"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// systemd's notification protocol as systemd reads it (datagrams on the unix socket
/// named by `NOTIFY_SOCKET`, a `Type=notify` unit with `WatchdogSec=1`): `READY=1` once
/// the daemon consumes (after any `STATUS=`), `WATCHDOG=1` every half period while it
/// is live, `STOPPING=1` on SIGTERM, then exit 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn systemd_hears_ready_watchdog_and_stopping() {
    let rig = LogRig::new("notify").await;
    let socket_path = rig.dir.join("notify.sock");
    let socket = std::os::unix::net::UnixDatagram::bind(&socket_path).expect("notify socket");
    socket
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let log = rig.dir.join("stderr.log");
    let child = Command::new(env!("CARGO_BIN_EXE_nova-scheduler-rs"))
        .arg("--config-file")
        .arg(&rig.conf)
        .env_remove("RUST_LOG")
        .env("NOTIFY_SOCKET", &socket_path)
        .env("WATCHDOG_USEC", "1000000")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .expect("start the daemon");
    let mut daemon = Daemon { child, log };
    let next = || {
        let mut buf = [0u8; 512];
        let n = socket.recv(&mut buf).expect("a notification within 60 s");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    // Startup may say what it waits for (`STATUS=`) before it is ready.
    let ready = loop {
        let said = next();
        if !said.starts_with("STATUS=") {
            break said;
        }
    };
    assert_eq!(ready, "READY=1\n", "READY=1 after any STATUS=");
    assert!(
        daemon.log_text().contains("scheduler ready"),
        "READY=1 only once ready:\n{}",
        daemon.log_text()
    );
    let watchdog: Vec<String> = (0..3).map(|_| next()).collect();
    assert_eq!(watchdog, ["WATCHDOG=1\n"; 3]);
    assert!(Command::new("kill")
        .args(["-TERM", &daemon.child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let stopping = loop {
        let said = next();
        if said != "WATCHDOG=1\n" {
            break said;
        }
    };
    assert_eq!(stopping, "STOPPING=1\n");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status}:\n{}", daemon.log_text());
    rig.finish();
}

/// `nova-scheduler-rs explain` against the running daemon, as an operator runs it.
fn explain_cli(port: u16, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nova-scheduler-rs"))
        .arg("explain")
        .args(["--url", &format!("http://127.0.0.1:{port}")])
        .args(args)
        .output()
        .expect("explain");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A placed request is explained with its weigher table; after every host is
/// disabled, a NoValidHost names ComputeFilter and one reason per removed host, in
/// the log and through `explain`; `--host` says why that host was not taken; an
/// unknown instance exits 1; `--recent` lists both decisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_names_the_filter_that_emptied_the_list_and_why() {
    let port = free_port();
    let rig = Rig::new("explain", 2, &format!("http_listen = 127.0.0.1:{port}")).await;
    let daemon = rig.start("daemon.log");
    let mut client = TestClient::on(&rig.amqp).await;

    let placed = vec![uuid()];
    let reply = client
        .call(
            "nova",
            "scheduler",
            "select_destinations",
            rig.boot_args(&placed, "4.5"),
            "4.5",
        )
        .await;
    assert_eq!(reply.inner["failure"], Value::Null, "{}", reply.inner);
    let (code, text, _) = explain_cli(port, &["--instance", &placed[0]]);
    assert_eq!(code, 0);
    eprintln!("explain of the placed request:\n{text}");
    let (code, out, err) = explain_cli(port, &["--instance", &placed[0], "--json"]);
    assert_eq!(code, 0, "{err}");
    let d: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(d["result"], "placed", "{d}");
    assert_eq!(d["candidates"]["providers"], 2, "{d}");
    assert_eq!(d["selected"].as_array().map(Vec::len), Some(1), "{d}");
    let weighed = d["explanation"]["weighing"]["hosts"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(weighed.len(), 2, "{d}");
    assert!(
        !weighed[0]["scores"].as_array().unwrap().is_empty(),
        "every weigher's score is shown: {d}"
    );
    let weighers_of = |d: &Value| d["explanation"]["weighing"]["weighers"].to_string();
    assert!(weighers_of(&d).contains("ImagePropertiesWeigher"), "{d}");

    // The cloud read as nova 29 after a SIGHUP: a decision made before is still
    // explained with the weighers it was decided with (nova 34's).
    sqlx::query("UPDATE services SET version = 67 WHERE `binary` <> 'nova-scheduler'")
        .execute(&rig.cloud.cell)
        .await
        .unwrap();
    LogRig::hup(&daemon);
    wait_until("the switch to nova 29", 15, || {
        daemon
            .log_text()
            .contains("SIGHUP: scheduling as nova 29 (2024.1)")
    })
    .await;
    let (code, out, err) = explain_cli(port, &["--instance", &placed[0], "--json"]);
    assert_eq!(code, 0, "{err}");
    let again: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(weighers_of(&again), weighers_of(&d), "{again}");
    rig.cloud.admin.delete_allocations(&placed[0]).await;

    // Every compute service disabled: Placement still offers both hosts, and
    // ComputeFilter removes them.
    sqlx::query(
        "UPDATE services SET disabled = 1, disabled_reason = 'maintenance', \
         updated_at = UTC_TIMESTAMP() WHERE `binary` = 'nova-compute'",
    )
    .execute(&rig.cloud.cell)
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let failed = vec![uuid()];
    let reply = client
        .call(
            "nova",
            "scheduler",
            "select_destinations",
            rig.boot_args(&failed, "4.5"),
            "4.5",
        )
        .await;
    assert!(
        reply.inner["failure"].to_string().contains("NoValidHost"),
        "{}",
        reply.inner
    );
    let log = daemon.log_text();
    let line = log
        .lines()
        .find(|l| l.contains("NoValidHost explained"))
        .unwrap_or_else(|| panic!("no explanation logged:\n{log}"));
    assert!(line.contains("ComputeFilter"), "{line}");
    assert!(line.contains(&failed[0]), "{line}");
    // The explained line is the NoValidHost's only INFO line.
    let info: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("INFO") && l.contains("NoValidHost"))
        .collect();
    assert_eq!(info.len(), 1, "{info:#?}");

    let (code, out, err) = explain_cli(port, &["--instance", &failed[0]]);
    assert_eq!(code, 0, "{err}");
    eprintln!("explain of the NoValidHost:\n{out}");
    assert!(out.contains("result: no_valid_host"), "{out}");
    assert!(out.contains("no host left after: ComputeFilter"), "{out}");
    for (host, _) in &rig.hosts {
        assert!(
            out.lines()
                .any(|l| l.contains(host.as_str()) && l.contains("service is disabled")),
            "{host} is not listed with its reason:\n{out}"
        );
    }
    let (host, _) = &rig.hosts[0];
    let (code, out, err) = explain_cli(port, &["--instance", &failed[0], "--host", host]);
    assert_eq!(code, 0, "{err}");
    eprintln!("explain --host:\n{out}");
    assert!(out.contains("removed by ComputeFilter"), "{out}");
    assert!(out.contains("disabled"), "{out}");

    let (code, _, err) = explain_cli(port, &["--instance", &uuid()]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("no such decision"), "{err}");

    // --recent lists the decisions, newest first; naming no decision is a usage error.
    let (code, out, err) = explain_cli(port, &["--recent"]);
    assert_eq!(code, 0, "{err}");
    eprintln!("explain --recent:\n{out}");
    let line_of = |uuid: &str| out.lines().position(|l| l.contains(uuid));
    let (Some(newer), Some(older)) = (line_of(&failed[0]), line_of(&placed[0])) else {
        panic!("both decisions are listed:\n{out}");
    };
    assert!(newer < older, "{out}");
    assert!(
        out.lines().nth(newer).unwrap().contains("no_valid_host"),
        "{out}"
    );
    let (code, out, err) = explain_cli(port, &["--recent", "--json"]);
    assert_eq!(code, 0, "{err}");
    let list: Value = serde_json::from_str(&out).unwrap();
    assert!(
        list["decisions"].as_array().is_some_and(|d| d.len() >= 2),
        "{list}"
    );
    let (code, out, err) = explain_cli(port, &["--json"]);
    assert_eq!(code, 64, "{out}{err}");
    assert!(
        err.contains("--instance") && err.contains("--recent"),
        "{err}"
    );
    drop(daemon);
    rig.finish().await;
}

/// A TCP forwarder on `port` (which refused connections so far) to MariaDB.
async fn forward_to_mariadb(port: u16) {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("rebind the refusing port");
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut server) = TcpStream::connect("127.0.0.1:3306").await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
}

/// The rig's nova.conf with `[api_database] connection` on `port` of 127.0.0.1 and
/// `[api_database]` retry options `retries`.
fn api_database_on_port(rig: &LogRig, port: u16, retries: &str) -> String {
    let text = rig.text.replace(
        "[api_database]\nconnection = mysql+pymysql://root:@127.0.0.1:3306/",
        &format!("[api_database]\n{retries}connection = mysql+pymysql://root:@127.0.0.1:{port}/"),
    );
    assert!(text.contains(&format!("127.0.0.1:{port}/")), "{text}");
    text
}

/// `[api_database]` on a port that refuses connections, `max_retries = 1`: the
/// daemon gives up after one attempt, exits non-zero and names the database, its
/// host:port and the OS's reason (never the password).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_database_is_named_and_startup_gives_up_after_max_retries() {
    let rig = LogRig::new("dbgone").await;
    let port = free_port();
    let conf = rig.dir.join("refused.conf");
    std::fs::write(
        &conf,
        api_database_on_port(&rig, port, "max_retries = 1\nretry_interval = 1\n"),
    )
    .unwrap();
    let started = Instant::now();
    let mut daemon = Daemon::start(&conf, rig.dir.join("refused.log"), &[]);
    let status = loop {
        if let Some(status) = daemon.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "still running after 10 s:\n{}",
            daemon.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let out = daemon.log_text();
    assert!(!status.success(), "{status}\n{out}");
    assert!(
        out.contains("cannot connect to the database ")
            && out.contains(&format!("at 127.0.0.1:{port}: ")),
        "{out}"
    );
    assert!(out.contains("refused"), "{out}");
    drop(daemon);
    rig.finish();
}

/// `[api_database]` on a port that refuses connections for a few seconds and then
/// forwards to MariaDB, `max_retries = -1`: one warning per failed attempt, `/readyz`
/// answers 503 naming the awaited database meanwhile (the listener is up before the
/// databases), and the daemon stops waiting once the database answers; `/readyz` then
/// names the Placement this rig points where nothing listens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_waits_for_a_database_that_comes_back() {
    let rig = LogRig::new("dbback").await;
    let port = free_port();
    let http = free_port();
    let conf = rig.dir.join("comes-back.conf");
    let text = api_database_on_port(&rig, port, "max_retries = -1\nretry_interval = 1\n").replace(
        "[nova_scheduler_rs]\n",
        &format!("[nova_scheduler_rs]\nhttp_listen = 127.0.0.1:{http}\n"),
    );
    std::fs::write(&conf, text).unwrap();
    let daemon = Daemon::start(&conf, rig.dir.join("comes-back.log"), &[]);
    let api_db = nova_schema::tagged("nsrs_log_dbback") + "_api";
    let waiting = format!("starting: waiting for the database {api_db} at 127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    // Every database is "waited for" while its connection is made; the one that
    // refuses stays named until it answers.
    let (status, body) = loop {
        if let Some((status, body)) = http_get(http, "/readyz").await {
            if body.contains(&waiting) {
                break (status, body);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no 503 naming the database:\n{}",
            daemon.log_text()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, 503, "{body}");
    assert!(body.contains(&waiting), "{body}");
    assert_eq!(http_get(http, "/healthz").await.map(|r| r.0), Some(200));
    tokio::time::sleep(Duration::from_secs(2)).await;
    forward_to_mariadb(port).await;
    let out = daemon.wait_ready();
    assert!(out.contains("attempt 1 of unlimited, next in 1 s"), "{out}");
    assert!(out.contains("refused"), "{out}");
    assert!(
        out.contains(&format!(
            "connected to the database {api_db} at 127.0.0.1:{port}"
        )),
        "{out}"
    );
    let (status, body) = http_get(http, "/readyz").await.expect("/readyz");
    assert!(!body.contains("waiting for the database"), "{body}");
    // This rig's Placement (port 9) answers nothing: serving, but not ready.
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("Placement unreachable"), "{body}");
    drop(daemon);
    rig.finish();
}

/// `/readyz` follows the broker: 200 while consuming, 503 with its reason while the
/// daemon's (private) RabbitMQ node is stopped, 200 again once it is back; `/healthz`
/// stays 200 throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_follows_the_broker() {
    let port = free_port();
    let rig = Rig::new("ready", 1, &format!("http_listen = 127.0.0.1:{port}")).await;
    let mut broker = private_rabbit::PrivateRabbit::start("ready");
    let conf = std::fs::read_to_string(&rig.conf)
        .unwrap()
        .lines()
        .map(|l| {
            if l.starts_with("transport_url") {
                format!(
                    "transport_url = rabbit://guest:guest@127.0.0.1:{}/",
                    broker.amqp_port
                )
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let conf_path = rig.dir.join("nova-private-broker.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let daemon = Daemon::start(&conf_path, rig.dir.join("private-broker.log"), &[]);
    daemon.wait_ready();
    let readyz = || async { http_get(port, "/readyz").await.expect("/readyz") };
    let until = |want: u16, secs: u64| async move {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let (status, body) = http_get(port, "/readyz").await.expect("/readyz");
            if status == want {
                return body;
            }
            assert!(
                Instant::now() < deadline,
                "/readyz never {want}: {status} {body}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    until(200, 30).await;
    broker.stop_app();
    let body = until(503, 30).await;
    assert!(body.contains("not consuming"), "{body}");
    assert_eq!(http_get(port, "/healthz").await.map(|r| r.0), Some(200));
    broker.start_app();
    until(200, 60).await;
    assert_eq!(readyz().await.0, 200);
    drop(daemon);
    drop(broker);
    rig.finish().await;
}
