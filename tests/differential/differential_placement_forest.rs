// SPDX-License-Identifier: Apache-2.0
//! The local allocation candidates over provider forests against the real Placement,
//! run by `differential_placement_index` after its flat rounds, in the same world.
//!
//! Forests are seeded through Placement's REST API as real clouds have them: compute
//! nodes with NUMA children holding VCPU and MEMORY_MB (or holding them at the root),
//! device children with VGPU or a custom PCI class and their traits, network agent
//! subtrees whose devices carry bandwidth classes and physnet/vnic traits, and
//! DISK_GB pools shared via aggregate with some roots; usages are written across
//! several providers of a tree and the pools. Requests mix nova's shapes: the
//! unsuffixed group, numbered and named granular groups, `group_policy`,
//! `same_subtree` with resourceless groups, `member_of{S}`, `in_tree{S}`,
//! `root_required` and `limit`. Both answers must hold the same allocation requests
//! and provider summaries; shapes whose Placement answer depends on Python's set
//! order must be refused locally with that reason and are counted apart.
//!
//! `NSRS_FOREST_DIFF_CASES` (default 2,000) sets the number of compared cases.

use crate::differential_placement_index::{
    ask, env_number, fresh_amount, inventory, normal, pick, subset, uuid, Api, World,
};
use futures_util::StreamExt;
use nova_scheduler::placement::index::candidates::provider_summary;
use nova_scheduler::placement::index::{
    local_candidates, FallbackKind, IndexLoader, LiveIndex, LocalRequest, ProviderIndex,
};
use rand::rngs::StdRng;
use rand::RngExt;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

const ROOTS: usize = 60;
const POOLS: usize = 3;
const ROUNDS: usize = 4;
const CONCURRENCY: usize = 6;
const GPU_TRAITS: [&str; 2] = ["CUSTOM_GPU_A", "CUSTOM_GPU_B"];
const PHYSNETS: [&str; 2] = ["CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B"];
const VNIC_TYPES: [&str; 2] = ["CUSTOM_VNIC_TYPE_NORMAL", "CUSTOM_VNIC_TYPE_DIRECT"];
const PCI_RC: &str = "CUSTOM_PCI_GPU";
const SHARES: &str = "MISC_SHARES_VIA_AGGREGATE";

/// The seeded forests.
pub(crate) struct Forest {
    roots: Vec<String>,
    /// Every provider of the forests, roots and pools included.
    providers: Vec<String>,
    /// Providers by root, the root first.
    trees: BTreeMap<String, Vec<String>>,
    pools: Vec<String>,
    /// Aggregates of the flat world, and one per pool.
    aggregates: Vec<String>,
    pool_aggregates: Vec<String>,
    traits: Vec<String>,
    consumers: Vec<String>,
}

async fn create(
    api: &Api,
    rng: &mut StdRng,
    name: &str,
    parent: Option<&str>,
    inventories: Option<Value>,
    traits: Vec<String>,
    aggregates: Vec<String>,
) -> String {
    let rp = uuid(rng);
    let mut body = json!({"name": format!("{name}-{rp}"), "uuid": rp});
    if let Some(parent) = parent {
        body["parent_provider_uuid"] = json!(parent);
    }
    let created = api
        .ok(reqwest::Method::POST, "/resource_providers", Some(body))
        .await;
    let mut generation = created["generation"].clone();
    if let Some(inv) = inventories {
        let answer = api
            .ok(
                reqwest::Method::PUT,
                &format!("/resource_providers/{rp}/inventories"),
                Some(json!({"resource_provider_generation": generation, "inventories": inv})),
            )
            .await;
        generation = answer["resource_provider_generation"].clone();
    }
    if !traits.is_empty() {
        let answer = api
            .ok(
                reqwest::Method::PUT,
                &format!("/resource_providers/{rp}/traits"),
                Some(json!({"resource_provider_generation": generation, "traits": traits})),
            )
            .await;
        generation = answer["resource_provider_generation"].clone();
    }
    if !aggregates.is_empty() {
        api.ok(
            reqwest::Method::PUT,
            &format!("/resource_providers/{rp}/aggregates"),
            Some(json!({"resource_provider_generation": generation, "aggregates": aggregates})),
        )
        .await;
    }
    rp
}

