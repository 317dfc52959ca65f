// SPDX-License-Identifier: Apache-2.0
//! `[nova_scheduler_rs]`: options of this daemon that nova has no equivalent for.
//! nova-scheduler reads every cell database on each request; we keep host states warm
//! and refresh them incrementally, so the operator chooses how stale they may get.

use super::error::ConfigError;
use super::ini::RawConfig;
use super::reader::Reader;
use crate::release::ReleaseChoice;

/// The group name in nova.conf. nova's own services ignore unknown groups.
pub const GROUP: &str = "nova_scheduler_rs";

#[derive(Clone, Debug, PartialEq)]
pub struct HostStateCacheSection {
    /// Seconds between incremental refreshes of the cached host states (rows whose
    /// `created_at`/`updated_at`/`deleted_at` moved). 0 turns the cache off: every
    /// request then reads the cell databases, as nova does.
    pub host_state_refresh_interval: f64,
    /// Seconds between the incremental reads of soft-deleted instances (`deleted_at`
    /// moved). nova indexes no such column, so each read scans the `instances` table of
    /// every cell; instances updated or created are read at every refresh through
    /// nova's indexes. nova's own delete moves `updated_at` just before, and the
    /// compute casts the deletion to the scheduler, so this read is the fallback.
    pub deleted_instances_scan_interval: f64,
    /// Seconds between full re-reads of every cell (catches what an incremental pass
    /// cannot see, e.g. rows deleted outright by an operator) and of the aggregates.
    pub host_state_full_resync_interval: f64,
    /// Keep the virtual consumption of our own decisions on the cached host until its
    /// compute node row is written after the decision (nova's `HostState.updated`
    /// rule), so back-to-back requests do not pile onto one host.
    pub retain_virtual_consumption: bool,
    /// Seconds after which a retained consumption is dropped even if the compute node
    /// row never moved (a build that failed before the compute claimed anything).
    pub retained_consumption_ttl: f64,
    /// Seconds between incremental refreshes of the Placement provider index (used
    /// only with `[placement_database] connection`).
    pub placement_index_refresh_interval: f64,
    /// With the warm cache: decide over its table of host states, finding the best
    /// hosts in an index of their weights instead of weighing every candidate (the
    /// same decisions). False weighs a copy of every candidate's state per request.
    pub indexed_decision: bool,
    /// Asking Placement for the candidates: read each instance's current
    /// allocations (the `GET` of nova's claim) at the same time, so the claim after
    /// the decision sends only its `PUT`. False reads them at claim time, as nova.
    pub read_allocations_ahead: bool,
    /// `HOST:PORT` of the HTTP listener serving `/metrics`, `/healthz` and `/readyz`;
    /// unset (the default) serves none.
    pub http_listen: Option<std::net::SocketAddr>,
    /// Recent decisions kept for `explain` (what each call asked and got; a
    /// NoValidHost with its per-filter account). 0 keeps none.
    pub decision_ring_size: u32,
    /// The file every `select_destinations` call and this daemon's answer are
    /// recorded to (`crate::recording`); `None` (empty, the default) records nothing.
    pub record_calls: Option<std::path::PathBuf>,
    /// Compressed bytes of the recording before it is rotated.
    pub record_max_bytes: u64,
    /// Rotated recordings kept beside the live one.
    pub record_keep: u32,
    /// The nova release the cloud is scheduled as (`auto`: its control plane's).
    pub nova_release: ReleaseChoice,
    /// The Python interpreter (a virtualenv's `bin/python`) whose packages hold nova
    /// and the operator's own filter classes; `None`: the one `nova-scheduler` on
    /// `PATH` runs with.
    pub python: Option<std::path::PathBuf>,
    /// WebAssembly filter and weigher modules (`.wasm`, or `.wat` text), each named
    /// by its file name without the extension.
    pub wasm_plugins: Vec<std::path::PathBuf>,
    /// What a Wasm plugin that traps, runs past its deadline or answers garbage
    /// does to the request.
    pub plugin_failure: PluginFailure,
    /// Milliseconds one Wasm plugin call may run.
    pub plugin_deadline_ms: f64,
    /// `NAME:MULTIPLIER` of each Wasm weigher (1.0 when not listed).
    pub plugin_weight_multipliers: Vec<(String, f64)>,
}

