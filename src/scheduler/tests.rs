// SPDX-License-Identifier: Apache-2.0
use super::*;
use crate::filters::{build_chain, FilterConfig};
use crate::model::{Flavor, InstanceGroup, ServiceInfo};
use crate::weighers::{build_pipeline, WeigherConfig};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::json;
use std::collections::BTreeMap;

/// An in-memory Placement: per-host capacity in instances; records claims.
#[derive(Default)]
struct FakeClaims {
    capacity: BTreeMap<String, usize>,
    claims: BTreeMap<String, String>,
    fail_for: Option<String>,
    released: Vec<String>,
}

impl Claimer for FakeClaims {
    async fn claim(
        &mut self,
        uuid: &str,
        host: &HostState,
        _ar: &Value,
    ) -> Result<bool, ClaimError> {
        if self.fail_for.as_deref() == Some(uuid) {
            return Err(ClaimError::AllocationUpdateFailed {
                consumer_uuid: uuid.into(),
                error: "conflict".into(),
            });
        }
        let left = self
            .capacity
            .entry(host.host.to_string())
            .or_insert(usize::MAX);
        if *left == 0 {
            return Ok(false);
        }
        *left -= 1;
        self.claims.insert(uuid.into(), host.host.to_string());
        Ok(true)
    }

    async fn release(&mut self, uuids: &[String]) -> Result<(), ClaimError> {
        for u in uuids {
            self.claims.remove(u);
            self.released.push(u.clone());
        }
        Ok(())
    }
}

fn host(name: &str, cell: &str, free_ram_mb: i64) -> HostState {
    HostState {
        host: name.into(),
        nodename: name.into(),
        cell_uuid: cell.into(),
        uuid: Some(format!("uuid-{name}").into()),
        free_ram_mb,
        total_usable_ram_mb: 65536,
        free_disk_mb: 100 * 1024,
        vcpus_total: 16,
        cpu_allocation_ratio: 1.0,
        service: ServiceInfo {
            last_seen_up: Some(Utc::now()),
            ..Default::default()
        },
        allocation_candidates: vec![
            json!({"allocations": {format!("uuid-{name}"): {"resources": {"MEMORY_MB": 4096}}}, "mappings": {"": [format!("uuid-{name}")]}}).into(),
        ],
        ..Default::default()
    }
}

fn scheduler(subset: usize) -> Scheduler {
    Scheduler {
        filters: build_chain(&["ComputeFilter".into()], &FilterConfig::default()).expect("filters"),
        weighers: build_pipeline(&["RAMWeigher".into()], &WeigherConfig::default())
            .expect("weighers"),
        host_subset_size: subset,
        shuffle_best_same_weighed_hosts: false,
        max_attempts: 3,
        packing_host_numa_cells_allocation_strategy: false,
    }
}

fn request(uuids: &[&str]) -> ScheduleRequest {
    ScheduleRequest {
        spec: RequestSpec {
            flavor: Flavor {
                memory_mb: 4096,
                vcpus: 2,
                root_gb: 10,
                ..Default::default()
            },
            num_instances: uuids.len() as i64,
            ..Default::default()
        },
        instance_uuids: Some(uuids.iter().map(|s| s.to_string()).collect()),
        use_placement: true,
        return_alternates: true,
        now: Utc::now(),
    }
}

fn names(out: &ScheduleOutcome) -> Vec<Vec<String>> {
    out.destinations
        .iter()
        .map(|d| {
            d.iter()
                .map(|x| out.hosts[x.host].host.to_string())
                .collect()
        })
        .collect()
}

async fn run(
    s: &Scheduler,
    hosts: Vec<HostState>,
    req: ScheduleRequest,
    claims: &mut FakeClaims,
) -> Result<ScheduleOutcome, ScheduleError> {
    s.schedule(hosts, req, claims, &mut StdRng::seed_from_u64(7))
        .await
}

#[tokio::test]
async fn single_instance_best_host_with_same_cell_alternates() {
    let hosts = vec![
        host("a", "c1", 8192),
        host("b", "c2", 16384),
        host("c", "c2", 4096),
        host("d", "c2", 12288),
        host("e", "c2", 10000),
    ];
    let mut claims = FakeClaims::default();
    let out = run(&scheduler(1), hosts, request(&["i1"]), &mut claims)
        .await
        .expect("placed");
    assert_eq!(names(&out), vec![vec!["b", "d", "e"]]);
    assert_eq!(claims.claims.get("i1").map(String::as_str), Some("b"));
    assert!(out.destinations[0]
        .iter()
        .all(|d| d.allocation_request.is_some()));
}

