// SPDX-License-Identifier: Apache-2.0
//! `ImagePropertiesFilter`: the host must support the image's architecture,
//! hypervisor type and VM mode (one of its `supported_instances` triples), its
//! hypervisor version must satisfy `img_hv_requested_version`, and with
//! `hw_maxphysaddr_bits` nova reaches code that raises (see [`MaxPhysAddr`]).
//!
//! Version predicates follow oslo.utils' `VersionPredicate` over `packaging` 26's
//! PEP 440 `Version` (the versions nova 34's venv pins), in [`crate::py::version`];
//! nova 29 and 30 read them with distutils ([`crate::py::distutils_version`]), both in
//! the filter and in the image's `VersionPredicateField`.

use super::{FilterRequest, HostFilter};
use crate::model::fields::{canonical_architecture, canonical_hv_type, canonical_vm_mode};
use crate::model::{HostState, RequestSpec};
use crate::py;
use crate::py::distutils_version;
use crate::py::version::VersionPredicate;
use crate::py::{PyError, PyExc};
use serde_json::{Map, Value};
use tracing::{debug, warn};

pub struct ImagePropertiesFilter {
    /// `[filter_scheduler] image_properties_default_architecture` (None).
    pub default_architecture: Option<String>,
    /// `img_hv_requested_version` read by distutils (nova 29, 30), else by oslo.utils.
    pub distutils_predicate: bool,
}

/// `img_hv_requested_version`, parsed as the release parses it.
enum Predicate {
    Pep440(VersionPredicate),
    Distutils(distutils_version::VersionPredicate),
}

impl Predicate {
    fn satisfied_by(&self, version: &str) -> Result<bool, PyError> {
        match self {
            Predicate::Pep440(p) => p.satisfied_by(version),
            Predicate::Distutils(p) => p.satisfied_by(version),
        }
    }
}

impl ImagePropertiesFilter {
    pub const NAME: &'static str = "ImagePropertiesFilter";

    /// nova's `_instance_supported`; `Err` where nova raises.
    pub fn check(&self, host: &HostState, spec: &RequestSpec) -> Result<bool, PyError> {
        let Requested {
            predicate,
            maxphysaddr_bits,
            checked,
        } = self.requested(spec)?;
        // Supported if no compute-related property is requested.
        if checked.iter().all(Option::is_none) {
            return Ok(true);
        }
        if host.supported_instances.is_empty() {
            debug!(host = %host.host, node = %host.nodename,
                   "Instance contains properties {:?}, but no corresponding supported_instances are advertised by the compute node", checked);
            return Ok(false);
        }
        for supported in host.supported_instances.iter() {
            // Membership in the triple, not position: img_hv_type 'xen' matches a
            // triple whose vm_mode is 'xen'.
            let props_match = checked
                .iter()
                .flatten()
                .all(|p| supported.iter().any(|s| s == p));
            if props_match
                && compare_product_version(host.hypervisor_version, predicate.as_ref())?
                && compare_maxphysaddr_bits(maxphysaddr_bits)?
            {
                return Ok(true);
            }
        }
        debug!(host = %host.host, node = %host.nodename, supported = ?host.supported_instances,
               hypervisor_version = ?host.hypervisor_version,
               "Instance contains properties that are not provided by the compute node supported_instances or hypervisor version do not match");
        Ok(false)
    }

    /// The image's compute-related properties, canonical, read once per call.
    /// nova's typed fields validate these when the request is deserialized (an
    /// invalid one never reaches the filter: the call fails); they are checked up front.
    fn requested(&self, spec: &RequestSpec) -> Result<Requested, PyError> {
        let empty = Map::new();
        let props = spec.image.as_ref().map_or(&empty, |i| &i.properties);
        let predicate = match prop_str(props, "img_hv_requested_version")? {
            // nova 29: `VersionPredicate('image_prop (%s)' % version_required)`.
            Some(p) if self.distutils_predicate => Some(Predicate::Distutils(
                distutils_version::VersionPredicate::parse(&format!("image_prop ({p})"))?,
            )),
            Some(p) => Some(Predicate::Pep440(VersionPredicate::parse(p)?)),
            None => None,
        };
        let maxphysaddr_bits = prop_int(props, "hw_maxphysaddr_bits")?;
        let arch = match prop_str(props, "hw_architecture")? {
            Some(a) => Some(a),
            None => self.default_architecture.as_deref(),
        };
        let checked = [
            arch.map(canonical_architecture).transpose()?,
            prop_str(props, "img_hv_type")?
                .map(canonical_hv_type)
                .transpose()?,
            prop_str(props, "hw_vm_mode")?
                .map(canonical_vm_mode)
                .transpose()?,
        ];
        Ok(Requested {
            predicate,
            maxphysaddr_bits,
            checked,
        })
    }
}

