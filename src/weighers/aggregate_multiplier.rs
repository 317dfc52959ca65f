// SPDX-License-Identifier: Apache-2.0
//! nova's `get_weight_multiplier`: an aggregate metadata key of the weigher's option
//! name overrides the config value; with several aggregates the minimum wins; one
//! unparsable value makes the whole set fall back to the config value.

use crate::model::HostState;
use std::collections::BTreeSet;
use tracing::warn;

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
        match parse_python_float(v) {
            Some(f) => min = min.min(f),
            None => {
                warn!(name = key, value = %v, "Could not decode '{key}' weight multiplier");
                return config_value;
            }
        }
    }
    min
}

/// Python's `float(str)`: surrounding whitespace, `_` between digits, `inf`/`nan`.
pub fn parse_python_float(s: &str) -> Option<f64> {
    let t = s.trim();
    if t.contains('_') {
        let bytes = t.as_bytes();
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'_' {
                let ok = i > 0
                    && i + 1 < bytes.len()
                    && bytes[i - 1].is_ascii_digit()
                    && bytes[i + 1].is_ascii_digit();
                if !ok {
                    return None;
                }
            }
        }
        return t.replace('_', "").parse().ok();
    }
    t.parse().ok()
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
