// SPDX-License-Identifier: Apache-2.0
//! Command line (`--config-file`, `--config-dir`, oslo.log's flags, a subcommand) and
//! oslo.config's default configuration files.
//!
//! As in oslo.config, config files and directories are read in the order they appear on the
//! command line; each directory contributes its `*.conf` files in sorted order. Without any
//! `--config-file`, the default files are read first; without any `--config-dir`, the
//! default directories that exist are read next (see [`default_config_files`]).

//! The command line is clap's; the options every command accepts (`--config-file`,
//! `--config-dir`, `--debug`, oslo.log's) are added to each command and subcommand
//! rather than declared `global`: clap keeps only the innermost command's values of a
//! global option, which would drop the `--config-file` given before the subcommand
//! word. Each command's matches keep their own values in their own order, and the
//! commands' values are concatenated outermost first, which is command-line order.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{
    Arg, ArgAction, ArgGroup, ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand,
};

/// What `--version` prints after the program name.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("NSRS_GIT_COMMIT"),
    ", nova 34.x compatible / RPC 4.0\u{2013}4.5)"
);

/// What to run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Command {
    /// Serve the `scheduler` RPC topic (the default).
    #[default]
    Run,
    /// Decide on an embedded demo cloud (see `simulate`).
    Simulate(SimulateArgs),
    /// Check the configuration as `run` does, report every problem, start nothing.
    ConfigCheck(ConfigCheckArgs),
    /// Print a nova.conf sample of every option read.
    ConfigSample,
    /// Ask the running daemon why a request was decided as it was.
    Explain(ExplainArgs),
    /// How many more instances of a flavor fit, and where (read-only).
    Capacity(CapacityArgs),
    /// Dump what the decision reads to one JSON file (read-only).
    Snapshot(SnapshotArgs),
    /// Decide a copy of every call beside the answering scheduler and compare.
    Shadow(ShadowArgs),
    /// Print a running shadow's comparison.
    ShadowReport(ShadowReportArgs),
    /// Decide recorded calls again on a snapshot and compare (offline).
    Replay(ReplayArgs),
}

/// `explain`'s options: exactly one of `--instance`, `--request-id`, `--recent`.
// skip: the struct's own group would count `--json` or `--url` as naming a decision.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
#[group(skip)]
#[command(group(
    ArgGroup::new("which")
        .required(true)
        .multiple(false)
        .args(["instance", "request_id", "recent"])
))]
pub struct ExplainArgs {
    /// An instance uuid of the request
    #[arg(long, value_name = "UUID")]
    pub instance: Option<String>,
    /// The request id (req-...) or global request id of the call
    #[arg(long, value_name = "ID")]
    pub request_id: Option<String>,
    /// List the recent decisions, newest first (their request ids, instances and results)
    #[arg(long)]
    pub recent: bool,
    /// Why was (or was not) this host chosen? (filters and weighers run again on the
    /// host's current state)
    #[arg(long, value_name = "NAME", conflicts_with = "recent")]
    pub host: Option<String>,
    /// The daemon's listener [default: http://<[nova_scheduler_rs] http_listen>]
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Print the daemon's JSON answer
    #[arg(long)]
    pub json: bool,
}

/// `shadow`'s options.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ShadowArgs {
    #[command(subcommand)]
    action: Option<ShadowAction>,
    /// The shadow's own queue, bound beside the scheduler's [default:
    /// scheduler_shadow.<[DEFAULT] host>]
    #[arg(long, value_name = "NAME")]
    pub queue: Option<String>,
    /// Copies the broker keeps for a shadow that falls behind, the oldest dropped
    /// first [default: 10000]
    #[arg(long, value_name = "N")]
    pub max_queue: Option<u32>,
    /// Seconds to wait for the answering scheduler's claims of a call [default: 60]
    #[arg(long, value_name = "SECONDS")]
    pub settle: Option<u64>,
    /// Record every call and where the answering scheduler put its instances (gzip
    /// JSON lines, secrets stripped; for `replay`) [default: [nova_scheduler_rs]
    /// record_calls]
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
}

