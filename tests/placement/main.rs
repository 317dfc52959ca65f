// SPDX-License-Identifier: Apache-2.0
//! The Placement client, claims and the fast path against the real Placement (started once
//! per test binary by `common/placement_server.rs`, shared by every test below, as it was
//! already shared by the tests of each file). One test binary; each file below is a
//! module, and the fixtures of `tests/common/` are compiled once, at this crate's root,
//! so the Placement server and the nova-manage template databases
//! (`nova_schema::create_from_template`) are made once per process.
//!
//! Run one file's tests with a name filter, e.g.
//! `cargo test --release --test placement placement_claims`.
//!
//! Sharing the process: every test seeds its own providers under its own trait or name
//! and its own databases and vhosts (`nsrs_claims_<name>`, `nsrs_race_<name>`); the log
//! capture of `placement_claims` is a thread-local subscriber on a current-thread
//! runtime, not a global one.
//!
//! Kept out of this binary: `tests/placement_fast_path_race.rs` needs a Placement with no
//! nested providers (the daemons' fast path falls back to Placement when any exist, and
//! the test asserts it never does), and `placement_claims` seeds nested trees in the
//! Placement this binary shares; so it keeps a Placement process of its own.

#[path = "../common/claims_cloud.rs"]
mod claims_cloud;
#[path = "../common/daemon_proc.rs"]
mod daemon_proc;
#[path = "../common/http_stub.rs"]
mod http_stub;
#[path = "../common/keystone_server.rs"]
mod keystone_server;
#[path = "../common/nova_schema.rs"]
mod nova_schema;
#[path = "../common/placement_admin.rs"]
mod placement_admin;
#[path = "../common/placement_server.rs"]
mod placement_server;
#[path = "../common/test_pki.rs"]
mod test_pki;
#[path = "../common/venv.rs"]
mod venv;

mod placement_batch_claims;
mod placement_claims;
mod placement_client;
mod placement_index_refresh;
mod placement_python_filters;
