// SPDX-License-Identifier: Apache-2.0
//! `nova-scheduler-rs snapshot --output FILE`: what the decision reads, in one JSON
//! file: every enabled cell's services, compute nodes and instances (the rows the
//! host states are built from), the aggregates, the minimum compute version, the
//! allocation-ratio defaults, the flavors, and Placement's providers with their
//! inventories, usages, traits and aggregates (from the provider index when
//! `[placement_database] connection` is set, else read from Placement's API). No
//! URL, password or token is written.
//!
//! `nova-scheduler-rs simulate --snapshot FILE`: requests replayed offline on it
//! with nova.conf's filters and weighers: nova's request filters (reading the
//! snapshot's aggregates and minimum compute version), the candidates computed as the provider index
//! computes them, claims recorded in memory, host states consumed decision after
//! decision as the daemon's cache keeps them.

use super::plan::{by_provider, Planner};
use super::{boot_spec, describe_flavor, find_flavor, read_flavors, FlavorRecord, Live, READ_ONLY};
use crate::config::{Config, SimulateArgs, SnapshotArgs};
use crate::manager::request_filter;
use crate::manager::PrefilterOptions;
use crate::model::{Aggregate, Flavor, RequestSpec};
use crate::placement::index::model::NameTable;
use crate::placement::index::{local_candidates, Inventory, LocalRequest, Provider, ProviderIndex};
use crate::placement::resource_request::resources_from_request_spec;
use crate::placement::{AllocationCandidates, PlacementClient, QueryOptions};
use crate::release::{NovaSeries, ReleaseChoice};
use crate::state::StateSnapshot;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::convert::Infallible;
use std::path::Path;
use std::sync::Arc;

/// The `format` of the files this version writes and reads.
pub const FORMAT: &str = "nova-scheduler-rs snapshot 1";

/// One snapshot file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    pub format: String,
    pub taken_at: DateTime<Utc>,
    /// `provider index` or `placement`.
    pub providers_from: String,
    pub state: StateSnapshot,
    pub providers: Vec<ProviderSnapshot>,
    /// Every trait and resource class Placement knows (a request may name one no
    /// provider has: Placement answers it, an unknown one it refuses).
    #[serde(default)]
    pub traits: BTreeSet<String>,
    #[serde(default)]
    pub resource_classes: BTreeSet<String>,
    pub flavors: Vec<FlavorRecord>,
    /// The release the cloud was scheduled as when the snapshot was taken (`2025.1`);
    /// absent from snapshots taken before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nova_release: Option<String>,
}

impl Snapshot {
    /// The release to decide this snapshot's cloud as: `[nova_scheduler_rs]
    /// nova_release` when set, else the one recorded with the snapshot, else the
    /// newest.
    pub fn release_for(&self, config: &Config) -> Result<NovaSeries, String> {
        if let ReleaseChoice::Series(series) = config.nova_scheduler_rs.nova_release {
            return Ok(series);
        }
        match &self.nova_release {
            None => Ok(NovaSeries::NEWEST),
            Some(name) => NovaSeries::parse(name).ok_or_else(|| {
                format!("the snapshot's nova_release {name:?} is not a release known here")
            }),
        }
    }

    /// A snapshot file of this version's format.
    pub fn read(path: &Path) -> Result<Snapshot, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let snapshot: Snapshot =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        if snapshot.format != FORMAT {
            return Err(format!(
                "{}: format {:?} is not {FORMAT:?}",
                path.display(),
                snapshot.format
            ));
        }
        Ok(snapshot)
    }
}

/// One resource provider as Placement holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderSnapshot {
    pub uuid: String,
    #[serde(default)]
    pub name: Option<String>,
    pub generation: i64,
    #[serde(default)]
    pub parent_provider_uuid: Option<String>,
    #[serde(default)]
    pub root_provider_uuid: Option<String>,
    pub inventories: BTreeMap<String, InventorySnapshot>,
    #[serde(default)]
    pub usages: BTreeMap<String, i64>,
    #[serde(default)]
    pub traits: BTreeSet<String>,
    #[serde(default)]
    pub aggregates: BTreeSet<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InventorySnapshot {
    pub total: i64,
    pub reserved: i64,
    pub min_unit: i64,
    pub max_unit: i64,
    pub step_size: i64,
    pub allocation_ratio: f64,
}