#[derive(Subcommand, Clone, Debug, PartialEq, Eq)]
enum ShadowAction {
    /// Print the running shadow's comparison: agreement, the disagreements grouped by
    /// the first step where the decisions part, examples (needs http_listen)
    Report(ShadowReportArgs),
}

/// `shadow report`'s options.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct ShadowReportArgs {
    /// The shadow's listener [default: http://<[nova_scheduler_rs] http_listen>]
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Print the shadow's JSON answer
    #[arg(long)]
    pub json: bool,
}

/// `capacity`'s options.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct CapacityArgs {
    /// A flavor of the API database (by name, else by flavorid)
    #[arg(long, value_name = "NAME", conflicts_with_all = ["vcpus", "ram", "disk"])]
    pub flavor: Option<String>,
    /// vCPUs of the flavor to fit (without --flavor)
    #[arg(long, value_name = "N")]
    pub vcpus: Option<u64>,
    /// RAM in MB of the flavor to fit (without --flavor)
    #[arg(long, value_name = "MB")]
    pub ram: Option<u64>,
    /// Root disk in GB of the flavor to fit (without --flavor)
    #[arg(long, value_name = "GB")]
    pub disk: Option<u64>,
    /// An extra spec of the flavor (added to --flavor's); repeatable
    #[arg(long = "extra-spec", value_name = "KEY=VALUE")]
    pub extra_specs: Vec<String>,
    /// Ask for this availability zone, as `openstack server create --availability-zone`
    #[arg(long, value_name = "AZ")]
    pub availability_zone: Option<String>,
    /// The project the instances would belong to (tenant-isolation filters read it)
    #[arg(long, value_name = "ID")]
    pub project: Option<String>,
    /// Stop counting at this many instances [default: 10000]
    #[arg(long, value_name = "N")]
    pub max: Option<u64>,
    /// Placements listed [default: 10]
    #[arg(long, value_name = "N")]
    pub show: Option<u64>,
    /// Print one JSON document instead of text
    #[arg(long)]
    pub json: bool,
}

/// `snapshot`'s options.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotArgs {
    /// The JSON file to write
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: PathBuf,
}

/// `replay`'s options.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayArgs {
    /// A recording written with record_calls; repeat it for rotated files (read
    /// oldest first, whatever the order given)
    #[arg(long = "recording", value_name = "FILE", required = true)]
    pub recordings: Vec<PathBuf>,
    /// The snapshot (written by `snapshot`) every call is decided on
    #[arg(long, value_name = "FILE")]
    pub snapshot: PathBuf,
    /// Examples shown per step at which decisions differ [default: 10]
    #[arg(long, value_name = "N")]
    pub show: Option<usize>,
    /// Seed of the random choices (host_subset_size) [default: 42]
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Print one JSON document instead of text
    #[arg(long)]
    pub json: bool,
}

/// `simulate`'s options; unset ones keep `SimulateOptions`' defaults.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct SimulateArgs {
    /// Hosts in the demo cloud [default: 20]
    #[arg(long, value_name = "N")]
    pub hosts: Option<u64>,
    /// Requests to decide [default: 5]; with --snapshot, a JSON file of requests
    #[arg(long, value_name = "N|FILE")]
    pub requests: Option<String>,
    /// Instances per request [default: 2]
    #[arg(long, value_name = "N")]
    pub instances: Option<u64>,
    /// Seed of the demo cloud and of the random choices [default: 42]
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Replay on a file written by `snapshot` instead of the demo cloud
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<PathBuf>,
    /// With --snapshot: a flavor of the snapshot, placed --count times
    #[arg(
        long,
        value_name = "NAME",
        requires = "snapshot",
        conflicts_with = "requests"
    )]
    pub flavor: Option<String>,
    /// With --flavor: single-instance requests to place [default: 1]
    #[arg(long, value_name = "N", requires = "flavor")]
    pub count: Option<u64>,
    /// Print one JSON document instead of text
    #[arg(long)]
    pub json: bool,
}

