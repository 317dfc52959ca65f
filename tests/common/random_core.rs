// SPDX-License-Identifier: Apache-2.0
//! Random seeded clouds, schedulers and requests for the differential tests of
//! the decision core (`incremental_core`, `indexed_core`): hosts with few
//! distinct values (so that weights tie), aggregate multiplier overrides,
//! disabled and down services, several cells, server groups, hints, claims that
//! fail for some hosts, filter chains drawn from stable and non-stable filters.
#![allow(dead_code)]

use chrono::{Duration, Utc};
use nova_scheduler::filters::{build_chain, FilterConfig};
use nova_scheduler::model::{
    Aggregate, Flavor, HostState, InstanceGroup, RequestSpec, ServiceInfo,
};
use nova_scheduler::scheduler::{ClaimError, Claimer, ScheduleRequest, Scheduler};
use nova_scheduler::weighers::{build_pipeline, WeigherConfig};
use rand::rngs::StdRng;
use rand::RngExt;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Per-host claim capacity (`0`: every claim on it fails); records claims.
#[derive(Clone, Default)]
pub struct Claims {
    pub capacity: BTreeMap<String, usize>,
    pub log: Vec<(String, String)>,
    pub released: Vec<String>,
}

impl Claimer for Claims {
    async fn claim(&mut self, uuid: &str, host: &HostState, _: &Value) -> Result<bool, ClaimError> {
        let left = self
            .capacity
            .entry(host.host.to_string())
            .or_insert(usize::MAX);
        if *left == 0 {
            return Ok(false);
        }
        *left -= 1;
        self.log.push((uuid.to_string(), host.host.to_string()));
        Ok(true)
    }

    async fn release(&mut self, uuids: &[String]) -> Result<(), ClaimError> {
        self.released.extend(uuids.iter().cloned());
        Ok(())
    }
}

/// Claims that fail on some hosts: none at all on 10 %, after one on 10 %.
pub fn claims(rng: &mut StdRng, hosts: &[HostState]) -> Claims {
    let mut claims = Claims::default();
    for h in hosts {
        match rng.random_range(0..10) {
            0 => {
                claims.capacity.insert(h.host.to_string(), 0);
            }
            1 => {
                claims.capacity.insert(h.host.to_string(), 1);
            }
            _ => {}
        }
    }
    claims
}

pub const FILTERS: &[&str] = &[
    "ComputeFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
    "NumInstancesFilter",
    "IoOpsFilter",
    "RamFilter",
    "CoreFilter",
    "DiskFilter",
    "AllHostsFilter",
    "DifferentHostFilter",
    "SameHostFilter",
];

pub fn cloud(rng: &mut StdRng, members: &[String]) -> Vec<HostState> {
    let n = match rng.random_range(0..10) {
        0 => rng.random_range(1..4),
        1..=6 => rng.random_range(4..40),
        _ => rng.random_range(40..200),
    };
    cloud_of(rng, members, n)
}

/// A cloud of `n` hosts (see [`cloud`]).
pub fn cloud_of(rng: &mut StdRng, members: &[String], n: usize) -> Vec<HostState> {
    let now = Utc::now();
    let aggs: Vec<Arc<Aggregate>> = vec![
        Arc::new(Aggregate {
            id: 1,
            name: "az".into(),
            metadata: [("availability_zone".to_string(), "az1".to_string())].into(),
            ..Default::default()
        }),
        Arc::new(Aggregate {
            id: 2,
            name: "fast".into(),
            metadata: [
                ("ram_weight_multiplier".to_string(), "2.5".to_string()),
                ("cpu_weight_multiplier".to_string(), "-1.0".to_string()),
            ]
            .into(),
            ..Default::default()
        }),
        // Negative multipliers other than the configured ones.
        Arc::new(Aggregate {
            id: 3,
            name: "slow".into(),
            metadata: [
                ("cpu_weight_multiplier".to_string(), "-3.0".to_string()),
                ("io_ops_weight_multiplier".to_string(), "-0.5".to_string()),
                ("ram_weight_multiplier".to_string(), "0.25".to_string()),
            ]
            .into(),
            ..Default::default()
        }),
    ];
    // Few distinct values so that weights tie often.
    let coarse = rng.random_bool(0.5);
    (0..n)
        .map(|i| {
            let name = format!("h{:03}", i / if rng.random_bool(0.05) { 2 } else { 1 });
            let pick = |rng: &mut StdRng, choices: &[i64], hi: i64| {
                if coarse {
                    choices[rng.random_range(0..choices.len())]
                } else {
                    rng.random_range(0..hi)
                }
            };
            let free_ram_mb = pick(rng, &[0, 2048, 8192, 16384], 32768) - 1024;
            let vcpus_used = pick(rng, &[0, 4, 8, 15], 17);
            let free_disk_mb = pick(rng, &[0, 20480, 102400], 204800);
            let num_instances = pick(rng, &[0, 1, 3, 49], 60);
            let mut instances: BTreeSet<String> = (0..rng.random_range(0..3))
                .map(|k| format!("other-{i}-{k}"))
                .collect();
            for m in members {
                if rng.random_bool(0.08) {
                    instances.insert(m.clone());
                }
            }
            let mut host_aggs = Vec::new();
            if rng.random_bool(0.5) {
                host_aggs.push(aggs[0].clone());
            }
            if rng.random_bool(0.2) {
                host_aggs.push(aggs[1].clone());
            }
            if rng.random_bool(0.15) {
                host_aggs.push(aggs[2].clone());
            }
            let down = rng.random_bool(0.05);
            HostState {
                host: name.as_str().into(),
                nodename: format!("node{i:03}").into(),
                cell_uuid: format!("cell{}", rng.random_range(0..2)).into(),
                uuid: Some(format!("rp-{i}").into()),
                total_usable_ram_mb: 32768,
                free_ram_mb,
                ram_allocation_ratio: [1.0, 1.5][rng.random_range(0..2)],
                total_usable_disk_gb: 200,
                free_disk_mb,
                disk_allocation_ratio: 1.0,
                vcpus_total: 16,
                vcpus_used,
                cpu_allocation_ratio: [1.0, 4.0][rng.random_range(0..2)],
                num_instances,
                num_io_ops: pick(rng, &[0, 2, 7], 9),
                hypervisor_version: Some([8_000_000, 9_000_000][rng.random_range(0..2)]),
                aggregates: host_aggs,
                instances: Arc::new(instances),
                service: ServiceInfo {
                    host: name.into(),
                    disabled: rng.random_bool(0.03),
                    last_seen_up: Some(if down { now - Duration::seconds(3600) } else { now }),
                    ..Default::default()
                },
                allocation_candidates: if rng.random_bool(0.05) {
                    Vec::new()
                } else {
                    vec![json!({"allocations": {format!("rp-{i}"): {"resources": {"MEMORY_MB": 512}}}}).into()]
                },
                ..Default::default()
            }
        })
        .collect()
}

