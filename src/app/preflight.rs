// SPDX-License-Identifier: Apache-2.0
//! Everything `run` checks in nova.conf before it connects to anything, in one place
//! that `config check` shares: the two doors refuse the same configurations with the
//! same words, and every refusal is found in one pass (a bad value does not hide an
//! unknown filter behind it).
//!
//! [`prepare`] turns a loaded configuration into what `run` starts from ([`Prepared`])
//! or into the list of [`Refusal`]s; [`connect`] is `config check --connect`: one
//! attempt at each database, the broker and Placement with the configured credentials
//! and TLS, writing nothing.

use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::config::{Config, ConfigError, DbUrl, TransportUrl};
use crate::manager::PrefilterOptions;
use crate::placement::PlacementOptions;
use crate::release::ReleaseChoice;
use crate::rpc::RpcServerOptions;
use crate::scheduler::Scheduler;
use crate::state::StateOptions;

use super::{AppError, DbTarget};

/// What `run` starts from once nova.conf has passed every check.
pub struct Prepared {
    pub scheduler: Scheduler,
    pub state: StateOptions,
    pub placement: PlacementOptions,
    pub prefilters: PrefilterOptions,
    /// `[database]`, `[api_database]`, `[placement_database]` (when set), in order.
    pub databases: Vec<DbTarget>,
    /// `[placement_database] connection` in sqlx form (the fast path), when set.
    pub placement_index_url: Option<String>,
    /// The broker notifications go to (`[oslo_messaging_notifications] transport_url`,
    /// else `[DEFAULT] transport_url`).
    pub notification_transport: TransportUrl,
    pub rpc: RpcServerOptions,
}

/// The kinds of refusal `run` can make before it connects. A test names a bad
/// configuration for each, and checks that `run` and `config check` refuse it alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RefusalKind {
    /// A file or directory named on the command line is missing or unreadable.
    File,
    /// A line oslo's INI parser rejects.
    Syntax,
    /// A value that does not convert to its option's type, or is out of bounds.
    Value,
    /// A value or combination of values the daemon cannot honour.
    Invalid,
    /// A filter or weigher class name that is not known.
    PipelineClass,
    /// A database connection that is required but not set, or unusable.
    Database,
    /// `[placement]` authentication: an unsupported plugin or a missing option.
    PlacementAuth,
    /// A request filter option the daemon cannot honour.
    RequestFilter,
    /// `[oslo_messaging_notifications] transport_url`.
    NotificationTransport,
    /// A CA, certificate or key file that cannot be read.
    TlsFile,
    /// `[nova_scheduler_rs] state_dir` where this user cannot keep the record of
    /// requests in flight.
    StateDir,
    /// `[nova_scheduler_rs] record_calls` in a directory that is missing or not
    /// writable by this user.
    RecordCalls,
}

impl RefusalKind {
    /// Every kind, in declaration order.
    pub const ALL: [RefusalKind; 12] = [
        RefusalKind::File,
        RefusalKind::Syntax,
        RefusalKind::Value,
        RefusalKind::Invalid,
        RefusalKind::PipelineClass,
        RefusalKind::Database,
        RefusalKind::PlacementAuth,
        RefusalKind::RequestFilter,
        RefusalKind::NotificationTransport,
        RefusalKind::TlsFile,
        RefusalKind::StateDir,
        RefusalKind::RecordCalls,
    ];

    /// Its place in [`RefusalKind::ALL`]; the match makes a new kind fail to compile
    /// until it is listed there.
    pub fn index(self) -> usize {
        match self {
            RefusalKind::File => 0,
            RefusalKind::Syntax => 1,
            RefusalKind::Value => 2,
            RefusalKind::Invalid => 3,
            RefusalKind::PipelineClass => 4,
            RefusalKind::Database => 5,
            RefusalKind::PlacementAuth => 6,
            RefusalKind::RequestFilter => 7,
            RefusalKind::NotificationTransport => 8,
            RefusalKind::TlsFile => 9,
            RefusalKind::StateDir => 10,
            RefusalKind::RecordCalls => 11,
        }
    }
}

