// SPDX-License-Identifier: Apache-2.0
//! `RequestSpec` (1.x) and the objects nested in it, decoded from nova's primitives.
//!
//! Decoding is tolerant, as nova's own object loading is: any 1.x version, missing
//! fields take nova's lazy defaults, unknown fields are ignored. Objects the core does
//! not interpret yet (NUMA topology, PCI requests) are kept as raw JSON.

use crate::py::object::{object_data, DecodeError, Fields};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// nova's `Flavor` (1.2): the sizes the scheduler consumes and the extra specs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Flavor {
    pub id: Option<i64>,
    pub name: Option<String>,
    pub flavorid: Option<String>,
    pub memory_mb: i64,
    pub vcpus: i64,
    pub root_gb: i64,
    pub ephemeral_gb: i64,
    /// Swap in MB.
    pub swap: i64,
    pub extra_specs: BTreeMap<String, String>,
}

/// nova's `ImageMeta` (1.8). `properties` keeps the set ImageMetaProps fields as JSON.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ImageMeta {
    pub id: Option<String>,
    pub name: Option<String>,
    pub disk_format: Option<String>,
    pub properties: Map<String, Value>,
}

/// nova's `InstanceGroup` (1.11) as filled by the conductor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InstanceGroup {
    pub uuid: Option<String>,
    pub policy: Option<String>,
    /// Deprecated `policies` list; ServerGroupAffinityFilter still reads it.
    pub policies: Vec<String>,
    pub members: Vec<String>,
    pub hosts: Vec<String>,
    /// `hosts` was absent from the primitive. nova then lazy-loads it on first use
    /// (`InstanceGroup.obj_load_attr` -> `get_hosts()`, a database read); the manager
    /// does that read before scheduling.
    pub hosts_unset: bool,
    /// `_rules` on the wire, e.g. `max_server_per_host`.
    pub rules: BTreeMap<String, String>,
}

/// nova's `Destination` (1.4).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Destination {
    pub host: Option<String>,
    pub node: Option<String>,
    /// Uuid of the `cell` CellMapping, when set.
    pub cell_uuid: Option<String>,
    pub aggregates: Vec<String>,
    pub forbidden_aggregates: BTreeSet<String>,
    pub allow_cross_cell_move: bool,
}

/// nova's `RequestGroup` (1.3).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestGroup {
    pub requester_id: Option<String>,
    pub use_same_provider: bool,
    pub resources: BTreeMap<String, i64>,
    pub required_traits: BTreeSet<String>,
    pub forbidden_traits: BTreeSet<String>,
    pub aggregates: Vec<Vec<String>>,
    pub forbidden_aggregates: BTreeSet<String>,
    pub provider_uuids: Vec<String>,
    pub in_tree: Option<String>,
}

/// nova's `RequestLevelParams` (1.1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestLevelParams {
    pub root_required: BTreeSet<String>,
    pub root_forbidden: BTreeSet<String>,
    pub same_subtree: Vec<Vec<String>>,
}

/// nova's `NetworkRequest` (1.3): the part the request filters look at.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetworkRequest {
    pub network_id: Option<String>,
    pub port_id: Option<String>,
}

/// What the scheduler reads of nova's `RequestSpec`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestSpec {
    pub id: Option<i64>,
    pub instance_uuid: Option<String>,
    pub num_instances: i64,
    pub project_id: Option<String>,
    pub user_id: Option<String>,
    pub availability_zone: Option<String>,
    pub flavor: Flavor,
    /// `None` when unset or null.
    pub image: Option<ImageMeta>,
    pub ignore_hosts: Vec<String>,
    pub force_hosts: Vec<String>,
    pub force_nodes: Vec<String>,
    pub requested_destination: Option<Destination>,
    pub instance_group: Option<InstanceGroup>,
    /// Every hint value is a list of strings (DictOfListOfStrings); `None` if unset/null.
    pub scheduler_hints: Option<BTreeMap<String, Vec<String>>>,
    /// Unset means "not boot-from-volume", as nova reads it.
    pub is_bfv: bool,
    pub requested_resources: Vec<RequestGroup>,
    pub request_level_params: RequestLevelParams,
    pub numa_topology: Option<Value>,
    pub pci_requests: Option<Value>,
    /// `retry.hosts` as `(host, hypervisor_hostname)` pairs (legacy RetryFilter);
    /// `None` when the spec has no `retry`.
    pub retry_hosts: Option<Vec<TriedNode>>,
    /// `NetworkMetadata` primitive (physnets / tunneled affinity), when set.
    pub network_metadata: Option<Value>,
    /// `requested_networks` (a `NetworkRequestList`); empty when unset.
    pub requested_networks: Vec<NetworkRequest>,
    /// The call's own request spec as JSON text (`{"spec_obj": …}`, or the legacy
    /// `{"request_spec": …, "filter_properties": …}`), kept only when a filter of
    /// the operator's reads nova's object itself.
    pub primitive: Option<std::sync::Arc<str>>,
}

