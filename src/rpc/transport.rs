// SPDX-License-Identifier: Apache-2.0
//! Broker connections: failover over the shuffled broker list, oslo's reconnect backoff,
//! and the confirmed publisher used for replies and heartbeats.
//!
//! Like kombu's round-robin failover, a connection round tries every broker once, starting
//! with the one that worked last; the caller sleeps with [`Backoff`] between rounds:
//! `retry_interval`, growing by `retry_backoff` per failed round, capped at `interval_max`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lapin::options::{BasicPublishOptions, ConfirmSelectOptions};
use lapin::tcp::{OwnedIdentity, OwnedTLSConfig};
use lapin::uri::{AMQPAuthority, AMQPQueryString, AMQPScheme, AMQPUri, AMQPUserInfo};
use lapin::{BasicProperties, Channel, Confirmation, Connection, ConnectionProperties};
use rand::seq::SliceRandom;

use super::options::{BrokerAddress, RpcServerOptions};
use super::RpcError;

/// Per-attempt limit of the TCP connect (kombu's default connect timeout is 5 s).
const TCP_CONNECT_TIMEOUT_MS: u64 = 5_000;
/// Limit of a whole connection attempt (TCP, TLS, AMQP handshake).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);
/// The largest frame we accept (the broker may ask for less). lapin keeps send and
/// receive buffers of 32 frames per connection, filled when allocated: at
/// RabbitMQ's 128 KiB default that is 8 MiB per connection, most of an idle
/// daemon's heap. A request spec fits in one 32 KiB frame; a longer message is
/// split into body frames, as the AMQP protocol has it.
pub(crate) const FRAME_MAX: u32 = 32 * 1024;
/// Channels on the reply connection; each carries one publish at a time so that a
/// `basic.return` is always matched with its own confirm.
const REPLY_CHANNELS: usize = 4;

/// oslo/kombu reconnect delays: `interval_start + n * interval_step`, capped.
#[derive(Clone, Debug)]
pub(crate) struct Backoff {
    start: f64,
    step: f64,
    max: f64,
    round: u32,
}

impl Backoff {
    pub(crate) fn new(opts: &RpcServerOptions) -> Self {
        Self {
            start: opts.retry_interval,
            step: opts.retry_backoff,
            max: opts.interval_max,
            round: 0,
        }
    }

    /// The delay before the next round; grows on every call.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let secs = (self.start + self.step * f64::from(self.round)).min(self.max);
        self.round = self.round.saturating_add(1);
        Duration::from_secs_f64(secs.max(0.0))
    }

    pub(crate) fn reset(&mut self) {
        self.round = 0;
    }
}

/// Connects to one of the brokers, failing over in (shuffled) order.
pub(crate) struct Connector {
    opts: Arc<RpcServerOptions>,
    brokers: Vec<BrokerAddress>,
    cursor: Mutex<usize>,
    tls: Option<OwnedTLSConfig>,
    purpose: &'static str,
}

impl Connector {
    /// Shuffles the brokers once (as oslo does per connection) and loads TLS files.
    pub(crate) fn new(
        opts: Arc<RpcServerOptions>,
        purpose: &'static str,
    ) -> Result<Self, RpcError> {
        let mut brokers = opts.brokers.clone();
        brokers.shuffle(&mut rand::rng());
        let tls = opts.ssl.as_ref().map(load_tls).transpose()?;
        Ok(Self {
            opts,
            brokers,
            cursor: Mutex::new(0),
            tls,
            purpose,
        })
    }

    /// One round: every broker once, starting with the current one.
    pub(crate) async fn connect_round(&self) -> Result<Connection, RpcError> {
        let start = *self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        let mut last_error = String::new();
        for offset in 0..self.brokers.len() {
            let index = (start + offset) % self.brokers.len();
            let broker = &self.brokers[index];
            match self.connect_to(broker).await {
                Ok(conn) => {
                    *self.cursor.lock().unwrap_or_else(|e| e.into_inner()) = index;
                    tracing::info!(
                        broker = %broker.endpoint(), purpose = self.purpose,
                        heartbeat = conn.configuration().heartbeat(),
                        frame_max = conn.configuration().frame_max(),
                        "connected to AMQP broker"
                    );
                    return Ok(conn);
                }
                Err(e) => {
                    tracing::warn!(
                        broker = %broker.endpoint(), purpose = self.purpose, error = %e,
                        "AMQP broker is unreachable"
                    );
                    last_error = e;
                }
            }
        }
        *self.cursor.lock().unwrap_or_else(|e| e.into_inner()) = (start + 1) % self.brokers.len();
        Err(RpcError::Connect {
            brokers: self
                .brokers
                .iter()
                .map(BrokerAddress::endpoint)
                .collect::<Vec<_>>()
                .join(","),
            last_error,
        })
    }