/// Runs `snapshot`; returns the process exit code.
pub async fn run(args: &SnapshotArgs, config: Config) -> i32 {
    let snapshot = match take(config).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("snapshot: {e}");
            return 1;
        }
    };
    let text = match serde_json::to_string_pretty(&snapshot) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("snapshot: {e}");
            return 1;
        }
    };
    if let Err(e) = std::fs::write(&args.output, text + "\n") {
        eprintln!("snapshot: {}: {e}", args.output.display());
        return 1;
    }
    let (nodes, services, instances) = snapshot.state.counts();
    println!(
        "snapshot written to {}: {} cell(s), {nodes} compute node(s), {services} service(s), \
         {instances} instance(s), {} aggregate(s), {} provider(s) (from {}), {} flavor(s)",
        args.output.display(),
        snapshot.state.cells.len(),
        snapshot.state.aggregates.len(),
        snapshot.providers.len(),
        snapshot.providers_from,
        snapshot.flavors.len(),
    );
    println!("{READ_ONLY}");
    0
}

/// Reads everything the snapshot holds from the live cloud.
pub async fn take(config: Config) -> Result<Snapshot, String> {
    let live = Live::connect(config).await.map_err(|e| e.to_string())?;
    let state = live
        .store
        .snapshot()
        .await
        .map_err(|e| format!("could not read the cells: {e}"))?;
    let flavors = read_flavors(live.store.api_pool())
        .await
        .map_err(|e| format!("could not read the flavors: {e}"))?;
    let (providers, traits, resource_classes, providers_from) = match &live.index {
        Some(index) => {
            let index = index.snapshot();
            let names = |t: &NameTable| t.names().map(str::to_string).collect();
            (
                from_index(&index),
                names(&index.traits),
                names(&index.resource_classes),
                "provider index",
            )
        }
        None => {
            let (traits, classes) = names_from_placement(&live.placement).await?;
            (
                from_placement(&live.placement).await?,
                traits,
                classes,
                "placement",
            )
        }
    };
    Ok(Snapshot {
        format: FORMAT.to_string(),
        taken_at: Utc::now(),
        providers_from: providers_from.to_string(),
        state,
        providers,
        traits,
        resource_classes,
        flavors,
        nova_release: Some(live.prefilters.release.name().to_string()),
    })
}

/// The providers the index holds.
fn from_index(index: &ProviderIndex) -> Vec<ProviderSnapshot> {
    let uuid_of = |id: i64| index.providers.get(&id).map(|p| p.uuid.to_string());
    index
        .providers
        .values()
        .map(|p| ProviderSnapshot {
            uuid: p.uuid.to_string(),
            name: None,
            generation: p.generation,
            parent_provider_uuid: p.parent_id.and_then(uuid_of),
            root_provider_uuid: uuid_of(p.root_id),
            inventories: p
                .inventories
                .iter()
                .filter_map(|(rc, inv)| {
                    Some((
                        index.resource_classes.name(*rc)?.to_string(),
                        InventorySnapshot {
                            total: inv.total,
                            reserved: inv.reserved,
                            min_unit: inv.min_unit,
                            max_unit: inv.max_unit,
                            step_size: inv.step_size,
                            allocation_ratio: inv.allocation_ratio_text,
                        },
                    ))
                })
                .collect(),
            usages: p
                .usages
                .iter()
                .filter_map(|(rc, n)| Some((index.resource_classes.name(*rc)?.to_string(), *n)))
                .collect(),
            traits: p
                .traits
                .iter()
                .filter_map(|t| index.traits.name(*t).map(str::to_string))
                .collect(),
            aggregates: p
                .aggregates
                .iter()
                .filter_map(|a| index.aggregates.name(*a).map(str::to_string))
                .collect(),
        })
        .collect()
}

/// Every provider read from Placement's API (`GET /resource_providers` and each
/// one's inventories, usages, traits and aggregates).
async fn from_placement(placement: &PlacementClient) -> Result<Vec<ProviderSnapshot>, String> {
    const VERSION: &str = "1.36";
    let get = |path: String| async move {
        placement
            .get_json(&path, VERSION)
            .await
            .map_err(|e| format!("Placement GET {path}: {e}"))
    };
    let listed = get("/resource_providers".to_string()).await?;
    let mut out = Vec::new();
    for rp in listed["resource_providers"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let uuid = rp["uuid"].as_str().unwrap_or_default().to_string();
        let inventories = get(format!("/resource_providers/{uuid}/inventories")).await?;
        let usages = get(format!("/resource_providers/{uuid}/usages")).await?;
        let traits = get(format!("/resource_providers/{uuid}/traits")).await?;
        let aggregates = get(format!("/resource_providers/{uuid}/aggregates")).await?;
        let text = |v: &Value| v.as_str().map(str::to_string);
        out.push(ProviderSnapshot {
            uuid: uuid.clone(),
            name: text(&rp["name"]),
            generation: rp["generation"].as_i64().unwrap_or(0),
            parent_provider_uuid: text(&rp["parent_provider_uuid"]),
            root_provider_uuid: text(&rp["root_provider_uuid"]),
            inventories: serde_json::from_value(inventories["inventories"].clone())
                .map_err(|e| format!("inventories of {uuid}: {e}"))?,
            usages: serde_json::from_value(usages["usages"].clone())
                .map_err(|e| format!("usages of {uuid}: {e}"))?,
            traits: serde_json::from_value(traits["traits"].clone())
                .map_err(|e| format!("traits of {uuid}: {e}"))?,
            aggregates: serde_json::from_value(aggregates["aggregates"].clone())
                .map_err(|e| format!("aggregates of {uuid}: {e}"))?,
        });
    }
    Ok(out)
}

