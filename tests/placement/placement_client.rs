// SPDX-License-Identifier: Apache-2.0
//! `placement::PlacementClient` against the real Placement (openstack-placement 16
//! from the venv, served by gunicorn; tests/common/placement_server.rs). Providers,
//! inventories and traits are seeded through its REST API; each test tags its
//! providers with its own CUSTOM_ trait so that tests do not see each other's.
//!
//! Keystone is real for the application-credential test (tests/common/keystone_server.rs)
//! and a stand-in elsewhere; a stand-in Placement (tests/common/http_stub.rs) answers
//! provider-generation conflicts or a 401 on demand, which the real one cannot be
//! made to do, and records the tokens it is sent.

use crate::http_stub;
use crate::placement_server;

use http_stub::{Recorded, Reply};
use nova_scheduler::model::{Flavor, ImageMeta, RequestLevelParams, RequestSpec};
use nova_scheduler::placement::{
    allocation_candidates_query, for_caller, ConsumerClaim, PasswordAuth, PlacementAuth,
    PlacementClient, PlacementError, PlacementOptions, QueryOptions,
};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const PROJECT: &str = "8f0c8a3c7b8e4a5b9a3f2b1c0d9e8f7a";
const USER: &str = "2b1c0d9e8f7a8f0c8a3c7b8e4a5b9a3f";

/// Seeding through Placement's REST API as an admin.
struct Admin {
    http: reqwest::Client,
    url: String,
}

