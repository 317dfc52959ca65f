// SPDX-License-Identifier: Apache-2.0
//! Differential test of the indexed decision: `Scheduler::schedule_table` (the
//! best hosts found in the table's weigh index, hosts filtered when looked at)
//! against `scheduler::reference::schedule` (every filter and weigher on every
//! candidate for every instance, as nova does) on thousands of random seeded
//! clouds. Both must give the same selections, alternates (with their allocation
//! requests), claims, releases, errors, consumed host states and random draws.
//!
//! The requests are drawn so that most are decided on the index (filters that
//! may run there, no shuffling of tied hosts) and the rest take the plain way;
//! the test requires enough of each, and of multi-instance placements on the
//! index. Some table rows are not candidates of the request; some clouds have
//! hundreds of hosts (deeper trees); many have few distinct values (ties at
//! every level, which nova's stable sorts order by the previous instance's list).
//! A second test changes rows of a table (`HostTable::with_changes`, the index
//! carried over) and compares with the reference on the changed hosts.

use crate::random_core::{claims, cloud, cloud_of, request, scheduler_from, Claims, FILTERS};
use nova_scheduler::model::HostState;
use nova_scheduler::scheduler::{
    reference, HostTable, RowCandidates, ScheduleError, ScheduleOutcome, ScheduleRequest, Scheduler,
};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::sync::Arc;

/// Filters the index path evaluates (once per request, or stable within it).
const INDEXABLE_FILTERS: &[&str] = &[
    "ComputeFilter",
    "ComputeCapabilitiesFilter",
    "ImagePropertiesFilter",
    "ServerGroupAntiAffinityFilter",
    "ServerGroupAffinityFilter",
    "NumInstancesFilter",
    "IoOpsFilter",
    "AllHostsFilter",
    "DifferentHostFilter",
    "SameHostFilter",
];

/// Destinations by host identity (the outcomes index different host lists),
/// each with the state of its host after the decision.
fn summary(out: &Result<ScheduleOutcome, ScheduleError>, claims: &Claims) -> String {
    let out = match out {
        Ok(o) => {
            let lists: Vec<Vec<String>> = o
                .destinations
                .iter()
                .map(|list| {
                    list.iter()
                        .map(|d| {
                            let h = &o.hosts[d.host];
                            format!("{:?} {:?}\n  state {h:?}", h.uuid, d.allocation_request)
                        })
                        .collect()
                })
                .collect();
            format!("destinations {lists:#?}\nclaimed {:?}", o.claimed)
        }
        Err(e) => format!("error {e:?}"),
    };
    format!(
        "{out}\nclaims {:?}\nreleased {:?}",
        claims.log, claims.released
    )
}

fn copy(req: &ScheduleRequest) -> ScheduleRequest {
    ScheduleRequest {
        spec: req.spec.clone(),
        instance_uuids: req.instance_uuids.clone(),
        use_placement: req.use_placement,
        return_alternates: req.return_alternates,
        now: req.now,
    }
}

/// Counts of what the cases exercised.
#[derive(Default, Debug)]
struct Coverage {
    indexed: u64,
    plain: u64,
    indexed_multi: u64,
    indexed_no_valid_host: u64,
}

