// SPDX-License-Identifier: Apache-2.0
//! The decision core alone: nova's default `enabled_filters` and every weigher
//! (`nova.scheduler.weights.all_weighers`, default multipliers), claims always
//! succeeding, at 1k, 10k and 50k hosts. What our own CPU costs per
//! `select_destinations` once host states and candidates are in memory.
//!
//! - `one_instance/N`: the captured nova 34 single-instance request
//!   (`src/rpc/testdata/single_instance.request.json`: image properties, a flavor
//!   with extra specs), alternates on;
//! - `ten_instances/N`: the same request for 10 instances (divide by 10 for the
//!   per-instance figure);
//! - `ten_instances_reference/N`: the same through `scheduler::reference::schedule`
//!   (every filter and weigher on every host for every instance, nothing carried
//!   between instances), for comparison;
//! - `host_state_copy/N`: copying N cached host states, what each request pays to
//!   get its own mutable states (the warm cache hands out copies).
//! - `table_one_instance/N`, `table_ten_instances/N`: the same requests through
//!   `Scheduler::schedule_table` on a `HostTable` of the N hosts whose weigh index
//!   is built (as the state edge keeps it between requests); the request's
//!   candidates per row are its input, as host states are above;
//! - `table_index_build/N`: building that weigh index (once per table);
//! - `table_change_one_row/N`: a new table with one row changed, the index carried
//!   over (what recording one decision's consumption costs).
//!
//! Host states look like the seeded test cloud's: stats, cpu_info, supported
//! instances, two cells, an availability-zone aggregate and for some hosts a second
//! aggregate with a weight multiplier override.
//!
//! - `plugin_wasm_filter/N`, `plugin_wasm_weigher/N`: the example WebAssembly plugin
//!   (`examples/wasm-plugin`, built here) as a filter and as a weigher over N hosts in
//!   20 racks: what a Wasm plugin adds to a request (the table encoded, the call,
//!   the answer read), once per request, reading only the columns it names
//!   (`nsrs_columns`); `plugin_wasm_every_column/N`: a filter that names none, so it
//!   is given every column, and passes every host (the cost of the whole table);
//!   `plugin_wasm_endless/1000`: a filter in an endless loop, cut off at
//!   `plugin_deadline_ms = 3`.
//! - `plugin_python_filter/N` (N ≤ 1,000, with `NSRS_VENV` naming a venv with nova):
//!   an operator's Python filter class in the chain, over nova `HostState`s the
//!   interpreter keeps between requests (each host's JSON compared, the class run,
//!   the verdicts read); `plugin_python_filter_in_nova/N`: the same class in
//!   nova-scheduler's own filter handler over host states nova already holds, what
//!   the class costs nova.
//!
//! Figures are the benchmark thread's CPU time (`NSRS_BENCH_WALL=1`: wall clock).
//!
//! Run: `cargo bench --bench decision_core` (`NSRS_BENCH_HOSTS=1000,10000` picks sizes;
//! above 50,000 hosts only the table cases run).

use chrono::{DateTime, Utc};
#[path = "common/cpu_time.rs"]
mod cpu_time;

use criterion::measurement::{Measurement, WallTime};
use criterion::{BatchSize, BenchmarkId, Criterion};
use nova_scheduler::config::scheduler::DEFAULT_ENABLED_FILTERS;
use nova_scheduler::filters::{build_chain, FilterConfig};
use nova_scheduler::model::{Aggregate, AllocationCandidate, HostState, RequestSpec, ServiceInfo};
use nova_scheduler::rpc::envelope::decode_request;
use nova_scheduler::scheduler::{
    reference, ClaimError, Claimer, HostTable, RowCandidates, ScheduleRequest, Scheduler,
};
use nova_scheduler::weighers::{build_pipeline, WeigherConfig};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "wasm")]
#[path = "../tests/common/wasm_example.rs"]
mod wasm_example;

