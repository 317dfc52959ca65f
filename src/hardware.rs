// SPDX-License-Identifier: Apache-2.0
//! nova's `nova/virt/hardware.py`: the flavor/image constraint readers that the
//! resource request and the request filters call, with nova's validation and its
//! exception classes and texts (an error here fails the request as nova's exception
//! would).

use crate::model::{Flavor, ImageMeta};
use crate::py;
use serde_json::Value;

/// An exception nova would raise while building the request: its class name (in
/// `nova.exception`, or the built-in `ValueError`) and `str(exc)`. It fails the
/// whole `select_destinations` call, as in nova.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RequestError {
    pub class: &'static str,
    pub message: String,
}

impl RequestError {
    pub fn new(class: &'static str, message: impl Into<String>) -> Self {
        RequestError {
            class,
            message: message.into(),
        }
    }

    /// The HTTP-ish `code` nova's exception class carries.
    pub fn code(&self) -> u16 {
        match self.class {
            "ImageCPUPinningForbidden"
            | "ImageCPUThreadPolicyForbidden"
            | "ImagePCINUMAPolicyForbidden" => 403,
            "FlavorImageConflict" | "RequestGroupSuffixConflict" | "NoValidHost" => 500,
            _ => 400,
        }
    }

    /// True for `ValueError`, a Python built-in rather than a nova exception.
    pub fn is_builtin(&self) -> bool {
        self.class == "ValueError"
    }
}

const CPU_POLICIES: [&str; 3] = ["dedicated", "shared", "mixed"];
const CPU_THREAD_POLICIES: [&str; 3] = ["prefer", "isolate", "require"];
const EMULATOR_THREADS_POLICIES: [&str; 2] = ["share", "isolate"];
const PCI_NUMA_POLICIES: [&str; 4] = ["required", "legacy", "preferred", "socket"];
const TPM_VERSIONS: [&str; 2] = ["1.2", "2.0"];
const TPM_MODELS: [&str; 2] = ["tpm-tis", "tpm-crb"];
const SECURE_BOOT: [&str; 3] = ["required", "disabled", "optional"];
const MAXPHYSADDR_MODES: [&str; 2] = ["passthrough", "emulate"];
const EPHEMERAL_FORMATS: [&str; 3] = ["plain", "luks", "luksv2"];
const SOUND_MODELS: [&str; 8] = [
    "sb16", "es1370", "pcspk", "ac97", "ich6", "ich9", "usb", "virtio",
];
const MEM_ENCRYPTION_MODELS: [&str; 4] = ["amd-sev", "amd-sev-es", "amd-sev-snp", "intel-tdx"];

/// Python's `str()` of a tuple of strings, as nova puts `fields.X.ALL` in messages.
fn py_tuple(items: &[&str]) -> String {
    let inner: Vec<String> = items.iter().map(|s| py::str::repr(s)).collect();
    format!("({})", inner.join(", "))
}

/// An image property as nova's `ImageMetaProps.get` returns it; typed fields are
/// strings, booleans or lists in the primitive.
fn image_prop<'a>(image: &'a ImageMeta, key: &str) -> Option<&'a Value> {
    image.properties.get(key).filter(|v| !v.is_null())
}

fn flavor_name(flavor: &Flavor) -> String {
    flavor.name.clone().unwrap_or_else(|| "None".into())
}

fn image_name(image: &ImageMeta) -> String {
    image.name.clone().unwrap_or_else(|| "None".into())
}

fn image_id(image: &ImageMeta) -> String {
    image.id.clone().unwrap_or_else(|| "<no-id>".into())
}

/// `_get_flavor_image_meta`: the flavor's `<prefix>:<key>` extra spec and the
/// image's `<prefix>_<key>` property.
fn flavor_image<'a>(
    key: &str,
    flavor: &'a Flavor,
    image: &'a ImageMeta,
    prefix: &str,
) -> (Option<&'a str>, Option<&'a Value>) {
    (
        flavor
            .extra_specs
            .get(&format!("{prefix}:{key}"))
            .map(String::as_str),
        image_prop(image, &format!("{prefix}_{key}")),
    )
}

/// Python truthiness of a property value.
fn truthy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) | Some(Value::Bool(false)) => false,
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(_) => true,
    }
}

