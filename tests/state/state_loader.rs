// SPDX-License-Identifier: Apache-2.0
//! `state::HostStateStore` against the real MariaDB with nova 34's real schema,
//! created by nova-manage (see tests/common/nova_schema.rs). Rows are seeded with
//! plain SQL into the nova-created tables once per test binary; tests only read them
//! (except `reload_picks_up_new_cells`, which adds a disabled cell nobody else sees).
//!
//! `tls_to_the_databases` copies the seeded databases into a private MariaDB server that
//! requires TLS (tests/common/private_mariadb.rs) and reads them through nova-style URLs
//! with TLS arguments, the way the daemon turns them into sqlx connections.

use crate::nova_schema;
use crate::private_mariadb;
use crate::venv;

use nova_scheduler::state::{CellUrlResolver, HostStateStore, StateError, StateOptions};
use sqlx::{AssertSqlSafe, Executor, MySqlPool};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::OnceCell;

/// `nsrs_t_state`, suffixed with `$NSRS_TEST_DB_TAG` when that is set.
fn prefix() -> String {
    nova_schema::tagged("nsrs_t_state")
}
const MISSING_CELL: &str = "9c7f0c1e-0000-4000-8000-00000000dead";
const DISABLED_CELL: &str = "5d1c0ffe-0000-4000-8000-0000000d15ab";

/// Compute node (= resource provider) uuids seeded below.
const U_FULL: &str = "11111111-0000-4000-8000-000000000001";
const U_DISABLED: &str = "11111111-0000-4000-8000-000000000002";
const U_NOT_UPDATED: &str = "11111111-0000-4000-8000-000000000003";
const U_STALE: &str = "11111111-0000-4000-8000-000000000004";
const U_DELETED: &str = "11111111-0000-4000-8000-000000000005";
const U_NO_SERVICE: &str = "11111111-0000-4000-8000-000000000006";
const U_STALE_B: &str = "11111111-0000-4000-8000-000000000007";
const U_CELL2: &str = "22222222-0000-4000-8000-000000000001";

const AGG_AZ1: &str = "aaaaaaaa-0000-4000-8000-000000000001";
const AGG_OTHER: &str = "aaaaaaaa-0000-4000-8000-000000000002";
const AGG_AZ1_EMPTY: &str = "aaaaaaaa-0000-4000-8000-000000000003";

struct Seeded {
    cell1: String,
    cell2: String,
}

static SEEDED: OnceCell<Result<Seeded, String>> = OnceCell::const_new();

async fn seeded() -> &'static Seeded {
    let result = SEEDED
        .get_or_init(|| async {
            let venv = venv::find();
            nova_schema::create(&venv, &prefix(), &["cell1", "cell2"]).await?;
            seed().await.map_err(|e| format!("seeding: {e}"))
        })
        .await;
    match result {
        Ok(s) => s,
        Err(e) => panic!("test setup failed: {e}"),
    }
}

async fn exec(pool: &MySqlPool, sqls: &[&str]) -> Result<(), sqlx::Error> {
    for sql in sqls {
        pool.execute(AssertSqlSafe(sql.to_string())).await?;
    }
    Ok(())
}

async fn seed() -> Result<Seeded, sqlx::Error> {
    let prefix = prefix();
    let api = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_api"))).await?;
    let uuid_of = |name: &'static str| {
        let api = api.clone();
        async move {
            sqlx::query_scalar::<_, String>("SELECT uuid FROM cell_mappings WHERE name = ?")
                .bind(name)
                .fetch_one(&api)
                .await
        }
    };
    let seeded = Seeded {
        cell1: uuid_of("cell1").await?,
        cell2: uuid_of("cell2").await?,
    };
    let missing = format!(
        "INSERT INTO cell_mappings (created_at, uuid, name, transport_url, database_connection, disabled) \
         VALUES (UTC_TIMESTAMP(), '{MISSING_CELL}', 'cell-missing', 'none:///', '{}', 0)",
        nova_schema::sqla_url(&format!("{prefix}_missing"))
    );
    // A disabled cell whose URL is a template, resolved by the test's resolver.
    let disabled = format!(
        "INSERT INTO cell_mappings (created_at, uuid, name, transport_url, database_connection, disabled) \
         VALUES (UTC_TIMESTAMP(), '{DISABLED_CELL}', 'cell-disabled', 'none:///', \
         'mysql+pymysql://{{username}}:{{password}}@127.0.0.1:3306/{prefix}_cell2?charset=utf8', 1)"
    );
    exec(&api, &[&missing, &disabled]).await?;
    exec(
        &api,
        &[
            &format!("INSERT INTO aggregates (id, uuid, name) VALUES (1, '{AGG_AZ1}', 'az1-hosts'), \
              (2, '{AGG_OTHER}', 'fast-disks'), (3, '{AGG_AZ1_EMPTY}', 'az1-empty')"),
            "INSERT INTO aggregate_hosts (host, aggregate_id) VALUES ('c1-full', 1), ('c2-h1', 1), ('c1-full', 2)",
            "INSERT INTO aggregate_metadata (aggregate_id, `key`, value) VALUES \
              (1, 'availability_zone', 'az1'), (2, 'disk', 'ssd'), (3, 'availability_zone', 'az1')",
        ],
    )
    .await?;
    api.close().await;

    let cell1 = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_cell1"))).await?;
    exec(&cell1, CELL1_ROWS).await?;
    cell1.close().await;
    let cell2 = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_cell2"))).await?;
    exec(&cell2, CELL2_ROWS).await?;
    cell2.close().await;
    Ok(seeded)
}

