// SPDX-License-Identifier: Apache-2.0
//! One test's cloud for the claim tests against the real Placement: cell databases
//! built by nova-manage, providers seeded through Placement's REST API and tagged
//! with the test's CUSTOM_ trait, a scheduler over them, and the recording proxy
//! (`Gate`) between the scheduler and Placement. Used by tests/placement/ and
//! tests/daemon_process.rs (whose crate roots declare http_stub, nova_schema,
//! placement_admin, placement_server and venv).
#![allow(dead_code)]

use crate::http_stub::{self, Recorded, Reply};
use crate::nova_schema;
use crate::placement_admin::Admin;
use crate::placement_server;
use crate::venv;
use nova_scheduler::manager::{
    Delivery, ManagerOptions, PrefilterOptions, Profile, SchedulerManager,
};
use nova_scheduler::placement::{PlacementAuth, PlacementClient, PlacementOptions};
use nova_scheduler::rpc::{RemoteError, RequestContext};
use nova_scheduler::state::{CellUrlResolver, HostStateStore, StateOptions};
use serde_json::{json, Map, Value};
use sqlx::mysql::MySqlPool;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

pub const PROJECT: &str = "6c1b7e0f3a2d4e5f8a9b0c1d2e3f4a5b";
pub const USER: &str = "0f3a2d4e5f8a9b0c1d2e3f4a5b6c1b7e";
/// nova 34's compute service version (`OWNER_NOVA` is required from 73 on).
pub const COMPUTE_SERVICE_VERSION: i64 = 74;

pub fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub fn envelope(name: &str, version: &str, data: Value) -> Value {
    json!({
        "nova_object.name": name,
        "nova_object.namespace": "nova",
        "nova_object.version": version,
        "nova_object.data": data,
    })
}

/// `cell_mappings` hold SQLAlchemy URLs; sqlx wants `mysql://` without options.
pub fn resolver() -> CellUrlResolver {
    Arc::new(|url: &str| {
        Ok(url
            .replace("mysql+pymysql://", "mysql://")
            .split('?')
            .next()
            .unwrap_or_default()
            .to_string())
    })
}

// ---------------------------------------------------------------------------------------
// One test's cloud: cell databases + its providers in the shared Placement.

pub struct Cloud {
    /// The test's CUSTOM_ trait: on each of its providers, required by its flavors.
    pub tag: String,
    pub api_db: String,
    pub cell0_db: String,
    pub cell: MySqlPool,
    pub admin: Admin,
}

impl Cloud {
    pub async fn new(name: &str) -> Cloud {
        let venv = venv::find();
        let prefix = nova_schema::tagged(&format!("nsrs_claims_{name}"));
        nova_schema::create_from_template(&venv, &prefix, &["cell1"])
            .await
            .unwrap_or_else(|e| panic!("nova schema: {e}"));
        let cell = MySqlPool::connect(&nova_schema::sqlx_url(&format!("{prefix}_cell1")))
            .await
            .expect("cell database");
        Cloud {
            tag: format!("CUSTOM_NSRS_CLAIMS_{}", name.to_ascii_uppercase()),
            api_db: format!("{prefix}_api"),
            cell0_db: format!("{prefix}_cell0"),
            cell,
            admin: Admin::new().await,
        }
    }

    /// A nova-compute service and its compute node in the cell database, as the
    /// resource tracker reports an empty host (the node uuid is its provider's).
    pub async fn compute_node(
        &self,
        host: &str,
        node_uuid: &str,
        (vcpus, mem, disk): (i64, i64, i64),
    ) {
        let service_id = sqlx::query(
            "INSERT INTO services (created_at, updated_at, host, `binary`, topic, report_count, \
             disabled, last_seen_up, forced_down, version, uuid, deleted) \
             VALUES (UTC_TIMESTAMP(), UTC_TIMESTAMP(), ?, 'nova-compute', 'compute', 1, 0, \
             UTC_TIMESTAMP(), 0, ?, ?, 0)",
        )
        .bind(host)
        .bind(COMPUTE_SERVICE_VERSION)
        .bind(uuid())
        .execute(&self.cell)
        .await
        .expect("services row")
        .last_insert_id();
        sqlx::query(
            "INSERT INTO compute_nodes (created_at, updated_at, service_id, host, hypervisor_hostname, \
             uuid, vcpus, memory_mb, local_gb, vcpus_used, memory_mb_used, local_gb_used, \
             hypervisor_type, hypervisor_version, cpu_info, free_ram_mb, free_disk_gb, \
             disk_available_least, running_vms, current_workload, stats, cpu_allocation_ratio, \
             ram_allocation_ratio, disk_allocation_ratio, mapped, deleted) \
             VALUES (UTC_TIMESTAMP(), UTC_TIMESTAMP(), ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, 'QEMU', 8002000, \
             '{}', ?, ?, ?, 0, 0, '{}', 16.0, 1.5, 1.0, 1, 0)",
        )
        .bind(service_id)
        .bind(host)
        .bind(host)
        .bind(node_uuid)
        .bind(vcpus)
        .bind(mem)
        .bind(disk)
        .bind(mem)
        .bind(disk)
        .bind(disk)
        .execute(&self.cell)
        .await
        .expect("compute_nodes row");
    }

