// SPDX-License-Identifier: Apache-2.0
//! Vectors of nova's scheduler/filters/test_numa_topology_filters.py.

use super::*;
use crate::model::{Flavor, ImageMeta};
use chrono::Utc;
use serde_json::json;

fn obj(name: &str, data: Value) -> Value {
    json!({"nova_object.name": name, "nova_object.namespace": "nova",
           "nova_object.version": "1.5", "nova_object.data": data})
}

fn pages(size: i64, total: i64) -> Value {
    obj(
        "NUMAPagesTopology",
        json!({"size_kb": size, "total": total, "used": 0, "reserved": 0}),
    )
}

/// nova's NUMA_TOPOLOGY fixture: 2 cells, 2 shared + 2 dedicated CPUs, 512 MiB each.
fn host_fixture(siblings: [Value; 2]) -> Value {
    let [s0, s1] = siblings;
    obj(
        "NUMATopology",
        json!({"cells": [
            obj("NUMACell", json!({"id": 0, "cpuset": [1, 2], "pcpuset": [3, 4], "memory": 512,
                "cpu_usage": 0, "memory_usage": 0, "pinned_cpus": [], "siblings": s0,
                "mempages": [pages(16, 387184), pages(2048, 512)], "socket": 0})),
            obj("NUMACell", json!({"id": 1, "cpuset": [5, 6], "pcpuset": [7, 8], "memory": 512,
                "cpu_usage": 0, "memory_usage": 0, "pinned_cpus": [], "siblings": s1,
                "mempages": [pages(4, 1548736), pages(2048, 512)], "socket": 0})),
        ]}),
    )
}

fn no_ht() -> Value {
    host_fixture([json!([[3], [4]]), json!([[7], [8]])])
}

fn host(topology: Option<Value>, cpu: f64, ram: f64, candidates: usize) -> HostState {
    HostState {
        host: "host1".into(),
        nodename: "node1".into(),
        numa_topology: topology.map(std::sync::Arc::new),
        cpu_allocation_ratio: cpu,
        ram_allocation_ratio: ram,
        allocation_candidates: (0..candidates)
            .map(|_| json!({"mappings": {}}).into())
            .collect(),
        ..Default::default()
    }
}

fn icell(
    id: i64,
    cpus: &[i64],
    pcpus: &[i64],
    memory: i64,
    policy: Option<&str>,
    thread: Option<&str>,
    pagesize: Option<i64>,
) -> Value {
    obj(
        "InstanceNUMACell",
        json!({"id": id, "cpuset": cpus, "pcpuset": pcpus, "memory": memory,
               "cpu_policy": policy, "cpu_thread_policy": thread, "pagesize": pagesize}),
    )
}

fn spec(cells: Vec<Value>, extra: &[(&str, &str)], props: Value) -> RequestSpec {
    RequestSpec {
        flavor: Flavor {
            extra_specs: extra
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Default::default()
        },
        image: Some(ImageMeta {
            properties: props.as_object().cloned().unwrap_or_default(),
            ..Default::default()
        }),
        numa_topology: if cells.is_empty() {
            None
        } else {
            Some(obj("InstanceNUMATopology", json!({"cells": cells})))
        },
        ..Default::default()
    }
}

fn passes(h: &mut HostState, s: &RequestSpec) -> bool {
    let req = FilterRequest {
        spec: s,
        now: Utc::now(),
        index: 0,
        is_rebuild: false,
    };
    NUMATopologyFilter::new(false).filter_host(h, &req)
}

fn two_small_cells() -> Vec<Value> {
    vec![
        icell(0, &[1], &[], 512, None, None, None),
        icell(1, &[3], &[], 512, None, None, None),
    ]
}

#[test]
fn fits_and_sets_limits() {
    let s = spec(two_small_cells(), &[], json!({}));
    let mut h = host(Some(no_ht()), 16.0, 1.5, 1);
    assert!(passes(&mut h, &s));
    let mut h = host(Some(no_ht()), 21.0, 1.3, 1);
    assert!(passes(&mut h, &s));
    let l = Limits::from_primitive(&h.limits["numa_topology"]).unwrap();
    assert_eq!(
        (l.cpu_allocation_ratio, l.ram_allocation_ratio),
        (21.0, 1.3)
    );
}

#[test]
fn topology_presence() {
    let s = spec(two_small_cells(), &[], json!({}));
    assert!(!passes(&mut host(None, 16.0, 1.5, 1), &s));
    let none = spec(vec![], &[], json!({}));
    assert!(passes(&mut host(Some(no_ht()), 16.0, 1.5, 1), &none));
}