impl RequestSpec {
    /// Decodes a `RequestSpec` primitive (`spec_obj` of select_destinations 4.3+).
    pub fn from_primitive(value: &Value) -> Result<Self, DecodeError> {
        let data = object_data(value, "RequestSpec")?;
        let f = Fields::new("RequestSpec", data);
        let flavor = match f.get("flavor") {
            Some(v) => Flavor::from_primitive(v)?,
            None => {
                return Err(DecodeError::new(
                    "RequestSpec.flavor: required field is missing",
                ))
            }
        };
        Ok(RequestSpec {
            id: f.int("id")?,
            instance_uuid: f.str("instance_uuid")?,
            num_instances: f.int("num_instances")?.unwrap_or(1),
            project_id: f.str("project_id")?,
            user_id: f.str("user_id")?,
            availability_zone: f.str("availability_zone")?,
            flavor,
            image: f.get("image").map(ImageMeta::from_primitive).transpose()?,
            ignore_hosts: f.strings("ignore_hosts")?.unwrap_or_default(),
            force_hosts: f.strings("force_hosts")?.unwrap_or_default(),
            force_nodes: f.strings("force_nodes")?.unwrap_or_default(),
            requested_destination: f
                .get("requested_destination")
                .map(Destination::from_primitive)
                .transpose()?,
            instance_group: f
                .get("instance_group")
                .map(InstanceGroup::from_primitive)
                .transpose()?,
            scheduler_hints: decode_hints(f.get("scheduler_hints"))?,
            is_bfv: f.bool("is_bfv")?.unwrap_or(false),
            requested_resources: match f.get("requested_resources") {
                Some(Value::Array(items)) => items
                    .iter()
                    .map(RequestGroup::from_primitive)
                    .collect::<Result<_, _>>()?,
                Some(_) => {
                    return Err(DecodeError::new(
                        "RequestSpec.requested_resources: expected a list",
                    ))
                }
                None => Vec::new(),
            },
            request_level_params: f
                .get("request_level_params")
                .map(RequestLevelParams::from_primitive)
                .transpose()?
                .unwrap_or_default(),
            numa_topology: f.get("numa_topology").cloned(),
            pci_requests: f.get("pci_requests").cloned(),
            retry_hosts: f.get("retry").map(decode_retry_hosts).transpose()?,
            network_metadata: f.get("network_metadata").cloned(),
            requested_networks: f
                .get("requested_networks")
                .map(NetworkRequest::list_from_primitive)
                .transpose()?
                .unwrap_or_default(),
            primitive: None,
        })
    }

    /// nova's `get_scheduler_hint`: a one-element list is unwrapped, longer lists are not.
    pub fn hint(&self, name: &str) -> Option<&[String]> {
        self.scheduler_hints.as_ref()?.get(name).map(Vec::as_slice)
    }

    /// True when nova-api marked the request as a rebuild to a new image.
    pub fn is_rebuild(&self) -> bool {
        self.hint("_nova_check_type")
            .is_some_and(|v| v.len() == 1 && v[0] == "rebuild")
    }
}

/// `(host, hypervisor_hostname)` of a compute node a request already tried.
pub type TriedNode = (Option<String>, Option<String>);

/// `SchedulerRetries.hosts` (a `ComputeNodeList`) as `(host, hypervisor_hostname)`.
fn decode_retry_hosts(value: &Value) -> Result<Vec<TriedNode>, DecodeError> {
    let retry = Fields::new("SchedulerRetries", object_data(value, "SchedulerRetries")?);
    let Some(hosts) = retry.get("hosts") else {
        return Ok(Vec::new());
    };
    let list = object_data(hosts, "ComputeNodeList")?;
    let nodes = match list.get("objects") {
        Some(Value::Array(nodes)) => nodes,
        _ => return Ok(Vec::new()),
    };
    nodes
        .iter()
        .map(|n| {
            let f = Fields::new("ComputeNode", object_data(n, "ComputeNode")?);
            Ok((f.str("host")?, f.str("hypervisor_hostname")?))
        })
        .collect()
}

