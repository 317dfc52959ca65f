// SPDX-License-Identifier: Apache-2.0
//! Rows of a cell database and nova's `HostState._update_from_compute_node` on them.
//! Pure: no I/O here.

use super::rows::{CellRows, ComputeNodeRow, ServiceRow};
use super::StateOptions;
use crate::model::{Aggregate, HostState, HostStats, ServiceInfo};
use crate::pci::PciStats;
use chrono::{DateTime, NaiveDateTime, Utc};
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// The instances of one host: their uuids, and each one's flavor id.
#[derive(Debug, Clone, Default)]
pub(super) struct HostInstances {
    pub uuids: Arc<BTreeSet<String>>,
    pub flavor_ids: Arc<crate::model::InstanceFlavorIds>,
}

impl CellRows {
    pub fn instances_by_host(&self) -> HashMap<String, HostInstances> {
        let mut by_host: HashMap<String, (BTreeSet<String>, crate::model::InstanceFlavorIds)> =
            HashMap::new();
        for inst in &self.instances {
            let (uuids, flavors) = by_host.entry(inst.host.clone()).or_default();
            uuids.insert(inst.uuid.clone());
            flavors.insert(inst.uuid.clone(), inst.flavor_id);
        }
        by_host
            .into_iter()
            .map(|(h, (uuids, flavors))| {
                (
                    h,
                    HostInstances {
                        uuids: Arc::new(uuids),
                        flavor_ids: Arc::new(flavors),
                    },
                )
            })
            .collect()
    }
}

/// `[DEFAULT] x_allocation_ratio` and `initial_x_allocation_ratio` for the three ratios.
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub(super) struct RatioDefaults {
    pub cpu: f64,
    pub ram: f64,
    pub disk: f64,
}

impl RatioDefaults {
    /// nova's `r if r else init_x_ratio`: an unset or 0.0 option falls back to the
    /// `initial_` one.
    pub fn from_options(opts: &StateOptions) -> Self {
        let pick = |r: Option<f64>, init: f64| r.filter(|v| *v != 0.0).unwrap_or(init);
        RatioDefaults {
            cpu: pick(opts.cpu_allocation_ratio, opts.initial_cpu_allocation_ratio),
            ram: pick(opts.ram_allocation_ratio, opts.initial_ram_allocation_ratio),
            disk: pick(
                opts.disk_allocation_ratio,
                opts.initial_disk_allocation_ratio,
            ),
        }
    }
}

/// A ratio column as `ComputeNode._from_db_object` sees it: NULL or 0.0 take the
/// configured value (which `ratio_backfill` also writes back, as nova does).
fn ratio(column: Option<f64>, default: f64) -> f64 {
    column.filter(|v| *v != 0.0).unwrap_or(default)
}

/// One HostState from a compute node, its service, aggregates and instances.
pub(super) fn host_state(
    node: ComputeNodeRow,
    service: &ServiceRow,
    cell_uuid: &str,
    ratios: &RatioDefaults,
    aggregates: Vec<Arc<Aggregate>>,
    instances: Arc<BTreeSet<String>>,
    texts: &mut RowInterner,
) -> HostState {
    let mut state = HostState {
        host: node.host.as_deref().unwrap_or_default().into(),
        nodename: node
            .hypervisor_hostname
            .as_deref()
            .unwrap_or_default()
            .into(),
        cell_uuid: texts.str(cell_uuid),
        aggregates,
        instances,
        service: service_info(service),
        ..HostState::default()
    };
    // A node the resource tracker never updated keeps the zero defaults and no uuid.
    if let Some(free_gb) = node.free_disk_gb {
        update_from_compute_node(&mut state, node, free_gb, ratios, texts);
    } else {
        tracing::debug!(uuid = ?node.uuid, "Ignoring compute node as its usage has not been updated yet");
    }
    state
}

