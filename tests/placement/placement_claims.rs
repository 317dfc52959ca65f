// SPDX-License-Identifier: Apache-2.0
//! Claims, their release and alternates, through `SchedulerManager::select_destinations`
//! against the real Placement (openstack-placement 16 under gunicorn,
//! tests/common/placement_server.rs) and cell databases built by nova-manage.
//!
//! Each test has its own cell databases (compute services and nodes written as
//! nova-compute's resource tracker leaves them) and its own providers in Placement,
//! seeded through Placement's REST API and tagged with the test's CUSTOM_ trait
//! (the flavor requires it), so tests never see each other's hosts.
//!
//! Between the manager and Placement sits a forwarding proxy (`Gate`) in this
//! process: it passes every request to the real Placement and records what
//! Placement answered; for the race it also holds claims until both schedulers
//! have asked for candidates, so the race is forced rather than hoped for. It never
//! answers by itself, except when a test turns it "down" to play an outage (then it
//! closes connections without answering).
//!
//! The race runs two complete scheduler instances (each its own `SchedulerManager`,
//! host state store, Placement client and connection pools) in this one test
//! process, against the same Placement and cell database: the RPC layer, the only
//! part two daemon processes would add, plays no part in claiming.

use crate::claims_cloud;
use crate::daemon_proc;
use crate::http_stub;
use crate::nova_schema;
use crate::placement_admin;
use crate::venv;

use claims_cloud::*;
use daemon_proc::rabbitmqctl;
use nova_scheduler::rpc::RemoteError;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

// ---------------------------------------------------------------------------------------
// (a) Multi-instance: a failed claim releases every claim of the request.

/// Four instances; Placement holds one per host on two hosts (the cell databases
/// show plenty of room, so every host passes the filters and the claims decide).
/// Instances 1 and 2 are claimed, instance 3 is refused by Placement on both hosts:
/// the request ends in NoValidHost and Placement holds nothing for any of the four.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn third_of_four_unclaimable_releases_the_first_two() {
    let cloud = Cloud::new("multi").await;
    let a = cloud.host("multi-a", (2, 1.0), 4096, 40).await;
    let b = cloud.host("multi-b", (2, 1.0), 4096, 40).await;
    let gate = Gate::start("multi", None).await;
    let manager = cloud.scheduler(&gate.url, 1).await;
    let uuids: Vec<String> = (0..4).map(|_| uuid()).collect();

    let result = select(
        &manager,
        cloud.spec((2, 2048, 20), json!({}), &uuids),
        &uuids,
    )
    .await;

    assert_no_valid_host(&result, "There are not enough hosts available.");
    // What Placement answered: instance 1 and 2 claimed (possibly after a refusal on
    // the host the other took), instance 3 refused on both hosts, 4 never tried.
    let puts = gate.puts();
    let claimed: Vec<&String> = puts
        .iter()
        .filter(|(_, s)| *s == 204)
        .map(|(c, _)| c)
        .collect();
    assert_eq!(claimed, vec![&uuids[0], &uuids[1]], "{puts:?}");
    let third: Vec<u16> = puts
        .iter()
        .filter(|(c, _)| c == &uuids[2])
        .map(|(_, s)| *s)
        .collect();
    assert_eq!(
        third,
        vec![409, 409],
        "instance 3 tried on both hosts: {puts:?}"
    );
    assert!(!puts.iter().any(|(c, _)| c == &uuids[3]), "{puts:?}");
    let mut deleted = gate.deletes();
    deleted.sort();
    let mut want = vec![(uuids[0].clone(), 204), (uuids[1].clone(), 204)];
    want.sort();
    assert_eq!(deleted, want);
    // And Placement itself: nothing held, for any instance, on any host.
    for u in &uuids {
        assert_eq!(
            cloud.admin.allocations(u).await["allocations"],
            json!({}),
            "{u}"
        );
    }
    for rp in [&a, &b] {
        assert_eq!(
            cloud.admin.usages(rp).await,
            json!({"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0})
        );
    }
}

// ---------------------------------------------------------------------------------------
// (b) Alternates carry allocation requests Placement accepts.

/// Two instances on four hosts: each gets its host plus max_attempts - 1 = 2
/// alternates (the hosts not chosen). Each alternate's allocation request is the
/// one Placement returned for that host, and claiming it as nova-conductor does on
/// a reschedule succeeds in Placement: for the instance itself once its first claim
/// is gone, and for new consumers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alternates_allocation_requests_are_claimable() {
    let cloud = Cloud::new("alts").await;
    let mut rps = Vec::new();
    for i in 0..4 {
        rps.push(cloud.host(&format!("alts-{i}"), (8, 1.0), 16384, 200).await);
    }
    let manager = cloud.scheduler(&cloud.admin.url, 2).await;
    let uuids: Vec<String> = (0..2).map(|_| uuid()).collect();
    let flavor = (2, 2048, 20);
    // What Placement offers for this flavor, by provider.
    let (s, candidates) = cloud
        .admin
        .call(
            reqwest::Method::GET,
            &format!(
                "/allocation_candidates?resources=DISK_GB:20,MEMORY_MB:2048,VCPU:2&required={}",
                cloud.tag
            ),
            None,
        )
        .await;
    assert_eq!(s, 200);
    let offered: Vec<Value> = candidates["allocation_requests"]
        .as_array()
        .expect("allocation requests")
        .clone();
    assert_eq!(offered.len(), 4);

    let result = select(&manager, cloud.spec(flavor, json!({}), &uuids), &uuids)
        .await
        .expect("two instances placed");

    assert_eq!(result.len(), 2);
    let chosen: BTreeSet<&str> = result
        .iter()
        .map(|l| l[0].compute_node_uuid.as_str())
        .collect();
    assert_eq!(chosen.len(), 2, "two different hosts");
    let resources = json!({"DISK_GB": 20, "MEMORY_MB": 2048, "VCPU": 2});
    for (uuid, list) in uuids.iter().zip(&result) {
        assert_eq!(
            list.len(),
            3,
            "the host and max_attempts - 1 = 2 alternates"
        );
        for s in list {
            assert_eq!(s.allocation_request_version, "1.36");
            let rp = s.compute_node_uuid.as_str();
            assert!(rps.iter().any(|r| r == rp));
            assert_eq!(
                s.allocation_request["allocations"],
                json!({ rp: {"resources": resources} })
            );
            // Exactly an allocation request Placement returned for this host
            // (Placement at 1.36 adds `mappings`).
            let mut plain = s.allocation_request.clone();
            plain.as_object_mut().expect("dict").remove("mappings");
            assert!(
                offered
                    .iter()
                    .any(|o| o["allocations"] == plain["allocations"]),
                "{plain} not among {offered:?}"
            );
        }
        let alternates: BTreeSet<&str> = list[1..]
            .iter()
            .map(|s| s.compute_node_uuid.as_str())
            .collect();
        assert_eq!(alternates.len(), 2);
        assert!(
            alternates.is_disjoint(&chosen),
            "an alternate is a chosen host"
        );
        // The claim the scheduler made is the allocation request of the Selection.
        let held = cloud.admin.allocations(uuid).await;
        assert_eq!(
            held["allocations"][&list[0].compute_node_uuid]["resources"],
            resources
        );
        assert_eq!(held["allocations"].as_object().map(Map::len), Some(1));
    }
    // A reschedule of instance 1: the compute host drops its allocation, the
    // conductor claims the first alternate's allocation request for the instance.
    let first = &result[0];
    cloud.admin.delete_allocations(&uuids[0]).await;
    let (s, body) = cloud
        .admin
        .claim(
            &first[1].allocation_request_version,
            &uuids[0],
            &first[1].allocation_request,
            PROJECT,
            USER,
        )
        .await;
    assert_eq!(s, 204, "alternate claim refused: {body}");
    assert_eq!(
        cloud.admin.allocations(&uuids[0]).await["allocations"][&first[1].compute_node_uuid]
            ["resources"],
        resources
    );
    // Every other alternate's allocation request is claimable too.
    let mut extra = Vec::new();
    for s in result.iter().flat_map(|l| &l[1..]).skip(1) {
        let consumer = uuid();
        let (status, body) = cloud
            .admin
            .claim(
                &s.allocation_request_version,
                &consumer,
                &s.allocation_request,
                PROJECT,
                USER,
            )
            .await;
        assert_eq!(
            status, 204,
            "alternate on {} refused: {body}",
            s.service_host
        );
        extra.push(consumer);
    }
    for rp in &rps {
        assert_within_capacity(&cloud.admin, rp).await;
    }
    for c in uuids.iter().chain(&extra) {
        cloud.admin.delete_allocations(c).await;
    }
}