const SINGLE_REQUEST: &str = include_str!("../src/rpc/testdata/single_instance.request.json");

const CPU_INFO: &str = r#"{"arch": "x86_64", "model": "Cascadelake-Server", "vendor": "Intel", "topology": {"cells": 2, "sockets": 1, "cores": 16, "threads": 2}, "features": ["pge", "avx", "avx2", "sse4.2", "vmx", "ssse3", "aes", "xsave", "rdrand", "fma", "bmi1", "bmi2"]}"#;

struct AlwaysClaims;

impl Claimer for AlwaysClaims {
    async fn claim(&mut self, _: &str, _: &HostState, _: &Value) -> Result<bool, ClaimError> {
        Ok(true)
    }
    async fn release(&mut self, _: &[String]) -> Result<(), ClaimError> {
        Ok(())
    }
}

fn aggregates() -> Vec<Arc<Aggregate>> {
    let mut out: Vec<Arc<Aggregate>> = (0..3)
        .map(|z| {
            Arc::new(Aggregate {
                id: z + 1,
                name: format!("az{z}"),
                metadata: [("availability_zone".to_string(), format!("az{z}"))].into(),
                ..Default::default()
            })
        })
        .collect();
    out.push(Arc::new(Aggregate {
        id: 10,
        name: "fast-ram".into(),
        metadata: [("ram_weight_multiplier".to_string(), "2.0".to_string())].into(),
        ..Default::default()
    }));
    out
}

/// `n` hosts whose services were last seen at `now`.
fn hosts(n: usize, now: DateTime<Utc>) -> Vec<HostState> {
    let aggs = aggregates();
    let supported = Arc::new(vec![
        vec!["x86_64".to_string(), "kvm".into(), "hvm".into()],
        vec!["i686".to_string(), "kvm".into(), "hvm".into()],
    ]);
    let cpu_info: Arc<str> = Arc::from(CPU_INFO);
    let resources = Arc::new(
        json!({"VCPU": 2, "MEMORY_MB": 4096, "DISK_GB": 20})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    (0..n)
        .map(|i| {
            let uuid = format!("00000000-0000-4000-8000-{i:012}");
            let instances = (i % 7) as i64;
            let stats: BTreeMap<Arc<str>, Arc<str>> = [
                ("num_instances", instances.to_string()),
                ("io_workload", (i % 3).to_string()),
                ("failed_builds", "0".to_string()),
                ("num_vm_active", instances.to_string()),
                ("num_task_None", instances.to_string()),
                ("num_os_type_None", instances.to_string()),
                (
                    "num_proj_c0c0c0c0c0c04c0c8c0c0c0c0c0c0c01",
                    instances.to_string(),
                ),
            ]
            .into_iter()
            .map(|(k, v)| (Arc::from(k), Arc::from(v)))
            .collect();
            let mut host_aggs = vec![aggs[i % 3].clone()];
            if i % 10 == 0 {
                host_aggs.push(aggs[3].clone());
            }
            let name = format!("cmp{i:05}");
            HostState {
                host: name.as_str().into(),
                nodename: name.as_str().into(),
                cell_uuid: if i % 2 == 0 {
                    "cell1".into()
                } else {
                    "cell2".into()
                },
                total_usable_ram_mb: 262_144,
                free_ram_mb: 4096 + (i as i64 * 7919) % 250_000,
                total_usable_disk_gb: 2000,
                free_disk_mb: 100_000 + (i as i64 * 104_729) % 1_000_000,
                vcpus_total: 64,
                vcpus_used: (i as i64 * 31) % 64,
                cpu_allocation_ratio: 4.0,
                ram_allocation_ratio: 1.5,
                disk_allocation_ratio: 1.0,
                num_instances: instances,
                num_io_ops: (i % 3) as i64,
                stats: Arc::new(stats),
                host_ip: Some(format!("192.0.2.{}", i % 250 + 1).into()),
                hypervisor_type: Some("QEMU".into()),
                hypervisor_version: Some(8_002_000),
                hypervisor_hostname: Some(name.as_str().into()),
                cpu_info: Some(cpu_info.clone()),
                supported_instances: supported.clone(),
                aggregates: host_aggs,
                instances: Arc::new(
                    (0..instances)
                        .map(|k| format!("b{k}000000-0000-4000-8000-{i:012}"))
                        .collect::<BTreeSet<_>>(),
                ),
                service: ServiceInfo {
                    id: i as i64 + 1,
                    host: name.into(),
                    last_seen_up: Some(now),
                    version: 74,
                    ..Default::default()
                },
                // As the daemon holds Placement's single-provider candidates.
                allocation_candidates: vec![AllocationCandidate::single_provider(
                    uuid.as_str().into(),
                    resources.clone(),
                )],
                uuid: Some(uuid.into()),
                ..Default::default()
            }
        })
        .collect()
}

fn captured_spec() -> RequestSpec {
    RequestSpec::from_primitive(&captured_spec_obj()).expect("spec")
}

/// The captured request's `spec_obj` primitive.
fn captured_spec_obj() -> Value {
    let captured: Value = serde_json::from_str(SINGLE_REQUEST).expect("sample");
    let body = captured["body_raw"].as_str().expect("body_raw");
    let mut request = decode_request(
        Some("application/json"),
        None,
        body.as_bytes(),
        nova_scheduler::rpc::envelope::DEFAULT_MAX_MESSAGE_BYTES,
    )
    .expect("request");
    request.args.remove("spec_obj").expect("spec_obj")
}

fn sizes() -> Vec<usize> {
    std::env::var("NSRS_BENCH_HOSTS")
        .ok()
        .map(|s| s.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 50_000])
}

