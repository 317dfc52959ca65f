// SPDX-License-Identifier: Apache-2.0
//! A read-only copy of the `scheduler` topic: one queue of its own, bound beside the
//! real consumers' (exchange `nova` with key `scheduler`, and the fanout exchange
//! `scheduler_fanout`), so every call and cast the scheduler gets is delivered here
//! too without touching nova's queues. Nothing is ever published: a copy is never
//! answered.
//!
//! The queue is non-durable and auto-delete (it goes with the consumer's
//! connection, a kill -9 included) and bounded (`x-max-length` with
//! `x-overflow = drop-head`): a stalled consumer holds at most that many messages
//! in the broker, the oldest dropped first.

use super::envelope::{self, Request};
use super::options::RpcServerOptions;
use super::topology::{amqp_int, Topology};
use super::transport::{Backoff, Connector};
use super::RpcError;
use futures_util::future::BoxFuture;
use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicQosOptions, ExchangeDeclareOptions,
    QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::{AMQPValue, FieldTable};
use lapin::{Connection, ExchangeKind};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;
use tracing::{info, warn};

/// What the tap's queue is and how many of its copies are handled at once.
#[derive(Debug, Clone)]
pub struct TapOptions {
    /// The queue's name (`scheduler_shadow.<host>`).
    pub queue: String,
    /// `x-max-length`: copies the broker keeps for a consumer that falls behind.
    pub max_length: u32,
    /// Copies in flight at once (`basic.qos` prefetch).
    pub prefetch: u16,
}

/// One copy as delivered.
#[derive(Debug)]
pub struct Copy {
    /// When it was received.
    pub received: Instant,
    /// The decoded request, or why it could not be decoded.
    pub request: Result<Request, envelope::DecodeError>,
}

/// Handles one copy; the copy is acknowledged when the handler's future ends.
pub type CopyHandler = Arc<dyn Fn(Copy) -> BoxFuture<'static, ()> + Send + Sync>;

/// Consumes the copies of `opts`' topic until `shutdown` resolves, reconnecting (and
/// declaring the queue again) after a broker failure as the RPC server does. The
/// `rpc_consuming` gauge (which `/readyz` reads) says whether the queue is consumed.
pub async fn run(
    opts: RpcServerOptions,
    tap: TapOptions,
    handler: CopyHandler,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RpcError> {
    opts.validate()?;
    let opts = Arc::new(opts);
    let connector = Connector::new(Arc::clone(&opts), "shadow")?;
    let mut backoff = Backoff::new(&opts);
    tokio::pin!(shutdown);
    loop {
        let round = async {
            let conn = connector.connect_round().await?;
            let consumed = consume(&conn, &opts, &tap, &handler).await;
            crate::observe::metrics().rpc_consuming.set(0);
            let _ = conn.close(200, "OK".into()).await;
            consumed
        };
        tokio::select! {
            () = &mut shutdown => {
                crate::observe::metrics().rpc_consuming.set(0);
                return Ok(());
            }
            ended = round => {
                match ended {
                    Err(e @ RpcError::Config(_)) => return Err(e),
                    Err(e) => warn!(error = %e, "the shadow's broker connection failed; reconnecting"),
                    Ok(()) => warn!("the broker closed the shadow's queue; reconnecting"),
                }
                crate::observe::metrics().reconnects.inc();
                let delay = backoff.next_delay();
                tokio::select! {
                    () = &mut shutdown => return Ok(()),
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// Declares the tap's queue and bindings on `conn` and handles copies until the
/// consumer ends.
async fn consume(
    conn: &Connection,
    opts: &RpcServerOptions,
    tap: &TapOptions,
    handler: &CopyHandler,
) -> Result<(), RpcError> {
    let channel = conn
        .create_channel()
        .await
        .map_err(RpcError::amqp("channel.open"))?;
    channel
        .basic_qos(tap.prefetch.max(1), BasicQosOptions { global: false })
        .await
        .map_err(RpcError::amqp("basic.qos"))?;
    let topo = Topology::new(opts);
    // The exchanges as nova's scheduler declares them (an equivalent declaration is
    // a no-op when they exist; a different durability is refused, as for nova).
    let durable = opts.topic_durable();
    for (exchange, kind, durable, auto_delete) in [
        (
            &topo.exchange,
            ExchangeKind::Topic,
            durable,
            opts.auto_delete,
        ),
        (
            &topo.fanout_exchange,
            ExchangeKind::Fanout,
            opts.transient_quorum_queue,
            true,
        ),
    ] {
        channel
            .exchange_declare(
                exchange.as_str().into(),
                kind,
                ExchangeDeclareOptions {
                    passive: false,
                    durable,
                    auto_delete,
                    internal: false,
                    nowait: false,
                },
                FieldTable::default(),
            )
            .await
            .map_err(RpcError::amqp("exchange.declare"))?;
    }
    let mut arguments = FieldTable::default();
    arguments.insert(
        "x-max-length".into(),
        amqp_int(u64::from(tap.max_length.max(1))),
    );
    arguments.insert(
        "x-overflow".into(),
        AMQPValue::LongString("drop-head".into()),
    );
    channel
        .queue_declare(
            tap.queue.as_str().into(),
            QueueDeclareOptions {
                passive: false,
                durable: false,
                exclusive: false,
                auto_delete: true,
                nowait: false,
            },
            arguments,
        )
        .await
        .map_err(RpcError::amqp("queue.declare"))?;
    for exchange in [&topo.exchange, &topo.fanout_exchange] {
        channel
            .queue_bind(
                tap.queue.as_str().into(),
                exchange.as_str().into(),
                topo.topic_queue.as_str().into(),
                QueueBindOptions { nowait: false },
                FieldTable::default(),
            )
            .await
            .map_err(RpcError::amqp("queue.bind"))?;
    }
    let mut consumer = channel
        .basic_consume(
            tap.queue.as_str().into(),
            "shadow".into(),
            BasicConsumeOptions::default(),
            FieldTable::default(),
        )
        .await
        .map_err(RpcError::amqp("basic.consume"))?;
    info!(queue = %tap.queue, exchange = %topo.exchange, routing_key = %topo.topic_queue,
        fanout = %topo.fanout_exchange, "consuming copies of the scheduler's calls (read-only)");
    crate::observe::metrics().rpc_consuming.set(1);
    while let Some(delivery) = consumer.next().await {
        let delivery = delivery.map_err(RpcError::amqp("basic.deliver"))?;
        let copy = Copy {
            received: Instant::now(),
            request: envelope::decode_delivery(
                &delivery.properties,
                &delivery.data,
                opts.max_message_bytes,
            ),
        };
        let handled = handler(copy);
        tokio::spawn(async move {
            handled.await;
            // A copy lost with its channel is only a copy: nothing waits on it.
            let _ = delivery.acker.ack(BasicAckOptions::default()).await;
        });
    }
    Ok(())
}
