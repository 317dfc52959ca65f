// SPDX-License-Identifier: Apache-2.0
//! A minimal oslo.messaging RPC client over lapin, publishing requests exactly like
//! oslo.messaging's `RPCClient` (`oslo_messaging/rpc/client.py`: 2.0 envelope, `_context_*`
//! keys, `_unique_id`, `_msg_id`/`_reply_q`/`_timeout` on calls, the call timeout as
//! AMQP `expiration`) and reading the replies on its own reply queue. For tests that
//! must send what nova's own client cannot (malformed or hostile messages) or need
//! the raw replies (heartbeats, failures).
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicPublishOptions, QueueDeclareOptions,
    QueueDeleteOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{BasicProperties, Channel, Connection, ConnectionProperties, Consumer};
use nova_scheduler::rpc::envelope::{decompress, encode_envelope};
use serde_json::{json, Map, Value};

/// The shared broker's default vhost.
pub const AMQP_URL: &str = "amqp://guest:guest@127.0.0.1:5672/%2f";
/// The token the client puts in every context: no log may show it.
pub const SECRET_TOKEN: &str = "gAAAAA-secret-token-do-not-log";
/// How long a call waits for its final reply.
pub const REPLY_WAIT: Duration = Duration::from_secs(20);

pub struct Reply {
    pub inner: Value,
    pub properties: BasicProperties,
    pub outer_keys: BTreeSet<String>,
}

pub struct TestClient {
    _connection: Connection,
    pub channel: Channel,
    pub reply_q: String,
    consumer: Consumer,
}

/// A connection to `url`.
pub async fn connect_to(url: &str) -> Connection {
    Connection::connect(
        url,
        ConnectionProperties::default().with_connection_name("rpc-test-client".into()),
    )
    .await
    .expect("RabbitMQ must run on 127.0.0.1:5672 (rabbitmq-server -detached)")
}

/// A connection to the shared broker's default vhost.
pub async fn connect() -> Connection {
    connect_to(AMQP_URL).await
}

impl TestClient {
    /// A client on the shared broker's default vhost.
    pub async fn new() -> Self {
        Self::on(AMQP_URL).await
    }

    /// A client on the broker (and vhost) of `url`.
    pub async fn on(url: &str) -> Self {
        let connection = connect_to(url).await;
        let channel = connection.create_channel().await.unwrap();
        let reply_q = format!("reply_{}", uuid::Uuid::new_v4().simple());
        let mut args = FieldTable::default();
        args.insert("x-expires".into(), AMQPValue::LongInt(1_800_000));
        channel
            .queue_declare(
                reply_q.as_str().into(),
                QueueDeclareOptions::default(),
                args,
            )
            .await
            .unwrap();
        let consumer = channel
            .basic_consume(
                reply_q.as_str().into(),
                "1".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        Self {
            _connection: connection,
            channel,
            reply_q,
            consumer,
        }
    }

    /// Inner request dict as oslo builds it (context keys, `_unique_id`).
    pub fn request(method: &str, args: Value, version: Option<&str>) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("method".into(), json!(method));
        m.insert("args".into(), args);
        if let Some(v) = version {
            m.insert("version".into(), json!(v));
        }
        m.insert(
            "_unique_id".into(),
            json!(uuid::Uuid::new_v4().simple().to_string()),
        );
        m.insert("_context_request_id".into(), json!("req-test-1234"));
        m.insert("_context_global_request_id".into(), Value::Null);
        m.insert("_context_user_id".into(), json!("u1"));
        m.insert("_context_project_id".into(), json!("p1"));
        m.insert("_context_auth_token".into(), json!(SECRET_TOKEN));
        m.insert("_context_service_catalog".into(), json!([]));
        m.insert("_context_roles".into(), json!(["member"]));
        m
    }

    /// Turn a request into a call: `_msg_id`, `_reply_q`, `_timeout`.
    pub fn as_call(
        &self,
        mut m: Map<String, Value>,
        timeout: Value,
    ) -> (Map<String, Value>, String) {
        let msg_id = uuid::Uuid::new_v4().simple().to_string();
        m.insert("_msg_id".into(), json!(msg_id));
        m.insert("_reply_q".into(), json!(self.reply_q));
        m.insert("_timeout".into(), timeout);
        (m, msg_id)
    }

