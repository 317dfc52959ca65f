// SPDX-License-Identifier: Apache-2.0
//! The instance side: nova's `InstanceNUMATopology` / `InstanceNUMACell` (as the
//! `RequestSpec.numa_topology` primitive carries them) and `NUMATopologyLimits`.

use super::host::{data_of, int_of, NetworkMetadata};
use super::{NumaError, MAX_CELLS, MAX_CPUS_PER_SET};
use crate::py::object::envelope;
use crate::py::set::PySet;
use serde_json::{Map, Value};
use std::collections::BTreeSet;

/// `hw:cpu_policy` values (`CPUAllocationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuPolicy {
    Shared,
    Dedicated,
    Mixed,
}

impl CpuPolicy {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "shared" => Some(CpuPolicy::Shared),
            "dedicated" => Some(CpuPolicy::Dedicated),
            "mixed" => Some(CpuPolicy::Mixed),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            CpuPolicy::Shared => "shared",
            CpuPolicy::Dedicated => "dedicated",
            CpuPolicy::Mixed => "mixed",
        }
    }
}

/// `hw:cpu_thread_policy` values (`CPUThreadAllocationPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadPolicy {
    Prefer,
    Isolate,
    Require,
}

impl ThreadPolicy {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "prefer" => Some(ThreadPolicy::Prefer),
            "isolate" => Some(ThreadPolicy::Isolate),
            "require" => Some(ThreadPolicy::Require),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            ThreadPolicy::Prefer => "prefer",
            ThreadPolicy::Isolate => "isolate",
            ThreadPolicy::Require => "require",
        }
    }
}

/// Page size requests: nova's MEMPAGES_SMALL / LARGE / ANY, or a size in KiB.
pub const MEMPAGES_SMALL: i64 = -1;
pub const MEMPAGES_LARGE: i64 = -2;
pub const MEMPAGES_ANY: i64 = -3;

/// `InstanceNUMACell`. The fit writes into it (pagesize, pinning, reserved CPUs,
/// id) exactly where nova mutates the object.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceCell {
    pub id: i64,
    /// Shared (floating) vCPUs.
    pub cpuset: BTreeSet<i64>,
    /// Dedicated vCPUs; unset on pre-1.5 primitives.
    pub pcpuset: Option<BTreeSet<i64>>,
    pub memory: i64,
    pub pagesize: Option<i64>,
    pub cpu_policy: Option<CpuPolicy>,
    pub cpu_thread_policy: Option<ThreadPolicy>,
    /// vCPU → pCPU in dict insertion order (nova reads `.values()` in that order).
    pub cpu_pinning: Option<Vec<(i64, i64)>>,
    pub cpuset_reserved: Option<PySet>,
    /// Kept as given (only its presence matters to the scheduler).
    pub cpu_topology: Option<Value>,
}

impl InstanceCell {
    pub fn pcpuset(&self) -> Result<&BTreeSet<i64>, NumaError> {
        self.pcpuset
            .as_ref()
            .ok_or(NumaError::FieldNotSet("InstanceNUMACell.pcpuset"))
    }

    pub fn is_pinned_policy(&self) -> bool {
        matches!(
            self.cpu_policy,
            Some(CpuPolicy::Dedicated) | Some(CpuPolicy::Mixed)
        )
    }

    pub fn is_shared_policy(&self) -> bool {
        matches!(
            self.cpu_policy,
            None | Some(CpuPolicy::Shared) | Some(CpuPolicy::Mixed)
        )
    }

    /// `pin_vcpus`: only vCPUs of `pcpuset` are pinned; entries merge into the
    /// existing mapping (an existing key keeps its position).
    pub fn pin_vcpus(&mut self, pairs: &[(i64, i64)]) {
        for &(vcpu, pcpu) in pairs {
            if !self.pcpuset.as_ref().is_some_and(|p| p.contains(&vcpu)) {
                continue;
            }
            let map = self.cpu_pinning.get_or_insert_with(Vec::new);
            match map.iter_mut().find(|(k, _)| *k == vcpu) {
                Some(entry) => entry.1 = pcpu,
                None => map.push((vcpu, pcpu)),
            }
        }
    }

