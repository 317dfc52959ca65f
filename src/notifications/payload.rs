// SPDX-License-Identifier: Apache-2.0
//! The two payloads nova's scheduler sends about a `RequestSpec`, built from the spec's
//! object primitive exactly as nova 34 builds them from the `RequestSpec` object:
//!
//! - legacy: `{"request_spec": spec_obj.to_legacy_request_spec_dict()}` passed through
//!   nova's `JsonPayloadSerializer` (`jsonutils.to_primitive(convert_instances=True)`);
//! - versioned: `RequestSpecPayload(request_spec=spec_obj).obj_to_primitive()` (1.1) with
//!   its nested `FlavorPayload` 1.4, `ImageMetaPayload` 1.0 / `ImageMetaPropsPayload` (the
//!   release's: 1.13 in nova 29 to 1.20 in nova 34),
//!   `InstanceNUMATopologyPayload` 1.0, `InstancePCIRequestsPayload` 1.0,
//!   `ServerGroupPayload` 1.1, `DestinationPayload` 1.0, `SchedulerRetriesPayload` 1.0.
//!
//! Rule of nova's `populate_schema`: a source field that is not set becomes `null`.
//!
//! One deliberate difference: the legacy payload renders `pci_requests` (an object without
//! dict compatibility) from the object's attribute dict as nova does, but with `_context`
//! null; nova puts the caller's whole request context there, Keystone token included.

use crate::release::NovaSeries;
use chrono::{DateTime, FixedOffset};
use serde_json::{Map, Value};

const NAME: &str = "nova_object.name";
const VERSION: &str = "nova_object.version";
const DATA: &str = "nova_object.data";
const CHANGES: &str = "nova_object.changes";

/// `RequestSpecPayload.VERSION`.
pub const REQUEST_SPEC_PAYLOAD_VERSION: &str = "1.1";

/// The `RequestSpec` being scheduled, as nova's manager holds it between the `.start` and
/// `.end` notifications. Building the versioned payload changes it the way nova's
/// `RequestSpecPayload.__init__` changes the spec (see [`Self::versioned_payload`]).
#[derive(Clone, Debug)]
pub struct NotifiedSpec {
    spec: Value,
    /// The release whose payload versions are sent.
    series: NovaSeries,
}

impl NotifiedSpec {
    /// Wraps a `RequestSpec` primitive (`{"nova_object.name": "RequestSpec", ...}`),
    /// notified as `series`' scheduler notifies it.
    pub fn new(spec_primitive: Value, series: NovaSeries) -> Self {
        NotifiedSpec {
            spec: spec_primitive,
            series,
        }
    }

    /// The primitive as it now stands.
    pub fn primitive(&self) -> &Value {
        &self.spec
    }

    fn data(&self) -> Option<&Map<String, Value>> {
        data_of(&self.spec)
    }

    fn data_mut(&mut self) -> Option<&mut Map<String, Value>> {
        self.spec.get_mut(DATA).and_then(Value::as_object_mut)
    }

    /// `spec_obj.instance_uuid = uuid` (nova's `_schedule` does it per instance, so the
    /// `.end` notifications name the last instance).
    pub fn set_instance_uuid(&mut self, uuid: &str) {
        if let Some(d) = self.data_mut() {
            d.insert("instance_uuid".into(), Value::String(uuid.into()));
        }
    }

    /// Sets `requested_destination.aggregates` (a request filter required aggregates),
    /// creating the `Destination` when the spec had none, as `objects.Destination()`.
    pub fn set_destination_aggregates(&mut self, aggregates: &[String]) {
        let Some(d) = self.data_mut() else { return };
        let dest = d.entry("requested_destination").or_insert(Value::Null);
        if !dest.is_object() {
            *dest = serde_json::json!({
                NAME: "Destination", "nova_object.namespace": "nova",
                VERSION: "1.4", DATA: {}, CHANGES: [],
            });
        }
        if let Some(dd) = dest.get_mut(DATA).and_then(Value::as_object_mut) {
            dd.insert(
                "aggregates".into(),
                Value::Array(aggregates.iter().cloned().map(Value::String).collect()),
            );
        }
        add_change(dest, "aggregates");
    }

