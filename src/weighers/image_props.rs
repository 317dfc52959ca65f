// SPDX-License-Identifier: Apache-2.0
//! Image properties as `(name, str(value))` pairs, the way nova's
//! `ImagePropertiesWeigher` compares them.
//!
//! Request side: the spec's `ImageMetaProps` arrive typed (RPC primitive), so each
//! value only needs Python's `str()`. Instance side: nova rebuilds each instance's
//! image properties from its `system_metadata` strings
//! (`utils.get_image_from_system_metadata` then `ImageMetaProps.from_dict`), which
//! coerces every string into the field's type (and may raise, which fails nova's
//! whole request). [`props_from_system_metadata`] does the same.

use crate::model::fields::{canonical_architecture, canonical_hv_type, canonical_vm_mode};
use crate::py;
use crate::py::str::PyStr;
use crate::py::version::VersionPredicate;
use crate::py::PyError;
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// A property pair as the weigher compares it.
pub type PropPair = (String, String);

/// How `ImageMetaProps` types one field (nova 34's field types).
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Int,
    Bool,
    Enum(&'static [&'static str]),
    Architecture,
    HvType,
    VmMode,
    /// Lower-cased, two aliases, then an enum.
    ScsiModel,
    /// Lower-cased, legacy VMware names, then an enum.
    VifModel,
    /// Lower-cased, then an enum.
    OsType,
    VersionPredicate,
    /// Filled from `hw_numa_cpus.N` / `hw_numa_mem.N`, never from its own name.
    NumaCpus,
    NumaMem,
    /// Filled from `trait:NAME=required`.
    Traits,
    /// Never set from system metadata (a skipped key).
    Skipped,
}

const DISK_BUS: &[&str] = &[
    "fdc", "ide", "sata", "scsi", "usb", "virtio", "xen", "lxc", "uml",
];
const SCSI_MODELS: &[&str] = &[
    "buslogic",
    "ibmvscsi",
    "lsilogic",
    "lsisas1068",
    "lsisas1078",
    "virtio-scsi",
    "vmpvscsi",
];
const VIF_MODELS: &[&str] = &[
    "virtio",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "e1000",
    "e1000e",
    "netfront",
    "spapr-vlan",
    "lan9118",
    "sriov",
    "vmxnet",
    "vmxnet3",
    "igb",
];

