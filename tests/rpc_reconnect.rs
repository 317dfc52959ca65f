// SPDX-License-Identifier: Apache-2.0
//! Connection loss and recovery against the real RabbitMQ on 127.0.0.1:5672.
//!
//! A test binary of its own: it kills *every* broker connection this process opened for
//! the server (found with `rabbitmqctl list_connections` by connection name and pid), which
//! would disturb the servers of other tests running in the same process.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, ExchangeDeleteOptions,
    QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Connection, ConnectionProperties};
use nova_scheduler::rpc::envelope::encode_envelope;
use nova_scheduler::rpc::{Endpoint, EndpointFuture, IncomingCall, RpcServer, RpcServerOptions};
use serde_json::{json, Value};

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
                .and_then(Value::as_f64)
                .unwrap_or(0.0);
            tokio::time::sleep(Duration::from_secs_f64(secs)).await;
            Ok(json!({"slept": secs}))
        })
    }
}

/// The next reply's inner message, acked like oslo's reply listener does.
async fn next_reply(replies: &mut lapin::Consumer, wait: Duration) -> Option<Value> {
    let d = tokio::time::timeout(wait, replies.next())
        .await
        .ok()??
        .unwrap();
    d.ack(BasicAckOptions::default()).await.unwrap();
    let outer: Value = serde_json::from_slice(&d.data).unwrap();
    Some(serde_json::from_str(outer["oslo.message"].as_str().unwrap()).unwrap())
}

