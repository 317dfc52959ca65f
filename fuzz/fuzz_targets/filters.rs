// SPDX-License-Identifier: Apache-2.0
//! The tenant's and the operator's little languages as the decision core reads
//! them: scheduler hints (JsonFilter's `query`, `same_host`, `cidr`, ...), image
//! properties, flavor extra specs (`resources*:`, `trait*:`, `hw:`,
//! `capabilities:` and `aggregate_instance_extra_specs:` operators), server groups,
//! NUMA and PCI requests. A decoded `RequestSpec` goes through the request filters,
//! the Placement query and then the whole decision (every filter and weigher this
//! daemon has) over three fixed hosts.
//!
//! Input, structure-aware: the wire samples' `spec_obj`s are edited by a small
//! program read from the bytes (pick a sample, then up to 16 edits: set, insert or
//! remove a value somewhere in the object tree, with keys and values drawn from the
//! names the daemon reads, generated JsonFilter queries and extra-spec expressions,
//! or arbitrary strings and numbers). An input starting with `{` is taken as a
//! `spec_obj` in JSON instead.
#![no_main]

mod common;

use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use nova_scheduler::model::RequestSpec;
use serde_json::{Map, Number, Value};

/// Keys the decoders and filters look for, plus a few they do not.
#[rustfmt::skip]
const KEYS: &[&str] = &[
    // RequestSpec and nested objects
    "nova_object.name", "nova_object.namespace", "nova_object.version", "nova_object.data",
    "id", "instance_uuid", "num_instances", "project_id", "user_id", "availability_zone",
    "flavor", "image", "ignore_hosts", "force_hosts", "force_nodes", "requested_destination",
    "instance_group", "scheduler_hints", "is_bfv", "requested_resources", "request_level_params",
    "numa_topology", "pci_requests", "retry", "network_metadata", "requested_networks",
    "memory_mb", "vcpus", "root_gb", "ephemeral_gb", "swap", "extra_specs", "name", "flavorid",
    "properties", "disk_format", "policy", "policies", "members", "hosts", "_rules", "uuid",
    "host", "node", "cell", "aggregates", "forbidden_aggregates", "allow_cross_cell_move",
    "requester_id", "use_same_provider", "resources", "required_traits", "forbidden_traits",
    "provider_uuids", "in_tree", "root_required", "root_forbidden", "same_subtree",
    "objects", "network_id", "port_id", "hypervisor_hostname", "num_attempts", "cells",
    "requests", "count", "spec", "alias_name", "numa_policy", "request_id", "cpuset",
    "pcpuset", "memory", "cpu_policy", "cpu_thread_policy", "pagesize", "physnets", "tunneled",
    // scheduler hints
    "query", "same_host", "different_host", "group", "build_near_host_ip", "cidr",
    "target_cell", "_nova_check_type",
    // flavor extra specs
    "hw:cpu_policy", "hw:cpu_thread_policy", "hw:numa_nodes", "hw:numa_cpus.0", "hw:numa_mem.0",
    "hw:mem_page_size", "hw:emulator_threads_policy", "hw:cpu_realtime", "hw:cpu_realtime_mask",
    "hw:cpu_dedicated_mask", "hw:pci_numa_affinity_policy", "hw:mem_encryption", "hw:pmem",
    "hw:tpm_version", "hw:tpm_model", "hw:tpm_secret_security", "hw:maxphysaddr_bits",
    "hw:maxphysaddr_mode", "hw:vif_multiqueue_enabled", "hw:virtio_packed_ring",
    "hw:ephemeral_encryption", "hw:sound_model", "resources:VCPU", "resources:PCPU",
    "resources:MEMORY_MB", "resources:DISK_GB", "resources1:CUSTOM_A", "resources_x:VGPU",
    "trait:HW_CPU_X86_AVX2", "trait:CUSTOM_GOLD", "trait1:CUSTOM_T", "trait:COMPUTE_STATUS_DISABLED",
    "group_policy", "pci_passthrough:alias", "accel:device_profile",
    "capabilities:cpu_info:features", "capabilities:cpu_info:vendor",
    "capabilities:hypervisor_type", "capabilities:stats:io_workload", "capabilities:host_ip:version",
    "capabilities:cpu_info:maxphysaddr:bits", "aggregate_instance_extra_specs:ssd", "ssd",
    "quota:cpu_shares", "hw_rng:allowed",
    // image properties
    "hw_architecture", "img_hv_type", "hw_vm_mode", "img_hv_requested_version", "hw_cpu_policy",
    "hw_cpu_thread_policy", "hw_numa_nodes", "hw_numa_cpus.0", "hw_numa_mem.0", "hw_mem_page_size",
    "hw_disk_bus", "hw_cdrom_bus", "hw_video_model", "hw_vif_model", "hw_emulation_architecture",
    "hw_viommu_model", "hw_mem_encryption", "hw_tpm_model", "hw_tpm_version",
    "hw_virtio_packed_ring", "hw_sound_model", "hw_ephemeral_encryption", "hw_pci_numa_affinity_policy",
    "traits_required", "os_distro", "os_type", "hw_machine_type", "hw_maxphysaddr_bits",
    "hw_firmware_type", "os_secure_boot",
];