    fn from_primitive(value: &Value) -> Result<Self, NumaError> {
        let d = data_of(value, "InstanceNUMACell")?;
        let int_set = |field: &'static str| -> Result<Option<BTreeSet<i64>>, NumaError> {
            match d.get(field) {
                None => Ok(None),
                Some(Value::Array(items)) => {
                    if items.len() > MAX_CPUS_PER_SET {
                        return Err(NumaError::decode(format!(
                            "InstanceNUMACell.{field}: too many CPUs"
                        )));
                    }
                    Ok(Some(
                        items
                            .iter()
                            .map(|v| int_of(v, field))
                            .collect::<Result<_, _>>()?,
                    ))
                }
                Some(_) => Err(NumaError::decode(format!(
                    "InstanceNUMACell.{field}: expected a list"
                ))),
            }
        };
        let enum_field = |field: &str| -> Result<Option<String>, NumaError> {
            match d.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(NumaError::decode(format!(
                    "InstanceNUMACell.{field}: expected a string"
                ))),
            }
        };
        let cpu_policy = match enum_field("cpu_policy")? {
            None => None,
            Some(s) => Some(CpuPolicy::parse(&s).ok_or_else(|| {
                NumaError::decode(format!("InstanceNUMACell.cpu_policy: invalid value {s:?}"))
            })?),
        };
        let cpu_thread_policy = match enum_field("cpu_thread_policy")? {
            None => None,
            Some(s) => Some(ThreadPolicy::parse(&s).ok_or_else(|| {
                NumaError::decode(format!(
                    "InstanceNUMACell.cpu_thread_policy: invalid value {s:?}"
                ))
            })?),
        };
        let cpu_pinning = match d.get("cpu_pinning_raw") {
            None | Some(Value::Null) => None,
            Some(Value::Object(m)) => {
                if m.len() > MAX_CPUS_PER_SET {
                    return Err(NumaError::decode(
                        "InstanceNUMACell.cpu_pinning_raw: too large",
                    ));
                }
                let mut pairs = Vec::new();
                for (k, v) in m {
                    let vcpu = crate::py::int::int_i64(k).map_err(|_| {
                        NumaError::decode("InstanceNUMACell.cpu_pinning_raw: bad key")
                    })?;
                    pairs.push((vcpu, int_of(v, "cpu_pinning_raw")?));
                }
                Some(pairs)
            }
            Some(_) => {
                return Err(NumaError::decode(
                    "InstanceNUMACell.cpu_pinning_raw: expected a dict",
                ))
            }
        };
        let cpuset_reserved = match d.get("cpuset_reserved") {
            None | Some(Value::Null) => None,
            Some(v) => Some(super::host::set_of(v, "InstanceNUMACell.cpuset_reserved")?),
        };
        Ok(InstanceCell {
            id: match d.get("id") {
                Some(v) => int_of(v, "InstanceNUMACell.id")?,
                None => {
                    return Err(NumaError::decode(
                        "InstanceNUMACell.id: required field is missing",
                    ))
                }
            },
            cpuset: int_set("cpuset")?.ok_or_else(|| {
                NumaError::decode("InstanceNUMACell.cpuset: required field is missing")
            })?,
            pcpuset: int_set("pcpuset")?,
            memory: match d.get("memory") {
                Some(v) => int_of(v, "InstanceNUMACell.memory")?,
                None => {
                    return Err(NumaError::decode(
                        "InstanceNUMACell.memory: required field is missing",
                    ))
                }
            },
            pagesize: match d.get("pagesize") {
                None | Some(Value::Null) => None,
                Some(v) => Some(int_of(v, "InstanceNUMACell.pagesize")?),
            },
            cpu_policy,
            cpu_thread_policy,
            cpu_pinning,
            cpuset_reserved,
            cpu_topology: d.get("cpu_topology").filter(|v| !v.is_null()).cloned(),
        })
    }

    pub fn to_primitive(&self) -> Value {
        let ints = |s: &BTreeSet<i64>| Value::Array(s.iter().map(|&c| Value::from(c)).collect());
        let mut data = Map::new();
        data.insert("id".into(), Value::from(self.id));
        data.insert("cpuset".into(), ints(&self.cpuset));
        if let Some(p) = &self.pcpuset {
            data.insert("pcpuset".into(), ints(p));
        }
        data.insert(
            "cpuset_reserved".into(),
            self.cpuset_reserved.as_ref().map_or(Value::Null, |s| {
                Value::Array(s.iter().map(Value::from).collect())
            }),
        );
        data.insert("memory".into(), Value::from(self.memory));
        data.insert(
            "pagesize".into(),
            self.pagesize.map_or(Value::Null, Value::from),
        );
        data.insert(
            "cpu_topology".into(),
            self.cpu_topology.clone().unwrap_or(Value::Null),
        );
        data.insert(
            "cpu_pinning_raw".into(),
            self.cpu_pinning.as_ref().map_or(Value::Null, |pairs| {
                Value::Object(
                    pairs
                        .iter()
                        .map(|(v, p)| (v.to_string(), Value::from(*p)))
                        .collect(),
                )
            }),
        );
        data.insert(
            "cpu_policy".into(),
            self.cpu_policy.map_or(Value::Null, |p| p.as_str().into()),
        );
        data.insert(
            "cpu_thread_policy".into(),
            self.cpu_thread_policy
                .map_or(Value::Null, |p| p.as_str().into()),
        );
        envelope("InstanceNUMACell", "1.6", data)
    }
}

