// SPDX-License-Identifier: Apache-2.0
//! The RPC server against the real RabbitMQ on 127.0.0.1:5672 (guest/guest).
//!
//! Every test uses its own control exchange and topic (`test_<uuid>`) and removes its
//! queues and exchanges afterwards. The client below publishes requests exactly like
//! oslo.messaging's `RPCClient` (`oslo_messaging/rpc/client.py`) and waits on its own reply queue.
//! A few checks read queue counters with `rabbitmqctl` (the broker runs on this machine).

#[path = "common/amqp_client.rs"]
mod amqp_client;

use std::collections::BTreeSet;
use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use amqp_client::{connect, failure_of, TestClient, REPLY_WAIT, SECRET_TOKEN};
use lapin::options::{
    ExchangeDeclareOptions, ExchangeDeleteOptions, QueueDeclareOptions, QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, ExchangeKind};
use nova_scheduler::rpc::envelope::{compress_zlib, encode_envelope};
use nova_scheduler::rpc::{
    Endpoint, EndpointFuture, IncomingCall, RemoteError, RpcError, RpcServer, RpcServerOptions,
    Topology,
};
use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, oneshot};

// ---------------------------------------------------------------------------------------
// Log capture (one global subscriber for the whole test binary).

#[derive(Clone)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logs() -> LogBuffer {
    static LOGS: OnceLock<LogBuffer> = OnceLock::new();
    LOGS.get_or_init(|| {
        let buf = LogBuffer(Arc::new(Mutex::new(Vec::new())));
        let writer = buf.clone();
        tracing_subscriber::fmt()
            .with_env_filter("nova_scheduler=debug,lapin=warn")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .init();
        buf
    })
    .clone()
}

fn log_text() -> String {
    String::from_utf8_lossy(&logs().0.lock().unwrap()).into_owned()
}

// ---------------------------------------------------------------------------------------
// A test endpoint standing in for nova's SchedulerManager (null namespace, version 4.5).

#[derive(Clone)]
struct TestManager {
    casts: mpsc::UnboundedSender<(String, Map<String, Value>)>,
}

impl Endpoint for TestManager {
    fn namespace(&self) -> Option<&str> {
        None
    }

    fn version(&self) -> (u32, u32) {
        (4, 5)
    }

    fn has_method(&self, method: &str) -> bool {
        matches!(
            method,
            "select_destinations" | "sleep" | "no_valid_host" | "boom" | "update_instance_info"
        )
    }

    fn call(&self, call: IncomingCall) -> EndpointFuture {
        let casts = self.casts.clone();
        Box::pin(async move {
            match call.method.as_str() {
                "select_destinations" => Ok(json!({
                    "echo": call.args,
                    "request_id": call.context.request_id(),
                    "is_call": call.is_call,
                })),
                "sleep" => {
                    let secs = call
                        .args
                        .get("seconds")
                        .and_then(Value::as_f64)
                        .unwrap_or(1.0);
                    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
                    Ok(json!("slept"))
                }
                "no_valid_host" => Err(RemoteError::no_valid_host("")),
                "boom" => panic!("handler exploded"),
                "update_instance_info" => {
                    let _ = casts.send((call.method.clone(), call.args.clone()));
                    Ok(Value::Null)
                }
                other => Err(RemoteError::no_such_method(other)),
            }
        })
    }
}

// ---------------------------------------------------------------------------------------
// Server harness.

struct Harness {
    topology: Topology,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<Result<(), RpcError>>>,
    casts: mpsc::UnboundedReceiver<(String, Map<String, Value>)>,
}

fn test_options(name: &str) -> RpcServerOptions {
    RpcServerOptions {
        control_exchange: name.to_string(),
        topic: name.to_string(),
        server: "testhost".into(),
        max_concurrent_calls: 8,
        missing_consumer_retry_timeout: 2,
        ..Default::default()
    }
}

fn unique_name() -> String {
    format!("test_{}", uuid::Uuid::new_v4().simple())
}