    /// `{"request_spec": spec_obj.to_legacy_request_spec_dict()}` after nova's
    /// `JsonPayloadSerializer`.
    pub fn legacy_payload(&self) -> Value {
        let empty = Map::new();
        let d = self.data().unwrap_or(&empty);
        let mut req = Map::new();
        req.insert(
            "num_instances".into(),
            d.get("num_instances").cloned().unwrap_or(Value::from(1)),
        );
        let image = match d.get("image") {
            Some(img) if truthy(img) => flatten_object(img),
            // (`_to_legacy_image` uses nova's `base.obj_to_primitive`: dicts all the way.)
            _ => Value::Object(Map::new()),
        };
        req.insert("image".into(), image);

        let mut instance = Map::new();
        for field in [
            "numa_topology",
            "pci_requests",
            "project_id",
            "user_id",
            "availability_zone",
            "instance_uuid",
        ] {
            let Some(v) = d.get(field) else { continue };
            let rendered = match field {
                "numa_topology" | "pci_requests" => to_primitive(v),
                _ => v.clone(),
            };
            let key = if field == "instance_uuid" {
                "uuid"
            } else {
                field
            };
            instance.insert(key.into(), rendered);
        }
        let flavor = d.get("flavor");
        if let Some(flavor) = flavor {
            let fd = data_of(flavor);
            for field in ["root_gb", "ephemeral_gb", "memory_mb", "vcpus"] {
                let v = fd
                    .and_then(|m| m.get(field))
                    .cloned()
                    .unwrap_or(Value::Null);
                instance.insert(field.into(), v);
            }
        }
        req.insert("instance_properties".into(), Value::Object(instance));
        req.insert(
            "instance_type".into(),
            flavor.map_or_else(|| Value::Object(Map::new()), to_primitive),
        );
        let mut payload = Map::new();
        payload.insert("request_spec".into(), Value::Object(req));
        Value::Object(payload)
    }

    /// `RequestSpecPayload(request_spec=spec_obj).obj_to_primitive()`.
    ///
    /// Like nova, this sets `instance_uuid` on the spec's `numa_topology` and
    /// `pci_requests` when they have none, so later legacy payloads show it too.
    pub fn versioned_payload(&mut self) -> Value {
        let instance_uuid = self
            .data()
            .and_then(|d| d.get("instance_uuid"))
            .cloned()
            .unwrap_or(Value::Null);
        if let Some(d) = self.data_mut() {
            for field in ["numa_topology", "pci_requests"] {
                if let Some(obj) = d.get_mut(field).filter(|v| v.is_object()) {
                    let unset = data_of(obj).is_some_and(|m| !m.contains_key("instance_uuid"));
                    if unset {
                        if let Some(m) = obj.get_mut(DATA).and_then(Value::as_object_mut) {
                            m.insert("instance_uuid".into(), instance_uuid.clone());
                        }
                        add_change(obj, "instance_uuid");
                    }
                }
            }
        }
        // InstancePCIRequest lazy-loads an unset field as None (`obj_load_attr`), so
        // reading the request for its payload sets it.
        if let Some(requests) = self
            .data_mut()
            .and_then(|d| d.get_mut("pci_requests"))
            .and_then(|p| p.get_mut(DATA))
            .and_then(|p| p.get_mut("requests"))
            .and_then(Value::as_array_mut)
        {
            for r in requests.iter_mut() {
                for f in PCI_REQUEST_PAYLOAD_FIELDS {
                    let unset = data_of(r).is_some_and(|m| !m.contains_key(*f));
                    if unset {
                        if let Some(m) = r.get_mut(DATA).and_then(Value::as_object_mut) {
                            m.insert((*f).into(), Value::Null);
                        }
                        add_change(r, f);
                    }
                }
            }
        }
        let empty = Map::new();
        let d = self.data().unwrap_or(&empty);
        let field = |name: &str| d.get(name).cloned().unwrap_or(Value::Null);
        let present = |name: &str| d.get(name).filter(|v| !v.is_null());

        let mut p = Map::new();
        p.insert("instance_uuid".into(), field("instance_uuid"));
        p.insert("project_id".into(), field("project_id"));
        p.insert("user_id".into(), field("user_id"));
        p.insert("availability_zone".into(), field("availability_zone"));
        p.insert(
            "flavor".into(),
            d.get("flavor").map_or(Value::Null, flavor_payload),
        );
        p.insert("force_hosts".into(), first_of(d.get("force_hosts")));
        p.insert("force_nodes".into(), first_of(d.get("force_nodes")));
        p.insert("ignore_hosts".into(), field("ignore_hosts"));
        p.insert(
            "instance_group".into(),
            present("instance_group").map_or(Value::Null, server_group_payload),
        );
        p.insert(
            "image".into(),
            present("image")
                .filter(|v| truthy(v))
                .map_or(Value::Null, |image| image_meta_payload(image, self.series)),
        );
        p.insert(
            "numa_topology".into(),
            present("numa_topology").map_or(Value::Null, numa_topology_payload),
        );
        p.insert(
            "pci_requests".into(),
            present("pci_requests").map_or(Value::Null, pci_requests_payload),
        );
        p.insert(
            "num_instances".into(),
            d.get("num_instances").cloned().unwrap_or(Value::from(1)),
        );
        p.insert(
            "requested_destination".into(),
            present("requested_destination").map_or(Value::Null, destination_payload),
        );
        p.insert(
            "retry".into(),
            present("retry").map_or(Value::Null, retry_payload),
        );
        p.insert("scheduler_hints".into(), field("scheduler_hints"));
        p.insert(
            "security_groups".into(),
            security_groups(d.get("security_groups")),
        );
        payload_object("RequestSpecPayload", REQUEST_SPEC_PAYLOAD_VERSION, p)
    }
}