/// One configuration source, in command-line order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// A file that must exist.
    File(PathBuf),
    /// A directory that must exist; its `*.conf` files are read in sorted order.
    Dir(PathBuf),
    /// A default file or directory: read only if it exists.
    Optional(Box<ConfigSource>),
}

/// The parsed command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CliArgs {
    /// `--config-file` and `--config-dir` in the order given.
    pub sources: Vec<ConfigSource>,
    /// The subcommand; `run` when absent.
    pub command: Command,
    /// `--debug`/`-d` (`Some(true)`) or `--nodebug` (`Some(false)`), the last one given:
    /// overrides `[DEFAULT] debug`.
    pub debug: Option<bool>,
    /// Other oslo.log options given (`--log-file PATH`, `--use-syslog`, ...), as
    /// `(name without dashes, value)`, in command-line order; accepted so service units
    /// written for nova keep working.
    pub log_options: Vec<(String, Option<String>)>,
}

impl CliArgs {
    /// The explicit `--config-file` paths.
    pub fn config_files(&self) -> Vec<&Path> {
        self.sources
            .iter()
            .filter_map(|s| match s {
                ConfigSource::File(p) => Some(p.as_path()),
                _ => None,
            })
            .collect()
    }

    /// The explicit `--config-dir` paths.
    pub fn config_dirs(&self) -> Vec<&Path> {
        self.sources
            .iter()
            .filter_map(|s| match s {
                ConfigSource::Dir(p) => Some(p.as_path()),
                _ => None,
            })
            .collect()
    }

    /// Every source to read, defaults included, in oslo.config's order.
    pub fn effective_sources(&self) -> Vec<ConfigSource> {
        effective_sources(&self.sources, home_dir().as_deref())
    }
}

/// oslo.log options that take a value (deprecated spellings last).
pub const LOG_VALUE_OPTIONS: &[&str] = &[
    "log-config-append",
    "log-date-format",
    "log-file",
    "log-dir",
    "syslog-log-facility",
    "log-config",
    "log_config",
    "logfile",
    "logdir",
];

/// oslo.log options that are flags.
pub const LOG_FLAG_OPTIONS: &[&str] = &[
    "watch-log-file",
    "use-syslog",
    "use-journal",
    "use-json",
    "use-eventlog",
    "nowatch-log-file",
    "nouse-syslog",
    "nouse-journal",
    "nouse-json",
    "nouse-eventlog",
];

/// What each oslo.log option is, for `--help`; deprecated spellings are hidden.
fn log_help(name: &str) -> Option<&'static str> {
    Some(match name {
        "log-config-append" => "A logging configuration file (Python logging format)",
        "log-date-format" => "Format of the date in log records",
        "log-file" => "Log to this file",
        "log-dir" => "Directory of the log file",
        "syslog-log-facility" => "Syslog facility",
        "watch-log-file" => "Reopen the log file when it is moved",
        "use-syslog" => "Log to syslog",
        "use-journal" => "Log to the systemd journal",
        "use-json" => "Log JSON records",
        "use-eventlog" => "Log to the Windows event log",
        _ => return None,
    })
}

const COMMON: &str = "Options of every command";
const LOGGING: &str = "Logging options (oslo.log)";

/// `nova-scheduler-rs`: nova-scheduler's RPC service, reading nova.conf.
#[derive(Parser, Debug)]
#[command(
    name = "nova-scheduler-rs",
    version = VERSION,
    propagate_version = true,
    disable_help_subcommand = true,
    about = "nova-scheduler's RPC service, reading the operator's nova.conf",
    after_help = "Without a command, `run`. Exit codes: 0 success, 64 bad command line or \
                  configuration, 1 failure at startup or while serving."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Sub>,
}