/// Every trait and resource class name Placement knows.
async fn names_from_placement(
    placement: &PlacementClient,
) -> Result<(BTreeSet<String>, BTreeSet<String>), String> {
    let traits = placement
        .get_json("/traits", "1.36")
        .await
        .map_err(|e| format!("Placement GET /traits: {e}"))?;
    let classes = placement
        .get_json("/resource_classes", "1.36")
        .await
        .map_err(|e| format!("Placement GET /resource_classes: {e}"))?;
    let traits = serde_json::from_value(traits["traits"].clone())
        .map_err(|e| format!("Placement GET /traits: {e}"))?;
    let classes = classes["resource_classes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["name"].as_str().map(str::to_string))
        .collect();
    Ok((traits, classes))
}

/// The providers as the provider index holds them (internal ids assigned in the
/// snapshot's order), with Placement's traits and resource classes.
pub fn provider_index(snapshot: &Snapshot) -> ProviderIndex {
    let providers = &snapshot.providers;
    let names = |known: &BTreeSet<String>, f: &dyn Fn(&ProviderSnapshot) -> Vec<String>| {
        let mut all: BTreeSet<String> = providers.iter().flat_map(f).collect();
        all.extend(known.iter().cloned());
        NameTable::from_rows(all.into_iter().enumerate().map(|(i, n)| (i as i64 + 1, n)))
    };
    let resource_classes = names(&snapshot.resource_classes, &|p| {
        p.inventories
            .keys()
            .chain(p.usages.keys())
            .cloned()
            .collect()
    });
    let traits = names(&snapshot.traits, &|p| p.traits.iter().cloned().collect());
    let aggregates = names(&BTreeSet::new(), &|p| {
        p.aggregates.iter().cloned().collect()
    });
    let ids: BTreeMap<&str, i64> = providers
        .iter()
        .enumerate()
        .map(|(i, p)| (p.uuid.as_str(), i as i64 + 1))
        .collect();
    let mut index = ProviderIndex::default();
    index.resource_classes = resource_classes;
    index.traits = traits;
    index.aggregates = aggregates;
    for p in providers {
        let id = ids[p.uuid.as_str()];
        let rc = |name: &str| index.resource_classes.id(name);
        let provider = Provider {
            id,
            uuid: Arc::from(p.uuid.as_str()),
            generation: p.generation,
            parent_id: p
                .parent_provider_uuid
                .as_deref()
                .and_then(|u| ids.get(u).copied()),
            root_id: p
                .root_provider_uuid
                .as_deref()
                .and_then(|u| ids.get(u).copied())
                .unwrap_or(id),
            inventories: p
                .inventories
                .iter()
                .filter_map(|(name, inv)| {
                    Some((
                        rc(name)?,
                        Inventory {
                            total: inv.total,
                            reserved: inv.reserved,
                            min_unit: inv.min_unit,
                            max_unit: inv.max_unit,
                            step_size: inv.step_size,
                            allocation_ratio: inv.allocation_ratio as f32,
                            allocation_ratio_text: inv.allocation_ratio,
                        },
                    ))
                })
                .collect(),
            usages: p
                .usages
                .iter()
                .filter_map(|(name, n)| Some((rc(name)?, *n)))
                .collect(),
            traits: p.traits.iter().filter_map(|t| index.traits.id(t)).collect(),
            aggregates: p
                .aggregates
                .iter()
                .filter_map(|a| index.aggregates.id(a))
                .collect(),
        };
        index.upsert(provider);
    }
    index
}

/// One request of `simulate --requests FILE`: a flavor of the snapshot by name, or
/// its fields, plus the request's own.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct SimRequest {
    pub flavor: Option<String>,
    pub vcpus: Option<i64>,
    pub memory_mb: Option<i64>,
    pub root_gb: Option<i64>,
    pub ephemeral_gb: Option<i64>,
    pub swap: Option<i64>,
    pub extra_specs: BTreeMap<String, String>,
    pub num_instances: Option<i64>,
    pub availability_zone: Option<String>,
    pub project_id: Option<String>,
    pub user_id: Option<String>,
}

