// SPDX-License-Identifier: Apache-2.0
//! The operator tools against a real cloud (nova-manage databases, the real
//! Placement): `capacity` run as the binary counts, for three flavors, exactly the
//! single-instance `select_destinations` calls the daemon (the binary, over RabbitMQ,
//! its warm host-state cache keeping its decisions' consumption, claiming in the real
//! Placement) answers before its first NoValidHost, on the same hosts in the same
//! order; it writes nothing (every Placement request it makes is a GET, usages and
//! generations, the `services` and `compute_nodes` tables are unchanged). `snapshot`
//! then `simulate --snapshot` places a mix of requests as the daemon places them, and
//! `replay` of the daemon's own recording of those calls (`record_calls`) on the snapshot
//! gives every instance the daemon's answer.

use crate::amqp_client::TestClient;
use crate::claims_cloud::{uuid, Cloud, Gate};
use crate::daemon_proc::{own_vhost, placement_section, rabbitmqctl, Daemon};
use crate::nova_schema;
use crate::placement_server;
use reqwest::Method;
use serde_json::{json, Value};
use sqlx::mysql::MySqlPool;
use sqlx::Row;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_nova-scheduler-rs");

/// `(name, vcpus, memory_mb, root_gb)`: small hosts run out of VCPU, big ones of
/// DISK_GB; `large` runs out of MEMORY_MB on both; `huge` fits only the big hosts.
const FLAVORS: [(&str, i64, i64, i64); 3] = [
    ("cap.small", 1, 1024, 10),
    ("cap.large", 2, 6144, 20),
    ("cap.huge", 6, 12288, 90),
];

/// The daemon as a process on `cloud` (the real Placement, its own RabbitMQ vhost,
/// nova.conf's defaults otherwise), and a client that calls it.
pub(crate) struct RunningDaemon {
    pub(crate) daemon: Daemon,
    client: TestClient,
    pub(crate) vhost: String,
}

impl RunningDaemon {
    /// `extra`: more lines of `[nova_scheduler_rs]`.
    pub(crate) async fn start(cloud: &Cloud, dir: &Path, tag: &str, extra: &str) -> RunningDaemon {
        let vhost = nova_schema::tagged(&format!("nsrs_cap_{tag}"));
        // A vhost left by an earlier run; none is the usual case.
        let _ = Command::new("rabbitmqctl")
            .args(["delete_vhost", &vhost])
            .output();
        let transport = own_vhost(&vhost);
        let conf = dir.join(format!("daemon-{tag}.conf"));
        std::fs::write(
            &conf,
            format!(
                "[DEFAULT]\ntransport_url = {transport}\nhost = nsrs-cap-daemon\n\
                 [database]\nconnection = {}\n[api_database]\nconnection = {}\n\
                 [nova_scheduler_rs]\nstate_dir = {}\n{extra}{}",
                nova_schema::sqla_url(&cloud.cell0_db),
                nova_schema::sqla_url(&cloud.api_db),
                dir.join(format!("state-{tag}")).display(),
                placement_section(placement_server::url().await),
            ),
        )
        .expect("daemon nova.conf");
        let daemon = Daemon::start(&conf, dir.join(format!("daemon-{tag}.log")), &[]);
        daemon.wait_ready();
        let client = TestClient::on(&format!("amqp://guest:guest@127.0.0.1:5672/{vhost}")).await;
        RunningDaemon {
            daemon,
            client,
            vhost,
        }
    }

    /// One `select_destinations` (RPC 4.5): the chosen host of each instance, or the
    /// failure's class.
    async fn select(&mut self, spec: Value, uuids: &[String]) -> Result<Vec<String>, String> {
        let reply = self
            .client
            .call(
                "nova",
                "scheduler",
                "select_destinations",
                json!({
                    "spec_obj": spec,
                    "instance_uuids": uuids,
                    "return_objects": true,
                    "return_alternates": false,
                }),
                "4.5",
            )
            .await;
        if reply.inner["failure"] != Value::Null {
            let failure = reply.inner["failure"].to_string();
            return Err(if failure.contains("NoValidHost") {
                "NoValidHost".into()
            } else {
                failure
            });
        }
        Ok(reply.inner["result"]
            .as_array()
            .expect("selections")
            .iter()
            .map(|list| {
                list[0]["nova_object.data"]["service_host"]
                    .as_str()
                    .expect("service_host")
                    .to_string()
            })
            .collect())
    }

