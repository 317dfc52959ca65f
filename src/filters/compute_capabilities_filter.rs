// SPDX-License-Identifier: Apache-2.0
//! `ComputeCapabilitiesFilter`: the flavor's extra specs in the `capabilities:` scope
//! (or with no scope at all) must match the host's attributes.
//!
//! nova's rules, reproduced:
//! * `hw:maxphysaddr_bits: B` is first rewritten to
//!   `capabilities:cpu_info:maxphysaddr:bits: '>= B'`.
//! * The key is split on **every** `:`. One part: considered only if the HostState has
//!   an attribute of that name (`hasattr`, methods included) or `stats` has the key;
//!   otherwise ignored. Several parts: ignored unless the first is `capabilities`.
//! * The remaining parts walk from the HostState: a string is JSON-decoded before it
//!   is walked into (bad JSON: the host fails), a dict is indexed, anything else is
//!   `getattr`, falling back to `stats[part]` when that is None (on a non-HostState
//!   value that fallback is an `AttributeError`: the host fails). None at any step:
//!   the host fails.
//! * `str()` of what was found (Python's: `1.0`, `True`, `['a', 'b']`, `{'k': 'v'}`)
//!   is compared with [`extra_specs_ops`](super::extra_specs_ops); any mismatch fails.
//!
//! Oddities kept from nova: `capabilities:service:disabled` always fails (`service`
//! is a `ReadOnlyDict`, which is not a `dict`, so it is `getattr`-walked); a
//! `host_ip` is a `netaddr.IPAddress`, so `capabilities:host_ip:version` is 4 or 6.
//!
//! Differences, all in corners no flavor uses: keys are visited in sorted order
//! (nova: the order of the flavor's dict), which only decides *which* exception is
//! raised when two keys would raise; walking into a method of a non-HostState value
//! or into an object nova holds whose `str()` carries a memory address or an object
//! repr (NUMA topology, PCI stats, metrics, aggregates, instances, datetimes' repr)
//! fails the host, where nova would compare that text.
//!
//! Where nova raises (`ValueError` from a numeric operator on text, `IndexError` from
//! a bare `<or>`, `RecursionError` from absurdly nested `cpu_info` JSON), the request
//! fails in nova; [`ComputeCapabilitiesFilter::check`] returns that error and
//! `host_passes` fails the host.

use super::extra_specs_ops::matches_pystr;
use super::host_attrs::{host_attr_as, host_has_attr, LockName};
use super::{FilterRequest, HostFilter};
use crate::model::{Flavor, HostState, RequestSpec};
use crate::py;
use crate::py::str::PyStr;
use crate::py::value::{py_str, value_attr, PyValue};
use crate::py::{PyError, PyExc};
use tracing::{debug, warn};

/// Nesting bound for JSON found in host attributes (`cpu_info`). CPython gives up
/// around 1000 levels (RecursionError); this is far beyond any real `cpu_info`.
pub const CAPABILITY_JSON_MAX_DEPTH: usize = 512;

#[derive(Debug, Clone, Copy, Default)]
pub struct ComputeCapabilitiesFilter {
    /// What `HostState._lock_name` is in the release.
    pub lock_name: LockName,
}

/// HostState attributes whose value shows the allocation candidates: the list
/// itself, and the bound methods, whose `str()` embeds nova's `HostState.__repr__`.
const ATTRIBUTES_SHOWING_CANDIDATES: &[&str] = &[
    "allocation_candidates",
    "update",
    "consume_from_request",
    "_locked_consume_from_request",
    "_update_from_compute_node",
];

impl ComputeCapabilitiesFilter {
    pub const NAME: &'static str = "ComputeCapabilitiesFilter";

    /// nova's `_satisfies_extra_specs`, raising where nova raises (nova 34's HostState).
    pub fn check(host: &HostState, flavor: &Flavor) -> Result<bool, PyError> {
        Self::default().check_as(host, flavor)
    }

