// SPDX-License-Identifier: Apache-2.0
//! nova's `HostState`: one per compute node, with the attribute names nova uses
//! (filters and `ComputeCapabilitiesFilter` address them by these names).

use super::aggregate::Aggregate;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The `nova-compute` service row joined to a compute node by host name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServiceInfo {
    pub id: i64,
    pub host: Arc<str>,
    pub disabled: bool,
    pub disabled_reason: Option<Arc<str>>,
    pub forced_down: bool,
    pub last_seen_up: Option<DateTime<Utc>>,
    pub created_at: Option<DateTime<Utc>>,
    pub updated_at: Option<DateTime<Utc>>,
    pub version: i64,
}

impl ServiceInfo {
    /// nova's DB servicegroup driver: up iff not forced down and the last heartbeat
    /// (`last_seen_up`, or `created_at` if never seen) is within `service_down_time`
    /// of `now`, in either direction. A `service_down_time` not above `report_interval`
    /// is replaced by `report_interval * 2.5`, as nova does.
    pub fn is_up(&self, now: DateTime<Utc>, service_down_time: i64, report_interval: i64) -> bool {
        if self.forced_down {
            return false;
        }
        let down_time = if service_down_time <= report_interval {
            (report_interval as f64 * 2.5) as i64
        } else {
            service_down_time
        };
        match self.last_seen_up.or(self.created_at) {
            Some(seen) => (now - seen)
                .num_microseconds()
                .is_some_and(|us| us.abs() <= down_time * 1_000_000),
            None => false,
        }
    }
}

/// Instance uuid → its `instance_system_metadata` rows `(key, value)`, in row order.
pub type InstanceSystemMetadata = BTreeMap<String, Vec<(String, String)>>;

/// Instance uuid → its `instances.instance_type_id` (the id of its flavor; None for
/// a NULL column).
pub type InstanceFlavorIds = BTreeMap<String, Option<i64>>;

/// Resources and attributes of one compute node, as nova's HostState holds them.
/// `compute_nodes.stats`: strings to strings, each held once by the state edge
/// for every node that has it (see `state::compute`).
pub type HostStats = BTreeMap<Arc<str>, Arc<str>>;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostState {
    // The strings are shared with the cached state (`Arc<str>`): every request
    // copies every candidate host's state, and a copy should cost pointers only.
    pub host: Arc<str>,
    pub nodename: Arc<str>,
    pub cell_uuid: Arc<str>,
    /// Compute node uuid (= its resource provider uuid).
    pub uuid: Option<Arc<str>>,
    pub total_usable_ram_mb: i64,
    pub free_ram_mb: i64,
    pub total_usable_disk_gb: i64,
    pub disk_mb_used: i64,
    pub free_disk_mb: i64,
    pub vcpus_total: i64,
    pub vcpus_used: i64,
    pub cpu_allocation_ratio: f64,
    pub ram_allocation_ratio: f64,
    pub disk_allocation_ratio: f64,
    /// `compute_nodes.stats`; values are strings. Shared with the cached state:
    /// a request copies a pointer, not the map.
    pub stats: Arc<HostStats>,
    pub num_instances: i64,
    pub num_io_ops: i64,
    pub failed_builds: i64,
    pub host_ip: Option<Arc<str>>,
    pub hypervisor_type: Option<Arc<str>>,
    pub hypervisor_version: Option<i64>,
    pub hypervisor_hostname: Option<Arc<str>>,
    /// Raw JSON string, as nova keeps it.
    pub cpu_info: Option<Arc<str>>,
    /// `[arch, hv_type, vm_mode]` triples.
    pub supported_instances: Arc<Vec<Vec<String>>>,
    pub numa_topology: Option<Arc<Value>>,
    /// `numa_topology` decoded (once, on first use); after virtual consumption it
    /// holds the consumed topology while `numa_topology` keeps the compute's report.
    pub numa: crate::numa::HostNumaCache,
    pub pci_stats: Option<Arc<Value>>,
    /// `pci_stats` parsed once into nova's pools (see `crate::host_fit::host_pools`); the
    /// per-request consume works on this copy.
    pub pci: Option<Arc<crate::pci::PciStats>>,
    pub metrics: Option<Arc<Value>>,
    pub aggregates: Vec<Arc<Aggregate>>,
    /// Uuids of the instances on this host (only keys matter to in-tree filters).
    pub instances: Arc<BTreeSet<String>>,
    /// For the legacy TypeAffinityFilter: the flavor id of each instance in
    /// `instances` whose flavor is known (nova's `HostState.instances` held whole
    /// Instance objects then). An instance missing here was added by a cast that
    /// did not carry its flavor and is not known until its row is read again.
    pub instance_flavor_ids: Arc<InstanceFlavorIds>,
    /// For ImagePropertiesWeigher only: instance uuid → its `instance_system_metadata`
    /// rows `(key, value)` in row order (deleted rows too, as nova's `fill_metadata`
    /// reads them), restricted to the keys that can carry image properties. `None`
    /// when not loaded (the weigher is disabled by `image_props_weight_multiplier = 0`).
    pub instance_system_metadata: Option<Arc<InstanceSystemMetadata>>,
    pub service: ServiceInfo,
    pub updated: Option<DateTime<Utc>>,
    /// Placement allocation requests that allocate from this compute node.
    pub allocation_candidates: Vec<super::AllocationCandidate>,
    /// `limits` handed to the compute (only NUMATopologyFilter writes it today).
    pub limits: BTreeMap<String, Value>,
}

