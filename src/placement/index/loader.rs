// SPDX-License-Identifier: Apache-2.0
//! Reads the index from Placement's own database, read-only: a full load at start,
//! then cheap incremental refreshes. Placement bumps a provider's generation whenever
//! its inventories, traits or aggregates change (and when allocations are written
//! against it), so only providers whose generation moved are re-read. Allocations
//! are re-summed whenever the table's `(COUNT(*), MAX(id))` moved (deletions do not
//! bump generations). Each refresh reads one consistent snapshot.

use super::model::{Inventory, NameTable, Provider, ProviderIndex};
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, MySql, Row, Transaction};
use std::collections::HashMap;
use std::collections::{BTreeMap, BTreeSet};

/// Above this many changed providers a refresh re-reads every provider's details.
const MAX_CHANGED_LIST: usize = 2_000;

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("placement database: {0}")]
    Database(#[from] sqlx::Error),
}

/// What one refresh changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefreshStats {
    pub providers: usize,
    /// Providers new or with a new generation (details re-read).
    pub changed: usize,
    pub removed: usize,
    /// Whether the usages were re-summed.
    pub usages_read: bool,
}

/// What identifies a provider's version: a change re-reads its details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderKey {
    pub generation: i64,
    pub uuid: String,
    pub parent_id: Option<i64>,
    pub root_id: i64,
}

impl ProviderKey {
    pub fn of(p: &Provider) -> Self {
        ProviderKey {
            generation: p.generation,
            uuid: p.uuid.clone(),
            parent_id: p.parent_id,
            root_id: p.root_id,
        }
    }
}

/// What the index holds, as far as a refresh needs to know.
#[derive(Debug, Clone, Default)]
pub struct Known {
    pub providers: HashMap<i64, ProviderKey>,
    /// `None` before the first usages were read.
    pub allocations_mark: Option<AllocationsMark>,
}

/// Inventories, traits and aggregates of re-read providers.
#[derive(Debug, Clone, Default)]
pub struct Details {
    pub inventories: BTreeMap<i64, BTreeMap<i64, Inventory>>,
    pub traits: BTreeMap<i64, BTreeSet<i64>>,
    pub aggregates: BTreeMap<i64, BTreeSet<i64>>,
}

/// The allocations table's mark at a read: its row count and highest id.
pub type AllocationsMark = (i64, i64);
/// Usage per provider id and resource class id.
pub type Usages = BTreeMap<i64, BTreeMap<i64, i64>>;

/// One refresh's reading.
#[derive(Debug, Clone, Default)]
pub struct Delta {
    pub resource_classes: Vec<(i64, String)>,
    pub traits: Vec<(i64, String)>,
    pub aggregates: Vec<(i64, String)>,
    /// Every provider (details empty).
    pub providers: Vec<Provider>,
    /// Providers whose details were re-read; `None`: all of them.
    pub reread: Option<BTreeSet<i64>>,
    pub details: Details,
    /// The allocations mark and usages, when the allocations changed.
    pub usages: Option<(AllocationsMark, Usages)>,
}

impl ProviderIndex {
    /// The refresh's view of this index.
    pub fn known(&self) -> Known {
        Known {
            providers: self
                .providers
                .values()
                .map(|p| (p.id, ProviderKey::of(p)))
                .collect(),
            allocations_mark: self.allocations_mark,
        }
    }

    /// Applies a reading made by [`IndexLoader::read_changes`].
    pub fn apply(&mut self, delta: Delta) -> RefreshStats {
        let Delta {
            resource_classes,
            traits,
            aggregates,
            providers,
            reread,
            mut details,
            usages,
        } = delta;
        let mut stats = RefreshStats {
            providers: providers.len(),
            changed: reread.as_ref().map_or(providers.len(), BTreeSet::len),
            usages_read: usages.is_some(),
            ..RefreshStats::default()
        };
        self.resource_classes = NameTable::from_rows(resource_classes);
        self.traits = NameTable::from_rows(traits);
        self.aggregates = NameTable::from_rows(aggregates);
        let mut next = BTreeMap::new();
        for mut p in providers {
            let old = self.providers.remove(&p.id);
            let fresh = reread.as_ref().is_none_or(|ids| ids.contains(&p.id));
            match old {
                Some(old) if !fresh => {
                    p.inventories = old.inventories;
                    p.traits = old.traits;
                    p.aggregates = old.aggregates;
                    p.usages = old.usages;
                }
                old => {
                    p.inventories = details.inventories.remove(&p.id).unwrap_or_default();
                    p.traits = details.traits.remove(&p.id).unwrap_or_default();
                    p.aggregates = details.aggregates.remove(&p.id).unwrap_or_default();
                    p.usages = old.map(|o| o.usages).unwrap_or_default();
                }
            }
            next.insert(p.id, p);
        }
        stats.removed = self.providers.len();
        if let Some((mark, mut usages)) = usages {
            for (id, p) in next.iter_mut() {
                p.usages = usages.remove(id).unwrap_or_default();
            }
            self.allocations_mark = Some(mark);
        }
        self.by_uuid = next.values().map(|p| (p.uuid.clone(), p.id)).collect();
        self.providers = next;
        stats
    }
}

