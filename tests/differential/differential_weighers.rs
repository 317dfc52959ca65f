// SPDX-License-Identifier: Apache-2.0
//! Differential test: our weigher pipeline against nova 34's own weigher classes
//! and weight handler (`nova.scheduler.weights.HostWeightHandler`).
//!
//! A seeded generator makes random candidate lists (0 to 9 hosts: RAM, vCPUs,
//! disk, I/O ops, instance counts, build failures, hypervisor versions, cells, PCI
//! pools, metrics, instances with image system metadata, aggregates carrying
//! multiplier overrides, good and bad) and requests (image properties, soft
//! (anti-)affinity groups with members, cross-cell destinations), with random
//! multipliers and settings for every weigher. Each case is weighed by our pipeline
//! (built through the registry, as the daemon builds it) and by nova's handler in ONE
//! long-lived Python process (`tests/oracle/weighers_oracle.py`) fed JSON lines.
//!
//! Agreement means: both raise, or neither does and the sorted lists agree: weights
//! position by position within 1e-9 (relative above 1), and the same hosts in each
//! group of tied weights (nova sorts stably, so ties keep the input order; a group
//! is compared as a set so that a last-bit difference in a float sum cannot flip a
//! tie into a failure). The first disagreeing cases are printed as oracle input.
//!
//! Running:
//! ```sh
//! cargo test --release --test differential differential_weighers
//! NSRS_DIFF_SEED=7 NSRS_DIFF_CASES=200000 cargo test --release --test differential differential_weighers -- --nocapture
//! NSRS_DIFF_VENV=$(scripts/wayback.sh venv 2024.1) NSRS_DIFF_RELEASE=2024.1 cargo test --release --test differential differential_weighers   # an older release's own classes
//! ```
//! With `NSRS_DIFF_RELEASE`, our pipeline is built as that release and the cases use
//! only its weighers and options.
//!
//! Not generated (known limits): NaN or infinite weights (aggregate `inf`/`nan`
//! multipliers, `inf` ratios), whose order Python's sort and ours settle
//! differently; CPU ids ≥ 8 in `hw_numa_cpus` (CPython's set iteration order).

use nova_scheduler::model::{
    Aggregate, Destination, HostState, ImageMeta, InstanceGroup, RequestSpec,
};
use nova_scheduler::release::{Behaviour, NovaSeries};
use nova_scheduler::weighers::registry::{in_release, ALL_WEIGHERS};
use nova_scheduler::weighers::{build_pipeline, WeighedHost, WeigherConfig};
use rand::rngs::StdRng;
use rand::seq::{IndexedRandom, SliceRandom};
use rand::{RngExt, SeedableRng};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;

const DEFAULT_SEED: u64 = 20_261_121;
const DEFAULT_CASES: usize = 10_000;

struct Case {
    weighers: Vec<String>,
    hosts: Vec<HostState>,
    spec: RequestSpec,
    config: WeigherConfig,
}

/// What a side answered: the sorted (host index, weight) list, or "raised".
#[derive(Debug, Clone, PartialEq)]
enum Answer {
    Sorted(Vec<(usize, f64)>),
    Raised(String),
}

fn ours(case: &Case) -> Answer {
    let pipeline = build_pipeline(&case.weighers, &case.config).expect("known weighers");
    let all: Vec<usize> = (0..case.hosts.len()).collect();
    match pipeline.weigh(&case.hosts, &all, &case.spec) {
        Ok(list) => Answer::Sorted(
            list.iter()
                .map(|WeighedHost { index, weight }| (*index, *weight))
                .collect(),
        ),
        Err(e) => Answer::Raised(e.class.to_string()),
    }
}

