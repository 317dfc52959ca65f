// SPDX-License-Identifier: Apache-2.0
//! nova.conf with oslo.config semantics, typed sections with nova's defaults.
//!
//! - [`ini`]: oslo's INI dialect and the store of every value with its file and line.
//! - [`reader`]: oslo's option types (Boolean, Integer, Float, List, MultiString).
//! - [`sections`], [`scheduler`], [`rabbit`]: one struct per group the scheduler reads;
//!   [`logging`]: oslo.log's options in `[DEFAULT]`.
//! - [`transport_url`]: `[DEFAULT] transport_url` → broker addresses.
//! - [`db_url`]: SQLAlchemy URLs → sqlx URLs, and cell-mapping URL templates.
//! - [`cli`]: the command line and oslo's default file search.
//!
//! Operators share one nova.conf between every nova service, so unknown groups and unknown
//! options are not errors: they are kept in [`Config::raw`]. A bad value of an option the
//! scheduler reads stops startup; every such error is collected before failing, and each
//! names file, line, group, option and value (secrets masked).
//!
//! Where nova has no lower bound but a negative value makes no sense (timeouts, intervals,
//! counts), the option is unsigned here and a negative value is an error.

use std::path::{Path, PathBuf};

pub mod cli;
pub mod db_url;
pub mod error;
pub mod guards;
pub mod host_state_cache;
pub mod ini;
pub mod logging;
pub mod options;
pub mod rabbit;
pub mod reader;
pub mod scheduler;
pub mod sections;
pub mod transport_url;
pub mod typos;

pub use cli::{
    parse_cli_args, CapacityArgs, CliArgs, Command, ConfigSource, ReplayArgs, SimulateArgs,
    SnapshotArgs,
};
pub use db_url::{format_cell_url, DbUrl};
pub use error::{mask_url, BadValue, ConfigError, Location, Secret, ValueSource};
pub use guards::GuardsSection;
pub use host_state_cache::{HostStateCacheSection, PluginFailure};
pub use ini::{RawConfig, RawValue};
pub use logging::LogSection;
pub use rabbit::{NotificationsSection, RabbitSection, RABBIT_OPTIONS};
pub use scheduler::{FilterSchedulerSection, MetricsSection, SchedulerSection};
pub use sections::{
    ComputeSection, DatabaseSection, DefaultSection, NovaNotificationsSection, PciSection,
    PlacementSection, UpgradeLevelsSection, WorkaroundsSection,
};
pub use transport_url::{BrokerAddress, TransportUrl};

/// The whole configuration the scheduler reads.
#[derive(Clone, Debug)]
pub struct Config {
    /// `[DEFAULT]`.
    pub default: DefaultSection,
    /// oslo.log's options in `[DEFAULT]` (besides `debug`), with the command line's
    /// overrides when loaded by [`load_from_cli`].
    pub log: LogSection,
    /// `[DEFAULT] transport_url`, parsed.
    pub transport: TransportUrl,
    /// `[oslo_messaging_rabbit]`, with the transport URL's query overrides applied.
    pub oslo_messaging_rabbit: RabbitSection,
    /// `[oslo_messaging_notifications]`.
    pub oslo_messaging_notifications: NotificationsSection,
    /// `[database]`: the scheduler's own database (usually cell0).
    pub database: DatabaseSection,
    /// `[api_database]`: the API database (cell and host mappings, request specs).
    pub api_database: DatabaseSection,
    /// `[database] connection`, parsed (with `connection_parameters` appended).
    pub database_url: Option<DbUrl>,
    /// `[api_database] connection`, parsed (with `connection_parameters` appended).
    pub api_database_url: Option<DbUrl>,
    /// `[placement_database]`: Placement's own database, read-only (this daemon's
    /// option; nova has none). Set, it turns on the local Placement fast path.
    pub placement_database: DatabaseSection,
    /// `[placement_database] connection`, parsed.
    pub placement_database_url: Option<DbUrl>,
    /// `[placement]`.
    pub placement: PlacementSection,
    /// `[scheduler]`.
    pub scheduler: SchedulerSection,
    /// `[filter_scheduler]`.
    pub filter_scheduler: FilterSchedulerSection,
    /// `[metrics]`.
    pub metrics: MetricsSection,
    /// `[workarounds]`.
    pub workarounds: WorkaroundsSection,
    /// `[upgrade_levels]`.
    pub upgrade_levels: UpgradeLevelsSection,
    /// `[notifications]`.
    pub notifications: NovaNotificationsSection,
    /// `[compute]`.
    pub compute: ComputeSection,
    /// `[nova_scheduler_rs]`: this daemon's own options (host state cache).
    pub nova_scheduler_rs: HostStateCacheSection,
    /// `[nova_scheduler_rs]`: bounds on one message's work and the poison-message guard.
    pub guards: GuardsSection,
    /// `[pci]`.
    pub pci: PciSection,
    raw: RawConfig,
    /// The files and directories read, in order (none for a string).
    sources: Vec<ConfigSource>,
}