/// What the image asks of a host.
struct Requested {
    predicate: Option<Predicate>,
    maxphysaddr_bits: Option<i64>,
    /// Architecture, hypervisor type, VM mode.
    checked: [Option<String>; 3],
}

impl HostFilter for ImagePropertiesFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        self.check(host, req.spec).unwrap_or_else(|e| {
            // nova raises out of select_destinations; the request fails there.
            warn!(host = %host.host, error = %e, "ImagePropertiesFilter: nova raises here; host fails");
            false
        })
    }

    /// No compute-related property requested (and none invalid): nova's
    /// `_instance_supported` is `True` before it looks at the host.
    fn passes_every_host(&self, req: &FilterRequest<'_>) -> bool {
        self.requested(req.spec)
            .is_ok_and(|r| r.checked.iter().all(Option::is_none))
    }

    fn run_on_rebuild(&self) -> bool {
        true
    }

    fn once_per_request(&self) -> bool {
        true
    }
}

/// `image_props.get(name)` for a string property: unset and JSON null are None;
/// anything but a string cannot come out of nova's typed field.
fn prop_str<'a>(props: &'a Map<String, Value>, name: &str) -> Result<Option<&'a str>, PyError> {
    match props.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(PyError::value_error(format!(
            "image property {name}: expected a string, got {other}"
        ))),
    }
}

/// `image_props.get(name)` for an IntegerField: oslo's coercion is `int(value)`.
fn prop_int(props: &Map<String, Value>, name: &str) -> Result<Option<i64>, PyError> {
    let bad = || PyError::value_error(format!("image property {name}: not an integer"));
    match props.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(i64::from(*b))),
        Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Ok(Some(i)),
            (None, Some(f)) if f.is_finite() => Ok(Some(f.trunc() as i64)),
            _ => Err(bad()),
        },
        Some(Value::String(s)) => Ok(Some(py::int::int_saturating(s)?)),
        Some(_) => Err(bad()),
    }
}

/// `_compare_product_version`: skipped when the host reports no version (None or 0)
/// or the image requests none; else `VersionPredicate(req).satisfied_by(host)`.
/// (An empty predicate cannot exist: `VersionPredicate("")` raises, so the field
/// rejects it.)
fn compare_product_version(
    hypervisor_version: Option<i64>,
    predicate: Option<&Predicate>,
) -> Result<bool, PyError> {
    let Some(predicate) = predicate else {
        return Ok(true);
    };
    let version = match hypervisor_version {
        None | Some(0) => return Ok(true),
        Some(v) => v,
    };
    let host_version = convert_version_to_str(version)?;
    predicate.satisfied_by(&host_version)
}

/// `_compare_maxphysaddr_bits`. nova 34 calls `host_state.cpu_info.get(...)`, but
/// `HostState.cpu_info` is the compute node's JSON *string* (or None), so with a
/// truthy `hw_maxphysaddr_bits` on the image this raises `AttributeError` for any
/// host that got this far, and the request fails. (nova's unit tests use a dict.)
/// We reproduce the failure rather than guess the intended comparison.
///
/// [`MaxPhysAddr`]: compare_maxphysaddr_bits
fn compare_maxphysaddr_bits(required: Option<i64>) -> Result<bool, PyError> {
    if required.unwrap_or(0) == 0 {
        return Ok(true);
    }
    Err(PyError::new(
        PyExc::AttributeError,
        "'str' object has no attribute 'get' (host_state.cpu_info)",
    ))
}