fn bench<M: Measurement>(c: &mut Criterion<M>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let enabled: Vec<String> = DEFAULT_ENABLED_FILTERS
        .iter()
        .map(|s| s.to_string())
        .collect();
    let scheduler = Scheduler {
        filters: build_chain(&enabled, &FilterConfig::default()).expect("filters"),
        weighers: build_pipeline(
            &["nova.scheduler.weights.all_weighers".into()],
            &WeigherConfig::default(),
        )
        .expect("weighers"),
        host_subset_size: 1,
        shuffle_best_same_weighed_hosts: false,
        max_attempts: 3,
        packing_host_numa_cells_allocation_strategy: false,
    };
    let spec = captured_spec();
    let mut group = c.benchmark_group("decision_core");
    for n in sizes() {
        if n >= 50_000 {
            group.sample_size(20);
            group.measurement_time(Duration::from_secs(20));
        } else {
            group.sample_size(50);
            group.measurement_time(Duration::from_secs(10));
        }
        let seen_at = Utc::now();
        let states = hosts(n, seen_at);
        // Above 50,000 hosts only the table serves a request (copies of every state
        // per request are the path of a request bound to one cell).
        let copies = if n <= 50_000 {
            &[
                ("one_instance", 1usize, false),
                ("ten_instances", 10, false),
                ("ten_instances_reference", 10, true),
            ][..]
        } else {
            &[][..]
        };
        for &(name, instances, reference) in copies {
            group.bench_with_input(BenchmarkId::new(name, n), &states, |b, states| {
                let mut rng = StdRng::seed_from_u64(1);
                // Host states arrive owned from the state edge (`host_state_copy`
                // measures that copy); here it is setup, not decision.
                b.iter_batched(
                    || states.clone(),
                    |states| {
                        let request = ScheduleRequest {
                            spec: RequestSpec {
                                num_instances: instances as i64,
                                ..spec.clone()
                            },
                            instance_uuids: Some(
                                (0..instances).map(|k| format!("inst-{k}")).collect(),
                            ),
                            use_placement: true,
                            return_alternates: true,
                            // Services are judged up against the hosts' time, however
                            // long the benchmark runs (service_down_time is 60 s).
                            now: seen_at,
                        };
                        let outcome = runtime
                            .block_on(async {
                                if reference {
                                    reference::schedule(
                                        &scheduler,
                                        states,
                                        request,
                                        &mut AlwaysClaims,
                                        &mut rng,
                                    )
                                    .await
                                } else {
                                    scheduler
                                        .schedule(states, request, &mut AlwaysClaims, &mut rng)
                                        .await
                                }
                            })
                            .expect("placed");
                        assert_eq!(outcome.destinations.len(), instances);
                        outcome
                    },
                    BatchSize::LargeInput,
                );
            });
        }
        let table = HostTable::new(states.clone());
        let mut rows = RowCandidates::new(table.len());
        for (row, h) in states.iter().enumerate() {
            rows.insert(row, h.allocation_candidates.clone());
        }
        let request = |instances: usize| ScheduleRequest {
            spec: RequestSpec {
                num_instances: instances as i64,
                ..spec.clone()
            },
            instance_uuids: Some((0..instances).map(|k| format!("inst-{k}")).collect()),
            use_placement: true,
            return_alternates: true,
            now: seen_at,
        };
        // The first request builds the weigh index; the benchmark needs the index path.
        assert!(scheduler.decides_on_index(&table, &request(1)));
        for (name, instances) in [("table_one_instance", 1usize), ("table_ten_instances", 10)] {
            group.bench_with_input(BenchmarkId::new(name, n), &rows, |b, rows| {
                let mut rng = StdRng::seed_from_u64(1);
                b.iter_batched(
                    || rows.clone(),
                    |mut rows| {
                        let outcome = runtime
                            .block_on(scheduler.schedule_table(
                                &table,
                                &mut rows,
                                request(instances),
                                &mut AlwaysClaims,
                                &mut rng,
                            ))
                            .expect("placed");
                        assert_eq!(outcome.destinations.len(), instances);
                        // Freed outside the measurement, as the host states above.
                        (outcome, rows)
                    },
                    BatchSize::LargeInput,
                );
            });
        }
        group.bench_function(BenchmarkId::new("table_index_build", n), |b| {
            b.iter_batched(
                || HostTable::new(states.clone()),
                |fresh| {
                    assert!(scheduler.decides_on_index(&fresh, &request(1)));
                    fresh
                },
                BatchSize::LargeInput,
            );
        });
        group.bench_function(BenchmarkId::new("table_change_one_row", n), |b| {
            let mut changed = (**table.row(n / 2)).clone();
            changed.free_ram_mb -= 4096;
            changed.vcpus_used += 2;
            let changed = Arc::new(changed);
            b.iter(|| table.with_changes(vec![(n / 2, changed.clone())]));
        });
        // The cache holds states without candidates; Placement's are moved in after.
        let cached: Vec<HostState> = states
            .iter()
            .map(|h| HostState {
                allocation_candidates: Vec::new(),
                ..h.clone()
            })
            .collect();
        if n > 50_000 {
            continue;
        }
        group.bench_with_input(
            BenchmarkId::new("host_state_copy", n),
            &cached,
            |b, cached| b.iter(|| cached.clone()),
        );
    }
    group.finish();
}