/// One reason `run` will not start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub kind: RefusalKind,
    /// File and line where there is one; secrets masked.
    pub message: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Every reason `run` will not start, in the order found.
#[derive(Debug)]
pub struct Refused(pub Vec<Refusal>);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            all => {
                write!(f, "{} configuration errors:", all.len())?;
                for r in all {
                    write!(f, "\n  - {r}")?;
                }
                Ok(())
            }
        }
    }
}

impl Refused {
    pub fn kinds(&self) -> Vec<RefusalKind> {
        self.0.iter().map(|r| r.kind).collect()
    }
}

/// Checks a configuration as `run` does before connecting: `load_errors` are the
/// errors met while loading it (see [`crate::config::load_from_cli_with_errors`]),
/// and every other refusal is added to them.
pub fn prepare(config: &Config, load_errors: Vec<ConfigError>) -> Result<Prepared, Refused> {
    let mut refusals: Vec<Refusal> = load_errors
        .iter()
        .flat_map(ConfigError::errors)
        .map(|e| Refusal {
            kind: kind_of(e),
            message: e.to_string(),
        })
        .collect();
    let mut refuse = |kind: RefusalKind, message: String| refusals.push(Refusal { kind, message });
    let config_error = |e: AppError| match e {
        AppError::Config(message) => message,
        other => other.to_string(),
    };

    let scheduler = super::build_scheduler(config)
        .map_err(|e| refuse(RefusalKind::PipelineClass, config_error(e)))
        .ok();
    let state = match (&config.api_database_url, &config.database_url) {
        (None, _) => {
            refuse(
                RefusalKind::Database,
                "[api_database] connection is required (cells are found there)".into(),
            );
            None
        }
        (_, None) => {
            refuse(
                RefusalKind::Database,
                "[database] connection is required".into(),
            );
            None
        }
        _ => super::state_options(config)
            .map_err(|e| refuse(RefusalKind::Database, config_error(e)))
            .ok(),
    };
    let databases = super::database_targets(config)
        .map_err(|e| refuse(RefusalKind::Database, config_error(e)))
        .ok();
    let placement_index_url = match &config.placement_database_url {
        None => Some(None),
        Some(url) => url
            .to_sqlx_url()
            .map(Some)
            .map_err(|e| {
                refuse(
                    RefusalKind::Database,
                    format!("[placement_database] connection: {e}"),
                )
            })
            .ok(),
    };
    let placement = super::placement_options(config)
        .map_err(|e| refuse(RefusalKind::PlacementAuth, config_error(e)))
        .ok();
    // The client as startup builds it: cafile, certfile and keyfile read, parsed and
    // the key matched to the certificate; nothing is sent.
    if let Some(options) = &placement {
        if let Err(e) = crate::placement::PlacementClient::new(options.clone()) {
            refuse(RefusalKind::TlsFile, e.to_string());
        }
    }
    let prefilters = super::prefilter_options(config)
        .map_err(|e| refuse(RefusalKind::RequestFilter, config_error(e)))
        .ok();
    let notification_transport = match &config.oslo_messaging_notifications.transport_url {
        None => Some(config.transport.clone()),
        Some(url) => TransportUrl::parse(url.expose())
            .map_err(|reason| {
                refuse(
                    RefusalKind::NotificationTransport,
                    format!("[oslo_messaging_notifications] transport_url: {reason}"),
                )
            })
            .ok(),
    };
    for (what, path) in tls_files(config) {
        if let Err(e) = std::fs::File::open(&path) {
            refuse(
                RefusalKind::TlsFile,
                format!("{what} = {path}: cannot be read: {e}"),
            );
        }
    }
    if config.guards.max_message_crashes > 0 {
        if let Some(reason) = unwritable(&config.guards.state_dir) {
            refuse(
                RefusalKind::StateDir,
                format!(
                    "[nova_scheduler_rs] state_dir = {}: {reason}; the record of requests in \
                     flight (the poison-message guard) cannot be kept there. Make it writable \
                     for the user the daemon runs as, or set max_message_crashes = 0 to run \
                     without the guard",
                    config.guards.state_dir.display()
                ),
            );
        }
    }
    if let Some(path) = &config.nova_scheduler_rs.record_calls {
        if let Some(reason) = unrecordable(path) {
            refuse(
                RefusalKind::RecordCalls,
                format!(
                    "[nova_scheduler_rs] record_calls = {}: {reason}; the calls cannot be \
                     recorded there (leave it empty to record nothing)",
                    path.display()
                ),
            );
        }
    }

    match (
        scheduler,
        state,
        databases,
        placement_index_url,
        placement,
        prefilters,
        notification_transport,
    ) {
        (
            Some(scheduler),
            Some(state),
            Some(databases),
            Some(placement_index_url),
            Some(placement),
            Some(prefilters),
            Some(notification_transport),
        ) if refusals.is_empty() => Ok(Prepared {
            scheduler,
            state,
            placement,
            prefilters,
            databases,
            placement_index_url,
            notification_transport,
            rpc: super::rpc_options(config),
        }),
        _ => Err(Refused(refusals)),
    }
}