/// Most scheduler hints one request may carry. Hints are tenant input; nova-api
/// accepts request bodies up to `[oslo_middleware] max_request_body_size` (112 KiB),
/// so these bounds are far above anything nova-api lets through.
pub const MAX_HINTS: usize = 1024;
/// Most values over all hints of one request.
pub const MAX_HINT_VALUES: usize = 16 * 1024;
/// Most bytes over all hint names and values of one request.
pub const MAX_HINT_BYTES: usize = 1024 * 1024;

/// Refuses hints beyond [`MAX_HINTS`] / [`MAX_HINT_VALUES`] / [`MAX_HINT_BYTES`]: the
/// request is answered with a decode error instead of being scheduled.
pub fn check_hint_bounds(hints: &BTreeMap<String, Vec<String>>) -> Result<(), DecodeError> {
    if hints.len() > MAX_HINTS {
        return Err(DecodeError::new(format!(
            "scheduler_hints: {} hints, more than the {MAX_HINTS} accepted",
            hints.len()
        )));
    }
    let values: usize = hints.values().map(Vec::len).sum();
    if values > MAX_HINT_VALUES {
        return Err(DecodeError::new(format!(
            "scheduler_hints: {values} values, more than the {MAX_HINT_VALUES} accepted"
        )));
    }
    let bytes: usize = hints
        .iter()
        .map(|(k, v)| k.len() + v.iter().map(String::len).sum::<usize>())
        .sum();
    if bytes > MAX_HINT_BYTES {
        return Err(DecodeError::new(format!(
            "scheduler_hints: {bytes} bytes, more than the {MAX_HINT_BYTES} accepted"
        )));
    }
    Ok(())
}

fn decode_hints(
    value: Option<&Value>,
) -> Result<Option<BTreeMap<String, Vec<String>>>, DecodeError> {
    let Some(value) = value else { return Ok(None) };
    let map = value
        .as_object()
        .ok_or_else(|| DecodeError::new("RequestSpec.scheduler_hints: expected a dict"))?;
    let mut hints = BTreeMap::new();
    for (key, v) in map {
        // DictOfListOfStrings coerces each item with str(); a bare scalar is wrapped.
        let items = match v {
            Value::Array(items) => items.iter().map(scalar_to_string).collect(),
            other => vec![scalar_to_string(other)],
        };
        hints.insert(key.clone(), items);
    }
    check_hint_bounds(&hints)?;
    Ok(Some(hints))
}

fn scalar_to_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "None".to_string(),
        Value::Bool(b) => if *b { "True" } else { "False" }.to_string(),
        other => other.to_string(),
    }
}

impl NetworkRequest {
    /// A `NetworkRequestList` primitive.
    pub fn list_from_primitive(value: &Value) -> Result<Vec<Self>, DecodeError> {
        let f = Fields::new(
            "NetworkRequestList",
            object_data(value, "NetworkRequestList")?,
        );
        match f.get("objects") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| {
                    let f = Fields::new("NetworkRequest", object_data(item, "NetworkRequest")?);
                    Ok(NetworkRequest {
                        network_id: f.str("network_id")?,
                        port_id: f.str("port_id")?,
                    })
                })
                .collect(),
            Some(_) => Err(DecodeError::new(
                "NetworkRequestList.objects: expected a list",
            )),
            None => Ok(Vec::new()),
        }
    }
}

