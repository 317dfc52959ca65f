// SPDX-License-Identifier: Apache-2.0
//! Differential test of the Placement question: seeded random RequestSpecs, sent as
//! versioned-object primitives both to our decoder + request filters +
//! `resources_from_request_spec` and to nova 34's own (`tests/oracle/
//! resource_request_oracle.py`, the venv's python). Compared for string equality:
//! the root traits after the request filters, the first `GET /allocation_candidates`
//! query string, whether pinning was requested, the fallback (VCPU) query string,
//! the destination rewritten by a target-node lookup, and the class and text of any
//! exception (only the class for Python's `ValueError`, whose text embeds a repr of
//! the whole object).
//!
//! `NSRS_DIFF_SEED` (u64) and `NSRS_DIFF_CASES` change the seed and the number of
//! cases (default 600). A disagreement prints the case as the JSON line the oracle
//! reads: `echo '<case>' | $VENV/bin/python tests/oracle/resource_request_oracle.py`.

use crate::nova_schema;
use crate::venv;

use nova_scheduler::manager::request_filter::{
    self, PrefilterError, PrefilterOptions, RequestFailure,
};
use nova_scheduler::model::RequestSpec;
use nova_scheduler::placement::{
    destination_target, resources_from_request_spec, QueryOptions, TargetNode,
};
use nova_scheduler::state::{CellUrlResolver, HostStateStore, StateOptions};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};
use serde_json::{json, Map, Value};
use sqlx::{AssertSqlSafe, Executor, MySqlPool};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;

const DEFAULT_SEED: u64 = 0x5EED_0005;
const DEFAULT_CASES: usize = 1000;

fn envelope(name: &str, version: &str, data: Value) -> Value {
    json!({
        "nova_object.name": name,
        "nova_object.namespace": "nova",
        "nova_object.version": version,
        "nova_object.data": data,
    })
}

fn pick<T: Clone>(rng: &mut StdRng, items: &[T]) -> T {
    items.choose(rng).expect("non-empty").clone()
}

fn chance(rng: &mut StdRng, p: f64) -> bool {
    rng.random_bool(p)
}

fn uuid(rng: &mut StdRng, tag: u8) -> String {
    format!(
        "{:08x}-0000-4000-8000-{:012x}",
        u32::from(tag),
        rng.random_range(0..6u64)
    )
}

