// SPDX-License-Identifier: Apache-2.0
//! Logging with oslo.log's options, as nova-scheduler reads them from `[DEFAULT]` and
//! the command line (see [`crate::config::logging`]).
//!
//! - Destinations, chosen as oslo's `_setup_logging_from_conf` chooses them:
//!   `log_file`/`log_dir` (a file, appended to, reopened when moved); `use_stderr`
//!   (stderr as well); `use_journal` (the journal's native protocol, [`journal`]);
//!   `use_syslog` (`/dev/log`, [`sinks`]). With neither a file nor `use_stderr` nor
//!   `use_journal`, lines go to stderr (oslo writes to stdout there; the service
//!   manager keeps either). A destination that cannot be opened is replaced by stderr,
//!   with one error line saying why: logging never stops the daemon.
//! - Format: text (tracing's layout, the timestamp in `log_date_format`, local time,
//!   with milliseconds), or with `use_json` one JSON object per line with oslo's
//!   `JSONFormatter` keys ([`json`]). The journal gets the message and its own
//!   fields whatever the format.
//! - Levels: `info`, or `debug` with `debug = true`, then `default_log_levels` mapped
//!   to `tracing` targets ([`filter`]). `RUST_LOG`, when set, replaces all of that
//!   (and SIGHUP leaves it in place).
//! - SIGHUP ([`reload`]): the configuration files are read again and `debug` and
//!   `default_log_levels` (oslo's mutable logging options) are applied at once; the log
//!   file is reopened. Other logging options take effect at the next start.

pub mod filter;
pub mod journal;
pub mod json;
pub mod pytime;
pub mod sinks;

