// SPDX-License-Identifier: Apache-2.0
//! Exchanges, queues and bindings of an oslo.messaging RPC server (the rabbit driver's
//! consumers in `oslo_messaging/_drivers/impl_rabbit.py`, declared by `amqpdriver.py`).
//!
//! With `Target(topic=T, server=S)` on control exchange `E`, in this order:
//! 1. topic exchange `E` (durable D, auto_delete A), queue `T` (D, A), bound with key `T`;
//! 2. the same exchange again, queue `T.S` (D, A), bound with key `T.S`;
//! 3. fanout exchange `T_fanout` (durable TQ, auto_delete **true**), private queue
//!    `T_fanout_<uuid4 hex>` (durable TQ, auto_delete false, `x-expires`), bound with key `T`;
//!
//! then `basic.consume` on the three queues with tags `1`, `2`, `3`, `no_ack = false`.
//! Every declare is synchronous, non-passive, never exclusive.

use lapin::options::{
    BasicConsumeOptions, BasicQosOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Channel, Connection, Consumer, ExchangeKind};

use super::options::RpcServerOptions;
use super::RpcError;

/// Names of everything the server declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Control exchange (`nova`), type topic.
    pub exchange: String,
    /// Shared topic queue (`scheduler`).
    pub topic_queue: String,
    /// Server queue (`scheduler.<host>`).
    pub server_queue: String,
    /// Fanout exchange (`scheduler_fanout`): not prefixed by the control exchange.
    pub fanout_exchange: String,
    /// Private fanout queue (`scheduler_fanout_<uuid4 hex>`), deleted at shutdown.
    pub fanout_queue: String,
}

impl Topology {
    /// Names for these options, with a fresh fanout queue suffix.
    pub fn new(opts: &RpcServerOptions) -> Self {
        Self::with_fanout_suffix(opts, &uuid::Uuid::new_v4().simple().to_string())
    }

    /// Names for these options with a given fanout queue suffix.
    pub fn with_fanout_suffix(opts: &RpcServerOptions, suffix: &str) -> Self {
        Self {
            exchange: opts.control_exchange.clone(),
            topic_queue: opts.topic.clone(),
            server_queue: format!("{}.{}", opts.topic, opts.server),
            fanout_exchange: format!("{}_fanout", opts.topic),
            fanout_queue: format!("{}_fanout_{suffix}", opts.topic),
        }
    }
}

/// An AMQP integer as py-amqp encodes it: signed 32-bit when it fits, else 64-bit.
pub fn amqp_int(v: u64) -> AMQPValue {
    match i32::try_from(v) {
        Ok(i) => AMQPValue::LongInt(i),
        Err(_) => AMQPValue::LongLongInt(i64::try_from(v).unwrap_or(i64::MAX)),
    }
}

/// oslo's `_get_queue_arguments` (without stream fanout), keys in oslo's order:
/// `x-ha-policy`; for quorum `x-queue-type`, `x-delivery-limit`, `x-max-in-memory-length`,
/// `x-max-in-memory-bytes` (each only when > 0); `x-expires` (ms) when the TTL is > 0.
pub fn queue_arguments(opts: &RpcServerOptions, quorum: bool, ttl_seconds: u32) -> FieldTable {
    let mut args = FieldTable::default();
    if opts.ha_queues {
        args.insert("x-ha-policy".into(), AMQPValue::LongString("all".into()));
    }
    if quorum {
        args.insert(
            "x-queue-type".into(),
            AMQPValue::LongString("quorum".into()),
        );
        for (key, value) in [
            ("x-delivery-limit", opts.quorum_delivery_limit),
            ("x-max-in-memory-length", opts.quorum_max_memory_length),
            ("x-max-in-memory-bytes", opts.quorum_max_memory_bytes),
        ] {
            if value > 0 {
                args.insert(key.into(), amqp_int(value.into()));
            }
        }
    }
    if ttl_seconds > 0 {
        args.insert("x-expires".into(), amqp_int(u64::from(ttl_seconds) * 1000));
    }
    args
}

/// Arguments of the topic and server queues: never `x-expires`.
pub fn topic_queue_arguments(opts: &RpcServerOptions) -> FieldTable {
    queue_arguments(opts, opts.quorum_queue, 0)
}

/// Arguments of the private fanout queue.
pub fn fanout_queue_arguments(opts: &RpcServerOptions) -> FieldTable {
    queue_arguments(opts, opts.transient_quorum_queue, opts.transient_queues_ttl)
}

