// SPDX-License-Identifier: Apache-2.0
//! `AggregateImagePropertiesIsolation`: for every aggregate metadata key of the host
//! that names an image property the image sets (truthy), the property's `str()` must
//! be one of the key's comma-separated values.

use super::utils::aggregate_metadata_get_by_host;
use super::{FilterRequest, HostFilter};
use crate::model::fields::{canonical_architecture, canonical_hv_type, canonical_vm_mode};
use crate::model::{HostState, RequestSpec};
use crate::py;
use crate::py::int::PyInt;
use crate::py::PyError;
use serde_json::{Map, Value};
use tracing::{debug, warn};

pub struct AggregateImagePropertiesIsolation {
    /// `aggregate_image_properties_isolation_namespace` (deprecated; None).
    pub namespace: Option<String>,
    /// `aggregate_image_properties_isolation_separator` (".").
    pub separator: String,
}

impl AggregateImagePropertiesIsolation {
    pub const NAME: &'static str = "AggregateImagePropertiesIsolation";

    pub fn new(namespace: Option<String>, separator: String) -> Self {
        if namespace.as_deref().is_some_and(|n| !n.is_empty()) {
            // nova logs this on every host_passes call; once is enough here.
            warn!(
                "It is no longer possible to filter on arbitrary image metadata properties, which includes standard properties prefixed with '[filter_scheduler] aggregate_image_properties_isolation_namespace'. You should unset this option and consider using the isolated aggregate filtering feature instead. See '[scheduler] enable_isolated_aggregate_filtering' for more information."
            );
        }
        AggregateImagePropertiesIsolation {
            namespace,
            separator,
        }
    }