fn update_from_compute_node(
    state: &mut HostState,
    node: ComputeNodeRow,
    free_gb: i64,
    ratios: &RatioDefaults,
    texts: &mut RowInterner,
) {
    let free_gb = match node.disk_available_least {
        Some(least) => least.min(free_gb),
        None => free_gb,
    };
    state.uuid = node.uuid.map(Arc::from);
    state.free_disk_mb = free_gb * 1024;
    state.disk_mb_used = node.local_gb_used * 1024;
    state.free_ram_mb = node.free_ram_mb.unwrap_or(0);
    state.total_usable_ram_mb = node.memory_mb;
    state.total_usable_disk_gb = node.local_gb;
    state.vcpus_total = node.vcpus;
    state.vcpus_used = node.vcpus_used;
    state.updated = node.updated_at.map(|t| t.and_utc());
    state.numa_topology =
        non_empty_json(node.numa_topology.as_deref(), "numa_topology").map(Arc::new);
    let (raw, pools) = texts.pci_stats(node.pci_stats.as_deref());
    state.pci_stats = raw;
    state.pci = Some(pools);
    state.host_ip = node.host_ip.map(Arc::from);
    state.hypervisor_type = node.hypervisor_type.as_deref().map(|t| texts.str(t));
    state.hypervisor_version = node.hypervisor_version;
    // The node name again: one allocation for both.
    state.hypervisor_hostname = node.hypervisor_hostname.map(|_| state.nodename.clone());
    state.cpu_info = node.cpu_info.as_deref().map(|t| texts.str(t));
    state.supported_instances = texts.supported_instances(node.supported_instances.as_deref());
    state.stats = Arc::new(stats(node.stats.as_deref(), texts));
    state.num_instances = stat_int(&state.stats, "num_instances");
    state.num_io_ops = stat_int(&state.stats, "io_workload");
    state.failed_builds = stat_int(&state.stats, "failed_builds");
    state.metrics = texts.metrics(node.metrics.as_deref());
    state.cpu_allocation_ratio = ratio(node.cpu_allocation_ratio, ratios.cpu);
    state.ram_allocation_ratio = ratio(node.ram_allocation_ratio, ratios.ram);
    state.disk_allocation_ratio = ratio(node.disk_allocation_ratio, ratios.disk);
}

pub(super) fn service_info(row: &ServiceRow) -> ServiceInfo {
    let utc = |t: Option<NaiveDateTime>| -> Option<DateTime<Utc>> { t.map(|t| t.and_utc()) };
    ServiceInfo {
        id: row.id,
        host: row.host.as_deref().unwrap_or_default().into(),
        disabled: row.disabled.unwrap_or(false),
        disabled_reason: row.disabled_reason.as_deref().map(Arc::from),
        forced_down: row.forced_down.unwrap_or(false),
        last_seen_up: utc(row.last_seen_up),
        created_at: utc(row.created_at),
        updated_at: utc(row.updated_at),
        version: row.version.unwrap_or(0),
    }
}

/// A `pci_stats` column's parsed pools, with the JSON they came from.
type InternedPci = (Option<Arc<Value>>, Arc<PciStats>);

/// Column values that many compute nodes share, held once. Nodes of the same
/// hardware report the same `cpu_info`, `supported_instances`, `metrics` and PCI
/// pools (every host without PCI devices the same empty list), and the same stats
/// keys (`num_proj_<project>`) and small values: at 10,000 nodes, separate copies
/// were a fifth of the cache. `pci_stats` is parsed once per distinct text, its
/// pools copied on write by the request that consumes from them. The texts come
/// from the cell databases, written by nova-compute.
#[derive(Debug, Default)]
pub(super) struct RowInterner {
    pci: FxHashMap<Box<str>, InternedPci>,
    strings: FxHashSet<Arc<str>>,
    supported_instances: FxHashMap<Box<str>, Arc<Vec<Vec<String>>>>,
    metrics: FxHashMap<Box<str>, Arc<Value>>,
    /// Entries after the last [`prune`](Self::prune); the next one runs at twice that.
    after_prune: usize,
}

impl RowInterner {
    /// The parsed `pci_stats` column (`None` when NULL or not JSON) and its pools.
    pub(super) fn pci_stats(&mut self, text: Option<&str>) -> (Option<Arc<Value>>, Arc<PciStats>) {
        let Some(text) = text else {
            return (None, Arc::new(PciStats::from_raw(None)));
        };
        if let Some((raw, pools)) = self.pci.get(text) {
            return (raw.clone(), Arc::clone(pools));
        }
        self.prune_if_grown();
        let raw = parse_json(text, "pci_stats").map(Arc::new);
        let pools = Arc::new(PciStats::from_raw(raw.as_deref()));
        self.pci
            .insert(text.into(), (raw.clone(), Arc::clone(&pools)));
        (raw, pools)
    }