fn data_of(v: &Value) -> Option<&Map<String, Value>> {
    v.get(DATA).and_then(Value::as_object)
}

fn add_change(obj: &mut Value, field: &str) {
    let Some(o) = obj.as_object_mut() else { return };
    let changes = o.entry(CHANGES).or_insert_with(|| Value::Array(Vec::new()));
    if let Some(list) = changes.as_array_mut() {
        if !list.iter().any(|c| c == field) {
            list.push(Value::String(field.into()));
        }
    }
}

/// Python truthiness of a field value (objects are always true).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Array(a) => !a.is_empty(),
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::Object(_) => true,
    }
}

fn is_object_primitive(v: &Value) -> bool {
    v.get(NAME).is_some() && v.get(DATA).is_some()
}

/// Datetime fields of the objects a legacy payload flattens (`ImageMeta`, `Flavor`).
fn is_datetime_field(object: &str, field: &str) -> bool {
    matches!(
        (object, field),
        ("ImageMeta", "created_at" | "updated_at")
            | ("Flavor", "created_at" | "updated_at" | "deleted_at")
    )
}

/// A datetime object as `jsonutils.to_primitive` writes it: `%Y-%m-%dT%H:%M:%S.%f`.
fn legacy_datetime(v: &Value) -> Value {
    match v.as_str().and_then(parse_datetime) {
        Some(t) => Value::String(t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()),
        None => v.clone(),
    }
}

fn parse_datetime(s: &str) -> Option<DateTime<FixedOffset>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .or_else(|| DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%z").ok())
        .or_else(|| {
            chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f")
                .ok()
                .map(|n| n.and_utc().fixed_offset())
        })
}

/// A versioned-object datetime as oslo's `DateTimeField` writes it (`utils.isotime`).
fn isotime(v: &Value) -> Value {
    match v.as_str().and_then(parse_datetime) {
        Some(t) => {
            let base = t.format("%Y-%m-%dT%H:%M:%S").to_string();
            let offset = t.offset().local_minus_utc();
            if offset == 0 {
                Value::String(format!("{base}Z"))
            } else {
                let sign = if offset < 0 { '-' } else { '+' };
                let o = offset.abs();
                Value::String(format!(
                    "{base}UTC{sign}{:02}:{:02}",
                    o / 3600,
                    (o % 3600) / 60
                ))
            }
        }
        None => v.clone(),
    }
}

/// A dict-compatible object (`NovaObjectDictCompat`) or `obj_to_primitive` result as
/// jsonutils renders it: the set fields, nested objects likewise, lists of objects as
/// lists.
fn flatten_object(v: &Value) -> Value {
    if !is_object_primitive(v) {
        return flatten_value(v);
    }
    let name = v.get(NAME).and_then(Value::as_str).unwrap_or("");
    let Some(d) = data_of(v) else {
        return Value::Object(Map::new());
    };
    if d.len() == 1 && d.contains_key("objects") && name.ends_with("List") {
        return flatten_value(&d["objects"]);
    }
    let mut out = Map::new();
    for (k, fv) in d {
        let rendered = if is_datetime_field(name, k) {
            legacy_datetime(fv)
        } else {
            flatten_value(fv)
        };
        out.insert(k.clone(), rendered);
    }
    Value::Object(out)
}

fn flatten_value(v: &Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(flatten_value).collect()),
        Value::Object(_) if is_object_primitive(v) => flatten_object(v),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), flatten_value(x)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Objects with `NovaObjectDictCompat` among those a legacy payload holds: jsonutils
