// SPDX-License-Identifier: Apache-2.0
//! `[pci] alias` (a multi-valued option, one JSON object per entry) and the flavor's
//! `pci_passthrough:alias` extra spec turned into PCI requests, as nova's
//! `pci/request.py` does (`get_alias_from_config`, `_translate_alias_to_requests`).

use super::request::PciRequest;
use serde_json::Value;
use std::collections::BTreeMap;

/// Bounds on the flavor extra spec (it is operator data but travels with requests).
pub const MAX_ALIAS_SPEC_LEN: usize = 65_536;

/// One alias name: its NUMA policy and the specs that are ORed.
#[derive(Debug, Clone, PartialEq)]
pub struct Alias {
    pub numa_policy: String,
    pub specs: Vec<BTreeMap<String, Option<String>>>,
}

/// Aliases by name, in first-definition order.
pub type Aliases = Vec<(String, Alias)>;

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AliasError {
    /// nova's `PciInvalidAlias` (bad `[pci] alias` configuration).
    #[error("Invalid PCI alias definition: {0}")]
    Invalid(String),
    /// nova's `PciRequestAliasNotDefined`.
    #[error("PCI alias {0} is not defined")]
    NotDefined(String),
    /// The extra spec itself is malformed (nova raises a bare ValueError).
    #[error("invalid pci_passthrough:alias value: {0}")]
    BadExtraSpec(String),
}

const DEVICE_TYPES: [&str; 3] = ["type-PCI", "type-PF", "type-VF"];
const NUMA_POLICIES: [&str; 4] = ["required", "legacy", "preferred", "socket"];

