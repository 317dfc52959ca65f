// SPDX-License-Identifier: Apache-2.0
//! The local allocation candidates (`placement::index`) against the real Placement
//! (openstack-placement 16 under gunicorn, tests/common/placement_server.rs).
//!
//! Random provider states are seeded through Placement's REST API (root providers
//! with varied inventories — reserved amounts, allocation ratios including ones a
//! single-precision FLOAT cannot hold exactly, min/max units, step sizes, a custom
//! class — usages, standard and custom traits, aggregates); the index is loaded
//! read-only from the same database; random request shapes of the supported subset
//! (resources, required/forbidden traits with nova's `!COMPUTE_STATUS_DISABLED`,
//! `member_of` any-of lists and `!in:`, `in_tree`, `root_required`) are asked of both,
//! and the answers must be equal: the same allocation requests (provider, class,
//! amount, mappings) and the same provider summaries. Between rounds the state is
//! mutated through the API and the index refreshed incrementally; the refreshed index
//! must equal a fresh full load.
//!
//! `NSRS_INDEX_DIFF_CASES` (default 1,200) and `NSRS_INDEX_DIFF_SEED` change the run.

use crate::nova_schema;
use crate::placement_server;

use futures_util::StreamExt;
use nova_scheduler::placement::index::candidates::provider_summary;
use nova_scheduler::placement::index::{
    local_candidates, IndexLoader, LiveIndex, LocalRequest, ProviderIndex,
};
use nova_scheduler::placement::AllocationCandidates;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};

const PROVIDERS: usize = 200;
const ROUNDS: usize = 4;
/// gunicorn workers and requests in flight while comparing.
const WORKERS: usize = 3;
const CONCURRENCY: usize = 6;
pub(crate) const RATIOS: [f64; 10] = [1.0, 1.0, 1.5, 2.0, 16.0, 0.7, 1.1, 3.3, 0.9, 1.2345];
const STANDARD_TRAITS: [&str; 4] = [
    "COMPUTE_STATUS_DISABLED",
    "HW_CPU_X86_AVX2",
    "HW_CPU_X86_SSE42",
    "COMPUTE_VOLUME_MULTI_ATTACH",
];
const CUSTOM_TRAITS: [&str; 4] = ["CUSTOM_GOLD", "CUSTOM_SILVER", "CUSTOM_SSD", "CUSTOM_NUMA"];
const CUSTOM_RC: &str = "CUSTOM_MAGIC";

pub(crate) struct Api {
    pub(crate) http: reqwest::Client,
    pub(crate) url: String,
}

impl Api {
    pub(crate) async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .header("X-Auth-Token", "admin")
            .header("OpenStack-API-Version", "placement 1.36")
            .header("Accept", "application/json");
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("placement");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    pub(crate) async fn ok(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let (s, v) = self.call(method.clone(), path, body).await;
        assert!((200..300).contains(&s), "{method} {path}: {s} {v}");
        v
    }

    pub(crate) async fn generation(&self, rp: &str) -> Value {
        self.ok(
            reqwest::Method::GET,
            &format!("/resource_providers/{rp}"),
            None,
        )
        .await["generation"]
            .clone()
    }
}

pub(crate) fn uuid(rng: &mut StdRng) -> String {
    uuid::Builder::from_random_bytes(rng.random())
        .into_uuid()
        .to_string()
}

pub(crate) fn pick<'a, T>(rng: &mut StdRng, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

pub(crate) fn subset<T: Clone>(rng: &mut StdRng, items: &[T], p: f64) -> Vec<T> {
    items
        .iter()
        .filter(|_| rng.random_bool(p))
        .cloned()
        .collect()
}