impl HostState {
    /// nova's `consume_from_request` for the resources the core tracks; swap and
    /// boot-from-volume are not counted in disk, exactly as nova does.
    pub fn consume(
        &mut self,
        memory_mb: i64,
        root_gb: i64,
        ephemeral_gb: i64,
        vcpus: i64,
        now: DateTime<Utc>,
    ) {
        self.consume_resources(memory_mb, root_gb, ephemeral_gb, vcpus);
        self.finish_consume(now);
    }

    /// The first steps of `consume_from_request`: RAM, disk, vCPUs, instance count.
    pub fn consume_resources(
        &mut self,
        memory_mb: i64,
        root_gb: i64,
        ephemeral_gb: i64,
        vcpus: i64,
    ) {
        self.free_ram_mb -= memory_mb;
        self.free_disk_mb -= (root_gb + ephemeral_gb) * 1024;
        self.vcpus_used += vcpus;
        self.num_instances += 1;
    }

    /// The last steps, reached only when the NUMA (and PCI) steps did not raise.
    pub fn finish_consume(&mut self, now: DateTime<Utc>) {
        self.num_io_ops += 1;
        self.updated = Some(now);
    }

    /// Availability zone the Selection reports: one of the AZ values of the host's
    /// aggregates (comma-split and pooled), or the configured default.
    pub fn availability_zone(&self, default_az: &str) -> String {
        let zones: BTreeSet<&str> = self
            .aggregates
            .iter()
            .filter_map(|a| a.availability_zone())
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect();
        zones
            .iter()
            .next()
            .map_or_else(|| default_az.to_string(), |z| z.to_string())
    }
}

/// The positions of `candidates` (indices into a request's host list) in
/// ascending host index. A pass over every candidate that visits them in this
/// order reads the host list front to back instead of in weight order, which at
/// thousands of hosts saves most cache misses; results are stored by position, so
/// the outcome does not depend on the visiting order.
pub fn positions_in_memory_order(candidates: &[usize]) -> Vec<usize> {
    if candidates.windows(2).all(|w| w[0] < w[1]) {
        return (0..candidates.len()).collect();
    }
    let max = candidates.iter().copied().max().unwrap_or(0);
    let mut slot = vec![usize::MAX; max + 1];
    for (position, &host) in candidates.iter().enumerate() {
        if slot[host] != usize::MAX {
            // A host listed twice: keep every position (stable sort by host index).
            let mut positions: Vec<usize> = (0..candidates.len()).collect();
            positions.sort_by_key(|&p| candidates[p]);
            return positions;
        }
        slot[host] = position;
    }
    slot.into_iter().filter(|&p| p != usize::MAX).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Duration;

    #[test]
    fn service_up_rules() {
        let now = Utc::now();
        let mut svc = ServiceInfo {
            last_seen_up: Some(now - Duration::seconds(59)),
            ..Default::default()
        };
        assert!(svc.is_up(now, 60, 10));
        svc.last_seen_up = Some(now - Duration::seconds(61));
        assert!(!svc.is_up(now, 60, 10));
        // In the future by more than the down time: nova takes abs() and says down.
        svc.last_seen_up = Some(now + Duration::seconds(120));
        assert!(!svc.is_up(now, 60, 10));
        // Never seen: created_at counts.
        svc.last_seen_up = None;
        svc.created_at = Some(now - Duration::seconds(5));
        assert!(svc.is_up(now, 60, 10));
        // down time not above report_interval becomes report_interval * 2.5.
        svc.created_at = Some(now - Duration::seconds(70));
        assert!(svc.is_up(now, 30, 30));
        svc.forced_down = true;
        assert!(!svc.is_up(now, 60, 10));
    }

    #[test]
    fn memory_order_visits_every_position_once_by_host_index() {
        assert_eq!(positions_in_memory_order(&[]), Vec::<usize>::new());
        assert_eq!(positions_in_memory_order(&[0, 2, 5]), vec![0, 1, 2]);
        assert_eq!(positions_in_memory_order(&[5, 0, 9, 2]), vec![1, 3, 0, 2]);
        assert_eq!(positions_in_memory_order(&[3, 1, 3]), vec![1, 0, 2]);
    }

    #[test]
    fn consume_ignores_swap_and_counts_io() {
        let mut h = HostState {
            free_ram_mb: 8192,
            free_disk_mb: 100 * 1024,
            ..Default::default()
        };
        h.consume(1024, 10, 5, 2, Utc::now());
        assert_eq!(h.free_ram_mb, 7168);
        assert_eq!(h.free_disk_mb, 85 * 1024);
        assert_eq!((h.vcpus_used, h.num_instances, h.num_io_ops), (2, 1, 1));
    }
}
