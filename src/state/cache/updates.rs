// SPDX-License-Identifier: Apache-2.0
//! What tells the cache of a change before its next pass: our own decisions
//! (retained until the database shows them) and nova-compute's instance casts.

use super::cell::{CellCache, Consumption, Retained};
use super::HostStateCache;
use crate::state::queries;
use crate::state::{lock, read, write};
use chrono::{DateTime, Utc};
use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

impl HostStateCache {
    /// Retains one decision: `what` was consumed on node `node_uuid` of `cell_uuid` at `at`.
    pub fn retain(&self, cell_uuid: &str, node_uuid: &str, what: Consumption, at: DateTime<Utc>) {
        if !self.opts.retain_consumption {
            return;
        }
        let Some(cache) = self.cell(cell_uuid) else {
            return;
        };
        let mut c = write(&cache);
        let Some(id) = c.node_by_uuid.get(node_uuid).copied() else {
            return;
        };
        if let Some(node) = c.nodes.get_mut(&id) {
            node.retained.push(Retained { at, what });
            let host = node.state.host.to_string();
            c.changed_hosts.insert(host);
        }
    }

    fn cell_of_host(&self, host: &str) -> Option<Arc<RwLock<CellCache>>> {
        read(&self.cells)
            .values()
            .find(|c| read(c).services.contains_key(host))
            .cloned()
    }

    /// nova's `update_instance_info` cast: these instances are on `host`, each with
    /// its flavor id when the Instance object carried `instance_type_id`.
    pub fn update_instance_info(&self, host: &str, instances: &[(String, Option<Option<i64>>)]) {
        if let Some(cache) = self.cell_of_host(host) {
            let mut c = write(&cache);
            for (uuid, flavor) in instances {
                c.add_instance(host, uuid, *flavor);
            }
        }
    }

    /// nova's `delete_instance_info` cast: the instance left `host`.
    pub fn delete_instance_info(&self, host: &str, instance_uuid: &str) {
        if let Some(cache) = self.cell_of_host(host) {
            write(&cache).remove_instance(host, instance_uuid);
        }
    }

    /// Reads the compute nodes of `host` again now rather than at the next pass.
    /// nova-compute casts `update_instance_info` and `delete_instance_info` after
    /// its resource tracker wrote the host's node (a claim, a deletion), so a
    /// request that follows (another boot right after a delete) sees the row
    /// nova would read, not the one of the last pass. A row older than the
    /// cached one is ignored, as on any targeted read. Reads of one host do not
    /// run side by side: a call during a read has it run once more after.
    pub async fn reread_host(&self, host: &str) {
        {
            let mut pending = lock(&self.rereads);
            if let Some(again) = pending.get_mut(host) {
                *again = true;
                return;
            }
            pending.insert(host.to_string(), false);
        }
        loop {
            self.read_host_nodes(host).await;
            let mut pending = lock(&self.rereads);
            match pending.get_mut(host) {
                Some(again) if *again => *again = false,
                _ => {
                    pending.remove(host);
                    return;
                }
            }
        }
    }

    async fn read_host_nodes(&self, host: &str) {
        let Some((cell_uuid, cache)) = read(&self.cells)
            .iter()
            .find(|(_, c)| read(c).services.contains_key(host))
            .map(|(u, c)| (u.clone(), Arc::clone(c)))
        else {
            return;
        };
        let set = self.store.cell_set();
        let Some(db) = set.cells.iter().find(|d| d.cell.uuid == cell_uuid) else {
            return;
        };
        let Some(pool) = db.pool.as_ref() else {
            return;
        };
        let read_nodes = async {
            let nodes = queries::compute_nodes_of_host(pool, host).await?;
            self.store.backfill_ratios(pool, db, &nodes).await;
            Ok::<_, sqlx::Error>(nodes)
        };
        match tokio::time::timeout(self.store.cell_timeout, read_nodes).await {
            Ok(Ok(nodes)) => {
                let mut c = write(&cache);
                for n in nodes {
                    c.upsert_node(&cell_uuid, &self.store.ratios, n, false);
                }
            }
            Ok(Err(e)) => {
                tracing::warn!(%host, cell = %db.display_name(), error = %e, "could not read the host's compute nodes again; the next pass will");
            }
            Err(_) => {
                tracing::warn!(%host, cell = %db.display_name(), "timeout reading the host's compute nodes again; the next pass will");
            }
        }
    }

    /// nova's `sync_instance_info` cast: the full list of `host`'s instances. On a
    /// mismatch nova re-reads the host from its cell; the compute's list is newer
    /// than any read, so we take it.
    pub fn sync_instance_info(&self, host: &str, instance_uuids: &[String]) -> bool {
        let Some(cache) = self.cell_of_host(host) else {
            return false;
        };
        let mut c = write(&cache);
        let wanted: BTreeSet<String> = instance_uuids.iter().cloned().collect();
        let matches = c
            .instances_by_host
            .get(host)
            .map_or(wanted.is_empty(), |s| **s == wanted);
        if !matches {
            tracing::info!(%host, "The instance sync for host did not match. Re-created its InstanceList.");
            c.replace_host_instances(host, &wanted, None);
        }
        matches
    }
}
