// SPDX-License-Identifier: Apache-2.0
//! Reads the index from Placement's own database, read-only: a full load at start,
//! then cheap incremental refreshes. Placement bumps a provider's generation (and
//! with it `updated_at`) whenever its inventories, traits or aggregates change and
//! when allocations are written against it, so a refresh lists the providers stamped
//! since the last one and re-reads the details and usages of those whose generation
//! moved. Deleted allocations move no generation: once [`DEFAULT_FULL_SUM_FACTOR`]
//! times the last full sum's cost has passed (every refresh in a small cloud), a
//! refresh counts the allocation rows, and when the count is not the last count plus
//! the rows inserted since (ids only grow), some were deleted and the usages are summed
//! in full. A refresh that sums some providers again between two counts moves the
//! count's mark past the rows inserted since, so a claim it saw and that is deleted
//! before the next count still shows as a deletion. A cloud that only gains
//! allocations is summed in full at most every
//! [`FULL_SUM_AT_LEAST_EVERY`]. Each refresh reads one consistent snapshot.

use super::model::{Inventory, NameTable, Provider, ProviderIndex, ReadMarks};
use chrono::NaiveDateTime;
use rustc_hash::FxHashMap;
use sqlx::mysql::{MySqlPool, MySqlPoolOptions};
use sqlx::{AssertSqlSafe, MySql, Row, Transaction};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

/// Above this many changed providers a refresh re-reads every provider's details.
const MAX_CHANGED_LIST: usize = 2_000;

/// A refresh lists again the providers stamped up to this long before the newest
/// stamp it saw: Placement stamps `updated_at` with its own clock before its
/// transaction commits, and the stamps are whole seconds.
const STAMP_LAG_SECONDS: i64 = 10;

/// The allocation rows are counted, and summed in full (every allocation read) when
/// the count shows a deletion, once this many times the last full sum's cost has
/// passed since the last count: at every refresh in a small cloud, a bounded share of
/// the database's time in a big one. In between, the usages of the providers whose
/// generation moved (every claim moves them) are summed again.
pub const DEFAULT_FULL_SUM_FACTOR: u32 = 10;

/// A full sum (and a full listing of the providers) at the first count this long after
/// the last full sum, even when the count shows no deletion: a deletion masked by a row
/// committed under an id already passed, or a provider stamp missed, is caught up.
pub const FULL_SUM_AT_LEAST_EVERY: std::time::Duration = std::time::Duration::from_secs(60);

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
    /// Whether the usages were summed in full.
    pub usages_read: bool,
    /// Providers whose usages were summed again alone (their generation moved).
    pub resummed: usize,
}

/// What identifies a provider's version: a change re-reads its details and its
/// usages. (A provider's uuid never changes.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderKey {
    pub generation: i64,
    pub parent_id: Option<i64>,
    pub root_id: i64,
}

impl ProviderKey {
    pub fn of(p: &Provider) -> Self {
        ProviderKey {
            generation: p.generation,
            parent_id: p.parent_id,
            root_id: p.root_id,
        }
    }
}

/// What the index holds, as far as a refresh needs to know.
#[derive(Debug, Clone, Default)]
pub struct Known {
    pub providers: FxHashMap<i64, ProviderKey>,
    /// `None` before the first read.
    pub marks: Option<ReadMarks>,
}

/// Inventories, traits and aggregates of re-read providers.
#[derive(Debug, Clone, Default)]
pub struct Details {
    pub inventories: BTreeMap<i64, BTreeMap<i64, Inventory>>,
    pub traits: BTreeMap<i64, BTreeSet<i64>>,
    pub aggregates: BTreeMap<i64, BTreeSet<i64>>,
}

/// Usage per provider id and resource class id.
pub type Usages = BTreeMap<i64, BTreeMap<i64, i64>>;

