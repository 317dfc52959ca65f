// SPDX-License-Identifier: Apache-2.0
//! Options of the RPC server, owned by this module.
//!
//! The integrator maps nova.conf (`[DEFAULT]` and `[oslo_messaging_rabbit]`, plus the
//! query string of `transport_url`) onto [`RpcServerOptions`]. Every field names the
//! oslo.messaging option it mirrors. [`RpcServerOptions::validate`] rejects combinations
//! oslo.messaging rejects at driver load, and options this implementation cannot honour.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::RpcError;

/// One broker of `transport_url`, already parsed (as `TransportURL.parse` in
/// oslo.messaging's `oslo_messaging/transport.py` splits it).
#[derive(Clone, PartialEq, Eq)]
pub struct BrokerAddress {
    pub host: String,
    pub port: u16,
    pub username: String,
    pub password: String,
    /// `""` is treated as `/`, as kombu does.
    pub virtual_host: String,
}

impl BrokerAddress {
    /// `host:port`, for logs (never the credentials).
    pub fn endpoint(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl fmt::Debug for BrokerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerAddress")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &"***")
            .field("virtual_host", &self.virtual_host)
            .finish()
    }
}

/// `[oslo_messaging_rabbit] ssl_ca_file`, `ssl_cert_file`, `ssl_key_file` (`ssl = True`).
///
/// The TLS stack is lapin's rustls: the server certificate chain is checked against the
/// platform roots plus `ca_file`, and the host name is always verified (oslo.messaging
/// checks it only since 18.1.0). `ssl_version` is not supported (rustls negotiates TLS 1.2/1.3).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// PEM bundle of extra trusted CAs.
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate (chain); needs `key_file`.
    pub cert_file: Option<PathBuf>,
    /// PEM private key of `cert_file`.
    pub key_file: Option<PathBuf>,
}

/// Everything the RPC server needs, with oslo.messaging's option names in the docs.
#[derive(Clone, Debug)]
pub struct RpcServerOptions {
    /// `transport_url` hosts; shuffled once per connection, then tried in order.
    pub brokers: Vec<BrokerAddress>,
    /// `[DEFAULT] control_exchange` (nova: `nova`).
    pub control_exchange: String,
    /// RPC topic (`scheduler`).
    pub topic: String,
    /// `[DEFAULT] host`: the server queue is `<topic>.<server>`.
    pub server: String,
    /// `amqp_durable_queues || rabbit_quorum_queue`.
    pub durable_queues: bool,
    /// `amqp_auto_delete`.
    pub auto_delete: bool,
    /// `rabbit_quorum_queue`.
    pub quorum_queue: bool,
    /// `rabbit_transient_quorum_queue`.
    pub transient_quorum_queue: bool,
    /// `rabbit_transient_queues_ttl` in seconds (1800); 0 means no `x-expires`.
    pub transient_queues_ttl: u32,
    /// `rabbit_qos_prefetch_count`; 0 means no `basic.qos`.
    pub qos_prefetch_count: u16,
    /// `heartbeat_timeout_threshold` (60): the AMQP heartbeat proposed to the broker.
    pub heartbeat_timeout_threshold: u16,
    /// `rabbit_login_method`: `AMQPLAIN` (default), `PLAIN`, `EXTERNAL` or `RABBIT-CR-DEMO`.
    pub login_method: String,
    /// `rabbit_retry_interval` (1 s): first reconnect delay.
    pub retry_interval: f64,
    /// `rabbit_retry_backoff` (2 s): added to the delay after each failed round.
    pub retry_backoff: f64,
    /// `rabbit_interval_max` (30 s): delay cap.
    pub interval_max: f64,
    /// `kombu_missing_consumer_retry_timeout` (60 s): how long a reply to a missing queue is retried.
    pub missing_consumer_retry_timeout: u64,
    /// `kombu_compression`: `gzip`/`zlib` compress replies (zlib stream, header
    /// `compression: application/x-gzip`); unset sends plain JSON.
    pub compression: Option<String>,
    /// `ssl = True` with its files; `None` is plain TCP.
    pub ssl: Option<TlsOptions>,
    /// `executor_thread_pool_size` (64): deliveries handled at once.
    pub max_concurrent_calls: usize,
    /// `[DEFAULT] rpc_ping_enabled`: adds `oslo_rpc_server_ping` → `"pong"`.
    pub rpc_ping_enabled: bool,
    /// `rabbit_ha_queues`: adds `x-ha-policy: all` (exclusive with quorum queues).
    pub ha_queues: bool,
    /// `rabbit_quorum_delivery_limit` (0 = unset).
    pub quorum_delivery_limit: u32,
    /// `rabbit_quorum_max_memory_length` (0 = unset).
    pub quorum_max_memory_length: u32,
    /// `rabbit_quorum_max_memory_bytes` (0 = unset).
    pub quorum_max_memory_bytes: u32,
    /// `enable_cancel_on_failover`: consumer argument `x-cancel-on-ha-failover: true`.
    pub enable_cancel_on_failover: bool,
    /// `[nova_scheduler_rs] max_message_bytes`: a larger message (before or after
    /// decompression) is answered with a failure, unparsed.
    pub max_message_bytes: u64,
    /// The caller's timeout when a call carries no AMQP `expiration` (nova's
    /// `[DEFAULT] long_rpc_timeout`, what nova-conductor waits on `select_destinations`).
    pub call_timeout: Duration,
    /// `[DEFAULT] graceful_shutdown_timeout`: how long a shutdown waits for the
    /// requests in flight; `None` waits without end.
    pub shutdown_grace: Option<Duration>,
    /// `[nova_scheduler_rs] state_dir`: where the requests in flight are recorded
    /// (`None`: not recorded, no poison-message guard).
    pub state_dir: Option<PathBuf>,
    /// `[nova_scheduler_rs] max_message_crashes`.
    pub max_message_crashes: u32,
}

