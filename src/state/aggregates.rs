// SPDX-License-Identifier: Apache-2.0
//! Host aggregates from the API database and nova's in-memory cache of them
//! (`aggs_by_id` + `host_aggregates_map`).

use crate::model::Aggregate;
use sqlx::mysql::MySqlPool;
use sqlx::Row;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Aggregates by id and, per host name, the ids of its aggregates.
#[derive(Default)]
pub(super) struct AggregateCache {
    by_id: BTreeMap<i64, Arc<Aggregate>>,
    /// Fx-hashed: looked up for every candidate host of every request.
    by_host: rustc_hash::FxHashMap<String, BTreeSet<i64>>,
    /// Changes with every change of the aggregates (unique in the process).
    generation: u64,
}

fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl AggregateCache {
    /// Tells one state of the aggregates from any other.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn new(aggregates: Vec<Aggregate>) -> Self {
        let mut cache = AggregateCache {
            generation: next_generation(),
            ..AggregateCache::default()
        };
        for agg in aggregates {
            for host in &agg.hosts {
                cache
                    .by_host
                    .entry(host.clone())
                    .or_default()
                    .insert(agg.id);
            }
            cache.by_id.insert(agg.id, Arc::new(agg));
        }
        cache
    }

    /// nova's `_update_aggregate`: replace by id, add the listed hosts, and drop the
    /// aggregate from hosts no longer listed.
    pub fn update(&mut self, agg: Aggregate) {
        self.generation = next_generation();
        let id = agg.id;
        for host in &agg.hosts {
            self.by_host.entry(host.clone()).or_default().insert(id);
        }
        for (host, ids) in self.by_host.iter_mut() {
            if !agg.hosts.contains(host) {
                ids.remove(&id);
            }
        }
        self.by_id.insert(id, Arc::new(agg));
    }

    /// nova's `delete_aggregate`: forget it by id and remove it from every host.
    pub fn delete(&mut self, id: i64) {
        self.generation = next_generation();
        self.by_id.remove(&id);
        for ids in self.by_host.values_mut() {
            ids.remove(&id);
        }
    }

    /// The aggregates of `host`, by ascending id (nova iterates a set of small ints,
    /// which comes out in the same order).
    pub fn for_host(&self, host: &str) -> Vec<Arc<Aggregate>> {
        self.by_host.get(host).map_or_else(Vec::new, |ids| {
            ids.iter()
                .filter_map(|id| self.by_id.get(id).cloned())
                .collect()
        })
    }

    pub fn all(&self) -> Vec<Arc<Aggregate>> {
        self.by_id.values().cloned().collect()
    }
}

/// Every aggregate with its hosts and metadata (nova's `AggregateList.get_all`).
pub(super) async fn load(api: &MySqlPool) -> Result<Vec<Aggregate>, sqlx::Error> {
    let mut by_id: BTreeMap<i64, Aggregate> = BTreeMap::new();
    for row in sqlx::query("SELECT id, uuid, name FROM aggregates")
        .fetch_all(api)
        .await?
    {
        let id: i64 = row.try_get("id")?;
        let agg = Aggregate {
            id,
            uuid: row
                .try_get::<Option<String>, _>("uuid")?
                .unwrap_or_default(),
            name: row
                .try_get::<Option<String>, _>("name")?
                .unwrap_or_default(),
            ..Aggregate::default()
        };
        by_id.insert(id, agg);
    }
    for row in sqlx::query("SELECT aggregate_id, host FROM aggregate_hosts")
        .fetch_all(api)
        .await?
    {
        let id: i64 = row.try_get("aggregate_id")?;
        if let (Some(agg), Some(host)) = (
            by_id.get_mut(&id),
            row.try_get::<Option<String>, _>("host")?,
        ) {
            agg.hosts.insert(host);
        }
    }
    for row in sqlx::query("SELECT aggregate_id, `key`, value FROM aggregate_metadata")
        .fetch_all(api)
        .await?
    {
        let id: i64 = row.try_get("aggregate_id")?;
        if let Some(agg) = by_id.get_mut(&id) {
            agg.metadata
                .insert(row.try_get("key")?, row.try_get("value")?);
        }
    }
    Ok(by_id.into_values().collect())
}