/// `[nova_scheduler_rs] plugin_failure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginFailure {
    /// The plugin is skipped for the call (a filter passes every host, a weigher
    /// weighs every host the same), with a warning and a metric.
    FailOpen,
    /// A filter rejects every host with the plugin's failure as the reason; a
    /// weigher fails the request (NoValidHost naming the plugin).
    FailClosed,
}

impl Default for HostStateCacheSection {
    fn default() -> Self {
        HostStateCacheSection {
            host_state_refresh_interval: 1.0,
            deleted_instances_scan_interval: 10.0,
            host_state_full_resync_interval: 300.0,
            retain_virtual_consumption: true,
            retained_consumption_ttl: 120.0,
            placement_index_refresh_interval: 1.0,
            indexed_decision: true,
            read_allocations_ahead: true,
            http_listen: None,
            decision_ring_size: 256,
            record_calls: None,
            record_max_bytes: 100 * 1024 * 1024,
            record_keep: 5,
            nova_release: ReleaseChoice::Auto,
            python: None,
            wasm_plugins: Vec::new(),
            plugin_failure: PluginFailure::FailClosed,
            plugin_deadline_ms: 3.0,
            plugin_weight_multipliers: Vec::new(),
        }
    }
}

impl HostStateCacheSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let d = HostStateCacheSection::default();
        let mut r = Reader::new(raw, GROUP, errors);
        HostStateCacheSection {
            host_state_refresh_interval: r.float(
                "host_state_refresh_interval",
                d.host_state_refresh_interval,
                Some(0.0),
                Some(3600.0),
            ),
            deleted_instances_scan_interval: r.float(
                "deleted_instances_scan_interval",
                d.deleted_instances_scan_interval,
                Some(0.0),
                Some(3600.0),
            ),
            host_state_full_resync_interval: r.float(
                "host_state_full_resync_interval",
                d.host_state_full_resync_interval,
                Some(1.0),
                None,
            ),
            retain_virtual_consumption: r
                .bool("retain_virtual_consumption", d.retain_virtual_consumption),
            retained_consumption_ttl: r.float(
                "retained_consumption_ttl",
                d.retained_consumption_ttl,
                Some(0.0),
                None,
            ),
            placement_index_refresh_interval: r.float(
                "placement_index_refresh_interval",
                d.placement_index_refresh_interval,
                Some(0.05),
                Some(3600.0),
            ),
            indexed_decision: r.bool("indexed_decision", d.indexed_decision),
            read_allocations_ahead: r.bool("read_allocations_ahead", d.read_allocations_ahead),
            http_listen: {
                let text = r.string("http_listen", "");
                parse_listen(&text).unwrap_or_else(|reason| {
                    r.reject("http_listen", reason);
                    d.http_listen
                })
            },
            decision_ring_size: r.int(
                "decision_ring_size",
                d.decision_ring_size,
                Some(0),
                Some(100_000),
            ),
            record_calls: Some(r.string("record_calls", ""))
                .filter(|p| !p.trim().is_empty())
                .map(std::path::PathBuf::from),
            record_max_bytes: r.int("record_max_bytes", d.record_max_bytes, Some(1), None),
            record_keep: r.int("record_keep", d.record_keep, Some(0), None),
            nova_release: {
                let choices = ReleaseChoice::choices();
                let text = r.choice("nova_release", "auto", &choices, true);
                ReleaseChoice::parse(&text).unwrap_or(d.nova_release)
            },
            python: Some(r.string("python", ""))
                .filter(|p| !p.trim().is_empty())
                .map(|p| std::path::PathBuf::from(p.trim())),
            wasm_plugins: r
                .list("wasm_plugins", &[])
                .into_iter()
                .filter(|p| !p.trim().is_empty())
                .map(|p| std::path::PathBuf::from(p.trim()))
                .collect(),
            plugin_failure: match r
                .choice(
                    "plugin_failure",
                    "fail_closed",
                    &["fail_open", "fail_closed"],
                    false,
                )
                .as_str()
            {
                "fail_open" => PluginFailure::FailOpen,
                _ => PluginFailure::FailClosed,
            },
            plugin_deadline_ms: r.float(
                "plugin_deadline_ms",
                d.plugin_deadline_ms,
                Some(0.1),
                Some(10_000.0),
            ),
            plugin_weight_multipliers: {
                let mut out = Vec::new();
                for item in r.list("plugin_weight_multipliers", &[]) {
                    let parsed = item
                        .split_once(':')
                        .and_then(|(n, m)| {
                            Some((n.trim().to_string(), m.trim().parse::<f64>().ok()?))
                        })
                        .filter(|(n, m)| !n.is_empty() && m.is_finite());
                    match parsed {
                        Some(pair) => out.push(pair),
                        None => r.reject(
                            "plugin_weight_multipliers",
                            format!(
                                "{item:?} is not NAME:MULTIPLIER (a plugin's name and a number)"
                            ),
                        ),
                    }
                }
                out
            },
        }
    }
}

