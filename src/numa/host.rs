// SPDX-License-Identifier: Apache-2.0
//! The host side: nova's `NUMATopology` / `NUMACell` / `NUMAPagesTopology` /
//! `NetworkMetadata`, decoded from the versioned-object JSON kept in
//! `compute_nodes.numa_topology`.
//!
//! Decoding follows `obj_from_primitive`: any 1.x version is read, unknown fields are
//! ignored, and fields an older version lacks stay unset. nova raises when code
//! reads an unset field without a default; we keep such fields as `Option` and the
//! algorithms report [`super::NumaError::FieldNotSet`] where nova would raise.
//! The pre-Liberty unversioned form (`{"cells": [{"cpus": "0-3", "mem": {...}}]}`)
//! is converted as `ComputeNode` does on load (`NUMATopology.from_legacy_object`).

use super::{NumaError, MAX_CELLS, MAX_CPUS_PER_SET, MAX_PAGE_SIZES};
use crate::py;
use crate::py::object::{self, IntCoerceError};
use crate::py::set::PySet;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// `NUMAPagesTopology`: one page size of a host cell.
#[derive(Debug, Clone, PartialEq)]
pub struct PagesTopology {
    pub size_kb: i64,
    pub total: i64,
    pub used: i64,
    /// Unset on 1.0 objects; nova's `free` treats that as 0.
    pub reserved: Option<i64>,
}

impl PagesTopology {
    pub fn free(&self) -> i64 {
        self.total - self.used - self.reserved.unwrap_or(0)
    }
    pub fn free_kb(&self) -> i64 {
        self.free().saturating_mul(self.size_kb)
    }
    pub fn total_kb(&self) -> i64 {
        self.total.saturating_mul(self.size_kb)
    }
}

/// `NetworkMetadata` (physnets with NUMA affinity, tunneled-network affinity).
/// Fields are optional as in nova (`'physnets' in nm`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NetworkMetadata {
    pub physnets: Option<BTreeSet<String>>,
    pub tunneled: Option<bool>,
}

impl NetworkMetadata {
    /// nova's truthiness of the object: an o.vo without `__len__` is always true.
    pub fn from_primitive(value: &Value) -> Result<Self, NumaError> {
        let data = data_of(value, "NetworkMetadata")?;
        let physnets = match data.get("physnets") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .take(MAX_CPUS_PER_SET)
                    .map(|v| match v {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .collect(),
            ),
            Some(_) => {
                return Err(NumaError::decode(
                    "NetworkMetadata.physnets: expected a list",
                ))
            }
        };
        let tunneled = match data.get("tunneled") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(_) => {
                return Err(NumaError::decode(
                    "NetworkMetadata.tunneled: expected a bool",
                ))
            }
        };
        Ok(NetworkMetadata { physnets, tunneled })
    }

    pub fn to_primitive(&self) -> Value {
        let mut data = Map::new();
        if let Some(p) = &self.physnets {
            data.insert(
                "physnets".into(),
                Value::Array(p.iter().map(|s| Value::String(s.clone())).collect()),
            );
        }
        if let Some(t) = self.tunneled {
            data.insert("tunneled".into(), Value::Bool(t));
        }
        object::envelope("NetworkMetadata", "1.0", data)
    }
}

/// `NUMACell` of the host.
#[derive(Debug, Clone, PartialEq)]
pub struct NumaCell {
    pub id: i64,
    /// Shared host CPUs.
    pub cpuset: PySet,
    /// Dedicated host CPUs; unset before NUMACell 1.4 and on legacy objects.
    pub pcpuset: Option<PySet>,
    pub memory: i64,
    pub cpu_usage: i64,
    pub memory_usage: i64,
    pub pinned_cpus: PySet,
    pub siblings: Vec<PySet>,
    pub mempages: Vec<PagesTopology>,
    pub network_metadata: Option<NetworkMetadata>,
    /// Unset before NUMACell 1.5; `Some(None)` is an explicit null.
    pub socket: Option<Option<i64>>,
}

