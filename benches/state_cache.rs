// SPDX-License-Identifier: Apache-2.0
//! What the daemon keeps warm, read from MariaDB at N compute nodes (no Placement
//! service, no broker):
//!
//! `cache`: the host-state cache on nova 34's schema (built by nova-manage from the
//! project venv), one cell, 5 instances per host:
//! - cold load: every row read (`warm`) and the decision table built;
//! - a pass as the daemon runs it (cells read incrementally, the decision table
//!   brought up to date) with nothing changed, with 1% of the nodes and 1% of the
//!   services changed, and with 1% of the nodes plus 10% of the services changed (a
//!   second of heartbeats at `report_interval = 10`);
//! - the host states copied for one request over every node (what a request bound
//!   to one cell pays; the others read the table);
//! - resident memory per host (VmRSS growth over the first cold load).
//!
//! `index`: the Placement provider index on Placement 16's schema
//! (`placement-manage db sync`), N root providers with three inventories, three
//! traits, an aggregate and 5 instances each (15 allocation rows):
//! - cold load (`IndexLoader::load`);
//! - a refresh with nothing changed, and one after 1% of the providers got a new
//!   instance (generation moved) and 1% lost one (allocations deleted, as Placement
//!   deletes them: no generation moves); the usages are checked equal to a full
//!   load's afterwards;
//! - resident memory per provider.
//!
//! `cargo bench --bench state_cache` (needs MariaDB on 127.0.0.1:3306 and the venv;
//! `NSRS_BENCH_HOSTS=1000,10000,100000` picks the sizes, `NSRS_BENCH_PARTS=cache`
//! or `index` one part). Medians of 3 cold loads and 5 passes.

#[path = "../tests/common/nova_schema.rs"]
mod nova_schema;
#[path = "../tests/common/venv.rs"]
mod venv;

use chrono::Utc;
use nova_scheduler::placement::index::IndexLoader;
use nova_scheduler::state::{
    CacheOptions, CellUrlResolver, HostStateCache, HostStateStore, StateOptions,
};
use sqlx::{AssertSqlSafe, Executor, MySqlPool};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

const PREFIX: &str = "nsrs_b_state";
const BATCH: usize = 1000;

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

const CPU_INFO: &str = r#"{"arch": "x86_64", "model": "Cascadelake-Server", "vendor": "Intel", "topology": {"cells": 2, "sockets": 1, "cores": 16, "threads": 2}, "features": ["pge", "avx", "avx2", "sse4.2", "vmx", "ssse3", "aes", "xsave", "rdrand", "fma", "bmi1", "bmi2"]}"#;