impl Admin {
    async fn new() -> Admin {
        Admin {
            http: reqwest::Client::new(),
            url: placement_server::url().await.to_string(),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
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

    /// A provider with VCPU / MEMORY_MB / DISK_GB inventory and traits.
    async fn provider(&self, uuid: &str, (vcpu, mem, disk): (i64, i64, i64), traits: &[&str]) {
        let (s, rp) = self
            .call(
                reqwest::Method::POST,
                "/resource_providers",
                Some(json!({"name": format!("cn-{uuid}"), "uuid": uuid})),
            )
            .await;
        assert_eq!(s, 200, "create provider: {rp}");
        let inv = json!({"resource_provider_generation": rp["generation"], "inventories": {
            "VCPU": {"total": vcpu, "allocation_ratio": 1.0},
            "MEMORY_MB": {"total": mem, "allocation_ratio": 1.0},
            "DISK_GB": {"total": disk, "allocation_ratio": 1.0}}});
        let (s, body) = self
            .call(
                reqwest::Method::PUT,
                &format!("/resource_providers/{uuid}/inventories"),
                Some(inv),
            )
            .await;
        assert_eq!(s, 200, "inventories: {body}");
        for t in traits.iter().filter(|t| t.starts_with("CUSTOM_")) {
            let (s, _) = self
                .call(reqwest::Method::PUT, &format!("/traits/{t}"), None)
                .await;
            assert!(s == 201 || s == 204, "trait {t}: {s}");
        }
        let body = json!({"resource_provider_generation": body["resource_provider_generation"], "traits": traits});
        let (s, body) = self
            .call(
                reqwest::Method::PUT,
                &format!("/resource_providers/{uuid}/traits"),
                Some(body),
            )
            .await;
        assert_eq!(s, 200, "traits: {body}");
    }

    async fn allocations(&self, consumer: &str) -> Value {
        self.call(
            reqwest::Method::GET,
            &format!("/allocations/{consumer}"),
            None,
        )
        .await
        .1
    }
}

/// The providers a consumer holds allocations on, sorted.
fn providers_held(allocations: &Value) -> Vec<String> {
    let mut rps: Vec<String> = allocations["allocations"]
        .as_object()
        .map(|a| a.keys().cloned().collect())
        .unwrap_or_default();
    rps.sort();
    rps
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// A claim that failed with nova's `AllocationUpdateFailed` for `consumer`.
fn assert_update_failed(result: Result<bool, PlacementError>, consumer: &str) {
    match result {
        Err(PlacementError::AllocationUpdateFailed { consumer_uuid, .. }) => {
            assert_eq!(consumer_uuid, consumer)
        }
        other => panic!("expected AllocationUpdateFailed, got {other:?}"),
    }
}

fn admin_client(url: &str) -> PlacementClient {
    PlacementClient::new(PlacementOptions {
        endpoint: Some(url.to_string()),
        auth: PlacementAuth::AdminToken {
            token: "admin".into(),
        },
        claim_retry_unit: Duration::from_millis(1),
        ..PlacementOptions::default()
    })
    .expect("client")
}

fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A 2 vCPU / 4 GiB / 20 GB flavor restricted to providers carrying `tag`.
fn flavor_spec(tag: &str) -> RequestSpec {
    RequestSpec {
        flavor: Flavor {
            vcpus: 2,
            memory_mb: 4096,
            root_gb: 20,
            ..Flavor::default()
        },
        image: Some(ImageMeta {
            properties: json!({"traits_required": [tag]})
                .as_object()
                .cloned()
                .unwrap_or_default(),
            ..ImageMeta::default()
        }),
        request_level_params: RequestLevelParams {
            root_required: ["OWNER_NOVA".to_string()].into_iter().collect(),
            root_forbidden: ["COMPUTE_STATUS_DISABLED".to_string()]
                .into_iter()
                .collect(),
            same_subtree: Vec::new(),
        },
        ..RequestSpec::default()
    }
}

fn query(tag: &str) -> Vec<(String, String)> {
    allocation_candidates_query(&flavor_spec(tag), &QueryOptions::default()).expect("query")
}

#[tokio::test]
async fn candidates_for_a_flavor() {
    let admin = Admin::new().await;
    let tag = "CUSTOM_NSRS_CANDIDATES";
    let (big, small, disabled) = (uuid(), uuid(), uuid());
    admin
        .provider(&big, (8, 16384, 100), &["OWNER_NOVA", tag])
        .await;
    admin
        .provider(&small, (1, 512, 10), &["OWNER_NOVA", tag])
        .await;
    admin
        .provider(
            &disabled,
            (8, 16384, 100),
            &["OWNER_NOVA", "COMPUTE_STATUS_DISABLED", tag],
        )
        .await;
    let client = admin_client(&admin.url);
    let got = client
        .get_allocation_candidates(
            &query(tag),
            Some("req-5b8e4a5b-0000-4000-8000-000000000001"),
        )
        .await
        .expect("candidates");
    assert_eq!(
        got.allocation_requests,
        vec![
            json!({"allocations": {big.as_str(): {"resources": {"DISK_GB": 20, "MEMORY_MB": 4096, "VCPU": 2}}},
                    "mappings": {"": [big.as_str()]}})
        ]
    );
    assert_eq!(got.provider_uuids.iter().collect::<Vec<_>>(), vec![&big]);
    // Bad query: Placement's 400 is an Http error the caller can tell apart.
    match client
        .get_allocation_candidates(&[("resources".into(), "VCPU:x".into())], None)
        .await
    {
        Err(PlacementError::Http { status: 400, .. }) => {}
        other => panic!("expected HTTP 400, got {other:?}"),
    }
}

#[tokio::test]
async fn claim_then_delete() {
    let admin = Admin::new().await;
    let tag = "CUSTOM_NSRS_CLAIM";
    let rp = uuid();
    admin
        .provider(&rp, (8, 16384, 100), &["OWNER_NOVA", tag])
        .await;
    let client = admin_client(&admin.url);
    let cands = client
        .get_allocation_candidates(&query(tag), None)
        .await
        .expect("candidates");
    let consumer = uuid();
    let claimed = client
        .claim_resources(
            &consumer,
            &cands.allocation_requests[0],
            PROJECT,
            USER,
            Some("req-1"),
        )
        .await
        .expect("claim");
    assert!(claimed);
    let allocs = admin.allocations(&consumer).await;
    assert_eq!(
        allocs["allocations"][&rp]["resources"],
        json!({"DISK_GB": 20, "MEMORY_MB": 4096, "VCPU": 2})
    );
    assert_eq!(
        (allocs["project_id"].as_str(), allocs["user_id"].as_str()),
        (Some(PROJECT), Some(USER))
    );
    client
        .delete_allocation_for_instance(&consumer)
        .await
        .expect("delete");
    assert_eq!(admin.allocations(&consumer).await["allocations"], json!({}));
    // Nothing left: Placement answers 404, which is fine.
    client
        .delete_allocation_for_instance(&consumer)
        .await
        .expect("delete again");
}

#[tokio::test]
async fn claim_on_a_full_provider_is_false() {
    let admin = Admin::new().await;
    let rp = uuid();
    admin
        .provider(&rp, (1, 1024, 10), &["OWNER_NOVA", "CUSTOM_NSRS_FULL"])
        .await;
    let client = admin_client(&admin.url);
    let request = json!({"allocations": {rp.as_str(): {"resources": {"VCPU": 2}}}, "mappings": {"": [rp.as_str()]}});
    let consumer = uuid();
    assert!(!client
        .claim_resources(&consumer, &request, PROJECT, USER, None)
        .await
        .expect("claim"));
    assert_eq!(admin.allocations(&consumer).await["allocations"], json!({}));
}

#[tokio::test]
async fn existing_consumer_is_doubled_and_generation_conflict_fails() {
    let admin = Admin::new().await;
    let (src, dst) = (uuid(), uuid());
    admin
        .provider(&src, (4, 8192, 50), &["OWNER_NOVA", "CUSTOM_NSRS_MOVE"])
        .await;
    admin
        .provider(&dst, (4, 8192, 50), &["OWNER_NOVA", "CUSTOM_NSRS_MOVE"])
        .await;
    let client = admin_client(&admin.url);
    let on = |rp: &str| json!({"allocations": {rp: {"resources": {"VCPU": 1, "MEMORY_MB": 512}}}, "mappings": {"": [rp]}});
    let consumer = uuid();
    assert!(client
        .claim_resources(&consumer, &on(&src), PROJECT, USER, None)
        .await
        .expect("first"));
    // The instance still holds `src` (an evacuation): the claim doubles the allocation.
    assert!(client
        .claim_resources(&consumer, &on(&dst), PROJECT, USER, None)
        .await
        .expect("doubled"));
    assert_eq!(
        providers_held(&admin.allocations(&consumer).await),
        sorted(vec![src.clone(), dst.clone()])
    );
    // A consumer generation the caller put in the request (forced evacuation) that is
    // stale: Placement reports a consumer generation conflict -> AllocationUpdateFailed.
    let mut stale = on(&dst);
    stale["consumer_generation"] = json!(99);
    assert_update_failed(
        client
            .claim_resources(&consumer, &stale, PROJECT, USER, None)
            .await,
        &consumer,
    );
}

/// A claim built on allocations read earlier (`current_allocations`, as the manager
/// reads them while it waits on the candidates): it doubles an evacuating
/// instance's allocation as a claim that reads for itself does, and when the
/// consumer's allocations changed after the read, Placement refuses the `PUT` (its
/// consumer generation is stale) and the claim fails with `AllocationUpdateFailed`,
/// leaving what the other writer wrote in place.
#[tokio::test]
async fn claim_from_allocations_read_earlier() {
    let admin = Admin::new().await;
    let (src, dst, other) = (uuid(), uuid(), uuid());
    for rp in [&src, &dst, &other] {
        admin
            .provider(rp, (4, 8192, 50), &["OWNER_NOVA", "CUSTOM_NSRS_READ_AHEAD"])
            .await;
    }
    let client = admin_client(&admin.url);
    let on = |rp: &str| json!({"allocations": {rp: {"resources": {"VCPU": 1, "MEMORY_MB": 512}}}, "mappings": {"": [rp]}});
    // A new instance: read (nothing held), claimed from that read.
    let fresh = uuid();
    let read = client
        .current_allocations(&fresh, None)
        .await
        .expect("read");
    assert!(client
        .claim_resources_from(
            &fresh,
            &on(&dst),
            PROJECT,
            USER,
            None,
            Some(read),
            &mut Default::default()
        )
        .await
        .expect("claim"));
    assert_eq!(
        providers_held(&admin.allocations(&fresh).await),
        vec![dst.clone()]
    );

    // An evacuation: the read sees the source allocation; the claim doubles it.
    let evacuee = uuid();
    assert!(client
        .claim_resources(&evacuee, &on(&src), PROJECT, USER, None)
        .await
        .expect("source"));
    let read = client
        .current_allocations(&evacuee, None)
        .await
        .expect("read");
    assert!(client
        .claim_resources_from(
            &evacuee,
            &on(&dst),
            PROJECT,
            USER,
            None,
            Some(read),
            &mut Default::default()
        )
        .await
        .expect("doubled"));
    assert_eq!(
        providers_held(&admin.allocations(&evacuee).await),
        sorted(vec![src.clone(), dst.clone()])
    );

    // Read as a new consumer, then someone else gives it allocations before the PUT.
    let raced = uuid();
    let read = client
        .current_allocations(&raced, None)
        .await
        .expect("read");
    assert!(client
        .claim_resources(&raced, &on(&other), PROJECT, USER, None)
        .await
        .expect("the other writer"));
    assert_update_failed(
        client
            .claim_resources_from(
                &raced,
                &on(&dst),
                PROJECT,
                USER,
                None,
                Some(read),
                &mut Default::default(),
            )
            .await,
        &raced,
    );
    assert_eq!(
        providers_held(&admin.allocations(&raced).await),
        vec![other.clone()]
    );

    // An evacuation whose allocations move (a new generation) after the read.
    let moved = uuid();
    assert!(client
        .claim_resources(&moved, &on(&src), PROJECT, USER, None)
        .await
        .expect("source"));
    let read = client
        .current_allocations(&moved, None)
        .await
        .expect("read");
    let now = admin.allocations(&moved).await;
    let mut rewrite = on(&other);
    rewrite["project_id"] = json!(PROJECT);
    rewrite["user_id"] = json!(USER);
    rewrite["consumer_generation"] = now["consumer_generation"].clone();
    let (status, body) = admin
        .call(
            reqwest::Method::PUT,
            &format!("/allocations/{moved}"),
            Some(rewrite),
        )
        .await;
    assert_eq!(status, 204, "rewrite: {body}");
    assert_update_failed(
        client
            .claim_resources_from(
                &moved,
                &on(&dst),
                PROJECT,
                USER,
                None,
                Some(read),
                &mut Default::default(),
            )
            .await,
        &moved,
    );
    assert_eq!(
        providers_held(&admin.allocations(&moved).await),
        vec![other.clone()]
    );

    // Without a read, the same claim reads for itself and doubles what is there now.
    assert!(client
        .claim_resources_from(
            &moved,
            &on(&dst),
            PROJECT,
            USER,
            None,
            None,
            &mut Default::default()
        )
        .await
        .expect("claim after reading again"));
    assert_eq!(
        providers_held(&admin.allocations(&moved).await),
        sorted(vec![other.clone(), dst.clone()])
    );
}

#[tokio::test]
async fn no_token_and_unreachable_are_distinguishable() {
    let url = placement_server::url().await;
    let anonymous = PlacementClient::new(PlacementOptions {
        endpoint: Some(url.to_string()),
        ..PlacementOptions::default()
    })
    .expect("client");
    match anonymous
        .get_allocation_candidates(&query("CUSTOM_X"), None)
        .await
    {
        Err(PlacementError::Http { status: 401, .. }) => {}
        other => panic!("expected 401, got {other:?}"),
    }
    let request = json!({"allocations": {uuid(): {"resources": {"VCPU": 1}}}, "mappings": {}});
    assert!(!anonymous
        .claim_resources(&uuid(), &request, PROJECT, USER, None)
        .await
        .expect("claim"));

    let down = admin_client("http://127.0.0.1:1");
    assert!(matches!(
        down.get_allocation_candidates(&query("CUSTOM_X"), None)
            .await,
        Err(PlacementError::Unreachable(_))
    ));
    assert!(!down
        .claim_resources(&uuid(), &request, PROJECT, USER, None)
        .await
        .expect("claim"));
    assert!(matches!(
        down.delete_allocation_for_instance(&uuid()).await,
        Err(PlacementError::Unreachable(_))
    ));
}

/// Headers and bodies exactly as nova sends them, seen by a recording stand-in.
#[tokio::test]
async fn headers_and_bodies_as_nova_sends_them() {
    let stub = http_stub::start(Arc::new(|r: &Recorded| {
        match (r.method.as_str(), r.path.as_str()) {
            ("GET", p) if p.starts_with("/allocation_candidates") => Reply::json(
                200,
                json!({"allocation_requests": [], "provider_summaries": {}}),
            ),
            ("GET", _) => Reply::json(200, json!({"allocations": {}})),
            ("PUT", _) => Reply::json(204, json!({})),
            _ => Reply::json(
                500,
                json!({"errors": [{"code": "placement.undefined_code", "detail": "boom"}]}),
            ),
        }
    }))
    .await;
    let client = PlacementClient::new(PlacementOptions {
        endpoint: Some(format!("{}/", stub.url)),
        auth: PlacementAuth::AdminToken {
            token: "t0ken".into(),
        },
        ..PlacementOptions::default()
    })
    .expect("client");
    client
        .get_allocation_candidates(&query("CUSTOM_A"), Some("req-gid"))
        .await
        .expect("candidates");
    let request =
        json!({"allocations": {"rp1": {"resources": {"VCPU": 1}}}, "mappings": {"": ["rp1"]}});
    assert!(client
        .claim_resources("c1", &request, PROJECT, USER, Some("req-gid"))
        .await
        .expect("claim"));
    match client.delete_allocation_for_instance("c1").await {
        Err(PlacementError::AllocationDeleteFailed {
            consumer_uuid,
            error,
        }) => {
            assert_eq!(consumer_uuid, "c1");
            assert!(error.contains("boom"));
        }
        other => panic!("expected AllocationDeleteFailed, got {other:?}"),
    }
    let seen = stub.recorded();
    let summary: Vec<(String, String, Option<String>)> = seen
        .iter()
        .map(|r| {
            (
                r.method.clone(),
                r.path.clone(),
                r.header("openstack-api-version").map(str::to_string),
            )
        })
        .collect();
    let v = |s: &str| Some(s.to_string());
    assert_eq!(
        summary,
        vec![
            (
                "GET".into(),
                "/allocation_candidates?limit=1000&required=CUSTOM_A&resources=DISK_GB%3A20%2CMEMORY_MB%3A4096%2CVCPU%3A2\
                 &root_required=OWNER_NOVA%2C%21COMPUTE_STATUS_DISABLED"
                    .into(),
                v("placement 1.36")
            ),
            ("GET".into(), "/allocations/c1".into(), v("placement 1.28")),
            ("PUT".into(), "/allocations/c1".into(), v("placement 1.36")),
            ("DELETE".into(), "/allocations/c1".into(), None),
        ]
    );
    for r in &seen {
        assert_eq!(r.header("x-auth-token"), Some("t0ken"));
        assert_eq!(r.header("accept"), Some("application/json"));
    }
    assert_eq!(seen[0].header("x-openstack-request-id"), Some("req-gid"));
    assert_eq!(seen[3].header("x-openstack-request-id"), None);
    let put: Value = serde_json::from_str(&seen[2].body).expect("json");
    assert_eq!(
        put,
        json!({"allocations": {"rp1": {"resources": {"VCPU": 1}}}, "mappings": {"": ["rp1"]},
               "project_id": PROJECT, "user_id": USER, "consumer_generation": null})
    );
}

/// Provider-generation conflicts are retried: 4 attempts, then "not claimed".
#[tokio::test]
async fn provider_generation_conflicts_are_retried() {
    let puts = Arc::new(AtomicUsize::new(0));
    let count = puts.clone();
    let stub = http_stub::start(Arc::new(move |r: &Recorded| {
        if r.method == "GET" {
            return Reply::json(200, json!({"allocations": {}}));
        }
        let n = count.fetch_add(1, Ordering::SeqCst);
        if n == 5 {
            return Reply::json(204, json!({}));
        }
        Reply::json(409, json!({"errors": [{"status": 409, "code": "placement.concurrent_update",
            "detail": "There was a conflict when trying to complete your request.\n\n resource provider generation conflict"}]}))
    }))
    .await;
    let client = admin_client(&stub.url);
    let request =
        json!({"allocations": {"rp1": {"resources": {"VCPU": 1}}}, "mappings": {"": ["rp1"]}});
    assert!(!client
        .claim_resources("c1", &request, PROJECT, USER, None)
        .await
        .expect("claim"));
    assert_eq!(puts.load(Ordering::SeqCst), 4);
    // The 5th PUT fails once more, the 6th succeeds: a success within 4 attempts is true.
    assert!(client
        .claim_resources("c1", &request, PROJECT, USER, None)
        .await
        .expect("claim"));
    assert_eq!(puts.load(Ordering::SeqCst), 6);
}

/// Keystone v3 password auth. Keystone is a stand-in (none is available here); the
/// catalog it returns points at the real Placement, which accepts the token `admin`.
#[tokio::test]
async fn password_auth_through_a_keystone_stand_in() {
    let admin = Admin::new().await;
    let tag = "CUSTOM_NSRS_PASSWORD";
    let rp = uuid();
    admin
        .provider(&rp, (8, 16384, 100), &["OWNER_NOVA", tag])
        .await;
    let placement = admin.url.clone();
    let keystone = http_stub::start(Arc::new(move |r: &Recorded| {
        if (r.method.as_str(), r.path.as_str()) != ("POST", "/identity/v3/auth/tokens") {
            return Reply::json(404, json!({}));
        }
        let expires = (chrono::Utc::now() + chrono::Duration::hours(1)).format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
        let mut reply = Reply::json(201, json!({"token": {"expires_at": expires, "catalog": [
            {"type": "compute", "endpoints": [{"interface": "internal", "region_id": "RegionOne", "url": "http://nova"}]},
            {"type": "placement", "endpoints": [
                {"interface": "public", "region_id": "RegionOne", "url": "http://127.0.0.1:1/wrong"},
                {"interface": "internal", "region_id": "RegionTwo", "url": "http://127.0.0.1:1/other-region"},
                {"interface": "internal", "region_id": "RegionOne", "url": placement.clone()}]}]}}));
        reply.headers.push(("X-Subject-Token".into(), "admin".into()));
        reply
    }))
    .await;
    let client = PlacementClient::new(PlacementOptions {
        auth: PlacementAuth::Password(PasswordAuth {
            auth_url: format!("{}/identity/v3", keystone.url),
            username: Some("nova".into()),
            password: "n0va-Secret".into(),
            user_domain_name: Some("Default".into()),
            project_name: Some("service".into()),
            project_domain_name: Some("Default".into()),
            ..PasswordAuth::default()
        }),
        region_name: Some("RegionOne".into()),
        ..PlacementOptions::default()
    })
    .expect("client");
    client.authenticate().await.expect("authenticate");
    for _ in 0..2 {
        let got = client
            .get_allocation_candidates(&query(tag), None)
            .await
            .expect("candidates");
        assert_eq!(got.provider_uuids.iter().collect::<Vec<_>>(), vec![&rp]);
    }
    let posts = keystone.recorded();
    assert_eq!(posts.len(), 1, "the token is cached");
    let body: Value = serde_json::from_str(&posts[0].body).expect("json");
    assert_eq!(
        body,
        json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "name": "nova", "domain": {"name": "Default"}, "password": "n0va-Secret"}}},
            "scope": {"project": {"name": "service", "domain": {"name": "Default"}}}}})
    );
}

