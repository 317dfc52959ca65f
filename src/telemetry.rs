// SPDX-License-Identifier: Apache-2.0
//! Logging: `tracing` to stderr. `RUST_LOG` wins; otherwise `info`, or `debug` when
//! nova.conf sets `[DEFAULT] debug = true`.

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

pub fn init(debug: bool) {
    let default = if debug { "debug" } else { "info" };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // A second init (tests) is harmless: keep the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        // Colours only on a terminal: log files and journald get plain text.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}