/// Output of `rabbitmqctl -q <args>`.
fn rabbitmqctl(args: &[&str]) -> String {
    let out = std::process::Command::new("rabbitmqctl")
        .arg("-q")
        .args(args)
        .output()
        .expect("rabbitmqctl is needed by this test");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `(pid, auth_mechanism, heartbeat)` of the connections the server of this process opened
/// (connection_name `<argv0>:<pid>:<uuid>`).
fn server_connections() -> Vec<(String, String, String)> {
    let argv0 = std::env::args().next().unwrap();
    let base = std::path::Path::new(&argv0)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let marker = format!("\"{base}:{}:", std::process::id());
    rabbitmqctl(&[
        "list_connections",
        "pid",
        "auth_mechanism",
        "timeout",
        "client_properties",
        "--no-table-headers",
    ])
    .lines()
    .filter(|l| l.contains(&marker))
    .filter_map(|l| {
        let mut it = l.split('\t');
        Some((
            it.next()?.to_string(),
            it.next()?.to_string(),
            it.next()?.to_string(),
        ))
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn server_recovers_from_connection_loss() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter("nova_scheduler=debug,lapin=info")
        .with_test_writer()
        .try_init();
    let name = format!("test_{}", uuid::Uuid::new_v4().simple());
    let opts = RpcServerOptions {
        control_exchange: name.clone(),
        topic: name.clone(),
        server: "testhost".into(),
        retry_interval: 0.2,
        retry_backoff: 0.2,
        interval_max: 1.0,
        ..Default::default()
    };
    let server = RpcServer::new(opts, vec![Arc::new(Sleeper)]).unwrap();
    let topo = server.topology().clone();
    let mut ready = server.ready();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    tokio::time::timeout(Duration::from_secs(30), ready.wait_for(|r| *r))
        .await
        .unwrap()
        .unwrap();

    // Client side: a reply queue like oslo's.
    let conn = Connection::connect(
        "amqp://guest:guest@127.0.0.1:5672/%2f",
        ConnectionProperties::default().with_connection_name("rpc-test-client".into()),
    )
    .await
    .unwrap();
    let ch = conn.create_channel().await.unwrap();
    let reply_q = format!("reply_{}", uuid::Uuid::new_v4().simple());
    let mut args = FieldTable::default();
    args.insert("x-expires".into(), AMQPValue::LongInt(1_800_000));
    ch.queue_declare(
        reply_q.as_str().into(),
        QueueDeclareOptions::default(),
        args,
    )
    .await
    .unwrap();
    let mut replies = ch
        .basic_consume(
            reply_q.as_str().into(),
            "1".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let call = |seconds: f64| {
        let msg_id = uuid::Uuid::new_v4().simple().to_string();
        let inner = json!({
            "method": "sleep", "args": {"seconds": seconds}, "version": "4.5",
            "_msg_id": msg_id, "_reply_q": reply_q, "_timeout": null,
            "_unique_id": uuid::Uuid::new_v4().simple().to_string(),
            "_context_request_id": "req-reconnect",
        });
        (msg_id, encode_envelope(&inner))
    };
    let props = BasicProperties::default()
        .with_content_type("application/json".into())
        .with_content_encoding("utf-8".into())
        .with_delivery_mode(2)
        .with_priority(0)
        .with_headers(FieldTable::default());
    let publish = |body: Vec<u8>| {
        let ch = ch.clone();
        let props = props.clone();
        let name = name.clone();
        async move {
            ch.basic_publish(
                name.as_str().into(),
                name.as_str().into(),
                BasicPublishOptions::default(),
                &body,
                props,
            )
            .await
            .unwrap()
            .await
            .unwrap();
        }
    };
    // Connections as oslo makes them: AMQPLAIN, heartbeat 60, listener + reply connection.
    let conns = tokio::task::spawn_blocking(server_connections)
        .await
        .unwrap();
    assert_eq!(
        conns.len(),
        1,
        "only the listener; the reply connection opens lazily"
    );
    let (msg_id, body) = call(0.0);
    publish(body).await;
    let r = next_reply(&mut replies, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(r["_msg_id"], msg_id.as_str());
    let conns = tokio::task::spawn_blocking(server_connections)
        .await
        .unwrap();
    assert_eq!(conns.len(), 2, "{conns:?}");
    for (_, auth, heartbeat) in &conns {
        assert_eq!(auth, "AMQPLAIN");
        assert_eq!(heartbeat, "60");
    }

    // A 3 s call in flight while every server connection is killed.
    ready.borrow_and_update();
    let (msg_id, body) = call(3.0);
    publish(body).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    tokio::task::spawn_blocking(move || {
        for (pid, _, _) in conns {
            rabbitmqctl(&["close_connection", &pid, "test: simulated broker failure"]);
        }
    })
    .await
    .unwrap();
    // Readiness dropped and came back (possibly before we look: check for a change).
    tokio::time::timeout(Duration::from_secs(10), ready.changed())
        .await
        .expect("the server did not notice the connection loss")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), ready.wait_for(|r| *r))
        .await
        .expect("the server did not reconnect")
        .unwrap();

    // The in-flight call still gets exactly one reply (sent over a new reply connection);
    // its redelivery (the ack went to the dead channel) is recognised as a duplicate.
    let r = next_reply(&mut replies, Duration::from_secs(30))
        .await
        .expect("in-flight call lost");
    assert_eq!(r["_msg_id"], msg_id.as_str());
    assert_eq!(r["result"], json!({"slept": 3.0}));
    assert!(
        next_reply(&mut replies, Duration::from_secs(2))
            .await
            .is_none(),
        "duplicate reply"
    );

    // The same queue names are consumed again.
    let (msg_id, body) = call(0.0);
    publish(body).await;
    let r = next_reply(&mut replies, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(r["_msg_id"], msg_id.as_str());
    for q in [&topo.topic_queue, &topo.server_queue, &topo.fanout_queue] {
        let declared = ch
            .queue_declare(
                q.as_str().into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        assert_eq!(declared.consumer_count(), 1, "{q}");
    }

    // Shut down; nothing is left unacknowledged.
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(40), task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let q = ch
            .queue_declare(
                name.as_str().into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                FieldTable::default(),
            )
            .await
            .unwrap();
        if q.message_count() == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "request left in the queue");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for q in [&topo.topic_queue, &topo.server_queue, &reply_q] {
        ch.queue_delete(q.as_str().into(), QueueDeleteOptions::default())
            .await
            .unwrap();
    }
    ch.exchange_delete(name.as_str().into(), ExchangeDeleteOptions::default())
        .await
        .unwrap();
}
