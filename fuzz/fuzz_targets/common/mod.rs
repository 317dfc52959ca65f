// SPDX-License-Identifier: Apache-2.0
//! Shared by the fuzz targets: what the daemon does with a decoded `RequestSpec`
//! before and without I/O (request filters, the Placement query, the notification
//! payloads) and the decision core over a few fixed host states.
#![allow(dead_code)]

use std::future::Future;
use std::pin::pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};

use chrono::{DateTime, TimeZone, Utc};
use nova_scheduler::filters::{build_chain, FilterConfig};
use nova_scheduler::manager::request_filter as rf;
use nova_scheduler::model::{Aggregate, HostState, RequestSpec, ServiceInfo};
use nova_scheduler::notifications::NotifiedSpec;
use nova_scheduler::placement::{
    allocation_candidates_query, destination_target, resources_from_request_spec, QueryOptions,
    TargetNode,
};
use nova_scheduler::release::NovaSeries;
use nova_scheduler::scheduler::{ClaimError, Claimer, ScheduleRequest, Scheduler};
use nova_scheduler::weighers::{build_pipeline, WeigherConfig};
use serde_json::{json, Value};

/// The `select_destinations` wire samples (`src/rpc/testdata`), as captured.
pub const WIRE_SAMPLES: [&str; 4] = [
    include_str!("../../../src/rpc/testdata/single_instance.request.json"),
    include_str!("../../../src/rpc/testdata/multi_instance_group.request.json"),
    include_str!("../../../src/rpc/testdata/hints_image_props_az.request.json"),
    include_str!("../../../src/rpc/testdata/novalidhost.request.json"),
];

/// The `args` of each wire sample's inner message.
pub fn sample_args() -> &'static [Value] {
    static ARGS: OnceLock<Vec<Value>> = OnceLock::new();
    ARGS.get_or_init(|| {
        WIRE_SAMPLES
            .iter()
            .map(|text| {
                let capture: Value = serde_json::from_str(text).expect("wire sample");
                let inner: Value = serde_json::from_str(
                    capture["body"]["oslo.message"]
                        .as_str()
                        .expect("oslo.message"),
                )
                .expect("inner message");
                inner["args"].clone()
            })
            .collect()
    })
}

/// Runs a future that never waits (the scheduler with an in-memory claimer).
pub fn run_ready<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a future that should not wait is pending"),
    }
}

/// The request filters that need no database, as `process_reqspec` runs them.
pub fn request_filters(spec: &mut RequestSpec) {
    rf::require_image_type_support(spec, true);
    rf::compute_status_filter(spec);
    rf::transform_image_metadata(spec, true);
    rf::accelerators_filter(spec);
    let _ = rf::packed_virtqueue_filter(spec);
    let _ = rf::ephemeral_encryption_filter(spec);
    let _ = rf::virtio_sound_filter(spec);
    let _ = rf::tpm_secret_security_filter(spec);
    rf::require_owner_nova(spec);
}

/// Everything the manager does with a decoded spec before it reads a database:
/// the request filters, the Placement questions (with and without a target node,
/// pinning translated or not), the notification payloads of its primitive.
pub fn exercise_spec(spec: &RequestSpec, primitive: Option<&Value>) {
    let _ = spec.hint("query");
    let _ = spec.is_rebuild();
    let opts = QueryOptions::default();
    let _ = allocation_candidates_query(spec, &opts);
    let mut filtered = spec.clone();
    request_filters(&mut filtered);
    let _ = allocation_candidates_query(&filtered, &opts);
    if destination_target(&filtered).is_some() {
        let node = TargetNode {
            uuid: "00000000-0000-4000-8000-000000000001".into(),
            host: "cmp00001".into(),
            hypervisor_hostname: "cmp00001".into(),
        };
        for nodes in [
            &[][..],
            std::slice::from_ref(&node),
            &[node.clone(), node.clone()][..],
        ] {
            let mut s = filtered.clone();
            if let Ok(rr) = resources_from_request_spec(&mut s, &opts, false, Some(nodes)) {
                let _ = rr.to_querystring();
            }
        }
    }
    if let Some(primitive) = primitive {
        let mut notified = NotifiedSpec::new(primitive.clone(), NovaSeries::NEWEST);
        let _ = notified.legacy_payload();
        let _ = notified.versioned_payload();
        notified.set_destination_aggregates(&["a1,a2".to_string()]);
        notified.set_instance_uuid("440aae02-195c-4c8e-9733-2cf3618e3f10");
        let _ = notified.versioned_payload();
        let _ = notified.legacy_payload();
    }
}

