// SPDX-License-Identifier: Apache-2.0
//! `ImagePropertiesFilter`: the host must support the image's architecture,
//! hypervisor type and VM mode (one of its `supported_instances` triples), its
//! hypervisor version must satisfy `img_hv_requested_version`, and with
//! `hw_maxphysaddr_bits` nova reaches code that raises (see [`MaxPhysAddr`]).
//!
//! Version predicates follow oslo.utils' `VersionPredicate` over `packaging` 26's
//! PEP 440 `Version` (the versions nova 34's venv pins), in [`pep440`].

use super::utils::{py_int, py_isspace, PyError, PyExc};
use super::{FilterRequest, HostFilter};
use crate::model::{HostState, RequestSpec};
use serde_json::{Map, Value};
use tracing::{debug, warn};

pub struct ImagePropertiesFilter {
    /// `[filter_scheduler] image_properties_default_architecture` (None).
    pub default_architecture: Option<String>,
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
            Some(p) => Some(pep440::VersionPredicate::parse(p)?),
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
    predicate: Option<pep440::VersionPredicate>,
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
        Some(Value::String(s)) => Ok(Some(py_int(s)?)),
        Some(_) => Err(bad()),
    }
}

/// `_compare_product_version`: skipped when the host reports no version (None or 0)
/// or the image requests none; else `VersionPredicate(req).satisfied_by(host)`.
/// (An empty predicate cannot exist: `VersionPredicate("")` raises, so the field
/// rejects it.)
fn compare_product_version(
    hypervisor_version: Option<i64>,
    predicate: Option<&pep440::VersionPredicate>,
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

/// nova's `fields.Architecture.ALL` (also the choices of
/// `image_properties_default_architecture`).
pub use crate::config::scheduler::ARCHITECTURES;

/// nova's `fields.HVType.ALL`.
pub const HV_TYPES: &[&str] = &[
    "baremetal",
    "bhyve",
    "docker",
    "fake",
    "hyperv",
    "ironic",
    "kqemu",
    "kvm",
    "lxc",
    "lxd",
    "openvz",
    "parallels",
    "phyp",
    "qemu",
    "test",
    "uml",
    "vbox",
    "vz",
    "vmware",
    "xen",
    "zvm",
    "prsm",
];

/// nova's `fields.VMMode.ALL`.
pub const VM_MODES: &[&str] = &["hvm", "xen", "uml", "exe"];

/// `fields.Architecture.canonicalize` (Python's Unicode `lower()`).
pub fn canonical_architecture(name: &str) -> Result<String, PyError> {
    let lower = name.to_lowercase();
    let canonical = match lower.as_str() {
        "i386" | "i486" | "i586" | "x86_32" | "x86_32p" => "i686".to_string(),
        "amd64" => "x86_64".to_string(),
        _ => lower,
    };
    valid(canonical, ARCHITECTURES, "InvalidArchitectureName", name)
}

/// `fields.HVType.canonicalize`.
pub fn canonical_hv_type(name: &str) -> Result<String, PyError> {
    let lower = name.to_lowercase();
    let canonical = if lower == "xapi" {
        "xen".to_string()
    } else {
        lower
    };
    valid(canonical, HV_TYPES, "InvalidHypervisorVirtType", name)
}

/// `fields.VMMode.canonicalize`.
pub fn canonical_vm_mode(name: &str) -> Result<String, PyError> {
    let lower = name.to_lowercase();
    let canonical = match lower.as_str() {
        "pv" => "xen".to_string(),
        "hv" | "baremetal" => "hvm".to_string(),
        _ => lower,
    };
    valid(canonical, VM_MODES, "InvalidVirtualMachineMode", name)
}

fn valid(canonical: String, all: &[&str], exc: &str, name: &str) -> Result<String, PyError> {
    if all.contains(&canonical.as_str()) {
        Ok(canonical)
    } else {
        Err(PyError::value_error(format!("{exc}: {name:?}")))
    }
}

/// PEP 440 versions and oslo.utils' `VersionPredicate`, as `packaging` 26.3 parses and
/// orders them on CPython 3.11.7 (the possessive-quantifier pattern).
pub mod pep440 {
    use super::py_isspace;
    use crate::filters::utils::{PyError, PY_INT_MAX_STR_DIGITS};
    use std::cmp::Ordering;

    /// A non-negative integer of any size: its decimal digits without leading zeros.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Num(String);

    impl Num {
        fn parse(digits: &str) -> Result<Num, PyError> {
            if digits.len() > PY_INT_MAX_STR_DIGITS {
                return Err(PyError::value_error(format!(
                    "Exceeds the limit ({PY_INT_MAX_STR_DIGITS} digits) for integer string conversion"
                )));
            }
            Ok(Num(digits.trim_start_matches('0').to_string()))
        }
        fn zero() -> Num {
            Num(String::new())
        }
        fn is_zero(&self) -> bool {
            self.0.is_empty()
        }
    }

    impl Ord for Num {
        fn cmp(&self, other: &Self) -> Ordering {
            self.0
                .len()
                .cmp(&other.0.len())
                .then_with(|| self.0.cmp(&other.0))
        }
    }

    impl PartialOrd for Num {
        fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
            Some(self.cmp(other))
        }
    }

    /// A local version segment: strings sort before numbers.
    #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
    enum Local {
        Str(String),
        Int(Num),
    }

    /// `packaging.version.Version._key`: epoch, release without trailing zeros, the
    /// pre/post/dev suffix `(pre_rank, pre_n, post_rank, post_n, dev_rank, dev_n)`,
    /// then the local segments (absent sorts first).
    #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
    pub struct Version {
        epoch: Num,
        release: Vec<Num>,
        suffix: (i8, Num, i8, Num, i8, Num),
        local: Option<Vec<Local>>,
    }

    fn invalid(s: &str) -> PyError {
        PyError::value_error(format!("Invalid version: {s:?}"))
    }

    /// A cursor over the version text (ASCII matching; other characters never match).
    struct Cursor<'a> {
        s: &'a str,
        pos: usize,
    }

    impl<'a> Cursor<'a> {
        fn rest(&self) -> &'a str {
            &self.s[self.pos..]
        }
        fn digits(&mut self) -> Option<&'a str> {
            let n = self
                .rest()
                .bytes()
                .take_while(|b| b.is_ascii_digit())
                .count();
            (n > 0).then(|| {
                let d = &self.rest()[..n];
                self.pos += n;
                d
            })
        }
        fn sep(&mut self) -> bool {
            if matches!(self.rest().bytes().next(), Some(b'.' | b'_' | b'-')) {
                self.pos += 1;
                true
            } else {
                false
            }
        }
        fn byte(&mut self, b: u8) -> bool {
            if self.rest().as_bytes().first() == Some(&b) {
                self.pos += 1;
                true
            } else {
                false
            }
        }
        /// The first alternative (in regex order) that prefixes the rest, ASCII
        /// case-insensitively.
        fn word(&mut self, alternatives: &[&'static str]) -> Option<&'static str> {
            let rest = self.rest().as_bytes();
            let found = alternatives.iter().find(|w| {
                rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w.as_bytes())
            })?;
            self.pos += found.len();
            Some(found)
        }
        fn alnum_run(&mut self) -> Option<&'a str> {
            let n = self
                .rest()
                .bytes()
                .take_while(|b| b.is_ascii_alphanumeric())
                .count();
            (n > 0).then(|| {
                let d = &self.rest()[..n];
                self.pos += n;
                d
            })
        }
    }

    impl Version {
        /// `packaging.version.Version(s)`.
        pub fn parse(s: &str) -> Result<Version, PyError> {
            // The fast path for digits and dots only (no stripping there).
            if s.bytes().all(|b| b == b'.' || b.is_ascii_digit()) {
                let mut release = Vec::new();
                for part in s.split('.') {
                    if part.is_empty() {
                        return Err(invalid(s));
                    }
                    release.push(Num::parse(part)?);
                }
                return Ok(Version::build(Num::zero(), release, None, None, None, None));
            }
            let trimmed_start = s.trim_start_matches(py_isspace);
            let mut c = Cursor {
                s: trimmed_start,
                pos: 0,
            };
            // v?+
            let _ = c.byte(b'v') || c.byte(b'V');
            // (?:(?P<epoch>[0-9]+)!)?+
            let save = c.pos;
            let epoch = match c.digits() {
                Some(d) if c.byte(b'!') => Num::parse(d)?,
                _ => {
                    c.pos = save;
                    Num::zero()
                }
            };
            // (?P<release>[0-9]+(?:\.[0-9]+)*+)
            let mut release = vec![Num::parse(c.digits().ok_or_else(|| invalid(s))?)?];
            loop {
                let save = c.pos;
                if c.byte(b'.') {
                    if let Some(d) = c.digits() {
                        release.push(Num::parse(d)?);
                        continue;
                    }
                }
                c.pos = save;
                break;
            }
            // pre: [._-]?+ (alpha|a|beta|b|preview|pre|c|rc) [._-]?+ ([0-9]+)?
            let save = c.pos;
            c.sep();
            let pre = match c.word(&["alpha", "a", "beta", "b", "preview", "pre", "c", "rc"]) {
                Some(letter) => {
                    c.sep();
                    let n = c.digits().map(Num::parse).transpose()?;
                    let rank = match letter {
                        "alpha" | "a" => 0,
                        "beta" | "b" => 1,
                        _ => 2, // c, pre, preview, rc → rc
                    };
                    Some((rank, n.unwrap_or_else(Num::zero)))
                }
                None => {
                    c.pos = save;
                    None
                }
            };
            // post: -([0-9]+) | [._-]? (post|rev|r) [._-]? ([0-9]+)?
            let save = c.pos;
            let post = if let (true, Some(d)) = (c.byte(b'-'), c.digits()) {
                Some(Num::parse(d)?)
            } else {
                c.pos = save;
                c.sep();
                if c.word(&["post", "rev", "r"]).is_some() {
                    c.sep();
                    Some(
                        c.digits()
                            .map(Num::parse)
                            .transpose()?
                            .unwrap_or_else(Num::zero),
                    )
                } else {
                    c.pos = save;
                    None
                }
            };
            // dev: [._-]?+ dev [._-]?+ ([0-9]+)?
            let save = c.pos;
            c.sep();
            let dev = if c.word(&["dev"]).is_some() {
                c.sep();
                Some(
                    c.digits()
                        .map(Num::parse)
                        .transpose()?
                        .unwrap_or_else(Num::zero),
                )
            } else {
                c.pos = save;
                None
            };
            // local: \+ [a-z0-9]+ (?:[._-][a-z0-9]+)*+
            let save = c.pos;
            let local = match (c.byte(b'+'), c.alnum_run()) {
                (true, Some(first)) => {
                    let mut parts = vec![first];
                    loop {
                        let save = c.pos;
                        if c.sep() {
                            if let Some(p) = c.alnum_run() {
                                parts.push(p);
                                continue;
                            }
                        }
                        c.pos = save;
                        break;
                    }
                    Some(
                        parts
                            .into_iter()
                            .map(|p| {
                                if p.bytes().all(|b| b.is_ascii_digit()) {
                                    Num::parse(p).map(Local::Int)
                                } else {
                                    Ok(Local::Str(p.to_ascii_lowercase()))
                                }
                            })
                            .collect::<Result<Vec<_>, _>>()?,
                    )
                }
                _ => {
                    c.pos = save;
                    None
                }
            };
            if !c.rest().chars().all(py_isspace) {
                return Err(invalid(s));
            }
            Ok(Version::build(epoch, release, pre, post, dev, local))
        }

        fn build(
            epoch: Num,
            mut release: Vec<Num>,
            pre: Option<(i8, Num)>,
            post: Option<Num>,
            dev: Option<Num>,
            local: Option<Vec<Local>>,
        ) -> Version {
            while release.last().is_some_and(Num::is_zero) {
                release.pop();
            }
            let (pre_rank, pre_n) = match (&pre, &post, &dev) {
                (None, None, Some(_)) => (-1, Num::zero()),
                (None, _, _) => (3, Num::zero()),
                (Some((rank, n)), _, _) => (*rank, n.clone()),
            };
            let (post_rank, post_n) = match post {
                None => (0, Num::zero()),
                Some(n) => (1, n),
            };
            let (dev_rank, dev_n) = match dev {
                None => (1, Num::zero()),
                Some(n) => (0, n),
            };
            Version {
                epoch,
                release,
                suffix: (pre_rank, pre_n, post_rank, post_n, dev_rank, dev_n),
                local,
            }
        }
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Op {
        Lt,
        Le,
        Eq,
        Gt,
        Ge,
        Ne,
    }

    /// oslo.utils `versionutils.VersionPredicate`: comma-separated clauses, each
    /// `^\s*(<=|>=|<|>|!=|==)\s*(\S+)\s*$`, all of which must hold.
    #[derive(Debug, Clone)]
    pub struct VersionPredicate {
        clauses: Vec<(Op, Version)>,
    }

    impl VersionPredicate {
        pub fn parse(predicate: &str) -> Result<VersionPredicate, PyError> {
            let clauses = predicate
                .split(',')
                .map(|clause| {
                    let bad = || {
                        PyError::value_error(format!("bad package restriction syntax: {clause}"))
                    };
                    let t = clause.trim_start_matches(py_isspace);
                    let (op, rest) = [
                        ("<=", Op::Le),
                        (">=", Op::Ge),
                        ("<", Op::Lt),
                        (">", Op::Gt),
                        ("!=", Op::Ne),
                        ("==", Op::Eq),
                    ]
                    .iter()
                    .find_map(|(p, op)| t.strip_prefix(p).map(|r| (*op, r)))
                    .ok_or_else(bad)?;
                    let rest = rest.trim_matches(py_isspace);
                    // One run of non-whitespace. (A shorter operator match would leave
                    // a version starting with '=', which never parses either.)
                    if rest.is_empty() || rest.chars().any(py_isspace) {
                        return Err(bad());
                    }
                    Ok((op, Version::parse(rest)?))
                })
                .collect::<Result<_, _>>()?;
            Ok(VersionPredicate { clauses })
        }

        pub fn satisfied_by(&self, version: &str) -> Result<bool, PyError> {
            let v = Version::parse(version)?;
            Ok(self.clauses.iter().all(|(op, req)| match op {
                Op::Lt => v < *req,
                Op::Le => v <= *req,
                Op::Eq => v == *req,
                Op::Gt => v > *req,
                Op::Ge => v >= *req,
                Op::Ne => v != *req,
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::pep440::{Version, VersionPredicate};
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
        let filter = ImagePropertiesFilter {
            default_architecture: default_arch.map(str::to_string),
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
        };
        assert!(f.once_per_request());
        assert!(f.run_on_rebuild());
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
    #[test]
    fn pep440_against_packaging() {
        let classes: &[&[&str]] = &[
            &["0", "0.0"],
            &["1.0dev", "1.0.dev", "1.0-dev", "1.0.dev0"],
            &["1.0.dev1", "1.0Dev1"],
            &["1.0a", "1.0a-", "1.0a.", "1.0a0"],
            &["1.0a1.dev2"],
            &["1.0a1", "1.0alpha1", "1.0.a.1", "1.0-a-1"],
            &["1.0a_1.post-2.dev_3+x.Y-z"],
            &["1.0beta"],
            &["1.0b2"],
            &["1.0pre", "1.0pre-"],
            &["1.0c1", "1.0rc1", "1.0RC1"],
            &["1.0preview2"],
            &[
                "1",
                "1.0",
                "1.0.0",
                "v1.0",
                "V1.0",
                " 1.0 ",
                "0!1.0",
                "01.00",
                "1.0.0.0.0",
                "1.0\u{a0}",
                "\u{2003}1.0",
                "1.0\u{1c}",
                "1.0\u{a}",
            ],
            &["1.0+a"],
            &["1.0+abc"],
            &["1.0+ABC-def_1"],
            &["1.0+abc.1"],
            &["1.0+b"],
            &["1.0+1", "1.0+01"],
            &["1.0+1.a"],
            &["1.0+1.abc"],
            &["1.0+1.0"],
            &["1.0post", "1.0post.", "1.0.r", "1.0r", "1.0.post0"],
            &["1.0.post1.dev3"],
            &["1.0.post1", "1.0-1", "1.0-r1", "1.0POST1"],
            &["1.0rev2"],
            &["6.0"],
            &["6.2"],
            &["99999999999999999999.1"],
            &["1!1.0"],
        ];
        let invalid: &[&str] = &[
            "1..0",
            "1.",
            "1.0+",
            "1.0_1",
            "abc",
            "",
            "1.0 x",
            "=1.0",
            "1.0-",
            "1.0.devx",
            "1!",
            "!1",
            "1.0+a..b",
            "v 1.0",
            "1.0a1b2",
            "1.0\u{661}",
        ];
        let hosts: &[i64] = &[6000000, 6001000, 6002000, 5000, 1, 7000000, 1000, 6000001];
        let host_strs: &[&str] = &[
            "6.0.0", "6.1.0", "6.2.0", "5.0", "1", "7.0.0", "1.0", "6.0.1",
        ];
        let predicates: &[(&str, Option<&[bool]>)] = &[
            (
                ">=6.0,<6.2",
                Some(&[true, true, false, false, false, false, false, true]),
            ),
            (
                "==6.0",
                Some(&[true, false, false, false, false, false, false, false]),
            ),
            (
                "==6",
                Some(&[true, false, false, false, false, false, false, false]),
            ),
            (
                "!=6.0.0",
                Some(&[false, true, true, true, true, true, true, true]),
            ),
            (
                ">6.0.0",
                Some(&[false, true, true, false, false, true, false, true]),
            ),
            (
                "<= 6.0 ",
                Some(&[true, false, false, true, true, false, true, false]),
            ),
            (
                ">=6.0, <6.2",
                Some(&[true, true, false, false, false, false, false, true]),
            ),
            (
                " >= 6.0",
                Some(&[true, true, true, false, false, true, false, true]),
            ),
            (" >=6.0,", None),
            (">=6.0,,<7", None),
            ("=6.0", None),
            (">=", None),
            ("<=6.0x", None),
            ("~=6.0", None),
            (">=6.0 6.1", None),
            (
                "==6.0\u{a}",
                Some(&[true, false, false, false, false, false, false, false]),
            ),
            (
                ">=1!0",
                Some(&[false, false, false, false, false, false, false, false]),
            ),
            (
                "<7.0.dev1",
                Some(&[true, true, true, true, true, false, true, true]),
            ),
            (
                ">6.0.post1",
                Some(&[false, true, true, false, false, true, false, true]),
            ),
            (
                "<6.0.1a1",
                Some(&[true, false, false, true, true, false, true, false]),
            ),
            ("===6.0", None),
            ("<==6", None),
            (
                "!=6.0+local",
                Some(&[true, true, true, true, true, true, true, true]),
            ),
        ];
        let parsed: Vec<Vec<Version>> = classes
            .iter()
            .map(|c| {
                c.iter()
                    .map(|v| Version::parse(v).unwrap_or_else(|e| panic!("{v:?}: {e}")))
                    .collect()
            })
            .collect();
        for (i, ci) in parsed.iter().enumerate() {
            for (j, cj) in parsed.iter().enumerate() {
                for (a, va) in ci.iter().enumerate() {
                    for (b, vb) in cj.iter().enumerate() {
                        assert_eq!(
                            va.cmp(vb),
                            i.cmp(&j),
                            "{:?} vs {:?}",
                            classes[i][a],
                            classes[j][b]
                        );
                    }
                }
            }
        }
        for v in invalid {
            assert!(Version::parse(v).is_err(), "{v:?} should not parse");
        }
        for (h, s) in hosts.iter().zip(host_strs) {
            assert_eq!(convert_version_to_str(*h).unwrap(), *s);
        }
        for (p, want) in predicates {
            match (VersionPredicate::parse(p), want) {
                (Ok(pred), Some(want)) => {
                    let got: Vec<bool> = host_strs
                        .iter()
                        .map(|s| pred.satisfied_by(s).unwrap())
                        .collect();
                    assert_eq!(got, want.to_vec(), "{p:?}");
                }
                (Err(_), None) => {}
                (got, want) => panic!("{p:?}: got {got:?}, want {want:?}"),
            }
        }
        assert!(Version::parse(&format!("1.{}", "9".repeat(4301))).is_err());
        assert!(Version::parse(&format!("1.{}", "9".repeat(4300))).is_ok());
    }
}