/// One inventory record with valid, varied limits.
pub(crate) fn inventory(rng: &mut StdRng, total: i64) -> Value {
    let reserved = if rng.random_bool(0.3) {
        rng.random_range(0..=total / 4)
    } else {
        0
    };
    let step = *pick(rng, &[1, 1, 1, 2, 4]);
    let min_unit = if rng.random_bool(0.2) { step * 2 } else { 1 };
    let max_unit = if rng.random_bool(0.3) {
        (total / 2).max(min_unit)
    } else {
        total
    };
    json!({
        "total": total, "reserved": reserved, "min_unit": min_unit, "max_unit": max_unit,
        "step_size": step, "allocation_ratio": *pick(rng, &RATIOS),
    })
}

fn inventories(rng: &mut StdRng) -> Value {
    let mut inv = serde_json::Map::new();
    let total = rng.random_range(1..=64);
    inv.insert("VCPU".into(), inventory(rng, total));
    let total = 512 * rng.random_range(1..=256);
    inv.insert("MEMORY_MB".into(), inventory(rng, total));
    if rng.random_bool(0.8) {
        let total = rng.random_range(10..=2000);
        inv.insert("DISK_GB".into(), inventory(rng, total));
    }
    if rng.random_bool(0.2) {
        let total = rng.random_range(1..=8);
        inv.insert(CUSTOM_RC.into(), inventory(rng, total));
    }
    Value::Object(inv)
}

/// The seeded world, as the test chose it.
pub(crate) struct World {
    providers: Vec<String>,
    pub(crate) aggregates: Vec<String>,
    pub(crate) traits: Vec<String>,
    consumers: Vec<String>,
}

async fn set_inventories(api: &Api, rng: &mut StdRng, rp: &str) {
    let generation = api.generation(rp).await;
    let body = json!({"resource_provider_generation": generation, "inventories": inventories(rng)});
    let (s, v) = api
        .call(
            reqwest::Method::PUT,
            &format!("/resource_providers/{rp}/inventories"),
            Some(body),
        )
        .await;
    // Shrinking below the current usage is refused (409 InventoryInUse): fine.
    assert!(s == 200 || s == 409, "inventories: {s} {v}");
}

async fn set_traits(api: &Api, rng: &mut StdRng, world: &World, rp: &str) {
    let generation = api.generation(rp).await;
    let traits = subset(rng, &world.traits, 0.35);
    api.ok(
        reqwest::Method::PUT,
        &format!("/resource_providers/{rp}/traits"),
        Some(json!({"resource_provider_generation": generation, "traits": traits})),
    )
    .await;
}

async fn set_aggregates(api: &Api, rng: &mut StdRng, world: &World, rp: &str) {
    let generation = api.generation(rp).await;
    let aggs = subset(rng, &world.aggregates, 0.3);
    api.ok(
        reqwest::Method::PUT,
        &format!("/resource_providers/{rp}/aggregates"),
        Some(json!({"resource_provider_generation": generation, "aggregates": aggs})),
    )
    .await;
}

/// Allocates a random fitting share of a provider's inventory to a new consumer
/// (what does not fit is refused by Placement and skipped).
async fn allocate(api: &Api, rng: &mut StdRng, world: &mut World, rp: &str) {
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
        let (step, min, max) = (
            i["step_size"].as_i64().unwrap(),
            i["min_unit"].as_i64().unwrap(),
            i["max_unit"].as_i64().unwrap(),
        );
        let cap = ((i["total"].as_i64().unwrap() - i["reserved"].as_i64().unwrap()) as f64
            * i["allocation_ratio"].as_f64().unwrap()) as i64;
        let free = cap - usages["usages"][rc].as_i64().unwrap_or(0);
        let top = free.min(max) / step;
        let low = (min + step - 1) / step;
        if top >= low && rng.random_bool(0.8) {
            resources.insert(rc.clone(), json!(rng.random_range(low..=top) * step));
        }
    }
    if resources.is_empty() {
        return;
    }
    let consumer = uuid(rng);
    let body = json!({
        "allocations": {rp: {"resources": resources}},
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
        world.consumers.push(consumer);
    }
}

