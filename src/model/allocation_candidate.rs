// SPDX-License-Identifier: Apache-2.0
//! One Placement allocation request (an entry of `GET /allocation_candidates`'s
//! `allocation_requests`), as a host state carries it.
//!
//! Placement's own answers are kept as the JSON it sent. The local provider index
//! produces one candidate per matching tree on every request, and the decision reads
//! the JSON of only a few of them (the chosen host and its alternates; the NUMA and
//! PCI filters when the request has such resources), so those candidates hold their
//! providers, classes and amounts and build their JSON on first read.

use serde_json::{Map, Value};
use std::sync::{Arc, OnceLock};

/// An allocation request: `{"allocations": {rp: {"resources": {...}}}, "mappings": {...}}`.
#[derive(Debug, Clone)]
pub struct AllocationCandidate(Repr);

#[derive(Debug, Clone)]
enum Repr {
    /// As Placement returned it.
    Json(Value),
    /// Everything from one root provider, as Placement writes a single-provider
    /// candidate at 1.34+: `{"allocations": {provider: {"resources": resources}},
    /// "mappings": {"": [provider]}}`.
    SingleProvider {
        provider: Arc<str>,
        resources: Arc<Map<String, Value>>,
        json: OnceLock<Value>,
    },
    /// Amounts from several providers and the providers of each request group.
    Spread {
        allocations: SpreadAllocations,
        mappings: SpreadMappings,
        json: OnceLock<Value>,
    },
}

/// `(provider, [(resource class, amount)])` per provider, in order.
pub type SpreadAllocations = Vec<(Arc<str>, Vec<(Arc<str>, i64)>)>;
/// `(group suffix, [provider])` per request group, in order.
pub type SpreadMappings = Vec<(Arc<str>, Vec<Arc<str>>)>;

impl AllocationCandidate {
    /// A candidate as Placement sent it.
    pub fn from_json(value: Value) -> Self {
        AllocationCandidate(Repr::Json(value))
    }

    /// `resources` (class → amount), all from `provider`; the JSON is built on first read.
    pub fn single_provider(provider: Arc<str>, resources: Arc<Map<String, Value>>) -> Self {
        AllocationCandidate(Repr::SingleProvider {
            provider,
            resources,
            json: OnceLock::new(),
        })
    }

    /// Amounts from several providers (`allocations`) for request groups mapped to
    /// providers (`mappings`); the JSON is built on first read.
    pub fn spread(allocations: SpreadAllocations, mappings: SpreadMappings) -> Self {
        AllocationCandidate(Repr::Spread {
            allocations,
            mappings,
            json: OnceLock::new(),
        })
    }

    /// The allocation request as Placement writes it.
    pub fn json(&self) -> &Value {
        match &self.0 {
            Repr::Json(v) => v,
            Repr::SingleProvider {
                provider,
                resources,
                json,
            } => json.get_or_init(|| single_provider_json(provider, resources)),
            Repr::Spread {
                allocations,
                mappings,
                json,
            } => json.get_or_init(|| spread_json(allocations, mappings)),
        }
    }

    pub fn into_json(self) -> Value {
        match self.0 {
            Repr::Json(v) => v,
            Repr::SingleProvider {
                provider,
                resources,
                json,
            } => json
                .into_inner()
                .unwrap_or_else(|| single_provider_json(&provider, &resources)),
            Repr::Spread {
                allocations,
                mappings,
                json,
            } => json
                .into_inner()
                .unwrap_or_else(|| spread_json(&allocations, &mappings)),
        }
    }

    /// True for the compact form: one root provider, its JSON built on first read.
    pub fn is_single_provider(&self) -> bool {
        matches!(self.0, Repr::SingleProvider { .. })
    }

    /// The one provider of a compact single-provider candidate.
    pub fn single_provider_uuid(&self) -> Option<&Arc<str>> {
        match &self.0 {
            Repr::SingleProvider { provider, .. } => Some(provider),
            _ => None,
        }
    }

