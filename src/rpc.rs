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
//! - [`transport`] (private): broker failover, reconnect backoff, the confirmed reply publisher.
//! - [`server`]: [`RpcServer`], the consume loop with acks, replies, heartbeats and shutdown.
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
pub mod options;
pub mod server;
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