/// `_get_unique_flavor_image_meta`: `flavor_value or image_value`, refusing two
/// different truthy values. String-valued keys only.
fn unique_flavor_image(
    key: &str,
    flavor: &Flavor,
    image: &ImageMeta,
    prefix: &str,
) -> Result<Option<String>, RequestError> {
    let (f, i) = flavor_image(key, flavor, image, prefix);
    let i_str = i.map(py::value::json_str);
    let f_truthy = f.is_some_and(|s| !s.is_empty());
    if f_truthy && truthy(i) && i_str.as_deref() != f {
        return Err(RequestError::new(
            "FlavorImageConflict",
            format!(
                "Flavor {} has {prefix}:{key} extra spec explicitly set to {}, conflicting with \
                 image {} which has {prefix}_{key} explicitly set to {}.",
                flavor_name(flavor),
                f.unwrap_or_default(),
                image_name(image),
                i_str.unwrap_or_default()
            ),
        ));
    }
    // Python's `flavor_value or image_value`.
    if f_truthy {
        return Ok(f.map(str::to_string));
    }
    Ok(i_str)
}

/// `get_cpu_policy_constraint`.
pub fn cpu_policy(flavor: &Flavor, image: &ImageMeta) -> Result<Option<String>, RequestError> {
    let (f, i) = flavor_image("cpu_policy", flavor, image, "hw");
    let i = i.and_then(Value::as_str);
    let invalid = |source: &str, requested: &str| {
        RequestError::new(
            "InvalidCPUAllocationPolicy",
            format!(
                "CPU policy requested from '{source}' is invalid, given: '{requested}', \
                 available: '{}'.",
                py_tuple(&CPU_POLICIES)
            ),
        )
    };
    if let Some(f) = f.filter(|f| !f.is_empty() && !CPU_POLICIES.contains(f)) {
        return Err(invalid("flavor extra specs", f));
    }
    if let Some(i) = i.filter(|i| !i.is_empty() && !CPU_POLICIES.contains(i)) {
        return Err(invalid("image properties", i));
    }
    let forbidden = || {
        RequestError::new(
            "ImageCPUPinningForbidden",
            "Image property 'hw_cpu_policy' is not permitted to override CPU pinning policy set \
             against the flavor",
        )
    };
    Ok(match f {
        Some("dedicated") => Some("dedicated".into()),
        Some("mixed") => {
            if i == Some("dedicated") {
                return Err(forbidden());
            }
            Some("mixed".into())
        }
        Some("shared") => {
            if matches!(i, Some("mixed") | Some("dedicated")) {
                return Err(forbidden());
            }
            Some("shared".into())
        }
        _ => i.filter(|i| CPU_POLICIES.contains(i)).map(str::to_string),
    })
}

/// `get_cpu_thread_policy_constraint`.
pub fn cpu_thread_policy(
    flavor: &Flavor,
    image: &ImageMeta,
) -> Result<Option<String>, RequestError> {
    let (f, i) = flavor_image("cpu_thread_policy", flavor, image, "hw");
    let i = i.and_then(Value::as_str);
    let invalid = |source: &str, requested: &str| {
        RequestError::new(
            "InvalidCPUThreadAllocationPolicy",
            format!(
                "CPU thread policy requested from '{source}' is invalid, given: '{requested}', \
                 available: '{}'.",
                py_tuple(&CPU_THREAD_POLICIES)
            ),
        )
    };
    if let Some(f) = f.filter(|f| !f.is_empty() && !CPU_THREAD_POLICIES.contains(f)) {
        return Err(invalid("flavor extra specs", f));
    }
    if let Some(i) = i.filter(|i| !i.is_empty() && !CPU_THREAD_POLICIES.contains(i)) {
        return Err(invalid("image properties", i));
    }
    match f {
        None | Some("prefer") => Ok(f.filter(|f| !f.is_empty()).or(i).map(str::to_string)),
        Some(f) => {
            if i.is_some_and(|i| !i.is_empty() && i != f) {
                return Err(RequestError::new(
                    "ImageCPUThreadPolicyForbidden",
                    "Image property 'hw_cpu_thread_policy' is not permitted to override CPU \
                     thread pinning policy set against the flavor",
                ));
            }
            Ok(Some(f.to_string()))
        }
    }
}

