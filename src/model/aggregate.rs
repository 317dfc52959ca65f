// SPDX-License-Identifier: Apache-2.0
//! Host aggregates from the API database (`aggregates`, `aggregate_hosts`, `aggregate_metadata`).

use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Aggregate {
    pub id: i64,
    pub uuid: String,
    pub name: String,
    pub hosts: BTreeSet<String>,
    /// Metadata values are strings, as nova stores them.
    pub metadata: BTreeMap<String, String>,
}

impl Aggregate {
    /// The `availability_zone` metadata, if any.
    pub fn availability_zone(&self) -> Option<&str> {
        self.metadata.get("availability_zone").map(String::as_str)
    }
}

impl Aggregate {
    /// Decodes an `Aggregate` (1.x) primitive as nova-api sends it in `update_aggregates`
    /// and `delete_aggregate`.
    pub fn from_primitive(value: &serde_json::Value) -> Result<Self, super::DecodeError> {
        use crate::py::object::{object_data, Fields};
        let f = Fields::new("Aggregate", object_data(value, "Aggregate")?);
        Ok(Aggregate {
            id: f.int("id")?.ok_or_else(|| {
                super::DecodeError::new("Aggregate.id: required field is missing")
            })?,
            uuid: f.str("uuid")?.unwrap_or_default(),
            name: f.str("name")?.unwrap_or_default(),
            hosts: f
                .strings("hosts")?
                .unwrap_or_default()
                .into_iter()
                .collect(),
            metadata: f
                .string_map("metadata")?
                .unwrap_or_default()
                .into_iter()
                .collect(),
        })
    }

    /// `aggregates` of `update_aggregates`: an `AggregateList` or a JSON list of `Aggregate`s.
    pub fn list_from_primitive(value: &serde_json::Value) -> Result<Vec<Self>, super::DecodeError> {
        let items = match value {
            serde_json::Value::Array(items) => items.as_slice(),
            other => crate::py::object::object_data(other, "AggregateList")?
                .get("objects")
                .and_then(serde_json::Value::as_array)
                .map(Vec::as_slice)
                .ok_or_else(|| super::DecodeError::new("AggregateList.objects: expected a list"))?,
        };
        items.iter().map(Self::from_primitive).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn agg(id: i64) -> serde_json::Value {
        json!({"nova_object.name": "Aggregate", "nova_object.namespace": "nova", "nova_object.version": "1.3",
               "nova_object.data": {"id": id, "uuid": format!("u{id}"), "name": "n", "hosts": ["h1"],
                                    "metadata": {"availability_zone": "az1"}}})
    }

    #[test]
    fn decodes_lists_in_both_forms() {
        let plain = Aggregate::list_from_primitive(&json!([agg(1), agg(2)])).expect("list");
        assert_eq!(plain.iter().map(|a| a.id).collect::<Vec<_>>(), vec![1, 2]);
        assert_eq!(plain[0].availability_zone(), Some("az1"));
        let wrapped = json!({"nova_object.name": "AggregateList", "nova_object.namespace": "nova",
                             "nova_object.version": "1.3", "nova_object.data": {"objects": [agg(3)]}});
        assert_eq!(
            Aggregate::list_from_primitive(&wrapped).expect("list")[0]
                .hosts
                .len(),
            1
        );
        assert!(Aggregate::from_primitive(
            &json!({"nova_object.name": "Aggregate", "nova_object.data": {}})
        )
        .is_err());
    }
}