/// renders them through `items()` (their set fields); other objects through `__dict__`.
const DICT_COMPAT: &[&str] = &["Flavor", "InstanceNUMATopology", "InstanceNUMACell"];

/// `jsonutils.to_primitive(value, convert_instances=True)` of an object field value.
fn to_primitive(v: &Value) -> Value {
    match v {
        Value::Array(items) => Value::Array(items.iter().map(to_primitive).collect()),
        x if is_object_primitive(x) => {
            let name = x.get(NAME).and_then(Value::as_str).unwrap_or("");
            if DICT_COMPAT.contains(&name) {
                let mut out = Map::new();
                for (k, fv) in data_of(x).into_iter().flatten() {
                    let rendered = if is_datetime_field(name, k) {
                        legacy_datetime(fv)
                    } else {
                        to_primitive(fv)
                    };
                    out.insert(k.clone(), rendered);
                }
                Value::Object(out)
            } else {
                attribute_dict(x)
            }
        }
        other => other.clone(),
    }
}

/// An object without dict compatibility (`InstancePCIRequests`, `VirtCPUTopology`, ...)
/// as jsonutils renders it: its `__dict__` (`VERSION` as received, `_changed_fields`,
/// `_context`, `_obj_<field>`).
fn attribute_dict(v: &Value) -> Value {
    let mut out = Map::new();
    if let Some(ver) = v.get(VERSION) {
        // obj_from_primitive stores the received version on the instance.
        out.insert("VERSION".into(), ver.clone());
    }
    out.insert(
        "_changed_fields".into(),
        v.get(CHANGES).cloned().unwrap_or(Value::Array(Vec::new())),
    );
    out.insert("_context".into(), Value::Null);
    for (k, fv) in data_of(v).into_iter().flatten() {
        out.insert(format!("_obj_{k}"), to_primitive(fv));
    }
    Value::Object(out)
}

fn payload_object(name: &str, version: &str, data: Map<String, Value>) -> Value {
    let mut o = Map::new();
    o.insert(NAME.into(), Value::String(name.into()));
    o.insert("nova_object.namespace".into(), Value::String("nova".into()));
    o.insert(VERSION.into(), Value::String(version.into()));
    o.insert(DATA.into(), Value::Object(data));
    Value::Object(o)
}

/// `populate_schema`: each listed source field, `null` when unset.
fn schema(src: Option<&Map<String, Value>>, fields: &[&str]) -> Map<String, Value> {
    fields
        .iter()
        .map(|f| {
            (
                (*f).to_string(),
                src.and_then(|m| m.get(*f)).cloned().unwrap_or(Value::Null),
            )
        })
        .collect()
}

fn first_of(v: Option<&Value>) -> Value {
    v.and_then(Value::as_array)
        .and_then(|a| a.first())
        .cloned()
        .unwrap_or(Value::Null)
}

fn flavor_payload(flavor: &Value) -> Value {
    let mut p = schema(
        data_of(flavor),
        &[
            "flavorid",
            "memory_mb",
            "vcpus",
            "root_gb",
            "ephemeral_gb",
            "name",
            "swap",
            "rxtx_factor",
            "vcpu_weight",
            "disabled",
            "is_public",
            "extra_specs",
            "projects",
            "description",
        ],
    );
    // FloatField: an integer on the wire is coerced to float.
    if let Some(f) = p.get("rxtx_factor").and_then(Value::as_f64) {
        p.insert("rxtx_factor".into(), Value::from(f));
    }
    payload_object("FlavorPayload", "1.4", p)
}

fn image_meta_payload(image: &Value, series: NovaSeries) -> Value {
    let d = data_of(image);
    let mut p = schema(
        d,
        &[
            "id",
            "name",
            "status",
            "visibility",
            "protected",
            "checksum",
            "owner",
            "size",
            "virtual_size",
            "container_format",
            "disk_format",
            "created_at",
            "updated_at",
            "tags",
            "direct_url",
            "min_ram",
            "min_disk",
        ],
    );
    for f in ["created_at", "updated_at"] {
        let v = p[f].clone();
        if !v.is_null() {
            p.insert(f.into(), isotime(&v));
        }
    }
    // ImageMetaPropsPayload: only the properties that are set (populate_schema with
    // set_none=False), minus the one nova leaves out. The caller's ImageMetaProps is
    // at its release's version, so the properties set are that release's.
    let mut props = Map::new();
    if let Some(pd) = d.and_then(|m| m.get("properties")).and_then(data_of) {
        for (k, v) in pd {
            if k != "hw_ephemeral_encryption_secret_uuid" {
                props.insert(k.clone(), v.clone());
            }
        }
    }
    p.insert(
        "properties".into(),
        payload_object(
            "ImageMetaPropsPayload",
            series.release().image_meta_props_payload,
            props,
        ),
    );
    payload_object("ImageMetaPayload", "1.0", p)
}