async fn start_server(opts: RpcServerOptions) -> Harness {
    logs();
    let name = opts.topic.clone();
    let (tx, casts) = mpsc::unbounded_channel();
    let server = RpcServer::new(opts, vec![Arc::new(TestManager { casts: tx })]).unwrap();
    let topology = server.topology().clone();
    let mut ready = server.ready();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    if tokio::time::timeout(Duration::from_secs(30), ready.wait_for(|r| *r))
        .await
        .is_err()
    {
        let logs: Vec<String> = log_text()
            .lines()
            .filter(|l| l.contains(&name))
            .map(String::from)
            .collect();
        panic!(
            "server {name} did not become ready; its log lines:\n{}",
            logs.join("\n")
        );
    }
    Harness {
        topology,
        stop: Some(stop),
        task: Some(task),
        casts,
    }
}

impl Harness {
    /// Graceful shutdown; the server deletes its fanout queue.
    async fn shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(40), task)
                .await
                .expect("server did not stop")
                .unwrap()
                .unwrap();
        }
    }

    /// Shut down, then remove the shared queues and the control exchange.
    async fn finish(mut self, client: &TestClient) {
        self.shutdown().await;
        let ch = &client.channel;
        for q in [&self.topology.topic_queue, &self.topology.server_queue] {
            ch.queue_delete(q.as_str().into(), QueueDeleteOptions::default())
                .await
                .unwrap();
        }
        ch.exchange_delete(
            self.topology.exchange.as_str().into(),
            ExchangeDeleteOptions::default(),
        )
        .await
        .unwrap();
        // The fanout queue was deleted by the server, so its auto-delete exchange is gone.
        assert!(
            !queue_exists(&self.topology.fanout_queue).await,
            "fanout queue left behind"
        );
    }
}

async fn queue_exists(name: &str) -> bool {
    let conn = connect().await;
    let ch = conn.create_channel().await.unwrap();
    let exists = ch
        .queue_declare(
            name.into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .is_ok();
    let _ = conn.close(200, "OK".into()).await;
    exists
}

/// Ready (not delivered) messages of a queue, by passive declare.
async fn ready_count(name: &str) -> u32 {
    let conn = connect().await;
    let ch = conn.create_channel().await.unwrap();
    let q = ch
        .queue_declare(
            name.into(),
            QueueDeclareOptions {
                passive: true,
                ..Default::default()
            },
            FieldTable::default(),
        )
        .await
        .unwrap();
    let _ = conn.close(200, "OK".into()).await;
    q.message_count()
}

/// `(messages_unacknowledged, messages_ready)` of a queue from `rabbitmqctl list_queues`.
fn queue_counts(queue: &str) -> (u64, u64) {
    let out = std::process::Command::new("rabbitmqctl")
        .args([
            "-q",
            "list_queues",
            "-p",
            "/",
            "name",
            "messages_unacknowledged",
            "messages_ready",
            "--no-table-headers",
        ])
        .output()
        .expect("rabbitmqctl is needed for the unacked-count checks");
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next()?;
            let unacked = it.next()?.parse().ok()?;
            let ready = it.next()?.parse().ok()?;
            Some((name, (unacked, ready)))
        })
        .find(|(n, _)| *n == queue)
        .map(|(_, counts)| counts)
        .unwrap_or_else(|| panic!("queue {queue} not listed by rabbitmqctl: {text}"))
}

fn unacked_count(queue: &str) -> u64 {
    queue_counts(queue).0
}

fn reply_property_set(p: &BasicProperties) -> Value {
    json!({
        "content_type": p.content_type().as_ref().map(|s| s.as_str().to_string()),
        "content_encoding": p.content_encoding().as_ref().map(|s| s.as_str().to_string()),
        "delivery_mode": p.delivery_mode(),
        "priority": p.priority(),
        "expiration": p.expiration().as_ref().map(|s| s.as_str().to_string()),
        "headers": p.headers().as_ref().map(|h| h.inner().len()),
    })
}

