// SPDX-License-Identifier: Apache-2.0
//! The provider index's partial refresh against the real Placement
//! (tests/common/placement_server.rs). With the full sums of the usages held off,
//! a refresh lists only the providers Placement stamped since the last one: every
//! change Placement's API makes that moves a generation (a claim, inventories,
//! traits, aggregates, a new provider) is seen by the next refresh and equals a full
//! load for that provider; a deletion, which moves no generation, waits for the
//! next full sum.

use crate::nova_schema;
use crate::placement_admin::Admin;
use crate::placement_server;

use nova_scheduler::placement::index::{IndexLoader, LiveIndex, Provider, ProviderIndex};
use serde_json::json;

fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

async fn loader() -> IndexLoader {
    placement_server::url().await;
    IndexLoader::connect(&nova_schema::sqlx_url(&placement_server::db()))
        .await
        .expect("placement db")
}

/// `rp` as a fresh full load reads it.
async fn loaded(rp: &str) -> Provider {
    let full: ProviderIndex = loader().await.load().await.expect("full load");
    full.provider(rp)
        .unwrap_or_else(|| panic!("{rp} not in a full load"))
        .clone()
}

/// Refreshes `live` and checks that `rp` equals a full load's, and that the
/// usages were not summed in full.
async fn refreshed_equals_full(live: &LiveIndex, rp: &str, what: &str) {
    let stats = live.refresh().await.expect("refresh");
    assert!(
        !stats.usages_read,
        "{what}: full sums are held off: {stats:?}"
    );
    let ours = live
        .snapshot()
        .provider(rp)
        .unwrap_or_else(|| panic!("{what}: {rp} not in the refreshed index"))
        .clone();
    assert_eq!(ours, loaded(rp).await, "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_refresh_sees_every_change_that_moves_a_generation() {
    let admin = Admin::new().await;
    let (a, b) = (uuid(), uuid());
    for rp in [&a, &b] {
        admin
            .compute_provider(
                rp,
                &format!("refresh-{rp}"),
                (8, 2.0),
                8192,
                100,
                &["COMPUTE_NODE"],
            )
            .await;
    }
    let live = LiveIndex::load(loader().await.with_full_sum_factor(u32::MAX))
        .await
        .expect("index");

    let consumer = uuid();
    let claim = json!({"allocations": {&a: {"resources": {"VCPU": 2, "MEMORY_MB": 1024}}}});
    let (status, body) = admin
        .claim("1.36", &consumer, &claim, &uuid(), &uuid())
        .await;
    assert_eq!(status, 204, "claim: {body}");
    refreshed_equals_full(&live, &a, "a claim").await;
    assert_eq!(
        live.snapshot()
            .provider(&a)
            .unwrap()
            .usages
            .values()
            .sum::<i64>(),
        1026
    );

    admin
        .inventories(
            &b,
            json!({"VCPU": {"total": 16, "allocation_ratio": 4.0},
                   "MEMORY_MB": {"total": 4096, "reserved": 512, "allocation_ratio": 1.5}}),
        )
        .await;
    refreshed_equals_full(&live, &b, "inventories").await;
    admin
        .traits(&b, &["COMPUTE_NODE", "CUSTOM_REFRESH_TEST"])
        .await;
    refreshed_equals_full(&live, &b, "traits").await;
    admin.aggregates(&b, &[&uuid(), &uuid()]).await;
    refreshed_equals_full(&live, &b, "aggregates").await;

    let c = uuid();
    admin.provider(&c, &format!("refresh-{c}"), Some(&a)).await;
    refreshed_equals_full(&live, &c, "a new child provider").await;
    refreshed_equals_full(&live, &a, "the child's root").await;

    // A claim moved to `b` in one POST: `b`'s generation moves, `a`'s does not.
    let moved = json!({
        &consumer: {
            "allocations": {&b: {"resources": {"VCPU": 2}}},
            "project_id": uuid(), "user_id": uuid(), "consumer_generation": 1,
        }
    });
    let (status, body) = admin
        .call_at("1.36", reqwest::Method::POST, "/allocations", Some(moved))
        .await;
    assert_eq!(status, 204, "move: {body}");
    refreshed_equals_full(&live, &b, "the claim moved in").await;
    let before = live.snapshot().provider(&a).unwrap().usages.clone();
    assert_ne!(
        before,
        loaded(&a).await.usages,
        "the source's usages wait for a full sum (Placement moved no generation)"
    );

    // A full sum catches the deletion up.
    let mut index = live.snapshot();
    index.marks = None;
    loader()
        .await
        .refresh(&mut index)
        .await
        .expect("full refresh");
    assert_eq!(index.provider(&a).unwrap().usages, loaded(&a).await.usages);
}