#[allow(clippy::too_many_arguments)]
/// Runs one request both ways on `hosts` (all table rows; the candidates are
/// those with `candidate[row]`) and compares.
async fn compare(
    seed: u64,
    sched: &Scheduler,
    table: &HostTable,
    hosts: &[HostState],
    candidate: &[bool],
    claims: &Claims,
    req: ScheduleRequest,
    coverage: &mut Coverage,
) {
    let mut rows = RowCandidates::new(table.len());
    let mut subset = Vec::new();
    for (row, h) in hosts.iter().enumerate() {
        if candidate[row] {
            rows.insert(row, h.allocation_candidates.clone());
            subset.push(h.clone());
        }
    }
    let on_index = sched.decides_on_index(table, &req);
    let req2 = copy(&req);
    let (mut claims_a, mut claims_b) = (claims.clone(), claims.clone());
    let mut rng_a = StdRng::seed_from_u64(seed ^ 0x1de7);
    let mut rng_b = StdRng::seed_from_u64(seed ^ 0x1de7);
    let got = sched
        .schedule_table(table, &mut rows, req, &mut claims_a, &mut rng_a)
        .await;
    let want = reference::schedule(sched, subset, req2, &mut claims_b, &mut rng_b).await;
    if on_index {
        coverage.indexed += 1;
        match &got {
            Ok(o) if o.destinations.len() > 1 => coverage.indexed_multi += 1,
            Err(ScheduleError::NoValidHost { .. }) => coverage.indexed_no_valid_host += 1,
            _ => {}
        }
    } else {
        coverage.plain += 1;
    }
    let (got, want) = (summary(&got, &claims_a), summary(&want, &claims_b));
    assert_eq!(
        got, want,
        "seed {seed} (on the index: {on_index}): table and reference differ"
    );
    assert_eq!(
        rng_a.random_range(0..u64::MAX),
        rng_b.random_range(0..u64::MAX),
        "seed {seed}: random draws differ"
    );
}

fn setup(gen: &mut StdRng) -> (Vec<String>, Vec<HostState>, Scheduler, Claims) {
    let members: Vec<String> = (0..gen.random_range(1..5))
        .map(|k| format!("member-{k}"))
        .collect();
    let hosts = if gen.random_bool(0.1) {
        let n = gen.random_range(200..1500);
        cloud_of(gen, &members, n)
    } else {
        cloud(gen, &members)
    };
    let sched = if gen.random_bool(0.85) {
        scheduler_from(gen, INDEXABLE_FILTERS, 0.0)
    } else {
        scheduler_from(gen, FILTERS, 0.4)
    };
    let claims = claims(gen, &hosts);
    (members, hosts, sched, claims)
}

/// Which rows are candidates: most of them, about half, or a few (as when the
/// hosts that weigh most are full or beyond `max_placement_results`, which sends
/// the searches to the candidates themselves).
fn candidate_rows(gen: &mut StdRng, hosts: &[HostState]) -> Vec<bool> {
    let left_out = [0.1, 0.5, 0.95][gen.random_range(0..3)];
    hosts.iter().map(|_| !gen.random_bool(left_out)).collect()
}

/// A request of `random_core::request`, without its server group half of the
/// time (most groups keep a request off the index).
fn indexable_request(gen: &mut StdRng, members: &[String]) -> ScheduleRequest {
    let mut req = request(gen, members);
    if gen.random_bool(0.5) {
        req.spec.instance_group = None;
    }
    req
}

