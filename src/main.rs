// SPDX-License-Identifier: Apache-2.0
//! `nova-scheduler-rs`: load nova.conf, start logging, run the daemon (or `simulate`).

use nova_scheduler::config::{self, Command};
use nova_scheduler::{app, simulate, telemetry};
use std::process::ExitCode;

/// sysexits `EX_USAGE`: a bad command line or configuration.
const EX_USAGE: u8 = 64;

fn main() -> ExitCode {
    let cli = match config::parse_cli_args(std::env::args().skip(1)) {
        Ok(cli) => cli,
        Err(e) => {
            eprintln!("{e}\n{}", config::cli::USAGE);
            return ExitCode::from(EX_USAGE);
        }
    };
    if cli.help {
        println!("{}\n\n  run       serve nova's scheduler RPC topic (default)\n  simulate  decide on an embedded demo cloud: [--hosts N] [--requests N] [--instances N] [--seed N]", config::cli::USAGE);
        return ExitCode::SUCCESS;
    }
    if cli.version {
        println!("nova-scheduler-rs {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        Command::Simulate => {
            let opts = match simulate::SimulateOptions::from_args(&cli.command_args) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("simulate: {e}");
                    return ExitCode::from(EX_USAGE);
                }
            };
            telemetry::init(cli.debug.unwrap_or(false));
            ExitCode::from(runtime.block_on(simulate::run(opts)) as u8)
        }
        Command::Run => {
            let config = match config::load_from_cli(&cli) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("Invalid configuration:\n{e}");
                    return ExitCode::from(EX_USAGE);
                }
            };
            telemetry::init(config.default.debug);
            match runtime.block_on(app::run(config, app::shutdown_signal())) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = %e, "nova-scheduler-rs stopped");
                    eprintln!("nova-scheduler-rs: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
