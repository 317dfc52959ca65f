// SPDX-License-Identifier: Apache-2.0
//! `[DEFAULT]`, `[database]`, `[api_database]`, `[placement]` and the small groups, with
//! nova's option names and defaults (nova/conf/*.py, oslo.messaging, keystoneauth1).

use std::net::IpAddr;

use super::error::{ConfigError, Secret};
use super::ini::RawConfig;
use super::reader::{parse_int, parse_list, Reader};

/// `[DEFAULT]` options the scheduler reads.
#[derive(Clone, Debug, PartialEq)]
pub struct DefaultSection {
    /// Broker URL (oslo.messaging), secret. Parsed into [`crate::config::Config::transport`].
    pub transport_url: Secret,
    /// Exchange used when a target names none; nova overrides oslo's `openstack` to `nova`.
    pub control_exchange: String,
    /// This service's host name: service row, RPC server name. Default: the machine's
    /// hostname.
    pub host: String,
    /// Seconds to wait for a response from a call.
    pub rpc_response_timeout: u64,
    /// Timeout nova uses for long calls such as `select_destinations`.
    pub long_rpc_timeout: u64,
    /// Concurrent RPC handlers (old name `rpc_thread_pool_size`).
    pub executor_thread_pool_size: u32,
    /// Answer oslo.messaging's `oslo_rpc_server_ping` with `"pong"`.
    pub rpc_ping_enabled: bool,
    /// Seconds between service heartbeats (service row `report_count` updates).
    pub report_interval: u64,
    /// Seconds without a heartbeat after which a service is considered down.
    pub service_down_time: u64,
    /// Liveness driver: `db` or `mc`.
    pub servicegroup_driver: String,
    /// Run periodic tasks.
    pub periodic_enable: bool,
    /// Random delay (s, up to this) before periodic tasks start.
    pub periodic_fuzzy_delay: u64,
    /// Availability zone of hosts in no zone aggregate (Selection fallback).
    pub default_availability_zone: String,
    /// Zone reported for internal services such as the scheduler.
    pub internal_service_availability_zone: String,
    /// Overrides a compute node's VCPU ratio when set (unset: use the node's own).
    pub cpu_allocation_ratio: Option<f64>,
    /// Overrides a compute node's MEMORY_MB ratio when set.
    pub ram_allocation_ratio: Option<f64>,
    /// Overrides a compute node's DISK_GB ratio when set.
    pub disk_allocation_ratio: Option<f64>,
    /// VCPU ratio used when neither the option nor the node has one.
    pub initial_cpu_allocation_ratio: f64,
    /// MEMORY_MB ratio used when neither the option nor the node has one.
    pub initial_ram_allocation_ratio: f64,
    /// DISK_GB ratio used when neither the option nor the node has one.
    pub initial_disk_allocation_ratio: f64,
    /// Threads for cell scatter-gather queries.
    pub cell_worker_thread_pool_size: u32,
    /// Threads for background tasks.
    pub default_thread_pool_size: u32,
    /// Seconds to wait for in-flight work on graceful shutdown.
    pub manager_shutdown_timeout: u64,
    /// oslo.service: seconds a SIGTERM waits for in-flight requests before the
    /// process exits anyway (0: wait without end).
    pub graceful_shutdown_timeout: u64,
    /// Debug logging (oslo.log).
    pub debug: bool,
}

/// The machine's hostname as Python's `socket.gethostname()` gives it.
pub fn machine_hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".to_string())
}

/// oslo's HostDomain type: an IP address or a host name whose labels are 1–63 of
/// `[A-Za-z0-9_-]`, not starting or ending with `-`, at most 253 characters.
pub fn check_host_domain(value: &str) -> Result<String, String> {
    if value.parse::<IpAddr>().is_ok() {
        return Ok(value.to_string());
    }
    let invalid = || Err(format!("{value} is not a valid host address"));
    if value.is_empty() || value.len() > 253 {
        return invalid();
    }
    let name = value.strip_suffix('.').unwrap_or(value);
    let labels_ok = name.split('.').all(|label| {
        (1..=63).contains(&label.len())
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    });
    let last_ok = name.rsplit('.').next().is_some_and(|l| {
        l.chars()
            .any(|c| c.is_ascii_alphabetic() || c == '-' || c == '_')
    });
    if labels_ok && last_ok {
        Ok(value.to_string())
    } else {
        invalid()
    }
}