/// Object names, versions and string values with a meaning somewhere.
#[rustfmt::skip]
const STRINGS: &[&str] = &[
    "RequestSpec", "Flavor", "ImageMeta", "ImageMetaProps", "InstanceGroup", "Destination",
    "CellMapping", "RequestGroup", "RequestLevelParams", "NetworkRequestList", "NetworkRequest",
    "SchedulerRetries", "ComputeNodeList", "ComputeNode", "InstanceNUMATopology", "InstanceNUMACell",
    "InstancePCIRequests", "InstancePCIRequest", "NetworkMetadata", "nova", "1.0", "1.15", "2.0",
    "1.x", "", "affinity", "anti-affinity", "soft-affinity", "soft-anti-affinity",
    "max_server_per_host", "dedicated", "shared", "mixed", "prefer", "isolate", "require",
    "required", "forbidden", "preferred", "legacy", "socket", "none", "isolate", "large", "small",
    "any", "2048", "1GB", "x86_64", "aarch64", "i686", "qemu", "kvm", "hvm", "xen", "exe",
    ">= 8.0.0", "<= 1.0", "== 8002000", "qcow2", "raw", "iso", "virtio", "ide", "scsi", "true",
    "false", "True", "yes", "on", "1", "0", "-1", "2.5", "1e309", "rebuild", "cmp00001",
    "cmp00002", "cmp00003", "10.0.0.1", "10.0.0.2/24", "/24", "::1", "fe80::/10",
    "11111111-2222-4333-8444-555555555555", "440aae02-195c-4c8e-9733-2cf3618e3f10",
    "c0c0c0c0c0c04c0c8c0c0c0c0c0c0c01", "aaaaaaaa-0000-4000-8000-000000000001",
    "e0e0e0e0-e0e0-4e0e-8e0e-e0e0e0e0e001", "0-3", "^1", "0,2-3,^2", "2-1", "HW_CPU_X86_AVX2",
    "CUSTOM_GOLD", "COMPUTE_STATUS_DISABLED", "VCPU", "PCPU", "MEMORY_MB", "a1,a2", "8086",
    "1520", "type-VF", "type-PF", "net1", "tpm-tis", "tpm-crb", "2.0", "luks", "sb16",
    "<in> avx2", "<all-in> avx2 sse4.2", "<or> Intel <or> AMD", "s== Intel", "s!= x", ">= 4",
    "= 2", "== 46", "!= 1", "<in>", "<or>", "<or> a", "s<", "$free_ram_mb",
    "$stats.io_workload", "$service.disabled", "$cpu_info", "$nope.x",
];

#[rustfmt::skip]
const OPS: &[&str] = &["=", "<", ">", "<=", ">=", "in", "not", "or", "and", "s==", "xor"];

#[rustfmt::skip]
const VARIABLES: &[&str] = &[
    "$free_ram_mb", "$free_disk_mb", "$vcpus_total", "$vcpus_used", "$hypervisor_version",
    "$hypervisor_type", "$host", "$nodename", "$host_ip", "$num_instances", "$num_io_ops",
    "$stats.io_workload", "$stats.num_instances", "$stats", "$service.disabled", "$service.host",
    "$service", "$cpu_info", "$supported_instances", "$metrics", "$aggregates", "$updated",
    "$limits", "$numa_topology", "$total_usable_ram_mb", "$cpu_allocation_ratio", "$x.y.z", "$",
];