/// `InstanceNUMATopology`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InstanceTopology {
    pub cells: Vec<InstanceCell>,
    /// `None` when unset; `Some(None)` when explicitly null.
    pub emulator_threads_policy: Option<Option<String>>,
    pub instance_uuid: Option<String>,
    pub id: Option<i64>,
}

impl InstanceTopology {
    pub fn from_primitive(value: &Value) -> Result<Self, NumaError> {
        let d = data_of(value, "InstanceNUMATopology")?;
        let cells = match d.get("cells") {
            Some(Value::Array(items)) => items,
            _ => {
                return Err(NumaError::decode(
                    "InstanceNUMATopology.cells: expected a list",
                ))
            }
        };
        if cells.len() > MAX_CELLS {
            return Err(NumaError::decode("InstanceNUMATopology: too many cells"));
        }
        let emulator_threads_policy = match d.get("emulator_threads_policy") {
            None => None,
            Some(Value::Null) => Some(None),
            Some(Value::String(s)) if s == "share" || s == "isolate" => Some(Some(s.clone())),
            Some(_) => {
                return Err(NumaError::decode(
                    "InstanceNUMATopology.emulator_threads_policy: invalid value",
                ))
            }
        };
        Ok(InstanceTopology {
            cells: cells
                .iter()
                .map(InstanceCell::from_primitive)
                .collect::<Result<_, _>>()?,
            emulator_threads_policy,
            instance_uuid: d
                .get("instance_uuid")
                .and_then(Value::as_str)
                .map(str::to_string),
            id: d.get("id").and_then(Value::as_i64),
        })
    }

    pub fn emulator_threads_isolated(&self) -> bool {
        matches!(&self.emulator_threads_policy, Some(Some(p)) if p == "isolate")
    }

    pub fn is_truthy(&self) -> bool {
        !self.cells.is_empty()
    }

    pub fn to_primitive(&self) -> Value {
        let mut data = Map::new();
        if let Some(id) = self.id {
            data.insert("id".into(), Value::from(id));
        }
        if let Some(u) = &self.instance_uuid {
            data.insert("instance_uuid".into(), Value::String(u.clone()));
        }
        data.insert(
            "cells".into(),
            Value::Array(self.cells.iter().map(InstanceCell::to_primitive).collect()),
        );
        if let Some(p) = &self.emulator_threads_policy {
            data.insert(
                "emulator_threads_policy".into(),
                p.as_ref().map_or(Value::Null, |s| Value::String(s.clone())),
            );
        }
        envelope("InstanceNUMATopology", "1.3", data)
    }
}

/// `NUMATopologyLimits`, written by the filter and read back by consumption.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub cpu_allocation_ratio: f64,
    pub ram_allocation_ratio: f64,
    pub network_metadata: Option<NetworkMetadata>,
}

impl Limits {
    pub fn to_primitive(&self) -> Value {
        let mut data = Map::new();
        data.insert(
            "cpu_allocation_ratio".into(),
            Value::from(self.cpu_allocation_ratio),
        );
        data.insert(
            "ram_allocation_ratio".into(),
            Value::from(self.ram_allocation_ratio),
        );
        if let Some(nm) = &self.network_metadata {
            data.insert("network_metadata".into(), nm.to_primitive());
        }
        envelope("NUMATopologyLimits", "1.1", data)
    }

    pub fn from_primitive(value: &Value) -> Result<Self, NumaError> {
        let d = data_of(value, "NUMATopologyLimits")?;
        let ratio = |k: &str| -> Result<f64, NumaError> {
            d.get(k).and_then(Value::as_f64).ok_or_else(|| {
                NumaError::decode(format!("NUMATopologyLimits.{k}: expected a float"))
            })
        };
        Ok(Limits {
            cpu_allocation_ratio: ratio("cpu_allocation_ratio")?,
            ram_allocation_ratio: ratio("ram_allocation_ratio")?,
            network_metadata: match d.get("network_metadata") {
                None | Some(Value::Null) => None,
                Some(v) => Some(NetworkMetadata::from_primitive(v)?),
            },
        })
    }
}