fn inventories(rng: &mut StdRng, classes: &[(&str, i64, i64)]) -> Value {
    let mut inv = serde_json::Map::new();
    for &(rc, low, high) in classes {
        let total = rng.random_range(low..=high);
        inv.insert(rc.to_string(), inventory(rng, total));
    }
    Value::Object(inv)
}

/// One compute node's tree; returns its providers, the root first.
async fn seed_tree(api: &Api, rng: &mut StdRng, forest: &Forest, n: usize) -> Vec<String> {
    let mut root_aggs = subset(rng, &forest.aggregates, 0.25);
    root_aggs.extend(subset(rng, &forest.pool_aggregates, 0.4));
    let numa_children = rng.random_bool(0.5);
    let mut root_classes: Vec<(&str, i64, i64)> = Vec::new();
    if !numa_children {
        root_classes.push(("VCPU", 2, 64));
        root_classes.push(("MEMORY_MB", 2048, 131072));
    }
    if rng.random_bool(0.6) {
        root_classes.push(("DISK_GB", 20, 2000));
    }
    let root_inv = (!root_classes.is_empty()).then(|| inventories(rng, &root_classes));
    let root_traits = subset(rng, &forest.traits, 0.2);
    let root = create(
        api,
        rng,
        &format!("cn-{n}"),
        None,
        root_inv,
        root_traits,
        root_aggs,
    )
    .await;
    let mut tree = vec![root.clone()];
    if numa_children {
        for cell in 0..2 {
            let inv = inventories(rng, &[("VCPU", 1, 32), ("MEMORY_MB", 1024, 65536)]);
            let traits = if rng.random_bool(0.2) {
                vec!["CUSTOM_NUMA".to_string()]
            } else {
                Vec::new()
            };
            let child = create(
                api,
                rng,
                &format!("numa{cell}"),
                Some(&root),
                Some(inv),
                traits,
                Vec::new(),
            )
            .await;
            tree.push(child);
        }
    }
    for gpu in 0..rng.random_range(0..=2) {
        let rc = if rng.random_bool(0.5) { "VGPU" } else { PCI_RC };
        let inv = inventories(rng, &[(rc, 1, 8)]);
        let traits: Vec<String> = subset(rng, &GPU_TRAITS, 0.5)
            .into_iter()
            .map(str::to_string)
            .collect();
        // A device in an aggregate of its own now and then (nova puts them on roots).
        let aggs = if rng.random_bool(0.1) {
            vec![pick(rng, &forest.aggregates).clone()]
        } else {
            Vec::new()
        };
        let child = create(
            api,
            rng,
            &format!("gpu{gpu}"),
            Some(&root),
            Some(inv),
            traits,
            aggs,
        )
        .await;
        tree.push(child);
    }
    if rng.random_bool(0.6) {
        let agent = create(
            api,
            rng,
            "agent",
            Some(&root),
            None,
            vec!["CUSTOM_AGENT_OVS".to_string()],
            Vec::new(),
        )
        .await;
        tree.push(agent.clone());
        for dev in 0..rng.random_range(1..=2) {
            let mut classes = vec![
                ("NET_BW_EGR_KILOBIT_PER_SEC", 1000, 100000),
                ("NET_BW_IGR_KILOBIT_PER_SEC", 1000, 100000),
            ];
            if rng.random_bool(0.3) {
                classes.push(("SRIOV_NET_VF", 1, 16));
            }
            let inv = inventories(rng, &classes);
            let traits = vec![
                pick(rng, &PHYSNETS).to_string(),
                pick(rng, &VNIC_TYPES).to_string(),
            ];
            let device = create(
                api,
                rng,
                &format!("nic{dev}"),
                Some(&agent),
                Some(inv),
                traits,
                Vec::new(),
            )
            .await;
            tree.push(device);
        }
    }
    tree
}

