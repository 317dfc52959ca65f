// SPDX-License-Identifier: Apache-2.0
//! `MetricsFilter`: hosts must report every metric named in `[metrics]
//! weight_setting`, so that the MetricsWeigher can weigh them.

use super::{FilterRequest, HostFilter};
use crate::model::HostState;
use crate::py;
use serde_json::Value;
use std::collections::BTreeSet;
use tracing::{debug, warn};

pub struct MetricsFilter {
    /// Metric names of the valid `weight_setting` entries.
    keys: BTreeSet<String>,
}

impl MetricsFilter {
    pub const NAME: &'static str = "MetricsFilter";

    /// nova's `MetricsFilter.__init__`: `parse_options(weight_setting, '=', float)`.
    pub fn new(weight_setting: &[String]) -> Self {
        let keys = parse_options(weight_setting, '=', "metrics.weight_setting", |v| {
            py::float::float(v).ok()
        })
        .into_iter()
        .map(|(k, _)| k)
        .collect();
        MetricsFilter { keys }
    }

    /// The metric names this filter requires.
    pub fn keys(&self) -> &BTreeSet<String> {
        &self.keys
    }
}

/// nova's `scheduler.utils.parse_options(opts, sep, converter, name)`: each entry is
/// partitioned on the first `sep`; it is kept when the key is non-empty, the
/// separator present and the converter succeeds. The key is not stripped
/// (`'kernel = 2'` gives `'kernel '`). Rejected entries are named in one warning.
pub fn parse_options<T>(
    opts: &[String],
    sep: char,
    name: &str,
    converter: impl Fn(&str) -> Option<T>,
) -> Vec<(String, T)> {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for opt in opts {
        match opt.split_once(sep) {
            Some((key, value)) if !key.is_empty() => match converter(value) {
                Some(v) => good.push((key.to_string(), v)),
                None => bad.push(opt.as_str()),
            },
            _ => bad.push(opt.as_str()),
        }
    }
    if !bad.is_empty() {
        warn!(
            "Ignoring the invalid elements of the option {name}: {}",
            bad.join(", ")
        );
    }
    good
}

/// Names of the host's metrics (`MonitorMetricList` from `compute_nodes.metrics`;
/// nova reads an empty column as an empty list).
fn metric_names(metrics: Option<&Value>) -> BTreeSet<&str> {
    match metrics {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|m| m.get("name").and_then(Value::as_str))
            .collect(),
        _ => BTreeSet::new(),
    }
}

impl HostFilter for MetricsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, _req: &FilterRequest<'_>) -> bool {
        if self.keys.is_empty() {
            return true;
        }
        let on_host = metric_names(host.metrics.as_deref());
        if self.keys.iter().all(|k| on_host.contains(k.as_str())) {
            return true;
        }
        // nova's message lists `metrics_on_host - keys` (sic), not the missing ones.
        let unavail: Vec<&str> = on_host
            .iter()
            .copied()
            .filter(|m| !self.keys.contains(*m))
            .collect();
        debug!(host = %host.host, node = %host.nodename,
               "{} does not have the following metrics: {}", host.host, unavail.join(", "));
        false
    }
    // Runs for every instance; not on rebuild.
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RequestSpec;
    use chrono::Utc;
    use serde_json::json;

    fn passes(setting: &[&str], metrics: Option<Value>) -> bool {
        let filter = MetricsFilter::new(&setting.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let spec = RequestSpec::default();
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let host = HostState {
            metrics: metrics.map(std::sync::Arc::new),
            ..Default::default()
        };
        filter.host_passes(&host, &req)
    }

    fn metrics(names: &[&str]) -> Option<Value> {
        Some(Value::Array(
            names
                .iter()
                .map(|n| json!({"name": n, "value": 1, "source": "libvirt.LibvirtDriver", "timestamp": "2026-01-01T00:00:00Z"}))
                .collect(),
        ))
    }

    /// nova's test_metrics_filters.
    #[test]
    fn nova_vectors() {
        let both = metrics(&["cpu.frequency", "numa.membw.current"]);
        assert!(passes(&["cpu.frequency=1", "numa.membw.current=2"], both));
        assert!(!passes(&["foo=1", "bar=2"], metrics(&["cpu.frequency"])));
        let f = MetricsFilter::new(&[]);
        assert!(!f.once_per_request());
        assert!(!f.run_on_rebuild());
    }

    #[test]
    fn setting_parsing_and_empty_hosts() {
        // Empty setting: every host passes, even without metrics.
        assert!(passes(&[], None));
        // Invalid entries are dropped (no '=', empty key, bad float); the rest count.
        assert!(passes(
            &["cpu.frequency", "=1", "foo=x", "cpu.percent=1.5"],
            metrics(&["cpu.percent"])
        ));
        // The key is not stripped.
        assert!(!passes(&["cpu.percent =1"], metrics(&["cpu.percent"])));
        // A host without metrics fails a non-empty setting.
        assert!(!passes(&["cpu.percent=1"], None));
        assert!(!passes(&["cpu.percent=1"], Some(json!([]))));
        let f = MetricsFilter::new(&[
            "a=1".into(),
            "b= -2e3 ".into(),
            "c=inf".into(),
            "d=1=2".into(),
        ]);
        assert_eq!(
            f.keys().iter().map(String::as_str).collect::<Vec<_>>(),
            vec!["a", "b", "c"]
        );
    }
}