/// `ImageMetaProps.fields` in nova 34's declaration order (the order `from_dict`
/// sets them, which decides which bad value raises first).
const FIELDS: &[(&str, Kind)] = &[
    ("hw_architecture", Kind::Architecture),
    ("hw_emulation_architecture", Kind::Architecture),
    ("hw_auto_disk_config", Kind::Str),
    ("hw_boot_menu", Kind::Bool),
    ("hw_cdrom_bus", Kind::Enum(DISK_BUS)),
    ("hw_cpu_cores", Kind::Int),
    ("hw_cpu_sockets", Kind::Int),
    ("hw_cpu_max_cores", Kind::Int),
    ("hw_cpu_max_sockets", Kind::Int),
    ("hw_cpu_max_threads", Kind::Int),
    (
        "hw_cpu_policy",
        Kind::Enum(&["dedicated", "shared", "mixed"]),
    ),
    (
        "hw_cpu_thread_policy",
        Kind::Enum(&["prefer", "isolate", "require"]),
    ),
    ("hw_cpu_realtime_mask", Kind::Str),
    ("hw_cpu_threads", Kind::Int),
    ("hw_device_id", Kind::Int),
    ("hw_disk_bus", Kind::Enum(DISK_BUS)),
    ("hw_disk_type", Kind::Str),
    ("hw_floppy_bus", Kind::Enum(DISK_BUS)),
    ("hw_firmware_type", Kind::Enum(&["uefi", "bios"])),
    ("hw_firmware_stateless", Kind::Bool),
    ("hw_input_bus", Kind::Enum(&["usb", "virtio"])),
    ("hw_ipxe_boot", Kind::Bool),
    ("hw_locked_memory", Kind::Bool),
    ("hw_machine_type", Kind::Str),
    ("hw_mem_encryption", Kind::Bool),
    (
        "hw_mem_encryption_model",
        Kind::Enum(&["amd-sev", "amd-sev-es", "amd-sev-snp", "intel-tdx"]),
    ),
    ("hw_mem_page_size", Kind::Str),
    ("hw_numa_nodes", Kind::Int),
    ("hw_numa_cpus", Kind::NumaCpus),
    ("hw_numa_mem", Kind::NumaMem),
    (
        "hw_pci_numa_affinity_policy",
        Kind::Enum(&["required", "legacy", "preferred", "socket"]),
    ),
    ("hw_pointer_model", Kind::Enum(&["usbtablet"])),
    ("hw_pmu", Kind::Bool),
    ("hw_qemu_guest_agent", Kind::Bool),
    ("hw_rescue_bus", Kind::Enum(DISK_BUS)),
    (
        "hw_rescue_device",
        Kind::Enum(&["cdrom", "disk", "floppy", "fs", "lun"]),
    ),
    ("hw_rng_model", Kind::Enum(&["virtio"])),
    ("hw_time_hpet", Kind::Bool),
    ("hw_serial_port_count", Kind::Int),
    ("hw_scsi_model", Kind::ScsiModel),
    (
        "hw_video_model",
        Kind::Enum(&[
            "cirrus", "qxl", "vga", "vmvga", "xen", "virtio", "gop", "none", "bochs",
        ]),
    ),
    ("hw_video_ram", Kind::Int),
    ("hw_vif_model", Kind::VifModel),
    (
        "hw_viommu_model",
        Kind::Enum(&["intel", "smmuv3", "virtio", "auto"]),
    ),
    ("hw_vm_mode", Kind::VmMode),
    (
        "hw_watchdog_action",
        Kind::Enum(&["none", "pause", "poweroff", "reset", "disabled"]),
    ),
    ("hw_vif_multiqueue_enabled", Kind::Bool),
    ("hw_tpm_model", Kind::Enum(&["tpm-tis", "tpm-crb"])),
    ("hw_tpm_version", Kind::Enum(&["1.2", "2.0"])),
    ("hw_ephemeral_encryption", Kind::Bool),
    (
        "hw_ephemeral_encryption_format",
        Kind::Enum(&["plain", "luks", "luksv2"]),
    ),
    // oslo's UUIDField only warns about a malformed UUID.
    ("hw_ephemeral_encryption_secret_uuid", Kind::Str),
    ("hw_virtio_packed_ring", Kind::Bool),
    (
        "hw_maxphysaddr_mode",
        Kind::Enum(&["passthrough", "emulate"]),
    ),
    ("hw_maxphysaddr_bits", Kind::Int),
    (
        "hw_sound_model",
        Kind::Enum(&[
            "sb16", "es1370", "pcspk", "ac97", "ich6", "ich9", "usb", "virtio",
        ]),
    ),
    (
        "hw_usb_model",
        Kind::Enum(&["none", "nec-xhci", "qemu-xhci"]),
    ),
    ("hw_redirected_usb_ports", Kind::Int),
    ("img_bittorrent", Kind::Bool),
    ("img_bdm_v2", Kind::Bool),
    ("img_block_device_mapping", Kind::Skipped),
    ("img_cache_in_nova", Kind::Bool),
    ("img_compression_level", Kind::Int),
    ("img_hv_requested_version", Kind::VersionPredicate),
    ("img_hv_type", Kind::HvType),
    ("img_config_drive", Kind::Enum(&["optional", "mandatory"])),
    ("img_linked_clone", Kind::Bool),
    ("img_mappings", Kind::Skipped),
    ("img_owner_id", Kind::Str),
    ("img_root_device_name", Kind::Str),
    ("img_use_agent", Kind::Bool),
    ("img_version", Kind::Int),
    ("img_signature", Kind::Str),
    (
        "img_signature_hash_method",
        Kind::Enum(&["SHA-224", "SHA-256", "SHA-384", "SHA-512"]),
    ),
    ("img_signature_certificate_uuid", Kind::Str),
    (
        "img_signature_key_type",
        Kind::Enum(&[
            "DSA",
            "ECC_SECP384R1",
            "ECC_SECP521R1",
            "ECC_SECT409K1",
            "ECC_SECT409R1",
            "ECC_SECT571K1",
            "ECC_SECT571R1",
            "RSA-PSS",
        ]),
    ),
    ("img_hide_hypervisor_id", Kind::Bool),
    ("os_admin_user", Kind::Str),
    ("os_command_line", Kind::Str),
    ("os_distro", Kind::Str),
    ("os_require_quiesce", Kind::Bool),
    (
        "os_secure_boot",
        Kind::Enum(&["required", "disabled", "optional"]),
    ),
    ("os_skip_agent_inject_files_at_boot", Kind::Bool),
    ("os_skip_agent_inject_ssh", Kind::Bool),
    ("os_type", Kind::OsType),
    ("traits_required", Kind::Traits),
];

