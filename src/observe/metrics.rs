// SPDX-License-Identifier: Apache-2.0
//! The daemon's Prometheus metrics: one process-wide set, recorded where things
//! happen and encoded in the text exposition format by `/metrics`.
//!
//! A process-wide set, as `tracing`'s dispatcher is, because its recorders sit in
//! every layer (the RPC server, the manager, the Placement client, the caches);
//! passing a handle through each constructor would add a parameter to every one of
//! them for no gain. This module imports nothing from the crate, so every layer may
//! record into it without an arrow pointing back up.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::info::Info;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::{Metric, Registry};
use std::sync::atomic::AtomicU64;
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Every metric name starts with this.
pub const PREFIX: &str = "nova_scheduler";

/// How a `select_destinations` call ended.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum CallResult {
    /// Answered with Selections (or host lists).
    placed,
    /// Answered with nova's `NoValidHost`.
    no_valid_host,
    /// Any other failure answered to the caller.
    error,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CallLabels {
    pub result: CallResult,
    /// The call's `version` in the envelope (`4.5`, ...).
    pub version: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PhaseLabels {
    pub phase: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FilterLabels {
    pub filter: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginFailureLabels {
    pub plugin: &'static str,
    /// `deadline`, `trap` or `garbage`.
    pub cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PlacementLabels {
    pub method: String,
    /// The path with uuids and numbers replaced by `{uuid}`, `{id}`.
    pub path: String,
    /// The HTTP status, or `error` when no answer came.
    pub status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: String,
    pub path: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClaimLabels {
    /// `per_instance` or `batched`.
    pub mode: &'static str,
    /// `claimed`, `conflict` (Placement refused; another host or decision is tried)
    /// or `failed`.
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CandidateLabels {
    /// `index` (answered locally) or `placement`.
    pub source: &'static str,
    /// Why Placement was asked: `no_index` or the index's reason.
    pub reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShadowLabels {
    /// `agree`, `tie`, `differ` or `unknown`.
    pub result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
    commit: &'static str,
    nova: &'static str,
    rpc_api: &'static str,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Latency buckets: 0.5 ms to ~65 s.
fn latency() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 18))
}

/// Host-count buckets: 1 to 65,536.
fn host_counts() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 4.0, 9))
}

/// The metrics. Field docs are the help texts.
pub struct Metrics {
    pub calls: Family<CallLabels, Counter>,
    pub call_seconds: Histogram,
    pub phase_seconds: HistogramFamily<PhaseLabels>,
    pub filter_hosts_in: Family<FilterLabels, Counter>,
    pub filter_hosts_out: Family<FilterLabels, Counter>,
    pub plugin_failures: Family<PluginFailureLabels, Counter>,
    pub candidate_hosts: Histogram,
    pub placement_requests: Family<PlacementLabels, Counter>,
    pub placement_seconds: HistogramFamily<RouteLabels>,
    pub claims: Family<ClaimLabels, Counter>,
    pub candidates: Family<CandidateLabels, Counter>,
    pub cache_last_pass: Gauge<f64, AtomicU64>,
    pub cache_pass_seconds: Histogram,
    pub cache_rows_read: Counter,
    pub index_last_refresh: Gauge<f64, AtomicU64>,
    pub rpc_in_flight: Gauge,
    pub rpc_consuming: Gauge,
    pub redeliveries: Counter,
    pub poison_messages: Counter,
    pub reconnects: Counter,
    pub notifications_dropped: Counter,
    pub shadow_calls: Counter,
    pub shadow_instances: Family<ShadowLabels, Counter>,
    pub shadow_lag_seconds: Histogram,
    registry: Registry,
    /// Each family's exposed name and type.
    families: Vec<(String, MetricType)>,
}

/// The registry being filled, and what it was given: a family without samples is left
/// out of the exposition, so only the registration names every one.
struct Registering {
    registry: Registry,
    families: Vec<(String, MetricType)>,
}

impl Registering {
    fn register(&mut self, name: &str, help: &str, metric: impl Metric) {
        self.families
            .push((format!("{PREFIX}_{name}"), metric.metric_type()));
        self.registry.register(name, help, metric);
    }
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::new);

/// The process's metrics.
pub fn metrics() -> &'static Metrics {
    &METRICS
}

/// Seconds since the Unix epoch, for the `*_timestamp_seconds` gauges.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs_f64()
}