impl DefaultSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let mut r = Reader::new(raw, "DEFAULT", errors).with_secrets(&["transport_url"]);
        r.alias(
            "executor_thread_pool_size",
            "DEFAULT",
            "rpc_thread_pool_size",
        );
        let ratio = Some(0.0);
        let host = r.opt_string("host").unwrap_or_else(machine_hostname);
        if let Err(reason) = check_host_domain(&host) {
            r.reject("host", reason);
        }
        DefaultSection {
            transport_url: Secret::new(r.string("transport_url", "rabbit://")),
            control_exchange: r.string("control_exchange", "nova"),
            host,
            rpc_response_timeout: r.int("rpc_response_timeout", 60, Some(0), None),
            long_rpc_timeout: r.int("long_rpc_timeout", 1800, Some(0), None),
            executor_thread_pool_size: r.int("executor_thread_pool_size", 64, Some(1), None),
            rpc_ping_enabled: r.bool("rpc_ping_enabled", false),
            report_interval: r.int("report_interval", 10, Some(0), None),
            service_down_time: r.int("service_down_time", 60, Some(0), None),
            servicegroup_driver: r.choice("servicegroup_driver", "db", &["db", "mc"], false),
            periodic_enable: r.bool("periodic_enable", true),
            periodic_fuzzy_delay: r.int("periodic_fuzzy_delay", 60, Some(0), None),
            default_availability_zone: r.string("default_availability_zone", "nova"),
            internal_service_availability_zone: r
                .string("internal_service_availability_zone", "internal"),
            cpu_allocation_ratio: r.opt_float("cpu_allocation_ratio", ratio, None),
            ram_allocation_ratio: r.opt_float("ram_allocation_ratio", ratio, None),
            disk_allocation_ratio: r.opt_float("disk_allocation_ratio", ratio, None),
            initial_cpu_allocation_ratio: r.float("initial_cpu_allocation_ratio", 4.0, ratio, None),
            initial_ram_allocation_ratio: r.float("initial_ram_allocation_ratio", 1.0, ratio, None),
            initial_disk_allocation_ratio: r.float(
                "initial_disk_allocation_ratio",
                1.0,
                ratio,
                None,
            ),
            cell_worker_thread_pool_size: r.int("cell_worker_thread_pool_size", 5, Some(1), None),
            default_thread_pool_size: r.int("default_thread_pool_size", 10, Some(1), None),
            manager_shutdown_timeout: r.int("manager_shutdown_timeout", 160, Some(0), None),
            graceful_shutdown_timeout: r.int("graceful_shutdown_timeout", 60, Some(0), None),
            debug: r.bool("debug", false),
        }
    }
}

/// `[database]` or `[api_database]` (oslo.db options nova registers in both).
#[derive(Clone, Debug, PartialEq)]
pub struct DatabaseSection {
    /// SQLAlchemy URL of the database (secret); see [`crate::config::db_url::DbUrl`].
    pub connection: Option<Secret>,
    /// Extra query parameters oslo.db appends to the URL (`a=b&c=d`).
    pub connection_parameters: String,
    /// Maximum open connections in the pool (unset: the pool's own default).
    pub max_pool_size: Option<u32>,
    /// Connection attempts at startup before giving up (10); -1: forever.
    pub max_retries: i64,
    /// Seconds between those attempts (10).
    pub retry_interval: u64,
}

impl Default for DatabaseSection {
    fn default() -> Self {
        DatabaseSection {
            connection: None,
            connection_parameters: String::new(),
            max_pool_size: None,
            max_retries: 10,
            retry_interval: 10,
        }
    }
}

