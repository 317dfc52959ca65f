// SPDX-License-Identifier: Apache-2.0
//! Operator tools: `capacity` (how many more of a flavor fit, and where, on the
//! live cloud), `snapshot` (what the decision reads, in one JSON file) and
//! `simulate --snapshot` (requests replayed offline on a snapshot) and `replay`
//! (recorded calls decided again on a snapshot, and compared). They decide
//! with the daemon's decision core and nova.conf's filters and weighers, and
//! write nothing: no `services` row, no Placement allocation, no RPC, no database
//! row (the allocation-ratio write-back is off).

pub mod capacity;
pub mod plan;
pub mod replay;
pub mod snapshot;

use crate::app::{self, AppError};
use crate::config::Config;
use crate::manager::PrefilterOptions;
use crate::model::{Flavor, ImageMeta, RequestSpec};
use crate::placement::index::{IndexLoader, LiveIndex};
use crate::placement::PlacementClient;
use crate::scheduler::Scheduler;
use crate::state::HostStateStore;
use sqlx::mysql::MySqlPool;
use sqlx::Row;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The line every tool that reads the live cloud ends with.
pub const READ_ONLY: &str = "read-only: no service row, no claim, no RPC was written";

/// The live cloud as the daemon reads it, connected without writing anything.
pub struct Live {
    pub config: Config,
    pub scheduler: Scheduler,
    pub store: Arc<HostStateStore>,
    pub placement: Arc<PlacementClient>,
    /// The provider index, when `[placement_database] connection` is set.
    pub index: Option<Arc<LiveIndex>>,
    pub prefilters: PrefilterOptions,
}

impl Live {
    /// The Scheduler, the host-state store (read-only), the Placement client and the
    /// provider index, built from nova.conf as the daemon builds them.
    pub async fn connect(config: Config) -> Result<Live, AppError> {
        let mut state = app::state_options(&config)?;
        state.read_only = true;
        let store = Arc::new(HostStateStore::connect(state).await?);
        // Decided as the daemon decides: as the release the control plane runs.
        let release = app::resolve_release(&config, &store.newest_service_versions().await)?.series;
        let scheduler = app::build_scheduler_as(&config, release)?;
        let prefilters = app::prefilter_options_as(&config, release)?;
        let placement = Arc::new(PlacementClient::new(app::placement_options(&config)?)?);
        let index = match &config.placement_database_url {
            Some(url) => {
                let sqlx_url = url.to_sqlx_url().map_err(|e| {
                    AppError::Config(format!("[placement_database] connection: {e}"))
                })?;
                let loader = IndexLoader::connect(&sqlx_url).await.map_err(|e| {
                    AppError::Config(format!("[placement_database] connection: {e}"))
                })?;
                Some(
                    LiveIndex::load(loader)
                        .await
                        .map_err(|e| AppError::Config(format!("[placement_database]: {e}")))?,
                )
            }
            None => None,
        };
        Ok(Live {
            config,
            scheduler,
            store,
            placement,
            index,
            prefilters,
        })
    }
}

/// A flavor as nova's API database holds it (`flavors` + `flavor_extra_specs`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct FlavorRecord {
    pub id: i64,
    pub flavorid: String,
    pub name: String,
    pub vcpus: i64,
    pub memory_mb: i64,
    pub root_gb: i64,
    pub ephemeral_gb: i64,
    pub swap: i64,
    #[serde(default)]
    pub extra_specs: BTreeMap<String, String>,
}

impl FlavorRecord {
    pub fn flavor(&self) -> Flavor {
        Flavor {
            id: Some(self.id),
            name: Some(self.name.clone()),
            flavorid: Some(self.flavorid.clone()),
            memory_mb: self.memory_mb,
            vcpus: self.vcpus,
            root_gb: self.root_gb,
            ephemeral_gb: self.ephemeral_gb,
            swap: self.swap,
            extra_specs: self.extra_specs.clone(),
        }
    }
}

/// Every flavor of the API database with its extra specs, by id.
pub async fn read_flavors(api: &MySqlPool) -> Result<Vec<FlavorRecord>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT CAST(id AS SIGNED) AS id, flavorid, name, CAST(vcpus AS SIGNED) AS vcpus, \
         CAST(memory_mb AS SIGNED) AS memory_mb, CAST(COALESCE(root_gb, 0) AS SIGNED) AS root_gb, \
         CAST(COALESCE(ephemeral_gb, 0) AS SIGNED) AS ephemeral_gb, \
         CAST(swap AS SIGNED) AS swap FROM flavors ORDER BY id",
    )
    .fetch_all(api)
    .await?;
    let mut flavors = Vec::with_capacity(rows.len());
    for row in rows {
        flavors.push(FlavorRecord {
            id: row.try_get("id")?,
            flavorid: row.try_get("flavorid")?,
            name: row.try_get("name")?,
            vcpus: row.try_get("vcpus")?,
            memory_mb: row.try_get("memory_mb")?,
            root_gb: row.try_get("root_gb")?,
            ephemeral_gb: row.try_get("ephemeral_gb")?,
            swap: row.try_get("swap")?,
            extra_specs: BTreeMap::new(),
        });
    }
    let specs = sqlx::query(
        "SELECT CAST(flavor_id AS SIGNED) AS flavor_id, `key`, value FROM flavor_extra_specs",
    )
    .fetch_all(api)
    .await?;
    for row in specs {
        let id: i64 = row.try_get("flavor_id")?;
        let key: String = row.try_get("key")?;
        let value: Option<String> = row.try_get("value")?;
        if let Some(f) = flavors.iter_mut().find(|f| f.id == id) {
            f.extra_specs.insert(key, value.unwrap_or_default());
        }
    }
    Ok(flavors)
}

/// The flavor named `name` (else whose flavorid is `name`).
pub fn find_flavor<'a>(flavors: &'a [FlavorRecord], name: &str) -> Option<&'a FlavorRecord> {
    flavors
        .iter()
        .find(|f| f.name == name)
        .or_else(|| flavors.iter().find(|f| f.flavorid == name))
}

/// `KEY=VALUE` extra specs of the command line.
pub fn parse_extra_specs(specs: &[String]) -> Result<BTreeMap<String, String>, String> {
    specs
        .iter()
        .map(|s| match s.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(format!("--extra-spec {s:?}: expected KEY=VALUE")),
        })
        .collect()
}

/// A boot request as nova-conductor sends it for `num_instances` of `flavor`, with
/// an image without properties.
pub fn boot_spec(
    flavor: Flavor,
    num_instances: i64,
    availability_zone: Option<String>,
    project_id: Option<String>,
    user_id: Option<String>,
) -> RequestSpec {
    RequestSpec {
        num_instances,
        flavor,
        availability_zone,
        project_id,
        user_id,
        image: Some(ImageMeta::default()),
        ..RequestSpec::default()
    }
}

/// A flavor in one line: `name (2 VCPU, 4096 MB RAM, 20 GB disk)`.
pub fn describe_flavor(f: &Flavor) -> String {
    let mut text = format!(
        "{} ({} VCPU, {} MB RAM, {} GB disk",
        f.name.as_deref().unwrap_or("(from the command line)"),
        f.vcpus,
        f.memory_mb,
        f.root_gb + f.ephemeral_gb
    );
    if f.swap > 0 {
        text.push_str(&format!(", {} MB swap", f.swap));
    }
    if !f.extra_specs.is_empty() {
        let specs: Vec<String> = f
            .extra_specs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        text.push_str(&format!("; {}", specs.join(", ")));
    }
    text.push(')');
    text
}