impl Flavor {
    pub fn from_primitive(value: &Value) -> Result<Self, DecodeError> {
        let f = Fields::new("Flavor", object_data(value, "Flavor")?);
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
}

impl ImageMeta {
    pub fn from_primitive(value: &Value) -> Result<Self, DecodeError> {
        let f = Fields::new("ImageMeta", object_data(value, "ImageMeta")?);
        let properties = match f.get("properties") {
            Some(p) => object_data(p, "ImageMetaProps")?.clone(),
            None => Map::new(),
        };
        Ok(ImageMeta {
            id: f.str("id")?,
            name: f.str("name")?,
            disk_format: f.str("disk_format")?,
            properties,
        })
    }
}

impl InstanceGroup {
    pub fn from_primitive(value: &Value) -> Result<Self, DecodeError> {
        let f = Fields::new("InstanceGroup", object_data(value, "InstanceGroup")?);
        let policy = f.str("policy")?;
        // Before 1.11 only `policies` existed; nova reads its first element as the policy.
        let policies = f.strings("policies")?.unwrap_or_default();
        let policy = policy.or_else(|| policies.first().cloned());
        let policies = if policies.is_empty() {
            policy.iter().cloned().collect()
        } else {
            policies
        };
        Ok(InstanceGroup {
            uuid: f.str("uuid")?,
            policy,
            policies,
            members: f.strings("members")?.unwrap_or_default(),
            hosts: f.strings("hosts")?.unwrap_or_default(),
            hosts_unset: !f.is_set("hosts"),
            rules: f
                .string_map("_rules")?
                .unwrap_or_default()
                .into_iter()
                .collect(),
        })
    }
}

impl Destination {
    pub fn from_primitive(value: &Value) -> Result<Self, DecodeError> {
        let f = Fields::new("Destination", object_data(value, "Destination")?);
        let cell_uuid = match f.get("cell") {
            Some(cell) => {
                Fields::new("CellMapping", object_data(cell, "CellMapping")?).str("uuid")?
            }
            None => None,
        };
        Ok(Destination {
            host: f.str("host")?,
            node: f.str("node")?,
            cell_uuid,
            aggregates: f.strings("aggregates")?.unwrap_or_default(),
            forbidden_aggregates: f
                .strings("forbidden_aggregates")?
                .unwrap_or_default()
                .into_iter()
                .collect(),
            allow_cross_cell_move: f.bool("allow_cross_cell_move")?.unwrap_or(false),
        })
    }
}

impl RequestGroup {
    pub fn from_primitive(value: &Value) -> Result<Self, DecodeError> {
        let f = Fields::new("RequestGroup", object_data(value, "RequestGroup")?);
        let resources = match f.get("resources") {
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| {
                    v.as_i64().map(|n| (k.clone(), n)).ok_or_else(|| {
                        DecodeError::new("RequestGroup.resources: expected integers")
                    })
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(DecodeError::new("RequestGroup.resources: expected a dict")),
            None => BTreeMap::new(),
        };
        let aggregates = match f.get("aggregates") {
            Some(Value::Array(outer)) => outer
                .iter()
                .map(|inner| {
                    inner
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|s| s.as_str().map(str::to_string))
                                .collect()
                        })
                        .ok_or_else(|| {
                            DecodeError::new("RequestGroup.aggregates: expected lists of strings")
                        })
                })
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        Ok(RequestGroup {
            requester_id: f.str("requester_id")?,
            use_same_provider: f.bool("use_same_provider")?.unwrap_or(true),
            resources,
            required_traits: f
                .strings("required_traits")?
                .unwrap_or_default()
                .into_iter()
                .collect(),
            forbidden_traits: f
                .strings("forbidden_traits")?
                .unwrap_or_default()
                .into_iter()
                .collect(),
            aggregates,
            forbidden_aggregates: f
                .strings("forbidden_aggregates")?
                .unwrap_or_default()
                .into_iter()
                .collect(),
            provider_uuids: f.strings("provider_uuids")?.unwrap_or_default(),
            in_tree: f.str("in_tree")?,
        })
    }
}