/// The usages one refresh read.
#[derive(Debug, Clone, Default)]
pub enum UsageRead {
    /// Nothing to replace.
    #[default]
    Unchanged,
    /// Every provider's usages.
    Full(Usages),
    /// The usages of `ids` (a provider of `ids` absent from `usages` uses nothing).
    Partial { ids: BTreeSet<i64>, usages: Usages },
}

/// One refresh's reading.
#[derive(Debug, Clone)]
pub struct Delta {
    pub resource_classes: Vec<(i64, String)>,
    pub traits: Vec<(i64, String)>,
    pub aggregates: Vec<(i64, String)>,
    /// The providers listed (details empty): every one when `complete`, else those
    /// stamped since the last read.
    pub providers: Vec<Provider>,
    pub complete: bool,
    /// Providers whose details were re-read; `None`: all of them.
    pub reread: Option<BTreeSet<i64>>,
    pub details: Details,
    pub usages: UsageRead,
    pub marks: ReadMarks,
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
            marks: self.marks,
        }
    }

    /// Applies a reading made by [`IndexLoader::read_changes`]: in place, touching
    /// only the providers listed unless every one was.
    pub fn apply(&mut self, delta: Delta) -> RefreshStats {
        let Delta {
            resource_classes,
            traits,
            aggregates,
            providers,
            complete,
            reread,
            mut details,
            usages,
            marks,
        } = delta;
        let mut stats = RefreshStats {
            changed: reread.as_ref().map_or(providers.len(), BTreeSet::len),
            usages_read: matches!(usages, UsageRead::Full(_)),
            ..RefreshStats::default()
        };
        self.resource_classes = NameTable::from_rows(resource_classes);
        self.traits = NameTable::from_rows(traits);
        self.aggregates = NameTable::from_rows(aggregates);
        let mut take_details = |p: &mut Provider| {
            p.inventories = details.inventories.remove(&p.id).unwrap_or_default();
            p.traits = details.traits.remove(&p.id).unwrap_or_default();
            p.aggregates = details.aggregates.remove(&p.id).unwrap_or_default();
        };
        if complete {
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
                        take_details(&mut p);
                        p.usages = old.map(|o| o.usages).unwrap_or_default();
                    }
                }
                next.insert(p.id, p);
            }
            stats.removed = self.providers.len();
            self.by_uuid = next.values().map(|p| (p.uuid.clone(), p.id)).collect();
            self.providers = next;
        } else {
            for mut p in providers {
                if !reread.as_ref().is_none_or(|ids| ids.contains(&p.id)) {
                    continue;
                }
                take_details(&mut p);
                self.note_shape(&p);
                match self.providers.get_mut(&p.id) {
                    Some(old) => {
                        p.usages = std::mem::take(&mut old.usages);
                        *old = p;
                    }
                    None => {
                        self.by_uuid.insert(p.uuid.clone(), p.id);
                        self.providers.insert(p.id, p);
                    }
                }
            }
        }
        match usages {
            UsageRead::Unchanged => {}
            UsageRead::Full(mut usages) => {
                for (id, p) in self.providers.iter_mut() {
                    p.usages = usages.remove(id).unwrap_or_default();
                }
            }
            UsageRead::Partial { ids, mut usages } => {
                stats.resummed = ids.len();
                for id in ids {
                    if let Some(p) = self.providers.get_mut(&id) {
                        p.usages = usages.remove(&id).unwrap_or_default();
                    }
                }
            }
        }
        self.marks = Some(marks);
        if complete {
            self.reshape();
        }
        stats.providers = self.providers.len();
        stats
    }
}

/// A read-only reader of Placement's tables.
#[derive(Clone)]
pub struct IndexLoader {
    pool: MySqlPool,
    full_sum_factor: u32,
}

impl IndexLoader {
    /// Connects with a small pool (`url` in sqlx form).
    pub async fn connect(url: &str) -> Result<Self, IndexError> {
        let pool = MySqlPoolOptions::new()
            .max_connections(2)
            .connect(url)
            .await?;
        Ok(Self::from_pool(pool))
    }

