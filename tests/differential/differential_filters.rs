// SPDX-License-Identifier: Apache-2.0
//! Differential test: our host filters against nova 34's own filter classes.
//!
//! A seeded generator makes random host states and request specs per filter; each
//! case is evaluated in-process by our filter and by nova's class in ONE long-lived
//! Python process (`tests/oracle/filters_oracle.py`, run with the venv's python),
//! fed as JSON lines through a pipe. Any disagreement fails the test and the first
//! disagreeing cases are printed as JSON (feed one to the oracle by hand:
//! `echo '<case>' | OS_NOVA_DISABLE_EVENTLET_PATCHING=true $VENV/bin/python tests/oracle/filters_oracle.py`).
//!
//! Outcomes are three-way: pass, fail, or "nova raises `<ExceptionClass>`" (nova's
//! filters raise on some inputs and the exception ends the whole request).
//! [`Compare::Exact`] demands the same outcome, exception class included (for
//! filters with a `check() -> Result<bool, PyError>`); [`Compare::HostLevel`] counts a
//! raise as a fail (for filters that only have `host_passes`). Each target also
//! states the minimum share of pass / fail / raise answers nova must give over its
//! cases, so a generator that stops producing interesting cases fails the test
//! instead of passing vacuously. The `run_filter_once_per_request` and
//! `RUN_ON_REBUILD` class attributes are compared too.
//!
//! Running:
//! ```sh
//! cargo test --release --test differential differential_filters                # default seed and counts
//! NSRS_DIFF_SEED=7 NSRS_DIFF_CASES=1000000 cargo test --release --test differential differential_filters -- --nocapture
//! NSRS_DIFF_FILTERS=JsonFilter cargo test --release --test differential differential_filters   # some filters only
//! NSRS_DIFF_VENV=$(scripts/wayback.sh venv 2024.1) NSRS_DIFF_RELEASE=2024.1 cargo test --release --test differential differential_filters   # an older release's own classes
//! ```
//! `NSRS_DIFF_CASES` replaces every target's case count. The venv is found as the
//! other integration tests find it (`NSRS_VENV`, else the cache `scripts/stack.sh venv`
//! fills); without one the test fails and says so.
//!
//! Adding a filter:
//! 1. write `fn gen_<x>(rng: &mut StdRng) -> Case` building a [`Case`]: a full
//!    [`HostState`] (start from [`gen_host`]), a [`RequestSpec`], and, if the filter
//!    reads options, both `oracle_config` (`{"<group>": {"<option>": value}}`, applied
//!    with `CONF.set_override` in the oracle) and the same values in `filter_config`;
//! 2. add a [`Target`] to [`targets`] with nova's class name, a case count, the
//!    generator, an evaluator ([`via_registry`] runs the registered filter through the
//!    chain; a filter with a `check` returning `Result<bool, PyError>` can be compared
//!    exactly, see [`eval_json`]), the [`Compare`] mode and the minimum shares;
//! 3. if the filter reads something [`host_json`] / [`spec_json`] do not send yet
//!    (image properties, instance group, metrics, ...), add it there and build the
//!    matching nova object in `build_host` / `build_spec` of the oracle.
//!
//! The cases are built as our model structs and serialized for nova with nova's
//! attribute names, so both sides always see the same host.

use chrono::{DateTime, Duration, TimeZone, Utc};
use nova_scheduler::filters::aggregate_image_properties_isolation::AggregateImagePropertiesIsolation;
use nova_scheduler::filters::aggregate_instance_extra_specs_filter::AggregateInstanceExtraSpecsFilter;
use nova_scheduler::filters::aggregate_io_ops_filter::AggregateIoOpsFilter;
use nova_scheduler::filters::aggregate_multi_tenancy_isolation::AggregateMultiTenancyIsolation;
use nova_scheduler::filters::aggregate_num_instances_filter::AggregateNumInstancesFilter;
use nova_scheduler::filters::aggregate_type_affinity_filter::AggregateTypeAffinityFilter;
use nova_scheduler::filters::compute_capabilities_filter::{
    get_capabilities, ComputeCapabilitiesFilter,
};
use nova_scheduler::filters::different_host_filter::DifferentHostFilter;
use nova_scheduler::filters::host_attrs::LockName;
use nova_scheduler::filters::image_properties_filter::ImagePropertiesFilter;
use nova_scheduler::filters::io_ops_filter::IoOpsFilter;
use nova_scheduler::filters::isolated_hosts_filter::IsolatedHostsFilter;
use nova_scheduler::filters::json_filter::JsonFilter;
use nova_scheduler::filters::metrics_filter::MetricsFilter;
use nova_scheduler::filters::num_instances_filter::NumInstancesFilter;
use nova_scheduler::filters::same_host_filter::SameHostFilter;
use nova_scheduler::filters::server_group_affinity_filter::ServerGroupAffinityFilter;
use nova_scheduler::filters::server_group_anti_affinity_filter::ServerGroupAntiAffinityFilter;
use nova_scheduler::filters::simple_cidr_affinity_filter::{
    Netaddr, SimpleCIDRAffinityFilter, ADDR_FORMAT_ERROR,
};
use nova_scheduler::filters::{build_chain, FilterConfig, FilterRequest, HostFilter};
use nova_scheduler::model::{
    Aggregate, Flavor, HostState, ImageMeta, InstanceGroup, RequestSpec, ServiceInfo,
};
use nova_scheduler::py::value::py_str;
use nova_scheduler::py::PyError;
use nova_scheduler::release::{Behaviour, NovaSeries};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{RngExt, SeedableRng};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

const DEFAULT_SEED: u64 = 20_260_034;

// ---------------------------------------------------------------------------------
// Framework
// ---------------------------------------------------------------------------------

/// What a filter did with one case.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Pass,
    Fail,
    /// nova raised this exception class (ValueError, TypeError, KeyError, ...).
    Raise(String),
}

impl Outcome {
    fn parse(line: &str) -> Result<Outcome, String> {
        match line {
            "true" => Ok(Outcome::Pass),
            "false" => Ok(Outcome::Fail),
            l if l.starts_with("raise:") => Ok(Outcome::Raise(l["raise:".len()..].to_string())),
            other => Err(other.to_string()),
        }
    }

    fn from_check(r: Result<bool, PyError>) -> Outcome {
        match r {
            Ok(true) => Outcome::Pass,
            Ok(false) => Outcome::Fail,
            Err(e) => Outcome::Raise(e.kind.name().to_string()),
        }
    }

    fn host_level(&self) -> bool {
        *self == Outcome::Pass
    }

    fn slot(&self) -> usize {
        match self {
            Outcome::Pass => 0,
            Outcome::Fail => 1,
            Outcome::Raise(_) => 2,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
#[allow(dead_code)] // HostLevel: for filters without a check()
enum Compare {
    /// Same outcome, exception class included.
    Exact,
    /// Only pass vs not pass (a nova exception counts as a fail).
    HostLevel,
}

/// One generated input: what both sides evaluate.
struct Case {
    host: HostState,
    spec: RequestSpec,
    /// `{"<group>": {"<option>": value}}` for the oracle.
    oracle_config: Map<String, Value>,
    /// The same options for our side.
    filter_config: FilterConfig,
}

impl Case {
    fn new(host: HostState, spec: RequestSpec) -> Case {
        Case {
            host,
            spec,
            oracle_config: Map::new(),
            filter_config: FilterConfig {
                release: release(),
                ..FilterConfig::default()
            },
        }
    }
}

/// The nova release our filters are built as: `NSRS_DIFF_RELEASE` (a series, run
/// against that release's own classes in the venv `NSRS_DIFF_VENV`), else the newest.
fn release() -> NovaSeries {
    static RELEASE: std::sync::OnceLock<NovaSeries> = std::sync::OnceLock::new();
    *RELEASE.get_or_init(|| match std::env::var("NSRS_DIFF_RELEASE") {
        Ok(name) => NovaSeries::parse(&name)
            .unwrap_or_else(|| panic!("NSRS_DIFF_RELEASE={name} is no series known here")),
        Err(_) => NovaSeries::NEWEST,
    })
}

struct Target {
    /// nova's class name (also our registry key).
    filter: &'static str,
    /// Default number of cases (`NSRS_DIFF_CASES` overrides).
    cases: usize,
    generate: fn(&mut StdRng) -> Case,
    evaluate: fn(&Case) -> Outcome,
    compare: Compare,
    /// Minimum share of nova's pass / fail / raise answers over the cases.
    min_share: [f64; 3],
}

/// The filters under differential test.
fn targets() -> Vec<Target> {
    vec![
        Target {
            filter: "ComputeCapabilitiesFilter",
            cases: 20_000,
            generate: gen_compute_capabilities,
            evaluate: eval_compute_capabilities,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.01],
        },
        Target {
            filter: "AggregateInstanceExtraSpecsFilter",
            cases: 20_000,
            generate: gen_aggregate_instance_extra_specs,
            evaluate: eval_aggregate_instance_extra_specs,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.01],
        },
        Target {
            filter: "JsonFilter",
            cases: 30_000,
            generate: gen_json,
            evaluate: eval_json,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.05],
        },
        Target {
            filter: "ImagePropertiesFilter",
            cases: 20_000,
            generate: gen_image_properties,
            evaluate: eval_image_properties,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.005],
        },
        Target {
            filter: "AggregateImagePropertiesIsolation",
            cases: 20_000,
            generate: gen_aggregate_image_properties_isolation,
            evaluate: eval_aggregate_image_properties_isolation,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.0],
        },
        Target {
            filter: "ServerGroupAntiAffinityFilter",
            cases: 10_000,
            generate: gen_server_group_anti_affinity,
            evaluate: eval_server_group_anti_affinity,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.01],
        },
        Target {
            filter: "ServerGroupAffinityFilter",
            cases: 10_000,
            generate: gen_server_group_affinity,
            evaluate: eval_server_group_affinity,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.0],
        },
        Target {
            filter: "SameHostFilter",
            cases: 10_000,
            generate: gen_same_host,
            evaluate: eval_same_host,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.0],
        },
        Target {
            filter: "DifferentHostFilter",
            cases: 10_000,
            generate: gen_different_host,
            evaluate: eval_different_host,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.0],
        },
        Target {
            filter: "SimpleCIDRAffinityFilter",
            cases: 20_000,
            generate: gen_simple_cidr,
            evaluate: eval_simple_cidr,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.05],
        },
        Target {
            filter: "NumInstancesFilter",
            cases: 10_000,
            generate: gen_num_instances,
            evaluate: eval_num_instances,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.0],
        },
        Target {
            filter: "AggregateNumInstancesFilter",
            cases: 10_000,
            generate: gen_aggregate_num_instances,
            evaluate: eval_aggregate_num_instances,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.0],
        },
        Target {
            filter: "IoOpsFilter",
            cases: 10_000,
            generate: gen_io_ops,
            evaluate: eval_io_ops,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.0],
        },
        Target {
            filter: "AggregateIoOpsFilter",
            cases: 10_000,
            generate: gen_aggregate_io_ops,
            evaluate: eval_aggregate_io_ops,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.0],
        },
        Target {
            filter: "IsolatedHostsFilter",
            cases: 10_000,
            generate: gen_isolated_hosts,
            evaluate: eval_isolated_hosts,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.0],
        },
        Target {
            filter: "AggregateTypeAffinityFilter",
            cases: 10_000,
            generate: gen_aggregate_type_affinity,
            evaluate: eval_aggregate_type_affinity,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.0],
        },
        Target {
            filter: "AggregateMultiTenancyIsolation",
            cases: 10_000,
            generate: gen_aggregate_multi_tenancy,
            evaluate: eval_aggregate_multi_tenancy,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.0],
        },
        Target {
            filter: "MetricsFilter",
            cases: 10_000,
            generate: gen_metrics,
            evaluate: eval_metrics,
            compare: Compare::Exact,
            min_share: [0.10, 0.10, 0.0],
        },
    ]
}

