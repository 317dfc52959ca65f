// SPDX-License-Identifier: Apache-2.0
//! The server side of oslo.messaging's rabbit driver, as nova-scheduler runs it.
//!
//! A Python `nova-conductor` (or `nova-api`, `nova-compute`) talks to this server exactly as
//! to Python's nova-scheduler: same exchanges and queues, same 2.0 envelope, same replies,
//! call-monitor heartbeats and failure encoding. See `/work/shared/spec/oslo-messaging-wire.md`.
//!
//! - [`options`]: [`RpcServerOptions`], mapped from nova.conf by the integrator.
//! - [`topology`]: names and declarations (`nova` topic exchange, `scheduler`,
//!   `scheduler.<host>`, `scheduler_fanout` and the private fanout queue).
//! - [`envelope`]: request decoding and reply encoding (JSON, zlib, envelope 2.0).
//! - [`dispatcher`]: the [`Endpoint`] trait and oslo's namespace/version dispatch rules,
//!   plus nova's `baseapi` and oslo's ping endpoints.
//! - [`failure`]: [`RemoteError`], serialized as oslo's failure dict.
//! - [`journal`]: the on-disk record of requests in flight (the poison-message guard).
//! - `transport` (private): broker failover, reconnect backoff, the confirmed reply publisher.
//! - [`notifier`]: the AMQP publisher of the notification drivers.
//! - [`server`]: [`RpcServer`], the consume loop with acks, replies, heartbeats and shutdown.
//!
//! # Mapping nova.conf onto [`RpcServerOptions`]
//!
//! | Field | nova.conf |
//! |---|---|
//! | `brokers` | `[DEFAULT] transport_url` hosts (parsed by the config module) |
//! | `control_exchange` | `[DEFAULT] control_exchange` (nova: `nova`) |
//! | `topic`, `server` | `"scheduler"`, `[DEFAULT] host` |
//! | `durable_queues` | `amqp_durable_queues OR rabbit_quorum_queue` |
//! | `auto_delete`, `quorum_queue`, `transient_quorum_queue` | `amqp_auto_delete`, `rabbit_quorum_queue`, `rabbit_transient_quorum_queue` |
//! | `transient_queues_ttl`, `qos_prefetch_count` | `rabbit_transient_queues_ttl`, `rabbit_qos_prefetch_count` |
//! | `heartbeat_timeout_threshold`, `login_method` | same names (`rabbit_login_method`) |
//! | `retry_interval`, `retry_backoff`, `interval_max` | `rabbit_retry_interval`, `rabbit_retry_backoff`, `rabbit_interval_max` |
//! | `missing_consumer_retry_timeout`, `compression` | `kombu_missing_consumer_retry_timeout`, `kombu_compression` |
//! | `ssl` | `ssl` + `ssl_ca_file`, `ssl_cert_file`, `ssl_key_file` |
//! | `max_concurrent_calls`, `rpc_ping_enabled` | `[DEFAULT] executor_thread_pool_size`, `rpc_ping_enabled` |
//! | `ha_queues`, `quorum_*`, `enable_cancel_on_failover` | `rabbit_ha_queues`, `rabbit_quorum_delivery_limit` / `_max_memory_length` / `_max_memory_bytes`, `enable_cancel_on_failover` |
//!
//! All `[oslo_messaging_rabbit]` values may be overridden by the `transport_url` query string.
//!
//! # Deliberate differences from Python
//!
//! - Requests are acknowledged after their reply is confirmed, not on receipt (see [`server`]).
//!   A request running longer than RabbitMQ's `consumer_timeout` (30 min by default) makes
//!   the broker close the listener channel; nova's `long_rpc_timeout` is also 30 min.
//! - Undecodable messages are acked (with a `ValueError` reply when addressable), not rejected.
//! - Not supported: `rabbit_stream_fanout`, `use_queue_manager`, `kombu_failover_strategy =
//!   shuffle` (brokers are shuffled once, then tried round-robin), `ssl_version`, codecs
//!   other than zlib, `heartbeat_timeout_threshold = 0` (lapin then follows the broker's value).
//!
//! ```no_run
//! # async fn example(endpoints: Vec<std::sync::Arc<dyn nova_scheduler::rpc::Endpoint>>) {
//! use nova_scheduler::rpc::{run, RpcServerOptions};
//! let opts = RpcServerOptions { server: "host1".into(), ..Default::default() };
//! run(opts, endpoints, async { let _ = tokio::signal::ctrl_c().await; }).await.unwrap();
//! # }
//! ```

pub mod context;
pub mod dispatcher;
pub mod envelope;
pub mod failure;
pub mod journal;
pub mod notifier;
pub mod options;
pub mod server;
pub mod tap;
pub mod topology;
mod transport;

#[cfg(test)]
mod golden_tests;

use std::future::Future;
use std::sync::Arc;

pub use context::RequestContext;
pub use dispatcher::{
    BaseApiEndpoint, Dispatcher, Endpoint, EndpointFuture, IncomingCall, PingEndpoint,
};
pub use failure::RemoteError;
pub use options::{BrokerAddress, RpcServerOptions, TlsOptions};
pub use server::RpcServer;
pub use topology::Topology;

/// Errors of the RPC server. Broker outages are retried internally; `run` returns an
/// error only for options it cannot serve with.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// Invalid or unsupported options.
    #[error("invalid RPC options: {0}")]
    Config(String),
    /// TLS files could not be loaded.
    #[error("TLS configuration: {0}")]
    Tls(String),
    /// No broker of the list accepted a connection.
    #[error("could not connect to any AMQP broker ({brokers}): {last_error}")]
    Connect {
        /// `host:port` list (no credentials).
        brokers: String,
        /// Error of the last attempt.
        last_error: String,
    },
    /// The broker refused a publish (`basic.nack`).
    #[error("the broker refused the {0} (basic.nack)")]
    Nacked(&'static str),
    /// An AMQP operation failed.
    #[error("AMQP {context} failed: {source}")]
    Amqp {
        /// The operation, e.g. `queue.declare`.
        context: &'static str,
        /// lapin's error.
        #[source]
        source: lapin::Error,
    },
}

impl RpcError {
    pub(crate) fn amqp(context: &'static str) -> impl FnOnce(lapin::Error) -> RpcError {
        move |source| RpcError::Amqp { context, source }
    }
}

/// Serve nova's scheduler RPC until `shutdown` completes (see [`RpcServer::run`]).
pub async fn run(
    opts: RpcServerOptions,
    endpoints: Vec<Arc<dyn Endpoint>>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RpcError> {
    RpcServer::new(opts, endpoints)?.run(shutdown).await
}

/// One connection round over `opts.brokers` (TLS and credentials as configured), then
/// closes: `Ok` if some broker accepted the connection. For checks before serving.
pub async fn check_connection(opts: &RpcServerOptions) -> Result<(), RpcError> {
    let connector = transport::Connector::new(Arc::new(opts.clone()), "check")?;
    let connection = connector.connect_round().await?;
    let _ = connection.close(200, "OK".into()).await;
    Ok(())
}
