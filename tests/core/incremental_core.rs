// SPDX-License-Identifier: Apache-2.0
//! Differential test of the decision core: `Scheduler::schedule` (filters and
//! weighers stable within a request re-evaluated only on the host consumed for
//! the previous instance, raw weights kept between instances) against
//! `scheduler::reference::schedule` (every filter and weigher on every candidate
//! for every instance, as nova does), on thousands of random seeded clouds and
//! multi-instance requests. Both must give the same selections, alternates,
//! claims, errors and final host states, with the same random draws.
//!
//! Covered: server groups (affinity, anti-affinity with `max_server_per_host`,
//! soft affinity and soft anti-affinity weighers, no group), `host_subset_size`
//! 1–4, `shuffle_best_same_weighed_hosts`, alternates on and off, claims that fail
//! for some hosts or after a per-host capacity, the legacy (no claim) path, hosts
//! that drop out after consumption (RAM/core/disk/instance/io-op limits), weight
//! ties, aggregate multiplier overrides, disabled and down services, several
//! cells, filter chains drawn from stable and non-stable filters.

use crate::random_core::{claims, cloud, request, scheduler, summary};
use nova_scheduler::scheduler::{reference, ScheduleRequest};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeSet;

#[tokio::test]
async fn incremental_core_matches_the_reference_on_random_clouds() {
    let cases: u64 = std::env::var("NSRS_INCREMENTAL_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3000);
    let mut placed_multi = 0;
    let mut differing_hosts = 0;
    for seed in 0..cases {
        let mut gen = StdRng::seed_from_u64(seed);
        let members: Vec<String> = (0..gen.random_range(1..5))
            .map(|k| format!("member-{k}"))
            .collect();
        let hosts = cloud(&mut gen, &members);
        let sched = scheduler(&mut gen);
        let mut claims = claims(&mut gen, &hosts);
        let req = request(&mut gen, &members);
        let req2 = ScheduleRequest {
            spec: req.spec.clone(),
            instance_uuids: req.instance_uuids.clone(),
            use_placement: req.use_placement,
            return_alternates: req.return_alternates,
            now: req.now,
        };
        let mut claims2 = claims.clone();
        let mut rng_a = StdRng::seed_from_u64(seed ^ 0x5eed);
        let mut rng_b = StdRng::seed_from_u64(seed ^ 0x5eed);
        let got = sched
            .schedule(hosts.clone(), req, &mut claims, &mut rng_a)
            .await;
        if let Ok(o) = &got {
            if o.destinations.len() > 1 {
                placed_multi += 1;
                let distinct: BTreeSet<usize> = o.destinations.iter().map(|d| d[0].host).collect();
                if distinct.len() > 1 {
                    differing_hosts += 1;
                }
            }
        }
        let want = reference::schedule(&sched, hosts, req2, &mut claims2, &mut rng_b).await;
        let (got, want) = (summary(got, &claims), summary(want, &claims2));
        assert_eq!(got, want, "seed {seed}: incremental and reference differ");
        // Same number of random draws: the generators are in the same state.
        assert_eq!(
            rng_a.random_range(0..u64::MAX),
            rng_b.random_range(0..u64::MAX),
            "seed {seed}: random draws differ"
        );
    }
    // The cases must exercise multi-instance placements on several hosts.
    assert!(
        placed_multi > cases / 5,
        "only {placed_multi} multi-instance placements"
    );
    assert!(
        differing_hosts > cases / 10,
        "only {differing_hosts} spread placements"
    );
}