/// Python `re` `^[\da-fA-F]{4}$`, searched: `$` also matches before a final newline.
fn is_pci_id(s: &str) -> bool {
    let s = s.strip_suffix('\n').unwrap_or(s);
    s.len() == 4 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `strutils.bool_from_string(value, strict=True)`.
fn strict_bool(s: &str) -> Result<bool, AliasError> {
    crate::py::strutils::bool_from_string_strict(s).map_err(|e| AliasError::Invalid(e.message))
}

/// Validates one entry against nova's `_ALIAS_SCHEMA`.
fn validate(entry: &serde_json::Map<String, Value>) -> Result<(), AliasError> {
    let invalid = |m: String| Err(AliasError::Invalid(m));
    for (key, value) in entry {
        let Some(s) = value.as_str() else {
            return match key.as_str() {
                "name" | "capability_type" | "product_id" | "vendor_id" | "device_type"
                | "numa_policy" | "resource_class" | "traits" | "live_migratable" => {
                    invalid(format!("{value} is not of type 'string'"))
                }
                _ => invalid(format!(
                    "Additional properties are not allowed ('{key}' was unexpected)"
                )),
            };
        };
        let ok = match key.as_str() {
            "name" => (1..=256).contains(&s.chars().count()),
            "capability_type" => s == "pci",
            "product_id" | "vendor_id" => is_pci_id(s),
            "device_type" => DEVICE_TYPES.contains(&s),
            "numa_policy" => NUMA_POLICIES.contains(&s),
            "resource_class" | "traits" | "live_migratable" => true,
            _ => {
                return invalid(format!(
                    "Additional properties are not allowed ('{key}' was unexpected)"
                ))
            }
        };
        if !ok {
            return invalid(format!("{key}: {s:?} is not valid under the alias schema"));
        }
    }
    if !entry.contains_key("name") {
        return invalid("'name' is a required property".into());
    }
    Ok(())
}

/// `get_alias_from_config` over the `[pci] alias` entries (`pci_in_placement` is
/// `[filter_scheduler] pci_in_placement`).
pub fn parse_aliases(entries: &[String], pci_in_placement: bool) -> Result<Aliases, AliasError> {
    let mut aliases: Aliases = Vec::new();
    for text in entries {
        let value: Value =
            serde_json::from_str(text.trim_matches(|c: char| c.is_ascii_whitespace()))
                .map_err(|e| AliasError::Invalid(e.to_string()))?;
        let Value::Object(mut entry) = value else {
            return Err(AliasError::Invalid(format!(
                "{text} is not of type 'object'"
            )));
        };
        validate(&entry)?;
        let take = |e: &mut serde_json::Map<String, Value>, k: &str| {
            e.remove(k).and_then(|v| v.as_str().map(str::to_string))
        };
        let name = take(&mut entry, "name")
            .unwrap_or_default()
            .trim()
            .to_string();
        let numa_policy = take(&mut entry, "numa_policy")
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "legacy".into());
        let mut spec: BTreeMap<String, Option<String>> = BTreeMap::new();
        let dev_type = take(&mut entry, "device_type");
        let live = take(&mut entry, "live_migratable");
        for (k, v) in entry {
            spec.insert(k, v.as_str().map(str::to_string));
        }
        if let Some(t) = dev_type.filter(|t| !t.is_empty()) {
            spec.insert("dev_type".into(), Some(t));
        }
        if let Some(l) = live {
            let v = if strict_bool(&l)? { "true" } else { "false" };
            spec.insert("live_migratable".into(), Some(v.into()));
        }
        match aliases.iter_mut().find(|(n, _)| *n == name) {
            None => aliases.push((
                name,
                Alias {
                    numa_policy,
                    specs: vec![spec],
                },
            )),
            Some((_, alias)) => {
                if alias.numa_policy != numa_policy {
                    return Err(AliasError::Invalid(format!(
                        "NUMA policy mismatch for alias '{name}'"
                    )));
                }
                // nova indexes `dev_type` on both sides: a missing one raises KeyError.
                let (Some(first), Some(this)) =
                    (alias.specs[0].get("dev_type"), spec.get("dev_type"))
                else {
                    return Err(AliasError::Invalid("'dev_type'".into()));
                };
                if first != this {
                    return Err(AliasError::Invalid(format!(
                        "Device type mismatch for alias '{name}'"
                    )));
                }
                alias.specs.push(spec);
            }
        }
    }
    if pci_in_placement {
        let multi: Vec<&str> = aliases
            .iter()
            .filter(|(_, a)| a.specs.len() > 1)
            .map(|(n, _)| n.as_str())
            .collect();
        if !multi.is_empty() {
            return Err(AliasError::Invalid(format!(
                "The PCI alias(es) {} have multiple specs but [filter_scheduler]pci_in_placement is True.",
                multi.join(",")
            )));
        }
    }
    let mut missing: Vec<&str> = aliases
        .iter()
        .filter(|(_, a)| {
            a.specs.iter().any(|s| {
                let ids = s.contains_key("vendor_id") && s.contains_key("product_id");
                !(ids || (pci_in_placement && s.contains_key("resource_class")))
            })
        })
        .map(|(n, _)| n.as_str())
        .collect();
    missing.sort_unstable();
    missing.dedup();
    if !missing.is_empty() {
        return Err(AliasError::Invalid(format!(
            "The PCI alias(es) {} does not have vendor_id and product_id fields set{}.",
            missing.join(","),
            if pci_in_placement {
                " or resource_class field set"
            } else {
                ""
            }
        )));
    }
    Ok(aliases)
}