/// nova's `AggregateList.get_by_metadata(key='availability_zone', value=az)` as used
/// by `map_az_to_placement_aggregate`: uuids of the matching aggregates.
pub(super) async fn uuids_for_az(api: &MySqlPool, az: &str) -> Result<Vec<String>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT DISTINCT a.id, a.uuid FROM aggregates a \
         JOIN aggregate_metadata m ON m.aggregate_id = a.id \
         WHERE m.`key` = 'availability_zone' AND m.value = ? ORDER BY a.id",
    )
    .bind(az)
    .fetch_all(api)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(row
                .try_get::<Option<String>, _>("uuid")?
                .unwrap_or_default())
        })
        .collect()
}

/// `(uuid, key)` of the aggregates with a metadata row whose value is `value`
/// (nova's `AggregateList.get_by_metadata(value=...)`, which loads only those rows).
pub(super) async fn with_metadata_value(
    api: &MySqlPool,
    value: &str,
) -> Result<Vec<(String, String)>, sqlx::Error> {
    let rows = sqlx::query(
        "SELECT a.uuid, m.`key` FROM aggregates a \
         JOIN aggregate_metadata m ON m.aggregate_id = a.id WHERE m.value = ?",
    )
    .bind(value)
    .fetch_all(api)
    .await?;
    rows.iter()
        .map(|row| {
            Ok((
                row.try_get::<Option<String>, _>("uuid")?
                    .unwrap_or_default(),
                row.try_get("key")?,
            ))
        })
        .collect()
}

/// Uuids of the aggregates that require (`trait:<T> = required`) a trait whose
/// metadata key is not among `keys` (nova's
/// `AggregateList.get_non_matching_by_metadata_keys`).
pub(super) async fn requiring_traits_other_than(
    api: &MySqlPool,
    keys: &[String],
) -> Result<BTreeSet<String>, sqlx::Error> {
    let mut sql = String::from(
        "SELECT DISTINCT a.id, a.uuid FROM aggregates a \
         JOIN aggregate_metadata m ON m.aggregate_id = a.id \
         WHERE m.value = 'required' AND m.`key` LIKE 'trait:%'",
    );
    if !keys.is_empty() {
        sql.push_str(" AND m.`key` NOT IN (");
        sql.push_str(&vec!["?"; keys.len()].join(","));
        sql.push(')');
    }
    // Only `?` placeholders are added to the text; the keys are bound.
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for k in keys {
        query = query.bind(k);
    }
    let rows = query.fetch_all(api).await?;
    rows.iter()
        .map(|row| {
            Ok(row
                .try_get::<Option<String>, _>("uuid")?
                .unwrap_or_default())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agg(id: i64, hosts: &[&str]) -> Aggregate {
        Aggregate {
            id,
            uuid: format!("agg-{id}"),
            name: format!("a{id}"),
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            metadata: BTreeMap::new(),
        }
    }

    fn ids(cache: &AggregateCache, host: &str) -> Vec<i64> {
        cache.for_host(host).iter().map(|a| a.id).collect()
    }

    #[test]
    fn update_moves_memberships_and_delete_forgets() {
        let mut cache = AggregateCache::new(vec![agg(2, &["h1", "h2"]), agg(1, &["h1"])]);
        assert_eq!(ids(&cache, "h1"), vec![1, 2]);
        assert_eq!(ids(&cache, "h2"), vec![2]);
        cache.update(agg(2, &["h3"]));
        assert_eq!(ids(&cache, "h1"), vec![1]);
        assert!(ids(&cache, "h2").is_empty());
        assert_eq!(ids(&cache, "h3"), vec![2]);
        cache.delete(1);
        assert!(ids(&cache, "h1").is_empty());
        assert_eq!(cache.all().len(), 1);
    }
}