#[tokio::test]
async fn later_instances_see_earlier_consumption() {
    // a: 8192 free, b: 6000 free, flavor 4096: first on a (→ 4096), then b (6000 > 4096), then a again? no: b → 1904, a 4096 wins.
    let hosts = vec![host("a", "c1", 8192), host("b", "c1", 6000)];
    let mut claims = FakeClaims::default();
    let out = run(
        &scheduler(1),
        hosts,
        request(&["i1", "i2", "i3"]),
        &mut claims,
    )
    .await
    .expect("placed");
    let chosen: Vec<_> = names(&out).iter().map(|l| l[0].clone()).collect();
    assert_eq!(chosen, vec!["a", "b", "a"]);
    assert_eq!(out.hosts[0].free_ram_mb, 8192 - 2 * 4096);
    assert_eq!(out.hosts[0].num_instances, 2);
    // No alternates: both hosts were selected for this request.
    assert!(out.destinations.iter().all(|d| d.len() == 1));
}

#[tokio::test]
async fn failed_claim_moves_to_next_host() {
    let hosts = vec![
        host("a", "c1", 8192),
        host("b", "c1", 6000),
        host("c", "c1", 1000),
    ];
    let mut claims = FakeClaims {
        capacity: [("a".to_string(), 0)].into(),
        ..Default::default()
    };
    let out = run(&scheduler(1), hosts, request(&["i1"]), &mut claims)
        .await
        .expect("placed");
    assert_eq!(names(&out)[0][0], "b");
    // The host whose claim failed is still a valid alternate (nova does the same).
    assert_eq!(names(&out)[0][1..], ["a".to_string(), "c".to_string()]);
}

#[tokio::test]
async fn not_enough_hosts_releases_every_claim() {
    let hosts = vec![host("a", "c1", 8192), host("b", "c1", 6000)];
    let mut claims = FakeClaims {
        capacity: [("a".to_string(), 1), ("b".to_string(), 1)].into(),
        ..Default::default()
    };
    let err = run(
        &scheduler(1),
        hosts,
        request(&["i1", "i2", "i3"]),
        &mut claims,
    )
    .await
    .expect_err("no host");
    assert_eq!(
        err,
        ScheduleError::NoValidHost {
            reason: "There are not enough hosts available.".into()
        }
    );
    assert!(
        claims.claims.is_empty(),
        "claims left behind: {:?}",
        claims.claims
    );
    assert_eq!(claims.released, vec!["i1", "i2"]);
}

#[tokio::test]
async fn claim_error_releases_earlier_claims() {
    let hosts = vec![host("a", "c1", 8192), host("b", "c1", 6000)];
    let mut claims = FakeClaims {
        fail_for: Some("i2".into()),
        ..Default::default()
    };
    let err = run(&scheduler(1), hosts, request(&["i1", "i2"]), &mut claims)
        .await
        .expect_err("error");
    assert!(matches!(
        err,
        ScheduleError::Claim(ClaimError::AllocationUpdateFailed { .. })
    ));
    assert!(claims.claims.is_empty());
}

#[tokio::test]
async fn disabled_hosts_are_filtered_and_empty_means_no_valid_host() {
    let mut a = host("a", "c1", 8192);
    a.service.disabled = true;
    let mut claims = FakeClaims::default();
    let err = run(&scheduler(1), vec![a], request(&["i1"]), &mut claims)
        .await
        .expect_err("none");
    assert!(matches!(err, ScheduleError::NoValidHost { .. }));
}

#[tokio::test]
async fn legacy_path_claims_nothing() {
    let hosts = vec![host("a", "c1", 8192), host("b", "c1", 6000)];
    let mut req = request(&[]);
    req.instance_uuids = None;
    req.spec.num_instances = 2;
    req.use_placement = false;
    let mut claims = FakeClaims::default();
    let out = run(&scheduler(1), hosts, req, &mut claims)
        .await
        .expect("placed");
    assert_eq!(
        names(&out).iter().map(|l| l[0].clone()).collect::<Vec<_>>(),
        vec!["a", "b"]
    );
    assert!(claims.claims.is_empty());
    assert!(out
        .destinations
        .iter()
        .flatten()
        .all(|d| d.allocation_request.is_none()));
}

#[tokio::test]
async fn host_subset_size_picks_among_the_top_n_only() {
    let s = scheduler(2);
    let hosts = vec![
        host("a", "c1", 1000),
        host("b", "c1", 9000),
        host("c", "c1", 8000),
        host("d", "c1", 500),
    ];
    let mut seen = BTreeSet::new();
    for seed in 0..64 {
        let mut claims = FakeClaims::default();
        let out = s
            .schedule(
                hosts.clone(),
                request(&["i1"]),
                &mut claims,
                &mut StdRng::seed_from_u64(seed),
            )
            .await
            .expect("placed");
        seen.insert(out.hosts[out.destinations[0][0].host].host.to_string());
    }
    assert_eq!(seen, ["b".to_string(), "c".to_string()].into());
}

