// SPDX-License-Identifier: Apache-2.0
//! The provider index's partial refresh against the real Placement
//! (tests/common/placement_server.rs). With the full sums of the usages held off,
//! a refresh lists only the providers Placement stamped since the last one: every
//! change Placement's API makes that moves a generation (a claim, inventories,
//! traits, aggregates, a new provider) is seen by the next refresh and equals a full
//! load for that provider; a deletion, which moves no generation, waits for the
//! next full sum. A provider deleted between two refreshes (alone, or while
//! another is created) is gone after the next one, a reshape (inventories and
//! allocations moved into a child in one transaction) is seen by the next one, and
//! a consumer deleted in a small cloud is caught up by the full sums' own pace.

use crate::nova_schema;
use crate::placement_admin::Admin;
use crate::placement_server;

use nova_scheduler::placement::index::loader::DEFAULT_FULL_SUM_FACTOR;
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

/// Refreshes `live` until `done` holds of its snapshot, for at most 5 s beyond the
/// full-sum pace the loader promises ([`DEFAULT_FULL_SUM_FACTOR`] times the last full
/// sum's cost, which on a loaded machine may itself pass a second).
async fn refresh_until(live: &LiveIndex, what: &str, done: impl Fn(&ProviderIndex) -> bool) {
    let started = std::time::Instant::now();
    loop {
        live.refresh().await.expect("refresh");
        let index = live.snapshot();
        if done(&index) {
            return;
        }
        let pace = index.marks.as_ref().map_or(std::time::Duration::ZERO, |m| {
            m.full_cost.saturating_mul(DEFAULT_FULL_SUM_FACTOR)
        });
        let waited = started.elapsed();
        assert!(
            waited < pace + std::time::Duration::from_secs(5),
            "{what}: not seen in {waited:?} (full-sum pace {pace:?})"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_drops_deleted_providers_and_catches_up_deleted_consumers() {
    let admin = Admin::new().await;
    let (a, b, child) = (uuid(), uuid(), uuid());
    for rp in [&a, &b] {
        admin
            .compute_provider(
                rp,
                &format!("deletion-{rp}"),
                (8, 1.0),
                4096,
                50,
                &["COMPUTE_NODE"],
            )
            .await;
    }
    admin
        .provider(&child, &format!("deletion-{child}"), Some(&a))
        .await;
    // Full sums held off: dropping a provider must not wait for one.
    let live = LiveIndex::load(loader().await.with_full_sum_factor(u32::MAX))
        .await
        .expect("index");
    assert!(live.snapshot().provider(&child).is_some());

    admin.delete_provider(&child).await;
    let stats = live.refresh().await.expect("refresh");
    assert!(!stats.usages_read, "{stats:?}");
    assert!(
        live.snapshot().provider(&child).is_none(),
        "a deleted child is dropped: {stats:?}"
    );
    refreshed_equals_full(&live, &a, "the deleted child's root").await;

    // One provider gone and one come between two refreshes: the count may be the
    // same, the highest id is not.
    let d = uuid();
    admin.delete_provider(&b).await;
    admin
        .compute_provider(
            &d,
            &format!("deletion-{d}"),
            (4, 1.0),
            2048,
            20,
            &["COMPUTE_NODE"],
        )
        .await;
    let stats = live.refresh().await.expect("refresh");
    assert!(
        live.snapshot().provider(&b).is_none(),
        "a deleted provider is dropped: {stats:?}"
    );
    refreshed_equals_full(&live, &d, "the provider created meanwhile").await;

    // A consumer deleted: no generation moves, so only a full sum sees it; with the
    // default pace (ten times the last full sum's cost) a small cloud gets one soon.
    let live = LiveIndex::load(loader().await).await.expect("index");
    let consumer = uuid();
    let claim = json!({"allocations": {&a: {"resources": {"VCPU": 3, "MEMORY_MB": 512}}}});
    let (status, body) = admin
        .claim("1.36", &consumer, &claim, &uuid(), &uuid())
        .await;
    assert_eq!(status, 204, "claim: {body}");
    let used = |index: &ProviderIndex| index.provider(&a).map(|p| p.usages.values().sum::<i64>());
    refresh_until(&live, "the claim", |index| used(index) == Some(515)).await;
    admin.delete_allocations(&consumer).await;
    refresh_until(&live, "the deleted consumer", |index| {
        used(index) == Some(0)
    })
    .await;
    assert_eq!(
        live.snapshot().provider(&a).unwrap().usages,
        loaded(&a).await.usages
    );

    // A claim summed again between two counts and deleted before the next: the rows
    // are back where the last count left them, and the next count still sees a
    // deletion.
    let uncounted = loader().await.with_full_sum_factor(u32::MAX);
    let mut index = uncounted.load().await.expect("index");
    let consumer = uuid();
    let (status, body) = admin
        .claim("1.36", &consumer, &claim, &uuid(), &uuid())
        .await;
    assert_eq!(status, 204, "claim: {body}");
    let stats = uncounted.refresh(&mut index).await.expect("refresh");
    assert!(!stats.usages_read, "{stats:?}");
    assert_eq!(used(&index), Some(515), "the claim, summed again alone");
    admin.delete_allocations(&consumer).await;
    let counted = loader().await.with_full_sum_factor(0);
    let stats = counted.refresh(&mut index).await.expect("refresh");
    assert!(stats.usages_read, "the count sees the deletion: {stats:?}");
    assert_eq!(used(&index), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_refresh_sees_a_reshape() {
    let admin = Admin::new().await;
    let (root, child, consumer) = (uuid(), uuid(), uuid());
    admin
        .provider(&root, &format!("reshape-{root}"), None)
        .await;
    admin
        .inventories(
            &root,
            json!({"VCPU": {"total": 8, "allocation_ratio": 1.0},
                   "CUSTOM_RESHAPE_GPU": {"total": 4, "allocation_ratio": 1.0}}),
        )
        .await;
    admin
        .provider(&child, &format!("reshape-{child}"), Some(&root))
        .await;
    let claim =
        json!({"allocations": {&root: {"resources": {"VCPU": 2, "CUSTOM_RESHAPE_GPU": 1}}}});
    let (status, body) = admin
        .claim("1.36", &consumer, &claim, &uuid(), &uuid())
        .await;
    assert_eq!(status, 204, "claim: {body}");
    let live = LiveIndex::load(loader().await.with_full_sum_factor(u32::MAX))
        .await
        .expect("index");

    // The GPUs move from the root into the child, with the consumer's share, as a
    // virt driver's update_provider_tree does on upgrade (POST /reshaper, 1.30).
    let (status, body) = admin
        .call(
            reqwest::Method::GET,
            &format!("/allocations/{consumer}"),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let reshape = json!({
        "inventories": {
            &root: {"resource_provider_generation": admin.generation(&root).await,
                    "inventories": {"VCPU": {"total": 8, "allocation_ratio": 1.0}}},
            &child: {"resource_provider_generation": admin.generation(&child).await,
                     "inventories": {"CUSTOM_RESHAPE_GPU": {"total": 4, "allocation_ratio": 1.0}}},
        },
        "allocations": {
            &consumer: {
                "allocations": {
                    &root: {"resources": {"VCPU": 2}},
                    &child: {"resources": {"CUSTOM_RESHAPE_GPU": 1}},
                },
                "project_id": body["project_id"], "user_id": body["user_id"],
                "consumer_generation": body["consumer_generation"],
            }
        },
    });
    let (status, answer) = admin.reshape(reshape).await;
    assert_eq!(status, 204, "reshape: {answer}");
    refreshed_equals_full(&live, &root, "the reshaped root").await;
    refreshed_equals_full(&live, &child, "the reshaped child").await;
    let child_now = live.snapshot().provider(&child).unwrap().clone();
    assert_eq!(child_now.usages.values().sum::<i64>(), 1, "{child_now:?}");
}

/// Placement's tables (`CREATE TABLE … LIKE` the shared Placement's) in a database
/// of this test's own, written by SQL as Placement writes them: no other test's
/// claims or deletions reach it, so what a refresh reads is exactly what was written.
async fn private_placement_tables(name: &str) -> sqlx::MySqlPool {
    use sqlx::{AssertSqlSafe, Executor};
    placement_server::url().await;
    let db = nova_schema::tagged(&format!("nsrs_t_index_{name}"));
    nova_schema::recreate_databases(std::slice::from_ref(&db))
        .await
        .expect("database");
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(2)
        .connect(&nova_schema::sqlx_url(&db))
        .await
        .expect("private database");
    let shared = placement_server::db();
    for table in [
        "resource_classes",
        "traits",
        "placement_aggregates",
        "resource_providers",
        "inventories",
        "resource_provider_traits",
        "resource_provider_aggregates",
        "allocations",
    ] {
        pool.execute(AssertSqlSafe(format!(
            "CREATE TABLE `{table}` LIKE `{shared}`.`{table}`"
        )))
        .await
        .expect(table);
    }
    for sql in [
        "INSERT INTO resource_classes (id, name) VALUES (1, 'VCPU')",
        "INSERT INTO traits (id, name) VALUES (1, 'COMPUTE_NODE')",
        "INSERT INTO resource_providers (created_at, id, uuid, name, generation, root_provider_id) \
         VALUES (UTC_TIMESTAMP(), 1, 'c0000000-0000-4000-8000-000000000001', 'host-1', 1, 1), \
                (UTC_TIMESTAMP(), 2, 'c0000000-0000-4000-8000-000000000002', 'host-2', 1, 2)",
        "INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, \
         min_unit, max_unit, step_size, allocation_ratio) \
         VALUES (1, 1, 64, 0, 1, 64, 1, 1.0), (2, 1, 64, 0, 1, 64, 1, 1.0)",
    ] {
        pool.execute(sql).await.expect(sql);
    }
    pool
}

/// A claim as Placement writes it: the allocation rows, and the provider's generation
/// (and `updated_at`) moved.
async fn write_claim(db: &sqlx::MySqlPool, provider: i64, consumer: &str, vcpu: i64) {
    sqlx::query(
        "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used) \
         VALUES (?, ?, 1, ?)",
    )
    .bind(provider)
    .bind(consumer)
    .bind(vcpu)
    .execute(db)
    .await
    .expect("allocation");
    sqlx::query(
        "UPDATE resource_providers SET generation = generation + 1, updated_at = UTC_TIMESTAMP() \
         WHERE id = ?",
    )
    .bind(provider)
    .execute(db)
    .await
    .expect("generation");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_deletion_brings_a_full_sum() {
    let db = private_placement_tables("full_sum").await;
    let used = |index: &ProviderIndex, id: i64| index.providers[&id].usages.get(&1).copied();
    // Every refresh may sum in full (factor 0): whether it does is the deletion check's.
    let loader = IndexLoader::from_pool(db.clone()).with_full_sum_factor(0);
    let mut index = loader.load().await.expect("load");

    // Claims only insert rows and move generations: partial sums keep up.
    for (round, provider) in [1, 2, 1].into_iter().enumerate() {
        write_claim(&db, provider, &format!("consumer-{round}"), 2).await;
        let stats = loader.refresh(&mut index).await.expect("refresh");
        assert!(!stats.usages_read, "claim {round}: {stats:?}");
        assert_eq!(stats.resummed, 1, "claim {round}: {stats:?}");
    }
    assert_eq!((used(&index, 1), used(&index, 2)), (Some(4), Some(2)));
    let stats = loader.refresh(&mut index).await.expect("refresh");
    assert!(!stats.usages_read && stats.resummed == 0, "idle: {stats:?}");

    // A consumer deleted (no generation moves) beside a new claim elsewhere: the count
    // no longer adds up, and the refresh sums in full.
    sqlx::query("DELETE FROM allocations WHERE consumer_id = 'consumer-1'")
        .execute(&db)
        .await
        .expect("delete");
    write_claim(&db, 1, "consumer-3", 1).await;
    let stats = loader.refresh(&mut index).await.expect("refresh");
    assert!(stats.usages_read, "after a deletion: {stats:?}");
    assert_eq!((used(&index, 1), used(&index, 2)), (Some(5), None));

    // Held off by the pace, a deletion is summed at the first refresh the pace allows,
    // however many refreshes come between.
    let held = IndexLoader::from_pool(db.clone()).with_full_sum_factor(u32::MAX);
    let mut index = held.load().await.expect("load");
    sqlx::query("DELETE FROM allocations WHERE consumer_id = 'consumer-0'")
        .execute(&db)
        .await
        .expect("delete");
    write_claim(&db, 2, "consumer-4", 3).await;
    for _ in 0..2 {
        let stats = held.refresh(&mut index).await.expect("refresh");
        assert!(!stats.usages_read, "held off: {stats:?}");
    }
    assert_eq!(
        used(&index, 1),
        Some(5),
        "the deletion waits for a full sum"
    );
    let stats = loader.refresh(&mut index).await.expect("refresh");
    assert!(stats.usages_read, "the pace allows it: {stats:?}");
    assert_eq!((used(&index, 1), used(&index, 2)), (Some(3), Some(3)));
    assert_eq!(index, loader.load().await.expect("load"));
}