/// `ImageMetaProps._legacy_property_map`, in nova's order.
const LEGACY_NAMES: &[(&str, &str)] = &[
    ("architecture", "hw_architecture"),
    ("owner_id", "img_owner_id"),
    ("vmware_disktype", "hw_disk_type"),
    ("vmware_image_version", "img_version"),
    ("vmware_ostype", "os_distro"),
    ("auto_disk_config", "hw_auto_disk_config"),
    ("ipxe_boot", "hw_ipxe_boot"),
    ("xenapi_device_id", "hw_device_id"),
    ("xenapi_image_compression_level", "img_compression_level"),
    ("vmware_linked_clone", "img_linked_clone"),
    ("xenapi_use_agent", "img_use_agent"),
    ("xenapi_skip_agent_inject_ssh", "os_skip_agent_inject_ssh"),
    (
        "xenapi_skip_agent_inject_files_at_boot",
        "os_skip_agent_inject_files_at_boot",
    ),
    ("cache_in_nova", "img_cache_in_nova"),
    ("vm_mode", "hw_vm_mode"),
    ("bittorrent", "img_bittorrent"),
    ("mappings", "img_mappings"),
    ("block_device_mapping", "img_block_device_mapping"),
    ("bdm_v2", "img_bdm_v2"),
    ("root_device_name", "img_root_device_name"),
    ("hypervisor_version_requires", "img_hv_requested_version"),
    ("hypervisor_type", "img_hv_type"),
];

/// `ImageMetaProps.NUMA_NODES_MAX`.
const NUMA_NODES_MAX: usize = 128;

/// System metadata keys that can matter to the image properties, unprefixed: the
/// loader reads `image_*` rows plus these (see `state::instance_images`).
pub fn unprefixed_keys() -> impl Iterator<Item = &'static str> {
    FIELDS
        .iter()
        .map(|(name, _)| *name)
        .chain(LEGACY_NAMES.iter().map(|(legacy, _)| *legacy))
        .chain(std::iter::once("vmware_adaptertype"))
}

fn kind_of(name: &str) -> Kind {
    FIELDS
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(Kind::Str, |(_, k)| *k)
}

fn py_bool_str(b: bool) -> String {
    if b { "True" } else { "False" }.to_string()
}

fn enum_value(value: String, all: &[&str], field: &str) -> Result<String, PyError> {
    if all.contains(&value.as_str()) {
        Ok(value)
    } else {
        Err(PyError::value_error(format!(
            "Field value {value} is invalid for {field}"
        )))
    }
}

