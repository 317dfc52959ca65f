// SPDX-License-Identifier: Apache-2.0
//! The warm host-state cache against MariaDB with nova 34's schema (built by
//! nova-manage from the project venv), at N compute nodes:
//! - cold load (`warm`) of every row;
//! - an incremental pass with nothing changed, with 100 changed nodes, and with 1% of
//!   the nodes plus 10% of the services changed (a second of heartbeats at
//!   `report_interval = 10`);
//! - the host states of one request for every node (what `select_destinations`
//!   pays per request instead of reading the cells);
//! - resident memory per host (VmRSS growth over the first warm-up).
//!
//! `cargo bench --bench state_cache` (needs MariaDB on 127.0.0.1:3306 and the venv;
//! `NSRS_BENCH_HOSTS=1000,10000,50000` picks the sizes). Medians of several runs.

#[path = "../tests/common/nova_schema.rs"]
mod nova_schema;
#[path = "../tests/common/venv.rs"]
mod venv;

use chrono::Utc;
use nova_scheduler::state::{
    CacheOptions, CellUrlResolver, HostStateCache, HostStateStore, StateOptions,
};
use sqlx::{AssertSqlSafe, Executor, MySqlPool};
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
    let venv = venv::find();
    let prefix = nova_schema::tagged(PREFIX);
    eprintln!("creating nova's schema with nova-manage ({prefix}_*)...");
    nova_schema::create(&venv, &prefix, &["cell1"])
        .await
        .expect("nova schema");
    let cell = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_cell1")))
        .await
        .unwrap();
    let resolver: CellUrlResolver =
        Arc::new(|url: &str| Ok(url.replace("mysql+pymysql://", "mysql://")));
    println!(
        "| hosts | cold load | refresh, 0 changed | refresh, 100 nodes | refresh, 1% nodes + 10% services | host states of one request | RSS per host |"
    );
    println!("|---|---|---|---|---|---|---|");
    for n in sizes {
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
        let mut rss_per_host = 0.0;
        let mut kept = None;
        for run in 0..3 {
            let before = rss_kb();
            let cache = HostStateCache::new(Arc::clone(&store), opts.clone());
            let started = Instant::now();
            cache.warm().await;
            colds.push(started.elapsed());
            assert_eq!(cache.node_count(), n);
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
                let mut times = Vec::new();
                for round in 1..=5 {
                    touch(&cell, changed_nodes, changed_services, n, round).await;
                    let started = Instant::now();
                    let stats = cache.refresh().await;
                    times.push(started.elapsed());
                    assert!(stats.nodes >= changed_nodes, "{stats:?}");
                }
                median(times)
            }
        };
        let idle = refresh(0, 0).await;
        let hundred = refresh(100, 0).await;
        let one_percent = refresh(n / 100, n / 10).await;
        let mut request = Vec::new();
        for _ in 0..5 {
            let started = Instant::now();
            let states = cache.host_states(None, None, Utc::now()).await.unwrap();
            request.push(started.elapsed());
            assert_eq!(states.len(), n);
        }
        println!(
            "| {n} | {} | {} | {} | {} | {} | {:.1} KB |",
            ms(median(colds)),
            ms(idle),
            ms(hundred),
            ms(one_percent),
            ms(median(request)),
            rss_per_host / 1024.0
        );
    }
}
