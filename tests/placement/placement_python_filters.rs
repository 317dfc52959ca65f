// SPDX-License-Identifier: Apache-2.0
//! An operator's own filter and weigher classes (`tests/plugins/mycloud_filters.py`),
//! named in `available_filters` and `weight_classes` as nova names them, run in the
//! embedded interpreter by the manager, against nova's own HostManager, filter
//! handler and weight handler running the same classes over the same databases
//! (`tests/oracle/custom_filters_oracle.py`): request by request, the hosts nova
//! leaves are the ones this daemon weighs, with nova's weights, and nova's best host
//! is the one chosen.

use crate::claims_cloud;
use crate::nova_schema;
use crate::venv;

use claims_cloud::*;
use nova_scheduler::observe::listener::{DecisionQuery, Explainer};
use serde_json::{json, Value};
use sqlx::MySqlPool;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const PLUGINS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/plugins");
const ORACLE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/oracle/custom_filters_oracle.py"
);

/// `dir/nova.conf` for `cloud`: nova's filters and the operator's classes
/// available, `enabled_filters` enabled, nova's weighers and RackWeigher, the
/// venv's interpreter with the operator's module.
fn nova_conf(dir: &Path, cloud: &Cloud, venv: &Path, enabled_filters: &str) -> PathBuf {
    let conf = dir.join("nova.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\nservice_down_time = 3600\n\
             [database]\nconnection = {cell0}\n[api_database]\nconnection = {api}\n\
             [filter_scheduler]\n\
             available_filters = nova.scheduler.filters.all_filters\n\
             available_filters = mycloud_filters.all_filters\n\
             enabled_filters = {enabled_filters}\n\
             weight_classes = nova.scheduler.weights.all_weighers,mycloud_filters.RackWeigher\n\
             [nova_scheduler_rs]\npython = {python}\n",
            cell0 = nova_schema::sqla_url(&cloud.cell0_db),
            api = nova_schema::sqla_url(&cloud.api_db),
            python = venv::with_operator_plugins(dir, venv).display(),
        ),
    )
    .unwrap();
    conf
}

/// A boot request of a small flavor with `extra` specs, as nova-conductor sends it
/// (the fields it always sets), its objects at versions nova 34 reads.
fn request(cloud: &Cloud, extra: Value, uuids: &[String]) -> Value {
    request_of(cloud, (1, 512, 1), extra, uuids)
}

