// SPDX-License-Identifier: Apache-2.0
//! nova's `HostState` as Python values, by attribute name: what `getattr(host_state,
//! name)`, `hasattr` and `repr(host_state)` give the filters that evaluate text
//! from outside against it (`ComputeCapabilitiesFilter`, `JsonFilter`). The value
//! semantics themselves are [`crate::py::value`].

use crate::model::HostState;
use crate::py::int::PyInt;
use crate::py::str::PyStr;
use crate::py::value::{PyDict, PyObject, PyValue};
use crate::release::{Behaviour, NovaSeries};
use chrono::{DateTime, Utc};

/// Every name `dir()` lists on a nova 34 `HostState` that has been updated from a
/// compute node (`hasattr(host_state, name)` is true for exactly these).
pub const HOST_STATE_ATTRS: &[&str] = &[
    "__class__",
    "__delattr__",
    "__dict__",
    "__dir__",
    "__doc__",
    "__eq__",
    "__format__",
    "__ge__",
    "__getattribute__",
    "__getstate__",
    "__gt__",
    "__hash__",
    "__init__",
    "__init_subclass__",
    "__le__",
    "__lt__",
    "__module__",
    "__ne__",
    "__new__",
    "__reduce__",
    "__reduce_ex__",
    "__repr__",
    "__setattr__",
    "__sizeof__",
    "__str__",
    "__subclasshook__",
    "__weakref__",
    "_lock_name",
    "_locked_consume_from_request",
    "_update_from_compute_node",
    "aggregates",
    "allocation_candidates",
    "cell_uuid",
    "consume_from_request",
    "cpu_allocation_ratio",
    "cpu_info",
    "disk_allocation_ratio",
    "disk_mb_used",
    "failed_builds",
    "free_disk_mb",
    "free_ram_mb",
    "host",
    "host_ip",
    "hypervisor_hostname",
    "hypervisor_type",
    "hypervisor_version",
    "instances",
    "limits",
    "metrics",
    "nodename",
    "num_instances",
    "num_io_ops",
    "numa_topology",
    "pci_stats",
    "ram_allocation_ratio",
    "service",
    "stats",
    "supported_instances",
    "total_usable_disk_gb",
    "total_usable_ram_mb",
    "update",
    "updated",
    "uuid",
    "vcpus_total",
    "vcpus_used",
];

/// `hasattr(host_state, name)`.
pub fn host_has_attr(name: &str) -> bool {
    HOST_STATE_ATTRS.binary_search(&name).is_ok()
}

const HOST_STATE_DOC: &str = "Mutable and immutable information tracked for a host.\n    This is an attempt to remove the ad-hoc data structures\n    previously used and lock down access.\n    ";

/// nova's `HostState.__repr__`.
pub fn host_repr(h: &HostState) -> String {
    format!(
        "({}, {}) ram: {}MB disk: {}MB io_ops: {} instances: {}, allocation_candidates: {}",
        h.host,
        h.nodename,
        h.free_ram_mb,
        h.free_disk_mb,
        h.num_io_ops,
        h.num_instances,
        h.allocation_candidates.len()
    )
}

fn opt_str<S: std::ops::Deref<Target = str>>(v: &Option<S>) -> PyValue {
    v.as_deref().map_or(PyValue::None, PyValue::str)
}

fn object(id: String, type_name: &'static str, truthy: bool) -> PyValue {
    PyValue::Object(Box::new(PyObject {
        id,
        type_name,
        truthy,
        str_value: None,
        attrs: Vec::new(),
    }))
}

/// `host_ip`: nova holds a `netaddr.IPAddress`: `str()` is the normalized address,
/// it equals only an IPAddress, is false for `0.0.0.0`/`::`, and has `version`/`value`.
fn ip_address(text: &str) -> PyValue {
    let (norm, version, value) = match text.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(a)) => (a.to_string(), 4, u128::from(u32::from(a))),
        Ok(std::net::IpAddr::V6(a)) => (a.to_string(), 6, u128::from(a)),
        // nova could not have built the HostState; keep the text as it is.
        Err(_) => (text.to_string(), 4, 1),
    };
    PyValue::Object(Box::new(PyObject {
        id: format!("IPAddress:{version}:{value}"),
        type_name: "IPAddress",
        truthy: value != 0,
        str_value: Some(norm),
        attrs: vec![
            ("version", PyValue::int(version)),
            ("value", PyValue::Int(PyInt::from_u128(value))),
        ],
    }))
}