const CELL1_ROWS: &[&str] = &[
    "INSERT INTO services (id, created_at, updated_at, host, `binary`, topic, report_count, disabled, \
       disabled_reason, last_seen_up, forced_down, version, uuid, deleted) VALUES \
     (1, '2026-01-01 00:00:00', '2026-01-02 03:04:05', 'c1-full', 'nova-compute', 'compute', 10, 0, NULL, \
       '2026-01-02 03:04:05', 0, 74, 'a0000000-0000-4000-8000-000000000001', 0), \
     (2, '2026-01-01 00:00:00', NULL, 'c1-disabled', 'nova-compute', 'compute', 1, 1, 'maintenance', \
       UTC_TIMESTAMP(), 0, 74, 'a0000000-0000-4000-8000-000000000002', 0), \
     (3, '2026-01-01 00:00:00', NULL, 'c1-notupdated', 'nova-compute', 'compute', 1, 0, NULL, \
       UTC_TIMESTAMP(), 1, 60, 'a0000000-0000-4000-8000-000000000003', 0), \
     (4, '2026-01-01 00:00:00', NULL, 'c1-stale', 'nova-compute', 'compute', 1, 0, NULL, \
       '2020-01-01 00:00:00', 0, 75, 'a0000000-0000-4000-8000-000000000004', 0), \
     (5, '2026-01-01 00:00:00', NULL, 'c1-gone', 'nova-compute', 'compute', 1, 0, NULL, \
       UTC_TIMESTAMP(), 0, 74, 'a0000000-0000-4000-8000-000000000005', 5), \
     (6, '2026-01-01 00:00:00', NULL, 'c1-full', 'nova-conductor', 'conductor', 1, 0, NULL, \
       UTC_TIMESTAMP(), 0, 10, 'a0000000-0000-4000-8000-000000000006', 0)",
    // id 1: everything set, ratios NULL / 0.0 / set; disk_available_least below free_disk_gb.
    "INSERT INTO compute_nodes (id, created_at, updated_at, service_id, host, hypervisor_hostname, uuid, \
       vcpus, memory_mb, local_gb, vcpus_used, memory_mb_used, local_gb_used, hypervisor_type, \
       hypervisor_version, cpu_info, disk_available_least, free_ram_mb, free_disk_gb, current_workload, \
       running_vms, host_ip, supported_instances, pci_stats, metrics, stats, numa_topology, \
       ram_allocation_ratio, cpu_allocation_ratio, disk_allocation_ratio, mapped, deleted) VALUES \
     (1, '2026-01-01 00:00:00', '2026-01-02 03:04:05', 1, 'c1-full', 'c1-full.example', \
       '11111111-0000-4000-8000-000000000001', 32, 65536, 1000, 4, 8192, 100, 'QEMU', 8002000, \
       '{\"arch\": \"x86_64\", \"model\": \"Haswell\"}', 700, 57344, 900, 0, 2, '192.0.2.11', \
       '[[\"x86_64\", \"kvm\", \"hvm\"]]', \
       '{\"nova_object.name\": \"PciDevicePoolList\", \"nova_object.data\": {\"objects\": []}}', \
       '[{\"name\": \"cpu.frequency\", \"value\": 2400, \"timestamp\": \"2026-01-02T03:04:05.000000\", \"source\": \"libvirt.LibvirtDriver\"}]', \
       '{\"num_instances\": \"2\", \"io_workload\": \"1\", \"failed_builds\": \"3\", \"num_proj_p1\": \"2\"}', \
       '{\"nova_object.name\": \"NUMATopology\", \"nova_object.data\": {\"cells\": []}}', \
       NULL, 0.0, 1.2, 1, 0)",
    // id 2: disabled service, explicit ratios, no disk_available_least, empty stats.
    "INSERT INTO compute_nodes (id, host, hypervisor_hostname, uuid, vcpus, memory_mb, local_gb, vcpus_used, \
       memory_mb_used, local_gb_used, hypervisor_type, hypervisor_version, cpu_info, free_ram_mb, free_disk_gb, \
       stats, ram_allocation_ratio, cpu_allocation_ratio, disk_allocation_ratio, deleted) VALUES \
     (2, 'c1-disabled', 'c1-disabled', '11111111-0000-4000-8000-000000000002', 8, 16384, 200, 0, 0, 0, \
       'QEMU', 8002000, '{}', 16384, 200, '{}', 1.5, 16.0, 1.0, 0)",
    // id 3: never updated by the resource tracker (free_disk_gb NULL).
    "INSERT INTO compute_nodes (id, host, hypervisor_hostname, uuid, vcpus, memory_mb, local_gb, vcpus_used, \
       memory_mb_used, local_gb_used, hypervisor_type, hypervisor_version, cpu_info, free_ram_mb, free_disk_gb, deleted) VALUES \
     (3, 'c1-notupdated', 'c1-notupdated', '11111111-0000-4000-8000-000000000003', 8, 16384, 200, 0, 0, 0, \
       'QEMU', 8002000, '{}', NULL, NULL, 0)",
    // ids 4 and 7: two nodes of one host (ironic style); id 5 deleted; id 6 has no live service.
    "INSERT INTO compute_nodes (id, host, hypervisor_hostname, uuid, vcpus, memory_mb, local_gb, vcpus_used, \
       memory_mb_used, local_gb_used, hypervisor_type, hypervisor_version, cpu_info, free_ram_mb, free_disk_gb, deleted) VALUES \
     (4, 'c1-stale', 'c1-stale-a', '11111111-0000-4000-8000-000000000004', 4, 4096, 50, 0, 0, 0, 'ironic', 1, '', 4096, 50, 0), \
     (5, 'c1-full', 'c1-full-old', '11111111-0000-4000-8000-000000000005', 4, 4096, 50, 0, 0, 0, 'QEMU', 1, '', 4096, 50, 5), \
     (6, 'c1-gone', 'c1-gone', '11111111-0000-4000-8000-000000000006', 4, 4096, 50, 0, 0, 0, 'QEMU', 1, '', 4096, 50, 0), \
     (7, 'c1-stale', 'c1-stale-b', '11111111-0000-4000-8000-000000000007', 4, 4096, 50, 0, 0, 0, 'ironic', 1, '', 4096, 50, 0)",
    "INSERT INTO instances (uuid, host, node, deleted, vm_state) VALUES \
     ('b0000000-0000-4000-8000-000000000001', 'c1-full', 'c1-full.example', 0, 'active'), \
     ('b0000000-0000-4000-8000-000000000002', 'c1-full', 'c1-full.example', 0, 'soft-delete'), \
     ('b0000000-0000-4000-8000-000000000004', 'c1-stale', 'c1-stale-a', 0, 'active'), \
     ('b0000000-0000-4000-8000-000000000005', 'c1-elsewhere', 'x', 0, 'active')",
    "INSERT INTO instances (id, uuid, host, node, deleted, vm_state) VALUES \
     (100, 'b0000000-0000-4000-8000-000000000003', 'c1-full', 'c1-full.example', 100, 'deleted')",
];

