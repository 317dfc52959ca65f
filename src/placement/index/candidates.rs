// SPDX-License-Identifier: Apache-2.0
//! Allocation candidates computed from the index. The common shape (one unsuffixed
//! group, no provider with a parent, none sharing via aggregate) takes Placement's
//! single-provider path (`get_provider_ids_matching` +
//! `_alloc_candidates_single_provider`): every root provider that alone satisfies
//! the group, in compact form. Every other shape goes through [`super::trees`], the
//! general search over provider trees, sharing providers and granular groups. Pure.

use super::model::{Provider, ProviderIndex};
use super::request::{class_ids, trait_ids, tree_root, LocalRequest, RequestGroup, Unsupported};
use crate::model::AllocationCandidate;
use crate::placement::AllocationCandidates;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The request with names resolved to the index's ids.
struct Resolved {
    resources: Vec<(i64, String, i64)>,
    required: Vec<i64>,
    forbidden: Vec<i64>,
    /// `None`: some `member_of` list names no known aggregate; nothing matches.
    member_of: Option<Vec<BTreeSet<i64>>>,
    forbidden_aggregates: BTreeSet<i64>,
    tree_root: Option<i64>,
    root_required: Vec<i64>,
    root_forbidden: Vec<i64>,
}

fn resolve(
    index: &ProviderIndex,
    req: &LocalRequest,
    group: &RequestGroup,
) -> Result<Resolved, Unsupported> {
    let resources = class_ids(index, &group.resources)?
        .into_iter()
        .zip(&group.resources)
        .map(|((id, amount), (rc, _))| (id, rc.clone(), amount))
        .collect();
    let mut member_of = Some(Vec::new());
    for any_of in &group.member_of {
        let known: BTreeSet<i64> = any_of
            .iter()
            .filter_map(|u| index.aggregates.id(u))
            .collect();
        match (&mut member_of, known.is_empty()) {
            (Some(lists), false) => lists.push(known),
            _ => member_of = None,
        }
    }
    let tree_root = tree_root(index, group.in_tree.as_deref())?;
    Ok(Resolved {
        resources,
        required: trait_ids(index, &group.required)?,
        forbidden: trait_ids(index, &group.forbidden)?,
        member_of,
        forbidden_aggregates: group
            .forbidden_aggregates
            .iter()
            .filter_map(|u| index.aggregates.id(u))
            .collect(),
        tree_root,
        root_required: trait_ids(index, &req.root_required)?,
        root_forbidden: trait_ids(index, &req.root_forbidden)?,
    })
}

impl Resolved {
    fn matches(&self, index: &ProviderIndex, p: &Provider) -> bool {
        if self.tree_root.is_some_and(|root| root != p.root_id) {
            return false;
        }
        if !self.required.iter().all(|t| p.traits.contains(t))
            || self.forbidden.iter().any(|t| p.traits.contains(t))
        {
            return false;
        }
        match &self.member_of {
            None => return false,
            Some(lists) => {
                if !lists
                    .iter()
                    .all(|any_of| any_of.iter().any(|a| p.aggregates.contains(a)))
                {
                    return false;
                }
            }
        }
        if self
            .forbidden_aggregates
            .iter()
            .any(|a| p.aggregates.contains(a))
        {
            return false;
        }
        if !self.root_required.is_empty() || !self.root_forbidden.is_empty() {
            let root = if p.root_id == p.id {
                p
            } else {
                match index.providers.get(&p.root_id) {
                    Some(root) => root,
                    None => return false,
                }
            };
            if root.parent_id.is_some()
                || !self.root_required.iter().all(|t| root.traits.contains(t))
                || self.root_forbidden.iter().any(|t| root.traits.contains(t))
            {
                return false;
            }
        }
        self.resources.iter().all(|(rc, _, amount)| {
            p.inventories
                .get(rc)
                .is_some_and(|inv| inv.fits(p.used(*rc), *amount))
        })
    }
}

/// The allocation candidates Placement would return for `req`, or why it must be
/// asked instead: the request names something the index does not know (Placement
/// answers 400 to unknown classes and traits; an unknown `in_tree` may be a provider
/// newer than the index), or its answer depends on Python's set order.
///
/// With `limit`, the first `limit` matches in the search's order (provider id order
/// on the single-provider path). Placement also keeps the first `limit` of its list
/// when `randomize_allocation_candidates` is off, but its list is in the order of a
/// Python set of its request objects (their hash, seeded per process), which no
/// other process can reproduce; any `limit` of the matches is as much Placement's
/// answer as another. Truncating matters: nova weighs only what Placement returned
/// (`max_placement_results`, 1000 by default), and so does the scheduler on this
/// path.
pub fn local_candidates(
    index: &ProviderIndex,
    req: &LocalRequest,
) -> Result<AllocationCandidates, Unsupported> {
    match req.single_unsuffixed_group() {
        Some(group) if !index.has_trees() && !index.has_sharing() => {
            single_provider_candidates(index, req, group)
        }
        _ => super::trees::candidates(index, req),
    }
}

/// Every root provider that alone satisfies `group`, in provider id order.
fn single_provider_candidates(
    index: &ProviderIndex,
    req: &LocalRequest,
    group: &RequestGroup,
) -> Result<AllocationCandidates, Unsupported> {
    let resolved = resolve(index, req, group)?;
    // Every candidate allocates the same amounts: the `resources` object is built once
    // and cloned (this runs over every provider on every request).
    let mut resources = Map::with_capacity(resolved.resources.len());
    for (_, rc, amount) in &resolved.resources {
        resources.insert(rc.clone(), Value::from(*amount));
    }
    let resources = Arc::new(resources);
    let limit = req.limit.map_or(usize::MAX, |n| n as usize);
    let room = limit.min(index.providers.len());
    let mut found = AllocationCandidates {
        allocation_requests: Vec::with_capacity(room),
        provider_uuids: Vec::with_capacity(room),
    };
    for p in index.providers.values() {
        if found.allocation_requests.len() >= limit {
            break;
        }
        if !resolved.matches(index, p) {
            continue;
        }
        found
            .allocation_requests
            .push(AllocationCandidate::single_provider(
                Arc::clone(&p.uuid),
                Arc::clone(&resources),
            ));
        found.provider_uuids.push(p.uuid.to_string());
    }
    Ok(found)
}

/// A provider summary at microversion 1.36: every inventory's capacity and usage,
/// the traits (sorted here; Placement's order is the database's), parent and root.
pub fn provider_summary(index: &ProviderIndex, p: &Provider) -> Value {
    let resources: Map<String, Value> = p
        .inventories
        .iter()
        .filter_map(|(rc, inv)| {
            let name = index.resource_classes.name(*rc)?;
            Some((
                name.to_string(),
                json!({"capacity": inv.summary_capacity(), "used": p.used(*rc)}),
            ))
        })
        .collect();
    let mut traits: Vec<&str> = p
        .traits
        .iter()
        .filter_map(|t| index.traits.name(*t))
        .collect();
    traits.sort_unstable();
    let uuid_of = |id: i64| index.providers.get(&id).map(|q| q.uuid.to_string());
    json!({
        "resources": resources,
        "traits": traits,
        "parent_provider_uuid": p.parent_id.and_then(uuid_of),
        "root_provider_uuid": uuid_of(p.root_id),
    })
}