/// One oslo consumer: exchange + queue + binding.
#[derive(Clone, Debug)]
pub(crate) struct ConsumerDecl {
    pub exchange: String,
    pub kind: ExchangeKind,
    pub exchange_durable: bool,
    pub exchange_auto_delete: bool,
    pub queue: String,
    pub queue_durable: bool,
    pub queue_auto_delete: bool,
    pub arguments: FieldTable,
    pub routing_key: String,
}

/// The three consumers of an RPC server, in declaration (and consumer tag) order.
pub(crate) fn consumer_decls(opts: &RpcServerOptions, topo: &Topology) -> [ConsumerDecl; 3] {
    let d = opts.topic_durable();
    let topic = |queue: &str| ConsumerDecl {
        exchange: topo.exchange.clone(),
        kind: ExchangeKind::Topic,
        exchange_durable: d,
        exchange_auto_delete: opts.auto_delete,
        queue: queue.to_string(),
        queue_durable: d,
        queue_auto_delete: opts.auto_delete,
        arguments: topic_queue_arguments(opts),
        routing_key: queue.to_string(),
    };
    [
        topic(&topo.topic_queue),
        topic(&topo.server_queue),
        ConsumerDecl {
            exchange: topo.fanout_exchange.clone(),
            kind: ExchangeKind::Fanout,
            exchange_durable: opts.transient_quorum_queue,
            exchange_auto_delete: true,
            queue: topo.fanout_queue.clone(),
            queue_durable: opts.transient_quorum_queue,
            queue_auto_delete: false,
            arguments: fanout_queue_arguments(opts),
            routing_key: topo.topic_queue.clone(),
        },
    ]
}

/// A new channel on the listener connection, with `basic.qos` when prefetch > 0.
pub(crate) async fn open_listener_channel(
    conn: &Connection,
    opts: &RpcServerOptions,
) -> Result<Channel, RpcError> {
    let channel = conn
        .create_channel()
        .await
        .map_err(RpcError::amqp("channel.open"))?;
    if opts.qos_prefetch_count > 0 {
        channel
            .basic_qos(opts.qos_prefetch_count, BasicQosOptions { global: false })
            .await
            .map_err(RpcError::amqp("basic.qos"))?;
    }
    Ok(channel)
}

async fn declare_one(channel: &Channel, c: &ConsumerDecl) -> Result<(), lapin::Error> {
    channel
        .exchange_declare(
            c.exchange.as_str().into(),
            c.kind.clone(),
            ExchangeDeclareOptions {
                passive: false,
                durable: c.exchange_durable,
                auto_delete: c.exchange_auto_delete,
                internal: false,
                nowait: false,
            },
            FieldTable::default(),
        )
        .await?;
    channel
        .queue_declare(
            c.queue.as_str().into(),
            QueueDeclareOptions {
                passive: false,
                durable: c.queue_durable,
                exclusive: false,
                auto_delete: c.queue_auto_delete,
                nowait: false,
            },
            c.arguments.clone(),
        )
        .await?;
    channel
        .queue_bind(
            c.queue.as_str().into(),
            c.exchange.as_str().into(),
            c.routing_key.as_str().into(),
            QueueBindOptions { nowait: false },
            FieldTable::default(),
        )
        .await
}

fn is_durable_mismatch(e: &lapin::Error) -> bool {
    match e.kind() {
        lapin::ErrorKind::ProtocolError(amqp) => amqp
            .get_message()
            .as_str()
            .contains("PRECONDITION_FAILED - inequivalent arg 'durable'"),
        _ => false,
    }
}

/// Declare the three consumers' entities. Like oslo, a 406 "inequivalent arg 'durable'"
/// (the entity exists with the other durability) re-declares that consumer's exchange and
/// queue non-durable on a fresh channel; any other error is returned. Returns the channel
/// to consume on (a new one after a fallback, since the broker closed the old one).
pub(crate) async fn declare_all(
    conn: &Connection,
    mut channel: Channel,
    opts: &RpcServerOptions,
    topo: &Topology,
) -> Result<Channel, RpcError> {
    for decl in consumer_decls(opts, topo) {
        match declare_one(&channel, &decl).await {
            Ok(()) => {}
            Err(e) if is_durable_mismatch(&e) => {
                tracing::warn!(
                    queue = %decl.queue, exchange = %decl.exchange, error = %e,
                    "queue could not be declared because of conflicting configurations; \
                     retrying non-durable as oslo.messaging does"
                );
                channel = open_listener_channel(conn, opts).await?;
                let fallback = ConsumerDecl {
                    exchange_durable: false,
                    queue_durable: false,
                    ..decl
                };
                declare_one(&channel, &fallback)
                    .await
                    .map_err(RpcError::amqp("declare (non-durable fallback)"))?;
            }
            Err(e) => return Err(RpcError::amqp("declare")(e)),
        }
    }
    Ok(channel)
}