fn kind_of(e: &ConfigError) -> RefusalKind {
    match e {
        ConfigError::FileNotFound(_) | ConfigError::DirNotFound(_) | ConfigError::Io { .. } => {
            RefusalKind::File
        }
        ConfigError::Syntax { .. } => RefusalKind::Syntax,
        ConfigError::Value(_) => RefusalKind::Value,
        // errors() never yields a list; Usage is the command line's, met before.
        ConfigError::Invalid { .. } | ConfigError::Usage(_) | ConfigError::Many(_) => {
            RefusalKind::Invalid
        }
    }
}

/// The broker's and the databases' TLS files, each with the option that names it
/// (Placement's are checked by building its client).
fn tls_files(config: &Config) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let r = &config.oslo_messaging_rabbit;
    if r.ssl {
        for (option, path) in [
            ("ssl_ca_file", &r.ssl_ca_file),
            ("ssl_cert_file", &r.ssl_cert_file),
            ("ssl_key_file", &r.ssl_key_file),
        ] {
            if !path.is_empty() {
                files.push((format!("[oslo_messaging_rabbit] {option}"), path.clone()));
            }
        }
    }
    for (group, url) in [
        ("database", &config.database_url),
        ("api_database", &config.api_database_url),
        ("placement_database", &config.placement_database_url),
    ] {
        let Some(tls) = url.as_ref().and_then(|u: &DbUrl| u.tls().ok()) else {
            continue;
        };
        for (arg, path) in [
            ("ssl_ca", tls.ca),
            ("ssl_cert", tls.cert),
            ("ssl_key", tls.key),
        ] {
            if let Some(path) = path {
                files.push((format!("[{group}] connection's {arg}"), path));
            }
        }
    }
    files
}

/// Why this process could not create and write files under `dir`, if it could not:
/// `dir` itself when it exists, else the nearest ancestor that does (where it would
/// be created). Nothing is created.
fn unwritable(dir: &Path) -> Option<String> {
    let mut at = dir;
    loop {
        match std::fs::metadata(at) {
            Ok(meta) if !meta.is_dir() => {
                return Some(format!("{} is not a directory", at.display()))
            }
            Ok(_) => break,
            // Missing, or below a file: look where it would be created.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
                ) =>
            {
                match at.parent() {
                    Some(parent) if !parent.as_os_str().is_empty() => at = parent,
                    _ => return Some(format!("{}: {e}", dir.display())),
                }
            }
            Err(e) => return Some(format!("{}: {e}", at.display())),
        }
    }
    let Ok(meta) = std::fs::metadata(at) else {
        return Some(format!("{} cannot be read", at.display()));
    };
    let ids = ProcessIds::current();
    if ids.may_write(&meta) {
        return None;
    }
    Some(if at == dir {
        format!(
            "not writable by this user (uid {}, mode {:o}, owner uid {})",
            ids.uid,
            meta.mode() & 0o7777,
            meta.uid()
        )
    } else {
        format!(
            "does not exist, and {} is not writable by this user (uid {}) to create it",
            at.display(),
            ids.uid
        )
    })
}