impl Metrics {
    fn new() -> Metrics {
        let m = Metrics {
            calls: Family::default(),
            call_seconds: latency(),
            phase_seconds: Family::new_with_constructor(latency),
            filter_hosts_in: Family::default(),
            filter_hosts_out: Family::default(),
            plugin_failures: Family::default(),
            candidate_hosts: host_counts(),
            placement_requests: Family::default(),
            placement_seconds: Family::new_with_constructor(latency),
            claims: Family::default(),
            candidates: Family::default(),
            cache_last_pass: Gauge::default(),
            cache_pass_seconds: latency(),
            cache_rows_read: Counter::default(),
            index_last_refresh: Gauge::default(),
            rpc_in_flight: Gauge::default(),
            rpc_consuming: Gauge::default(),
            redeliveries: Counter::default(),
            poison_messages: Counter::default(),
            reconnects: Counter::default(),
            notifications_dropped: Counter::default(),
            shadow_calls: Counter::default(),
            shadow_instances: Family::default(),
            shadow_lag_seconds: latency(),
            registry: Registry::with_prefix(PREFIX),
            families: Vec::new(),
        };
        let mut r = Registering {
            registry: Registry::with_prefix(PREFIX),
            families: Vec::new(),
        };
        r.register(
            "select_destinations",
            "select_destinations calls answered, by result and RPC version",
            m.calls.clone(),
        );
        r.register(
            "select_destinations_duration_seconds",
            "Time from decoding a select_destinations call to its encoded answer",
            m.call_seconds.clone(),
        );
        r.register(
            "select_destinations_phase_duration_seconds",
            "Time of each phase of a completed select_destinations call (decode, \
             request_filters, candidates, host_states, filter_weigh, claims, encode)",
            m.phase_seconds.clone(),
        );
        r.register(
            "filter_hosts_in",
            "Hosts handed to each filter (where the filter chain runs over the request's hosts)",
            m.filter_hosts_in.clone(),
        );
        r.register(
            "filter_hosts_out",
            "Hosts each filter let through",
            m.filter_hosts_out.clone(),
        );
        r.register(
            "plugin_failures",
            "Calls of a WebAssembly plugin that trapped, ran past plugin_deadline_ms or \
             answered garbage (plugin_failure then decided)",
            m.plugin_failures.clone(),
        );
        r.register(
            "candidate_hosts",
            "Candidate hosts per select_destinations call (Placement's or the index's answer)",
            m.candidate_hosts.clone(),
        );
        r.register(
            "placement_requests",
            "Requests to the Placement API by method, path template and status",
            m.placement_requests.clone(),
        );
        r.register(
            "placement_request_duration_seconds",
            "Placement API request latency by method and path template",
            m.placement_seconds.clone(),
        );
        r.register(
            "claims",
            "Allocation claims by mode (per_instance, batched) and result \
             (claimed, conflict, failed)",
            m.claims.clone(),
        );
        r.register(
            "allocation_candidates_questions",
            "Allocation-candidate questions by who answered (index, placement) and why \
             Placement was asked",
            m.candidates.clone(),
        );
        r.register(
            "host_state_cache_last_pass_timestamp_seconds",
            "When the host-state cache last finished a refresh pass (Unix time)",
            m.cache_last_pass.clone(),
        );
        r.register(
            "host_state_cache_pass_duration_seconds",
            "Duration of the host-state cache's refresh passes",
            m.cache_pass_seconds.clone(),
        );
        r.register(
            "host_state_cache_rows_read",
            "Rows the host-state cache read from the cell databases",
            m.cache_rows_read.clone(),
        );
        r.register(
            "placement_index_last_refresh_timestamp_seconds",
            "When the Placement provider index last refreshed (Unix time)",
            m.index_last_refresh.clone(),
        );
        r.register(
            "rpc_calls_in_flight",
            "RPC calls being handled",
            m.rpc_in_flight.clone(),
        );
        r.register(
            "rpc_consuming",
            "1 while the daemon consumes the scheduler topic, else 0",
            m.rpc_consuming.clone(),
        );
        r.register(
            "rpc_redeliveries",
            "Calls the broker delivered again (an earlier consumer did not acknowledge them)",
            m.redeliveries.clone(),
        );
        r.register(
            "rpc_poison_messages",
            "Calls answered with a failure instead of being handled, having been in flight \
             at max_message_crashes deaths of the daemon",
            m.poison_messages.clone(),
        );
        r.register(
            "rpc_reconnects",
            "Times the RPC listener lost its broker connection",
            m.reconnects.clone(),
        );
        r.register(
            "notifications_dropped",
            "Versioned notifications dropped (queue full or broker unreachable)",
            m.notifications_dropped.clone(),
        );
        r.register(
            "shadow_calls",
            "select_destinations calls the shadow decided (copies of the scheduler's calls)",
            m.shadow_calls.clone(),
        );
        r.register(
            "shadow_instances",
            "Instances the shadow compared with the answering scheduler's choice, by result",
            m.shadow_instances.clone(),
        );
        r.register(
            "shadow_lag_seconds",
            "Time from a copy's arrival to the shadow's decision",
            m.shadow_lag_seconds.clone(),
        );
        r.register(
            "build",
            "The daemon's version, git commit and the nova release it matches",
            Info::new(BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
                commit: option_env!("NSRS_GIT_COMMIT").unwrap_or("unknown"),
                nova: crate::NOVA_RELEASE,
                rpc_api: "4.0-4.5",
            }),
        );
        Metrics {
            registry: r.registry,
            families: r.families,
            ..m
        }
    }

    /// Every family registered, as the exposition's `# TYPE` line names it (prefix
    /// included, without the `_total`, `_bucket`, `_info`... of its samples), with its
    /// type (`counter`, `gauge`, `histogram`, `info`), whether it has samples yet or not.
    pub fn families(&self) -> Vec<(String, &'static str)> {
        self.families
            .iter()
            .map(|(name, kind)| {
                let kind = match kind {
                    MetricType::Counter => "counter",
                    MetricType::Gauge => "gauge",
                    MetricType::Histogram => "histogram",
                    MetricType::Info => "info",
                    MetricType::Unknown => "unknown",
                };
                (name.clone(), kind)
            })
            .collect()
    }

    /// The text exposition (OpenMetrics text, which Prometheus reads).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// One instance compared by the shadow.
    pub fn shadow_instance(&self, result: &'static str) {
        self.shadow_instances
            .get_or_create(&ShadowLabels { result })
            .inc();
    }

    /// One `select_destinations` call answered.
    pub fn call(&self, result: CallResult, version: &str, took: Duration) {
        self.calls
            .get_or_create(&CallLabels {
                result,
                version: version.to_string(),
            })
            .inc();
        self.call_seconds.observe(took.as_secs_f64());
    }

    pub fn phase(&self, phase: &'static str, took: Duration) {
        self.phase_seconds
            .get_or_create(&PhaseLabels { phase })
            .observe(took.as_secs_f64());
    }

    pub fn filter(&self, filter: &'static str, hosts_in: usize, hosts_out: usize) {
        let labels = FilterLabels { filter };
        self.filter_hosts_in
            .get_or_create(&labels)
            .inc_by(hosts_in as u64);
        self.filter_hosts_out
            .get_or_create(&labels)
            .inc_by(hosts_out as u64);
    }

    pub fn plugin_failure(&self, plugin: &'static str, cause: &'static str) {
        self.plugin_failures
            .get_or_create(&PluginFailureLabels { plugin, cause })
            .inc();
    }

    pub fn claim(&self, mode: &'static str, result: &'static str) {
        self.claims
            .get_or_create(&ClaimLabels { mode, result })
            .inc();
    }

    pub fn candidates_question(&self, source: &'static str, reason: &str) {
        self.candidates
            .get_or_create(&CandidateLabels {
                source,
                reason: reason.to_string(),
            })
            .inc();
    }

    /// One request to Placement; `status` is `None` when no answer came.
    pub fn placement_request(&self, method: &str, path: &str, status: Option<u16>, took: Duration) {
        let path = path_template(path);
        self.placement_requests
            .get_or_create(&PlacementLabels {
                method: method.to_string(),
                path: path.clone(),
                status: status.map_or_else(|| "error".to_string(), |s| s.to_string()),
            })
            .inc();
        self.placement_seconds
            .get_or_create(&RouteLabels {
                method: method.to_string(),
                path,
            })
            .observe(took.as_secs_f64());
    }
}