/// Writes a consumer's allocation across random providers of a tree (and a pool),
/// each a fitting share of what is free; Placement refuses what does not fit.
async fn allocate(api: &Api, rng: &mut StdRng, forest: &mut Forest) {
    let root = pick(rng, &forest.roots).clone();
    let mut targets: Vec<String> = subset(rng, &forest.trees[&root], 0.5);
    if rng.random_bool(0.3) {
        targets.push(pick(rng, &forest.pools).clone());
    }
    let mut allocations = serde_json::Map::new();
    for rp in targets {
        let inv = api
            .ok(
                reqwest::Method::GET,
                &format!("/resource_providers/{rp}/inventories"),
                None,
            )
            .await;
        let usages = api
            .ok(
                reqwest::Method::GET,
                &format!("/resource_providers/{rp}/usages"),
                None,
            )
            .await;
        let mut resources = serde_json::Map::new();
        for (rc, i) in inv["inventories"].as_object().into_iter().flatten() {
            let Some(amount) = fresh_amount(rng, i) else {
                continue;
            };
            let used = usages["usages"][rc].as_i64().unwrap_or(0);
            let cap = ((i["total"].as_i64().unwrap() - i["reserved"].as_i64().unwrap()) as f64
                * i["allocation_ratio"].as_f64().unwrap()) as i64;
            if used + amount <= cap && rng.random_bool(0.7) {
                resources.insert(rc.clone(), json!(amount));
            }
        }
        if !resources.is_empty() {
            allocations.insert(rp, json!({"resources": resources}));
        }
    }
    if allocations.is_empty() {
        return;
    }
    let consumer = uuid(rng);
    let body = json!({
        "allocations": allocations,
        "project_id": "8f0c8a3c7b8e4a5b9a3f2b1c0d9e8f7a",
        "user_id": "2b1c0d9e8f7a8f0c8a3c7b8e4a5b9a3f",
        "consumer_generation": null,
    });
    let (s, _) = api
        .call(
            reqwest::Method::PUT,
            &format!("/allocations/{consumer}"),
            Some(body),
        )
        .await;
    if s == 204 {
        forest.consumers.push(consumer);
    }
}

pub(crate) async fn seed(api: &Api, rng: &mut StdRng, world: &World) -> Forest {
    for t in GPU_TRAITS
        .iter()
        .chain(PHYSNETS.iter())
        .chain(VNIC_TYPES.iter())
        .chain(["CUSTOM_AGENT_OVS"].iter())
    {
        api.ok(reqwest::Method::PUT, &format!("/traits/{t}"), None)
            .await;
    }
    api.ok(
        reqwest::Method::PUT,
        &format!("/resource_classes/{PCI_RC}"),
        None,
    )
    .await;
    let mut forest = Forest {
        roots: Vec::new(),
        providers: Vec::new(),
        trees: BTreeMap::new(),
        pools: Vec::new(),
        aggregates: world.aggregates.clone(),
        pool_aggregates: (0..POOLS).map(|_| uuid(rng)).collect(),
        traits: world.traits.clone(),
        consumers: Vec::new(),
    };
    for n in 0..POOLS {
        let inv = inventories(rng, &[("DISK_GB", 500, 20000)]);
        let mut traits = vec![SHARES.to_string()];
        if rng.random_bool(0.5) {
            traits.push("CUSTOM_SSD".into());
        }
        let aggs = vec![forest.pool_aggregates[n].clone()];
        let pool = create(
            api,
            rng,
            &format!("pool-{n}"),
            None,
            Some(inv),
            traits,
            aggs,
        )
        .await;
        forest.pools.push(pool.clone());
        forest.providers.push(pool.clone());
        forest.trees.insert(pool.clone(), vec![pool]);
    }
    for n in 0..ROOTS {
        let tree = seed_tree(api, rng, &forest, n).await;
        forest.roots.push(tree[0].clone());
        forest.providers.extend(tree.iter().cloned());
        forest.trees.insert(tree[0].clone(), tree);
    }
    for _ in 0..ROOTS {
        allocate(api, rng, &mut forest).await;
    }
    forest
}