/// Seeds one provider with four calls, following the generation in the answers;
/// returns its inventories.
async fn seed_provider(api: &Api, rng: &mut StdRng, world: &World, n: usize) -> (String, Value) {
    let rp = uuid(rng);
    let created = api
        .ok(
            reqwest::Method::POST,
            "/resource_providers",
            Some(json!({"name": format!("cn-{n}-{rp}"), "uuid": rp})),
        )
        .await;
    let inv = inventories(rng);
    let body = json!({"resource_provider_generation": created["generation"], "inventories": inv});
    let answer = api
        .ok(
            reqwest::Method::PUT,
            &format!("/resource_providers/{rp}/inventories"),
            Some(body),
        )
        .await;
    let traits = subset(rng, &world.traits, 0.35);
    let body = json!({"resource_provider_generation": answer["resource_provider_generation"], "traits": traits});
    let answer = api
        .ok(
            reqwest::Method::PUT,
            &format!("/resource_providers/{rp}/traits"),
            Some(body),
        )
        .await;
    let aggs = subset(rng, &world.aggregates, 0.3);
    let body = json!({"resource_provider_generation": answer["resource_provider_generation"], "aggregates": aggs});
    api.ok(
        reqwest::Method::PUT,
        &format!("/resource_providers/{rp}/aggregates"),
        Some(body),
    )
    .await;
    (rp, inv)
}

/// A fitting random amount of one fresh inventory record, if any.
pub(crate) fn fresh_amount(rng: &mut StdRng, i: &Value) -> Option<i64> {
    let (step, min, max) = (
        i["step_size"].as_i64()?,
        i["min_unit"].as_i64()?,
        i["max_unit"].as_i64()?,
    );
    // Half of the capacity at most, rounded down, so float rounding never matters.
    let cap = ((i["total"].as_i64()? - i["reserved"].as_i64()?) as f64
        * i["allocation_ratio"].as_f64()?
        / 2.0) as i64;
    let top = cap.min(max) / step;
    let low = (min + step - 1) / step;
    (top >= low).then(|| rng.random_range(low..=top) * step)
}

async fn seed(api: &Api, rng: &mut StdRng) -> World {
    for t in CUSTOM_TRAITS {
        api.ok(reqwest::Method::PUT, &format!("/traits/{t}"), None)
            .await;
    }
    api.ok(
        reqwest::Method::PUT,
        &format!("/resource_classes/{CUSTOM_RC}"),
        None,
    )
    .await;
    let mut world = World {
        providers: Vec::new(),
        aggregates: (0..6).map(|_| uuid(rng)).collect(),
        traits: STANDARD_TRAITS
            .iter()
            .chain(CUSTOM_TRAITS.iter())
            .map(|t| t.to_string())
            .collect(),
        consumers: Vec::new(),
    };
    // Usages: one consumer on most providers, written in batches with Placement's
    // multi-consumer POST /allocations.
    let mut batch = serde_json::Map::new();
    for n in 0..PROVIDERS {
        let (rp, inv) = seed_provider(api, rng, &world, n).await;
        world.providers.push(rp.clone());
        if rng.random_bool(0.25) {
            continue;
        }
        let mut resources = serde_json::Map::new();
        for (rc, i) in inv.as_object().into_iter().flatten() {
            if rng.random_bool(0.8) {
                if let Some(amount) = fresh_amount(rng, i) {
                    resources.insert(rc.clone(), json!(amount));
                }
            }
        }
        if resources.is_empty() {
            continue;
        }
        let consumer = uuid(rng);
        batch.insert(
            consumer.clone(),
            json!({
                "allocations": {rp: {"resources": resources}},
                "project_id": "8f0c8a3c7b8e4a5b9a3f2b1c0d9e8f7a",
                "user_id": "2b1c0d9e8f7a8f0c8a3c7b8e4a5b9a3f",
                "consumer_generation": null,
            }),
        );
        world.consumers.push(consumer);
        if batch.len() == 50 || n + 1 == PROVIDERS {
            let body = Value::Object(std::mem::take(&mut batch));
            let (s, v) = api
                .call(reqwest::Method::POST, "/allocations", Some(body))
                .await;
            assert_eq!(s, 204, "POST /allocations: {v}");
        }
    }
    if !batch.is_empty() {
        let (s, v) = api
            .call(
                reqwest::Method::POST,
                "/allocations",
                Some(Value::Object(batch)),
            )
            .await;
        assert_eq!(s, 204, "POST /allocations: {v}");
    }
    world
}