fn obj(name: &str, version: &str, data: Value) -> Value {
    json!({"nova_object.name": name, "nova_object.namespace": "nova",
           "nova_object.version": version, "nova_object.data": data})
}

fn numa_cell(id: i64, cpus: [i64; 4], pcpus: [i64; 4], used: i64) -> Value {
    let pages = |size_kb: i64, total: i64, used: i64| {
        obj(
            "NUMAPagesTopology",
            "1.1",
            json!({"size_kb": size_kb, "total": total, "used": used, "reserved": 0}),
        )
    };
    obj(
        "NUMACell",
        "1.5",
        json!({
            "id": id, "cpuset": cpus, "pcpuset": pcpus, "memory": 16384,
            "cpu_usage": used, "memory_usage": used * 512, "pinned_cpus": [pcpus[0]],
            "siblings": [[cpus[0], cpus[1]], [cpus[2], cpus[3]], [pcpus[0], pcpus[1]], [pcpus[2], pcpus[3]]],
            "mempages": [pages(4, 3_670_016, 0), pages(2048, 1024, used), pages(1_048_576, 2, 0)],
            "network_metadata": obj("NetworkMetadata", "1.0", json!({"physnets": ["net1"], "tunneled": id == 0})),
            "socket": id,
        }),
    )
}

fn aggregate(id: i64, metadata: &[(&str, &str)], hosts: &[&str]) -> Arc<Aggregate> {
    Arc::new(Aggregate {
        id,
        uuid: format!("aaaaaaaa-0000-4000-8000-00000000000{id}"),
        name: format!("agg{id}"),
        hosts: hosts.iter().map(|h| h.to_string()).collect(),
        metadata: metadata
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    })
}

/// A fixed time, so that a run depends on its input only.
pub fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 21, 14, 25, 17).unwrap()
}