#[derive(Subcommand, Debug)]
enum Sub {
    /// Serve nova's `scheduler` RPC topic (the default)
    Run,
    /// Decide on an embedded demo cloud, or replay requests on a snapshot: no broker,
    /// database or Placement
    Simulate(SimulateArgs),
    /// How many more instances of a flavor fit, and where: decided as the daemon
    /// decides, on the live cloud, writing nothing
    Capacity(CapacityArgs),
    /// Write what the decision reads (host states, aggregates, Placement's providers,
    /// flavors) to one JSON file, without secrets
    Snapshot(SnapshotArgs),
    /// Decide the calls of a recording (record_calls) again on a snapshot and compare
    /// each instance with the recorded answer: no broker, database or Placement
    Replay(ReplayArgs),
    /// Check or describe nova.conf
    #[command(subcommand)]
    Config(ConfigSub),
    /// Why did the running daemon decide a request as it did? (needs http_listen)
    Explain(ExplainArgs),
    /// Read-only: decide a copy of every call beside the answering scheduler (nova's,
    /// or this daemon with another nova.conf) and compare; claims, answers and writes
    /// nothing
    Shadow(ShadowArgs),
}

/// `config check`'s options.
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigCheckArgs {
    /// Also reach each database (and each cell's), the broker and Placement once with
    /// the configured credentials and TLS, and report each; nothing is written
    #[arg(long)]
    pub connect: bool,
}

#[derive(Subcommand, Debug)]
enum ConfigSub {
    /// Check the configuration as `run` does and report every problem, start nothing
    /// (exit 0: clean, 1: errors, 2: no configuration file read)
    Check(ConfigCheckArgs),
    /// Print a nova.conf sample of every option read, with its default
    Sample,
}

/// The options every command accepts, in the order of `--help`.
fn common_args() -> Vec<Arg> {
    let mut args = vec![
        Arg::new("config-file")
            .long("config-file")
            .value_name("PATH")
            .action(ArgAction::Append)
            .value_parser(clap::value_parser!(PathBuf))
            .help_heading(COMMON)
            .help("A nova.conf to read; repeatable [default: /etc/nova/nova.conf, ...]"),
        Arg::new("config-dir")
            .long("config-dir")
            .value_name("DIR")
            .action(ArgAction::Append)
            .value_parser(clap::value_parser!(PathBuf))
            .help_heading(COMMON)
            .help("A directory of *.conf files to read; repeatable, in order with --config-file"),
        Arg::new("debug")
            .long("debug")
            .short('d')
            .action(ArgAction::SetTrue)
            .overrides_with("debug")
            .help_heading(COMMON)
            .help("Debug logging (overrides [DEFAULT] debug)"),
        Arg::new("nodebug")
            .long("nodebug")
            .action(ArgAction::SetTrue)
            .overrides_with("nodebug")
            .help_heading(COMMON)
            .help("No debug logging (overrides [DEFAULT] debug)"),
    ];
    for &name in LOG_VALUE_OPTIONS {
        let arg = Arg::new(name)
            .long(name)
            .value_name(if name.contains("dir") {
                "DIR"
            } else if name.contains("format") || name.contains("facility") {
                "VALUE"
            } else {
                "PATH"
            })
            .action(ArgAction::Append)
            .help_heading(LOGGING);
        args.push(match log_help(name) {
            Some(help) => arg.help(help),
            None => arg.hide(true),
        });
    }
    for &name in LOG_FLAG_OPTIONS {
        let arg = Arg::new(name)
            .long(name)
            .action(ArgAction::SetTrue)
            .overrides_with(name)
            .help_heading(LOGGING);
        args.push(match log_help(name) {
            Some(help) => arg.help(help),
            None => arg.hide(true),
        });
    }
    args
}

/// `cmd` and each of its subcommands, recursively, with [`common_args`].
fn with_common_args(mut cmd: clap::Command) -> clap::Command {
    let names: Vec<String> = cmd
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect();
    for name in names {
        cmd = cmd.mut_subcommand(name, with_common_args);
    }
    cmd.args(common_args())
}

/// The whole command line (for `--help` and tests).
pub fn command() -> clap::Command {
    with_common_args(Cli::command())
}