/// `basic.consume` on the three queues with tags `1`, `2`, `3`, acknowledgements on.
pub(crate) async fn consume_all(
    channel: &Channel,
    opts: &RpcServerOptions,
    topo: &Topology,
) -> Result<Vec<Consumer>, RpcError> {
    let mut args = FieldTable::default();
    if opts.enable_cancel_on_failover {
        args.insert("x-cancel-on-ha-failover".into(), AMQPValue::Boolean(true));
    }
    let mut consumers = Vec::with_capacity(3);
    for (i, queue) in [&topo.topic_queue, &topo.server_queue, &topo.fanout_queue]
        .into_iter()
        .enumerate()
    {
        let consumer = channel
            .basic_consume(
                queue.as_str().into(),
                (i + 1).to_string().into(),
                BasicConsumeOptions {
                    no_local: false,
                    no_ack: false,
                    exclusive: false,
                    nowait: false,
                },
                args.clone(),
            )
            .await
            .map_err(RpcError::amqp("basic.consume"))?;
        consumers.push(consumer);
    }
    Ok(consumers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(t: &FieldTable) -> Vec<String> {
        t.inner().keys().map(|k| k.as_str().to_string()).collect()
    }

    #[test]
    fn default_topology_matches_oslo() {
        let opts = RpcServerOptions {
            server: "host1".into(),
            ..Default::default()
        };
        let topo = Topology::with_fanout_suffix(&opts, "0123456789abcdef0123456789abcdef");
        assert_eq!(topo.exchange, "nova");
        assert_eq!(topo.topic_queue, "scheduler");
        assert_eq!(topo.server_queue, "scheduler.host1");
        assert_eq!(topo.fanout_exchange, "scheduler_fanout");
        assert_eq!(
            topo.fanout_queue,
            "scheduler_fanout_0123456789abcdef0123456789abcdef"
        );
        let [t, s, f] = consumer_decls(&opts, &topo);
        for c in [&t, &s] {
            assert!(matches!(c.kind, ExchangeKind::Topic));
            assert!(!c.exchange_durable && !c.exchange_auto_delete);
            assert!(!c.queue_durable && !c.queue_auto_delete);
            assert!(c.arguments.inner().is_empty());
            assert_eq!(c.routing_key, c.queue);
        }
        assert!(matches!(f.kind, ExchangeKind::Fanout));
        assert!(!f.exchange_durable && f.exchange_auto_delete);
        assert!(!f.queue_durable && !f.queue_auto_delete);
        assert_eq!(f.routing_key, "scheduler");
        assert_eq!(
            f.arguments.inner().get("x-expires"),
            Some(&AMQPValue::LongInt(1_800_000))
        );
    }

    #[test]
    fn quorum_and_ha_arguments_in_oslo_order() {
        let opts = RpcServerOptions {
            durable_queues: true,
            quorum_queue: true,
            transient_quorum_queue: true,
            quorum_delivery_limit: 5,
            quorum_max_memory_bytes: 1024,
            transient_queues_ttl: 0,
            ..Default::default()
        };
        let topic = topic_queue_arguments(&opts);
        assert_eq!(
            keys(&topic),
            // FieldTable is sorted; the wire order is irrelevant to RabbitMQ.
            vec!["x-delivery-limit", "x-max-in-memory-bytes", "x-queue-type"]
        );
        assert_eq!(
            topic.inner().get("x-delivery-limit"),
            Some(&AMQPValue::LongInt(5))
        );
        let fanout = fanout_queue_arguments(&opts);
        assert!(fanout.contains_key("x-queue-type") && !fanout.contains_key("x-expires"));
        let [t, _, f] = consumer_decls(&opts, &Topology::new(&opts));
        assert!(t.exchange_durable && t.queue_durable);
        assert!(f.exchange_durable && f.queue_durable && f.exchange_auto_delete);

        let ha = RpcServerOptions {
            ha_queues: true,
            ..Default::default()
        };
        assert_eq!(keys(&topic_queue_arguments(&ha)), vec!["x-ha-policy"]);
        assert_eq!(
            keys(&fanout_queue_arguments(&ha)),
            vec!["x-expires", "x-ha-policy"]
        );
        assert_eq!(
            amqp_int(3_000_000_000),
            AMQPValue::LongLongInt(3_000_000_000)
        );
    }
}