impl DatabaseSection {
    pub(crate) fn read(
        raw: &RawConfig,
        group: &'static str,
        errors: &mut Vec<ConfigError>,
    ) -> Self {
        let mut r = Reader::new(raw, group, errors).with_secrets(&["connection"]);
        DatabaseSection {
            connection: r.opt_string("connection").map(Secret::new),
            connection_parameters: r.string("connection_parameters", ""),
            max_pool_size: r.opt_int("max_pool_size", Some(0), None),
            max_retries: r.int("max_retries", 10, Some(-1), None),
            retry_interval: r.int("retry_interval", 10, Some(0), None),
        }
    }
}

/// `[placement]`: keystoneauth session, auth plugin and adapter options.
///
/// With `auth_section` set, the auth plugin options (`auth_type` and everything from
/// `auth_url` to `endpoint`) are read from that group instead. (`Default` is all-unset;
/// nova's defaults come from reading an empty file.)
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlacementSection {
    /// Group holding the auth plugin options, if not this one.
    pub auth_section: Option<String>,
    /// Auth plugin: `password`, `v3password`, `admin_token`, `none`, `noauth`,
    /// `v3applicationcredential`, ... (old name `auth_plugin`).
    pub auth_type: Option<String>,
    /// Keystone URL (password plugins).
    pub auth_url: Option<String>,
    /// User name (old name `user_name`).
    pub username: Option<String>,
    /// User id.
    pub user_id: Option<String>,
    /// Password (secret).
    pub password: Option<Secret>,
    /// Domain of the user, by name.
    pub user_domain_name: Option<String>,
    /// Domain of the user, by id.
    pub user_domain_id: Option<String>,
    /// Project to scope to, by name (old name `tenant_name`).
    pub project_name: Option<String>,
    /// Project to scope to, by id (old name `tenant_id`).
    pub project_id: Option<String>,
    /// Domain of the project, by name.
    pub project_domain_name: Option<String>,
    /// Domain of the project, by id.
    pub project_domain_id: Option<String>,
    /// Domain to scope to, by id.
    pub domain_id: Option<String>,
    /// Domain to scope to, by name.
    pub domain_name: Option<String>,
    /// System scope (`all`).
    pub system_scope: Option<String>,
    /// Trust to use.
    pub trust_id: Option<String>,
    /// Default domain id for user and project (generic `password` plugin).
    pub default_domain_id: Option<String>,
    /// Default domain name for user and project (generic `password` plugin).
    pub default_domain_name: Option<String>,
    /// Application credential id (`v3applicationcredential`).
    pub application_credential_id: Option<String>,
    /// Application credential name.
    pub application_credential_name: Option<String>,
    /// Application credential secret (secret).
    pub application_credential_secret: Option<Secret>,
    /// Token of the `admin_token` plugin (secret).
    pub token: Option<Secret>,
    /// Endpoint of the `admin_token` and `none` plugins (old name `url`).
    pub endpoint: Option<String>,
    /// CA bundle for HTTPS.
    pub cafile: Option<String>,
    /// Client certificate.
    pub certfile: Option<String>,
    /// Client key.
    pub keyfile: Option<String>,
    /// Skip HTTPS verification.
    pub insecure: bool,
    /// Request timeout in seconds (unset: none).
    pub timeout: Option<f64>,
    /// Collect per-API timing (logged by keystoneauth).
    pub collect_timing: bool,
    /// Log requests to separate loggers.
    pub split_loggers: bool,
    /// Catalog service type.
    pub service_type: String,
    /// Catalog service name.
    pub service_name: Option<String>,
    /// Acceptable endpoint interfaces, in order of preference.
    pub valid_interfaces: Vec<String>,
    /// Catalog region.
    pub region_name: Option<String>,
    /// Use this endpoint instead of the catalog.
    pub endpoint_override: Option<String>,
    /// Retries on connection errors (unset: none).
    pub connect_retries: Option<u32>,
    /// Delay between connection retries (unset: exponential from 0.5 s to 60 s).
    pub connect_retry_delay: Option<f64>,
    /// Retries on retriable status codes (unset: none).
    pub status_code_retries: Option<u32>,
    /// Delay between status-code retries (unset: exponential from 0.5 s to 60 s).
    pub status_code_retry_delay: Option<f64>,
    /// Status codes worth a retry (unset: `[503]`).
    pub retriable_status_codes: Option<Vec<u16>>,
}

