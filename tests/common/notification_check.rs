// SPDX-License-Identifier: Apache-2.0
//! Comparing notifications with nova's (`tests/oracle/notification_oracle.py`): what is
//! compared, and what is not (per-message ids and clocks, checked for format only).
#![allow(dead_code)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Map, Value};

pub fn oracle_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/notification_oracle.py")
}

pub fn listener_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/oracle/notification_listener.py")
}

/// Runs `python args...` with `stdin`, returns the JSON of its last stdout line.
pub fn run_python(python: &Path, args: &[&str], stdin: &str) -> Value {
    let mut child = Command::new(python)
        .args(args)
        .env("PYTHONWARNINGS", "ignore")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python from the venv");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("")).expect("oracle JSON")
}

/// nova's four notifications per case (legacy start, versioned start, legacy end,
/// versioned end) for cases `[{spec, context, instance_uuid}]`, as sent by `host`.
pub fn nova_expects(python: &Path, cases: &Value, host: &str) -> Vec<Value> {
    let o = oracle_script();
    let v = run_python(
        python,
        &[o.to_str().unwrap(), "expect", "--host", host],
        &cases.to_string(),
    );
    v.as_array().unwrap().clone()
}

/// Python set iteration order is not stable across processes: `_changed_fields` is
/// compared sorted. nova's legacy `pci_requests` carries the caller's context object
/// (token included); ours a null.
pub fn normalize(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "_changed_fields" {
                    if let Value::Array(a) = x {
                        a.sort_by_key(|e| e.to_string());
                    }
                } else if k == "_context" {
                    assert!(x.is_object() || x.is_null(), "_context: {x}");
                    *x = Value::Null;
                } else {
                    normalize(x);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(normalize),
        _ => {}
    }
}

fn drop_keys(v: &mut Map<String, Value>, keys: &[&str]) {
    for k in keys {
        assert!(v.remove(*k).is_some(), "missing {k} in {v:?}");
    }
}

/// message_id is a uuid4, timestamps have Python's formats.
pub fn check_clocks(message_id: &Value, timestamp: &Value, context: &Map<String, Value>) {
    let id = message_id.as_str().unwrap();
    assert!(uuid::Uuid::parse_str(id).is_ok() && id.len() == 36, "{id}");
    let ts = timestamp.as_str().unwrap();
    assert!(
        chrono::NaiveDateTime::parse_from_str(ts, "%Y-%m-%d %H:%M:%S%.f").is_ok(),
        "timestamp {ts}"
    );
    let cts = context["timestamp"].as_str().unwrap();
    assert!(
        chrono::NaiveDateTime::parse_from_str(cts, "%Y-%m-%dT%H:%M:%S%.6f").is_ok(),
        "context timestamp {cts}"
    );
}

/// (message, context) of one of nova's notifications, without ids and clocks.
pub type Comparable = (Value, Map<String, Value>);

pub fn nova_side(expected: &Value) -> Comparable {
    let mut message = expected["message"].as_object().unwrap().clone();
    let mut context = expected["context"].as_object().unwrap().clone();
    drop_keys(&mut message, &["message_id", "timestamp"]);
    drop_keys(&mut context, &["timestamp"]);
    let mut m = Value::Object(message);
    normalize(&mut m);
    (m, context)
}

/// Our wire message (`_context_*` keys, `_unique_id`) as a comparable.
pub fn wire_side(wire: &Value) -> Comparable {
    let mut message = Map::new();
    let mut context = Map::new();
    for (k, v) in wire.as_object().unwrap() {
        if let Some(key) = k.strip_prefix("_context_") {
            context.insert(key.to_string(), v.clone());
        } else if k != "_unique_id" {
            message.insert(k.clone(), v.clone());
        }
    }
    check_clocks(&message["message_id"], &message["timestamp"], &context);
    drop_keys(&mut message, &["message_id", "timestamp"]);
    drop_keys(&mut context, &["timestamp"]);
    let mut m = Value::Object(message);
    normalize(&mut m);
    (m, context)
}

/// What `notification_listener.py` printed for one notification, as a comparable.
pub fn listener_side(got: &Value) -> Comparable {
    assert_eq!(got["priority"], "info");
    let mut message = Map::new();
    for k in ["publisher_id", "event_type", "payload"] {
        message.insert(k.to_string(), got[k].clone());
    }
    message.insert("priority".into(), Value::String("INFO".into()));
    let mut context = got["ctxt"].as_object().unwrap().clone();
    let md = &got["metadata"];
    check_clocks(&md["message_id"], &md["timestamp"], &context);
    context.remove("timestamp");
    // oslo's unpack_context adds these from the message's _msg_id/_reply_q/_timeout,
    // absent from a notification: None for anybody's notifications.
    for k in ["msg_id", "reply_q", "client_timeout"] {
        if context.get(k) == Some(&Value::Null) {
            context.remove(k);
        }
    }
    let mut m = Value::Object(message);
    normalize(&mut m);
    (m, context)
}

/// Every received notification is one of the expected ones, each used once, none left.
pub fn assert_same_multiset(got: Vec<Comparable>, mut expected: Vec<Comparable>) {
    assert_eq!(got.len(), expected.len(), "number of notifications");
    for g in got {
        match expected.iter().position(|e| *e == g) {
            Some(p) => {
                expected.remove(p);
            }
            None => {
                // The nearest expected one (fewest differing paths), for the message.
                let nearest = expected
                    .iter()
                    .map(|e| {
                        let mut d = diff(&g.0, &e.0);
                        d.extend(diff(
                            &Value::Object(g.1.clone()),
                            &Value::Object(e.1.clone()),
                        ));
                        d
                    })
                    .min_by_key(Vec::len)
                    .unwrap_or_default();
                panic!(
                    "received a notification nova would not send ({} {}); differences \
                     from the nearest of nova's: {nearest:#?}",
                    g.0["event_type"], g.0["publisher_id"]
                )
            }
        }
    }
}

/// The JSON paths where `a` and `b` differ (for readable failures).
pub fn diff(a: &Value, b: &Value) -> Vec<String> {
    fn walk(path: String, a: &Value, b: &Value, out: &mut Vec<String>) {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                for (k, v) in x {
                    match y.get(k) {
                        Some(w) => walk(format!("{path}.{k}"), v, w, out),
                        None => out.push(format!("{path}.{k}: only ours ({v})")),
                    }
                }
                for (k, w) in y {
                    if !x.contains_key(k) {
                        out.push(format!("{path}.{k}: only nova's ({w})"));
                    }
                }
            }
            (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
                for (i, (v, w)) in x.iter().zip(y).enumerate() {
                    walk(format!("{path}[{i}]"), v, w, out);
                }
            }
            _ if a != b => out.push(format!("{path}: ours {a} / nova's {b}")),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(String::new(), a, b, &mut out);
    out
}
