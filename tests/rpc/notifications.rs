// SPDX-License-Identifier: Apache-2.0
//! `scheduler.select_destinations.start` / `.end`, legacy and versioned, against nova.
//!
//! The oracle (`tests/oracle/notification_oracle.py`, the pinned venv) builds RequestSpec
//! primitives with nova's objects and runs the statements of nova 34's
//! `SchedulerManager._select_destinations` with oslo.messaging's `test` driver; we build
//! ours from the same primitives and context and compare every field but the per-message
//! ids and clocks.
//!
//! Then our AMQP publisher sends them through the real RabbitMQ (messaging and
//! messagingv2 drivers) to oslo.messaging's own notification listener
//! (`tests/oracle/notification_listener.py`), which must hand its endpoint exactly what
//! nova sends.

use crate::notification_check as check;
use crate::venv;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapin::options::{ExchangeDeleteOptions, QueueDeleteOptions};
use lapin::{Connection, ConnectionProperties};
use nova_scheduler::notifications::{
    NotificationSink, NotifiedSpec, Notifier, NotifierSettings, Phase,
};
use nova_scheduler::release::NovaSeries;
use nova_scheduler::rpc::notifier::AmqpNotificationPublisher;
use nova_scheduler::rpc::{RequestContext, RpcServerOptions};
use serde_json::{Map, Value};

const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
const HOST: &str = "sched-host-7";

fn python() -> PathBuf {
    venv::find().join("bin/python")
}

/// The cases and nova's notifications for them (4 per case).
fn oracle_cases() -> (Vec<Value>, Vec<Value>) {
    let samples = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src/rpc/testdata");
    let o = check::oracle_script();
    let cases = check::run_python(
        &python(),
        &[o.to_str().unwrap(), "cases", samples.to_str().unwrap()],
        "",
    );
    let expected = check::nova_expects(&python(), &cases, HOST);
    let cases = cases.as_array().unwrap().clone();
    assert_eq!(cases.len(), expected.len());
    assert!(cases.len() >= 15, "the oracle made {} cases", cases.len());
    (cases, expected)
}

#[derive(Default)]
struct Capture(Mutex<Vec<(String, Value, bool)>>);

impl NotificationSink for Capture {
    fn send(&self, routing_key: String, message: Value, envelope: bool) {
        self.0
            .lock()
            .unwrap()
            .push((routing_key, message, envelope));
    }
}

fn settings(drivers: &[&str], legacy_topic: &str, versioned_topic: &str) -> NotifierSettings {
    let names: Vec<String> = drivers.iter().map(|d| d.to_string()).collect();
    let (s, unsupported) = NotifierSettings::new(
        HOST,
        &names,
        &[legacy_topic.to_string()],
        "both",
        &[versioned_topic.to_string()],
    );
    assert!(unsupported.is_empty());
    s
}

/// What our manager does around a successful selection.
fn emit_case(notifier: &Notifier, case: &Value) {
    let ctx: Map<String, Value> = case["context"].as_object().unwrap().clone();
    let ctx = RequestContext::from_map(ctx);
    let mut spec = NotifiedSpec::new(case["spec"].clone(), NovaSeries::NEWEST);
    notifier.select_destinations(&ctx, &mut spec, Phase::Start);
    if let Some(uuid) = case["instance_uuid"].as_str() {
        spec.set_instance_uuid(uuid);
    }
    notifier.select_destinations(&ctx, &mut spec, Phase::End);
}

#[test]
fn payloads_and_context_match_novas() {
    let (cases, expected) = oracle_cases();
    for (case, nova) in cases.iter().zip(&expected) {
        let name = case["name"].as_str().unwrap();
        let sink = Arc::new(Capture::default());
        let notifier = Notifier::new(
            settings(&["messaging"], "notifications", "versioned_notifications"),
            Some(sink.clone() as Arc<dyn NotificationSink>),
        );
        emit_case(&notifier, case);
        let sent = sink.0.lock().unwrap();
        let nova = nova.as_array().unwrap();
        assert_eq!(sent.len(), 4, "case {name}");
        assert_eq!(nova.len(), 4, "case {name}: nova sent {}", nova.len());
        let keys: Vec<&str> = sent.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(
            keys,
            [
                "notifications.info",
                "versioned_notifications.info",
                "notifications.info",
                "versioned_notifications.info"
            ]
        );
        for (i, ((_, wire, envelope), n)) in sent.iter().zip(nova).enumerate() {
            assert!(!envelope, "the messaging driver sends format 1.0");
            assert_eq!(n["priority"], "INFO");
            let (ours, nova) = (check::wire_side(wire), check::nova_side(n));
            assert!(
                ours.0 == nova.0,
                "case {name}, notification {i}: message differs: {:#?}",
                check::diff(&ours.0, &nova.0)
            );
            let (oc, nc) = (Value::Object(ours.1), Value::Object(nova.1));
            assert!(
                oc == nc,
                "case {name}, notification {i}: context differs: {:#?}",
                check::diff(&oc, &nc)
            );
        }
    }
}

