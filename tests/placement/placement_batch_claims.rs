// SPDX-License-Identifier: Apache-2.0
//! Batched claims on the Placement fast path, against the real Placement
//! (tests/common/placement_server.rs) and cell databases built by nova-manage
//! (tests/common/claims_cloud.rs, shared with tests/placement/placement_claims.rs).
//!
//! The scheduler has a provider index loaded from Placement's database and no
//! background refresher (so a change made behind its back stays unseen until a
//! refused claim makes it refresh). Between it and Placement sits the recording
//! proxy: every request it sent and Placement's status are checked.

use crate::claims_cloud;
use crate::nova_schema;
use crate::placement_server;

use claims_cloud::*;
use nova_scheduler::manager::SchedulerManager;
use nova_scheduler::placement::index::{IndexLoader, LiveIndex};
use serde_json::{json, Value};
use std::sync::Arc;

const FLAVOR: (i64, i64, i64) = (2, 2048, 20);

/// The provider index as Placement's database holds it now.
async fn index() -> Arc<LiveIndex> {
    placement_server::url().await;
    let url = nova_schema::sqlx_url(&placement_server::db());
    LiveIndex::load(IndexLoader::connect(&url).await.expect("placement db"))
        .await
        .expect("index")
}

/// A host with room for two instances of [`FLAVOR`] in Placement (4 VCPU at ratio
/// 1.0); `free_ram_mb` in the cell decides the RAM weigher's order (most first).
async fn host(cloud: &Cloud, name: &str, free_ram_mb: i64) -> String {
    let rp = uuid();
    cloud.compute_node(name, &rp, (64, free_ram_mb, 4000)).await;
    let tag = cloud.tag.clone();
    cloud
        .admin
        .compute_provider(
            &rp,
            name,
            (4, 1.0),
            8192,
            80,
            &["OWNER_NOVA", "COMPUTE_NODE", &tag],
        )
        .await;
    rp
}

async fn scheduler(cloud: &Cloud, gate: &Gate, index: &Arc<LiveIndex>) -> SchedulerManager {
    cloud
        .scheduler(&gate.url, 1)
        .await
        .with_placement_index(Arc::clone(index))
}

/// `(method, path, status)` of what the scheduler sent to Placement.
fn sent(gate: &Gate) -> Vec<(String, String, u16)> {
    gate.exchanges()
        .into_iter()
        .map(|e| (e.method, e.path, e.status))
        .collect()
}

fn statuses(gate: &Gate, method: &str, path: &str) -> Vec<u16> {
    sent(gate)
        .into_iter()
        .filter(|(m, p, _)| m == method && p == path)
        .map(|(_, _, s)| s)
        .collect()
}

/// Each instance holds in Placement exactly the allocation request of its Selection.
async fn assert_holds_selection(cloud: &Cloud, uuids: &[String], selections: &[Vec<Selection>]) {
    assert_eq!(selections.len(), uuids.len());
    for (uuid, list) in uuids.iter().zip(selections) {
        let chosen = &list[0];
        assert_eq!(chosen.allocation_request_version, "1.36");
        let held = cloud.admin.allocations(uuid).await;
        let held_resources: serde_json::Map<String, Value> = held["allocations"]
            .as_object()
            .expect("allocations")
            .iter()
            .map(|(rp, a)| (rp.clone(), a["resources"].clone()))
            .collect();
        let wanted: serde_json::Map<String, Value> = chosen.allocation_request["allocations"]
            .as_object()
            .expect("allocation request")
            .iter()
            .map(|(rp, a)| (rp.clone(), a["resources"].clone()))
            .collect();
        assert_eq!(held_resources, wanted, "instance {uuid}");
        assert!(
            wanted.contains_key(&chosen.compute_node_uuid),
            "{uuid}: {wanted:?}"
        );
        assert_eq!(held["project_id"], json!(PROJECT));
        assert_eq!(held["user_id"], json!(USER));
    }
}

async fn assert_holds_nothing(cloud: &Cloud, uuids: &[String]) {
    for u in uuids {
        assert_eq!(
            cloud.admin.allocations(u).await["allocations"],
            json!({}),
            "{u}"
        );
    }
}

/// Fills `rp`'s VCPU in Placement for another consumer, behind the index's back.
async fn fill_behind_the_index(cloud: &Cloud, rp: &str) -> String {
    let other = uuid();
    let (status, body) = cloud
        .admin
        .claim(
            "1.36",
            &other,
            &json!({"allocations": {rp: {"resources": {"VCPU": 4}}}}),
            PROJECT,
            USER,
        )
        .await;
    assert_eq!(status, 204, "{body}");
    other
}