/// A 401 from Placement makes the client authenticate again, once (both stand-ins).
#[tokio::test]
async fn reauthenticates_once_on_401() {
    let issued = Arc::new(AtomicUsize::new(0));
    let counter = issued.clone();
    let placement = http_stub::start(Arc::new(|r: &Recorded| match r.header("x-auth-token") {
        Some("token-2") => Reply::json(
            200,
            json!({"allocation_requests": [], "provider_summaries": {}}),
        ),
        _ => Reply::json(401, json!({"error": "expired"})),
    }))
    .await;
    let placement_url = placement.url.clone();
    let keystone = http_stub::start(Arc::new(move |_r: &Recorded| {
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let mut reply = Reply::json(
            201,
            json!({"token": {"catalog": [{"type": "placement", "endpoints": [
            {"interface": "public", "region_id": "RegionOne", "url": placement_url.clone()}]}]}}),
        );
        reply
            .headers
            .push(("X-Subject-Token".into(), format!("token-{n}")));
        reply
    }))
    .await;
    let client = PlacementClient::new(PlacementOptions {
        auth: PlacementAuth::Password(PasswordAuth {
            auth_url: keystone.url.clone(),
            user_id: Some("u1".into()),
            password: "pw".into(),
            project_id: Some("p1".into()),
            ..PasswordAuth::default()
        }),
        ..PlacementOptions::default()
    })
    .expect("client");
    client
        .get_allocation_candidates(&[], None)
        .await
        .expect("second token works");
    assert_eq!(issued.load(Ordering::SeqCst), 2);
    let tokens: Vec<Option<String>> = placement
        .recorded()
        .iter()
        .map(|r| r.header("x-auth-token").map(str::to_string))
        .collect();
    assert_eq!(
        tokens,
        vec![Some("token-1".to_string()), Some("token-2".to_string())]
    );
    assert_eq!(keystone.recorded()[0].path, "/v3/auth/tokens");
}

