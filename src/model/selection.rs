// SPDX-License-Identifier: Apache-2.0
//! The answer: nova's `Selection` (1.1) and `SchedulerLimits` (1.0), encoded as nova
//! encodes them, and the legacy dict form used when `return_objects` is false.

use crate::py::object::envelope;
use serde_json::{Map, Value};

/// `SchedulerLimits`: every field present, null when not limited.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SchedulerLimits {
    pub numa_topology: Option<Value>,
    pub vcpu: Option<i64>,
    pub disk_gb: Option<i64>,
    pub memory_mb: Option<i64>,
}

impl SchedulerLimits {
    pub fn to_primitive(&self) -> Value {
        let mut data = Map::new();
        data.insert(
            "numa_topology".into(),
            self.numa_topology.clone().unwrap_or(Value::Null),
        );
        data.insert("vcpu".into(), self.vcpu.map_or(Value::Null, Value::from));
        data.insert(
            "disk_gb".into(),
            self.disk_gb.map_or(Value::Null, Value::from),
        );
        data.insert(
            "memory_mb".into(),
            self.memory_mb.map_or(Value::Null, Value::from),
        );
        envelope("SchedulerLimits", "1.0", data)
    }

    /// The legacy dict: only the non-null limits (nova's `to_dict`).
    pub fn to_legacy_dict(&self) -> Value {
        let mut out = Map::new();
        if let Some(n) = &self.numa_topology {
            out.insert("numa_topology".into(), n.clone());
        }
        for (k, v) in [
            ("vcpu", self.vcpu),
            ("disk_gb", self.disk_gb),
            ("memory_mb", self.memory_mb),
        ] {
            if let Some(v) = v {
                out.insert(k.into(), Value::from(v));
            }
        }
        Value::Object(out)
    }
}

/// `Selection.VERSION`, the same from nova 29 to 34.
pub const SELECTION_VERSION: &str = "1.1";

/// One destination (chosen host or alternate) for one instance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    pub compute_node_uuid: String,
    pub service_host: String,
    pub nodename: String,
    pub cell_uuid: String,
    pub limits: SchedulerLimits,
    /// The allocation request as the JSON text nova writes (`jsonutils.dumps`).
    pub allocation_request: Option<String>,
    pub allocation_request_version: Option<String>,
    pub availability_zone: Option<String>,
}

impl Selection {
    pub fn to_primitive(&self) -> Value {
        let mut data = Map::new();
        data.insert(
            "compute_node_uuid".into(),
            Value::String(self.compute_node_uuid.clone()),
        );
        data.insert(
            "service_host".into(),
            Value::String(self.service_host.clone()),
        );
        data.insert("nodename".into(), Value::String(self.nodename.clone()));
        data.insert("cell_uuid".into(), Value::String(self.cell_uuid.clone()));
        data.insert("limits".into(), self.limits.to_primitive());
        // nova stores `jsonutils.dumps(None)` ("null") when there is no request.
        data.insert(
            "allocation_request".into(),
            Value::String(
                self.allocation_request
                    .clone()
                    .unwrap_or_else(|| "null".into()),
            ),
        );
        data.insert(
            "allocation_request_version".into(),
            self.allocation_request_version
                .clone()
                .map_or(Value::Null, Value::String),
        );
        data.insert(
            "availability_zone".into(),
            self.availability_zone
                .clone()
                .map_or(Value::Null, Value::String),
        );
        envelope("Selection", SELECTION_VERSION, data)
    }

    /// `{"host", "nodename", "limits"}` as `select_destinations` returns without objects.
    pub fn to_legacy_dict(&self) -> Value {
        let mut out = Map::new();
        out.insert("host".into(), Value::String(self.service_host.clone()));
        out.insert("nodename".into(), Value::String(self.nodename.clone()));
        out.insert("limits".into(), self.limits.to_legacy_dict());
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Our Selection encodes to the same fields, versions and nested limits as the
    /// Selection nova 34 sent in the captured reply.
    #[test]
    fn same_shape_as_captured_reply() {
        let path = format!(
            "{}/src/rpc/testdata/single_instance.reply.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let capture: Value =
            serde_json::from_str(&std::fs::read_to_string(path).expect("sample")).expect("json");
        let reply: Value =
            serde_json::from_str(capture["body"]["oslo.message"].as_str().expect("str"))
                .expect("inner");
        let theirs = &reply["result"][0][0];
        let data = &theirs["nova_object.data"];
        let ours = Selection {
            compute_node_uuid: data["compute_node_uuid"].as_str().expect("uuid").into(),
            service_host: data["service_host"].as_str().expect("host").into(),
            nodename: data["nodename"].as_str().expect("node").into(),
            cell_uuid: data["cell_uuid"].as_str().expect("cell").into(),
            limits: SchedulerLimits::default(),
            allocation_request: Some(data["allocation_request"].as_str().expect("ar").into()),
            allocation_request_version: Some("1.36".into()),
            availability_zone: data["availability_zone"].as_str().map(str::to_string),
        }
        .to_primitive();
        assert_eq!(normalized(ours), normalized(theirs.clone()));
    }

    #[test]
    fn legacy_dict_has_only_set_limits() {
        let sel = Selection {
            service_host: "h".into(),
            nodename: "n".into(),
            limits: SchedulerLimits {
                vcpu: Some(4),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(
            sel.to_legacy_dict(),
            serde_json::json!({"host": "h", "nodename": "n", "limits": {"vcpu": 4}})
        );
    }

    /// `nova_object.changes` is a set; sort it everywhere before comparing.
    fn normalized(mut v: Value) -> Value {
        match &mut v {
            Value::Object(m) => {
                for (k, child) in m.iter_mut() {
                    if k == "nova_object.changes" {
                        if let Value::Array(items) = child {
                            items.sort_by_key(|i| i.to_string());
                        }
                    } else {
                        *child = normalized(child.take());
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| *i = normalized(i.take())),
            _ => {}
        }
        v
    }
}
