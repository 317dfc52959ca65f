// SPDX-License-Identifier: Apache-2.0
//! Prints the man page nova-scheduler-rs(1), rendered from the command line the binary
//! parses (`nova_scheduler::config::cli::command()`), so it cannot drift from `--help`.
//!
//! An example rather than a subcommand keeps the renderer (clap_mangen, a
//! dev-dependency) out of the shipped binary, and rendering at packaging time rather
//! than committing the page keeps it current with nothing to regenerate by hand:
//! `cargo build --release --all-targets` builds it, scripts/package.sh runs it.
//!
//! ```sh
//! cargo run --release --example manpage > nova-scheduler-rs.1
//! ```

fn main() -> std::io::Result<()> {
    let cmd = nova_scheduler::config::cli::command();
    clap_mangen::Man::new(cmd).render(&mut std::io::stdout())
}
