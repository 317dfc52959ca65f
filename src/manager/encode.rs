// SPDX-License-Identifier: Apache-2.0
//! The answer of `select_destinations`: nova's `Selection` objects (RPC 4.5 with
//! `return_objects`) or the legacy list of host dicts.

use crate::model::{HostState, SchedulerLimits, Selection};
use crate::py::json;
use crate::scheduler::ScheduleOutcome;
use serde_json::Value;

/// The Placement microversion nova uses for candidates and claims.
pub const ALLOCATION_REQUEST_VERSION: &str = "1.36";

/// Per instance, the chosen host then its alternates as Selections, or (legacy)
/// the chosen host's dict.
pub(super) fn encode(outcome: &ScheduleOutcome, return_objects: bool, default_az: &str) -> Value {
    let selection = |d: &crate::scheduler::Destination| {
        to_selection(
            &outcome.hosts[d.host],
            d.allocation_request.as_ref(),
            default_az,
        )
    };
    if return_objects {
        Value::Array(
            outcome
                .destinations
                .iter()
                .map(|list| {
                    Value::Array(list.iter().map(|d| selection(d).to_primitive()).collect())
                })
                .collect(),
        )
    } else {
        Value::Array(
            outcome
                .destinations
                .iter()
                .filter_map(|list| list.first())
                .map(|d| selection(d).to_legacy_dict())
                .collect(),
        )
    }
}

/// nova's `Selection.from_host_state`.
fn to_selection(
    host: &HostState,
    allocation_request: Option<&Value>,
    default_az: &str,
) -> Selection {
    Selection {
        compute_node_uuid: host.uuid.as_deref().unwrap_or_default().to_string(),
        service_host: host.host.to_string(),
        nodename: host.nodename.to_string(),
        cell_uuid: host.cell_uuid.to_string(),
        limits: SchedulerLimits {
            numa_topology: host.limits.get("numa_topology").cloned(),
            // Written by the legacy Core/Ram/Disk filters; SchedulerLimits holds ints.
            vcpu: legacy_limit(host, "vcpu"),
            memory_mb: legacy_limit(host, "memory_mb"),
            disk_gb: legacy_limit(host, "disk_gb"),
        },
        allocation_request: allocation_request.map(json::dumps),
        allocation_request_version: allocation_request
            .map(|_| ALLOCATION_REQUEST_VERSION.to_string()),
        availability_zone: Some(host.availability_zone(default_az)),
    }
}

/// `SchedulerLimits.from_dict`: the float limit truncated by the IntegerField.
fn legacy_limit(host: &HostState, key: &str) -> Option<i64> {
    host.limits
        .get(key)
        .and_then(serde_json::Value::as_f64)
        .map(|f| f.trunc() as i64)
}
