// SPDX-License-Identifier: Apache-2.0
//! Golden tests against messages captured from a real nova 34.0.0 deployment
//! (`testdata/*.json`, captured from RabbitMQ's firehose: each
//! with its AMQP properties, raw body and decoded inner message).

use std::collections::BTreeSet;

use lapin::types::{AMQPValue, FieldTable};
use lapin::BasicProperties;
use serde_json::Value;

use super::envelope::{self, decode_delivery};
use super::failure::RemoteError;

const REQUESTS: &[(&str, &str)] = &[
    (
        "single_instance",
        include_str!("testdata/single_instance.request.json"),
    ),
    (
        "multi_instance_group",
        include_str!("testdata/multi_instance_group.request.json"),
    ),
    (
        "hints_image_props_az",
        include_str!("testdata/hints_image_props_az.request.json"),
    ),
    (
        "novalidhost",
        include_str!("testdata/novalidhost.request.json"),
    ),
];

const REPLIES: &[(&str, &str)] = &[
    (
        "single_instance",
        include_str!("testdata/single_instance.reply.json"),
    ),
    (
        "multi_instance_group",
        include_str!("testdata/multi_instance_group.reply.json"),
    ),
    (
        "hints_image_props_az",
        include_str!("testdata/hints_image_props_az.reply.json"),
    ),
    (
        "novalidhost",
        include_str!("testdata/novalidhost.reply.json"),
    ),
];

/// AMQP properties from a sample's `properties` object.
fn properties_of(p: &Value) -> BasicProperties {
    let mut props = BasicProperties::default();
    if let Some(v) = p["content_type"].as_str() {
        props = props.with_content_type(v.into());
    }
    if let Some(v) = p["content_encoding"].as_str() {
        props = props.with_content_encoding(v.into());
    }
    if let Some(v) = p["delivery_mode"].as_u64() {
        props = props.with_delivery_mode(v as u8);
    }
    if let Some(v) = p["priority"].as_u64() {
        props = props.with_priority(v as u8);
    }
    if let Some(v) = p["expiration"].as_str() {
        props = props.with_expiration(v.into());
    }
    if let Some(h) = p["headers"].as_object() {
        let mut t = FieldTable::default();
        for (k, v) in h {
            t.insert(
                k.as_str().into(),
                AMQPValue::LongString(v.as_str().unwrap_or_default().into()),
            );
        }
        props = props.with_headers(t);
    }
    props
}

/// The sample-style property object of our properties (names as in the captures).
fn properties_json(p: &BasicProperties) -> Value {
    let mut o = serde_json::Map::new();
    if let Some(v) = p.content_type() {
        o.insert("content_type".into(), v.as_str().into());
    }
    if let Some(v) = p.content_encoding() {
        o.insert("content_encoding".into(), v.as_str().into());
    }
    if let Some(v) = p.delivery_mode() {
        o.insert("delivery_mode".into(), (*v).into());
    }
    if let Some(v) = p.priority() {
        o.insert("priority".into(), (*v).into());
    }
    if let Some(v) = p.expiration() {
        o.insert("expiration".into(), v.as_str().into());
    }
    if let Some(h) = p.headers() {
        let m: serde_json::Map<String, Value> = h
            .inner()
            .iter()
            .map(|(k, v)| {
                let s = match v {
                    AMQPValue::LongString(s) => String::from_utf8_lossy(s.as_bytes()).into_owned(),
                    other => format!("{other:?}"),
                };
                (k.as_str().to_string(), Value::String(s))
            })
            .collect();
        o.insert("headers".into(), Value::Object(m));
    }
    Value::Object(o)
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().unwrap().keys().cloned().collect()
}

