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

#[path = "common/notification_check.rs"]
mod check;
#[path = "common/daemon_proc.rs"]
mod daemon_proc;
#[path = "common/nova_schema.rs"]
mod nova_schema;
#[path = "common/placement_server.rs"]
mod placement_server;
#[path = "common/venv.rs"]
mod venv;

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