    /// A host in both places: compute node in the cell, root provider in Placement
    /// (VCPU total/ratio, MEMORY_MB, DISK_GB), traits OWNER_NOVA, COMPUTE_NODE and the tag.
    pub async fn host(&self, name: &str, vcpu: (i64, f64), mem: i64, disk: i64) -> String {
        let rp = uuid();
        self.compute_node(name, &rp, (64, 262144, 4000)).await;
        let tag = self.tag.clone();
        self.admin
            .compute_provider(
                &rp,
                name,
                vcpu,
                mem,
                disk,
                &["OWNER_NOVA", "COMPUTE_NODE", &tag],
            )
            .await;
        rp
    }

    /// A scheduler instance over this cloud, talking to Placement at `placement_url`.
    pub async fn scheduler(&self, placement_url: &str, seed: u64) -> SchedulerManager {
        self.scheduler_with(placement_url, seed, |_| {}).await
    }

    /// [`Cloud::scheduler`] with its manager options changed by `options`.
    pub async fn scheduler_with(
        &self,
        placement_url: &str,
        seed: u64,
        options: impl FnOnce(&mut ManagerOptions),
    ) -> SchedulerManager {
        self.scheduler_custom(placement_url, seed, options, |_| {})
            .await
    }

    /// [`Cloud::scheduler_with`], its Placement client's options changed by `client`.
    pub async fn scheduler_custom(
        &self,
        placement_url: &str,
        seed: u64,
        options: impl FnOnce(&mut ManagerOptions),
        client: impl FnOnce(&mut PlacementOptions),
    ) -> SchedulerManager {
        let config = nova_scheduler::config::from_ini_str("").expect("default nova.conf");
        self.scheduler_from(placement_url, seed, &config, options, client)
            .await
    }

    /// [`Cloud::scheduler_custom`] with the filters and weighers `config` names.
    pub async fn scheduler_from(
        &self,
        placement_url: &str,
        seed: u64,
        config: &nova_scheduler::config::Config,
        options: impl FnOnce(&mut ManagerOptions),
        client: impl FnOnce(&mut PlacementOptions),
    ) -> SchedulerManager {
        let store = HostStateStore::connect(StateOptions::new(
            nova_schema::sqlx_url(&self.api_db),
            nova_schema::sqlx_url(&self.cell0_db),
            resolver(),
        ))
        .await
        .expect("host state store");
        let scheduler = nova_scheduler::app::build_scheduler(config).expect("scheduler");
        let mut placement_options = PlacementOptions {
            endpoint: Some(placement_url.to_string()),
            auth: PlacementAuth::AdminToken {
                token: "admin".into(),
            },
            claim_retry_unit: Duration::from_millis(5),
            ..PlacementOptions::default()
        };
        client(&mut placement_options);
        let placement = PlacementClient::new(placement_options).expect("placement client");
        let mut manager_options = ManagerOptions {
            max_placement_results: 1000,
            default_availability_zone: "nova".into(),
            rng_seed: Some(seed),
            indexed_decision: true,
            read_allocations_ahead: true,
            max_instances_per_request: 1000,
            decision_ring_size: 16,
        };
        options(&mut manager_options);
        let profile = Profile {
            scheduler: Arc::new(scheduler),
            prefilters: PrefilterOptions::default(),
            load_instance_system_metadata: false,
        };
        SchedulerManager::new(
            profile,
            Arc::new(store),
            Arc::new(placement),
            manager_options,
        )
    }

