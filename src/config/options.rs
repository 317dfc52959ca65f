// SPDX-License-Identifier: Apache-2.0
//! The table of every option the daemon reads ([`OPTIONS`]) and the nova.conf sample made
//! from it (`nova-scheduler-rs config sample`, `config/nova.conf.sample`), in the style
//! of oslo-config-generator.
//!
//! The sections read their options through [`super::reader::Reader`]; a test loads a
//! configuration with [`super::reader::record_lookups`] and checks that the table has
//! exactly the options read, with the same types, defaults, bounds, choices and
//! deprecated names. Help texts are the table's own.

use std::fmt::Write as _;

/// An option's type, as oslo.config names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `StrOpt` (also host names, URLs, choices).
    String,
    /// `BoolOpt`.
    Bool,
    /// `IntOpt`.
    Int,
    /// `FloatOpt`.
    Float,
    /// `ListOpt`.
    List,
    /// `MultiStrOpt`: one line per value.
    Multi,
}

impl Kind {
    /// What oslo-config-generator writes after the help text.
    pub fn oslo_name(self) -> &'static str {
        match self {
            Kind::String => "string value",
            Kind::Bool => "boolean value",
            Kind::Int => "integer value",
            Kind::Float => "floating point value",
            Kind::List => "list value",
            Kind::Multi => "multi valued",
        }
    }
}

/// One option the daemon reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OptionSpec {
    /// Group (`DEFAULT`, `scheduler`, ...).
    pub group: &'static str,
    /// Name.
    pub name: &'static str,
    /// Type.
    pub kind: Kind,
    /// Default as written in nova.conf (lists joined with `,`); `<None>` when unset,
    /// `<...>` when computed at startup.
    pub default: &'static str,
    /// Lower bound.
    pub min: Option<&'static str>,
    /// Upper bound.
    pub max: Option<&'static str>,
    /// Allowed values (empty: any).
    pub choices: &'static [&'static str],
    /// Deprecated `(group, name)`s read when the option is not set.
    pub deprecated: &'static [(&'static str, &'static str)],
    /// What it does (in this daemon).
    pub help: &'static str,
    /// Read (and checked) but without effect here: set to anything but its default,
    /// it is named in a warning at startup (see [`OptionSpec::not_used_reason`]).
    pub not_used: bool,
}

/// An option without bounds, choices or deprecated names.
const fn opt(
    group: &'static str,
    name: &'static str,
    kind: Kind,
    default: &'static str,
    help: &'static str,
) -> OptionSpec {
    OptionSpec {
        group,
        name,
        kind,
        default,
        min: None,
        max: None,
        choices: &[],
        deprecated: &[],
        help,
        not_used: false,
    }
}

impl OptionSpec {
    const fn min(mut self, min: &'static str) -> Self {
        self.min = Some(min);
        self
    }

    const fn max(mut self, max: &'static str) -> Self {
        self.max = Some(max);
        self
    }

    const fn choices(mut self, choices: &'static [&'static str]) -> Self {
        self.choices = choices;
        self
    }

    const fn deprecated(mut self, names: &'static [(&'static str, &'static str)]) -> Self {
        self.deprecated = names;
        self
    }

    const fn not_used(mut self) -> Self {
        self.not_used = true;
        self
    }

    /// Why a `not_used` option changes nothing: its help text after "not used".
    pub fn not_used_reason(&self) -> &'static str {
        let Some((_, after)) = self.help.split_once("not used") else {
            return "it changes nothing here";
        };
        let reason = after
            .trim_start_matches([':', ' ', '('])
            .trim_end_matches(['.', ')']);
        if reason.is_empty() {
            "it changes nothing here"
        } else {
            reason
        }
    }
}

use Kind::{Bool, Float, Int, List, Multi, String as Str};

