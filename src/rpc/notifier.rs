// SPDX-License-Identifier: Apache-2.0
//! The AMQP side of oslo.messaging's `messaging` / `messagingv2` notification drivers.
//!
//! Like the rabbit driver's `notify_send`: the control exchange (topic; durable and
//! auto-delete as the RPC exchange) and, once per connection, a queue named after the
//! routing key `<topic>.<priority>` bound to it (so that notifications wait for a consumer
//! that starts later), then a publish with oslo's message properties.
//!
//! Sending never blocks the caller: messages go through a bounded queue to one task that
//! owns the connection. A full queue drops the message (logged). A failed publish is
//! retried on a new connection with the reconnect backoff, `retry` times (`-1` =
//! forever, as `[oslo_messaging_notifications] retry`), then dropped (logged).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapin::options::{
    BasicPublishOptions, ConfirmSelectOptions, ExchangeDeclareOptions, QueueBindOptions,
    QueueDeclareOptions,
};
use lapin::types::FieldTable;
use lapin::{Channel, Confirmation, Connection, ExchangeKind};
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::{debug, error, warn};

use super::envelope;
use super::options::RpcServerOptions;
use super::topology::topic_queue_arguments;
use super::transport::{Backoff, Connector};
use super::RpcError;

/// Notifications waiting for the publisher task; more are dropped.
pub const QUEUE_CAPACITY: usize = 1024;

struct Outgoing {
    routing_key: String,
    message: Value,
    envelope: bool,
}

/// Publishes notifications on its own connection (see the module doc).
pub struct AmqpNotificationPublisher {
    tx: Mutex<Option<mpsc::Sender<Outgoing>>>,
    task: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for AmqpNotificationPublisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpNotificationPublisher")
            .finish_non_exhaustive()
    }
}

impl AmqpNotificationPublisher {
    /// Starts the publisher task (it connects on the first notification). `opts` gives
    /// the brokers (the notification transport URL's), the control exchange, durability,
    /// TLS, compression and the reconnect backoff. Must run inside a Tokio runtime.
    pub fn start(opts: RpcServerOptions, retry: i64) -> Result<Arc<Self>, RpcError> {
        if opts.brokers.is_empty() {
            return Err(RpcError::Config("no broker for notifications".into()));
        }
        let compress = opts.compress_replies()?;
        let opts = Arc::new(opts);
        let connector = Connector::new(opts.clone(), "notify")?;
        let (tx, rx) = mpsc::channel(QUEUE_CAPACITY);
        let worker = Worker {
            opts,
            connector,
            compress,
            retry,
            session: None,
        };
        let task = tokio::spawn(worker.run(rx));
        Ok(Arc::new(AmqpNotificationPublisher {
            tx: Mutex::new(Some(tx)),
            task: Mutex::new(Some(task)),
        }))
    }

    /// Stops accepting notifications and waits up to `grace` for the queued ones.
    pub async fn close(&self, grace: Duration) {
        drop(self.tx.lock().unwrap_or_else(|e| e.into_inner()).take());
        let task = self.task.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut task) = task {
            if tokio::time::timeout(grace, &mut task).await.is_err() {
                warn!("notifications still queued at shutdown were dropped");
                task.abort();
            }
        }
    }

    /// Queues one message for `<topic>.<priority>` (`envelope`: messagingv2); never
    /// blocks: a full queue or a stopped publisher drops it, logged.
    pub fn publish(&self, routing_key: String, message: Value, envelope: bool) {
        let guard = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tx) = guard.as_ref() else {
            debug!(routing_key, "notifier closed; notification dropped");
            return;
        };
        let event_type = message
            .get("event_type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if let Err(e) = tx.try_send(Outgoing {
            routing_key,
            message,
            envelope,
        }) {
            let reason = match e {
                mpsc::error::TrySendError::Full(_) => "the notification queue is full",
                mpsc::error::TrySendError::Closed(_) => "the notifier has stopped",
            };
            crate::observe::metrics().notifications_dropped.inc();
            warn!(event_type, reason, "notification dropped");
        }
    }
}

struct Session {
    connection: Connection,
    channel: Channel,
    exchange_declared: bool,
    queues_declared: HashSet<String>,
}

struct Worker {
    opts: Arc<RpcServerOptions>,
    connector: Connector,
    compress: bool,
    retry: i64,
    session: Option<Session>,
}

