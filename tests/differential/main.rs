// SPDX-License-Identifier: Apache-2.0
//! Differential tests: our decision code against nova's own Python code (the oracles in
//! `tests/oracle/`, run from the venv) and the provider index against the real Placement.
//! One test binary; each file below is a module, and the fixtures of `tests/common/`
//! are compiled once, at this crate's root (they refer to each other as `crate::…`).
//!
//! Run one file's tests with a name filter, e.g.
//! `cargo test --release --test differential differential_filters`.
//!
//! Sharing the process: the tests only read the `NSRS_DIFF_*` / `NSRS_INDEX_DIFF_*`
//! knobs, set nothing process-wide, and each Python oracle is a child of its own test.
//! `differential_placement_index` is the only user of the per-process Placement
//! (`common/placement_server.rs`), so its `set_workers` call still comes before the
//! first `url()`; `differential_resource_request` has its own databases (`nsrs_t_rr`).

#[path = "../common/nova_schema.rs"]
mod nova_schema;
#[path = "../common/placement_server.rs"]
mod placement_server;
#[path = "../common/venv.rs"]
mod venv;

mod differential_filters;
mod differential_numa;
mod differential_pci;
mod differential_placement_forest;
mod differential_placement_index;
mod differential_resource_request;
mod differential_weighers;
