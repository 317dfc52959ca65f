// SPDX-License-Identifier: Apache-2.0
//! oslo.log's `[DEFAULT]` options (oslo_log/_options.py), with oslo's names, deprecated
//! names and defaults, and the command-line flags that override them.
//!
//! `debug` itself stays in [`super::DefaultSection`]; everything else that chooses where
//! and how lines are written is here. [`crate::telemetry`] acts on it.

use std::path::{Path, PathBuf};

use super::error::ConfigError;
use super::ini::RawConfig;
use super::reader::Reader;

/// oslo.log's `_DEFAULT_LOG_DATE_FORMAT`.
pub const DEFAULT_LOG_DATE_FORMAT: &str = "%Y-%m-%d %H:%M:%S";

/// oslo.log's `DEFAULT_LOG_LEVELS` (Python logger names; see
/// `crate::telemetry::filter` for the ones that name something in this daemon).
pub const DEFAULT_LOG_LEVELS: &[&str] = &[
    "amqp=WARN",
    "amqplib=WARN",
    "boto=WARN",
    "qpid=WARN",
    "sqlalchemy=WARN",
    "suds=INFO",
    "oslo.messaging=INFO",
    "oslo_messaging=INFO",
    "iso8601=WARN",
    "requests.packages.urllib3.connectionpool=WARN",
    "urllib3.connectionpool=WARN",
    "websocket=WARN",
    "requests.packages.urllib3.util.retry=WARN",
    "urllib3.util.retry=WARN",
    "keystonemiddleware=WARN",
    "routes.middleware=WARN",
    "stevedore=WARN",
    "taskflow=WARN",
    "keystoneauth=WARN",
    "oslo.cache=INFO",
    "oslo_policy=INFO",
    "dogpile.core.dogpile=INFO",
];

/// Syslog facilities by oslo's names (`LOG_` optional, any case), with their codes
/// from syslog.h.
pub const SYSLOG_FACILITIES: &[(&str, u8)] = &[
    ("LOG_KERN", 0),
    ("LOG_USER", 1),
    ("LOG_MAIL", 2),
    ("LOG_DAEMON", 3),
    ("LOG_AUTH", 4),
    ("LOG_SYSLOG", 5),
    ("LOG_LPR", 6),
    ("LOG_NEWS", 7),
    ("LOG_UUCP", 8),
    ("LOG_CRON", 9),
    ("LOG_AUTHPRIV", 10),
    ("LOG_FTP", 11),
    ("LOG_LOCAL0", 16),
    ("LOG_LOCAL1", 17),
    ("LOG_LOCAL2", 18),
    ("LOG_LOCAL3", 19),
    ("LOG_LOCAL4", 20),
    ("LOG_LOCAL5", 21),
    ("LOG_LOCAL6", 22),
    ("LOG_LOCAL7", 23),
];

/// The facility code of an oslo facility name (`LOG_LOCAL0`, `local0`, `user`, ...),
/// as oslo's `_find_facility` accepts it.
pub fn syslog_facility_code(name: &str) -> Result<u8, String> {
    let upper = name.trim().to_ascii_uppercase();
    let full = if upper.starts_with("LOG_") {
        upper
    } else {
        format!("LOG_{upper}")
    };
    SYSLOG_FACILITIES
        .iter()
        .find(|(n, _)| *n == full)
        .map(|(_, code)| *code)
        .ok_or_else(|| {
            let names: Vec<&str> = SYSLOG_FACILITIES.iter().map(|(n, _)| *n).collect();
            format!("syslog facility must be one of: {}", names.join(", "))
        })
}

/// A Python logging level name or number as `default_log_levels` gives it, as a
/// `tracing` level directive (`trace`..`error`); `None` for `NOTSET` (inherit).
/// CRITICAL and FATAL have no `tracing` equivalent above ERROR: they become `error`.
pub fn python_level(text: &str) -> Result<Option<&'static str>, String> {
    let text = text.trim();
    if let Ok(n) = text.parse::<i64>() {
        return Ok(Some(match n {
            i64::MIN..=0 => return Ok(None),
            1..=5 => "trace",
            6..=10 => "debug",
            11..=20 => "info",
            21..=30 => "warn",
            _ => "error",
        }));
    }
    match text.to_ascii_uppercase().as_str() {
        "NOTSET" => Ok(None),
        "TRACE" => Ok(Some("trace")),
        "DEBUG" => Ok(Some("debug")),
        "INFO" => Ok(Some("info")),
        "WARN" | "WARNING" => Ok(Some("warn")),
        "ERROR" | "CRITICAL" | "FATAL" => Ok(Some("error")),
        _ => Err(format!("Unknown level: {text:?}")),
    }
}