/// `get_pci_requests_from_flavor`: the flavor's `pci_passthrough:alias` value
/// (`name:count[,name:count...]`) as requests. `request_ids` gives each request its
/// id (nova draws a fresh uuid), `affinity_policy` overrides the aliases' policy.
pub fn requests_from_flavor(
    extra_specs: &BTreeMap<String, String>,
    aliases: &Aliases,
    affinity_policy: Option<&str>,
    mut request_ids: impl FnMut() -> String,
) -> Result<Vec<PciRequest>, AliasError> {
    let Some(value) = extra_specs.get("pci_passthrough:alias") else {
        return Ok(Vec::new());
    };
    if value.len() > MAX_ALIAS_SPEC_LEN {
        return Err(AliasError::BadExtraSpec("value too long".into()));
    }
    let mut out = Vec::new();
    for item in value.split(',') {
        let parts: Vec<&str> = item.split(':').collect();
        let [name, count] = parts[..] else {
            return Err(AliasError::BadExtraSpec(format!(
                "{item:?} is not name:count"
            )));
        };
        let name = name.trim();
        let Some((_, alias)) = aliases.iter().find(|(n, _)| n == name) else {
            return Err(AliasError::NotDefined(name.to_string()));
        };
        // Python `int(text)` for the count in `name:count`.
        let count =
            crate::py::int::int_i64(count).map_err(|e| AliasError::BadExtraSpec(e.message))?;
        out.push(PciRequest {
            count,
            spec: alias.specs.clone(),
            alias_name: Some(name.to_string()),
            request_id: Some(request_ids()),
            numa_policy: Some(
                affinity_policy
                    .filter(|p| !p.is_empty())
                    .unwrap_or(&alias.numa_policy)
                    .to_string(),
            ),
            requester_id: None,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(e: &[&str]) -> Vec<String> {
        e.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn same_name_entries_are_ored() {
        let a = parse_aliases(
            &entries(&[
                r#"{"name": "QuickAssist", "product_id": "0443", "vendor_id": "8086", "device_type": "type-PCI", "numa_policy": "legacy"}"#,
                r#"{"name": " QuickAssist ", "product_id": "0442", "vendor_id": "8086", "device_type": "type-PCI"}"#,
            ]),
            false,
        )
        .expect("aliases");
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].1.specs.len(), 2);
        assert_eq!(
            a[0].1.specs[1].get("dev_type"),
            Some(&Some("type-PCI".into()))
        );
        let flavor: BTreeMap<String, String> = [(
            "pci_passthrough:alias".to_string(),
            "QuickAssist: 2".to_string(),
        )]
        .into();
        let reqs = requests_from_flavor(&flavor, &a, None, || "id".into()).expect("reqs");
        assert_eq!(reqs[0].count, 2);
        assert_eq!(reqs[0].numa_policy.as_deref(), Some("legacy"));
    }

    #[test]
    fn nova_rejections() {
        let bad = |e: &[&str]| parse_aliases(&entries(e), false).is_err();
        assert!(bad(&[
            r#"{"name": "a", "vendor_id": "808", "product_id": "0001"}"#
        ]));
        assert!(bad(&[r#"{"name": "a", "vendor_id": "8086"}"#]));
        assert!(bad(&[
            r#"{"name": "a", "vendor_id": "8086", "product_id": "1", "x": "y"}"#
        ]));
        assert!(bad(&[
            r#"{"name": "a", "vendor_id": "8086", "product_id": "0001"}"#,
            r#"{"name": "a", "vendor_id": "8086", "product_id": "0002"}"#
        ]));
        assert!(bad(&[
            r#"{"name": "a", "vendor_id": "8086", "product_id": "0001", "numa_policy": "required"}"#,
            r#"{"name": "a", "vendor_id": "8086", "product_id": "0002"}"#
        ]));
        assert!(bad(&[
            r#"{"name": "a", "vendor_id": "8086", "product_id": "0001", "live_migratable": "maybe"}"#
        ]));
        let a = parse_aliases(
            &entries(&[r#"{"name": "a", "vendor_id": "8086", "product_id": "0001"}"#]),
            false,
        )
        .expect("ok");
        let spec = |v: &str| -> BTreeMap<String, String> {
            [("pci_passthrough:alias".to_string(), v.to_string())].into()
        };
        assert!(matches!(
            requests_from_flavor(&spec("b:1"), &a, None, String::new),
            Err(AliasError::NotDefined(_))
        ));
        assert!(matches!(
            requests_from_flavor(&spec("a"), &a, None, String::new),
            Err(AliasError::BadExtraSpec(_))
        ));
        assert!(matches!(
            requests_from_flavor(&spec("a:x"), &a, None, String::new),
            Err(AliasError::BadExtraSpec(_))
        ));
        assert_eq!(
            requests_from_flavor(&spec("a:1_0"), &a, None, String::new).map(|r| r[0].count),
            Ok(10)
        );
    }
}