impl SimRequest {
    fn spec(&self, flavors: &[FlavorRecord]) -> Result<RequestSpec, String> {
        let mut flavor = match &self.flavor {
            Some(name) => find_flavor(flavors, name)
                .ok_or_else(|| format!("no flavor {name:?} in the snapshot"))?
                .flavor(),
            None => Flavor::default(),
        };
        let set = |field: &mut i64, v: Option<i64>| {
            if let Some(v) = v {
                *field = v;
            }
        };
        set(&mut flavor.vcpus, self.vcpus);
        set(&mut flavor.memory_mb, self.memory_mb);
        set(&mut flavor.root_gb, self.root_gb);
        set(&mut flavor.ephemeral_gb, self.ephemeral_gb);
        set(&mut flavor.swap, self.swap);
        flavor.extra_specs.extend(self.extra_specs.clone());
        Ok(boot_spec(
            flavor,
            self.num_instances.unwrap_or(1).max(1),
            self.availability_zone.clone(),
            self.project_id.clone(),
            self.user_id.clone(),
        ))
    }
}

/// The request filters read the snapshot's aggregates and minimum compute version
/// as the daemon reads the API and cell databases (MySQL's comparisons, which ignore
/// case, included).
impl request_filter::RequestFilterSource for StateSnapshot {
    type Error = std::convert::Infallible;

    async fn aggregate_uuids_for_az(&self, az: &str) -> Result<Vec<String>, Infallible> {
        let mut found: Vec<&Aggregate> = self
            .aggregates
            .iter()
            .filter(|a| a.availability_zone().is_some_and(|z| same_text(z, az)))
            .collect();
        found.sort_by_key(|a| a.id);
        Ok(found.into_iter().map(|a| a.uuid.clone()).collect())
    }

    async fn aggregates_with_metadata_value(
        &self,
        value: &str,
    ) -> Result<Vec<(String, String)>, Infallible> {
        Ok(self
            .aggregates
            .iter()
            .flat_map(|a| {
                a.metadata
                    .iter()
                    .filter(|(_, v)| same_text(v, value))
                    .map(|(k, _)| (a.uuid.clone(), k.clone()))
            })
            .collect())
    }

    async fn aggregates_requiring_traits_other_than(
        &self,
        keys: &[String],
    ) -> Result<BTreeSet<String>, Infallible> {
        Ok(self
            .aggregates
            .iter()
            .filter(|a| {
                a.metadata.iter().any(|(k, v)| {
                    same_text(v, "required")
                        && k.get(..6).is_some_and(|p| same_text(p, "trait:"))
                        && !keys.iter().any(|key| same_text(key, k))
                })
            })
            .map(|a| a.uuid.clone())
            .collect())
    }

    async fn min_compute_service_version(&self) -> Option<i64> {
        self.min_compute_service_version
    }
}