/// Reads every source in order (see [`cli`] for the order oslo uses); `OS_<GROUP>__<OPTION>`
/// environment variables override the files, as in oslo.config.
pub fn load_sources(sources: &[ConfigSource]) -> Result<Config, ConfigError> {
    let (config, errors) = load_sources_with_errors(sources);
    ConfigError::from_list(errors)?;
    Ok(config)
}

/// [`load_sources`] that keeps going: the configuration with each bad value at its
/// default, and every error found (empty when it loads cleanly).
pub fn load_sources_with_errors(sources: &[ConfigSource]) -> (Config, Vec<ConfigError>) {
    let mut raw = RawConfig::new();
    raw.set_env(std::env::vars());
    let mut errors = Vec::new();
    for source in sources {
        read_source(source, &mut raw, &mut errors);
    }
    let (mut config, errors) = Config::build(raw, errors);
    config.sources = sources.to_vec();
    (config, errors)
}

/// Reads `config_files` in order, then the `*.conf` files of each of `config_dirs` in
/// sorted order; later values override earlier ones. A missing file or directory is an
/// error naming it.
pub fn load(config_files: &[PathBuf], config_dirs: &[PathBuf]) -> Result<Config, ConfigError> {
    let sources: Vec<ConfigSource> = config_files
        .iter()
        .cloned()
        .map(ConfigSource::File)
        .chain(config_dirs.iter().cloned().map(ConfigSource::Dir))
        .collect();
    load_sources(&sources)
}

/// Loads what a command line names, with oslo's defaults (`/etc/nova/nova.conf`, ...) when
/// it names no file, and applies `--debug`/`--nodebug` and oslo.log's other flags
/// (`--log-file`, `--use-json`, ...), which win over the files.
pub fn load_from_cli(cli: &CliArgs) -> Result<Config, ConfigError> {
    let (config, errors) = load_from_cli_with_errors(cli);
    ConfigError::from_list(errors)?;
    Ok(config)
}

/// [`load_from_cli`] that keeps going past bad values (see [`load_sources_with_errors`]),
/// so that `run` and `config check` can name every problem at once.
pub fn load_from_cli_with_errors(cli: &CliArgs) -> (Config, Vec<ConfigError>) {
    let (mut config, mut errors) = load_sources_with_errors(&cli.effective_sources());
    if let Some(debug) = cli.debug {
        config.default.debug = debug;
    }
    if let Err(e) = config.log.apply_cli(&cli.log_options) {
        errors.push(e);
    }
    (config, errors)
}

/// Parses one INI text (named `<string>` in errors; the environment is not read); for
/// tests and tools.
pub fn from_ini_str(s: &str) -> Result<Config, ConfigError> {
    let mut raw = RawConfig::new();
    let errors = raw.add_str("<string>", s).err().unwrap_or_default();
    Config::from_raw(raw, errors)
}

fn read_file(path: &Path, raw: &mut RawConfig, errors: &mut Vec<ConfigError>) {
    let io = |source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    };
    match std::fs::read(path) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => {
                if let Err(e) = raw.add_str(&path.display().to_string(), &text) {
                    errors.extend(e);
                }
            }
            Err(_) => errors.push(io(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not UTF-8 text",
            ))),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            errors.push(ConfigError::FileNotFound(path.to_path_buf()))
        }
        Err(e) => errors.push(io(e)),
    }
}

