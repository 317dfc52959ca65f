// SPDX-License-Identifier: Apache-2.0
//! nova's `nova/scheduler/filters/utils.py`: the aggregate helpers every aggregate
//! filter uses. The Python built-ins they rely on (`int()`, `float()`, `strip()`)
//! are [`crate::py`]'s.
//!
//! nova's helpers raise `ValueError` where Python does; here that is [`PyError`], so a
//! caller can do exactly what nova's caller does with it (most fall back to a default).

use crate::model::HostState;
use crate::py::{self, PyError};
use std::collections::{BTreeMap, BTreeSet};

// ---------------------------------------------------------------------------------
// nova/scheduler/filters/utils.py
// ---------------------------------------------------------------------------------

/// `aggregate_values_from_key(host_state, key)`: the set of **raw** metadata values of
/// `key` over the host's aggregates. No comma splitting: `'6,7'` is one value.
pub fn aggregate_values_from_key(host: &HostState, key: &str) -> BTreeSet<String> {
    host.aggregates
        .iter()
        .filter_map(|a| a.metadata.get(key).cloned())
        .collect()
}

/// `aggregate_metadata_get_by_host(host_state, key=None)`: key → set of values over
/// the host's aggregates (with `key` given, only the aggregates holding that key, but
/// then **all** their metadata). Every value is split on `,` and each part stripped
/// of Python whitespace: `'8, 9'` → `{'8', '9'}`, `'a,'` → `{'a', ''}`.
/// No aggregates → empty map.
pub fn aggregate_metadata_get_by_host(
    host: &HostState,
    key: Option<&str>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for aggr in &host.aggregates {
        if key.is_some_and(|k| !aggr.metadata.contains_key(k)) {
            continue;
        }
        for (k, v) in &aggr.metadata {
            out.entry(k.clone())
                .or_default()
                .extend(v.split(',').map(|x| py::str::strip(x).to_string()));
        }
    }
    out
}

/// `based_on` of `validate_num_values`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BasedOn {
    Min,
    Max,
}

/// `validate_num_values(vals, default, cast_to, based_on)`: no values → `default`;
/// otherwise **every** value is cast (`cast_to` is [`py::int::int_saturating`] or
/// [`py::float::float`]) and
/// the min (or max) returned. One value that does not parse is an error for the whole
/// set: nova's callers catch the `ValueError` and use their configured default
/// ([`validate_num_values_or_default`] does that).
///
/// Values are visited in sorted order (nova walks a Python set, in hash order); that
/// only matters for NaN, which Python's `min` keeps or drops depending on position.
pub fn validate_num_values<T: PartialOrd + Copy>(
    vals: &BTreeSet<String>,
    default: T,
    cast_to: fn(&str) -> Result<T, PyError>,
    based_on: BasedOn,
) -> Result<T, PyError> {
    if vals.is_empty() {
        return Ok(default);
    }
    if vals.len() > 1 {
        tracing::info!(
            "{} values found, of which the {} value will be used.",
            vals.len(),
            if based_on == BasedOn::Min {
                "minimum"
            } else {
                "maximum"
            }
        );
    }
    let mut best: Option<T> = None;
    // Python casts the whole list first (the first bad value raises), then min()s it.
    let cast: Vec<T> = vals.iter().map(|v| cast_to(v)).collect::<Result<_, _>>()?;
    for v in cast {
        best = Some(match best {
            None => v,
            // Python's min/max replace the current best only on a strict comparison.
            Some(b) if based_on == BasedOn::Min && v < b => v,
            Some(b) if based_on == BasedOn::Max && v > b => v,
            Some(b) => b,
        });
    }
    Ok(best.unwrap_or(default))
}

/// What nova's aggregate filters do around `validate_num_values`: a value that does
/// not parse logs a warning and the configured default is used for the whole set.
pub fn validate_num_values_or_default<T: PartialOrd + Copy>(
    vals: &BTreeSet<String>,
    default: T,
    cast_to: fn(&str) -> Result<T, PyError>,
    based_on: BasedOn,
    what: &str,
) -> T {
    validate_num_values(vals, default, cast_to, based_on).unwrap_or_else(|e| {
        tracing::warn!("Could not decode {what}: '{}'", e.message);
        default
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Aggregate;
    use crate::py::float::float as py_float;
    use crate::py::int::int_saturating as py_int;
    use crate::py::PyExc;
    use std::sync::Arc;

    fn host_with(aggs: &[&[(&str, &str)]]) -> HostState {
        HostState {
            aggregates: aggs
                .iter()
                .enumerate()
                .map(|(i, md)| {
                    Arc::new(Aggregate {
                        id: i as i64 + 1,
                        metadata: md
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                        ..Default::default()
                    })
                })
                .collect(),
            ..Default::default()
        }
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// nova's test_utils.py: aggregates k1 '1'/'3'/'6,7', k2 '2'/'4'/'8, 9'.
    #[test]
    fn nova_vectors_aggregate_helpers() {
        let host = host_with(&[
            &[("k1", "1"), ("k2", "2")],
            &[("k1", "3"), ("k2", "4")],
            &[("k1", "6,7"), ("k2", "8, 9")],
        ]);
        assert_eq!(
            aggregate_values_from_key(&host, "k1"),
            set(&["1", "3", "6,7"])
        );
        assert!(aggregate_values_from_key(&host, "k3").is_empty());
        let md = aggregate_metadata_get_by_host(&host, None);
        assert_eq!(md["k1"], set(&["1", "3", "6", "7"]));
        assert_eq!(md["k2"], set(&["2", "4", "8", "9"]));
        assert!(aggregate_metadata_get_by_host(&HostState::default(), None).is_empty());
    }

    #[test]
    fn metadata_by_key_keeps_every_key_of_matching_aggregates() {
        let host = host_with(&[&[("a", "x, y,"), ("b", "1")], &[("b", "2")]]);
        let md = aggregate_metadata_get_by_host(&host, Some("a"));
        assert_eq!(md["a"], set(&["x", "y", ""]));
        assert_eq!(md["b"], set(&["1"]), "only aggregates holding 'a' count");
        assert!(aggregate_metadata_get_by_host(&host, Some("zz")).is_empty());
    }

    #[test]
    fn nova_vectors_validate_num_values() {
        assert_eq!(
            validate_num_values(&set(&[]), 7, py_int, BasedOn::Min),
            Ok(7)
        );
        assert_eq!(
            validate_num_values(&set(&["1"]), 0, py_int, BasedOn::Min),
            Ok(1)
        );
        assert_eq!(
            validate_num_values(&set(&["1"]), 0.0, py_float, BasedOn::Min),
            Ok(1.0)
        );
        assert_eq!(
            validate_num_values(&set(&["10", "9"]), 0, py_int, BasedOn::Min),
            Ok(9)
        );
        assert_eq!(
            validate_num_values(&set(&["1", "2"]), 0, py_int, BasedOn::Max),
            Ok(2)
        );
        let bad = validate_num_values(&set(&["3", "XXX"]), 8, py_int, BasedOn::Min);
        assert_eq!(bad.unwrap_err().kind, PyExc::ValueError);
        assert_eq!(
            validate_num_values_or_default(&set(&["3", "XXX"]), 8, py_int, BasedOn::Min, "x"),
            8
        );
    }
}