/// `get_emulator_thread_policy_constraint`.
pub fn emulator_threads_policy(flavor: &Flavor) -> Result<Option<String>, RequestError> {
    let Some(p) = flavor
        .extra_specs
        .get("hw:emulator_threads_policy")
        .filter(|p| !p.is_empty())
    else {
        return Ok(None);
    };
    if !EMULATOR_THREADS_POLICIES.contains(&p.as_str()) {
        return Err(RequestError::new(
            "InvalidEmulatorThreadsPolicy",
            format!(
                "CPU emulator threads option requested is invalid, given: '{p}', available: '{}'.",
                py_tuple(&EMULATOR_THREADS_POLICIES)
            ),
        ));
    }
    Ok(Some(p.clone()))
}

/// A set of CPU numbers as sorted, disjoint, inclusive ranges (a mask like
/// `0-1000000000` stays small).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CpuSet(Vec<(i128, i128)>);

impl CpuSet {
    fn range(start: i128, end: i128) -> Self {
        if start > end {
            CpuSet(Vec::new())
        } else {
            CpuSet(vec![(start, end)])
        }
    }

    fn union(&self, other: &CpuSet) -> CpuSet {
        let mut all: Vec<(i128, i128)> = self.0.iter().chain(other.0.iter()).copied().collect();
        all.sort();
        let mut out: Vec<(i128, i128)> = Vec::new();
        for (s, e) in all {
            match out.last_mut() {
                Some(last) if s <= last.1.saturating_add(1) => last.1 = last.1.max(e),
                _ => out.push((s, e)),
            }
        }
        CpuSet(out)
    }

    fn minus(&self, other: &CpuSet) -> CpuSet {
        let mut out = Vec::new();
        for &(s, e) in &self.0 {
            let mut cur = s;
            for &(os, oe) in &other.0 {
                if oe < cur || os > e {
                    continue;
                }
                if os > cur {
                    out.push((cur, os - 1));
                }
                cur = oe.saturating_add(1);
                if cur > e {
                    break;
                }
            }
            if cur <= e {
                out.push((cur, e));
            }
        }
        CpuSet(out)
    }