/// The example Wasm plugin over hosts in 20 racks, and a plugin in an endless loop.
#[cfg(feature = "wasm")]
fn bench_plugins<M: Measurement>(c: &mut Criterion<M>) {
    use nova_scheduler::config::PluginFailure;
    use nova_scheduler::filters::{FilterRequest, HostFilter};
    use nova_scheduler::plugins::wasm::{WasmPlugins, WasmSetup};
    use nova_scheduler::weighers::HostWeigher;
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-wasm");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let endless = dir.join("endless.wat");
    std::fs::write(
        &endless,
        r#"(module (memory (export "memory") 64)
  (func (export "nsrs_abi_version") (result i32) i32.const 1)
  (func (export "nsrs_alloc") (param i32) (result i32) i32.const 1024)
  (func (export "nsrs_filter") (param i32 i32) (result i64) (loop $l (br $l)) i64.const 0))"#,
    )
    .expect("write the endless plugin");
    // Passes every host and names no columns: what carrying all of them costs.
    let every_column = dir.join("every_column.wat");
    std::fs::write(
        &every_column,
        r#"(module (memory (export "memory") 128)
  (func (export "nsrs_abi_version") (result i32) i32.const 1)
  (func (export "nsrs_alloc") (param i32) (result i32) i32.const 65536)
  (func (export "nsrs_filter") (param $at i32) (param $len i32) (result i64)
    (local $bytes i32)
    (local.set $bytes
      (i32.shr_u (i32.add (i32.load offset=8 (local.get $at)) (i32.const 7)) (i32.const 3)))
    (memory.fill (i32.const 0) (i32.const 0xff) (local.get $bytes))
    (i64.extend_i32_u (local.get $bytes))))"#,
    )
    .expect("write the every-column plugin");
    let plugins = WasmPlugins::load(&WasmSetup {
        paths: vec![wasm_example::example_module(), endless, every_column],
        failure: PluginFailure::FailOpen,
        deadline: Duration::from_millis(3),
        multipliers: Vec::new(),
    })
    .expect("load the plugins");
    let filter = plugins.filter("mycloud_rack").expect("the example filter");
    let weigher = plugins
        .weigher("mycloud_rack")
        .expect("the example weigher");
    let endless = plugins.filter("endless").expect("the endless filter");
    let every_column = plugins
        .filter("every_column")
        .expect("the every-column filter");
    let racks: Vec<Arc<Aggregate>> = (0..20)
        .map(|r| {
            Arc::new(Aggregate {
                id: 100 + r,
                name: format!("rack-r{r}"),
                metadata: [("rack".to_string(), format!("r{r}"))].into(),
                ..Default::default()
            })
        })
        .collect();
    let mut spec = captured_spec();
    spec.flavor
        .extra_specs
        .insert("mycloud:rack".into(), "r3".into());
    let req = FilterRequest {
        spec: &spec,
        now: Utc::now(),
        index: 0,
        is_rebuild: false,
    };
    let mut group = c.benchmark_group("decision_core");
    group.sample_size(50);
    group.measurement_time(Duration::from_secs(5));
    for n in sizes().into_iter().filter(|&n| n <= 10_000) {
        let mut states = hosts(n, Utc::now());
        for (i, h) in states.iter_mut().enumerate() {
            h.aggregates.push(Arc::clone(&racks[i % racks.len()]));
            h.num_instances = (i % 7) as i64;
        }
        let listed: Vec<&HostState> = states.iter().collect();
        assert_eq!(
            filter
                .filter_all(&listed, &req)
                .iter()
                .filter(|p| **p)
                .count(),
            n / 20,
            "one rack in 20 passes"
        );
        group.bench_function(BenchmarkId::new("plugin_wasm_filter", n), |b| {
            b.iter(|| filter.filter_all(&listed, &req))
        });
        group.bench_function(BenchmarkId::new("plugin_wasm_weigher", n), |b| {
            b.iter(|| weigher.weigh_all(&listed, &spec).expect("weights"))
        });
        assert!(every_column.filter_all(&listed, &req).iter().all(|p| *p));
        group.bench_function(BenchmarkId::new("plugin_wasm_every_column", n), |b| {
            b.iter(|| every_column.filter_all(&listed, &req))
        });
        if n == 1_000 {
            group.sample_size(10);
            group.bench_function(BenchmarkId::new("plugin_wasm_endless", n), |b| {
                b.iter(|| endless.filter_all(&listed, &req))
            });
            group.sample_size(50);
        }
    }
    group.finish();
}