/// Runs the registered filter through a one-filter chain on one host.
#[allow(dead_code)]
fn via_registry(filter: &str, case: &Case) -> Outcome {
    let chain = build_chain(&[filter.to_string()], &case.filter_config)
        .unwrap_or_else(|e| panic!("{filter} is not registered: {e}"));
    let req = FilterRequest {
        spec: &case.spec,
        now: Utc::now(),
        index: 0,
        is_rebuild: case.spec.is_rebuild(),
    };
    let hosts = [case.host.clone()];
    let (kept, _) = chain.run(&hosts, &[0], &req);
    if kept.is_empty() {
        Outcome::Fail
    } else {
        Outcome::Pass
    }
}

/// Our class attributes, from the registered filter: `(once_per_request, run_on_rebuild)`.
fn our_flags(filter: &str) -> (bool, bool) {
    let f: Box<dyn HostFilter> = match filter {
        "ComputeCapabilitiesFilter" => Box::new(ComputeCapabilitiesFilter::default()),
        "AggregateInstanceExtraSpecsFilter" => Box::new(AggregateInstanceExtraSpecsFilter),
        "JsonFilter" => Box::new(JsonFilter::new()),
        "ImagePropertiesFilter" => Box::new(ImagePropertiesFilter {
            default_architecture: None,
            distutils_predicate: false,
        }),
        "AggregateImagePropertiesIsolation" => {
            Box::new(AggregateImagePropertiesIsolation::new(None, ".".into()))
        }
        "ServerGroupAntiAffinityFilter" => Box::new(ServerGroupAntiAffinityFilter),
        "ServerGroupAffinityFilter" => Box::new(ServerGroupAffinityFilter),
        "SameHostFilter" => Box::new(SameHostFilter),
        "DifferentHostFilter" => Box::new(DifferentHostFilter),
        "SimpleCIDRAffinityFilter" => Box::new(SimpleCIDRAffinityFilter::default()),
        "NumInstancesFilter" => Box::new(NumInstancesFilter {
            max_instances_per_host: 50,
        }),
        "AggregateNumInstancesFilter" => Box::new(AggregateNumInstancesFilter {
            max_instances_per_host: 50,
        }),
        "IoOpsFilter" => Box::new(IoOpsFilter {
            max_io_ops_per_host: 8,
        }),
        "AggregateIoOpsFilter" => Box::new(AggregateIoOpsFilter {
            max_io_ops_per_host: 8,
        }),
        "IsolatedHostsFilter" => Box::new(IsolatedHostsFilter {
            isolated_images: vec![],
            isolated_hosts: vec![],
            restrict_isolated_hosts_to_isolated_images: true,
        }),
        "AggregateTypeAffinityFilter" => Box::new(AggregateTypeAffinityFilter),
        "AggregateMultiTenancyIsolation" => Box::new(AggregateMultiTenancyIsolation::default()),
        "MetricsFilter" => Box::new(MetricsFilter::new(&[])),
        other => panic!("add {other} to our_flags"),
    };
    (f.once_per_request(), f.run_on_rebuild())
}

fn env_usize(name: &str) -> Option<usize> {
    std::env::var(name).ok().map(|v| {
        v.replace('_', "")
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v} is not a number"))
    })
}