/// Four instances on the fast path: one `POST /allocations` claims all four (no
/// `GET` or `PUT` per instance, no candidates question to Placement), and each
/// instance holds the allocation request its Selection carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_instances_are_claimed_with_one_post() {
    let cloud = Cloud::new("batch_four").await;
    let a = host(&cloud, "batch-four-a", 262144).await;
    let b = host(&cloud, "batch-four-b", 262144).await;
    let index = index().await;
    let gate = Gate::start("batch_four", None).await;
    let manager = scheduler(&cloud, &gate, &index).await;
    let uuids: Vec<String> = (0..4).map(|_| uuid()).collect();

    let selections = select(&manager, cloud.spec(FLAVOR, json!({}), &uuids), &uuids)
        .await
        .expect("placed");

    assert_eq!(
        statuses(&gate, "POST", "/allocations"),
        vec![204],
        "{:?}",
        sent(&gate)
    );
    assert!(
        sent(&gate)
            .iter()
            .all(|(m, p, _)| m == "POST" && p == "/allocations"),
        "only the batched claim goes to Placement: {:?}",
        sent(&gate)
    );
    assert_holds_selection(&cloud, &uuids, &selections).await;
    for rp in [&a, &b] {
        assert_within_capacity(&cloud.admin, rp).await;
    }
    assert_eq!(index.counts().fallback, 0);
}

/// The preferred host (most free RAM) is full in Placement but not in the index:
/// the first decision puts two instances there and the POST is refused (nothing
/// written). The index is refreshed and the decision re-run: all four go to the
/// two other hosts with the second POST.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_post_is_decided_again_on_other_hosts() {
    let cloud = Cloud::new("batch_retry").await;
    let a = host(&cloud, "batch-retry-a", 524288).await;
    let b = host(&cloud, "batch-retry-b", 262144).await;
    let c = host(&cloud, "batch-retry-c", 262144).await;
    let index = index().await;
    let other = fill_behind_the_index(&cloud, &a).await;
    let gate = Gate::start("batch_retry", None).await;
    let manager = scheduler(&cloud, &gate, &index).await;
    let uuids: Vec<String> = (0..4).map(|_| uuid()).collect();

    let selections = select(&manager, cloud.spec(FLAVOR, json!({}), &uuids), &uuids)
        .await
        .expect("placed on the other hosts");

    assert_eq!(
        statuses(&gate, "POST", "/allocations"),
        vec![409, 204],
        "{:?}",
        sent(&gate)
    );
    assert!(statuses(&gate, "PUT", "/allocations").is_empty());
    let mut hosts: Vec<&str> = selections
        .iter()
        .map(|l| l[0].compute_node_uuid.as_str())
        .collect();
    hosts.sort();
    let mut want = vec![b.as_str(), b.as_str(), c.as_str(), c.as_str()];
    want.sort();
    assert_eq!(hosts, want);
    assert_holds_selection(&cloud, &uuids, &selections).await;
    // The refused POST left nothing: the host holds only the other consumer.
    assert_eq!(
        cloud.admin.usages(&a).await,
        json!({"VCPU": 4, "MEMORY_MB": 0, "DISK_GB": 0})
    );
    for rp in [&a, &b, &c] {
        assert_within_capacity(&cloud.admin, rp).await;
    }
    cloud.admin.delete_allocations(&other).await;
}

/// As above with no room elsewhere: the POST is refused, the decision on the
/// refreshed index finds room for two of the four only, and the request ends in
/// NoValidHost with nothing claimed for any instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_post_without_room_elsewhere_is_no_valid_host() {
    let cloud = Cloud::new("batch_none").await;
    let a = host(&cloud, "batch-none-a", 524288).await;
    let b = host(&cloud, "batch-none-b", 262144).await;
    let index = index().await;
    let other = fill_behind_the_index(&cloud, &a).await;
    let gate = Gate::start("batch_none", None).await;
    let manager = scheduler(&cloud, &gate, &index).await;
    let uuids: Vec<String> = (0..4).map(|_| uuid()).collect();

    let result = select(&manager, cloud.spec(FLAVOR, json!({}), &uuids), &uuids).await;

    assert_no_valid_host(&result, "There are not enough hosts available.");
    assert_eq!(
        statuses(&gate, "POST", "/allocations"),
        vec![409],
        "{:?}",
        sent(&gate)
    );
    assert!(statuses(&gate, "PUT", "/allocations").is_empty());
    assert_holds_nothing(&cloud, &uuids).await;
    assert_eq!(
        cloud.admin.usages(&b).await,
        json!({"VCPU": 0, "MEMORY_MB": 0, "DISK_GB": 0})
    );
    assert_eq!(
        cloud.admin.usages(&a).await,
        json!({"VCPU": 4, "MEMORY_MB": 0, "DISK_GB": 0})
    );
    // The index took the request's tentative claims back out: the next request
    // finds room for two on the other host.
    let two: Vec<String> = (0..2).map(|_| uuid()).collect();
    let placed = select(&manager, cloud.spec(FLAVOR, json!({}), &two), &two)
        .await
        .expect("room for two");
    assert!(placed.iter().all(|l| l[0].compute_node_uuid == b));
    assert_holds_selection(&cloud, &two, &placed).await;
    cloud.admin.delete_allocations(&other).await;
}