fn cases(default: u64) -> u64 {
    std::env::var("NSRS_INDEXED_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[tokio::test]
async fn indexed_decision_matches_the_reference_on_random_clouds() {
    let cases = cases(3000);
    let mut coverage = Coverage::default();
    for seed in 0..cases {
        let mut gen = StdRng::seed_from_u64(seed);
        let (members, hosts, sched, claims) = setup(&mut gen);
        let candidate = candidate_rows(&mut gen, &hosts);
        let table = HostTable::new(hosts.clone());
        // Two requests on the same table: the second reuses the built index.
        for _ in 0..2 {
            let req = indexable_request(&mut gen, &members);
            compare(
                seed,
                &sched,
                &table,
                &hosts,
                &candidate,
                &claims,
                req,
                &mut coverage,
            )
            .await;
        }
    }
    eprintln!("{coverage:?}");
    assert!(coverage.indexed > cases, "{coverage:?}");
    assert!(coverage.plain > cases / 10, "{coverage:?}");
    assert!(coverage.indexed_multi > cases / 4, "{coverage:?}");
    assert!(coverage.indexed_no_valid_host > cases / 100, "{coverage:?}");
}

#[tokio::test]
async fn indexed_decision_after_rows_change() {
    let cases = cases(3000) / 3;
    let mut coverage = Coverage::default();
    for seed in 0..cases {
        let mut gen = StdRng::seed_from_u64(seed ^ 0x0c4a_96e5);
        let (members, mut hosts, sched, claims) = setup(&mut gen);
        let candidate = candidate_rows(&mut gen, &hosts);
        let table = HostTable::new(hosts.clone());
        // Build the index as a first request would.
        let first = request(&mut gen, &members);
        let _ = sched.decides_on_index(&table, &first);
        // Change some rows: resources, counters, service and aggregates (another
        // generated cloud's host of the same row, keeping its name, cell and uuid).
        let other = cloud_of(&mut gen, &members, hosts.len());
        let mut changes = Vec::new();
        for row in 0..hosts.len() {
            if gen.random_bool(0.2) {
                let o = &other[row];
                let h = &mut hosts[row];
                h.free_ram_mb = o.free_ram_mb;
                h.vcpus_used = o.vcpus_used;
                h.free_disk_mb = o.free_disk_mb;
                h.num_instances = o.num_instances;
                h.num_io_ops = o.num_io_ops;
                h.hypervisor_version = o.hypervisor_version;
                h.aggregates = o.aggregates.clone();
                h.service.disabled = o.service.disabled;
                h.service.last_seen_up = o.service.last_seen_up;
                let mut shared = h.clone();
                shared.allocation_candidates = Vec::new();
                changes.push((row, Arc::new(shared)));
            }
        }
        // A changed copy, or (every other case) the table itself changed in place
        // with the index it built.
        let changed = if seed % 2 == 0 {
            table.with_changes(changes)
        } else {
            let mut table = table;
            table.change_rows(changes);
            table
        };
        let req = indexable_request(&mut gen, &members);
        compare(
            seed,
            &sched,
            &changed,
            &hosts,
            &candidate,
            &claims,
            req,
            &mut coverage,
        )
        .await;
    }
    eprintln!("{coverage:?}");
    assert!(coverage.indexed > cases / 2, "{coverage:?}");
}

/// A request that places nothing (no uuids, `num_instances` 0) gets no
/// destination either way.
#[tokio::test]
async fn nothing_to_place() {
    let mut gen = StdRng::seed_from_u64(7);
    let (members, hosts, _, claims) = setup(&mut gen);
    let sched = scheduler_from(&mut gen, INDEXABLE_FILTERS, 0.0);
    let table = HostTable::new(hosts.clone());
    let mut req = indexable_request(&mut gen, &members);
    req.instance_uuids = None;
    req.spec.num_instances = 0;
    req.spec.instance_group = None;
    let candidate = vec![true; hosts.len()];
    let mut coverage = Coverage::default();
    compare(
        7,
        &sched,
        &table,
        &hosts,
        &candidate,
        &claims,
        req,
        &mut coverage,
    )
    .await;
    assert_eq!(coverage.indexed, 1, "{coverage:?}");
}

/// The control plane's three equal hosts (nova's fake driver: 800,000 MB, 1,000
/// vCPUs, no free disk reported) and a request for three servers of 256 MB, 1
/// vCPU, 1 GB, with nova's default weighers, on host states seen there: the
/// table and the reference must agree, and the outcome is nova's on those states.
#[tokio::test]
async fn three_equal_hosts_and_three_servers() {
    let now = chrono::Utc::now();
    // Host order: compute node ids (cp-compute2 was created first).
    let names = ["cp-compute2", "cp-compute3", "cp-compute1"];
    // (free RAM, vCPUs used, free disk, instances, I/O ops) of cp-compute2.
    let host = |i: usize, (ram, vcpus, disk, n, io): (i64, i64, i64, i64, i64)| HostState {
        host: names[i].into(),
        nodename: names[i].into(),
        cell_uuid: "cell1".into(),
        uuid: Some(format!("rp-{i}").into()),
        total_usable_ram_mb: 800_000,
        free_ram_mb: ram,
        ram_allocation_ratio: 1.0,
        total_usable_disk_gb: 600_000,
        free_disk_mb: disk,
        disk_allocation_ratio: 1.0,
        vcpus_total: 1000,
        vcpus_used: vcpus,
        cpu_allocation_ratio: 1.0,
        num_instances: n,
        num_io_ops: io,
        hypervisor_version: Some(1000),
        service: nova_scheduler::model::ServiceInfo {
            host: names[i].into(),
            last_seen_up: Some(now),
            ..Default::default()
        },
        allocation_candidates: vec![serde_json::json!({"allocations": {format!("rp-{i}"): {
            "resources": {"MEMORY_MB": 256, "VCPU": 1, "DISK_GB": 1}}}})
        .into()],
        ..Default::default()
    };
    let empty = (799_488, 0, 0, 0, 0);
    let sched = Scheduler {
        filters: nova_scheduler::filters::build_chain(
            &["ComputeFilter".to_string()],
            &nova_scheduler::filters::FilterConfig::default(),
        )
        .expect("filters"),
        weighers: nova_scheduler::weighers::build_pipeline(
            &["nova.scheduler.weights.all_weighers".into()],
            &nova_scheduler::weighers::WeigherConfig::default(),
        )
        .expect("weighers"),
        host_subset_size: 1,
        shuffle_best_same_weighed_hosts: false,
        max_attempts: 3,
        packing_host_numa_cells_allocation_strategy: false,
    };
    let request = || ScheduleRequest {
        spec: nova_scheduler::model::RequestSpec {
            num_instances: 3,
            flavor: nova_scheduler::model::Flavor {
                id: Some(1),
                memory_mb: 256,
                vcpus: 1,
                root_gb: 1,
                ..Default::default()
            },
            ..Default::default()
        },
        instance_uuids: Some((0..3).map(|k| format!("inst-{k}")).collect()),
        use_placement: true,
        return_alternates: true,
        now,
    };
    let cases = [
        // Every host empty: the host order.
        (empty, ["cp-compute2", "cp-compute3", "cp-compute1"]),
        // cp-compute2's row after a claim (the fake driver's row moves no disk,
        // and DiskWeigher's minval makes a consumed host's negative free disk 0):
        // for the third server every host ties, and nova's stable sort keeps the
        // previous pick first.
        (
            (799_232, 1, 0, 1, 1),
            ["cp-compute3", "cp-compute1", "cp-compute1"],
        ),
        // That row with the same claim retained on top (counted twice: the
        // control-plane failure): cp-compute2 is last throughout.
        (
            (798_976, 2, -1024, 2, 2),
            ["cp-compute3", "cp-compute1", "cp-compute1"],
        ),
    ];
    let mut coverage = Coverage::default();
    for (k, (first, want)) in cases.into_iter().enumerate() {
        let hosts: Vec<HostState> = (0..3)
            .map(|i| host(i, if i == 0 { first } else { empty }))
            .collect();
        let table = HostTable::new(hosts.clone());
        let candidate = vec![true; hosts.len()];
        compare(
            k as u64,
            &sched,
            &table,
            &hosts,
            &candidate,
            &Claims::default(),
            request(),
            &mut coverage,
        )
        .await;
        let mut claims = Claims::default();
        let mut rng = StdRng::seed_from_u64(k as u64);
        let out = reference::schedule(&sched, hosts, request(), &mut claims, &mut rng)
            .await
            .expect("placed");
        let got: Vec<&str> = out
            .destinations
            .iter()
            .map(|list| &*out.hosts[list[0].host].host)
            .collect();
        assert_eq!(got, want, "case {k}");
    }
    assert_eq!(coverage.indexed, 3, "{coverage:?}");
}