impl Default for RpcServerOptions {
    /// oslo.messaging's defaults as nova runs them, on `rabbit://` (guest@127.0.0.1:5672, vhost `/`).
    fn default() -> Self {
        Self {
            brokers: vec![BrokerAddress {
                host: "127.0.0.1".into(),
                port: 5672,
                username: "guest".into(),
                password: "guest".into(),
                virtual_host: "/".into(),
            }],
            control_exchange: "nova".into(),
            topic: "scheduler".into(),
            server: default_host(),
            durable_queues: false,
            auto_delete: false,
            quorum_queue: false,
            transient_quorum_queue: false,
            transient_queues_ttl: 1800,
            qos_prefetch_count: 0,
            heartbeat_timeout_threshold: 60,
            login_method: "AMQPLAIN".into(),
            retry_interval: 1.0,
            retry_backoff: 2.0,
            interval_max: 30.0,
            missing_consumer_retry_timeout: 60,
            compression: None,
            ssl: None,
            max_concurrent_calls: 64,
            rpc_ping_enabled: false,
            ha_queues: false,
            quorum_delivery_limit: 0,
            quorum_max_memory_length: 0,
            quorum_max_memory_bytes: 0,
            enable_cancel_on_failover: false,
            max_message_bytes: super::envelope::DEFAULT_MAX_MESSAGE_BYTES,
            call_timeout: Duration::from_secs(1800),
            shutdown_grace: Some(Duration::from_secs(60)),
            state_dir: None,
            max_message_crashes: 2,
        }
    }
}

/// The kernel host name, like Python's `socket.gethostname()` (nova's default `host`).
fn default_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