/// Flavor extra specs: keys and values chosen to reach every branch (valid, invalid
/// and conflicting values, granular suffixes, Python `int()` oddities).
fn gen_extra_specs(rng: &mut StdRng) -> Map<String, Value> {
    let amounts = [
        "0", "1", "2", "+3", " 4 ", "-1", "abc", "1_0", "05", "\u{0663}", "1.5", "",
    ];
    let resource_keys = [
        "resources:VCPU",
        "resources:PCPU",
        "resources:MEMORY_MB",
        "resources:DISK_GB",
        "resources:CUSTOM_A",
        "resources:CUSTOM_A0",
        "resources1:VGPU",
        "resources1:CUSTOM_A",
        "resources2:CUSTOM_FPGA",
        "resources_gpu:VGPU",
        "resources-x:SRIOV_NET_VF",
        "resourcesBAD:NOT_A_CLASS",
        "resources3:",
        "resources:MEM_ENCRYPTION_CONTEXT",
    ];
    let trait_keys = [
        "trait:HW_CPU_X86_AVX2",
        "trait:CUSTOM_A:B",
        "trait1:CUSTOM_T1",
        "trait2:CUSTOM_T2",
        "trait_gpu:CUSTOM_G",
        "trait:HW_CPU_HYPERTHREADING",
        "trait4:CUSTOM_ONLY_TRAIT",
    ];
    let trait_values = ["required", "forbidden", "bogus"];
    let options: [(&str, &[&str]); 24] = [
        ("group_policy", &["none", "isolate", "bad"]),
        (
            "hw:cpu_policy",
            &[
                "dedicated",
                "dedicated",
                "shared",
                "mixed",
                "mixed",
                "bogus",
                "",
            ],
        ),
        (
            "hw:cpu_thread_policy",
            &["prefer", "isolate", "require", "bogus", ""],
        ),
        ("hw:emulator_threads_policy", &["share", "isolate", "bogus"]),
        (
            "hw:cpu_dedicated_mask",
            &["^0", "1-2", "0", "0-15", "^0-1", "x", "3-1", "^9", "0-1,^1"],
        ),
        ("hw:cpu_realtime", &["yes", "no", "True"]),
        ("hw:cpu_realtime_mask", &["^0", "0-1", "^0-1", "0-99"]),
        ("hw:mem_encryption", &["true", "false", " yes ", "0"]),
        (
            "hw:mem_encryption_model",
            &["amd-sev", "amd-sev-es", "amd-sev-snp", "intel-tdx", "bogus"],
        ),
        (
            "hw:pmem",
            &["small,large", " small , ,small", "4GB-a.b", ""],
        ),
        ("hw:tpm_version", &["1.2", "2.0", "3", ""]),
        ("hw:tpm_model", &["tpm-tis", "tpm-crb", "x"]),
        (
            "hw:tpm_secret_security",
            &["user", "host", "deployment", "bad", ""],
        ),
        (
            "hw:pci_numa_affinity_policy",
            &["socket", "required", "bad"],
        ),
        ("os:secure_boot", &["required", "disabled", "bad"]),
        ("hw:maxphysaddr_mode", &["passthrough", "emulate", "bad"]),
        ("hw:virtio_packed_ring", &["true", "false", "on"]),
        ("hw:ephemeral_encryption", &["true", "false"]),
        (
            "hw:ephemeral_encryption_format",
            &["luks", "plain", "luksv2", "bad"],
        ),
        ("hw:sound_model", &["virtio", "ac97", "bad"]),
        ("accel:device_profile", &["dp1", ""]),
        ("hw:cpu_realtime_mask", &["^1"]),
        ("hw:mem_page_size", &["large"]),
        ("quota:cpu_shares", &["10"]),
    ];
    let mut specs = Map::new();
    for _ in 0..rng.random_range(0..4) {
        let k = pick(rng, &resource_keys);
        specs.insert(k.into(), json!(pick(rng, &amounts)));
    }
    for _ in 0..rng.random_range(0..3) {
        let k = pick(rng, &trait_keys);
        specs.insert(k.into(), json!(pick(rng, &trait_values)));
    }
    for _ in 0..rng.random_range(0..4) {
        let (k, values) = pick(rng, &options);
        specs.insert(k.into(), json!(pick(rng, values)));
    }
    // Pinned and mixed flavors (the PCPU translation, the fallback query, the
    // dedicated and realtime masks) often enough.
    match rng.random_range(0..8) {
        0 | 1 => {
            specs.insert("hw:cpu_policy".into(), json!("dedicated"));
        }
        2 => {
            specs.insert("hw:cpu_policy".into(), json!("mixed"));
            specs.insert(
                "hw:cpu_dedicated_mask".into(),
                json!(pick(rng, &["^0", "1", "1-2", "^0-1"])),
            );
        }
        3 => {
            specs.insert("hw:cpu_policy".into(), json!("mixed"));
            specs.insert("hw:cpu_realtime".into(), json!("yes"));
            specs.insert(
                "hw:cpu_realtime_mask".into(),
                json!(pick(rng, &["^0", "1-2", "^0-1"])),
            );
        }
        _ => {}
    }
    specs
}