async fn seed(cell: &MySqlPool, n: usize) {
    for table in ["instances", "compute_nodes", "services"] {
        cell.execute(AssertSqlSafe(format!("DELETE FROM {table}")))
            .await
            .unwrap();
    }
    for start in (0..n).step_by(BATCH) {
        let end = (start + BATCH).min(n);
        let services: Vec<String> = (start..end)
            .map(|i| {
                format!(
                    "({id}, UTC_TIMESTAMP() - INTERVAL 1 HOUR, UTC_TIMESTAMP() - INTERVAL 1 HOUR, \
                     'host-{i:05}', 'nova-compute', 'compute', 1, 0, UTC_TIMESTAMP() - INTERVAL 1 HOUR, 0, 74, \
                     'a0000000-0000-4000-8000-{i:012}', 0)",
                    id = i + 1
                )
            })
            .collect();
        cell.execute(AssertSqlSafe(format!(
            "INSERT INTO services (id, created_at, updated_at, host, `binary`, topic, report_count, \
             disabled, last_seen_up, forced_down, version, uuid, deleted) VALUES {}",
            services.join(",")
        )))
        .await
        .unwrap();
        let nodes: Vec<String> = (start..end)
            .map(|i| {
                let ram = [65536, 131072, 262144][i % 3];
                format!(
                    "({id}, UTC_TIMESTAMP() - INTERVAL 1 HOUR, UTC_TIMESTAMP() - INTERVAL 1 HOUR, {id}, \
                     'host-{i:05}', 'host-{i:05}.example', '11111111-0000-4000-8000-{i:012}', 32, {ram}, 2000, \
                     {used}, 4096, 100, 'QEMU', 8002000, '{CPU_INFO}', {free}, 1900, 1850, \
                     '[[\"x86_64\", \"kvm\", \"hvm\"], [\"i686\", \"kvm\", \"hvm\"]]', \
                     '{{\"num_instances\": \"5\", \"io_workload\": \"1\", \"failed_builds\": \"0\", \"num_proj_p1\": \"5\", \"num_vm_active\": \"5\", \"num_task_None\": \"5\", \"num_os_type_linux\": \"5\"}}', \
                     '192.0.2.{octet}', 16.0, 1.5, 1.0, 1, 0)",
                    id = i + 1,
                    used = i % 16,
                    free = ram - 4096 * (i as i64 % 8),
                    octet = i % 250 + 1,
                )
            })
            .collect();
        cell.execute(AssertSqlSafe(format!(
            "INSERT INTO compute_nodes (id, created_at, updated_at, service_id, host, \
             hypervisor_hostname, uuid, vcpus, memory_mb, local_gb, vcpus_used, memory_mb_used, \
             local_gb_used, hypervisor_type, hypervisor_version, cpu_info, free_ram_mb, free_disk_gb, \
             disk_available_least, supported_instances, stats, host_ip, cpu_allocation_ratio, \
             ram_allocation_ratio, disk_allocation_ratio, mapped, deleted) VALUES {}",
            nodes.join(",")
        )))
        .await
        .unwrap();
        let instances: Vec<String> = (start..end)
            .flat_map(|i| {
                (0..5).map(move |k| {
                    format!(
                        "(UTC_TIMESTAMP() - INTERVAL 1 HOUR, 'b{k}000000-0000-4000-8000-{i:012}', 'host-{i:05}', \
                         'host-{i:05}.example', 0, 'active')"
                    )
                })
            })
            .collect();
        cell.execute(AssertSqlSafe(format!(
            "INSERT INTO instances (created_at, uuid, host, node, deleted, vm_state) VALUES {}",
            instances.join(",")
        )))
        .await
        .unwrap();
    }
}