fn parse_answer(line: &str) -> Result<Answer, String> {
    if let Some(class) = line.strip_prefix("raise:") {
        return Ok(Answer::Raised(class.to_string()));
    }
    let v: Value = serde_json::from_str(line).map_err(|_| line.to_string())?;
    let order = v["order"].as_array().ok_or_else(|| line.to_string())?;
    let weights = v["weights"].as_array().ok_or_else(|| line.to_string())?;
    Ok(Answer::Sorted(
        order
            .iter()
            .zip(weights)
            .map(|(i, w)| {
                (
                    i.as_u64().unwrap_or(u64::MAX) as usize,
                    w.as_f64().unwrap_or(f64::NAN),
                )
            })
            .collect(),
    ))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// Same weights position by position; same host sets within each run of tied weights.
fn agree(nova: &Answer, ours: &Answer) -> bool {
    match (nova, ours) {
        (Answer::Raised(_), Answer::Raised(_)) => true,
        (Answer::Sorted(n), Answer::Sorted(o)) => {
            if n.len() != o.len() || n.iter().zip(o).any(|(a, b)| !close(a.1, b.1)) {
                return false;
            }
            let mut start = 0;
            while start < n.len() {
                let mut end = start + 1;
                while end < n.len() && close(n[end].1, n[start].1) {
                    end += 1;
                }
                let mut a: Vec<usize> = n[start..end].iter().map(|x| x.0).collect();
                let mut b: Vec<usize> = o[start..end].iter().map(|x| x.0).collect();
                a.sort_unstable();
                b.sort_unstable();
                if a != b {
                    return false;
                }
                start = end;
            }
            true
        }
        _ => false,
    }
}

#[test]
fn weighers_agree_with_nova() {
    // An older release's own classes: its venv (scripts/wayback.sh venv RELEASE).
    let venv = std::env::var_os("NSRS_DIFF_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(crate::venv::find);
    let seed = std::env::var("NSRS_DIFF_SEED")
        .map(|s| s.parse::<u64>().expect("NSRS_DIFF_SEED must be a u64"))
        .unwrap_or(DEFAULT_SEED);
    let cases = std::env::var("NSRS_DIFF_CASES")
        .map(|s| {
            s.replace('_', "")
                .parse::<usize>()
                .expect("NSRS_DIFF_CASES must be a number")
        })
        .unwrap_or(DEFAULT_CASES);

    let mut oracle = Command::new(venv.join("bin/python"))
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/oracle/weighers_oracle.py"
        ))
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the nova oracle with {}: {e}", venv.display()));
    let mut stdin = oracle.stdin.take().expect("stdin");
    let answers = BufReader::new(oracle.stdout.take().expect("stdout")).lines();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let writer = std::thread::spawn(move || {
        for line in rx {
            if writeln!(stdin, "{line}").is_err() {
                return;
            }
        }
        drop(stdin);
    });
    let reader = std::thread::spawn(move || {
        answers
            .map(|l| l.expect("read from oracle"))
            .collect::<Vec<String>>()
    });

    let mut rng = StdRng::seed_from_u64(seed);
    let mut ours_all = Vec::with_capacity(cases);
    let mut inputs = Vec::with_capacity(cases);
    for _ in 0..cases {
        let case = generate(&mut rng);
        let line = case_json(&case).to_string();
        tx.send(line.clone()).expect("writer thread");
        ours_all.push(ours(&case));
        inputs.push(line);
    }
    drop(tx);
    writer.join().expect("writer thread");
    let answers = reader.join().expect("reader thread");
    let status = oracle.wait().expect("oracle exit");
    assert!(status.success(), "the oracle exited with {status}");
    assert_eq!(
        answers.len(),
        cases,
        "the oracle answered {} of {cases} cases",
        answers.len()
    );

    let (mut raised, mut weighed, mut multi_host, mut disagreements) = (0, 0, 0, Vec::new());
    let mut distinct_orders = 0;
    for ((ours, answer), input) in ours_all.iter().zip(&answers).zip(&inputs) {
        let nova = parse_answer(answer)
            .unwrap_or_else(|e| panic!("the oracle could not weigh a case ({e}):\n{input}"));
        match &nova {
            Answer::Raised(_) => raised += 1,
            Answer::Sorted(list) => {
                weighed += 1;
                if list.len() > 1 {
                    multi_host += 1;
                    if list.iter().enumerate().any(|(pos, (i, _))| pos != *i) {
                        distinct_orders += 1;
                    }
                }
            }
        }
        if !agree(&nova, ours) {
            disagreements.push(format!("nova: {nova:?}\nours: {ours:?}\n{input}"));
        }
    }
    println!(
        "differential weighers: seed {seed}, {cases} cases: {weighed} weighed ({multi_host} with 2+ hosts, {distinct_orders} reordered), {raised} raised in nova, {} disagreements",
        disagreements.len()
    );
    // The generator must keep producing the interesting shapes.
    assert!(multi_host * 10 >= cases * 7, "too few multi-host cases");
    assert!(
        distinct_orders * 2 >= cases,
        "too few cases that reorder hosts"
    );
    assert!(raised * 200 >= cases, "too few cases where nova raises");
    assert!(raised * 10 <= cases, "too many cases where nova raises");
    assert!(
        disagreements.is_empty(),
        "{} of {cases} cases disagree with nova; first ones:\n{}",
        disagreements.len(),
        disagreements
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n\n")
    );
}