/// Checks `logger=LEVEL` pairs as oslo's `_setup_logging_from_conf` reads them.
fn check_log_levels(pairs: &[String]) -> Result<(), String> {
    for pair in pairs {
        let (_, level) = pair.split_once('=').unwrap_or((pair, ""));
        python_level(level).map_err(|e| format!("{pair:?}: {e}"))?;
    }
    Ok(())
}

/// oslo.log's options in `[DEFAULT]` (besides `debug`).
#[derive(Clone, Debug, PartialEq)]
pub struct LogSection {
    /// `log_file` (deprecated name `logfile`): the file lines are appended to.
    pub log_file: Option<PathBuf>,
    /// `log_dir` (deprecated name `logdir`): the base of a relative `log_file`; alone,
    /// lines go to `<log_dir>/<binary name>.log`.
    pub log_dir: Option<PathBuf>,
    /// `use_json`: one JSON object per line, with oslo's JSONFormatter keys.
    pub use_json: bool,
    /// `use_journal`: the systemd journal's native protocol.
    pub use_journal: bool,
    /// `use_syslog`: `/dev/log` with `syslog_log_facility`.
    pub use_syslog: bool,
    /// `syslog_log_facility` (default `LOG_USER`).
    pub syslog_log_facility: String,
    /// `use_stderr`: stderr as well as a file or the journal.
    pub use_stderr: bool,
    /// `log_date_format`: Python strftime format of the timestamp.
    pub log_date_format: String,
    /// `default_log_levels`: `logger=LEVEL` pairs.
    pub default_log_levels: Vec<String>,
    /// `watch_log_file` (deprecated in oslo): the file is always watched here.
    pub watch_log_file: bool,
    /// `log_config_append`: a Python logging configuration file (not read).
    pub log_config_append: Option<String>,
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection {
            log_file: None,
            log_dir: None,
            use_json: false,
            use_journal: false,
            use_syslog: false,
            syslog_log_facility: "LOG_USER".into(),
            use_stderr: false,
            log_date_format: DEFAULT_LOG_DATE_FORMAT.into(),
            default_log_levels: DEFAULT_LOG_LEVELS.iter().map(|s| s.to_string()).collect(),
            watch_log_file: false,
            log_config_append: None,
        }
    }
}

