// SPDX-License-Identifier: Apache-2.0
//! A request the broker delivers again (its first consumer died before answering)
//! may find the claims that consumer made: nova's claim would keep them and add the
//! new host's, leaving the instance on two hosts.
//!
//! Which of an instance's allocations are such leftovers? At scheduling time an
//! instance holds allocations of its own only when it is evacuated: nova-conductor
//! moves a migrating or resized instance's allocation to the migration record
//! first, and a new or unshelved instance holds none. An evacuation's allocation is
//! on the compute node of the failed host, which the conductor puts in
//! `ignore_hosts`; a claim of an earlier delivery is on a host that was a candidate,
//! never an ignored one. So an allocation on the compute node of a host outside
//! `ignore_hosts` is an earlier delivery's claim. Providers that are no compute node
//! this daemon knows (nested children, sharing providers) are kept, as nova keeps
//! them.

use crate::placement::PlacementClient;
use crate::state::HostStateStore;
use rustc_hash::FxHashMap;
use serde_json::Value;
use std::collections::BTreeSet;
use std::time::Instant;
use tracing::{info, warn};

/// How a call reached the manager: what its delivery says beyond its arguments.
#[derive(Debug, Clone, Copy, Default)]
pub struct Delivery {
    /// When the caller stops waiting; no claim is made after it.
    pub deadline: Option<Instant>,
    /// Delivered before to a consumer that did not answer it.
    pub redelivered: bool,
}

/// Per instance, the providers earlier deliveries of this request claimed in it.
pub async fn earlier_claims(
    placement: &PlacementClient,
    store: &HostStateStore,
    ignore_hosts: &[String],
    instance_uuids: &[String],
    global_request_id: Option<&str>,
) -> FxHashMap<String, Vec<String>> {
    let mut held: FxHashMap<String, Vec<String>> = FxHashMap::default();
    for uuid in instance_uuids {
        match placement.current_allocations(uuid, global_request_id).await {
            Ok(read) => {
                let providers = read
                    .json()
                    .and_then(|body| body.get("allocations").and_then(Value::as_object).cloned())
                    .map(|a| a.keys().cloned().collect::<Vec<_>>())
                    .unwrap_or_default();
                if !providers.is_empty() {
                    held.insert(uuid.clone(), providers);
                }
            }
            // The claim reads it again, and meets the failure there.
            Err(e) => {
                warn!(instance = %uuid, error = %e, "could not read the allocations of a redelivered request's instance")
            }
        }
    }
    if held.is_empty() {
        return held;
    }
    let providers: Vec<String> = held
        .values()
        .flatten()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let hosts = match store.host_states(Some(&providers), None).await {
        Ok(hosts) => hosts,
        Err(e) => {
            warn!(error = %e, "could not read the hosts of a redelivered request's allocations; they are kept as nova keeps them");
            return FxHashMap::default();
        }
    };
    let ignored: BTreeSet<String> = ignore_hosts.iter().map(|h| h.to_lowercase()).collect();
    let earlier_hosts: BTreeSet<&str> = hosts
        .iter()
        .filter(|h| !ignored.contains(&h.host.to_lowercase()))
        .filter_map(|h| h.uuid.as_deref())
        .collect();
    held.into_iter()
        .filter_map(|(uuid, providers)| {
            let earlier: Vec<String> = providers
                .into_iter()
                .filter(|rp| earlier_hosts.contains(rp.as_str()))
                .collect();
            if earlier.is_empty() {
                return None;
            }
            info!(instance = %uuid, providers = ?earlier,
                "a redelivered request finds claims of its earlier delivery; they are replaced, not kept");
            Some((uuid, earlier))
        })
        .collect()
}
