// SPDX-License-Identifier: Apache-2.0
//! A `GET /allocation_candidates` answer, read off the wire into what the
//! scheduler keeps of it.
//!
//! Most candidates Placement returns for a boot are a root provider's own
//! resources: `{"allocations": {rp: {"resources": {...}}}, "mappings": {"": [rp]}}`,
//! the same resources in every candidate. Those are read straight into the compact
//! single-provider form (the provider, and one resources map shared with the
//! previous candidate when equal) instead of a JSON tree per candidate; at 1,000+
//! candidates per request, building and freeing those trees was the largest part of
//! our own CPU when asking Placement. Any other shape (nested or sharing providers,
//! granular groups, fields we do not know) is kept as the JSON Placement sent.

use super::PlacementError;
use crate::model::AllocationCandidate;
use serde::de::{Deserialize, Deserializer, Error as _, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::fmt;
use std::sync::Arc;

/// The part of a `GET /allocation_candidates` answer nova uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AllocationCandidates {
    /// Allocation requests in Placement's order (`{"allocations", "mappings"}` at 1.36).
    pub allocation_requests: Vec<AllocationCandidate>,
    /// The keys of `provider_summaries`, in Placement's order: nova uses nothing
    /// else of the summaries, so their bodies are skipped unparsed.
    pub provider_uuids: Vec<String>,
}

/// The candidates answer as read off the wire.
#[derive(serde::Deserialize)]
struct CandidatesBody {
    #[serde(deserialize_with = "allocation_requests")]
    allocation_requests: Vec<AllocationCandidate>,
    #[serde(deserialize_with = "object_keys")]
    provider_summaries: Vec<String>,
}

impl AllocationCandidates {
    /// Parses a `GET /allocation_candidates` body.
    pub fn from_json(body: &str) -> Result<Self, PlacementError> {
        let parsed: CandidatesBody = serde_json::from_str(body).map_err(|e| {
            let detail = if e.is_data() {
                format!("no allocation_requests list or provider_summaries dict: {e}")
            } else {
                format!("invalid JSON: {e}")
            };
            PlacementError::BadResponse {
                what: "GET /allocation_candidates".to_string(),
                detail,
            }
        })?;
        Ok(AllocationCandidates {
            allocation_requests: parsed.allocation_requests,
            provider_uuids: parsed.provider_summaries,
        })
    }

    /// nova's merge of the fallback (VCPU) answer into the first: requests appended,
    /// summaries `dict.update`d (a known key keeps its place).
    pub fn merge(&mut self, more: AllocationCandidates) {
        self.allocation_requests.extend(more.allocation_requests);
        let known: std::collections::HashSet<String> =
            self.provider_uuids.iter().cloned().collect();
        self.provider_uuids.extend(
            more.provider_uuids
                .into_iter()
                .filter(|u| !known.contains(u)),
        );
    }
}

/// A JSON object's keys, its values skipped (`IgnoredAny`, no allocation).
fn object_keys<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    struct Keys;
    impl<'de> Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a provider_summaries dict")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut keys = Vec::with_capacity(map.size_hint().unwrap_or(0));
            while let Some(key) = map.next_key::<String>()? {
                map.next_value::<IgnoredAny>()?;
                keys.push(key);
            }
            Ok(keys)
        }
    }
    d.deserialize_map(Keys)
}

/// The `allocation_requests` list: each entry's text is read as a single-provider
/// candidate when it is one, else as JSON.
fn allocation_requests<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<AllocationCandidate>, D::Error> {
    struct Requests;
    impl<'de> Visitor<'de> for Requests {
        type Value = Vec<AllocationCandidate>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an allocation_requests list")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            let mut shared = SharedResources::default();
            while let Some(raw) = seq.next_element::<&RawValue>()? {
                out.push(candidate(raw.get(), &mut shared).map_err(A::Error::custom)?);
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Requests)
}

/// One allocation request's text.
fn candidate(
    text: &str,
    shared: &mut SharedResources,
) -> Result<AllocationCandidate, serde_json::Error> {
    if let Ok(one) = serde_json::from_str::<SingleProvider<'_>>(text) {
        let resources = shared.get(&one.resources);
        return Ok(AllocationCandidate::single_provider(
            Arc::from(one.provider),
            resources,
        ));
    }
    serde_json::from_str::<Value>(text).map(AllocationCandidate::from_json)
}