/// A read-only reader of Placement's tables.
#[derive(Clone)]
pub struct IndexLoader {
    pool: MySqlPool,
}

impl IndexLoader {
    /// Connects with a small pool (`url` in sqlx form).
    pub async fn connect(url: &str) -> Result<Self, IndexError> {
        let pool = MySqlPoolOptions::new()
            .max_connections(2)
            .connect(url)
            .await?;
        Ok(IndexLoader { pool })
    }

    pub fn from_pool(pool: MySqlPool) -> Self {
        IndexLoader { pool }
    }

    /// Which of `consumer_uuids` have a row in Placement's `consumers` table (one
    /// read-only query; the uuids are bound, never formatted into the SQL).
    pub async fn existing_consumers(
        &self,
        consumer_uuids: &[String],
    ) -> Result<Vec<String>, IndexError> {
        if consumer_uuids.is_empty() {
            return Ok(Vec::new());
        }
        let marks = vec!["?"; consumer_uuids.len()].join(",");
        let sql = format!("SELECT uuid FROM consumers WHERE uuid IN ({marks})");
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for uuid in consumer_uuids {
            query = query.bind(uuid);
        }
        let rows = query.fetch_all(&self.pool).await?;
        rows.iter()
            .map(|r| r.try_get::<String, _>("uuid").map_err(IndexError::from))
            .collect()
    }

    /// Reads the whole index.
    pub async fn load(&self) -> Result<ProviderIndex, IndexError> {
        let mut index = ProviderIndex::default();
        self.refresh(&mut index).await?;
        Ok(index)
    }

    /// Brings `index` up to date; local claims recorded with `apply_claim` are replaced
    /// by the real usages when the allocations changed.
    pub async fn refresh(&self, index: &mut ProviderIndex) -> Result<RefreshStats, IndexError> {
        let delta = self.read_changes(&index.known()).await?;
        Ok(index.apply(delta))
    }