/// Why the recording cannot be written at `path` (its directory must exist and be
/// writable: the file is created, and rotated by renaming), if it cannot. Nothing
/// is created.
fn unrecordable(path: &Path) -> Option<String> {
    if path.is_dir() {
        return Some("is a directory, not a file".into());
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(meta) if !meta.is_dir() => Some(format!("{} is not a directory", dir.display())),
        Ok(meta) if !ProcessIds::current().may_write(&meta) => Some(format!(
            "its directory {} is not writable by this user (uid {}, mode {:o}, owner uid {})",
            dir.display(),
            ProcessIds::current().uid,
            meta.mode() & 0o7777,
            meta.uid()
        )),
        Ok(_) => None,
        Err(e) => Some(format!("its directory {}: {e}", dir.display())),
    }
}

/// The effective user and groups of this process, from `/proc/self/status` (the
/// daemon runs on Linux; reading it needs no `unsafe`).
struct ProcessIds {
    uid: u32,
    gids: Vec<u32>,
}

impl ProcessIds {
    fn current() -> Self {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| -> Vec<u32> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(|rest| {
                    rest.split_whitespace()
                        .filter_map(|n| n.parse().ok())
                        .collect()
                })
                .unwrap_or_default()
        };
        // "Uid:" and "Gid:" list real, effective, saved and filesystem ids.
        let uid = field("Uid:").get(1).copied().unwrap_or(u32::MAX);
        let mut gids = field("Groups:");
        gids.extend(field("Gid:").get(1));
        ProcessIds { uid, gids }
    }

    /// Whether the mode bits let this process create entries in the directory (root
    /// always may; ACLs are not consulted).
    fn may_write(&self, meta: &std::fs::Metadata) -> bool {
        let mode = meta.mode();
        let bits = if self.uid == 0 {
            return true;
        } else if meta.uid() == self.uid {
            0o300
        } else if self.gids.contains(&meta.gid()) {
            0o030
        } else {
            0o003
        };
        mode & bits == bits
    }
}

/// The outcome of one `--connect` probe: what was reached, and `Err` with the reason;
/// with what `run` would warn of once there.
pub struct Probe {
    pub what: String,
    pub outcome: Result<(), String>,
    pub warnings: Vec<String>,
}

