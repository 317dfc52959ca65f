// SPDX-License-Identifier: Apache-2.0
//! nova's `SchedulerManager` RPC endpoint (target version 4.5, no namespace).
//!
//! Supported RPC versions of `select_destinations` (from nova's `rpcapi.py` history):
//! - 4.5: `spec_obj`, `instance_uuids`, `return_objects`, `return_alternates` (supported)
//! - 4.4 / 4.3: `spec_obj` with or without `instance_uuids` (supported: no claim
//!   without uuids, legacy dicts returned)
//! - 4.0–4.2: legacy `request_spec` / `filter_properties` dicts, hydrated as nova's
//!   `RequestSpec.from_primitives` does (no claim: no instance uuids)
//!
//! Fanout casts: `update_aggregates` / `delete_aggregate` (4.1) update the aggregate
//! cache; `update_instance_info` / `delete_instance_info` / `sync_instance_info` (4.2)
//! are accepted and need no state (instances are read per request, see `cast`).

mod claims;
pub mod prefilters;

pub use prefilters::PrefilterOptions;

use crate::model::{pyjson, Aggregate, HostState, RequestSpec, SchedulerLimits, Selection};
use crate::placement::{query, PlacementClient};
use crate::rpc::{Endpoint, EndpointFuture, IncomingCall, RemoteError, RequestContext};
use crate::scheduler::{ClaimError, ScheduleError, ScheduleOutcome, ScheduleRequest, Scheduler};
use crate::state::HostStateStore;
use chrono::Utc;
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tracing::{debug, info, info_span, Instrument};

/// The Placement microversion nova uses for candidates and claims.
pub const ALLOCATION_REQUEST_VERSION: &str = "1.36";

/// Options the manager reads, from nova.conf.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// `[scheduler] max_placement_results`.
    pub max_placement_results: u32,
    /// `[DEFAULT] default_availability_zone`.
    pub default_availability_zone: String,
    /// Seed for `host_subset_size` / shuffle randomness; `None` = from entropy.
    pub rng_seed: Option<u64>,
    /// The request filters' options and `[workarounds] disable_fallback_pcpu_query`.
    pub prefilters: PrefilterOptions,
}

pub struct SchedulerManager {
    scheduler: Scheduler,
    store: Arc<HostStateStore>,
    placement: Arc<PlacementClient>,
    options: ManagerOptions,
    rng: Mutex<StdRng>,
}

impl SchedulerManager {
    pub fn new(
        scheduler: Scheduler,
        store: Arc<HostStateStore>,
        placement: Arc<PlacementClient>,
        options: ManagerOptions,
    ) -> Self {
        let rng = match options.rng_seed {
            Some(seed) => StdRng::seed_from_u64(seed),
            None => StdRng::seed_from_u64(rand::random()),
        };
        SchedulerManager {
            scheduler,
            store,
            placement,
            options,
            rng: Mutex::new(rng),
        }
    }

