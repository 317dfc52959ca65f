// SPDX-License-Identifier: Apache-2.0
//! What an operator sees of the running daemon: Prometheus metrics
//! ([`metrics`]), liveness and readiness ([`health`]), the opt-in HTTP listener that
//! serves them (`[nova_scheduler_rs] http_listen`, [`listener`]) and systemd's
//! notification protocol ([`health::SystemdNotifier`]).

pub mod explain_client;
pub mod health;
pub mod listener;
pub mod metrics;

pub use metrics::metrics;