fn datetime(t: &Option<DateTime<Utc>>) -> PyValue {
    t.map_or(PyValue::None, |t| PyValue::DateTime(t.timestamp_micros()))
}

/// `host_state.service`: nova's `ReadOnlyDict(dict(Service))`. Keys we do not hold
/// (`uuid`, `report_count`, `availability_zone`, ...) are absent here.
fn service_dict(h: &HostState) -> PyValue {
    let s = &h.service;
    let items = vec![
        ("id", PyValue::int(s.id)),
        ("host", PyValue::str(&s.host)),
        ("binary", PyValue::str("nova-compute")),
        ("topic", PyValue::str("compute")),
        ("disabled", PyValue::Bool(s.disabled)),
        ("disabled_reason", opt_str(&s.disabled_reason)),
        ("forced_down", PyValue::Bool(s.forced_down)),
        ("last_seen_up", datetime(&s.last_seen_up)),
        ("version", PyValue::int(s.version)),
        ("created_at", datetime(&s.created_at)),
        ("updated_at", datetime(&s.updated_at)),
        ("deleted_at", PyValue::None),
        ("deleted", PyValue::Bool(false)),
    ];
    PyValue::Dict(Box::new(PyDict {
        items: items.into_iter().map(|(k, v)| (PyStr::new(k), v)).collect(),
        user_dict: true,
    }))
}

fn str_dict<'a>(
    items: impl Iterator<Item = (&'a std::sync::Arc<str>, &'a std::sync::Arc<str>)>,
) -> PyValue {
    PyValue::Dict(Box::new(PyDict {
        items: items
            .map(|(k, v)| (PyStr::new(k), PyValue::str(v)))
            .collect(),
        user_dict: false,
    }))
}

/// `getattr(host_state, name, None)`: `None` for missing attributes and for
/// attributes holding None. Objects nova holds that the filters never look into
/// (NUMA topology, PCI stats, metrics, aggregates, instances, methods) come back as
/// opaque [`PyObject`]s compared by identity.
pub fn host_attr(h: &HostState, name: &str) -> PyValue {
    host_attr_as(h, name, LockName::Joined)
}

/// What `HostState._lock_name` is: the tuple `(host, node)` up to nova 33, the string
/// `'host-node'` from nova 34.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LockName {
    #[default]
    Joined,
    Tuple,
}

impl LockName {
    pub fn of(release: NovaSeries) -> LockName {
        if release.has(Behaviour::LockNameJoined) {
            LockName::Joined
        } else {
            LockName::Tuple
        }
    }
}