impl RpcServerOptions {
    /// Check the options the way oslo.messaging does at driver load, plus what this
    /// implementation does not support.
    pub fn validate(&self) -> Result<(), RpcError> {
        let bad = |msg: String| Err(RpcError::Config(msg));
        if self.brokers.is_empty() {
            return bad("no broker in transport_url".into());
        }
        for (what, value) in [
            ("control_exchange", &self.control_exchange),
            ("topic", &self.topic),
            ("server (host)", &self.server),
        ] {
            if value.is_empty() {
                return bad(format!("{what} must not be empty"));
            }
        }
        // Longest derived name: "<topic>_fanout_<32 hex>" and "<topic>.<server>".
        if self.topic.len() + 8 + 32 > 255 || self.topic.len() + 1 + self.server.len() > 255 {
            return bad("topic/server too long for AMQP names (255 bytes)".into());
        }
        if self.control_exchange.len() > 255 {
            return bad("control_exchange too long (255 bytes)".into());
        }
        if self.ha_queues && (self.quorum_queue || self.transient_quorum_queue) {
            return bad("rabbit_ha_queues and quorum queues are mutually exclusive".into());
        }
        if self.quorum_queue && self.auto_delete {
            return bad("quorum queues cannot be auto_delete (amqp_auto_delete)".into());
        }
        if self.login_mechanism().is_none() {
            return bad(format!(
                "rabbit_login_method {:?} is not one of PLAIN, AMQPLAIN, EXTERNAL, RABBIT-CR-DEMO",
                self.login_method
            ));
        }
        // Written positively so that NaN is rejected too.
        let retry_ok = self.retry_interval > 0.0
            && self.retry_backoff >= 0.0
            && self.interval_max > 0.0
            && self.interval_max.is_finite();
        if !retry_ok {
            return bad("rabbit_retry_interval/_backoff/interval_max must be positive".into());
        }
        if self.max_concurrent_calls == 0 || self.max_concurrent_calls > (u32::MAX as usize) {
            return bad("executor_thread_pool_size must be at least 1".into());
        }
        self.compress_replies()?;
        Ok(())
    }

    /// The control exchange and topic queues are durable when either option asks for it.
    pub(crate) fn topic_durable(&self) -> bool {
        self.durable_queues || self.quorum_queue
    }

    /// Whether replies are zlib-compressed (`kombu_compression = gzip|zlib`).
    pub(crate) fn compress_replies(&self) -> Result<bool, RpcError> {
        match self.compression.as_deref().map(str::trim) {
            None | Some("") => Ok(false),
            Some(c) if c.eq_ignore_ascii_case("gzip") || c.eq_ignore_ascii_case("zlib") => Ok(true),
            Some(c) if c.eq_ignore_ascii_case("application/x-gzip") => Ok(true),
            Some(other) => Err(RpcError::Config(format!(
                "kombu_compression {other:?} is not supported (only gzip/zlib)"
            ))),
        }
    }

    pub(crate) fn login_mechanism(&self) -> Option<lapin::uri::SASLMechanism> {
        use lapin::uri::SASLMechanism;
        match self.login_method.to_ascii_uppercase().as_str() {
            "AMQPLAIN" => Some(SASLMechanism::AMQPlain),
            "PLAIN" => Some(SASLMechanism::Plain),
            "EXTERNAL" => Some(SASLMechanism::External),
            "RABBIT-CR-DEMO" => Some(SASLMechanism::RabbitCrDemo),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_masks_password() {
        let b = BrokerAddress {
            host: "rabbit1".into(),
            port: 5672,
            username: "nova".into(),
            password: "s3cr3t-pw".into(),
            virtual_host: "/".into(),
        };
        let dbg = format!("{b:?}");
        assert!(!dbg.contains("s3cr3t-pw"), "{dbg}");
        let opts = RpcServerOptions {
            brokers: vec![b],
            ..Default::default()
        };
        assert!(!format!("{opts:?}").contains("s3cr3t-pw"));
    }

    #[test]
    fn defaults_validate_and_bad_combinations_do_not() {
        RpcServerOptions::default().validate().unwrap();
        let ha_quorum = RpcServerOptions {
            ha_queues: true,
            quorum_queue: true,
            ..Default::default()
        };
        assert!(ha_quorum.validate().is_err());
        let bad_login = RpcServerOptions {
            login_method: "KERBEROS".into(),
            ..Default::default()
        };
        assert!(bad_login.validate().is_err());
        let bad_comp = RpcServerOptions {
            compression: Some("bz2".into()),
            ..Default::default()
        };
        assert!(bad_comp.validate().is_err());
        let gzip = RpcServerOptions {
            compression: Some("gzip".into()),
            ..Default::default()
        };
        assert!(gzip.compress_replies().unwrap());
    }
}
