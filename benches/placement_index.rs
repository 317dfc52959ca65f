// SPDX-License-Identifier: Apache-2.0
//! The Placement fast path's local answer to `GET /allocation_candidates`, at N root
//! providers shaped like the seeded cloud's (VCPU / MEMORY_MB / DISK_GB inventories
//! with allocation ratios, 40 % used, COMPUTE_NODE + OWNER_NOVA + a few capability
//! traits, 1 % disabled, aggregates), for nova's boot query
//! (`resources=DISK_GB:20,MEMORY_MB:4096,VCPU:2`, `root_required=OWNER_NOVA,
//! !COMPUTE_STATUS_DISABLED`, `limit=1000`):
//! - `local_candidates`: the search and the allocation requests it builds;
//! - `local_candidates_nested`: the same roots as provider trees (VCPU and MEMORY_MB
//!   at the root, a vGPU device, an Open vSwitch agent with a bridge holding
//!   bandwidth and physnet/vnic traits) with DISK_GB in pools shared via aggregate
//!   (one per 50 roots), for the boot query plus a vGPU group and a bandwidth group
//!   (`group_policy=none`): the general search.
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

const CLASSES: [&str; 6] = [
    "VCPU",
    "MEMORY_MB",
    "DISK_GB",
    "VGPU",
    "NET_BW_EGR_KILOBIT_PER_SEC",
    "NET_BW_IGR_KILOBIT_PER_SEC",
];
const TRAITS: [&str; 11] = [
    "COMPUTE_NODE",
    "OWNER_NOVA",
    "COMPUTE_STATUS_DISABLED",
    "HW_CPU_X86_AVX2",
    "HW_CPU_X86_SSE42",
    "COMPUTE_NET_VIF_MODEL_VIRTIO",
    "COMPUTE_VOLUME_MULTI_ATTACH",
    "HW_CPU_X86_AVX512F",
    "MISC_SHARES_VIA_AGGREGATE",
    "CUSTOM_PHYSNET_PUBLIC",
    "CUSTOM_VNIC_TYPE_NORMAL",
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

/// The name tables, with `aggregates` aggregates.
fn empty_index(aggregates: i64) -> ProviderIndex {
    let mut index = ProviderIndex::default();
    index.resource_classes = NameTable::from_rows(
        CLASSES
            .iter()
            .enumerate()
            .map(|(i, c)| (i as i64, c.to_string())),
    );
    index.traits = NameTable::from_rows(
        TRAITS
            .iter()
            .enumerate()
            .map(|(i, t)| (i as i64 + 100, t.to_string())),
    );
    index.aggregates = NameTable::from_rows(
        (0..aggregates).map(|a| (a, format!("00000000-0000-4000-8000-{a:012}"))),
    );
    index
}

fn inv(total: i64, ratio: f32) -> Inventory {
    Inventory {
        total,
        reserved: 0,
        min_unit: 1,
        max_unit: total,
        step_size: 1,
        allocation_ratio: ratio,
        allocation_ratio_text: f64::from(ratio),
    }
}

/// Root `i` (provider id `i + 1`), 40 % used, with DISK_GB when `disk`.
fn root(i: u64, disk: bool) -> Provider {
    let vcpus = [8, 16, 32, 64][(mix(i, 1) % 4) as usize];
    let mem = [16_384, 65_536, 131_072, 262_144][(mix(i, 2) % 4) as usize];
    let disk_gb = 100 + (mix(i, 3) % 1900) as i64;
    let ratio = if mix(i, 4).is_multiple_of(2) {
        4.0
    } else {
        16.0
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
    let mut inventories: BTreeMap<i64, Inventory> = [(0, inv(vcpus, ratio)), (1, inv(mem, 1.5))]
        .into_iter()
        .collect();
    let mut usages: BTreeMap<i64, i64> = [(0, vcpus * 4 / 10), (1, mem * 4 / 10)]
        .into_iter()
        .collect();
    if disk {
        inventories.insert(2, inv(disk_gb, 1.0));
        usages.insert(2, disk_gb * 4 / 10);
    }
    Provider {
        id: i as i64 + 1,
        uuid: format!("{:08x}-0000-4000-8000-{:012x}", mix(i, 9) as u32, i).into(),
        generation: 3,
        parent_id: None,
        root_id: i as i64 + 1,
        inventories,
        usages,
        traits,
        aggregates: [(mix(i, 11) % 3) as i64, 3 + (mix(i, 12) % 4) as i64]
            .into_iter()
            .collect(),
    }
}

/// `n` flat root providers.
fn index(n: usize) -> ProviderIndex {
    let mut idx = empty_index(7);
    for i in 0..n as u64 {
        idx.upsert(root(i, true));
    }
    idx
}

/// `n` provider trees and their disk pools (see the module documentation).
fn forest(n: usize) -> ProviderIndex {
    let pools = n.div_ceil(50) as i64;
    let mut idx = empty_index(7 + pools);
    let mut next = n as i64 + 1;
    let mut add = |idx: &mut ProviderIndex, p: Provider| {
        let id = next;
        next += 1;
        idx.upsert(Provider {
            id,
            uuid: format!(
                "{:08x}-0000-4000-9000-{:012x}",
                mix(id as u64, 9) as u32,
                id
            )
            .into(),
            generation: 1,
            ..p
        });
        id
    };
    for i in 0..n as u64 {
        let mut r = root(i, false);
        r.aggregates.insert(7 + (i / 50) as i64);
        let id = r.id;
        idx.upsert(r);
        let under = |parent: i64| Provider {
            parent_id: Some(parent),
            root_id: id,
            ..Provider::default()
        };
        add(
            &mut idx,
            Provider {
                inventories: BTreeMap::from([(3, inv(4, 1.0))]),
                usages: BTreeMap::from([(3, 1)]),
                ..under(id)
            },
        );
        let agent = add(&mut idx, under(id));
        add(
            &mut idx,
            Provider {
                inventories: BTreeMap::from([(4, inv(10_000_000, 1.0)), (5, inv(10_000_000, 1.0))]),
                traits: BTreeSet::from([109, 110]),
                ..under(agent)
            },
        );
    }
    for pool in 0..pools {
        let id = next + pool;
        idx.upsert(Provider {
            id,
            uuid: format!(
                "{:08x}-0000-4000-a000-{:012x}",
                mix(id as u64, 9) as u32,
                id
            )
            .into(),
            generation: 1,
            root_id: id,
            inventories: BTreeMap::from([(2, inv(50 * 2000, 1.0))]),
            usages: BTreeMap::from([(2, 50 * 400)]),
            traits: BTreeSet::from([108]),
            aggregates: BTreeSet::from([7 + pool]),
            ..Provider::default()
        });
    }
    idx
}

fn query(pairs: &[(&str, &str)]) -> LocalRequest {
    let params: Vec<(String, String)> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    LocalRequest::from_params(&params).expect("the query is answered locally")
}

const BOOT: [(&str, &str); 3] = [
    ("resources", "DISK_GB:20,MEMORY_MB:4096,VCPU:2"),
    ("root_required", "OWNER_NOVA,!COMPUTE_STATUS_DISABLED"),
    ("limit", "1000"),
];

/// The boot query with a vGPU and port bandwidth, as nova sorts it.
const NESTED_BOOT: [(&str, &str); 7] = [
    ("group_policy", "none"),
    ("limit", "1000"),
    ("required2", "CUSTOM_PHYSNET_PUBLIC,CUSTOM_VNIC_TYPE_NORMAL"),
    ("resources", "DISK_GB:20,MEMORY_MB:4096,VCPU:2"),
    ("resources1", "VGPU:1"),
    (
        "resources2",
        "NET_BW_EGR_KILOBIT_PER_SEC:1000,NET_BW_IGR_KILOBIT_PER_SEC:1000",
    ),
    ("root_required", "OWNER_NOVA,!COMPUTE_STATUS_DISABLED"),
];

fn bench<M: Measurement>(c: &mut Criterion<M>) {
    let mut group = c.benchmark_group("placement_index");
    for n in host_counts() {
        // Most roots fit; nova's limit keeps the first 1,000.
        let expected = (n * 9 / 10).min(1000);
        for (name, idx, req) in [
            ("local_candidates", index(n), query(&BOOT)),
            ("local_candidates_nested", forest(n), query(&NESTED_BOOT)),
        ] {
            let found = local_candidates(&idx, &req).expect("local");
            assert!(found.allocation_requests.len() >= expected, "{name} at {n}");
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, _| {
                b.iter(|| black_box(local_candidates(black_box(&idx), black_box(&req)).unwrap()))
            });
        }
    }
    group.finish();
}

fn main() {
    cpu_time::run(bench::<cpu_time::ThreadCpuTime>, bench::<WallTime>);
}