fn numa_topology_payload(topo: &Value) -> Value {
    let d = data_of(topo);
    let mut p = schema(d, &["instance_uuid", "emulator_threads_policy"]);
    let cells = d
        .and_then(|m| m.get("cells"))
        .and_then(Value::as_array)
        .map(|cells| cells.iter().map(numa_cell_payload).collect())
        .unwrap_or_default();
    p.insert("cells".into(), Value::Array(cells));
    payload_object("InstanceNUMATopologyPayload", "1.0", p)
}

fn numa_cell_payload(cell: &Value) -> Value {
    let d = data_of(cell);
    let mut p = schema(
        d,
        &[
            "id",
            "cpuset",
            "pcpuset",
            "cpuset_reserved",
            "memory",
            "pagesize",
            "cpu_pinning_raw",
            "cpu_policy",
            "cpu_thread_policy",
        ],
    );
    let topology = d
        .and_then(|m| m.get("cpu_topology"))
        .filter(|v| !v.is_null())
        .map_or(Value::Null, |t| {
            payload_object(
                "VirtCPUTopologyPayload",
                "1.0",
                schema(data_of(t), &["sockets", "cores", "threads"]),
            )
        });
    p.insert("cpu_topology".into(), topology);
    payload_object("InstanceNUMACellPayload", "1.2", p)
}

const PCI_REQUEST_PAYLOAD_FIELDS: &[&str] =
    &["count", "spec", "alias_name", "request_id", "numa_policy"];