/// Every option the daemon reads, grouped, in the order of the sample.
pub const OPTIONS: &[OptionSpec] = &[
    // [DEFAULT]
    opt("DEFAULT", "transport_url", Str, "rabbit://", "Broker URL: rabbit://user:pass@host:port[,user:pass@host:port]/vhost?option=value Query options override [oslo_messaging_rabbit]."),
    opt("DEFAULT", "control_exchange", Str, "nova", "Exchange for RPC topics."),
    opt("DEFAULT", "host", Str, "<current_hostname>", "Name of this service: service row and RPC server."),
    opt("DEFAULT", "rpc_response_timeout", Int, "60", "Seconds to wait for a response from a call. Read, not used (the daemon makes no RPC calls).").min("0").not_used(),
    opt("DEFAULT", "long_rpc_timeout", Int, "1800", "Timeout nova uses for long calls such as select_destinations. This daemon stops a request whose caller has given up (the call's AMQP expiration, else this) before its next claim, releasing what it claimed.").min("0"),
    opt("DEFAULT", "executor_thread_pool_size", Int, "64", "Concurrent RPC handlers.").min("1").deprecated(&[("DEFAULT", "rpc_thread_pool_size")]),
    opt("DEFAULT", "rpc_ping_enabled", Bool, "false", "Answer oslo_rpc_server_ping calls."),
    opt("DEFAULT", "report_interval", Int, "10", "Seconds between service heartbeats.").min("0"),
    opt("DEFAULT", "service_down_time", Int, "60", "Seconds without a heartbeat after which a service is down.").min("0"),
    opt("DEFAULT", "servicegroup_driver", Str, "db", "Liveness driver: db or mc.").choices(&["db", "mc"]),
    opt("DEFAULT", "periodic_enable", Bool, "true", "Run periodic tasks. Read, not used: host discovery runs whenever [scheduler] discover_hosts_in_cells_interval is >= 0, first at startup; false is named in a warning at startup.").not_used(),
    opt("DEFAULT", "periodic_fuzzy_delay", Int, "60", "Random delay (s, up to this) before periodic tasks start. Read, not used.").min("0").not_used(),
    opt("DEFAULT", "default_availability_zone", Str, "nova", "Availability zone of hosts in no zone aggregate."),
    opt("DEFAULT", "internal_service_availability_zone", Str, "internal", "Zone shown for internal services. Read, not used.").not_used(),
    opt("DEFAULT", "cpu_allocation_ratio", Float, "<None>", "Overrides a compute node's VCPU ratio when set (unset: use the node's own).").min("0.0"),
    opt("DEFAULT", "ram_allocation_ratio", Float, "<None>", "Overrides a compute node's MEMORY_MB ratio when set.").min("0.0"),
    opt("DEFAULT", "disk_allocation_ratio", Float, "<None>", "Overrides a compute node's DISK_GB ratio when set.").min("0.0"),
    opt("DEFAULT", "initial_cpu_allocation_ratio", Float, "4.0", "VCPU ratio used when neither the option nor the node has one.").min("0.0"),
    opt("DEFAULT", "initial_ram_allocation_ratio", Float, "1.0", "MEMORY_MB ratio used when neither the option nor the node has one.").min("0.0"),
    opt("DEFAULT", "initial_disk_allocation_ratio", Float, "1.0", "DISK_GB ratio used when neither the option nor the node has one.").min("0.0"),
    opt("DEFAULT", "cell_worker_thread_pool_size", Int, "5", "Threads for cell scatter-gather queries. Read, not used (one async runtime; see [scheduler] workers).").min("1").not_used(),
    opt("DEFAULT", "default_thread_pool_size", Int, "10", "Threads for background tasks. Read, not used (one async runtime; see [scheduler] workers).").min("1").not_used(),
    opt("DEFAULT", "manager_shutdown_timeout", Int, "160", "Read, not used: the drain on SIGTERM is bounded by graceful_shutdown_timeout; set, a warning at startup.").min("0").not_used(),
    opt("DEFAULT", "graceful_shutdown_timeout", Int, "60", "Seconds SIGTERM waits for requests in flight before exiting anyway; 0 waits without end. Abandoned requests stay unacknowledged (the broker hands them out again) and count as in flight at a death for max_message_crashes.").min("0"),
    opt("DEFAULT", "debug", Bool, "false", "Debug logging."),
    opt("DEFAULT", "log_file", Str, "<None>", "File the log is appended to (relative: under log_dir). Unset: stderr, or the journal with use_journal.").deprecated(&[("DEFAULT", "logfile")]),
    opt("DEFAULT", "log_dir", Str, "<None>", "Directory of log_file; alone, the log goes to <log_dir>/nova-scheduler-rs.log.").deprecated(&[("DEFAULT", "logdir")]),
    opt("DEFAULT", "use_json", Bool, "false", "One JSON object per line, with oslo.log's JSONFormatter keys."),
    opt("DEFAULT", "use_journal", Bool, "false", "Write to the systemd journal with structured fields (REQUEST_ID, ...)."),
    opt("DEFAULT", "use_syslog", Bool, "false", "Also send each line to syslog (/dev/log)."),
    opt("DEFAULT", "syslog_log_facility", Str, "LOG_USER", "Syslog facility with use_syslog (LOG_USER, LOG_LOCAL0 to LOG_LOCAL7, ...)."),
    opt("DEFAULT", "use_stderr", Bool, "false", "Also write to stderr when logging to a file or the journal."),
    opt("DEFAULT", "log_date_format", Str, "%Y-%m-%d %H:%M:%S", "strftime format of the time in text lines."),
    opt("DEFAULT", "default_log_levels", List, "amqp=WARN,amqplib=WARN,boto=WARN,qpid=WARN,sqlalchemy=WARN,suds=INFO,oslo.messaging=INFO,oslo_messaging=INFO,iso8601=WARN,requests.packages.urllib3.connectionpool=WARN,urllib3.connectionpool=WARN,websocket=WARN,requests.packages.urllib3.util.retry=WARN,urllib3.util.retry=WARN,keystonemiddleware=WARN,routes.middleware=WARN,stevedore=WARN,taskflow=WARN,keystoneauth=WARN,oslo.cache=INFO,oslo_policy=INFO,dogpile.core.dogpile=INFO", "logger=LEVEL pairs; Python logger names are mapped to the daemon's targets (see docs/configuration.md)."),
    opt("DEFAULT", "watch_log_file", Bool, "false", "Reopen log_file when it is moved or removed (the file is reopened in that case either way)."),
    opt("DEFAULT", "log_config_append", Str, "<None>", "A Python logging configuration file: read, not used (warned at startup).").deprecated(&[("DEFAULT", "log_config")]).not_used(),
    // [api_database]
    opt("api_database", "connection", Str, "<None>", "SQLAlchemy URL of the API database, e.g. mysql+pymysql://nova:PASSWORD@controller/nova_api?charset=utf8."),
    opt("api_database", "connection_parameters", Str, "", "Extra URL parameters, e.g. ssl_ca=/etc/ssl/ca.pem. TLS arguments (ssl_ca, ssl_cert, ssl_key, ssl_verify_cert, ssl_verify_identity, ssl_check_hostname, ssl_disabled, ssl_mode) work as with PyMySQL."),
    opt("api_database", "max_pool_size", Int, "<None>", "Read, not used: the daemon sizes its pools itself; set, a warning at startup.").min("0").not_used(),
    opt("api_database", "max_retries", Int, "10", "Connection attempts at startup before the daemon gives up (each attempt waits at most 5 s for an answer); -1 tries forever, 0 is one attempt. Meanwhile /readyz answers 503 naming the database.").min("-1"),
    opt("api_database", "retry_interval", Int, "10", "Seconds between those attempts.").min("0"),
    // [compute]
    opt("compute", "packing_host_numa_cells_allocation_strategy", Bool, "false", "Fill used NUMA cells first when fitting an instance."),
    // [database]
    opt("database", "connection", Str, "<None>", "SQLAlchemy URL of this service's database (cell0), e.g. mysql+pymysql://nova:PASSWORD@controller/nova_cell0?charset=utf8; also fills {username}, {password}, {hostname}, ... in cell_mappings.database_connection templates."),
    opt("database", "connection_parameters", Str, "", "Extra URL parameters, e.g. ssl_ca=/etc/ssl/ca.pem. TLS arguments (ssl_ca, ssl_cert, ssl_key, ssl_verify_cert, ssl_verify_identity, ssl_check_hostname, ssl_disabled, ssl_mode) work as with PyMySQL."),
    opt("database", "max_pool_size", Int, "<None>", "Read, not used: the daemon sizes its pools itself; set, a warning at startup.").min("0").not_used(),
    opt("database", "max_retries", Int, "10", "Connection attempts at startup before the daemon gives up (each attempt waits at most 5 s for an answer); -1 tries forever, 0 is one attempt. Meanwhile /readyz answers 503 naming the database.").min("-1"),
    opt("database", "retry_interval", Int, "10", "Seconds between those attempts.").min("0"),
    // [filter_scheduler]
    opt("filter_scheduler", "host_subset_size", Int, "1", "Pick randomly among the best N weighed hosts.").min("1"),
    opt("filter_scheduler", "max_io_ops_per_host", Int, "8", "IoOpsFilter limit.").min("0"),
    opt("filter_scheduler", "max_instances_per_host", Int, "50", "NumInstancesFilter limit.").min("1"),
    opt("filter_scheduler", "track_instance_changes", Bool, "true", "Computes send instance info to the scheduler. Read, not used: the instance-info casts of nova-compute are always applied to the warm cache.").not_used(),
    opt("filter_scheduler", "available_filters", Multi, "nova.scheduler.filters.all_filters", "Filters that may be enabled: nova's (built in here) and an operator's own classes, by class path or by the path of a function returning classes, run unchanged in the embedded Python (see [nova_scheduler_rs] python)."),
    opt("filter_scheduler", "enabled_filters", List, "ComputeFilter,ComputeCapabilitiesFilter,ImagePropertiesFilter,ServerGroupAntiAffinityFilter,ServerGroupAffinityFilter", "Filters to run, in order."),
    opt("filter_scheduler", "weight_classes", List, "nova.scheduler.weights.all_weighers", "Weighers to use: nova's (built in here) and an operator's own classes, by class path or by the path of a function returning classes, run unchanged in the embedded Python (see [nova_scheduler_rs] python)."),
    opt("filter_scheduler", "ram_weight_multiplier", Float, "1.0", "RAMWeigher multiplier (negative stacks, positive spreads)."),
    opt("filter_scheduler", "cpu_weight_multiplier", Float, "1.0", "CPUWeigher multiplier."),
    opt("filter_scheduler", "disk_weight_multiplier", Float, "1.0", "DiskWeigher multiplier."),
    opt("filter_scheduler", "hypervisor_version_weight_multiplier", Float, "1.0", "HypervisorVersionWeigher multiplier."),
    opt("filter_scheduler", "num_instances_weight_multiplier", Float, "0.0", "NumInstancesWeigher multiplier."),
    opt("filter_scheduler", "io_ops_weight_multiplier", Float, "-1.0", "IoOpsWeigher multiplier (negative prefers idle hosts)."),
    opt("filter_scheduler", "image_props_weight_multiplier", Float, "0.0", "ImagePropertiesWeigher multiplier."),
    opt("filter_scheduler", "image_props_weight_setting", List, "", "ImagePropertiesWeigher name=ratio pairs."),
    opt("filter_scheduler", "pci_weight_multiplier", Float, "1.0", "PCIWeigher multiplier (≥ 0).").min("0.0"),
    opt("filter_scheduler", "soft_affinity_weight_multiplier", Float, "1.0", "ServerGroupSoftAffinityWeigher multiplier (≥ 0).").min("0.0"),
    opt("filter_scheduler", "soft_anti_affinity_weight_multiplier", Float, "1.0", "ServerGroupSoftAntiAffinityWeigher multiplier (≥ 0).").min("0.0"),
    opt("filter_scheduler", "build_failure_weight_multiplier", Float, "1000000.0", "BuildFailureWeigher multiplier."),
    opt("filter_scheduler", "cross_cell_move_weight_multiplier", Float, "1000000.0", "CrossCellWeigher multiplier."),
    opt("filter_scheduler", "shuffle_best_same_weighed_hosts", Bool, "false", "Shuffle hosts of equal best weight."),
    opt("filter_scheduler", "image_properties_default_architecture", Str, "<None>", "Architecture assumed for images without one (x86_64, aarch64, ...).").choices(crate::model::fields::ARCHITECTURES),
    opt("filter_scheduler", "isolated_images", List, "", "IsolatedHostsFilter: images that may only run on isolated hosts."),
    opt("filter_scheduler", "isolated_hosts", List, "", "IsolatedHostsFilter: hosts that only run isolated images."),
    opt("filter_scheduler", "restrict_isolated_hosts_to_isolated_images", Bool, "true", "IsolatedHostsFilter: isolated hosts take only isolated images."),
    opt("filter_scheduler", "aggregate_image_properties_isolation_namespace", Str, "<None>", "AggregateImagePropertiesIsolation: metadata key namespace (deprecated)."),
    opt("filter_scheduler", "aggregate_image_properties_isolation_separator", Str, ".", "AggregateImagePropertiesIsolation: namespace separator (deprecated)."),
    opt("filter_scheduler", "pci_in_placement", Bool, "false", "PCI requests are tracked in Placement. Read, not used: PCI request groups arrive in the RequestSpec.").not_used(),
    // [metrics]
    opt("metrics", "weight_multiplier", Float, "1.0", "MetricsWeigher multiplier."),
    opt("metrics", "weight_setting", List, "", "name=ratio pairs of metrics to weigh."),
    opt("metrics", "required", Bool, "true", "A host missing a metric is an error (true) or gets weight_of_unavailable (false)."),
    opt("metrics", "weight_of_unavailable", Float, "-10000.0", "Weight of a host missing a metric when required is false."),
    // [notifications]
    opt("notifications", "notification_format", Str, "unversioned", "unversioned, versioned or both (old place: [DEFAULT]).").choices(&["both", "versioned", "unversioned"]).deprecated(&[("DEFAULT", "notification_format")]),
    opt("notifications", "versioned_notifications_topics", List, "versioned_notifications", "Topics of versioned notifications."),
    // [nova_scheduler_rs]
    opt("nova_scheduler_rs", "host_state_refresh_interval", Float, "1.0", "Seconds between incremental refreshes of the cached host states; 0 turns the cache off (every request reads the cell databases, as nova does).").min("0.0").max("3600.0"),
    opt("nova_scheduler_rs", "deleted_instances_scan_interval", Float, "10.0", "Seconds between reads of instances soft-deleted without their updated_at moving (a scan of each cell's instances table; nova indexes no deleted_at). Updated and created instances are read at every refresh.").min("0.0").max("3600.0"),
    opt("nova_scheduler_rs", "host_state_full_resync_interval", Float, "300.0", "Seconds between full re-reads of every cell and of the aggregates.").min("1.0"),
    opt("nova_scheduler_rs", "retain_virtual_consumption", Bool, "true", "Keep the virtual consumption of our own decisions on the cached host until its compute node row is written after the decision (nova's HostState.updated rule), so back-to-back requests do not pile onto one host."),
    opt("nova_scheduler_rs", "retained_consumption_ttl", Float, "120.0", "Seconds after which a retained consumption is dropped even if the compute node row never moved (a build that failed before the compute claimed anything).").min("0.0"),
    opt("nova_scheduler_rs", "placement_index_refresh_interval", Float, "1.0", "Seconds between refreshes of the Placement provider index (with [placement_database] connection).").min("0.05").max("3600.0"),
    opt("nova_scheduler_rs", "indexed_decision", Bool, "true", "With the cache on: decide over its table of host states, the best hosts found in an index of their weights instead of weighing every candidate (the same decisions; requests it cannot decide that way weigh every candidate)."),
    opt("nova_scheduler_rs", "read_allocations_ahead", Bool, "true", "Asking Placement for the candidates: read each instance's current allocations (the GET of nova's claim) at the same time, so the claim after the decision sends only its PUT. false reads them at claim time, as nova does."),
    opt("nova_scheduler_rs", "http_listen", Str, "", "HOST:PORT of an HTTP listener serving /metrics (Prometheus), /healthz and /readyz; empty serves none. Meant for a loopback or management address: it has no TLS and no authentication."),
    opt("nova_scheduler_rs", "decision_ring_size", Int, "256", "Recent select_destinations decisions kept in memory for `nova-scheduler-rs explain` (through http_listen's /decisions): what each call asked and got, and a NoValidHost's per-filter account. 0 keeps none (a NoValidHost is still explained in the log).").min("0").max("100000"),
    opt("nova_scheduler_rs", "record_calls", Str, "", "Append every select_destinations call and this daemon's answer to this file (gzip JSON lines, secrets stripped); empty: off"),
    opt("nova_scheduler_rs", "record_max_bytes", Int, "104857600", "Compressed bytes of the record_calls file before it is rotated (to FILE.1, FILE.2, ...).").min("1"),
    opt("nova_scheduler_rs", "record_keep", Int, "5", "Rotated record_calls files kept beside the live one (0: only the live file).").min("0"),
    opt("nova_scheduler_rs", "max_instances_per_request", Int, "1000", "Instances one select_destinations may ask for (instance_uuids, or num_instances without them); a larger request is NoValidHost naming this option. nova's API bounds a multi-create only by the project's instances quota.").min("1"),
    opt("nova_scheduler_rs", "max_message_bytes", Int, "2097152", "Bytes of one RPC message, before and after decompression; a larger message is answered with a failure before it is parsed.").min("65536"),
    opt("nova_scheduler_rs", "max_message_crashes", Int, "2", "A request that was being handled when the daemon died (or was abandoned at shutdown) this many times is answered with a failure, and the claims its dead attempt left are taken back, instead of being handled again (a poison message). Below that it is handled again, as a redelivered request whose earlier claims are replaced: with 2, an ordinary crash (an OOM kill, a node reboot) fails no build, and a request that kills the daemon twice is answered. 0 turns the guard off.").min("0"),
    opt("nova_scheduler_rs", "state_dir", Str, "/var/lib/nova-scheduler-rs", "Directory of the record of requests in flight (inflight-<host>/inflight.log: a line as a request starts, one as it is answered); it must be writable and survive restarts (not a tmpfs the unit cleans). Where the daemon's user cannot create it or write in it, startup is refused (unless max_message_crashes = 0); a failure to write it later turns the guard off with one warning."),
    opt("nova_scheduler_rs", "nova_release", Str, "auto", "The nova release the cloud is scheduled as, as that release's nova-scheduler schedules it (filters, weighers, request filters, the services row's version): auto, the release of the control plane's newest nova-conductor service version (67, shared by 2024.1 and 2024.2, reads as 2024.1), read at startup; or a series. A control plane older than 2024.1 is refused.").choices(&["auto", "2024.1", "2024.2", "2025.1", "2025.2", "2026.1", "2026.2"]),
    opt("nova_scheduler_rs", "python", Str, "", "The Python interpreter (a virtualenv's bin/python) whose packages hold nova and the classes of [filter_scheduler] available_filters and weight_classes that are not nova's; it must be the Python version this daemon embeds. Empty: the interpreter of nova-scheduler found on PATH (its #! line). Read only when such a class is named."),
    opt("nova_scheduler_rs", "wasm_plugins", List, "", "WebAssembly filter and weigher modules (.wasm, or .wat text) following the plugin ABI of docs/wasm-plugins.md, each named by its file name without the extension: a module exporting nsrs_filter is enabled by that name in [filter_scheduler] enabled_filters, one exporting nsrs_weigh by that name in weight_classes. Modules run sandboxed (no imports, bounded memory, a deadline per call)."),
    opt("nova_scheduler_rs", "plugin_failure", Str, "fail_closed", "What a Wasm plugin that traps, runs past plugin_deadline_ms or answers garbage does to the call (a warning and the metric nova_scheduler_plugin_failures_total either way): fail_open skips the plugin for the call (a filter passes every host, a weigher weighs them all the same); fail_closed makes a filter reject every host with the failure as the reason and a weigher fail the request with NoValidHost naming the plugin.").choices(&["fail_open", "fail_closed"]),
    opt("nova_scheduler_rs", "plugin_deadline_ms", Float, "3.0", "Milliseconds one call of a Wasm plugin may run (over the whole candidate list); past it the plugin is cut off (within about a millisecond more) and plugin_failure applies.").min("0.1").max("10000.0"),
    opt("nova_scheduler_rs", "plugin_weight_multipliers", List, "", "NAME:MULTIPLIER of each Wasm weigher (its normalized weight times this; 1.0 when not listed)."),
    // [oslo_messaging_notifications]
    opt("oslo_messaging_notifications", "driver", Multi, "", "Notification drivers (multi-valued; empty = notifications off)."),
    opt("oslo_messaging_notifications", "transport_url", Str, "<None>", "Broker URL for notifications (secret; unset = [DEFAULT] transport_url)."),
    opt("oslo_messaging_notifications", "topics", List, "notifications", "Topics notifications are sent to."),
    opt("oslo_messaging_notifications", "retry", Int, "-1", "Send retries (-1 = forever)."),
    // [oslo_messaging_rabbit]
    opt("oslo_messaging_rabbit", "amqp_durable_queues", Bool, "false", "Durable control exchange and topic queues."),
    opt("oslo_messaging_rabbit", "amqp_auto_delete", Bool, "false", "Auto-delete control exchange and topic queues."),
    opt("oslo_messaging_rabbit", "rpc_conn_pool_size", Int, "30", "Size of the pool of sending connections. Read (combinations oslo refuses are refused), not used.").min("1").not_used(),
    opt("oslo_messaging_rabbit", "conn_pool_min_size", Int, "2", "Pool floor (must not exceed rpc_conn_pool_size). Read (combinations oslo refuses are refused), not used.").min("0").not_used(),
    opt("oslo_messaging_rabbit", "conn_pool_ttl", Int, "1200", "Seconds an idle pooled connection lives. Read (combinations oslo refuses are refused), not used.").min("0").not_used(),
    opt("oslo_messaging_rabbit", "ssl", Bool, "false", "Connect with TLS (the port stays 5672 unless the URL names one)."),
    opt("oslo_messaging_rabbit", "ssl_version", Str, "", "TLS protocol name (\"\" = library default). Read, not used (rustls negotiates TLS 1.2/1.3 and always checks the host name).").not_used(),
    opt("oslo_messaging_rabbit", "ssl_key_file", Str, "", "Client key file (\"\" = none)."),
    opt("oslo_messaging_rabbit", "ssl_cert_file", Str, "", "Client certificate file (\"\" = none)."),
    opt("oslo_messaging_rabbit", "ssl_ca_file", Str, "", "CA bundle to verify the broker (\"\" = system roots, no hostname check)."),
    opt("oslo_messaging_rabbit", "ssl_enforce_hostname_verification", Bool, "true", "Check the broker's hostname when ssl_ca_file is set. Read, not used (rustls negotiates TLS 1.2/1.3 and always checks the host name).").not_used(),
    opt("oslo_messaging_rabbit", "ssl_enforce_fips_mode", Bool, "false", "No effect (deprecated). Read, not used (rustls negotiates TLS 1.2/1.3 and always checks the host name).").not_used(),
    opt("oslo_messaging_rabbit", "kombu_reconnect_delay", Float, "1.0", "Extra seconds to sleep per recoverable error (0–4.5). Read (combinations oslo refuses are refused), not used.").min("0.0").max("4.5").not_used(),
    opt("oslo_messaging_rabbit", "kombu_reconnect_splay", Float, "0.0", "Random extra seconds (0 to this) per recoverable error. Read (combinations oslo refuses are refused), not used.").min("0.0").not_used(),
    opt("oslo_messaging_rabbit", "kombu_compression", Str, "<None>", "Compression of every outgoing body (gzip, ...), unset = none."),
    opt("oslo_messaging_rabbit", "kombu_missing_consumer_retry_timeout", Int, "60", "Seconds to retry a reply whose queue is missing (old name kombu_reconnect_timeout).").min("0").deprecated(&[("oslo_messaging_rabbit", "kombu_reconnect_timeout")]),
    opt("oslo_messaging_rabbit", "kombu_failover_strategy", Str, "round-robin", "Host order on failover: round-robin or shuffle. Read, not used: the brokers are shuffled once at start, then tried in turn from the one that worked last.").choices(&["round-robin", "shuffle"]).not_used(),
    opt("oslo_messaging_rabbit", "rabbit_login_method", Str, "AMQPLAIN", "SASL mechanism: PLAIN, AMQPLAIN, EXTERNAL or RABBIT-CR-DEMO.").choices(&["PLAIN", "AMQPLAIN", "EXTERNAL", "RABBIT-CR-DEMO"]),
    opt("oslo_messaging_rabbit", "rabbit_retry_interval", Int, "1", "First reconnect delay (s).").min("1"),
    opt("oslo_messaging_rabbit", "rabbit_retry_backoff", Int, "2", "Reconnect delay growth per attempt (s).").min("0"),
    opt("oslo_messaging_rabbit", "rabbit_interval_max", Int, "30", "Reconnect delay cap (s).").min("1"),
    opt("oslo_messaging_rabbit", "rabbit_ha_queues", Bool, "false", "Add x-ha-policy: all to queue arguments (exclusive with quorum queues)."),
    opt("oslo_messaging_rabbit", "rabbit_quorum_queue", Bool, "false", "Topic queues are quorum queues (and durable)."),
    opt("oslo_messaging_rabbit", "rabbit_transient_quorum_queue", Bool, "false", "Reply and fanout queues are quorum queues."),
    opt("oslo_messaging_rabbit", "rabbit_quorum_delivery_limit", Int, "0", "x-delivery-limit of quorum queues when > 0."),
    opt("oslo_messaging_rabbit", "rabbit_quorum_max_memory_length", Int, "0", "x-max-in-memory-length of quorum queues when > 0."),
    opt("oslo_messaging_rabbit", "rabbit_quorum_max_memory_bytes", Int, "0", "x-max-in-memory-bytes of quorum queues when > 0."),
    opt("oslo_messaging_rabbit", "rabbit_transient_queues_ttl", Int, "1800", "x-expires (s) of reply and fanout queues; 0 = none.").min("0"),
    opt("oslo_messaging_rabbit", "rabbit_qos_prefetch_count", Int, "0", "Prefetch on listening channels; 0 = unlimited.").min("0"),
    opt("oslo_messaging_rabbit", "heartbeat_timeout_threshold", Int, "60", "Heartbeat proposed to the broker (s); 0 disables heartbeats.").min("0"),
    opt("oslo_messaging_rabbit", "heartbeat_rate", Int, "3", "Heartbeats are sent every heartbeat_timeout_threshold / heartbeat_rate s. Read (combinations oslo refuses are refused), not used.").min("1").not_used(),
    opt("oslo_messaging_rabbit", "direct_mandatory_flag", Bool, "true", "mandatory flag on replies (deprecated). Read (combinations oslo refuses are refused), not used.").not_used(),
    opt("oslo_messaging_rabbit", "enable_cancel_on_failover", Bool, "false", "x-cancel-on-ha-failover consumer argument."),
    opt("oslo_messaging_rabbit", "use_queue_manager", Bool, "false", "Deterministic reply and fanout queue names."),
    opt("oslo_messaging_rabbit", "hostname", Str, "<current_hostname>", "Host part of queue-manager names (default: the machine's hostname). Read (combinations oslo refuses are refused), not used.").not_used(),
    opt("oslo_messaging_rabbit", "processname", Str, "nova-scheduler", "Process part of queue-manager names (default: nova-scheduler, the name the Python service has). Read (combinations oslo refuses are refused), not used.").not_used(),
    opt("oslo_messaging_rabbit", "rabbit_stream_fanout", Bool, "false", "One stream queue per fanout topic."),
    // [pci]
    opt("pci", "alias", Multi, "", "PCI alias, one JSON object per value. Read, not used: PCI requests arrive resolved in the RequestSpec.").deprecated(&[("DEFAULT", "pci_alias")]).not_used(),
    // [placement]
    opt("placement", "auth_section", Str, "<None>", "Read the auth options (auth_type, auth_url to endpoint) from this group instead, e.g. keystone_authtoken."),
    opt("placement", "auth_type", Str, "<None>", "keystoneauth plugin: none, admin_token, password, v3password, token, v3token, v3applicationcredential (others stop startup).").deprecated(&[("placement", "auth_plugin")]),
    opt("placement", "auth_url", Str, "<None>", "Keystone URL (password, token and v3applicationcredential plugins)."),
    opt("placement", "username", Str, "<None>", "User name (old name user_name).").deprecated(&[("placement", "user_name")]),
    opt("placement", "user_id", Str, "<None>", "User id."),
    opt("placement", "password", Str, "<None>", "Password (secret)."),
    opt("placement", "user_domain_name", Str, "<None>", "Domain of the user, by name."),
    opt("placement", "user_domain_id", Str, "<None>", "Domain of the user, by id."),
    opt("placement", "project_name", Str, "<None>", "Project to scope to, by name (old name tenant_name).").deprecated(&[("placement", "tenant_name")]),
    opt("placement", "project_id", Str, "<None>", "Project to scope to, by id (old name tenant_id).").deprecated(&[("placement", "tenant_id")]),
    opt("placement", "project_domain_name", Str, "<None>", "Domain of the project, by name."),
    opt("placement", "project_domain_id", Str, "<None>", "Domain of the project, by id."),
    opt("placement", "domain_id", Str, "<None>", "Domain to scope to, by id."),
    opt("placement", "domain_name", Str, "<None>", "Domain to scope to, by name."),
    opt("placement", "system_scope", Str, "<None>", "System scope (all)."),
    opt("placement", "trust_id", Str, "<None>", "Trust to scope to."),
    opt("placement", "default_domain_id", Str, "<None>", "Default domain id for user and project (generic password plugin)."),
    opt("placement", "default_domain_name", Str, "<None>", "Default domain name for user and project (generic password plugin)."),
    opt("placement", "application_credential_id", Str, "<None>", "Application credential id (v3applicationcredential)."),
    opt("placement", "application_credential_name", Str, "<None>", "Application credential name (v3applicationcredential; with user_id, or username and user_domain_id/user_domain_name)."),
    opt("placement", "application_credential_secret", Str, "<None>", "Application credential secret (secret; v3applicationcredential)."),
    opt("placement", "token", Str, "<None>", "Token of the admin_token and token/v3token plugins (secret)."),
    opt("placement", "endpoint", Str, "<None>", "Endpoint of the admin_token and none plugins (old name url).").deprecated(&[("placement", "url")]),
    opt("placement", "cafile", Str, "<None>", "PEM bundle of CAs trusted for HTTPS to Placement and keystone, added to the system's. Unreadable stops startup."),
    opt("placement", "certfile", Str, "<None>", "Client certificate (PEM) presented to Placement; the key is keyfile, else in this file. Unreadable, or not matching the key, stops startup."),
    opt("placement", "keyfile", Str, "<None>", "Private key (PEM) of certfile. Set without certfile stops startup."),
    opt("placement", "insecure", Bool, "false", "Skip HTTPS certificate verification (Placement and keystone)."),
    opt("placement", "timeout", Float, "<None>", "Seconds per request. Unset: a call's questions and claims wait as long as its caller, other requests at most 30 (keystoneauth waits without end)."),
    opt("placement", "collect_timing", Bool, "false", "Collect per-API timing (keystoneauth keeps them for its caller). Read, not honoured: every request's time is in /metrics; set, a warning at startup."),
    opt("placement", "split_loggers", Bool, "false", "Log requests to separate loggers. Read, not honoured: requests log under nova_scheduler::placement; set, a warning at startup."),
    opt("placement", "service_type", Str, "placement", "Catalog service type."),
    opt("placement", "service_name", Str, "<None>", "Catalog service name."),
    opt("placement", "valid_interfaces", List, "internal,public", "Acceptable endpoint interfaces, in order of preference."),
    opt("placement", "region_name", Str, "<None>", "Catalog region."),
    opt("placement", "endpoint_override", Str, "<None>", "Use this endpoint instead of the catalog."),
    opt("placement", "connect_retries", Int, "<None>", "Retries on connection errors (unset: none). Read, not used: claims follow nova's own retry of provider-generation conflicts (4 attempts).").min("0").not_used(),
    opt("placement", "connect_retry_delay", Float, "<None>", "Delay between connection retries (unset: exponential from 0.5 s to 60 s). Read, not used: claims follow nova's own retry of provider-generation conflicts (4 attempts).").not_used(),
    opt("placement", "status_code_retries", Int, "<None>", "Retries on retriable status codes (unset: none). Read, not used: claims follow nova's own retry of provider-generation conflicts (4 attempts).").min("0").not_used(),
    opt("placement", "status_code_retry_delay", Float, "<None>", "Delay between status-code retries (unset: exponential from 0.5 s to 60 s). Read, not used: claims follow nova's own retry of provider-generation conflicts (4 attempts).").not_used(),
    opt("placement", "retriable_status_codes", List, "<None>", "Status codes worth a retry (unset: [503]). Read, not used: claims follow nova's own retry of provider-generation conflicts (4 attempts).").not_used(),
    // [placement_database]
    opt("placement_database", "connection", Str, "<None>", "This daemon's option (nova has none): Placement's own database, read-only (SELECT only; never written), e.g. mysql+pymysql://placement_ro:PASSWORD@controller/placement?charset=utf8. Set, allocation candidates of single-provider requests are computed from a live local index and Placement is asked only to claim. Unset: every candidate question goes to Placement, as nova does."),
    opt("placement_database", "connection_parameters", Str, "", "Extra URL parameters, e.g. ssl_ca=/etc/ssl/ca.pem. TLS arguments (ssl_ca, ssl_cert, ssl_key, ssl_verify_cert, ssl_verify_identity, ssl_check_hostname, ssl_disabled, ssl_mode) work as with PyMySQL."),
    opt("placement_database", "max_pool_size", Int, "<None>", "Read, not used: the daemon sizes its pools itself; set, a warning at startup.").min("0").not_used(),
    opt("placement_database", "max_retries", Int, "10", "Connection attempts at startup before the daemon gives up (each attempt waits at most 5 s for an answer); -1 tries forever, 0 is one attempt. Meanwhile /readyz answers 503 naming the database.").min("-1"),
    opt("placement_database", "retry_interval", Int, "10", "Seconds between those attempts.").min("0"),
    // [scheduler]
    opt("scheduler", "max_attempts", Int, "3", "Attempts to build an instance; alternates returned = max_attempts - 1.").min("1"),
    opt("scheduler", "max_placement_results", Int, "1000", "Limit of allocation candidates asked from Placement.").min("1"),
    opt("scheduler", "discover_hosts_in_cells_interval", Int, "-1", "Periodic host discovery: -1 never, 0 every 60 s.").min("-1"),
    opt("scheduler", "workers", Int, "<None>", "nova: worker processes; here the threads of the daemon's one process (unset or 0: one per CPU).").min("0"),
    opt("scheduler", "limit_tenants_to_placement_aggregate", Bool, "false", "Prefilter: restrict projects to their Placement aggregates (filter_tenant_id aggregate metadata)."),
    opt("scheduler", "placement_aggregate_required_for_tenants", Bool, "false", "With the above, projects without an aggregate may not build anywhere."),
    opt("scheduler", "query_placement_for_image_type_support", Bool, "false", "Prefilter: ask Placement for the image's disk format trait."),
    opt("scheduler", "enable_isolated_aggregate_filtering", Bool, "false", "Prefilter: exclude aggregates whose required traits the request lacks."),
    opt("scheduler", "image_metadata_prefilter", Bool, "false", "Prefilter: turn image properties into required traits."),
    opt("scheduler", "query_placement_for_routed_network_aggregates", Bool, "false", "Prefilter: restrict to the aggregates of routed network segments."),
    // [upgrade_levels]
    opt("upgrade_levels", "scheduler", Str, "<None>", "Cap for the scheduler RPC API. Read, not used: every select_destinations version from 4.0 to 4.5 is served whatever the callers are pinned to.").not_used(),
    opt("upgrade_levels", "conductor", Str, "<None>", "Cap for the conductor RPC API. Read, not used: every select_destinations version from 4.0 to 4.5 is served whatever the callers are pinned to.").not_used(),
    opt("upgrade_levels", "compute", Str, "<None>", "Cap for the compute RPC API. Read, not used: every select_destinations version from 4.0 to 4.5 is served whatever the callers are pinned to.").not_used(),
    opt("upgrade_levels", "baseapi", Str, "<None>", "Cap for the base RPC API. Read, not used: every select_destinations version from 4.0 to 4.5 is served whatever the callers are pinned to.").not_used(),
    // [workarounds]
    opt("workarounds", "disable_fallback_pcpu_query", Bool, "false", "Do not retry the PCPU Placement query as VCPU (deprecated)."),
    opt("workarounds", "disable_compute_service_check_for_ffu", Bool, "false", "Skip the startup check for too-old compute services. Read, not used.").not_used(),
];