/// Three compute nodes: a plain one, one with NUMA cells, PCI pools, metrics,
/// stats and aggregates with metadata, and a disabled one that is down.
pub fn hosts() -> Vec<HostState> {
    static HOSTS: OnceLock<Vec<HostState>> = OnceLock::new();
    HOSTS
        .get_or_init(|| {
            let now = now();
            let service = |host: &str, disabled: bool, seen: DateTime<Utc>| ServiceInfo {
                id: 1,
                host: host.into(),
                disabled,
                disabled_reason: disabled.then(|| "maintenance".into()),
                last_seen_up: Some(seen),
                created_at: Some(seen),
                updated_at: Some(seen),
                version: 70,
                ..Default::default()
            };
            let base = |i: usize, name: &str| HostState {
                host: name.into(),
                nodename: name.into(),
                cell_uuid: "11111111-1111-4111-8111-111111111111".into(),
                uuid: Some(format!("00000000-0000-4000-8000-00000000000{i}").into()),
                total_usable_ram_mb: 65536,
                free_ram_mb: 32768,
                total_usable_disk_gb: 1000,
                disk_mb_used: 100 * 1024,
                free_disk_mb: 900 * 1024,
                vcpus_total: 16,
                vcpus_used: 4,
                cpu_allocation_ratio: 4.0,
                ram_allocation_ratio: 1.5,
                disk_allocation_ratio: 1.0,
                num_instances: 2,
                num_io_ops: 1,
                host_ip: Some(format!("10.0.0.{i}").into()),
                hypervisor_type: Some("QEMU".into()),
                hypervisor_version: Some(8_002_000),
                hypervisor_hostname: Some(name.into()),
                supported_instances: Arc::new(vec![vec![
                    "x86_64".into(),
                    "qemu".into(),
                    "hvm".into(),
                ]]),
                instances: Arc::new(
                    ["11111111-2222-4333-8444-555555555555".to_string()].into(),
                ),
                service: service(name, false, now),
                updated: Some(now),
                ..Default::default()
            };
            let plain = base(1, "cmp00001");
            let mut rich = base(2, "cmp00002");
            rich.stats = Arc::new(
                [("num_instances", "2"), ("io_workload", "1"), ("num_proj_c0c0", "1")]
                    .into_iter()
                    .map(|(k, v)| (Arc::from(k), Arc::from(v)))
                    .collect(),
            );
            rich.cpu_info = Some(
                r#"{"arch": "x86_64", "model": "Skylake", "vendor": "Intel", "topology": {"cells": 2, "sockets": 2, "cores": 4, "threads": 2}, "features": ["avx2", "sse4.2"], "maxphysaddr": {"mode": "emulate", "bits": 46}}"#
                    .into(),
            );
            rich.numa_topology = Some(Arc::new(obj(
                "NUMATopology",
                "1.2",
                json!({"cells": [numa_cell(0, [0, 1, 2, 3], [4, 5, 6, 7], 1), numa_cell(1, [8, 9, 10, 11], [12, 13, 14, 15], 0)]}),
            )));
            rich.pci_stats = Some(Arc::new(obj(
                "PciDevicePoolList",
                "1.1",
                json!({"objects": [
                    obj("PciDevicePool", "1.1", json!({"vendor_id": "8086", "product_id": "1520", "numa_node": 0, "count": 4,
                        "tags": {"dev_type": "type-VF", "physical_network": "net1", "trusted": "true"}})),
                    obj("PciDevicePool", "1.1", json!({"vendor_id": "10de", "product_id": "1eb8", "numa_node": 1, "count": 1,
                        "tags": {"dev_type": "type-PCI"}})),
                ]}),
            )));
            rich.metrics = Some(Arc::new(json!([
                {"name": "cpu.frequency", "value": 2400, "source": "libvirt", "timestamp": "2026-11-21T14:25:00.000000"},
                {"name": "cpu.percent", "value": 0.25, "source": "libvirt", "timestamp": "2026-11-21T14:25:00.000000"},
            ])));
            rich.aggregates = vec![
                aggregate(1, &[("availability_zone", "az2"), ("filter_tenant_id", "c0c0c0c0c0c04c0c8c0c0c0c0c0c0c01"),
                    ("cpu_allocation_ratio", "8.0"), ("max_instances_per_host", "10"), ("max_io_ops_per_host", "4"),
                    ("instance_type", "m1.anchor,m1.small"), ("hw_architecture", "x86_64"), ("os_distro", "ubuntu"),
                    ("trait:CUSTOM_GOLD", "required")], &["cmp00002"]),
                aggregate(2, &[("ssd", "true"), ("ram_allocation_ratio", "x")], &["cmp00002", "cmp00003"]),
            ];
            rich.instance_flavor_ids = Arc::new(
                [("11111111-2222-4333-8444-555555555555".to_string(), Some(2))].into(),
            );
            let mut down = base(3, "cmp00003");
            down.service = service("cmp00003", true, now - chrono::Duration::minutes(10));
            down.free_ram_mb = -1024;
            down.failed_builds = 3;
            vec![plain, rich, down]
        })
        .clone()
}

