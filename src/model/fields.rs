// SPDX-License-Identifier: Apache-2.0
//! The enumerations of nova's `nova/objects/fields.py` that image properties and
//! hosts' `supported_instances` name (architecture, hypervisor type, VM mode), with
//! their `canonicalize`.

use crate::py::PyError;

/// nova's `fields.Architecture.ALL` (`nova.virt.arch.ALL`), also the choices of
/// `image_properties_default_architecture`.
pub const ARCHITECTURES: &[&str] = &[
    "alpha",
    "armv6",
    "armv7l",
    "armv7b",
    "aarch64",
    "cris",
    "i686",
    "ia64",
    "lm32",
    "m68k",
    "microblaze",
    "microblazeel",
    "mips",
    "mipsel",
    "mips64",
    "mips64el",
    "openrisc",
    "parisc",
    "parisc64",
    "ppc",
    "ppcle",
    "ppc64",
    "ppc64le",
    "ppcemb",
    "s390",
    "s390x",
    "sh4",
    "sh4eb",
    "sparc",
    "sparc64",
    "unicore32",
    "x86_64",
    "xtensa",
    "xtensaeb",
];

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
