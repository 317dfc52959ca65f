// SPDX-License-Identifier: Apache-2.0
//! Command line (`--config-file`, `--config-dir`, oslo.log's flags, a subcommand) and
//! oslo.config's default configuration files.
//!
//! As in oslo.config, config files and directories are read in the order they appear on the
//! command line; each directory contributes its `*.conf` files in sorted order. Without any
//! `--config-file`, the default files are read first; without any `--config-dir`, the
//! default directories that exist are read next (see [`default_config_files`]).

use std::path::{Path, PathBuf};

use super::error::ConfigError;

/// What to run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Command {
    /// Serve the `scheduler` RPC topic (the default).
    #[default]
    Run,
    /// Replay requests offline (see `simulate`).
    Simulate,
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
    /// The subcommand (first positional word); `run` when absent.
    pub command: Command,
    /// Everything after the subcommand word, for the subcommand to parse.
    pub command_args: Vec<String>,
    /// `--debug`/`-d` (`Some(true)`) or `--nodebug` (`Some(false)`): overrides
    /// `[DEFAULT] debug`.
    pub debug: Option<bool>,
    /// Other oslo.log options given (`--log-file PATH`, `--use-syslog`, ...), as
    /// `(name without dashes, value)`; accepted so service units written for nova keep
    /// working.
    pub log_options: Vec<(String, Option<String>)>,
    /// `-h`/`--help` was given.
    pub help: bool,
    /// `--version` was given.
    pub version: bool,
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

/// oslo.log options that take a value.
const LOG_VALUE_OPTIONS: &[&str] = &[
    "log-config-append",
    "log-config",
    "log_config",
    "log-date-format",
    "log-file",
    "logfile",
    "log-dir",
    "logdir",
    "syslog-log-facility",
];

/// oslo.log options that are flags.
const LOG_FLAG_OPTIONS: &[&str] = &[
    "watch-log-file",
    "use-syslog",
    "nouse-syslog",
    "use-journal",
    "nouse-journal",
    "use-json",
    "nouse-json",
    "use-eventlog",
    "nouse-eventlog",
    "nowatch-log-file",
];

/// Usage text for `--help`.
pub const USAGE: &str = "usage: nova-scheduler-rs [--config-file PATH]... [--config-dir DIR]... \
[--debug] [--log-file PATH] [run | simulate [ARGS...]]";

/// Parses the command line. `args` must not include the program name
/// (`std::env::args().skip(1)`).
pub fn parse_cli_args(args: impl Iterator<Item = String>) -> Result<CliArgs, ConfigError> {
    let mut cli = CliArgs::default();
    let mut args = args.peekable();
    let mut command_seen = false;
    let usage = |msg: String| ConfigError::Usage(format!("{msg}\n{USAGE}"));
    while let Some(arg) = args.next() {
        if arg == "--" {
            cli.command_args.extend(args.by_ref());
            break;
        }
        let (name, inline) = match arg.strip_prefix("--") {
            Some(body) => match body.split_once('=') {
                Some((n, v)) => (Some(n.to_string()), Some(v.to_string())),
                None => (Some(body.to_string()), None),
            },
            None => (None, None),
        };
        let mut value = |name: &str| -> Result<String, ConfigError> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => args
                    .next()
                    .ok_or_else(|| usage(format!("argument --{name}: expected one argument"))),
            }
        };
        match name.as_deref() {
            Some("config-file") => cli
                .sources
                .push(ConfigSource::File(PathBuf::from(value("config-file")?))),
            Some("config-dir") => cli
                .sources
                .push(ConfigSource::Dir(PathBuf::from(value("config-dir")?))),
            Some(_) if command_seen => cli.command_args.push(arg.clone()),
            Some("debug") => cli.debug = Some(true),
            Some("nodebug") => cli.debug = Some(false),
            Some("help") => cli.help = true,
            Some("version") => cli.version = true,
            Some(n) if LOG_VALUE_OPTIONS.contains(&n) => {
                let v = value(n)?;
                cli.log_options.push((n.to_string(), Some(v)));
            }
            Some(n) if LOG_FLAG_OPTIONS.contains(&n) => cli.log_options.push((n.to_string(), None)),
            Some(n) => return Err(usage(format!("unrecognized argument: --{n}"))),
            None if command_seen => cli.command_args.push(arg),
            None if arg == "-d" => cli.debug = Some(true),
            None if arg == "-h" => cli.help = true,
            None if arg.starts_with('-') && arg.len() > 1 => {
                return Err(usage(format!("unrecognized argument: {arg}")))
            }
            None => {
                cli.command = match arg.as_str() {
                    "run" => Command::Run,
                    "simulate" => Command::Simulate,
                    other => return Err(usage(format!("unknown command {other:?}"))),
                };
                command_seen = true;
            }
        }
    }
    Ok(cli)
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

    fn parse(args: &[&str]) -> Result<CliArgs, ConfigError> {
        parse_cli_args(args.iter().map(|s| s.to_string()))
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
    fn subcommand_keeps_its_arguments() {
        let cli = parse(&[
            "--config-file",
            "a.conf",
            "simulate",
            "--requests",
            "r.json",
            "x",
        ])
        .unwrap();
        assert_eq!(cli.command, Command::Simulate);
        assert_eq!(cli.command_args, vec!["--requests", "r.json", "x"]);
        // --config-file after the subcommand still counts.
        let cli = parse(&["run", "--config-file=b.conf"]).unwrap();
        assert_eq!(cli.sources, vec![ConfigSource::File("b.conf".into())]);
        assert!(cli.command_args.is_empty());
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
            .contains("expected one argument"));
        assert!(parse(&["--bogus"])
            .unwrap_err()
            .to_string()
            .contains("--bogus"));
        assert!(parse(&["serve"])
            .unwrap_err()
            .to_string()
            .contains("unknown command"));
        assert!(parse(&["-h"]).unwrap().help);
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
