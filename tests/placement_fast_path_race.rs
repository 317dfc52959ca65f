// SPDX-License-Identifier: Apache-2.0
//! Race test of the Placement fast path: two daemons, both with
//! `[placement_database] connection` (allocation candidates computed from their own
//! provider index), consume the same scheduler queue while nova's own
//! `SchedulerAPI.select_destinations` sends a concurrent stream of 1–3-instance boot
//! requests that exhausts a small cloud (four hosts seeded by `scripts/seed_cloud.py`
//! into nova-manage databases and the real Placement).
//!
//! Afterwards, from Placement itself: no provider's usage exceeds
//! `(total - reserved) × allocation_ratio`; every request was answered (placed or
//! NoValidHost, nothing else); every instance of a placed request holds an allocation
//! on the provider it was sent to, and no instance of a refused request holds one (no
//! partial claim). Both daemons must have answered from the index (no fallback)
//! and claimed each request with one `POST /allocations` (batched claims).
//!
//! The second scenario seeds provider trees (`seed_cloud.py --nested`: a vGPU device
//! and an Open vSwitch bridge with bandwidth under every compute node, DISK_GB in a
//! pool shared via aggregate) and asks for a vGPU and bandwidth in granular groups
//! beside the unsuffixed group: each placed instance must hold exactly its flavor's
//! classes, all within its host's tree and the pool. The two scenarios share the
//! process's Placement and run one after the other.

#[path = "common/daemon_proc.rs"]
mod daemon_proc;
#[path = "common/nova_schema.rs"]
mod nova_schema;
#[path = "common/placement_server.rs"]
mod placement_server;
#[path = "common/venv.rs"]
mod venv;

use daemon_proc::{
    nova_client, nova_conf_on, own_vhost, placement_section, seed_cloud_with, Daemon,
};
use serde_json::Value;
use sqlx::mysql::MySqlPool;
use sqlx::{AssertSqlSafe, Executor};
use std::collections::BTreeSet;

const REQUESTS: usize = 48;

/// Concurrent boot requests through nova's SchedulerAPI; prints one JSON line.
const CLIENT: &str = r#"
import sys, json, warnings, concurrent.futures
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[2])
import nsrs_helpers as H
H.init_nova_client(sys.argv[1])
from nova.scheduler import rpcapi
from nova import exception
n = int(sys.argv[3])
flavor = H.make_flavor(4, 16384, 40)
flavor.extra_specs.update(json.loads(sys.argv[4]))
api = rpcapi.SchedulerAPI()
def one(i):
    ctxt = H.user_context()
    uuids = [H.new_uuid() for _ in range(1 + i % 3)]
    spec = H.make_spec(ctxt, flavor, uuids)
    try:
        sel = api.select_destinations(ctxt, spec, uuids, return_objects=True,
                                      return_alternates=False)
        return {"uuids": uuids, "placed": [s[0].compute_node_uuid for s in sel]}
    except exception.NoValidHost:
        return {"uuids": uuids, "placed": None}
with concurrent.futures.ThreadPoolExecutor(8) as pool:
    results = list(pool.map(one, range(n)))
print(json.dumps(results))
"#;

async fn get(http: &reqwest::Client, url: &str, path: &str) -> Value {
    let resp = http
        .get(format!("{url}{path}"))
        .header("X-Auth-Token", "admin")
        .header("OpenStack-API-Version", "placement 1.36")
        .send()
        .await
        .expect("placement");
    assert!(resp.status().is_success(), "GET {path}: {}", resp.status());
    resp.json().await.expect("json")
}