/// The common options given on one command's part of the line, as
/// `(position, option name, value)`.
fn common_values(m: &ArgMatches) -> Vec<(usize, &'static str, Option<OsString>)> {
    let mut out = Vec::new();
    let given = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    for id in ["config-file", "config-dir"]
        .into_iter()
        .chain(LOG_VALUE_OPTIONS.iter().copied())
    {
        if !given(id) {
            continue;
        }
        let values = m.get_raw(id).into_iter().flatten();
        let indices = m.indices_of(id).into_iter().flatten();
        for (i, v) in indices.zip(values) {
            out.push((i, id, Some(v.to_os_string())));
        }
    }
    for id in ["debug", "nodebug"]
        .into_iter()
        .chain(LOG_FLAG_OPTIONS.iter().copied())
    {
        if given(id) {
            for i in m.indices_of(id).into_iter().flatten() {
                out.push((i, id, None));
            }
        }
    }
    out.sort_by_key(|(i, _, _)| *i);
    out
}

/// Parses the command line. `args` must not include the program name
/// (`std::env::args_os().skip(1)`). `--help` and `--version` come back as errors of
/// kind `DisplayHelp` / `DisplayVersion` (print them, exit 0).
pub fn parse_cli_args<I, T>(args: I) -> Result<CliArgs, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let argv = std::iter::once(OsString::from("nova-scheduler-rs"))
        .chain(args.into_iter().map(Into::into));
    let matches = command().try_get_matches_from(argv)?;
    let cli = Cli::from_arg_matches(&matches)?;
    let mut out = CliArgs {
        command: match cli.command {
            None | Some(Sub::Run) => Command::Run,
            Some(Sub::Simulate(args)) => Command::Simulate(args),
            Some(Sub::Capacity(args)) => Command::Capacity(args),
            Some(Sub::Snapshot(args)) => Command::Snapshot(args),
            Some(Sub::Replay(args)) => Command::Replay(args),
            Some(Sub::Config(ConfigSub::Check(args))) => Command::ConfigCheck(args),
            Some(Sub::Config(ConfigSub::Sample)) => Command::ConfigSample,
            Some(Sub::Explain(args)) => Command::Explain(args),
            Some(Sub::Shadow(ShadowArgs {
                action: Some(ShadowAction::Report(args)),
                ..
            })) => Command::ShadowReport(args),
            Some(Sub::Shadow(args)) => Command::Shadow(args),
        },
        ..CliArgs::default()
    };
    // The outermost command's options come first on the line.
    let mut level = Some(&matches);
    while let Some(m) = level {
        for (_, id, value) in common_values(m) {
            match (id, value) {
                ("config-file", Some(v)) => out.sources.push(ConfigSource::File(v.into())),
                ("config-dir", Some(v)) => out.sources.push(ConfigSource::Dir(v.into())),
                ("debug", _) => out.debug = Some(true),
                ("nodebug", _) => out.debug = Some(false),
                (name, value) => out.log_options.push((
                    name.to_string(),
                    value.map(|v| v.to_string_lossy().into_owned()),
                )),
            }
        }
        level = m.subcommand().map(|(_, sub)| sub);
    }
    Ok(out)
}

/// `$HOME`, for `~` expansion and the `~/.nova` defaults.
fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// Expands a leading `~/` (oslo expands `~` in config paths).
pub fn expand_home(path: &Path) -> PathBuf {
    match (path.strip_prefix("~"), home_dir()) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_path_buf(),
    }
}

/// Where oslo.config looks for project `nova`: `~/.nova/`, `~/`, `/etc/nova/`, `/etc/`.
fn search_dirs(home: Option<&Path>) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(home) = home {
        dirs.push(home.join(".nova"));
        dirs.push(home.to_path_buf());
    }
    dirs.push(PathBuf::from("/etc/nova"));
    dirs.push(PathBuf::from("/etc"));
    dirs
}