impl Worker {
    async fn run(mut self, mut rx: mpsc::Receiver<Outgoing>) {
        while let Some(out) = rx.recv().await {
            let mut failures: i64 = 0;
            let mut backoff = Backoff::new(&self.opts);
            loop {
                match self.publish(&out).await {
                    Ok(()) => break,
                    Err(e) => {
                        if let Some(s) = self.session.take() {
                            let _ = s.connection.close(320, "reconnecting".into()).await;
                        }
                        failures += 1;
                        if self.retry >= 0 && failures > self.retry {
                            crate::observe::metrics().notifications_dropped.inc();
                            error!(
                                routing_key = %out.routing_key, error = %e,
                                "Could not send notification; dropped"
                            );
                            break;
                        }
                        let delay = backoff.next_delay();
                        warn!(
                            routing_key = %out.routing_key, error = %e, retry_in = ?delay,
                            "could not send notification; retrying"
                        );
                        tokio::time::sleep(delay).await;
                    }
                }
            }
        }
        if let Some(s) = self.session.take() {
            let _ = s.channel.close(200, "OK".into()).await;
            let _ = s.connection.close(200, "OK".into()).await;
        }
    }

    async fn session(&mut self) -> Result<&mut Session, RpcError> {
        let alive = self
            .session
            .as_ref()
            .is_some_and(|s| s.connection.status().connected() && s.channel.status().connected());
        if !alive {
            self.session = None;
            let connection = self.connector.connect_round().await?;
            let channel = connection
                .create_channel()
                .await
                .map_err(RpcError::amqp("channel.open (notify)"))?;
            channel
                .confirm_select(ConfirmSelectOptions { nowait: false })
                .await
                .map_err(RpcError::amqp("confirm.select (notify)"))?;
            self.session = Some(Session {
                connection,
                channel,
                exchange_declared: false,
                queues_declared: HashSet::new(),
            });
        }
        Ok(self.session.as_mut().expect("just set"))
    }

    async fn publish(&mut self, out: &Outgoing) -> Result<(), RpcError> {
        let opts = self.opts.clone();
        let durable = opts.topic_durable();
        let exchange = opts.control_exchange.clone();
        let compress = self.compress;
        let session = self.session().await?;
        if !session.exchange_declared {
            session
                .channel
                .exchange_declare(
                    exchange.as_str().into(),
                    ExchangeKind::Topic,
                    ExchangeDeclareOptions {
                        durable,
                        auto_delete: opts.auto_delete,
                        ..Default::default()
                    },
                    FieldTable::default(),
                )
                .await
                .map_err(RpcError::amqp("exchange.declare (notify)"))?;
            session.exchange_declared = true;
        }
        if !session.queues_declared.contains(&out.routing_key) {
            session
                .channel
                .queue_declare(
                    out.routing_key.as_str().into(),
                    QueueDeclareOptions {
                        durable,
                        auto_delete: opts.auto_delete,
                        ..Default::default()
                    },
                    topic_queue_arguments(&opts),
                )
                .await
                .map_err(RpcError::amqp("queue.declare (notify)"))?;
            session
                .channel
                .queue_bind(
                    out.routing_key.as_str().into(),
                    exchange.as_str().into(),
                    out.routing_key.as_str().into(),
                    QueueBindOptions::default(),
                    FieldTable::default(),
                )
                .await
                .map_err(RpcError::amqp("queue.bind (notify)"))?;
            session.queues_declared.insert(out.routing_key.clone());
        }
        let body = if out.envelope {
            envelope::encode_envelope(&out.message)
        } else {
            out.message.to_string().into_bytes()
        };
        let body = if compress {
            envelope::compress_zlib(&body)
        } else {
            body
        };
        let confirmation = session
            .channel
            .basic_publish(
                exchange.as_str().into(),
                out.routing_key.as_str().into(),
                BasicPublishOptions::default(),
                &body,
                envelope::reply_properties(compress),
            )
            .await
            .map_err(RpcError::amqp("basic.publish (notify)"))?
            .await
            .map_err(RpcError::amqp("basic.publish (notify)"))?;
        match confirmation {
            Confirmation::Nack(_) => Err(RpcError::Nacked("notification")),
            _ => {
                debug!(routing_key = %out.routing_key, "sent notification");
                Ok(())
            }
        }
    }
}
