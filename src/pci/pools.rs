// SPDX-License-Identifier: Apache-2.0
//! Device pools as nova's `PciDeviceStats.pools` holds them: one dict per pool
//! (`PciDevicePool.to_dict()`: the set fields plus the flattened tags), sorted by
//! number of keys, parsed once from the `compute_nodes.pci_stats` column.

use crate::py;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A pool dict value: `numa_node` is an integer (or None), everything else a string
/// (tags are `DictOfNullableStrings`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PciValue {
    Null,
    Int(i64),
    Str(String),
}

impl PciValue {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            PciValue::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// One pool: `count` plus every other key of nova's pool dict.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub count: i64,
    /// `vendor_id`, `product_id`, `numa_node` (when set) and the flattened tags
    /// (`dev_type`, `address`, `physical_network`, `remote_managed`, `rp_uuid`, ...).
    pub attrs: BTreeMap<String, PciValue>,
}

impl Pool {
    /// `pool.get(key)`; `None` when the key is absent.
    pub fn get(&self, key: &str) -> Option<&PciValue> {
        self.attrs.get(key)
    }

    /// `len(pool)` (the sort key nova orders pools by).
    pub fn len(&self) -> usize {
        self.attrs.len() + 1
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    /// `pool.get(key) == value` for a string value (Python `==`, case-sensitive).
    pub fn str_is(&self, key: &str, value: &str) -> bool {
        self.get(key).and_then(PciValue::as_str) == Some(value)
    }
}

/// A host's pools. `broken` says why nova would raise on any request against them
/// (a pool whose `count` is not an integer): such a host fails every PCI request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PciStats {
    pub pools: Vec<Pool>,
    pub broken: Option<String>,
}

impl PciStats {
    /// Pools from a list, sorted by key count (stable), as `PciDeviceStats.__init__`.
    pub fn new(mut pools: Vec<Pool>) -> Self {
        pools.sort_by_key(Pool::len);
        PciStats {
            pools,
            broken: None,
        }
    }

    /// nova's `from_pci_stats` + `PciDeviceStats(stats=...)`: the column holds a
    /// `PciDevicePoolList` primitive or, from before pools were objects, one pool dict
    /// or a list of them. No column, or a falsy value, means no pools.
    pub fn from_raw(raw: Option<&Value>) -> PciStats {
        let Some(raw) = raw else {
            return PciStats::default();
        };
        match parse_pools(raw) {
            Ok(pools) => PciStats::new(pools),
            Err(reason) => PciStats {
                pools: Vec::new(),
                broken: Some(reason),
            },
        }
    }

    /// `(numa_node, count)` of each pool in pool order, what `numa_fit_instance_to_host`
    /// sorts host cells by (a pool without a `numa_node` counts under None).
    pub fn numa_counts(&self) -> Vec<(Option<i64>, i64)> {
        self.pools
            .iter()
            .map(|p| {
                let node = match p.get("numa_node") {
                    Some(PciValue::Int(n)) => Some(*n),
                    _ => None,
                };
                (node, p.count)
            })
            .collect()
    }

    /// Σ pool counts (`PCIWeigher`'s free device count).
    pub fn free_devices(&self) -> i64 {
        self.pools.iter().map(|p| p.count).sum()
    }
}

fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

fn parse_pools(raw: &Value) -> Result<Vec<Pool>, String> {
    // A string column that did not decode as JSON reads as no pools in nova.
    if !truthy(raw) || raw.is_string() {
        return Ok(Vec::new());
    }
    match raw {
        Value::Object(o) if o.contains_key("nova_object.namespace") => {
            let data = o
                .get("nova_object.data")
                .and_then(Value::as_object)
                .ok_or("PciDevicePoolList without nova_object.data")?;
            let Some(objects) = data.get("objects") else {
                return Ok(Vec::new());
            };
            let objects = objects
                .as_array()
                .ok_or("PciDevicePoolList.objects is not a list")?;
            objects
                .iter()
                .map(|item| {
                    let fields = item
                        .get("nova_object.data")
                        .and_then(Value::as_object)
                        .ok_or("PciDevicePool without nova_object.data")?;
                    pool_from_fields(fields, false)
                })
                .collect()
        }
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.as_object()
                    .ok_or_else(|| "pool is not a dict".to_string())
                    .and_then(|d| pool_from_fields(d, true))
            })
            .collect(),
        Value::Object(o) => Ok(vec![pool_from_fields(o, true)?]),
        _ => Err("pci_stats is neither a list nor a dict".into()),
    }
}