/// Changes a few forest providers and usages through the API.
async fn mutate(api: &Api, rng: &mut StdRng, forest: &mut Forest) {
    for _ in 0..12 {
        let rp = pick(rng, &forest.providers).clone();
        match rng.random_range(0..4) {
            0 => {
                let generation = api.generation(&rp).await;
                let mut traits = subset(rng, &forest.traits, 0.2);
                if forest.pools.contains(&rp) {
                    traits.push(SHARES.into());
                }
                if rng.random_bool(0.3) {
                    traits.push(pick(rng, &PHYSNETS).to_string());
                }
                api.ok(
                    reqwest::Method::PUT,
                    &format!("/resource_providers/{rp}/traits"),
                    Some(json!({"resource_provider_generation": generation, "traits": traits})),
                )
                .await;
            }
            1 => {
                let generation = api.generation(&rp).await;
                let mut aggs = subset(rng, &forest.aggregates, 0.2);
                aggs.extend(subset(rng, &forest.pool_aggregates, 0.3));
                api.ok(
                    reqwest::Method::PUT,
                    &format!("/resource_providers/{rp}/aggregates"),
                    Some(json!({"resource_provider_generation": generation, "aggregates": aggs})),
                )
                .await;
            }
            _ => allocate(api, rng, forest).await,
        }
    }
    for _ in 0..6 {
        if forest.consumers.is_empty() {
            break;
        }
        let c = forest
            .consumers
            .swap_remove(rng.random_range(0..forest.consumers.len()));
        api.ok(reqwest::Method::DELETE, &format!("/allocations/{c}"), None)
            .await;
    }
}

/// A random request of nova's shapes, parameters sorted as nova sends them.
fn request(rng: &mut StdRng, forest: &Forest) -> Vec<(String, String)> {
    let mut params: Vec<(String, String)> = Vec::new();
    let numbered = rng.random_bool(0.5);
    let mut suffixes = Vec::new();
    let mut bandwidth = Vec::new();
    let mut numa_groups = false;
    for n in 0..rng.random_range(0..=3) {
        let kind = rng.random_range(0..4);
        let suffix = if numbered {
            format!("{}", n + 1)
        } else {
            ["_GPU", "_BW", "_NUMA", "_X"][kind].to_string() + &n.to_string()
        };
        match kind {
            0 => {
                let rc = if rng.random_bool(0.5) { "VGPU" } else { PCI_RC };
                params.push((format!("resources{suffix}"), format!("{rc}:1")));
                if rng.random_bool(0.4) {
                    let t = pick(rng, &GPU_TRAITS);
                    let t = if rng.random_bool(0.5) {
                        t.to_string()
                    } else {
                        format!("!{t}")
                    };
                    params.push((format!("required{suffix}"), t));
                }
            }
            1 => {
                let kbps = *pick(rng, &[100, 1000, 10000, 50000]);
                let mut resources = vec![
                    format!("NET_BW_EGR_KILOBIT_PER_SEC:{kbps}"),
                    format!("NET_BW_IGR_KILOBIT_PER_SEC:{kbps}"),
                ];
                if rng.random_bool(0.2) {
                    resources.push("SRIOV_NET_VF:1".into());
                }
                params.push((format!("resources{suffix}"), resources.join(",")));
                let mut traits = vec![pick(rng, &PHYSNETS).to_string()];
                if rng.random_bool(0.6) {
                    traits.push(pick(rng, &VNIC_TYPES).to_string());
                }
                traits.sort();
                params.push((format!("required{suffix}"), traits.join(",")));
                bandwidth.push(suffix.clone());
            }
            2 => {
                params.push((
                    format!("resources{suffix}"),
                    format!(
                        "MEMORY_MB:{},VCPU:{}",
                        *pick(rng, &[256, 512, 1024, 4096]),
                        rng.random_range(1..=4)
                    ),
                ));
                numa_groups = true;
            }
            _ => {
                // Resourceless: a physnet the same subtree must have, with a
                // bandwidth group when there is one.
                params.push((
                    format!("required{suffix}"),
                    pick(rng, &PHYSNETS).to_string(),
                ));
                let mut together = vec![suffix.clone()];
                if let Some(bw) = bandwidth.last() {
                    together.push(bw.clone());
                }
                together.sort();
                params.push(("same_subtree".into(), together.join(",")));
            }
        }
        if rng.random_bool(0.08) {
            let any_of = subset(rng, &forest.aggregates, 0.4);
            if !any_of.is_empty()
                && params
                    .iter()
                    .any(|(k, _)| *k == format!("resources{suffix}"))
            {
                params.push((
                    format!("member_of{suffix}"),
                    format!("in:{}", any_of.join(",")),
                ));
            }
        }
        if rng.random_bool(0.05)
            && params
                .iter()
                .any(|(k, _)| *k == format!("resources{suffix}"))
        {
            let root = pick(rng, &forest.roots);
            let in_tree = pick(rng, &forest.trees[root]).clone();
            params.push((format!("in_tree{suffix}"), in_tree));
        }
        suffixes.push(suffix);
    }
    if bandwidth.len() >= 2 && rng.random_bool(0.3) {
        params.push(("same_subtree".into(), bandwidth.join(",")));
    }
    let granular_with_resources = params.iter().any(|(k, _)| k.starts_with("resources"));
    if rng.random_bool(0.85) || !granular_with_resources {
        let mut resources = Vec::new();
        // With NUMA groups the unsuffixed group asks for VCPU and MEMORY_MB only
        // under group_policy=none (as nova's flavors do), or not at all.
        if !numa_groups || rng.random_bool(0.3) {
            resources.push(format!("MEMORY_MB:{}", *pick(rng, &[64, 512, 2048, 8192])));
            resources.push(format!("VCPU:{}", rng.random_range(1..=4)));
        }
        if rng.random_bool(0.6) {
            resources.push(format!("DISK_GB:{}", *pick(rng, &[1, 10, 40, 200])));
        }
        if resources.is_empty() {
            resources.push("DISK_GB:5".into());
        }
        resources.sort();
        params.push(("resources".into(), resources.join(",")));
        if rng.random_bool(0.15) {
            let t = pick(rng, &forest.traits).clone();
            let t = if rng.random_bool(0.5) {
                t
            } else {
                format!("!{t}")
            };
            params.push(("required".into(), t));
        }
        if rng.random_bool(0.15) {
            let any_of = subset(rng, &forest.aggregates, 0.4);
            let mut any_of: Vec<String> = any_of
                .into_iter()
                .chain(subset(rng, &forest.pool_aggregates, 0.5))
                .collect();
            any_of.sort();
            if !any_of.is_empty() {
                params.push(("member_of".into(), format!("in:{}", any_of.join(","))));
            }
        }
        if rng.random_bool(0.08) {
            let none_of = subset(rng, &forest.aggregates, 0.3);
            if !none_of.is_empty() {
                params.push(("member_of".into(), format!("!in:{}", none_of.join(","))));
            }
        }
        if rng.random_bool(0.05) {
            let root = pick(rng, &forest.roots).clone();
            params.push(("in_tree".into(), root));
        }
    }
    let granular = suffixes.len();
    if granular > 1 || rng.random_bool(0.3) {
        let policy = if numa_groups || rng.random_bool(0.5) {
            "none"
        } else {
            "isolate"
        };
        params.push(("group_policy".into(), policy.into()));
    }
    if rng.random_bool(0.3) {
        let value = if rng.random_bool(0.7) {
            "!COMPUTE_STATUS_DISABLED".to_string()
        } else {
            pick(rng, &forest.traits).clone()
        };
        params.push(("root_required".into(), value));
    }
    params.sort();
    params
}