fn pick<'a>(u: &mut Unstructured<'_>, from: &[&'a str]) -> Result<&'a str> {
    Ok(from[u.choose_index(from.len())?])
}

fn number(u: &mut Unstructured<'_>) -> Result<Value> {
    Ok(match u.int_in_range(0..=5u8)? {
        0 => Value::from(u.int_in_range(-2..=64i64)?),
        1 => Value::from(u.arbitrary::<i64>()?),
        2 => Value::from(u.arbitrary::<u64>()?),
        3 => Number::from_f64(u.arbitrary::<f64>()?).map_or(Value::Null, Value::Number),
        4 => Value::from(*u.choose(&[
            0i64,
            1,
            512,
            1024,
            4096,
            65536,
            1 << 31,
            i64::MAX,
            i64::MIN,
        ])?),
        _ => Value::from(*u.choose(&[0.5f64, 1.0, -1.0, 1e300, 2.5e-10])?),
    })
}

fn string(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(match u.int_in_range(0..=3u8)? {
        0 | 1 => pick(u, STRINGS)?.to_string(),
        2 => u.arbitrary::<String>()?,
        _ => format!("{} {}", pick(u, STRINGS)?, pick(u, STRINGS)?),
    })
}

/// A JsonFilter query term: `[op, arg...]` with variables, literals and subterms.
fn query_term(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    let mut items = vec![Value::from(pick(u, OPS)?)];
    for _ in 0..u.int_in_range(0..=3u8)? {
        items.push(match u.int_in_range(0..=5u8)? {
            0 | 1 => Value::from(pick(u, VARIABLES)?),
            2 => number(u)?,
            3 if depth < 4 => query_term(u, depth + 1)?,
            4 => Value::from(string(u)?),
            _ => u
                .choose(&[Value::Null, Value::Bool(true), Value::Bool(false)])?
                .clone(),
        });
    }
    Ok(Value::Array(items))
}

/// An extra-spec value with one of `extra_specs_ops`' operators, or a plain word.
fn extra_spec_expr(u: &mut Unstructured<'_>) -> Result<String> {
    let ops = [
        "=", "==", "!=", ">=", "<=", "s==", "s!=", "s<", "s<=", "s>", "s>=", "<in>", "<all-in>",
        "<or>", "",
    ];
    let mut text = pick(u, &ops)?.to_string();
    for _ in 0..u.int_in_range(0..=4u8)? {
        text.push(' ');
        text.push_str(&match u.int_in_range(0..=2u8)? {
            0 => number(u)?.to_string(),
            1 => "<or>".to_string(),
            _ => string(u)?,
        });
    }
    Ok(text)
}

fn value(u: &mut Unstructured<'_>, depth: u32) -> Result<Value> {
    Ok(match u.int_in_range(0..=11u8)? {
        0 => Value::Null,
        1 => Value::Bool(u.arbitrary()?),
        2 | 3 => number(u)?,
        4 | 5 => Value::from(string(u)?),
        6 => Value::from(query_term(u, 0)?.to_string()),
        7 => Value::from(extra_spec_expr(u)?),
        8 if depth < 4 => {
            let n = u.int_in_range(0..=3u8)?;
            Value::Array((0..n).map(|_| value(u, depth + 1)).collect::<Result<_>>()?)
        }
        9 if depth < 4 => {
            let mut m = Map::new();
            for _ in 0..u.int_in_range(0..=3u8)? {
                m.insert(pick(u, KEYS)?.to_string(), value(u, depth + 1)?);
            }
            Value::Object(m)
        }
        10 if depth < 4 => {
            // A versioned object around a dict.
            let mut data = Map::new();
            for _ in 0..u.int_in_range(0..=3u8)? {
                data.insert(pick(u, KEYS)?.to_string(), value(u, depth + 1)?);
            }
            serde_json::json!({"nova_object.name": pick(u, STRINGS)?, "nova_object.namespace": "nova",
                "nova_object.version": pick(u, &["1.0", "1.5", "1.99", "2.0"])?,
                "nova_object.data": data})
        }
        _ => Value::Array(vec![Value::from(string(u)?)]),
    })
}

/// Walks down from `v`, a child chosen by each step, for up to `steps` steps.
fn descend<'v>(u: &mut Unstructured<'_>, mut v: &'v mut Value) -> Result<&'v mut Value> {
    for _ in 0..u.int_in_range(0..=6u8)? {
        let len = match v {
            Value::Object(m) if !m.is_empty() => m.len(),
            Value::Array(a) if !a.is_empty() => a.len(),
            _ => break,
        };
        let i = u.choose_index(len)?;
        v = match v {
            Value::Object(m) => m.values_mut().nth(i).expect("index below len"),
            Value::Array(a) => &mut a[i],
            _ => unreachable!("checked above"),
        };
    }
    Ok(v)
}

fn edit(u: &mut Unstructured<'_>, root: &mut Value) -> Result<()> {
    let op = u.int_in_range(0..=4u8)?;
    let target = descend(u, root)?;
    match (op, target) {
        (0, target) => *target = value(u, 0)?,
        (1 | 2, Value::Object(m)) => {
            let key = if op == 1 {
                pick(u, KEYS)?.to_string()
            } else {
                string(u)?
            };
            m.insert(key, value(u, 0)?);
        }
        (3, Value::Object(m)) if !m.is_empty() => {
            let i = u.choose_index(m.len())?;
            let key = m.keys().nth(i).cloned().expect("index below len");
            m.remove(&key);
        }
        (3, Value::Array(a)) if !a.is_empty() => {
            let i = u.choose_index(a.len())?;
            a.remove(i);
        }
        (_, Value::Array(a)) => a.push(value(u, 0)?),
        (_, target) => *target = value(u, 0)?,
    }
    Ok(())
}

fn edited_sample(data: &[u8]) -> Value {
    let mut u = Unstructured::new(data);
    let args = common::sample_args();
    let i = u.choose_index(args.len()).unwrap_or(0);
    let mut spec = args[i]["spec_obj"].clone();
    for _ in 0..16 {
        if u.is_empty() || edit(&mut u, &mut spec).is_err() {
            break;
        }
    }
    spec
}

fuzz_target!(|data: &[u8]| {
    let primitive = if data.first() == Some(&b'{') {
        match serde_json::from_slice::<Value>(data) {
            Ok(v) => v,
            Err(_) => return,
        }
    } else {
        edited_sample(data)
    };
    let Ok(spec) = RequestSpec::from_primitive(&primitive) else {
        return;
    };
    common::exercise_spec(&spec, Some(&primitive));
    let placement = data.last().is_some_and(|b| b & 1 == 1);
    let mut filtered = spec.clone();
    common::request_filters(&mut filtered);
    common::schedule(&filtered, placement, data.len() as u64);
});