const PLACEMENT_SECRETS: &[&str] = &["password", "token", "application_credential_secret"];

impl PlacementSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let mut r = Reader::new(raw, "placement", errors);
        let auth_section = r.opt_string("auth_section").filter(|s| !s.is_empty());
        let session = PlacementSection::read_adapter(&mut r);
        let auth_group = auth_section
            .clone()
            .unwrap_or_else(|| "placement".to_string());
        let auth_group = auth_group.as_str();
        let mut a = Reader::new(raw, auth_group, errors).with_secrets(PLACEMENT_SECRETS);
        a.alias("auth_type", auth_group, "auth_plugin");
        a.alias("username", auth_group, "user_name");
        a.alias("project_name", auth_group, "tenant_name");
        a.alias("project_id", auth_group, "tenant_id");
        a.alias("endpoint", auth_group, "url");
        PlacementSection {
            auth_section,
            auth_type: a.opt_string("auth_type"),
            auth_url: a.opt_string("auth_url"),
            username: a.opt_string("username"),
            user_id: a.opt_string("user_id"),
            password: a.opt_string("password").map(Secret::new),
            user_domain_name: a.opt_string("user_domain_name"),
            user_domain_id: a.opt_string("user_domain_id"),
            project_name: a.opt_string("project_name"),
            project_id: a.opt_string("project_id"),
            project_domain_name: a.opt_string("project_domain_name"),
            project_domain_id: a.opt_string("project_domain_id"),
            domain_id: a.opt_string("domain_id"),
            domain_name: a.opt_string("domain_name"),
            system_scope: a.opt_string("system_scope"),
            trust_id: a.opt_string("trust_id"),
            default_domain_id: a.opt_string("default_domain_id"),
            default_domain_name: a.opt_string("default_domain_name"),
            application_credential_id: a.opt_string("application_credential_id"),
            application_credential_name: a.opt_string("application_credential_name"),
            application_credential_secret: a
                .opt_string("application_credential_secret")
                .map(Secret::new),
            token: a.opt_string("token").map(Secret::new),
            endpoint: a.opt_string("endpoint"),
            ..session
        }
    }

    /// Session and adapter options (always from `[placement]`), auth options unset.
    fn read_adapter(r: &mut Reader<'_>) -> Self {
        let codes = r.convert("retriable_status_codes", |text| {
            parse_list(text)
                .iter()
                .map(|c| match parse_int(c) {
                    Ok(Some(code)) => u16::try_from(code).map_err(|_| "not a status code".into()),
                    _ => Err(format!("{c:?} is not an integer")),
                })
                .collect::<Result<Vec<u16>, String>>()
        });
        PlacementSection {
            cafile: r.opt_string("cafile"),
            certfile: r.opt_string("certfile"),
            keyfile: r.opt_string("keyfile"),
            insecure: r.bool("insecure", false),
            timeout: r.opt_float("timeout", None, None),
            collect_timing: r.bool("collect_timing", false),
            split_loggers: r.bool("split_loggers", false),
            service_type: r.string("service_type", "placement"),
            service_name: r.opt_string("service_name"),
            valid_interfaces: r.list("valid_interfaces", &["internal", "public"]),
            region_name: r.opt_string("region_name"),
            endpoint_override: r.opt_string("endpoint_override"),
            connect_retries: r.opt_int("connect_retries", Some(0), None),
            connect_retry_delay: r.opt_float("connect_retry_delay", None, None),
            status_code_retries: r.opt_int("status_code_retries", Some(0), None),
            status_code_retry_delay: r.opt_float("status_code_retry_delay", None, None),
            retriable_status_codes: codes,
            ..PlacementSection::default()
        }
    }
}

/// `[workarounds]` options the scheduler reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkaroundsSection {
    /// Do not retry the PCPU Placement query as VCPU (deprecated).
    pub disable_fallback_pcpu_query: bool,
    /// Skip the startup check for too-old compute services.
    pub disable_compute_service_check_for_ffu: bool,
}

