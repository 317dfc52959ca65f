// SPDX-License-Identifier: Apache-2.0
//! `MetricsWeigher`: Σ metric value × ratio over `[metrics] weight_setting`.
//!
//! A missing metric either fails the whole request (`[metrics] required`, nova's
//! `ComputeHostMetricNotFound`) or, when not required, makes the host's raw weight
//! `weight_of_unavailable` at once, unless that entry could not matter
//! (`ratio × multiplier == 0`), in which case the entry is skipped.

use super::aggregate_multiplier::MultiplierSetting;
use super::{HostWeigher, RawDependence, WeighError};
use crate::filters::metrics_filter::parse_options;
use crate::model::{HostState, RequestSpec};
use crate::py;
use serde_json::Value;
use std::collections::BTreeMap;

/// Metrics nova stores ×100 as integers (`FIELDS_REQUIRING_CONVERSION`).
const PERCENT_METRICS: &[&str] = &[
    "cpu.user.percent",
    "cpu.kernel.percent",
    "cpu.idle.percent",
    "cpu.iowait.percent",
    "cpu.percent",
];

pub struct MetricsWeigher {
    /// Valid `name=ratio` entries of `[metrics] weight_setting`, in order, duplicates kept.
    setting: Vec<(String, f64)>,
    /// `[metrics] weight_multiplier` (1.0).
    multiplier: f64,
    /// `[metrics] required` (True).
    required: bool,
    /// `[metrics] weight_of_unavailable` (−10000.0).
    weight_of_unavailable: f64,
}

impl MetricsWeigher {
    pub const NAME: &'static str = "MetricsWeigher";

    pub fn new(
        weight_setting: &[String],
        multiplier: f64,
        required: bool,
        weight_of_unavailable: f64,
    ) -> Self {
        MetricsWeigher {
            setting: parse_options(weight_setting, '=', "metrics.weight_setting", |v| {
                py::float::float(v).ok()
            }),
            multiplier,
            required,
            weight_of_unavailable,
        }
    }

    /// True when every host weighs 0 (nothing to weigh).
    pub fn is_inert(&self) -> bool {
        self.setting.is_empty()
    }
}

/// The host's metrics by name as nova's `MonitorMetricList.from_json` holds them:
/// integer values (percent metrics ×100 first), truncated toward zero; a later
/// duplicate name wins. Entries without a numeric value are left out.
pub fn metric_values(metrics: Option<&Value>) -> BTreeMap<&str, f64> {
    let mut out = BTreeMap::new();
    let Some(Value::Array(items)) = metrics else {
        return out;
    };
    for m in items {
        let Some(name) = m.get("name").and_then(Value::as_str) else {
            continue;
        };
        let value = match m.get("value") {
            Some(Value::Number(n)) => match n.as_i64() {
                Some(i) if !PERCENT_METRICS.contains(&name) => i as f64,
                Some(i) => (i as f64 * 100.0).trunc(),
                None => match n.as_f64() {
                    Some(f) if PERCENT_METRICS.contains(&name) => (f * 100.0).trunc(),
                    Some(f) => f.trunc(),
                    None => continue,
                },
            },
            Some(Value::Bool(b)) => {
                let v = f64::from(u8::from(*b));
                if PERCENT_METRICS.contains(&name) {
                    v * 100.0
                } else {
                    v
                }
            }
            _ => continue,
        };
        out.insert(name, value);
    }
    out
}

impl HostWeigher for MetricsWeigher {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn stable_within_request(&self) -> bool {
        true
    }

    /// Reads the host's state only.
    fn raw_dependence(&self, _spec: &RequestSpec) -> RawDependence {
        RawDependence::Host
    }