/// MySQL's `=` under nova's case-insensitive collation, for ASCII text.
fn same_text(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

/// The candidates of `spec` on `index`, as the provider index answers them (with
/// nova's PCPU fallback question).
pub(crate) fn candidates(
    spec: &mut RequestSpec,
    index: &ProviderIndex,
    opts: &PrefilterOptions,
    max_placement_results: u32,
) -> Result<AllocationCandidates, String> {
    let query = QueryOptions {
        max_placement_results,
        release: opts.release,
    };
    let ask = |spec: &mut RequestSpec, pinning: bool| {
        let rr =
            resources_from_request_spec(spec, &query, pinning, None).map_err(|e| e.to_string())?;
        let found = LocalRequest::from_params(&rr.query_params())
            .and_then(|req| local_candidates(index, &req))
            .map_err(|e| format!("cannot be answered offline: {}", e.detail))?;
        Ok::<_, String>((found, rr.cpu_pinning_requested))
    };
    let (mut found, pinning) = ask(spec, true)?;
    if pinning && !opts.disable_fallback_pcpu_query {
        let (more, _) = ask(spec, false)?;
        found.merge(more);
    }
    Ok(found)
}

/// Runs `simulate --snapshot`; returns the process exit code.
pub async fn simulate(args: &SimulateArgs, path: &Path, config: Config) -> i32 {
    match replay(args, path, config).await {
        Ok(text) => {
            print!("{text}");
            0
        }
        Err(e) => {
            eprintln!("simulate: {e}");
            if e.starts_with("usage:") {
                64
            } else {
                1
            }
        }
    }
}

async fn replay(args: &SimulateArgs, path: &Path, config: Config) -> Result<String, String> {
    let snapshot = Snapshot::read(path)?;
    let requests: Vec<SimRequest> = match (&args.flavor, &args.requests) {
        (Some(name), _) => vec![
            SimRequest {
                flavor: Some(name.clone()),
                ..SimRequest::default()
            };
            args.count.unwrap_or(1) as usize
        ],
        (None, Some(file)) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| format!("usage: --requests {file}: {e}"))?;
            serde_json::from_str(&text).map_err(|e| format!("usage: --requests {file}: {e}"))?
        }
        (None, None) => {
            return Err(
                "usage: with --snapshot, give --flavor NAME [--count N] or --requests FILE".into(),
            )
        }
    };
    let release = snapshot.release_for(&config)?;
    let scheduler = crate::app::build_scheduler_as(&config, release).map_err(|e| e.to_string())?;
    let prefilters =
        crate::app::prefilter_options_as(&config, release).map_err(|e| e.to_string())?;
    let max_placement_results = config.scheduler.max_placement_results;
    let default_az = config.default.default_availability_zone.clone();
    let filters: Vec<String> = scheduler
        .filters
        .names()
        .iter()
        .map(|s| s.to_string())
        .collect();
    let weighers: Vec<String> = scheduler
        .weighers
        .names()
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut index = provider_index(&snapshot);
    let mut planner = Planner::new(
        scheduler,
        snapshot.state.host_states(),
        args.seed.unwrap_or(42),
    );
    let mut results = Vec::new();
    let mut lines = Vec::new();
    lines.push(format!(
        "snapshot {} taken {}: {} host(s), {} provider(s)",
        path.display(),
        snapshot.taken_at.to_rfc3339(),
        planner.hosts.len(),
        snapshot.providers.len()
    ));
    lines.push(format!("decided as {release}"));
    lines.push(format!("filters: {}", filters.join(", ")));
    lines.push(format!("weighers: {}", weighers.join(", ")));
    let mut placed_total = 0;
    for (r, request) in requests.iter().enumerate() {
        let mut spec = request.spec(&snapshot.flavors)?;
        let label = describe_flavor(&spec.flavor);
        let n = spec.num_instances as usize;
        let outcome = async {
            request_filter::process(&mut spec, &snapshot.state, &prefilters)
                .await
                .map_err(|e| e.to_string())?;
            let found = candidates(&mut spec, &index, &prefilters, max_placement_results)?;
            if found.allocation_requests.is_empty() {
                return Err("No valid host was found. ".to_string());
            }
            let uuids: Vec<String> = (0..n).map(|_| uuid::Uuid::new_v4().to_string()).collect();
            let by_rp = by_provider(found.allocation_requests);
            planner
                .decide(&spec, uuids, &by_rp, &mut index, Utc::now())
                .await
                .map_err(|e| e.to_string())
        }
        .await;
        match outcome {
            Ok(placed) => {
                for (i, p) in placed.iter().enumerate() {
                    let h = &planner.hosts[p.host];
                    let alternates: Vec<String> = p
                        .alternates
                        .iter()
                        .map(|&a| planner.hosts[a].host.to_string())
                        .collect();
                    lines.push(format!(
                        "request {}: {label}, instance {}/{n} -> {} (alternates: {})",
                        r + 1,
                        i + 1,
                        h.host,
                        if alternates.is_empty() {
                            "none".to_string()
                        } else {
                            alternates.join(", ")
                        }
                    ));
                    placed_total += 1;
                    results.push(json!({
                        "request": r + 1, "instance": i + 1, "host": h.host.to_string(),
                        "nodename": h.nodename.to_string(),
                        "availability_zone": h.availability_zone(&default_az),
                        "alternates": alternates,
                    }));
                }
            }
            Err(e) => {
                lines.push(format!("request {}: {label}: {e}", r + 1));
                results.push(json!({"request": r + 1, "error": e}));
            }
        }
    }
    if args.json {
        let doc = json!({
            "snapshot": path.display().to_string(),
            "filters": filters,
            "weighers": weighers,
            "placements": results,
            "placed": placed_total,
        });
        return serde_json::to_string_pretty(&doc)
            .map(|t| t + "\n")
            .map_err(|e| e.to_string());
    }
    lines.push(format!(
        "{placed_total} instance(s) placed; nothing was written (offline)"
    ));
    Ok(lines.join("\n") + "\n")
}