/// Placement's limited answer and ours: as many candidates, each one of the full
/// answer (`full_remote`, already compared), summaries covering the kept trees.
fn check_limited(
    index: &ProviderIndex,
    params: &[(String, String)],
    full_remote: &(BTreeSet<String>, BTreeMap<String, Value>),
    remote: Result<Value, String>,
) -> bool {
    let remote = remote.unwrap_or_else(|e| panic!("{params:?}: {e}"));
    let req = LocalRequest::from_params(params).expect("supported");
    let limit = req.limit.expect("limit") as usize;
    let local = local_candidates(index, &req).expect("answered locally");
    let local = local_json(index, &local);
    let (l, r) = (normal(&local), normal(&remote));
    let expected = full_remote.0.len().min(limit);
    assert_eq!(l.0.len(), expected, "local count with {params:?}");
    assert_eq!(r.0.len(), expected, "Placement's count with {params:?}");
    assert!(l.0.is_subset(&full_remote.0), "{params:?}");
    assert!(r.0.is_subset(&full_remote.0), "Placement's, {params:?}");
    for (rp, summary) in &l.1 {
        assert_eq!(Some(summary), full_remote.1.get(rp), "{params:?}");
    }
    full_remote.0.len() > limit
}

fn local_json(
    index: &ProviderIndex,
    found: &nova_scheduler::placement::AllocationCandidates,
) -> Value {
    let summaries: serde_json::Map<String, Value> = found
        .provider_uuids
        .iter()
        .map(|u| {
            let p = &index.providers[&index.by_uuid[u.as_str()]];
            (u.clone(), provider_summary(index, p))
        })
        .collect();
    json!({
        "allocation_requests": found.allocation_requests,
        "provider_summaries": summaries,
    })
}