    /// `text`, shared with every other holder of the same text.
    pub(super) fn str(&mut self, text: &str) -> Arc<str> {
        if let Some(s) = self.strings.get(text) {
            return Arc::clone(s);
        }
        self.prune_if_grown();
        let s: Arc<str> = Arc::from(text);
        self.strings.insert(Arc::clone(&s));
        s
    }

    fn supported_instances(&mut self, text: Option<&str>) -> Arc<Vec<Vec<String>>> {
        let key = text.unwrap_or_default();
        if let Some(v) = self.supported_instances.get(key) {
            return Arc::clone(v);
        }
        self.prune_if_grown();
        let v = Arc::new(supported_instances(text));
        self.supported_instances.insert(key.into(), Arc::clone(&v));
        v
    }

    /// The parsed `metrics` column; `None` when empty or not JSON.
    fn metrics(&mut self, text: Option<&str>) -> Option<Arc<Value>> {
        let text = text.filter(|s| !s.is_empty())?;
        if let Some(v) = self.metrics.get(text) {
            return Some(Arc::clone(v));
        }
        let v = Arc::new(parse_json(text, "metrics")?);
        self.prune_if_grown();
        self.metrics.insert(text.into(), Arc::clone(&v));
        Some(v)
    }

    fn len(&self) -> usize {
        self.pci.len() + self.strings.len() + self.supported_instances.len() + self.metrics.len()
    }

    fn prune_if_grown(&mut self) {
        if self.len() >= 2 * self.after_prune.max(64) {
            self.prune();
        }
    }

    /// Forgets the values no node holds any more.
    pub(super) fn prune(&mut self) {
        self.pci
            .retain(|_, (_, pools)| Arc::strong_count(pools) > 1);
        self.strings.retain(|s| Arc::strong_count(s) > 1);
        self.supported_instances
            .retain(|_, v| Arc::strong_count(v) > 1);
        self.metrics.retain(|_, v| Arc::strong_count(v) > 1);
        self.after_prune = self.len();
    }

    #[cfg(test)]
    pub(super) fn pci_len(&self) -> usize {
        self.pci.len()
    }
}

fn parse_json(text: &str, column: &str) -> Option<Value> {
    match serde_json::from_str(text) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(column, error = %e, "compute node column is not valid JSON; ignored");
            None
        }
    }
}

/// A TEXT column that nova only parses when non-empty (`if value:`).
fn non_empty_json(text: Option<&str>, column: &str) -> Option<Value> {
    text.filter(|s| !s.is_empty())
        .and_then(|s| parse_json(s, column))
}

/// `compute_nodes.stats`: a JSON dict whose values nova's DictOfNullableStringsField
/// turns into strings (`str(value)`); null values are left out.
fn stats(text: Option<&str>, texts: &mut RowInterner) -> HostStats {
    let Some(Value::Object(map)) = non_empty_json(text, "stats") else {
        return BTreeMap::new();
    };
    map.into_iter()
        .filter_map(|(k, v)| python_str(&v).map(|s| (texts.str(&k), texts.str(&s))))
        .collect()
}

fn python_str(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(if *b { "True" } else { "False" }.to_string()),
        // Python's repr of numbers (1.0 stays "1.0").
        Value::Number(_) => Some(crate::py::json::dumps(v)),
        // nova would reject a nested value; keep its JSON text.
        other => Some(other.to_string()),
    }
}

/// `int(stats.get(key, 0))`. nova would fail the whole request on a non-integer;
/// we log and count 0.
fn stat_int(stats: &HostStats, key: &str) -> i64 {
    match stats.get(key) {
        None => 0,
        Some(v) => v.trim().parse().unwrap_or_else(|_| {
            tracing::warn!(key, value = %v, "compute node stat is not an integer; using 0");
            0
        }),
    }
}

/// `supported_instances`: a JSON list of `[arch, hv_type, vm_mode]`; `[]` if empty.
fn supported_instances(text: Option<&str>) -> Vec<Vec<String>> {
    let Some(Value::Array(items)) = non_empty_json(text, "supported_instances") else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(Value::as_array)
        .map(|spec| {
            spec.iter()
                .map(|v| python_str(v).unwrap_or_else(|| "None".to_string()))
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests;