// ---------------------------------------------------------------------------------
// Serialization for the oracle
// ---------------------------------------------------------------------------------

/// The nova release our pipeline is built as: `NSRS_DIFF_RELEASE` (a series, run
/// against that release's own classes in the venv `NSRS_DIFF_VENV`), else the newest.
fn release() -> NovaSeries {
    static RELEASE: std::sync::OnceLock<NovaSeries> = std::sync::OnceLock::new();
    *RELEASE.get_or_init(|| match std::env::var("NSRS_DIFF_RELEASE") {
        Ok(name) => NovaSeries::parse(&name)
            .unwrap_or_else(|| panic!("NSRS_DIFF_RELEASE={name} is no series known here")),
        Err(_) => NovaSeries::NEWEST,
    })
}

fn case_json(case: &Case) -> Value {
    let c = &case.config;
    let mut sysmeta = Map::new();
    for h in &case.hosts {
        if let Some(m) = &h.instance_system_metadata {
            for (uuid, rows) in m.iter() {
                sysmeta.insert(
                    uuid.clone(),
                    Value::Array(rows.iter().map(|(k, v)| json!([k, v])).collect()),
                );
            }
        }
    }
    let mut case = json!({
        "weighers": case.weighers,
        "hosts": case.hosts.iter().map(host_json).collect::<Vec<_>>(),
        "spec": spec_json(&case.spec),
        "sysmeta": sysmeta,
        "config": {
            "filter_scheduler": {
                "ram_weight_multiplier": c.ram_weight_multiplier,
                "cpu_weight_multiplier": c.cpu_weight_multiplier,
                "disk_weight_multiplier": c.disk_weight_multiplier,
                "io_ops_weight_multiplier": c.io_ops_weight_multiplier,
                "pci_weight_multiplier": c.pci_weight_multiplier,
                "soft_affinity_weight_multiplier": c.soft_affinity_weight_multiplier,
                "soft_anti_affinity_weight_multiplier": c.soft_anti_affinity_weight_multiplier,
                "build_failure_weight_multiplier": c.build_failure_weight_multiplier,
                "cross_cell_move_weight_multiplier": c.cross_cell_move_weight_multiplier,
                "hypervisor_version_weight_multiplier": c.hypervisor_version_weight_multiplier,
                "num_instances_weight_multiplier": c.num_instances_weight_multiplier,
                "image_props_weight_multiplier": c.image_props_weight_multiplier,
                "image_props_weight_setting": c.image_props_weight_setting,
            },
            "metrics": {
                "weight_setting": c.metrics_weight_setting,
                "weight_multiplier": c.metrics_weight_multiplier,
                "required": c.metrics_required,
                "weight_of_unavailable": c.metrics_weight_of_unavailable,
            },
        },
    });
    if !release().has(Behaviour::ImagePropertiesWeigher) {
        // Not options of that release: its oslo.config refuses to override them.
        let fs = case["config"]["filter_scheduler"]
            .as_object_mut()
            .expect("group");
        fs.remove("image_props_weight_multiplier");
        fs.remove("image_props_weight_setting");
    }
    case
}