/// The first existing `name` in the search directories.
fn first_existing(home: Option<&Path>, name: &str) -> Option<PathBuf> {
    search_dirs(home)
        .into_iter()
        .map(|d| d.join(name))
        .find(|p| p.exists())
}

/// oslo.config's `find_config_files(project='nova', prog='nova-scheduler')`: the first
/// existing `nova.conf` and the first existing `nova-scheduler.conf`, each searched in
/// `~/.nova/`, `~/`, `/etc/nova/`, `/etc/` (in that order).
pub fn default_config_files(home: Option<&Path>) -> Vec<PathBuf> {
    ["nova.conf", "nova-scheduler.conf"]
        .iter()
        .filter_map(|name| first_existing(home, name))
        .collect()
}

/// oslo.config's `find_config_dirs`: the first existing `nova.conf.d` and
/// `nova-scheduler.conf.d`, searched like [`default_config_files`].
pub fn default_config_dirs(home: Option<&Path>) -> Vec<PathBuf> {
    ["nova.conf.d", "nova-scheduler.conf.d"]
        .iter()
        .filter_map(|name| first_existing(home, name))
        .collect()
}

/// The sources oslo.config reads for a command line: the default files when no
/// `--config-file` was given, then the default directories when no `--config-dir` was
/// given, then the command-line sources in order.
pub fn effective_sources(cli_sources: &[ConfigSource], home: Option<&Path>) -> Vec<ConfigSource> {
    let has_file = cli_sources
        .iter()
        .any(|s| matches!(s, ConfigSource::File(_)));
    let has_dir = cli_sources
        .iter()
        .any(|s| matches!(s, ConfigSource::Dir(_)));
    let mut out = Vec::new();
    if !has_file {
        out.extend(
            default_config_files(home)
                .into_iter()
                .map(ConfigSource::File),
        );
    }
    if !has_dir {
        out.extend(
            default_config_dirs(home)
                .into_iter()
                .map(|d| ConfigSource::Optional(Box::new(ConfigSource::Dir(d)))),
        );
    }
    out.extend(cli_sources.iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<CliArgs, clap::Error> {
        parse_cli_args(args)
    }

    #[test]
    fn the_command_line_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn config_files_and_dirs_in_order() {
        let cli = parse(&[
            "--config-file",
            "/etc/nova/nova.conf",
            "--config-dir=/etc/nova/nova.conf.d",
            "--config-file=/etc/nova/extra.conf",
        ])
        .unwrap();
        assert_eq!(
            cli.sources,
            vec![
                ConfigSource::File("/etc/nova/nova.conf".into()),
                ConfigSource::Dir("/etc/nova/nova.conf.d".into()),
                ConfigSource::File("/etc/nova/extra.conf".into()),
            ]
        );
        assert_eq!(cli.config_files().len(), 2);
        assert_eq!(cli.config_dirs(), vec![Path::new("/etc/nova/nova.conf.d")]);
        assert_eq!(cli.command, Command::Run);
    }

    #[test]
    fn subcommands_and_their_options() {
        let cli = parse(&[
            "--config-file",
            "a.conf",
            "simulate",
            "--hosts",
            "7",
            "--seed=3",
        ])
        .unwrap();
        assert_eq!(
            cli.command,
            Command::Simulate(SimulateArgs {
                hosts: Some(7),
                seed: Some(3),
                ..SimulateArgs::default()
            })
        );
        assert_eq!(cli.sources, vec![ConfigSource::File("a.conf".into())]);
        assert_eq!(parse(&[]).unwrap().command, Command::Run);
        assert_eq!(parse(&["run"]).unwrap().command, Command::Run);
        assert_eq!(
            parse(&["config", "check"]).unwrap().command,
            Command::ConfigCheck(ConfigCheckArgs::default())
        );
        assert_eq!(
            parse(&["config", "sample"]).unwrap().command,
            Command::ConfigSample
        );
        let cli = parse(&[
            "replay",
            "--recording",
            "calls.gz",
            "--recording",
            "calls.gz.1",
            "--snapshot",
            "cloud.json",
            "--show",
            "3",
            "--config-file",
            "other.conf",
        ])
        .unwrap();
        assert_eq!(
            cli.command,
            Command::Replay(ReplayArgs {
                recordings: vec!["calls.gz".into(), "calls.gz.1".into()],
                snapshot: "cloud.json".into(),
                show: Some(3),
                ..ReplayArgs::default()
            })
        );
        assert_eq!(cli.sources, vec![ConfigSource::File("other.conf".into())]);
        for bad in [
            &["replay", "--snapshot", "cloud.json"][..],
            &["replay", "--recording", "calls.gz"],
            &["simulate", "--hosts", "many"],
            &["simulate", "--hosts"],
            &["simulate", "--bogus", "1"],
            &["config"],
            &["config", "frobnicate"],
            &["serve"],
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.use_stderr(), "{bad:?}: {e}");
        }
    }

    #[test]
    fn explain_names_exactly_one_decision_or_the_recent_list() {
        let explain = |args: &[&str]| match parse(args).map(|c| c.command) {
            Ok(Command::Explain(a)) => Ok(a),
            Ok(other) => panic!("{args:?}: {other:?}"),
            Err(e) => Err(e),
        };
        let a = explain(&["explain", "--instance", "u1", "--host", "h", "--json"]).unwrap();
        assert_eq!(a.instance.as_deref(), Some("u1"));
        assert_eq!(a.host.as_deref(), Some("h"));
        assert!(a.json && !a.recent);
        let a = explain(&["explain", "--request-id", "req-1"]).unwrap();
        assert_eq!(a.request_id.as_deref(), Some("req-1"));
        let a = explain(&["explain", "--recent", "--url", "http://127.0.0.1:9101"]).unwrap();
        assert!(a.recent && a.instance.is_none() && a.request_id.is_none());
        use clap::error::ErrorKind;
        for (bad, kind) in [
            // --json and --url name no decision.
            (
                &["explain", "--json", "--url", "http://127.0.0.1:9101"][..],
                ErrorKind::MissingRequiredArgument,
            ),
            (&["explain"], ErrorKind::MissingRequiredArgument),
            (
                &["explain", "--host", "h"],
                ErrorKind::MissingRequiredArgument,
            ),
            (
                &["explain", "--instance", "u1", "--request-id", "req-1"],
                ErrorKind::ArgumentConflict,
            ),
            (
                &["explain", "--instance", "u1", "--recent"],
                ErrorKind::ArgumentConflict,
            ),
            (
                &["explain", "--recent", "--host", "h"],
                ErrorKind::ArgumentConflict,
            ),
        ] {
            let e = explain(bad).unwrap_err();
            assert_eq!(e.kind(), kind, "{bad:?}: {e}");
            assert!(e.use_stderr(), "{bad:?}");
        }
    }

    #[test]
    fn common_options_after_the_subcommand_keep_command_line_order() {
        let cli = parse(&[
            "--config-file",
            "a.conf",
            "--config-dir=d1",
            "config",
            "--config-file",
            "b.conf",
            "check",
            "--config-dir",
            "d2",
            "--config-file=c.conf",
            "--nodebug",
            "--log-file",
            "/var/log/x.log",
        ])
        .unwrap();
        assert_eq!(
            cli.command,
            Command::ConfigCheck(ConfigCheckArgs::default())
        );
        assert_eq!(
            cli.sources,
            vec![
                ConfigSource::File("a.conf".into()),
                ConfigSource::Dir("d1".into()),
                ConfigSource::File("b.conf".into()),
                ConfigSource::Dir("d2".into()),
                ConfigSource::File("c.conf".into()),
            ]
        );
        assert_eq!(cli.debug, Some(false));
        assert_eq!(
            cli.log_options,
            vec![("log-file".to_string(), Some("/var/log/x.log".to_string()))]
        );
        let cli = parse(&["run", "--config-file=b.conf", "-d"]).unwrap();
        assert_eq!(cli.sources, vec![ConfigSource::File("b.conf".into())]);
        assert_eq!(cli.debug, Some(true));
        // The last of --debug / --nodebug wins, as in oslo.
        assert_eq!(parse(&["--debug", "--nodebug"]).unwrap().debug, Some(false));
        assert_eq!(
            parse(&["--nodebug", "run", "--debug"]).unwrap().debug,
            Some(true)
        );
        assert_eq!(parse(&["-d", "-d"]).unwrap().debug, Some(true));
        assert_eq!(parse(&[]).unwrap().debug, None);
    }

    #[test]
    fn every_oslo_log_spelling_is_accepted() {
        for &name in LOG_VALUE_OPTIONS {
            let flag = format!("--{name}");
            let cli = parse(&[&flag, "v", "run", &flag, "w"]).unwrap();
            assert_eq!(
                cli.log_options,
                vec![
                    (name.to_string(), Some("v".to_string())),
                    (name.to_string(), Some("w".to_string()))
                ]
            );
        }
        for &name in LOG_FLAG_OPTIONS {
            let cli = parse(&["simulate", &format!("--{name}")]).unwrap();
            assert_eq!(cli.log_options, vec![(name.to_string(), None)]);
        }
    }

    #[test]
    fn help_and_version_are_not_errors() {
        for args in [
            &["--help"][..],
            &["-h"],
            &["run", "--help"],
            &["simulate", "--help"],
            &["config", "check", "--help"],
            &["config", "--help"],
        ] {
            let e = parse(args).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{args:?}");
            assert!(!e.use_stderr());
        }
        for args in [&["--version"][..], &["-V"], &["run", "--version"]] {
            let e = parse(args).unwrap_err();
            assert_eq!(e.kind(), clap::error::ErrorKind::DisplayVersion, "{args:?}");
            assert!(e.to_string().contains("nova 34.x compatible"), "{e}");
        }
    }

    #[test]
    fn oslo_log_flags_and_errors() {
        let cli = parse(&[
            "--debug",
            "--log-file",
            "/var/log/nova/s.log",
            "--use-syslog",
        ])
        .unwrap();
        assert_eq!(cli.debug, Some(true));
        assert_eq!(
            cli.log_options,
            vec![
                (
                    "log-file".to_string(),
                    Some("/var/log/nova/s.log".to_string())
                ),
                ("use-syslog".to_string(), None),
            ]
        );
        assert!(parse(&["--config-file"])
            .unwrap_err()
            .to_string()
            .contains("--config-file"));
        assert!(parse(&["--bogus"])
            .unwrap_err()
            .to_string()
            .contains("--bogus"));
        assert!(parse(&["serve"]).unwrap_err().to_string().contains("serve"));
    }

    #[test]
    fn default_search_order() {
        let home = std::env::temp_dir().join(format!("nova-cfg-home-{}", std::process::id()));
        std::fs::create_dir_all(home.join(".nova/nova.conf.d")).unwrap();
        std::fs::write(home.join("nova.conf"), "").unwrap();
        std::fs::write(home.join(".nova/nova.conf"), "").unwrap();
        std::fs::write(home.join("nova-scheduler.conf"), "").unwrap();
        let files = default_config_files(Some(&home));
        // ~/.nova/ comes before ~/ ; one file per name.
        assert_eq!(files[0], home.join(".nova/nova.conf"));
        assert_eq!(files[1], home.join("nova-scheduler.conf"));
        let sources = effective_sources(&[ConfigSource::Dir("d".into())], Some(&home));
        assert_eq!(sources[0], ConfigSource::File(home.join(".nova/nova.conf")));
        assert_eq!(sources.last(), Some(&ConfigSource::Dir("d".into())));
        let with_file = effective_sources(&[ConfigSource::File("f".into())], Some(&home));
        assert_eq!(
            with_file,
            vec![
                ConfigSource::Optional(Box::new(ConfigSource::Dir(home.join(".nova/nova.conf.d")))),
                ConfigSource::File("f".into()),
            ]
        );
        std::fs::remove_dir_all(&home).unwrap();
    }
}