    pub fn len(&self) -> i128 {
        self.0.iter().map(|(s, e)| e - s + 1).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn is_subset(&self, other: &CpuSet) -> bool {
        self.minus(other).is_empty()
    }
}

/// `parse_cpu_spec`.
pub fn parse_cpu_spec(spec: &str) -> Result<CpuSet, RequestError> {
    let mut ids = CpuSet::default();
    let mut rejects = CpuSet::default();
    let int = |s: &str| py::int::int(s).ok().and_then(|i| i.to_i128());
    for rule in spec.split(',') {
        let rule = py::str::strip(rule);
        if rule.is_empty() {
            continue;
        }
        if let Some((first, second)) = rule.split_once('-') {
            let (reject, first) = match first.strip_prefix('^') {
                Some(rest) => (true, rest),
                None => (false, first),
            };
            let bad = || {
                RequestError::new(
                    "Invalid",
                    format!("Invalid range expression {}", py::str::repr(rule)),
                )
            };
            let (start, end) = match (int(py::str::strip(first)), int(py::str::strip(second))) {
                (Some(s), Some(e)) => (s, e),
                _ => return Err(bad()),
            };
            if start > end {
                return Err(bad());
            }
            let r = CpuSet::range(start, end);
            if reject {
                rejects = rejects.union(&r);
            } else {
                ids = ids.union(&r);
            }
        } else if let Some(rest) = rule.strip_prefix('^') {
            let n = int(py::str::strip(rest)).ok_or_else(|| {
                RequestError::new(
                    "Invalid",
                    format!("Invalid exclusion expression {}", py::str::repr(rule)),
                )
            })?;
            rejects = rejects.union(&CpuSet::range(n, n));
        } else {
            let n = int(rule).ok_or_else(|| {
                RequestError::new(
                    "Invalid",
                    format!("Invalid inclusion expression {}", py::str::repr(rule)),
                )
            })?;
            ids = ids.union(&CpuSet::range(n, n));
        }
    }
    Ok(ids.minus(&rejects))
}

/// A mask relative to the flavor's vCPUs: a leading `^` excludes from all of them.
fn parse_mask(mask: &str, vcpus: i64) -> Result<CpuSet, RequestError> {
    if py::str::strip(mask).starts_with('^') {
        parse_cpu_spec(&format!("0-{},{mask}", vcpus - 1))
    } else {
        parse_cpu_spec(mask)
    }
}

fn all_vcpus(vcpus: i64) -> CpuSet {
    CpuSet::range(0, i128::from(vcpus) - 1)
}

/// `get_dedicated_cpu_constraint`.
pub fn dedicated_cpus(flavor: &Flavor) -> Result<Option<CpuSet>, RequestError> {
    let Some(mask) = flavor
        .extra_specs
        .get("hw:cpu_dedicated_mask")
        .filter(|m| !m.is_empty())
    else {
        return Ok(None);
    };
    let pcpus = parse_mask(mask, flavor.vcpus)?;
    let cpus = all_vcpus(flavor.vcpus);
    if pcpus.is_empty() || cpus.minus(&pcpus).is_empty() {
        return Err(RequestError::new(
            "InvalidMixedInstanceDedicatedMask",
            "Mixed instance must have at least 1 pinned vCPU and 1 unpinned vCPU. See \
             'hw:cpu_dedicated_mask'.",
        ));
    }
    if !pcpus.is_subset(&cpus) {
        return Err(RequestError::new(
            "InvalidMixedInstanceDedicatedMask",
            "Mixed instance dedicated vCPU(s) mask is not a subset of vCPUs in the flavor. See \
             \"hw:cpu_dedicated_mask\"",
        ));
    }
    Ok(Some(pcpus))
}

/// `get_realtime_cpu_constraint`.
pub fn realtime_cpus(flavor: &Flavor, image: &ImageMeta) -> Result<Option<CpuSet>, RequestError> {
    let realtime = flavor
        .extra_specs
        .get("hw:cpu_realtime")
        .is_some_and(|v| py::strutils::bool_from_string(v));
    if !realtime {
        return Ok(None);
    }
    let (f, i) = flavor_image("cpu_realtime_mask", flavor, image, "hw");
    let i = i.and_then(Value::as_str).filter(|s| !s.is_empty());
    let mask = i.or(f.filter(|s| !s.is_empty()));
    let vcpus = all_vcpus(flavor.vcpus);
    let rt = match mask {
        Some(mask) => parse_mask(mask, flavor.vcpus)?,
        None => vcpus.clone(),
    };
    let invalid = || {
        RequestError::new(
            "RealtimeMaskNotFoundOrInvalid",
            "Use of realtime CPUs requires either one or more non-realtime CPU(s) or offloaded \
             emulator threads.",
        )
    };
    if rt.is_empty() {
        return Err(invalid());
    }
    if vcpus == rt && emulator_threads_policy(flavor)?.is_none() {
        return Err(invalid());
    }
    if !rt.is_subset(&vcpus) {
        return Err(RequestError::new(
            "RealtimeMaskNotFoundOrInvalid",
            "Realtime policy vCPU(s) mask is configured with RT vCPUs that are not a subset of \
             the vCPUs in the flavor. See hw:cpu_realtime_mask or hw_cpu_realtime_mask",
        ));
    }
    Ok(Some(rt))
}

/// What `get_mem_encryption_constraint` returns: the model and its trait.
pub struct MemEncryption {
    pub trait_name: &'static str,
}

/// `get_mem_encryption_constraint` (no machine type: the scheduler has none).
pub fn mem_encryption(
    flavor: &Flavor,
    image: &ImageMeta,
) -> Result<Option<MemEncryption>, RequestError> {
    let (f_str, i) = flavor_image("mem_encryption", flavor, image, "hw");
    let f = f_str.map(py::strutils::bool_from_string);
    let i_bool = i.and_then(Value::as_bool);
    if !f.unwrap_or(false) && !i_bool.unwrap_or(false) {
        return Ok(None);
    }
    if let (Some(fb), Some(ib)) = (f, i_bool) {
        if fb != ib {
            return Err(RequestError::new(
                "FlavorImageConflict",
                format!(
                    "Flavor {} has hw:mem_encryption extra spec explicitly set to {}, \
                     conflicting with image {} which has hw_mem_encryption property explicitly \
                     set to {}",
                    flavor_name(flavor),
                    f_str.unwrap_or_default(),
                    image_name(image),
                    if ib { "True" } else { "False" }
                ),
            ));
        }
    }
    let mut requesters = Vec::new();
    if f.unwrap_or(false) {
        requesters.push(format!(
            "hw:mem_encryption extra spec in {} flavor",
            flavor_name(flavor)
        ));
    }
    if i_bool.unwrap_or(false) {
        requesters.push(format!(
            "hw_mem_encryption property of image {}",
            image_id(image)
        ));
    }
    let (f_model, i_model) = flavor_image("mem_encryption_model", flavor, image, "hw");
    let i_model = i_model.and_then(Value::as_str);
    if let (Some(fm), Some(im)) = (f_model, i_model) {
        if fm != im {
            return Err(RequestError::new(
                "FlavorImageConflict",
                format!(
                    "Flavor {} has hw:mem_encryption_model extra spec explicitly set to {fm}, \
                     conflicting with image {} which has hw_mem_encryption_model property \
                     explicitly set to {im}",
                    flavor_name(flavor),
                    image_name(image)
                ),
            ));
        }
    }
    let model = i_model
        .filter(|m| !m.is_empty())
        .or(f_model.filter(|m| !m.is_empty()))
        .unwrap_or("amd-sev");
    let (trait_name, stateless) = match model {
        "amd-sev" => ("HW_CPU_X86_AMD_SEV", false),
        "amd-sev-es" => ("HW_CPU_X86_AMD_SEV_ES", false),
        "amd-sev-snp" => ("HW_CPU_X86_AMD_SEV_SNP", true),
        "intel-tdx" => ("HW_CPU_X86_INTEL_TDX", true),
        other => {
            return Err(RequestError::new(
                "Invalid",
                format!(
                    "Invalid memory encryption model {}. Allowed values: {}.",
                    py::str::repr(other),
                    MEM_ENCRYPTION_MODELS.join(", ")
                ),
            ))
        }
    };
    if image_prop(image, "hw_firmware_type").and_then(Value::as_str) != Some("uefi") {
        return Err(RequestError::new(
            "FlavorImageConflict",
            format!(
                "Memory encryption is requested by {} but the image metadata doesn't have the \
                 'hw_firmware_type' property set to 'uefi'",
                requesters.join(" and ")
            ),
        ));
    }
    if let Some(mtype) = image_prop(image, "hw_machine_type").and_then(Value::as_str) {
        if !mtype.contains("q35") {
            return Err(RequestError::new(
                "InvalidMachineType",
                format!(
                    "Machine type '{mtype}' is not compatible with image {} ({}): q35 type is \
                     required for {model} to work",
                    image_name(image),
                    image_id(image)
                ),
            ));
        }
    }
    if stateless && !stateless_firmware(image) {
        return Err(RequestError::new(
            "StatelessFirmwareRequired",
            format!(
                "The {model} memory encryption model requires stateless firmware but the image \
                 metadata doesn't have the 'hw_firmware_stateless' property set to True"
            ),
        ));
    }
    if model == "intel-tdx"
        && image_prop(image, "hw_video_model").and_then(Value::as_str) != Some("none")
    {
        return Err(RequestError::new(
            "InvalidVideoMode",
            format!(
                "The {model} memory encryption model is incompatible with an attached video \
                 device. Set the 'hw_video_model' image property to 'none' to disable it"
            ),
        ));
    }
    Ok(Some(MemEncryption { trait_name }))
}

/// `get_stateless_firmware_constraint`, as a truth value.
pub fn stateless_firmware(image: &ImageMeta) -> bool {
    let Some(v) = image_prop(image, "hw_firmware_stateless") else {
        return false;
    };
    if image_prop(image, "hw_firmware_type").and_then(Value::as_str) != Some("uefi") {
        return false;
    }
    v.as_bool().unwrap_or(false)
}

/// `get_vpmems`: the labels of `hw:pmem`.
pub fn vpmem_labels(flavor: &Flavor) -> Vec<String> {
    flavor
        .extra_specs
        .get("hw:pmem")
        .map(|v| {
            v.split(',')
                .map(py::str::strip)
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `os_resource_classes.normalize_name`.
pub fn normalize_rc_name(name: &str) -> String {
    let mut out = String::from("CUSTOM_");
    let mut in_run = false;
    for c in name.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_uppercase());
            in_run = false;
        } else if !in_run {
            out.push('_');
            in_run = true;
        }
    }
    out
}

/// `get_vtpm_constraint`: `(version, model)`.
pub fn vtpm(flavor: &Flavor, image: &ImageMeta) -> Result<Option<(String, String)>, RequestError> {
    let Some(version) = unique_flavor_image("tpm_version", flavor, image, "hw")? else {
        return Ok(None);
    };
    if !TPM_VERSIONS.contains(&version.as_str()) {
        return Err(RequestError::new(
            "Invalid",
            format!(
                "Invalid TPM version {}. Allowed values: {}.",
                py::str::repr(&version),
                TPM_VERSIONS.join(", ")
            ),
        ));
    }
    let model = match unique_flavor_image("tpm_model", flavor, image, "hw")? {
        None => "tpm-tis".to_string(),
        Some(m) if !TPM_MODELS.contains(&m.as_str()) => {
            return Err(RequestError::new(
                "Invalid",
                format!(
                    "Invalid TPM model {}. Allowed values: {}.",
                    py::str::repr(&m),
                    TPM_MODELS.join(", ")
                ),
            ))
        }
        Some(m) => {
            if m == "tpm-crb" && version != "2.0" {
                return Err(RequestError::new(
                    "Invalid",
                    "TPM model CRB is only valid with TPM version 2.0.",
                ));
            }
            m
        }
    };
    Ok(Some((version, model)))
}

/// `get_pci_numa_policy_constraint`.
pub fn pci_numa_policy(flavor: &Flavor, image: &ImageMeta) -> Result<Option<String>, RequestError> {
    let (f, i) = flavor_image("pci_numa_affinity_policy", flavor, image, "hw");
    let i = i.and_then(Value::as_str);
    let f = f.filter(|s| !s.is_empty());
    let i = i.filter(|s| !s.is_empty());
    if let (Some(f), Some(i)) = (f, i) {
        if f != i {
            return Err(RequestError::new(
                "ImagePCINUMAPolicyForbidden",
                "Image property 'hw_pci_numa_affinity_policy' is not permitted to override the \
                 'hw:pci_numa_affinity_policy' flavor extra spec.",
            ));
        }
    }
    let policy = f.or(i);
    if let Some(p) = policy {
        if !PCI_NUMA_POLICIES.contains(&p) {
            return Err(RequestError::new(
                "InvalidPCINUMAAffinity",
                format!("Invalid PCI NUMA affinity configured: {p}"),
            ));
        }
    }
    Ok(policy.map(str::to_string))
}

/// `get_secure_boot_constraint`.
pub fn secure_boot(flavor: &Flavor, image: &ImageMeta) -> Result<Option<String>, RequestError> {
    let Some(policy) = unique_flavor_image("secure_boot", flavor, image, "os")? else {
        return Ok(None);
    };
    if !SECURE_BOOT.contains(&policy.as_str()) {
        return Err(RequestError::new(
            "Invalid",
            format!(
                "Invalid secure boot policy {}. Allowed values: {}.",
                py::str::repr(&policy),
                SECURE_BOOT.join(", ")
            ),
        ));
    }
    Ok(Some(policy))
}

/// `get_maxphysaddr_mode`.
pub fn maxphysaddr_mode(
    flavor: &Flavor,
    image: &ImageMeta,
) -> Result<Option<String>, RequestError> {
    let Some(mode) = unique_flavor_image("maxphysaddr_mode", flavor, image, "hw")? else {
        return Ok(None);
    };
    if !MAXPHYSADDR_MODES.contains(&mode.as_str()) {
        return Err(RequestError::new(
            "Invalid",
            format!(
                "Invalid Maxphyaddr mode {}. Allowed values: {}.",
                py::str::repr(&mode),
                MAXPHYSADDR_MODES.join(", ")
            ),
        ));
    }
    Ok(Some(mode))
}

/// `get_packed_virtqueue_constraint`.
pub fn packed_virtqueue(flavor: &Flavor, image: &ImageMeta) -> Result<bool, RequestError> {
    let (f, i) = flavor_image("virtio_packed_ring", flavor, image, "hw");
    let f = f.map(py::strutils::bool_from_string);
    let i = i.map(|v| match v {
        Value::Bool(b) => *b,
        other => py::strutils::bool_from_string(&py::value::json_str(other)),
    });
    if let (Some(fb), Some(ib)) = (f, i) {
        if fb != ib {
            let b = |x: bool| if x { "True" } else { "False" };
            return Err(RequestError::new(
                "FlavorImageConflict",
                format!(
                    "Flavor has hw:virtio_packed_ring extra spec explicitly set to {}, \
                     conflicting with image which has hw_virtio_packed_ring explicitly set to {}.",
                    b(fb),
                    b(ib)
                ),
            ));
        }
    }
    Ok(f.unwrap_or(false) || i.unwrap_or(false))
}

/// `get_ephemeral_encryption_constraint`.
pub fn ephemeral_encryption(flavor: &Flavor, image: &ImageMeta) -> Result<bool, RequestError> {
    let (f_str, i) = flavor_image("ephemeral_encryption", flavor, image, "hw");
    let f = f_str.map(py::strutils::bool_from_string);
    let i = i.and_then(Value::as_bool);
    if let (Some(fb), Some(ib)) = (f, i) {
        if fb != ib {
            return Err(RequestError::new(
                "FlavorImageConflict",
                format!(
                    "Flavor {} has hw:ephemeral_encryption extra spec explicitly set to {}, \
                     conflicting with image {} which has hw_eph_encryption property explicitly \
                     set to {}",
                    flavor_name(flavor),
                    f_str.unwrap_or_default(),
                    image_name(image),
                    if ib { "True" } else { "False" }
                ),
            ));
        }
    }
    Ok(f.unwrap_or(false) || i.unwrap_or(false))
}

/// `get_ephemeral_encryption_format`.
pub fn ephemeral_encryption_format(
    flavor: &Flavor,
    image: &ImageMeta,
) -> Result<Option<String>, RequestError> {
    match unique_flavor_image("ephemeral_encryption_format", flavor, image, "hw")? {
        Some(f) if !f.is_empty() => {
            if !EPHEMERAL_FORMATS.contains(&f.as_str()) {
                return Err(RequestError::new(
                    "Invalid",
                    format!(
                        "Invalid ephemeral encryption format {f}. Allowed values: {}",
                        EPHEMERAL_FORMATS.join(", ")
                    ),
                ));
            }
            Ok(Some(f))
        }
        _ => Ok(None),
    }
}

/// `get_sound_model`.
pub fn sound_model(flavor: &Flavor, image: &ImageMeta) -> Result<Option<String>, RequestError> {
    let model = unique_flavor_image("sound_model", flavor, image, "hw")?;
    if let Some(m) = model.as_deref().filter(|m| !m.is_empty()) {
        if !SOUND_MODELS.contains(&m) {
            return Err(RequestError::new(
                "Invalid",
                format!(
                    "Invalid sound device model {}. Allowed values: {}.",
                    py::str::repr(m),
                    SOUND_MODELS.join(", ")
                ),
            ));
        }
    }
    Ok(model)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ranges: &[(i128, i128)]) -> CpuSet {
        CpuSet(ranges.to_vec())
    }