    pub fn from_pool(pool: MySqlPool) -> Self {
        IndexLoader {
            pool,
            full_sum_factor: DEFAULT_FULL_SUM_FACTOR,
        }
    }

    /// Sums the usages in full once `factor` times the last full sum's cost has
    /// passed (see [`DEFAULT_FULL_SUM_FACTOR`]; `u32::MAX`: only when providers come
    /// or go, which tests use to check the partial reads alone).
    pub fn with_full_sum_factor(mut self, factor: u32) -> Self {
        self.full_sum_factor = factor;
        self
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
    ///
    /// Providers are listed in full on the first read, when one came or went, and
    /// with every full sum of the usages; otherwise only those stamped since the
    /// last read (Placement's `updated_at` moves with every generation). Details and
    /// usages are read for the providers whose generation moved.
    pub async fn read_changes(&self, known: &Known) -> Result<Delta, IndexError> {
        let started = Instant::now();
        let mut tx = self.pool.begin().await?;
        let resource_classes = name_rows(&mut tx, "SELECT id, name FROM resource_classes").await?;
        let traits = name_rows(&mut tx, "SELECT id, name FROM traits").await?;
        let aggregates = name_rows(&mut tx, "SELECT id, uuid FROM placement_aggregates").await?;

        let stamps = sqlx::query(
            "SELECT CAST(COUNT(*) AS SIGNED) AS n, CAST(COALESCE(MAX(id), 0) AS SIGNED) AS top, \
             MAX(updated_at) AS updated, MAX(created_at) AS created FROM resource_providers",
        )
        .fetch_one(&mut *tx)
        .await?;
        let counts: (i64, i64) = (stamps.try_get("n")?, stamps.try_get("top")?);
        let newest_change = [
            stamps.try_get::<Option<NaiveDateTime>, _>("updated")?,
            stamps.try_get::<Option<NaiveDateTime>, _>("created")?,
        ]
        .into_iter()
        .flatten()
        .max();
        // Paced by the last full sum's cost: the allocation rows are counted, and
        // summed in full when the count shows a deletion (rows are only inserted,
        // with growing ids, or deleted: without one, the count is the last mark's
        // plus the rows past its highest id).
        let due = known.marks.is_none_or(|m| {
            m.checked_at.elapsed() >= m.full_cost.saturating_mul(self.full_sum_factor)
        });
        let mut allocation_mark = known.marks.map_or((0, 0), |m| m.allocations);
        let mut full_sum = known.marks.is_none();
        if due {
            let row = sqlx::query(
                "SELECT CAST(COUNT(*) AS SIGNED) AS n, CAST(COALESCE(MAX(id), 0) AS SIGNED) AS top FROM allocations",
            )
            .fetch_one(&mut *tx)
            .await?;
            let counted = (row.try_get("n")?, row.try_get("top")?);
            if let Some(m) = known.marks {
                let inserted_only = counted == m.allocations || {
                    let past: i64 = sqlx::query(
                        "SELECT CAST(COUNT(*) AS SIGNED) AS n FROM allocations WHERE id > ?",
                    )
                    .bind(m.allocations.1)
                    .fetch_one(&mut *tx)
                    .await?
                    .try_get("n")?;
                    counted.0 == m.allocations.0 + past
                };
                full_sum = !inserted_only || m.full_at.elapsed() >= FULL_SUM_AT_LEAST_EVERY;
            }
            allocation_mark = counted;
        }
        let since = known
            .marks
            .filter(|m| !full_sum && m.providers == counts)
            .and_then(|m| m.newest_change)
            .map(|t| t - chrono::Duration::seconds(STAMP_LAG_SECONDS));
        let complete = since.is_none();

        const PROVIDER_COLUMNS: &str = "SELECT CAST(id AS SIGNED) AS id, uuid, \
             CAST(COALESCE(generation, 0) AS SIGNED) AS generation, \
             CAST(parent_provider_id AS SIGNED) AS parent_id, \
             CAST(COALESCE(root_provider_id, id) AS SIGNED) AS root_id FROM resource_providers";
        let rows = match since {
            None => sqlx::query(PROVIDER_COLUMNS).fetch_all(&mut *tx).await?,
            Some(since) => {
                sqlx::query(AssertSqlSafe(format!(
                    "{PROVIDER_COLUMNS} WHERE updated_at >= ? OR created_at >= ?"
                )))
                .bind(since)
                .bind(since)
                .fetch_all(&mut *tx)
                .await?
            }
        };
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
        let reread_all = complete && changed.len() == providers.len();
        let details_filter = if reread_all || changed.len() > MAX_CHANGED_LIST {
            Some(String::new())
        } else if changed.is_empty() {
            None
        } else {
            Some(format!(
                " WHERE resource_provider_id IN ({})",
                id_list(&changed)
            ))
        };
        let mut details = Details::default();
        if let Some(filter) = &details_filter {
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

        // The usages about to be summed again may include rows past the mark: the mark
        // takes them in, or a claim seen here and deleted before the next count would
        // leave that count equal to the mark and the deletion unseen. Only the rows
        // past the mark's highest id are counted (a range of the primary key).
        if !due && !full_sum && !changed.is_empty() {
            let row = sqlx::query(
                "SELECT CAST(COUNT(*) AS SIGNED) AS n, CAST(COALESCE(MAX(id), 0) AS SIGNED) AS top \
                 FROM allocations WHERE id > ?",
            )
            .bind(allocation_mark.1)
            .fetch_one(&mut *tx)
            .await?;
            let (past, top): (i64, i64) = (row.try_get("n")?, row.try_get("top")?);
            allocation_mark = (allocation_mark.0 + past, allocation_mark.1.max(top));
        }
        let previous = known.marks;
        let usages = if full_sum {
            UsageRead::Full(sum_usages(&mut tx, "").await?)
        } else if changed.is_empty() {
            UsageRead::Unchanged
        } else {
            let mut usages = Usages::new();
            let ids: Vec<i64> = changed.iter().copied().collect();
            for chunk in ids.chunks(MAX_CHANGED_LIST) {
                let filter = format!(" WHERE resource_provider_id IN ({})", id_list(chunk.iter()));
                usages.extend(sum_usages(&mut tx, &filter).await?);
            }
            UsageRead::Partial {
                ids: changed.clone(),
                usages,
            }
        };
        tx.commit().await?;
        let (full_at, full_cost) = match previous {
            Some(m) if !full_sum => (m.full_at, m.full_cost),
            _ => (started, started.elapsed()),
        };
        let checked_at = match previous {
            Some(m) if !due => m.checked_at,
            _ => started,
        };
        Ok(Delta {
            resource_classes,
            traits,
            aggregates,
            providers,
            complete,
            reread: if reread_all { None } else { Some(changed) },
            details,
            usages,
            marks: ReadMarks {
                providers: counts,
                newest_change,
                allocations: allocation_mark,
                full_at,
                full_cost,
                checked_at,
            },
        })
    }
}

/// Integers formatted by us: nothing from outside reaches the SQL text.
fn id_list<'a>(ids: impl IntoIterator<Item = &'a i64>) -> String {
    ids.into_iter()
        .map(i64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// `SUM(allocations.used)` per provider and class, for the providers `filter` picks.
async fn sum_usages(tx: &mut Transaction<'_, MySql>, filter: &str) -> Result<Usages, IndexError> {
    let sql = format!(
        "SELECT CAST(resource_provider_id AS SIGNED) AS rp, \
         CAST(resource_class_id AS SIGNED) AS rc, CAST(SUM(used) AS SIGNED) AS used \
         FROM allocations{filter} GROUP BY resource_provider_id, resource_class_id"
    );
    let mut usages = Usages::new();
    for row in sqlx::query(AssertSqlSafe(sql)).fetch_all(&mut **tx).await? {
        usages
            .entry(row.try_get("rp")?)
            .or_default()
            .insert(row.try_get("rc")?, row.try_get("used")?);
    }
    Ok(usages)
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