/// An instance that already holds allocations (an evacuation keeps its source
/// host's) is claimed as nova does, with `GET` + `PUT` doubling them, not batched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn existing_consumer_is_claimed_per_instance() {
    let cloud = Cloud::new("batch_move").await;
    let source = uuid();
    cloud
        .admin
        .provider(&source, "batch-move-source", None)
        .await;
    cloud
        .admin
        .inventories(
            &source,
            json!({"VCPU": {"total": 4}, "MEMORY_MB": {"total": 8192}, "DISK_GB": {"total": 80}}),
        )
        .await;
    let target = host(&cloud, "batch-move-target", 262144).await;
    let instance = uuid();
    let (status, body) = cloud
        .admin
        .claim(
            "1.36",
            &instance,
            &json!({"allocations": {&source: {"resources": {"VCPU": 2, "MEMORY_MB": 2048, "DISK_GB": 20}}}}),
            PROJECT,
            USER,
        )
        .await;
    assert_eq!(status, 204, "{body}");
    let index = index().await;
    let gate = Gate::start("batch_move", None).await;
    let manager = scheduler(&cloud, &gate, &index).await;
    let uuids = vec![instance.clone()];

    let selections = select(&manager, cloud.spec(FLAVOR, json!({}), &uuids), &uuids)
        .await
        .expect("placed");

    assert_eq!(selections[0][0].compute_node_uuid, target);
    assert!(statuses(&gate, "POST", "/allocations").is_empty());
    assert_eq!(
        statuses(&gate, "PUT", &format!("/allocations/{instance}")),
        vec![204]
    );
    let mut want = vec![source.clone(), target.clone()];
    want.sort();
    assert_eq!(
        cloud.admin.providers_held(&instance).await,
        want,
        "the source allocation is kept (doubled)"
    );
    cloud.admin.delete_allocations(&instance).await;
}

/// The answer to the batched `POST /allocations` is lost after Placement wrote it
/// (and, in a second request, replaced by a proxy's 502): the consumers are read
/// back, found holding their claims, and the request is answered with them; no
/// second POST. A third request whose POST never reached Placement (refused by the
/// proxy with 503) finds nothing written and decides again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batched_claim_whose_answer_is_lost_is_settled_by_reading_its_consumers() {
    let cloud = Cloud::new("batch_lost").await;
    host(&cloud, "batch-lost-a", 8192).await;
    host(&cloud, "batch-lost-b", 4096).await;
    host(&cloud, "batch-lost-c", 2048).await;
    let index = index().await;
    let posts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = posts.clone();
    let plan: FaultPlan = Arc::new(move |r, _| {
        if r.method != "POST" || r.path != "/allocations" {
            return Fault::Pass;
        }
        match counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
            0 => Fault::DropAnswer,
            1 => Fault::ReplaceAnswer(502),
            2 => Fault::Refuse(503),
            _ => Fault::Pass,
        }
    });
    let gate = Gate::start_faulty("batch_lost", plan).await;
    let manager = scheduler(&cloud, &gate, &index).await;

    for expected in [vec![0], vec![502], vec![503, 204]] {
        let before = statuses(&gate, "POST", "/allocations").len();
        let uuids: Vec<String> = (0..2).map(|_| uuid()).collect();
        let placed = select(&manager, cloud.spec(FLAVOR, json!({}), &uuids), &uuids)
            .await
            .expect("placed");
        assert_eq!(
            statuses(&gate, "POST", "/allocations")[before..].to_vec(),
            expected
        );
        assert_holds_selection(&cloud, &uuids, &placed).await;
        for u in &uuids {
            assert_eq!(cloud.admin.providers_held(u).await.len(), 1, "{u}");
            cloud.admin.delete_allocations(u).await;
        }
    }
}