fn host_json(h: &HostState) -> Value {
    let mut v = json!({
        "host": &*h.host,
        "nodename": &*h.nodename,
        "cell_uuid": &*h.cell_uuid,
        "free_ram_mb": h.free_ram_mb,
        "free_disk_mb": h.free_disk_mb,
        "vcpus_total": h.vcpus_total,
        "vcpus_used": h.vcpus_used,
        "cpu_allocation_ratio": h.cpu_allocation_ratio,
        "num_instances": h.num_instances,
        "num_io_ops": h.num_io_ops,
        "failed_builds": h.failed_builds,
        "hypervisor_version": h.hypervisor_version,
        "metrics": h.metrics.as_deref(),
        "aggregates": h.aggregates.iter().map(|a| json!({
            "id": a.id, "hosts": a.hosts, "metadata": a.metadata,
        })).collect::<Vec<_>>(),
        "instances": h.instances.iter().collect::<Vec<_>>(),
    });
    if let Some(pools) = h.pci_stats.as_deref().and_then(Value::as_array) {
        v["pci_pools"] = Value::Array(pools.iter().map(|p| p["count"].clone()).collect());
    }
    v
}

fn spec_json(s: &RequestSpec) -> Value {
    let mut out = json!({
        "image": s.image.as_ref().map(|i| json!({"properties": i.properties})),
        "instance_group": s.instance_group.as_ref().map(|g| {
            let mut group = json!({"members": g.members, "hosts": g.hosts, "policies": g.policies});
            if let Some(p) = &g.policy {
                group["policy"] = json!(p);
            }
            group
        }),
    });
    if let Some(d) = &s.requested_destination {
        out["requested_destination"] = json!({
            "cell_uuid": d.cell_uuid, "allow_cross_cell_move": d.allow_cross_cell_move,
        });
    }
    out
}

// ---------------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------------

const CELLS: [&str; 3] = [
    "11111111-1111-1111-1111-111111111111",
    "22222222-2222-2222-2222-222222222222",
    "33333333-3333-3333-3333-333333333333",
];

fn instance_uuid(i: usize) -> String {
    format!("aaaaaaaa-0000-0000-0000-{i:012}")
}

fn pick<T: Clone>(rng: &mut StdRng, items: &[T]) -> T {
    items.choose(rng).expect("non-empty").clone()
}

fn chance(rng: &mut StdRng, p: f64) -> bool {
    rng.random_bool(p)
}

/// Multipliers: nova's default most of the time, else something that changes the result.
fn multiplier(rng: &mut StdRng, default: f64, non_negative: bool) -> f64 {
    if chance(rng, 0.4) {
        return default;
    }
    let v = pick(rng, &[0.0, 0.5, 1.0, 2.0, 3.5, 1000.0, 1e6]);
    if non_negative || chance(rng, 0.5) {
        v
    } else {
        -v
    }
}

/// Aggregate overrides: numbers as operators write them, and values nova cannot parse.
fn aggregate_value(rng: &mut StdRng) -> String {
    pick(
        rng,
        &[
            "2", "1.5", "-1", "0", " 3 ", "1_000", "1e3", "-0.5", "x", "", "1,5", "10",
        ],
    )
    .to_string()
}

const MULTIPLIER_KEYS: &[&str] = &[
    "ram_weight_multiplier",
    "cpu_weight_multiplier",
    "disk_weight_multiplier",
    "io_ops_weight_multiplier",
    "pci_weight_multiplier",
    "soft_affinity_weight_multiplier",
    "soft_anti_affinity_weight_multiplier",
    "build_failure_weight_multiplier",
    "cross_cell_move_weight_multiplier",
    "hypervisor_version_weight_multiplier",
    "num_instances_weight_multiplier",
    "metrics_weight_multiplier",
    "image_props_weight_multiplier",
];

fn gen_aggregates(rng: &mut StdRng, pool: &[Arc<Aggregate>]) -> Vec<Arc<Aggregate>> {
    pool.iter().filter(|_| chance(rng, 0.3)).cloned().collect()
}

