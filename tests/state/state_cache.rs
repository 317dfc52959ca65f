// SPDX-License-Identifier: Apache-2.0
//! The warm host-state cache (`state::HostStateCache`) against the real MariaDB with
//! nova 34's schema built by nova-manage. The reference is the per-request path
//! (`HostStateStore::host_states`, nova's way): after a warm-up and after each
//! incremental refresh, both must give the same host states. Each test owns its
//! databases, so they run in any order.

use crate::nova_schema;
use crate::venv;

use chrono::Utc;
use nova_scheduler::model::HostState;
use nova_scheduler::state::{
    CacheOptions, CellUrlResolver, Consumption, HostStateCache, HostStateStore, StateOptions,
};
use sqlx::{AssertSqlSafe, Executor, MySqlPool};
use std::sync::Arc;
use std::time::Duration;

fn resolver() -> CellUrlResolver {
    Arc::new(|url: &str| Ok(url.replace("mysql+pymysql://", "mysql://")))
}

struct Cloud {
    prefix: String,
    cell1: MySqlPool,
    cell2: MySqlPool,
    store: Arc<HostStateStore>,
    cache: HostStateCache,
}

async fn exec(pool: &MySqlPool, sqls: &[String]) {
    for sql in sqls {
        pool.execute(AssertSqlSafe(sql.clone()))
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

fn service_sql(id: i64, host: &str) -> String {
    format!(
        "INSERT INTO services (id, created_at, updated_at, host, `binary`, topic, report_count, \
         disabled, last_seen_up, forced_down, version, uuid, deleted) VALUES ({id}, \
         UTC_TIMESTAMP() - INTERVAL 1 HOUR, UTC_TIMESTAMP() - INTERVAL 1 HOUR, '{host}', \
         'nova-compute', 'compute', 1, 0, UTC_TIMESTAMP() - INTERVAL 1 HOUR, 0, 74, \
         'a0000000-0000-4000-8000-{id:012}', 0)"
    )
}

fn node_sql(id: i64, host: &str, uuid: &str, free_ram_mb: i64) -> String {
    format!(
        "INSERT INTO compute_nodes (id, created_at, updated_at, service_id, host, \
         hypervisor_hostname, uuid, vcpus, memory_mb, local_gb, vcpus_used, memory_mb_used, \
         local_gb_used, hypervisor_type, hypervisor_version, cpu_info, free_ram_mb, free_disk_gb, \
         stats, supported_instances, mapped, deleted, cpu_allocation_ratio, ram_allocation_ratio, \
         disk_allocation_ratio) VALUES ({id}, UTC_TIMESTAMP() - INTERVAL 1 HOUR, \
         UTC_TIMESTAMP() - INTERVAL 1 HOUR, {id}, '{host}', '{host}', '{uuid}', 16, 32768, 400, \
         2, 2048, 20, 'QEMU', 8002000, '{{}}', {free_ram_mb}, 380, \
         '{{\"num_instances\": \"1\", \"io_workload\": \"0\"}}', '[[\"x86_64\", \"kvm\", \"hvm\"]]', 0, 0, \
         16.0, 1.5, 1.0)"
    )
}

fn instance_sql(uuid: &str, host: &str) -> String {
    format!(
        "INSERT INTO instances (created_at, uuid, host, node, deleted, vm_state) VALUES \
         (UTC_TIMESTAMP() - INTERVAL 1 HOUR, '{uuid}', '{host}', '{host}', 0, 'active')"
    )
}

/// A soft delete the way oslo.db's query `soft_delete` does it: only `deleted` and
/// `deleted_at` move, `updated_at` is left alone.
fn soft_delete_instance_sql(uuid: &str) -> String {
    format!("UPDATE instances SET deleted = id, deleted_at = UTC_TIMESTAMP() WHERE uuid = '{uuid}'")
}

fn uuid(cell: u8, n: u8) -> String {
    format!("{cell}{cell}{cell}{cell}0000-0000-4000-8000-0000000000{n:02}")
}

async fn cloud(name: &str, opts: CacheOptions) -> Cloud {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("nova_scheduler=debug")
        .try_init();
    let prefix = nova_schema::tagged(&format!("nsrs_t_cache_{name}"));
    let venv = venv::find();
    nova_schema::create_from_template(&venv, &prefix, &["cell1", "cell2"])
        .await
        .expect("nova schema");
    let cell1 = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_cell1")))
        .await
        .unwrap();
    let cell2 = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_cell2")))
        .await
        .unwrap();
    exec(
        &cell1,
        &[
            service_sql(1, "c1-a"),
            service_sql(2, "c1-b"),
            node_sql(1, "c1-a", &uuid(1, 1), 30000),
            node_sql(2, "c1-b", &uuid(1, 2), 20000),
            instance_sql("b0000000-0000-4000-8000-000000000001", "c1-a"),
            instance_sql("b0000000-0000-4000-8000-000000000002", "c1-a"),
        ],
    )
    .await;
    exec(
        &cell2,
        &[
            service_sql(1, "c2-a"),
            node_sql(1, "c2-a", &uuid(2, 1), 10000),
            instance_sql("d0000000-0000-4000-8000-000000000001", "c2-a"),
        ],
    )
    .await;
    let api = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_api")))
        .await
        .unwrap();
    exec(
        &api,
        &[
            "INSERT INTO aggregates (id, uuid, name) VALUES \
             (1, 'aaaaaaaa-0000-4000-8000-000000000001', 'az1-hosts')"
                .to_string(),
            "INSERT INTO aggregate_hosts (host, aggregate_id) VALUES ('c1-a', 1), ('c2-a', 1)"
                .to_string(),
            "INSERT INTO aggregate_metadata (aggregate_id, `key`, value) VALUES \
             (1, 'availability_zone', 'az1')"
                .to_string(),
        ],
    )
    .await;
    let store = Arc::new(
        HostStateStore::connect(StateOptions::new(
            nova_schema::sqlx_url(&format!("{prefix}_api")),
            nova_schema::sqlx_url(&format!("{prefix}_cell0")),
            resolver(),
        ))
        .await
        .expect("connect"),
    );
    let cache = HostStateCache::new(Arc::clone(&store), opts);
    cache.warm().await;
    Cloud {
        prefix,
        cell1,
        cell2,
        store,
        cache,
    }
}

fn no_retention() -> CacheOptions {
    CacheOptions {
        retain_consumption: false,
        ..CacheOptions::default()
    }
}

/// `updated` is the only field a request's clock could change; both paths read rows.
async fn assert_same(c: &Cloud, uuids: Option<&[String]>) -> Vec<HostState> {
    let live = c.store.host_states(uuids, None).await.expect("live");
    let cached = c
        .cache
        .host_states(uuids, None, Utc::now())
        .await
        .expect("cached");
    assert_eq!(
        cached, live,
        "the cache must give what a per-request read gives"
    );
    cached
}

/// Node names, sorted: both paths order by cell uuid, which is random here.
fn nodenames(states: &[HostState]) -> Vec<&str> {
    let mut names: Vec<&str> = states.iter().map(|s| &*s.nodename).collect();
    names.sort();
    names
}

fn by_name<'a>(states: &'a [HostState], name: &str) -> &'a HostState {
    states.iter().find(|s| &*s.nodename == name).expect(name)
}