use std::io::IsTerminal;
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tracing_subscriber::layer::{Layered, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

use crate::config::logging::{binary_name, LogSection};
use crate::config::{CliArgs, Config};
use sinks::{FileSink, Sink, Sinks, SyslogSink};

pub use filter::QUIET;

type Filtered = Layered<reload::Layer<EnvFilter, Registry>, Registry>;
type BoxedLayer = Box<dyn Layer<Filtered> + Send + Sync>;

/// What SIGHUP needs to apply the files again.
struct ReloadState {
    filter: reload::Handle<EnvFilter, Registry>,
    cli: CliArgs,
    rust_log: bool,
    file: Option<Arc<FileSink>>,
    log: LogSection,
}

static STATE: OnceLock<ReloadState> = OnceLock::new();

/// Text to stderr at `info` (`debug` when asked) with oslo's other defaults; for the
/// `simulate` command. `RUST_LOG` wins.
pub fn init(debug: bool) {
    let _ = install(debug, &LogSection::default(), None);
}

/// Logging as `config` (loaded from `cli`, whose log flags it includes) says; SIGHUP
/// then re-reads what `cli` names (see [`reload`]).
pub fn init_from_config(config: &Config, cli: &CliArgs) {
    if let Some(state) = install(config.default.debug, &config.log, Some(cli.clone())) {
        let _ = STATE.set(state);
    }
}

/// The level filter: `RUST_LOG` when set, else `debug` and `default_log_levels`.
fn level_filter(debug: bool, log: &LogSection) -> (EnvFilter, bool) {
    match EnvFilter::try_from_default_env() {
        Ok(filter) if std::env::var_os("RUST_LOG").is_some() => (filter, true),
        _ => (config_filter(debug, &log.default_log_levels), false),
    }
}

fn config_filter(debug: bool, default_log_levels: &[String]) -> EnvFilter {
    EnvFilter::new(filter::directives(debug, default_log_levels).join(","))
}

/// Opens the destinations and installs the subscriber; `None` if one was installed
/// already (tests).
fn install(debug: bool, log: &LogSection, cli: Option<CliArgs>) -> Option<ReloadState> {
    let (filter, rust_log) = level_filter(debug, log);
    let (filter_layer, handle) = reload::Layer::new(filter);
    let binary = binary_name();
    let mut problems: Vec<String> = Vec::new();
    let mut stream: Vec<Sink> = Vec::new();
    let mut file = None;
    let mut want_stderr = log.use_stderr;
    let log_path = log.log_path(&binary);
    if let Some(path) = &log_path {
        match FileSink::open(path) {
            Ok(sink) => {
                let sink = Arc::new(sink);
                file = Some(Arc::clone(&sink));
                stream.push(Sink::File(sink));
            }
            Err(e) => {
                problems.push(format!(
                    "cannot open the log file {}: {e}; logging to stderr instead",
                    path.display()
                ));
                want_stderr = true;
            }
        }
    }
    let mut layers: Vec<BoxedLayer> = Vec::new();
    if log.use_journal {
        match journal::JournalLayer::connect(
            Path::new(journal::JOURNAL_SOCKET),
            &binary,
            log.facility(),
        ) {
            Ok(layer) => layers.push(Box::new(layer)),
            Err(e) => {
                problems.push(format!(
                    "cannot reach the journal at {}: {e}; logging to stderr instead",
                    journal::JOURNAL_SOCKET
                ));
                want_stderr = true;
            }
        }
    }
    if log_path.is_none() && !log.use_stderr && !log.use_journal {
        want_stderr = true;
    }
    if log.use_syslog {
        match SyslogSink::connect(Path::new(sinks::SYSLOG_SOCKET), log.facility(), &binary) {
            Ok(sink) => stream.push(Sink::Syslog(sink)),
            Err(e) => {
                problems.push(format!(
                    "cannot reach syslog at {}: {e}; logging to stderr instead",
                    sinks::SYSLOG_SOCKET
                ));
                want_stderr = true;
            }
        }
    }
    let stderr_only = stream.is_empty();
    if want_stderr {
        stream.push(Sink::Stderr);
    }
    if !stream.is_empty() {
        let writer = Sinks::new(stream);
        if log.use_json {
            let facts = json::ProcessFacts {
                hostname: crate::config::sections::machine_hostname(),
                process_name: binary.clone(),
                pid: std::process::id(),
                started: Instant::now(),
            };
            layers.push(Box::new(
                tracing_subscriber::fmt::layer()
                    .fmt_fields(json::JsonFields)
                    .event_format(json::OsloJson::new(&log.log_date_format, facts))
                    .with_writer(writer),
            ));
        } else {
            layers.push(Box::new(
                tracing_subscriber::fmt::layer()
                    .with_timer(pytime::PyTime::new(&log.log_date_format))
                    .with_target(false)
                    // Colours only on a terminal: files, syslog and journald get plain text.
                    .with_ansi(stderr_only && std::io::stderr().is_terminal())
                    .with_writer(writer),
            ));
        }
    }
    // A second init (tests) is harmless: keep the first subscriber.
    tracing_subscriber::registry()
        .with(filter_layer)
        .with(layers)
        .try_init()
        .ok()?;
    for problem in problems {
        tracing::error!("{problem}");
    }
    if rust_log {
        tracing::info!(
            "RUST_LOG is set: it chooses the log levels ([DEFAULT] debug and default_log_levels are not applied)"
        );
    }
    Some(ReloadState {
        filter: handle,
        cli: cli.unwrap_or_default(),
        rust_log,
        file,
        log: log.clone(),
    })
}

/// SIGHUP: reopens the log file, reads the configuration files again and applies
/// `debug` and `default_log_levels` (unless `RUST_LOG` is set). A configuration that no
/// longer loads is reported and the current levels are kept. Does nothing when
/// logging was not set up by [`init_from_config`].
pub fn reload() {
    let Some(state) = STATE.get() else {
        return;
    };
    if let Some(file) = &state.file {
        if let Err(e) = file.reopen() {
            tracing::error!(
                "SIGHUP: cannot reopen the log file {}: {e}",
                file.path().display()
            );
        }
    }
    if state.rust_log {
        tracing::info!("SIGHUP: RUST_LOG is set; log levels unchanged");
        return;
    }
    let config = match crate::config::load_from_cli(&state.cli) {
        Ok(config) => config,
        Err(e) => {
            tracing::error!("SIGHUP: configuration not re-read, log levels unchanged:\n{e}");
            return;
        }
    };
    let filter = config_filter(config.default.debug, &config.log.default_log_levels);
    match state.filter.reload(filter) {
        Ok(()) => tracing::info!(
            debug = config.default.debug,
            "SIGHUP: log levels reloaded ([DEFAULT] debug, default_log_levels)"
        ),
        Err(e) => tracing::error!("SIGHUP: log levels not reloaded: {e}"),
    }
    let fixed = LogSection {
        default_log_levels: state.log.default_log_levels.clone(),
        ..config.log.clone()
    };
    if fixed != state.log {
        tracing::warn!(
            "SIGHUP: changed log destinations or format ([DEFAULT] log_file, use_json, ...) \
             take effect at the next start"
        );
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn lapin_returned_messages_are_quiet_by_default() {
        for debug in [false, true] {
            let filter = super::config_filter(debug, &[]).to_string();
            assert!(
                filter.contains("lapin::returned_messages=error"),
                "{filter}"
            );
        }
    }
}