/// The header of the sample.
const HEADER: &str = "\
# nova.conf options read by nova-scheduler-rs, with their defaults.
#
# Generated by `nova-scheduler-rs config sample` from the table of options the
# daemon reads (src/config/options.rs); do not edit.
#
# nova-scheduler-rs reads the same nova.conf as nova-scheduler, with oslo.config's
# rules: --config-file and --config-dir in the order given; without --config-file,
# the first of ~/.nova/nova.conf, ~/nova.conf, /etc/nova/nova.conf, /etc/nova.conf
# (and likewise nova-scheduler.conf). Later files override earlier ones; every other
# group and option is accepted and left alone. `$name` refers to another option;
# write `$$` for a literal `$` (for example in a password). OS_<GROUP>__<OPTION>
# environment variables override the files.
#
# Every option line below is a comment showing the default.
";

/// oslo-config-generator's wrapping: 70 columns including the `# `.
fn wrap(out: &mut String, text: &str) {
    for (i, paragraph) in text.split("\n\n").enumerate() {
        if i > 0 {
            out.push_str("#\n");
        }
        let mut line = String::from("#");
        for word in paragraph.split_whitespace() {
            if line.len() > 1 && line.len() + 1 + word.len() > 70 {
                out.push_str(&line);
                out.push('\n');
                line = String::from("#");
            }
            line.push(' ');
            line.push_str(word);
        }
        out.push_str(&line);
        out.push('\n');
    }
}

