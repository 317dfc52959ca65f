// SPDX-License-Identifier: Apache-2.0
//! The decision core alone (ComputeFilter + nova's default weighers, one instance,
//! claims always succeeding) at 1k and 10k hosts: what our own CPU costs per
//! select_destinations once host states and candidates are in memory.
//!
//! Run: `cargo bench --bench decision_core`

use chrono::Utc;
use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion};
use nova_scheduler::filters::{build_chain, FilterConfig};
use nova_scheduler::model::{Flavor, HostState, RequestSpec, ServiceInfo};
use nova_scheduler::scheduler::{ClaimError, Claimer, ScheduleRequest, Scheduler};
use nova_scheduler::weighers::{build_pipeline, WeigherConfig};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Value};

struct AlwaysClaims;

impl Claimer for AlwaysClaims {
    async fn claim(&mut self, _: &str, _: &HostState, _: &Value) -> Result<bool, ClaimError> {
        Ok(true)
    }
    async fn release(&mut self, _: &[String]) -> Result<(), ClaimError> {
        Ok(())
    }
}

fn hosts(n: usize) -> Vec<HostState> {
    let now = Utc::now();
    (0..n)
        .map(|i| {
            let uuid = format!("00000000-0000-4000-8000-{i:012}");
            HostState {
                host: format!("cmp{i:05}"),
                nodename: format!("cmp{i:05}"),
                cell_uuid: if i % 2 == 0 { "cell1".into() } else { "cell2".into() },
                free_ram_mb: 4096 + (i as i64 * 7919) % 250_000,
                free_disk_mb: 100_000 + (i as i64 * 104_729) % 1_000_000,
                vcpus_total: 64,
                vcpus_used: (i as i64 * 31) % 64,
                cpu_allocation_ratio: 4.0,
                hypervisor_version: Some(8_002_000),
                service: ServiceInfo { last_seen_up: Some(now), ..Default::default() },
                allocation_candidates: vec![json!({"allocations": {&uuid: {"resources": {"VCPU": 2}}}, "mappings": {"": [&uuid]}})],
                uuid: Some(uuid),
                ..Default::default()
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let scheduler = Scheduler {
        filters: build_chain(&["ComputeFilter".into()], &FilterConfig::default()).expect("filters"),
        weighers: build_pipeline(
            &["nova.scheduler.weights.all_weighers".into()],
            &WeigherConfig::default(),
        )
        .expect("weighers"),
        host_subset_size: 1,
        shuffle_best_same_weighed_hosts: false,
        max_attempts: 3,
        packing_host_numa_cells_allocation_strategy: false,
    };
    let mut group = c.benchmark_group("select_one_instance");
    for n in [1_000usize, 10_000] {
        let states = hosts(n);
        group.bench_with_input(BenchmarkId::from_parameter(n), &states, |b, states| {
            let mut rng = StdRng::seed_from_u64(1);
            // Host states arrive owned from the state edge; cloning them is setup, not decision.
            b.iter_batched(
                || states.clone(),
                |states| {
                    let request = ScheduleRequest {
                        spec: RequestSpec {
                            flavor: Flavor {
                                vcpus: 2,
                                memory_mb: 4096,
                                root_gb: 20,
                                ..Default::default()
                            },
                            num_instances: 1,
                            ..Default::default()
                        },
                        instance_uuids: Some(vec!["i1".into()]),
                        use_placement: true,
                        return_alternates: true,
                        now: Utc::now(),
                    };
                    runtime
                        .block_on(scheduler.schedule(states, request, &mut AlwaysClaims, &mut rng))
                        .expect("placed")
                },
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