/// [`request`] of a flavor of `(vcpus, memory_mb, root_gb)`.
fn request_of(cloud: &Cloud, flavor: (i64, i64, i64), extra: Value, uuids: &[String]) -> Value {
    let mut spec = cloud.spec(flavor, extra, uuids);
    let data = &mut spec["nova_object.data"];
    data["image"]["nova_object.data"]["properties"]["nova_object.version"] = json!("1.0");
    for unset in [
        "numa_topology",
        "pci_requests",
        "ignore_hosts",
        "force_hosts",
        "force_nodes",
        "requested_destination",
        "retry",
        "instance_group",
    ] {
        data[unset] = Value::Null;
    }
    data["scheduler_hints"] = json!({});
    data["requested_resources"] = json!([]);
    spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_python_filters_leave_the_hosts_nova_leaves() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let venv = venv::find();
    let cloud = Cloud::new("pyfilters").await;
    let hosts = ["pyf-r1-a", "pyf-r1-b", "pyf-r2-a", "pyf-r2-b"];
    let mut providers = Vec::new();
    for host in hosts {
        providers.push(cloud.host(host, (16, 1.0), 16384, 200).await);
    }
    // What a resource tracker reports and nova's HostState reads.
    sqlx::query(
        "UPDATE compute_nodes SET supported_instances = '[[\"x86_64\", \"kvm\", \"hvm\"]]'",
    )
    .execute(&cloud.cell)
    .await
    .unwrap();
    let api = MySqlPool::connect(&nova_schema::sqlx_url(&cloud.api_db))
        .await
        .expect("API database");
    for host in hosts {
        // nova's HostManager reads a host's instances only through its host mapping.
        sqlx::query("INSERT INTO host_mappings (created_at, cell_id, host) SELECT UTC_TIMESTAMP(), id, ? FROM cell_mappings WHERE name = 'cell1'")
            .bind(host)
            .execute(&api)
            .await
            .unwrap();
    }
    aggregate(
        &api,
        "licensed",
        &[("licence", "oracle"), ("rack_rank", "2")],
        &["pyf-r1-a", "pyf-r2-a"],
    )
    .await;
    aggregate(
        &api,
        "other",
        &[
            ("licence", "sap"),
            ("rack_rank", "5"),
            ("rack_weight_multiplier", "0.5"),
        ],
        &["pyf-r2-b"],
    )
    .await;
    for (host, n) in [("pyf-r1-b", 2), ("pyf-r2-a", 1)] {
        for _ in 0..n {
            sqlx::query("INSERT INTO instances (created_at, uuid, host, node, deleted, vm_state, project_id, user_id) VALUES (UTC_TIMESTAMP(), ?, ?, ?, 0, 'active', 'p', 'u')")
                .bind(uuid())
                .bind(host)
                .bind(host)
                .execute(&cloud.cell)
                .await
                .unwrap();
        }
    }

    let dir = std::env::temp_dir().join(format!("nsrs-pyfilters-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let conf = nova_conf(
        &dir,
        &cloud,
        &venv,
        "ComputeFilter,LicenceFilter,RackHintFilter,InstanceCapFilter,ExplodingFilter",
    );
    let config = nova_scheduler::config::load(std::slice::from_ref(&conf), &[]).expect("nova.conf");
    let scheduler =
        nova_scheduler::app::build_scheduler(&config).expect("the operator's classes load");
    assert!(scheduler.weighers.names().ends_with(&["RackWeigher"]));
    assert_eq!(
        scheduler.filters.names(),
        [
            "ComputeFilter",
            "LicenceFilter",
            "RackHintFilter",
            "InstanceCapFilter",
            "ExplodingFilter"
        ]
    );
    let gate = Gate::start("pyfilters", None).await;
    let manager = cloud
        .scheduler_from(&gate.url, 3, &config, |_| {}, |_| {})
        .await;

    let mut oracle = Command::new(venv.join("bin/python"))
        .arg(ORACLE)
        .arg(&conf)
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .env("PYTHONPATH", PLUGINS)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("nova's filter handler");
    let mut to_oracle = oracle.stdin.take().unwrap();
    let mut from_oracle = BufReader::new(oracle.stdout.take().unwrap()).lines();

    // (flavor extra specs, scheduler hints, the hosts nova should leave)
    let cases: Vec<(Value, Value, Vec<&str>)> = vec![
        (
            json!({}),
            json!({}),
            vec!["pyf-r1-a", "pyf-r2-a", "pyf-r2-b"],
        ),
        (
            json!({"mycloud:licence": "oracle"}),
            json!({}),
            vec!["pyf-r1-a", "pyf-r2-a"],
        ),
        (
            json!({"mycloud:licence": "oracle"}),
            json!({"rack": ["pyf-r2"]}),
            vec!["pyf-r2-a"],
        ),
        (
            json!({}),
            json!({"rack": ["pyf-r1"], "max_instances": ["3"]}),
            vec!["pyf-r1-a", "pyf-r1-b"],
        ),
        (
            json!({}),
            json!({"max_instances": ["1"]}),
            vec!["pyf-r1-a", "pyf-r2-b"],
        ),
        (
            json!({"mycloud:licence": "sap"}),
            json!({"rack": ["pyf-r1"]}),
            vec![],
        ),
    ];
    for (extra, hints, expected) in cases {
        let uuids = vec![uuid()];
        let mut spec = request(&cloud, extra.clone(), &uuids);
        spec["nova_object.data"]["scheduler_hints"] = hints.clone();
        writeln!(
            to_oracle,
            "{}",
            json!({"spec_obj": spec, "providers": providers})
        )
        .unwrap();
        let nova: Value = serde_json::from_str(&from_oracle.next().unwrap().unwrap()).unwrap();
        let nova_hosts: BTreeSet<String> = serde_json::from_value(nova["hosts"].clone())
            .unwrap_or_else(|_| panic!("nova's filter handler: {nova}"));
        assert_eq!(
            nova_hosts,
            expected.iter().map(|h| h.to_string()).collect(),
            "nova, for {extra} {hints}"
        );

        let result = select(&manager, spec, &uuids).await;
        let explained = manager
            .explain(DecisionQuery {
                instance: Some(uuids[0].clone()),
                request_id: None,
                host: None,
            })
            .await
            .expect("the decision is kept");
        let weighing: Vec<(String, f64)> = explained["explanation"]["weighing"]["hosts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| {
                (
                    h["host"].as_str().unwrap().to_string(),
                    h["weight"].as_f64().unwrap(),
                )
            })
            .collect();
        let ours: BTreeSet<String> = weighing.iter().map(|(h, _)| h.clone()).collect();
        if ours.len() > 1 {
            // Every weight as nova's weight handler gives it, the operator's
            // RackWeigher (its aggregate multiplier included) among nova's own.
            for (host, weight) in &weighing {
                let nova_weight = nova["weights"][host].as_f64().unwrap();
                assert!(
                    (weight - nova_weight).abs() < 1e-9,
                    "{host}: {weight} here, {nova_weight} in nova, for {extra} {hints}"
                );
            }
        }
        match result {
            Ok(selected) => {
                let chosen = &selected[0][0].service_host;
                assert!(
                    nova_hosts.contains(chosen),
                    "{chosen} for {extra} {hints}: nova leaves {nova_hosts:?}"
                );
                assert_eq!(ours, nova_hosts, "for {extra} {hints}: {explained}");
                // nova's best host, when no other ties with it, is the one chosen.
                let mut by_weight: Vec<(f64, String)> = nova["weights"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(h, w)| (w.as_f64().unwrap(), h.clone()))
                    .collect();
                by_weight.sort_by(|a, b| b.0.total_cmp(&a.0));
                if by_weight.len() == 1 || by_weight[0].0 > by_weight[1].0 {
                    assert_eq!(chosen, &by_weight[0].1, "for {extra} {hints}: {nova}");
                }
                cloud.admin.delete_allocations(&uuids[0]).await;
            }
            Err(e) => {
                assert!(
                    nova_hosts.is_empty(),
                    "{e:?} for {extra} {hints}: nova leaves {nova_hosts:?}; ours: {explained}"
                );
                assert_eq!(e.class, "NoValidHost", "{e:?}");
            }
        }
    }

    // Two instances at once: each is placed on a host nova leaves for the first.
    let uuids = vec![uuid(), uuid()];
    let spec = request(&cloud, json!({"mycloud:licence": "oracle"}), &uuids);
    writeln!(
        to_oracle,
        "{}",
        json!({"spec_obj": spec, "providers": providers})
    )
    .unwrap();
    let nova: Value = serde_json::from_str(&from_oracle.next().unwrap().unwrap()).unwrap();
    assert_eq!(nova["hosts"], json!(["pyf-r1-a", "pyf-r2-a"]), "{nova}");
    let placed = select(&manager, spec, &uuids).await.expect("two placed");
    for (instance, selection) in uuids.iter().zip(&placed) {
        assert!(
            ["pyf-r1-a", "pyf-r2-a"].contains(&selection[0].service_host.as_str()),
            "{instance}: {}",
            selection[0].service_host
        );
        cloud.admin.delete_allocations(instance).await;
    }

    // A rebuild on its own host: nova's _filter_one skips the classes whose
    // RUN_ON_REBUILD is false, so the full host stays; without the rebuild marker
    // InstanceCapFilter removes it.
    for (rebuild, expected) in [(true, vec!["pyf-r1-b"]), (false, vec![])] {
        let uuids = vec![uuid()];
        let mut spec = request(&cloud, json!({}), &uuids);
        spec["nova_object.data"]["requested_destination"] = claims_cloud::envelope(
            "Destination",
            "1.4",
            json!({"host": "pyf-r1-b", "node": "pyf-r1-b"}),
        );
        if rebuild {
            spec["nova_object.data"]["scheduler_hints"] = json!({"_nova_check_type": ["rebuild"]});
        }
        writeln!(
            to_oracle,
            "{}",
            json!({"spec_obj": spec, "providers": providers})
        )
        .unwrap();
        let nova: Value = serde_json::from_str(&from_oracle.next().unwrap().unwrap()).unwrap();
        assert_eq!(nova["hosts"], json!(expected), "rebuild {rebuild}: {nova}");
        let result = select(&manager, spec, &uuids).await;
        match result {
            Ok(selected) if rebuild => assert_eq!(selected[0][0].service_host, "pyf-r1-b"),
            Err(e) if !rebuild => assert_eq!(e.class, "NoValidHost", "{e:?}"),
            other => panic!("rebuild {rebuild}: {other:?}"),
        }
    }

    // A class that raises: the whole request fails with its exception, as in nova
    // (the exception's class, module and message reach the caller).
    let uuids = vec![uuid()];
    let mut spec = request(&cloud, json!({}), &uuids);
    spec["nova_object.data"]["scheduler_hints"] = json!({"explode": ["1"]});
    writeln!(
        to_oracle,
        "{}",
        json!({"spec_obj": spec, "providers": providers})
    )
    .unwrap();
    let nova: Value = serde_json::from_str(&from_oracle.next().unwrap().unwrap()).unwrap();
    assert!(
        nova["raised"]
            .as_str()
            .is_some_and(|r| r.starts_with("RuntimeError: exploded on")),
        "{nova}"
    );
    let failed = select(&manager, spec, &uuids).await.unwrap_err();
    // The class, module and message as nova's; the host named in the message is
    // the first the class was asked about, and the two lists are not in one order.
    assert_eq!(
        (failed.class.as_str(), failed.module.as_str()),
        ("RuntimeError", "builtins"),
        "{failed:?}"
    );
    assert!(failed.message.starts_with("exploded on pyf-"), "{failed:?}");

    drop(to_oracle);
    assert!(oracle.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Generated requests over a generated cloud, decided by a read-only manager (the
/// shadow's: Placement's candidates, the operator's classes, nova's weighers, no
/// claim) and by nova's own handlers: the hosts left and every weight agree, case
/// by case. `NSRS_PYDIFF_CASES` (default 2,000) and `NSRS_PYDIFF_SEED` vary it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_requests_are_decided_as_nova_decides_them_with_the_operators_classes() {
    use rand::rngs::StdRng;
    use rand::{RngExt, SeedableRng};
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let cases: usize = std::env::var("NSRS_PYDIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let seed: u64 = std::env::var("NSRS_PYDIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(45);
    let mut rng = StdRng::seed_from_u64(seed);
    let venv = venv::find();
    let cloud = Cloud::new("pygen").await;
    let api = MySqlPool::connect(&nova_schema::sqlx_url(&cloud.api_db))
        .await
        .expect("API database");

    // Twelve hosts in four racks, of different sizes and loads.
    let mut hosts = Vec::new();
    for rack in 1..=4 {
        for slot in ["a", "b", "c"] {
            let host = format!("pyg-r{rack}-{slot}");
            let vcpus = [8, 16, 32][rng.random_range(0..3)];
            let ratio = [1.0, 2.0][rng.random_range(0..2)];
            let ram = [8192, 16384, 32768][rng.random_range(0..3)];
            let disk = [100, 200, 400][rng.random_range(0..3)];
            cloud.host(&host, (vcpus, ratio), ram, disk).await;
            sqlx::query(
                "UPDATE compute_nodes SET memory_mb_used = ?, vcpus_used = ?, \
                 local_gb_used = ? WHERE host = ?",
            )
            .bind(rng.random_range(0..65536i64))
            .bind(rng.random_range(0..32i64))
            .bind(rng.random_range(0..1000i64))
            .bind(&host)
            .execute(&cloud.cell)
            .await
            .unwrap();
            sqlx::query("INSERT INTO host_mappings (created_at, cell_id, host) SELECT UTC_TIMESTAMP(), id, ? FROM cell_mappings WHERE name = 'cell1'")
                .bind(&host)
                .execute(&api)
                .await
                .unwrap();
            for _ in 0..rng.random_range(0..5) {
                sqlx::query("INSERT INTO instances (created_at, uuid, host, node, deleted, vm_state, project_id, user_id) VALUES (UTC_TIMESTAMP(), ?, ?, ?, 0, 'active', 'p', 'u')")
                    .bind(uuid())
                    .bind(&host)
                    .bind(&host)
                    .execute(&cloud.cell)
                    .await
                    .unwrap();
            }
            hosts.push(host);
        }
    }
    // The free RAM and disk nova's weighers read, from the loads drawn above.
    sqlx::query(
        "UPDATE compute_nodes SET free_ram_mb = memory_mb - memory_mb_used, \
         free_disk_gb = local_gb - local_gb_used",
    )
    .execute(&cloud.cell)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE compute_nodes SET supported_instances = '[[\"x86_64\", \"kvm\", \"hvm\"]]'",
    )
    .execute(&cloud.cell)
    .await
    .unwrap();
    // Aggregates with licences, rack ranks and (some) weight multipliers, over
    // random hosts: a host may be in several, with conflicting values.
    for k in 0..6 {
        let licence = ["oracle", "sap", "ibm"][rng.random_range(0..3)];
        let rank = match rng.random_bool(0.2) {
            true => format!("{}.5", rng.random_range(0..9)),
            false => rng.random_range(0..9).to_string(),
        };
        let mut metadata = vec![("licence", licence.to_string()), ("rack_rank", rank)];
        if rng.random_bool(0.4) {
            let multiplier = ["0.5", "2.0", "-1.0"][rng.random_range(0..3)];
            metadata.push(("rack_weight_multiplier", multiplier.to_string()));
        }
        let members: Vec<&str> = hosts
            .iter()
            .filter(|_| rng.random_bool(0.35))
            .map(String::as_str)
            .collect();
        let metadata: Vec<(&str, &str)> = metadata.iter().map(|(k, v)| (*k, v.as_str())).collect();
        aggregate(&api, &format!("agg-{k}"), &metadata, &members).await;
    }

    let dir = std::env::temp_dir().join(format!("nsrs-pygen-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let conf = nova_conf(
        &dir,
        &cloud,
        &venv,
        "ComputeFilter,LicenceFilter,RackHintFilter,InstanceCapFilter",
    );
    let config = nova_scheduler::config::load(std::slice::from_ref(&conf), &[]).expect("nova.conf");
    let gate = Gate::start("pygen", None).await;
    let manager = cloud
        .scheduler_from(&gate.url, seed, &config, |_| {}, |_| {})
        .await
        .read_only();

    // The requests: a flavor, a licence asked or not, the rack and cap hints; with
    // each, the providers Placement offers for its flavor (what nova-scheduler hands
    // its HostManager).
    let mut offered: std::collections::HashMap<(i64, i64, i64), Vec<String>> =
        std::collections::HashMap::new();
    let mut specs = Vec::with_capacity(cases);
    for _ in 0..cases {
        let uuids = vec![uuid()];
        let mut extra = json!({});
        if let Some(licence) =
            [None, Some("oracle"), Some("sap"), Some("ibm")][rng.random_range(0..4)]
        {
            extra["mycloud:licence"] = json!(licence);
        }
        let flavor = (
            [1, 2, 4, 8][rng.random_range(0..4)],
            [512, 4096, 16384, 30000][rng.random_range(0..4)],
            [1, 20, 150][rng.random_range(0..3)],
        );
        if let std::collections::hash_map::Entry::Vacant(entry) = offered.entry(flavor) {
            let (vcpus, ram, disk) = flavor;
            let (status, answer) = cloud
                .admin
                .call(
                    reqwest::Method::GET,
                    &format!(
                        "/allocation_candidates?resources=VCPU:{vcpus},MEMORY_MB:{ram},\
                         DISK_GB:{disk}&required={}",
                        cloud.tag
                    ),
                    None,
                )
                .await;
            assert_eq!(status, 200, "{answer}");
            let providers = answer["provider_summaries"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            entry.insert(providers);
        }
        let mut spec = request_of(&cloud, flavor, extra, &uuids);
        let mut hints = json!({});
        if let Some(rack) = [
            None,
            Some("pyg-r1"),
            Some("pyg-r2"),
            Some("pyg-r3"),
            Some("pyg-"),
        ][rng.random_range(0..5)]
        {
            hints["rack"] = json!([rack]);
        }
        if rng.random_bool(0.5) {
            hints["max_instances"] = json!([rng.random_range(0..6).to_string()]);
        }
        spec["nova_object.data"]["scheduler_hints"] = hints;
        specs.push((uuids, spec, offered[&flavor].clone()));
    }

    // nova's answers, computed beside ours: every case is written to it at once.
    let mut oracle = Command::new(venv.join("bin/python"))
        .arg(ORACLE)
        .arg(&conf)
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .env("PYTHONPATH", PLUGINS)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("nova's filter handler");
    let mut to_oracle = oracle.stdin.take().unwrap();
    let lines: Vec<String> = specs
        .iter()
        .map(|(_, spec, offered)| {
            json!({"spec_obj": spec, "providers": offered, "reuse_states": true}).to_string()
        })
        .collect();
    let writer = std::thread::spawn(move || {
        for line in lines {
            writeln!(to_oracle, "{line}").unwrap();
        }
    });
    let mut from_oracle = BufReader::new(oracle.stdout.take().unwrap()).lines();

    let ctx = nova_scheduler::rpc::RequestContext::from_map(
        json!({"user_id": "u", "project_id": "p", "request_id": "req-pygen"})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let (mut placed, mut none_left, mut weighed_several) = (0, 0, 0);
    // Ours, a few at a time (each waits on Placement most of its time), in order.
    use futures_util::StreamExt;
    let mut decisions = futures_util::stream::iter(specs.iter().map(|(uuids, spec, _)| {
        let args = json!({"spec_obj": spec, "instance_uuids": uuids, "return_objects": true, "return_alternates": true});
        let (manager, ctx) = (&manager, &ctx);
        async move {
            manager
                .shadow_decide(ctx, args.as_object().unwrap(), "4.5")
                .await
        }
    }))
    .buffered(4);
    for (case, (_, spec, _)) in specs.iter().enumerate() {
        let nova: Value = serde_json::from_str(&from_oracle.next().unwrap().unwrap()).unwrap();
        let what = || {
            format!(
                "case {case} (NSRS_PYDIFF_SEED={seed}): {} {}",
                spec["nova_object.data"]["flavor"]["nova_object.data"],
                spec["nova_object.data"]["scheduler_hints"]
            )
        };
        let nova_hosts: BTreeSet<String> = serde_json::from_value(nova["hosts"].clone())
            .unwrap_or_else(|_| panic!("nova's handlers, {}: {nova}", what()));
        let decision = decisions.next().await.expect("a decision per case");
        let weighing: Vec<(String, f64)> = decision
            .account
            .as_ref()
            .and_then(|a| a.weighing.as_ref())
            .map(|w| w.hosts.iter().map(|h| (h.host.clone(), h.weight)).collect())
            .unwrap_or_default();
        let ours: BTreeSet<String> = weighing.iter().map(|(h, _)| h.clone()).collect();
        assert_eq!(ours, nova_hosts, "{}: {:?}", what(), decision.account);
        match &decision.answers[0] {
            nova_scheduler::scheduler::compare::Answer::Placed { host, .. } => {
                placed += 1;
                let best = weighing[0].1;
                assert!(
                    weighing.iter().any(|(h, w)| h == host && *w == best),
                    "{}: placed on {host}, not a best host of {weighing:?}",
                    what()
                );
            }
            other => {
                none_left += 1;
                assert!(
                    nova_hosts.is_empty(),
                    "{}: {other:?} {:?}",
                    what(),
                    decision.failure
                );
            }
        }
        if ours.len() > 1 {
            weighed_several += 1;
            for (host, weight) in &weighing {
                let nova_weight = nova["weights"][host].as_f64().unwrap();
                assert!(
                    (weight - nova_weight).abs() < 1e-9,
                    "{}: {host} weighs {weight} here, {nova_weight} in nova",
                    what()
                );
            }
        }
    }
    writer.join().unwrap();
    assert!(oracle.wait().unwrap().success());
    eprintln!(
        "{cases} generated cases (seed {seed}): {placed} placed, {none_left} with no host, \
         {weighed_several} with several hosts weighed"
    );
    // The generated cloud and requests reach every outcome.
    assert!(placed > cases / 10 && none_left > cases / 10 && weighed_several > cases / 10);
    let _ = std::fs::remove_dir_all(&dir);
}
