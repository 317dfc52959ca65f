// SPDX-License-Identifier: Apache-2.0
//! The broker restarts under load: a private RabbitMQ node (never the shared one) is
//! stopped and started (`rabbitmqctl stop_app` / `start_app`, which drops every queue of
//! this non-durable topology) while oslo.messaging's own RPCClient (the venv,
//! `tests/oracle/oslo_peer.py stream`) sends a steady stream of calls. The server must
//! reconnect, redeclare and consume again; every call the client did not time out on is
//! answered, with its own answer, and calls are answered again after the restart.

use crate::private_rabbit;
use crate::venv;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nova_scheduler::rpc::{
    BrokerAddress, Endpoint, EndpointFuture, IncomingCall, RpcServer, RpcServerOptions,
};
use private_rabbit::PrivateRabbit;
use serde_json::{json, Value};

/// `step(seq)` → `{"seq": seq, "by": "rust"}`, after a short pause so that calls are in
/// flight when the broker goes away.
struct Step;

impl Endpoint for Step {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn version(&self) -> (u32, u32) {
        (4, 5)
    }
    fn has_method(&self, method: &str) -> bool {
        method == "step"
    }
    fn call(&self, call: IncomingCall) -> EndpointFuture {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(50)).await;
            Ok(json!({"seq": call.args.get("seq").cloned().unwrap_or(Value::Null), "by": "rust"}))
        })
    }
}

#[derive(Debug, Default)]
struct Seen {
    lines: Vec<Value>,
}

impl Seen {
    fn answered_from(&self, from_seq: i64) -> usize {
        self.lines
            .iter()
            .filter(|l| l["seq"].as_i64().unwrap_or(-1) >= from_seq && l.get("ok").is_some())
            .count()
    }
    fn last_seq(&self) -> i64 {
        self.lines
            .last()
            .and_then(|l| l["seq"].as_i64())
            .unwrap_or(-1)
    }
}

fn wait_until(seen: &Mutex<Seen>, what: &str, limit: Duration, cond: impl Fn(&Seen) -> bool) {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if cond(&seen.lock().unwrap()) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!(
        "{what}: not within {limit:?}; seen {:?}",
        seen.lock().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn calls_are_answered_across_a_broker_restart() {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("nova_scheduler=info,lapin=warn")
        .try_init();
    let mut rabbit = tokio::task::spawn_blocking(|| PrivateRabbit::start("restart"))
        .await
        .unwrap();
    let opts = RpcServerOptions {
        brokers: vec![BrokerAddress {
            host: "127.0.0.1".into(),
            port: rabbit.amqp_port,
            username: "guest".into(),
            password: "guest".into(),
            virtual_host: String::new(),
        }],
        control_exchange: "nova".into(),
        topic: "scheduler".into(),
        server: "restart-host".into(),
        retry_interval: 0.5,
        retry_backoff: 0.5,
        interval_max: 2.0,
        ..Default::default()
    };
    let server = RpcServer::new(opts, vec![Arc::new(Step) as Arc<dyn Endpoint>]).unwrap();
    let mut ready = server.ready();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    tokio::time::timeout(Duration::from_secs(30), ready.wait_for(|r| *r))
        .await
        .expect("server not ready")
        .unwrap();
    // Track the server's readiness: it must drop and come back.
    let readiness = Arc::new(Mutex::new(Vec::<bool>::new()));
    let watcher = {
        let readiness = readiness.clone();
        let mut ready = ready.clone();
        tokio::spawn(async move {
            while ready.changed().await.is_ok() {
                let now = *ready.borrow_and_update();
                readiness.lock().unwrap().push(now);
            }
        })
    };

    let conf = rabbit.dir.join("client.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ncontrol_exchange = nova\n\
             transport_url = rabbit://guest:guest@127.0.0.1:{}/\n\
             [oslo_messaging_rabbit]\nrabbit_retry_interval = 1\nrabbit_retry_backoff = 1\n\
             rabbit_interval_max = 2\n",
            rabbit.amqp_port
        ),
    )
    .unwrap();
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/oslo_peer.py");
    let mut client = Command::new(venv::find().join("bin/python"))
        .arg(script)
        .args(["stream", "--config-file"])
        .arg(&conf)
        .args(["--topic", "scheduler", "--method", "step", "--timeout", "8"])
        .env("PYTHONWARNINGS", "ignore")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let reader = {
        let seen = seen.clone();
        let stdout = client.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let v: Value = serde_json::from_str(&line).expect("client line");
                seen.lock().unwrap().lines.push(v);
            }
        })
    };

    let (seen2, rabbit_restart) = (seen.clone(), &mut rabbit);
    let restart_seq = tokio::task::block_in_place(|| {
        wait_until(
            &seen2,
            "20 calls answered before the restart",
            Duration::from_secs(30),
            |s| s.answered_from(0) >= 20,
        );
        rabbit_restart.stop_app();
        std::thread::sleep(Duration::from_secs(2));
        rabbit_restart.start_app();
        let restart_seq = seen2.lock().unwrap().last_seq() + 1;
        wait_until(
            &seen2,
            "20 calls answered after the restart",
            Duration::from_secs(60),
            |s| s.answered_from(restart_seq) >= 20,
        );
        restart_seq
    });

    drop(client.stdin.take());
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.try_wait().unwrap().is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = client.kill();
    let status = client.wait().unwrap();
    let _ = reader.join();
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(40), task)
        .await
        .expect("server did not stop")
        .unwrap()
        .unwrap();
    watcher.abort();
    tokio::task::spawn_blocking(move || drop(rabbit))
        .await
        .unwrap();

    let seen = seen.lock().unwrap();
    assert!(
        status.success() || status.code().is_none(),
        "client: {status}"
    );
    let mut timeouts = 0;
    for line in &seen.lines {
        match (line.get("ok"), line.get("error")) {
            // Every answer is the answer to that call.
            (Some(ok), None) => assert_eq!(ok, &json!({"seq": line["seq"], "by": "rust"})),
            (None, Some(e)) => {
                assert_eq!(
                    e, "MessagingTimeout",
                    "a call failed otherwise than by timeout: {line}"
                );
                timeouts += 1;
            }
            _ => panic!("bad client line {line}"),
        }
    }
    // Sequence numbers are contiguous: no call was lost without a timeout or an answer.
    for (i, line) in seen.lines.iter().enumerate() {
        assert_eq!(line["seq"], json!(i));
    }
    assert!(seen.answered_from(restart_seq) >= 20);
    let r = readiness.lock().unwrap().clone();
    assert!(
        r.windows(2).any(|w| !w[0] && w[1]),
        "the server never became ready again after losing the broker: {r:?}"
    );
    eprintln!(
        "calls: {}, answered: {}, timed out: {timeouts}, restart at seq {restart_seq}",
        seen.lines.len(),
        seen.answered_from(0)
    );
}
