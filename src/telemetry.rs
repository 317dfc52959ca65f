// SPDX-License-Identifier: Apache-2.0
//! Logging: `tracing` to stderr. `RUST_LOG` wins; otherwise `info`, or `debug` when
//! nova.conf sets `[DEFAULT] debug = true`.
//!
//! lapin logs every message the broker returns (a reply whose queue is gone) as a
//! warning carrying the whole body; the server logs such a reply once itself, with
//! its request id and size, so lapin's line is kept for errors only.

use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

pub fn init(debug: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| default_filter(debug));
    // A second init (tests) is harmless: keep the first subscriber.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        // Colours only on a terminal: log files and journald get plain text.
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// The filter when `RUST_LOG` is unset.
fn default_filter(debug: bool) -> EnvFilter {
    let level = if debug { "debug" } else { "info" };
    EnvFilter::new(format!("{level},{QUIET}"))
}

/// Targets whose lines say nothing the daemon does not say better itself.
const QUIET: &str = "lapin::returned_messages=error";

#[cfg(test)]
mod tests {
    #[test]
    fn lapin_returned_messages_are_quiet_by_default() {
        for debug in [false, true] {
            let filter = super::default_filter(debug).to_string();
            assert!(
                filter.contains("lapin::returned_messages=error"),
                "{filter}"
            );
        }
    }
}