/// The resources map of the previous single-provider candidate, reused while the
/// next one asks for the same (in a boot answer: all of them).
#[derive(Default)]
struct SharedResources {
    last: Option<Arc<Map<String, Value>>>,
}

impl SharedResources {
    fn get(&mut self, wanted: &[(&str, u64)]) -> Arc<Map<String, Value>> {
        if let Some(map) = &self.last {
            let same = map.len() == wanted.len()
                && map
                    .iter()
                    .zip(wanted)
                    .all(|((n, a), (m, b))| n == m && a.as_u64() == Some(*b));
            if same {
                return Arc::clone(map);
            }
        }
        let map: Arc<Map<String, Value>> = Arc::new(
            wanted
                .iter()
                .map(|(rc, amount)| (rc.to_string(), Value::from(*amount)))
                .collect(),
        );
        self.last = Some(Arc::clone(&map));
        map
    }
}

/// `{"allocations": {rp: {"resources": {rc: amount, ...}}}, "mappings": {"": [rp]}}`
/// exactly: these keys in this order, nothing else, whole non-negative amounts. Any
/// other text fails to read as one (and is kept as JSON).
struct SingleProvider<'a> {
    provider: &'a str,
    resources: Vec<(&'a str, u64)>,
}

impl<'de> Deserialize<'de> for SingleProvider<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Request;
        impl<'de> Visitor<'de> for Request {
            type Value = SingleProvider<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a single-provider allocation request")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let other = || A::Error::custom("not a single-provider allocation request");
                if map.next_key::<&str>()? != Some("allocations") {
                    return Err(other());
                }
                let OneEntry(provider, OneEntry(key, Resources(resources))) =
                    map.next_value::<OneEntry<&str, OneEntry<&str, Resources<'de>>>>()?;
                if key != "resources" {
                    return Err(other());
                }
                if map.next_key::<&str>()? != Some("mappings") {
                    return Err(other());
                }
                let OneEntry(group, [mapped]) = map.next_value::<OneEntry<&str, [&str; 1]>>()?;
                if !group.is_empty() || mapped != provider {
                    return Err(other());
                }
                if map.next_key::<IgnoredAny>()?.is_some() {
                    return Err(other());
                }
                Ok(SingleProvider {
                    provider,
                    resources,
                })
            }
        }
        d.deserialize_map(Request)
    }
}

/// A JSON object of exactly one entry.
struct OneEntry<K, V>(K, V);

impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Deserialize<'de> for OneEntry<K, V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Entry<K, V>(std::marker::PhantomData<(K, V)>);
        impl<'de, K: Deserialize<'de>, V: Deserialize<'de>> Visitor<'de> for Entry<K, V> {
            type Value = OneEntry<K, V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object of one entry")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let Some((k, v)) = map.next_entry::<K, V>()? else {
                    return Err(A::Error::custom("an empty object"));
                };
                if map.next_key::<IgnoredAny>()?.is_some() {
                    return Err(A::Error::custom("more than one entry"));
                }
                Ok(OneEntry(k, v))
            }
        }
        d.deserialize_map(Entry(std::marker::PhantomData))
    }
}

/// `{rc: amount, ...}` in the wire's order.
struct Resources<'a>(Vec<(&'a str, u64)>);

