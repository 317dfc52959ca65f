// SPDX-License-Identifier: Apache-2.0
//! nova's `get_weight_multiplier`: an aggregate metadata key of the weigher's option
//! name overrides the config value; with several aggregates the minimum wins; one
//! unparsable value makes the whole set fall back to the config value.

use crate::model::HostState;
use std::collections::BTreeSet;
use tracing::warn;

/// Every multiplier key nova's weighers read ends with this; an aggregate with no
/// such key cannot override any weigher.
pub const MULTIPLIER_KEY_SUFFIX: &str = "_weight_multiplier";

/// A weigher's multiplier: the config value, the aggregate metadata key that
/// overrides it, and whether nova negates the result (BuildFailureWeigher).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MultiplierSetting {
    pub key: &'static str,
    pub config_value: f64,
    pub negate: bool,
}

impl MultiplierSetting {
    pub fn new(key: &'static str, config_value: f64) -> Self {
        MultiplierSetting {
            key,
            config_value,
            negate: false,
        }
    }

    pub fn negated(key: &'static str, config_value: f64) -> Self {
        MultiplierSetting {
            negate: true,
            ..MultiplierSetting::new(key, config_value)
        }
    }

    /// The multiplier of `host` (nova's `get_weight_multiplier`, signed).
    pub fn for_host(&self, host: &HostState) -> f64 {
        self.signed(weight_multiplier(host, self.key, self.config_value))
    }

    /// The multiplier of a host none of whose aggregates can override it.
    pub fn without_override(&self) -> f64 {
        self.signed(self.config_value)
    }

    fn signed(&self, value: f64) -> f64 {
        if self.negate {
            -value
        } else {
            value
        }
    }
}

/// Whether any of `host`'s aggregates carries a `*_weight_multiplier` key; when
/// none does, every weigher's multiplier is its config value. Checked once per host
/// and request instead of once per weigher.
pub fn may_override(host: &HostState) -> bool {
    host.aggregates.iter().any(|a| {
        a.metadata
            .keys()
            .any(|k| k.ends_with(MULTIPLIER_KEY_SUFFIX))
    })
}

pub fn weight_multiplier(host: &HostState, key: &str, config_value: f64) -> f64 {
    // aggregate_values_from_key: raw values, no comma splitting, as a set.
    let values: BTreeSet<&str> = host
        .aggregates
        .iter()
        .filter_map(|a| a.metadata.get(key))
        .map(String::as_str)
        .collect();
    if values.is_empty() {
        return config_value;
    }
    let mut min = f64::INFINITY;
    for v in &values {
        match crate::py::float::float(v) {
            Ok(f) => min = min.min(f),
            Err(_) => {
                warn!(name = key, value = %v, "Could not decode '{key}' weight multiplier");
                return config_value;
            }
        }
    }
    min
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Aggregate;
    use std::sync::Arc;

    fn host_with(values: &[&str]) -> HostState {
        let aggregates = values
            .iter()
            .map(|v| {
                Arc::new(Aggregate {
                    metadata: [("ram_weight_multiplier".to_string(), v.to_string())].into(),
                    ..Default::default()
                })
            })
            .collect();
        HostState {
            aggregates,
            ..Default::default()
        }
    }

    #[test]
    fn min_over_aggregates_and_fallback() {
        assert_eq!(
            weight_multiplier(&host_with(&[]), "ram_weight_multiplier", 1.0),
            1.0
        );
        assert_eq!(
            weight_multiplier(&host_with(&["2"]), "ram_weight_multiplier", 1.0),
            2.0
        );
        assert_eq!(
            weight_multiplier(&host_with(&["2", "1.5"]), "ram_weight_multiplier", 1.0),
            1.5
        );
        assert_eq!(
            weight_multiplier(&host_with(&["2", "x"]), "ram_weight_multiplier", 1.0),
            1.0
        );
        assert_eq!(
            weight_multiplier(&host_with(&[" -3 "]), "ram_weight_multiplier", 1.0),
            -3.0
        );
        assert_eq!(
            weight_multiplier(&host_with(&["1_000"]), "ram_weight_multiplier", 1.0),
            1000.0
        );
    }
}