#[test]
fn too_big_requests_fail() {
    let three = spec(
        vec![
            icell(0, &[1], &[], 512, None, None, None),
            icell(1, &[2], &[], 512, None, None, None),
            icell(2, &[3], &[], 512, None, None, None),
        ],
        &[],
        json!({}),
    );
    assert!(!passes(&mut host(Some(no_ht()), 16.0, 1.5, 1), &three));
    let big_mem = spec(
        vec![icell(0, &[1], &[], 1024, None, None, None)],
        &[],
        json!({}),
    );
    assert!(!passes(&mut host(Some(no_ht()), 16.0, 1.0, 1), &big_mem));
    let big_cpu = spec(
        vec![icell(0, &[1, 2, 3], &[], 512, None, None, None)],
        &[],
        json!({}),
    );
    assert!(!passes(&mut host(Some(no_ht()), 16.0, 1.5, 1), &big_cpu));
}

#[test]
fn require_needs_threads() {
    let cell = || {
        vec![icell(
            0,
            &[],
            &[0, 1],
            512,
            Some("dedicated"),
            Some("require"),
            None,
        )]
    };
    for (extra, props) in [
        (
            vec![
                ("hw:cpu_policy", "dedicated"),
                ("hw:cpu_thread_policy", "require"),
            ],
            json!({}),
        ),
        (
            vec![],
            json!({"hw_cpu_policy": "dedicated", "hw_cpu_thread_policy": "require"}),
        ),
        (
            vec![("hw:cpu_policy", "dedicated")],
            json!({"hw_cpu_thread_policy": "require"}),
        ),
    ] {
        let s = spec(cell(), &extra, props);
        assert!(!passes(&mut host(Some(no_ht()), 16.0, 1.5, 1), &s));
        let ht = host_fixture([json!([[3, 4]]), json!([[7, 8]])]);
        assert!(passes(&mut host(Some(ht), 16.0, 1.5, 1), &s));
    }
    for thread in ["prefer", "isolate"] {
        let s = spec(
            vec![icell(
                0,
                &[],
                &[0, 1],
                512,
                Some("dedicated"),
                Some(thread),
                None,
            )],
            &[
                ("hw:cpu_policy", "dedicated"),
                ("hw:cpu_thread_policy", thread),
            ],
            json!({}),
        );
        assert!(passes(&mut host(Some(no_ht()), 16.0, 1.5, 1), &s));
    }
}

#[test]
fn page_sizes() {
    let s = spec(
        vec![
            icell(0, &[1], &[], 512, None, None, Some(4)),
            icell(1, &[3], &[], 512, None, None, Some(16)),
        ],
        &[],
        json!({}),
    );
    assert!(passes(&mut host(Some(no_ht()), 16.0, 1.5, 1), &s));
    let s = spec(
        vec![
            icell(0, &[1], &[], 512, None, None, Some(8)),
            icell(1, &[3], &[], 512, None, None, Some(16)),
        ],
        &[],
        json!({}),
    );
    assert!(!passes(&mut host(Some(no_ht()), 16.0, 1.5, 1), &s));
}

#[test]
fn candidates_are_required_and_pruned() {
    let s = spec(two_small_cells(), &[], json!({}));
    let mut h = host(Some(no_ht()), 16.0, 1.5, 0);
    assert!(!passes(&mut h, &s), "no allocation candidate, no pass");
    let big = spec(
        vec![icell(0, &[1], &[], 4096, None, None, None)],
        &[],
        json!({}),
    );
    let mut h = host(Some(no_ht()), 16.0, 1.0, 3);
    assert!(!passes(&mut h, &big));
    assert!(h.allocation_candidates.is_empty());
    let mut h = host(Some(no_ht()), 16.0, 1.5, 3);
    assert!(passes(&mut h, &s));
    assert_eq!(h.allocation_candidates.len(), 3);
}

#[test]
fn hostile_topologies_fail_cleanly() {
    let mut s = spec(two_small_cells(), &[], json!({}));
    s.numa_topology = Some(json!({"nova_object.name": "InstanceNUMATopology",
        "nova_object.data": {"cells": [{"bogus": true}]}}));
    assert!(!passes(&mut host(Some(no_ht()), 16.0, 1.5, 1), &s));
    let huge: Vec<Value> = (0..10_000)
        .map(|i| icell(i, &[i], &[], 1, None, None, None))
        .collect();
    let s = spec(huge, &[], json!({}));
    assert!(!passes(&mut host(Some(no_ht()), 16.0, 1.5, 1), &s));
    let bad_host = json!({"nova_object.name": "NUMATopology", "nova_object.data": {"cells": 5}});
    let s = spec(two_small_cells(), &[], json!({}));
    assert!(!passes(&mut host(Some(bad_host), 16.0, 1.5, 1), &s));
}