/// Changes a few providers and usages through the API.
async fn mutate(api: &Api, rng: &mut StdRng, world: &mut World) {
    for _ in 0..12 {
        let rp = pick(rng, &world.providers).clone();
        match rng.random_range(0..4) {
            0 => set_inventories(api, rng, &rp).await,
            1 => set_traits(api, rng, world, &rp).await,
            2 => set_aggregates(api, rng, world, &rp).await,
            _ => allocate(api, rng, world, &rp).await,
        }
    }
    for _ in 0..8 {
        if world.consumers.is_empty() {
            break;
        }
        let c = world
            .consumers
            .swap_remove(rng.random_range(0..world.consumers.len()));
        api.ok(reqwest::Method::DELETE, &format!("/allocations/{c}"), None)
            .await;
    }
}

/// A random request of the supported shape, as nova sorts its parameters.
fn request(rng: &mut StdRng, world: &World) -> Vec<(String, String)> {
    let mut resources = vec![
        format!(
            "MEMORY_MB:{}",
            *pick(rng, &[64, 256, 512, 1024, 2048, 4096, 8192, 32768])
        ),
        format!("VCPU:{}", rng.random_range(1..=8)),
    ];
    if rng.random_bool(0.7) {
        resources.push(format!("DISK_GB:{}", *pick(rng, &[1, 10, 20, 40, 80, 160])));
    }
    if rng.random_bool(0.1) {
        resources.push(format!("{CUSTOM_RC}:{}", rng.random_range(1..=4)));
    }
    resources.sort();
    let mut params = vec![("resources".to_string(), resources.join(","))];
    let required = subset(rng, &world.traits, 0.08);
    let mut forbidden: Vec<String> = subset(rng, &world.traits, 0.08)
        .into_iter()
        .filter(|t| !required.contains(t))
        .collect();
    if rng.random_bool(0.9) && !required.iter().any(|t| t == "COMPUTE_STATUS_DISABLED") {
        forbidden.push("COMPUTE_STATUS_DISABLED".into());
    }
    let mut required: Vec<String> = required;
    required.sort();
    required.dedup();
    forbidden.sort();
    forbidden.dedup();
    let traits: Vec<String> = required
        .into_iter()
        .chain(forbidden.into_iter().map(|t| format!("!{t}")))
        .collect();
    if !traits.is_empty() {
        params.push(("required".into(), traits.join(",")));
    }
    for _ in 0..rng.random_range(0..=2) {
        let mut any_of = subset(rng, &world.aggregates, 0.3);
        if rng.random_bool(0.1) {
            any_of.push(uuid(rng));
        }
        if any_of.is_empty() {
            continue;
        }
        any_of.sort();
        params.push(("member_of".into(), format!("in:{}", any_of.join(","))));
    }
    if rng.random_bool(0.15) {
        let mut none_of = subset(rng, &world.aggregates, 0.25);
        if !none_of.is_empty() {
            none_of.sort();
            params.push(("member_of".into(), format!("!in:{}", none_of.join(","))));
        }
    }
    if rng.random_bool(0.05) {
        params.push(("in_tree".into(), pick(rng, &world.providers).clone()));
    }
    if rng.random_bool(0.1) {
        let t = pick(rng, &world.traits).clone();
        let value = if rng.random_bool(0.5) {
            t
        } else {
            format!("!{t}")
        };
        params.push(("root_required".into(), value));
    }
    params.sort();
    params
}