// ---------------------------------------------------------------------------------------
// (c) Two schedulers racing for the last slot of a host.

/// The cloud of a race: `last` (VCPU 2 × ratio 2.0 = 4, of which an existing
/// instance holds 2: one slot of the flavor left) and, optionally, `other`. Both
/// schedulers see `last` as the best host (the cell database shows it emptiest).
struct RaceCloud {
    cloud: Cloud,
    last: String,
    existing: String,
    other: Option<String>,
}

const RACE_FLAVOR: (i64, i64, i64) = (2, 2048, 20);

async fn race_cloud(name: &str, with_other_host: bool) -> RaceCloud {
    let cloud = Cloud::new(name).await;
    let tag = cloud.tag.clone();
    let traits = ["OWNER_NOVA", "COMPUTE_NODE", tag.as_str()];
    let last = uuid();
    cloud
        .compute_node(&format!("{name}-last"), &last, (64, 262144, 4000))
        .await;
    cloud
        .admin
        .compute_provider(
            &last,
            &format!("{name}-last"),
            (2, 2.0),
            65536,
            1000,
            &traits,
        )
        .await;
    let existing = uuid();
    let (s, body) = cloud
        .admin
        .claim(
            "1.36",
            &existing,
            &json!({"allocations": {last.as_str(): {"resources": {"VCPU": 2}}}}),
            PROJECT,
            USER,
        )
        .await;
    assert_eq!(s, 204, "existing instance: {body}");
    let other = if with_other_host {
        let rp = uuid();
        // Less free RAM in the cell database: weighed after `last` by both.
        cloud
            .compute_node(&format!("{name}-other"), &rp, (64, 8192, 4000))
            .await;
        cloud
            .admin
            .compute_provider(
                &rp,
                &format!("{name}-other"),
                (8, 1.0),
                65536,
                1000,
                &traits,
            )
            .await;
        Some(rp)
    } else {
        None
    };
    RaceCloud {
        cloud,
        last,
        existing,
        other,
    }
}

fn race_barrier() -> Arc<Barrier> {
    Arc::new(Barrier {
        asked: watch::channel(BTreeSet::new()).0,
        needed: 2,
        timed_out: AtomicBool::new(false),
    })
}

/// What one racer got: the chosen compute node, or the failure's class and message.
type RaceOutcome = Result<String, (String, String)>;

fn outcome(r: &Result<Vec<Vec<Selection>>, RemoteError>) -> RaceOutcome {
    match r {
        Ok(s) => Ok(s[0][0].compute_node_uuid.clone()),
        Err(e) => Err((e.class.clone(), e.message.clone())),
    }
}

/// Exactly one racer holds `last`; the other moved to `other` (or got NoValidHost
/// when there is none) after Placement refused it; usage within capacity.
async fn check_race(
    race: &RaceCloud,
    barrier: &Barrier,
    gates: [&Gate; 2],
    racers: [(&str, RaceOutcome); 2],
) {
    let admin = &race.cloud.admin;
    assert!(
        !barrier.timed_out.load(Ordering::SeqCst),
        "both schedulers asked for candidates before any claim"
    );
    let winners: Vec<&(&str, RaceOutcome)> = racers
        .iter()
        .filter(|(_, o)| o.as_ref().is_ok_and(|n| *n == race.last))
        .collect();
    assert_eq!(
        winners.len(),
        1,
        "exactly one wins the last slot: {racers:?}"
    );
    let (loser, loser_outcome) = racers
        .iter()
        .find(|(_, o)| !o.as_ref().is_ok_and(|n| *n == race.last))
        .expect("a loser");
    // Both claimed `last` first; Placement refused the loser there.
    let puts: Vec<(String, u16)> = gates.iter().flat_map(|g| g.puts()).collect();
    for (u, _) in &racers {
        assert!(
            puts.iter().any(|(c, _)| c == u),
            "no claim for {u}: {puts:?}"
        );
    }
    assert!(
        puts.iter().any(|(c, s)| c == loser && *s == 409),
        "Placement refused the loser: {puts:?}"
    );
    // As nova's claim_resources: every claim attempt, on the next host or again
    // after a generation conflict, reads the instance's allocations before its PUT
    // (the first read may have gone out with the candidates question).
    let loser_path = format!("/allocations/{loser}");
    let loser_calls: Vec<(String, u16)> = gates
        .iter()
        .flat_map(|g| g.exchanges())
        .filter(|e| e.path == loser_path)
        .map(|e| (e.method, e.status))
        .collect();
    let attempts = loser_calls.len() / 2;
    let want_attempts = if race.other.is_some() { 2 } else { 1 };
    assert!(
        loser_calls.len().is_multiple_of(2)
            && attempts >= want_attempts
            && loser_calls.chunks(2).enumerate().all(|(i, pair)| {
                let put_status = if race.other.is_some() && i + 1 == attempts {
                    204
                } else {
                    409
                };
                pair == [("GET".to_string(), 200), ("PUT".to_string(), put_status)]
            }),
        "the loser's reads and claims: {loser_calls:?}"
    );
    match &race.other {
        Some(other) => {
            assert_eq!(loser_outcome, &Ok(other.clone()), "the loser moves on");
            let held = admin.allocations(loser).await;
            assert_eq!(
                held["allocations"]
                    .as_object()
                    .map(|a| a.keys().cloned().collect::<Vec<_>>()),
                Some(vec![other.clone()])
            );
        }
        None => {
            assert_eq!(
                loser_outcome,
                &Err((
                    "NoValidHost".to_string(),
                    "No valid host was found. There are not enough hosts available.".to_string()
                ))
            );
            assert_eq!(admin.allocations(loser).await["allocations"], json!({}));
        }
    }
    assert_eq!(
        admin.usages(&race.last).await["VCPU"],
        json!(4),
        "the existing instance and the winner"
    );
    assert_within_capacity(admin, &race.last).await;
    if let Some(o) = &race.other {
        assert_within_capacity(admin, o).await;
    }
    for (c, _) in &racers {
        admin.delete_allocations(c).await;
    }
    admin.delete_allocations(&race.existing).await;
}

