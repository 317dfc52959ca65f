// SPDX-License-Identifier: Apache-2.0
//! The instances' system metadata that `ImagePropertiesWeigher` reads, from one
//! cell database: nova rebuilds each instance's image properties from its
//! `instance_system_metadata` rows (`InstanceList.fill_metadata`, which reads
//! deleted rows too, then `ImageMeta.from_instance`).
//!
//! Only needed while `[filter_scheduler] image_props_weight_multiplier` is not 0.0
//! (nova's weigher reads nothing otherwise). The rows go into
//! `HostState::instance_system_metadata` unchanged; the weigher does the typing.
//! This file uses only sqlx and std so that tests can compile it on its own.

use sqlx::mysql::MySqlPool;
use sqlx::{AssertSqlSafe, Row};
use std::collections::{BTreeMap, HashMap};

/// Bind parameters per `IN (...)` query; larger host lists are split.
const MAX_IN_LIST: usize = 10_000;

/// Instance uuid → its system metadata rows `(key, value)` in row order.
pub type InstanceSystemMetadata = BTreeMap<String, Vec<(String, String)>>;

/// For every host in `hosts`: the system metadata of each live instance on it
/// (`instances.deleted = 0`, the instances `HostState::instances` holds), every row
/// including deleted ones, in `id` order (a later row for the same key wins, as in
/// nova's `metadata_to_dict`). Rows with a NULL value are left out (nova skips
/// them). Hosts without instances are absent from the map; instances without rows
/// are absent from their host's map (nova finds no image properties for either).
pub async fn instance_system_metadata_by_host(
    pool: &MySqlPool,
    hosts: &[String],
) -> Result<HashMap<String, InstanceSystemMetadata>, sqlx::Error> {
    let mut out: HashMap<String, InstanceSystemMetadata> = HashMap::new();
    for chunk in hosts.chunks(MAX_IN_LIST) {
        let sql = format!(
            "SELECT i.host, m.instance_uuid, m.`key`, m.value \
             FROM instances i JOIN instance_system_metadata m ON m.instance_uuid = i.uuid \
             WHERE i.deleted = 0 AND i.host IN ({}) ORDER BY m.id",
            placeholders(chunk.len())
        );
        let mut query = sqlx::query(AssertSqlSafe(sql)).persistent(false);
        for host in chunk {
            query = query.bind(host);
        }
        for row in query.fetch_all(pool).await? {
            let host: Option<String> = row.try_get("host")?;
            let uuid: String = row.try_get("instance_uuid")?;
            let key: String = row.try_get("key")?;
            let value: Option<String> = row.try_get("value")?;
            let (Some(host), Some(value)) = (host, value) else {
                continue;
            };
            out.entry(host)
                .or_default()
                .entry(uuid)
                .or_default()
                .push((key, value));
        }
    }
    Ok(out)
}

fn placeholders(n: usize) -> String {
    let mut s = "?,".repeat(n);
    s.pop();
    s
}