#[tokio::test]
async fn warm_cache_equals_per_request_reads() {
    let c = cloud("warm", no_retention()).await;
    let all = assert_same(&c, None).await;
    assert_eq!(nodenames(&all), ["c1-a", "c1-b", "c2-a"]);
    assert_eq!(by_name(&all, "c1-a").instances.len(), 2);
    assert_eq!(by_name(&all, "c1-a").aggregates.len(), 1);
    let some = vec![uuid(2, 1), uuid(1, 2), "not-a-node".to_string()];
    let picked = assert_same(&c, Some(&some)).await;
    assert_eq!(nodenames(&picked), ["c1-b", "c2-a"]);
    assert_eq!(c.cache.node_count(), 3);
    let _ = &c.prefix;
}

#[tokio::test]
async fn incremental_refresh_follows_every_kind_of_change() {
    // The scan for soft-deleted instances at every pass, so one pass sees it all.
    let opts = CacheOptions {
        deleted_instances_scan_interval: Duration::ZERO,
        ..no_retention()
    };
    let c = cloud("incr", opts).await;
    exec(
        &c.cell1,
        &[
            // A resource tracker update.
            "UPDATE compute_nodes SET free_ram_mb = 12345, vcpus_used = 9, \
             updated_at = UTC_TIMESTAMP() WHERE id = 1"
                .to_string(),
            // A service disabled by an operator.
            "UPDATE services SET disabled = 1, disabled_reason = 'maint', \
             updated_at = UTC_TIMESTAMP() WHERE id = 2"
                .to_string(),
            // A new host with a node and an instance.
            service_sql(3, "c1-new")
                .replace("UTC_TIMESTAMP() - INTERVAL 1 HOUR", "UTC_TIMESTAMP()"),
            node_sql(3, "c1-new", &uuid(1, 3), 64000)
                .replace("UTC_TIMESTAMP() - INTERVAL 1 HOUR", "UTC_TIMESTAMP()"),
            instance_sql("b0000000-0000-4000-8000-000000000003", "c1-new")
                .replace("UTC_TIMESTAMP() - INTERVAL 1 HOUR", "UTC_TIMESTAMP()"),
            // An instance migrated from c1-a to c1-b.
            "UPDATE instances SET host = 'c1-b', node = 'c1-b', updated_at = UTC_TIMESTAMP() \
             WHERE uuid = 'b0000000-0000-4000-8000-000000000001'"
                .to_string(),
            // An instance soft-deleted by query (updated_at left alone).
            soft_delete_instance_sql("b0000000-0000-4000-8000-000000000002"),
        ],
    )
    .await;
    exec(
        &c.cell2,
        &[
            "UPDATE compute_nodes SET deleted = id, deleted_at = UTC_TIMESTAMP() WHERE id = 1"
                .to_string(),
        ],
    )
    .await;
    let stats = c.cache.refresh().await;
    // Only the rows that moved were read, not the cells in full.
    assert_eq!(stats.nodes, 3, "{stats:?}");
    assert_eq!(stats.services, 2, "{stats:?}");
    assert_eq!(stats.instances, 3, "{stats:?}");
    let all = assert_same(&c, None).await;
    assert_eq!(nodenames(&all), ["c1-a", "c1-b", "c1-new"]);
    assert_eq!(by_name(&all, "c1-a").free_ram_mb, 12345);
    assert!(by_name(&all, "c1-a").instances.is_empty());
    assert!(by_name(&all, "c1-b").service.disabled);
    assert_eq!(
        by_name(&all, "c1-b").instances.iter().collect::<Vec<_>>(),
        ["b0000000-0000-4000-8000-000000000001"]
    );
    assert_eq!(by_name(&all, "c1-new").instances.len(), 1);
}