impl LogSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let mut r = Reader::new(raw, "DEFAULT", errors);
        r.alias("log_file", "DEFAULT", "logfile");
        r.alias("log_dir", "DEFAULT", "logdir");
        r.alias("log_config_append", "DEFAULT", "log_config");
        let non_empty = |s: String| (!s.is_empty()).then(|| PathBuf::from(s));
        let section = LogSection {
            log_file: r.opt_string("log_file").and_then(non_empty),
            log_dir: r.opt_string("log_dir").and_then(non_empty),
            use_json: r.bool("use_json", false),
            use_journal: r.bool("use_journal", false),
            use_syslog: r.bool("use_syslog", false),
            syslog_log_facility: r.string("syslog_log_facility", "LOG_USER"),
            use_stderr: r.bool("use_stderr", false),
            log_date_format: r.string("log_date_format", DEFAULT_LOG_DATE_FORMAT),
            default_log_levels: r.list("default_log_levels", DEFAULT_LOG_LEVELS),
            watch_log_file: r.bool("watch_log_file", false),
            log_config_append: r.opt_string("log_config_append").filter(|s| !s.is_empty()),
        };
        if section.use_syslog {
            if let Err(reason) = syslog_facility_code(&section.syslog_log_facility) {
                r.reject("syslog_log_facility", reason);
            }
        }
        if let Err(reason) = check_log_levels(&section.default_log_levels) {
            r.reject("default_log_levels", reason);
        }
        section
    }

    /// Applies oslo.log's command-line options (`--log-file PATH`, `--use-json`,
    /// `--nouse-syslog`, ...; names without dashes, `_` and `-` alike), which win over
    /// the files as oslo.config's CLI options do. Unknown names are left alone.
    pub fn apply_cli(&mut self, options: &[(String, Option<String>)]) -> Result<(), ConfigError> {
        for (name, value) in options {
            let name = name.trim_start_matches('-').replace('_', "-");
            let value = value.clone().unwrap_or_default();
            let path = || (!value.is_empty()).then(|| PathBuf::from(&value));
            match name.as_str() {
                "log-file" | "logfile" => self.log_file = path(),
                "log-dir" | "logdir" => self.log_dir = path(),
                "log-date-format" => self.log_date_format = value.clone(),
                "syslog-log-facility" => self.syslog_log_facility = value.clone(),
                "log-config-append" | "log-config" => {
                    self.log_config_append = (!value.is_empty()).then(|| value.clone())
                }
                "use-json" => self.use_json = true,
                "nouse-json" => self.use_json = false,
                "use-journal" => self.use_journal = true,
                "nouse-journal" => self.use_journal = false,
                "use-syslog" => self.use_syslog = true,
                "nouse-syslog" => self.use_syslog = false,
                "watch-log-file" => self.watch_log_file = true,
                "nowatch-log-file" => self.watch_log_file = false,
                _ => {}
            }
        }
        if self.use_syslog {
            syslog_facility_code(&self.syslog_log_facility).map_err(|reason| {
                ConfigError::Invalid {
                    group: "DEFAULT".into(),
                    option: "syslog_log_facility".into(),
                    reason,
                }
            })?;
        }
        Ok(())
    }

    /// oslo's `_get_log_file_path`: `log_file` joined to `log_dir` when relative (an
    /// absolute `log_file` ignores `log_dir`), or `<log_dir>/<binary>.log`; `None`
    /// when neither is set.
    pub fn log_path(&self, binary: &str) -> Option<PathBuf> {
        match (&self.log_file, &self.log_dir) {
            (Some(file), Some(dir)) => Some(dir.join(file)),
            (Some(file), None) => Some(file.clone()),
            (None, Some(dir)) => Some(dir.join(format!("{binary}.log"))),
            (None, None) => None,
        }
    }

    /// The syslog facility code (`LOG_USER` when the name is bad; the name was checked
    /// when `use_syslog` is set).
    pub fn facility(&self) -> u8 {
        syslog_facility_code(&self.syslog_log_facility).unwrap_or(1)
    }
}

/// Warnings for oslo.log flags given on the command line that the daemon accepts
/// and does not act on (`--log-config-append`, `--use-eventlog`).
pub fn cli_warnings(options: &[(String, Option<String>)]) -> Vec<String> {
    options
        .iter()
        .filter_map(|(name, _)| {
            let name = name.trim_start_matches('-');
            let reason = match name.replace('_', "-").as_str() {
                "log-config-append" | "log-config" => {
                    "Python logging configuration files are not read; the other oslo.log \
                     options apply"
                }
                "use-eventlog" => "there is no Windows event log",
                _ => return None,
            };
            Some(format!(
                "option --{name} is accepted but not honoured: {reason}"
            ))
        })
        .collect()
}