/// A Placement path as a template: the query dropped, uuids and numbers replaced, so
/// that a label takes a handful of values, never one per consumer.
pub fn path_template(path: &str) -> String {
    let path = path.split('?').next().unwrap_or_default();
    let mut out = String::with_capacity(path.len());
    for (i, segment) in path.split('/').enumerate() {
        if i > 0 {
            out.push('/');
        }
        if is_uuid(segment) {
            out.push_str("{uuid}");
        } else if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str("{id}");
        } else {
            out.push_str(segment);
        }
    }
    out
}

fn is_uuid(s: &str) -> bool {
    let hex = s.bytes().filter(u8::is_ascii_hexdigit).count();
    let dashes = s.bytes().filter(|&b| b == b'-').count();
    (s.len() == 36 && hex == 32 && dashes == 4) || (s.len() == 32 && hex == 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_paths_become_templates() {
        assert_eq!(
            path_template("/allocations/0b6a3c4e-6f0e-4d5c-9a38-6f8e7a1b2c3d"),
            "/allocations/{uuid}"
        );
        assert_eq!(
            path_template("/allocation_candidates?resources=VCPU:1"),
            "/allocation_candidates"
        );
        assert_eq!(
            path_template("/resource_providers/0b6a3c4e6f0e4d5c9a386f8e7a1b2c3d/inventories"),
            "/resource_providers/{uuid}/inventories"
        );
        assert_eq!(path_template("/aggregates/12"), "/aggregates/{id}");
        assert_eq!(path_template("/allocations"), "/allocations");
    }

    #[test]
    fn the_exposition_names_every_family_with_the_prefix() {
        let m = metrics();
        m.call(CallResult::placed, "4.5", Duration::from_millis(3));
        m.filter("ComputeFilter", 10, 6);
        let text = m.encode();
        assert!(
            text.contains(
                "nova_scheduler_select_destinations_total{result=\"placed\",version=\"4.5\"}"
            ),
            "{text}"
        );
        assert!(
            text.contains("nova_scheduler_filter_hosts_out_total{filter=\"ComputeFilter\"}"),
            "{text}"
        );
        assert!(text.contains("nova_scheduler_build_info{"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
        // Families with samples are encoded as families() names them.
        let families = m.families();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(families.contains(&(name.to_string(), kind)), "{line}");
            }
        }
        assert!(families.contains(&("nova_scheduler_claims".to_string(), "counter")));
    }
}