fn fnv(name: &str) -> u64 {
    name.bytes().fold(0xcbf29ce484222325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}

#[test]
fn filters_agree_with_nova() {
    // An older release's own classes: its venv (scripts/wayback.sh venv RELEASE).
    let venv = std::env::var_os("NSRS_DIFF_VENV")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(crate::venv::find);
    let seed = std::env::var("NSRS_DIFF_SEED")
        .map(|s| s.parse::<u64>().expect("NSRS_DIFF_SEED must be a u64"))
        .unwrap_or(DEFAULT_SEED);
    let count_override = env_usize("NSRS_DIFF_CASES");
    let only: Option<Vec<String>> = std::env::var("NSRS_DIFF_FILTERS")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let targets: Vec<Target> = targets()
        .into_iter()
        .filter(|t| {
            only.as_ref()
                .is_none_or(|o| o.iter().any(|n| n == t.filter))
        })
        .collect();
    assert!(!targets.is_empty(), "NSRS_DIFF_FILTERS selects no filter");

    let started = Instant::now();
    let mut oracle = Command::new(venv.join("bin/python"))
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/oracle/filters_oracle.py"
        ))
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start the nova oracle with {}: {e}", venv.display()));
    let mut stdin = oracle.stdin.take().expect("stdin");
    let mut answers = BufReader::new(oracle.stdout.take().expect("stdout")).lines();
    let mut ask = |line: &str| -> String {
        writeln!(stdin, "{line}").expect("write to oracle");
        stdin.flush().expect("flush");
        answers
            .next()
            .expect("the oracle exited early")
            .expect("read from oracle")
    };

    // Class attributes first (one round trip each).
    for t in &targets {
        let meta: Value = serde_json::from_str(&ask(&json!({"meta": t.filter}).to_string()))
            .unwrap_or_else(|e| panic!("oracle meta answer for {}: {e}", t.filter));
        let ours = our_flags(t.filter);
        assert_eq!(
            (
                meta["run_filter_once_per_request"].as_bool(),
                meta["RUN_ON_REBUILD"].as_bool()
            ),
            (Some(ours.0), Some(ours.1)),
            "{}: (run_filter_once_per_request, RUN_ON_REBUILD) differ from nova",
            t.filter
        );
    }

    // Stream the cases to the oracle while generating them (a writer thread feeds its
    // stdin, a reader thread collects its answers), evaluating ours along the way.
    // Cases are not kept: a disagreeing one is regenerated from the seed to print it.
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
    let mut ours_all: Vec<(usize, usize, Outcome)> = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        let n = count_override.unwrap_or(t.cases);
        let mut rng = StdRng::seed_from_u64(seed ^ fnv(t.filter));
        for i in 0..n {
            let case = (t.generate)(&mut rng);
            tx.send(case_json(t.filter, &case).to_string())
                .expect("writer thread");
            ours_all.push((ti, i, (t.evaluate)(&case)));
        }
    }
    let generated = started.elapsed();
    drop(tx);
    writer.join().expect("writer thread");
    let answers = reader.join().expect("reader thread");
    let status = oracle.wait().expect("oracle exit");
    assert!(status.success(), "the oracle exited with {status}");
    assert_eq!(
        answers.len(),
        ours_all.len(),
        "the oracle answered {} of {} cases",
        answers.len(),
        ours_all.len()
    );
    let regenerate = |t: &Target, index: usize| -> String {
        let mut rng = StdRng::seed_from_u64(seed ^ fnv(t.filter));
        let mut case = (t.generate)(&mut rng);
        for _ in 0..index {
            case = (t.generate)(&mut rng);
        }
        case_json(t.filter, &case).to_string()
    };

    let mut shares = vec![[0usize; 3]; targets.len()];
    let mut totals = vec![0usize; targets.len()];
    let mut disagreements: Vec<Vec<String>> = vec![Vec::new(); targets.len()];
    let mut disagree_count = vec![0usize; targets.len()];
    for ((ti, index, ours), answer) in ours_all.iter().zip(&answers) {
        let t = &targets[*ti];
        let nova = Outcome::parse(answer).unwrap_or_else(|e| {
            panic!(
                "the oracle could not evaluate a case ({e}):\n{}",
                regenerate(t, *index)
            )
        });
        let ours = ours.clone();
        totals[*ti] += 1;
        shares[*ti][nova.slot()] += 1;
        let agree = match t.compare {
            Compare::Exact => ours == nova,
            Compare::HostLevel => ours.host_level() == nova.host_level(),
        };
        if !agree {
            disagree_count[*ti] += 1;
            if disagreements[*ti].len() < 5 {
                disagreements[*ti].push(format!(
                    "nova: {nova:?}, ours: {ours:?}\n  {}",
                    regenerate(t, *index)
                ));
            }
        }
    }

    let elapsed = started.elapsed();
    println!(
        "differential filters: seed {seed}, {} cases in {:.1?} (generation {:.1?})",
        ours_all.len(),
        elapsed,
        generated
    );
    let mut failures = Vec::new();
    for (ti, t) in targets.iter().enumerate() {
        let n = totals[ti].max(1) as f64;
        let [p, f, r] = shares[ti];
        println!(
            "  {:<36} {:>8} cases: nova pass {:>5.1}%  fail {:>5.1}%  raise {:>5.1}%  disagreements {}",
            t.filter,
            totals[ti],
            100.0 * p as f64 / n,
            100.0 * f as f64 / n,
            100.0 * r as f64 / n,
            disagree_count[ti]
        );
        if disagree_count[ti] > 0 {
            failures.push(format!(
                "{}: {} of {} cases disagree with nova; first ones:\n{}",
                t.filter,
                disagree_count[ti],
                totals[ti],
                disagreements[ti].join("\n")
            ));
        }
        if totals[ti] >= 1000 {
            for (slot, name) in ["pass", "fail", "raise"].iter().enumerate() {
                let share = shares[ti][slot] as f64 / n;
                if share < t.min_share[slot] {
                    failures.push(format!(
                        "{}: nova answered '{name}' for only {:.2}% of the cases (at least {:.2}% expected): the generator no longer covers it",
                        t.filter,
                        100.0 * share,
                        100.0 * t.min_share[slot]
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

// ---------------------------------------------------------------------------------
// Serialization for the oracle (nova's attribute names)
// ---------------------------------------------------------------------------------

fn case_json(filter: &str, case: &Case) -> Value {
    json!({
        "filter": filter,
        "host": host_json(&case.host),
        "spec": spec_json(&case.spec),
        "config": Value::Object(case.oracle_config.clone()),
    })
}

fn dt_json(t: &Option<DateTime<Utc>>) -> Value {
    t.map_or(Value::Null, |t| {
        Value::String(t.format("%Y-%m-%dT%H:%M:%S%.6f+00:00").to_string())
    })
}

/// Every HostState attribute nova has, as nova holds it after an update.
fn host_json(h: &HostState) -> Value {
    let s = &h.service;
    json!({
        "host": &*h.host,
        "nodename": &*h.nodename,
        "cell_uuid": &*h.cell_uuid,
        "uuid": h.uuid.as_deref(),
        "total_usable_ram_mb": h.total_usable_ram_mb,
        "total_usable_disk_gb": h.total_usable_disk_gb,
        "disk_mb_used": h.disk_mb_used,
        "free_ram_mb": h.free_ram_mb,
        "free_disk_mb": h.free_disk_mb,
        "vcpus_total": h.vcpus_total,
        "vcpus_used": h.vcpus_used,
        "num_instances": h.num_instances,
        "num_io_ops": h.num_io_ops,
        "failed_builds": h.failed_builds,
        "host_ip": h.host_ip.as_deref(),
        "hypervisor_type": h.hypervisor_type.as_deref(),
        "hypervisor_version": h.hypervisor_version,
        "hypervisor_hostname": h.hypervisor_hostname.as_deref(),
        "cpu_info": h.cpu_info.as_deref(),
        "metrics": h.metrics.as_deref(),
        "supported_instances": &*h.supported_instances,
        "cpu_allocation_ratio": h.cpu_allocation_ratio,
        "ram_allocation_ratio": h.ram_allocation_ratio,
        "disk_allocation_ratio": h.disk_allocation_ratio,
        "stats": h.stats.iter().map(|(k, v)| (&**k, &**v)).collect::<BTreeMap<_, _>>(),
        "service": {
            "id": s.id, "host": &*s.host, "binary": "nova-compute", "topic": "compute",
            "disabled": s.disabled, "disabled_reason": s.disabled_reason.as_deref(),
            "forced_down": s.forced_down, "last_seen_up": dt_json(&s.last_seen_up),
            "version": s.version, "created_at": dt_json(&s.created_at),
            "updated_at": dt_json(&s.updated_at), "deleted_at": null, "deleted": false,
        },
        "aggregates": h.aggregates.iter().map(|a| json!({
            "id": a.id, "uuid": a.uuid, "name": a.name,
            "hosts": a.hosts, "metadata": a.metadata,
        })).collect::<Vec<_>>(),
        "instances": h.instances.iter().collect::<Vec<_>>(),
        "limits": h.limits,
        "allocation_candidates": h.allocation_candidates,
        "updated": dt_json(&h.updated),
    })
}

fn spec_json(s: &RequestSpec) -> Value {
    let mut out = json!({
        "flavor": {
            "name": s.flavor.name.clone().unwrap_or_else(|| "flavor".into()),
            "memory_mb": s.flavor.memory_mb,
            "vcpus": s.flavor.vcpus,
            "root_gb": s.flavor.root_gb,
            "ephemeral_gb": s.flavor.ephemeral_gb,
            "swap": s.flavor.swap,
            "extra_specs": s.flavor.extra_specs,
        },
        "num_instances": s.num_instances.max(1),
        "scheduler_hints": s.scheduler_hints,
    });
    for (k, v) in [
        ("project_id", &s.project_id),
        ("user_id", &s.user_id),
        ("instance_uuid", &s.instance_uuid),
    ] {
        if let Some(v) = v {
            out[k] = json!(v);
        }
    }
    // The image as nova's RPC primitive carries it (the oracle deserializes it with
    // ImageMeta.obj_from_primitive, so nova's typed fields coerce the values); null
    // when there is none (a RequestSpec always has the field set).
    out["image"] = s.image.as_ref().map_or(Value::Null, |image| {
        let mut i = json!({"properties": image.properties});
        if let Some(id) = &image.id {
            i["id"] = json!(id);
        }
        i
    });
    out["instance_group"] = s.instance_group.as_ref().map_or(Value::Null, |g| {
        let mut group = json!({
            "policies": g.policies, "members": g.members, "hosts": g.hosts, "rules": g.rules,
        });
        for (k, v) in [("uuid", &g.uuid), ("policy", &g.policy)] {
            if let Some(v) = v {
                group[k] = json!(v);
            }
        }
        group
    });
    out
}

// ---------------------------------------------------------------------------------
// Generators: shared pieces
// ---------------------------------------------------------------------------------

fn pick<T: Clone>(rng: &mut StdRng, items: &[T]) -> T {
    items.choose(rng).expect("non-empty").clone()
}

fn chance(rng: &mut StdRng, p: f64) -> bool {
    rng.random_bool(p)
}

fn some_datetime(rng: &mut StdRng) -> Option<DateTime<Utc>> {
    if chance(rng, 0.15) {
        return None;
    }
    let base = Utc.with_ymd_and_hms(2026, 11, 21, 16, 0, 0).single()?;
    let micros = if chance(rng, 0.5) {
        0
    } else {
        rng.random_range(0..1_000_000)
    };
    Some(base + Duration::seconds(rng.random_range(-600..600)) + Duration::microseconds(micros))
}

const UUIDS: [&str; 4] = [
    "0c6d0fd6-4ae3-4a4c-8b43-7b3f1a5c8e01",
    "1f2e3d4c-5b6a-4978-8a1b-2c3d4e5f6a7b",
    "9a8b7c6d-5e4f-4321-b0a9-8f7e6d5c4b3a",
    "ffffffff-0000-4000-8000-000000000000",
];

/// Text values that exercise Python's float(), JSON decoding and string compares.
const TEXT_VALUES: &[&str] = &[
    "1",
    "2",
    "10",
    "0",
    "-3",
    "2.5",
    " 3 ",
    "1_000",
    "1__0",
    "nan",
    "inf",
    "-Infinity",
    "1e3",
    "1E-2",
    ".5",
    "5.",
    "abc",
    "",
    " ",
    "Intel",
    "True",
    "None",
    "١٢",
    "１２",
    "\u{3000}7\u{a0}",
    "\u{1c}7",
    "{\"a\": 1, \"b\": {\"aa\": 2}}",
    "{\"a\": \"{\\\"b\\\": [1, 2.50]}\"}",
    "{\"a\": {\"k\": 1, \"z\": [1e15, 1e16, 0.0001, 1e-05], \"k\": \"it's\"}}",
    "{\"a\": [\"say \\\"hi\\\"\", \"it's\", \"\\u00a0\\u0085\\u00e9\\ud800\\t\\\\\"]}",
    "[1, 2]",
    "\"str\"",
    "{bad json",
    "{\"k\": NaN, \"k2\": 1e400}",
    "it's",
    "say \"hi\"",
    "tab\there",
    "é",
    "x,y",
];

fn gen_text(rng: &mut StdRng) -> String {
    match rng.random_range(0..10) {
        0 => rng.random_range(-100..5000).to_string(),
        1 => format!("{:.2}", rng.random_range(-10.0..100.0)),
        _ => pick(rng, TEXT_VALUES).to_string(),
    }
}

fn gen_stats(rng: &mut StdRng) -> BTreeMap<String, String> {
    const KEYS: &[&str] = &[
        "num_instances",
        "io_workload",
        "opt1",
        "opt2",
        "gpu",
        "x:y",
        "hypervisor_type",
        "cpu_info",
        "j",
        "",
        "ÿ",
        "num_proj_abc",
        "capabilities",
    ];
    let n = rng.random_range(0..6);
    (0..n)
        .map(|_| (pick(rng, KEYS).to_string(), gen_text(rng)))
        .collect()
}

/// A small JSON text emitter that can write what Python's json accepts and serde
/// would not (NaN, Infinity, huge ints, lone surrogate escapes, duplicate keys).
#[derive(Clone)]
enum J {
    Raw(String),
    Str(String),
    List(Vec<J>),
    Obj(Vec<(String, J)>),
}

fn ws(rng: &mut StdRng) -> &'static str {
    pick(rng, &["", "", " ", " ", "\n", "\t", "  ", "\r\n"])
}

fn esc(s: &str, rng: &mut StdRng, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if !c.is_ascii() && chance(rng, 0.5) => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            '/' if chance(rng, 0.5) => out.push_str("\\/"),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn emit(j: &J, rng: &mut StdRng, out: &mut String) {
    match j {
        J::Raw(r) => out.push_str(r),
        J::Str(s) => esc(s, rng, out),
        J::List(items) => {
            out.push('[');
            out.push_str(ws(rng));
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                    out.push_str(ws(rng));
                }
                emit(item, rng, out);
                out.push_str(ws(rng));
            }
            out.push(']');
        }
        J::Obj(items) => {
            out.push('{');
            out.push_str(ws(rng));
            for (i, (k, v)) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                    out.push_str(ws(rng));
                }
                esc(k, rng, out);
                out.push_str(ws(rng));
                out.push(':');
                out.push_str(ws(rng));
                emit(v, rng, out);
                out.push_str(ws(rng));
            }
            out.push('}');
        }
    }
}

fn to_text(j: &J, rng: &mut StdRng) -> String {
    let mut out = String::new();
    out.push_str(ws(rng));
    emit(j, rng, &mut out);
    out.push_str(ws(rng));
    out
}

const NUMBER_TOKENS: &[&str] = &[
    "0",
    "-0",
    "1",
    "42",
    "-7",
    "2.5",
    "1.0",
    "-0.0",
    "1e16",
    "1E400",
    "-1e400",
    "1e-7",
    "0.1",
    "3.0000000000000004",
    "NaN",
    "Infinity",
    "-Infinity",
    "123456789012345678901234567890",
    "-99999999999999999999",
    "9223372036854775807",
    "9223372036854775808",
    "9007199254740993",
];

fn gen_cpu_info(rng: &mut StdRng) -> Option<String> {
    match rng.random_range(0..12) {
        0 => None,
        1 => Some(
            pick(
                rng,
                &[
                    "cpu_info",
                    " { } ",
                    "{",
                    "[1, 2]",
                    "\"x\"",
                    "42",
                    "",
                    "{\"a\": 1,}",
                    "\u{feff}{}",
                    "{\"vendor\": \"Intel\"} x",
                    "{'vendor': 'Intel'}",
                    "{\"vendor\": \"\\ud800\"}",
                ],
            )
            .to_string(),
        ),
        _ => {
            let mut items: Vec<(String, J)> = Vec::new();
            let feats = [
                "aes", "mmx", "sse", "avx", "vmx", "ssse3", "sse4.2", "lahf_lm",
            ];
            let mut f: Vec<J> = feats
                .iter()
                .filter(|_| chance(rng, 0.5))
                .map(|s| J::Str(s.to_string()))
                .collect();
            if chance(rng, 0.1) {
                f.push(J::Raw("1".into()));
            }
            let candidates: Vec<(&str, J)> = vec![
                (
                    "vendor",
                    J::Str(pick(rng, &["Intel", "AMD", "Intél", "In tel", "\u{10000}"]).into()),
                ),
                (
                    "model",
                    J::Str(pick(rng, &["core2duo", "Skylake-Client-IBRS", "EPYC"]).into()),
                ),
                (
                    "arch",
                    J::Str(pick(rng, &["x86_64", "aarch64", "i686"]).into()),
                ),
                ("features", J::List(f)),
                (
                    "topology",
                    J::Obj(
                        vec![
                            ("cores".into(), J::Raw(rng.random_range(1..16).to_string())),
                            ("threads".into(), J::Raw(rng.random_range(1..3).to_string())),
                            ("sockets".into(), J::Raw(rng.random_range(1..3).to_string())),
                            // A duplicate key keeps its first position and takes the last value.
                            (
                                "cores".into(),
                                J::Raw(pick(rng, &["1", "2.0", "\"x\""]).into()),
                            ),
                        ]
                        .into_iter()
                        .filter(|(k, _)| k != "cores" || chance(rng, 0.8))
                        .collect(),
                    ),
                ),
                (
                    "maxphysaddr",
                    J::Obj(vec![
                        ("mode".into(), J::Str("passthrough".into())),
                        (
                            "bits".into(),
                            J::Raw(pick(rng, &["42", "20", "39", "42.0", "4.2e1", "46"]).into()),
                        ),
                    ]),
                ),
                ("ghz", J::Raw(pick(rng, NUMBER_TOKENS).into())),
                ("flag", J::Raw(pick(rng, &["true", "false", "null"]).into())),
                (
                    "lone",
                    J::Raw(
                        pick(rng, &["\"\\ud800x\"", "\"\\udc00\"", "\"\\ud83d\\ude00\""]).into(),
                    ),
                ),
                ("nested", J::Str("{\"b\": 5}".into())),
                ("vendor", J::Str("dup".into())),
            ];
            for (k, v) in candidates {
                if chance(rng, 0.7) {
                    items.push((k.to_string(), v));
                }
            }
            let mut text = to_text(&J::Obj(items), rng);
            if chance(rng, 0.03) {
                // Deeper than both CPython's recursion limit and ours.
                text = format!("{}{text}{}", "[".repeat(1500), "]".repeat(1500));
            }
            Some(text)
        }
    }
}

/// A host with every attribute set, as nova's HostState has them after an update.
fn gen_host(rng: &mut StdRng) -> HostState {
    let n = rng.random_range(1..50);
    let host = format!("host{n}");
    let nodename = if chance(rng, 0.9) {
        format!("node{n}")
    } else {
        "node-é".into()
    };
    let small = |rng: &mut StdRng| -> i64 {
        match rng.random_range(0..6) {
            0 => 0,
            1 => rng.random_range(-5..5),
            _ => rng.random_range(0..200),
        }
    };
    let ratios = [
        16.0,
        4.0,
        1.0,
        1.5,
        0.1,
        1e16,
        2.5e-5,
        3.0000000000000004,
        100.0,
        0.0,
        1e15,
        123456789012345.67,
        1e-4,
        1e-5,
        0.30000000000000004,
    ];
    let mut h = HostState {
        host: host.as_str().into(),
        nodename: nodename.as_str().into(),
        cell_uuid: UUIDS[0].into(),
        uuid: chance(rng, 0.9).then(|| pick(rng, &UUIDS).into()),
        total_usable_ram_mb: pick(rng, &[0, 2048, 65536, 131072]),
        free_ram_mb: match rng.random_range(0..4) {
            0 => pick(rng, &[0, 1023, 1024, 1025, -512]),
            _ => rng.random_range(-1024..131072),
        },
        total_usable_disk_gb: pick(rng, &[0, 100, 1000]),
        disk_mb_used: small(rng) * 1024,
        free_disk_mb: match rng.random_range(0..4) {
            0 => pick(rng, &[0, 204800, 204799, -1]),
            _ => rng.random_range(-10_000..2_000_000),
        },
        vcpus_total: small(rng),
        vcpus_used: small(rng),
        cpu_allocation_ratio: pick(rng, &ratios),
        ram_allocation_ratio: pick(rng, &ratios),
        disk_allocation_ratio: pick(rng, &ratios),
        stats: Arc::new(
            gen_stats(rng)
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        ),
        num_instances: small(rng),
        num_io_ops: small(rng),
        failed_builds: small(rng),
        host_ip: chance(rng, 0.85).then(|| {
            pick(
                rng,
                &[
                    "10.0.0.1",
                    "192.168.1.20",
                    "0.0.0.0",
                    "2001:db8::1",
                    "2001:DB8:0:0:0:0:0:1",
                    "2001:db8:0:0:1:0:0:1",
                    "::ffff:1.2.3.4",
                    "::1",
                    "::",
                    "fe80::1",
                ],
            )
            .into()
        }),
        hypervisor_type: chance(rng, 0.85).then(|| {
            pick(
                rng,
                &["QEMU", "kvm", "ironic", "VMware vCenter Server", "QEMU "],
            )
            .into()
        }),
        hypervisor_version: chance(rng, 0.85)
            .then(|| pick(rng, &[6_000_000, 2_012_000, 0, 1_002_003, 8_002_000])),
        hypervisor_hostname: chance(rng, 0.9).then(|| nodename.as_str().into()),
        cpu_info: gen_cpu_info(rng).map(Arc::from),
        supported_instances: Arc::new(match rng.random_range(0..3) {
            0 => vec![],
            1 => vec![vec!["x86_64".into(), "kvm".into(), "hvm".into()]],
            _ => vec![
                vec!["x86_64".into(), "qemu".into(), "hvm".into()],
                vec!["i686".into(), "qemu".into(), "hvm".into()],
            ],
        }),
        service: ServiceInfo {
            id: rng.random_range(1..100),
            host: host.as_str().into(),
            disabled: chance(rng, 0.3),
            disabled_reason: chance(rng, 0.3).then(|| "maintenance".into()),
            forced_down: chance(rng, 0.1),
            last_seen_up: some_datetime(rng),
            created_at: some_datetime(rng),
            updated_at: some_datetime(rng),
            version: 66,
        },
        updated: some_datetime(rng),
        ..Default::default()
    };
    if chance(rng, 0.3) {
        h.limits
            .insert("vcpu".into(), json!(pick(rng, &[4.0, 64.0, 1.5])));
        if chance(rng, 0.5) {
            h.limits.insert("memory_mb".into(), json!(2048));
        }
    }
    if chance(rng, 0.3) {
        h.allocation_candidates = vec![json!({
            "allocations": {UUIDS[1]: {"resources": {"VCPU": 1, "MEMORY_MB": 512}}},
            "mappings": {"": [UUIDS[1]]},
        })
        .into()];
    }
    if chance(rng, 0.3) {
        h.instances = Arc::new(
            UUIDS[1..]
                .iter()
                .filter(|_| chance(rng, 0.5))
                .map(|s| s.to_string())
                .collect(),
        );
    }
    h
}

/// Aggregates with metadata for the aggregate filters.
fn gen_aggregates(rng: &mut StdRng, host: &str) -> Vec<Arc<Aggregate>> {
    const KEYS: &[&str] = &[
        "opt1",
        "opt2",
        "a:b",
        "aggregate_instance_extra_specs",
        "hw:cpu_policy",
        "x",
        "",
        " opt1",
        "availability_zone",
    ];
    const VALUES: &[&str] = &[
        "1",
        "3",
        "6,7",
        "8, 9",
        " a ,b,",
        "abc",
        "",
        "1.5",
        "nan",
        ",",
        "x, y , z",
        "dedicated",
        "shared,dedicated",
        "\u{3000}2\u{3000}",
        "1_0",
        "-1",
        "1e2, 50",
    ];
    let n = rng.random_range(0..4);
    (0..n)
        .map(|i| {
            let mut metadata = BTreeMap::new();
            for _ in 0..rng.random_range(0..5) {
                let v = if chance(rng, 0.2) {
                    rng.random_range(0..20).to_string()
                } else {
                    pick(rng, VALUES).to_string()
                };
                metadata.insert(pick(rng, KEYS).to_string(), v);
            }
            Arc::new(Aggregate {
                id: i + 1,
                uuid: UUIDS[(i as usize) % UUIDS.len()].to_string(),
                name: format!("agg{}", i + 1),
                hosts: BTreeSet::from([host.to_string()]),
                metadata,
            })
        })
        .collect()
}

const SEPARATORS: &[&str] = &[
    " ", " ", " ", "  ", "\t", "\u{3000}", "\u{1c}", "\u{a0}", "\n",
];

/// An extra-spec requirement, often built around the value the host actually has.
fn gen_req(rng: &mut StdRng, actual: Option<&str>) -> String {
    if let Some(a) = actual {
        // The host's value as Python's str() writes it, compared whole or in part.
        if chance(rng, 0.25) {
            let words: Vec<&str> = a.split_whitespace().collect();
            return match rng.random_range(0..4) {
                0 | 1 => a.to_string(),
                2 if !words.is_empty() => format!("<in> {}", pick(rng, &words)),
                _ => format!("<all-in> {}", words.join(" ")),
            };
        }
    }
    let operand = |rng: &mut StdRng| -> String {
        match (actual, rng.random_range(0..10)) {
            (Some(a), 0..=3) => a.to_string(),
            (Some(a), 4) => {
                let chars: Vec<char> = a.chars().collect();
                if chars.is_empty() {
                    return String::new();
                }
                let i = rng.random_range(0..chars.len());
                let j = rng.random_range(i..=chars.len());
                chars[i..j].iter().collect()
            }
            (Some(a), 5) => match utils_py_float(a) {
                Some(f) => near(rng, f),
                None => gen_text(rng),
            },
            _ => gen_text(rng),
        }
    };
    let sep = pick(rng, SEPARATORS);
    let word = |rng: &mut StdRng| -> String {
        // A single word (no whitespace) for operators that split.
        let w = operand(rng);
        let first = w.split_whitespace().next().unwrap_or("").to_string();
        if first.is_empty() {
            "1".into()
        } else {
            first
        }
    };
    let lead = if chance(rng, 0.1) {
        pick(rng, SEPARATORS)
    } else {
        ""
    };
    let body = match rng.random_range(0..40) {
        0..=5 => operand(rng),
        6..=25 => {
            let op = pick(
                rng,
                &[
                    "=", "=", "==", "!=", ">=", "<=", "=", "==", "!=", ">=", "<=", "s==", "s!=",
                    "s<", "s<=", "s>", "s>=", "<in>",
                ],
            );
            // Numeric operators mostly get a number near the host's value.
            let number = actual
                .and_then(utils_py_float)
                .filter(|_| !op.starts_with('s') && op != "<in>" && chance(rng, 0.6));
            let operand = match number {
                Some(f) => near(rng, f),
                None => word(rng),
            };
            let mut r = format!("{op}{sep}{operand}");
            if chance(rng, 0.1) {
                r.push_str(&format!("{sep}{}", word(rng)));
            }
            if chance(rng, 0.05) {
                r = op.to_string();
            }
            r
        }
        26..=29 => {
            let k = rng.random_range(0..4);
            let mut parts = vec!["<or>".to_string()];
            for i in 0..k {
                if i > 0 {
                    parts.push(pick(rng, &["<or>", "<or>", "<or>", "junk"]).to_string());
                }
                parts.push(word(rng));
            }
            if chance(rng, 0.2) {
                parts.push("<or>".into());
            }
            parts.join(sep)
        }
        30..=32 => {
            let k = rng.random_range(0..4);
            let mut parts = vec!["<all-in>".to_string()];
            for _ in 0..k {
                parts.push(word(rng));
            }
            parts.join(sep)
        }
        33 | 34 => format!(
            "{}{sep}{}",
            pick(rng, &[">", "<", "s=", "in", "<OR>", "<IN>", "="]),
            word(rng)
        ),
        35 => format!("{}{}", pick(rng, &[">=", "=", "s=="]), word(rng)),
        36 => pick(rng, &["", " ", "<or>", "<in>", "<all-in>", "="]).to_string(),
        _ => format!("<in>{sep}{}", word(rng)),
    };
    format!("{lead}{body}")
}

fn utils_py_float(a: &str) -> Option<f64> {
    nova_scheduler::py::float::float(a).ok()
}

/// A number at, just above or just below `f`, written as Python or a person would.
fn near(rng: &mut StdRng, f: f64) -> String {
    let delta = pick(rng, &[-1.0, -0.5, 0.0, 0.0, 0.0, 0.5, 1.0, 100.0]);
    let v = f + delta;
    if !v.is_finite() {
        return pick(rng, &["inf", "-inf", "nan", "1e308"]).to_string();
    }
    match rng.random_range(0..4) {
        0 if v.fract() == 0.0 && v.abs() < 1e15 => format!("{}", v as i64),
        1 => format!("{v:e}"),
        2 if v.fract() == 0.0 && v.abs() < 1e15 => format!("{}.0", v as i64),
        _ => format!("{v}"),
    }
}

fn flavor_with(specs: BTreeMap<String, String>) -> Flavor {
    Flavor {
        name: Some("m1.test".into()),
        memory_mb: 512,
        vcpus: 1,
        root_gb: 1,
        extra_specs: specs,
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------
// ComputeCapabilitiesFilter
// ---------------------------------------------------------------------------------

fn gen_compute_capabilities(rng: &mut StdRng) -> Case {
    let host = gen_host(rng);
    const UNSCOPED: &[&str] = &[
        "free_ram_mb",
        "free_disk_mb",
        "vcpus_total",
        "vcpus_used",
        "num_instances",
        "num_io_ops",
        "failed_builds",
        "hypervisor_type",
        "hypervisor_version",
        "hypervisor_hostname",
        "cpu_info",
        "host_ip",
        "host",
        "nodename",
        "uuid",
        "cell_uuid",
        "cpu_allocation_ratio",
        "ram_allocation_ratio",
        "disk_allocation_ratio",
        "supported_instances",
        "stats",
        "limits",
        "allocation_candidates",
        "total_usable_ram_mb",
        "total_usable_disk_gb",
        "disk_mb_used",
        "updated",
        "update",
        "consume_from_request",
        "_lock_name",
        "__module__",
        "__weakref__",
        "numa_topology",
        "pci_stats",
        "metrics",
        "XXYY",
        "opt1",
        "gpu",
        "j",
        "",
        "capabilities",
    ];
    const SCOPED: &[&str] = &[
        "opt1",
        "gpu",
        "j",
        "j:a",
        "j:a:b",
        "opt1:a",
        "opt1:b:aa",
        "cpu_info:vendor",
        "cpu_info:features",
        "cpu_info:topology",
        "cpu_info:topology:cores",
        "cpu_info:maxphysaddr:bits",
        "cpu_info:arch",
        "cpu_info:ghz",
        "cpu_info:flag",
        "cpu_info:lone",
        "cpu_info:nested:b",
        "cpu_info:nope",
        "cpu_info",
        "free_ram_mb",
        "hypervisor_version:real",
        "hypervisor_version:imag",
        "hypervisor_version:numerator",
        "hypervisor_version:x",
        "cpu_allocation_ratio:real",
        "host_ip:version",
        "host_ip:value",
        "service:disabled",
        "service:data:disabled",
        "service:data:host",
        "stats:opt1",
        "stats",
        "limits:vcpu",
        "supported_instances:0",
        "hypervisor_type",
        "host",
        "",
        "nope",
        "stats:gpu:x",
    ];
    const OTHER: &[&str] = &[
        "hw:cpu_policy",
        "trait:HW_CPU_X86_AVX",
        "aggregate_instance_extra_specs:opt1",
        "resources:VCPU",
        "hw:maxphysaddr_bits",
        "hw:maxphysaddr_bits",
        ":opt1",
    ];
    let mut specs = BTreeMap::new();
    for _ in 0..pick(rng, &[0, 1, 1, 1, 1, 2, 2, 3]) {
        let key = match rng.random_range(0..10) {
            0..=3 => pick(rng, UNSCOPED).to_string(),
            4..=8 => format!("capabilities:{}", pick(rng, SCOPED)),
            _ => pick(rng, OTHER).to_string(),
        };
        let actual = if key == "hw:maxphysaddr_bits" {
            capability_text(&host, &["cpu_info", "maxphysaddr", "bits"])
        } else {
            let mut scope: Vec<&str> = key.split(':').collect();
            if scope.len() > 1 && scope[0] == "capabilities" {
                scope.remove(0);
            }
            capability_text(&host, &scope)
        };
        let req = if key == "hw:maxphysaddr_bits" && chance(rng, 0.7) {
            // nova prepends '>= ' itself.
            actual.clone().unwrap_or_else(|| gen_text(rng))
        } else {
            gen_req(rng, actual.as_deref())
        };
        specs.insert(key, req);
    }
    let spec = RequestSpec {
        flavor: flavor_with(specs),
        num_instances: 1,
        ..Default::default()
    };
    Case::new(host, spec)
}

fn capability_text(host: &HostState, scope: &[&str]) -> Option<String> {
    let v = get_capabilities(host, scope).ok()??;
    py_str(&v)?.to_str().map(str::to_string)
}

fn eval_compute_capabilities(case: &Case) -> Outcome {
    let filter = ComputeCapabilitiesFilter {
        lock_name: LockName::of(release()),
    };
    let out = Outcome::from_check(filter.check_as(&case.host, &case.spec.flavor));
    assert_eq!(
        via_registry("ComputeCapabilitiesFilter", case).host_level(),
        out.host_level(),
        "host_passes disagrees with check"
    );
    out
}

// ---------------------------------------------------------------------------------
// AggregateInstanceExtraSpecsFilter
// ---------------------------------------------------------------------------------

fn gen_aggregate_instance_extra_specs(rng: &mut StdRng) -> Case {
    let mut host = gen_host(rng);
    host.aggregates = gen_aggregates(rng, &host.host);
    const KEYS: &[&str] = &["opt1", "opt2", "a:b", "x", "hw:cpu_policy", "", "missing"];
    let mut specs = BTreeMap::new();
    if chance(rng, 0.9) {
        for _ in 0..pick(rng, &[1, 1, 1, 2, 2, 3]) {
            let base = pick(rng, KEYS);
            let key = match rng.random_range(0..10) {
                0..=4 => base.to_string(),
                5..=7 => format!("aggregate_instance_extra_specs:{base}"),
                8 => pick(
                    rng,
                    &[
                        "hw:cpu_policy",
                        "trait:CUSTOM_X",
                        "capabilities:opt1",
                        "aggregate_instance_extra_specs",
                        "aggregate_instance_extra_specs:",
                        "aggregate_instance_extra_specs:a:b",
                    ],
                )
                .to_string(),
                _ => format!("other_scope:{base}"),
            };
            let md_key = key
                .strip_prefix("aggregate_instance_extra_specs:")
                .unwrap_or(&key)
                .to_string();
            let values: Vec<String> = host
                .aggregates
                .iter()
                .filter_map(|a| a.metadata.get(&md_key))
                .flat_map(|v| v.split(',').map(|p| p.trim().to_string()))
                .collect();
            let actual = values.choose(rng).cloned();
            specs.insert(key, gen_req(rng, actual.as_deref()));
        }
    }
    let spec = RequestSpec {
        flavor: flavor_with(specs),
        num_instances: 1,
        ..Default::default()
    };
    Case::new(host, spec)
}

fn eval_aggregate_instance_extra_specs(case: &Case) -> Outcome {
    let out = Outcome::from_check(AggregateInstanceExtraSpecsFilter::check(
        &case.host,
        &case.spec.flavor,
    ));
    assert_eq!(
        via_registry("AggregateInstanceExtraSpecsFilter", case).host_level(),
        out.host_level(),
        "host_passes disagrees with check"
    );
    out
}

// ---------------------------------------------------------------------------------
// JsonFilter
// ---------------------------------------------------------------------------------

const VARIABLES: &[&str] = &[
    "$free_ram_mb",
    "$free_disk_mb",
    "$vcpus_total",
    "$vcpus_used",
    "$num_instances",
    "$num_io_ops",
    "$total_usable_ram_mb",
    "$hypervisor_version",
    "$hypervisor_type",
    "$hypervisor_hostname",
    "$host",
    "$nodename",
    "$uuid",
    "$cell_uuid",
    "$_lock_name",
    "$host_ip",
    "$cpu_allocation_ratio",
    "$ram_allocation_ratio",
    "$cpu_info",
    "$supported_instances",
    "$stats",
    "$stats.gpu",
    "$stats.opt1",
    "$stats.num_instances",
    "$stats.missing",
    "$stats.gpu.x",
    "$service",
    "$service.disabled",
    "$service.forced_down",
    "$service.host",
    "$service.disabled_reason",
    "$service.last_seen_up",
    "$service.version",
    "$service.binary",
    "$limits",
    "$limits.vcpu",
    "$instances",
    "$aggregates",
    "$allocation_candidates",
    "$updated",
    "$numa_topology",
    "$pci_stats",
    "$metrics",
    "$update",
    "$__module__",
    "$__weakref__",
    "$__class__",
    "$capabilities.enabled",
    "$free_ram_mb.x",
    "$foo",
    "$",
    "$........",
    "$free_ram_mb.",
    "$.free_ram_mb",
];

/// Groups of numbers whose Python comparisons are easy to get wrong.
const NUMERIC_THEMES: &[&[&str]] = &[
    &[
        "9007199254740993",
        "9007199254740992",
        "9007199254740992.0",
        "9007199254740994.0",
    ],
    &[
        "9223372036854775807",
        "9223372036854775808",
        "9.223372036854775807e18",
        "9223372036854775808.0",
        "-9223372036854775809",
        "-9.223372036854775808e18",
    ],
    &[
        "100000000000000000000000000000",
        "1e29",
        "99999999999999991433150857216",
        "99999999999999991433150857217",
    ],
    &[
        "1",
        "1.0",
        "true",
        "0.9999999999999999",
        "1.0000000000000002",
    ],
    &["0", "-0", "-0.0", "false", "0.0", "0.5", "-0.5"],
    &["NaN", "Infinity", "-Infinity", "1e400", "1e308", "-1e400"],
    &["2.5", "2", "3", "-2.5", "-2", "-3"],
];

fn gen_literal(rng: &mut StdRng, host: &HostState) -> J {
    match rng.random_range(0..20) {
        16..=19 => {
            let theme =
                NUMERIC_THEMES[(host.free_ram_mb.unsigned_abs() as usize) % NUMERIC_THEMES.len()];
            J::Raw(pick(rng, theme).to_string())
        }
        14 | 15 => {
            J::Raw(pick(rng, &["NaN", "Infinity", "-Infinity", "1e400", "-0.0"]).to_string())
        }
        0 | 1 => J::Raw((host.free_ram_mb + rng.random_range(-2..3)).to_string()),
        2 => J::Raw((host.free_disk_mb + rng.random_range(-1..2)).to_string()),
        3 => J::Raw(rng.random_range(-5..300).to_string()),
        4 => J::Raw(pick(rng, NUMBER_TOKENS).to_string()),
        5 => J::Raw(pick(rng, &["true", "false", "null"]).to_string()),
        6 | 7 => J::Str(gen_text(rng)),
        8 => J::Str(
            pick(
                rng,
                &["", "QEMU", "host1", "node1", "10.0.0.1", "nova-compute"],
            )
            .into(),
        ),
        9 => J::Raw(
            pick(
                rng,
                &[
                    "\"\\ud800\"",
                    "\"\\udbff\\udfff\"",
                    "\"\\u0024free_ram_mb\"",
                ],
            )
            .into(),
        ),
        10 => J::Obj(vec![]),
        11 => J::Obj(vec![
            ("a".into(), J::Raw("1".into())),
            (
                "b".into(),
                J::List(vec![J::Raw("1.0".into()), J::Raw("NaN".into())]),
            ),
        ]),
        12 => J::Obj(vec![
            (
                "b".into(),
                J::List(vec![J::Raw("true".into()), J::Raw("NaN".into())]),
            ),
            ("a".into(), J::Raw("1.0".into())),
            ("a".into(), J::Raw("true".into())),
        ]),
        _ => J::Str(
            host.stats
                .values()
                .next()
                .map_or_else(|| "2".to_string(), |v| v.to_string()),
        ),
    }
}

fn gen_expr(rng: &mut StdRng, host: &HostState, depth: usize) -> J {
    let op = match rng.random_range(0..30) {
        0 => J::Raw(
            pick(
                rng,
                &[
                    "1", "null", "true", "[]", "{}", "[\"=\"]", "\"\"", "\"!=\"", "\"nope\"",
                    "\"AND\"",
                ],
            )
            .into(),
        ),
        1..=9 => J::Str(pick(rng, &["=", "<", ">", "<=", ">="]).into()),
        10..=13 => J::Str("in".into()),
        14..=17 => J::Str("not".into()),
        18..=23 => J::Str("and".into()),
        _ => J::Str("or".into()),
    };
    let mut items = vec![op];
    for _ in 0..rng.random_range(0..5) {
        if items.len() > 1 && chance(rng, 0.2) {
            // The same value twice: `in`/`=` on NaN, dicts, lists, objects.
            let i = rng.random_range(1..items.len());
            items.push(items[i].clone());
            continue;
        }
        let arg = match rng.random_range(0..10) {
            0..=3 => J::Str(pick(rng, VARIABLES).to_string()),
            4..=6 => gen_literal(rng, host),
            7 if depth < 2 => J::List(vec![]),
            _ if depth < 6 => gen_expr(rng, host, depth + 1),
            _ => gen_literal(rng, host),
        };
        items.push(arg);
    }
    J::List(items)
}

fn nested(depth: usize, leaf: &str) -> String {
    format!(
        "{}{leaf}{}",
        "[\"and\", ".repeat(depth - 1),
        "]".repeat(depth - 1)
    )
}

fn gen_query(rng: &mut StdRng, host: &HostState) -> String {
    match rng.random_range(0..100) {
        0..=9 => {
            // Numbers Python compares exactly (int vs float, NaN, signed zero).
            let theme = pick(rng, NUMERIC_THEMES);
            let op = pick(rng, &["=", "<", ">", "<=", ">=", "in"]);
            let args: Vec<&str> = (0..rng.random_range(2..4))
                .map(|_| pick(rng, theme))
                .collect();
            format!("[\"{op}\", {}]", args.join(", "))
        }
        10..=69 => {
            let j = gen_expr(rng, host, 0);
            to_text(&j, rng)
        }
        70..=77 => pick(
            rng,
            &[
                "[]",
                "{}",
                "0",
                "null",
                "\"\"",
                "false",
                "5",
                "1.5",
                "true",
                "\"=ab\"",
                "\"=aa\"",
                "\"<$$\"",
                "\"abc\"",
                "{\"=\": 1}",
                "\"in\"",
                "\"=\"",
                "[[]]",
                "[\"=\", 1, 1]",
            ],
        )
        .to_string(),
        78..=87 => {
            // Malformed: a valid query, damaged.
            let j = gen_expr(rng, host, 0);
            let text = to_text(&j, rng);
            match rng.random_range(0..8) {
                0 => {
                    let mut t = text.trim_end().to_string();
                    t.pop();
                    t
                }
                1 => text.replacen(']', ",]", 1),
                2 => text.replace('"', "'"),
                3 => format!("\u{feff}{text}"),
                4 => format!("{text} extra"),
                5 => format!("{text}{text}"),
                6 => text.replacen("\"", "\"\\x", 1),
                _ => text.replacen(',', "", 1),
            }
        }
        88..=95 => {
            let d = rng.random_range(2..=32);
            nested(
                d,
                pick(
                    rng,
                    &[
                        "[]",
                        "[\"=\", 1, 1]",
                        "[\"<\", \"$free_ram_mb\", \"x\"]",
                        "[\"not\"]",
                    ],
                ),
            )
        }
        _ => {
            // Beyond both nova's recursion limit and ours.
            let d = rng.random_range(2000..3000);
            if chance(rng, 0.5) {
                nested(d, "[]")
            } else {
                format!("{}{}", "[".repeat(d), "]".repeat(d))
            }
        }
    }
}

fn gen_json(rng: &mut StdRng) -> Case {
    let host = gen_host(rng);
    let hints: Option<BTreeMap<String, Vec<String>>> = match rng.random_range(0..40) {
        0 => None,
        1 => Some(BTreeMap::new()),
        2 => Some(BTreeMap::from([("query".to_string(), vec![])])),
        3 => Some(BTreeMap::from([("query".to_string(), vec![String::new()])])),
        4 => Some(BTreeMap::from([(
            "query".to_string(),
            vec!["[]".to_string(), gen_query(rng, &host)],
        )])),
        _ => {
            let mut m = BTreeMap::from([("query".to_string(), vec![gen_query(rng, &host)])]);
            if chance(rng, 0.1) {
                m.insert("same_host".into(), vec![UUIDS[1].into()]);
            }
            Some(m)
        }
    };
    let spec = RequestSpec {
        flavor: flavor_with(BTreeMap::new()),
        num_instances: 1,
        scheduler_hints: hints,
        ..Default::default()
    };
    Case::new(host, spec)
}

thread_local! {
    /// One filter instance for every case, as in a running scheduler (its decoded-query cache is exercised).
    static JSON_FILTER: JsonFilter = JsonFilter::with_lock_name(LockName::of(release()));
}

fn eval_json(case: &Case) -> Outcome {
    let out = Outcome::from_check(JsonFilter::check_as(
        &case.host,
        &case.spec,
        LockName::of(release()),
    ));
    let req = FilterRequest {
        spec: &case.spec,
        now: Utc::now(),
        index: 0,
        is_rebuild: false,
    };
    let passes = JSON_FILTER.with(|f| f.host_passes(&case.host, &req));
    assert_eq!(passes, out.host_level(), "host_passes disagrees with check");
    out
}

// ---------------------------------------------------------------------------------
// Image, server-group, affinity-hint, counting, isolation and metrics filters
// ---------------------------------------------------------------------------------

/// A request spec with a flavor and an instance uuid (nova's RequestSpec cannot
/// lazy-load `instance_uuid`, and `project_id` is always set by the API).
fn base_spec(rng: &mut StdRng) -> RequestSpec {
    RequestSpec {
        flavor: flavor_with(BTreeMap::new()),
        num_instances: 1,
        instance_uuid: Some(pick(rng, &UUIDS[1..]).to_string()),
        project_id: Some(pick(rng, &["my_tenantid", "t1", "t5", "other"]).to_string()),
        ..Default::default()
    }
}

fn image_with(id: Option<&str>, props: Map<String, Value>) -> Option<ImageMeta> {
    Some(ImageMeta {
        id: id.map(str::to_string),
        properties: props,
        ..Default::default()
    })
}

/// Exact comparison through `check`, plus the registered filter agreeing with it.
fn exact(filter: &str, case: &Case, check: Result<bool, PyError>) -> Outcome {
    let out = Outcome::from_check(check);
    assert_eq!(
        via_registry(filter, case).host_level(),
        out.host_level(),
        "{filter}: host_passes disagrees with check"
    );
    out
}

fn gen_image_properties(rng: &mut StdRng) -> Case {
    let mut host = gen_host(rng);
    const ARCHS: &[&str] = &["x86_64", "i686", "aarch64", "ppc64le"];
    const HVS: &[&str] = &["kvm", "qemu", "xen", "baremetal", "lxc"];
    const MODES: &[&str] = &["hvm", "xen", "exe"];
    host.supported_instances = Arc::new(
        (0..rng.random_range(0..4))
            .map(|_| {
                vec![
                    pick(rng, ARCHS).to_string(),
                    pick(rng, HVS).to_string(),
                    pick(rng, MODES).to_string(),
                ]
            })
            .collect(),
    );
    host.hypervisor_version = pick(
        rng,
        &[
            None,
            Some(0),
            Some(6_000_000),
            Some(6_001_000),
            Some(2_012_000),
            Some(5_000),
            Some(8_002_000),
        ],
    );
    let mut props = Map::new();
    if chance(rng, 0.6) {
        let arch = pick(
            rng,
            &[
                "x86_64", "X86_64", "amd64", "i686", "i386", "x86_32", "aarch64", "armv7l",
                "ppc64le",
            ],
        );
        props.insert("hw_architecture".into(), json!(arch));
    }
    if chance(rng, 0.5) {
        let hv = pick(
            rng,
            &[
                "kvm",
                "KVM",
                "qemu",
                "xen",
                "xapi",
                "baremetal",
                "lxc",
                "vmware",
            ],
        );
        props.insert("img_hv_type".into(), json!(hv));
    }
    if chance(rng, 0.5) {
        let mode = pick(
            rng,
            &["hvm", "HVM", "xen", "pv", "hv", "baremetal", "exe", "uml"],
        );
        props.insert("hw_vm_mode".into(), json!(mode));
    }
    // nova 29 and 30's field takes only distutils predicates: an image with another
    // never reaches their scheduler.
    let distutils = !release().has(Behaviour::VersionutilsPredicate);
    if distutils && chance(rng, 0.5) {
        let pred = pick(
            rng,
            &[
                ">=6.0",
                ">= 6.0, < 6.2",
                "== 6.0.0",
                "!=6.1",
                "< 2.12.1",
                " >= 8.2 ",
                ">2.12a1",
                "<= 5.0, >= 4.0",
                ">= 6.1b2",
                "== 06.000",
            ],
        );
        props.insert("img_hv_requested_version".into(), json!(pred));
    } else if !distutils && chance(rng, 0.5) {
        let pred = pick(
            rng,
            &[
                ">=6.0",
                ">=6.0,<6.2",
                "==6.0.0",
                "==6",
                "!=6.1",
                "< 2.12.1",
                " >= 8.2 ",
                ">6.0.post1",
                "<7.0.dev1",
                ">=1!0",
                "<=5.0, >=4",
                "==6.1.0+local",
                ">2.12a1",
            ],
        );
        props.insert("img_hv_requested_version".into(), json!(pred));
    }
    if chance(rng, 0.15) {
        props.insert("hw_maxphysaddr_bits".into(), json!(pick(rng, &[0, 42, 46])));
    }
    if chance(rng, 0.2) {
        props.insert("os_distro".into(), json!("ubuntu"));
    }
    let mut spec = base_spec(rng);
    spec.image = match rng.random_range(0..10) {
        0 => None,
        1 => image_with(None, Map::new()),
        _ => image_with(Some(UUIDS[2]), props),
    };
    let default_arch = match rng.random_range(0..4) {
        0 => Some(pick(rng, &["x86_64", "aarch64", "i686"]).to_string()),
        _ => None,
    };
    let mut case = Case::new(host, spec);
    if let Some(a) = &default_arch {
        case.oracle_config =
            json!({"filter_scheduler": {"image_properties_default_architecture": a}})
                .as_object()
                .cloned()
                .unwrap_or_default();
    }
    case.filter_config.image_properties_default_architecture = default_arch;
    case
}

fn eval_image_properties(case: &Case) -> Outcome {
    let f = ImagePropertiesFilter {
        default_architecture: case
            .filter_config
            .image_properties_default_architecture
            .clone(),
        distutils_predicate: !case
            .filter_config
            .release
            .has(Behaviour::VersionutilsPredicate),
    };
    exact(
        "ImagePropertiesFilter",
        case,
        f.check(&case.host, &case.spec),
    )
}

fn gen_aggregate_image_properties_isolation(rng: &mut StdRng) -> Case {
    let mut host = gen_host(rng);
    const KEYS: &[&str] = &[
        "hw_vm_mode",
        "os_distro",
        "hw_cpu_cores",
        "hw_pmu",
        "hw_architecture",
        "img_owner_id",
        "hw_numa_mem",
        "hw_numa_cpus",
        "traits_required",
        "hw_disk_bus",
        "availability_zone",
        "os",
        "hw.vm_mode",
    ];
    const VALUES: &[&str] = &[
        "hvm",
        "hvm,xen",
        "xen",
        "windows,linux",
        "windows",
        "ubuntu, windows",
        "1",
        "2",
        "1,2",
        "True",
        "true",
        "x86_64",
        "amd64",
        "[1024]",
        "[1024, 2048]",
        "['CUSTOM_A']",
        "foo",
        "virtio,scsi",
        "",
        "[{0, 1}]",
    ];
    host.aggregates = (0..rng.random_range(0..4))
        .map(|i| {
            let metadata = (0..rng.random_range(0..4))
                .map(|_| (pick(rng, KEYS).to_string(), pick(rng, VALUES).to_string()))
                .collect();
            Arc::new(Aggregate {
                id: i + 1,
                uuid: UUIDS[i as usize % UUIDS.len()].to_string(),
                name: format!("agg{}", i + 1),
                hosts: BTreeSet::from([host.host.to_string()]),
                metadata,
            })
        })
        .collect();
    let mut props = Map::new();
    let candidates: Vec<(&str, Value)> = vec![
        ("hw_vm_mode", json!(pick(rng, &["hvm", "xen", "HVM", "pv"]))),
        (
            "os_distro",
            json!(pick(rng, &["windows", "linux", "ubuntu", "windows,", ""])),
        ),
        (
            "hw_cpu_cores",
            pick(rng, &[json!(1), json!(2), json!(0), json!("2")]),
        ),
        (
            "hw_pmu",
            pick(rng, &[json!(true), json!(false), json!("yes")]),
        ),
        (
            "hw_architecture",
            json!(pick(rng, &["x86_64", "amd64", "aarch64"])),
        ),
        ("img_owner_id", json!(pick(rng, &["foo", "wrong"]))),
        (
            "hw_numa_mem",
            pick(rng, &[json!([1024]), json!([1024, 2048])]),
        ),
        (
            "hw_numa_cpus",
            pick(rng, &[json!([[0, 1]]), json!([[1, 0], [2]])]),
        ),
        (
            "traits_required",
            pick(rng, &[json!(["CUSTOM_A"]), json!([])]),
        ),
        ("hw_disk_bus", json!(pick(rng, &["virtio", "scsi", "ide"]))),
    ];
    for (k, v) in candidates {
        if chance(rng, 0.4) {
            props.insert(k.to_string(), v);
        }
    }
    let mut spec = base_spec(rng);
    spec.image = if chance(rng, 0.1) {
        None
    } else {
        image_with(Some(UUIDS[2]), props)
    };
    let (namespace, separator) = match rng.random_range(0..6) {
        0 => (Some("hw"), "_"),
        1 => (Some("hw"), "."),
        2 => (Some("os"), "_"),
        3 => (Some(""), "."),
        _ => (None, "."),
    };
    let mut case = Case::new(host, spec);
    let mut group = Map::new();
    if let Some(ns) = namespace {
        group.insert(
            "aggregate_image_properties_isolation_namespace".into(),
            json!(ns),
        );
    }
    if separator != "." {
        group.insert(
            "aggregate_image_properties_isolation_separator".into(),
            json!(separator),
        );
    }
    if !group.is_empty() {
        case.oracle_config
            .insert("filter_scheduler".into(), Value::Object(group));
    }
    case.filter_config
        .aggregate_image_properties_isolation_namespace = namespace.map(str::to_string);
    case.filter_config
        .aggregate_image_properties_isolation_separator = separator.to_string();
    case
}

fn eval_aggregate_image_properties_isolation(case: &Case) -> Outcome {
    let c = &case.filter_config;
    let f = AggregateImagePropertiesIsolation::new(
        c.aggregate_image_properties_isolation_namespace.clone(),
        c.aggregate_image_properties_isolation_separator.clone(),
    );
    exact(
        "AggregateImagePropertiesIsolation",
        case,
        f.check(&case.host, &case.spec),
    )
}

fn gen_group(rng: &mut StdRng, policy: &str) -> InstanceGroup {
    let mut members: Vec<String> = UUIDS[1..]
        .iter()
        .filter(|_| chance(rng, 0.5))
        .map(|s| s.to_string())
        .collect();
    if chance(rng, 0.2) {
        members.push("not-on-any-host".to_string());
    }
    let hosts: Vec<String> = (0..rng.random_range(0..3))
        .map(|_| format!("host{}", rng.random_range(1..50)))
        .collect();
    let mut rules = BTreeMap::new();
    if chance(rng, 0.5) {
        let v = pick(
            rng,
            &[
                "1",
                "2",
                "3",
                "0",
                "-1",
                " 2 ",
                "1_0",
                "x",
                "1.5",
                "\u{3000}2",
            ],
        );
        rules.insert("max_server_per_host".to_string(), v.to_string());
    }
    InstanceGroup {
        uuid: Some(UUIDS[0].to_string()),
        policy: Some(policy.to_string()),
        policies: vec![policy.to_string()],
        members,
        hosts,
        hosts_unset: false,
        rules,
    }
}

fn gen_server_group_anti_affinity(rng: &mut StdRng) -> Case {
    let mut host = gen_host(rng);
    if chance(rng, 0.7) {
        host.instances = Arc::new(
            UUIDS[1..]
                .iter()
                .filter(|_| chance(rng, 0.6))
                .map(|s| s.to_string())
                .collect(),
        );
    }
    let mut spec = base_spec(rng);
    if chance(rng, 0.3) {
        spec.instance_uuid = Some(UUIDS[0].to_string());
    }
    spec.instance_group = match rng.random_range(0..10) {
        0 => None,
        1 => Some(gen_group(rng, "affinity")),
        2 => Some(gen_group(rng, "soft-anti-affinity")),
        _ => Some(gen_group(rng, "anti-affinity")),
    };
    Case::new(host, spec)
}

fn eval_server_group_anti_affinity(case: &Case) -> Outcome {
    exact(
        "ServerGroupAntiAffinityFilter",
        case,
        ServerGroupAntiAffinityFilter::check(&case.host, &case.spec),
    )
}

fn gen_server_group_affinity(rng: &mut StdRng) -> Case {
    let mut host = gen_host(rng);
    host.host = format!("host{}", rng.random_range(1..4)).into();
    let mut spec = base_spec(rng);
    spec.instance_group = match rng.random_range(0..10) {
        0 => None,
        1 => Some(gen_group(rng, "anti-affinity")),
        2 => Some(gen_group(rng, "soft-affinity")),
        _ => {
            let mut g = gen_group(rng, "affinity");
            g.hosts = (0..rng.random_range(0..3))
                .map(|_| pick(rng, &["host1", "host2", "host3", "HOST1", "host1 "]).to_string())
                .collect();
            Some(g)
        }
    };
    Case::new(host, spec)
}

/// A list-of-strings hint in the shapes nova's API and conductor produce.
fn gen_uuid_hint(rng: &mut StdRng) -> Vec<String> {
    let n = pick(rng, &[0, 1, 1, 1, 2, 3]);
    (0..n)
        .map(|_| pick(rng, &[UUIDS[1], UUIDS[2], UUIDS[3], "", "same", UUIDS[0]]).to_string())
        .collect()
}

fn gen_affinity_hint(rng: &mut StdRng, hint: &str) -> Case {
    let mut host = gen_host(rng);
    host.instances = Arc::new(
        UUIDS[1..]
            .iter()
            .filter(|_| chance(rng, 0.4))
            .map(|s| s.to_string())
            .collect(),
    );
    let mut spec = base_spec(rng);
    spec.scheduler_hints = match rng.random_range(0..8) {
        0 => None,
        1 => Some(BTreeMap::new()),
        2 => Some(BTreeMap::from([(
            "other".to_string(),
            vec![UUIDS[1].to_string()],
        )])),
        _ => Some(BTreeMap::from([(hint.to_string(), gen_uuid_hint(rng))])),
    };
    Case::new(host, spec)
}

fn gen_same_host(rng: &mut StdRng) -> Case {
    gen_affinity_hint(rng, "same_host")
}

fn gen_different_host(rng: &mut StdRng) -> Case {
    gen_affinity_hint(rng, "different_host")
}

fn gen_simple_cidr(rng: &mut StdRng) -> Case {
    let mut host = gen_host(rng);
    const IPS: &[&str] = &[
        "10.0.0.5",
        "10.0.0.1",
        "192.168.1.1",
        "2001:db8::5",
        "fe80::1",
        "::ffff:1.2.3.4",
    ];
    const BAD_IPS: &[&str] = &["10.0.0", "010.0.0.5", "10.0.0.5/8", "not-an-ip", ""];
    const CIDRS: &[&str] = &[
        "/24",
        "/32",
        "/0",
        "/8",
        "/16",
        "/64",
        "/120",
        "/128",
        "/ 24",
        "/255.255.255.0",
        "/0.0.0.255",
        "/ffff::",
        "/ffff:ffff:ffff:ffff::",
        "/::ffff",
        "",
        "/2_4",
    ];
    const BAD_CIDRS: &[&str] = &[
        "/33",
        "/129",
        "/-1",
        "/255.0.255.0",
        "/24/2",
        "/",
        "24",
        "/abc",
    ];
    let ip = |rng: &mut StdRng| -> String {
        if chance(rng, 0.85) {
            pick(rng, IPS).to_string()
        } else {
            pick(rng, BAD_IPS).to_string()
        }
    };
    let cidr = |rng: &mut StdRng| -> String {
        if chance(rng, 0.85) {
            pick(rng, CIDRS).to_string()
        } else {
            pick(rng, BAD_CIDRS).to_string()
        }
    };
    let ip_hint = match rng.random_range(0..10) {
        0 => None,
        1 => Some(vec![]),
        2 => Some(vec![ip(rng), ip(rng)]),
        _ => Some(vec![ip(rng)]),
    };
    let cidr_hint = match rng.random_range(0..10) {
        0 | 1 => None,
        2 => Some(vec![]),
        3 => Some(vec!["/24".to_string(), "/8".to_string()]),
        _ => Some(vec![cidr(rng)]),
    };
    let mut hints = BTreeMap::new();
    if let Some(v) = ip_hint {
        hints.insert("build_near_host_ip".to_string(), v);
    }
    if let Some(v) = cidr_hint {
        hints.insert("cidr".to_string(), v);
    }
    if chance(rng, 0.05) {
        host.host_ip = None;
    }
    let mut spec = base_spec(rng);
    spec.scheduler_hints = Some(hints);
    Case::new(host, spec)
}

fn eval_simple_cidr(case: &Case) -> Outcome {
    let netaddr = if release().has(Behaviour::Netaddr1) {
        Netaddr::V1
    } else {
        Netaddr::V0_10
    };
    let check = SimpleCIDRAffinityFilter { netaddr }.check(&case.host, &case.spec);
    let out = match &check {
        // netaddr's AddrFormatError is not a ValueError: the oracle names it "Other".
        Err(e) if e.message.starts_with(ADDR_FORMAT_ERROR) => {
            Outcome::Raise(format!("Other:{ADDR_FORMAT_ERROR}"))
        }
        _ => Outcome::from_check(check.clone()),
    };
    assert_eq!(
        via_registry("SimpleCIDRAffinityFilter", case).host_level(),
        out.host_level(),
        "host_passes disagrees with check"
    );
    out
}

/// Aggregates with one numeric key, values that Python's int() takes or rejects.
fn gen_limit_aggregates(rng: &mut StdRng, host: &str, key: &str) -> Vec<Arc<Aggregate>> {
    const VALUES: &[&str] = &[
        "1",
        "2",
        "3",
        "5",
        "8",
        "10",
        "0",
        "-1",
        " 4 ",
        "1_0",
        "XXX",
        "1.5",
        "",
        "١٢",
        "\u{3000}6",
        "\u{1c}6",
        "99999999999999999999999",
    ];
    (0..rng.random_range(0..4))
        .map(|i| {
            let mut metadata = BTreeMap::new();
            if chance(rng, 0.8) {
                metadata.insert(key.to_string(), pick(rng, VALUES).to_string());
            }
            if chance(rng, 0.3) {
                metadata.insert("other".to_string(), "1".to_string());
            }
            Arc::new(Aggregate {
                id: i + 1,
                uuid: UUIDS[i as usize % UUIDS.len()].to_string(),
                name: format!("agg{}", i + 1),
                hosts: BTreeSet::from([host.to_string()]),
                metadata,
            })
        })
        .collect()
}

fn gen_counting(rng: &mut StdRng, option: &str, min: i64, aggregates: bool) -> Case {
    let mut host = gen_host(rng);
    host.num_instances = rng.random_range(0..12);
    host.num_io_ops = rng.random_range(0..12);
    if aggregates {
        host.aggregates = gen_limit_aggregates(rng, &host.host, option);
    }
    let limit = if chance(rng, 0.2) {
        None
    } else {
        Some(rng.random_range(min..12))
    };
    let mut case = Case::new(host, base_spec(rng));
    if let Some(l) = limit {
        case.oracle_config
            .insert("filter_scheduler".into(), json!({ option: l }));
        match option {
            "max_io_ops_per_host" => case.filter_config.max_io_ops_per_host = l,
            _ => case.filter_config.max_instances_per_host = l,
        }
    }
    case
}

fn gen_num_instances(rng: &mut StdRng) -> Case {
    gen_counting(rng, "max_instances_per_host", 1, false)
}

fn gen_aggregate_num_instances(rng: &mut StdRng) -> Case {
    gen_counting(rng, "max_instances_per_host", 1, true)
}

fn gen_io_ops(rng: &mut StdRng) -> Case {
    gen_counting(rng, "max_io_ops_per_host", 0, false)
}

fn gen_aggregate_io_ops(rng: &mut StdRng) -> Case {
    gen_counting(rng, "max_io_ops_per_host", 0, true)
}

fn gen_isolated_hosts(rng: &mut StdRng) -> Case {
    let mut host = gen_host(rng);
    host.host = pick(rng, &["isolated_host", "free_host", "host1"]).into();
    let images: Vec<String> = match rng.random_range(0..3) {
        0 => vec![],
        1 => vec![UUIDS[2].to_string()],
        _ => vec![UUIDS[2].to_string(), UUIDS[3].to_string()],
    };
    let hosts: Vec<String> = match rng.random_range(0..3) {
        0 => vec![],
        1 => vec!["isolated_host".to_string()],
        _ => vec!["isolated_host".to_string(), "host1".to_string()],
    };
    let restrict = chance(rng, 0.5);
    let mut spec = base_spec(rng);
    spec.image = match rng.random_range(0..6) {
        0 => None,
        1 => image_with(None, Map::new()),
        _ => image_with(Some(pick(rng, &[UUIDS[1], UUIDS[2], UUIDS[3]])), Map::new()),
    };
    let mut case = Case::new(host, spec);
    case.oracle_config.insert(
        "filter_scheduler".into(),
        json!({
            "isolated_images": images,
            "isolated_hosts": hosts,
            "restrict_isolated_hosts_to_isolated_images": restrict,
        }),
    );
    case.filter_config.isolated_images = images;
    case.filter_config.isolated_hosts = hosts;
    case.filter_config
        .restrict_isolated_hosts_to_isolated_images = restrict;
    case
}

fn gen_aggregate_type_affinity(rng: &mut StdRng) -> Case {
    let mut host = gen_host(rng);
    const VALUES: &[&str] = &[
        "m1.small",
        "m1.tiny",
        "m1.small,m1.large",
        "m1.large, m1.small ",
        "M1.SMALL",
        "",
        ",",
        "m1.small\u{3000}",
    ];
    host.aggregates = (0..rng.random_range(0..3))
        .map(|i| {
            let mut metadata = BTreeMap::new();
            if chance(rng, 0.7) {
                metadata.insert("instance_type".to_string(), pick(rng, VALUES).to_string());
            }
            if chance(rng, 0.3) {
                metadata.insert("flavor".to_string(), "m1.small".to_string());
            }
            Arc::new(Aggregate {
                id: i + 1,
                uuid: UUIDS[i as usize % UUIDS.len()].to_string(),
                name: format!("agg{}", i + 1),
                hosts: BTreeSet::from([host.host.to_string()]),
                metadata,
            })
        })
        .collect();
    let mut spec = base_spec(rng);
    spec.flavor.name = Some(pick(rng, &["m1.small", "m1.large", "m1.tiny", ""]).to_string());
    Case::new(host, spec)
}

fn gen_aggregate_multi_tenancy(rng: &mut StdRng) -> Case {
    let mut host = gen_host(rng);
    const KEYS: &[&str] = &[
        "filter_tenant_id",
        "filter_tenant_id_gr1",
        "filter_tenant_idX",
        "Filter_tenant_id",
        "tenant_id",
        "availability_zone",
    ];
    const VALUES: &[&str] = &[
        "my_tenantid",
        "t1, t2",
        "t5,t4",
        "",
        "other",
        "my_tenantid ,t1",
    ];
    host.aggregates = (0..rng.random_range(0..3))
        .map(|i| {
            let metadata = (0..rng.random_range(0..3))
                .map(|_| (pick(rng, KEYS).to_string(), pick(rng, VALUES).to_string()))
                .collect();
            Arc::new(Aggregate {
                id: i + 1,
                uuid: UUIDS[i as usize % UUIDS.len()].to_string(),
                name: format!("agg{}", i + 1),
                hosts: BTreeSet::from([host.host.to_string()]),
                metadata,
            })
        })
        .collect();
    Case::new(host, base_spec(rng))
}

fn gen_metrics(rng: &mut StdRng) -> Case {
    const NAMES: &[&str] = &[
        "cpu.frequency",
        "cpu.user.time",
        "cpu.percent",
        "cpu.idle.percent",
        "numa.membw.current",
    ];
    let mut host = gen_host(rng);
    host.metrics = Some(Arc::new(Value::Array(
        NAMES
            .iter()
            .filter(|_| chance(rng, 0.5))
            .map(|n| json!({"name": n, "value": 1, "source": "libvirt.LibvirtDriver"}))
            .collect(),
    )));
    let setting: Vec<String> = (0..rng.random_range(0..3))
        .map(|_| {
            let name = pick(rng, NAMES);
            match rng.random_range(0..8) {
                0 => name.to_string(),
                1 => format!("{name}=x"),
                2 => format!("={name}"),
                3 => format!("{name} =1.5"),
                4 => format!("{name}=-inf"),
                _ => format!("{name}={}", rng.random_range(-3..3)),
            }
        })
        .collect();
    let mut case = Case::new(host, base_spec(rng));
    case.oracle_config
        .insert("metrics".into(), json!({ "weight_setting": setting }));
    case.filter_config.metrics_weight_setting = setting;
    case
}

// Filters that cannot raise in nova on these inputs: the registered filter's pass or fail.
fn eval_server_group_affinity(case: &Case) -> Outcome {
    via_registry("ServerGroupAffinityFilter", case)
}

fn eval_same_host(case: &Case) -> Outcome {
    via_registry("SameHostFilter", case)
}

fn eval_different_host(case: &Case) -> Outcome {
    via_registry("DifferentHostFilter", case)
}

fn eval_num_instances(case: &Case) -> Outcome {
    via_registry("NumInstancesFilter", case)
}

fn eval_aggregate_num_instances(case: &Case) -> Outcome {
    via_registry("AggregateNumInstancesFilter", case)
}

fn eval_io_ops(case: &Case) -> Outcome {
    via_registry("IoOpsFilter", case)
}

fn eval_aggregate_io_ops(case: &Case) -> Outcome {
    via_registry("AggregateIoOpsFilter", case)
}

fn eval_isolated_hosts(case: &Case) -> Outcome {
    via_registry("IsolatedHostsFilter", case)
}

fn eval_aggregate_type_affinity(case: &Case) -> Outcome {
    via_registry("AggregateTypeAffinityFilter", case)
}

fn eval_aggregate_multi_tenancy(case: &Case) -> Outcome {
    via_registry("AggregateMultiTenancyIsolation", case)
}

fn eval_metrics(case: &Case) -> Outcome {
    via_registry("MetricsFilter", case)
}