/// The name oslo uses for `<log_dir>/<binary>.log` and the syslog identifier: the
/// program's file name.
pub fn binary_name() -> String {
    std::env::args_os()
        .next()
        .and_then(|a| {
            Path::new(&a)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "nova-scheduler-rs".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> (LogSection, Vec<ConfigError>) {
        let mut raw = RawConfig::new();
        raw.add_str("l.conf", text).unwrap();
        let mut errors = Vec::new();
        (LogSection::read(&raw, &mut errors), errors)
    }

    #[test]
    fn oslo_defaults() {
        let (s, errors) = read("[DEFAULT]\n");
        assert!(errors.is_empty());
        assert_eq!(s, LogSection::default());
        assert_eq!(s.syslog_log_facility, "LOG_USER");
        assert_eq!(s.log_date_format, "%Y-%m-%d %H:%M:%S");
        assert_eq!(s.default_log_levels.len(), 22);
        assert!(!s.use_stderr && !s.use_json && !s.use_journal && !s.use_syslog);
        assert_eq!(s.log_path("nova-scheduler"), None);
    }

    #[test]
    fn names_deprecated_names_and_paths() {
        let (s, errors) = read(
            "[DEFAULT]\nlogfile = sched.log\nlogdir = /var/log/nova\nuse_json = true\n\
             use_syslog = yes\nsyslog_log_facility = local3\n\
             default_log_levels = amqp=DEBUG,nova=20\n",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(
            s.log_path("x"),
            Some(PathBuf::from("/var/log/nova/sched.log"))
        );
        assert!(s.use_json && s.use_syslog);
        assert_eq!(s.facility(), 19);
        assert_eq!(s.default_log_levels, vec!["amqp=DEBUG", "nova=20"]);
        let (s, _) = read("[DEFAULT]\nlog_dir = /var/log/nova\n");
        assert_eq!(
            s.log_path("nova-scheduler"),
            Some(PathBuf::from("/var/log/nova/nova-scheduler.log"))
        );
        let (s, _) = read("[DEFAULT]\nlog_file = /tmp/a.log\nlog_dir = /var/log/nova\n");
        assert_eq!(s.log_path("x"), Some(PathBuf::from("/tmp/a.log")));
    }

    #[test]
    fn bad_facility_and_levels_are_errors() {
        let (_, errors) = read("[DEFAULT]\nuse_syslog = true\nsyslog_log_facility = LOG_BOGUS\n");
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().contains("syslog_log_facility"));
        // Not used without use_syslog: not checked, as in oslo.
        let (_, errors) = read("[DEFAULT]\nsyslog_log_facility = LOG_BOGUS\n");
        assert!(errors.is_empty());
        let (_, errors) = read("[DEFAULT]\ndefault_log_levels = amqp=LOUD\n");
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().contains("LOUD"), "{}", errors[0]);
        let (_, errors) = read("[DEFAULT]\ndefault_log_levels = amqp\n");
        assert_eq!(errors.len(), 1);
    }

    #[test]
    fn command_line_wins() {
        let (mut s, _) = read("[DEFAULT]\nlog_file = a.log\nuse_json = true\n");
        let opts = |v: &[(&str, Option<&str>)]| -> Vec<(String, Option<String>)> {
            v.iter()
                .map(|(n, x)| (n.to_string(), x.map(str::to_string)))
                .collect()
        };
        s.apply_cli(&opts(&[
            ("log-file", Some("/tmp/b.log")),
            ("nouse-json", None),
            ("use_journal", None),
            ("logdir", Some("/ignored")),
        ]))
        .unwrap();
        assert_eq!(s.log_path("x"), Some(PathBuf::from("/tmp/b.log")));
        assert!(!s.use_json && s.use_journal);
        assert!(s
            .apply_cli(&opts(&[
                ("use-syslog", None),
                ("syslog-log-facility", Some("nope"))
            ]))
            .is_err());
    }

    #[test]
    fn unhonoured_flags_are_named() {
        let w = cli_warnings(&[
            (
                "log-config-append".into(),
                Some("/etc/nova/logging.conf".into()),
            ),
            ("use-json".into(), None),
            ("use-eventlog".into(), None),
        ]);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].starts_with("option --log-config-append is accepted but not honoured"));
    }

    #[test]
    fn python_levels() {
        assert_eq!(python_level("WARN"), Ok(Some("warn")));
        assert_eq!(python_level("warning"), Ok(Some("warn")));
        assert_eq!(python_level("CRITICAL"), Ok(Some("error")));
        assert_eq!(python_level("5"), Ok(Some("trace")));
        assert_eq!(python_level("10"), Ok(Some("debug")));
        assert_eq!(python_level("30"), Ok(Some("warn")));
        assert_eq!(python_level("NOTSET"), Ok(None));
        assert!(python_level("LOUD").is_err());
    }
}