    /// `select_destinations` as nova 34's manager runs it (see the boundary facts §2.1).
    pub async fn select_destinations(
        &self,
        ctx: &RequestContext,
        args: &Map<String, Value>,
    ) -> Result<Value, RemoteError> {
        let started = Instant::now();
        let args = SelectArgs::decode(args)?;
        let mut spec = args.spec;
        let is_rebuild = spec.is_rebuild();
        let global_request_id = ctx
            .global_request_id()
            .or(ctx.request_id())
            .map(str::to_string);

        // Steps 3–4: prefilters, Placement query, candidates indexed by provider.
        let mut candidates_by_rp: Option<HashMap<String, Vec<Value>>> = None;
        let mut compute_uuids: Option<Vec<String>> = None;
        if !is_rebuild {
            prefilters::process(&mut spec, &self.store, &self.options.prefilters)
                .await
                .map_err(prefilters::PrefilterError::into_remote)?;
            let query_options = query::QueryOptions {
                max_placement_results: self.options.max_placement_results,
            };
            let found = prefilters::allocation_candidates(
                &mut spec,
                &self.store,
                &self.placement,
                &query_options,
                &self.options.prefilters,
                global_request_id.as_deref(),
            )
            .await
            .map_err(prefilters::PrefilterError::into_remote)?;
            if found.allocation_requests.is_empty() {
                return Err(no_valid_host(String::new()));
            }
            let mut index: HashMap<String, Vec<Value>> = HashMap::new();
            for ar in &found.allocation_requests {
                if let Some(allocs) = ar.get("allocations").and_then(Value::as_object) {
                    for rp in allocs.keys() {
                        index.entry(rp.clone()).or_default().push(ar.clone());
                    }
                }
            }
            compute_uuids = Some(found.provider_summaries.keys().cloned().collect());
            candidates_by_rp = Some(index);
        }

        // Step 7: host states for the providers Placement returned (all nodes on rebuild).
        let cell = spec
            .requested_destination
            .as_ref()
            .filter(|d| !d.allow_cross_cell_move)
            .and_then(|d| d.cell_uuid.clone());
        let mut hosts = self
            .store
            .host_states(compute_uuids.as_deref(), cell.as_deref())
            .await
            .map_err(|e| RemoteError::runtime_error(format!("could not read host states: {e}")))?;
        if let Some(index) = &candidates_by_rp {
            for h in &mut hosts {
                h.allocation_candidates = h
                    .uuid
                    .as_ref()
                    .and_then(|u| index.get(u))
                    .cloned()
                    .unwrap_or_default();
            }
        }
        let loaded = started.elapsed();

        let return_alternates = args.return_alternates && args.return_objects;
        let request = ScheduleRequest {
            spec,
            instance_uuids: args.instance_uuids,
            use_placement: candidates_by_rp.is_some(),
            return_alternates,
            now: Utc::now(),
        };
        let project_id = request.spec.project_id.clone().unwrap_or_default();
        let user_id = request
            .spec
            .user_id
            .clone()
            .or_else(|| ctx.user_id().map(str::to_string))
            .unwrap_or_default();
        let mut claimer =
            claims::PlacementClaims::new(&self.placement, project_id, user_id, global_request_id);
        // The RNG lock is held only for the synchronous parts; a fresh RNG per request
        // is derived so concurrent requests never wait on each other's claims.
        let mut rng = {
            let mut shared = self.rng.lock().unwrap_or_else(|p| p.into_inner());
            StdRng::seed_from_u64(rand::RngExt::random(&mut *shared))
        };
        let outcome = self
            .scheduler
            .schedule(hosts, request, &mut claimer, &mut rng)
            .await
            .map_err(schedule_error)?;
        debug!(
            hosts_loaded_ms = loaded.as_millis() as u64,
            total_ms = started.elapsed().as_millis() as u64,
            "select_destinations done"
        );
        Ok(self.encode(&outcome, args.return_objects))
    }

    /// The methods of nova's manager this daemon serves.
    pub fn has_method(&self, method: &str) -> bool {
        matches!(
            method,
            "select_destinations"
                | "update_aggregates"
                | "delete_aggregate"
                | "update_instance_info"
                | "delete_instance_info"
                | "sync_instance_info"
        )
    }

    /// The fanout casts (nova-api's aggregate changes, nova-compute's instance info).
    pub fn cast(&self, method: &str, args: &Map<String, Value>) -> Result<Value, RemoteError> {
        match method {
            "update_aggregates" => {
                let aggregates = args
                    .get("aggregates")
                    .map(Aggregate::list_from_primitive)
                    .transpose()
                    .map_err(|e| RemoteError::value_error(format!("invalid aggregates: {e}")))?
                    .unwrap_or_default();
                info!(aggregates = ?aggregates.iter().map(|a| a.id).collect::<Vec<_>>(), "aggregates updated");
                self.store.update_aggregates(aggregates);
            }
            "delete_aggregate" => {
                let aggregate = args
                    .get("aggregate")
                    .map(Aggregate::from_primitive)
                    .transpose()
                    .map_err(|e| RemoteError::value_error(format!("invalid aggregate: {e}")))?
                    .ok_or_else(|| RemoteError::type_error("delete_aggregate() missing required argument: 'aggregate'"))?;
                info!(aggregate = aggregate.id, "aggregate deleted");
                self.store.delete_aggregate(aggregate.id);
            }
            // nova keeps a per-host instance cache fed by these casts and, when a host's
            // entry is not marked updated, reads `instances` from the cell database for
            // each request. We always take that database path (same instance uuids per
            // host), so the casts need no state here.
            _ => debug!(method, "instance info cast received; instances are read from the cell database per request"),
        }
        Ok(Value::Null)
    }

    /// Step 11: Selections (objects) or the legacy list of dicts.
    fn encode(&self, outcome: &ScheduleOutcome, return_objects: bool) -> Value {
        let selection = |d: &crate::scheduler::Destination| {
            to_selection(
                &outcome.hosts[d.host],
                d.allocation_request.as_ref(),
                &self.options.default_availability_zone,
            )
        };
        if return_objects {
            Value::Array(
                outcome
                    .destinations
                    .iter()
                    .map(|list| {
                        Value::Array(list.iter().map(|d| selection(d).to_primitive()).collect())
                    })
                    .collect(),
            )
        } else {
            Value::Array(
                outcome
                    .destinations
                    .iter()
                    .filter_map(|list| list.first())
                    .map(|d| selection(d).to_legacy_dict())
                    .collect(),
            )
        }
    }
}