const CELL2_ROWS: &[&str] = &[
    "INSERT INTO services (id, host, `binary`, topic, report_count, disabled, last_seen_up, forced_down, version, uuid, deleted) VALUES \
     (1, 'c2-h1', 'nova-compute', 'compute', 3, 0, UTC_TIMESTAMP(), 0, 72, 'c0000000-0000-4000-8000-000000000001', 0), \
     (2, 'c2-new', 'nova-compute', 'compute', 0, 0, NULL, 0, 0, 'c0000000-0000-4000-8000-000000000002', 0)",
    "INSERT INTO compute_nodes (id, host, hypervisor_hostname, uuid, vcpus, memory_mb, local_gb, vcpus_used, \
       memory_mb_used, local_gb_used, hypervisor_type, hypervisor_version, cpu_info, free_ram_mb, free_disk_gb, deleted) VALUES \
     (1, 'c2-h1', 'c2-h1', '22222222-0000-4000-8000-000000000001', 16, 32768, 400, 2, 2048, 20, 'QEMU', 8002000, '{}', 30720, 380, 0)",
    "INSERT INTO instances (uuid, host, node, deleted) VALUES ('d0000000-0000-4000-8000-000000000001', 'c2-h1', 'c2-h1', 0)",
];

/// The integrator converts with the config module; this stand-in only knows what
/// the seeded rows use: the `+pymysql` driver and the `{username}`/`{password}` template.
fn resolver() -> CellUrlResolver {
    Arc::new(|url: &str| {
        let url = url
            .replace("mysql+pymysql://", "mysql://")
            .replace("{username}", "root")
            .replace("{password}", "");
        Ok(url)
    })
}

async fn store() -> HostStateStore {
    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("nova_scheduler=debug")
        .try_init();
    seeded().await;
    let prefix = prefix();
    let mut opts = StateOptions::new(
        nova_schema::sqlx_url(&format!("{prefix}_api")),
        nova_schema::sqlx_url(&format!("{prefix}_cell0")),
        resolver(),
    );
    opts.cpu_allocation_ratio = Some(8.0);
    opts.initial_ram_allocation_ratio = 1.5;
    HostStateStore::connect(opts).await.expect("connect")
}