/// Image properties: only values nova's typed ImageMetaProps fields accept.
/// `with_disk_format`: nova's image-type prefilter reads it unconditionally.
fn gen_image(rng: &mut StdRng, with_disk_format: bool) -> Value {
    let options: [(&str, &[Value]); 25] = [
        (
            "traits_required",
            &[
                json!(["HW_CPU_X86_SSE"]),
                json!(["CUSTOM_IMG", "HW_CPU_HYPERTHREADING"]),
                json!([]),
            ],
        ),
        (
            "hw_cpu_policy",
            &[json!("dedicated"), json!("shared"), json!("mixed")],
        ),
        (
            "hw_cpu_thread_policy",
            &[json!("prefer"), json!("isolate"), json!("require")],
        ),
        ("hw_cpu_realtime_mask", &[json!("^0"), json!("0")]),
        ("hw_mem_encryption", &[json!(true), json!(false)]),
        (
            "hw_mem_encryption_model",
            &[json!("amd-sev"), json!("amd-sev-snp"), json!("intel-tdx")],
        ),
        (
            "hw_firmware_type",
            &[json!("uefi"), json!("uefi"), json!("bios")],
        ),
        ("hw_firmware_stateless", &[json!(true), json!(false)]),
        ("hw_machine_type", &[json!("q35"), json!("pc-i440fx-2.11")]),
        (
            "hw_video_model",
            &[json!("none"), json!("virtio"), json!("vga")],
        ),
        ("hw_tpm_version", &[json!("1.2"), json!("2.0")]),
        ("hw_tpm_model", &[json!("tpm-tis"), json!("tpm-crb")]),
        ("os_secure_boot", &[json!("required"), json!("optional")]),
        (
            "hw_maxphysaddr_mode",
            &[json!("passthrough"), json!("emulate")],
        ),
        (
            "hw_pci_numa_affinity_policy",
            &[json!("socket"), json!("legacy")],
        ),
        ("hw_ephemeral_encryption", &[json!(true), json!(false)]),
        (
            "hw_ephemeral_encryption_format",
            &[json!("luks"), json!("plain")],
        ),
        ("hw_sound_model", &[json!("virtio"), json!("usb")]),
        ("hw_virtio_packed_ring", &[json!(true), json!(false)]),
        (
            "hw_disk_bus",
            &[json!("virtio"), json!("scsi"), json!("uml")],
        ),
        ("hw_cdrom_bus", &[json!("sata"), json!("ide")]),
        (
            "hw_vif_model",
            &[json!("virtio"), json!("spapr-vlan"), json!("e1000e")],
        ),
        (
            "hw_architecture",
            &[json!("x86_64"), json!("armv7l"), json!("aarch64")],
        ),
        (
            "hw_emulation_architecture",
            &[json!("aarch64"), json!("ppc64le"), json!("i686")],
        ),
        ("hw_viommu_model", &[json!("intel"), json!("virtio")]),
    ];
    let mut props = Map::new();
    for _ in 0..rng.random_range(0..5) {
        let (k, values) = pick(rng, &options);
        props.insert(k.into(), pick(rng, values));
    }
    let mut data = json!({
        "name": "img",
        "properties": envelope("ImageMetaProps", "1.44", Value::Object(props)),
    });
    if chance(rng, 0.7) {
        data["id"] = json!("a0a0a0a0-0000-4000-8000-000000000001");
    }
    if with_disk_format || chance(rng, 0.8) {
        data["disk_format"] = json!(pick(rng, &["qcow2", "raw", "iso", "ploop", "bogus"]));
    }
    envelope("ImageMeta", "1.8", data)
}

fn gen_request_group(rng: &mut StdRng, pci_ids: &[String]) -> Value {
    let requester: Option<String> = match rng.random_range(0..16) {
        0 => None,
        1 => Some(String::new()),
        2 => Some("1".into()),
        3..=6 if !pci_ids.is_empty() => {
            Some(format!("{}-{}", pick(rng, pci_ids), rng.random_range(0..2)))
        }
        _ => Some(uuid(rng, 0xd0)),
    };
    let mut resources = Map::new();
    let range = if chance(rng, 0.9) { 1..3 } else { 0..1 };
    for _ in 0..rng.random_range(range) {
        let rc = pick(
            rng,
            &[
                "NET_BW_EGR_KILOBIT_PER_SEC",
                "NET_BW_IGR_KILOBIT_PER_SEC",
                "CUSTOM_PCI_DEV",
                "VCPU",
                "MEMORY_MB",
            ],
        );
        resources.insert(rc.into(), json!(pick(rng, &[0, 1, 1000])));
    }
    let mut data = json!({
        "use_same_provider": true,
        "resources": resources,
        "required_traits": if chance(rng, 0.5) { json!(["CUSTOM_PHYSNET_A"]) } else { json!([]) },
        "forbidden_traits": [],
        "aggregates": if chance(rng, 0.1) { json!([["agg-p"]]) } else { json!([]) },
        "forbidden_aggregates": [],
        "provider_uuids": [],
        "in_tree": null,
    });
    if let Some(r) = requester {
        data["requester_id"] = json!(r);
    }
    envelope("RequestGroup", "1.3", data)
}

