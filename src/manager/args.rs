// SPDX-License-Identifier: Apache-2.0
//! Decoding the arguments of the manager's methods: `select_destinations` at every
//! RPC version it serves, and the instance-info casts.

use crate::model::RequestSpec;
use crate::rpc::RemoteError;
use serde_json::{Map, Value};

/// The arguments of `select_destinations` at RPC 4.3–4.5.
pub(super) struct SelectArgs {
    pub spec: RequestSpec,
    pub instance_uuids: Option<Vec<String>>,
    pub return_objects: bool,
    pub return_alternates: bool,
}

impl SelectArgs {
    pub fn decode(args: &Map<String, Value>) -> Result<Self, RemoteError> {
        // RPC 4.3+ sends `spec_obj`; 4.0–4.2 the legacy dicts (nova's `from_primitives`).
        let spec = match args.get("spec_obj") {
            Some(spec_obj) => RequestSpec::from_primitive(spec_obj)
                .map_err(|e| RemoteError::value_error(format!("invalid spec_obj: {e}")))?,
            None => {
                let request_spec = args.get("request_spec").filter(|v| !v.is_null()).ok_or_else(|| {
                    RemoteError::type_error("select_destinations() needs spec_obj (RPC 4.3+) or request_spec (RPC 4.0)")
                })?;
                let filter_properties = args.get("filter_properties").unwrap_or(&Value::Null);
                RequestSpec::from_legacy(request_spec, filter_properties).map_err(|e| {
                    RemoteError::value_error(format!("invalid legacy request_spec: {e}"))
                })?
            }
        };
        let instance_uuids = match args.get("instance_uuids") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|v| match v.as_str() {
                        // They name Placement consumers (in URLs): nothing but a UUID.
                        Some(s) if uuid::Uuid::try_parse(s).is_ok() => Ok(s.to_string()),
                        Some(s) => Err(RemoteError::value_error(format!(
                            "instance_uuids: {:?} is not a UUID",
                            s.chars().take(64).collect::<String>()
                        ))),
                        None => Err(RemoteError::value_error(
                            "instance_uuids must be a list of strings",
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(_) => {
                return Err(RemoteError::value_error(
                    "instance_uuids must be a list of strings",
                ))
            }
        };
        let flag = |name: &str| {
            args.get(name)
                .map(|v| crate::py::object::flexible_bool(v).unwrap_or(false))
                .unwrap_or(false)
        };
        Ok(SelectArgs {
            spec,
            instance_uuids,
            return_objects: flag("return_objects"),
            return_alternates: flag("return_alternates"),
        })
    }

    /// The call's request spec as the operator's Python filters receive it (see
    /// `RequestSpec::primitive`): `spec_obj`, or the legacy dicts.
    pub fn primitive_text(args: &Map<String, Value>) -> std::sync::Arc<str> {
        let mut kept = Map::new();
        for key in ["spec_obj", "request_spec", "filter_properties"] {
            if let Some(v) = args.get(key) {
                kept.insert(key.to_string(), v.clone());
            }
        }
        Value::Object(kept).to_string().into()
    }

    /// The instances asked for are within `[nova_scheduler_rs] max_instances_per_request`
    /// (the uuids, or `num_instances` without them: nova's loop runs that often).
    pub fn check_size(&self, max: u32) -> Result<(), RemoteError> {
        let asked = match &self.instance_uuids {
            Some(uuids) if !uuids.is_empty() => uuids.len() as i64,
            _ => self.spec.num_instances,
        };
        if asked > i64::from(max) {
            return Err(RemoteError::no_valid_host(format!(
                "The request asks for {asked} instances; this scheduler places at most {max} \
                 per request ([nova_scheduler_rs] max_instances_per_request)."
            )));
        }
        Ok(())
    }
}

/// An instance uuid with its `instance_type_id` as a cast carries it (see [`instance_list`]).
pub(super) type InstanceFlavor = (String, Option<Option<i64>>);

/// The instances of an `InstanceList` primitive (or of a single `Instance`) sent by
/// nova-compute's `update_instance_info`: each uuid with its `instance_type_id` when
/// the object carries that field (`Some(None)` for a null one), `None` when it does
/// not.
pub(super) fn instance_list(value: Option<&Value>) -> Result<Vec<InstanceFlavor>, RemoteError> {
    let bad = || RemoteError::value_error("instance_info must be an InstanceList or Instance");
    let value = value.ok_or_else(bad)?;
    let data = value.get("nova_object.data").ok_or_else(bad)?;
    let instance_of = |obj: &Value| {
        let data = obj.get("nova_object.data")?;
        let uuid = data.get("uuid").and_then(Value::as_str)?.to_string();
        let flavor = match data.get("instance_type_id") {
            None => None,
            Some(Value::Null) => Some(None),
            // An integer field; anything else is not trusted as a flavor id.
            Some(v) => v.as_i64().map(Some),
        };
        Some((uuid, flavor))
    };
    match value.get("nova_object.name").and_then(Value::as_str) {
        Some("Instance") => instance_of(value).map(|i| vec![i]).ok_or_else(bad),
        _ => data
            .get("objects")
            .and_then(Value::as_array)
            .ok_or_else(bad)?
            .iter()
            .map(|o| instance_of(o).ok_or_else(bad))
            .collect(),
    }
}

pub(super) fn string_list(value: Option<&Value>, name: &str) -> Result<Vec<String>, RemoteError> {
    let bad = || RemoteError::value_error(format!("{name} must be a list of strings"));
    value
        .and_then(Value::as_array)
        .ok_or_else(bad)?
        .iter()
        .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn instance(data: Value) -> Value {
        json!({"nova_object.name": "Instance", "nova_object.namespace": "nova",
               "nova_object.version": "2.8", "nova_object.data": data})
    }

    #[test]
    fn update_instance_info_carries_each_instance_flavor_id_when_set() {
        let list = json!({"nova_object.name": "InstanceList", "nova_object.namespace": "nova",
        "nova_object.version": "2.6", "nova_object.data": {"objects": [
            instance(json!({"uuid": "a", "instance_type_id": 7})),
            instance(json!({"uuid": "b", "instance_type_id": null})),
            instance(json!({"uuid": "c"})),
        ]}});
        assert_eq!(
            instance_list(Some(&list)).unwrap(),
            vec![
                ("a".to_string(), Some(Some(7))),
                ("b".to_string(), Some(None)),
                ("c".to_string(), None),
            ]
        );
        let single = instance(json!({"uuid": "d", "instance_type_id": 3}));
        assert_eq!(
            instance_list(Some(&single)).unwrap(),
            vec![("d".to_string(), Some(Some(3)))]
        );
        assert!(instance_list(Some(&json!({"nova_object.data": {}}))).is_err());
        assert!(instance_list(None).is_err());
    }
}