/// Instances whose `updated_at` or `created_at` moved are read at every pass (through
/// nova's indexes); a soft delete that leaves `updated_at` alone waits for the scan
/// of `deleted_at`, which runs every `deleted_instances_scan_interval`.
#[tokio::test]
async fn a_soft_delete_alone_waits_for_the_deletion_scan_and_novas_delete_does_not() {
    let scan_every = Duration::from_secs(4);
    let opts = CacheOptions {
        deleted_instances_scan_interval: scan_every,
        ..no_retention()
    };
    let c = cloud("deletions", opts).await;
    let warmed = std::time::Instant::now();
    exec(
        &c.cell1,
        &[
            // nova's delete: the compute saves the instance (vm_state deleted,
            // updated_at moves), then instance.destroy() soft-deletes it by query.
            "UPDATE instances SET vm_state = 'deleted', updated_at = UTC_TIMESTAMP() \
             WHERE uuid = 'b0000000-0000-4000-8000-000000000001'"
                .to_string(),
            soft_delete_instance_sql("b0000000-0000-4000-8000-000000000001"),
            // A bare query-level soft delete: only deleted / deleted_at move.
            soft_delete_instance_sql("b0000000-0000-4000-8000-000000000002"),
        ],
    )
    .await;
    let first = c.cache.refresh().await;
    assert!(
        warmed.elapsed() < scan_every,
        "the first pass ran before the scan was due"
    );
    assert_eq!(first.instances, 1, "only nova's delete: {first:?}");
    let cached = c
        .cache
        .host_states(None, None, Utc::now())
        .await
        .expect("cached");
    assert_eq!(
        by_name(&cached, "c1-a")
            .instances
            .iter()
            .collect::<Vec<_>>(),
        ["b0000000-0000-4000-8000-000000000002"],
        "the bare soft delete is not read yet"
    );
    tokio::time::sleep(scan_every.saturating_sub(warmed.elapsed())).await;
    let scanned = c.cache.refresh().await;
    // Both deletions again (nova's may also come again from the fresh window).
    assert!(
        scanned.instances >= 2,
        "the scan reads the deletions: {scanned:?}"
    );
    let all = assert_same(&c, None).await;
    assert!(by_name(&all, "c1-a").instances.is_empty());
}

#[tokio::test]
async fn a_row_committed_after_a_pass_with_an_older_stamp_is_read_once_the_margin_passes() {
    let c = cloud("late", no_retention()).await;
    c.cache.refresh().await;
    // Stamped two seconds before it lands, as by a writer whose commit (or
    // clock) lags: the pass right after does not read it, the lagged slice does.
    exec(
        &c.cell1,
        &[
            "UPDATE services SET disabled = 1, disabled_reason = 'late', \
           updated_at = UTC_TIMESTAMP() - INTERVAL 2 SECOND WHERE id = 2"
                .to_string(),
        ],
    )
    .await;
    let next = c.cache.refresh().await;
    assert_eq!(next.services, 0, "{next:?}");
    let mut seen_after = None;
    for pass in 1..=8 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if c.cache.refresh().await.services == 1 {
            seen_after = Some(pass);
            break;
        }
    }
    let passes = seen_after.expect("the late row is read within the margin");
    assert!(
        passes >= 2,
        "read by the lagged slice, not the fresh one ({passes})"
    );
    let all = assert_same(&c, None).await;
    assert!(by_name(&all, "c1-b").service.disabled);
}

#[tokio::test]
async fn a_node_created_since_the_last_pass_is_read_for_the_request() {
    let c = cloud("unknown", no_retention()).await;
    exec(
        &c.cell2,
        &[
            service_sql(2, "c2-late"),
            node_sql(2, "c2-late", &uuid(2, 2), 5000),
            instance_sql("d0000000-0000-4000-8000-000000000002", "c2-late"),
        ],
    )
    .await;
    // Placement already knows the provider; no refresh has run.
    let wanted = vec![uuid(2, 2), uuid(1, 1)];
    let states = assert_same(&c, Some(&wanted)).await;
    assert_eq!(nodenames(&states), ["c1-a", "c2-late"]);
    assert_eq!(by_name(&states, "c2-late").instances.len(), 1);
    assert_eq!(c.cache.node_count(), 4);
}

#[tokio::test]
async fn our_decisions_are_retained_until_the_compute_node_row_moves() {
    let c = cloud("retain", CacheOptions::default()).await;
    let now = Utc::now();
    let flavor = Consumption {
        memory_mb: 2048,
        root_gb: 10,
        ephemeral_gb: 5,
        vcpus: 2,
    };
    let cell1 = c.store.cells()[0].uuid.clone();
    c.cache.retain(&cell1, &uuid(1, 2), flavor, now);
    c.cache.retain(&cell1, &uuid(1, 2), flavor, now);
    let wanted = vec![uuid(1, 2)];
    let before = c.store.host_states(Some(&wanted), None).await.unwrap();
    let seen = c
        .cache
        .host_states(Some(&wanted), None, Utc::now())
        .await
        .unwrap();
    assert_eq!(seen[0].free_ram_mb, before[0].free_ram_mb - 4096);
    assert_eq!(seen[0].free_disk_mb, before[0].free_disk_mb - 30 * 1024);
    assert_eq!(seen[0].vcpus_used, before[0].vcpus_used + 4);
    assert_eq!(seen[0].num_instances, before[0].num_instances + 2);
    // An unrelated refresh keeps it...
    c.cache.refresh().await;
    let seen = c
        .cache
        .host_states(Some(&wanted), None, Utc::now())
        .await
        .unwrap();
    assert_eq!(seen[0].free_ram_mb, before[0].free_ram_mb - 4096);
    // ...until the compute writes its node after our decision.
    exec(
        &c.cell1,
        &["UPDATE compute_nodes SET free_ram_mb = 15904, \
           updated_at = UTC_TIMESTAMP() + INTERVAL 2 SECOND WHERE id = 2"
            .to_string()],
    )
    .await;
    c.cache.refresh().await;
    let seen = c
        .cache
        .host_states(Some(&wanted), None, Utc::now())
        .await
        .unwrap();
    assert_eq!(seen[0].free_ram_mb, 15904);
    assert_eq!(seen[0].num_instances, before[0].num_instances);
}