/// A RequestSpec primitive plus what the oracle needs.
fn gen_case(rng: &mut StdRng) -> Value {
    let image_type = chance(rng, 0.5);
    let flavor = envelope(
        "Flavor",
        "1.2",
        json!({
            "name": "flavor-1",
            "flavorid": "42",
            "vcpus": pick(rng, &[0, 1, 2, 4, 16]),
            "memory_mb": pick(rng, &[0, 512, 2048]),
            "root_gb": pick(rng, &[0, 1, 20]),
            "ephemeral_gb": pick(rng, &[0, 5]),
            "swap": pick(rng, &[0, 1, 1024, 1536]),
            "extra_specs": gen_extra_specs(rng),
        }),
    );
    let mut data = json!({
        "flavor": flavor,
        "image": gen_image(rng, image_type),
        "num_instances": 1,
        "project_id": "p1",
        "user_id": "u1",
    });
    // nova-conductor always sets is_bfv (the image-type prefilter fails on it unset).
    if image_type || chance(rng, 0.8) {
        data["is_bfv"] = json!(chance(rng, 0.3));
    }
    let pci_ids: Vec<String> = if chance(rng, 0.2) {
        vec![uuid(rng, 0xc0)]
    } else {
        Vec::new()
    };
    if !pci_ids.is_empty() {
        let request = envelope(
            "InstancePCIRequest",
            "1.4",
            json!({"count": 1, "spec": [{"vendor_id": "8086"}], "alias_name": "a1", "request_id": pci_ids[0]}),
        );
        data["pci_requests"] =
            envelope("InstancePCIRequests", "1.1", json!({"requests": [request]}));
    }
    if chance(rng, 0.35) {
        let groups: Vec<Value> = (0..rng.random_range(1..3))
            .map(|_| gen_request_group(rng, &pci_ids))
            .collect();
        data["requested_resources"] = json!(groups);
    }
    if chance(rng, 0.6) {
        let mut rlp = json!({
            "root_required": if chance(rng, 0.3) { json!(["OWNER_NOVA", "CUSTOM_ROOT"]) } else { json!([]) },
            "root_forbidden": if chance(rng, 0.3) { json!(["CUSTOM_NOPE"]) } else { json!([]) },
        });
        if chance(rng, 0.3) {
            rlp["same_subtree"] = json!([["_b", "1", "_a"]]);
        }
        data["request_level_params"] = envelope("RequestLevelParams", "1.1", rlp);
    }
    let mut has_dest = false;
    if chance(rng, 0.4) {
        has_dest = true;
        let mut dest = Map::new();
        if chance(rng, 0.3) {
            dest.insert("host".into(), json!(pick(rng, &["h1", ""])));
        }
        if chance(rng, 0.2) {
            dest.insert("node".into(), json!(pick(rng, &["n1", ""])));
        }
        if chance(rng, 0.5) {
            dest.insert(
                "aggregates".into(),
                pick(
                    rng,
                    &[
                        json!(["b2,a1", "c3"]),
                        json!(["z9"]),
                        json!([]),
                        Value::Null,
                    ],
                ),
            );
        }
        if chance(rng, 0.4) {
            dest.insert(
                "forbidden_aggregates".into(),
                pick(rng, &[json!(["f2", "f1"]), json!([]), Value::Null]),
            );
        }
        data["requested_destination"] = envelope("Destination", "1.4", Value::Object(dest));
    }
    if chance(rng, 0.15) {
        data["force_hosts"] = json!([pick(rng, &["h1", "h2", ""])]);
    }
    if chance(rng, 0.1) {
        data["force_nodes"] = json!(["n1"]);
    }
    if chance(rng, 0.4) {
        let key = pick(
            rng,
            &[
                "group",
                "same_host",
                "different_host",
                "foo",
                "_nova_check_type",
            ],
        );
        data["scheduler_hints"] = json!({ key: ["x"] });
    }
    let spec = envelope("RequestSpec", "1.14", data);
    let node = |i: u8| json!({"uuid": format!("b0b0b0b0-0000-4000-8000-00000000000{i}"), "host": "h1", "hypervisor_hostname": format!("n{i}")});
    let nodes = match rng.random_range(0..4) {
        0 => json!([]),
        1 | 2 => json!([node(1)]),
        _ => json!([node(1), node(2)]),
    };
    let _ = has_dest;
    json!({
        "spec": spec,
        "max_placement_results": pick(rng, &[1000, 7]),
        "owner_nova": chance(rng, 0.5),
        "target_nodes": nodes,
        "prefilters": {
            "query_placement_for_image_type_support": image_type,
            "image_metadata_prefilter": chance(rng, 0.5),
        },
    })
}