    pub fn properties(compressed: bool, expiration: Option<&str>) -> BasicProperties {
        let mut headers = FieldTable::default();
        if compressed {
            headers.insert(
                "compression".into(),
                AMQPValue::LongString("application/x-gzip".into()),
            );
        }
        let mut p = BasicProperties::default()
            .with_content_type("application/json".into())
            .with_content_encoding("utf-8".into())
            .with_delivery_mode(2)
            .with_priority(0)
            .with_headers(headers);
        if let Some(e) = expiration {
            p = p.with_expiration(e.into());
        }
        p
    }

    pub async fn publish_raw(
        &self,
        exchange: &str,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) {
        self.channel
            .basic_publish(
                exchange.into(),
                routing_key.into(),
                BasicPublishOptions::default(),
                body,
                properties,
            )
            .await
            .unwrap()
            .await
            .unwrap();
    }

    pub async fn publish(&self, exchange: &str, routing_key: &str, inner: &Map<String, Value>) {
        let is_call = inner.contains_key("_msg_id");
        let body = encode_envelope(&Value::Object(inner.clone()));
        let props = Self::properties(false, is_call.then_some("60000"));
        self.publish_raw(exchange, routing_key, &body, props).await;
    }

    /// The next message on the reply queue, decoded (acked like oslo's reply listener).
    pub async fn next_reply(&mut self, wait: Duration) -> Option<Reply> {
        let delivery = tokio::time::timeout(wait, self.consumer.next())
            .await
            .ok()??
            .unwrap();
        delivery.ack(BasicAckOptions::default()).await.unwrap();
        let compressed = delivery
            .properties
            .headers()
            .as_ref()
            .is_some_and(|h| h.contains_key("compression"));
        let body = if compressed {
            decompress(
                "application/x-gzip",
                &delivery.data,
                nova_scheduler::rpc::envelope::DEFAULT_MAX_MESSAGE_BYTES,
            )
            .unwrap()
        } else {
            delivery.data.clone()
        };
        let outer: Value = serde_json::from_slice(&body).unwrap();
        let outer_keys = outer.as_object().unwrap().keys().cloned().collect();
        assert_eq!(outer["oslo.version"], "2.0");
        let inner = serde_json::from_str(outer["oslo.message"].as_str().unwrap()).unwrap();
        Some(Reply {
            inner,
            properties: delivery.properties,
            outer_keys,
        })
    }

    /// All replies to one call, up to and including the `ending` one.
    pub async fn replies_until_ending(&mut self, msg_id: &str) -> Vec<Reply> {
        let mut out = Vec::new();
        let deadline = Instant::now() + REPLY_WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let reply = self
                .next_reply(left)
                .await
                .unwrap_or_else(|| panic!("no final reply for {msg_id}"));
            assert_eq!(reply.inner["_msg_id"], msg_id);
            let ending = reply.inner["ending"] == true;
            out.push(reply);
            if ending {
                return out;
            }
        }
    }

    /// Call `method` on the topic and return the final reply.
    pub async fn call(
        &mut self,
        exchange: &str,
        topic: &str,
        method: &str,
        args: Value,
        version: &str,
    ) -> Reply {
        let (req, msg_id) = self.as_call(Self::request(method, args, Some(version)), json!(60));
        self.publish(exchange, topic, &req).await;
        self.replies_until_ending(&msg_id).await.pop().unwrap()
    }

    pub async fn delete_reply_queue(&self) {
        self.channel
            .queue_delete(self.reply_q.as_str().into(), QueueDeleteOptions::default())
            .await
            .unwrap();
    }
}

/// The failure dict of a failed call's final reply.
pub fn failure_of(reply: &Reply) -> Value {
    assert_eq!(reply.inner["result"], Value::Null);
    serde_json::from_str(
        reply.inner["failure"]
            .as_str()
            .expect("failure is a string"),
    )
    .unwrap()
}
