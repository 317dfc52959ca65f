// SPDX-License-Identifier: Apache-2.0
//! Our RPC server next to a real Python oslo.messaging RPC server (the pinned venv,
//! `tests/oracle/oslo_peer.py`), on the same topic of the real RabbitMQ, as an
//! operator runs them while switching over: for the default, durable and quorum
//! configurations, started in both orders, neither side gets a channel error on
//! declare (a PRECONDITION_FAILED would stop the Python server), and calls sent by
//! oslo.messaging's own RPCClient are answered by both.

use crate::venv;

use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use lapin::{Connection, ConnectionProperties};
use nova_scheduler::rpc::{
    Endpoint, EndpointFuture, IncomingCall, RpcServer, RpcServerOptions, Topology,
};
use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;

const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";

struct WhoAmI;

impl Endpoint for WhoAmI {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn version(&self) -> (u32, u32) {
        (4, 5)
    }
    fn has_method(&self, method: &str) -> bool {
        method == "whoami"
    }
    fn call(&self, _call: IncomingCall) -> EndpointFuture {
        Box::pin(async { Ok(json!("rust")) })
    }
}

#[derive(Clone, Copy, Debug)]
enum Flavour {
    Default,
    Durable,
    Quorum,
}

impl Flavour {
    fn rabbit_options(self) -> &'static str {
        match self {
            Flavour::Default => "",
            Flavour::Durable => "amqp_durable_queues = true\n",
            Flavour::Quorum => "rabbit_quorum_queue = true\n",
        }
    }

    fn apply(self, opts: &mut RpcServerOptions) {
        match self {
            Flavour::Default => {}
            Flavour::Durable => opts.durable_queues = true,
            // oslo: quorum queues are durable.
            Flavour::Quorum => {
                opts.quorum_queue = true;
                opts.durable_queues = true;
            }
        }
    }
}

fn peer_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/oslo_peer.py")
}

fn write_conf(name: &str, flavour: Flavour) -> PathBuf {
    let path = std::env::temp_dir().join(format!("{name}.conf"));
    std::fs::write(
        &path,
        format!(
            "[DEFAULT]\ncontrol_exchange = {name}\n\
             transport_url = rabbit://guest:guest@127.0.0.1:5672/\n\
             [oslo_messaging_rabbit]\n{}",
            flavour.rabbit_options()
        ),
    )
    .unwrap();
    path
}

/// The Python server; dropped = stdin closed, then killed if it lingers.
struct PythonServer {
    child: Child,
}

impl PythonServer {
    fn start(conf: &PathBuf, topic: &str) -> Self {
        let python = venv::find().join("bin/python");
        let mut child = Command::new(python)
            .arg(peer_script())
            .args(["server", "--config-file"])
            .arg(conf)
            .args([
                "--topic",
                topic,
                "--server",
                "python-host",
                "--name",
                "python",
            ])
            .env("PYTHONWARNINGS", "ignore")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python oslo peer");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        if line.trim() != "READY" {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the Python oslo.messaging server did not start:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        PythonServer { child }
    }

    /// Still running, and nothing in its log about a channel or declare error.
    fn stop_and_check(mut self) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the Python server exited while ours was running"
        );
        drop(self.child.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let out = self.child.wait_with_output().unwrap();
        let log = String::from_utf8_lossy(&out.stderr);
        for bad in [
            "PRECONDITION_FAILED",
            "inequivalent arg",
            "ChannelError",
            "AMQP server on",
        ] {
            assert!(
                !log.contains(bad),
                "the Python server logged {bad:?}:\n{log}"
            );
        }
    }
}

fn python_calls(conf: &PathBuf, topic: &str, calls: usize) -> Vec<String> {
    let python = venv::find().join("bin/python");
    let out = Command::new(python)
        .arg(peer_script())
        .args(["client", "--config-file"])
        .arg(conf)
        .args(["--topic", topic, "--calls", &calls.to_string()])
        .env("PYTHONWARNINGS", "ignore")
        .output()
        .expect("python oslo client");
    assert!(
        out.status.success(),
        "oslo.messaging client failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let last = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_string();
    serde_json::from_str::<Vec<String>>(&last).expect("answers")
}

struct Ours {
    topology: Topology,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), nova_scheduler::rpc::RpcError>>,
}

async fn start_ours(name: &str, flavour: Flavour) -> Ours {
    let mut opts = RpcServerOptions {
        control_exchange: name.to_string(),
        topic: name.to_string(),
        server: "rust-host".into(),
        max_concurrent_calls: 8,
        ..Default::default()
    };
    flavour.apply(&mut opts);
    let server = RpcServer::new(opts, vec![Arc::new(WhoAmI) as Arc<dyn Endpoint>]).unwrap();
    let topology = server.topology().clone();
    let mut ready = server.ready();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    tokio::time::timeout(Duration::from_secs(30), ready.wait_for(|r| *r))
        .await
        .expect("our server did not become ready")
        .unwrap();
    Ours {
        topology,
        stop,
        task,
    }
}