    /// nova's `_satisfies_extra_specs` on this filter's release's HostState.
    pub fn check_as(&self, host: &HostState, flavor: &Flavor) -> Result<bool, PyError> {
        if !has_host_dependent_specs(flavor) {
            return Ok(true);
        }
        for (key, req) in extra_specs_in_nova_order(flavor) {
            let mut scope: Vec<&str> = key.split(':').collect();
            if scope.len() == 1 {
                if !host_has_attr(key) && !host.stats.contains_key(key) {
                    continue;
                }
            } else if scope[0] != "capabilities" {
                continue;
            } else {
                scope.remove(0);
            }
            let Some(cap) = get_capabilities_as(host, &scope, self.lock_name)? else {
                debug!(host = %host.host, node = %host.nodename, key,
                       "ComputeCapabilitiesFilter: no capability to retrieve");
                return Ok(false);
            };
            let Some(text) = py_str(&cap) else {
                debug!(host = %host.host, node = %host.nodename, key,
                       "ComputeCapabilitiesFilter: str() of the capability is not reproducible; failing the host");
                return Ok(false);
            };
            if !matches_pystr(Some(&text), &req)? {
                debug!(host = %host.host, node = %host.nodename, key, req = %req,
                       "ComputeCapabilitiesFilter: host fails extra_spec requirements");
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Whether any extra spec is looked at for a host: an unscoped key (matched
/// against the host's attributes and stats), a `capabilities:` one, or
/// `hw:maxphysaddr_bits` (rewritten into one). Flavors usually carry only other
/// scopes (`hw:`, `quota:`, `resources:`...), which every host passes without a look.
fn has_host_dependent_specs(flavor: &Flavor) -> bool {
    flavor
        .extra_specs
        .keys()
        .any(|k| !k.contains(':') || k.starts_with("capabilities:") || k == "hw:maxphysaddr_bits")
}

/// The extra specs in the order nova visits them: the flavor's (sorted here), with
/// `hw:maxphysaddr_bits` removed and `capabilities:cpu_info:maxphysaddr:bits` set to
/// `'>= ' + bits` (in place if present, else last, as a Python dict assignment does).
fn extra_specs_in_nova_order(flavor: &Flavor) -> Vec<(&str, std::borrow::Cow<'_, str>)> {
    const BITS: &str = "hw:maxphysaddr_bits";
    const TARGET: &str = "capabilities:cpu_info:maxphysaddr:bits";
    let bits = flavor.extra_specs.get(BITS).map(|b| format!(">= {b}"));
    let mut out: Vec<(&str, std::borrow::Cow<'_, str>)> = Vec::new();
    let mut placed = false;
    for (k, v) in &flavor.extra_specs {
        if bits.is_some() && k == BITS {
            continue;
        }
        match &bits {
            Some(b) if k == TARGET => {
                out.push((k.as_str(), b.clone().into()));
                placed = true;
            }
            _ => out.push((k.as_str(), v.as_str().into())),
        }
    }
    if let (Some(b), false) = (bits, placed) {
        out.push((TARGET, b.into()));
    }
    out
}

enum Cap {
    Host,
    Value(PyValue),
}

/// nova's `_get_capabilities(host_state, scope)`: `Ok(None)` where nova returns None.
/// Public for tests that want realistic operands.
pub fn get_capabilities(host: &HostState, scope: &[&str]) -> Result<Option<PyValue>, PyError> {
    get_capabilities_as(host, scope, LockName::Joined)
}

fn get_capabilities_as(
    host: &HostState,
    scope: &[&str],
    lock_name: LockName,
) -> Result<Option<PyValue>, PyError> {
    let mut cap = Cap::Host;
    for elem in scope {
        if let Cap::Value(PyValue::Str(s)) = &cap {
            let parsed = match s.to_str() {
                Some(text) => py::json::loads(text, CAPABILITY_JSON_MAX_DEPTH),
                None => Err(PyError::value_error("lone surrogate outside a JSON string")),
            };
            match parsed {
                Ok(v) => cap = Cap::Value(v),
                // json's decode errors are ValueErrors, which nova catches.
                Err(e) if e.kind == PyExc::ValueError => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        let next = match &cap {
            Cap::Value(PyValue::Dict(d)) if !d.user_dict => {
                d.get(elem.as_bytes()).cloned().unwrap_or(PyValue::None)
            }
            Cap::Host => match host_attr_as(host, elem, lock_name) {
                PyValue::None => host
                    .stats
                    .get(*elem)
                    .map_or(PyValue::None, |v| PyValue::Str(PyStr::new(v))),
                v => v,
            },
            // getattr(...) or, when None, `cap.stats`: an AttributeError off the HostState.
            Cap::Value(v) => value_attr(v, elem),
        };
        if next.is_none() {
            return Ok(None);
        }
        cap = Cap::Value(next);
    }
    Ok(match cap {
        Cap::Value(v) => Some(v),
        // An empty scope cannot happen (split never yields nothing).
        Cap::Host => None,
    })
}

impl HostFilter for ComputeCapabilitiesFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        match self.check_as(host, &req.spec.flavor) {
            Ok(passes) => {
                if !passes {
                    debug!(host = %host.host, node = %host.nodename,
                           "ComputeCapabilitiesFilter: host fails flavor extra_specs requirements");
                }
                passes
            }
            Err(e) => {
                // nova lets this exception end the whole request; we fail the host.
                warn!(host = %host.host, node = %host.nodename, error = %e,
                      "ComputeCapabilitiesFilter: nova would raise here; failing the host");
                false
            }
        }
    }

    /// No extra spec that reads the host: nova's loop skips every key.
    fn passes_every_host(&self, req: &FilterRequest<'_>) -> bool {
        !has_host_dependent_specs(&req.spec.flavor)
    }

    /// An extra spec naming `allocation_candidates`, or a HostState method (whose
    /// `str()` embeds the host's repr, which counts the candidates).
    fn reads_allocation_candidates(&self, spec: &RequestSpec) -> bool {
        extra_specs_in_nova_order(&spec.flavor)
            .iter()
            .any(|(key, _)| {
                let scope: Vec<&str> = key.split(':').collect();
                let first = match scope.as_slice() {
                    [one] => *one,
                    ["capabilities", first, ..] => *first,
                    _ => return false,
                };
                ATTRIBUTES_SHOWING_CANDIDATES.contains(&first)
            })
    }

    fn once_per_request(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flavor(specs: &[(&str, &str)]) -> Flavor {
        Flavor {
            extra_specs: specs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        }
    }

    fn stats(pairs: &[(&str, &str)]) -> HostState {
        HostState {
            host: "host1".into(),
            nodename: "node1".into(),
            stats: std::sync::Arc::new(pairs.iter().map(|&(k, v)| (k.into(), v.into())).collect()),
            ..Default::default()
        }
    }

    fn check(host: &HostState, specs: &[(&str, &str)]) -> bool {
        ComputeCapabilitiesFilter::check(host, &flavor(specs)).expect("no exception")
    }

    const CPU_INFO: &str = r#"{"vendor": "Intel", "model": "core2duo", "arch": "i686", "features": ["lahf_lm", "rdtscp"], "topology": {"cores": 1, "threads": 1, "sockets": 1}, "maxphysaddr": {"mode": "passthrough", "bits": 42}}"#;

    /// nova's test_compute_capabilities_filters.py.
    #[test]
    fn nova_vectors() {
        let h = stats(&[("opt1", "1"), ("opt2", "2")]);
        assert!(check(&h, &[("opt1", "1"), ("opt2", "2")]));
        assert!(!check(&h, &[("opt1", "1"), ("opt2", "222")]));
        assert!(check(&h, &[("capabilities:opt1", "1")]));
        assert!(check(&HostState::default(), &[]));

        let mut h = stats(&[]);
        h.cpu_info = Some(CPU_INFO.into());
        assert!(check(&h, &[("capabilities:cpu_info:vendor", "Intel")]));
        assert!(check(&h, &[("cpu_info", CPU_INFO)]));
        assert!(!check(&h, &[("cpu_info", "")]));
        assert!(check(&h, &[("hw:maxphysaddr_bits", "42")]));
        let mut h20 = h.clone();
        h20.cpu_info = Some(CPU_INFO.replace("42", "20").into());
        assert!(!check(&h20, &[("hw:maxphysaddr_bits", "42")]));
        let mut no_bits = h.clone();
        no_bits.cpu_info = Some(r#"{"vendor": "Intel"}"#.into());
        assert!(!check(&no_bits, &[("hw:maxphysaddr_bits", "42")]));
        for bad in [" { } ", "cpu_info"] {
            let mut hb = h.clone();
            hb.cpu_info = Some(bad.into());
            assert!(
                !check(&hb, &[("capabilities:cpu_info:vendor", "Intel")]),
                "{bad}"
            );
        }

        let h = HostState {
            free_ram_mb: 1024,
            ..stats(&[])
        };
        assert!(check(&h, &[("free_ram_mb", ">= 300")]));
        assert!(!check(&h, &[("free_ram_mb", "<= 300")]));
        assert!(check(&h, &[("vcpus_used", "<= 20")]));
        assert!(!check(&h, &[("vcpus_used", ">= 20")]));
        assert!(check(&h, &[("free_disk_mb", "0")]));
        assert!(!check(&h, &[("free_disk_mb", "1")]));
        assert!(check(&h, &[("XXYY", "1")]), "unknown attribute is ignored");
        assert!(check(&h, &[("wrong_scope:opt1", "1")]));

        let h = stats(&[("opt1", r#"{"a": 1, "b": {"aa": 2}}"#)]);
        assert!(check(
            &h,
            &[("opt1:a", "1"), ("capabilities:opt1:b:aa", "2")]
        ));
        assert!(!check(&HostState::default(), &[("capabilities:opts", "1")]));
    }

    #[test]
    fn python_str_of_attributes() {
        let mut h = stats(&[("k", "v")]);
        h.cpu_allocation_ratio = 16.0;
        h.hypervisor_version = Some(6_000_000);
        h.supported_instances =
            std::sync::Arc::new(vec![vec!["x86_64".into(), "kvm".into(), "hvm".into()]]);
        h.host_ip = Some("10.1.2.3".into());
        assert!(check(&h, &[("cpu_allocation_ratio", "16.0")]));
        assert!(check(&h, &[("cpu_allocation_ratio", "== 16")]));
        assert!(check(&h, &[("hypervisor_version", "6000000")]));
        assert!(check(
            &h,
            &[("supported_instances", "[['x86_64', 'kvm', 'hvm']]")]
        ));
        assert!(check(&h, &[("stats", "{'k': 'v'}")]));
        assert!(check(&h, &[("host_ip", "10.1.2.3")]));
        assert!(check(&h, &[("capabilities:host_ip:version", "4")]));
        // hasattr() is true for None-valued attributes: the key is then checked and fails.
        assert!(!check(&h, &[("hypervisor_type", "QEMU")]));
        // ... unless stats has it, which is the fallback.
        std::sync::Arc::make_mut(&mut h.stats).insert("hypervisor_type".into(), "QEMU".into());
        assert!(check(&h, &[("hypervisor_type", "QEMU")]));
        // service is a ReadOnlyDict, not a dict: nova getattr()s it and fails.
        assert!(!check(&h, &[("capabilities:service:disabled", "False")]));
        // An int walked into: its data attributes.
        assert!(check(
            &h,
            &[("capabilities:hypervisor_version:real", "6000000")]
        ));
        assert!(!check(&h, &[("capabilities:hypervisor_version:x", "1")]));
        // A JSON value walked into twice: a JSON string inside a stats value.
        std::sync::Arc::make_mut(&mut h.stats)
            .insert("j".into(), r#"{"a": "{\"b\": [1, 2.50]}"}"#.into());
        assert!(check(&h, &[("capabilities:j:a:b", "[1, 2.5]")]));
    }

    #[test]
    fn maxphysaddr_rewrite_order_and_exceptions() {
        let f = flavor(&[
            ("hw:maxphysaddr_bits", "42"),
            ("capabilities:cpu_info:maxphysaddr:bits", "1"),
            ("a", "b"),
        ]);
        let order: Vec<_> = extra_specs_in_nova_order(&f)
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        assert_eq!(
            order,
            vec!["a=b", "capabilities:cpu_info:maxphysaddr:bits=>= 42"]
        );
        let f = flavor(&[("zz", "1"), ("hw:maxphysaddr_bits", "8")]);
        let keys: Vec<_> = extra_specs_in_nova_order(&f)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(keys, vec!["zz", "capabilities:cpu_info:maxphysaddr:bits"]);

        let h = stats(&[("x", "abc")]);
        let err = ComputeCapabilitiesFilter::check(&h, &flavor(&[("x", ">= 1")])).unwrap_err();
        assert_eq!(err.kind, PyExc::ValueError);
        let err = ComputeCapabilitiesFilter::check(&h, &flavor(&[("x", "<or>")])).unwrap_err();
        assert_eq!(err.kind, PyExc::IndexError);
        let spec = crate::model::RequestSpec {
            flavor: flavor(&[("x", ">= 1")]),
            ..Default::default()
        };
        let req = FilterRequest {
            spec: &spec,
            now: chrono::Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        assert!(!ComputeCapabilitiesFilter::default().host_passes(&h, &req));
        assert!(ComputeCapabilitiesFilter::default().once_per_request());
        assert!(!ComputeCapabilitiesFilter::default().run_on_rebuild());
    }

    /// `_lock_name` is the tuple `(host, node)` up to nova 33: `str()` of it is what
    /// the extra spec meets.
    #[test]
    fn lock_name_by_release() {
        let h = stats(&[]);
        let joined = ComputeCapabilitiesFilter::default();
        let tuple = ComputeCapabilitiesFilter {
            lock_name: LockName::Tuple,
        };
        let spec = |req| flavor(&[("_lock_name", req)]);
        assert_eq!(joined.check_as(&h, &spec("<in> host1-node1")), Ok(true));
        assert_eq!(tuple.check_as(&h, &spec("<in> host1-node1")), Ok(false));
        assert_eq!(tuple.check_as(&h, &spec("<in> 'host1', 'node1'")), Ok(true));
        assert_eq!(tuple.check_as(&h, &spec("('host1', 'node1')")), Ok(true));
    }
}