/// The compute's claim written in the second of our decision: `updated_at` has
/// whole seconds (the database truncates or rounds the writer's clock), the
/// decision's time has not, so the row may already show the decision. It is no
/// longer added: the host is what nova reads, never the claim counted twice (the
/// control-plane run that put two of three servers on one host: a server
/// decided at .140 of a second, its claim stamped with that second, counted
/// again on top of the row that held it).
#[tokio::test]
async fn a_row_stamped_in_the_decisions_second_shows_the_decision() {
    let c = cloud("retain_same_second", CacheOptions::default()).await;
    let flavor = Consumption {
        memory_mb: 2048,
        root_gb: 10,
        ephemeral_gb: 0,
        vcpus: 2,
    };
    let cell1 = c.store.cells()[0].uuid.clone();
    let wanted = vec![uuid(1, 2)];
    let second: chrono::NaiveDateTime = sqlx::query_scalar("SELECT UTC_TIMESTAMP()")
        .fetch_one(&c.cell1)
        .await
        .unwrap();
    // Decided at .140 of that second...
    let decided = second.and_utc() + chrono::Duration::milliseconds(140);
    c.cache.retain(&cell1, &uuid(1, 2), flavor, decided);
    let before = c.store.host_states(Some(&wanted), None).await.unwrap();
    let now = Utc::now();
    let seen = c.cache.host_states(Some(&wanted), None, now).await.unwrap();
    assert_eq!(seen[0].free_ram_mb, before[0].free_ram_mb - 2048);
    assert_eq!(seen[0].vcpus_used, before[0].vcpus_used + 2);
    let table = c.cache.table(now).await.unwrap();
    let row = table.row_of_uuid(&uuid(1, 2)).expect("row");
    assert_eq!(table.row(row).free_ram_mb, before[0].free_ram_mb - 2048);
    // ...and claimed by the compute later in it: the row holds the server.
    exec(
        &c.cell1,
        &[format!(
            "UPDATE compute_nodes SET free_ram_mb = free_ram_mb - 2048, \
             memory_mb_used = memory_mb_used + 2048, vcpus_used = vcpus_used + 2, \
             updated_at = '{}' WHERE id = 2",
            second.format("%Y-%m-%d %H:%M:%S")
        )],
    )
    .await;
    c.cache.refresh().await;
    let live = c.store.host_states(Some(&wanted), None).await.unwrap();
    assert_eq!(live[0].free_ram_mb, before[0].free_ram_mb - 2048);
    let now = Utc::now();
    let seen = c.cache.host_states(Some(&wanted), None, now).await.unwrap();
    assert_eq!(
        (
            seen[0].free_ram_mb,
            seen[0].vcpus_used,
            seen[0].num_instances
        ),
        (
            live[0].free_ram_mb,
            live[0].vcpus_used,
            live[0].num_instances
        ),
        "the claim is counted once"
    );
    let table = c.cache.table(now).await.unwrap();
    let row = table.row_of_uuid(&uuid(1, 2)).expect("row");
    assert_eq!(table.row(row).free_ram_mb, live[0].free_ram_mb);
    assert_eq!(table.row(row).vcpus_used, live[0].vcpus_used);
}

/// nova-compute casts `update_instance_info` / `delete_instance_info` after its
/// resource tracker wrote the host's node (a claim, a deletion): the daemon reads
/// that host's nodes again at once, so a boot right after a delete sees the node
/// nova would read rather than the one of the last pass.
#[tokio::test]
async fn a_host_is_read_again_without_waiting_for_the_pass() {
    let c = cloud("reread", CacheOptions::default()).await;
    let wanted = vec![uuid(1, 2)];
    let before = c.store.host_states(Some(&wanted), None).await.unwrap();
    let table = c.cache.table(Utc::now()).await.unwrap();
    // The deletion of a server: the row gives its resources back.
    exec(
        &c.cell1,
        &[
            "UPDATE compute_nodes SET free_ram_mb = free_ram_mb + 2048, \
           memory_mb_used = memory_mb_used - 2048, vcpus_used = vcpus_used - 2, \
           updated_at = UTC_TIMESTAMP() WHERE id = 2"
                .to_string(),
        ],
    )
    .await;
    let stale = c
        .cache
        .host_states(Some(&wanted), None, Utc::now())
        .await
        .unwrap();
    assert_eq!(stale[0].free_ram_mb, before[0].free_ram_mb, "no pass yet");
    // Two casts at once: one read runs, the other has it run once more.
    tokio::join!(c.cache.reread_host("c1-b"), c.cache.reread_host("c1-b"));
    let seen = assert_same(&c, Some(&wanted)).await;
    assert_eq!(seen[0].free_ram_mb, before[0].free_ram_mb + 2048);
    let now = Utc::now();
    let after = c.cache.table(now).await.unwrap();
    let row = after.row_of_uuid(&uuid(1, 2)).expect("row");
    assert_eq!(after.row(row).free_ram_mb, before[0].free_ram_mb + 2048);
    let c1a = after.row_of_uuid(&uuid(1, 1)).expect("row");
    assert!(
        Arc::ptr_eq(after.row(c1a), table.row(c1a)),
        "only the host read again changed"
    );
    // A host no cell knows: nothing happens.
    c.cache.reread_host("nowhere").await;
    assert_same(&c, None).await;
}

