// SPDX-License-Identifier: Apache-2.0
//! `[oslo_messaging_rabbit]` (every option of oslo.messaging 18.1.0) and
//! `[oslo_messaging_notifications]`.
//!
//! Query parameters of `transport_url` override these options with the option's type; a
//! query key that is not one of [`RABBIT_OPTIONS`] is an error, as in oslo.messaging.

use std::collections::HashMap;

use super::error::{ConfigError, Secret};
use super::ini::RawConfig;
use super::reader::{check_choice, Reader};

/// The options of `[oslo_messaging_rabbit]` in oslo.messaging 18.1.0 (the names a
/// transport URL query may use).
pub const RABBIT_OPTIONS: &[&str] = &[
    "amqp_durable_queues",
    "amqp_auto_delete",
    "rpc_conn_pool_size",
    "conn_pool_min_size",
    "conn_pool_ttl",
    "ssl",
    "ssl_version",
    "ssl_key_file",
    "ssl_cert_file",
    "ssl_ca_file",
    "ssl_enforce_hostname_verification",
    "ssl_enforce_fips_mode",
    "kombu_reconnect_delay",
    "kombu_reconnect_splay",
    "kombu_compression",
    "kombu_missing_consumer_retry_timeout",
    "kombu_failover_strategy",
    "rabbit_login_method",
    "rabbit_retry_interval",
    "rabbit_retry_backoff",
    "rabbit_interval_max",
    "rabbit_ha_queues",
    "rabbit_quorum_queue",
    "rabbit_transient_quorum_queue",
    "rabbit_quorum_delivery_limit",
    "rabbit_quorum_max_memory_length",
    "rabbit_quorum_max_memory_bytes",
    "rabbit_transient_queues_ttl",
    "rabbit_qos_prefetch_count",
    "heartbeat_timeout_threshold",
    "heartbeat_rate",
    "direct_mandatory_flag",
    "enable_cancel_on_failover",
    "use_queue_manager",
    "hostname",
    "processname",
    "rabbit_stream_fanout",
];

/// Deprecated names still read from the file (not from a URL query).
const RABBIT_DEPRECATED: &[&str] = &["kombu_reconnect_timeout"];

/// `ssl_version` values Python's `ssl` module offers (case-insensitive).
const SSL_VERSIONS: &[&str] = &["TLSv1", "SSLv23", "SSLv2", "SSLv3", "TLSv1_1", "TLSv1_2"];

/// `[oslo_messaging_rabbit]`, after transport URL query overrides.
#[derive(Clone, Debug, PartialEq)]
pub struct RabbitSection {
    /// Durable control exchange and topic queues.
    pub amqp_durable_queues: bool,
    /// Auto-delete control exchange and topic queues.
    pub amqp_auto_delete: bool,
    /// Size of the pool of sending connections.
    pub rpc_conn_pool_size: u32,
    /// Pool floor (must not exceed `rpc_conn_pool_size`).
    pub conn_pool_min_size: u32,
    /// Seconds an idle pooled connection lives.
    pub conn_pool_ttl: u64,
    /// Connect with TLS (the port stays 5672 unless the URL names one).
    pub ssl: bool,
    /// TLS protocol name (`""` = library default).
    pub ssl_version: String,
    /// Client key file (`""` = none).
    pub ssl_key_file: String,
    /// Client certificate file (`""` = none).
    pub ssl_cert_file: String,
    /// CA bundle to verify the broker (`""` = system roots, no hostname check).
    pub ssl_ca_file: String,
    /// Check the broker's hostname when `ssl_ca_file` is set.
    pub ssl_enforce_hostname_verification: bool,
    /// No effect (deprecated).
    pub ssl_enforce_fips_mode: bool,
    /// Extra seconds to sleep per recoverable error (0–4.5).
    pub kombu_reconnect_delay: f64,
    /// Random extra seconds (0 to this) per recoverable error.
    pub kombu_reconnect_splay: f64,
    /// Compression of every outgoing body (`gzip`, ...), unset = none.
    pub kombu_compression: Option<String>,
    /// Seconds to retry a reply whose queue is missing (old name `kombu_reconnect_timeout`).
    pub kombu_missing_consumer_retry_timeout: u64,
    /// Host order on failover: `round-robin` or `shuffle`.
    pub kombu_failover_strategy: String,
    /// SASL mechanism: `PLAIN`, `AMQPLAIN`, `EXTERNAL` or `RABBIT-CR-DEMO`.
    pub rabbit_login_method: String,
    /// First reconnect delay (s).
    pub rabbit_retry_interval: u64,
    /// Reconnect delay growth per attempt (s).
    pub rabbit_retry_backoff: u64,
    /// Reconnect delay cap (s).
    pub rabbit_interval_max: u64,
    /// Add `x-ha-policy: all` to queue arguments (exclusive with quorum queues).
    pub rabbit_ha_queues: bool,
    /// Topic queues are quorum queues (and durable).
    pub rabbit_quorum_queue: bool,
    /// Reply and fanout queues are quorum queues.
    pub rabbit_transient_quorum_queue: bool,
    /// `x-delivery-limit` of quorum queues when > 0.
    pub rabbit_quorum_delivery_limit: i64,
    /// `x-max-in-memory-length` of quorum queues when > 0.
    pub rabbit_quorum_max_memory_length: i64,
    /// `x-max-in-memory-bytes` of quorum queues when > 0.
    pub rabbit_quorum_max_memory_bytes: i64,
    /// `x-expires` (s) of reply and fanout queues; 0 = none.
    pub rabbit_transient_queues_ttl: u64,
    /// `basic.qos` prefetch on listening channels when > 0.
    pub rabbit_qos_prefetch_count: u16,
    /// Heartbeat proposed to the broker (s); 0 disables heartbeats.
    pub heartbeat_timeout_threshold: u64,
    /// Heartbeats are sent every `heartbeat_timeout_threshold / heartbeat_rate` s.
    pub heartbeat_rate: u64,
    /// `mandatory` flag on replies (deprecated).
    pub direct_mandatory_flag: bool,
    /// `x-cancel-on-ha-failover` consumer argument.
    pub enable_cancel_on_failover: bool,
    /// Deterministic reply and fanout queue names.
    pub use_queue_manager: bool,
    /// Host part of queue-manager names (default: the machine's hostname).
    pub hostname: String,
    /// Process part of queue-manager names (default: `nova-scheduler`, the name the
    /// Python service has).
    pub processname: String,
    /// One stream queue per fanout topic.
    pub rabbit_stream_fanout: bool,
}