async fn touch(cell: &MySqlPool, nodes: usize, services: usize, n: usize, round: usize) {
    // Spread the changed rows over the table; stamp them after the last watermark.
    if let Some(step) = n.checked_div(nodes) {
        let step = step.max(1);
        cell.execute(AssertSqlSafe(format!(
            "UPDATE compute_nodes SET free_ram_mb = free_ram_mb - 1, \
             updated_at = UTC_TIMESTAMP() + INTERVAL {round} SECOND \
             WHERE MOD(id, {step}) = 0 LIMIT {nodes}"
        )))
        .await
        .unwrap();
    }
    if let Some(step) = n.checked_div(services) {
        let step = step.max(1);
        cell.execute(AssertSqlSafe(format!(
            "UPDATE services SET report_count = report_count + 1, \
             updated_at = UTC_TIMESTAMP() + INTERVAL {round} SECOND, \
             last_seen_up = UTC_TIMESTAMP() + INTERVAL {round} SECOND \
             WHERE MOD(id, {step}) = 1 LIMIT {services}"
        )))
        .await
        .unwrap();
    }
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes `--bench`; nothing else is understood here.
    let sizes: Vec<usize> = std::env::var("NSRS_BENCH_HOSTS")
        .unwrap_or_else(|_| "1000,10000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let parts = std::env::var("NSRS_BENCH_PARTS").unwrap_or_else(|_| "cache,index".into());
    let venv = venv::find();
    // Each size runs in a process of its own (the schema made once, here), so that
    // its memory is measured from a clean start.
    let child = std::env::var_os("NSRS_BENCH_CHILD").is_some();
    for part in ["cache", "index"] {
        if !parts.split(',').any(|p| p == part) {
            continue;
        }
        if child {
            match part {
                "cache" => bench_cache(&sizes).await,
                _ => bench_index(&sizes).await,
            }
            continue;
        }
        match part {
            "cache" => {
                eprintln!(
                    "creating nova's schema with nova-manage ({}_*)...",
                    nova_schema::tagged(PREFIX)
                );
                nova_schema::create(&venv, &nova_schema::tagged(PREFIX), &["cell1"])
                    .await
                    .expect("nova schema");
                println!(
                    "| hosts | cold load | of which the decision table | pass, 0 changed | pass, 1% nodes + 1% services | pass, 1% nodes + 10% services | host states copied for one request | RSS growth per host |"
                );
                println!("|---|---|---|---|---|---|---|---|");
            }
            _ => {
                eprintln!(
                    "creating Placement's schema with placement-manage ({})...",
                    nova_schema::tagged(INDEX_DB)
                );
                placement_schema(&venv, &nova_schema::tagged(INDEX_DB)).await;
                println!();
                println!(
                    "| providers | allocations | cold load | refresh, 0 changed | refresh, 1% claimed + 1% deleted | RSS growth per provider |"
                );
                println!("|---|---|---|---|---|---|");
            }
        }
        for &n in &sizes {
            let status = std::process::Command::new(std::env::current_exe().expect("bench binary"))
                .arg("--bench")
                .env("NSRS_BENCH_CHILD", "1")
                .env("NSRS_BENCH_PARTS", part)
                .env("NSRS_BENCH_HOSTS", n.to_string())
                .status()
                .expect("bench child");
            assert!(status.success(), "{part} at {n}: {status}");
        }
    }
}

async fn bench_cache(sizes: &[usize]) {
    let prefix = nova_schema::tagged(PREFIX);
    let cell = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_cell1")))
        .await
        .unwrap();
    let resolver: CellUrlResolver =
        Arc::new(|url: &str| Ok(url.replace("mysql+pymysql://", "mysql://")));
    for &n in sizes {
        seed(&cell, n).await;
        let store = Arc::new(
            HostStateStore::connect(StateOptions::new(
                nova_schema::sqlx_url(&format!("{prefix}_api")),
                nova_schema::sqlx_url(&format!("{prefix}_cell0")),
                resolver.clone(),
            ))
            .await
            .expect("connect"),
        );
        let opts = CacheOptions {
            full_resync_interval: Duration::from_secs(3600),
            ..CacheOptions::default()
        };
        // Cold loads: the first also gives the memory growth.
        let mut colds = Vec::new();
        let mut tables = Vec::new();
        let mut rss_per_host = 0.0;
        let mut kept = None;
        for run in 0..3 {
            let before = rss_kb();
            let cache = HostStateCache::new(Arc::clone(&store), opts.clone());
            let started = Instant::now();
            cache.warm().await;
            let warmed = started.elapsed();
            let table = cache.table(Utc::now()).await.unwrap();
            colds.push(started.elapsed());
            tables.push(started.elapsed() - warmed);
            assert_eq!(cache.node_count(), n);
            assert_eq!(table.len(), n);
            if run == 0 {
                rss_per_host = (rss_kb().saturating_sub(before)) as f64 * 1024.0 / n as f64;
                kept = Some(cache);
            }
        }
        let cache = kept.expect("cache");
        let refresh = |changed_nodes: usize, changed_services: usize| {
            let cell = cell.clone();
            let cache = &cache;
            async move {
                let (mut times, mut tables) = (Vec::new(), Vec::new());
                for round in 1..=5 {
                    touch(&cell, changed_nodes, changed_services, n, round).await;
                    // A pass as the daemon runs it: the cells read, then the
                    // decision table brought up to date.
                    let started = Instant::now();
                    let stats = cache.refresh().await;
                    let read = started.elapsed();
                    cache.table(Utc::now()).await.unwrap();
                    times.push(started.elapsed());
                    tables.push(started.elapsed() - read);
                    assert!(stats.nodes >= changed_nodes, "{stats:?}");
                }
                (median(times), median(tables))
            }
        };
        let idle = refresh(0, 0).await;
        let one_percent_both = refresh(n / 100, n / 100).await;
        let one_percent = refresh(n / 100, n / 10).await;
        let mut request = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            let states = cache.host_states(None, None, Utc::now()).await.unwrap();
            request.push(started.elapsed());
            assert_eq!(states.len(), n);
        }
        println!(
            "| {n} | {} | {} | {} | {} | {} ({} the table) | {} | {:.1} KB |",
            ms(median(colds)),
            ms(median(tables)),
            ms(idle.0),
            ms(one_percent_both.0),
            ms(one_percent.0),
            ms(one_percent.1),
            ms(median(request)),
            rss_per_host / 1024.0
        );
    }
}