#[test]
fn every_captured_request_decodes() {
    for (name, text) in REQUESTS {
        let sample: Value = serde_json::from_str(text).unwrap();
        let props = properties_of(&sample["properties"]);
        let body = sample["body_raw"].as_str().unwrap().as_bytes();
        let req = decode_delivery(&props, body, envelope::DEFAULT_MAX_MESSAGE_BYTES)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let inner = sample["oslo_message"].as_object().unwrap();

        assert_eq!(req.method, inner["method"], "{name}");
        assert_eq!(Value::Object(req.args.clone()), inner["args"], "{name}");
        assert_eq!(req.version, inner["version"].as_str().unwrap(), "{name}");
        assert_eq!(
            req.namespace, None,
            "{name}: nova's scheduler API has no namespace"
        );
        assert_eq!(req.msg_id.as_deref(), inner["_msg_id"].as_str(), "{name}");
        assert_eq!(req.reply_q.as_deref(), inner["_reply_q"].as_str(), "{name}");
        assert_eq!(
            req.unique_id.as_deref(),
            inner["_unique_id"].as_str(),
            "{name}"
        );
        assert_eq!(req.timeout.as_ref(), inner.get("_timeout"), "{name}");
        assert!(req.is_call(), "{name}");
        assert_eq!(
            req.heartbeat_interval(),
            Some(std::time::Duration::from_secs(30)),
            "{name}: _timeout 60"
        );
        // Every _context_ key, and nothing else, went into the context.
        for (k, v) in inner {
            if let Some(ck) = k.strip_prefix("_context_") {
                assert_eq!(req.context.get(ck), Some(v), "{name}: {k}");
            }
        }
        let n_ctx = inner.keys().filter(|k| k.starts_with("_context_")).count();
        assert_eq!(req.context.as_map().len(), n_ctx, "{name}");
        assert!(req.context.request_id().unwrap().starts_with("req-"));
        // The token is there but never shows in Debug output.
        let token = req.context.auth_token().unwrap();
        assert!(
            !format!("{req:?}").contains(token),
            "{name}: token leaked in Debug"
        );
    }
}

#[test]
fn reply_encoder_matches_captured_replies() {
    for (name, text) in REPLIES {
        let sample: Value = serde_json::from_str(text).unwrap();
        let inner = &sample["oslo_message"];
        let failure = inner["failure"].as_str().map(str::to_string);
        let ours = envelope::reply_message(
            inner["_msg_id"].as_str().unwrap(),
            inner["result"].clone(),
            failure,
            true,
        );
        assert_eq!(keys(&ours), keys(inner), "{name}: inner key set");
        assert_eq!(ours["ending"], true);

        let (body, props) = envelope::encode_reply(&ours, false);
        let outer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            keys(&outer),
            keys(&sample["body"]),
            "{name}: envelope key set"
        );
        assert_eq!(outer["oslo.version"], sample["body"]["oslo.version"]);
        assert!(outer["oslo.message"].is_string());
        let back: Value = serde_json::from_str(outer["oslo.message"].as_str().unwrap()).unwrap();
        assert_eq!(
            back["result"], inner["result"],
            "{name}: result survives the envelope"
        );
        assert_eq!(
            properties_json(&props),
            sample["properties"],
            "{name}: properties"
        );
        assert_eq!(
            sample["exchange"], "",
            "{name}: replies go to the default exchange"
        );
    }
}

#[test]
fn no_valid_host_failure_matches_capture() {
    let sample: Value =
        serde_json::from_str(include_str!("testdata/novalidhost.reply.json")).unwrap();
    let captured: Value =
        serde_json::from_str(sample["oslo_message"]["failure"].as_str().unwrap()).unwrap();
    let ours = RemoteError::no_valid_host("").to_failure_value("select_destinations");
    assert_eq!(keys(&ours), keys(&captured));
    for k in ["class", "module", "message", "args", "kwargs"] {
        assert_eq!(ours[k], captured[k], "{k}");
    }
    assert!(ours["tb"].as_array().unwrap().iter().all(Value::is_string));
    assert_eq!(sample["oslo_message"]["result"], Value::Null);
}