impl RequestLevelParams {
    pub fn from_primitive(value: &Value) -> Result<Self, DecodeError> {
        let f = Fields::new(
            "RequestLevelParams",
            object_data(value, "RequestLevelParams")?,
        );
        let same_subtree = match f.get("same_subtree") {
            Some(Value::Array(outer)) => outer
                .iter()
                .map(|inner| {
                    inner
                        .as_array()
                        .map(|a| {
                            a.iter()
                                .filter_map(|s| s.as_str().map(str::to_string))
                                .collect()
                        })
                        .ok_or_else(|| {
                            DecodeError::new(
                                "RequestLevelParams.same_subtree: expected lists of strings",
                            )
                        })
                })
                .collect::<Result<_, _>>()?,
            _ => Vec::new(),
        };
        Ok(RequestLevelParams {
            root_required: f
                .strings("root_required")?
                .unwrap_or_default()
                .into_iter()
                .collect(),
            root_forbidden: f
                .strings("root_forbidden")?
                .unwrap_or_default()
                .into_iter()
                .collect(),
            same_subtree,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_spec(name: &str) -> Value {
        let path = format!(
            "{}/src/rpc/testdata/{name}.request.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let capture: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("wire sample"))
                .expect("json");
        let inner: Value =
            serde_json::from_str(capture["body"]["oslo.message"].as_str().expect("str"))
                .expect("inner");
        inner["args"]["spec_obj"].clone()
    }

    #[test]
    fn decodes_every_wire_sample() {
        for name in [
            "single_instance",
            "multi_instance_group",
            "hints_image_props_az",
            "novalidhost",
        ] {
            let spec = RequestSpec::from_primitive(&sample_spec(name))
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(spec.flavor.vcpus > 0, "{name}");
            assert!(spec.project_id.is_some(), "{name}");
        }
    }

    #[test]
    fn single_instance_fields() {
        let spec = RequestSpec::from_primitive(&sample_spec("single_instance")).expect("decode");
        assert_eq!(spec.flavor.memory_mb, 4096);
        assert_eq!(spec.flavor.vcpus, 2);
        assert_eq!(spec.flavor.root_gb, 20);
        assert_eq!(
            spec.flavor
                .extra_specs
                .get("hw:cpu_policy")
                .map(String::as_str),
            Some("shared")
        );
        assert_eq!(spec.num_instances, 1);
        let image = spec.image.clone().expect("image");
        assert_eq!(image.disk_format.as_deref(), Some("qcow2"));
        assert_eq!(
            image.properties.get("hw_disk_bus"),
            Some(&Value::String("virtio".into()))
        );
        assert!(!spec.is_rebuild());
    }

    #[test]
    fn group_policy_and_hints() {
        let spec =
            RequestSpec::from_primitive(&sample_spec("multi_instance_group")).expect("decode");
        let group = spec.instance_group.clone().expect("group");
        assert_eq!(group.policy.as_deref(), Some("anti-affinity"));
        assert_eq!(spec.hint("group").map(|v| v.len()), Some(1));
        assert_eq!(spec.num_instances, 3);
    }

    #[test]
    fn rejects_wrong_object_and_missing_flavor() {
        let wrong = serde_json::json!({"nova_object.name": "Flavor", "nova_object.data": {}});
        assert!(RequestSpec::from_primitive(&wrong)
            .unwrap_err()
            .0
            .contains("expected a RequestSpec"));
        let no_flavor = serde_json::json!({"nova_object.name": "RequestSpec", "nova_object.namespace": "nova",
            "nova_object.version": "1.15", "nova_object.data": {"num_instances": 1}});
        assert!(RequestSpec::from_primitive(&no_flavor)
            .unwrap_err()
            .0
            .contains("flavor"));
    }

    #[test]
    fn hostile_hints_are_refused_not_scheduled() {
        let spec_with = |hints: Value| {
            serde_json::json!({"nova_object.name": "RequestSpec", "nova_object.namespace": "nova",
                "nova_object.version": "1.15", "nova_object.data": {"scheduler_hints": hints,
                "flavor": {"nova_object.name": "Flavor", "nova_object.namespace": "nova",
                    "nova_object.version": "1.2", "nova_object.data": {"memory_mb": 1, "vcpus": 1}}}})
        };
        let many: serde_json::Map<String, Value> = (0..=MAX_HINTS)
            .map(|i| (format!("h{i}"), Value::from("x")))
            .collect();
        let err = RequestSpec::from_primitive(&spec_with(Value::Object(many))).unwrap_err();
        assert!(err.0.contains("hints"), "{err}");
        let long = serde_json::json!({"query": ["x".repeat(MAX_HINT_BYTES + 1)]});
        assert!(RequestSpec::from_primitive(&spec_with(long)).is_err());
        let values = serde_json::json!({"same_host": vec!["u"; MAX_HINT_VALUES + 1]});
        assert!(RequestSpec::from_primitive(&spec_with(values)).is_err());
        // Deep nesting never reaches us: serde_json stops at 128 levels with an error.
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(serde_json::from_str::<Value>(&deep).is_err());
        let fine = serde_json::json!({"query": ["[\"=\", 1, 1]"], "group": "g"});
        assert!(RequestSpec::from_primitive(&spec_with(fine)).is_ok());
    }

    #[test]
    fn old_versions_and_unknown_fields_are_accepted() {
        let spec = serde_json::json!({"nova_object.name": "RequestSpec", "nova_object.namespace": "nova",
            "nova_object.version": "1.5", "nova_object.data": {"a_future_field": [1, 2],
            "flavor": {"nova_object.name": "Flavor", "nova_object.namespace": "nova", "nova_object.version": "1.1",
                       "nova_object.data": {"memory_mb": 512, "vcpus": 1, "root_gb": 1, "ephemeral_gb": 0, "swap": 0}},
            "instance_group": {"nova_object.name": "InstanceGroup", "nova_object.namespace": "nova",
                "nova_object.version": "1.10", "nova_object.data": {"policies": ["affinity"], "hosts": ["h1"]}}}});
        let spec = RequestSpec::from_primitive(&spec).expect("decode");
        assert_eq!(spec.num_instances, 1);
        assert_eq!(
            spec.instance_group.expect("group").policy.as_deref(),
            Some("affinity")
        );
    }
}
