// SPDX-License-Identifier: Apache-2.0
//! The cell-database state: the warm host-state cache and the loader (including TLS to a
//! private MariaDB). One test binary; each file below is a module, and the fixtures of
//! `tests/common/` are compiled once, at this crate's root, so the template databases
//! of `nova_schema::create_from_template` are made once per process.
//!
//! Run one file's tests with a name filter, e.g.
//! `cargo test --release --test state state_cache`.
//!
//! Sharing the process: `state_cache` uses databases `nsrs_t_cache_<name>`,
//! `state_loader` `nsrs_t_state` and its own private MariaDB.

#[path = "../common/nova_schema.rs"]
mod nova_schema;
#[path = "../common/private_mariadb.rs"]
mod private_mariadb;
#[path = "../common/venv.rs"]
mod venv;

mod state_cache;
mod state_loader;