/// The `*.conf` files of a directory (not hidden ones, as Python's glob), sorted.
fn dir_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.ends_with(".conf") && !name.starts_with('.') && p.is_file()
        })
        .collect();
    files.sort();
    Ok(files)
}

fn read_source(source: &ConfigSource, raw: &mut RawConfig, errors: &mut Vec<ConfigError>) {
    match source {
        ConfigSource::File(path) => read_file(&cli::expand_home(path), raw, errors),
        ConfigSource::Dir(dir) => {
            let dir = cli::expand_home(dir);
            match dir_files(&dir) {
                Ok(files) => files.iter().for_each(|f| read_file(f, raw, errors)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    errors.push(ConfigError::DirNotFound(dir))
                }
                Err(e) => errors.push(ConfigError::Io {
                    path: dir,
                    source: e,
                }),
            }
        }
        ConfigSource::Optional(inner) => {
            let path = match &**inner {
                ConfigSource::File(p) | ConfigSource::Dir(p) => cli::expand_home(p),
                ConfigSource::Optional(_) => return,
            };
            if path.exists() {
                read_source(inner, raw, errors);
            }
        }
    }
}

/// An error about a URL-valued option, showing the URL with its password masked.
fn url_error(raw: &RawConfig, group: &str, option: &str, url: &str, reason: String) -> ConfigError {
    match raw.get(group, option) {
        Some(v) => ConfigError::Value(Box::new(BadValue {
            origin: ValueSource::File(v.location.clone()),
            group: group.to_string(),
            option: option.to_string(),
            value: mask_url(url),
            reason,
        })),
        None => ConfigError::Invalid {
            group: group.to_string(),
            option: option.to_string(),
            reason,
        },
    }
}

/// Parses a `[database]`-style section's URL; `None` when unset or empty.
fn parse_database_url(
    raw: &RawConfig,
    group: &str,
    section: &DatabaseSection,
    errors: &mut Vec<ConfigError>,
) -> Option<DbUrl> {
    let text = section.connection.as_ref()?.expose();
    if text.trim().is_empty() {
        return None;
    }
    let parsed = DbUrl::parse(text).and_then(|mut url| {
        if !url.is_mysql() {
            return Err(format!(
                "unsupported database {:?}: only MySQL/MariaDB URLs are supported",
                url.backend()
            ));
        }
        url.append_parameters(&section.connection_parameters);
        url.tls()?;
        Ok(url)
    });
    parsed
        .map_err(|reason| errors.push(url_error(raw, group, "connection", text, reason)))
        .ok()
}

/// Options nova acts on that this daemon accepts and does not act on: (group, option,
/// what the daemon does instead). Each one set in the files is named in a warning
/// at startup, so that an operator never believes it took effect.
pub const NOT_HONOURED: &[(&str, &str, &str)] = &[
    (
        "DEFAULT",
        "log_config_append",
        "Python logging configuration files are not read; the other oslo.log options apply",
    ),
    ("DEFAULT", "log_rotation_type", NO_ROTATION),
    ("DEFAULT", "log_rotate_interval", NO_ROTATION),
    ("DEFAULT", "log_rotate_interval_type", NO_ROTATION),
    ("DEFAULT", "max_logfile_count", NO_ROTATION),
    ("DEFAULT", "max_logfile_size_mb", NO_ROTATION),
    ("DEFAULT", "logging_context_format_string", OWN_LAYOUT),
    ("DEFAULT", "logging_default_format_string", OWN_LAYOUT),
    ("DEFAULT", "logging_debug_format_suffix", OWN_LAYOUT),
    ("DEFAULT", "logging_exception_prefix", OWN_LAYOUT),
    (
        "DEFAULT",
        "manager_shutdown_timeout",
        "[DEFAULT] graceful_shutdown_timeout bounds the drain of calls in flight",
    ),
    ("database", "max_pool_size", POOLS_FIXED),
    ("api_database", "max_pool_size", POOLS_FIXED),
    ("placement_database", "max_pool_size", POOLS_FIXED),
    (
        "placement",
        "collect_timing",
        "every Placement request's time is in /metrics \
         (placement_request_duration_seconds), whatever this says",
    ),
    (
        "placement",
        "split_loggers",
        "Placement requests log under nova_scheduler::placement (debug), never with \
         their bodies or headers",
    ),
];