// --- The provider index -----------------------------------------------------------

const INDEX_DB: &str = "nsrs_b_index";
/// Instances per provider, each holding VCPU, MEMORY_MB and DISK_GB.
const INDEX_CONSUMERS: usize = 5;
const INDEX_TRAITS: [&str; 5] = [
    "COMPUTE_NODE",
    "HW_CPU_X86_AVX2",
    "COMPUTE_VOLUME_MULTI_ATTACH",
    "COMPUTE_NET_ATTACH_INTERFACE",
    "CUSTOM_BENCH",
];

/// Placement's schema by `placement-manage db sync` in a fresh database.
async fn placement_schema(venv: &std::path::Path, db: &str) {
    nova_schema::recreate_databases(&[db.to_string()])
        .await
        .expect("placement database");
    let dir = std::env::temp_dir().join(format!("nsrs-b-index-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let conf = dir.join("placement.conf");
    std::fs::write(
        &conf,
        format!(
            "[placement_database]\nconnection = {}\n",
            nova_schema::sqla_url(db)
        ),
    )
    .unwrap();
    nova_schema::run(
        &venv.join("bin/placement-manage"),
        &[
            "--config-file".into(),
            conf.to_string_lossy().into_owned(),
            "db".into(),
            "sync".into(),
        ],
        &[],
    )
    .await
    .expect("placement-manage db sync");
}

/// `n` root providers as nova's compute nodes report them (three inventories with
/// allocation ratios, three traits, one of ten aggregates) with
/// [`INDEX_CONSUMERS`] instances each.
async fn seed_placement(db: &MySqlPool, n: usize) {
    for table in [
        "allocations",
        "consumers",
        "inventories",
        "resource_provider_traits",
        "resource_provider_aggregates",
        "resource_providers",
        "placement_aggregates",
        "traits",
        "resource_classes",
        "projects",
        "users",
    ] {
        if table == "resource_providers" {
            // Roots reference themselves.
            db.execute("UPDATE resource_providers SET root_provider_id = NULL")
                .await
                .unwrap();
        }
        db.execute(AssertSqlSafe(format!("DELETE FROM {table}")))
            .await
            .unwrap();
    }
    let fixed = [
        "INSERT INTO resource_classes (id, name) VALUES (1, 'VCPU'), (2, 'MEMORY_MB'), (3, 'DISK_GB')"
            .to_string(),
        format!(
            "INSERT INTO traits (id, name) VALUES {}",
            INDEX_TRAITS
                .iter()
                .enumerate()
                .map(|(i, t)| format!("({}, '{t}')", i + 1))
                .collect::<Vec<_>>()
                .join(",")
        ),
        format!(
            "INSERT INTO placement_aggregates (id, uuid) VALUES {}",
            (1..=10)
                .map(|a| format!("({a}, 'ag000000-0000-4000-8000-{a:012}')"))
                .collect::<Vec<_>>()
                .join(",")
        ),
        "INSERT INTO projects (id, external_id) VALUES (1, 'p1')".to_string(),
        "INSERT INTO users (id, external_id) VALUES (1, 'u1')".to_string(),
    ];
    for sql in fixed {
        db.execute(AssertSqlSafe(sql)).await.unwrap();
    }
    for start in (0..n).step_by(BATCH) {
        let ids: Vec<usize> = (start + 1..=(start + BATCH).min(n)).collect();
        let rows = |f: &dyn Fn(usize) -> Vec<String>| -> String {
            ids.iter().flat_map(|&i| f(i)).collect::<Vec<_>>().join(",")
        };
        let statements = [
            format!(
                "INSERT INTO resource_providers (created_at, id, uuid, name, generation, root_provider_id) \
                 VALUES {}",
                rows(&|i| vec![format!(
                    "('2026-01-01 00:00:00' + INTERVAL {i} SECOND, {i}, 'c0000000-0000-4000-8000-{i:012}', \
                     'host-{i:06}', 1, {i})"
                )])
            ),
            format!(
                "INSERT INTO inventories (resource_provider_id, resource_class_id, total, reserved, \
                 min_unit, max_unit, step_size, allocation_ratio) VALUES {}",
                rows(&|i| vec![
                    format!("({i}, 1, 32, 0, 1, 32, 1, 16.0)"),
                    format!("({i}, 2, 131072, 512, 1, 131072, 1, 1.5)"),
                    format!("({i}, 3, 2000, 0, 1, 2000, 1, 1.0)"),
                ])
            ),
            format!(
                "INSERT INTO resource_provider_traits (resource_provider_id, trait_id) VALUES {}",
                rows(&|i| (0..3).map(|t| format!("({i}, {})", (i + t) % 5 + 1)).collect())
            ),
            format!(
                "INSERT INTO resource_provider_aggregates (resource_provider_id, aggregate_id) VALUES {}",
                rows(&|i| vec![format!("({i}, {})", i % 10 + 1)])
            ),
            format!(
                "INSERT INTO consumers (uuid, project_id, user_id, generation) VALUES {}",
                rows(&|i| (0..INDEX_CONSUMERS)
                    .map(|k| format!("('{k:08}-0000-4000-8000-{i:012}', 1, 1, 1)"))
                    .collect())
            ),
            format!(
                "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used) VALUES {}",
                rows(&|i| (0..INDEX_CONSUMERS)
                    .flat_map(|k| {
                        let c = format!("{k:08}-0000-4000-8000-{i:012}");
                        [(1, 2), (2, 4096), (3, 20)]
                            .map(|(rc, used)| format!("({i}, '{c}', {rc}, {used})"))
                    })
                    .collect())
            ),
        ];
        for sql in statements {
            db.execute(AssertSqlSafe(sql)).await.unwrap();
        }
    }
}

/// One round of churn on `count` providers spread over the table, as Placement
/// writes it: a new instance's allocations (the provider's generation moves) on
/// each, and on as many others an instance deleted (allocations and consumer gone,
/// no generation moved).
async fn churn_placement(db: &MySqlPool, n: usize, count: usize, round: usize) -> Vec<i64> {
    if count == 0 {
        return Vec::new();
    }
    let step = (n / count).max(1);
    let claimed: Vec<usize> = (0..count).map(|k| (k * step) % n + 1).collect();
    let consumer = |i: usize| format!("{:08}-0000-4000-8000-{i:012}", 100 + round);
    let statements = [
        format!(
            "INSERT INTO consumers (uuid, project_id, user_id, generation) VALUES {}",
            claimed
                .iter()
                .map(|&i| format!("('{}', 1, 1, 1)", consumer(i)))
                .collect::<Vec<_>>()
                .join(",")
        ),
        format!(
            "INSERT INTO allocations (resource_provider_id, consumer_id, resource_class_id, used) VALUES {}",
            claimed
                .iter()
                .flat_map(|&i| {
                    let c = consumer(i);
                    [(1, 2), (2, 4096), (3, 20)].map(|(rc, used)| format!("({i}, '{c}', {rc}, {used})"))
                })
                .collect::<Vec<_>>()
                .join(",")
        ),
        format!(
            "UPDATE resource_providers SET generation = generation + 1, updated_at = UTC_TIMESTAMP() \
             WHERE id IN ({})",
            claimed
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(",")
        ),
    ];
    for sql in statements {
        db.execute(AssertSqlSafe(sql)).await.unwrap();
    }
    // Deleted instances: the seeded consumer `round % INDEX_CONSUMERS` of providers
    // half a step further on.
    let deleted: Vec<String> = (0..count)
        .map(|k| {
            let i = (k * step + step / 2) % n + 1;
            format!("'{:08}-0000-4000-8000-{i:012}'", round % INDEX_CONSUMERS)
        })
        .collect();
    for table in ["allocations", "consumers"] {
        let column = if table == "allocations" {
            "consumer_id"
        } else {
            "uuid"
        };
        db.execute(AssertSqlSafe(format!(
            "DELETE FROM {table} WHERE {column} IN ({})",
            deleted.join(",")
        )))
        .await
        .unwrap();
    }
    claimed.iter().map(|&i| i as i64).collect()
}

async fn bench_index(sizes: &[usize]) {
    let db_name = nova_schema::tagged(INDEX_DB);
    let db = MySqlPool::connect(&nova_schema::sqlx_url(&db_name))
        .await
        .unwrap();
    for &n in sizes {
        seed_placement(&db, n).await;
        let loader = IndexLoader::connect(&nova_schema::sqlx_url(&db_name))
            .await
            .unwrap();
        let mut colds = Vec::new();
        let mut rss_per_provider = 0.0;
        let mut kept = None;
        for run in 0..3 {
            let before = rss_kb();
            let started = Instant::now();
            let index = loader.load().await.unwrap();
            colds.push(started.elapsed());
            assert_eq!(index.providers.len(), n);
            if run == 0 {
                rss_per_provider = (rss_kb().saturating_sub(before)) as f64 * 1024.0 / n as f64;
                kept = Some(index);
            }
        }
        let mut index = kept.expect("index");
        let mut idle = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            let stats = loader.refresh(&mut index).await.unwrap();
            idle.push(started.elapsed());
            assert_eq!(stats.changed, 0, "{stats:?}");
        }
        let mut churn = Vec::new();
        let mut claimed = BTreeSet::new();
        for round in 1..=5 {
            claimed.extend(churn_placement(&db, n, n / 100, round).await);
            let started = Instant::now();
            let stats = loader.refresh(&mut index).await.unwrap();
            churn.push(started.elapsed());
            assert_eq!(stats.changed, n / 100, "{stats:?}");
            assert!(stats.usages_read || stats.resummed == n / 100, "{stats:?}");
        }
        // The usages of every provider whose generation moved equal a full load's;
        // after a full sum, every provider's do.
        let full = loader.load().await.unwrap();
        for id in &claimed {
            assert_eq!(
                index.providers[id].usages, full.providers[id].usages,
                "provider {id}"
            );
        }
        let mut caught_up = index.clone();
        caught_up.marks = None;
        loader.refresh(&mut caught_up).await.unwrap();
        assert_eq!(caught_up, full);
        println!(
            "| {n} | {} | {} | {} | {} | {:.1} KB |",
            n * INDEX_CONSUMERS * 3,
            ms(median(colds)),
            ms(median(idle)),
            ms(median(churn)),
            rss_per_provider / 1024.0
        );
    }
}