    /// A boot request for `uuids` of a flavor that needs this cloud's tag.
    pub fn spec(
        &self,
        (vcpus, mem, disk): (i64, i64, i64),
        extra: Value,
        uuids: &[String],
    ) -> Value {
        let mut extra_specs = json!({ format!("trait:{}", self.tag): "required" });
        if let Value::Object(more) = extra {
            for (k, v) in more {
                extra_specs[k] = v;
            }
        }
        envelope(
            "RequestSpec",
            "1.14",
            json!({
                "instance_uuid": uuids.first(),
                "num_instances": uuids.len(),
                "project_id": PROJECT,
                "user_id": USER,
                "availability_zone": null,
                "is_bfv": false,
                "flavor": envelope("Flavor", "1.2", json!({
                    "id": 7, "flavorid": "f7", "name": "m1.test", "vcpus": vcpus,
                    "memory_mb": mem, "root_gb": disk, "ephemeral_gb": 0, "swap": 0,
                    "extra_specs": extra_specs,
                })),
                "image": envelope("ImageMeta", "1.8", json!({
                    "name": "cirros", "properties": envelope("ImageMetaProps", "1.44", json!({})),
                })),
            }),
        )
    }
}

/// `select_destinations` as nova-conductor calls it (RPC 4.5, objects and alternates).
pub async fn select(
    manager: &SchedulerManager,
    spec: Value,
    uuids: &[String],
) -> Result<Vec<Vec<Selection>>, RemoteError> {
    select_with(manager, spec, Some(uuids), true).await
}

/// `select_destinations` with or without `instance_uuids` (RPC 4.3 sends none).
pub async fn select_with(
    manager: &SchedulerManager,
    spec: Value,
    uuids: Option<&[String]>,
    return_alternates: bool,
) -> Result<Vec<Vec<Selection>>, RemoteError> {
    select_delivered(manager, spec, uuids, return_alternates, Delivery::default()).await
}