#[tokio::test]
async fn instance_info_casts_update_the_cached_instances() {
    let c = cloud("casts", no_retention()).await;
    let wanted = vec![uuid(1, 2)];
    let instances =
        |states: Vec<HostState>| states[0].instances.iter().cloned().collect::<Vec<String>>();
    c.cache
        .update_instance_info("c1-b", &[("new-1".into(), None), ("new-2".into(), None)]);
    let s = c
        .cache
        .host_states(Some(&wanted), None, Utc::now())
        .await
        .unwrap();
    assert_eq!(instances(s), ["new-1", "new-2"]);
    c.cache.delete_instance_info("c1-b", "new-1");
    let s = c
        .cache
        .host_states(Some(&wanted), None, Utc::now())
        .await
        .unwrap();
    assert_eq!(instances(s), ["new-2"]);
    assert!(c.cache.sync_instance_info("c1-b", &["new-2".into()]));
    assert!(!c.cache.sync_instance_info("c1-b", &["new-3".into()]));
    let s = c
        .cache
        .host_states(Some(&wanted), None, Utc::now())
        .await
        .unwrap();
    assert_eq!(instances(s), ["new-3"]);
    // An unknown host changes nothing.
    c.cache
        .update_instance_info("nowhere", &[("x".into(), None)]);
    assert!(!c.cache.sync_instance_info("nowhere", &[]));
}

/// The legacy TypeAffinityFilter over real rows: each instance's
/// `instances.instance_type_id` reaches the host states by both paths (per-request
/// read and cache), follows a resize and a migration through the incremental
/// refresh, and a cast without the flavor leaves the host failing until the row is
/// read again.
#[tokio::test]
async fn type_affinity_filter_sees_instance_flavors() {
    use nova_scheduler::filters::{build_chain, FilterConfig, FilterRequest};
    use nova_scheduler::model::{Flavor, RequestSpec};
    let c = cloud("typeaff", no_retention()).await;
    // c1-a: two instances of flavor 1 (seeded with NULL, set here); c1-b: none;
    // c2-a: one of flavor 2.
    exec(
        &c.cell1,
        &["UPDATE instances SET instance_type_id = 1 WHERE host = 'c1-a'".to_string()],
    )
    .await;
    exec(
        &c.cell2,
        &["UPDATE instances SET instance_type_id = 2 WHERE host = 'c2-a'".to_string()],
    )
    .await;
    c.cache.reset().await;
    let chain = build_chain(
        &["nova.scheduler.filters.type_filter.TypeAffinityFilter".to_string()],
        &FilterConfig::default(),
    )
    .expect("TypeAffinityFilter is available");
    let passing = |states: &[HostState], flavor_id: i64| -> Vec<String> {
        let spec = RequestSpec {
            flavor: Flavor {
                id: Some(flavor_id),
                ..Default::default()
            },
            ..Default::default()
        };
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let all: Vec<usize> = (0..states.len()).collect();
        let (kept, _) = chain.run(states, &all, &req);
        let mut names: Vec<String> = kept
            .iter()
            .map(|&i| states[i].nodename.to_string())
            .collect();
        names.sort();
        names
    };
    let all = assert_same(&c, None).await;
    assert_eq!(passing(&all, 1), ["c1-a", "c1-b"]);
    assert_eq!(passing(&all, 2), ["c1-b", "c2-a"]);
    assert_eq!(passing(&all, 3), ["c1-b"]);
    // A resize of one c1-a instance to flavor 3 and a new flavor-1 instance on c1-b.
    exec(
        &c.cell1,
        &[
            "UPDATE instances SET instance_type_id = 3, updated_at = UTC_TIMESTAMP() \
             WHERE uuid = 'b0000000-0000-4000-8000-000000000002'"
                .to_string(),
            "INSERT INTO instances (created_at, uuid, host, node, deleted, vm_state, \
             instance_type_id) VALUES (UTC_TIMESTAMP(), \
             'b0000000-0000-4000-8000-000000000009', 'c1-b', 'c1-b', 0, 'active', 1)"
                .to_string(),
        ],
    )
    .await;
    c.cache.refresh().await;
    let all = assert_same(&c, None).await;
    assert_eq!(passing(&all, 1), ["c1-b"]);
    assert_eq!(passing(&all, 3), Vec::<String>::new());
    // A cast adds an instance without instance_type_id: c1-b's flavors are no longer
    // all known, so it fails; a cast that carries it makes c1-b pass again.
    c.cache
        .update_instance_info("c1-b", &[("cast-1".to_string(), None)]);
    let cached = c.cache.host_states(None, None, Utc::now()).await.unwrap();
    assert_eq!(passing(&cached, 1), Vec::<String>::new());
    c.cache
        .update_instance_info("c1-b", &[("cast-1".to_string(), Some(Some(1)))]);
    let cached = c.cache.host_states(None, None, Utc::now()).await.unwrap();
    assert_eq!(passing(&cached, 1), ["c1-b"]);
}

#[tokio::test]
async fn a_cell_that_goes_down_keeps_its_cached_states_and_others_refresh() {
    let c = cloud("down", no_retention()).await;
    // Point cell2 at a database that does not exist, as if its server vanished.
    let api = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{}_api", c.prefix)))
        .await
        .unwrap();
    exec(
        &api,
        &[format!(
            "UPDATE cell_mappings SET database_connection = '{}' WHERE name = 'cell2'",
            nova_schema::sqla_url(&format!("{}_gone", c.prefix))
        )],
    )
    .await;
    exec(
        &c.cell1,
        &[
            "UPDATE compute_nodes SET free_ram_mb = 777, updated_at = UTC_TIMESTAMP() WHERE id = 2"
                .to_string(),
        ],
    )
    .await;
    tokio::time::timeout(Duration::from_secs(60), c.cache.reset())
        .await
        .expect("reset must not hang on a dead cell");
    let states = c
        .cache
        .host_states(None, None, Utc::now())
        .await
        .expect("a dead cell does not fail the request");
    assert_eq!(nodenames(&states), ["c1-a", "c1-b", "c2-a"]);
    assert_eq!(by_name(&states, "c1-b").free_ram_mb, 777);
}

