// SPDX-License-Identifier: Apache-2.0
//! nova's `InstancePCIRequest` as the scheduler reads it, decoded from the
//! `RequestSpec.pci_requests` primitive (`InstancePCIRequests` 1.x).

use crate::py::object::{object_data, Fields};
use serde_json::Value;
use std::collections::BTreeMap;

/// Bounds on what a request may carry (the spec comes from flavors and ports).
pub const MAX_REQUESTS: usize = 1024;
pub const MAX_SPECS_PER_REQUEST: usize = 1024;

/// One device request: `count` devices matching any of the `spec` dicts.
#[derive(Debug, Clone, PartialEq)]
pub struct PciRequest {
    pub count: i64,
    /// `ListOfDictOfNullableStrings`.
    pub spec: Vec<BTreeMap<String, Option<String>>>,
    /// None for requests from neutron ports.
    pub alias_name: Option<String>,
    pub request_id: Option<String>,
    /// `numa_policy` (None: unset or null; nova then uses `legacy`).
    pub numa_policy: Option<String>,
    pub requester_id: Option<String>,
}

impl PciRequest {
    /// nova's `source == NEUTRON_PORT` (a request without an alias name).
    pub fn from_neutron_port(&self) -> bool {
        self.alias_name.is_none()
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid pci_requests: {0}")]
pub struct PciRequestError(pub String);

/// Decodes `RequestSpec.pci_requests`: `Ok(None)` when null (no requests object).
pub fn from_primitive(value: &Value) -> Result<Option<Vec<PciRequest>>, PciRequestError> {
    if value.is_null() {
        return Ok(None);
    }
    let err = |e: crate::py::object::DecodeError| PciRequestError(e.0);
    let data = object_data(value, "InstancePCIRequests").map_err(err)?;
    let items = match data.get("requests") {
        None | Some(Value::Null) => return Ok(Some(Vec::new())),
        Some(Value::Array(items)) => items,
        Some(_) => return Err(PciRequestError("requests is not a list".into())),
    };
    if items.len() > MAX_REQUESTS {
        return Err(PciRequestError(format!(
            "{} requests (at most {MAX_REQUESTS})",
            items.len()
        )));
    }
    items
        .iter()
        .map(|item| {
            let f = Fields::new(
                "InstancePCIRequest",
                object_data(item, "InstancePCIRequest").map_err(err)?,
            );
            let count = f
                .int("count")
                .map_err(err)?
                .ok_or_else(|| PciRequestError("InstancePCIRequest.count is missing".into()))?;
            let spec = match f.get("spec") {
                Some(Value::Array(specs)) => {
                    if specs.len() > MAX_SPECS_PER_REQUEST {
                        return Err(PciRequestError("too many specs".into()));
                    }
                    specs.iter().map(spec_dict).collect::<Result<_, _>>()?
                }
                None => Vec::new(),
                Some(_) => return Err(PciRequestError("spec is not a list".into())),
            };
            Ok(PciRequest {
                count,
                spec,
                alias_name: f.str("alias_name").map_err(err)?,
                request_id: f.str("request_id").map_err(err)?,
                numa_policy: f.str("numa_policy").map_err(err)?,
                requester_id: f.str("requester_id").map_err(err)?,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
}

fn spec_dict(v: &Value) -> Result<BTreeMap<String, Option<String>>, PciRequestError> {
    let map = v
        .as_object()
        .ok_or_else(|| PciRequestError("spec item is not a dict".into()))?;
    map.iter()
        .map(|(k, v)| {
            let value = match v {
                Value::Null => None,
                Value::String(s) => Some(s.clone()),
                Value::Bool(b) => Some(if *b { "True" } else { "False" }.to_string()),
                Value::Number(n) => Some(n.to_string()),
                _ => {
                    return Err(PciRequestError(format!(
                        "spec value of {k} is not a string"
                    )))
                }
            };
            Ok((k.clone(), value))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_requests_object() {
        let v = json!({"nova_object.name": "InstancePCIRequests", "nova_object.namespace": "nova",
            "nova_object.version": "1.1", "nova_object.data": {"requests": [
              {"nova_object.name": "InstancePCIRequest", "nova_object.namespace": "nova",
               "nova_object.version": "1.4", "nova_object.data": {"count": 2,
               "spec": [{"vendor_id": "8086", "product_id": "1520", "physical_network": null}],
               "alias_name": "a1", "request_id": "r-1", "numa_policy": "preferred"}}]}});
        let reqs = from_primitive(&v).expect("decode").expect("some");
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].count, 2);
        assert_eq!(reqs[0].spec[0].get("physical_network"), Some(&None));
        assert!(!reqs[0].from_neutron_port());
        assert_eq!(from_primitive(&Value::Null), Ok(None));
        assert!(
            from_primitive(&json!({"nova_object.name": "InstancePCIRequests",
            "nova_object.data": {"requests": [{"nova_object.name": "InstancePCIRequest",
            "nova_object.data": {"spec": []}}]}}))
            .is_err()
        );
    }
}