/// The questions nova asks for a pinned flavor with a granular group, answered by
/// the real Placement: the PCPU query finds nothing on a VCPU-only provider, the
/// fallback VCPU query finds it, and the granular group's mapping names it.
#[tokio::test]
async fn pinned_granular_flavor_and_its_fallback_query() {
    use nova_scheduler::placement::resources_from_request_spec;
    let admin = Admin::new().await;
    let tag = "CUSTOM_NSRS_PINNED";
    let cn = uuid();
    admin
        .provider(&cn, (8, 16384, 100), &["OWNER_NOVA", tag])
        .await;
    let mut spec = flavor_spec(tag);
    spec.image = None;
    spec.flavor.extra_specs = [
        ("hw:cpu_policy", "dedicated"),
        ("trait1:CUSTOM_NSRS_PINNED", "required"),
        ("resources1:VCPU", "2"),
        ("group_policy", "isolate"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let opts = QueryOptions::default();
    let first = resources_from_request_spec(&mut spec, &opts, true, None).expect("first");
    assert!(first.cpu_pinning_requested);
    let client = admin_client(&admin.url);
    let pinned = client
        .get_allocation_candidates(&first.query_params(), None)
        .await
        .expect("PCPU query");
    assert!(
        pinned.allocation_requests.is_empty(),
        "no provider has PCPU: {:?}",
        first.to_querystring()
    );
    let fallback = resources_from_request_spec(&mut spec, &opts, false, None).expect("fallback");
    assert_eq!(
        fallback.to_querystring(),
        "group_policy=isolate&limit=1000&required1=CUSTOM_NSRS_PINNED\
         &resources=DISK_GB%3A20%2CMEMORY_MB%3A4096&resources1=VCPU%3A2\
         &root_required=OWNER_NOVA%2C%21COMPUTE_STATUS_DISABLED"
    );
    let got = client
        .get_allocation_candidates(&fallback.query_params(), None)
        .await
        .expect("VCPU query");
    assert_eq!(
        got.allocation_requests,
        vec![json!({
            "allocations": {cn.as_str(): {"resources": {"DISK_GB": 20, "MEMORY_MB": 4096, "VCPU": 2}}},
            "mappings": {"": [cn.as_str()], "1": [cn.as_str()]}
        })]
    );
}

/// Keystone v3 password auth, token lifetime and catalog lookup. Keystone is a
/// stand-in speaking the v3 token API (`POST /v3/auth/tokens`, `X-Subject-Token`,
/// `token.expires_at`, `token.catalog`) because no Keystone is available here; the
/// Placement it points at is a recording stand-in too (only the token matters).
///
/// The first token expires within keystoneauth's 120 s margin, so the next request
/// gets a new one; the second lasts an hour and is reused. The endpoint is the one
/// entry of the catalog with the configured `service_type` and `service_name`, in
/// `region_name`, with the first of `valid_interfaces` present (`admin` is not).
#[tokio::test]
async fn password_token_renewed_before_expiry_and_catalog_lookup() {
    let placement = http_stub::start(Arc::new(|_r: &Recorded| {
        Reply::json(
            200,
            json!({"allocation_requests": [], "provider_summaries": {}}),
        )
    }))
    .await;
    let issued = Arc::new(AtomicUsize::new(0));
    let counter = issued.clone();
    let good = placement.url.clone();
    let keystone = http_stub::start(Arc::new(move |r: &Recorded| {
        if (r.method.as_str(), r.path.as_str()) != ("POST", "/v3/auth/tokens") {
            return Reply::json(404, json!({}));
        }
        let n = counter.fetch_add(1, Ordering::SeqCst) + 1;
        let life = if n == 1 {
            chrono::Duration::seconds(100)
        } else {
            chrono::Duration::hours(1)
        };
        let expires = (chrono::Utc::now() + life)
            .format("%Y-%m-%dT%H:%M:%S%.6fZ")
            .to_string();
        let dead = "http://127.0.0.1:1";
        let mut reply = Reply::json(201, json!({"token": {"expires_at": expires, "catalog": [
            {"type": "compute", "name": "nova", "endpoints": [
                {"interface": "internal", "region_id": "RegionTwo", "url": format!("{dead}/compute")}]},
            {"type": "placement", "name": "placement-a", "endpoints": [
                {"interface": "internal", "region_id": "RegionTwo", "url": format!("{dead}/other-name")}]},
            {"type": "placement", "name": "placement-b", "endpoints": [
                {"interface": "public", "region_id": "RegionTwo", "url": format!("{dead}/public")},
                {"interface": "internal", "region_id": "RegionOne", "url": format!("{dead}/other-region")},
                {"interface": "internal", "region_id": "RegionTwo", "url": good.clone()}]}]}}));
        reply
            .headers
            .push(("X-Subject-Token".into(), format!("token-{n}")));
        reply
    }))
    .await;
    let client = PlacementClient::new(PlacementOptions {
        auth: PlacementAuth::Password(PasswordAuth {
            auth_url: keystone.url.clone(),
            user_id: Some("nova-user-id".into()),
            password: "pw".into(),
            project_id: Some("service-project-id".into()),
            ..PasswordAuth::default()
        }),
        service_type: "placement".into(),
        service_name: Some("placement-b".into()),
        region_name: Some("RegionTwo".into()),
        valid_interfaces: vec!["admin".into(), "internal".into(), "public".into()],
        ..PlacementOptions::default()
    })
    .expect("client");
    for _ in 0..3 {
        client
            .get_allocation_candidates(&[], None)
            .await
            .expect("candidates");
    }
    assert_eq!(
        issued.load(Ordering::SeqCst),
        2,
        "renewed once, then cached"
    );
    let tokens: Vec<Option<String>> = placement
        .recorded()
        .iter()
        .map(|r| r.header("x-auth-token").map(str::to_string))
        .collect();
    let t = |s: &str| Some(s.to_string());
    assert_eq!(tokens, vec![t("token-1"), t("token-2"), t("token-2")]);
    let body: Value = serde_json::from_str(&keystone.recorded()[0].body).expect("json");
    assert_eq!(
        body,
        json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
            "id": "nova-user-id", "password": "pw"}}},
            "scope": {"project": {"id": "service-project-id"}}}})
    );

    // No entry for the service type: EndpointNotFound, nothing sent to Placement.
    let other_type = PlacementClient::new(PlacementOptions {
        auth: PlacementAuth::Password(PasswordAuth {
            auth_url: keystone.url.clone(),
            user_id: Some("nova-user-id".into()),
            password: "pw".into(),
            ..PasswordAuth::default()
        }),
        service_type: "placement-v2".into(),
        ..PlacementOptions::default()
    })
    .expect("client");
    assert!(matches!(
        other_type.get_allocation_candidates(&[], None).await,
        Err(PlacementError::EndpointNotFound(_))
    ));
    assert_eq!(placement.recorded().len(), 3);
}