/// The groups of [`OPTIONS`], in order of first appearance.
pub fn groups() -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = Vec::new();
    for o in OPTIONS {
        if !groups.contains(&o.group) {
            groups.push(o.group);
        }
    }
    groups
}

/// The nova.conf sample: every option of [`OPTIONS`], commented out at its default.
pub fn sample() -> String {
    let mut out = String::from(HEADER);
    for group in groups() {
        let _ = write!(out, "\n[{group}]\n");
        for o in OPTIONS.iter().filter(|o| o.group == group) {
            out.push_str("\n#\n");
            wrap(&mut out, &format!("{} ({})", o.help, o.kind.oslo_name()));
            if let Some(min) = o.min {
                let _ = writeln!(out, "# Minimum value: {min}");
            }
            if let Some(max) = o.max {
                let _ = writeln!(out, "# Maximum value: {max}");
            }
            if !o.choices.is_empty() {
                wrap(
                    &mut out,
                    &format!("Possible values: {}", o.choices.join(", ")),
                );
            }
            for (g, n) in o.deprecated {
                let _ = writeln!(out, "# Deprecated group/name - [{g}]/{n}");
            }
            let values: Vec<&str> = match o.kind {
                Multi if !o.default.is_empty() => o.default.split(',').collect(),
                _ => vec![o.default],
            };
            for v in values {
                if v.is_empty() {
                    let _ = writeln!(out, "#{} =", o.name);
                } else {
                    let _ = writeln!(out, "#{} = {v}", o.name);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::reader::record_lookups;

    #[test]
    fn the_table_is_exactly_what_the_reader_reads() {
        let (config, lookups) = record_lookups(|| crate::config::from_ini_str(""));
        config.unwrap();
        assert!(lookups.len() > 100, "{} lookups", lookups.len());
        for l in &lookups {
            let what = format!("[{}] {}", l.group, l.name);
            let o = OPTIONS
                .iter()
                .find(|o| o.group == l.group && o.name == l.name)
                .unwrap_or_else(|| panic!("{what} is read but not in OPTIONS"));
            if let Some(kind) = l.kind {
                assert_eq!(o.kind, kind, "{what}: type");
            }
            match &l.default {
                Some(d) => assert_eq!(o.default, d, "{what}: default"),
                None => assert!(o.default.starts_with('<'), "{what}: default"),
            }
            assert_eq!(o.min, l.min.as_deref(), "{what}: minimum");
            assert_eq!(o.max, l.max.as_deref(), "{what}: maximum");
            assert_eq!(o.choices, l.choices, "{what}: choices");
            let deprecated: Vec<(String, String)> = o
                .deprecated
                .iter()
                .map(|(g, n)| (g.to_string(), n.to_string()))
                .collect();
            assert_eq!(deprecated, l.deprecated, "{what}: deprecated names");
            assert!(!o.help.is_empty(), "{what}: help");
        }
        for (i, o) in OPTIONS.iter().enumerate() {
            assert!(
                lookups
                    .iter()
                    .any(|l| l.group == o.group && l.name == o.name),
                "[{}] {} is in OPTIONS but never read",
                o.group,
                o.name
            );
            assert!(
                !OPTIONS[..i]
                    .iter()
                    .any(|p| p.group == o.group && p.name == o.name),
                "[{}] {} twice in OPTIONS",
                o.group,
                o.name
            );
        }
    }

    #[test]
    fn the_sample_reads_as_all_defaults_and_is_the_committed_file() {
        let sample = sample();
        let (config, lookups) = record_lookups(|| crate::config::from_ini_str(&sample));
        let config = config.unwrap();
        assert!(config.raw().keys("DEFAULT").is_empty());
        assert!(sample
            .lines()
            .all(|l| l.is_empty() || l.starts_with('#') || l.starts_with('[')));
        for l in &lookups {
            let line = format!("#{} =", l.name);
            assert!(sample.contains(&line), "{line}");
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/nova.conf.sample");
        let committed = std::fs::read_to_string(path).unwrap();
        assert!(
            committed == sample,
            "config/nova.conf.sample is not current: run \
             `nova-scheduler-rs config sample > config/nova.conf.sample`"
        );
    }

    #[test]
    fn help_is_wrapped_at_seventy_columns() {
        let mut out = String::new();
        wrap(&mut out, &"word ".repeat(40));
        assert!(out.lines().all(|l| l.len() <= 70 && l.starts_with("# ")));
        assert_eq!(out.split_whitespace().filter(|w| *w == "word").count(), 40);
    }
}