/// `PciDevicePool` fields (primitive or legacy dict) → the pool dict `to_dict()` gives.
/// `legacy`: `from_dict` requires vendor/product/count and always sets `numa_node`;
/// every other key becomes a tag.
fn pool_from_fields(d: &Map<String, Value>, legacy: bool) -> Result<Pool, String> {
    let mut attrs = BTreeMap::new();
    let mut count = None;
    for key in ["vendor_id", "product_id"] {
        match d.get(key) {
            Some(v) => {
                attrs.insert(key.to_string(), PciValue::Str(coerce_string(v, key)?));
            }
            None if legacy => return Err(format!("pool without {key}")),
            None => {}
        }
    }
    match d.get("numa_node") {
        Some(Value::Null) => {
            attrs.insert("numa_node".into(), PciValue::Null);
        }
        Some(v) => {
            attrs.insert(
                "numa_node".into(),
                PciValue::Int(coerce_int(v, "numa_node")?),
            );
        }
        None if legacy => {
            attrs.insert("numa_node".into(), PciValue::Null);
        }
        None => {}
    }
    match d.get("count") {
        Some(v) => count = Some(coerce_int(v, "count")?),
        None if legacy => return Err("pool without count".into()),
        None => {}
    }
    let tag_value = |v: &Value, key: &str| -> Result<PciValue, String> {
        Ok(match v {
            Value::Null => PciValue::Null,
            other => PciValue::Str(coerce_string(other, key)?),
        })
    };
    if legacy {
        for (k, v) in d {
            if !matches!(
                k.as_str(),
                "vendor_id" | "product_id" | "numa_node" | "count"
            ) {
                attrs.insert(k.clone(), tag_value(v, k)?);
            }
        }
    } else if let Some(tags) = d.get("tags") {
        let tags = tags.as_object().ok_or("PciDevicePool.tags is not a dict")?;
        for (k, v) in tags {
            attrs.insert(k.clone(), tag_value(v, k)?);
        }
    }
    // A tag named `count` replaces the integer count with a string in nova's dict,
    // and summing counts then raises.
    if let Some(tag_count) = attrs.remove("count") {
        return Err(format!("pool count replaced by tag {tag_count:?}"));
    }
    let count = count.ok_or("pool without count")?;
    Ok(Pool { count, attrs })
}

/// oslo's `StringField` coercion of JSON scalars (`str(value)`).
fn coerce_string(v: &Value, key: &str) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(if *b { "True" } else { "False" }.into()),
        Value::Number(n) => Ok(match n.as_i64() {
            Some(i) => i.to_string(),
            None => match n.as_u64() {
                Some(u) => u.to_string(),
                None => py::float::repr(n.as_f64().unwrap_or(0.0)),
            },
        }),
        _ => Err(format!("{key}: not a string")),
    }
}

/// oslo's `IntegerField` coercion (`int(value)`).
fn coerce_int(v: &Value, key: &str) -> Result<i64, String> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.is_finite())
                    .map(|f| f.trunc() as i64)
            })
            .ok_or_else(|| format!("{key}: not an integer")),
        Value::Bool(b) => Ok(i64::from(*b)),
        Value::String(s) => s
            .trim()
            .parse::<i64>()
            .map_err(|_| format!("{key}: not an integer: {s:?}")),
        _ => Err(format!("{key}: not an integer")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn primitive_pools_are_flattened_and_sorted_by_key_count() {
        let raw = json!({"nova_object.name": "PciDevicePoolList", "nova_object.namespace": "nova",
            "nova_object.version": "1.1", "nova_object.data": {"objects": [
            {"nova_object.name": "PciDevicePool", "nova_object.namespace": "nova", "nova_object.version": "1.1",
             "nova_object.data": {"product_id": "1520", "vendor_id": "8086", "numa_node": 1, "count": 4,
               "tags": {"dev_type": "type-VF", "physical_network": "net1", "address": "0000:81:00.0"}}},
            {"nova_object.name": "PciDevicePool", "nova_object.namespace": "nova", "nova_object.version": "1.1",
             "nova_object.data": {"product_id": "0443", "vendor_id": "8086", "numa_node": null, "count": 2,
               "tags": {"dev_type": "type-PCI"}}}]}});
        let stats = PciStats::from_raw(Some(&raw));
        assert!(stats.broken.is_none());
        assert_eq!(stats.pools.len(), 2);
        assert_eq!(stats.pools[0].count, 2);
        assert_eq!(stats.pools[0].get("numa_node"), Some(&PciValue::Null));
        assert_eq!(stats.pools[1].get("numa_node"), Some(&PciValue::Int(1)));
        assert!(stats.pools[1].str_is("physical_network", "net1"));
        assert_eq!(stats.free_devices(), 6);
    }

    #[test]
    fn legacy_dicts_and_falsy_columns() {
        let stats = PciStats::from_raw(Some(
            &json!([{"vendor_id": "8086", "product_id": "1", "count": "3", "extra": 5}]),
        ));
        assert_eq!(stats.pools[0].count, 3);
        assert_eq!(
            stats.pools[0].get("extra"),
            Some(&PciValue::Str("5".into()))
        );
        assert_eq!(stats.pools[0].get("numa_node"), Some(&PciValue::Null));
        for falsy in [json!(null), json!([]), json!({}), json!("")] {
            assert_eq!(PciStats::from_raw(Some(&falsy)), PciStats::default());
        }
        assert!(PciStats::from_raw(Some(&json!([{"vendor_id": "8086"}])))
            .broken
            .is_some());
    }
}