impl<'de> Deserialize<'de> for Resources<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct List;
        impl<'de> Visitor<'de> for List {
            type Value = Resources<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a resources dict")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut list = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(entry) = map.next_entry::<&str, u64>()? {
                    if list.iter().any(|(rc, _)| *rc == entry.0) {
                        return Err(A::Error::custom("a resource class twice"));
                    }
                    list.push(entry);
                }
                Ok(Resources(list))
            }
        }
        d.deserialize_map(List)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(body: &Value) -> AllocationCandidates {
        AllocationCandidates::from_json(&body.to_string()).expect("parsed")
    }

    #[test]
    fn every_shape_reads_as_the_json_placement_sent() {
        let requests = json!([
            {"allocations": {"rp1": {"resources": {"VCPU": 1, "MEMORY_MB": 512}}},
             "mappings": {"": ["rp1"]}},
            {"allocations": {"rp2": {"resources": {"VCPU": 1, "MEMORY_MB": 512}}},
             "mappings": {"": ["rp2"]}},
            // Another amount: a new shared map.
            {"allocations": {"rp3": {"resources": {"VCPU": 2, "MEMORY_MB": 512}}},
             "mappings": {"": ["rp3"]}},
            // Sharing provider: two providers.
            {"allocations": {"rp4": {"resources": {"VCPU": 1}},
                             "ss": {"resources": {"DISK_GB": 10}}},
             "mappings": {"": ["rp4", "ss"]}},
            // Granular group.
            {"allocations": {"rp5": {"resources": {"VCPU": 1}}},
             "mappings": {"_NUMA0": ["rp5"]}},
            // Mapping names another provider, keys in another order, an extra key.
            {"allocations": {"rp6": {"resources": {"VCPU": 1}}}, "mappings": {"": ["rp7"]}},
            {"mappings": {"": ["rp8"]}, "allocations": {"rp8": {"resources": {"VCPU": 1}}}},
            {"allocations": {"rp9": {"resources": {"VCPU": 1}, "generation": 3}},
             "mappings": {"": ["rp9"]}},
            {"allocations": {"rp10": {"resources": {"VCPU": 1}}}, "mappings": {"": ["rp10"]},
             "extra": true},
            // Amounts that are not whole non-negative numbers, no mappings (< 1.34).
            {"allocations": {"rp11": {"resources": {"VCPU": 1.5}}}, "mappings": {"": ["rp11"]}},
            {"allocations": {"rp12": {"resources": {"VCPU": -1}}}, "mappings": {"": ["rp12"]}},
            {"allocations": {"rp13": {"resources": {"VCPU": 1}}}},
            {"allocations": {"r\"p14": {"resources": {"VCPU": 1}}}, "mappings": {"": ["r\"p14"]}}
        ]);
        let body = json!({"allocation_requests": requests,
                          "provider_summaries": {"rp1": {"resources": {}}, "rp2": {}}});
        let parsed = parse(&body);
        assert_eq!(parsed.provider_uuids, vec!["rp1", "rp2"]);
        let wanted = requests.as_array().expect("list");
        assert_eq!(parsed.allocation_requests.len(), wanted.len());
        for (got, want) in parsed.allocation_requests.iter().zip(wanted) {
            assert_eq!(got.json(), want);
            // The same text when it goes back to Placement or into a Selection.
            assert_eq!(serde_json::to_string(got).expect("json"), want.to_string());
        }
        let single: Vec<bool> = parsed
            .allocation_requests
            .iter()
            .map(|c| c.is_single_provider())
            .collect();
        let mut want_single = vec![false; wanted.len()];
        want_single[..3].fill(true);
        assert_eq!(single, want_single);
        assert!(parsed.allocation_requests[0].shares_resources_with(&parsed.allocation_requests[1]));
        assert!(
            !parsed.allocation_requests[1].shares_resources_with(&parsed.allocation_requests[2])
        );
    }

    #[test]
    fn a_resource_class_twice_is_kept_as_json() {
        let text = r#"{"allocation_requests": [{"allocations": {"rp": {"resources": {"VCPU": 1, "VCPU": 2}}}, "mappings": {"": ["rp"]}}], "provider_summaries": {}}"#;
        let parsed = AllocationCandidates::from_json(text).expect("parsed");
        let want: Value =
            serde_json::from_str::<Value>(text).expect("json")["allocation_requests"][0].clone();
        assert!(!parsed.allocation_requests[0].is_single_provider());
        assert_eq!(parsed.allocation_requests[0].json(), &want);
    }

    #[test]
    fn malformed_answers_are_bad_responses() {
        for body in [
            "not json",
            r#"{"allocation_requests": {}, "provider_summaries": {}}"#,
            r#"{"allocation_requests": [], "provider_summaries": []}"#,
            r#"{"allocation_requests": [{"allocations": ]}], "provider_summaries": {}}"#,
            r#"{"provider_summaries": {}}"#,
        ] {
            assert!(
                matches!(
                    AllocationCandidates::from_json(body),
                    Err(PlacementError::BadResponse { .. })
                ),
                "{body}"
            );
        }
    }
}