#[tokio::test]
async fn group_members_are_recorded_on_consumption() {
    let hosts = vec![host("a", "c1", 8192), host("b", "c1", 6000)];
    let mut req = request(&["i1", "i2"]);
    req.spec.instance_group = Some(InstanceGroup {
        policy: Some("anti-affinity".into()),
        ..Default::default()
    });
    let mut claims = FakeClaims::default();
    let out = run(&scheduler(1), hosts, req, &mut claims)
        .await
        .expect("placed");
    assert!(out.hosts[0].instances.contains("i1"));
}

#[tokio::test]
async fn forced_host_bypasses_filters() {
    let mut a = host("a", "c1", 8192);
    a.service.disabled = true;
    let mut req = request(&["i1"]);
    req.spec.force_hosts = vec!["A".into()];
    let mut claims = FakeClaims::default();
    let out = run(
        &scheduler(1),
        vec![a, host("b", "c1", 9000)],
        req,
        &mut claims,
    )
    .await
    .expect("forced");
    assert_eq!(names(&out)[0], vec!["a"]);
}

#[tokio::test]
async fn empty_instance_uuids_place_nothing() {
    // nova: `for num, uuid in enumerate([])` never runs; num_instances comes from the spec.
    let mut req = request(&[]);
    req.spec.num_instances = 1;
    let mut claims = FakeClaims::default();
    let err = run(&scheduler(1), vec![host("a", "c1", 8192)], req, &mut claims)
        .await
        .expect_err("nothing placed");
    assert_eq!(
        err,
        ScheduleError::NoValidHost {
            reason: "There are not enough hosts available.".into()
        }
    );
    assert!(claims.claims.is_empty());
}

fn pci_host(name: &str, free_ram_mb: i64, devices: i64) -> HostState {
    let mut h = host(name, "c1", free_ram_mb);
    h.pci_stats = Some(Arc::new(
        json!([{"vendor_id": "8086", "product_id": "1520", "count": devices,
                               "dev_type": "type-VF", "physical_network": "net1"}]),
    ));
    h.pci = Some(Arc::new(crate::pci::PciStats::from_raw(
        h.pci_stats.as_deref(),
    )));
    h
}

fn pci_request(uuids: &[&str]) -> ScheduleRequest {
    let mut req = request(uuids);
    req.spec.pci_requests = Some(json!({"nova_object.name": "InstancePCIRequests",
        "nova_object.namespace": "nova", "nova_object.version": "1.1",
        "nova_object.data": {"requests": [{"nova_object.name": "InstancePCIRequest",
            "nova_object.namespace": "nova", "nova_object.version": "1.4",
            "nova_object.data": {"count": 1, "spec": [{"vendor_id": "8086", "physical_network": "NET1"}],
                                 "alias_name": null, "request_id": "port-1"}}]}}));
    req
}

#[tokio::test]
async fn pci_devices_are_consumed_by_later_instances_of_the_request() {
    let mut s = scheduler(1);
    s.filters = build_chain(
        &["ComputeFilter".into(), "PciPassthroughFilter".into()],
        &FilterConfig::default(),
    )
    .expect("filters");
    let hosts = || vec![pci_host("h1", 32768, 2), pci_host("h2", 65536, 1)];
    // h2 wins on RAM but has one device; once it is taken, h1 serves the others.
    let out = run(
        &s,
        hosts(),
        pci_request(&["i1", "i2", "i3"]),
        &mut FakeClaims::default(),
    )
    .await
    .expect("placed");
    let firsts: Vec<String> = names(&out).iter().map(|d| d[0].clone()).collect();
    assert_eq!(firsts, vec!["h2", "h1", "h1"]);
    assert!(out
        .hosts
        .iter()
        .all(|h| h.pci.as_ref().is_some_and(|p| p.pools.is_empty())));
    assert_eq!(out.hosts[0].num_io_ops, 2);
    // A fourth device does not exist: NoValidHost, every claim released.
    let mut claims = FakeClaims::default();
    let err = run(
        &s,
        hosts(),
        pci_request(&["i1", "i2", "i3", "i4"]),
        &mut claims,
    )
    .await
    .expect_err("no fourth device");
    assert!(matches!(err, ScheduleError::NoValidHost { .. }));
    assert!(claims.claims.is_empty());
}

#[test]
fn failed_pci_consume_skips_io_ops_and_updated_as_nova_does() {
    let s = scheduler(1);
    let mut h = pci_host("h1", 32768, 0);
    let mut spec = pci_request(&["i1"]).spec;
    let now = Utc::now();
    s.consume(&mut h, &mut spec, Some("i1"), now);
    // RAM and the instance count were taken before the PCI step raised.
    assert_eq!((h.free_ram_mb, h.num_instances), (32768 - 4096, 1));
    assert_eq!((h.num_io_ops, h.updated), (0, None));
}