    async fn connect_to(&self, broker: &BrokerAddress) -> Result<Connection, String> {
        let uri = amqp_uri(broker, &self.opts);
        let runtime = lapin::runtime::default_runtime().map_err(|e| e.to_string())?;
        let attempt = Connection::connect_uri_with_config(
            uri,
            connection_properties(),
            self.tls.clone().unwrap_or_default(),
            runtime,
        );
        match tokio::time::timeout(HANDSHAKE_TIMEOUT, attempt).await {
            Ok(Ok(conn)) => Ok(conn),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err(format!("timed out after {HANDSHAKE_TIMEOUT:?}")),
        }
    }
}

/// The broker URI lapin connects to: credentials, vhost (`""` → `/`), heartbeat, SASL.
pub(crate) fn amqp_uri(broker: &BrokerAddress, opts: &RpcServerOptions) -> AMQPUri {
    AMQPUri {
        scheme: if opts.ssl.is_some() {
            AMQPScheme::AMQPS
        } else {
            AMQPScheme::AMQP
        },
        authority: AMQPAuthority {
            userinfo: AMQPUserInfo {
                username: broker.username.clone(),
                password: broker.password.clone(),
            },
            host: broker.host.clone(),
            port: broker.port,
        },
        vhost: if broker.virtual_host.is_empty() {
            "/".into()
        } else {
            broker.virtual_host.clone()
        },
        query: AMQPQueryString {
            heartbeat: Some(opts.heartbeat_timeout_threshold),
            connection_timeout: Some(TCP_CONNECT_TIMEOUT_MS),
            frame_max: Some(FRAME_MAX),
            auth_mechanism: opts.login_mechanism(),
            ..AMQPQueryString::default()
        },
    }
}

/// `connection_name = "<argv0 basename>:<pid>:<uuid4>"`, as oslo names its connections.
fn connection_properties() -> ConnectionProperties {
    let argv0 = std::env::args()
        .next()
        .and_then(|a| {
            std::path::Path::new(&a)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "nova-scheduler-rs".into());
    let name = format!("{argv0}:{}:{}", std::process::id(), uuid::Uuid::new_v4());
    ConnectionProperties::default().with_connection_name(name.into())
}

fn load_tls(tls: &super::options::TlsOptions) -> Result<OwnedTLSConfig, RpcError> {
    let read = |what: &str, p: &std::path::Path| {
        std::fs::read(p)
            .map_err(|e| RpcError::Tls(format!("cannot read {what} {}: {e}", p.display())))
    };
    let cert_chain =
        match &tls.ca_file {
            Some(p) => Some(String::from_utf8(read("ssl_ca_file", p)?).map_err(|_| {
                RpcError::Tls(format!("ssl_ca_file {} is not PEM text", p.display()))
            })?),
            None => None,
        };
    let identity = match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => Some(OwnedIdentity::PKCS8 {
            pem: read("ssl_cert_file", cert)?,
            key: read("ssl_key_file", key)?,
        }),
        (None, None) => None,
        _ => {
            return Err(RpcError::Tls(
                "ssl_cert_file and ssl_key_file must be given together".into(),
            ))
        }
    };
    Ok(OwnedTLSConfig {
        identity,
        cert_chain,
    })
}

/// Outcome of one confirmed, mandatory publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Published {
    /// Routed and confirmed.
    Confirmed,
    /// `basic.return` (no queue bound: the reply queue is gone).
    Returned,
    /// `basic.nack` from the broker.
    Nacked,
}

struct ReplyConnection {
    connection: Connection,
    channels: Vec<tokio::sync::Mutex<Channel>>,
    next: AtomicUsize,
}

/// Publishes replies on its own connection (never the listener's), with publisher
/// confirms, reconnecting lazily after a failure.
pub(crate) struct ReplyPublisher {
    connector: Connector,
    current: tokio::sync::Mutex<Option<Arc<ReplyConnection>>>,
}