#[tokio::test]
async fn discover_hosts_maps_unmapped_nodes_once_and_leader_rule() {
    use nova_scheduler::state::discover::scheduler_leader;
    let c = cloud("discover", no_retention()).await;
    let api = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{}_api", c.prefix)))
        .await
        .unwrap();
    // A host already mapped (by nova-manage, say): left alone, its node not marked.
    exec(
        &api,
        &["INSERT INTO host_mappings (created_at, cell_id, host) SELECT UTC_TIMESTAMP(), id, 'c1-b' \
           FROM cell_mappings WHERE name = 'cell1'"
            .to_string()],
    )
    .await;
    let mut found = c.store.discover_hosts().await.expect("discover");
    found.sort();
    assert_eq!(
        found,
        [
            ("cell1".to_string(), "c1-a".to_string()),
            ("cell2".to_string(), "c2-a".to_string())
        ]
    );
    let mapped: Vec<(String, String)> = sqlx::query_as(
        "SELECT h.host, c.name FROM host_mappings h JOIN cell_mappings c ON c.id = h.cell_id \
         ORDER BY h.host",
    )
    .fetch_all(&api)
    .await
    .unwrap();
    assert_eq!(
        mapped,
        [
            ("c1-a".to_string(), "cell1".to_string()),
            ("c1-b".to_string(), "cell1".to_string()),
            ("c2-a".to_string(), "cell2".to_string())
        ]
    );
    let flags: Vec<(i64, i32)> = sqlx::query_as("SELECT id, mapped FROM compute_nodes ORDER BY id")
        .fetch_all(&c.cell1)
        .await
        .unwrap();
    assert_eq!(flags, [(1, 1), (2, 0)]);
    assert!(c.store.discover_hosts().await.expect("again").is_empty());

    // The leader is the first live nova-scheduler by host name.
    let main = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{}_cell0", c.prefix)))
        .await
        .unwrap();
    assert_eq!(scheduler_leader(&main, 60, 10).await.unwrap(), None);
    exec(
        &main,
        &["INSERT INTO services (host, `binary`, topic, report_count, disabled, forced_down, \
           version, deleted, created_at, updated_at, last_seen_up) VALUES \
           ('sched-b', 'nova-scheduler', 'scheduler', 1, 0, 0, 74, 0, UTC_TIMESTAMP(), UTC_TIMESTAMP(), UTC_TIMESTAMP()), \
           ('sched-0', 'nova-scheduler', 'scheduler', 1, 0, 0, 74, 0, '2020-01-01', '2020-01-01', '2020-01-01'), \
           ('sched-a', 'nova-scheduler', 'scheduler', 1, 0, 0, 74, 0, UTC_TIMESTAMP(), UTC_TIMESTAMP(), UTC_TIMESTAMP())"
            .to_string()],
    )
    .await;
    assert_eq!(
        scheduler_leader(&main, 60, 10).await.unwrap().as_deref(),
        Some("sched-a")
    );
}