/// An operator's Python filter class (`tests/plugins/mycloud_filters.py`'s
/// LicenceFilter, which reads the hosts' aggregate metadata) in the chain, and the
/// same class in nova-scheduler's own filter handler over host states nova already
/// holds. Only with `NSRS_VENV` naming a venv with nova.
#[cfg(feature = "python")]
fn bench_python<M: Measurement>(c: &mut Criterion<M>) {
    use nova_scheduler::filters::{CustomFilters, FilterRequest};
    use nova_scheduler::plugins::python::PythonFilterClasses;
    use nova_scheduler::plugins::PythonSetup;
    use std::os::unix::fs::PermissionsExt;
    let Some(venv) = std::env::var_os("NSRS_VENV") else {
        eprintln!("plugin_python_*: skipped (set NSRS_VENV to a venv with nova)");
        return;
    };
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("bench-python");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let python = dir.join("python");
    std::fs::write(
        &python,
        format!(
            "#!/bin/sh\nPYTHONPATH={}/tests/plugins exec {}/bin/python \"$@\"\n",
            env!("CARGO_MANIFEST_DIR"),
            std::path::Path::new(&venv).display()
        ),
    )
    .expect("write the interpreter");
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let conf = dir.join("nova.conf");
    std::fs::write(&conf, "[DEFAULT]\n").expect("write nova.conf");
    let classes = PythonFilterClasses::load(
        vec!["mycloud_filters.all_filters".into()],
        &PythonSetup {
            interpreter: Some(python),
            config_files: vec![conf],
            config_dirs: Vec::new(),
        },
    )
    .expect("the operator's classes load");
    let ours = classes
        .build("LicenceFilter")
        .expect("LicenceFilter")
        .expect("an instance");
    // The captured request asking for a licence, with its primitive kept (as the
    // daemon keeps it when an operator's class reads nova's object).
    let mut spec_obj = captured_spec_obj();
    spec_obj["nova_object.data"]["flavor"]["nova_object.data"]["extra_specs"]["mycloud:licence"] =
        json!("oracle");
    let mut spec = RequestSpec::from_primitive(&spec_obj).expect("spec");
    spec.primitive = Some(json!({ "spec_obj": spec_obj }).to_string().into());
    let req = FilterRequest {
        spec: &spec,
        now: Utc::now(),
        index: 0,
        is_rebuild: false,
    };
    let licensed = Arc::new(Aggregate {
        id: 50,
        name: "licensed".into(),
        metadata: [("licence".to_string(), "oracle".to_string())].into(),
        ..Default::default()
    });
    let mut group = c.benchmark_group("decision_core");
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(5));
    for n in sizes().into_iter().filter(|&n| n <= 1_000) {
        let mut states = hosts(n, Utc::now());
        for h in states.iter_mut().step_by(2) {
            h.aggregates.push(Arc::clone(&licensed));
        }
        let listed: Vec<&HostState> = states.iter().collect();
        let nova = classes
            .novas_handler("LicenceFilter", &listed, &req)
            .expect("nova's handler");
        let passing = ours
            .filter_all(&listed, &req)
            .iter()
            .filter(|p| **p)
            .count();
        assert_eq!(passing, n / 2, "half the hosts are licensed");
        assert_eq!(nova.run().expect("nova's handler runs"), passing);
        group.bench_function(BenchmarkId::new("plugin_python_filter", n), |b| {
            b.iter(|| ours.filter_all(&listed, &req))
        });
        group.bench_function(BenchmarkId::new("plugin_python_filter_in_nova", n), |b| {
            b.iter(|| nova.run().expect("nova's handler runs"))
        });
    }
    group.finish();
}

fn all<M: Measurement>(c: &mut Criterion<M>) {
    bench(c);
    #[cfg(feature = "wasm")]
    bench_plugins(c);
    #[cfg(feature = "python")]
    bench_python(c);
}

fn main() {
    cpu_time::run(all::<cpu_time::ThreadCpuTime>, all::<WallTime>);
}
