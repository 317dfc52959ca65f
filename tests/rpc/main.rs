// SPDX-License-Identifier: Apache-2.0
//! RPC and broker-facing tests against RabbitMQ: oslo.messaging side by side, TLS and a
//! broker restart on private RabbitMQ nodes, notifications and the service row. One test
//! binary; each file below is a module, and the fixtures of `tests/common/` are compiled
//! once, at this crate's root.
//!
//! Run one file's tests with a name filter, e.g.
//! `cargo test --release --test rpc rpc_side_by_side`.
//!
//! Sharing the process: queues, exchanges and vhosts are named per test (uuid or tag);
//! `rpc_tls` and `rpc_broker_restart` each start their own private node on free ports
//! under a unique node name, so the restart never touches the shared broker; the global
//! tracing subscriber is set with `try_init` (first one wins, nothing is asserted on it).
//!
//! Kept out of this binary, as their own test binaries:
//! - `tests/rpc_server.rs` installs a global tracing subscriber with `init()` and asserts
//!   on what it captured, which other tests' subscribers and logs would break;
//! - `tests/rpc_reconnect.rs` closes every broker connection of its process, which would
//!   disturb the servers of other tests running in the same process;
//! - `tests/daemon_process.rs` kills and restarts the daemon and measures answer times
//!   and memory, which other tests' load would disturb.

#[path = "../common/notification_check.rs"]
mod notification_check;
#[path = "../common/nova_schema.rs"]
mod nova_schema;
#[path = "../common/private_rabbit.rs"]
mod private_rabbit;
#[path = "../common/venv.rs"]
mod venv;

mod notifications;
mod rpc_broker_restart;
mod rpc_side_by_side;
mod rpc_tls;
mod service_row;