/// The three ratio columns and `updated_at` of a compute node, `updated_at` as seconds ago.
async fn ratios_of(pool: &MySqlPool, id: i64) -> (Option<f64>, Option<f64>, Option<f64>, i64) {
    sqlx::query_as(
        "SELECT CAST(cpu_allocation_ratio AS DOUBLE), CAST(ram_allocation_ratio AS DOUBLE), \
         CAST(disk_allocation_ratio AS DOUBLE), TIMESTAMPDIFF(SECOND, updated_at, UTC_TIMESTAMP()) \
         FROM compute_nodes WHERE id = ?",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .unwrap()
}

#[tokio::test]
async fn null_or_zero_allocation_ratios_are_written_back_as_nova_does() {
    let c = cloud("ratios", no_retention()).await;
    // Two nodes whose resource tracker never set ratios (NULL) or set 0.0 (pre-Stein).
    let mut late = node_sql(2, "c2-r", &uuid(2, 2), 5000);
    late = late.replace("16.0, 1.5, 1.0)", "NULL, 0.0, 2.0)");
    let mut later = node_sql(3, "c2-s", &uuid(2, 3), 5000);
    later = later
        .replace("16.0, 1.5, 1.0)", "NULL, NULL, NULL)")
        .replace("UTC_TIMESTAMP() - INTERVAL 1 HOUR", "UTC_TIMESTAMP()");
    exec(&c.cell2, &[service_sql(2, "c2-r"), late]).await;

    // The per-request path (nova's) substitutes nova 34's initial_* defaults in memory
    // and writes them, stamping updated_at, like db.compute_node_update.
    let states = c.store.host_states(None, None).await.unwrap();
    let r = by_name(&states, "c2-r");
    assert_eq!(
        (
            r.cpu_allocation_ratio,
            r.ram_allocation_ratio,
            r.disk_allocation_ratio
        ),
        (4.0, 1.0, 2.0)
    );
    let (cpu, ram, disk, age) = ratios_of(&c.cell2, 2).await;
    assert_eq!((cpu, ram, disk), (Some(4.0), Some(1.0), Some(2.0)));
    assert!(age < 60, "updated_at must be stamped, is {age} s old");
    // Rows with their ratios set are left alone.
    let (_, _, _, age) = ratios_of(&c.cell2, 1).await;
    assert!(
        age >= 3000,
        "a node with ratios must not be written, is {age} s old"
    );

    // The warm cache's incremental pass does the same for a node it sees appear.
    let svc =
        service_sql(3, "c2-s").replace("UTC_TIMESTAMP() - INTERVAL 1 HOUR", "UTC_TIMESTAMP()");
    exec(&c.cell2, &[svc, later]).await;
    c.cache.refresh().await;
    let (cpu, ram, disk, age) = ratios_of(&c.cell2, 3).await;
    assert_eq!((cpu, ram, disk), (Some(4.0), Some(1.0), Some(1.0)));
    assert!(age < 60);
    let cached = c.cache.host_states(None, None, Utc::now()).await.unwrap();
    assert_eq!(by_name(&cached, "c2-s").cpu_allocation_ratio, 4.0);
}

#[tokio::test]
async fn a_server_group_without_hosts_gets_its_members_hosts_from_the_main_database() {
    use nova_scheduler::model::RequestSpec;
    let c = cloud("grouphosts", no_retention()).await;
    // The scheduler's [database] is cell0 here, as in a stock multi-cell deployment.
    let main = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{}_cell0", c.prefix)))
        .await
        .unwrap();
    let member = |n: u8| format!("e0000000-0000-4000-8000-0000000000{n:02}");
    exec(
        &main,
        &[
            format!("INSERT INTO instances (uuid, host, deleted, vm_state) VALUES ('{}', 'h1', 0, 'active')", member(1)),
            format!("INSERT INTO instances (uuid, host, deleted, vm_state) VALUES ('{}', 'h1', 0, NULL)", member(2)),
            format!("INSERT INTO instances (uuid, host, deleted, vm_state) VALUES ('{}', 'h2', 0, 'soft-delete')", member(3)),
            format!("INSERT INTO instances (uuid, host, deleted, vm_state) VALUES ('{}', 'h3', 4, 'deleted')", member(4)),
            format!("INSERT INTO instances (uuid, host, deleted, vm_state) VALUES ('{}', NULL, 0, 'building')", member(5)),
            format!("INSERT INTO instances (uuid, host, deleted, vm_state) VALUES ('{}', 'h5', 0, 'active')", member(6)),
            format!("INSERT INTO instances (uuid, host, deleted, vm_state) VALUES ('{}', 'h6', 0, 'active')", member(9)),
        ],
    )
    .await;
    let group = |hosts: Option<serde_json::Value>| {
        let mut data = serde_json::json!({
            "uuid": "f0000000-0000-4000-8000-000000000001",
            "policy": "affinity",
            "members": (1..=6).map(member).collect::<Vec<_>>(),
        });
        if let Some(h) = hosts {
            data["hosts"] = h;
        }
        serde_json::json!({
            "nova_object.name": "RequestSpec", "nova_object.namespace": "nova",
            "nova_object.version": "1.14",
            "nova_object.data": {
                "num_instances": 1,
                "flavor": {"nova_object.name": "Flavor", "nova_object.namespace": "nova",
                    "nova_object.version": "1.2",
                    "nova_object.data": {"id": 1, "flavorid": "1", "name": "m1.tiny",
                        "memory_mb": 512, "vcpus": 1, "root_gb": 1, "ephemeral_gb": 0,
                        "swap": 0, "extra_specs": {}}},
                "instance_group": {"nova_object.name": "InstanceGroup",
                    "nova_object.namespace": "nova", "nova_object.version": "1.11",
                    "nova_object.data": data}
            }
        })
    };
    // hosts absent: nova's lazy-load (InstanceGroup.get_hosts on [database]) gives the
    // hosts of live, not soft-deleted members; member 9 is not in the group.
    let mut spec = RequestSpec::from_primitive(&group(None)).expect("decode");
    assert!(spec.instance_group.as_ref().unwrap().hosts_unset);
    c.store.load_unset_group_hosts(&mut spec).await.unwrap();
    let g = spec.instance_group.unwrap();
    assert_eq!(g.hosts, ["h1", "h5"]);
    assert!(!g.hosts_unset);
    // hosts sent (even empty or null) is used as sent: no read.
    for sent in [
        serde_json::json!([]),
        serde_json::Value::Null,
        serde_json::json!(["hx"]),
    ] {
        let mut spec = RequestSpec::from_primitive(&group(Some(sent.clone()))).expect("decode");
        c.store.load_unset_group_hosts(&mut spec).await.unwrap();
        let want: Vec<String> = sent.as_array().map_or(vec![], |a| {
            a.iter().map(|v| v.as_str().unwrap().to_string()).collect()
        });
        assert_eq!(spec.instance_group.unwrap().hosts, want, "{sent}");
    }
}

/// The cache's decision table (`HostStateCache::table`) holds what a read of every
/// host gives at the same time, after each kind of change; hosts that did not
/// change keep their shared state (the table was brought up to date, not built
/// again), until rows come or go.
#[tokio::test]
async fn decision_table_follows_the_cache() {
    let opts = CacheOptions {
        consumption_ttl: Duration::from_secs(60),
        ..CacheOptions::default()
    };
    let c = cloud("table", opts).await;
    let check = |now: chrono::DateTime<Utc>| {
        let c = &c;
        async move {
            let table = c.cache.table(now).await.expect("table");
            let read = c.cache.host_states(None, None, now).await.expect("read");
            let rows: Vec<HostState> = table.rows().iter().map(|h| (**h).clone()).collect();
            assert_eq!(rows, read, "the table must hold what a read gives");
            table
        }
    };
    let row_of = |table: &nova_scheduler::scheduler::HostTable, name: &str| {
        (0..table.len())
            .find(|&r| &*table.row(r).nodename == name)
            .expect(name)
    };
    let now = Utc::now();
    let first = check(now).await;
    assert_eq!(first.len(), 3);

    // In-place changes: a node's resources, a disabled service, an instance moved.
    exec(
        &c.cell1,
        &[
            "UPDATE compute_nodes SET free_ram_mb = 777, updated_at = UTC_TIMESTAMP() WHERE id = 1"
                .to_string(),
            "UPDATE services SET disabled = 1, updated_at = UTC_TIMESTAMP() WHERE id = 2"
                .to_string(),
            "UPDATE instances SET host = 'c1-b', node = 'c1-b', updated_at = UTC_TIMESTAMP() \
             WHERE uuid = 'b0000000-0000-4000-8000-000000000001'"
                .to_string(),
        ],
    )
    .await;
    c.cache.refresh().await;
    let second = check(now).await;
    let c2a = row_of(&second, "c2-a");
    assert!(
        Arc::ptr_eq(second.row(c2a), first.row(c2a)),
        "c2-a did not change"
    );
    assert_eq!(second.row(row_of(&second, "c1-a")).free_ram_mb, 777);

    // A retained decision, then its ttl running out.
    let cell1 = c.store.cells()[0].uuid.clone();
    let flavor = Consumption {
        memory_mb: 1024,
        root_gb: 1,
        ephemeral_gb: 0,
        vcpus: 1,
    };
    c.cache.retain(&cell1, &uuid(1, 2), flavor, now);
    let third = check(now).await;
    let c1b = row_of(&third, "c1-b");
    assert_eq!(
        third.row(c1b).free_ram_mb,
        second.row(c1b).free_ram_mb - 1024
    );
    assert!(Arc::ptr_eq(third.row(c2a), first.row(c2a)));
    let later = now + chrono::Duration::seconds(61);
    let fourth = check(later).await;
    assert_eq!(fourth.row(c1b).free_ram_mb, second.row(c1b).free_ram_mb);

    // Casts from nova-compute.
    c.cache
        .update_instance_info("c2-a", &[("cast-1".into(), None)]);
    let fifth = check(later).await;
    assert!(fifth.row(c2a).instances.contains("cast-1"));

    // A new node: the rows are built again, the new one included.
    exec(
        &c.cell2,
        &[
            service_sql(2, "c2-new")
                .replace("UTC_TIMESTAMP() - INTERVAL 1 HOUR", "UTC_TIMESTAMP()"),
            node_sql(2, "c2-new", &uuid(2, 2), 4000)
                .replace("UTC_TIMESTAMP() - INTERVAL 1 HOUR", "UTC_TIMESTAMP()"),
        ],
    )
    .await;
    c.cache.refresh().await;
    let sixth = check(later).await;
    assert_eq!(sixth.len(), 4);
    // A provider of the request that no cell has shown yet is read for it.
    exec(
        &c.cell1,
        &[
            service_sql(4, "c1-late"),
            node_sql(4, "c1-late", &uuid(1, 4), 2000),
        ],
    )
    .await;
    let late = c
        .cache
        .table_for(&[uuid(1, 4), "not-a-node".to_string()], later)
        .await
        .expect("table");
    assert!(late.row_of_uuid(&uuid(1, 4)).is_some());
    let seventh = check(later).await;
    let c1a = row_of(&seventh, "c1-a");
    let before = seventh.row(c1a).service.clone();
    // A heartbeat while no one holds the table: its row's service is written in
    // place (no request can see the table change under it).
    drop((first, second, third, fourth, fifth, sixth, late, seventh));
    exec(
        &c.cell1,
        &[
            "UPDATE services SET last_seen_up = UTC_TIMESTAMP() + INTERVAL 3 SECOND, \
           updated_at = UTC_TIMESTAMP() + INTERVAL 3 SECOND WHERE id = 1"
                .to_string(),
        ],
    )
    .await;
    c.cache.refresh().await;
    let eighth = check(later).await;
    assert_ne!(eighth.row(row_of(&eighth, "c1-a")).service, before);
}

/// With the cache on, a request uses the minimum compute version the cache read
/// (at warm-up or beside a pass) while it is at most two refresh intervals old; a
/// store without a cache reads it per request, as nova does.
#[tokio::test]
async fn the_minimum_compute_version_is_read_by_the_cache_beside_its_passes() {
    let slow = CacheOptions {
        refresh_interval: Duration::from_secs(60),
        ..no_retention()
    };
    let c = cloud("minver", slow).await;
    assert_eq!(c.store.min_compute_service_version().await, Some(74));
    exec(
        &c.cell1,
        &["UPDATE services SET version = 70 WHERE id = 2".to_string()],
    )
    .await;
    // The warm-up's reading still answers: no request reads the cells for it.
    assert_eq!(c.store.min_compute_service_version().await, Some(74));
    let per_request = HostStateStore::connect(StateOptions::new(
        nova_schema::sqlx_url(&format!("{}_api", c.prefix)),
        nova_schema::sqlx_url(&format!("{}_cell0", c.prefix)),
        resolver(),
    ))
    .await
    .expect("connect");
    assert_eq!(per_request.min_compute_service_version().await, Some(70));
    // What the cache's pass does beside its refresh.
    assert_eq!(c.store.refresh_min_compute_version().await, Some(70));
    assert_eq!(c.store.min_compute_service_version().await, Some(70));
}

/// A reading older than two refresh intervals (the cache's passes stopped or
/// lag) is not used: the request reads the cells itself.
#[tokio::test]
async fn an_old_minimum_compute_version_reading_is_read_again_by_the_request() {
    let fast = CacheOptions {
        refresh_interval: Duration::from_millis(100),
        ..no_retention()
    };
    let c = cloud("minver_old", fast).await;
    assert_eq!(c.store.min_compute_service_version().await, Some(74));
    exec(
        &c.cell2,
        &["UPDATE services SET version = 66 WHERE id = 1".to_string()],
    )
    .await;
    // No pass runs here; after two intervals the reading has expired.
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(c.store.min_compute_service_version().await, Some(66));
}
