// SPDX-License-Identifier: Apache-2.0
//! `nova-scheduler-rs`: load nova.conf, start logging, run the daemon (or `simulate`,
//! `config check`, `config sample`, `explain`, `capacity`, `snapshot`, `shadow`,
//! `replay`).

use nova_scheduler::config::{self, Command};
use nova_scheduler::{app, observe, simulate, telemetry, tools};
use std::process::ExitCode;

/// sysexits `EX_USAGE`: a bad command line or configuration.
const EX_USAGE: u8 = 64;

fn main() -> ExitCode {
    let cli = match config::parse_cli_args(std::env::args_os().skip(1)) {
        Ok(cli) => cli,
        Err(e) => {
            // `--help` and `--version` print to stdout and succeed; a bad command line
            // prints clap's one error with the usage to stderr.
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(EX_USAGE)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match cli.command {
        Command::Simulate(ref args) => {
            let Some(config) = offline_config(&cli) else {
                return ExitCode::from(EX_USAGE);
            };
            let Some(runtime) = runtime(None) else {
                return ExitCode::FAILURE;
            };
            tool_logging(cli.debug.unwrap_or(false));
            if let Some(path) = &args.snapshot {
                let code = runtime.block_on(tools::snapshot::simulate(args, path, config));
                return ExitCode::from(code as u8);
            }
            let opts = match simulate::SimulateOptions::from_cli(args) {
                Ok(o) => o,
                Err(e) => {
                    eprintln!("simulate: {e}");
                    return ExitCode::from(EX_USAGE);
                }
            };
            let scheduler = match app::build_scheduler(&config) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("Invalid configuration:\n{e}");
                    return ExitCode::from(EX_USAGE);
                }
            };
            ExitCode::from(runtime.block_on(simulate::run(opts, scheduler)) as u8)
        }
        Command::Capacity(ref args) => {
            let Some((config, runtime)) = tool_setup(&cli) else {
                return ExitCode::from(EX_USAGE);
            };
            ExitCode::from(runtime.block_on(tools::capacity::run(args, config)) as u8)
        }
        Command::Snapshot(ref args) => {
            let Some((config, runtime)) = tool_setup(&cli) else {
                return ExitCode::from(EX_USAGE);
            };
            ExitCode::from(runtime.block_on(tools::snapshot::run(args, config)) as u8)
        }
        Command::Shadow(ref args) => shadow(&cli, args),
        Command::ShadowReport(ref args) => shadow_report(&cli, args),
        Command::Replay(ref args) => {
            let Some(config) = offline_config(&cli) else {
                return ExitCode::from(EX_USAGE);
            };
            let Some(runtime) = runtime(Some(1)) else {
                return ExitCode::FAILURE;
            };
            tool_logging(cli.debug.unwrap_or(false));
            ExitCode::from(runtime.block_on(tools::replay::run(args, config)) as u8)
        }
        Command::ConfigCheck(ref args) => config_check(&cli, args),
        Command::Explain(ref args) => explain(&cli, args),
        Command::ConfigSample => {
            print!("{}", config::options::sample());
            ExitCode::SUCCESS
        }
        Command::Run => {
            // The same checks as `config check`, every refusal at once, before
            // anything is started or reached.
            let (config, load_errors) = config::load_from_cli_with_errors(&cli);
            let prepared = match app::preflight::prepare(&config, load_errors) {
                Ok(p) => p,
                Err(refused) => {
                    eprintln!("Invalid configuration:\n{refused}");
                    return ExitCode::from(EX_USAGE);
                }
            };
            telemetry::init_from_config(&config, &cli);
            for warning in config::logging::cli_warnings(&cli.log_options) {
                tracing::warn!("{warning}");
            }
            let Some(runtime) = runtime(config.scheduler.workers) else {
                return ExitCode::FAILURE;
            };
            let served = runtime.block_on(app::run(config, prepared, app::shutdown_signal()));
            // Requests abandoned at shutdown stop at their next await; none may hold
            // the exit (dropping the runtime would wait for them).
            runtime.shutdown_timeout(std::time::Duration::from_secs(1));
            match served {
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

/// The offline tools' configuration: nova.conf's filters and weighers when a
/// configuration is named, else nova's defaults (not the files `run` would find).
fn offline_config(cli: &config::CliArgs) -> Option<config::Config> {
    let config = if cli.sources.is_empty() {
        config::from_ini_str("")
    } else {
        config::load_from_cli(cli)
    };
    match config {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("Invalid configuration:\n{e}");
            None
        }
    }
}

/// The operator tools' configuration (read as `run` reads it), runtime and
/// logging (warnings and errors on stderr; everything with --debug).
fn tool_setup(cli: &config::CliArgs) -> Option<(config::Config, tokio::runtime::Runtime)> {
    let config = match config::load_from_cli(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("Invalid configuration:\n{e}");
            return None;
        }
    };
    tool_logging(cli.debug.unwrap_or(config.default.debug));
    let runtime = runtime(Some(2))?;
    Some((config, runtime))
}

/// The tools log to stderr only, so that their output on stdout stays readable
/// (and `--json` parseable): warnings and errors, or everything with --debug.
fn tool_logging(debug: bool) {
    let filter = if debug { "debug" } else { "warn" };
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .try_init();
}

/// `shadow`: the same checks and logging as `run`, then the read-only shadow until
/// SIGTERM or SIGINT.
fn shadow(cli: &config::CliArgs, args: &config::cli::ShadowArgs) -> ExitCode {
    let (config, load_errors) = config::load_from_cli_with_errors(cli);
    let prepared = match app::preflight::prepare(&config, load_errors) {
        Ok(p) => p,
        Err(refused) => {
            eprintln!("Invalid configuration:\n{refused}");
            return ExitCode::from(EX_USAGE);
        }
    };
    telemetry::init_from_config(&config, cli);
    let options = app::shadow::ShadowOptions {
        queue: args
            .queue
            .clone()
            .unwrap_or_else(|| format!("scheduler_shadow.{}", config.default.host)),
        max_queue: args.max_queue.unwrap_or(10_000),
        settle: std::time::Duration::from_secs(args.settle.unwrap_or(60)),
        record: args.record.clone(),
    };
    let Some(runtime) = runtime(config.scheduler.workers) else {
        return ExitCode::FAILURE;
    };
    let served = runtime.block_on(app::shadow::run(
        config,
        prepared,
        options,
        app::shutdown_signal(),
    ));
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "nova-scheduler-rs shadow stopped");
            eprintln!("nova-scheduler-rs shadow: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `shadow report`: the running shadow's comparison from its listener (`--url`, else
/// nova.conf's `[nova_scheduler_rs] http_listen`). Exit 1 when it cannot be reached.
fn shadow_report(cli: &config::CliArgs, args: &config::cli::ShadowReportArgs) -> ExitCode {
    let base_url = match listener_url(cli, args.url.as_deref(), "shadow report") {
        Ok(url) => url,
        Err(code) => return code,
    };
    let Some(runtime) = runtime(Some(1)) else {
        return ExitCode::FAILURE;
    };
    match runtime.block_on(app::shadow::report(&base_url, args.json)) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("shadow report: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--url`, else `http://<[nova_scheduler_rs] http_listen>`.
fn listener_url(cli: &config::CliArgs, url: Option<&str>, what: &str) -> Result<String, ExitCode> {
    if let Some(url) = url {
        return Ok(url.to_string());
    }
    match config::load_from_cli(cli) {
        Ok(c) => match c.nova_scheduler_rs.http_listen {
            Some(addr) => Ok(format!("http://{addr}")),
            None => {
                eprintln!("{what}: [nova_scheduler_rs] http_listen is not set (or give --url)");
                Err(ExitCode::from(EX_USAGE))
            }
        },
        Err(e) => {
            eprintln!("Invalid configuration:\n{e}");
            Err(ExitCode::from(EX_USAGE))
        }
    }
}

/// `config check`: the checks `run` makes before it connects ([`app::preflight`]),
/// starting nothing. Every refusal is printed as `run` prints it (exit 1), or, when no
/// configuration file was read at all, exit 2; otherwise each warning `run` would log
/// and one line naming the files read. `--connect` then reaches every database, the
/// broker and Placement once (exit 1 if any fails).
fn config_check(cli: &config::CliArgs, args: &config::cli::ConfigCheckArgs) -> ExitCode {
    const EXIT_ERRORS: u8 = 1;
    const EXIT_NOTHING_READ: u8 = 2;
    let (config, load_errors) = config::load_from_cli_with_errors(cli);
    let prepared = app::preflight::prepare(&config, load_errors);
    let mut warnings = config.warnings();
    // A configured release's missing options; `auto`'s release is known only with
    // --connect.
    warnings.extend(app::release_warnings(
        &config,
        app::configured_release(&config),
    ));
    for warning in &warnings {
        println!("warning: {warning}");
    }
    if let Err(refused) = &prepared {
        eprintln!("Invalid configuration:\n{refused}");
    }
    let files = config.files();
    // A file oslo's parser rejected was found and read, though it gives no values.
    let unparsable = prepared.as_ref().is_err_and(|refused| {
        refused
            .kinds()
            .contains(&app::preflight::RefusalKind::Syntax)
    });
    if files.is_empty() && !unparsable {
        eprintln!(
            "no configuration file was read: name one with --config-file or --config-dir \
             (without them: /etc/nova/nova.conf, /etc/nova/nova.conf.d and the other places \
             oslo.config looks)"
        );
        return ExitCode::from(EXIT_NOTHING_READ);
    }
    let Ok(prepared) = prepared else {
        return ExitCode::from(EXIT_ERRORS);
    };
    let read = match files.len() {
        1 => format!("1 file read ({})", files[0]),
        n => format!("{n} files read ({})", files.join(", ")),
    };
    let warned = match warnings.len() {
        0 => String::new(),
        1 => ", 1 warning".to_string(),
        n => format!(", {n} warnings"),
    };
    println!("configuration OK: {read}{warned}");
    if !args.connect {
        return ExitCode::SUCCESS;
    }
    tool_logging(cli.debug.unwrap_or(false));
    let Some(runtime) = runtime(Some(1)) else {
        return ExitCode::FAILURE;
    };
    let probes = runtime.block_on(app::preflight::connect(&config, &prepared));
    let mut failed = 0;
    for probe in &probes {
        match &probe.outcome {
            Ok(()) => println!("ok      {}", probe.what),
            Err(reason) => {
                failed += 1;
                println!("FAILED  {}: {reason}", probe.what);
            }
        }
        for warning in &probe.warnings {
            println!("warning: {warning}");
        }
    }
    if failed > 0 {
        println!("{failed} of {} connection(s) failed", probes.len());
        return ExitCode::from(EXIT_ERRORS);
    }
    println!("every connection ok ({})", probes.len());
    ExitCode::SUCCESS
}

/// `explain`: the decision (or with `--recent` the list of recent ones) from the
/// running daemon's listener (`--url`, else nova.conf's `[nova_scheduler_rs]
/// http_listen`). Exit 1 when it has no such decision or cannot be reached.
fn explain(cli: &config::CliArgs, args: &config::cli::ExplainArgs) -> ExitCode {
    let base_url = match listener_url(cli, args.url.as_deref(), "explain") {
        Ok(url) => url,
        Err(code) => return code,
    };
    let Some(runtime) = runtime(Some(1)) else {
        return ExitCode::FAILURE;
    };
    let request = observe::explain_client::ExplainRequest {
        base_url,
        instance: args.instance.clone(),
        request_id: args.request_id.clone(),
        host: args.host.clone(),
        recent: args.recent,
        json: args.json,
    };
    match runtime.block_on(observe::explain_client::explain(&request)) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("explain: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The async runtime. nova-scheduler runs `[scheduler] workers` processes (unset or
/// 0: one per CPU); this daemon is one process whose runtime has that many threads,
/// so it uses the CPUs nova would have been given and no more. Each thread beyond
/// what the work needs costs wake-ups that compete with Placement on a small box.
fn runtime(workers: Option<u32>) -> Option<tokio::runtime::Runtime> {
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers.filter(|&n| n > 0) {
        builder.worker_threads(n as usize);
    }
    match builder.enable_all().build() {
        Ok(rt) => Some(rt),
        Err(e) => {
            eprintln!("cannot start the async runtime: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::runtime;

    #[test]
    fn scheduler_workers_sets_the_runtime_threads_and_zero_means_unset() {
        let threads = |workers| runtime(workers).expect("runtime").metrics().num_workers();
        assert_eq!(threads(Some(3)), 3);
        assert_eq!(threads(Some(1)), 1);
        // Unset or 0: tokio's default, one thread per CPU (nova's default of one
        // process per CPU).
        assert_eq!(threads(Some(0)), threads(None));
    }
}