fn names(states: &[nova_scheduler::model::HostState]) -> Vec<(String, String)> {
    states
        .iter()
        .map(|h| (h.cell_uuid.to_string(), h.nodename.to_string()))
        .collect()
}

#[tokio::test]
async fn all_enabled_cells_rebuild_order_and_skips() {
    let s = seeded().await;
    let store = store().await;
    let started = Instant::now();
    let states = store.host_states(None, None).await.expect("host states");
    // The missing cell's database does not exist: skipped at once, not after 60 s.
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    let mut cell1: Vec<(String, String)> = [
        "c1-full.example",
        "c1-disabled",
        "c1-notupdated",
        "c1-stale-a",
        "c1-stale-b",
    ]
    .iter()
    .map(|n| (s.cell1.clone(), n.to_string()))
    .collect();
    let mut expected = vec![(s.cell2.clone(), "c2-h1".to_string())];
    // Deterministic order: by cell uuid, then compute node id.
    if s.cell1 < s.cell2 {
        cell1.append(&mut expected);
        expected = cell1;
    } else {
        expected.append(&mut cell1);
    }
    assert_eq!(names(&states), expected);
}

#[tokio::test]
async fn by_uuids_across_cells() {
    let s = seeded().await;
    let store = store().await;
    let uuids: Vec<String> = [
        U_CELL2,
        U_FULL,
        U_NOT_UPDATED,
        U_DELETED,
        U_NO_SERVICE,
        "no-such-node",
    ]
    .iter()
    .map(|u| u.to_string())
    .collect();
    let states = store
        .host_states(Some(&uuids), None)
        .await
        .expect("host states");
    let mut got: Vec<(String, Option<String>)> = states
        .iter()
        .map(|h| {
            (
                h.nodename.to_string(),
                h.uuid.as_deref().map(str::to_string),
            )
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        vec![
            ("c1-full.example".to_string(), Some(U_FULL.to_string())),
            // Never updated: kept with zero defaults and no uuid, as nova does.
            ("c1-notupdated".to_string(), None),
            ("c2-h1".to_string(), Some(U_CELL2.to_string())),
        ]
    );
    let not_updated = states
        .iter()
        .find(|h| &*h.host == "c1-notupdated")
        .expect("node");
    assert_eq!((not_updated.free_ram_mb, not_updated.vcpus_total), (0, 0));
    assert!(not_updated.service.forced_down);
    assert_eq!(&*not_updated.cell_uuid, s.cell1.as_str());
    let none = store.host_states(Some(&[]), None).await.expect("empty");
    assert!(none.is_empty());
}

#[tokio::test]
async fn full_node_attributes() {
    let store = store().await;
    let states = store
        .host_states(Some(&[U_FULL.to_string(), U_DISABLED.to_string()]), None)
        .await
        .expect("host states");
    let h = states
        .iter()
        .find(|h| &*h.host == "c1-full")
        .expect("c1-full");
    assert_eq!(h.hypervisor_hostname.as_deref(), Some("c1-full.example"));
    assert_eq!((h.total_usable_ram_mb, h.free_ram_mb), (65536, 57344));
    assert_eq!((h.total_usable_disk_gb, h.disk_mb_used), (1000, 100 * 1024));
    assert_eq!(
        h.free_disk_mb,
        700 * 1024,
        "min(free_disk_gb, disk_available_least)"
    );
    assert_eq!((h.vcpus_total, h.vcpus_used), (32, 4));
    // NULL ram ratio -> initial (1.5 here); 0.0 cpu ratio -> [DEFAULT] (8.0); 1.2 as nova reads it.
    assert_eq!(
        (
            h.cpu_allocation_ratio,
            h.ram_allocation_ratio,
            h.disk_allocation_ratio
        ),
        (8.0, 1.5, 1.2)
    );
    assert_eq!((h.num_instances, h.num_io_ops, h.failed_builds), (2, 1, 3));
    assert_eq!(h.stats.get("num_proj_p1").map(|v| &**v), Some("2"));
    assert_eq!(*h.supported_instances, vec![vec!["x86_64", "kvm", "hvm"]]);
    assert_eq!(
        h.cpu_info.as_deref(),
        Some(r#"{"arch": "x86_64", "model": "Haswell"}"#)
    );
    assert_eq!(h.host_ip.as_deref(), Some("192.0.2.11"));
    assert_eq!(
        (h.hypervisor_type.as_deref(), h.hypervisor_version),
        (Some("QEMU"), Some(8002000))
    );
    assert_eq!(
        h.numa_topology
            .as_ref()
            .and_then(|v| v["nova_object.name"].as_str()),
        Some("NUMATopology")
    );
    assert!(h.pci_stats.is_some());
    assert_eq!(
        h.metrics.as_ref().and_then(|m| m[0]["value"].as_i64()),
        Some(2400)
    );
    // The seeded updated_at, unless an earlier read (another test on the same
    // databases) already wrote the ratios back, which stamps updated_at as nova does.
    let updated = h.updated.expect("updated");
    assert!(
        updated.to_rfc3339() == "2026-01-02T03:04:05+00:00"
            || (chrono::Utc::now() - updated).num_minutes().abs() < 30,
        "updated = {updated}"
    );
    // Aggregates by host name, ascending id.
    let aggs: Vec<&str> = h.aggregates.iter().map(|a| a.uuid.as_str()).collect();
    assert_eq!(aggs, vec![AGG_AZ1, AGG_OTHER]);
    assert_eq!(h.availability_zone("nova"), "az1");
    // Live instances of the host (soft-deleted included, deleted excluded).
    let insts: Vec<&str> = h.instances.iter().map(String::as_str).collect();
    assert_eq!(
        insts,
        vec![
            "b0000000-0000-4000-8000-000000000001",
            "b0000000-0000-4000-8000-000000000002"
        ]
    );
    // The nova-compute service row (not the conductor's on the same host).
    assert_eq!(h.service.id, 1);
    assert_eq!(h.service.version, 74);
    assert_eq!(
        h.service.last_seen_up.map(|t| t.to_rfc3339()).as_deref(),
        Some("2026-01-02T03:04:05+00:00")
    );
    assert_eq!(
        h.service.created_at.map(|t| t.to_rfc3339()).as_deref(),
        Some("2026-01-01T00:00:00+00:00")
    );
    assert!(h.allocation_candidates.is_empty());

    let d = states
        .iter()
        .find(|h| &*h.host == "c1-disabled")
        .expect("c1-disabled");
    assert!(d.service.disabled);
    assert_eq!(d.service.disabled_reason.as_deref(), Some("maintenance"));
    assert_eq!(
        (
            d.cpu_allocation_ratio,
            d.ram_allocation_ratio,
            d.disk_allocation_ratio
        ),
        (16.0, 1.5, 1.0)
    );
    assert_eq!(d.free_disk_mb, 200 * 1024);
    assert!(d.stats.is_empty() && d.aggregates.is_empty() && d.instances.is_empty());
}

#[tokio::test]
async fn stale_service_and_shared_host_instances() {
    let store = store().await;
    let states = store
        .host_states(Some(&[U_STALE.to_string(), U_STALE_B.to_string()]), None)
        .await
        .expect("host states");
    assert_eq!(states.len(), 2);
    for h in &states {
        // Liveness is the filters' business; the row is passed through as is.
        assert_eq!(
            h.service.last_seen_up.map(|t| t.to_rfc3339()).as_deref(),
            Some("2020-01-01T00:00:00+00:00")
        );
        assert!(!h.service.is_up(chrono::Utc::now(), 60, 10));
        let insts: Vec<&str> = h.instances.iter().map(String::as_str).collect();
        assert_eq!(insts, vec!["b0000000-0000-4000-8000-000000000004"]);
    }
}

#[tokio::test]
async fn one_cell_only_even_if_disabled() {
    let s = seeded().await;
    let store = store().await;
    let only2 = store
        .host_states(None, Some(&s.cell2))
        .await
        .expect("cell2");
    assert_eq!(names(&only2), vec![(s.cell2.clone(), "c2-h1".to_string())]);
    let dis = store
        .host_states(None, Some(DISABLED_CELL))
        .await
        .expect("disabled cell");
    assert_eq!(
        names(&dis),
        vec![(DISABLED_CELL.to_string(), "c2-h1".to_string())]
    );
    let missing = store
        .host_states(None, Some(MISSING_CELL))
        .await
        .expect("missing db");
    assert!(
        missing.is_empty(),
        "a cell whose database does not exist answers nothing"
    );
    match store
        .host_states(None, Some("0badce11-0000-4000-8000-000000000000"))
        .await
    {
        Err(StateError::UnknownCell(u)) => assert_eq!(u, "0badce11-0000-4000-8000-000000000000"),
        other => panic!("expected UnknownCell, got {other:?}"),
    }
}

#[tokio::test]
async fn cells_min_version_and_az_aggregates() {
    let s = seeded().await;
    let store = store().await;
    let cells = store.cells();
    let uuids: Vec<&str> = cells.iter().map(|c| c.uuid.as_str()).collect();
    assert!(
        !uuids.contains(&"00000000-0000-0000-0000-000000000000"),
        "cell0 excluded"
    );
    for u in [
        s.cell1.as_str(),
        s.cell2.as_str(),
        MISSING_CELL,
        DISABLED_CELL,
    ] {
        assert!(uuids.contains(&u), "{u} in {uuids:?}");
    }
    assert!(cells
        .iter()
        .find(|c| c.uuid == DISABLED_CELL)
        .is_some_and(|c| c.disabled));
    assert_eq!(
        cells
            .iter()
            .find(|c| c.uuid == s.cell1)
            .and_then(|c| c.name.clone())
            .as_deref(),
        Some("cell1")
    );
    // cell1: 74 (forced-down 60, deleted and conductor rows ignored); cell2: 0 -> whole cell ignored
    // because nova takes the SQL MIN per cell and drops a 0 minimum. Missing cell: failed, ignored.
    assert_eq!(store.min_compute_service_version().await, Some(74));
    let mut az1 = store.aggregate_uuids_for_az("az1").await.expect("az1");
    az1.sort();
    assert_eq!(az1, vec![AGG_AZ1.to_string(), AGG_AZ1_EMPTY.to_string()]);
    assert!(store
        .aggregate_uuids_for_az("az9")
        .await
        .expect("az9")
        .is_empty());
}

#[tokio::test]
async fn aggregate_casts_update_the_cache() {
    let store = store().await;
    let mut agg = store
        .aggregates()
        .into_iter()
        .find(|a| a.uuid == AGG_OTHER)
        .map(|a| (*a).clone())
        .expect("aggregate 2");
    agg.hosts = ["c2-h1".to_string()].into_iter().collect();
    store.update_aggregates(vec![agg]);
    let states = store
        .host_states(Some(&[U_FULL.to_string(), U_CELL2.to_string()]), None)
        .await
        .expect("states");
    let aggs_of = |host: &str| -> Vec<i64> {
        states
            .iter()
            .find(|h| *h.host == *host)
            .map(|h| h.aggregates.iter().map(|a| a.id).collect())
            .unwrap_or_default()
    };
    assert_eq!(aggs_of("c1-full"), vec![1]);
    assert_eq!(aggs_of("c2-h1"), vec![1, 2]);
    store.delete_aggregate(1);
    let states = store
        .host_states(Some(&[U_CELL2.to_string()]), None)
        .await
        .expect("states");
    assert_eq!(
        states[0]
            .aggregates
            .iter()
            .map(|a| a.id)
            .collect::<Vec<_>>(),
        vec![2]
    );
}

#[tokio::test]
async fn reload_picks_up_new_cells() {
    seeded().await;
    let prefix = prefix();
    let store = store().await;
    let late = "1a7e0000-0000-4000-8000-00000000ce11";
    assert!(!store.cells().iter().any(|c| c.uuid == late));
    let api = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_api")))
        .await
        .expect("api");
    // Disabled, so that no other test's "all enabled cells" changes.
    let sql = format!(
        "INSERT INTO cell_mappings (uuid, name, transport_url, database_connection, disabled) \
         VALUES ('{late}', 'cell-late', 'none:///', '{}', 1)",
        nova_schema::sqla_url(&format!("{prefix}_cell1"))
    );
    exec(&api, &[&sql]).await.expect("insert");
    api.close().await;
    store.reload_cells().await;
    assert!(store.cells().iter().any(|c| c.uuid == late && c.disabled));
    let states = store
        .host_states(Some(&[U_FULL.to_string()]), Some(late))
        .await
        .expect("late cell");
    assert_eq!(states.len(), 1);
    assert_eq!(&*states[0].cell_uuid, late);
}

#[tokio::test]
async fn down_cell_does_not_fail_startup() {
    seeded().await;
    let prefix = prefix();
    let down = "d0d0d0d0-0000-4000-8000-0000000000d0";
    let api = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_api")))
        .await
        .expect("api");
    // Nothing listens on port 1: connection refused. Disabled, so that only this test reads it.
    let sql = format!(
        "INSERT INTO cell_mappings (uuid, name, transport_url, database_connection, disabled) \
         VALUES ('{down}', 'cell-down', 'none:///', 'mysql+pymysql://nova:Secret99@127.0.0.1:1/nova', 1)"
    );
    exec(&api, &[&sql]).await.expect("insert");
    api.close().await;
    let started = Instant::now();
    let store = store().await;
    assert!(store.cells().iter().any(|c| c.uuid == down));
    let states = store
        .host_states(None, Some(down))
        .await
        .expect("a down cell is skipped, not an error");
    assert!(states.is_empty());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

/// A nova-style URL's sqlx form, as the daemon makes it for `[database]`,
/// `[api_database]` and `[placement_database]`.
fn daemon_sqlx_url(sqlalchemy_url: &str) -> String {
    nova_scheduler::config::DbUrl::parse(sqlalchemy_url)
        .and_then(|u| u.to_sqlx_url())
        .unwrap_or_else(|e| panic!("{sqlalchemy_url}: {e}"))
}

/// `SHOW SESSION STATUS LIKE 'Ssl_version'` over a pool of the daemon's kind for `url`.
async fn tls_version(url: &str) -> Result<String, sqlx::Error> {
    let pool = sqlx::mysql::MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&daemon_sqlx_url(url))
        .await?;
    let (_, version): (String, String) = sqlx::query_as("SHOW SESSION STATUS LIKE 'Ssl_version'")
        .fetch_one(&pool)
        .await?;
    pool.close().await;
    Ok(version)
}

/// TLS to MariaDB with the arguments nova's SQLAlchemy URLs carry, against a private
/// server with `require_secure_transport=ON` and a test-made CA: the right CA connects
/// (certificate and host name verified), a wrong CA, a wrong host name and plaintext do
/// not, a `REQUIRE X509` user needs the client certificate; then the host state store
/// reads nova's databases (copied there) through TLS URLs, cells included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_the_databases() {
    use nova_scheduler::placement::index::IndexLoader;
    use private_mariadb::{find_binary, PrivateMariaDb};
    use std::process::{Command, Stdio};

    let _ = tracing_subscriber::fmt()
        .with_test_writer()
        .with_env_filter("nova_scheduler=info")
        .try_init();
    seeded().await;
    let prefix = prefix();
    let server = tokio::task::spawn_blocking(|| PrivateMariaDb::start_tls("tls"))
        .await
        .unwrap();
    let pki = server.pki.clone();
    let port = server.port;
    let ca = pki.ca.display().to_string();
    let wrong_ca = pki.wrong_ca.display().to_string();

    // Setup as root over the unix socket (a secure transport); real grants.
    let root = MySqlPool::connect(&server.root_socket_url())
        .await
        .expect("root over the private server's socket");
    exec(
        &root,
        &[
            "CREATE USER 'nova'@'%' IDENTIFIED BY 'Tls-Secret1'",
            "GRANT ALL PRIVILEGES ON *.* TO 'nova'@'%'",
            "CREATE USER 'nova_x509'@'%' IDENTIFIED BY 'Tls-Secret2' REQUIRE X509",
            "GRANT ALL PRIVILEGES ON *.* TO 'nova_x509'@'%'",
        ],
    )
    .await
    .expect("users");
    let url = |user_pass: &str, host: &str, args: &str| {
        format!("mysql+pymysql://{user_pass}@{host}:{port}/mysql?charset=utf8{args}")
    };
    let nova = |args: &str| url("nova:Tls-Secret1", "127.0.0.1", args);

    // The right CA: certificate and host name verified (VERIFY_IDENTITY), TLS in use.
    let version = tls_version(&nova(&format!("&ssl_ca={ca}")))
        .await
        .expect("TLS with the right CA");
    assert!(version.starts_with("TLSv1."), "{version:?}");
    // No TLS argument: PREFERRED, so TLS since the server offers it.
    let version = tls_version(&nova("")).await.expect("PREFERRED");
    assert!(version.starts_with("TLSv1."), "{version:?}");
    // mysqlclient's ssl_mode.
    tls_version(&nova(&format!("&ssl_mode=VERIFY_IDENTITY&ssl_ca={ca}")))
        .await
        .expect("ssl_mode=VERIFY_IDENTITY");

    // A CA that did not sign the server's certificate: refused, unless verification is off.
    for args in [
        format!("&ssl_ca={wrong_ca}"),
        format!("&ssl_ca={wrong_ca}&ssl_check_hostname=false"),
        format!("&ssl_mode=VERIFY_CA&ssl_ca={wrong_ca}"),
        "&ssl_verify_cert=true".to_string(),
    ] {
        let err = tls_version(&nova(&args))
            .await
            .expect_err(&format!("connected with {args}"));
        let text = err.to_string();
        assert!(
            text.contains("UnknownIssuer") || text.to_lowercase().contains("certificate"),
            "{args}: {text}"
        );
        assert!(!text.contains("Tls-Secret1"), "{text}");
    }
    tls_version(&nova(&format!("&ssl_ca={wrong_ca}&ssl_verify_cert=false")))
        .await
        .expect("no verification with ssl_verify_cert=false");

    // 127.0.0.2 is not in the server certificate: refused while the host name is checked.
    let other_host = |args: &str| url("nova:Tls-Secret1", "127.0.0.2", args);
    let err = tls_version(&other_host(&format!("&ssl_ca={ca}")))
        .await
        .expect_err("connected to a host the certificate does not name");
    assert!(err.to_string().contains("not valid for name"), "{err}");
    tls_version(&other_host(&format!(
        "&ssl_ca={ca}&ssl_check_hostname=false"
    )))
    .await
    .expect("VERIFY_CA does not check the host name");

    // Plaintext: the server refuses it (MariaDB says "Access denied" for credentials
    // that work over TLS just above).
    for args in ["&ssl_disabled=true", "&ssl_mode=DISABLED"] {
        let err = tls_version(&nova(args))
            .await
            .expect_err(&format!("plaintext connection with {args}"));
        assert!(err.to_string().contains("Access denied"), "{args}: {err}");
    }
    // ... and only because of require_secure_transport.
    exec(&root, &["SET GLOBAL require_secure_transport = OFF"])
        .await
        .unwrap();
    let version = tls_version(&nova("&ssl_disabled=true"))
        .await
        .expect("plaintext once the server allows it");
    assert_eq!(version, "");
    exec(&root, &["SET GLOBAL require_secure_transport = ON"])
        .await
        .unwrap();

    // REQUIRE X509: no client certificate, no access; with one (key in its own file or
    // in the certificate file), access.
    let x509 = |args: &str| url("nova_x509:Tls-Secret2", "127.0.0.1", args);
    let err = tls_version(&x509(&format!("&ssl_ca={ca}")))
        .await
        .expect_err("REQUIRE X509 user without a client certificate");
    assert!(err.to_string().contains("Access denied"), "{err}");
    assert!(!err.to_string().contains("Tls-Secret2"), "{err}");
    tls_version(&x509(&format!(
        "&ssl_ca={ca}&ssl_cert={}&ssl_key={}",
        pki.client_cert.display(),
        pki.client_key.display()
    )))
    .await
    .expect("REQUIRE X509 user with its client certificate");
    tls_version(&x509(&format!(
        "&ssl_cert={}",
        server.client_cert_and_key.display()
    )))
    .await
    .expect("client certificate and key in one file, no verification (REQUIRED)");

    // The daemon's Placement database pool.
    IndexLoader::connect(&daemon_sqlx_url(&nova(&format!("&ssl_ca={ca}"))))
        .await
        .expect("placement database pool over TLS");
    assert!(
        IndexLoader::connect(&daemon_sqlx_url(&nova(&format!("&ssl_ca={wrong_ca}"))))
            .await
            .is_err()
    );

    // nova's databases, as seeded, into the private server (schema and rows by
    // mariadb-dump from the shared server, which holds them in plaintext).
    let dbs: Vec<String> = ["api", "cell0", "cell1", "cell2"]
        .iter()
        .map(|d| format!("{prefix}_{d}"))
        .collect();
    let (host, shared_port) = nova_schema::MYSQL_BASE.split_once(':').unwrap();
    let dump = Command::new(find_binary("mariadb-dump"))
        .args([
            "--no-defaults",
            "--skip-ssl",
            "-h",
            host,
            "-P",
            shared_port,
            "-u",
            "root",
        ])
        .args(["--single-transaction", "--databases"])
        .args(&dbs)
        .stderr(Stdio::inherit())
        .output()
        .expect("mariadb-dump");
    assert!(dump.status.success(), "mariadb-dump failed");
    let mut load = Command::new(find_binary("mariadb"))
        .arg("--no-defaults")
        .arg(format!("--socket={}", server.socket.display()))
        .args(["-u", "root"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("mariadb");
    {
        use std::io::Write as _;
        load.stdin.take().unwrap().write_all(&dump.stdout).unwrap();
    }
    assert!(load.wait().unwrap().success(), "loading the dump failed");
    // Every cell URL to the private server with TLS arguments (the template one too).
    exec(
        &root,
        &[&format!(
            "UPDATE `{prefix}_api`.cell_mappings SET database_connection = CONCAT(REPLACE(REPLACE(\
             database_connection, 'root:@127.0.0.1:3306', 'nova:Tls-Secret1@127.0.0.1:{port}'), \
             '@127.0.0.1:3306', '@127.0.0.1:{port}'), '&ssl_ca={ca}')"
        )],
    )
    .await
    .expect("cell URLs");
    root.close().await;

    let tls_store = |ca: &str| {
        let main = url("nova:Tls-Secret1", "127.0.0.1", &format!("&ssl_ca={ca}"))
            .replace("/mysql?", &format!("/{prefix}_cell0?"));
        let api = main.replace("_cell0?", "_api?");
        let mut opts = StateOptions::new(
            daemon_sqlx_url(&api),
            daemon_sqlx_url(&main),
            nova_scheduler::app::cell_url_resolver(main.clone()),
        );
        opts.cpu_allocation_ratio = Some(8.0);
        opts.initial_ram_allocation_ratio = 1.5;
        HostStateStore::connect(opts)
    };
    let err = tls_store(&wrong_ca)
        .await
        .err()
        .expect("API database with the wrong CA");
    assert!(matches!(err, StateError::ApiDatabase { .. }), "{err}");
    assert!(!err.to_string().contains("Tls-Secret1"), "{err}");

    let s = seeded().await;
    let over_tls = tls_store(&ca).await.expect("host state store over TLS");
    let cells: Vec<String> = over_tls.cells().into_iter().map(|c| c.uuid).collect();
    for cell in [&s.cell1, &s.cell2, MISSING_CELL, DISABLED_CELL] {
        assert!(cells.iter().any(|c| c == cell), "{cell} in {cells:?}");
    }
    // The same host states as read in plaintext from the shared server.
    let expected = store()
        .await
        .host_states(None, None)
        .await
        .expect("plaintext");
    let got = over_tls.host_states(None, None).await.expect("over TLS");
    assert_eq!(names(&got), names(&expected));
    assert_eq!(got.len(), 6);
    // The disabled cell's URL is a template filled from [database] connection.
    let states = over_tls
        .host_states(Some(&[U_CELL2.to_string()]), Some(DISABLED_CELL))
        .await
        .expect("template cell over TLS");
    assert_eq!(states.len(), 1);

    drop(over_tls);
    tokio::task::spawn_blocking(move || drop(server))
        .await
        .unwrap();
}