impl RabbitSection {
    /// Reads the group; `overrides` are the transport URL's query parameters.
    pub(crate) fn read(
        raw: &RawConfig,
        overrides: &HashMap<String, String>,
        errors: &mut Vec<ConfigError>,
    ) -> Self {
        let mut r = Reader::new(raw, "oslo_messaging_rabbit", errors).with_overrides(overrides);
        r.alias(
            "kombu_missing_consumer_retry_timeout",
            "oslo_messaging_rabbit",
            "kombu_reconnect_timeout",
        );
        let ssl = r.bool("ssl", false);
        let ssl_version = r.string("ssl_version", "");
        if ssl && !ssl_version.is_empty() {
            if let Err(reason) = check_choice(&ssl_version, SSL_VERSIONS, true) {
                r.reject("ssl_version", reason);
            }
        }
        let one = Some(1);
        let zero = Some(0);
        let s = RabbitSection {
            amqp_durable_queues: r.bool("amqp_durable_queues", false),
            amqp_auto_delete: r.bool("amqp_auto_delete", false),
            rpc_conn_pool_size: r.int("rpc_conn_pool_size", 30, one, None),
            conn_pool_min_size: r.int("conn_pool_min_size", 2, zero, None),
            conn_pool_ttl: r.int("conn_pool_ttl", 1200, zero, None),
            ssl,
            ssl_version,
            ssl_key_file: r.string("ssl_key_file", ""),
            ssl_cert_file: r.string("ssl_cert_file", ""),
            ssl_ca_file: r.string("ssl_ca_file", ""),
            ssl_enforce_hostname_verification: r.bool("ssl_enforce_hostname_verification", true),
            ssl_enforce_fips_mode: r.bool("ssl_enforce_fips_mode", false),
            kombu_reconnect_delay: r.float("kombu_reconnect_delay", 1.0, Some(0.0), Some(4.5)),
            kombu_reconnect_splay: r.float("kombu_reconnect_splay", 0.0, Some(0.0), None),
            kombu_compression: r.opt_string("kombu_compression"),
            kombu_missing_consumer_retry_timeout: r.int(
                "kombu_missing_consumer_retry_timeout",
                60,
                zero,
                None,
            ),
            kombu_failover_strategy: r.choice(
                "kombu_failover_strategy",
                "round-robin",
                &["round-robin", "shuffle"],
                false,
            ),
            rabbit_login_method: r.choice(
                "rabbit_login_method",
                "AMQPLAIN",
                &["PLAIN", "AMQPLAIN", "EXTERNAL", "RABBIT-CR-DEMO"],
                false,
            ),
            rabbit_retry_interval: r.int("rabbit_retry_interval", 1, one, None),
            rabbit_retry_backoff: r.int("rabbit_retry_backoff", 2, zero, None),
            rabbit_interval_max: r.int("rabbit_interval_max", 30, one, None),
            rabbit_ha_queues: r.bool("rabbit_ha_queues", false),
            rabbit_quorum_queue: r.bool("rabbit_quorum_queue", false),
            rabbit_transient_quorum_queue: r.bool("rabbit_transient_quorum_queue", false),
            rabbit_quorum_delivery_limit: r.int("rabbit_quorum_delivery_limit", 0, None, None),
            rabbit_quorum_max_memory_length: r.int(
                "rabbit_quorum_max_memory_length",
                0,
                None,
                None,
            ),
            rabbit_quorum_max_memory_bytes: r.int("rabbit_quorum_max_memory_bytes", 0, None, None),
            rabbit_transient_queues_ttl: r.int("rabbit_transient_queues_ttl", 1800, zero, None),
            rabbit_qos_prefetch_count: r.int("rabbit_qos_prefetch_count", 0, zero, None),
            heartbeat_timeout_threshold: r.int("heartbeat_timeout_threshold", 60, zero, None),
            heartbeat_rate: r.int("heartbeat_rate", 3, one, None),
            direct_mandatory_flag: r.bool("direct_mandatory_flag", true),
            enable_cancel_on_failover: r.bool("enable_cancel_on_failover", false),
            use_queue_manager: r.bool("use_queue_manager", false),
            hostname: r
                .opt_string("hostname")
                .unwrap_or_else(super::sections::machine_hostname),
            processname: r.string("processname", "nova-scheduler"),
            rabbit_stream_fanout: r.bool("rabbit_stream_fanout", false),
        };
        errors.extend(s.cross_checks());
        s
    }