fn failure_pair(f: &RequestFailure) -> Value {
    match f {
        RequestFailure::Filter(_) => json!(["RequestFilterFailed", f.to_string()]),
        RequestFailure::Error(e) => json!([e.class, e.message]),
    }
}

/// Our answer, in the oracle's shape.
fn ours(case: &Value) -> Value {
    let mut spec = RequestSpec::from_primitive(&case["spec"]).expect("our decoder");
    let flag = |k: &str| case["prefilters"][k].as_bool().unwrap_or(false);
    let mut out = json!({"prefilter_error": null, "first": null, "pinning": false,
                         "fallback": null, "error": null, "destination": null});
    let pure = (|| -> Result<(), RequestFailure> {
        request_filter::require_image_type_support(
            &mut spec,
            flag("query_placement_for_image_type_support"),
        );
        request_filter::compute_status_filter(&mut spec);
        request_filter::transform_image_metadata(&mut spec, flag("image_metadata_prefilter"));
        request_filter::accelerators_filter(&mut spec);
        request_filter::packed_virtqueue_filter(&mut spec)?;
        request_filter::ephemeral_encryption_filter(&mut spec)?;
        request_filter::virtio_sound_filter(&mut spec)?;
        request_filter::tpm_secret_security_filter(&mut spec)?;
        if case["owner_nova"] == json!(true)
            && !spec
                .request_level_params
                .root_required
                .contains("OWNER_NOVA")
        {
            request_filter::require_owner_nova(&mut spec);
        }
        Ok(())
    })();
    if let Err(f) = pure {
        out["prefilter_error"] = failure_pair(&f);
        return out;
    }
    let mut group_traits: Vec<(String, Vec<String>)> = spec
        .requested_resources
        .iter()
        .filter_map(|g| {
            g.requester_id
                .as_ref()
                .filter(|id| !id.is_empty())
                .map(|id| {
                    (
                        id.clone(),
                        g.required_traits.iter().cloned().collect::<Vec<_>>(),
                    )
                })
        })
        .collect();
    group_traits.sort();
    out["group_traits"] = json!(group_traits);
    out["root_required"] = json!(spec.request_level_params.root_required);
    out["root_forbidden"] = json!(spec.request_level_params.root_forbidden);
    let opts = QueryOptions {
        max_placement_results: case["max_placement_results"].as_u64().expect("max") as u32,
        ..QueryOptions::default()
    };
    let nodes: Vec<TargetNode> = case["target_nodes"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|n| TargetNode {
                    uuid: n["uuid"].as_str().unwrap_or_default().into(),
                    host: n["host"].as_str().unwrap_or_default().into(),
                    hypervisor_hostname: n["hypervisor_hostname"]
                        .as_str()
                        .unwrap_or_default()
                        .into(),
                })
                .collect()
        })
        .unwrap_or_default();
    let target = destination_target(&spec);
    let looked_up = match resources_from_request_spec(&mut spec, &opts, true, Some(&nodes)) {
        Ok(first) => {
            out["first"] = json!(first.to_querystring());
            out["pinning"] = json!(first.cpu_pinning_requested);
            if first.cpu_pinning_requested {
                match resources_from_request_spec(&mut spec, &opts, false, Some(&nodes)) {
                    Ok(second) => out["fallback"] = json!(second.to_querystring()),
                    Err(e) => out["error"] = json!([e.class, e.message]),
                }
            }
            target.is_some()
        }
        Err(e) => {
            out["error"] = json!([e.class, e.message]);
            e.class == "NoValidHost"
        }
    };
    if looked_up {
        if let Some(d) = &spec.requested_destination {
            out["destination"] = json!([d.host, d.node]);
        }
    }
    out
}

/// ValueError texts embed Python's repr of the group; only the class is compared.
fn normalize(mut v: Value) -> Value {
    for key in ["error", "prefilter_error"] {
        if v[key][0] == json!("ValueError") {
            v[key] = json!(["ValueError"]);
        }
    }
    v
}

