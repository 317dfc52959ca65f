// SPDX-License-Identifier: Apache-2.0
//! The example WebAssembly plugin of `examples/wasm-plugin`, built for
//! wasm32-unknown-unknown into this build's temporary directory.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The example plugin, built once per test process.
pub fn example_module() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let root = Path::new(env!("CARGO_MANIFEST_DIR"));
            let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("wasm-plugin");
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let out = Command::new(cargo)
                .args(["build", "--release", "--target", "wasm32-unknown-unknown"])
                .arg("--manifest-path")
                .arg(root.join("examples/wasm-plugin/Cargo.toml"))
                .env("CARGO_TARGET_DIR", &target)
                .output()
                .expect("run cargo");
            assert!(
                out.status.success(),
                "building examples/wasm-plugin failed (is the wasm32-unknown-unknown target \
                 installed? `rustup target add wasm32-unknown-unknown`):\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            target.join("wasm32-unknown-unknown/release/mycloud_rack.wasm")
        })
        .clone()
}