const NO_ROTATION: &str = "the daemon does not rotate its log file: rotate it with \
     logrotate (the file is reopened when it is moved, and on SIGHUP)";
const OWN_LAYOUT: &str = "text lines have the daemon's own layout (use_json gives oslo's \
     JSON keys)";
const POOLS_FIXED: &str = "the daemon sizes its pools itself (20 connections \
     per cell database, 5 for the API database, 2 for the others)";

impl Config {
    /// Builds the typed configuration from parsed files; `errors` are errors found while
    /// reading them, reported together with any bad value.
    pub fn from_raw(raw: RawConfig, errors: Vec<ConfigError>) -> Result<Config, ConfigError> {
        let (config, errors) = Config::build(raw, errors);
        ConfigError::from_list(errors)?;
        Ok(config)
    }

    /// The typed configuration with every bad value at its default, and the errors
    /// (`errors` first, then each bad value).
    pub fn build(raw: RawConfig, mut errors: Vec<ConfigError>) -> (Config, Vec<ConfigError>) {
        let default = DefaultSection::read(&raw, &mut errors);
        let log = LogSection::read(&raw, &mut errors);
        let url = default.transport_url.expose();
        let transport = TransportUrl::parse(url).unwrap_or_else(|reason| {
            errors.push(url_error(&raw, "DEFAULT", "transport_url", url, reason));
            TransportUrl::default()
        });
        let mut unknown: Vec<&String> = transport
            .query
            .keys()
            .filter(|k| !RABBIT_OPTIONS.contains(&k.as_str()))
            .collect();
        unknown.sort();
        for key in unknown {
            errors.push(url_error(
                &raw,
                "DEFAULT",
                "transport_url",
                url,
                format!("query parameter {key:?} is not an [oslo_messaging_rabbit] option"),
            ));
        }
        let oslo_messaging_rabbit = RabbitSection::read(&raw, &transport.query, &mut errors);
        let database = DatabaseSection::read(&raw, "database", &mut errors);
        let api_database = DatabaseSection::read(&raw, "api_database", &mut errors);
        let database_url = parse_database_url(&raw, "database", &database, &mut errors);
        let api_database_url = parse_database_url(&raw, "api_database", &api_database, &mut errors);
        let placement_database = DatabaseSection::read(&raw, "placement_database", &mut errors);
        let placement_database_url =
            parse_database_url(&raw, "placement_database", &placement_database, &mut errors);
        let config = Config {
            oslo_messaging_notifications: NotificationsSection::read(&raw, &mut errors),
            placement: PlacementSection::read(&raw, &mut errors),
            scheduler: SchedulerSection::read(&raw, &mut errors),
            filter_scheduler: FilterSchedulerSection::read(&raw, &mut errors),
            metrics: MetricsSection::read(&raw, &mut errors),
            workarounds: WorkaroundsSection::read(&raw, &mut errors),
            upgrade_levels: UpgradeLevelsSection::read(&raw, &mut errors),
            notifications: NovaNotificationsSection::read(&raw, &mut errors),
            compute: ComputeSection::read(&raw, &mut errors),
            nova_scheduler_rs: HostStateCacheSection::read(&raw, &mut errors),
            guards: GuardsSection::read(&raw, &mut errors),
            pci: PciSection::read(&raw, &mut errors),
            default,
            log,
            transport,
            oslo_messaging_rabbit,
            database,
            api_database,
            database_url,
            api_database_url,
            placement_database,
            placement_database_url,
            raw,
            sources: Vec::new(),
        };
        if config.default.servicegroup_driver == "mc" {
            errors.push(ConfigError::Invalid {
                group: "DEFAULT".into(),
                option: "servicegroup_driver".into(),
                reason: "mc keeps service liveness in memcached, which nova-scheduler-rs does \
                         not read: it judges hosts from the services table, where every host \
                         would look down. Use servicegroup_driver = db, or keep nova-scheduler"
                    .into(),
            });
        }
        (config, errors)
    }