/// One race at a time: both use the process's Placement.
static ONE_RACE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The resource classes of the nested scenario's flavor.
const NESTED_CLASSES: [&str; 6] = [
    "DISK_GB",
    "MEMORY_MB",
    "NET_BW_EGR_KILOBIT_PER_SEC",
    "NET_BW_IGR_KILOBIT_PER_SEC",
    "VCPU",
    "VGPU",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_never_overcommit_and_leave_no_partial_claim() {
    let _one = ONE_RACE.lock().await;
    race("nsrs_fastpath_race", 11, &[], "{}").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_never_overcommit_across_provider_trees() {
    let _one = ONE_RACE.lock().await;
    let extra_specs = serde_json::json!({
        "resources1:VGPU": "1",
        "resources2:NET_BW_EGR_KILOBIT_PER_SEC": "1000",
        "resources2:NET_BW_IGR_KILOBIT_PER_SEC": "1000",
        "trait2:CUSTOM_PHYSNET_PUBLIC": "required",
        "trait2:CUSTOM_VNIC_TYPE_NORMAL": "required",
        "group_policy": "none",
    });
    // Placement is the process's: other host names and uuids than the flat race's.
    let seed_args = ["--nested", "--name-prefix", "nst"];
    race(
        "nsrs_fastpath_nested",
        12,
        &seed_args,
        &extra_specs.to_string(),
    )
    .await;
}

async fn race(name: &str, seed: u32, seed_args: &[&str], extra_specs: &str) {
    let nested = !seed_args.is_empty();
    let venv = venv::find();
    let prefix = nova_schema::tagged(name);
    let dir = nova_schema::create(&venv, &prefix, &["cell1"])
        .await
        .expect("nova-manage schema");
    let placement = placement_server::url().await;
    let transport = own_vhost(&prefix);
    let common = format!(
        "{}{}",
        nova_conf_on(&dir, &transport),
        placement_section(placement)
    );
    let client_conf = dir.join("client.conf");
    std::fs::write(&client_conf, &common).expect("client.conf");
    seed_cloud_with(&venv, &client_conf, &dir, 4, seed, seed_args);
    let cell = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_cell1")))
        .await
        .expect("cell db");
    cell.execute(AssertSqlSafe(
        "UPDATE services SET last_seen_up = UTC_TIMESTAMP() WHERE deleted = 0",
    ))
    .await
    .expect("heartbeat");

    let conf = dir.join("daemon.conf");
    std::fs::write(
        &conf,
        format!(
            "{common}\n[placement_database]\nconnection = {}\n",
            nova_schema::sqla_url(&placement_server::db())
        ),
    )
    .expect("daemon conf");
    let daemons = [
        Daemon::start(
            &conf,
            dir.join("daemon-a.log"),
            &[("OS_DEFAULT__HOST", "sched-a")],
        ),
        Daemon::start(
            &conf,
            dir.join("daemon-b.log"),
            &[("OS_DEFAULT__HOST", "sched-b")],
        ),
    ];
    for d in &daemons {
        let text = d.wait_ready();
        assert!(text.contains("placement fast path on"), "{text}");
    }

    let out = nova_client(
        &venv,
        CLIENT,
        &client_conf,
        &[REQUESTS.to_string(), extra_specs.to_string()],
    );
    assert!(
        out.status.success(),
        "a request was not answered with a placement or NoValidHost: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<Value> = serde_json::from_slice(&out.stdout).expect("client output is JSON");
    assert_eq!(results.len(), REQUESTS);

    let http = reqwest::Client::new();
    let (mut placed, mut refused) = (0, 0);
    for r in &results {
        let uuids: Vec<&str> = r["uuids"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let targets = r["placed"].as_array();
        for (n, uuid) in uuids.iter().enumerate() {
            let allocs = get(&http, placement, &format!("/allocations/{uuid}")).await;
            let held: Vec<&String> = allocs["allocations"].as_object().unwrap().keys().collect();
            match targets {
                Some(t) if nested => {
                    let target = t[n].as_str().unwrap();
                    let tree = get(
                        &http,
                        placement,
                        &format!("/resource_providers?in_tree={target}"),
                    )
                    .await;
                    let tree: BTreeSet<&str> = tree["resource_providers"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .filter_map(|rp| rp["uuid"].as_str())
                        .collect();
                    assert!(held.iter().any(|rp| *rp == target), "{uuid}: {allocs}");
                    let pools = held.iter().filter(|rp| !tree.contains(rp.as_str())).count();
                    assert!(pools <= 1, "{uuid} holds outside its host's tree: {allocs}");
                    let classes: BTreeSet<&str> = allocs["allocations"]
                        .as_object()
                        .unwrap()
                        .values()
                        .flat_map(|a| a["resources"].as_object().unwrap().keys())
                        .map(String::as_str)
                        .collect();
                    assert_eq!(
                        classes,
                        BTreeSet::from(NESTED_CLASSES),
                        "instance {uuid} of a placed request: {allocs}"
                    );
                }
                Some(t) => {
                    let target = t[n].as_str().unwrap();
                    assert_eq!(held, vec![target], "instance {uuid} of a placed request");
                }
                None => assert!(
                    held.is_empty(),
                    "instance {uuid} of a refused request holds {held:?}"
                ),
            }
        }
        if targets.is_some() {
            placed += uuids.len();
        } else {
            refused += 1;
        }
    }
    assert!(
        placed > 0 && refused > 0,
        "placed {placed}, refused {refused}: the cloud must fill up"
    );

    let providers = get(&http, placement, "/resource_providers").await;
    for rp in providers["resource_providers"].as_array().unwrap() {
        let uuid = rp["uuid"].as_str().unwrap();
        let inv = get(
            &http,
            placement,
            &format!("/resource_providers/{uuid}/inventories"),
        )
        .await;
        let usages = get(
            &http,
            placement,
            &format!("/resource_providers/{uuid}/usages"),
        )
        .await;
        for (rc, i) in inv["inventories"].as_object().unwrap() {
            let capacity = (i["total"].as_i64().unwrap() - i["reserved"].as_i64().unwrap()) as f64
                * i["allocation_ratio"].as_f64().unwrap();
            let used = usages["usages"][rc].as_i64().unwrap_or(0);
            assert!(
                used as f64 <= capacity,
                "{uuid} {rc}: used {used} > capacity {capacity}"
            );
        }
    }
    drop(daemons);
    for name in ["daemon-a.log", "daemon-b.log"] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_default();
        assert!(!text.contains("fallback to Placement"), "{name}:\n{text}");
        // New consumers on the fast path: every claim is one POST /allocations.
        assert!(text.contains("claim_mode=\"batched\""), "{name}:\n{text}");
        assert!(
            !text.contains("claim_mode=\"per-instance\""),
            "{name}:\n{text}"
        );
        assert!(
            text.contains("select_destinations"),
            "{name} answered nothing:\n{text}"
        );
    }
    eprintln!("placed {placed} instances, refused {refused} requests");
    cell.close().await;
}