/// `setattr(props, name, value)` from a system-metadata string: the field's
/// coercion, then `str()` of the typed value.
fn coerce(name: &str, value: &str) -> Result<Option<String>, PyError> {
    let text = match kind_of(name) {
        Kind::Str => value.to_string(),
        Kind::Int => py::int::int(value)?.to_string(),
        Kind::Bool => py_bool_str(py::strutils::bool_from_string(value)),
        Kind::Enum(all) => enum_value(value.to_string(), all, name)?,
        Kind::Architecture => canonical_architecture(value)?,
        Kind::HvType => canonical_hv_type(value)?,
        Kind::VmMode => canonical_vm_mode(value)?,
        Kind::ScsiModel => {
            let lower = value.to_lowercase();
            let v = match lower.as_str() {
                "lsilogicsas" => "lsisas1068".to_string(),
                "paravirtual" => "vmpvscsi".to_string(),
                _ => lower,
            };
            enum_value(v, SCSI_MODELS, name)?
        }
        Kind::VifModel => {
            let lower = value.to_lowercase();
            let v = match lower.as_str() {
                "virtuale1000" => "e1000".to_string(),
                "virtuale1000e" => "e1000e".to_string(),
                "virtualpcnet32" => "pcnet".to_string(),
                "virtualsriovethernetcard" => "sriov".to_string(),
                "virtualvmxnet" => "vmxnet".to_string(),
                "virtualvmxnet3" => "vmxnet3".to_string(),
                _ => lower,
            };
            enum_value(v, VIF_MODELS, name)?
        }
        Kind::OsType => enum_value(value.to_lowercase(), &["linux", "windows"], name)?,
        Kind::VersionPredicate => {
            VersionPredicate::parse(value)?;
            value.to_string()
        }
        // A list field from a plain string: oslo's List coercion rejects it.
        Kind::NumaCpus | Kind::NumaMem | Kind::Traits | Kind::Skipped => {
            return Err(PyError::value_error(format!(
                "A list is required in field {name}, not a str"
            )))
        }
    };
    Ok(Some(text))
}

/// An insertion-ordered dict of strings (Python dict semantics: overwriting keeps
/// the first position).
#[derive(Default)]
struct OrderedProps {
    items: Vec<(String, String)>,
}