    /// Reads what changed since `known`, in one consistent snapshot, without holding
    /// the index (apply the result with [`ProviderIndex::apply`]).
    pub async fn read_changes(&self, known: &Known) -> Result<Delta, IndexError> {
        let mut tx = self.pool.begin().await?;
        let resource_classes = name_rows(&mut tx, "SELECT id, name FROM resource_classes").await?;
        let traits = name_rows(&mut tx, "SELECT id, name FROM traits").await?;
        let aggregates = name_rows(&mut tx, "SELECT id, uuid FROM placement_aggregates").await?;

        let rows = sqlx::query(
            "SELECT CAST(id AS SIGNED) AS id, uuid, CAST(COALESCE(generation, 0) AS SIGNED) AS generation, \
             CAST(parent_provider_id AS SIGNED) AS parent_id, \
             CAST(COALESCE(root_provider_id, id) AS SIGNED) AS root_id FROM resource_providers",
        )
        .fetch_all(&mut *tx)
        .await?;
        let mut providers = Vec::with_capacity(rows.len());
        for row in &rows {
            providers.push(Provider {
                id: row.try_get("id")?,
                uuid: row.try_get("uuid")?,
                generation: row.try_get("generation")?,
                parent_id: row.try_get("parent_id")?,
                root_id: row.try_get("root_id")?,
                ..Provider::default()
            });
        }
        let changed: BTreeSet<i64> = providers
            .iter()
            .filter(|p| known.providers.get(&p.id) != Some(&ProviderKey::of(p)))
            .map(|p| p.id)
            .collect();
        let reread_all = changed.len() > MAX_CHANGED_LIST || changed.len() == providers.len();
        let filter = if reread_all {
            Some(String::new())
        } else if changed.is_empty() {
            None
        } else {
            let ids: Vec<String> = changed.iter().map(i64::to_string).collect();
            // Integers formatted by us: nothing from outside reaches the SQL text.
            Some(format!(
                " WHERE resource_provider_id IN ({})",
                ids.join(",")
            ))
        };
        let mut details = Details::default();
        if let Some(filter) = &filter {
            let sql = format!(
                "SELECT CAST(resource_provider_id AS SIGNED) AS rp, \
                 CAST(resource_class_id AS SIGNED) AS rc, CAST(total AS SIGNED) AS total, \
                 CAST(reserved AS SIGNED) AS reserved, CAST(min_unit AS SIGNED) AS min_unit, \
                 CAST(max_unit AS SIGNED) AS max_unit, CAST(step_size AS SIGNED) AS step_size, \
                 allocation_ratio, CAST(allocation_ratio AS CHAR) AS ratio_text \
                 FROM inventories{filter}"
            );
            for row in sqlx::query(AssertSqlSafe(sql)).fetch_all(&mut *tx).await? {
                let text: String = row.try_get("ratio_text")?;
                let ratio: f32 = row.try_get("allocation_ratio")?;
                details
                    .inventories
                    .entry(row.try_get("rp")?)
                    .or_default()
                    .insert(
                        row.try_get("rc")?,
                        Inventory {
                            total: row.try_get("total")?,
                            reserved: row.try_get("reserved")?,
                            min_unit: row.try_get("min_unit")?,
                            max_unit: row.try_get("max_unit")?,
                            step_size: row.try_get("step_size")?,
                            allocation_ratio: ratio,
                            allocation_ratio_text: text.trim().parse().unwrap_or(f64::from(ratio)),
                        },
                    );
            }
            for (table, column, target) in [
                ("resource_provider_traits", "trait_id", &mut details.traits),
                (
                    "resource_provider_aggregates",
                    "aggregate_id",
                    &mut details.aggregates,
                ),
            ] {
                let sql = format!(
                    "SELECT CAST(resource_provider_id AS SIGNED) AS rp, \
                     CAST({column} AS SIGNED) AS item FROM {table}{filter}"
                );
                for row in sqlx::query(AssertSqlSafe(sql)).fetch_all(&mut *tx).await? {
                    target
                        .entry(row.try_get("rp")?)
                        .or_default()
                        .insert(row.try_get("item")?);
                }
            }
        }

        let mark_row = sqlx::query(
            "SELECT CAST(COUNT(*) AS SIGNED) AS n, CAST(COALESCE(MAX(id), 0) AS SIGNED) AS top FROM allocations",
        )
        .fetch_one(&mut *tx)
        .await?;
        let mark: AllocationsMark = (mark_row.try_get("n")?, mark_row.try_get("top")?);
        let usages = if Some(mark) != known.allocations_mark {
            let mut usages: Usages = BTreeMap::new();
            let rows = sqlx::query(
                "SELECT CAST(resource_provider_id AS SIGNED) AS rp, \
                 CAST(resource_class_id AS SIGNED) AS rc, CAST(SUM(used) AS SIGNED) AS used \
                 FROM allocations GROUP BY resource_provider_id, resource_class_id",
            )
            .fetch_all(&mut *tx)
            .await?;
            for row in rows {
                usages
                    .entry(row.try_get("rp")?)
                    .or_default()
                    .insert(row.try_get("rc")?, row.try_get("used")?);
            }
            Some((mark, usages))
        } else {
            None
        };
        tx.commit().await?;
        Ok(Delta {
            resource_classes,
            traits,
            aggregates,
            providers,
            reread: if reread_all { None } else { Some(changed) },
            details,
            usages,
        })
    }
}

async fn name_rows(
    tx: &mut Transaction<'_, MySql>,
    sql: &'static str,
) -> Result<Vec<(i64, String)>, IndexError> {
    let sql = sql.replacen("SELECT id,", "SELECT CAST(id AS SIGNED) AS id,", 1);
    let rows = sqlx::query(AssertSqlSafe(sql)).fetch_all(&mut **tx).await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        // `placement_aggregates.uuid` is nullable; a row without one names nothing.
        if let Some(name) = row.try_get::<Option<String>, _>(1)? {
            out.push((row.try_get(0)?, name));
        }
    }
    Ok(out)
}