    fn weigh(&self, host: &HostState, _spec: &RequestSpec) -> Result<f64, WeighError> {
        if self.setting.is_empty() {
            return Ok(0.0); // nova's loop adds nothing; skip reading the metrics
        }
        let metrics = metric_values(host.metrics.as_deref());
        let mut value = 0.0;
        for (name, ratio) in &self.setting {
            match metrics.get(name.as_str()) {
                Some(v) => value += v * ratio,
                None if self.required => {
                    return Err(WeighError {
                        class: "ComputeHostMetricNotFound",
                        message: format!(
                            "Metric {name} could not be found on the compute host node {}.{}.",
                            host.host, host.nodename
                        ),
                    })
                }
                None => {
                    if ratio * self.multiplier(host) != 0.0 {
                        return Ok(self.weight_of_unavailable);
                    }
                }
            }
        }
        Ok(value)
    }

    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("metrics_weight_multiplier", self.multiplier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::weighers::WeigherPipeline;
    use serde_json::json;

    /// nova's test_weights_metrics hosts: (idle, kernel, user) per host; host5/6 have `user`.
    fn hosts() -> Vec<HostState> {
        let rows: [(&str, i64, i64, Option<i64>); 6] = [
            ("host1", 512, 1, None),
            ("host2", 1024, 2, None),
            ("host3", 3072, 1, None),
            ("host4", 8192, 0, None),
            ("host5", 768, 0, Some(1)),
            ("host6", 2048, 0, Some(2)),
        ];
        rows.iter()
            .map(|(name, idle, kernel, user)| {
                let mut m = vec![
                    json!({"name": "idle", "value": idle}),
                    json!({"name": "kernel", "value": kernel}),
                ];
                if let Some(u) = user {
                    m.push(json!({"name": "user", "value": u}));
                }
                HostState {
                    host: (*name).into(),
                    nodename: (*name).into(),
                    metrics: Some(std::sync::Arc::new(Value::Array(m))),
                    ..Default::default()
                }
            })
            .collect()
    }

    fn best(setting: &[&str], required: bool) -> Result<(String, f64), WeighError> {
        let setting: Vec<String> = setting.iter().map(|s| s.to_string()).collect();
        let p = WeigherPipeline::new(vec![Box::new(MetricsWeigher::new(
            &setting, 1.0, required, -10000.0,
        ))]);
        let hosts = hosts();
        let all: Vec<usize> = (0..hosts.len()).collect();
        let w = p.weigh(&hosts, &all, &RequestSpec::default())?;
        Ok((hosts[w[0].index].host.to_string(), w[0].weight))
    }

    #[test]
    fn nova_vectors() {
        assert_eq!(best(&["idle=1"], true), Ok(("host4".into(), 1.0)));
        assert_eq!(
            best(&["idle=0.0001", "kernel=1"], true),
            Ok(("host2".into(), 1.0))
        );
        assert_eq!(
            best(&["idle=-2", "idle=1"], true).map(|b| b.0),
            Ok("host1".into())
        );
        assert_eq!(best(&["idle=-1"], true).map(|b| b.0), Ok("host1".into()));
        assert_eq!(
            best(&["kernel", "idle=1"], true).map(|b| b.0),
            Ok("host4".into())
        );
        assert_eq!(
            best(&["kernel = 2.0t", "idle=1"], true).map(|b| b.0),
            Ok("host4".into())
        );
        assert_eq!(
            best(&["idle=1", "user=2"], true).map_err(|e| e.class),
            Err("ComputeHostMetricNotFound")
        );
        assert_eq!(
            best(&["idle=0.0001", "user=-1"], false),
            Ok(("host5".into(), 1.0))
        );
    }

    #[test]
    fn missing_metric_with_zero_ratio_is_skipped_and_percent_scaled() {
        let w = MetricsWeigher::new(&["idle=0".into(), "kernel=1".into()], 1.0, false, -10000.0);
        let host = HostState {
            metrics: Some(std::sync::Arc::new(json!([{"name": "kernel", "value": 3}]))),
            ..Default::default()
        };
        assert_eq!(w.weigh(&host, &RequestSpec::default()), Ok(3.0));
        let host = HostState {
            metrics: Some(std::sync::Arc::new(
                json!([{"name": "cpu.percent", "value": 0.29}]),
            )),
            ..Default::default()
        };
        // Python: int(0.29 * 100) == 28.
        assert_eq!(
            metric_values(host.metrics.as_deref()).get("cpu.percent"),
            Some(&28.0)
        );
        assert!(MetricsWeigher::new(&[], 1.0, true, 0.0).is_inert());
    }
}