async fn cleanup(name: &str, topology: &Topology) {
    let conn = Connection::connect(AMQP_URL, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    for q in [
        topology.topic_queue.clone(),
        topology.server_queue.clone(),
        format!("{name}.python-host"),
    ] {
        let _ = ch
            .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    let _ = ch
        .exchange_delete(name.into(), ExchangeDeleteOptions::default())
        .await;
}

async fn side_by_side(flavour: Flavour, python_first: bool) {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("nova_scheduler=info,lapin=warn")
        .try_init();
    let name = format!("sbs_{}", uuid::Uuid::new_v4().simple());
    let conf = write_conf(&name, flavour);
    let (python, ours) = if python_first {
        let py = PythonServer::start(&conf, &name);
        (py, start_ours(&name, flavour).await)
    } else {
        let ours = start_ours(&name, flavour).await;
        (PythonServer::start(&conf, &name), ours)
    };
    let conf_for_client = conf.clone();
    let topic = name.clone();
    let answers = tokio::task::spawn_blocking(move || python_calls(&conf_for_client, &topic, 12))
        .await
        .unwrap();
    assert_eq!(answers.len(), 12);
    let rust = answers.iter().filter(|a| *a == "rust").count();
    let py = answers.iter().filter(|a| *a == "python").count();
    assert_eq!(rust + py, 12, "{answers:?}");
    assert!(
        rust > 0 && py > 0,
        "both servers must take calls from the shared topic queue ({flavour:?}): {answers:?}"
    );
    assert!(!ours.task.is_finished(), "our server stopped");
    python.stop_and_check();
    let _ = ours.stop.send(());
    tokio::time::timeout(Duration::from_secs(40), ours.task)
        .await
        .expect("our server did not stop")
        .unwrap()
        .expect("our server ended with an error");
    cleanup(&name, &ours.topology).await;
    let _ = std::fs::remove_file(conf);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_queues_python_first() {
    side_by_side(Flavour::Default, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_queues_rust_first() {
    side_by_side(Flavour::Default, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_queues_python_first() {
    side_by_side(Flavour::Durable, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_queues_rust_first() {
    side_by_side(Flavour::Durable, false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_queues_python_first() {
    side_by_side(Flavour::Quorum, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quorum_queues_rust_first() {
    side_by_side(Flavour::Quorum, false).await;
}

/// `sleep(seconds)`: a call that runs longer than the caller's call-monitor timeout.
struct Sleeper;

impl Endpoint for Sleeper {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn version(&self) -> (u32, u32) {
        (4, 5)
    }
    fn has_method(&self, method: &str) -> bool {
        method == "sleep"
    }
    fn call(&self, call: IncomingCall) -> EndpointFuture {
        Box::pin(async move {
            let secs = call
                .args
                .get("seconds")
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(0.0);
            tokio::time::sleep(Duration::from_secs_f64(secs)).await;
            Ok(json!({"slept": secs}))
        })
    }
}

/// oslo.messaging's RPCClient with `call_monitor_timeout` (nova's conductor sets one for
/// long calls) gives up when no heartbeat arrives within it; a call running three times
/// longer still succeeds because our server sends call-monitor heartbeats.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_call_survives_python_call_monitor_timeout() {
    let name = format!("sbs_{}", uuid::Uuid::new_v4().simple());
    let conf = write_conf(&name, Flavour::Default);
    let opts = RpcServerOptions {
        control_exchange: name.clone(),
        topic: name.clone(),
        server: "rust-host".into(),
        ..Default::default()
    };
    let server = RpcServer::new(opts, vec![Arc::new(Sleeper) as Arc<dyn Endpoint>]).unwrap();
    let topology = server.topology().clone();
    let mut ready = server.ready();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    tokio::time::timeout(Duration::from_secs(30), ready.wait_for(|r| *r))
        .await
        .expect("our server did not become ready")
        .unwrap();

    let python = venv::find().join("bin/python");
    let (conf_c, topic) = (conf.clone(), name.clone());
    let started = std::time::Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .arg(peer_script())
            .args(["client", "--config-file"])
            .arg(&conf_c)
            .args(["--topic", &topic, "--calls", "1", "--method", "sleep"])
            .args(["--args", r#"{"seconds": 6}"#, "--timeout", "60"])
            .args(["--call-monitor-timeout", "2"])
            .env("PYTHONWARNINGS", "ignore")
            .output()
            .expect("python oslo client")
    })
    .await
    .unwrap();
    let elapsed = started.elapsed();
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(40), task).await;
    cleanup(&name, &topology).await;
    let _ = std::fs::remove_file(conf);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let answers: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(answers, json!([{"ok": {"slept": 6.0}}]), "{answers}");
    assert!(
        elapsed >= Duration::from_secs(6),
        "the call returned before its processing ended"
    );
}