    /// Every value of every file, including groups and options no section models.
    /// The existing files and directories this configuration was read from, in
    /// order, for another reader of the same nova.conf (the embedded Python's
    /// oslo.config).
    pub fn source_paths(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let (mut files, mut dirs) = (Vec::new(), Vec::new());
        for source in &self.sources {
            let (path, is_dir, optional) = match source {
                ConfigSource::File(p) => (p, false, false),
                ConfigSource::Dir(p) => (p, true, false),
                ConfigSource::Optional(inner) => match inner.as_ref() {
                    ConfigSource::File(p) => (p, false, true),
                    ConfigSource::Dir(p) => (p, true, true),
                    ConfigSource::Optional(_) => continue,
                },
            };
            let path = cli::expand_home(path);
            if optional && !path.exists() {
                continue;
            }
            if is_dir {
                dirs.push(path);
            } else {
                files.push(path);
            }
        }
        (files, dirs)
    }

    pub fn raw(&self) -> &RawConfig {
        &self.raw
    }

    /// The files read, in order.
    pub fn files(&self) -> Vec<&str> {
        self.raw.files()
    }

    /// Options set in the files that this daemon accepts but does not use, as
    /// `[group] option` (today: `[oslo_messaging_rabbit]` options oslo.messaging 18.1.0 no
    /// longer has, such as `heartbeat_in_pthread`). The caller logs them at startup.
    pub fn ignored_options(&self) -> Vec<String> {
        RabbitSection::unknown_options(&self.raw)
            .into_iter()
            .map(|k| format!("[oslo_messaging_rabbit] {k}"))
            .collect()
    }

    /// Options set in the files that nova acts on and this daemon reads but does not,
    /// each with what the daemon does instead (see [`NOT_HONOURED`]).
    pub fn not_honoured(&self) -> Vec<String> {
        let mut out: Vec<String> = NOT_HONOURED
            .iter()
            .filter(|(group, option, _)| self.raw.keys(group).iter().any(|k| k == option))
            .map(|(group, option, instead)| {
                format!("option [{group}] {option} is accepted but not honoured: {instead}")
            })
            .collect();
        // The option table's "read, not used" options, set to other than their default.
        for spec in options::OPTIONS.iter().filter(|o| o.not_used) {
            let listed = NOT_HONOURED
                .iter()
                .any(|(g, o, _)| *g == spec.group && *o == spec.name);
            if listed || (spec.group, spec.name) == ("DEFAULT", "periodic_enable") {
                continue;
            }
            let names: Vec<(&str, &str)> = std::iter::once((spec.group, spec.name))
                .chain(spec.deprecated.iter().copied())
                .collect();
            let Some(value) = self.raw.get_first(&names) else {
                continue;
            };
            if value.value.trim().eq_ignore_ascii_case(spec.default) {
                continue;
            }
            out.push(format!(
                "option [{}] {} is accepted but not honoured: {}",
                spec.group,
                spec.name,
                spec.not_used_reason()
            ));
        }
        if !self.default.periodic_enable {
            out.push(
                "option [DEFAULT] periodic_enable = false is accepted but not honoured: the \
                 host-state refresh and host discovery run as configured"
                    .to_string(),
            );
        }
        out
    }

    /// Everything worth a warning at startup: ignored options, hosts of the transport URL
    /// with and without credentials, database URL parameters not passed to the driver
    /// or TLS arguments with a caveat.
    pub fn warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .ignored_options()
            .into_iter()
            .map(|o| format!("option {o} is accepted but not used"))
            .collect();
        out.extend(self.not_honoured());
        out.extend(typos::unknown_option_warnings(&self.raw));
        if self.transport.mixed_credentials {
            out.push(
                "[DEFAULT] transport_url: all hosts should be set with username/password or \
                 none of them; hosts without credentials use guest/guest"
                    .to_string(),
            );
        }
        for (group, url) in [
            ("database", &self.database_url),
            ("api_database", &self.api_database_url),
            ("placement_database", &self.placement_database_url),
        ] {
            for warning in url.iter().flat_map(|u| u.driver_warnings()) {
                out.push(format!("[{group}] connection: {warning}"));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests;