/// Starts the oracle and answers each case line.
fn ask_oracle(venv: &std::path::Path, cases: &[Value]) -> Vec<Value> {
    let mut oracle = Command::new(venv.join("bin/python"))
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/oracle/resource_request_oracle.py"
        ))
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the nova oracle with {}: {e}", venv.display()));
    let mut stdin = oracle.stdin.take().expect("stdin");
    let lines: Vec<String> = cases.iter().map(|c| c.to_string()).collect();
    let writer = std::thread::spawn(move || {
        for line in lines {
            writeln!(stdin, "{line}").expect("write to oracle");
        }
    });
    let answers: Vec<Value> = BufReader::new(oracle.stdout.take().expect("stdout"))
        .lines()
        .map(|l| serde_json::from_str(&l.expect("read from oracle")).expect("oracle JSON"))
        .collect();
    writer.join().expect("writer");
    assert!(oracle.wait().expect("oracle exit").success());
    assert_eq!(answers.len(), cases.len(), "the oracle answered every case");
    for (case, answer) in cases.iter().zip(&answers) {
        assert!(
            answer.get("oracle_error").is_none(),
            "the oracle could not evaluate a case ({}):\n{case}",
            answer["oracle_error"]
        );
    }
    answers
}

#[test]
fn resource_requests_agree_with_nova() {
    let venv = venv::find();
    let seed = std::env::var("NSRS_DIFF_SEED")
        .map(|s| s.parse::<u64>().expect("NSRS_DIFF_SEED must be a u64"))
        .unwrap_or(DEFAULT_SEED);
    let count = std::env::var("NSRS_DIFF_CASES")
        .map(|s| {
            s.parse::<usize>()
                .expect("NSRS_DIFF_CASES must be a number")
        })
        .unwrap_or(DEFAULT_CASES);
    let mut rng = StdRng::seed_from_u64(seed);
    let cases: Vec<Value> = (0..count).map(|_| gen_case(&mut rng)).collect();

    let answers = ask_oracle(&venv, &cases);

    let mut failures = Vec::new();
    let (mut errors, mut pinned, mut prefilter_errors, mut answered) = (0, 0, 0, 0);
    let mut classes = std::collections::BTreeMap::new();
    for (case, theirs) in cases.iter().zip(answers) {
        let theirs = normalize(theirs);
        let mine = normalize(ours(case));
        errors += usize::from(!theirs["error"].is_null());
        for key in ["error", "prefilter_error"] {
            if let Some(class) = theirs[key][0].as_str() {
                *classes.entry(class.to_string()).or_insert(0usize) += 1;
            }
        }
        prefilter_errors += usize::from(!theirs["prefilter_error"].is_null());
        pinned += usize::from(theirs["pinning"] == json!(true));
        answered += usize::from(theirs["error"].is_null() && theirs["first"].is_string());
        if mine != theirs {
            failures.push(format!("case: {case}\n nova: {theirs}\n ours: {mine}"));
        }
    }
    if let Ok(path) = std::env::var("NSRS_DIFF_DUMP") {
        std::fs::write(&path, failures.join("\n\n")).expect("write NSRS_DIFF_DUMP");
    }
    eprintln!(
        "{} cases (seed {seed}): {} disagree; nova raised in {errors} + {prefilter_errors} \
         prefilter, {answered} answered, {pinned} asked the PCPU fallback; exceptions by class: {classes:?}",
        cases.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases disagree with nova; first ones:\n{}",
        failures.len(),
        cases.len(),
        failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
    // The generator must reach the interesting paths, or the test proves little.
    assert!(
        answered > count / 3 && errors > count / 20 && pinned > count / 20 && prefilter_errors > 0
    );
}

// ---------------------------------------------------------------------------
// The request filters that read the API database, against nova's own on the
// same database (schema by nova-manage, rows seeded below).

const DB_PREFIX: &str = "nsrs_t_rr";

/// Aggregates and metadata: tenant keys (`filter_tenant_id*`, other keys with the
/// project as value), AZs, and `trait:*=required` isolation rows, with the case and
/// trailing-space variants MariaDB's collation treats as equal.
const AGGREGATES: [(&str, &[(&str, &str)]); 7] = [
    (
        "ag000001-0000-4000-8000-000000000001",
        &[
            ("filter_tenant_id", "p1"),
            ("availability_zone", "az1"),
            ("trait:CUSTOM_X", "required"),
        ],
    ),
    (
        "ag000002-0000-4000-8000-000000000002",
        &[
            ("filter_tenant_id2", "p1"),
            ("trait:CUSTOM_Y", "required"),
            ("trait:CUSTOM_X", "required"),
        ],
    ),
    (
        "ag000003-0000-4000-8000-000000000003",
        &[("other", "p1"), ("TRAIT:CUSTOM_Z", "required")],
    ),
    (
        "ag000004-0000-4000-8000-000000000004",
        &[
            ("filter_tenant_id", "p2"),
            ("availability_zone", "az2"),
            ("Filter_Tenant_Id3", "p1"),
        ],
    ),
    (
        "ag000005-0000-4000-8000-000000000005",
        &[("trait:CUSTOM_W", "Required"), ("availability_zone", "az1")],
    ),
    (
        "ag000006-0000-4000-8000-000000000006",
        &[("filter_tenant_id", "P1 "), ("trait:CUSTOM_V", "forbidden")],
    ),
    ("ag000007-0000-4000-8000-000000000007", &[]),
];

fn resolver() -> CellUrlResolver {
    Arc::new(|url: &str| {
        Ok(url
            .replace("mysql+pymysql://", "mysql://")
            .split('?')
            .next()
            .unwrap_or_default()
            .to_string())
    })
}

async fn seed_api(api: &MySqlPool) -> Result<(), sqlx::Error> {
    for (i, (uuid, metadata)) in AGGREGATES.iter().enumerate() {
        let id = i as i64 + 1;
        sqlx::query("INSERT INTO aggregates (id, uuid, name, created_at) VALUES (?, ?, ?, NOW())")
            .bind(id)
            .bind(uuid)
            .bind(format!("agg{id}"))
            .execute(api)
            .await?;
        for (k, v) in metadata.iter() {
            sqlx::query(
                "INSERT INTO aggregate_metadata (aggregate_id, `key`, value, created_at) \
                 VALUES (?, ?, ?, NOW())",
            )
            .bind(id)
            .bind(k)
            .bind(v)
            .execute(api)
            .await?;
        }
    }
    Ok(())
}

fn gen_db_case(rng: &mut StdRng) -> (Value, PrefilterOptions) {
    let mut extra = Map::new();
    for t in ["CUSTOM_X", "CUSTOM_Y", "CUSTOM_W", "CUSTOM_V"] {
        if chance(rng, 0.3) {
            extra.insert(
                format!("trait:{t}"),
                json!(pick(rng, &["required", "required", "forbidden"])),
            );
        }
    }
    if chance(rng, 0.1) {
        extra.insert("hw:cpu_policy".into(), json!("bogus"));
    }
    let traits = if chance(rng, 0.3) {
        json!(["CUSTOM_Z"])
    } else {
        json!([])
    };
    let mut data = json!({
        "flavor": envelope("Flavor", "1.2", json!({
            "name": "f", "vcpus": 1, "memory_mb": 512, "root_gb": 1, "ephemeral_gb": 0,
            "swap": 0, "extra_specs": extra,
        })),
        "image": envelope("ImageMeta", "1.8", json!({
            "name": "img",
            "properties": envelope("ImageMetaProps", "1.44", json!({"traits_required": traits})),
        })),
        "project_id": pick(rng, &["p1", "p2", "p3", "P1"]),
        "user_id": "u1",
        "is_bfv": false,
    });
    // The conductor always sets it (nova's AZ filter fails on it unset).
    data["availability_zone"] = if chance(rng, 0.7) {
        json!(pick(rng, &["az1", "az2", "az3", ""]))
    } else {
        Value::Null
    };
    if chance(rng, 0.3) {
        data["requested_destination"] = envelope(
            "Destination",
            "1.4",
            json!({"aggregates": ["pre-existing"], "forbidden_aggregates": ["pre-forbidden"]}),
        );
    }
    let opts = PrefilterOptions {
        limit_tenants_to_placement_aggregate: chance(rng, 0.6),
        placement_aggregate_required_for_tenants: chance(rng, 0.5),
        enable_isolated_aggregate_filtering: chance(rng, 0.6),
        ..PrefilterOptions::default()
    };
    (envelope("RequestSpec", "1.14", data), opts)
}

fn sorted_destination(spec: &RequestSpec) -> (Value, Value) {
    match &spec.requested_destination {
        None => (Value::Null, Value::Null),
        Some(d) => {
            let aggs: Vec<Vec<String>> = d
                .aggregates
                .iter()
                .map(|e| {
                    let mut v: Vec<String> = e.split(',').map(str::to_string).collect();
                    v.sort();
                    v
                })
                .collect();
            (json!(aggs), json!(d.forbidden_aggregates))
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_request_filters_agree_with_nova() {
    let venv = venv::find();
    let prefix = nova_schema::tagged(DB_PREFIX);
    nova_schema::create(&venv, &prefix, &["cell1"])
        .await
        .unwrap_or_else(|e| panic!("nova schema: {e}"));
    let api_db = format!("{prefix}_api");
    let api = MySqlPool::connect(&nova_schema::sqlx_url(&api_db))
        .await
        .expect("api db");
    api.execute(AssertSqlSafe("DELETE FROM aggregate_metadata".to_string()))
        .await
        .expect("clean");
    seed_api(&api).await.expect("seed aggregates");
    let store = HostStateStore::connect(StateOptions::new(
        nova_schema::sqlx_url(&api_db),
        nova_schema::sqlx_url(&format!("{prefix}_cell0")),
        resolver(),
    ))
    .await
    .expect("state store");

    let mut rng = StdRng::seed_from_u64(DEFAULT_SEED);
    let generated: Vec<(Value, PrefilterOptions)> =
        (0..300).map(|_| gen_db_case(&mut rng)).collect();
    let cases: Vec<Value> = generated
        .iter()
        .map(|(spec, o)| {
            json!({"db_case": {
                "api_db": nova_schema::sqla_url(&api_db),
                "spec": spec,
                "options": {
                    "limit_tenants_to_placement_aggregate": o.limit_tenants_to_placement_aggregate,
                    "placement_aggregate_required_for_tenants": o.placement_aggregate_required_for_tenants,
                    "enable_isolated_aggregate_filtering": o.enable_isolated_aggregate_filtering,
                },
            }})
        })
        .collect();
    let answers = tokio::task::block_in_place(|| ask_oracle(&venv, &cases));

    let mut failures = Vec::new();
    let (mut required, mut forbidden, mut failed) = (0, 0, 0);
    for ((spec_json, opts), (case, theirs)) in generated.iter().zip(cases.iter().zip(answers)) {
        let mut spec = RequestSpec::from_primitive(spec_json).expect("decode");
        let run = async {
            request_filter::require_tenant_aggregate(&mut spec, &store, opts).await?;
            request_filter::map_az_to_placement_aggregate(&mut spec, &store).await?;
            request_filter::isolate_aggregates(&mut spec, &store, opts).await
        };
        let error = match run.await {
            Ok(()) => Value::Null,
            Err(PrefilterError::NoValidHost(reason)) => json!(["RequestFilterFailed", reason]),
            Err(PrefilterError::Nova(e)) => json!([e.class, e.message]),
            Err(PrefilterError::Database(e)) => panic!("database: {e}"),
        };
        let (aggregates, forbidden_aggregates) = sorted_destination(&spec);
        let mine = json!({"aggregates": aggregates, "forbidden_aggregates": forbidden_aggregates, "error": error});
        required += usize::from(
            theirs["aggregates"]
                .as_array()
                .is_some_and(|a| !a.is_empty()),
        );
        forbidden += usize::from(
            theirs["forbidden_aggregates"]
                .as_array()
                .is_some_and(|a| !a.is_empty()),
        );
        failed += usize::from(!theirs["error"].is_null());
        if mine != theirs {
            failures.push(format!("case: {case}\n nova: {theirs}\n ours: {mine}"));
        }
    }
    eprintln!(
        "{} database cases: {} disagree; {required} with required aggregates, {forbidden} with \
         forbidden ones, {failed} failed",
        cases.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} cases disagree with nova; first ones:\n{}",
        failures.len(),
        cases.len(),
        failures
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
    assert!(required > 30 && forbidden > 30 && failed > 3);
}
