// SPDX-License-Identifier: Apache-2.0
//! The Placement fast path's local answer to `GET /allocation_candidates`, at N root
//! providers shaped like the seeded cloud's (VCPU / MEMORY_MB / DISK_GB inventories
//! with allocation ratios, 40 % used, COMPUTE_NODE + OWNER_NOVA + a few capability
//! traits, 1 % disabled, aggregates), for nova's boot query
//! (`resources=DISK_GB:20,MEMORY_MB:4096,VCPU:2`, `root_required=OWNER_NOVA,
//! !COMPUTE_STATUS_DISABLED`, `limit=1000`):
//! - `local_candidates`: the search and the allocation requests it builds;
//! - `LiveIndex::candidates`-equivalent work plus the per-provider indexing the
//!   manager does with the answer.
//!
//! `cargo bench --bench placement_index` (`NSRS_BENCH_HOSTS=1000,5000,10000`).
//! Pure: no services needed. Figures are the benchmark thread's CPU time
//! (`NSRS_BENCH_WALL=1`: wall clock).

#[path = "common/cpu_time.rs"]
mod cpu_time;

use criterion::measurement::{Measurement, WallTime};
use criterion::{BenchmarkId, Criterion};
use nova_scheduler::placement::index::model::NameTable;
use nova_scheduler::placement::index::{
    local_candidates, Inventory, LocalRequest, Provider, ProviderIndex,
};
use std::collections::{BTreeMap, BTreeSet};
use std::hint::black_box;

const CLASSES: [&str; 3] = ["VCPU", "MEMORY_MB", "DISK_GB"];
const TRAITS: [&str; 8] = [
    "COMPUTE_NODE",
    "OWNER_NOVA",
    "COMPUTE_STATUS_DISABLED",
    "HW_CPU_X86_AVX2",
    "HW_CPU_X86_SSE42",
    "COMPUTE_NET_VIF_MODEL_VIRTIO",
    "COMPUTE_VOLUME_MULTI_ATTACH",
    "HW_CPU_X86_AVX512F",
];

fn host_counts() -> Vec<usize> {
    std::env::var("NSRS_BENCH_HOSTS")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1000, 5000, 10000])
}

/// A deterministic pseudo-random sequence (no RNG crate state to carry around).
fn mix(i: u64, salt: u64) -> u64 {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ salt;
    x ^= x >> 31;
    x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x ^ (x >> 29)
}

fn index(n: usize) -> ProviderIndex {
    let mut idx = ProviderIndex {
        resource_classes: NameTable::from_rows(
            CLASSES
                .iter()
                .enumerate()
                .map(|(i, c)| (i as i64, c.to_string())),
        ),
        traits: NameTable::from_rows(
            TRAITS
                .iter()
                .enumerate()
                .map(|(i, t)| (i as i64 + 100, t.to_string())),
        ),
        aggregates: NameTable::from_rows(
            (0..7).map(|a| (a, format!("00000000-0000-4000-8000-{a:012}"))),
        ),
        ..ProviderIndex::default()
    };
    for i in 0..n as u64 {
        let vcpus = [8, 16, 32, 64][(mix(i, 1) % 4) as usize];
        let mem = [16_384, 65_536, 131_072, 262_144][(mix(i, 2) % 4) as usize];
        let disk = 100 + (mix(i, 3) % 1900) as i64;
        let ratio = if mix(i, 4).is_multiple_of(2) {
            4.0
        } else {
            16.0
        };
        let inv = |total: i64, ratio: f32| Inventory {
            total,
            reserved: 0,
            min_unit: 1,
            max_unit: total,
            step_size: 1,
            allocation_ratio: ratio,
            allocation_ratio_text: f64::from(ratio),
        };
        let mut traits: BTreeSet<i64> = [100, 101].into_iter().collect();
        if i % 100 == 7 {
            traits.insert(102);
        }
        for t in 103..108 {
            if mix(i, t as u64).is_multiple_of(3) {
                traits.insert(t);
            }
        }
        let inventories: BTreeMap<i64, Inventory> = [
            (0, inv(vcpus, ratio)),
            (1, inv(mem, 1.5)),
            (2, inv(disk, 1.0)),
        ]
        .into_iter()
        .collect();
        let usages = [(0, vcpus * 4 / 10), (1, mem * 4 / 10), (2, disk * 4 / 10)]
            .into_iter()
            .collect();
        idx.upsert(Provider {
            id: i as i64 + 1,
            uuid: format!("{:08x}-0000-4000-8000-{:012x}", mix(i, 9) as u32, i),
            generation: 3,
            parent_id: None,
            root_id: i as i64 + 1,
            inventories,
            usages,
            traits,
            aggregates: [(mix(i, 11) % 3) as i64, 3 + (mix(i, 12) % 4) as i64]
                .into_iter()
                .collect(),
        });
    }
    idx
}

fn boot_query() -> LocalRequest {
    let params: Vec<(String, String)> = [
        ("resources", "DISK_GB:20,MEMORY_MB:4096,VCPU:2"),
        ("root_required", "OWNER_NOVA,!COMPUTE_STATUS_DISABLED"),
        ("limit", "1000"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    LocalRequest::from_params(&params).expect("the boot query is answered locally")
}

fn bench<M: Measurement>(c: &mut Criterion<M>) {
    let req = boot_query();
    let mut group = c.benchmark_group("placement_index");
    for n in host_counts() {
        let idx = index(n);
        let found = local_candidates(&idx, &req).expect("local");
        assert!(found.allocation_requests.len() > n * 9 / 10);
        group.bench_with_input(BenchmarkId::new("local_candidates", n), &n, |b, _| {
            b.iter(|| black_box(local_candidates(black_box(&idx), black_box(&req)).unwrap()))
        });
    }
    group.finish();
}

fn main() {
    cpu_time::run(bench::<cpu_time::ThreadCpuTime>, bench::<WallTime>);
}