    /// Both compact, holding the very same resources map.
    #[cfg(test)]
    pub(crate) fn shares_resources_with(&self, other: &AllocationCandidate) -> bool {
        match (&self.0, &other.0) {
            (
                Repr::SingleProvider { resources: a, .. },
                Repr::SingleProvider { resources: b, .. },
            ) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The providers the request allocates from, in the JSON's key order.
    pub fn providers(&self) -> Vec<Arc<str>> {
        match &self.0 {
            Repr::SingleProvider { provider, .. } => vec![Arc::clone(provider)],
            Repr::Spread { allocations, .. } => {
                allocations.iter().map(|(p, _)| Arc::clone(p)).collect()
            }
            Repr::Json(v) => v
                .get("allocations")
                .and_then(Value::as_object)
                .map(|a| a.keys().map(|k| Arc::from(k.as_str())).collect())
                .unwrap_or_default(),
        }
    }
}

fn single_provider_json(provider: &str, resources: &Map<String, Value>) -> Value {
    let mut by_provider = Map::with_capacity(1);
    by_provider.insert("resources".to_string(), Value::Object(resources.clone()));
    let mut allocations = Map::with_capacity(1);
    allocations.insert(provider.to_string(), Value::Object(by_provider));
    let mut mappings = Map::with_capacity(1);
    mappings.insert(
        String::new(),
        Value::Array(vec![Value::String(provider.to_string())]),
    );
    let mut request = Map::with_capacity(2);
    request.insert("allocations".to_string(), Value::Object(allocations));
    request.insert("mappings".to_string(), Value::Object(mappings));
    Value::Object(request)
}

fn spread_json(allocations: &SpreadAllocations, mappings: &SpreadMappings) -> Value {
    let mut by_provider = Map::with_capacity(allocations.len());
    for (provider, amounts) in allocations {
        let resources: Map<String, Value> = amounts
            .iter()
            .map(|(rc, n)| (rc.to_string(), Value::from(*n)))
            .collect();
        let mut body = Map::with_capacity(1);
        body.insert("resources".to_string(), Value::Object(resources));
        by_provider.insert(provider.to_string(), Value::Object(body));
    }
    let groups: Map<String, Value> = mappings
        .iter()
        .map(|(suffix, providers)| {
            let list = providers
                .iter()
                .map(|p| Value::String(p.to_string()))
                .collect();
            (suffix.to_string(), Value::Array(list))
        })
        .collect();
    let mut request = Map::with_capacity(2);
    request.insert("allocations".to_string(), Value::Object(by_provider));
    request.insert("mappings".to_string(), Value::Object(groups));
    Value::Object(request)
}

/// Reading a candidate is reading its JSON (the filters look up `mappings`).
impl std::ops::Deref for AllocationCandidate {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.json()
    }
}

impl serde::Serialize for AllocationCandidate {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.json().serialize(serializer)
    }
}

impl From<Value> for AllocationCandidate {
    fn from(value: Value) -> Self {
        AllocationCandidate::from_json(value)
    }
}

impl PartialEq for AllocationCandidate {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json()
    }
}

impl PartialEq<Value> for AllocationCandidate {
    fn eq(&self, other: &Value) -> bool {
        self.json() == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_single_provider_candidate_reads_as_placement_writes_it() {
        let resources: Map<String, Value> = [
            ("VCPU".to_string(), json!(2)),
            ("MEMORY_MB".to_string(), json!(2048)),
        ]
        .into_iter()
        .collect();
        let c = AllocationCandidate::single_provider("rp-1".into(), Arc::new(resources));
        let want = json!({
            "allocations": {"rp-1": {"resources": {"VCPU": 2, "MEMORY_MB": 2048}}},
            "mappings": {"": ["rp-1"]},
        });
        assert_eq!(c.json(), &want);
        assert_eq!(c.get("mappings"), Some(&json!({"": ["rp-1"]})));
        assert_eq!(c.providers(), vec![Arc::<str>::from("rp-1")]);
        assert_eq!(c.clone().into_json(), want);
        assert_eq!(c, AllocationCandidate::from_json(want));
    }

    #[test]
    fn a_spread_candidate_reads_as_placement_writes_it() {
        let c = AllocationCandidate::spread(
            vec![
                (
                    "cn".into(),
                    vec![("VCPU".into(), 2), ("MEMORY_MB".into(), 512)],
                ),
                ("gpu".into(), vec![("VGPU".into(), 1)]),
            ],
            vec![
                ("".into(), vec!["cn".into()]),
                ("1".into(), vec!["gpu".into()]),
            ],
        );
        let want = json!({
            "allocations": {
                "cn": {"resources": {"VCPU": 2, "MEMORY_MB": 512}},
                "gpu": {"resources": {"VGPU": 1}},
            },
            "mappings": {"": ["cn"], "1": ["gpu"]},
        });
        assert_eq!(c.json(), &want);
        assert_eq!(c.providers(), vec![Arc::<str>::from("cn"), "gpu".into()]);
        assert_eq!(c.clone().into_json(), want);
    }

    #[test]
    fn a_placement_candidate_lists_each_of_its_providers_once() {
        let c = AllocationCandidate::from_json(json!({
            "allocations": {"b": {"resources": {"VCPU": 1}}, "a": {"resources": {"DISK_GB": 1}}},
            "mappings": {},
        }));
        let got: Vec<String> = c.providers().iter().map(|p| p.to_string()).collect();
        let mut sorted = got.clone();
        sorted.sort();
        // serde_json's map keeps keys sorted unless `preserve_order` is on; either way
        // both providers are listed once.
        assert_eq!(sorted, ["a", "b"]);
    }
}