impl OrderedProps {
    fn insert(&mut self, key: &str, value: &str) {
        match self.items.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = value.to_string(),
            None => self.items.push((key.to_string(), value.to_string())),
        }
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.items
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// nova's `hardware.parse_cpu_spec`, as a sorted list (CPython iterates a set of
/// small non-negative ints in ascending order; larger ids may iterate otherwise).
fn parse_cpu_spec(spec: &str) -> Result<Vec<i64>, PyError> {
    let invalid = |what: &str, rule: &str| PyError::value_error(format!("Invalid {what} {rule:?}"));
    let mut ids = std::collections::BTreeSet::new();
    let mut reject = std::collections::BTreeSet::new();
    for rule in spec.split(',') {
        let rule = py::str::strip(rule);
        if rule.is_empty() {
            continue;
        }
        if let Some((first, last)) = rule.split_once('-') {
            let (excluded, first) = match first.strip_prefix('^') {
                Some(rest) => (true, rest),
                None => (false, first),
            };
            let start = py::int::int_saturating(py::str::strip(first))
                .map_err(|_| invalid("range expression", rule))?;
            let end = py::int::int_saturating(py::str::strip(last))
                .map_err(|_| invalid("range expression", rule))?;
            if start > end || end - start > 1_000_000 {
                return Err(invalid("range expression", rule));
            }
            let target = if excluded { &mut reject } else { &mut ids };
            target.extend(start..=end);
        } else if let Some(rest) = rule.strip_prefix('^') {
            reject.insert(
                py::int::int_saturating(py::str::strip(rest))
                    .map_err(|_| invalid("exclusion expression", rule))?,
            );
        } else {
            ids.insert(
                py::int::int_saturating(rule).map_err(|_| invalid("inclusion expression", rule))?,
            );
        }
    }
    Ok(ids.difference(&reject).copied().collect())
}

/// `(name, str(value))` of every property nova's `ImageMeta.from_instance` would set
/// from this instance's system metadata (rows in database order, later rows win).
/// `Err` where nova raises.
pub fn props_from_system_metadata(rows: &[(String, String)]) -> Result<Vec<PropPair>, PyError> {
    // utils.get_image_from_system_metadata: strip `image_`, drop the skipped and
    // the ImageMeta-level keys; everything else is a candidate property.
    let mut props = OrderedProps::default();
    for (key, value) in rows {
        let key = key.strip_prefix("image_").unwrap_or(key);
        if matches!(
            key,
            "mappings" | "block_device_mapping" | "img_mappings" | "img_block_device_mapping"
        ) || matches!(key, "disk_format" | "container_format")
        {
            continue;
        }
        // ImageMeta's own integer fields: a bad value raises in nova too.
        if matches!(key, "min_ram" | "min_disk") {
            py::int::int_saturating(value)?;
            continue;
        }
        props.insert(key, value);
    }
    let mut set: Vec<(&'static str, String)> = Vec::new();
    let mut assign =
        |name: &'static str, text: String| match set.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = text,
            None => set.push((name, text)),
        };
    for (legacy, name) in LEGACY_NAMES {
        if let Some(v) = props.get(legacy) {
            if let Some(text) = coerce(name, v)? {
                assign(name, text);
            }
        }
    }
    match props.get("vmware_adaptertype") {
        Some("ide") => assign("hw_disk_bus", "ide".into()),
        Some(v) if !v.is_empty() => {
            assign("hw_disk_bus", "scsi".into());
            if let Some(text) = coerce("hw_scsi_model", v)? {
                assign("hw_scsi_model", text);
            }
        }
        _ => {}
    }
    for (name, kind) in FIELDS {
        match kind {
            Kind::NumaMem => {
                let mut mem = Vec::new();
                for cell in 0..NUMA_NODES_MAX {
                    let Some(v) = props.get(&format!("hw_numa_mem.{cell}")) else {
                        break;
                    };
                    mem.push(py::int::int(v)?.to_string());
                }
                if !mem.is_empty() {
                    assign(name, format!("[{}]", mem.join(", ")));
                }
            }
            Kind::NumaCpus => {
                let mut cells = Vec::new();
                for cell in 0..NUMA_NODES_MAX {
                    let Some(v) = props.get(&format!("hw_numa_cpus.{cell}")) else {
                        break;
                    };
                    let ids = parse_cpu_spec(v)?;
                    cells.push(coerced_set_repr(&ids));
                }
                if !cells.is_empty() {
                    assign(name, format!("[{}]", cells.join(", ")));
                }
            }
            Kind::Traits => {}
            _ => {
                if let Some(v) = props.get(name) {
                    if let Some(text) = coerce(name, v)? {
                        assign(name, text);
                    }
                }
            }
        }
    }
    let traits: Vec<&str> = props
        .items
        .iter()
        .filter(|(k, v)| k.starts_with("trait:") && v == "required")
        .map(|(k, _)| &k["trait:".len()..])
        .collect();
    if !traits.is_empty() {
        assign("traits_required", list_repr(traits.iter().copied()));
    }
    Ok(set.into_iter().map(|(n, t)| (n.to_string(), t)).collect())
}

/// `repr()` of oslo.versionedobjects' `CoercedSet` of small ints (what a typed
/// `Set` field holds): `CoercedSet({0, 1})`, `CoercedSet()` when empty.
fn coerced_set_repr(ids: &[i64]) -> String {
    if ids.is_empty() {
        return "CoercedSet()".to_string();
    }
    let parts: Vec<String> = ids.iter().map(i64::to_string).collect();
    format!("CoercedSet({{{}}})", parts.join(", "))
}

fn list_repr<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::from("[");
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        py::str::repr_into(&PyStr::new(item), &mut out);
    }
    out.push(']');
    out
}