impl NumaCell {
    pub fn pcpuset(&self) -> Result<&PySet, NumaError> {
        self.pcpuset
            .as_ref()
            .ok_or(NumaError::FieldNotSet("NUMACell.pcpuset"))
    }

    /// `free_pcpus`: `pcpuset - pinned_cpus or set()`.
    pub fn free_pcpus(&self) -> Result<PySet, NumaError> {
        let free = self.pcpuset()?.difference(&self.pinned_cpus);
        Ok(if free.is_empty() { PySet::new() } else { free })
    }

    /// `free_siblings`: each sibling set intersected with `free_pcpus` (recomputed
    /// per sibling set, as the property is).
    pub fn free_siblings(&self) -> Result<Vec<PySet>, NumaError> {
        self.siblings
            .iter()
            .map(|s| Ok(s.intersection(&self.free_pcpus()?)))
            .collect()
    }

    pub fn avail_pcpus(&self) -> Result<usize, NumaError> {
        Ok(self.free_pcpus()?.len())
    }

    pub fn avail_memory(&self) -> i64 {
        self.memory - self.memory_usage
    }

    pub fn has_threads(&self) -> bool {
        self.siblings.iter().any(|s| s.len() > 1)
    }

    /// `can_fit_pagesize`; `None` is nova's MemoryPageSizeNotSupported.
    pub fn can_fit_pagesize(&self, pagesize: i64, memory_kb: i64, use_free: bool) -> Option<bool> {
        let pages = self.mempages.iter().find(|p| p.size_kb == pagesize)?;
        let avail = if use_free {
            pages.free_kb()
        } else {
            pages.total_kb()
        };
        Some(memory_kb <= avail && py_mod(memory_kb, pages.size_kb) == 0)
    }

    fn from_primitive(value: &Value) -> Result<Self, NumaError> {
        let d = data_of(value, "NUMACell")?;
        Ok(NumaCell {
            id: req_int(d, "NUMACell", "id")?,
            cpuset: req_set(d, "NUMACell", "cpuset")?,
            pcpuset: opt_set(d, "NUMACell", "pcpuset")?,
            memory: req_int(d, "NUMACell", "memory")?,
            cpu_usage: req_int(d, "NUMACell", "cpu_usage")?,
            memory_usage: req_int(d, "NUMACell", "memory_usage")?,
            pinned_cpus: req_set(d, "NUMACell", "pinned_cpus")?,
            siblings: match d.get("siblings") {
                Some(Value::Array(items)) => {
                    if items.len() > MAX_CPUS_PER_SET {
                        return Err(NumaError::decode("NUMACell.siblings: too many sets"));
                    }
                    items
                        .iter()
                        .map(|v| set_of(v, "NUMACell.siblings"))
                        .collect::<Result<_, _>>()?
                }
                _ => return Err(NumaError::decode("NUMACell.siblings: expected a list")),
            },
            mempages: match d.get("mempages") {
                Some(Value::Array(items)) => {
                    if items.len() > MAX_PAGE_SIZES {
                        return Err(NumaError::decode("NUMACell.mempages: too many page sizes"));
                    }
                    items
                        .iter()
                        .map(pages_from_primitive)
                        .collect::<Result<_, _>>()?
                }
                _ => return Err(NumaError::decode("NUMACell.mempages: expected a list")),
            },
            network_metadata: match d.get("network_metadata") {
                None | Some(Value::Null) => None,
                Some(v) => Some(NetworkMetadata::from_primitive(v)?),
            },
            socket: match d.get("socket") {
                None => None,
                Some(Value::Null) => Some(None),
                Some(v) => Some(Some(int_of(v, "NUMACell.socket")?)),
            },
        })
    }
}

/// `NUMATopology` of a host.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NumaTopology {
    pub cells: Vec<NumaCell>,
}