#[test]
fn consumption_pins_and_next_instance_sees_it() {
    let ht = host_fixture([json!([[3, 4]]), json!([[7, 8]])]);
    let mut h = host(Some(ht), 16.0, 1.5, 1);
    let mut s = spec(
        vec![icell(0, &[], &[0, 1], 256, Some("dedicated"), None, None)],
        &[("hw:cpu_policy", "dedicated")],
        json!({}),
    );
    assert!(passes(&mut h, &s));
    host_fit::consume_numa(
        &mut h,
        &mut s.numa_topology,
        None,
        &Default::default(),
        false,
    )
    .unwrap();
    let fitted = InstanceTopology::from_primitive(s.numa_topology.as_ref().unwrap()).unwrap();
    let first = fitted.cells[0].id;
    assert!(passes(&mut h, &s));
    host_fit::consume_numa(
        &mut h,
        &mut s.numa_topology,
        None,
        &Default::default(),
        false,
    )
    .unwrap();
    let fitted = InstanceTopology::from_primitive(s.numa_topology.as_ref().unwrap()).unwrap();
    assert_ne!(
        fitted.cells[0].id, first,
        "the first cell's dedicated CPUs are used up"
    );
    assert!(!passes(&mut h, &s), "both cells are pinned full");
}

/// One PCI request for `count` devices of vendor `v` with a NUMA affinity policy.
fn pci_request(count: i64, policy: Option<&str>) -> Value {
    json!({"nova_object.name": "InstancePCIRequests", "nova_object.namespace": "nova",
        "nova_object.version": "1.1", "nova_object.data": {"requests": [
        {"nova_object.name": "InstancePCIRequest", "nova_object.namespace": "nova",
         "nova_object.version": "1.4", "nova_object.data": {"count": count,
         "spec": [{"vendor_id": "v"}], "alias_name": "a", "request_id": "r1",
         "numa_policy": policy}}]}})
}

/// The 2-cell fixture with one device pool per `(numa_node, count)`.
fn pci_host(pools: &[(Option<i64>, i64)]) -> HostState {
    let mut h = host(Some(no_ht()), 16.0, 1.5, 1);
    h.pci_stats = Some(std::sync::Arc::new(Value::Array(
        pools
            .iter()
            .map(|(n, c)| json!({"vendor_id": "v", "product_id": "p", "numa_node": n, "count": c}))
            .collect(),
    )));
    h
}

fn one_cell_with_pci(memory: i64, count: i64, policy: Option<&str>) -> RequestSpec {
    let mut s = spec(
        vec![icell(0, &[1], &[], memory, None, None, None)],
        &[],
        json!({}),
    );
    s.pci_requests = Some(pci_request(count, policy));
    s
}

fn fitted_cell(s: &RequestSpec) -> i64 {
    InstanceTopology::from_primitive(s.numa_topology.as_ref().unwrap())
        .unwrap()
        .cells[0]
        .id
}

fn consume(h: &mut HostState, s: &mut RequestSpec) {
    let requests = host_fit::spec_requests(s).unwrap();
    host_fit::consume_numa(
        h,
        &mut s.numa_topology,
        requests.as_deref(),
        &Default::default(),
        false,
    )
    .unwrap();
    let cells = s
        .numa_topology
        .as_ref()
        .map(|t| InstanceTopology::from_primitive(t).unwrap().cells);
    assert!(host_fit::consume_pci(h, s, cells.as_deref()));
}

#[test]
fn numa_and_pci_in_one_request_fit_on_the_device_cell() {
    // Before this was wired, any request with both failed every host.
    for policy in [None, Some("legacy"), Some("required"), Some("preferred")] {
        let mut h = pci_host(&[(Some(1), 1)]);
        let mut s = one_cell_with_pci(256, 1, policy);
        assert!(passes(&mut h, &s), "policy {policy:?}");
        consume(&mut h, &mut s);
        assert_eq!(fitted_cell(&s), 1, "the cell with the device comes first");
        assert_eq!(
            host_fit::host_pools(&h).free_devices(),
            0,
            "the device is taken"
        );
        assert!(!passes(&mut h, &s), "no device left, policy {policy:?}");
    }
}