/// `{(key, str(value)) for key, value in image.properties.to_dict().items()}` for the
/// request's (already typed) image properties.
pub fn request_props(properties: &Map<String, Value>) -> Vec<PropPair> {
    properties
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| {
            let text = match (k.as_str(), v) {
                (_, Value::String(s)) => s.clone(),
                // A set of ints per NUMA cell on the wire as a list.
                ("hw_numa_cpus", Value::Array(cells)) => {
                    let parts: Vec<String> = cells
                        .iter()
                        .map(|c| {
                            let mut ids: Vec<i64> = c
                                .as_array()
                                .map(|a| a.iter().filter_map(Value::as_i64).collect())
                                .unwrap_or_default();
                            ids.sort_unstable();
                            ids.dedup();
                            coerced_set_repr(&ids)
                        })
                        .collect();
                    format!("[{}]", parts.join(", "))
                }
                (_, other) => py::value::json_repr(other),
            };
            (k.clone(), text)
        })
        .collect()
}

/// The per-pair instance counts on one host: each instance counts a pair once.
pub fn count_pairs<'a>(
    instances: impl Iterator<Item = &'a [(String, String)]>,
) -> Result<BTreeMap<PropPair, usize>, PyError> {
    let mut counts = BTreeMap::new();
    for rows in instances {
        let mut pairs = props_from_system_metadata(rows)?;
        pairs.sort();
        pairs.dedup();
        for pair in pairs {
            *counts.entry(pair).or_insert(0) += 1;
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn coerces_like_image_meta_props() {
        let got = props_from_system_metadata(&rows(&[
            ("image_hw_architecture", "AMD64"),
            ("image_hw_numa_nodes", " 2 "),
            ("image_hw_numa_cpus.0", "0-3,^1"),
            ("image_hw_numa_cpus.1", "4"),
            ("image_hw_numa_mem.0", "1024"),
            ("image_hw_qemu_guest_agent", "yes"),
            ("image_os_distro", "ubuntu"),
            ("image_trait:CUSTOM_A", "required"),
            ("image_trait:CUSTOM_B", "forbidden"),
            ("image_min_ram", "512"),
            ("image_unknown", "x"),
            ("owner_user_name", "admin"),
            ("image_vm_mode", "hv"),
        ]))
        .expect("valid");
        let map: BTreeMap<String, String> = got.into_iter().collect();
        assert_eq!(map["hw_architecture"], "x86_64");
        assert_eq!(map["hw_numa_nodes"], "2");
        assert_eq!(
            map["hw_numa_cpus"],
            "[CoercedSet({0, 2, 3}), CoercedSet({4})]"
        );
        assert_eq!(map["hw_numa_mem"], "[1024]");
        assert_eq!(map["hw_qemu_guest_agent"], "True");
        assert_eq!(map["os_distro"], "ubuntu");
        assert_eq!(map["traits_required"], "['CUSTOM_A']");
        assert_eq!(map["hw_vm_mode"], "hvm");
        assert_eq!(map.len(), 8);
        assert!(props_from_system_metadata(&rows(&[("image_hw_disk_bus", "bogus")])).is_err());
        assert!(props_from_system_metadata(&rows(&[("image_hw_cpu_cores", "1.5")])).is_err());
    }

    #[test]
    fn request_side_is_python_str() {
        let props = serde_json::json!({
            "hw_numa_cpus": [[1, 0], [2]], "hw_numa_nodes": 2, "hw_boot_menu": false,
            "traits_required": ["A", "B'"], "os_distro": "win"
        });
        let map: BTreeMap<String, String> = request_props(props.as_object().expect("map"))
            .into_iter()
            .collect();
        assert_eq!(map["hw_numa_cpus"], "[CoercedSet({0, 1}), CoercedSet({2})]");
        assert_eq!(map["hw_numa_nodes"], "2");
        assert_eq!(map["hw_boot_menu"], "False");
        assert_eq!(map["traits_required"], "['A', \"B'\"]");
        assert_eq!(map["os_distro"], "win");
    }
}