impl NumaTopology {
    /// Decodes `compute_nodes.numa_topology` (already parsed JSON).
    pub fn from_primitive(value: &Value) -> Result<Self, NumaError> {
        let is_versioned = value
            .as_object()
            .is_some_and(|o| o.contains_key("nova_object.name"));
        if !is_versioned {
            return Self::from_legacy(value);
        }
        let d = data_of(value, "NUMATopology")?;
        let cells = match d.get("cells") {
            Some(Value::Array(items)) => items,
            _ => return Err(NumaError::decode("NUMATopology.cells: expected a list")),
        };
        if cells.len() > MAX_CELLS {
            return Err(NumaError::decode("NUMATopology: too many cells"));
        }
        Ok(NumaTopology {
            cells: cells
                .iter()
                .map(NumaCell::from_primitive)
                .collect::<Result<_, _>>()?,
        })
    }

    /// Decodes the JSON text of the database column.
    pub fn from_json_str(text: &str) -> Result<Self, NumaError> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| NumaError::decode(format!("numa_topology: {e}")))?;
        Self::from_primitive(&v)
    }

    /// `from_legacy_object`: cells with `cpus` (a CPU spec string) and `mem`.
    fn from_legacy(value: &Value) -> Result<Self, NumaError> {
        let cells = match value.get("cells") {
            None => Vec::new(),
            Some(Value::Array(items)) => items.clone(),
            Some(_) => return Err(NumaError::decode("legacy NUMA topology: bad cells")),
        };
        if cells.len() > MAX_CELLS {
            return Err(NumaError::decode("NUMATopology: too many cells"));
        }
        let mut out = Vec::new();
        for c in &cells {
            let id = match c.get("id") {
                Some(v) => int_of(v, "legacy cell id")?,
                None => return Err(NumaError::decode("legacy NUMA cell without id")),
            };
            let cpus = c.get("cpus").and_then(Value::as_str).unwrap_or("");
            let cpuset: PySet = parse_cpu_spec(cpus)?;
            let mem = c.get("mem");
            let get_mem = |k: &str| -> Result<i64, NumaError> {
                match mem.and_then(|m| m.get(k)) {
                    None => Ok(0),
                    Some(v) => int_of(v, "legacy cell mem"),
                }
            };
            out.push(NumaCell {
                id,
                cpuset,
                pcpuset: None,
                memory: get_mem("total")?,
                cpu_usage: match c.get("cpu_usage") {
                    None => 0,
                    Some(v) => int_of(v, "legacy cell cpu_usage")?,
                },
                memory_usage: get_mem("used")?,
                pinned_cpus: PySet::new(),
                siblings: Vec::new(),
                mempages: Vec::new(),
                network_metadata: None,
                socket: None,
            });
        }
        Ok(NumaTopology { cells: out })
    }

    pub fn has_threads(&self) -> bool {
        self.cells.iter().any(NumaCell::has_threads)
    }

    /// Python truthiness (`__len__` is the cell count).
    pub fn is_truthy(&self) -> bool {
        !self.cells.is_empty()
    }
}

/// nova's `parse_cpu_spec` ("1-4,^3,6"), bounded: a range may not exceed
/// [`MAX_CPUS_PER_SET`] CPUs.
pub fn parse_cpu_spec(spec: &str) -> Result<PySet, NumaError> {
    let invalid = |what: &str, rule: &str| {
        NumaError::Invalid(format!("Invalid {what} {}", py::str::repr(rule)))
    };
    let mut ids: Vec<i64> = Vec::new();
    let mut reject: BTreeSet<i64> = BTreeSet::new();
    for rule in spec.split(',') {
        let rule = py::str::strip(rule);
        if rule.is_empty() {
            continue;
        }
        if let Some((a, b)) = rule.split_once('-') {
            let (neg, a) = match a.strip_prefix('^') {
                Some(rest) if !a.is_empty() => (true, rest),
                _ => (false, a),
            };
            let start: i64 = py::int::int_i64(py::str::strip(a))
                .map_err(|_| invalid("range expression", rule))?;
            let end: i64 = py::int::int_i64(py::str::strip(b))
                .map_err(|_| invalid("range expression", rule))?;
            if start > end {
                return Err(invalid("range expression", rule));
            }
            if end.saturating_sub(start) as u64 >= MAX_CPUS_PER_SET as u64 {
                return Err(NumaError::Invalid(format!("CPU range too large: {rule:?}")));
            }
            for c in start..=end {
                if neg {
                    reject.insert(c);
                } else {
                    ids.push(c);
                }
            }
        } else if let Some(rest) = rule.strip_prefix('^') {
            reject.insert(
                py::int::int_i64(py::str::strip(rest))
                    .map_err(|_| invalid("exclusion expression", rule))?,
            );
        } else {
            ids.push(py::int::int_i64(rule).map_err(|_| invalid("inclusion expression", rule))?);
        }
        if ids.len() > MAX_CPUS_PER_SET {
            return Err(NumaError::Invalid("CPU spec too large".into()));
        }
    }
    Ok(ids.into_iter().filter(|c| !reject.contains(c)).collect())
}