/// [`select_with`] for a call delivered as `delivery` says (a deadline, a redelivery).
pub async fn select_delivered(
    manager: &SchedulerManager,
    spec: Value,
    uuids: Option<&[String]>,
    return_alternates: bool,
    delivery: Delivery,
) -> Result<Vec<Vec<Selection>>, RemoteError> {
    let ctx = RequestContext::from_map(
        json!({"user_id": USER, "project_id": PROJECT, "request_id": format!("req-{}", uuid())})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let mut args: Map<String, Value> = json!({
        "spec_obj": spec, "return_objects": true, "return_alternates": return_alternates,
    })
    .as_object()
    .cloned()
    .unwrap_or_default();
    if let Some(uuids) = uuids {
        args.insert("instance_uuids".into(), json!(uuids));
    }
    let answer = manager
        .select_destinations_delivered(&ctx, &args, delivery)
        .await?;
    Ok(answer
        .as_array()
        .expect("a list per instance")
        .iter()
        .map(|list| {
            list.as_array()
                .expect("a list of Selections")
                .iter()
                .map(Selection::decode)
                .collect()
        })
        .collect())
}

/// The fields of a `Selection` primitive the tests look at.
#[derive(Debug, Clone)]
pub struct Selection {
    pub compute_node_uuid: String,
    pub service_host: String,
    pub allocation_request: Value,
    pub allocation_request_version: String,
}

impl Selection {
    pub fn decode(primitive: &Value) -> Selection {
        assert_eq!(primitive["nova_object.name"], "Selection");
        let d = &primitive["nova_object.data"];
        let text = |k: &str| d[k].as_str().unwrap_or_default().to_string();
        Selection {
            compute_node_uuid: text("compute_node_uuid"),
            service_host: text("service_host"),
            // JSON text, or null when nothing was claimed.
            allocation_request: d["allocation_request"]
                .as_str()
                .map(|t| serde_json::from_str(t).expect("allocation_request is JSON"))
                .unwrap_or(Value::Null),
            allocation_request_version: text("allocation_request_version"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// The proxy in front of Placement.

#[derive(Debug, Clone, PartialEq)]
pub struct Exchange {
    pub method: String,
    /// Without the query string.
    pub path: String,
    /// With it.
    pub full_path: String,
    pub status: u16,
}

/// Claims (`PUT /allocations`) wait until this many schedulers asked for candidates.
pub struct Barrier {
    pub asked: watch::Sender<BTreeSet<String>>,
    pub needed: usize,
    pub timed_out: AtomicBool,
}

pub struct Gate {
    pub url: String,
    pub log: Arc<Mutex<Vec<Exchange>>>,
    pub down: Arc<AtomicBool>,
}

/// What the gate does with one request (see [`Gate::start_faulty`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Forward it and pass the answer back.
    Pass,
    /// Forward it (Placement applies it), then close the connection unanswered.
    DropAnswer,
    /// Forward it, then answer this status instead of Placement's (a proxy's 502).
    ReplaceAnswer(u16),
    /// Forward it (Placement applies it), then never answer.
    HoldAnswer,
    /// Answer this status without forwarding (nothing is applied).
    Refuse(u16),
    /// Never forward, never answer.
    Hang,
    /// Forward it after this long.
    Delay(Duration),
}

/// Chooses the fault for each request, given the exchanges so far.
pub type FaultPlan = Arc<dyn Fn(&Recorded, &[Exchange]) -> Fault + Send + Sync>;

/// Run by the gate before it forwards a `GET /allocation_candidates`, with the
/// gate's log of what Placement answered so far.
pub type BeforeCandidates = Arc<
    dyn Fn(
            Arc<Mutex<Vec<Exchange>>>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

impl Gate {
    /// A proxy to the real Placement named `name`; claims wait on `barrier` if given.
    pub async fn start(name: &str, barrier: Option<Arc<Barrier>>) -> Gate {
        Gate::start_with(name, barrier, None).await
    }

    /// [`Gate::start`], running `before_candidates` before each candidates question
    /// is forwarded.
    pub async fn start_with(
        name: &str,
        barrier: Option<Arc<Barrier>>,
        before_candidates: Option<BeforeCandidates>,
    ) -> Gate {
        Gate::start_all(name, barrier, before_candidates, None).await
    }

    /// A gate that plays the faults `plan` chooses. Faulted requests are logged
    /// with the status the scheduler saw (0: no answer).
    pub async fn start_faulty(name: &str, plan: FaultPlan) -> Gate {
        Gate::start_all(name, None, None, Some(plan)).await
    }

    async fn start_all(
        name: &str,
        barrier: Option<Arc<Barrier>>,
        before_candidates: Option<BeforeCandidates>,
        plan: Option<FaultPlan>,
    ) -> Gate {
        let target = placement_server::url().await.to_string();
        let log: Arc<Mutex<Vec<Exchange>>> = Arc::default();
        let down = Arc::new(AtomicBool::new(false));
        let http = reqwest::Client::new();
        let (log2, down2, name) = (log.clone(), down.clone(), name.to_string());
        let stub = http_stub::start_async(Arc::new(move |r: Recorded| {
            let (http, target, log, down, barrier, name, before_candidates, plan) = (
                http.clone(),
                target.clone(),
                log2.clone(),
                down2.clone(),
                barrier.clone(),
                name.clone(),
                before_candidates.clone(),
                plan.clone(),
            );
            Box::pin(async move {
                if down.load(Ordering::SeqCst) {
                    return None;
                }
                if let Some(plan) = &plan {
                    let fault = plan(&r, &log.lock().expect("log"));
                    let record = |status: u16| Exchange {
                        method: r.method.clone(),
                        path: r.path.split('?').next().unwrap_or_default().to_string(),
                        full_path: r.path.clone(),
                        status,
                    };
                    match fault {
                        Fault::Pass => {}
                        Fault::Delay(d) => tokio::time::sleep(d).await,
                        Fault::Hang => std::future::pending::<()>().await,
                        Fault::Refuse(status) => {
                            log.lock().expect("log").push(record(status));
                            return Some(Reply::json(
                                status,
                                json!({"errors": [{"status": status, "code": "placement.undefined_code",
                                    "title": "refused by the test's gate", "detail": "refused"}]}),
                            ));
                        }
                        Fault::HoldAnswer => {
                            let _ = forward(&http, &target, &r).await;
                            log.lock().expect("log").push(record(0));
                            std::future::pending::<()>().await;
                        }
                        Fault::DropAnswer | Fault::ReplaceAnswer(_) => {
                            let _ = forward(&http, &target, &r).await;
                            if let Fault::ReplaceAnswer(status) = fault {
                                log.lock().expect("log").push(record(status));
                                return Some(Reply::json(status, json!({"error": "bad gateway"})));
                            }
                            log.lock().expect("log").push(record(0));
                            return None;
                        }
                    }
                }
                if let (Some(hook), true) = (
                    &before_candidates,
                    r.path.starts_with("/allocation_candidates"),
                ) {
                    hook(log.clone()).await;
                }
                if let (Some(b), true) = (&barrier, r.method == "PUT") {
                    let mut rx = b.asked.subscribe();
                    let wait = rx.wait_for(|asked| asked.len() >= b.needed);
                    if tokio::time::timeout(Duration::from_secs(30), wait)
                        .await
                        .is_err()
                    {
                        b.timed_out.store(true, Ordering::SeqCst);
                    }
                }
                let reply = forward(&http, &target, &r).await;
                log.lock().expect("log").push(Exchange {
                    method: r.method.clone(),
                    path: r.path.split('?').next().unwrap_or_default().to_string(),
                    full_path: r.path.clone(),
                    status: reply.status,
                });
                if let (Some(b), true) = (&barrier, r.path.starts_with("/allocation_candidates")) {
                    b.asked.send_modify(|asked| {
                        asked.insert(name);
                    });
                }
                Some(reply)
            })
        }))
        .await;
        Gate {
            url: stub.url,
            log,
            down,
        }
    }

    pub fn exchanges(&self) -> Vec<Exchange> {
        self.log.lock().expect("log").clone()
    }

    pub fn full_paths(&self) -> Vec<String> {
        self.exchanges().into_iter().map(|e| e.full_path).collect()
    }

    /// `(consumer, status)` of every claim attempt, in order.
    pub fn puts(&self) -> Vec<(String, u16)> {
        self.exchanges()
            .into_iter()
            .filter(|e| e.method == "PUT")
            .map(|e| {
                (
                    e.path.trim_start_matches("/allocations/").to_string(),
                    e.status,
                )
            })
            .collect()
    }

    pub fn deletes(&self) -> Vec<(String, u16)> {
        self.exchanges()
            .into_iter()
            .filter(|e| e.method == "DELETE")
            .map(|e| {
                (
                    e.path.trim_start_matches("/allocations/").to_string(),
                    e.status,
                )
            })
            .collect()
    }
}

pub async fn forward(http: &reqwest::Client, target: &str, r: &Recorded) -> Reply {
    let method = reqwest::Method::from_bytes(r.method.as_bytes()).expect("method");
    let mut req = http.request(method, format!("{target}{}", r.path));
    for (k, v) in &r.headers {
        if matches!(
            k.as_str(),
            "x-auth-token"
                | "openstack-api-version"
                | "accept"
                | "content-type"
                | "x-openstack-request-id"
        ) {
            req = req.header(k, v);
        }
    }
    if !r.body.is_empty() {
        req = req.body(r.body.clone());
    }
    let resp = req.send().await.expect("the real Placement answers");
    let status = resp.status().as_u16();
    let body = resp.text().await.unwrap_or_default();
    Reply {
        status,
        headers: Vec::new(),
        body,
    }
}

pub fn assert_no_valid_host(result: &Result<Vec<Vec<Selection>>, RemoteError>, reason: &str) {
    match result {
        Err(e) => {
            assert_eq!(e.class, "NoValidHost", "{e:?}");
            assert_eq!(e.message, format!("No valid host was found. {reason}"));
        }
        Ok(s) => panic!("expected NoValidHost, got {s:?}"),
    }
}

/// A provider's usage of `class` is within `(total - reserved) * allocation_ratio`.
pub async fn assert_within_capacity(admin: &Admin, rp: &str) {
    let usages = admin.usages(rp).await;
    let inventory = admin.inventory(rp).await;
    for (class, inv) in inventory.as_object().expect("inventories") {
        let capacity = (inv["total"].as_f64().unwrap_or(0.0)
            - inv["reserved"].as_f64().unwrap_or(0.0))
            * inv["allocation_ratio"].as_f64().unwrap_or(1.0);
        let used = usages[class].as_f64().unwrap_or(0.0);
        assert!(
            used <= capacity,
            "{rp} {class}: usage {used} exceeds capacity {capacity}"
        );
    }
}

/// An aggregate in the API database with `metadata`, holding `hosts`.
pub async fn aggregate(
    api: &sqlx::MySqlPool,
    name: &str,
    metadata: &[(&str, &str)],
    hosts: &[&str],
) {
    let id = sqlx::query(
        "INSERT INTO aggregates (created_at, uuid, name) VALUES (UTC_TIMESTAMP(), UUID(), ?)",
    )
    .bind(name)
    .execute(api)
    .await
    .expect("aggregate row")
    .last_insert_id();
    for (key, value) in metadata {
        sqlx::query("INSERT INTO aggregate_metadata (created_at, aggregate_id, `key`, value) VALUES (UTC_TIMESTAMP(), ?, ?, ?)")
            .bind(id)
            .bind(key)
            .bind(value)
            .execute(api)
            .await
            .expect("aggregate metadata row");
    }
    for host in hosts {
        sqlx::query("INSERT INTO aggregate_hosts (created_at, aggregate_id, host) VALUES (UTC_TIMESTAMP(), ?, ?)")
            .bind(id)
            .bind(host)
            .execute(api)
            .await
            .expect("aggregate host row");
    }
}
