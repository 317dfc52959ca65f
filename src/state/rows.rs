// SPDX-License-Identifier: Apache-2.0
//! The rows of a cell database the scheduler reads: what the queries return
//! (`queries`) and what the host states are built from (`compute`).

use chrono::NaiveDateTime;

/// The `services` columns the scheduler reads.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct ServiceRow {
    pub id: i64,
    pub host: Option<String>,
    pub disabled: Option<bool>,
    pub disabled_reason: Option<String>,
    pub forced_down: Option<bool>,
    pub last_seen_up: Option<NaiveDateTime>,
    pub created_at: Option<NaiveDateTime>,
    pub updated_at: Option<NaiveDateTime>,
    pub version: Option<i64>,
}

/// The `compute_nodes` columns the scheduler reads.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub(super) struct ComputeNodeRow {
    pub id: i64,
    pub host: Option<String>,
    pub hypervisor_hostname: Option<String>,
    pub uuid: Option<String>,
    pub vcpus: i64,
    pub vcpus_used: i64,
    pub memory_mb: i64,
    pub free_ram_mb: Option<i64>,
    pub local_gb: i64,
    pub local_gb_used: i64,
    pub free_disk_gb: Option<i64>,
    pub disk_available_least: Option<i64>,
    pub hypervisor_type: Option<String>,
    pub hypervisor_version: Option<i64>,
    pub cpu_info: Option<String>,
    pub host_ip: Option<String>,
    pub supported_instances: Option<String>,
    pub metrics: Option<String>,
    pub pci_stats: Option<String>,
    pub numa_topology: Option<String>,
    pub stats: Option<String>,
    pub cpu_allocation_ratio: Option<f64>,
    pub ram_allocation_ratio: Option<f64>,
    pub disk_allocation_ratio: Option<f64>,
    pub updated_at: Option<NaiveDateTime>,
}

impl ComputeNodeRow {
    /// Whether a ratio column is NULL or 0.0 (nova then uses, and writes, the config value).
    pub fn has_missing_ratio(&self) -> bool {
        [
            self.cpu_allocation_ratio,
            self.ram_allocation_ratio,
            self.disk_allocation_ratio,
        ]
        .iter()
        .any(|r| r.is_none_or(|v| v == 0.0))
    }
}

/// What one cell answered for a request.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(super) struct CellRows {
    pub cell_uuid: String,
    pub services: Vec<ServiceRow>,
    pub nodes: Vec<ComputeNodeRow>,
    /// Live instances on the nodes' hosts.
    pub instances: Vec<HostInstance>,
}

/// A live instance on a host: its uuid and `instance_type_id` (the id of its flavor,
/// NULL-able in nova's schema), which the legacy TypeAffinityFilter compares.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct HostInstance {
    pub host: String,
    pub uuid: String,
    pub flavor_id: Option<i64>,
}