fn listener_conf(dir: &std::path::Path) -> PathBuf {
    let path = dir.join("listener.conf");
    std::fs::write(
        &path,
        "[DEFAULT]\ntransport_url = rabbit://guest:guest@127.0.0.1:5672/\n",
    )
    .unwrap();
    path
}

async fn cleanup(exchange: &str, queues: &[String]) {
    let conn = Connection::connect(AMQP_URL, ConnectionProperties::default())
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    for q in queues {
        let _ = ch
            .queue_delete(q.as_str().into(), QueueDeleteOptions::default())
            .await;
    }
    let _ = ch
        .exchange_delete(exchange.into(), ExchangeDeleteOptions::default())
        .await;
    let _ = conn.close(200, "OK".into()).await;
}

/// Our publisher → RabbitMQ → oslo.messaging's notification listener, both message
/// formats, both notifiers: the listener's endpoint gets what nova sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oslo_listener_receives_what_nova_sends() {
    let (cases, expected) = oracle_cases();
    // Three cases keep the run short: a sample, NUMA + PCI, a server group.
    let picked: Vec<usize> = cases
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            matches!(
                c["name"].as_str(),
                Some("multi_instance_group" | "numa_pci_no_uuids" | "destination")
            )
        })
        .map(|(i, _)| i)
        .collect();
    assert_eq!(picked.len(), 3);

    let tag = uuid::Uuid::new_v4().simple().to_string();
    let exchange = format!("nsrs_notify_{tag}");
    let legacy_topic = format!("n_{tag}");
    let versioned_topic = format!("v_{tag}");
    let queues = vec![
        format!("{legacy_topic}.info"),
        format!("{versioned_topic}.info"),
    ];
    let opts = RpcServerOptions {
        control_exchange: exchange.clone(),
        ..Default::default()
    };
    let publisher = AmqpNotificationPublisher::start(opts, -1).unwrap();
    let notifier = Notifier::new(
        settings(
            &["messaging", "messagingv2"],
            &legacy_topic,
            &versioned_topic,
        ),
        Some(publisher.clone() as Arc<dyn NotificationSink>),
    );
    // Sent before the listener starts: the queues our publisher declares keep them.
    for &i in &picked {
        emit_case(&notifier, &cases[i]);
    }
    publisher.close(Duration::from_secs(20)).await;

    let dir = std::env::temp_dir().join(format!("nsrs-notify-{tag}"));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = listener_conf(&dir);
    let want = picked.len() * 4 * 2;
    let script = check::listener_script();
    let mut child = Command::new(python())
        .arg(script)
        .arg("--config-file")
        .arg(&conf)
        .args(["--exchange", &exchange])
        .args(["--topics", &format!("{legacy_topic},{versioned_topic}")])
        .args(["--count", &want.to_string(), "--timeout", "40"])
        .env("PYTHONWARNINGS", "ignore")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let out = tokio::task::spawn_blocking(move || {
        let lines: Vec<String> = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect();
        lines
    })
    .await
    .unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    cleanup(&exchange, &queues).await;
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        status.success(),
        "listener failed ({status}):\n{err}\n{out:?}"
    );
    assert_eq!(out.first().map(String::as_str), Some("READY"));
    let got: Vec<Value> = serde_json::from_str(out.last().unwrap()).unwrap();
    assert_eq!(got.len(), want);

    // Expected: each of nova's notifications once per driver (format 1.0 and 2.0).
    let mut expected_all = Vec::new();
    for &i in &picked {
        for n in expected[i].as_array().unwrap() {
            for _driver in 0..2 {
                expected_all.push(check::nova_side(n));
            }
        }
    }
    check::assert_same_multiset(got.iter().map(check::listener_side).collect(), expected_all);
}