    #[test]
    fn cpu_specs() {
        assert_eq!(
            parse_cpu_spec("1-4,^3,6").unwrap(),
            set(&[(1, 2), (4, 4), (6, 6)])
        );
        assert_eq!(parse_cpu_spec(" 0 , ,2").unwrap(), set(&[(0, 0), (2, 2)]));
        assert_eq!(parse_cpu_spec("0-3,^1-2").unwrap(), set(&[(0, 0), (3, 3)]));
        assert_eq!(
            parse_cpu_spec("0-1000000000000").unwrap().len(),
            1_000_000_000_001
        );
        let err = parse_cpu_spec("0--1").unwrap_err();
        assert_eq!(err.message, "Invalid range expression '0--1'");
        assert_eq!(
            parse_cpu_spec("^x").unwrap_err().message,
            "Invalid exclusion expression '^x'"
        );
        assert_eq!(
            parse_cpu_spec("a").unwrap_err().message,
            "Invalid inclusion expression 'a'"
        );
        assert_eq!(parse_cpu_spec("3-1").unwrap_err().class, "Invalid");
    }

    #[test]
    fn rc_names() {
        assert_eq!(normalize_rc_name("4gb-a.b"), "CUSTOM_4GB_A_B");
        assert_eq!(normalize_rc_name("small"), "CUSTOM_SMALL");
        assert_eq!(normalize_rc_name("é x"), "CUSTOM__X");
    }
}