/// Allocation requests as a set of canonical texts; summaries with sorted traits.
pub(crate) fn normal(found: &Value) -> (BTreeSet<String>, BTreeMap<String, Value>) {
    let requests = found["allocation_requests"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|ar| {
            let mut allocations = BTreeMap::new();
            for (rp, a) in ar["allocations"].as_object().into_iter().flatten() {
                let res: BTreeMap<String, Value> = a["resources"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                allocations.insert(rp.clone(), res);
            }
            let mut mappings = BTreeMap::new();
            for (suffix, rps) in ar["mappings"].as_object().into_iter().flatten() {
                let mut rps: Vec<String> = rps
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect();
                rps.sort();
                mappings.insert(suffix.clone(), rps);
            }
            serde_json::to_string(&json!({"allocations": allocations, "mappings": mappings}))
                .unwrap()
        })
        .collect();
    let summaries = found["provider_summaries"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(rp, s)| {
            let mut s = s.clone();
            if let Some(traits) = s.get_mut("traits").and_then(Value::as_array_mut) {
                traits.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            }
            let resources: BTreeMap<String, Value> = s["resources"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            s["resources"] = json!(resources);
            (rp.clone(), s)
        })
        .collect();
    (requests, summaries)
}

pub(crate) fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Placement's whole answer to `params`: the client keeps only what nova uses of
/// the summaries (their keys), the comparison wants their bodies too.
pub(crate) async fn ask(client: &Api, params: &[(String, String)]) -> Result<Value, String> {
    let query: String = params
        .iter()
        .map(|(k, v)| {
            format!(
                "{}={}",
                percent_encoding::utf8_percent_encode(k, percent_encoding::NON_ALPHANUMERIC),
                percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC)
            )
        })
        .collect::<Vec<_>>()
        .join("&");
    let (status, remote) = client
        .call(
            reqwest::Method::GET,
            &format!("/allocation_candidates?{query}"),
            None,
        )
        .await;
    if status == 200 {
        Ok(remote)
    } else {
        Err(format!("HTTP {status}: {remote}"))
    }
}

/// With `limit`, Placement keeps as many candidates as the local search, each one
/// of the unlimited answer (`full`, already compared with Placement's); the local
/// search keeps the first matches in provider id order.
fn check_limited(
    index: &ProviderIndex,
    params: &[(String, String)],
    full: &AllocationCandidates,
    remote: Result<Value, String>,
) -> bool {
    let remote = remote.unwrap_or_else(|e| panic!("{params:?}: {e}"));
    let req = LocalRequest::from_params(params)
        .unwrap_or_else(|e| panic!("{params:?} should be supported: {e}"));
    let limit = req.limit.expect("limit") as usize;
    let local = local_candidates(index, &req)
        .unwrap_or_else(|e| panic!("{params:?} should be answered locally: {e}"));
    let remote_requests = normal(&remote).0;
    assert_eq!(
        local.allocation_requests.len(),
        remote_requests.len(),
        "candidate count differs for {params:?}"
    );
    assert_eq!(
        local.allocation_requests.len(),
        full.allocation_requests.len().min(limit)
    );
    let mut full_ids: Vec<i64> = full
        .provider_uuids
        .iter()
        .map(|u| index.by_uuid[u.as_str()])
        .collect();
    full_ids.sort_unstable();
    let local_ids: Vec<i64> = local
        .provider_uuids
        .iter()
        .map(|u| index.by_uuid[u.as_str()])
        .collect();
    assert_eq!(
        local_ids,
        full_ids[..local_ids.len()],
        "not the first matches for {params:?}"
    );
    let full_json = normal(&json!({"allocation_requests": full.allocation_requests})).0;
    let local_json = normal(&json!({"allocation_requests": local.allocation_requests})).0;
    assert!(local_json.is_subset(&full_json), "{params:?}");
    assert!(
        remote_requests.is_subset(&full_json),
        "Placement's limited answer, {params:?}"
    );
    full.allocation_requests.len() > limit
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_candidates_equal_placement() {
    placement_server::set_workers(WORKERS);
    let url = placement_server::url().await.to_string();
    let api = Api {
        http: reqwest::Client::new(),
        url: url.clone(),
    };
    let cases = env_number("NSRS_INDEX_DIFF_CASES", 1200) as usize;
    let rng_seed = env_number("NSRS_INDEX_DIFF_SEED", 20261121);
    let mut rng = StdRng::seed_from_u64(rng_seed);
    let started = std::time::Instant::now();
    let mut world = seed(&api, &mut rng).await;
    eprintln!("seeded {} providers in {:?}", PROVIDERS, started.elapsed());

    let db_url = nova_schema::sqlx_url(&placement_server::db());
    let live = LiveIndex::load(IndexLoader::connect(&db_url).await.expect("placement db"))
        .await
        .expect("index load");
    let fresh_loader = IndexLoader::connect(&db_url).await.expect("placement db");

    let (mut nonempty, mut total_candidates, mut truncated) = (0usize, 0usize, 0usize);
    let per_round = cases.div_ceil(ROUNDS);
    let mut done = 0;
    for round in 0..ROUNDS {
        if round > 0 {
            mutate(&api, &mut rng, &mut world).await;
            let stats = live.refresh().await.expect("refresh");
            assert!(
                stats.changed > 0 || stats.usages_read,
                "round {round}: refresh saw nothing"
            );
            let full: ProviderIndex = fresh_loader.load().await.expect("full load");
            assert_eq!(
                live.snapshot(),
                full,
                "round {round}: incremental refresh differs from a full load"
            );
        }
        let index = live.snapshot();
        let n = per_round.min(cases - done);
        // One request in three is also asked with a small `limit`: (query, limit).
        type Shape = (Vec<(String, String)>, Option<u32>);
        let shapes: Vec<Shape> = (0..n)
            .map(|_| {
                let params = request(&mut rng, &world);
                let limit = (rng.random_range(0..3) == 0).then(|| rng.random_range(1..=4));
                (params, limit)
            })
            .collect();
        let client = &api;
        let answers: Vec<_> =
            futures_util::stream::iter(shapes.into_iter().map(|(params, limit)| async move {
                let remote = ask(client, &params).await;
                let limited = match limit {
                    Some(k) => {
                        let mut with_limit = params.clone();
                        with_limit.push(("limit".to_string(), k.to_string()));
                        Some((with_limit.clone(), ask(client, &with_limit).await))
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
                .unwrap_or_else(|e| panic!("{params:?} should be supported: {e}"));
            let local = local_candidates(&index, &req)
                .unwrap_or_else(|e| panic!("{params:?} should be answered locally: {e}"));
            if let Some((with_limit, remote_limited)) = limited {
                truncated +=
                    usize::from(check_limited(&index, &with_limit, &local, remote_limited));
            }
            let local_summaries: serde_json::Map<String, Value> = local
                .provider_uuids
                .iter()
                .map(|u| {
                    let p = &index.providers[&index.by_uuid[u.as_str()]];
                    (u.clone(), provider_summary(&index, p))
                })
                .collect();
            let local = json!({
                "allocation_requests": local.allocation_requests,
                "provider_summaries": local_summaries,
            });
            let (l, r) = (normal(&local), normal(&remote));
            assert_eq!(l.0, r.0, "allocation requests differ for {params:?}");
            assert_eq!(l.1, r.1, "provider summaries differ for {params:?}");
            nonempty += usize::from(!r.0.is_empty());
            total_candidates += r.0.len();
            done += 1;
        }
    }
    eprintln!(
        "{done} cases ({nonempty} with candidates, {total_candidates} candidates, {truncated} truncated by a limit) in {:?}",
        started.elapsed()
    );
    assert!(done >= cases);
    assert!(
        truncated > done / 20,
        "{truncated} of {done} truncated by a limit"
    );
    // The generator must exercise both outcomes.
    assert!(
        nonempty > done / 10 && nonempty < done,
        "{nonempty} of {done} non-empty"
    );

    // The same world grows provider forests and sharing pools: the general search.
    crate::differential_placement_forest::compare(&api, &mut rng, &live, &fresh_loader, &world)
        .await;
}