pub fn scheduler(rng: &mut StdRng) -> Scheduler {
    scheduler_from(rng, FILTERS, 0.4)
}

/// A scheduler whose filters are drawn from `filters` and that shuffles the best
/// tied hosts with probability `shuffle`.
pub fn scheduler_from(rng: &mut StdRng, filters: &[&str], shuffle: f64) -> Scheduler {
    let mut filters: Vec<String> = filters
        .iter()
        .filter(|_| rng.random_bool(0.5))
        .map(|s| s.to_string())
        .collect();
    if rng.random_bool(0.3) {
        filters.reverse();
    }
    let config = FilterConfig {
        max_instances_per_host: rng.random_range(2..60),
        max_io_ops_per_host: rng.random_range(2..10),
        ..FilterConfig::default()
    };
    let mut weighers = WeigherConfig::default();
    let m = |rng: &mut StdRng| [0.0, 1.0, 2.0, -1.0, 0.5][rng.random_range(0..5)];
    weighers.ram_weight_multiplier = m(rng);
    weighers.cpu_weight_multiplier = m(rng);
    weighers.disk_weight_multiplier = m(rng);
    weighers.io_ops_weight_multiplier = m(rng);
    weighers.num_instances_weight_multiplier = m(rng);
    weighers.hypervisor_version_weight_multiplier = m(rng);
    weighers.soft_affinity_weight_multiplier = m(rng).abs();
    weighers.soft_anti_affinity_weight_multiplier = m(rng).abs();
    Scheduler {
        filters: build_chain(&filters, &config).expect("filters"),
        weighers: build_pipeline(&["nova.scheduler.weights.all_weighers".into()], &weighers)
            .expect("weighers"),
        host_subset_size: rng.random_range(0..5),
        shuffle_best_same_weighed_hosts: rng.random_bool(shuffle),
        max_attempts: rng.random_range(1..5),
        packing_host_numa_cells_allocation_strategy: false,
    }
}

pub fn request(rng: &mut StdRng, members: &[String]) -> ScheduleRequest {
    let instances = rng.random_range(1..9usize);
    let group = match rng.random_range(0..6) {
        0 | 1 => None,
        k => {
            let policy = [
                "affinity",
                "anti-affinity",
                "soft-affinity",
                "soft-anti-affinity",
            ][k - 2];
            let mut rules = BTreeMap::new();
            if policy == "anti-affinity" && rng.random_bool(0.5) {
                rules.insert(
                    "max_server_per_host".to_string(),
                    rng.random_range(1..4).to_string(),
                );
            }
            Some(InstanceGroup {
                uuid: Some("group-1".into()),
                policy: Some(policy.into()),
                policies: vec![policy.into()],
                members: members.to_vec(),
                hosts: Vec::new(),
                rules,
                ..Default::default()
            })
        }
    };
    let hints = if rng.random_bool(0.2) {
        Some(
            [(
                if rng.random_bool(0.5) {
                    "same_host"
                } else {
                    "different_host"
                }
                .to_string(),
                vec![members[0].clone()],
            )]
            .into(),
        )
    } else {
        None
    };
    let spec = RequestSpec {
        num_instances: instances as i64,
        flavor: Flavor {
            id: Some(1),
            memory_mb: [512, 2048, 8192][rng.random_range(0..3)],
            vcpus: [1, 2, 4][rng.random_range(0..3)],
            root_gb: [1, 20, 40][rng.random_range(0..3)],
            ..Default::default()
        },
        instance_group: group,
        scheduler_hints: hints,
        ..Default::default()
    };
    let legacy = rng.random_bool(0.15);
    ScheduleRequest {
        spec,
        instance_uuids: if legacy && rng.random_bool(0.5) {
            None
        } else {
            Some((0..instances).map(|k| format!("inst-{k}")).collect())
        },
        use_placement: !legacy,
        return_alternates: rng.random_bool(0.8),
        now: Utc::now(),
    }
}

/// Everything a run yields, in a comparable form.
pub fn summary(
    out: Result<
        nova_scheduler::scheduler::ScheduleOutcome,
        nova_scheduler::scheduler::ScheduleError,
    >,
    claims: &Claims,
) -> String {
    let out = match out {
        Ok(o) => format!(
            "destinations {:?}\nclaimed {:?}\nhosts {:?}",
            o.destinations, o.claimed, o.hosts
        ),
        Err(e) => format!("error {e:?}"),
    };
    format!(
        "{out}\nclaims {:?}\nreleased {:?}",
        claims.log, claims.released
    )
}