/// `[placement] timeout`: a Placement that accepts the request and never answers
/// (a stand-in: the real one cannot be made to hang) fails the call as unreachable
/// once the timeout passes, instead of holding the request forever.
#[tokio::test]
async fn timeout_bounds_a_placement_that_never_answers() {
    let stub = http_stub::start_async(Arc::new(|_r: Recorded| {
        Box::pin(std::future::pending::<Option<Reply>>())
            as std::pin::Pin<Box<dyn std::future::Future<Output = Option<Reply>> + Send>>
    }))
    .await;
    let client = PlacementClient::new(PlacementOptions {
        endpoint: Some(stub.url.clone()),
        timeout: Some(Duration::from_millis(500)),
        ..PlacementOptions::default()
    })
    .expect("client");
    let started = std::time::Instant::now();
    match client
        .get_allocation_candidates(&query("CUSTOM_X"), None)
        .await
    {
        Err(PlacementError::Unreachable(_)) => {}
        other => panic!("expected a timeout (Unreachable), got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        stub.recorded().len(),
        1,
        "the request arrived, no answer came"
    );
}

/// A call's Placement requests wait as long as its caller: a candidates answer that
/// comes after the caller's deadline is given up at the deadline (and counts as no
/// outage), a set `[placement] timeout` shorter than the deadline still bounds each
/// request, and once the deadline has passed nothing is sent, so no claim is written.
#[tokio::test]
async fn a_call_waits_for_placement_as_long_as_its_caller() {
    let stub = http_stub::start_async(Arc::new(|r: Recorded| {
        Box::pin(async move {
            if r.path.starts_with("/allocation_candidates") {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                return Some(Reply::json(
                    200,
                    json!({"allocation_requests": [], "provider_summaries": {}}),
                ));
            }
            std::future::pending::<()>().await;
            None
        }) as std::pin::Pin<Box<dyn std::future::Future<Output = Option<Reply>> + Send>>
    }))
    .await;
    let client = |timeout: Option<Duration>| {
        PlacementClient::new(PlacementOptions {
            endpoint: Some(stub.url.clone()),
            timeout,
            ..PlacementOptions::default()
        })
        .expect("client")
    };
    let in_secs = |s: f64| Some(std::time::Instant::now() + Duration::from_secs_f64(s));

    // Unset timeout: the answer after 1.5 s is waited for within a 5 s deadline ...
    let unset = client(None);
    let found = for_caller(
        in_secs(5.0),
        unset.get_allocation_candidates(&query("CUSTOM_X"), None),
    )
    .await
    .expect("answered within the caller's time");
    assert!(found.allocation_requests.is_empty());
    // ... and given up at a 0.5 s one, as the caller's, not as an outage.
    let started = std::time::Instant::now();
    match for_caller(
        in_secs(0.5),
        unset.get_allocation_candidates(&query("CUSTOM_X"), None),
    )
    .await
    {
        Err(PlacementError::CallerGone(what)) => {
            assert!(what.contains("allocation_candidates"), "{what}")
        }
        other => panic!("expected CallerGone, got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        unset.problem(),
        None,
        "a caller giving up is no Placement outage"
    );

    // A set timeout shorter than the caller's deadline bounds the request.
    let set = client(Some(Duration::from_millis(300)));
    let started = std::time::Instant::now();
    match for_caller(
        in_secs(5.0),
        set.get_allocation_candidates(&query("CUSTOM_X"), None),
    )
    .await
    {
        Err(PlacementError::Unreachable(_)) => {}
        other => panic!("expected the set timeout (Unreachable), got {other:?}"),
    }
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "{:?}",
        started.elapsed()
    );

    // Past the deadline, a claim sends nothing.
    let sent = stub.recorded().len();
    let mut record = ConsumerClaim::default();
    let claimed = for_caller(
        Some(std::time::Instant::now()),
        unset.claim_resources_from(
            &uuid(),
            &json!({"allocations": {uuid(): {"resources": {"VCPU": 1}}}}),
            &uuid(),
            &uuid(),
            None,
            None,
            &mut record,
        ),
    )
    .await
    .expect("a claim not made");
    assert!(!claimed);
    assert_eq!(
        stub.recorded().len(),
        sent,
        "nothing sent after the deadline"
    );
    assert!(
        record
            .take_failure()
            .is_some_and(|why| why.contains("stopped waiting")),
        "the reason is kept for the request's log line"
    );
}

/// TLS: the same real Placement served over HTTPS by gunicorn, with a server
/// certificate signed by a CA made here with openssl. Trusted through `cafile`,
/// refused without it, accepted with `insecure`.
#[tokio::test]
async fn tls_cafile_and_insecure_against_the_real_placement() {
    let dir = std::env::temp_dir().join(format!("nsrs-t-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    for script in [
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
         -subj /CN=nsrs-test-ca",
        "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=127.0.0.1",
        "printf 'subjectAltName=IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\nextendedKeyUsage=serverAuth\\n' \
         > ext.cnf && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
         -out server.pem -days 2 -extfile ext.cnf",
    ] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(&dir)
            .output()
            .expect("sh");
        assert!(
            out.status.success(),
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let https = placement_server::start_tls(&dir.join("server.pem"), &dir.join("server.key"))
        .await
        .expect("Placement over HTTPS");
    assert!(https.starts_with("https://"));
    let admin = Admin::new().await;
    let tag = "CUSTOM_NSRS_TLS";
    let rp = uuid();
    admin
        .provider(&rp, (8, 16384, 100), &["OWNER_NOVA", tag])
        .await;
    let client = |cafile: Option<std::path::PathBuf>, insecure: bool| {
        PlacementClient::new(PlacementOptions {
            endpoint: Some(https.clone()),
            auth: PlacementAuth::AdminToken {
                token: "admin".into(),
            },
            cafile,
            insecure,
            ..PlacementOptions::default()
        })
        .expect("client")
    };
    let trusted = client(Some(dir.join("ca.pem")), false)
        .get_allocation_candidates(&query(tag), None)
        .await
        .expect("trusted through cafile");
    assert_eq!(trusted.provider_uuids.iter().collect::<Vec<_>>(), vec![&rp]);
    match client(None, false)
        .get_allocation_candidates(&query(tag), None)
        .await
    {
        Err(PlacementError::Unreachable(text)) => {
            assert!(text.to_lowercase().contains("certificate"), "{text}")
        }
        other => panic!("an unknown CA must be refused, got {other:?}"),
    }
    let insecure = client(None, true)
        .get_allocation_candidates(&query(tag), None)
        .await
        .expect("insecure skips verification");
    assert_eq!(
        insecure.provider_uuids.iter().collect::<Vec<_>>(),
        vec![&rp]
    );
}

/// A client certificate: the real Placement served over HTTPS by gunicorn requiring
/// one signed by the test CA. With `certfile`/`keyfile` the calls succeed; without,
/// the TLS handshake is refused, and the client's `problem()` (what `/readyz` shows)
/// names it. Unreadable or mismatched files are errors naming the file, from the same
/// `check_config` that `config check` runs.
#[tokio::test]
async fn client_certificate_against_the_real_placement_requiring_one() {
    let dir = std::env::temp_dir().join(format!("nsrs-t-mtls-{}", std::process::id()));
    let pki = tokio::task::spawn_blocking({
        let dir = dir.clone();
        move || crate::test_pki::TestPki::generate(&dir)
    })
    .await
    .expect("pki");
    let https = placement_server::start_mtls(
        &pki.server_cert,
        &pki.server_key,
        &pki.ca,
        (&pki.client_cert, &pki.client_key),
    )
    .await
    .expect("Placement over HTTPS with client certificates");
    let admin = Admin::new().await;
    let tag = "CUSTOM_NSRS_MTLS";
    let rp = uuid();
    admin
        .provider(&rp, (8, 16384, 100), &["OWNER_NOVA", tag])
        .await;
    let conf = |tls: &str| {
        nova_scheduler::config::from_ini_str(&format!(
            "[placement]\nauth_type = admin_token\ntoken = admin\nendpoint_override = {https}\n\
             cafile = {}\n{tls}",
            pki.ca.display()
        ))
        .expect("config")
        .placement
    };
    let with_cert = conf(&format!(
        "certfile = {}\nkeyfile = {}\n",
        pki.client_cert.display(),
        pki.client_key.display()
    ));
    nova_scheduler::placement::check_config(&with_cert).expect("valid");
    let client = PlacementClient::new(PlacementOptions::from_section(&with_cert).expect("options"))
        .expect("client");
    client
        .probe()
        .await
        .expect("probe with a client certificate");
    let got = client
        .get_allocation_candidates(&query(tag), None)
        .await
        .expect("candidates with a client certificate");
    assert_eq!(got.provider_uuids.iter().collect::<Vec<_>>(), vec![&rp]);
    assert_eq!(client.problem(), None);

    let without = PlacementClient::new(PlacementOptions::from_section(&conf("")).expect("options"))
        .expect("client");
    let refused = without.probe().await.expect_err("no client certificate");
    assert!(
        matches!(refused, PlacementError::Unreachable(_)),
        "{refused:?}"
    );
    let problem = without
        .problem()
        .expect("the refusal is the client's problem");
    assert!(problem.contains("not responding"), "{problem}");
    assert!(
        without
            .get_allocation_candidates(&query(tag), None)
            .await
            .is_err(),
        "every call is refused"
    );

    // A key that is not the certificate's, a missing file: errors naming the file.
    let mismatched = conf(&format!(
        "certfile = {}\nkeyfile = {}\n",
        pki.client_cert.display(),
        pki.server_key.display()
    ));
    let err = nova_scheduler::placement::check_config(&mismatched)
        .expect_err("mismatched key")
        .to_string();
    assert!(
        err.contains(&pki.client_cert.display().to_string())
            && err.contains(&pki.server_key.display().to_string()),
        "{err}"
    );
    let missing = conf("certfile = /nonexistent/client.pem\n");
    let err = nova_scheduler::placement::check_config(&missing)
        .expect_err("missing certfile")
        .to_string();
    assert!(err.contains("certfile /nonexistent/client.pem"), "{err}");
    let lone_key = conf(&format!("keyfile = {}\n", pki.client_key.display()));
    assert!(nova_scheduler::placement::check_config(&lone_key)
        .expect_err("keyfile alone")
        .to_string()
        .contains("without certfile"));
}

/// Application credentials against a real keystone (`[token] expiration = 125`, so a
/// token has 5 s before keystoneauth's 120 s renewal margin): the credential is made
/// through keystone's API, the Placement endpoint comes from keystone's catalog, and
/// the token is renewed while the old one is still valid. The Placement named in the
/// catalog is a recording proxy to the real one (which runs without keystone here):
/// it sees each token the client sends.
#[tokio::test]
async fn application_credential_against_a_real_keystone_with_renewal() {
    use nova_scheduler::placement::{ApplicationCredentialAuth, MIN_TOKEN_LIFE_SECS};
    use reqwest::Method;
    let ks = crate::keystone_server::start(125).await;
    let admin = Admin::new().await;
    let tag = "CUSTOM_NSRS_APPCRED";
    let rp = uuid();
    admin
        .provider(&rp, (8, 16384, 100), &["OWNER_NOVA", tag])
        .await;
    let real = admin.url.clone();
    let http = reqwest::Client::new();
    let proxy = http_stub::start_async(Arc::new(move |mut r: Recorded| {
        let (http, real) = (http.clone(), real.clone());
        Box::pin(async move {
            for (k, v) in r.headers.iter_mut() {
                if k == "x-auth-token" {
                    *v = "admin".into();
                }
            }
            Some(crate::claims_cloud::forward(&http, &real, &r).await)
        })
    }))
    .await;
    // The service, a user and its project, and the catalog entry, as an operator makes them.
    let project = ks
        .create(
            "/v3/projects",
            "project",
            json!({"name": "nsrs-service", "domain_id": "default"}),
        )
        .await;
    let user = ks
        .create(
            "/v3/users",
            "user",
            json!({"name": "nsrs-nova", "domain_id": "default",
            "password": "nsrs-user-pw"}),
        )
        .await;
    let (_, roles) = ks.call(Method::GET, "/v3/roles?name=admin", None).await;
    let role = roles["roles"][0]["id"]
        .as_str()
        .expect("role admin")
        .to_string();
    let (status, _) = ks
        .call(
            Method::PUT,
            &format!(
                "/v3/projects/{}/users/{}/roles/{role}",
                project["id"].as_str().unwrap_or_default(),
                user["id"].as_str().unwrap_or_default()
            ),
            None,
        )
        .await;
    assert_eq!(status, 204, "role assignment");
    let service = ks
        .create(
            "/v3/services",
            "service",
            json!({"type": "placement", "name": "placement"}),
        )
        .await;
    ks.create(
        "/v3/endpoints",
        "endpoint",
        json!({"service_id": service["id"], "interface": "internal", "region_id": "RegionOne",
            "url": proxy.url}),
    )
    .await;
    let user_token = crate::keystone_server::password_token(
        &ks.http,
        &ks.url,
        "nsrs-nova",
        "nsrs-user-pw",
        "nsrs-service",
    )
    .await
    .expect("user token");
    let user_id = user["id"].as_str().expect("user id").to_string();
    let (status, ac) = ks
        .call_as(
            &user_token,
            Method::POST,
            &format!("/v3/users/{user_id}/application_credentials"),
            Some(json!({"application_credential": {"name": "nsrs-scheduler"}})),
        )
        .await;
    assert_eq!(status, 201, "application credential: {ac}");
    let ac_id = ac["application_credential"]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let secret = ac["application_credential"]["secret"]
        .as_str()
        .expect("secret")
        .to_string();

    let client = |auth: ApplicationCredentialAuth| {
        PlacementClient::new(PlacementOptions {
            auth: PlacementAuth::ApplicationCredential(auth),
            region_name: Some("RegionOne".into()),
            ..PlacementOptions::default()
        })
        .expect("client")
    };
    let by_id = client(ApplicationCredentialAuth {
        auth_url: format!("{}/v3", ks.url),
        id: Some(ac_id.clone()),
        secret: secret.clone(),
        ..ApplicationCredentialAuth::default()
    });
    let tokens = || -> Vec<String> {
        proxy
            .recorded()
            .iter()
            .filter_map(|r| r.header("x-auth-token").map(str::to_string))
            .collect()
    };
    let first_at = std::time::Instant::now();
    for _ in 0..2 {
        let got = by_id
            .get_allocation_candidates(&query(tag), None)
            .await
            .expect("candidates with an application credential");
        assert_eq!(got.provider_uuids.iter().collect::<Vec<_>>(), vec![&rp]);
    }
    let seen = tokens();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0], seen[1], "a fresh token is reused");
    // 125 s of life less the 120 s margin: after 6 s the token is renewed, while valid.
    let fresh_for = Duration::from_secs((125 - MIN_TOKEN_LIFE_SECS) as u64 + 1);
    tokio::time::sleep(fresh_for.saturating_sub(first_at.elapsed())).await;
    by_id
        .get_allocation_candidates(&query(tag), None)
        .await
        .expect("candidates after renewal");
    let seen = tokens();
    assert_eq!(seen.len(), 3);
    assert_ne!(seen[2], seen[0], "renewed within the margin");
    assert!(
        ks.token_valid(&seen[0]).await,
        "the old token had not expired yet"
    );
    assert!(ks.token_valid(&seen[2]).await);

    // By name, with its user's id.
    let by_name = client(ApplicationCredentialAuth {
        auth_url: ks.url.clone(),
        name: Some("nsrs-scheduler".into()),
        user_id: Some(user_id.clone()),
        secret: secret.clone(),
        ..ApplicationCredentialAuth::default()
    });
    by_name.probe().await.expect("by name and user id");

    // A wrong secret: keystone's 401 and its message, no secret in the error.
    let wrong = client(ApplicationCredentialAuth {
        auth_url: ks.url.clone(),
        id: Some(ac_id),
        secret: "not-the-secret".into(),
        ..ApplicationCredentialAuth::default()
    });
    match wrong.authenticate().await {
        Err(PlacementError::Unauthorized(text)) => {
            assert!(
                text.contains("v3applicationcredential")
                    && text.contains("401")
                    && text.contains("requires authentication"),
                "{text}"
            );
            assert!(
                !text.contains("not-the-secret") && !text.contains(&secret),
                "{text}"
            );
        }
        other => panic!("expected keystone's refusal, got {other:?}"),
    }
    assert!(wrong.probe().await.is_err());
    assert!(wrong
        .problem()
        .is_some_and(|p| p.contains("keystone refused")));
}
