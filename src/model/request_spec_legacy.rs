// SPDX-License-Identifier: Apache-2.0
//! nova's `RequestSpec.from_primitives`: the legacy `request_spec` / `filter_properties`
//! dicts that `select_destinations` receives from conductors pinned below RPC 4.3.
//!
//! Each nested value may arrive as a versioned-object envelope (what nova's serializer
//! makes of an object) or as a plain dict (what `build_request_spec` makes); both are read.

use super::request_spec::{Destination, Flavor, ImageMeta, InstanceGroup, RequestSpec};
use crate::py::object::{DecodeError, Fields};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

impl RequestSpec {
    pub fn from_legacy(
        request_spec: &Value,
        filter_properties: &Value,
    ) -> Result<Self, DecodeError> {
        let rs = as_dict(request_spec, "request_spec")?;
        let fp = match filter_properties {
            Value::Null => Map::new(),
            other => as_dict(other, "filter_properties")?.clone(),
        };
        let mut spec = RequestSpec {
            num_instances: Fields::new("request_spec", rs)
                .int("num_instances")?
                .unwrap_or(1),
            ..Default::default()
        };
        spec.image = match rs.get("image") {
            Some(v) if is_object(v, "ImageMeta") => Some(ImageMeta::from_primitive(v)?),
            Some(Value::Object(m)) => Some(image_from_dict(m)?),
            _ => None,
        };
        if let Some(instance) = rs.get("instance_properties").filter(|v| !v.is_null()) {
            let data = data_or_dict(instance, "Instance")?;
            let f = Fields::new("instance_properties", data);
            spec.instance_uuid = f.str("uuid")?;
            spec.project_id = f.str("project_id")?;
            spec.user_id = f.str("user_id")?;
            spec.availability_zone = f.str("availability_zone")?;
            spec.numa_topology = match f.get("numa_topology") {
                // The resource tracker's legacy form: JSON text of the object.
                Some(Value::String(text)) => Some(serde_json::from_str(text).map_err(|e| {
                    DecodeError::new(format!("instance_properties.numa_topology: {e}"))
                })?),
                other => other.cloned(),
            };
            spec.pci_requests = f.get("pci_requests").cloned();
        }
        spec.flavor = match rs.get("instance_type") {
            Some(v) if is_object(v, "Flavor") => Flavor::from_primitive(v)?,
            Some(Value::Object(m)) => flavor_from_dict(m)?,
            _ => {
                return Err(DecodeError::new(
                    "request_spec.instance_type: required flavor is missing",
                ))
            }
        };
        let f = Fields::new("filter_properties", &fp);
        spec.ignore_hosts = f.strings("ignore_hosts")?.unwrap_or_default();
        spec.force_hosts = f.strings("force_hosts")?.unwrap_or_default();
        spec.force_nodes = f.strings("force_nodes")?.unwrap_or_default();
        spec.instance_group = legacy_group(&fp)?;
        spec.scheduler_hints = match fp.get("scheduler_hints") {
            None => Some(BTreeMap::new()),
            Some(Value::Null) => None,
            Some(Value::Object(hints)) => Some(
                hints
                    .iter()
                    .map(|(k, v)| {
                        let items = match v {
                            Value::Array(a) => a.iter().map(hint_item).collect(),
                            other => vec![hint_item(other)],
                        };
                        (k.clone(), items)
                    })
                    .collect(),
            ),
            Some(_) => {
                return Err(DecodeError::new(
                    "filter_properties.scheduler_hints: expected a dict",
                ))
            }
        };
        if let Some(hints) = &spec.scheduler_hints {
            super::request_spec::check_hint_bounds(hints)?;
        }
        spec.requested_destination = fp
            .get("requested_destination")
            .filter(|v| !v.is_null())
            .map(Destination::from_primitive)
            .transpose()?;
        Ok(spec)
    }
}