/// `config check --connect`: one attempt at each database (and each cell database the
/// API database maps), the broker and Placement, with the configured credentials and
/// TLS. Reads only; writes nothing anywhere.
pub async fn connect(config: &Config, prepared: &Prepared) -> Vec<Probe> {
    let mut probes = Vec::new();
    for target in &prepared.databases {
        probes.push(Probe {
            what: format!("database {}", target.what),
            outcome: target.probe().await.map_err(|e| e.cause),
            warnings: Vec::new(),
        });
    }
    // Every database's service rows, for the release `run` would schedule as.
    let mut version_sources = vec![(
        "main database".to_string(),
        prepared.state.main_database_url.clone(),
    )];
    match crate::state::cell_databases(&prepared.state).await {
        Ok(cells) => {
            for (name, url) in cells {
                let outcome = match url {
                    Ok(sqlx_url) => {
                        version_sources.push((format!("cell {name}"), sqlx_url.clone()));
                        let target = DbTarget::from_sqlx(&format!("of cell {name}"), sqlx_url);
                        target.probe().await.map_err(|e| e.cause)
                    }
                    Err(reason) => Err(reason),
                };
                probes.push(Probe {
                    what: format!("cell {name}'s database"),
                    outcome,
                    warnings: Vec::new(),
                });
            }
        }
        Err(e) => probes.push(Probe {
            what: "cell mappings (in the API database)".into(),
            outcome: Err(e),
            warnings: Vec::new(),
        }),
    }
    let brokers: Vec<String> = config
        .transport
        .hosts
        .iter()
        .map(|b| format!("{}:{}", b.host, b.port))
        .collect();
    let mut rpc = prepared.rpc.clone();
    // One round over the brokers, no waiting between retries.
    rpc.retry_interval = 0.0;
    probes.push(Probe {
        what: format!("broker {}", brokers.join(",")),
        outcome: tokio::time::timeout(
            std::time::Duration::from_secs(15),
            crate::rpc::check_connection(&rpc),
        )
        .await
        .map_err(|_| "no answer within 15 s".to_string())
        .and_then(|r| r.map_err(|e| e.to_string())),
        warnings: Vec::new(),
    });
    let placement = match crate::placement::PlacementClient::new(prepared.placement.clone()) {
        // An authenticated read of one fixed resource class: reachable, credentials
        // accepted, TLS as configured.
        Ok(client) => client
            .get_json("/resource_classes/VCPU", "1.2")
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    probes.push(Probe {
        what: "Placement".into(),
        outcome: placement,
        warnings: Vec::new(),
    });
    probes.push(release_probe(config, &version_sources).await);
    probes
}

/// The release `run` would schedule as (`nova_release`, or for `auto` the service rows
/// of `databases`), and whether the pipeline and request filters build as it: an
/// `auto` cloud of an older release can refuse what the newest accepts.
async fn release_probe(config: &Config, databases: &[(String, String)]) -> Probe {
    let mut readings = Vec::new();
    for (name, url) in databases {
        let pool = sqlx::mysql::MySqlPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect(url)
            .await;
        if let Ok(pool) = pool {
            if let Ok(read) = crate::state::service_row::read_versions(name.clone(), &pool).await {
                readings.push(read);
            }
            pool.close().await;
        }
    }
    let resolved = match super::resolve_release(config, &readings) {
        Ok(resolved) => resolved,
        Err(e) => {
            return Probe {
                what: "nova release".into(),
                outcome: Err(e.to_string()),
                warnings: Vec::new(),
            }
        }
    };
    let series = resolved.series;
    let outcome = super::build_scheduler_as(config, series)
        .and_then(|_| super::prefilter_options_as(config, series))
        .map(|_| ())
        .map_err(|e| match e {
            AppError::Config(message) => message,
            other => other.to_string(),
        });
    // `run` warns of the options this release lacks; a configured release's are
    // among config check's own warnings already.
    let warnings = if config.nova_scheduler_rs.nova_release == ReleaseChoice::Auto {
        super::release_warnings(config, series)
    } else {
        Vec::new()
    };
    Probe {
        what: format!("nova release: {resolved}"),
        outcome,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_listed_once_in_order() {
        for (i, kind) in RefusalKind::ALL.iter().enumerate() {
            assert_eq!(kind.index(), i, "{kind:?}");
        }
    }

    #[test]
    fn a_state_dir_is_judged_where_it_would_be_created() {
        let base = std::env::temp_dir().join(format!("nsrs-preflight-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        assert_eq!(unwritable(&base.join("not/yet/there")), None);
        let file = base.join("a-file");
        std::fs::write(&file, b"").unwrap();
        assert!(unwritable(&file.join("below"))
            .unwrap()
            .contains("is not a directory"));
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_recording_needs_its_directory_and_is_not_created() {
        let base = std::env::temp_dir().join(format!("nsrs-preflight-rec-{}", std::process::id()));
        std::fs::create_dir_all(&base).unwrap();
        let path = base.join("calls.gz");
        assert_eq!(unrecordable(&path), None);
        assert!(!path.exists());
        assert!(unrecordable(&base.join("missing/calls.gz"))
            .unwrap()
            .contains("missing"));
        assert!(unrecordable(&base).unwrap().contains("is a directory"));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