/// `HOST:PORT` or `[V6]:PORT`; empty is off.
fn parse_listen(text: &str) -> Result<Option<std::net::SocketAddr>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .map_err(|_| "not an address and port such as 127.0.0.1:9101".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ini::RawConfig;

    fn read(text: &str) -> Result<HostStateCacheSection, Vec<ConfigError>> {
        let mut raw = RawConfig::new();
        raw.add_str("nova.conf", text).expect("ini");
        let mut errors = Vec::new();
        let section = HostStateCacheSection::read(&raw, &mut errors);
        if errors.is_empty() {
            Ok(section)
        } else {
            Err(errors)
        }
    }

    #[test]
    fn defaults_when_absent() {
        assert_eq!(
            read("[DEFAULT]\n").unwrap(),
            HostStateCacheSection::default()
        );
    }

    #[test]
    fn values_and_bounds() {
        let s = read(
            "[nova_scheduler_rs]\nhost_state_refresh_interval = 0\n\
             retain_virtual_consumption = false\nretained_consumption_ttl = 30\n",
        )
        .unwrap();
        assert_eq!(s.host_state_refresh_interval, 0.0);
        assert!(!s.retain_virtual_consumption);
        assert_eq!(s.retained_consumption_ttl, 30.0);
        assert!(read("[nova_scheduler_rs]\nhost_state_refresh_interval = -1\n").is_err());
        assert!(read("[nova_scheduler_rs]\nhost_state_full_resync_interval = 0\n").is_err());
    }

    #[test]
    fn http_listen_is_an_address_and_port_or_off() {
        assert_eq!(
            read("[nova_scheduler_rs]\nhttp_listen =\n")
                .unwrap()
                .http_listen,
            None
        );
        assert_eq!(
            read("[nova_scheduler_rs]\nhttp_listen = 127.0.0.1:9101\n")
                .unwrap()
                .http_listen,
            Some("127.0.0.1:9101".parse().unwrap())
        );
        assert!(read("[nova_scheduler_rs]\nhttp_listen = localhost\n").is_err());
    }

    #[test]
    fn record_calls_is_a_path_or_off() {
        let s =
            read("[nova_scheduler_rs]\nrecord_calls = /var/log/nova/calls.gz\nrecord_keep = 0\n")
                .unwrap();
        assert_eq!(
            s.record_calls.as_deref(),
            Some(std::path::Path::new("/var/log/nova/calls.gz"))
        );
        assert_eq!((s.record_max_bytes, s.record_keep), (104_857_600, 0));
        assert_eq!(
            read("[nova_scheduler_rs]\nrecord_calls =\n")
                .unwrap()
                .record_calls,
            None
        );
        assert!(read("[nova_scheduler_rs]\nrecord_max_bytes = 0\n").is_err());
        assert!(read("[nova_scheduler_rs]\nrecord_keep = -1\n").is_err());
    }
}