    /// The combinations the rabbit driver refuses at start (RuntimeError in Python).
    fn cross_checks(&self) -> Vec<ConfigError> {
        let invalid = |option: &str, reason: &str| ConfigError::Invalid {
            group: "oslo_messaging_rabbit".to_string(),
            option: option.to_string(),
            reason: reason.to_string(),
        };
        let mut errors = Vec::new();
        if self.rpc_conn_pool_size < self.conn_pool_min_size {
            errors.push(invalid(
                "conn_pool_min_size",
                "must not be greater than rpc_conn_pool_size",
            ));
        }
        if self.rabbit_quorum_queue && self.rabbit_ha_queues {
            errors.push(invalid(
                "rabbit_quorum_queue",
                "rabbit_quorum_queue and rabbit_ha_queues are mutually exclusive",
            ));
        }
        if self.rabbit_stream_fanout && self.rabbit_qos_prefetch_count == 0 {
            errors.push(invalid(
                "rabbit_stream_fanout",
                "needs rabbit_qos_prefetch_count to be set to a value greater than 0",
            ));
        }
        if self.rabbit_stream_fanout && !self.rabbit_transient_quorum_queue {
            errors.push(invalid(
                "rabbit_stream_fanout",
                "needs rabbit_transient_quorum_queue to be set to true",
            ));
        }
        errors
    }

    /// Options set in `[oslo_messaging_rabbit]` that oslo.messaging 18.1.0 does not have
    /// (removed ones such as `heartbeat_in_pthread`, or misspellings): accepted, not used.
    pub fn unknown_options(raw: &RawConfig) -> Vec<String> {
        raw.keys("oslo_messaging_rabbit")
            .into_iter()
            .filter(|k| !RABBIT_OPTIONS.contains(&k.as_str()))
            .filter(|k| !RABBIT_DEPRECATED.contains(&k.as_str()))
            .collect()
    }
}

/// `[oslo_messaging_notifications]`.
#[derive(Clone, Debug, PartialEq)]
pub struct NotificationsSection {
    /// Notification drivers (multi-valued; empty = notifications off).
    pub driver: Vec<String>,
    /// Broker URL for notifications (secret; unset = `[DEFAULT] transport_url`).
    pub transport_url: Option<Secret>,
    /// Topics notifications are sent to.
    pub topics: Vec<String>,
    /// Send retries (-1 = forever).
    pub retry: i64,
}

impl NotificationsSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let mut r = Reader::new(raw, "oslo_messaging_notifications", errors)
            .with_secrets(&["transport_url"]);
        NotificationsSection {
            driver: r.multi("driver", &[]),
            transport_url: r.opt_string("transport_url").map(Secret::new),
            topics: r.list("topics", &["notifications"]),
            retry: r.int("retry", -1, None, None),
        }
    }
}
