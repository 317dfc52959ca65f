// SPDX-License-Identifier: Apache-2.0
//! WebAssembly filters and weighers, configured as an operator configures them
//! (`[nova_scheduler_rs] wasm_plugins` in nova.conf, the module's name in
//! `enabled_filters` / `weight_classes`): the example plugin of
//! `examples/wasm-plugin` (built here for wasm32-unknown-unknown) decides and
//! explains, and hostile modules (an endless loop, a trap, a garbage answer, an
//! import, another ABI) are cut off or refused as `plugin_failure` says.

use crate::wasm_example::example_module;
use nova_scheduler::app::build_scheduler;
use nova_scheduler::config;
use nova_scheduler::filters::FilterRequest;
use nova_scheduler::model::{Aggregate, HostState, RequestSpec};
use nova_scheduler::observe::metrics::PluginFailureLabels;
use nova_scheduler::scheduler::Scheduler;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

fn dir(test: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("wasm-{test}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A scheduler from a nova.conf whose `[filter_scheduler]` and `[nova_scheduler_rs]`
/// carry `filter_scheduler` and `plugins`.
fn scheduler(dir: &Path, filter_scheduler: &str, plugins: &str) -> Result<Scheduler, String> {
    let conf = dir.join("nova.conf");
    std::fs::write(
        &conf,
        format!("[filter_scheduler]\n{filter_scheduler}\n[nova_scheduler_rs]\n{plugins}\n"),
    )
    .unwrap();
    let config = config::load(&[conf], &[]).map_err(|e| e.to_string())?;
    build_scheduler(&config).map_err(|e| e.to_string())
}

fn rack(id: i64, name: &str, hosts: &[&str]) -> Arc<Aggregate> {
    Arc::new(Aggregate {
        id,
        uuid: format!("agg-{id}"),
        name: format!("rack-{name}"),
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        metadata: [("rack".to_string(), name.to_string())].into(),
    })
}

/// h0..h2 in rack r1 (10 instances), h3, h4 in r2 (2), h5 in no rack.
fn cloud() -> Vec<HostState> {
    let r1 = rack(1, "r1", &["h0", "h1", "h2"]);
    let r2 = rack(2, "r2", &["h3", "h4"]);
    let instances = [5, 5, 0, 1, 1, 0];
    (0..6)
        .map(|i| {
            let name = format!("h{i}");
            HostState {
                host: name.as_str().into(),
                nodename: name.as_str().into(),
                num_instances: instances[i],
                free_ram_mb: 4096,
                total_usable_ram_mb: 4096,
                aggregates: match i {
                    0..=2 => vec![Arc::clone(&r1)],
                    3 | 4 => vec![Arc::clone(&r2)],
                    _ => Vec::new(),
                },
                ..Default::default()
            }
        })
        .collect()
}

fn asking_for_rack(rack: &str) -> RequestSpec {
    let mut spec = RequestSpec {
        num_instances: 1,
        ..Default::default()
    };
    spec.flavor
        .extra_specs
        .insert("mycloud:rack".into(), rack.into());
    spec
}

fn request(spec: &RequestSpec) -> FilterRequest<'_> {
    FilterRequest {
        spec,
        now: chrono::Utc::now(),
        index: 0,
        is_rebuild: false,
    }
}

fn names(hosts: &[HostState], kept: &[usize]) -> Vec<String> {
    kept.iter().map(|&i| hosts[i].host.to_string()).collect()
}

fn failures(plugin: &'static str, cause: &'static str) -> u64 {
    nova_scheduler::observe::metrics()
        .plugin_failures
        .get_or_create(&PluginFailureLabels { plugin, cause })
        .get()
}

#[test]
fn the_example_filter_keeps_the_asked_rack_and_explains_every_other_host() {
    let d = dir("example-filter");
    let module = example_module();
    let s = scheduler(
        &d,
        "enabled_filters = mycloud_rack\nweight_classes = mycloud_rack",
        &format!("wasm_plugins = {}", module.display()),
    )
    .unwrap();
    assert_eq!(s.filters.names(), vec!["mycloud_rack"]);
    assert_eq!(s.weighers.names(), vec!["mycloud_rack"]);
    let hosts = cloud();
    let all: Vec<usize> = (0..hosts.len()).collect();

    let spec = asking_for_rack("r1");
    let (kept, _) = s.filters.run(&hosts, &all, &request(&spec));
    assert_eq!(names(&hosts, &kept), vec!["h0", "h1", "h2"]);

    // A hint asks too; no rack asked: every host passes.
    let mut hinted = RequestSpec {
        num_instances: 1,
        ..Default::default()
    };
    hinted.scheduler_hints = Some([("rack".to_string(), vec!["r2".to_string()])].into());
    let (kept, _) = s.filters.run(&hosts, &all, &request(&hinted));
    assert_eq!(names(&hosts, &kept), vec!["h3", "h4"]);
    let anywhere = RequestSpec {
        num_instances: 1,
        ..Default::default()
    };
    let (kept, _) = s.filters.run(&hosts, &all, &request(&anywhere));
    assert_eq!(kept, all);

    // explain names the plugin and gives its reason per removed host.
    let e = s
        .explain(&hosts, &spec, chrono::Utc::now(), usize::MAX, 0)
        .unwrap();
    assert_eq!(e.filters.len(), 1);
    assert_eq!(e.filters[0].filter, "mycloud_rack");
    assert_eq!((e.filters[0].hosts_in, e.filters[0].hosts_out), (6, 3));
    let reasons: Vec<(String, String)> = e.filters[0]
        .removed
        .iter()
        .map(|r| (r.host.clone(), r.reason.clone()))
        .collect();
    assert_eq!(
        reasons,
        vec![
            (
                "h3".into(),
                "host is in rack r2; the request asks for rack r1".into()
            ),
            (
                "h4".into(),
                "host is in rack r2; the request asks for rack r1".into()
            ),
            (
                "h5".into(),
                "host is in no rack; the request asks for rack r1".into()
            ),
        ]
    );
    let emptied = s
        .explain(&hosts, &asking_for_rack("r9"), chrono::Utc::now(), 2, 0)
        .unwrap();
    assert_eq!(emptied.emptied_by(), Some("mycloud_rack"));
    assert_eq!(emptied.filters[0].removed.len(), 2);
    assert_eq!(emptied.filters[0].removed_not_listed, 4);
}

#[test]
fn the_example_weigher_spreads_over_the_racks_seen_all_at_once() {
    let d = dir("example-weigher");
    let module = example_module();
    let s = scheduler(
        &d,
        "enabled_filters =\nweight_classes = mycloud_rack",
        &format!(
            "wasm_plugins = {}\nplugin_weight_multipliers = mycloud_rack:2.0",
            module.display()
        ),
    )
    .unwrap();
    let hosts = cloud();
    let all: Vec<usize> = (0..hosts.len()).collect();
    let anywhere = RequestSpec {
        num_instances: 1,
        ..Default::default()
    };
    let weighed = s.weighers.weigh(&hosts, &all, &anywhere).unwrap();
    let order: Vec<usize> = weighed.iter().map(|w| w.index).collect();
    // No rack (load 0), then r2 (load 2), then r1 (load 10), each in list order.
    assert_eq!(order, vec![5, 3, 4, 0, 1, 2]);
    // nova's normalization over raw weights 0, -2, -10, times the multiplier 2.0.
    let weights: Vec<f64> = weighed.iter().map(|w| w.weight).collect();
    assert_eq!(weights, vec![2.0, 1.6, 1.6, 0.0, 0.0, 0.0]);
}

const HEAD: &str = r#"(memory (export "memory") 2)
  (func (export "nsrs_abi_version") (result i32) i32.const 1)
  (func (export "nsrs_alloc") (param i32) (result i32) i32.const 1024)"#;

fn module(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(format!("{name}.wat"));
    std::fs::write(&path, format!("(module\n  {HEAD}\n  {body})\n")).unwrap();
    path
}

#[test]
fn a_plugin_that_never_returns_is_cut_off_and_the_call_answered_as_plugin_failure_says() {
    let d = dir("endless");
    let filter = module(
        &d,
        "endless_filter",
        r#"(func (export "nsrs_filter") (param i32 i32) (result i64) (loop $l (br $l)) i64.const 0)"#,
    );
    let weigher = module(
        &d,
        "endless_weigher",
        r#"(func (export "nsrs_weigh") (param i32 i32) (result i64) (loop $l (br $l)) i64.const 0)"#,
    );
    let plugins = format!(
        "wasm_plugins = {},{}\nplugin_deadline_ms = 3",
        filter.display(),
        weigher.display()
    );
    let hosts = cloud();
    let all: Vec<usize> = (0..hosts.len()).collect();
    let spec = asking_for_rack("r1");
    let enabled = "enabled_filters = endless_filter\nweight_classes = endless_weigher";

    // fail_open: the call is answered, every host passes, weights are all equal.
    let open = scheduler(
        &d,
        enabled,
        &format!("{plugins}\nplugin_failure = fail_open"),
    )
    .unwrap();
    let before = failures("endless_filter", "deadline");
    let started = Instant::now();
    let (kept, _) = open.filters.run(&hosts, &all, &request(&spec));
    let took = started.elapsed();
    assert_eq!(kept, all);
    assert!(
        took.as_millis() < 1000,
        "the endless plugin held the call for {took:?}"
    );
    assert_eq!(failures("endless_filter", "deadline"), before + 1);
    let weighed = open.weighers.weigh(&hosts, &all, &spec).unwrap();
    assert!(weighed.iter().all(|w| w.weight == 0.0));
    // The instance that was cut off is not reused: the next call is cut off again
    // (a fresh instance), not poisoned.
    let (kept, _) = open.filters.run(&hosts, &all, &request(&spec));
    assert_eq!(kept, all);

    // fail_closed (the default): no host passes, and explain says which plugin and why;
    // the weigher fails the request with NoValidHost naming itself.
    let closed = scheduler(&d, enabled, &plugins).unwrap();
    let (kept, _) = closed.filters.run(&hosts, &all, &request(&spec));
    assert!(kept.is_empty());
    let e = closed
        .explain(&hosts, &spec, chrono::Utc::now(), 1, 0)
        .unwrap();
    assert_eq!(e.emptied_by(), Some("endless_filter"));
    let reason = &e.filters[0].removed[0].reason;
    assert!(
        reason.starts_with("the Wasm filter endless_filter failed: ran past its deadline of 3 ms"),
        "{reason}"
    );
    let err = closed.weighers.weigh(&hosts, &all, &spec).unwrap_err();
    assert_eq!(err.class, "NoValidHost");
    assert!(err.message.contains("endless_weigher"), "{}", err.message);
}

#[test]
fn a_trap_or_a_garbage_answer_is_a_failure_and_the_next_call_starts_afresh() {
    let d = dir("garbage");
    let trap = module(
        &d,
        "trapping",
        r#"(func (export "nsrs_filter") (param i32 i32) (result i64) unreachable)"#,
    );
    // Answers zero bytes (no bitmap) for any number of hosts.
    let empty = module(
        &d,
        "empty_answer",
        r#"(func (export "nsrs_filter") (param i32 i32) (result i64) i64.const 0)"#,
    );
    // Answers 8 bytes for any number of hosts, and past the end of its memory once
    // asked for a big list.
    let outside = module(
        &d,
        "outside",
        r#"(func (export "nsrs_weigh") (param i32 i32) (result i64) i64.const 0x7fffffff00000008)"#,
    );
    let s = scheduler(
        &d,
        "enabled_filters = trapping,empty_answer\nweight_classes = outside",
        &format!(
            "wasm_plugins = {}, {}, {}\nplugin_failure = fail_open",
            trap.display(),
            empty.display(),
            outside.display()
        ),
    )
    .unwrap();
    let hosts = cloud();
    let all: Vec<usize> = (0..hosts.len()).collect();
    let spec = asking_for_rack("r1");
    let (trap_before, empty_before, outside_before) = (
        failures("trapping", "trap"),
        failures("empty_answer", "garbage"),
        failures("outside", "garbage"),
    );
    for _ in 0..2 {
        let (kept, _) = s.filters.run(&hosts, &all, &request(&spec));
        assert_eq!(kept, all);
        s.weighers.weigh(&hosts, &all, &spec).unwrap();
    }
    assert_eq!(failures("trapping", "trap"), trap_before + 2);
    assert_eq!(failures("empty_answer", "garbage"), empty_before + 2);
    assert_eq!(failures("outside", "garbage"), outside_before + 2);
}

#[test]
fn a_plugin_that_names_its_columns_is_given_only_those() {
    let d = dir("columns");
    // Names column 16 (num_instances) only, and traps unless its input carries one
    // column, 16, whose rows are the hosts' instance counts.
    let narrow = module(
        &d,
        "narrow",
        r#"(data (i32.const 16) "\10\00\00\00")
  (func (export "nsrs_columns") (param i32) (result i64) i64.const 0x0000001000000004)
  (func (export "nsrs_filter") (param $at i32) (param $len i32) (result i64)
    (if (i32.ne (i32.load offset=24 (local.get $at)) (i32.const 1)) (then unreachable))
    (if (i32.ne (i32.load offset=28 (local.get $at)) (i32.const 16)) (then unreachable))
    (if (i64.ne
          (i64.load (i32.add (local.get $at) (i32.load offset=36 (local.get $at))))
          (i64.const 3))
      (then unreachable))
    (i32.store8 (i32.const 0) (i32.const 0xff))
    i64.const 1)"#,
    );
    let s = scheduler(
        &d,
        "enabled_filters = narrow",
        &format!("wasm_plugins = {}", narrow.display()),
    )
    .unwrap();
    let mut hosts = cloud();
    hosts[0].num_instances = 3;
    let all: Vec<usize> = (0..hosts.len()).collect();
    let spec = asking_for_rack("r1");
    let before = failures("narrow", "trap");
    let (kept, _) = s.filters.run(&hosts, &all, &request(&spec));
    assert_eq!(
        kept, all,
        "fail_closed: a trap would have rejected every host"
    );
    assert_eq!(failures("narrow", "trap"), before);
}

#[test]
fn modules_that_import_speak_another_abi_or_do_nothing_are_refused_at_startup() {
    let d = dir("refused");
    let cases = [
        (
            "importing",
            format!(
                "(module (import \"wasi_snapshot_preview1\" \"fd_write\" (func (param i32 i32 i32 i32) (result i32))) {HEAD} (func (export \"nsrs_filter\") (param i32 i32) (result i64) i64.const 0))"
            ),
            "imports wasi_snapshot_preview1.fd_write",
        ),
        (
            "abi_two",
            r#"(module (memory (export "memory") 1) (func (export "nsrs_abi_version") (result i32) i32.const 2) (func (export "nsrs_alloc") (param i32) (result i32) i32.const 0) (func (export "nsrs_filter") (param i32 i32) (result i64) i64.const 0))"#.to_string(),
            "written for plugin ABI 2",
        ),
        (
            "idle",
            format!("(module {HEAD})"),
            "exports neither nsrs_filter nor nsrs_weigh",
        ),
        ("broken", "(module (func $x (".to_string(), "broken.wat"),
        (
            "unknown_column",
            format!(
                r#"(module {HEAD} (data (i32.const 16) "\63\00\00\00") (func (export "nsrs_columns") (param i32) (result i64) i64.const 0x0000001000000004) (func (export "nsrs_filter") (param i32 i32) (result i64) i64.const 0))"#
            ),
            "nsrs_columns(0) asks for column 99, which ABI 1 does not define",
        ),
    ];
    for (name, text, expected) in cases {
        let path = d.join(format!("{name}.wat"));
        std::fs::write(&path, text).unwrap();
        let err = scheduler(
            &d,
            "enabled_filters = ComputeFilter",
            &format!("wasm_plugins = {}", path.display()),
        )
        .err()
        .unwrap_or_else(|| panic!("{name} was accepted"));
        assert!(
            err.contains("wasm_plugins") && err.contains(expected),
            "{name}: {err}"
        );
    }
    // A multiplier for a weigher that is not there is a mistake, said at startup.
    let err = scheduler(&d, "", "plugin_weight_multipliers = nothing:2.0")
        .err()
        .unwrap();
    assert!(
        err.contains("plugin_weight_multipliers names nothing"),
        "{err}"
    );
}

#[tokio::test]
async fn the_example_weigher_sees_each_instance_of_a_request_consumed() {
    use nova_scheduler::scheduler::ScheduleRequest;
    use rand::SeedableRng;
    let d = dir("spread");
    let s = scheduler(
        &d,
        "enabled_filters =\nweight_classes = mycloud_rack",
        &format!("wasm_plugins = {}", example_module().display()),
    )
    .unwrap();
    // Two empty racks of two hosts: four instances of one request go two to each.
    let r1 = rack(1, "r1", &["h0", "h1"]);
    let r2 = rack(2, "r2", &["h2", "h3"]);
    let hosts: Vec<HostState> = (0..4)
        .map(|i| {
            let name = format!("h{i}");
            HostState {
                host: name.as_str().into(),
                nodename: name.as_str().into(),
                free_ram_mb: 65536,
                total_usable_ram_mb: 65536,
                free_disk_mb: 1 << 20,
                total_usable_disk_gb: 1024,
                vcpus_total: 64,
                cpu_allocation_ratio: 1.0,
                ram_allocation_ratio: 1.0,
                disk_allocation_ratio: 1.0,
                aggregates: vec![Arc::clone(if i < 2 { &r1 } else { &r2 })],
                ..Default::default()
            }
        })
        .collect();
    let mut spec = RequestSpec {
        num_instances: 4,
        ..Default::default()
    };
    spec.flavor.memory_mb = 512;
    spec.flavor.vcpus = 1;
    let request = ScheduleRequest {
        spec,
        instance_uuids: None,
        use_placement: false,
        return_alternates: false,
        now: chrono::Utc::now(),
    };
    let mut claims = crate::random_core::Claims::default();
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let outcome = s
        .schedule(hosts, request, &mut claims, &mut rng)
        .await
        .expect("placed");
    let mut per_rack = [0, 0];
    for destination in &outcome.destinations {
        per_rack[destination[0].host / 2] += 1;
    }
    assert_eq!(per_rack, [2, 2], "{:?}", outcome.destinations);
}