fn hint_item(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `_populate_group_info`: an `instance_group` object, or the old `group_*` keys.
fn legacy_group(fp: &Map<String, Value>) -> Result<Option<InstanceGroup>, DecodeError> {
    if let Some(group) = fp
        .get("instance_group")
        .filter(|v| !v.is_null() && v != &&Value::Bool(false))
    {
        return InstanceGroup::from_primitive(group).map(Some);
    }
    if fp.get("group_updated") != Some(&Value::Bool(true)) {
        return Ok(None);
    }
    let f = Fields::new("filter_properties", fp);
    let policies = f.strings("group_policies")?.unwrap_or_default();
    let policy = policies.first().cloned().ok_or_else(|| {
        DecodeError::new("filter_properties.group_policies: empty with group_updated")
    })?;
    Ok(Some(InstanceGroup {
        uuid: f.str("group_uuid")?,
        policy: Some(policy.clone()),
        policies: vec![policy],
        members: f.strings("group_members")?.unwrap_or_default(),
        hosts: f.strings("group_hosts")?.unwrap_or_default(),
        hosts_unset: false,
        rules: BTreeMap::new(),
    }))
}

fn flavor_from_dict(m: &Map<String, Value>) -> Result<Flavor, DecodeError> {
    let f = Fields::new("instance_type", m);
    Ok(Flavor {
        id: f.int("id")?,
        name: f.str("name")?,
        flavorid: f.str("flavorid")?,
        memory_mb: f.int("memory_mb")?.unwrap_or(0),
        vcpus: f.int("vcpus")?.unwrap_or(0),
        root_gb: f.int("root_gb")?.unwrap_or(0),
        ephemeral_gb: f.int("ephemeral_gb")?.unwrap_or(0),
        swap: f.int("swap")?.unwrap_or(0),
        extra_specs: f
            .string_map("extra_specs")?
            .unwrap_or_default()
            .into_iter()
            .collect(),
    })
}

/// `ImageMeta.from_dict`: plain fields, `properties` a plain dict.
fn image_from_dict(m: &Map<String, Value>) -> Result<ImageMeta, DecodeError> {
    let f = Fields::new("image", m);
    let properties = match m.get("properties") {
        Some(Value::Object(p)) => p.clone(),
        _ => Map::new(),
    };
    Ok(ImageMeta {
        id: f.str("id")?,
        name: f.str("name")?,
        disk_format: f.str("disk_format")?,
        properties,
    })
}

fn is_object(v: &Value, name: &str) -> bool {
    v.get("nova_object.name").and_then(Value::as_str) == Some(name)
}

fn as_dict<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>, DecodeError> {
    v.as_object()
        .ok_or_else(|| DecodeError::new(format!("{what}: expected a dict")))
}

fn data_or_dict<'a>(v: &'a Value, name: &str) -> Result<&'a Map<String, Value>, DecodeError> {
    if is_object(v, name) {
        v.get("nova_object.data")
            .and_then(Value::as_object)
            .ok_or_else(|| DecodeError::new(format!("{name}: missing nova_object.data")))
    } else {
        as_dict(v, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn build_request_spec_dicts() {
        let request_spec = json!({
            "num_instances": 2,
            "image": {"id": "img", "disk_format": "qcow2", "properties": {"hw_disk_bus": "virtio"}},
            "instance_properties": {"uuid": "u1", "project_id": "p", "user_id": "u", "availability_zone": "az1",
                                    "numa_topology": null, "pci_requests": null},
            "instance_type": {"memory_mb": 2048, "vcpus": 2, "root_gb": 20, "ephemeral_gb": 0, "swap": 0,
                              "extra_specs": {"a": "b"}}
        });
        let filter_properties = json!({
            "ignore_hosts": ["h9"], "force_hosts": null,
            "scheduler_hints": {"same_host": "u0", "different_host": ["u2", "u3"]},
            "group_updated": true, "group_policies": ["anti-affinity"], "group_hosts": ["h1"],
            "group_members": ["u0"], "group_uuid": "g"
        });
        let spec = RequestSpec::from_legacy(&request_spec, &filter_properties).expect("decode");
        assert_eq!(spec.num_instances, 2);
        assert_eq!(spec.flavor.memory_mb, 2048);
        assert_eq!(spec.instance_uuid.as_deref(), Some("u1"));
        assert_eq!(spec.ignore_hosts, vec!["h9"]);
        assert_eq!(spec.hint("same_host"), Some(&["u0".to_string()][..]));
        assert_eq!(spec.hint("different_host").map(<[String]>::len), Some(2));
        let g = spec.instance_group.expect("group");
        assert_eq!(
            (g.policy.as_deref(), g.uuid.as_deref()),
            (Some("anti-affinity"), Some("g"))
        );
        assert_eq!(
            spec.image.expect("image").properties["hw_disk_bus"],
            json!("virtio")
        );
    }

    #[test]
    fn flavor_is_required_and_envelopes_are_read() {
        assert!(RequestSpec::from_legacy(&json!({}), &json!({})).is_err());
        let flavor = json!({"nova_object.name": "Flavor", "nova_object.namespace": "nova", "nova_object.version": "1.2",
                            "nova_object.data": {"memory_mb": 512, "vcpus": 1, "root_gb": 1, "ephemeral_gb": 0, "swap": 0}});
        let spec = RequestSpec::from_legacy(&json!({"instance_type": flavor}), &Value::Null)
            .expect("decode");
        assert_eq!(spec.flavor.vcpus, 1);
        assert_eq!(spec.num_instances, 1);
        assert!(spec.instance_group.is_none());
    }
}