/// oslo.utils `convert_version_to_str`: base-1000 digits joined by dots
/// (`6000000` → `6.0.0`). Python loops forever on a negative number.
fn convert_version_to_str(version: i64) -> Result<String, PyError> {
    if version < 0 {
        return Err(PyError::value_error(format!(
            "negative hypervisor_version {version} (nova loops forever)"
        )));
    }
    let mut parts = Vec::new();
    let mut v = version;
    while v != 0 {
        parts.push((v % 1000).to_string());
        v /= 1000;
    }
    parts.reverse();
    Ok(parts.join("."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ImageMeta, RequestSpec};
    use chrono::Utc;
    use serde_json::json;

    fn run(
        default_arch: Option<&str>,
        image: Option<Value>,
        supported: &[[&str; 3]],
        hypervisor_version: Option<i64>,
    ) -> Result<bool, PyError> {
        run_in(false, default_arch, image, supported, hypervisor_version)
    }

    fn run_in(
        distutils_predicate: bool,
        default_arch: Option<&str>,
        image: Option<Value>,
        supported: &[[&str; 3]],
        hypervisor_version: Option<i64>,
    ) -> Result<bool, PyError> {
        let filter = ImagePropertiesFilter {
            default_architecture: default_arch.map(str::to_string),
            distutils_predicate,
        };
        let spec = RequestSpec {
            image: image.map(|p| ImageMeta {
                properties: p.as_object().cloned().unwrap_or_default(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let host = HostState {
            host: "host1".into(),
            supported_instances: std::sync::Arc::new(
                supported
                    .iter()
                    .map(|t| t.iter().map(|s| s.to_string()).collect())
                    .collect(),
            ),
            hypervisor_version,
            ..Default::default()
        };
        filter.check(&host, req.spec)
    }

    const KVM: [&str; 3] = ["x86_64", "kvm", "hvm"];
    const V6: Option<i64> = Some(6000000);

    /// nova's test_image_props_filters.
    #[test]
    fn nova_vectors() {
        let full = |req: &str| {
            Some(
                json!({"hw_architecture": "x86_64", "img_hv_type": "kvm", "hw_vm_mode": "hvm",
                        "img_hv_requested_version": req}),
            )
        };
        assert_eq!(run(None, full(">=6.0,<6.2"), &[KVM], V6), Ok(true));
        assert_eq!(run(None, full(">=6.2"), &[KVM], V6), Ok(false));
        assert_eq!(
            run(None, full(">=6.2"), &[KVM], None),
            Ok(true),
            "host without a version"
        );
        assert_eq!(run(None, full(">=6.0"), &[KVM], Some(5000)), Ok(false));
        // Default architecture applies to images without one.
        assert_eq!(
            run(
                Some("x86_64"),
                Some(json!({})),
                &[["aarch64", "kvm", "hvm"]],
                V6
            ),
            Ok(false)
        );
        assert_eq!(
            run(Some("x86_64"), None, &[["aarch64", "kvm", "hvm"]], V6),
            Ok(false)
        );
        assert_eq!(run(Some("x86_64"), Some(json!({})), &[KVM], V6), Ok(true));
        let arm = json!({"hw_architecture": "armv7l", "img_hv_type": "qemu", "hw_vm_mode": "hvm"});
        assert_eq!(run(None, Some(arm), &[KVM], V6), Ok(false));
        let partial = json!({"hw_architecture": "x86_64", "hw_vm_mode": "hvm"});
        assert_eq!(run(None, Some(partial.clone()), &[KVM], V6), Ok(true));
        assert_eq!(
            run(None, Some(partial.clone()), &[["x86_64", "xen", "xen"]], V6),
            Ok(false)
        );
        assert_eq!(run(None, None, &[KVM], V6), Ok(true), "no image");
        assert_eq!(run(None, Some(json!({})), &[], V6), Ok(true), "no props");
        assert_eq!(
            run(None, Some(partial), &[], V6),
            Ok(false),
            "no supported_instances"
        );
        // Canonicalisation.
        let compat = [
            (json!({"hw_vm_mode": "pv"}), ["x86_64", "xen", "xen"]),
            (json!({"hw_vm_mode": "hv"}), KVM),
            (json!({"hw_architecture": "x86_32"}), ["i686", "kvm", "hvm"]),
            (json!({"img_hv_type": "xapi"}), ["i686", "xen", "hvm"]),
            (
                json!({"hw_vm_mode": "baremetal"}),
                ["i686", "baremetal", "hvm"],
            ),
            (json!({"hw_architecture": "AMD64"}), KVM),
            (
                json!({"hw_architecture": "i386", "img_hv_type": "KVM"}),
                ["i686", "kvm", "hvm"],
            ),
        ];
        for (props, triple) in compat {
            assert_eq!(
                run(None, Some(props.clone()), &[triple], V6),
                Ok(true),
                "{props}"
            );
        }
        let f = ImagePropertiesFilter {
            default_architecture: None,
            distutils_predicate: false,
        };
        assert!(f.once_per_request());
        assert!(f.run_on_rebuild());
    }

    /// nova 29 and 30 read the predicate with distutils: `6.1` alone and PEP 440's
    /// forms are errors there, and a four-part host version cannot be compared.
    #[test]
    fn nova_29_reads_predicates_with_distutils() {
        let props =
            |req: &str| Some(json!({"img_hv_type": "kvm", "img_hv_requested_version": req}));
        assert_eq!(
            run_in(true, None, props(">= 6.0, < 6.2"), &[KVM], V6),
            Ok(true)
        );
        assert_eq!(run_in(true, None, props(">=6.2"), &[KVM], V6), Ok(false));
        for pep440_only in [">=6", ">=6.0.post1"] {
            assert!(
                run(None, props(pep440_only), &[KVM], V6).is_ok(),
                "{pep440_only}"
            );
            let e = run_in(true, None, props(pep440_only), &[KVM], V6).expect_err(pep440_only);
            assert_eq!(e.kind, PyExc::ValueError);
        }
        // 1.0.0.0: oslo's PEP 440 compares it, distutils raises.
        assert_eq!(
            run(None, props(">=1.0"), &[KVM], Some(1_000_000_000)),
            Ok(true)
        );
        assert!(run_in(true, None, props(">=1.0"), &[KVM], Some(1_000_000_000)).is_err());
    }

    #[test]
    fn membership_not_position_and_any_triple() {
        // img_hv_type 'xen' matches a triple whose *vm_mode* is xen.
        let xen = json!({"img_hv_type": "xen"});
        assert_eq!(
            run(None, Some(xen), &[["x86_64", "kvm", "xen"]], V6),
            Ok(true)
        );
        let props = json!({"hw_architecture": "aarch64", "img_hv_requested_version": ">=6.1"});
        let triples = [["x86_64", "kvm", "hvm"], ["aarch64", "qemu", "hvm"]];
        assert_eq!(
            run(None, Some(props.clone()), &triples, Some(6001000)),
            Ok(true)
        );
        assert_eq!(run(None, Some(props), &triples, V6), Ok(false));
    }

    #[test]
    fn where_nova_raises() {
        // Values nova's typed fields reject (the call fails before the filter).
        for props in [
            json!({"hw_architecture": "pdp11"}),
            json!({"img_hv_type": "hyperkit"}),
            json!({"hw_vm_mode": ""}),
            json!({"img_hv_requested_version": "6.0"}),
            json!({"img_hv_requested_version": ""}),
            json!({"hw_architecture": 64}),
            json!({"hw_maxphysaddr_bits": "many"}),
        ] {
            assert!(
                run(None, Some(props.clone()), &[KVM], V6).is_err(),
                "{props}"
            );
        }
        // hw_maxphysaddr_bits: nova calls .get() on the cpu_info *string*.
        let bits = json!({"hw_architecture": "x86_64", "hw_maxphysaddr_bits": 42});
        assert_eq!(
            run(None, Some(bits.clone()), &[KVM], V6).map_err(|e| e.kind),
            Err(PyExc::AttributeError)
        );
        // ... but only for a host that got that far, and never with 0 bits.
        assert_eq!(
            run(None, Some(bits), &[["aarch64", "kvm", "hvm"]], V6),
            Ok(false)
        );
        let zero = json!({"hw_architecture": "x86_64", "hw_maxphysaddr_bits": 0});
        assert_eq!(run(None, Some(zero), &[KVM], V6), Ok(true));
        // Without any of the three properties nothing else is looked at.
        let only_bits = json!({"hw_maxphysaddr_bits": 42, "img_hv_requested_version": ">=9"});
        assert_eq!(run(None, Some(only_bits), &[KVM], V6), Ok(true));
        // A negative hypervisor version would hang nova.
        let v = json!({"hw_architecture": "x86_64", "img_hv_requested_version": ">=1"});
        assert!(run(None, Some(v), &[KVM], Some(-1)).is_err());
    }

    #[test]
    fn hypervisor_version_strings() {
        for (v, s) in [
            (6000000, "6.0.0"),
            (7001123, "7.1.123"),
            (5000, "5.0"),
            (1, "1"),
            (1000000000, "1.0.0.0"),
        ] {
            assert_eq!(convert_version_to_str(v).unwrap(), s);
        }
    }

    /// Orderings, parse failures and predicate results computed by packaging 26.3 and
    /// oslo.utils in nova 34's venv.
    /// nova's hypervisor version integers as the strings the predicate reads.
    #[test]
    fn host_versions_as_strings() {
        let hosts: &[i64] = &[6000000, 6001000, 6002000, 5000, 1, 7000000, 1000, 6000001];
        let host_strs: &[&str] = &[
            "6.0.0", "6.1.0", "6.2.0", "5.0", "1", "7.0.0", "1.0", "6.0.1",
        ];
        for (h, s) in hosts.iter().zip(host_strs) {
            assert_eq!(convert_version_to_str(*h).unwrap(), *s);
        }
    }
}
