// SPDX-License-Identifier: Apache-2.0
//! Where the answering scheduler put each instance, read from what its claim left:
//! the instance's allocations in Placement (`GET /allocations/{uuid}`) on the
//! compute node of a host outside the request's `ignore_hosts` (an evacuated
//! instance keeps its source host's allocation, and that host is in
//! `ignore_hosts`; a migration's source allocation belongs to the migration, not
//! the instance). An instance whose allocation never appears is looked up in the
//! API database: mapped to cell0, it was buried there by a NoValidHost.
//!
//! Everything here reads; the polling backs off and ends at the settle time.

use crate::placement::PlacementClient;
use crate::scheduler::compare::Answer;
use crate::state::HostStateStore;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tracing::debug;

/// nova's cell0, where instances that could not be scheduled are buried.
const CELL0_UUID: &str = "00000000-0000-0000-0000-000000000000";
/// The first look, then doubled up to this.
const FIRST_LOOK: Duration = Duration::from_millis(250);
const LONGEST_WAIT: Duration = Duration::from_secs(5);

/// The answering scheduler's choice for each of `instance_uuids`, waiting up to
/// `settle` for its claims to appear.
pub async fn learn(
    placement: &PlacementClient,
    store: &HostStateStore,
    instance_uuids: &[String],
    ignore_hosts: &[String],
    settle: Duration,
) -> Vec<Answer> {
    let ignored: BTreeSet<String> = ignore_hosts.iter().map(|h| h.to_lowercase()).collect();
    let mut answers = vec![Answer::Unknown; instance_uuids.len()];
    let deadline = Instant::now() + settle;
    let mut wait = FIRST_LOOK;
    loop {
        tokio::time::sleep(wait.min(deadline.saturating_duration_since(Instant::now()))).await;
        for (uuid, answer) in instance_uuids.iter().zip(answers.iter_mut()) {
            if *answer == Answer::Unknown {
                if let Some(placed) = claimed_host(placement, store, uuid, &ignored).await {
                    *answer = placed;
                }
            }
        }
        let pending = answers.contains(&Answer::Unknown);
        if !pending || Instant::now() >= deadline {
            break;
        }
        wait = (wait * 2).min(LONGEST_WAIT);
    }
    for (uuid, answer) in instance_uuids.iter().zip(answers.iter_mut()) {
        if *answer == Answer::Unknown && in_cell0(store, uuid).await {
            *answer = Answer::NoValidHost;
        }
    }
    answers
}

/// The host and node of the compute node `uuid` holds an allocation on, outside
/// `ignored`; `None` while it holds none.
async fn claimed_host(
    placement: &PlacementClient,
    store: &HostStateStore,
    uuid: &str,
    ignored: &BTreeSet<String>,
) -> Option<Answer> {
    let read = match placement.current_allocations(uuid, None).await {
        Ok(read) => read,
        Err(e) => {
            debug!(instance = %uuid, error = %e, "could not read an instance's allocations");
            return None;
        }
    };
    let providers: Vec<String> = read
        .json()
        .and_then(|body| body.get("allocations").and_then(Value::as_object).cloned())
        .map(|a| a.keys().cloned().collect())
        .unwrap_or_default();
    if providers.is_empty() {
        return None;
    }
    let hosts = store.host_states(Some(&providers), None).await.ok()?;
    hosts
        .iter()
        .find(|h| !ignored.contains(&h.host.to_lowercase()))
        .map(|h| Answer::Placed {
            host: h.host.to_string(),
            node: h.nodename.to_string(),
        })
}

/// The instance is mapped to cell0 in the API database.
async fn in_cell0(store: &HostStateStore, uuid: &str) -> bool {
    let found: Result<Option<(Option<String>,)>, sqlx::Error> = sqlx::query_as(
        "SELECT cm.uuid FROM instance_mappings im \
         LEFT JOIN cell_mappings cm ON im.cell_id = cm.id WHERE im.instance_uuid = ?",
    )
    .bind(uuid)
    .fetch_optional(store.api_pool())
    .await;
    matches!(found, Ok(Some((Some(cell),))) if cell == CELL0_UUID)
}
