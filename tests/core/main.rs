// SPDX-License-Identifier: Apache-2.0
//! The decision core against its reference (`indexed_core`, `incremental_core`, on random
//! clouds), the binary's command line (`cli`, and `config_doors`: `run` and `config
//! check` refuse alike), what ships beside the binary (`packaging`: compose's state
//! dir, the metrics of the alerts and the dashboard), the release profiles against the
//! facts read from each nova release's code (`release_profiles`), WebAssembly plugins
//! as nova.conf configures them (`wasm_plugins`), and the weighers that need a
//! database or the daemon (`weigher_instance_images`, `weigher_pack_spread`). One test
//! binary; each file below is a module, and the fixtures of `tests/common/` are compiled once, at
//! this crate's root.
//!
//! Run one file's tests with a name filter, e.g.
//! `cargo test --release --test core indexed_core`.
//!
//! Sharing the process: each test uses its own databases (`nsrs_weigh_img`,
//! `nsrs_weigh_e2e`) and RabbitMQ vhost; `weigher_pack_spread` is the only user of the
//! per-process Placement here.

#[path = "../common/daemon_proc.rs"]
mod daemon_proc;
#[path = "../common/nova_schema.rs"]
mod nova_schema;
#[path = "../common/placement_server.rs"]
mod placement_server;
#[path = "../common/random_core.rs"]
mod random_core;
#[path = "../common/venv.rs"]
mod venv;
#[path = "../common/wasm_example.rs"]
mod wasm_example;

mod cli;
mod config_doors;
mod incremental_core;
mod indexed_core;
mod layers;
mod packaging;
mod release_profiles;
mod wasm_plugins;
mod weigher_instance_images;
mod weigher_pack_spread;