fn gen_aggregate_pool(rng: &mut StdRng) -> Vec<Arc<Aggregate>> {
    (1..=4)
        .map(|id| {
            let mut metadata = BTreeMap::new();
            for _ in 0..rng.random_range(0..4) {
                metadata.insert(pick(rng, MULTIPLIER_KEYS).to_string(), aggregate_value(rng));
            }
            if chance(rng, 0.3) {
                metadata.insert("availability_zone".into(), "az1".into());
            }
            Arc::new(Aggregate {
                id,
                uuid: format!("00000000-0000-0000-0000-{id:012}"),
                name: format!("agg{id}"),
                hosts: Default::default(),
                metadata,
            })
        })
        .collect()
}

const METRIC_NAMES: &[&str] = &[
    "cpu.frequency",
    "cpu.user.time",
    "cpu.idle.time",
    "cpu.percent",
    "cpu.user.percent",
    "numa.membw.current",
];

fn gen_metrics(rng: &mut StdRng) -> Option<Value> {
    if chance(rng, 0.1) {
        return None;
    }
    let mut items = Vec::new();
    for name in METRIC_NAMES {
        if chance(rng, 0.7) {
            let value = if name.contains("percent") {
                json!(pick(rng, &[0.0, 0.05, 0.29, 0.5, 0.999, 1.0]))
            } else if chance(rng, 0.8) {
                json!(rng.random_range(0..5000))
            } else {
                json!(rng.random_range(0.0..5000.0))
            };
            items.push(
                json!({"name": name, "value": value, "source": "libvirt.LibvirtDriver",
                              "timestamp": "2026-11-21T12:00:00+00:00"}),
            );
        }
    }
    Some(Value::Array(items))
}

/// A system-metadata row set for one instance, as nova writes it from an image
/// (plus legacy names, non-image keys and, rarely, a value nova cannot coerce).
fn gen_sysmeta(rng: &mut StdRng) -> Vec<(String, String)> {
    let options: &[(&str, &[&str])] = &[
        ("image_os_distro", &["linux", "windows", "ubuntu"]),
        ("image_hw_machine_type", &["pc", "q35"]),
        ("image_hw_architecture", &["x86_64", "AMD64", "aarch64"]),
        ("image_architecture", &["x86_64", "i386"]),
        ("image_hw_numa_nodes", &["1", "2", " 2"]),
        ("image_hw_qemu_guest_agent", &["yes", "true", "no", "False"]),
        ("image_hw_disk_bus", &["virtio", "scsi"]),
        ("image_hw_numa_cpus.0", &["0-1", "0,1", "2-3,^3", "0"]),
        ("image_hw_numa_mem.0", &["1024", "512"]),
        ("image_hw_vif_model", &["VirtualE1000", "e1000", "virtio"]),
        ("image_vm_mode", &["hv", "hvm"]),
        ("image_trait:CUSTOM_A", &["required", "forbidden"]),
        ("image_trait:CUSTOM_B", &["required"]),
        ("image_min_ram", &["0", "512"]),
        ("image_base_image_ref", &["abc"]),
        ("owner_user_name", &["admin"]),
    ];
    let mut rows = Vec::new();
    for (key, values) in options {
        if chance(rng, 0.35) {
            rows.push((key.to_string(), pick(rng, values).to_string()));
        }
    }
    if chance(rng, 0.35) && rows.iter().any(|(k, _)| k == "image_hw_numa_cpus.0") {
        rows.push(("image_hw_numa_cpus.1".into(), "4-5".into()));
    }
    rows.shuffle(rng);
    if chance(rng, 0.003) {
        let (k, v) = pick(
            rng,
            &[
                ("image_hw_disk_bus", "bogus"),
                ("image_hw_numa_nodes", "1.5"),
                ("image_hw_numa_cpus.0", "3-1"),
                ("image_min_ram", "x"),
            ],
        );
        rows.push((k.to_string(), v.to_string()));
    }
    rows
}

