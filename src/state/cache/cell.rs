// SPDX-License-Identifier: Apache-2.0
//! What the cache holds of one cell (services, compute nodes, instances by host)
//! and how rows read from the cell database are applied to it; our retained
//! decisions per node and nova's rule for when a row already shows one.

use super::watermarks::Watermarks;
use crate::model::{HostState, InstanceFlavorIds, ServiceInfo};
use crate::state::aggregates::AggregateCache;
use crate::state::compute;
use crate::state::queries::InstanceRow;
use crate::state::rows::{ComputeNodeRow, HostInstance, ServiceRow};
use chrono::{DateTime, Duration as ChronoDuration, NaiveDateTime, SubsecRound, Utc};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The resources one of our decisions took on a host.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Consumption {
    pub memory_mb: i64,
    pub root_gb: i64,
    pub ephemeral_gb: i64,
    pub vcpus: i64,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Retained {
    pub(super) at: DateTime<Utc>,
    pub(super) what: Consumption,
}

/// One compute node: its HostState from the row alone, and our retained decisions.
pub(super) struct CachedNode {
    /// `state.uuid`, shared with `node_by_uuid`'s key.
    pub(super) uuid: Option<Arc<str>>,
    pub(super) row_updated: Option<NaiveDateTime>,
    pub(super) state: HostState,
    pub(super) retained: Vec<Retained>,
}

/// What the cache holds of one cell.
#[derive(Default)]
pub(super) struct CellCache {
    /// The row's id and the `ServiceInfo` every request's host states carry, built
    /// once per row.
    // Fx-hashed: every request looks up each candidate in several of these maps, and
    // their keys (host names, uuids) come from the cell database, not from users.
    pub(super) services: FxHashMap<String, (i64, ServiceInfo)>,
    /// Compute nodes by id: the order of nova's `ComputeNodeList.get_all`. Boxed:
    /// a B-tree node holds 11 entries and is half empty after in-order inserts,
    /// which for a 600-byte entry is half of the cache's node memory.
    pub(super) nodes: BTreeMap<i64, Box<CachedNode>>,
    pub(super) node_by_uuid: FxHashMap<Arc<str>, i64>,
    pub(super) instance_host: FxHashMap<String, String>,
    pub(super) instances_by_host: FxHashMap<String, Arc<BTreeSet<String>>>,
    /// The flavor id of each instance of `instances_by_host` whose flavor is known.
    pub(super) flavors_by_host: FxHashMap<String, Arc<InstanceFlavorIds>>,
    pub(super) watermarks: Option<Watermarks>,
    /// Where the scan for soft-deleted instances reads from, and when it last ran.
    pub(super) deleted_scan: Option<(Watermarks, Instant)>,
    pub(super) last_full: Option<Instant>,
    pub(super) texts: compute::RowInterner,
    /// Hosts whose joined state may have changed since the decision table last
    /// read them (their node, instances or retained decisions).
    pub(super) changed_hosts: FxHashSet<String>,
    /// Hosts whose service row alone changed since (a heartbeat, mostly).
    pub(super) changed_services: FxHashSet<String>,
    /// A node or a host's service came or went: the decision table's rows are
    /// built again.
    pub(super) rows_changed: bool,
}

// === impl CellCache ===

impl CellCache {
    pub(super) fn from_rows(
        cell_uuid: &str,
        ratios: &compute::RatioDefaults,
        services: Vec<ServiceRow>,
        nodes: Vec<ComputeNodeRow>,
        instances: Vec<HostInstance>,
        previous: Option<&CellCache>,
    ) -> Self {
        let mut cache = CellCache::default();
        for svc in services {
            cache.upsert_service(svc);
        }
        for node in nodes {
            cache.upsert_node(cell_uuid, ratios, node, true);
        }
        // Keep our retained decisions across a full re-read; the row rule drops them.
        if let Some(prev) = previous {
            for (id, node) in cache.nodes.iter_mut() {
                if let Some(old) = prev.nodes.get(id) {
                    node.retained = still_pending(&old.retained, node.row_updated);
                }
            }
        }
        let mut by_host: HashMap<String, BTreeSet<String>> = HashMap::new();
        let mut flavors: HashMap<String, InstanceFlavorIds> = HashMap::new();
        for inst in instances {
            by_host
                .entry(inst.host.clone())
                .or_default()
                .insert(inst.uuid.clone());
            flavors
                .entry(inst.host.clone())
                .or_default()
                .insert(inst.uuid.clone(), inst.flavor_id);
            cache.instance_host.insert(inst.uuid, inst.host);
        }
        cache.instances_by_host = by_host.into_iter().map(|(h, s)| (h, Arc::new(s))).collect();
        cache.flavors_by_host = flavors.into_iter().map(|(h, f)| (h, Arc::new(f))).collect();
        cache.rows_changed = true;
        cache
    }

    pub(super) fn upsert_service(&mut self, svc: ServiceRow) {
        if let Some(host) = svc.host.clone() {
            let info = compute::service_info(&svc);
            match self.services.get(&host) {
                // Read again unchanged (a pass's overlap): the table keeps its row.
                Some((id, cached)) if *id == svc.id && *cached == info => return,
                Some(_) => {
                    self.changed_services.insert(host.clone());
                }
                None => self.rows_changed = true,
            }
            self.services.insert(host, (svc.id, info));
        }
    }

    pub(super) fn delete_service(&mut self, svc: &ServiceRow) {
        if let Some(host) = &svc.host {
            if self.services.get(host).is_some_and(|s| s.0 == svc.id) {
                self.services.remove(host);
                self.rows_changed = true;
            }
        }
    }

    /// Applies a node row unless the cached one is newer (a targeted read that raced
    /// a refresh). `force` is for full loads, which replace everything.
    pub(super) fn upsert_node(
        &mut self,
        cell_uuid: &str,
        ratios: &compute::RatioDefaults,
        row: ComputeNodeRow,
        force: bool,
    ) {
        let id = row.id;
        let previous = self.nodes.get(&id);
        if !force {
            if let Some(prev) = previous {
                if let (Some(old), Some(new)) = (prev.row_updated, row.updated_at) {
                    if old > new {
                        return;
                    }
                }
            }
        }
        match previous {
            Some(p) if row.host.as_deref() == Some(&*p.state.host) => {
                self.changed_hosts.insert(p.state.host.to_string());
            }
            _ => self.rows_changed = true,
        }
        let previous = self.nodes.get(&id);
        let retained = previous
            .map(|p| still_pending(&p.retained, row.updated_at))
            .unwrap_or_default();
        if let Some(old_uuid) = previous.and_then(|p| p.uuid.clone()) {
            if row.uuid.as_deref() != Some(&*old_uuid) {
                self.node_by_uuid.remove(&old_uuid);
            }
        }
        let row_updated = row.updated_at;
        let uuid: Option<Arc<str>> = row.uuid.as_deref().map(Arc::from);
        let mut state = compute::host_state(
            row,
            &ServiceRow::default(),
            cell_uuid,
            ratios,
            Vec::new(),
            Arc::new(BTreeSet::new()),
            &mut self.texts,
        );
        // Parse the NUMA topology once here: every request's copy then shares the
        // parsed form instead of parsing it again (a malformed one is kept as its error).
        let _ = state.numa.get(state.numa_topology.as_deref());
        // One allocation for the row's uuid (the state has it once the node reported usage).
        if state.uuid.is_some() {
            state.uuid.clone_from(&uuid);
        }
        if let Some(u) = &uuid {
            self.node_by_uuid.insert(u.clone(), id);
        }
        self.nodes.insert(
            id,
            Box::new(CachedNode {
                uuid,
                row_updated,
                state,
                retained,
            }),
        );
    }

    pub(super) fn delete_node(&mut self, id: i64) {
        if let Some(node) = self.nodes.remove(&id) {
            self.rows_changed = true;
            if let Some(u) = node.uuid {
                if self.node_by_uuid.get(&u) == Some(&id) {
                    self.node_by_uuid.remove(&u);
                }
            }
        }
    }

    pub(super) fn apply_instance(&mut self, row: InstanceRow) {
        let new_host = row.host.filter(|_| row.live);
        if let Some(old) = self.instance_host.get(&row.uuid) {
            if Some(old) != new_host.as_ref() {
                let old = old.clone();
                self.remove_instance(&old, &row.uuid);
            }
        }
        if let Some(host) = new_host {
            self.add_instance(&host, &row.uuid, Some(row.flavor_id));
        }
    }

    /// `flavor`: the instance's flavor id (itself None for a NULL column), or None
    /// when the source did not say (a cast without `instance_type_id`): a flavor
    /// already known for the instance on this host is then kept.
    pub(super) fn add_instance(&mut self, host: &str, uuid: &str, flavor: Option<Option<i64>>) {
        if let Some(old) = self.instance_host.get(uuid) {
            if old != host {
                let old = old.clone();
                self.remove_instance(&old, uuid);
            }
        }
        self.instance_host
            .insert(uuid.to_string(), host.to_string());
        self.changed_hosts.insert(host.to_string());
        let set = self.instances_by_host.entry(host.to_string()).or_default();
        if !set.contains(uuid) {
            Arc::make_mut(set).insert(uuid.to_string());
        }
        if let Some(flavor) = flavor {
            let flavors = self.flavors_by_host.entry(host.to_string()).or_default();
            if flavors.get(uuid) != Some(&flavor) {
                Arc::make_mut(flavors).insert(uuid.to_string(), flavor);
            }
        }
    }

    pub(super) fn remove_instance(&mut self, host: &str, uuid: &str) {
        self.changed_hosts.insert(host.to_string());
        if self.instance_host.get(uuid).is_some_and(|h| h == host) {
            self.instance_host.remove(uuid);
        }
        if let Some(set) = self.instances_by_host.get_mut(host) {
            if set.contains(uuid) {
                Arc::make_mut(set).remove(uuid);
            }
            if set.is_empty() {
                self.instances_by_host.remove(host);
            }
        }
        if let Some(flavors) = self.flavors_by_host.get_mut(host) {
            if flavors.contains_key(uuid) {
                Arc::make_mut(flavors).remove(uuid);
            }
            if flavors.is_empty() {
                self.flavors_by_host.remove(host);
            }
        }
    }

    /// `flavors`: each uuid's flavor id when the source carries them (a cell read).
    pub(super) fn replace_host_instances(
        &mut self,
        host: &str,
        uuids: &BTreeSet<String>,
        flavors: Option<&InstanceFlavorIds>,
    ) {
        let current: Vec<String> = self
            .instances_by_host
            .get(host)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default();
        for uuid in current.iter().filter(|u| !uuids.contains(*u)) {
            self.remove_instance(host, uuid);
        }
        for uuid in uuids {
            let flavor = flavors.and_then(|f| f.get(uuid).copied());
            self.add_instance(host, uuid, flavor);
        }
    }

    /// The HostState of node `id` as a request sees it, or `None` when nova would
    /// skip it (no service record for its host).
    pub(super) fn host_state(
        &self,
        id: i64,
        aggregates: &AggregateCache,
        retain: Option<(DateTime<Utc>, Duration)>,
    ) -> Option<HostState> {
        let node = self.nodes.get(&id)?;
        let host: &str = &node.state.host;
        let Some(service) = self.services.get(host) else {
            tracing::warn!(%host, "No compute service record found for host");
            return None;
        };
        let mut state = node.state.clone();
        state.service = service.1.clone();
        state.aggregates = aggregates.for_host(host);
        if let Some(insts) = self.instances_by_host.get(host) {
            state.instances = Arc::clone(insts);
        }
        if let Some(flavors) = self.flavors_by_host.get(host) {
            state.instance_flavor_ids = Arc::clone(flavors);
        }
        if let Some((now, ttl)) = retain {
            let ttl = ChronoDuration::from_std(ttl).unwrap_or(ChronoDuration::MAX);
            for r in still_pending(&node.retained, node.row_updated) {
                if now - r.at < ttl {
                    let c = r.what;
                    state.consume(c.memory_mb, c.root_gb, c.ephemeral_gb, c.vcpus, r.at);
                }
            }
        }
        Some(state)
    }
}

impl CellCache {
    /// When the earliest of node `id`'s retained decisions applied at `now` stops
    /// applying (its `ttl` runs out).
    pub(super) fn retained_until(
        &self,
        id: i64,
        now: DateTime<Utc>,
        ttl: Duration,
    ) -> Option<DateTime<Utc>> {
        let node = self.nodes.get(&id)?;
        let ttl = ChronoDuration::from_std(ttl).ok()?;
        still_pending(&node.retained, node.row_updated)
            .iter()
            .filter(|r| now - r.at < ttl)
            .filter_map(|r| r.at.checked_add_signed(ttl))
            .min()
    }
}

/// nova's rule: a compute node row written after a decision already shows it.
///
/// `updated_at` has whole seconds (the database truncates or rounds the writer's
/// clock) and a decision's time has not: a row stamped in the decision's second,
/// or later, may have been written after it (the compute's claim, a fraction of
/// a second later) and is taken to show it. Only a row stamped in an earlier
/// second is known to predate the decision. In doubt the decision is dropped:
/// the host is then what nova reads, where keeping it would count the claim
/// twice, a state nova never sees.
pub(super) fn still_pending(
    retained: &[Retained],
    row_updated: Option<NaiveDateTime>,
) -> Vec<Retained> {
    retained
        .iter()
        .filter(|r| row_updated.is_none_or(|u| u.and_utc() < r.at.trunc_subsecs(0)))
        .copied()
        .collect()
}