impl ReplyPublisher {
    pub(crate) fn new(opts: Arc<RpcServerOptions>) -> Result<Self, RpcError> {
        Ok(Self {
            connector: Connector::new(opts, "reply")?,
            current: tokio::sync::Mutex::new(None),
        })
    }

    async fn connection(&self) -> Result<Arc<ReplyConnection>, RpcError> {
        let mut current = self.current.lock().await;
        if let Some(c) = current.as_ref() {
            if c.connection.status().connected() {
                return Ok(c.clone());
            }
        }
        let connection = self.connector.connect_round().await?;
        let mut channels = Vec::with_capacity(REPLY_CHANNELS);
        for _ in 0..REPLY_CHANNELS {
            let channel = connection
                .create_channel()
                .await
                .map_err(RpcError::amqp("channel.open (reply)"))?;
            channel
                .confirm_select(ConfirmSelectOptions { nowait: false })
                .await
                .map_err(RpcError::amqp("confirm.select"))?;
            channels.push(tokio::sync::Mutex::new(channel));
        }
        let c = Arc::new(ReplyConnection {
            connection,
            channels,
            next: AtomicUsize::new(0),
        });
        *current = Some(c.clone());
        Ok(c)
    }

    async fn discard(&self, broken: &Arc<ReplyConnection>) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, broken)) {
            *current = None;
            let _ = broken.connection.close(320, "reconnecting".into()).await;
        }
    }

    /// Publish to the default exchange with `mandatory`, and wait for the confirm.
    pub(crate) async fn publish(
        &self,
        routing_key: &str,
        body: &[u8],
        properties: BasicProperties,
    ) -> Result<Published, RpcError> {
        let rc = self.connection().await?;
        let index = rc.next.fetch_add(1, Ordering::Relaxed) % rc.channels.len();
        let channel = rc.channels[index].lock().await;
        let routing_key = lapin::types::ShortString::try_new(routing_key)
            .map_err(|e| RpcError::Config(format!("reply queue name: {e}")))?;
        let result = async {
            channel
                .basic_publish(
                    "".into(),
                    routing_key,
                    BasicPublishOptions {
                        mandatory: true,
                        immediate: false,
                    },
                    body,
                    properties,
                )
                .await?
                .await
        }
        .await;
        drop(channel);
        match result {
            Ok(Confirmation::Ack(None)) | Ok(Confirmation::NotRequested) => {
                Ok(Published::Confirmed)
            }
            Ok(Confirmation::Ack(Some(_))) => Ok(Published::Returned),
            Ok(Confirmation::Nack(_)) => Ok(Published::Nacked),
            Err(e) => {
                self.discard(&rc).await;
                Err(RpcError::amqp("basic.publish (reply)")(e))
            }
        }
    }

    pub(crate) async fn close(&self) {
        if let Some(c) = self.current.lock().await.take() {
            let _ = c.connection.close(200, "OK".into()).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_linearly_and_caps() {
        let mut b = Backoff::new(&RpcServerOptions::default());
        let secs: Vec<f64> = (0..18).map(|_| b.next_delay().as_secs_f64()).collect();
        assert_eq!(&secs[..4], &[1.0, 3.0, 5.0, 7.0]);
        assert_eq!(secs[15], 30.0);
        assert_eq!(secs[17], 30.0);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_secs(1));
    }

    #[test]
    fn uri_carries_options() {
        let opts = RpcServerOptions {
            heartbeat_timeout_threshold: 30,
            ..Default::default()
        };
        let broker = BrokerAddress {
            host: "rabbit".into(),
            port: 5673,
            username: "nova".into(),
            password: "pw".into(),
            virtual_host: String::new(),
        };
        let uri = amqp_uri(&broker, &opts);
        assert_eq!(uri.vhost, "/");
        assert_eq!(uri.authority.port, 5673);
        assert_eq!(uri.query.heartbeat, Some(30));
        assert_eq!(uri.query.frame_max, Some(32 * 1024));
        assert_eq!(
            uri.query.auth_mechanism,
            Some(lapin::uri::SASLMechanism::AMQPlain)
        );
        assert_eq!(uri.scheme, AMQPScheme::AMQP);
    }
}