/// nova's `Selection.from_host_state`.
fn to_selection(
    host: &HostState,
    allocation_request: Option<&Value>,
    default_az: &str,
) -> Selection {
    Selection {
        compute_node_uuid: host.uuid.clone().unwrap_or_default(),
        service_host: host.host.clone(),
        nodename: host.nodename.clone(),
        cell_uuid: host.cell_uuid.clone(),
        limits: SchedulerLimits {
            numa_topology: host.limits.get("numa_topology").cloned(),
            ..Default::default()
        },
        allocation_request: allocation_request.map(pyjson::dumps),
        allocation_request_version: allocation_request
            .map(|_| ALLOCATION_REQUEST_VERSION.to_string()),
        availability_zone: Some(host.availability_zone(default_az)),
    }
}

fn no_valid_host(reason: String) -> RemoteError {
    RemoteError::no_valid_host(reason)
}

fn schedule_error(e: ScheduleError) -> RemoteError {
    match e {
        ScheduleError::NoValidHost { reason } => no_valid_host(reason),
        ScheduleError::Weigher(w) => RemoteError::nova(w.class, w.message, 404, Map::new()),
        ScheduleError::Claim(c) => {
            let (class, consumer_uuid, error) = match &c {
                ClaimError::AllocationUpdateFailed {
                    consumer_uuid,
                    error,
                } => ("AllocationUpdateFailed", consumer_uuid, error),
                ClaimError::AllocationDeleteFailed {
                    consumer_uuid,
                    error,
                } => ("AllocationDeleteFailed", consumer_uuid, error),
            };
            let mut kwargs = Map::new();
            kwargs.insert("consumer_uuid".into(), json!(consumer_uuid));
            kwargs.insert("error".into(), json!(error));
            RemoteError::nova(class, c.to_string(), 500, kwargs)
        }
    }
}

/// The arguments of `select_destinations` at RPC 4.3–4.5.
struct SelectArgs {
    spec: RequestSpec,
    instance_uuids: Option<Vec<String>>,
    return_objects: bool,
    return_alternates: bool,
}

impl SelectArgs {
    fn decode(args: &Map<String, Value>) -> Result<Self, RemoteError> {
        // RPC 4.3+ sends `spec_obj`; 4.0–4.2 the legacy dicts (nova's `from_primitives`).
        let spec = match args.get("spec_obj") {
            Some(spec_obj) => RequestSpec::from_primitive(spec_obj)
                .map_err(|e| RemoteError::value_error(format!("invalid spec_obj: {e}")))?,
            None => {
                let request_spec = args.get("request_spec").filter(|v| !v.is_null()).ok_or_else(|| {
                    RemoteError::type_error("select_destinations() needs spec_obj (RPC 4.3+) or request_spec (RPC 4.0)")
                })?;
                let filter_properties = args.get("filter_properties").unwrap_or(&Value::Null);
                RequestSpec::from_legacy(request_spec, filter_properties).map_err(|e| {
                    RemoteError::value_error(format!("invalid legacy request_spec: {e}"))
                })?
            }
        };
        let instance_uuids = match args.get("instance_uuids") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .map(|v| {
                        v.as_str().map(str::to_string).ok_or_else(|| {
                            RemoteError::value_error("instance_uuids must be a list of strings")
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?,
            ),
            Some(_) => {
                return Err(RemoteError::value_error(
                    "instance_uuids must be a list of strings",
                ))
            }
        };
        let flag = |name: &str| {
            args.get(name)
                .map(|v| crate::model::object::flexible_bool(v).unwrap_or(false))
                .unwrap_or(false)
        };
        Ok(SelectArgs {
            spec,
            instance_uuids,
            return_objects: flag("return_objects"),
            return_alternates: flag("return_alternates"),
        })
    }
}

/// The RPC endpoint wrapper: `Endpoint::call` needs `'static` futures, so it holds an `Arc`.
pub struct ManagerEndpoint(pub Arc<SchedulerManager>);

impl Endpoint for ManagerEndpoint {
    fn namespace(&self) -> Option<&str> {
        None
    }

    fn version(&self) -> (u32, u32) {
        (4, 5)
    }

    fn has_method(&self, method: &str) -> bool {
        self.0.has_method(method)
    }

    fn call(&self, call: IncomingCall) -> EndpointFuture {
        let manager = Arc::clone(&self.0);
        let span = info_span!(
            "select_destinations",
            request_id = call.context.request_id().unwrap_or("-")
        );
        if call.method != "select_destinations" {
            let result = manager.cast(&call.method, &call.args);
            return Box::pin(async move { result });
        }
        Box::pin(
            async move {
                let started = Instant::now();
                let result = manager.select_destinations(&call.context, &call.args).await;
                match &result {
                    Ok(_) => info!(elapsed_ms = started.elapsed().as_millis() as u64, "select_destinations answered"),
                    Err(e) => info!(elapsed_ms = started.elapsed().as_millis() as u64, class = %e.class, message = %e.message, "select_destinations failed"),
                }
                result
            }
            .instrument(span),
        )
    }
}
