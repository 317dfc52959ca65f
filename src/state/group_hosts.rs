// SPDX-License-Identifier: Apache-2.0
//! The one server-group read nova's scheduler makes: when a request's
//! `instance_group` arrives without `hosts`, its first use lazy-loads it
//! (`InstanceGroup.obj_load_attr('hosts')` -> `get_hosts()`), which lists the hosts of
//! the group's live members with `InstanceList.get_by_filters` on the scheduler's
//! own `[database]` connection. The conductor normally sends `hosts` (it runs
//! `setup_instance_group` first), so this is the rare path; the server-group tables
//! of the API database are never read by nova's scheduler, nor by us.

use super::{HostStateStore, StateError};
use crate::model::RequestSpec;
use sqlx::{AssertSqlSafe, Row};
use std::collections::BTreeSet;

/// Members per query; a group is far smaller, this only bounds hostile input.
const MAX_MEMBERS: usize = 10_000;

impl HostStateStore {
    /// nova's `InstanceGroup.get_hosts()` on the `[database]` connection: the distinct
    /// hosts of `members` that are not deleted and not soft-deleted (`deleted=False`
    /// in `instance_get_all_by_filters`), sorted. No members, no hosts.
    pub async fn group_member_hosts(&self, members: &[String]) -> Result<Vec<String>, StateError> {
        let Some(pool) = self.main.as_ref() else {
            tracing::warn!(
                "no usable [database] connection: a server group without hosts gets none"
            );
            return Ok(Vec::new());
        };
        let mut hosts = BTreeSet::new();
        for chunk in members.chunks(MAX_MEMBERS) {
            let sql = format!(
                "SELECT DISTINCT host FROM instances WHERE deleted = 0 \
                 AND (vm_state != 'soft-delete' OR vm_state IS NULL) \
                 AND host IS NOT NULL AND uuid IN ({})",
                vec!["?"; chunk.len()].join(",")
            );
            let mut query = sqlx::query(AssertSqlSafe(sql)).persistent(false);
            for uuid in chunk {
                query = query.bind(uuid);
            }
            for row in query
                .fetch_all(pool)
                .await
                .map_err(StateError::MainDatabase)?
            {
                let host: String = row.try_get("host").map_err(StateError::MainDatabase)?;
                if !host.is_empty() {
                    hosts.insert(host);
                }
            }
        }
        Ok(hosts.into_iter().collect())
    }

    /// Fills `spec.instance_group.hosts` when the request left it unset, as nova's
    /// lazy-load would on first use.
    pub async fn load_unset_group_hosts(&self, spec: &mut RequestSpec) -> Result<(), StateError> {
        let Some(group) = spec.instance_group.as_mut().filter(|g| g.hosts_unset) else {
            return Ok(());
        };
        tracing::debug!(uuid = ?group.uuid, "Lazy-loading 'hosts' on InstanceGroup");
        group.hosts = self.group_member_hosts(&group.members).await?;
        group.hosts_unset = false;
        Ok(())
    }
}