/// The request image's properties (typed, as the RPC primitive carries them).
fn gen_request_image(rng: &mut StdRng) -> Option<ImageMeta> {
    if chance(rng, 0.15) {
        return None;
    }
    let options: Vec<(&str, Vec<Value>)> = vec![
        (
            "os_distro",
            vec![json!("linux"), json!("windows"), json!("ubuntu")],
        ),
        ("hw_machine_type", vec![json!("pc"), json!("q35")]),
        (
            "hw_architecture",
            vec![json!("x86_64"), json!("aarch64"), json!("i686")],
        ),
        ("hw_numa_nodes", vec![json!(1), json!(2)]),
        ("hw_qemu_guest_agent", vec![json!(true), json!(false)]),
        ("hw_disk_bus", vec![json!("virtio"), json!("scsi")]),
        (
            "hw_numa_cpus",
            vec![json!([[0, 1]]), json!([[0, 2], [4, 5]]), json!([[0]])],
        ),
        ("hw_numa_mem", vec![json!([1024]), json!([512])]),
        ("hw_vif_model", vec![json!("e1000"), json!("virtio")]),
        ("hw_vm_mode", vec![json!("hvm")]),
        (
            "traits_required",
            vec![json!(["CUSTOM_A"]), json!(["CUSTOM_A", "CUSTOM_B"])],
        ),
    ];
    let mut properties = Map::new();
    for (key, values) in options {
        if chance(rng, 0.5) {
            properties.insert(key.to_string(), pick(rng, &values));
        }
    }
    Some(ImageMeta {
        properties,
        ..Default::default()
    })
}

fn gen_host(rng: &mut StdRng, i: usize, aggs: &[Arc<Aggregate>]) -> HostState {
    let name = format!("host{i}");
    let instances: Vec<String> = (0..10)
        .filter(|_| chance(rng, 0.2))
        .map(instance_uuid)
        .collect();
    HostState {
        host: name.as_str().into(),
        nodename: name.into(),
        cell_uuid: pick(rng, &CELLS).into(),
        free_ram_mb: pick(rng, &[-512, 0, 512, 1024, 2048, 4096, 8192])
            + if chance(rng, 0.3) {
                rng.random_range(0..1000)
            } else {
                0
            },
        free_disk_mb: pick(rng, &[-5120, 0, 10240, 30720, 81920]),
        vcpus_total: rng.random_range(0..17),
        vcpus_used: rng.random_range(0..20),
        cpu_allocation_ratio: pick(rng, &[1.0, 2.0, 4.0, 16.0, 1.5]),
        num_instances: rng.random_range(0..12),
        num_io_ops: rng.random_range(0..9),
        failed_builds: pick(rng, &[0, 0, 0, 1, 2, 10]),
        hypervisor_version: pick(
            rng,
            &[None, Some(0), Some(1), Some(6_002_000), Some(9_001_000)],
        ),
        pci_stats: if chance(rng, 0.3) {
            None
        } else {
            Some(Arc::new(Value::Array(
                (0..rng.random_range(0..3))
                    .map(|_| json!({"count": pick(rng, &[0, 1, 4, 50, 120])}))
                    .collect(),
            )))
        },
        metrics: gen_metrics(rng).map(Arc::new),
        aggregates: gen_aggregates(rng, aggs),
        instances: Arc::new(instances.into_iter().collect()),
        ..Default::default()
    }
}

fn gen_setting(rng: &mut StdRng, names: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for _ in 0..rng.random_range(0..4) {
        let name = pick(rng, names);
        out.push(match rng.random_range(0..10) {
            0 => name.to_string(),    // no ratio: dropped
            1 => format!("{name}=x"), // bad ratio: dropped
            2 => format!("{name}=0"),
            _ => format!(
                "{name}={}",
                pick(rng, &["1", "-1", "0.5", "2", "-0.001", "1e-3"])
            ),
        });
    }
    out
}