/// `[upgrade_levels]`: RPC version caps (unset = no cap).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UpgradeLevelsSection {
    /// Cap for the scheduler RPC API.
    pub scheduler: Option<String>,
    /// Cap for the conductor RPC API.
    pub conductor: Option<String>,
    /// Cap for the compute RPC API.
    pub compute: Option<String>,
    /// Cap for the base RPC API.
    pub baseapi: Option<String>,
}

/// `[notifications]` (nova) options.
#[derive(Clone, Debug, PartialEq)]
pub struct NovaNotificationsSection {
    /// `unversioned`, `versioned` or `both` (old place: `[DEFAULT]`).
    pub notification_format: String,
    /// Topics of versioned notifications.
    pub versioned_notifications_topics: Vec<String>,
}

/// `[compute]` options the scheduler reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ComputeSection {
    /// Fill used NUMA cells first when fitting an instance.
    pub packing_host_numa_cells_allocation_strategy: bool,
}

/// `[pci]` options the scheduler reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PciSection {
    /// `[pci] alias` (multi-valued, one JSON object per entry; old name
    /// `[DEFAULT] pci_alias`), parsed by the pci module when the filters are built.
    pub alias: Vec<String>,
}

impl PciSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let mut r = Reader::new(raw, "pci", errors);
        r.alias("alias", "DEFAULT", "pci_alias");
        PciSection {
            alias: r.multi("alias", &[]),
        }
    }
}

impl WorkaroundsSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let mut r = Reader::new(raw, "workarounds", errors);
        WorkaroundsSection {
            disable_fallback_pcpu_query: r.bool("disable_fallback_pcpu_query", false),
            disable_compute_service_check_for_ffu: r
                .bool("disable_compute_service_check_for_ffu", false),
        }
    }
}

impl UpgradeLevelsSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let mut r = Reader::new(raw, "upgrade_levels", errors);
        UpgradeLevelsSection {
            scheduler: r.opt_string("scheduler"),
            conductor: r.opt_string("conductor"),
            compute: r.opt_string("compute"),
            baseapi: r.opt_string("baseapi"),
        }
    }
}

impl NovaNotificationsSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let mut r = Reader::new(raw, "notifications", errors);
        r.alias("notification_format", "DEFAULT", "notification_format");
        NovaNotificationsSection {
            notification_format: r.choice(
                "notification_format",
                "unversioned",
                &["both", "versioned", "unversioned"],
                false,
            ),
            versioned_notifications_topics: r.list(
                "versioned_notifications_topics",
                &["versioned_notifications"],
            ),
        }
    }
}

impl ComputeSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let mut r = Reader::new(raw, "compute", errors);
        ComputeSection {
            packing_host_numa_cells_allocation_strategy: r
                .bool("packing_host_numa_cells_allocation_strategy", false),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_domain() {
        for ok in [
            "node1",
            "node-1.example.com",
            "my_host",
            "10.0.0.1",
            "::1",
            "a.b.",
        ] {
            assert!(check_host_domain(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-a", "a-", "a..b", "a b", "1.2.3", &"x".repeat(64)] {
            assert!(check_host_domain(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn placement_auth_section_and_aliases() {
        let mut raw = RawConfig::new();
        raw.add_str(
            "p.conf",
            "[placement]\nauth_section = keystone_authtoken\nregion_name = R1\n\
             valid_interfaces = internal\n\
             [keystone_authtoken]\nauth_plugin = password\nuser_name = nova\n\
             password = s3cret\ntenant_name = service\n",
        )
        .unwrap();
        let mut errors = Vec::new();
        let p = PlacementSection::read(&raw, &mut errors);
        assert!(errors.is_empty());
        assert_eq!(p.auth_type.as_deref(), Some("password"));
        assert_eq!(p.username.as_deref(), Some("nova"));
        assert_eq!(p.project_name.as_deref(), Some("service"));
        assert_eq!(p.password.as_ref().map(Secret::expose), Some("s3cret"));
        assert_eq!(p.region_name.as_deref(), Some("R1"));
        assert_eq!(p.valid_interfaces, vec!["internal"]);
        assert_eq!(p.service_type, "placement");
        assert!(!format!("{p:?}").contains("s3cret"));
    }
}