/// Two scheduler instances in this process (see the file comment); the gate lets
/// no claim through until both have their candidates, so both claim the last slot.
async fn race_in_process(name: &str, with_other_host: bool) {
    let race = race_cloud(name, with_other_host).await;
    let barrier = race_barrier();
    let gate_a = Gate::start("a", Some(barrier.clone())).await;
    let gate_b = Gate::start("b", Some(barrier.clone())).await;
    let sched_a = race.cloud.scheduler(&gate_a.url, 11).await;
    let sched_b = race.cloud.scheduler(&gate_b.url, 12).await;
    let (ua, ub) = (vec![uuid()], vec![uuid()]);
    let (ra, rb) = tokio::join!(
        select(&sched_a, race.cloud.spec(RACE_FLAVOR, json!({}), &ua), &ua),
        select(&sched_b, race.cloud.spec(RACE_FLAVOR, json!({}), &ub), &ub)
    );
    check_race(
        &race,
        &barrier,
        [&gate_a, &gate_b],
        [(&ua[0], outcome(&ra)), (&ub[0], outcome(&rb))],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn race_loser_moves_to_another_host() {
    race_in_process("race_move", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn race_loser_gets_no_valid_host() {
    race_in_process("race_nvh", false).await;
}

/// The same race between two daemon processes (this crate's binary, each with its
/// own nova.conf and RabbitMQ vhost, both on the same cell databases and, through
/// their gates, the same Placement), each asked by nova's own `SchedulerAPI`
/// client in its own Python process, as nova-conductor asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn race_between_two_daemon_processes() {
    let race = race_cloud("race_procs", true).await;
    let barrier = race_barrier();
    let venv = venv::find();
    let dir = std::env::temp_dir().join(format!("nsrs-race-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut daemons = Vec::new();
    let mut gates = Vec::new();
    let mut confs = Vec::new();
    for name in ["a", "b"] {
        let gate = Gate::start(name, Some(barrier.clone())).await;
        let vhost = nova_schema::tagged(&format!("nsrs_race_{name}"));
        rabbitmqctl(&["add_vhost", &vhost]);
        rabbitmqctl(&["set_permissions", "-p", &vhost, "guest", ".*", ".*", ".*"]);
        let conf = dir.join(format!("nova-{name}.conf"));
        std::fs::write(
            &conf,
            format!(
                "[DEFAULT]\nhost = race-{name}\n\
                 transport_url = rabbit://guest:guest@127.0.0.1:5672/{vhost}\n\
                 [api_database]\nconnection = {api}\n[database]\nconnection = {cell0}\n\
                 [placement]\nauth_type = admin_token\ntoken = admin\nendpoint_override = {url}\n\
                 [nova_scheduler_rs]\nstate_dir = {state}\n",
                api = nova_schema::sqla_url(&race.cloud.api_db),
                cell0 = nova_schema::sqla_url(&race.cloud.cell0_db),
                url = gate.url,
                state = dir.join("state").display(),
            ),
        )
        .expect("nova.conf");
        daemons.push(Daemon::start(
            &conf,
            dir.join(format!("daemon-{name}.log")),
            vhost,
        ));
        gates.push(gate);
        confs.push(conf);
    }
    let (ua, ub) = (uuid(), uuid());
    let ask = |conf: &std::path::Path, instance: &str| {
        tokio::process::Command::new(venv.join("bin/python"))
            .arg("-c")
            .arg(CLIENT)
            .arg(conf)
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance"))
            .arg(instance)
            .arg(&race.cloud.tag)
            .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
            .output()
    };
    let (oa, ob) = tokio::join!(ask(&confs[0], &ua), ask(&confs[1], &ub));
    let parse = |out: std::io::Result<std::process::Output>| -> RaceOutcome {
        let out = out.expect("python client");
        assert!(
            out.status.success(),
            "client failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("client prints JSON");
        match v["node"].as_str() {
            Some(node) => Ok(node.to_string()),
            None => Err((
                v["error"].as_str().unwrap_or_default().to_string(),
                v["message"].as_str().unwrap_or_default().to_string(),
            )),
        }
    };
    let racers = [(ua.as_str(), parse(oa)), (ub.as_str(), parse(ob))];
    check_race(&race, &barrier, [&gates[0], &gates[1]], racers).await;
    drop(daemons);
}

/// nova-conductor's call: `SchedulerAPI.select_destinations` for one instance of a
/// flavor requiring the test's trait; prints the chosen node or the NoValidHost.
const CLIENT: &str = r#"
import json, sys, warnings
warnings.filterwarnings("ignore")
sys.path.insert(0, sys.argv[2])
import nsrs_helpers as H
H.init_nova_client(sys.argv[1])
from nova import exception
from nova.scheduler import rpcapi
ctxt = H.user_context()
uuids = [sys.argv[3]]
flavor = H.make_flavor(2, 2048, 20)
flavor.extra_specs = {"trait:" + sys.argv[4]: "required"}
spec = H.make_spec(ctxt, flavor, uuids)
try:
    sel = rpcapi.SchedulerAPI().select_destinations(
        ctxt, spec, uuids, return_objects=True, return_alternates=True)
    print(json.dumps({"node": sel[0][0].compute_node_uuid}))
except exception.NoValidHost as e:
    print(json.dumps({"error": "NoValidHost", "message": str(e)}))
"#;

/// A daemon process of this crate; stopped (and its vhost removed) on drop.
struct Daemon {
    child: std::process::Child,
    vhost: String,
}

impl Daemon {
    fn start(conf: &std::path::Path, log: std::path::PathBuf, vhost: String) -> Daemon {
        let file = std::fs::File::create(&log).expect("log file");
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_nova-scheduler-rs"))
            .arg("--config-file")
            .arg(conf)
            .env("RUST_LOG", "info")
            .stdin(std::process::Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .expect("start the daemon");
        let daemon = Daemon { child, vhost };
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("scheduler ready") {
                return daemon;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "daemon not ready in 60 s:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::process::Command::new("rabbitmqctl")
            .args(["delete_vhost", &self.vhost])
            .output();
    }
}

// ---------------------------------------------------------------------------------------
// (d) Nested and sharing providers: granular groups, same_subtree, shared DISK_GB.

/// Per host, a tree seeded through Placement's REST API as nova-compute, neutron
/// and cyborg would leave it:
///
/// ```text
/// root (VCPU, MEMORY_MB; no disk)        ── aggregate AGG ──  shared (DISK_GB,
///  ├─ fpga   (CUSTOM_NSRS_FPGA, KIND_A)                        MISC_SHARES_VIA_AGGREGATE)
///  ├─ agent1 (packet rate 100)
///  │   └─ pf1 (bandwidth, PHYSNET_NET1)
///  └─ agent2 (packet rate 1000)
///      └─ pf2 (bandwidth, PHYSNET_NET1)
/// ```
///
/// The request: the flavor (DISK_GB can only come from the sharing provider), a
/// granular flavor group for the FPGA, and a port's bandwidth and packet-rate
/// groups that must be in the same subtree. Only agent2 has the packet rate, so
/// same_subtree forces the bandwidth onto pf2 (without it pf1 would do).
struct Tree {
    root: String,
    fpga: String,
    agent2: String,
    pf2: String,
}

async fn nested_host(cloud: &Cloud, name: &str, aggregate: &str) -> Tree {
    let admin = &cloud.admin;
    let tag = cloud.tag.as_str();
    let root = uuid();
    cloud.compute_node(name, &root, (64, 262144, 4000)).await;
    admin.provider(&root, name, None).await;
    admin
        .inventories(
            &root,
            json!({"VCPU": {"total": 8, "allocation_ratio": 1.0},
                   "MEMORY_MB": {"total": 16384, "allocation_ratio": 1.0}}),
        )
        .await;
    admin
        .traits(&root, &["OWNER_NOVA", "COMPUTE_NODE", tag])
        .await;
    admin.aggregates(&root, &[aggregate]).await;
    let child =
        |parent: String, suffix: &'static str, inventory: Value, traits: Vec<&'static str>| {
            let name = format!("{name}_{suffix}");
            async move {
                let rp = uuid();
                admin.provider(&rp, &name, Some(&parent)).await;
                admin.inventories(&rp, inventory).await;
                let mut all: Vec<&str> = traits;
                all.push(tag);
                admin.traits(&rp, &all).await;
                rp
            }
        };
    let fpga = child(
        root.clone(),
        "fpga",
        json!({"CUSTOM_NSRS_FPGA": {"total": 2}}),
        vec!["CUSTOM_NSRS_FPGA_KIND_A"],
    )
    .await;
    let agent1 = child(
        root.clone(),
        "agent1",
        json!({"NET_PACKET_RATE_KILOPACKET_PER_SEC": {"total": 100}}),
        vec![],
    )
    .await;
    let bandwidth = json!({"NET_BW_EGR_KILOBIT_PER_SEC": {"total": 10000}});
    let pf_traits = vec!["CUSTOM_PHYSNET_NET1", "CUSTOM_VNIC_TYPE_NORMAL"];
    child(agent1, "pf1", bandwidth.clone(), pf_traits.clone()).await;
    let agent2 = child(
        root.clone(),
        "agent2",
        json!({"NET_PACKET_RATE_KILOPACKET_PER_SEC": {"total": 1000}}),
        vec![],
    )
    .await;
    let pf2 = child(agent2.clone(), "pf2", bandwidth, pf_traits).await;
    Tree {
        root,
        fpga,
        agent2,
        pf2,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nested_and_sharing_providers_granular_same_subtree() {
    let cloud = Cloud::new("nested").await;
    let aggregate = uuid();
    let shared = uuid();
    cloud
        .admin
        .provider(&shared, "nested-shared-disk", None)
        .await;
    cloud
        .admin
        .inventories(
            &shared,
            json!({"DISK_GB": {"total": 1000, "allocation_ratio": 1.0}}),
        )
        .await;
    let tag = cloud.tag.clone();
    cloud
        .admin
        .traits(&shared, &["MISC_SHARES_VIA_AGGREGATE", &tag])
        .await;
    cloud.admin.aggregates(&shared, &[&aggregate]).await;
    let trees = [
        nested_host(&cloud, "nested-0", &aggregate).await,
        nested_host(&cloud, "nested-1", &aggregate).await,
    ];
    let gate = Gate::start("nested", None).await;
    let manager = cloud.scheduler(&gate.url, 3).await;
    let uuids = vec![uuid()];
    let mut spec = cloud.spec(
        (2, 2048, 20),
        json!({"resources1:CUSTOM_NSRS_FPGA": "1",
               "trait1:CUSTOM_NSRS_FPGA_KIND_A": "required",
               "group_policy": "none"}),
        &uuids,
    );
    let group = |id: &str, resources: Value, traits: Value| {
        envelope(
            "RequestGroup",
            "1.3",
            json!({
                "requester_id": id, "use_same_provider": true, "resources": resources,
                "required_traits": traits, "forbidden_traits": [], "aggregates": [],
                "forbidden_aggregates": [], "provider_uuids": [], "in_tree": null,
            }),
        )
    };
    spec["nova_object.data"]["requested_resources"] = json!([
        group(
            "port1-bw",
            json!({"NET_BW_EGR_KILOBIT_PER_SEC": 1000}),
            json!(["CUSTOM_PHYSNET_NET1", "CUSTOM_VNIC_TYPE_NORMAL"])
        ),
        group(
            "port1-pps",
            json!({"NET_PACKET_RATE_KILOPACKET_PER_SEC": 500}),
            json!([])
        ),
    ]);
    spec["nova_object.data"]["request_level_params"] = envelope(
        "RequestLevelParams",
        "1.1",
        json!({"root_required": [], "root_forbidden": [],
               "same_subtree": [["port1-bw", "port1-pps"]]}),
    );

    let result = select(&manager, spec, &uuids).await.expect("placed");

    let list = &result[0];
    assert_eq!(
        list.len(),
        2,
        "the host and the other tree as its alternate"
    );
    // What Placement answers to the very query the scheduler sent.
    let query = gate
        .full_paths()
        .into_iter()
        .find(|p| p.starts_with("/allocation_candidates?"))
        .expect("a candidates query");
    let (s, answer) = cloud.admin.call(reqwest::Method::GET, &query, None).await;
    assert_eq!(s, 200, "{answer}");
    let offered = answer["allocation_requests"]
        .as_array()
        .expect("list")
        .clone();
    assert_eq!(offered.len(), 2, "one candidate per tree: {offered:?}");
    for s in list {
        assert!(
            offered.contains(&s.allocation_request),
            "the Selection carries what Placement returned: {}",
            s.allocation_request
        );
        let tree = trees
            .iter()
            .find(|t| t.root == s.compute_node_uuid)
            .expect("a seeded root");
        // Granular FPGA on the fpga child, the port's two groups in agent2's
        // subtree, the disk from the sharing provider, the rest on the root.
        assert_eq!(
            s.allocation_request["allocations"],
            json!({
                tree.root.as_str(): {"resources": {"VCPU": 2, "MEMORY_MB": 2048}},
                tree.fpga.as_str(): {"resources": {"CUSTOM_NSRS_FPGA": 1}},
                tree.agent2.as_str(): {"resources": {"NET_PACKET_RATE_KILOPACKET_PER_SEC": 500}},
                tree.pf2.as_str(): {"resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 1000}},
                shared.as_str(): {"resources": {"DISK_GB": 20}},
            })
        );
        assert_eq!(
            s.allocation_request["mappings"]["port1-bw"],
            json!([tree.pf2.as_str()])
        );
    }
    // The claim holds exactly the chosen allocation request.
    let held = cloud.admin.allocations(&uuids[0]).await;
    let mut held_resources = Map::new();
    for (rp, a) in held["allocations"].as_object().expect("allocations") {
        held_resources.insert(rp.clone(), json!({"resources": a["resources"]}));
    }
    assert_eq!(
        Value::Object(held_resources),
        list[0].allocation_request["allocations"]
    );
    assert_eq!(held["project_id"], PROJECT);
    // The alternate's allocation request (the other tree, the same shared disk) is
    // claimable: the conductor's reschedule claim.
    let (s, body) = cloud
        .admin
        .claim("1.36", &uuid(), &list[1].allocation_request, PROJECT, USER)
        .await;
    assert_eq!(s, 204, "alternate claim refused: {body}");
    assert_eq!(cloud.admin.usages(&shared).await["DISK_GB"], json!(40));
}

// ---------------------------------------------------------------------------------------
// (e) Each instance's allocations read while the candidates are asked for.

/// A gate hook: holds the candidates question until Placement has answered the
/// read of `consumer`'s allocations (at most 20 s; `held` tells whether it came),
/// then runs `meanwhile` before the question goes on.
fn hold_candidates_until_read<F, Fut>(
    consumer: &str,
    held: Arc<AtomicBool>,
    meanwhile: F,
) -> BeforeCandidates
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let path = format!("/allocations/{consumer}");
    let meanwhile = Arc::new(meanwhile);
    Arc::new(move |log: Arc<Mutex<Vec<Exchange>>>| {
        let (path, held, meanwhile) = (path.clone(), held.clone(), meanwhile.clone());
        Box::pin(async move {
            let read = |log: &Mutex<Vec<Exchange>>| {
                log.lock()
                    .expect("log")
                    .iter()
                    .any(|e| e.method == "GET" && e.path == path)
            };
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            while !read(&log) && tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            held.store(read(&log), Ordering::SeqCst);
            meanwhile().await;
        })
    })
}

/// `(method, path)` of what the gate forwarded, paths without their query string.
fn calls(gate: &Gate) -> Vec<(String, String)> {
    gate.exchanges()
        .into_iter()
        .map(|e| (e.method, e.path))
        .collect()
}

/// Two instances on two hosts. The read of instance 1's allocations reaches
/// Placement while the candidates question is still held at the gate (the read
/// does not wait for the answer), and each instance is claimed with one `GET`
/// and one `PUT`, as nova does: the same questions, the reads earlier. With
/// `read_allocations_ahead = false` the order is nova's: candidates, then `GET`
/// and `PUT` per instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocations_read_while_the_candidates_are_asked() {
    let cloud = Cloud::new("readahead").await;
    cloud.host("readahead-0", (4, 1.0), 8192, 80).await;
    cloud.host("readahead-1", (4, 1.0), 8192, 80).await;
    let uuids: Vec<String> = (0..2).map(|_| uuid()).collect();
    let held = Arc::new(AtomicBool::new(false));
    let hook = hold_candidates_until_read(&uuids[0], held.clone(), || async {});
    let gate = Gate::start_with("readahead", None, Some(hook)).await;
    let manager = cloud.scheduler(&gate.url, 6).await;

    let sels = select(
        &manager,
        cloud.spec((2, 2048, 20), json!({}), &uuids),
        &uuids,
    )
    .await
    .expect("both placed");
    assert_eq!(sels.len(), 2);
    assert!(
        held.load(Ordering::SeqCst),
        "instance 1's allocations were read before the candidates were answered: {:?}",
        calls(&gate)
    );
    let log = calls(&gate);
    let candidates = log
        .iter()
        .position(|(_, p)| p == "/allocation_candidates")
        .expect("candidates asked");
    for u in &uuids {
        let path = format!("/allocations/{u}");
        let of_u: Vec<(usize, &str)> = log
            .iter()
            .enumerate()
            .filter(|(_, (_, p))| *p == path)
            .map(|(i, (m, _))| (i, m.as_str()))
            .collect();
        assert_eq!(
            of_u.iter().map(|(_, m)| *m).collect::<Vec<_>>(),
            vec!["GET", "PUT"],
            "{u}: {log:?}"
        );
        assert!(
            of_u[1].0 > candidates,
            "claimed after the candidates: {log:?}"
        );
    }
    assert_eq!(gate.puts().iter().filter(|(_, s)| *s == 204).count(), 2);

    // The same request, reads at claim time: nova's order exactly.
    let gate = Gate::start("readahead-off", None).await;
    let manager = cloud
        .scheduler_with(&gate.url, 6, |o| o.read_allocations_ahead = false)
        .await;
    let later: Vec<String> = (0..2).map(|_| uuid()).collect();
    select(
        &manager,
        cloud.spec((1, 1024, 10), json!({}), &later),
        &later,
    )
    .await
    .expect("both placed");
    let want: Vec<(String, String)> = [
        ("GET", "/allocation_candidates".to_string()),
        ("GET", format!("/allocations/{}", later[0])),
        ("PUT", format!("/allocations/{}", later[0])),
        ("GET", format!("/allocations/{}", later[1])),
        ("PUT", format!("/allocations/{}", later[1])),
    ]
    .into_iter()
    .map(|(m, p)| (m.to_string(), p))
    .collect();
    assert_eq!(calls(&gate), want);
}

/// An instance that still holds its source allocation (an evacuation; the source
/// is not a candidate): the read ahead sees it and the claim doubles it, as nova's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evacuation_claim_doubles_the_allocation_read_ahead() {
    let cloud = Cloud::new("evacuate").await;
    let dst = cloud.host("evacuate-0", (4, 1.0), 8192, 80).await;
    // The source: a provider without the test's trait, so never a candidate.
    let src = uuid();
    cloud
        .admin
        .compute_provider(&src, "evacuate-src", (4, 1.0), 8192, 80, &["OWNER_NOVA"])
        .await;
    let instance = vec![uuid()];
    let source_claim = json!({"allocations": {&src: {"resources": {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 20}}}});
    let (status, body) = cloud
        .admin
        .claim("1.36", &instance[0], &source_claim, PROJECT, USER)
        .await;
    assert_eq!(status, 204, "source allocation: {body}");
    let gate = Gate::start("evacuate", None).await;
    let manager = cloud.scheduler(&gate.url, 7).await;

    let sels = select(
        &manager,
        cloud.spec((2, 2048, 20), json!({}), &instance),
        &instance,
    )
    .await
    .expect("placed");
    assert_eq!(sels[0][0].compute_node_uuid, dst);
    let mut want = vec![src.clone(), dst.clone()];
    want.sort();
    assert_eq!(cloud.admin.providers_held(&instance[0]).await, want);
    let path = format!("/allocations/{}", instance[0]);
    let of_instance: Vec<String> = calls(&gate)
        .into_iter()
        .filter(|(_, p)| *p == path)
        .map(|(m, _)| m)
        .collect();
    assert_eq!(of_instance, vec!["GET", "PUT"]);
}

/// The instance's allocations change after they were read and before the claim
/// (another writer gives the new consumer an allocation while the candidates
/// question is held): Placement refuses the claim's `PUT` for its stale consumer
/// generation, the request fails with nova's `AllocationUpdateFailed`, and the
/// other writer's allocation is left as it was: nothing is released that this
/// request did not claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allocations_changed_after_the_read_fail_the_request() {
    let cloud = Cloud::new("readrace").await;
    let dst = cloud.host("readrace-0", (4, 1.0), 8192, 80).await;
    let elsewhere = uuid();
    cloud
        .admin
        .compute_provider(
            &elsewhere,
            "readrace-other",
            (4, 1.0),
            8192,
            80,
            &["OWNER_NOVA"],
        )
        .await;
    let instance = vec![uuid()];
    let held = Arc::new(AtomicBool::new(false));
    let writer = {
        let (admin, consumer, rp) = (
            placement_admin::Admin::new().await,
            instance[0].clone(),
            elsewhere.clone(),
        );
        let admin = Arc::new(admin);
        move || {
            let (admin, consumer, rp) = (admin.clone(), consumer.clone(), rp.clone());
            async move {
                let claim =
                    json!({"allocations": {&rp: {"resources": {"VCPU": 1, "MEMORY_MB": 512}}}});
                let (status, body) = admin.claim("1.36", &consumer, &claim, PROJECT, USER).await;
                assert_eq!(status, 204, "the other writer: {body}");
            }
        }
    };
    let hook = hold_candidates_until_read(&instance[0], held.clone(), writer);
    let gate = Gate::start_with("readrace", None, Some(hook)).await;
    let manager = cloud.scheduler(&gate.url, 8).await;

    let result = select(
        &manager,
        cloud.spec((2, 2048, 20), json!({}), &instance),
        &instance,
    )
    .await;
    assert!(
        held.load(Ordering::SeqCst),
        "read before the candidates: {:?}",
        calls(&gate)
    );
    match result {
        Err(e) => {
            assert_eq!(e.class, "AllocationUpdateFailed", "{e:?}");
            assert!(e.message.contains(&instance[0]), "{e:?}");
        }
        Ok(s) => panic!("expected AllocationUpdateFailed, got {s:?}"),
    }
    assert_eq!(gate.puts(), vec![(instance[0].clone(), 409)]);
    assert_eq!(gate.deletes(), vec![]);
    assert_eq!(
        cloud.admin.providers_held(&instance[0]).await,
        vec![elsewhere.clone()]
    );
    assert_eq!(
        cloud.admin.usages(&dst).await,
        json!({"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0})
    );
}

// ---------------------------------------------------------------------------------------
// (f) A Placement outage: NoValidHost at once, logged once per outage.

#[derive(Clone, Default)]
struct LogBuffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogBuffer {
    fn lines(&self, level: &str, text: &str) -> Vec<String> {
        String::from_utf8_lossy(&self.0.lock().expect("log"))
            .lines()
            .filter(|l| l.contains(level) && l.contains(text))
            .map(str::to_string)
            .collect()
    }

    fn count(&self, level: &str, text: &str) -> usize {
        self.lines(level, text).len()
    }
}

/// The gate plays the outage: while "down" it closes every connection without an
/// answer. The runtime is single-threaded so the log subscriber set for this test
/// sees everything the scheduler logs, and nothing from other tests.
#[tokio::test(flavor = "current_thread")]
async fn placement_outage_is_no_valid_host_and_logged_once() {
    let logs = LogBuffer::default();
    let writer = logs.clone();
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_env_filter("nova_scheduler=debug")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish(),
    );
    const OUTAGE: &str = "Placement API service is not responding";
    const BACK: &str = "Placement API service is answering again";
    let cloud = Cloud::new("outage").await;
    let rp = cloud.host("outage-0", (8, 1.0), 16384, 200).await;
    let gate = Gate::start("outage", None).await;
    let manager = cloud.scheduler(&gate.url, 4).await;
    let flavor = (1, 512, 1);

    let mut failed = Vec::new();
    for round in 0..2 {
        gate.down.store(true, Ordering::SeqCst);
        for _ in 0..3 {
            let uuids = vec![uuid()];
            let started = std::time::Instant::now();
            let result = select(&manager, cloud.spec(flavor, json!({}), &uuids), &uuids).await;
            assert_no_valid_host(&result, "");
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "NoValidHost took {:?}",
                started.elapsed()
            );
            failed.extend(uuids);
        }
        assert_eq!(
            logs.count("WARN", OUTAGE),
            round + 1,
            "one warning per outage, not per request: {:#?}",
            logs.lines("WARN", "")
        );
        gate.down.store(false, Ordering::SeqCst);
        let uuids = vec![uuid()];
        let placed = select(&manager, cloud.spec(flavor, json!({}), &uuids), &uuids)
            .await
            .expect("placed once Placement answers again");
        assert_eq!(placed[0][0].compute_node_uuid, rp);
        assert_eq!(logs.count("INFO", BACK), round + 1);
        cloud.admin.delete_allocations(&uuids[0]).await;
    }
    for u in &failed {
        assert_eq!(cloud.admin.allocations(u).await["allocations"], json!({}));
    }
}

/// Placement answers 503 to every claim: each host is tried and the request ends in
/// NoValidHost, with two warnings (the first claim not made, and one line summing up
/// the others with the next hosts named), not one per host.
#[tokio::test(flavor = "current_thread")]
async fn claims_refused_on_every_host_log_two_lines_not_one_per_host() {
    let logs = LogBuffer::default();
    let writer = logs.clone();
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_env_filter("nova_scheduler=info")
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish(),
    );
    let cloud = Cloud::new("refused5xx").await;
    for i in 0..6 {
        cloud
            .host(&format!("refused5xx-{i}"), (8, 1.0), 16384, 200)
            .await;
    }
    let plan: FaultPlan = Arc::new(|r, _log| {
        if is_claim(r) {
            Fault::Refuse(503)
        } else {
            Fault::Pass
        }
    });
    let gate = Gate::start_faulty("refused5xx", plan).await;
    let manager = cloud.scheduler(&gate.url, 6).await;
    let uuids = vec![uuid()];

    let result = select(&manager, cloud.spec((1, 512, 1), json!({}), &uuids), &uuids).await;

    assert_no_valid_host(&result, "There are not enough hosts available.");
    assert_eq!(gate.puts().len(), 6, "every host tried: {:?}", gate.puts());
    // At most two: tracing may miss the first line when a concurrent test (without
    // this subscriber) registered its callsite first; the summary is what counts.
    let warned = logs.lines("WARN", "claim");
    assert!(warned.len() <= 2, "{warned:#?}");
    let first = logs.lines("WARN", "claim not made; trying the next host");
    assert!(
        first.iter().all(|l| l.contains("503")),
        "the first line says why: {first:#?}"
    );
    let summary = logs.lines("WARN", "claims not made on 5 more host(s)");
    assert_eq!(summary.len(), 1, "{warned:#?}");
    assert!(
        summary[0].contains("claims_not_made=6") && summary[0].contains("and 2 more"),
        "{summary:#?}"
    );
    assert_eq!(
        cloud.admin.allocations(&uuids[0]).await["allocations"],
        json!({})
    );
}

// ---------------------------------------------------------------------------------------
// Paths that do not claim.

/// A rebuild to a new image (`_nova_check_type = rebuild`, the instance's own host
/// as destination) asks Placement nothing and claims nothing; a 4.3-style call
/// without instance uuids asks for candidates but claims nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebuild_and_calls_without_uuids_do_not_claim() {
    let cloud = Cloud::new("noclaim").await;
    let rp = cloud.host("noclaim-0", (8, 1.0), 16384, 200).await;
    cloud.host("noclaim-1", (8, 1.0), 16384, 200).await;
    let gate = Gate::start("noclaim", None).await;
    let manager = cloud.scheduler(&gate.url, 5).await;
    let instance = vec![uuid()];

    let mut rebuild = cloud.spec((2, 2048, 20), json!({}), &instance);
    rebuild["nova_object.data"]["scheduler_hints"] = json!({"_nova_check_type": ["rebuild"]});
    rebuild["nova_object.data"]["requested_destination"] = envelope(
        "Destination",
        "1.4",
        json!({"host": "noclaim-0", "node": "noclaim-0", "cell": null}),
    );
    let sels = select_with(&manager, rebuild, Some(&instance), false)
        .await
        .expect("rebuild on its own host");
    assert_eq!(sels[0][0].compute_node_uuid, rp);
    assert_eq!(sels[0][0].allocation_request, Value::Null);
    assert_eq!(
        gate.exchanges(),
        vec![],
        "a rebuild never talks to Placement"
    );

    let sels = select_with(
        &manager,
        cloud.spec((2, 2048, 20), json!({}), &instance),
        None,
        false,
    )
    .await
    .expect("placed without uuids");
    assert_eq!(sels.len(), 1);
    let methods: Vec<String> = gate.exchanges().into_iter().map(|e| e.method).collect();
    assert_eq!(methods, vec!["GET"], "candidates asked, nothing claimed");
    assert_eq!(
        cloud.admin.allocations(&instance[0]).await["allocations"],
        json!({})
    );
}

// ---------------------------------------------------------------------------------------
// (f) Faults between the scheduler and Placement: lost answers, server errors, a
// Placement that hangs. After every request Placement holds allocations only for
// the instances that were placed, each on exactly one host.

fn is_claim(r: &http_stub::Recorded) -> bool {
    r.method == "PUT" && r.path.starts_with("/allocations/")
}

fn is_consumer_read(r: &http_stub::Recorded) -> bool {
    r.method == "GET" && r.path.starts_with("/allocations/")
}

/// How many requests matching `what` the gate saw (faulted ones included).
fn seen(log: &[Exchange], method: &str, prefix: &str) -> usize {
    log.iter()
        .filter(|e| e.method == method && e.path.starts_with(prefix))
        .count()
}

/// Three hosts with room for one 2-VCPU instance each.
async fn three_hosts(cloud: &Cloud, name: &str) -> Vec<String> {
    let mut hosts = Vec::new();
    for i in 0..3 {
        hosts.push(cloud.host(&format!("{name}-{i}"), (2, 1.0), 4096, 40).await);
    }
    hosts
}

/// Placement writes the claim but its answer never arrives: nova counts the claim
/// as refused, moves to the next host and merges what it reads there, so the
/// instance ends on two hosts. Here the claim is read back, found written, and kept:
/// one `PUT`, one host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_answer_is_lost_is_read_back_and_kept() {
    let cloud = Cloud::new("lostans").await;
    let hosts = three_hosts(&cloud, "lostans").await;
    let plan: FaultPlan = Arc::new(|r, log| {
        if is_claim(r) && seen(log, "PUT", "/allocations/") == 0 {
            Fault::DropAnswer
        } else {
            Fault::Pass
        }
    });
    let gate = Gate::start_faulty("lostans", plan).await;
    let manager = cloud.scheduler(&gate.url, 3).await;
    let uuids = vec![uuid()];

    let placed = select(
        &manager,
        cloud.spec((2, 1024, 10), json!({}), &uuids),
        &uuids,
    )
    .await
    .expect("placed");

    let chosen = &placed[0][0].compute_node_uuid;
    assert!(hosts.contains(chosen));
    assert_eq!(
        gate.puts(),
        vec![(uuids[0].clone(), 0)],
        "one claim, its answer lost"
    );
    assert_eq!(
        cloud.admin.providers_held(&uuids[0]).await,
        vec![chosen.clone()]
    );
    cloud.admin.delete_allocations(&uuids[0]).await;
}

/// A proxy answers 502 after Placement wrote the claim: read back, it is the claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_after_the_write_is_read_back_as_the_claim() {
    let cloud = Cloud::new("claim502").await;
    three_hosts(&cloud, "claim502").await;
    let plan: FaultPlan = Arc::new(|r, log| {
        if is_claim(r) && seen(log, "PUT", "/allocations/") == 0 {
            Fault::ReplaceAnswer(502)
        } else {
            Fault::Pass
        }
    });
    let gate = Gate::start_faulty("claim502", plan).await;
    let manager = cloud.scheduler(&gate.url, 3).await;
    let uuids = vec![uuid()];

    let placed = select(
        &manager,
        cloud.spec((2, 1024, 10), json!({}), &uuids),
        &uuids,
    )
    .await
    .expect("placed");

    assert_eq!(gate.puts(), vec![(uuids[0].clone(), 502)]);
    assert_eq!(
        cloud.admin.providers_held(&uuids[0]).await,
        vec![placed[0][0].compute_node_uuid.clone()]
    );
    cloud.admin.delete_allocations(&uuids[0]).await;
}

/// The answer of the first claim is lost and the consumer cannot be read back
/// (Placement answers 503 to the reads that follow), so its outcome is unknown: the
/// next host is tried, and its claim replaces whatever the first one wrote instead
/// of keeping it (nova would leave the instance on both hosts).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_unknown_outcome_is_replaced_not_doubled() {
    let cloud = Cloud::new("unknown").await;
    three_hosts(&cloud, "unknown").await;
    let plan: FaultPlan = Arc::new(|r, log| {
        let puts = seen(log, "PUT", "/allocations/");
        if is_claim(r) && puts == 0 {
            return Fault::DropAnswer;
        }
        // The three reads after the lost answer (the claim's own read before the
        // next PUT is the fourth, and passes).
        let reads_after: usize = log
            .iter()
            .skip_while(|e| e.method != "PUT")
            .filter(|e| e.method == "GET" && e.path.starts_with("/allocations/"))
            .count();
        if is_consumer_read(r) && puts == 1 && reads_after < 3 {
            return Fault::Refuse(503);
        }
        Fault::Pass
    });
    let gate = Gate::start_faulty("unknown", plan).await;
    let manager = cloud.scheduler(&gate.url, 3).await;
    let uuids = vec![uuid()];

    let placed = select(
        &manager,
        cloud.spec((2, 1024, 10), json!({}), &uuids),
        &uuids,
    )
    .await
    .expect("placed on the next host");

    let puts = gate.puts();
    assert_eq!(puts.len(), 2, "{puts:?}");
    assert_eq!((puts[0].1, puts[1].1), (0, 204), "{puts:?}");
    assert_eq!(
        cloud.admin.providers_held(&uuids[0]).await,
        vec![placed[0][0].compute_node_uuid.clone()],
        "only the host chosen holds the instance"
    );
    cloud.admin.delete_allocations(&uuids[0]).await;
}

/// The outcome of the first claim is unknown and every other host refuses: the
/// request ends in NoValidHost and takes back what the first claim may have
/// written, so Placement holds nothing for the instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_request_takes_back_a_claim_of_unknown_outcome() {
    let cloud = Cloud::new("takeback").await;
    let hosts = three_hosts(&cloud, "takeback").await;
    let plan: FaultPlan = Arc::new(|r, log| {
        let puts = seen(log, "PUT", "/allocations/");
        if is_claim(r) {
            return if puts == 0 {
                Fault::DropAnswer
            } else {
                Fault::Refuse(409)
            };
        }
        let reads_after: usize = log
            .iter()
            .skip_while(|e| e.method != "PUT")
            .filter(|e| e.method == "GET" && e.path.starts_with("/allocations/"))
            .count();
        if is_consumer_read(r) && puts == 1 && reads_after < 3 {
            return Fault::Refuse(503);
        }
        Fault::Pass
    });
    let gate = Gate::start_faulty("takeback", plan).await;
    let manager = cloud.scheduler(&gate.url, 3).await;
    let uuids = vec![uuid()];

    let result = select(
        &manager,
        cloud.spec((2, 1024, 10), json!({}), &uuids),
        &uuids,
    )
    .await;

    assert_no_valid_host(&result, "There are not enough hosts available.");
    assert_eq!(gate.puts().len(), 3, "every host tried: {:?}", gate.puts());
    assert_eq!(gate.deletes(), vec![(uuids[0].clone(), 204)]);
    assert_eq!(
        cloud.admin.allocations(&uuids[0]).await["allocations"],
        json!({})
    );
    for rp in &hosts {
        assert_eq!(
            cloud.admin.usages(rp).await,
            json!({"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0})
        );
    }
}

/// A Placement that accepts claims and never answers them: `[placement] timeout`
/// ends each attempt, and once the caller's deadline has passed the request stops
/// before its next claim instead of walking every host. Nothing is held after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_placement_is_bounded_by_the_timeout_and_the_callers_deadline() {
    let cloud = Cloud::new("hang").await;
    let hosts = three_hosts(&cloud, "hang").await;
    let plan: FaultPlan = Arc::new(|r, _| {
        if is_claim(r) {
            Fault::Hang
        } else {
            Fault::Pass
        }
    });
    let gate = Gate::start_faulty("hang", plan).await;
    let manager = cloud
        .scheduler_custom(
            &gate.url,
            3,
            |_| {},
            |p| p.timeout = Some(Duration::from_millis(700)),
        )
        .await;

    // No deadline: every host's claim times out, NoValidHost within the bound.
    let uuids = vec![uuid()];
    let started = std::time::Instant::now();
    let result = select(
        &manager,
        cloud.spec((2, 1024, 10), json!({}), &uuids),
        &uuids,
    )
    .await;
    assert_no_valid_host(&result, "There are not enough hosts available.");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );

    // The caller gives up after 1 s: the request stops before its next claim.
    let uuids = vec![uuid()];
    let started = std::time::Instant::now();
    let delivery = nova_scheduler::manager::Delivery {
        deadline: Some(std::time::Instant::now() + Duration::from_secs(1)),
        redelivered: false,
    };
    let result = select_delivered(
        &manager,
        cloud.spec((2, 1024, 10), json!({}), &uuids),
        Some(&uuids),
        true,
        delivery,
    )
    .await;
    let err = result.expect_err("stopped");
    assert!(err.message.contains("caller's timeout"), "{err:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    for rp in &hosts {
        assert_eq!(
            cloud.admin.usages(rp).await,
            json!({"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0})
        );
    }
}

/// A slow Placement (each claim held 1 s, under the timeout) is only slow.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_placement_still_places() {
    let cloud = Cloud::new("slow").await;
    three_hosts(&cloud, "slow").await;
    let plan: FaultPlan = Arc::new(|r, _| {
        if is_claim(r) {
            Fault::Delay(Duration::from_secs(1))
        } else {
            Fault::Pass
        }
    });
    let gate = Gate::start_faulty("slow", plan).await;
    let manager = cloud
        .scheduler_custom(
            &gate.url,
            3,
            |_| {},
            |p| p.timeout = Some(Duration::from_secs(5)),
        )
        .await;
    let uuids = vec![uuid(), uuid()];
    let placed = select(
        &manager,
        cloud.spec((2, 1024, 10), json!({}), &uuids),
        &uuids,
    )
    .await
    .expect("placed");
    for (u, p) in uuids.iter().zip(&placed) {
        assert_eq!(
            cloud.admin.providers_held(u).await,
            vec![p[0].compute_node_uuid.clone()]
        );
        cloud.admin.delete_allocations(u).await;
    }
}

/// A request delivered again after its first consumer died: the instance holds
/// the claim that consumer made on a host that no longer passes (disabled since).
/// The new decision's claim replaces it; nova's would keep both. An evacuation
/// (its source host in `ignore_hosts`) keeps its source allocation, as nova does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_request_replaces_its_earlier_claim() {
    let cloud = Cloud::new("redeliv").await;
    let a = cloud.host("redeliv-a", (4, 1.0), 8192, 80).await;
    let b = cloud.host("redeliv-b", (4, 1.0), 8192, 80).await;
    let gate = Gate::start("redeliv", None).await;
    let manager = cloud.scheduler(&gate.url, 3).await;
    let resources = json!({"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10});
    let instance = uuid();
    let (status, body) = cloud
        .admin
        .claim(
            "1.36",
            &instance,
            &json!({"allocations": {&a: {"resources": resources}}}),
            PROJECT,
            USER,
        )
        .await;
    assert_eq!(status, 204, "{body}");
    sqlx::query("UPDATE services SET disabled = 1 WHERE host = 'redeliv-a'")
        .execute(&cloud.cell)
        .await
        .unwrap();
    let redelivered = nova_scheduler::manager::Delivery {
        deadline: None,
        redelivered: true,
    };
    let uuids = vec![instance.clone()];
    let placed = select_delivered(
        &manager,
        cloud.spec((2, 1024, 10), json!({}), &uuids),
        Some(&uuids),
        true,
        redelivered,
    )
    .await
    .expect("placed");
    assert_eq!(placed[0][0].compute_node_uuid, b);
    assert_eq!(cloud.admin.providers_held(&instance).await, vec![b.clone()]);
    cloud.admin.delete_allocations(&instance).await;

    // An evacuation from a (in ignore_hosts): its source allocation is kept.
    let evacuee = uuid();
    let (status, body) = cloud
        .admin
        .claim(
            "1.36",
            &evacuee,
            &json!({"allocations": {&a: {"resources": resources}}}),
            PROJECT,
            USER,
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let uuids = vec![evacuee.clone()];
    let mut spec = cloud.spec((2, 1024, 10), json!({}), &uuids);
    spec["nova_object.data"]["ignore_hosts"] = json!(["redeliv-a"]);
    let placed = select_delivered(&manager, spec, Some(&uuids), true, redelivered)
        .await
        .expect("placed");
    assert_eq!(placed[0][0].compute_node_uuid, b);
    let mut both = vec![a.clone(), b.clone()];
    both.sort();
    assert_eq!(cloud.admin.providers_held(&evacuee).await, both);
    cloud.admin.delete_allocations(&evacuee).await;
}
