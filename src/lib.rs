// SPDX-License-Identifier: Apache-2.0
//! A drop-in replacement for OpenStack's nova-scheduler.
//!
//! # Layout
//! Under everything, [`py`]: Python's value semantics (`int()`, `repr()`, `json`, set
//! order, PEP 440, oslo.versionedobjects primitives), depending on nothing else here.
//!
//! The decision core is pure (no I/O, no async) and imports no edge (a test holds it
//! to that, `tests/core/layers.rs`):
//! - [`model`]: plain data decoded from nova's versioned objects and database rows
//!   (`RequestSpec`, `HostState`, `Selection`), and nova's field enumerations.
//! - [`numa`]: host and instance NUMA topologies, their fit and usage (`virt/hardware.py`'s
//!   NUMA half).
//! - [`pci`]: PCI device pools, PCI requests and `[pci] alias`, as nova's `pci/` package.
//! - [`hardware`]: the flavor and image constraint readers of nova's `virt/hardware.py`.
//! - [`host_fit`]: a request's NUMA and PCI fit on a host state, and its consumption.
//! - [`filters`]: one nova host filter per file behind the `HostFilter` trait, plus the chain.
//! - [`weighers`]: one nova weigher per file behind the `HostWeigher` trait, plus nova's
//!   normalization and the weight handler.
//! - [`scheduler`]: filter → weigh → pick → claim → consume, per instance, with alternates.
//! - [`release`]: the nova releases a cloud can be scheduled as, and what each one's
//!   scheduler does differently.
//!
//! The edges do the I/O and map it to and from the model:
//! - [`config`]: nova.conf with oslo.config semantics, typed sections with nova's defaults.
//! - [`rpc`]: the oslo.messaging rabbit driver's server side (lapin).
//! - [`state`]: host states from nova's API and cell databases (sqlx, MySQL).
//! - [`placement`]: the Placement API (allocation candidates, claims), nova's resource
//!   request, the provider index.
//! - [`notifications`]: the scheduler's legacy and versioned notifications (payloads).
//! - [`manager`]: nova's `SchedulerManager` RPC endpoint: `select_destinations`.
//! - [`plugins`]: an operator's own nova filter and weigher classes, run unchanged in an
//!   embedded CPython (the `python` feature), and new ones as sandboxed WebAssembly
//!   modules (the `wasm` feature).
//! - [`recording`]: the recording of `select_destinations` calls and answers (gzip JSON
//!   lines, rotated), and its reader for `replay`.
//! - [`observe`]: metrics, liveness and readiness, the HTTP listener, the `explain` client.
//! - [`telemetry`]: oslo.log's options (files, journal, syslog, JSON) as a tracing subscriber.
//! - [`app`]: wiring and process life.
//!
//! And the operator's offline tools over the core: [`simulate`] (the demo cloud) and
//! [`tools`] (`capacity`, `snapshot`, `replay`, decisions with in-memory claims).
#![forbid(unsafe_code)]
#![deny(rust_2018_idioms)]

pub mod app;
pub mod config;
pub mod filters;
pub mod hardware;
pub mod host_fit;
pub mod manager;
pub mod model;
pub mod notifications;
pub mod numa;
pub mod observe;
pub mod pci;
pub mod placement;
pub mod plugins;
pub mod py;
pub mod recording;
pub mod release;
pub mod rpc;
pub mod scheduler;
pub mod simulate;
pub mod state;
pub mod telemetry;
pub mod tools;
pub mod weighers;

/// The Rust examples of `docs/architecture.md` ("How to add a filter", "How to add a
/// weigher"), compiled and run by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../docs/architecture.md")]
pub struct ArchitectureDoc;

/// The nova release whose scheduler this daemon replaces.
pub const NOVA_RELEASE: &str = "34";