pub(crate) async fn compare(
    api: &Api,
    rng: &mut StdRng,
    live: &LiveIndex,
    fresh_loader: &IndexLoader,
    world: &World,
) {
    let cases = env_number("NSRS_FOREST_DIFF_CASES", 2000) as usize;
    let started = std::time::Instant::now();
    let mut forest = seed(api, rng, world).await;
    eprintln!(
        "seeded {} forest providers in {:?}",
        forest.providers.len(),
        started.elapsed()
    );
    let (mut compared, mut nonempty, mut multi_provider, mut truncated, mut set_order) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    let per_round = cases.div_ceil(ROUNDS);
    for round in 0..ROUNDS {
        if round > 0 {
            mutate(api, rng, &mut forest).await;
        }
        live.refresh().await.expect("refresh");
        let full: ProviderIndex = fresh_loader.load().await.expect("full load");
        assert_eq!(
            live.snapshot(),
            full,
            "forest round {round}: incremental refresh differs from a full load"
        );
        let index = live.snapshot();
        type Shape = (Vec<(String, String)>, Option<u32>);
        let mut round_compared = 0;
        while round_compared < per_round {
            let shapes: Vec<Shape> = (0..per_round - round_compared)
                .map(|_| {
                    let params = request(rng, &forest);
                    let limit = (rng.random_range(0..4) == 0).then(|| rng.random_range(1..=5));
                    (params, limit)
                })
                .collect();
            let answers: Vec<_> =
                futures_util::stream::iter(shapes.into_iter().map(|(params, limit)| async move {
                    let remote = ask(api, &params).await;
                    let limited = match limit {
                        Some(k) => {
                            let mut with_limit = params.clone();
                            with_limit.push(("limit".to_string(), k.to_string()));
                            with_limit.sort();
                            Some((with_limit.clone(), ask(api, &with_limit).await))
                        }
                        None => None,
                    };
                    (params, remote, limited)
                }))
                .buffer_unordered(CONCURRENCY)
                .collect()
                .await;
            for (params, remote, limited) in answers {
                let remote = remote.unwrap_or_else(|e| panic!("{params:?}: {e}"));
                let req = LocalRequest::from_params(&params)
                    .unwrap_or_else(|e| panic!("{params:?} should be read: {e}"));
                let local = match local_candidates(&index, &req) {
                    Ok(local) => local,
                    Err(reason) => {
                        assert_eq!(
                            reason.kind,
                            FallbackKind::SetOrder,
                            "{params:?} refused locally: {reason}"
                        );
                        set_order += 1;
                        continue;
                    }
                };
                let (l, r) = (normal(&local_json(&index, &local)), normal(&remote));
                assert_eq!(l.0, r.0, "allocation requests differ for {params:?}");
                assert_eq!(l.1, r.1, "provider summaries differ for {params:?}");
                if let Some((with_limit, remote_limited)) = limited {
                    truncated +=
                        usize::from(check_limited(&index, &with_limit, &r, remote_limited));
                }
                nonempty += usize::from(!r.0.is_empty());
                multi_provider +=
                    r.0.iter()
                        .filter(|ar| {
                            let ar: Value = serde_json::from_str(ar).unwrap();
                            ar["allocations"].as_object().is_some_and(|a| a.len() > 1)
                        })
                        .count()
                        .min(1);
                compared += 1;
                round_compared += 1;
            }
            assert!(
                set_order <= compared / 5 + 20,
                "{set_order} refused for set order against {compared} compared"
            );
        }
    }
    eprintln!(
        "forests: {compared} cases compared ({nonempty} with candidates, {multi_provider} with \
         candidates across providers, {truncated} truncated by a limit), {set_order} left to \
         Placement for set order, in {:?}",
        started.elapsed()
    );
    assert!(compared >= cases);
    assert!(
        nonempty > compared / 4,
        "{nonempty} of {compared} non-empty"
    );
    assert!(
        multi_provider > compared / 10,
        "{multi_provider} of {compared} with candidates across providers"
    );
    assert!(
        truncated > compared / 40,
        "{truncated} of {compared} truncated"
    );
}