/// [`host_attr`] on the `HostState` of a release whose `_lock_name` is `lock_name`.
pub fn host_attr_as(h: &HostState, name: &str, lock_name: LockName) -> PyValue {
    let int = PyValue::int;
    match name {
        "_lock_name" if lock_name == LockName::Tuple => PyValue::Object(Box::new(PyObject {
            id: format!("_lock_name of {}/{}", h.host, h.nodename),
            type_name: "tuple",
            truthy: true,
            str_value: Some(format!(
                "({}, {})",
                crate::py::str::repr(&h.host),
                crate::py::str::repr(&h.nodename)
            )),
            attrs: Vec::new(),
        })),
        "host" => PyValue::str(&h.host),
        "nodename" => PyValue::str(&h.nodename),
        "uuid" => opt_str(&h.uuid),
        "cell_uuid" => PyValue::str(&h.cell_uuid),
        "_lock_name" => PyValue::str(&format!("{}-{}", h.host, h.nodename)),
        "total_usable_ram_mb" => int(h.total_usable_ram_mb),
        "total_usable_disk_gb" => int(h.total_usable_disk_gb),
        "disk_mb_used" => int(h.disk_mb_used),
        "free_ram_mb" => int(h.free_ram_mb),
        "free_disk_mb" => int(h.free_disk_mb),
        "vcpus_total" => int(h.vcpus_total),
        "vcpus_used" => int(h.vcpus_used),
        "num_instances" => int(h.num_instances),
        "num_io_ops" => int(h.num_io_ops),
        "failed_builds" => int(h.failed_builds),
        "host_ip" => h.host_ip.as_deref().map_or(PyValue::None, ip_address),
        "hypervisor_type" => opt_str(&h.hypervisor_type),
        "hypervisor_version" => h.hypervisor_version.map_or(PyValue::None, int),
        "hypervisor_hostname" => opt_str(&h.hypervisor_hostname),
        "cpu_info" => h.cpu_info.as_deref().map_or(PyValue::None, PyValue::str),
        "supported_instances" => PyValue::List(
            h.supported_instances
                .iter()
                .map(|spec| PyValue::List(spec.iter().map(|s| PyValue::str(s)).collect()))
                .collect(),
        ),
        "limits" => PyValue::Dict(Box::new(PyDict {
            items: h
                .limits
                .iter()
                .map(|(k, v)| (PyStr::new(k), PyValue::from_json(v)))
                .collect(),
            user_dict: false,
        })),
        "cpu_allocation_ratio" => PyValue::Float(h.cpu_allocation_ratio),
        "ram_allocation_ratio" => PyValue::Float(h.ram_allocation_ratio),
        "disk_allocation_ratio" => PyValue::Float(h.disk_allocation_ratio),
        "updated" => datetime(&h.updated),
        "allocation_candidates" => PyValue::List(
            h.allocation_candidates
                .iter()
                .map(|c| PyValue::from_json(c.json()))
                .collect(),
        ),
        "stats" => str_dict(h.stats.iter()),
        "service" => service_dict(h),
        "aggregates" => PyValue::List(
            h.aggregates
                .iter()
                .map(|a| object(format!("Aggregate:{}", a.id), "Aggregate", true))
                .collect(),
        ),
        "instances" => PyValue::Dict(Box::new(PyDict {
            items: h
                .instances
                .iter()
                .map(|u| {
                    (
                        PyStr::new(u),
                        object(format!("Instance:{u}"), "Instance", true),
                    )
                })
                .collect(),
            user_dict: false,
        })),
        "numa_topology" => h.numa_topology.as_ref().map_or(PyValue::None, |_| {
            object("numa_topology".into(), "NUMATopology", true)
        }),
        "pci_stats" => h.pci_stats.as_ref().map_or(PyValue::None, |_| {
            object("pci_stats".into(), "PciDeviceStats", true)
        }),
        "metrics" => h.metrics.as_ref().map_or(PyValue::None, |m| {
            let n = m.as_array().map_or(0, Vec::len);
            object("metrics".into(), "MonitorMetricList", n > 0)
        }),
        "__module__" => PyValue::str("nova.scheduler.host_manager"),
        "__doc__" => PyValue::str(HOST_STATE_DOC),
        "__weakref__" => PyValue::None,
        "update"
        | "consume_from_request"
        | "_locked_consume_from_request"
        | "_update_from_compute_node" => PyValue::Object(Box::new(PyObject {
            id: format!("method:{name}"),
            type_name: "method",
            truthy: true,
            str_value: Some(format!(
                "<bound method HostState.{name} of {}>",
                host_repr(h)
            )),
            attrs: Vec::new(),
        })),
        // The remaining dunders (type, method-wrappers, __dict__): opaque.
        n if host_has_attr(n) => object(format!("dunder:{n}"), "object", true),
        _ => PyValue::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::py::value::{py_eq, py_str};

    #[test]
    fn host_attributes() {
        let h = HostState {
            host: "h1".into(),
            nodename: "n1".into(),
            free_ram_mb: 1024,
            host_ip: Some("10.0.0.1".into()),
            cpu_allocation_ratio: 16.0,
            ..Default::default()
        };
        assert!(host_has_attr("free_ram_mb") && host_has_attr("update") && !host_has_attr("nope"));
        assert_eq!(
            py_str(&host_attr(&h, "free_ram_mb")).unwrap(),
            PyStr::new("1024")
        );
        assert_eq!(
            py_str(&host_attr(&h, "cpu_allocation_ratio")).unwrap(),
            PyStr::new("16.0")
        );
        assert_eq!(
            py_str(&host_attr(&h, "host_ip")).unwrap(),
            PyStr::new("10.0.0.1")
        );
        assert!(!py_eq(&host_attr(&h, "host_ip"), &PyValue::str("10.0.0.1")));
        assert!(host_attr(&h, "hypervisor_version").is_none());
        assert_eq!(
            py_str(&host_attr(&h, "update")).unwrap(),
            PyStr::new("<bound method HostState.update of (h1, n1) ram: 1024MB disk: 0MB io_ops: 0 instances: 0, allocation_candidates: 0>")
        );
    }
}