fn gen_config(rng: &mut StdRng) -> WeigherConfig {
    let d = WeigherConfig {
        release: release(),
        ..WeigherConfig::default()
    };
    WeigherConfig {
        ram_weight_multiplier: multiplier(rng, d.ram_weight_multiplier, false),
        cpu_weight_multiplier: multiplier(rng, d.cpu_weight_multiplier, false),
        disk_weight_multiplier: multiplier(rng, d.disk_weight_multiplier, false),
        io_ops_weight_multiplier: multiplier(rng, d.io_ops_weight_multiplier, false),
        pci_weight_multiplier: multiplier(rng, d.pci_weight_multiplier, true),
        soft_affinity_weight_multiplier: multiplier(rng, d.soft_affinity_weight_multiplier, true),
        soft_anti_affinity_weight_multiplier: multiplier(
            rng,
            d.soft_anti_affinity_weight_multiplier,
            true,
        ),
        build_failure_weight_multiplier: multiplier(rng, d.build_failure_weight_multiplier, false),
        cross_cell_move_weight_multiplier: multiplier(
            rng,
            d.cross_cell_move_weight_multiplier,
            false,
        ),
        hypervisor_version_weight_multiplier: multiplier(
            rng,
            d.hypervisor_version_weight_multiplier,
            false,
        ),
        num_instances_weight_multiplier: multiplier(rng, d.num_instances_weight_multiplier, false),
        image_props_weight_multiplier: if chance(rng, 0.3) {
            0.0
        } else {
            pick(rng, &[1.0, -1.0, 2.0, 0.5])
        },
        image_props_weight_setting: if chance(rng, 0.5) {
            Vec::new()
        } else {
            gen_setting(
                rng,
                &[
                    "os_distro",
                    "hw_machine_type",
                    "hw_numa_nodes",
                    "traits_required",
                ],
            )
        },
        metrics_weight_setting: gen_setting(rng, METRIC_NAMES),
        metrics_weight_multiplier: multiplier(rng, 1.0, false),
        metrics_required: chance(rng, 0.05),
        metrics_weight_of_unavailable: pick(rng, &[-10000.0, -1.0, 0.0, 5.0]),
        ..d
    }
}

fn gen_spec(rng: &mut StdRng) -> RequestSpec {
    let instance_group = if chance(rng, 0.3) {
        None
    } else {
        let policy = pick(
            rng,
            &[
                "soft-affinity",
                "soft-anti-affinity",
                "affinity",
                "anti-affinity",
            ],
        );
        Some(InstanceGroup {
            policy: Some(policy.to_string()),
            policies: vec![policy.to_string()],
            members: (0..rng.random_range(0..6))
                .map(|_| instance_uuid(rng.random_range(0..12)))
                .collect(),
            ..Default::default()
        })
    };
    let requested_destination = if chance(rng, 0.4) {
        None
    } else {
        Some(Destination {
            cell_uuid: if chance(rng, 0.15) {
                None
            } else {
                Some(pick(rng, &CELLS).to_string())
            },
            allow_cross_cell_move: chance(rng, 0.7),
            ..Default::default()
        })
    };
    RequestSpec {
        image: gen_request_image(rng),
        instance_group,
        requested_destination,
        ..Default::default()
    }
}

fn generate(rng: &mut StdRng) -> Case {
    let aggs = gen_aggregate_pool(rng);
    let n = if chance(rng, 0.05) {
        rng.random_range(0..2)
    } else {
        rng.random_range(2..10)
    };
    let mut hosts: Vec<HostState> = (0..n).map(|i| gen_host(rng, i, &aggs)).collect();
    // Instances' image metadata; a few instances have no rows (unknown to the DB).
    let mut sysmeta: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for i in 0..10 {
        if chance(rng, 0.85) {
            let rows = gen_sysmeta(rng);
            sysmeta.insert(instance_uuid(i), rows);
        }
    }
    for h in &mut hosts {
        let mine: BTreeMap<String, Vec<(String, String)>> = h
            .instances
            .iter()
            .filter_map(|u| sysmeta.get(u).map(|rows| (u.clone(), rows.clone())))
            .collect();
        h.instance_system_metadata = Some(Arc::new(mine));
    }
    let known = ALL_WEIGHERS.iter().filter(|w| in_release(w, release()));
    let weighers: Vec<String> = if chance(rng, 0.6) {
        known.map(|s| s.to_string()).collect()
    } else {
        let mut w: Vec<String> = known
            .filter(|_| chance(rng, 0.4))
            .map(|s| s.to_string())
            .collect();
        w.shuffle(rng);
        w
    };
    Case {
        weighers,
        hosts,
        spec: gen_spec(rng),
        config: gen_config(rng),
    }
}