    pub(crate) fn stop(self) {
        let log = self.daemon.log_text();
        drop(self.daemon);
        rabbitmqctl(&["delete_vhost", &self.vhost]);
        assert!(!log.contains("panicked"), "{log}");
    }

    /// SIGTERM, and the daemon's exit (it closes its recording on the way out).
    async fn stop_gracefully(mut self) {
        let pid = self.daemon.child.id().to_string();
        let term = Command::new("kill").args(["-TERM", &pid]).status();
        assert!(term.is_ok_and(|s| s.success()));
        let deadline = std::time::Instant::now() + Duration::from_secs(45);
        let status = loop {
            if let Some(status) = self.daemon.child.try_wait().expect("wait") {
                break status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no exit after SIGTERM"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(status.success(), "{}", self.daemon.log_text());
        self.stop();
    }
}

/// Runs the binary; its stdout.
fn tool(conf: &Path, args: &[&str]) -> String {
    let out = Command::new(BIN)
        .current_dir(conf.parent().expect("the configuration's directory"))
        .arg("--config-file")
        .arg(conf)
        .args(args)
        .output()
        .expect("nova-scheduler-rs");
    assert!(
        out.status.success(),
        "{args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every row of the tables the tools must not write, in each database.
async fn rows(pools: &[&MySqlPool]) -> Vec<String> {
    let mut out = Vec::new();
    for pool in pools {
        for table in ["services", "compute_nodes"] {
            let q = format!("CHECKSUM TABLE {table} EXTENDED");
            let row = sqlx::query(sqlx::AssertSqlSafe(q))
                .fetch_one(*pool)
                .await
                .expect("checksum");
            let sum: Option<i64> = row.try_get(1).ok().flatten();
            out.push(format!("{table} checksum {sum:?}"));
            let q = format!("SELECT * FROM {table} ORDER BY id");
            for row in sqlx::query(sqlx::AssertSqlSafe(q))
                .fetch_all(*pool)
                .await
                .expect("rows")
            {
                let cols: Vec<String> = (0..row.len())
                    .map(|i| {
                        row.try_get::<Option<String>, _>(i)
                            .map(|v| format!("{v:?}"))
                            .or_else(|_| row.try_get::<Option<i64>, _>(i).map(|v| format!("{v:?}")))
                            .or_else(|_| row.try_get::<Option<f64>, _>(i).map(|v| format!("{v:?}")))
                            .or_else(|_| {
                                row.try_get::<Option<chrono::NaiveDateTime>, _>(i)
                                    .map(|v| format!("{v:?}"))
                            })
                            .unwrap_or_else(|_| "?".into())
                    })
                    .collect();
                out.push(format!("{table}: {}", cols.join("|")));
            }
        }
    }
    out
}

/// Each provider's generation, inventories and usages.
async fn placement_state(cloud: &Cloud, rps: &[String]) -> Vec<Value> {
    let mut out = Vec::new();
    for rp in rps {
        let (_, p) = cloud
            .admin
            .call(Method::GET, &format!("/resource_providers/{rp}"), None)
            .await;
        out.push(json!({
            "generation": p["generation"],
            "usages": cloud.admin.usages(rp).await,
            "inventory": cloud.admin.inventory(rp).await,
        }));
    }
    out
}

fn extra_spec(cloud: &Cloud) -> String {
    format!("trait:{}=required", cloud.tag)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_counts_what_the_daemon_places_and_writes_nothing() {
    let cloud = Cloud::new("cap").await;
    let mut rps = Vec::new();
    let mut hosts = Vec::new();
    for (name, (vcpus, mem, disk)) in [
        ("cap-s0", (4, 8192, 50)),
        ("cap-s1", (4, 8192, 50)),
        ("cap-s2", (4, 8192, 50)),
        ("cap-s3", (4, 8192, 50)),
        ("cap-b0", (16, 32768, 150)),
        ("cap-b1", (16, 32768, 150)),
    ] {
        let rp = uuid();
        cloud.compute_node(name, &rp, (vcpus, mem, disk)).await;
        cloud
            .admin
            .compute_provider(
                &rp,
                name,
                (vcpus, 1.0),
                mem,
                disk,
                &["OWNER_NOVA", "COMPUTE_NODE", &cloud.tag],
            )
            .await;
        rps.push(rp);
        hosts.push(name);
    }
    // The big hosts in an availability zone; a flavor in the API database.
    let api = MySqlPool::connect(&nova_schema::sqlx_url(&cloud.api_db))
        .await
        .expect("api database");
    let agg = sqlx::query(
        "INSERT INTO aggregates (created_at, uuid, name) VALUES (UTC_TIMESTAMP(), ?, 'big')",
    )
    .bind(uuid())
    .execute(&api)
    .await
    .expect("aggregate")
    .last_insert_id();
    sqlx::query("INSERT INTO aggregate_metadata (created_at, aggregate_id, `key`, value) VALUES (UTC_TIMESTAMP(), ?, 'availability_zone', 'az-big')")
        .bind(agg)
        .execute(&api)
        .await
        .expect("aggregate metadata");
    for host in ["cap-b0", "cap-b1"] {
        sqlx::query("INSERT INTO aggregate_hosts (created_at, aggregate_id, host) VALUES (UTC_TIMESTAMP(), ?, ?)")
            .bind(agg)
            .bind(host)
            .execute(&api)
            .await
            .expect("aggregate host");
    }
    for (i, (name, vcpus, mem, disk)) in FLAVORS.iter().enumerate() {
        let id = sqlx::query(
            "INSERT INTO flavors (created_at, name, memory_mb, vcpus, swap, flavorid, \
             rxtx_factor, root_gb, ephemeral_gb, disabled, is_public) \
             VALUES (UTC_TIMESTAMP(), ?, ?, ?, 0, ?, 1.0, ?, 0, 0, 1)",
        )
        .bind(name)
        .bind(mem)
        .bind(vcpus)
        .bind(format!("cap-{i}"))
        .bind(disk)
        .execute(&api)
        .await
        .expect("flavor")
        .last_insert_id();
        sqlx::query("INSERT INTO flavor_extra_specs (created_at, flavor_id, `key`, value) VALUES (UTC_TIMESTAMP(), ?, ?, 'required')")
            .bind(id)
            .bind(format!("trait:{}", cloud.tag))
            .execute(&api)
            .await
            .expect("extra spec");
    }
    // Decisions retained on a host count until its compute node row is written
    // after them: let the rows' second pass.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    let gate = Gate::start("cap", None).await;
    let dir = std::env::temp_dir().join(format!("nsrs-cap-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let conf = dir.join("nova.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\nhost = nsrs-cap\n[database]\nconnection = {}\n[api_database]\nconnection = {}\n{}",
            nova_schema::sqla_url(&cloud.cell0_db),
            nova_schema::sqla_url(&cloud.api_db),
            placement_section(&gate.url)
        ),
    )
    .expect("nova.conf");
    let cell0 = MySqlPool::connect(&nova_schema::sqlx_url(&cloud.cell0_db))
        .await
        .expect("cell0");
    let rows_before = rows(&[&cloud.cell, &cell0]).await;
    let placement_before = placement_state(&cloud, &rps).await;

    // capacity, for each flavor: from the API database (small) or the command line.
    let spec = extra_spec(&cloud);
    let mut counted = Vec::new();
    for (name, vcpus, mem, disk) in FLAVORS {
        let (v, m, d) = (vcpus.to_string(), mem.to_string(), disk.to_string());
        let args: Vec<&str> = if name == "cap.small" {
            vec!["capacity", "--flavor", name, "--json", "--show", "100"]
        } else {
            vec![
                "capacity",
                "--vcpus",
                &v,
                "--ram",
                &m,
                "--disk",
                &d,
                "--extra-spec",
                &spec,
                "--json",
                "--show",
                "100",
            ]
        };
        let report: Value = serde_json::from_str(&tool(&conf, &args)).expect("JSON");
        assert_eq!(
            report["read_only"],
            "read-only: no service row, no claim, no RPC was written"
        );
        counted.push(report);
    }
    // The text form (shown with --nocapture; docs/operations.md quotes it).
    let text = tool(&conf, &["capacity", "--flavor", "cap.small", "--show", "5"]);
    println!("$ nova-scheduler-rs capacity --flavor cap.small --show 5\n{text}");
    assert!(text.contains("46 more instance(s) fit"), "{text}");
    assert!(text.ends_with("read-only: no service row, no claim, no RPC was written\n"));
    let counts: Vec<u64> = counted
        .iter()
        .map(|r| r["count"].as_u64().unwrap())
        .collect();
    assert_eq!(counts, vec![46, 14, 2], "{counted:#?}");
    // What runs out first, per class; where the instances go.
    let classes = |r: &Value| -> Vec<(i64, Value)> {
        r["host_classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["resources"]["VCPU"].as_i64().unwrap(),
                    c["runs_out_first"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(
        classes(&counted[0]),
        vec![(16, json!({"DISK_GB": 2})), (4, json!({"VCPU": 4}))]
    );
    assert_eq!(
        classes(&counted[1]),
        vec![(16, json!({"MEMORY_MB": 2})), (4, json!({"MEMORY_MB": 4}))]
    );
    assert_eq!(classes(&counted[2]), vec![(16, json!({"DISK_GB": 2}))]);
    assert_eq!(
        counted[0]["by_availability_zone"],
        json!({"az-big": 30, "nova": 16})
    );
    assert_eq!(counted[0]["by_aggregate"], json!({"big": 30}));
    assert_eq!(counted[0]["by_cell"], json!({"cell1": 46}));

    // Nothing was written: Placement saw only reads; the rows are as they were.
    let methods: Vec<String> = gate.exchanges().iter().map(|e| e.method.clone()).collect();
    assert!(!methods.is_empty());
    assert!(methods.iter().all(|m| m == "GET"), "{methods:?}");
    assert_eq!(placement_state(&cloud, &rps).await, placement_before);
    assert_eq!(rows(&[&cloud.cell, &cell0]).await, rows_before);

    // The snapshot, taken on the same untouched cloud.
    let snapshot = dir.join("snapshot.json");
    let text = tool(&conf, &["snapshot", "--output", "snapshot.json"]);
    println!("$ nova-scheduler-rs snapshot --output snapshot.json\n{text}");
    let text = tool(
        &conf,
        &[
            "simulate",
            "--snapshot",
            "snapshot.json",
            "--flavor",
            "cap.large",
            "--count",
            "3",
        ],
    );
    println!("$ nova-scheduler-rs simulate --snapshot snapshot.json --flavor cap.large --count 3\n{text}");
    let text = std::fs::read_to_string(&snapshot).expect("snapshot");
    assert!(!text.contains("mysql"), "no database URL in the snapshot");
    // The release the cloud is scheduled as, read from its service rows as `run` reads it.
    let taken: serde_json::Value = serde_json::from_str(&text).expect("snapshot JSON");
    let release = taken["nova_release"]
        .as_str()
        .expect("nova_release recorded");
    assert!(
        nova_scheduler::release::NovaSeries::parse(release).is_some(),
        "{release}"
    );
    assert!(methods.len() <= gate.exchanges().len());
    assert!(gate.exchanges().iter().all(|e| e.method == "GET"));
    assert_eq!(rows(&[&cloud.cell, &cell0]).await, rows_before);

    // The daemon's decisions, one flavor at a time on a fresh copy of the cloud:
    // single-instance calls until the first NoValidHost.
    for (f, ((name, vcpus, mem, disk), report)) in FLAVORS.iter().zip(&counted).enumerate() {
        let mut daemon = RunningDaemon::start(&cloud, &dir, &format!("f{f}"), "").await;
        let mut placed = Vec::new();
        let mut consumers = Vec::new();
        loop {
            let u = vec![uuid()];
            match daemon
                .select(cloud.spec((*vcpus, *mem, *disk), json!({}), &u), &u)
                .await
            {
                Ok(hosts) => {
                    placed.push(hosts[0].clone());
                    consumers.push(u[0].clone());
                }
                Err(class) => {
                    assert_eq!(class, "NoValidHost", "{name}");
                    break;
                }
            }
            assert!(placed.len() <= 100, "{name}: no end");
        }
        let first: Vec<String> = report["first"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h.as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            placed.len() as u64,
            report["count"].as_u64().unwrap(),
            "{name}"
        );
        assert_eq!(placed, first, "{name}: same hosts in the same order");
        daemon.stop();
        for c in consumers {
            cloud.admin.delete_allocations(&c).await;
        }
    }
    assert_eq!(
        placement_state(&cloud, &rps)
            .await
            .iter()
            .map(|p| p["usages"].clone())
            .collect::<Vec<_>>(),
        placement_before
            .iter()
            .map(|p| p["usages"].clone())
            .collect::<Vec<_>>()
    );

    // simulate --snapshot: a mix of requests, placed as the daemon places them.
    let requests = json!([
        {"flavor": "cap.large"},
        {"flavor": "cap.small", "num_instances": 3},
        {"flavor": "cap.huge"},
        {"vcpus": 2, "memory_mb": 2048, "root_gb": 10,
         "extra_specs": {format!("trait:{}", cloud.tag): "required"}, "num_instances": 2},
        {"flavor": "cap.large", "num_instances": 4},
        {"flavor": "cap.huge", "num_instances": 2},
        {"flavor": "cap.small", "num_instances": 5},
    ]);
    let file = dir.join("requests.json");
    std::fs::write(&file, requests.to_string()).expect("requests");
    let simulated: Value = serde_json::from_str(&tool(
        &conf,
        &[
            "simulate",
            "--snapshot",
            snapshot.to_str().unwrap(),
            "--requests",
            file.to_str().unwrap(),
            "--json",
        ],
    ))
    .expect("JSON");
    // The daemon records the calls it answers, for the replay below.
    let recording = dir.join("calls.jsonl.gz");
    let mut daemon = RunningDaemon::start(
        &cloud,
        &dir,
        "mix",
        &format!("record_calls = {}\n", recording.display()),
    )
    .await;
    let mut decided = Vec::new();
    for (r, req) in requests.as_array().unwrap().iter().enumerate() {
        let flavor = |k: &str, i: usize| {
            req[k]
                .as_i64()
                .or_else(|| {
                    let name = req["flavor"].as_str()?;
                    let f = FLAVORS.iter().find(|f| f.0 == name)?;
                    Some([f.1, f.2, f.3][i])
                })
                .unwrap()
        };
        let n = req["num_instances"].as_u64().unwrap_or(1) as usize;
        let u: Vec<String> = (0..n).map(|_| uuid()).collect();
        let spec = cloud.spec(
            (
                flavor("vcpus", 0),
                flavor("memory_mb", 1),
                flavor("root_gb", 2),
            ),
            json!({}),
            &u,
        );
        match daemon.select(spec, &u).await {
            Ok(hosts) => {
                for (i, host) in hosts.iter().enumerate() {
                    decided.push(json!({"request": r + 1, "instance": i + 1, "host": host}));
                }
            }
            Err(class) => decided.push(json!({"request": r + 1, "error": class})),
        }
    }
    daemon.stop_gracefully().await;
    let simulated: Vec<Value> = simulated["placements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| match p.get("error") {
            Some(_) => json!({"request": p["request"], "error": "NoValidHost"}),
            None => json!({"request": p["request"], "instance": p["instance"], "host": p["host"]}),
        })
        .collect();
    assert_eq!(simulated, decided);

    // replay: the daemon's recording of those calls, decided again on the snapshot
    // with the same configuration, gives every instance the daemon's answer.
    let replayed: Value = serde_json::from_str(&tool(
        &conf,
        &[
            "replay",
            "--snapshot",
            snapshot.to_str().unwrap(),
            "--recording",
            recording.to_str().unwrap(),
            "--json",
        ],
    ))
    .expect("JSON");
    let instances: u64 = requests
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["num_instances"].as_u64().unwrap_or(1))
        .sum();
    assert_eq!(replayed["calls"], 7, "{replayed:#}");
    assert_eq!(replayed["calls_replayed"], 7, "{replayed:#}");
    assert_eq!(
        replayed["instances"].as_u64(),
        Some(instances),
        "{replayed:#}"
    );
    assert_eq!(
        replayed["identical"].as_u64(),
        Some(instances),
        "{replayed:#}"
    );
    assert_eq!(replayed["warnings"], json!([]), "{replayed:#}");
    let _ = std::fs::remove_dir_all(&dir);
}