// ---------------------------------------------------------------------------------------
// Tests.

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn select_like_call_gets_result_with_ending() {
    let name = unique_name();
    let server = start_server(test_options(&name)).await;
    let mut client = TestClient::new().await;

    let args = json!({"spec_obj": {"nova_object.name": "RequestSpec"}, "instance_uuids": ["u1"],
                      "return_objects": true, "return_alternates": true});
    let reply = client
        .call(&name, &name, "select_destinations", args.clone(), "4.5")
        .await;
    let expected_keys: BTreeSet<String> = ["result", "failure", "ending", "_msg_id", "_unique_id"]
        .into_iter()
        .map(String::from)
        .collect();
    let keys: BTreeSet<String> = reply.inner.as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, expected_keys);
    assert_eq!(reply.inner["ending"], true);
    assert_eq!(reply.inner["failure"], Value::Null);
    assert_eq!(reply.inner["result"]["echo"], args);
    assert_eq!(reply.inner["result"]["request_id"], "req-test-1234");
    assert_eq!(reply.inner["result"]["is_call"], true);
    assert_eq!(reply.inner["_unique_id"].as_str().unwrap().len(), 32);
    assert_eq!(
        reply.outer_keys,
        ["oslo.message", "oslo.version"]
            .into_iter()
            .map(String::from)
            .collect()
    );
    assert_eq!(
        reply_property_set(&reply.properties),
        json!({"content_type": "application/json", "content_encoding": "utf-8",
               "delivery_mode": 2, "priority": 0, "expiration": null, "headers": 0})
    );

    // The server queue answers too.
    let reply = client
        .call(
            &name,
            &format!("{name}.testhost"),
            "select_destinations",
            json!({}),
            "4.0",
        )
        .await;
    assert_eq!(reply.inner["result"]["echo"], json!({}));

    // A NovaException failure comes back as oslo serializes it.
    let reply = client
        .call(&name, &name, "no_valid_host", json!({}), "4.5")
        .await;
    let f = failure_of(&reply);
    assert_eq!(f["class"], "NoValidHost");
    assert_eq!(f["module"], "nova.exception");
    assert_eq!(f["args"], json!(["No valid host was found. "]));
    assert_eq!(f["kwargs"], json!({"reason": "", "code": 500}));
    assert!(f["tb"].as_array().unwrap().iter().all(Value::is_string));

    server.finish(&client).await;
    client.delete_reply_queue().await;
    let logs = log_text();
    assert!(logs.contains("scheduler ready"));
    assert!(!logs.contains(SECRET_TOKEN), "auth token leaked into logs");
}