/// Every filter and weigher this daemon has, with nova's default options.
pub fn scheduler() -> &'static Scheduler {
    static SCHEDULER: OnceLock<Scheduler> = OnceLock::new();
    SCHEDULER.get_or_init(|| {
        #[rustfmt::skip]
        let filters = [
            "AggregateImagePropertiesIsolation", "AggregateInstanceExtraSpecsFilter",
            "AggregateIoOpsFilter", "AggregateMultiTenancyIsolation", "AggregateNumInstancesFilter",
            "AggregateTypeAffinityFilter", "AllHostsFilter", "ComputeCapabilitiesFilter",
            "ComputeFilter", "DifferentHostFilter", "ImagePropertiesFilter", "IoOpsFilter",
            "IsolatedHostsFilter", "JsonFilter", "MetricsFilter", "NUMATopologyFilter",
            "NumInstancesFilter", "PciPassthroughFilter", "SameHostFilter",
            "ServerGroupAffinityFilter", "ServerGroupAntiAffinityFilter", "SimpleCIDRAffinityFilter",
            "AggregateCoreFilter", "AggregateDiskFilter", "AggregateRamFilter",
            "AvailabilityZoneFilter", "CoreFilter", "DiskFilter", "GroupAffinityFilter",
            "GroupAntiAffinityFilter", "RamFilter", "RetryFilter", "TypeAffinityFilter",
        ];
        let filters: Vec<String> = filters.iter().map(|s| s.to_string()).collect();
        let config = FilterConfig {
            isolated_images: vec!["e0e0e0e0-e0e0-4e0e-8e0e-e0e0e0e0e001".into()],
            isolated_hosts: vec!["cmp00003".into()],
            metrics_weight_setting: vec!["cpu.frequency=1.0".into()],
            ..FilterConfig::default()
        };
        let weighers = WeigherConfig {
            image_props_weight_multiplier: 1.0,
            image_props_weight_setting: vec!["os_distro=1.0".into(), "hw_machine_type=0".into()],
            metrics_weight_setting: vec!["cpu.frequency=1.0".into(), "cpu.percent=-1.0".into()],
            ..WeigherConfig::default()
        };
        Scheduler {
            filters: build_chain(&filters, &config).expect("every filter is known"),
            weighers: build_pipeline(&["nova.scheduler.weights.all_weighers".to_string()], &weighers)
                .expect("every weigher is known"),
            host_subset_size: 2,
            shuffle_best_same_weighed_hosts: true,
            max_attempts: 3,
            packing_host_numa_cells_allocation_strategy: false,
        }
    })
}

/// Placement as a claimer that grants every claim.
struct GrantAll;

impl Claimer for GrantAll {
    async fn claim(&mut self, _: &str, _: &HostState, _: &Value) -> Result<bool, ClaimError> {
        Ok(true)
    }
    async fn release(&mut self, _: &[String]) -> Result<(), ClaimError> {
        Ok(())
    }
}

/// At most this many instances are placed per input (a request may ask for 1000).
pub const MAX_INSTANCES: i64 = 4;

/// The decision core on the fixed hosts: filter, weigh, pick, consume (NUMA fit and
/// PCI pools included), alternates; on the claim path with one allocation candidate
/// per host when `placement` is set.
pub fn schedule(spec: &RequestSpec, placement: bool, seed: u64) {
    let mut spec = spec.clone();
    spec.num_instances = spec.num_instances.clamp(0, MAX_INSTANCES);
    let mut hosts = hosts();
    let instance_uuids = placement.then(|| {
        (0..spec.num_instances.max(1))
            .map(|i| format!("440aae02-195c-4c8e-9733-2cf3618e3f1{i}"))
            .collect::<Vec<_>>()
    });
    if placement {
        for h in &mut hosts {
            let rp = h.uuid.as_deref().unwrap_or_default().to_string();
            let ar = json!({"allocations": {rp.clone(): {"resources": {"VCPU": 1, "MEMORY_MB": 512}}},
                            "mappings": {"": [rp]}});
            h.allocation_candidates = vec![ar.into()];
        }
    }
    let req = ScheduleRequest {
        spec,
        instance_uuids,
        use_placement: placement,
        return_alternates: true,
        now: now(),
    };
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(seed);
    let _ = run_ready(scheduler().schedule(hosts, req, &mut GrantAll, &mut rng));
}