    /// nova's `host_passes`; `Err` where nova raises (or could not hold the value).
    pub fn check(&self, host: &HostState, spec: &RequestSpec) -> Result<bool, PyError> {
        let empty = Map::new();
        let props = spec.image.as_ref().map_or(&empty, |i| &i.properties);
        let prefix = self
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .map(|n| format!("{n}{}", self.separator));
        for (key, options) in aggregate_metadata_get_by_host(host, None) {
            if prefix.as_deref().is_some_and(|p| !key.starts_with(p)) {
                continue;
            }
            // Keys that are not image properties (availability_zone, ...) give None.
            let Some(prop) = props.get(&key) else {
                continue;
            };
            let Some(text) = prop_str(&key, prop)? else {
                continue; // falsy values are never checked
            };
            if !options.contains(&text) {
                debug!(host = %host.host, node = %host.nodename, property = %key, value = %text, options = ?options,
                       "fails image aggregate properties requirements");
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl HostFilter for AggregateImagePropertiesIsolation {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        self.check(host, req.spec).unwrap_or_else(|e| {
            warn!(host = %host.host, error = %e,
                  "AggregateImagePropertiesIsolation: image property nova would reject; host fails");
            false
        })
    }

    fn run_on_rebuild(&self) -> bool {
        true
    }

    fn once_per_request(&self) -> bool {
        true
    }
}

/// `ImageMetaProps` fields of type FlexibleBooleanField (nova 34).
const BOOLEAN_PROPS: &[&str] = &[
    "hw_boot_menu",
    "hw_ephemeral_encryption",
    "hw_firmware_stateless",
    "hw_ipxe_boot",
    "hw_locked_memory",
    "hw_mem_encryption",
    "hw_pmu",
    "hw_qemu_guest_agent",
    "hw_time_hpet",
    "hw_vif_multiqueue_enabled",
    "hw_virtio_packed_ring",
    "img_bdm_v2",
    "img_bittorrent",
    "img_cache_in_nova",
    "img_hide_hypervisor_id",
    "img_linked_clone",
    "img_use_agent",
    "os_require_quiesce",
    "os_skip_agent_inject_files_at_boot",
    "os_skip_agent_inject_ssh",
];

/// `ImageMetaProps` fields of type IntegerField (nova 34).
const INTEGER_PROPS: &[&str] = &[
    "hw_cpu_cores",
    "hw_cpu_max_cores",
    "hw_cpu_max_sockets",
    "hw_cpu_max_threads",
    "hw_cpu_sockets",
    "hw_cpu_threads",
    "hw_device_id",
    "hw_maxphysaddr_bits",
    "hw_numa_nodes",
    "hw_redirected_usb_ports",
    "hw_serial_port_count",
    "hw_video_ram",
    "img_compression_level",
    "img_version",
];

/// `str(prop)` of the property as nova's typed field holds it (booleans `True`,
/// integers in decimal, lists as Python's repr, canonical architecture / hypervisor
/// type / VM mode names), or None when the value is falsy (or JSON null).
fn prop_str(key: &str, value: &Value) -> Result<Option<String>, PyError> {
    let text = match (key, value) {
        (_, Value::Null) => return Ok(None),
        ("hw_architecture" | "hw_emulation_architecture", Value::String(s)) => {
            canonical_architecture(s)?
        }
        ("img_hv_type", Value::String(s)) => canonical_hv_type(s)?,
        ("hw_vm_mode", Value::String(s)) => canonical_vm_mode(s)?,
        (k, v) if BOOLEAN_PROPS.contains(&k) => {
            // oslo strutils.bool_from_string (non-strict): anything else is False.
            let truthy = match v {
                Value::Bool(b) => *b,
                Value::String(s) => py::strutils::bool_from_string(s),
                other => py::strutils::bool_from_string(&python_repr(other, false)),
            };
            if !truthy {
                return Ok(None);
            }
            "True".to_string()
        }
        (k, v) if INTEGER_PROPS.contains(&k) => {
            // `int(value)`, printed by `str()`: unbounded, as Python's.
            let n = match v {
                Value::Bool(b) => PyInt::Small(i64::from(*b)),
                Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                    (Some(i), _, _) => PyInt::Small(i),
                    (None, Some(u), _) => PyInt::from_u128(u128::from(u)),
                    (None, None, Some(f)) if f.is_finite() => PyInt::Small(f.trunc() as i64),
                    _ => return Err(PyError::value_error(format!("{key}: not an integer"))),
                },
                Value::String(s) => py::int::int(s)?,
                _ => return Err(PyError::value_error(format!("{key}: not an integer"))),
            };
            if n.is_zero() {
                return Ok(None);
            }
            n.to_string()
        }
        (_, Value::String(s)) => s.clone(),
        (_, Value::Bool(false)) => return Ok(None),
        (_, Value::Bool(true)) => "True".to_string(),
        (_, Value::Number(n)) => {
            if n.as_f64() == Some(0.0) {
                return Ok(None);
            }
            python_repr(value, false)
        }
        (k, Value::Array(items)) => {
            if items.is_empty() {
                return Ok(None);
            }
            // hw_numa_cpus is a list of *sets* of integers.
            python_list_repr(items, k == "hw_numa_cpus")
        }
        (_, Value::Object(m)) => {
            if m.is_empty() {
                return Ok(None);
            }
            python_repr(value, false)
        }
    };
    Ok((!text.is_empty()).then_some(text))
}

fn python_list_repr(items: &[Value], sets: bool) -> String {
    let parts: Vec<String> = items
        .iter()
        .map(|item| match (sets, item) {
            (true, Value::Array(members)) => {
                if members.is_empty() {
                    return "set()".to_string();
                }
                // CPython iterates small non-negative ints of a set in ascending
                // order; larger or colliding values may differ (not reproduced).
                let mut ints: Vec<&Value> = members.iter().collect();
                ints.sort_by(|a, b| {
                    a.as_f64()
                        .partial_cmp(&b.as_f64())
                        .unwrap_or(std::cmp::Ordering::Equal)
                });
                ints.dedup();
                let inner: Vec<String> = ints.iter().map(|v| python_repr(v, true)).collect();
                format!("{{{}}}", inner.join(", "))
            }
            _ => python_repr(item, true),
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// Python's `repr()` of a JSON value (`str()` at top level when `nested` is false).
fn python_repr(value: &Value, nested: bool) -> String {
    if nested {
        py::value::json_repr(value)
    } else {
        py::value::json_str(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Aggregate, ImageMeta, RequestSpec};
    use chrono::Utc;
    use serde_json::json;
    use std::sync::Arc;

    fn run(
        filter: &AggregateImagePropertiesIsolation,
        aggs: &[&[(&str, &str)]],
        image: Option<Value>,
    ) -> Result<bool, PyError> {
        let spec = RequestSpec {
            image: image.map(|p| ImageMeta {
                properties: p.as_object().cloned().unwrap_or_default(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let host = HostState {
            host: "host1".into(),
            aggregates: aggs
                .iter()
                .map(|md| {
                    Arc::new(Aggregate {
                        metadata: md
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                        ..Default::default()
                    })
                })
                .collect(),
            ..Default::default()
        };
        filter.check(&host, req.spec)
    }

    fn default_filter() -> AggregateImagePropertiesIsolation {
        AggregateImagePropertiesIsolation::new(None, ".".into())
    }

    /// nova's test_aggregate_image_properties_isolation_filters.
    #[test]
    fn nova_vectors() {
        let f = default_filter();
        let hvm: &[(&str, &str)] = &[("hw_vm_mode", "hvm")];
        assert_eq!(
            run(&f, &[hvm], Some(json!({"hw_vm_mode": "hvm"}))),
            Ok(true)
        );
        assert_eq!(
            run(&f, &[hvm], Some(json!({"hw_vm_mode": "xen"}))),
            Ok(false)
        );
        assert_eq!(
            run(
                &f,
                &[&[("hw_vm_mode", "hvm,xen")]],
                Some(json!({"hw_vm_mode": "hvm"}))
            ),
            Ok(true)
        );
        assert_eq!(
            run(
                &f,
                &[hvm, &[("hw_vm_mode", "xen")]],
                Some(json!({"hw_vm_mode": "xen"}))
            ),
            Ok(true)
        );
        let distro: &[(&str, &str)] = &[("os_distro", "windows,linux")];
        assert_eq!(
            run(&f, &[distro], Some(json!({"os_distro": "windows,"}))),
            Ok(false)
        );
        assert_eq!(
            run(&f, &[distro], Some(json!({"os_distro": "windows"}))),
            Ok(true)
        );
        let cores: &[(&str, &str)] = &[("hw_vm_mode", "hvm"), ("hw_cpu_cores", "1")];
        assert_eq!(
            run(
                &f,
                &[cores],
                Some(json!({"hw_vm_mode": "hvm", "hw_cpu_cores": 2}))
            ),
            Ok(false)
        );
        let cores2: &[(&str, &str)] = &[("hw_vm_mode", "hvm"), ("hw_cpu_cores", "2")];
        assert_eq!(
            run(
                &f,
                &[cores2],
                Some(json!({"hw_vm_mode": "hvm", "hw_cpu_cores": 2}))
            ),
            Ok(true)
        );
        // Namespace 'hw' with separator '_': keys outside it are not checked.
        let ns = AggregateImagePropertiesIsolation::new(Some("hw".into()), "_".into());
        let md: &[(&str, &str)] = &[("hw_vm_mode", "hvm"), ("img_owner_id", "foo")];
        assert_eq!(
            run(
                &ns,
                &[md],
                Some(json!({"hw_vm_mode": "hvm", "img_owner_id": "wrong"}))
            ),
            Ok(true)
        );
        assert_eq!(
            run(
                &ns,
                &[md],
                Some(json!({"hw_vm_mode": "xen", "img_owner_id": "foo"}))
            ),
            Ok(false)
        );
        // Unknown property names and images without the property pass.
        assert_eq!(
            run(
                &f,
                &[&[("os", "linux")]],
                Some(json!({"os_distro": "windows"}))
            ),
            Ok(true)
        );
        assert_eq!(run(&f, &[hvm], Some(json!({}))), Ok(true));
        assert_eq!(run(&f, &[hvm], None), Ok(true));
        assert!(f.once_per_request());
        assert!(f.run_on_rebuild());
    }

    #[test]
    fn python_str_of_typed_values() {
        let f = default_filter();
        // Falsy values are never checked.
        assert_eq!(
            run(
                &f,
                &[&[("hw_cpu_cores", "4")]],
                Some(json!({"hw_cpu_cores": 0}))
            ),
            Ok(true)
        );
        assert_eq!(
            run(&f, &[&[("hw_pmu", "True")]], Some(json!({"hw_pmu": false}))),
            Ok(true)
        );
        assert_eq!(
            run(&f, &[&[("os_distro", "x")]], Some(json!({"os_distro": ""}))),
            Ok(true)
        );
        // Booleans compare as 'True'; case matters.
        assert_eq!(
            run(&f, &[&[("hw_pmu", "True")]], Some(json!({"hw_pmu": true}))),
            Ok(true)
        );
        assert_eq!(
            run(&f, &[&[("hw_pmu", "true")]], Some(json!({"hw_pmu": true}))),
            Ok(false)
        );
        assert_eq!(
            run(&f, &[&[("hw_pmu", "True")]], Some(json!({"hw_pmu": "yes"}))),
            Ok(true)
        );
        // Canonical names, lists as Python repr.
        assert_eq!(
            run(
                &f,
                &[&[("hw_architecture", "x86_64")]],
                Some(json!({"hw_architecture": "AMD64"}))
            ),
            Ok(true)
        );
        assert_eq!(
            run(
                &f,
                &[&[("hw_numa_mem", "[1024, 2048]")]],
                Some(json!({"hw_numa_mem": [1024, 2048]}))
            ),
            Ok(false),
            "'[1024' and '2048]' after the comma split"
        );
        assert_eq!(
            prop_str("hw_numa_cpus", &json!([[1, 0], [3, 2]])),
            Ok(Some("[{0, 1}, {2, 3}]".into()))
        );
        assert_eq!(
            prop_str("traits_required", &json!(["A", "it's"])),
            Ok(Some("['A', \"it's\"]".into()))
        );
        assert_eq!(
            prop_str("img_mappings", &json!([{"a": "b", "c": null}])),
            Ok(Some("[{'a': 'b', 'c': None}]".into()))
        );
        assert_eq!(prop_str("hw_cpu_cores", &json!("3")), Ok(Some("3".into())));
        assert!(prop_str("hw_vm_mode", &json!("nope")).is_err());
    }
}