/// Requests and replies many times our frame size (32 KiB) cross in body frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn messages_larger_than_a_frame_go_both_ways() {
    let name = unique_name();
    let server = start_server(test_options(&name)).await;
    let mut client = TestClient::new().await;

    let hint: String = (0..300 * 1024)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let args = json!({"spec_obj": {"scheduler_hints": {"big": [hint]}}});
    let reply = client
        .call(&name, &name, "select_destinations", args.clone(), "4.5")
        .await;
    assert_eq!(reply.inner["failure"], Value::Null);
    assert_eq!(reply.inner["result"]["echo"], args);

    server.finish(&client).await;
    client.delete_reply_queue().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unknown_method_and_version_are_dispatcher_failures() {
    let name = unique_name();
    let server = start_server(test_options(&name)).await;
    let mut client = TestClient::new().await;

    let reply = client
        .call(&name, &name, "frobnicate", json!({}), "4.5")
        .await;
    let f = failure_of(&reply);
    assert_eq!(f["class"], "NoSuchMethod");
    assert_eq!(f["module"], "oslo_messaging.rpc.dispatcher");
    assert_eq!(
        f["message"],
        "Endpoint does not support RPC method frobnicate"
    );
    assert_eq!(
        f["args"],
        json!(["Endpoint does not support RPC method frobnicate"])
    );
    assert_eq!(f["kwargs"], json!({}));
    assert_eq!(reply.inner["ending"], true);

    let reply = client
        .call(&name, &name, "select_destinations", json!({}), "5.0")
        .await;
    let f = failure_of(&reply);
    assert_eq!(f["class"], "UnsupportedVersion");
    assert_eq!(f["module"], "oslo_messaging.rpc.dispatcher");
    assert_eq!(
        f["message"],
        "Endpoint does not support RPC version 5.0. Attempted method: select_destinations"
    );

    // Private methods are never dispatched.
    let reply = client.call(&name, &name, "_secret", json!({}), "4.5").await;
    assert_eq!(failure_of(&reply)["class"], "NoSuchMethod");

    server.finish(&client).await;
    client.delete_reply_queue().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn undecodable_messages_are_acked_and_answered_when_possible() {
    let name = unique_name();
    let mut server = start_server(test_options(&name)).await;
    let mut client = TestClient::new().await;
    let json_props = || TestClient::properties(false, None);

    // 1. Not JSON, no reply information: acked and dropped.
    client
        .publish_raw(&name, &name, b"\x00\x01 this is not json", json_props())
        .await;
    // 2. Wrong content type, no reply information.
    client
        .publish_raw(
            &name,
            &name,
            b"plain text",
            BasicProperties::default().with_content_type("text/plain".into()),
        )
        .await;
    // 3. Envelope fine, inner JSON broken but _msg_id/_reply_q readable: ValueError reply.
    let msg_id = uuid::Uuid::new_v4().simple().to_string();
    let broken_inner = format!(
        "{{\"_msg_id\": \"{msg_id}\", \"_reply_q\": \"{}\", \"method\": \"select_destinations\", \"args\": {{",
        client.reply_q
    );
    let body = json!({"oslo.version": "2.0", "oslo.message": broken_inner}).to_string();
    client
        .publish_raw(&name, &name, body.as_bytes(), json_props())
        .await;
    let replies = client.replies_until_ending(&msg_id).await;
    assert_eq!(replies.len(), 1);
    let f = failure_of(&replies[0]);
    assert_eq!(f["class"], "ValueError");
    assert_eq!(f["module"], "builtins");
    assert!(
        f["message"].as_str().unwrap().contains("not valid JSON"),
        "{f}"
    );
    assert_eq!(f["args"], json!([f["message"]]));

    // 4. Valid inner JSON without a method: ValueError reply.
    let (mut req, msg_id) = client.as_call(TestClient::request("x", json!({}), None), Value::Null);
    req.remove("method");
    client.publish(&name, &name, &req).await;
    let f = failure_of(&client.replies_until_ending(&msg_id).await[0]);
    assert_eq!(f["class"], "ValueError");

    // The server keeps serving.
    let reply = client
        .call(&name, &name, "select_destinations", json!({"k": 1}), "4.5")
        .await;
    assert_eq!(reply.inner["result"]["echo"], json!({"k": 1}));

    // Everything was acknowledged: after shutdown (which would return unacked messages
    // to the queue) the topic queue is empty.
    server.shutdown().await;
    assert_eq!(ready_count(&name).await, 0);
    server.finish(&client).await;
    client.delete_reply_queue().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn compressed_requests_and_replies() {
    let name = unique_name();
    let opts = RpcServerOptions {
        compression: Some("gzip".into()),
        ..test_options(&name)
    };
    let server = start_server(opts).await;
    let mut client = TestClient::new().await;

    let (req, msg_id) = client.as_call(
        TestClient::request("select_destinations", json!({"z": "zlib"}), Some("4.5")),
        json!(60),
    );
    let body = compress_zlib(&encode_envelope(&Value::Object(req)));
    client
        .publish_raw(
            &name,
            &name,
            &body,
            TestClient::properties(true, Some("60000")),
        )
        .await;
    let replies = client.replies_until_ending(&msg_id).await;
    let reply = replies.last().unwrap();
    assert_eq!(reply.inner["result"]["echo"], json!({"z": "zlib"}));
    // This server has kombu_compression set: its reply is compressed and says so.
    let h = reply.properties.headers().as_ref().unwrap();
    assert_eq!(
        h.inner().get("compression"),
        Some(&AMQPValue::LongString("application/x-gzip".into()))
    );

    server.finish(&client).await;
    client.delete_reply_queue().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn call_monitor_heartbeats_only_with_a_timeout() {
    let name = unique_name();
    let server = start_server(test_options(&name)).await;
    let mut client = TestClient::new().await;

    // _timeout 4 → heartbeat every 2 s while the 5 s handler runs.
    let (req, msg_id) = client.as_call(
        TestClient::request("sleep", json!({"seconds": 5}), Some("4.5")),
        json!(4),
    );
    let started = Instant::now();
    client.publish(&name, &name, &req).await;
    let replies = client.replies_until_ending(&msg_id).await;
    let (last, heartbeats) = replies.split_last().unwrap();
    assert!(
        !heartbeats.is_empty(),
        "no heartbeat before the final reply"
    );
    for hb in heartbeats {
        assert_eq!(hb.inner["ending"], false);
        assert_eq!(hb.inner["result"], Value::Null);
        assert_eq!(hb.inner["failure"], Value::Null);
        assert_eq!(hb.inner["_unique_id"].as_str().unwrap().len(), 32);
    }
    assert!(
        heartbeats.len() <= 3,
        "too many heartbeats: {}",
        heartbeats.len()
    );
    assert_eq!(last.inner["result"], "slept");
    assert!(started.elapsed() >= Duration::from_secs(5));

    // _timeout null (and 1, below oslo's minimum) → no heartbeat at all.
    for timeout in [Value::Null, json!(1)] {
        let (req, msg_id) = client.as_call(
            TestClient::request("sleep", json!({"seconds": 2.5}), Some("4.5")),
            timeout,
        );
        client.publish(&name, &name, &req).await;
        let replies = client.replies_until_ending(&msg_id).await;
        assert_eq!(replies.len(), 1, "heartbeat sent without a usable _timeout");
    }

    server.finish(&client).await;
    client.delete_reply_queue().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn casts_are_processed_without_reply_and_deduplicated() {
    let name = unique_name();
    let mut server = start_server(test_options(&name)).await;
    let mut client = TestClient::new().await;

    // Fanout cast (how nova-compute sends update_instance_info) and a topic cast.
    let fanout = TestClient::request(
        "update_instance_info",
        json!({"host_name": "c1"}),
        Some("4.2"),
    );
    client
        .publish(&server.topology.fanout_exchange, "", &fanout)
        .await;
    let topic = TestClient::request(
        "update_instance_info",
        json!({"host_name": "c2"}),
        Some("4.2"),
    );
    client.publish(&name, &name, &topic).await;
    // The same _unique_id twice: handled once.
    client.publish(&name, &name, &topic).await;

    let mut hosts = Vec::new();
    for _ in 0..2 {
        let (method, args) = tokio::time::timeout(REPLY_WAIT, server.casts.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(method, "update_instance_info");
        hosts.push(args["host_name"].as_str().unwrap().to_string());
    }
    hosts.sort();
    assert_eq!(hosts, ["c1", "c2"]);
    // No reply for casts, no second handling of the duplicate.
    assert!(client.next_reply(Duration::from_secs(1)).await.is_none());
    assert!(server.casts.try_recv().is_err());

    // A cast whose handler fails (unknown method) is only logged, never answered.
    let bad = TestClient::request("nope", json!({}), Some("4.2"));
    client.publish(&name, &name, &bad).await;
    assert!(client.next_reply(Duration::from_secs(1)).await.is_none());

    server.shutdown().await;
    assert_eq!(ready_count(&name).await, 0, "casts left unacknowledged");
    server.finish(&client).await;
    client.delete_reply_queue().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn baseapi_ping_and_oslo_ping() {
    let name = unique_name();
    let opts = RpcServerOptions {
        rpc_ping_enabled: true,
        ..test_options(&name)
    };
    let server = start_server(opts).await;
    let mut client = TestClient::new().await;

    let mut req = TestClient::request("ping", json!({"arg": "hello"}), Some("1.1"));
    req.insert("namespace".into(), json!("baseapi"));
    let (req, msg_id) = client.as_call(req, json!(60));
    client.publish(&name, &name, &req).await;
    let reply = client.replies_until_ending(&msg_id).await.pop().unwrap();
    assert_eq!(
        reply.inner["result"],
        json!({"service": "scheduler", "arg": "hello"})
    );

    let mut req = TestClient::request("get_backdoor_port", json!({}), Some("1.0"));
    req.insert("namespace".into(), json!("baseapi"));
    let (req, msg_id) = client.as_call(req, Value::Null);
    client.publish(&name, &name, &req).await;
    let reply = client.replies_until_ending(&msg_id).await.pop().unwrap();
    assert_eq!(reply.inner["result"], Value::Null);
    assert_eq!(reply.inner["failure"], Value::Null);

    // oslo.messaging's ping: no namespace, no version (1.0).
    let (req, msg_id) = client.as_call(
        TestClient::request("oslo_rpc_server_ping", json!({}), None),
        Value::Null,
    );
    client.publish(&name, &name, &req).await;
    let reply = client.replies_until_ending(&msg_id).await.pop().unwrap();
    assert_eq!(reply.inner["result"], "pong");

    server.finish(&client).await;
    client.delete_reply_queue().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn call_is_acked_only_after_its_reply() {
    let name = unique_name();
    let server = start_server(test_options(&name)).await;
    let mut client = TestClient::new().await;

    let (req, msg_id) = client.as_call(
        TestClient::request("sleep", json!({"seconds": 4}), Some("4.5")),
        Value::Null,
    );
    client.publish(&name, &name, &req).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let queue = name.clone();
    let during = tokio::task::spawn_blocking(move || unacked_count(&queue))
        .await
        .unwrap();
    assert_eq!(during, 1, "the running call must still be unacknowledged");

    let reply = client.replies_until_ending(&msg_id).await.pop().unwrap();
    assert_eq!(reply.inner["result"], "slept");
    // Acked right after the confirmed reply.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let queue = name.clone();
        let after = tokio::task::spawn_blocking(move || unacked_count(&queue))
            .await
            .unwrap();
        if after == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "call still unacked after its reply"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    server.finish(&client).await;
    client.delete_reply_queue().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn panicking_handler_gets_runtime_error_and_server_survives() {
    let name = unique_name();
    let server = start_server(test_options(&name)).await;
    let mut client = TestClient::new().await;

    let reply = client.call(&name, &name, "boom", json!({}), "4.5").await;
    let f = failure_of(&reply);
    assert_eq!(f["class"], "RuntimeError");
    assert_eq!(f["module"], "builtins");
    assert!(f["message"].as_str().unwrap().contains("panicked"));

    let reply = client
        .call(&name, &name, "select_destinations", json!({}), "4.5")
        .await;
    assert_eq!(reply.inner["failure"], Value::Null);

    server.finish(&client).await;
    client.delete_reply_queue().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reply_to_a_missing_queue_is_abandoned_then_acked() {
    let name = unique_name();
    let mut server = start_server(test_options(&name)).await; // retry budget: 2 s
    let mut client = TestClient::new().await;

    let mut req = TestClient::request("select_destinations", json!({}), Some("4.5"));
    req.insert("_msg_id".into(), json!("0123456789abcdef0123456789abcdef"));
    req.insert("_reply_q".into(), json!(format!("reply_gone_{name}")));
    req.insert("_timeout".into(), Value::Null);
    client.publish(&name, &name, &req).await;

    // Meanwhile other calls are answered.
    let reply = client
        .call(&name, &name, "select_destinations", json!({"x": 1}), "4.5")
        .await;
    assert_eq!(reply.inner["result"]["echo"], json!({"x": 1}));

    // After the 2 s budget the reply is abandoned and the request acked.
    let deadline = Instant::now() + Duration::from_secs(15);
    let abandoned = || {
        log_text()
            .lines()
            .any(|l| l.contains("Abandoning") && l.contains(&format!("reply_gone_{name}")))
    };
    while !abandoned() {
        assert!(Instant::now() < deadline, "abandon not logged");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    server.shutdown().await;
    assert_eq!(ready_count(&name).await, 0);
    server.finish(&client).await;
    client.delete_reply_queue().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn durable_mismatch_falls_back_like_oslo() {
    let name = unique_name();
    let client = TestClient::new().await;
    // The control exchange exists non-durable; this server is configured durable
    // (amqp_durable_queues): oslo re-declares exchange and queue non-durable.
    client
        .channel
        .exchange_declare(
            name.as_str().into(),
            ExchangeKind::Topic,
            ExchangeDeclareOptions::default(),
            FieldTable::default(),
        )
        .await
        .unwrap();
    let opts = RpcServerOptions {
        durable_queues: true,
        ..test_options(&name)
    };
    let server = start_server(opts).await;
    let mut client = client;
    let reply = client
        .call(&name, &name, "select_destinations", json!({}), "4.5")
        .await;
    assert_eq!(reply.inner["failure"], Value::Null);
    server.finish(&client).await;
    client.delete_reply_queue().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn topology_is_declared_as_oslo_does() {
    let name = unique_name();
    let server = start_server(test_options(&name)).await;
    let client = TestClient::new().await;
    let topo = server.topology.clone();
    assert_eq!(topo.topic_queue, name);
    assert_eq!(topo.server_queue, format!("{name}.testhost"));
    assert_eq!(topo.fanout_exchange, format!("{name}_fanout"));
    let suffix = topo
        .fanout_queue
        .strip_prefix(&format!("{name}_fanout_"))
        .unwrap();
    assert!(suffix.len() == 32 && suffix.chars().all(|c| c.is_ascii_hexdigit()));

    // Re-declaring with oslo's exact flags and arguments succeeds (RabbitMQ would close
    // the channel with 406 PRECONDITION_FAILED on any difference).
    let ch = &client.channel;
    ch.exchange_declare(
        name.as_str().into(),
        ExchangeKind::Topic,
        ExchangeDeclareOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();
    ch.exchange_declare(
        topo.fanout_exchange.as_str().into(),
        ExchangeKind::Fanout,
        ExchangeDeclareOptions {
            auto_delete: true,
            ..Default::default()
        },
        FieldTable::default(),
    )
    .await
    .unwrap();
    for q in [&topo.topic_queue, &topo.server_queue] {
        let q = ch
            .queue_declare(
                q.as_str().into(),
                QueueDeclareOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        assert_eq!(q.consumer_count(), 1);
    }
    let mut args = FieldTable::default();
    args.insert("x-expires".into(), AMQPValue::LongInt(1_800_000));
    let q = ch
        .queue_declare(
            topo.fanout_queue.as_str().into(),
            QueueDeclareOptions::default(),
            args,
        )
        .await
        .unwrap();
    assert_eq!(q.consumer_count(), 1);

    server.finish(&client).await;
    client.delete_reply_queue().await;
    let _ = std::io::stderr().flush();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn prefetch_limits_deliveries_in_flight() {
    let name = unique_name();
    let opts = RpcServerOptions {
        qos_prefetch_count: 1,
        ..test_options(&name)
    };
    let server = start_server(opts).await;
    let mut client = TestClient::new().await;

    // Each call runs 8 s, so the counts taken at 1.5 s stay valid even when
    // rabbitmqctl takes seconds to answer on a loaded machine.
    let mut ids = Vec::new();
    for _ in 0..2 {
        let (req, msg_id) = client.as_call(
            TestClient::request("sleep", json!({"seconds": 8}), Some("4.5")),
            Value::Null,
        );
        client.publish(&name, &name, &req).await;
        ids.push(msg_id);
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let queue = name.clone();
    let counts = tokio::task::spawn_blocking(move || queue_counts(&queue))
        .await
        .unwrap();
    assert_eq!(
        counts,
        (1, 1),
        "basic.qos(1): one running, one waiting in the queue"
    );

    let mut answered = BTreeSet::new();
    for _ in 0..2 {
        let reply = client.next_reply(REPLY_WAIT).await.expect("missing reply");
        assert_eq!(reply.inner["result"], "slept");
        answered.insert(reply.inner["_msg_id"].as_str().unwrap().to_string());
    }
    assert_eq!(answered, ids.into_iter().collect());

    server.finish(&client).await;
    client.delete_reply_queue().await;
}