#[test]
fn numa_affinity_policies_decide_when_the_device_cell_is_full() {
    // Cell 1 (with the device) cannot hold 400 MiB more once 300 of its 512 MiB are
    // used (RAM ratio 1.0); cell 0 can.
    let full_cell_1 = |h: &mut HostState| {
        let mut t = (*h.numa_topology.take().unwrap()).clone();
        t["nova_object.data"]["cells"][1]["nova_object.data"]["memory_usage"] = json!(300);
        h.numa_topology = Some(std::sync::Arc::new(t));
        h.ram_allocation_ratio = 1.0;
    };
    let verdict = |policy: Option<&str>, sockets: [Option<i64>; 2]| {
        let mut h = pci_host(&[(Some(1), 1)]);
        full_cell_1(&mut h);
        let mut t = (*h.numa_topology.take().unwrap()).clone();
        for (i, s) in sockets.iter().enumerate() {
            t["nova_object.data"]["cells"][i]["nova_object.data"]["socket"] = json!(s);
        }
        h.numa_topology = Some(std::sync::Arc::new(t));
        let s = one_cell_with_pci(400, 1, policy);
        passes(&mut h, &s)
    };
    assert!(
        !verdict(None, [Some(0), Some(0)]),
        "legacy: the device must be local"
    );
    assert!(!verdict(Some("legacy"), [Some(0), Some(0)]));
    assert!(!verdict(Some("required"), [Some(0), Some(0)]));
    assert!(verdict(Some("preferred"), [Some(0), Some(0)]));
    assert!(verdict(Some("socket"), [Some(0), Some(0)]), "same socket");
    assert!(!verdict(Some("socket"), [Some(0), Some(1)]), "other socket");
    assert!(
        !verdict(Some("socket"), [Some(0), None]),
        "no socket information"
    );
    // A device without NUMA affinity serves legacy and preferred, not required.
    let no_node = |policy: Option<&str>| {
        let mut h = pci_host(&[(None, 1)]);
        let s = one_cell_with_pci(256, 1, policy);
        passes(&mut h, &s)
    };
    assert!(no_node(None));
    assert!(no_node(Some("preferred")));
    assert!(!no_node(Some("required")));
}

#[test]
fn pci_requests_without_devices_or_mappings_fail() {
    let mut h = pci_host(&[]);
    assert!(!passes(&mut h, &one_cell_with_pci(256, 1, None)));
    let mut h = pci_host(&[(Some(0), 1)]);
    h.allocation_candidates = vec![json!({"no": "mappings"}).into()];
    assert!(!passes(&mut h, &one_cell_with_pci(256, 1, None)));
    // nova reads `candidate["mappings"]` with or without PCI requests (KeyError).
    let mut h = pci_host(&[(Some(0), 1)]);
    h.allocation_candidates = vec![json!({"no": "mappings"}).into()];
    let s = spec(
        vec![icell(0, &[1], &[], 256, None, None, None)],
        &[],
        json!({}),
    );
    assert!(!passes(&mut h, &s));
}

#[test]
fn hostile_pci_requests_in_a_numa_fit_are_bounded() {
    // 100 requests of 1,000 specs each over 100 pools: each permutation's PCI check
    // would compare millions of pool/spec pairs; the fit's budget stops it at once.
    let specs: Vec<Value> = (0..1000)
        .map(|i| json!({"vendor_id": format!("v{i}")}))
        .collect();
    let requests: Vec<Value> = (0..100)
        .map(|i| {
            json!({"nova_object.name": "InstancePCIRequest", "nova_object.namespace": "nova",
                   "nova_object.version": "1.4", "nova_object.data": {"count": 1,
                   "spec": specs, "alias_name": "a", "request_id": format!("r{i}")}})
        })
        .collect();
    let pools: Vec<(Option<i64>, i64)> = (0..100).map(|i| (Some(i % 2), 1)).collect();
    let mut h = pci_host(&pools);
    let mut s = one_cell_with_pci(256, 1, None);
    s.pci_requests = Some(json!({"nova_object.name": "InstancePCIRequests",
        "nova_object.namespace": "nova", "nova_object.version": "1.1",
        "nova_object.data": {"requests": requests}}));
    assert!(!passes(&mut h, &s));
    // The same requests on few pools stay within the budget and are decided.
    let mut h = pci_host(&[(Some(1), 1)]);
    assert!(!passes(&mut h, &s), "vendor v matches no v<i> spec");
}