fn pci_requests_payload(reqs: &Value) -> Value {
    let d = data_of(reqs);
    let mut p = schema(d, &["instance_uuid"]);
    let requests = d
        .and_then(|m| m.get("requests"))
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .map(|r| {
                    payload_object(
                        "InstancePCIRequestPayload",
                        "1.1",
                        schema(data_of(r), PCI_REQUEST_PAYLOAD_FIELDS),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    p.insert("requests".into(), Value::Array(requests));
    payload_object("InstancePCIRequestsPayload", "1.0", p)
}

fn server_group_payload(group: &Value) -> Value {
    let d = data_of(group);
    let mut p = schema(
        d,
        &[
            "uuid",
            "name",
            "user_id",
            "project_id",
            "policies",
            "members",
            "hosts",
            "policy",
        ],
    );
    // `InstanceGroup.rules` is a property over `_rules`: `{}` when unset, else only
    // `max_server_per_host` (as an int, written back as a string by DictOfStringsField).
    let mut rules = Map::new();
    let max = d
        .and_then(|m| m.get("_rules"))
        .and_then(|r| r.get("max_server_per_host"));
    if let Some(v) = max {
        let n = match v {
            Value::String(s) => crate::py::int::int_i64(s).ok(),
            Value::Number(n) => n.as_i64(),
            _ => None,
        };
        rules.insert(
            "max_server_per_host".into(),
            n.map_or_else(|| v.clone(), |n| Value::String(n.to_string())),
        );
    }
    p.insert("rules".into(), Value::Object(rules));
    payload_object("ServerGroupPayload", "1.1", p)
}

fn destination_payload(dest: &Value) -> Value {
    let d = data_of(dest);
    let mut p = Map::new();
    // host, node and cell are left unset (absent) unless set and not null.
    for f in ["host", "node"] {
        if let Some(v) = d.and_then(|m| m.get(f)).filter(|v| !v.is_null()) {
            p.insert(f.into(), v.clone());
        }
    }
    if let Some(cell) = d.and_then(|m| m.get("cell")).filter(|v| !v.is_null()) {
        p.insert(
            "cell".into(),
            payload_object(
                "CellMappingPayload",
                "2.0",
                schema(data_of(cell), &["uuid", "name", "disabled"]),
            ),
        );
    }
    p.insert(
        "aggregates".into(),
        d.and_then(|m| m.get("aggregates"))
            .cloned()
            .unwrap_or(Value::Null),
    );
    payload_object("DestinationPayload", "1.0", p)
}

fn retry_payload(retry: &Value) -> Value {
    let d = data_of(retry);
    let mut p = schema(d, &["num_attempts"]);
    let hosts = d
        .and_then(|m| m.get("hosts"))
        .and_then(data_of)
        .and_then(|m| m.get("objects"))
        .and_then(Value::as_array)
        .map(|nodes| {
            nodes
                .iter()
                .map(|n| {
                    data_of(n)
                        .and_then(|m| m.get("hypervisor_hostname"))
                        .cloned()
                        .unwrap_or(Value::Null)
                })
                .collect()
        })
        .unwrap_or_default();
    p.insert("hosts".into(), Value::Array(hosts));
    payload_object("SchedulerRetriesPayload", "1.0", p)
}

/// `[sg.identifier for sg in spec.security_groups]`: the uuid when set, else the name.
fn security_groups(v: Option<&Value>) -> Value {
    let groups = v
        .and_then(data_of)
        .and_then(|m| m.get("objects"))
        .and_then(Value::as_array)
        .map(|gs| {
            gs.iter()
                .map(|g| {
                    let d = data_of(g);
                    d.and_then(|m| m.get("uuid"))
                        .or_else(|| d.and_then(|m| m.get("name")))
                        .cloned()
                        .unwrap_or(Value::Null)
                })
                .collect()
        })
        .unwrap_or_default();
    Value::Array(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(name: &str, version: &str, data: Value) -> Value {
        json!({NAME: name, "nova_object.namespace": "nova", VERSION: version, DATA: data})
    }

    #[test]
    fn datetimes_in_both_formats() {
        assert_eq!(
            legacy_datetime(&json!("2026-01-01T00:00:00Z")),
            json!("2026-01-01T00:00:00.000000")
        );
        assert_eq!(
            isotime(&json!("2026-01-01T00:00:00.123+00:00")),
            json!("2026-01-01T00:00:00Z")
        );
    }

    #[test]
    fn versioned_payload_sets_instance_uuid_on_numa_and_pci() {
        let spec = obj(
            "RequestSpec",
            "1.15",
            json!({
                "instance_uuid": "u1",
                "flavor": obj("Flavor", "1.2", json!({"name": "f", "rxtx_factor": 1})),
                "pci_requests": obj("InstancePCIRequests", "1.1", json!({"requests": []})),
            }),
        );
        let mut s = NotifiedSpec::new(spec, NovaSeries::NEWEST);
        let before = s.legacy_payload();
        assert_eq!(
            before["request_spec"]["instance_properties"]["pci_requests"]["_changed_fields"],
            json!([])
        );
        let v = s.versioned_payload();
        assert_eq!(v[DATA]["pci_requests"][DATA]["instance_uuid"], "u1");
        assert_eq!(v[DATA]["flavor"][DATA]["rxtx_factor"], json!(1.0));
        assert_eq!(v[DATA]["security_groups"], json!([]));
        let after = s.legacy_payload();
        let pci = &after["request_spec"]["instance_properties"]["pci_requests"];
        assert_eq!(pci["_obj_instance_uuid"], "u1");
        assert_eq!(pci["_changed_fields"], json!(["instance_uuid"]));
    }

    #[test]
    fn destination_created_for_required_aggregates() {
        let spec = obj(
            "RequestSpec",
            "1.15",
            json!({"requested_destination": null}),
        );
        let mut s = NotifiedSpec::new(spec, NovaSeries::NEWEST);
        s.set_destination_aggregates(&["a,b".into()]);
        let v = s.versioned_payload();
        assert_eq!(
            v[DATA]["requested_destination"][DATA],
            json!({"aggregates": ["a,b"]})
        );
    }

    #[test]
    fn image_properties_payload_carries_the_releases_version() {
        let image = obj(
            "ImageMeta",
            "1.8",
            json!({"properties": obj("ImageMetaProps", "1.37", json!({"hw_machine_type": "q35"}))}),
        );
        let spec = obj("RequestSpec", "1.15", json!({"image": image}));
        for (series, version) in [
            (NovaSeries::V2024_1, "1.13"),
            (NovaSeries::V2025_1, "1.15"),
            (NovaSeries::V2026_2, "1.20"),
        ] {
            let v = NotifiedSpec::new(spec.clone(), series).versioned_payload();
            let props = &v[DATA]["image"][DATA]["properties"];
            assert_eq!(props[NAME], "ImageMetaPropsPayload");
            assert_eq!(props[VERSION], version, "{series}");
            assert_eq!(props[DATA], json!({"hw_machine_type": "q35"}));
        }
    }
}