/// Python's `%` (result has the sign of the divisor).
pub fn py_mod(a: i64, b: i64) -> i64 {
    if b == 0 {
        return 0;
    }
    let r = a.wrapping_rem(b);
    if r != 0 && ((r < 0) != (b < 0)) {
        r + b
    } else {
        r
    }
}

fn pages_from_primitive(value: &Value) -> Result<PagesTopology, NumaError> {
    let d = data_of(value, "NUMAPagesTopology")?;
    Ok(PagesTopology {
        size_kb: req_int(d, "NUMAPagesTopology", "size_kb")?,
        total: req_int(d, "NUMAPagesTopology", "total")?,
        used: req_int(d, "NUMAPagesTopology", "used")?,
        reserved: match d.get("reserved") {
            None => None,
            Some(v) => Some(int_of(v, "NUMAPagesTopology.reserved")?),
        },
    })
}

/// `nova_object.data` of a primitive named `name` (any version).
pub(crate) fn data_of<'a>(
    value: &'a Value,
    name: &str,
) -> Result<&'a Map<String, Value>, NumaError> {
    object::object_data(value, name).map_err(|e| NumaError::decode(e.to_string()))
}

/// An IntegerField value: oslo's `int(value)` ([`object::coerce_int`]).
pub(crate) fn int_of(v: &Value, what: &str) -> Result<i64, NumaError> {
    object::coerce_int(v).map_err(|e| {
        NumaError::decode(match e {
            IntCoerceError::OutOfRange => format!("{what}: integer out of range"),
            IntCoerceError::NotAnInteger => match v {
                Value::String(_) => format!("{what}: not an integer"),
                _ => format!("{what}: expected an integer"),
            },
        })
    })
}

pub(crate) fn set_of(v: &Value, what: &str) -> Result<PySet, NumaError> {
    let Value::Array(items) = v else {
        return Err(NumaError::decode(format!("{what}: expected a list")));
    };
    if items.len() > MAX_CPUS_PER_SET {
        return Err(NumaError::decode(format!("{what}: too many CPUs")));
    }
    let list: Vec<i64> = items
        .iter()
        .map(|i| int_of(i, what))
        .collect::<Result<_, _>>()?;
    // `Set.from_primitive` builds `set(list)`, then field coercion copies it.
    Ok(list.into_iter().collect::<PySet>().coerced())
}

fn req_int(d: &Map<String, Value>, obj: &str, field: &'static str) -> Result<i64, NumaError> {
    match d.get(field) {
        Some(v) if !v.is_null() => int_of(v, field),
        _ => Err(NumaError::decode(format!(
            "{obj}.{field}: required field is missing"
        ))),
    }
}

fn req_set(d: &Map<String, Value>, obj: &str, field: &'static str) -> Result<PySet, NumaError> {
    match d.get(field) {
        Some(v) => set_of(v, field),
        None => Err(NumaError::decode(format!(
            "{obj}.{field}: required field is missing"
        ))),
    }
}

fn opt_set(
    d: &Map<String, Value>,
    _obj: &str,
    field: &'static str,
) -> Result<Option<PySet>, NumaError> {
    d.get(field).map(|v| set_of(v, field)).transpose()
}
