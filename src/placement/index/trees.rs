// SPDX-License-Identifier: Apache-2.0
//! Allocation candidates over provider trees, sharing providers and granular request
//! groups, computed from the index the way Placement computes them
//! (`AllocationCandidates._get_by_requests` and `research_context`):
//!
//! 1. Each request group is searched on its own. A granular group, or the unsuffixed
//!    group in a cloud without trees and sharing providers, takes the
//!    single-provider path: every provider that alone has the group's resources,
//!    traits and aggregates, anchored at its root, and a sharing provider once more
//!    for each root it shares with. The unsuffixed group otherwise takes the
//!    multiple-provider path: per tree (a root, plus the sharing providers in an
//!    aggregate with any provider of the tree) every combination of one provider
//!    per resource class, kept when the providers used together have the required
//!    traits and none of them a forbidden one. `member_of` there means the provider
//!    or its root; on the single-provider path the provider itself.
//! 2. The groups' answers are combined per anchor root: one answer of each group,
//!    kept when `group_policy=isolate` finds the granular groups on distinct
//!    providers, every `same_subtree` set's providers lie under one of them, and the
//!    summed amounts fit each provider's capacity and `max_unit`.
//! 3. Provider summaries cover every provider of each tree that gives resources.
//!
//! Placement returns its combined answers in the order of a Python set (per-process
//! string hashing), so the candidates here come in a fixed order of their own
//! (anchor root id, then groups in query order) and `limit` keeps the first ones.
//! Two shapes make Placement's answer itself depend on that set order, and are left
//! to Placement: a resource class the unsuffixed group and a granular group may
//! both take from one provider under a `group_policy` other than `none` (Placement
//! then sums the amounts into an object other answers share), and an unsuffixed
//! group satisfied entirely by sharing providers alongside other groups (Placement
//! keeps one of its equal answers, with an arbitrary anchor). Pure.

use super::model::{Provider, ProviderIndex, SHARING_TRAIT};
use super::request::{
    class_ids, trait_ids, tree_root, FallbackKind, GroupPolicy, LocalRequest, RequestGroup,
    Unsupported,
};
use crate::model::allocation_candidate::SpreadAllocations;
use crate::model::AllocationCandidate;
use crate::placement::AllocationCandidates;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

/// Above this many combinations of one group's providers, or of the groups'
/// answers, the question goes to Placement: the search must stay a small part of a
/// scheduling decision.
pub const MAX_COMBINATIONS: usize = 200_000;

/// One group's answer: amounts from providers, anchored at a root.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct GroupAnswer {
    anchor: i64,
    /// `(provider id, resource class id, amount)`.
    resources: Vec<(i64, i64, i64)>,
    /// The providers the group maps to (`mappings`).
    providers: BTreeSet<i64>,
}

/// A group with its names resolved to the index's ids.
struct Group<'r> {
    spec: &'r RequestGroup,
    /// `(resource class id, amount)` in the query's order.
    resources: Vec<(i64, i64)>,
    required: Vec<i64>,
    forbidden: Vec<i64>,
    /// Providers in every `member_of` list (the provider's own aggregates); `None`
    /// without `member_of`.
    in_aggregates: Option<BTreeSet<i64>>,
    forbidden_aggregates: BTreeSet<i64>,
    tree_root: Option<i64>,
}

/// What the whole search shares.
struct Search<'a> {
    index: &'a ProviderIndex,
    /// Providers sharing via aggregate, with the roots they share with
    /// (`anchors_for_sharing_providers`: the root of every provider in one of their
    /// aggregates, their own included; none without aggregates).
    sharing: BTreeMap<i64, BTreeSet<i64>>,
    has_trees: bool,
    /// Roots allowed by `root_required`; `None` without it.
    anchors: Option<BTreeSet<i64>>,
}

/// Why the search ends early.
enum Stop {
    /// Placement answers with no candidates.
    Empty,
    Unsupported(Unsupported),
}

impl From<Unsupported> for Stop {
    fn from(u: Unsupported) -> Self {
        Stop::Unsupported(u)
    }
}

/// The candidates for any request shape (see the module documentation).
pub fn candidates(
    index: &ProviderIndex,
    req: &LocalRequest,
) -> Result<AllocationCandidates, Unsupported> {
    match search(index, req) {
        Ok(found) => Ok(found),
        Err(Stop::Empty) => Ok(AllocationCandidates::default()),
        Err(Stop::Unsupported(u)) => Err(u),
    }
}

fn search(index: &ProviderIndex, req: &LocalRequest) -> Result<AllocationCandidates, Stop> {
    if let Some(rc) = shared_class_summed_in_place(req) {
        return Err(Unsupported::new(
            FallbackKind::SetOrder,
            format!("{rc} in several request groups without group_policy=none"),
        )
        .into());
    }
    let sharing_trait = index.traits.id(SHARING_TRAIT);
    let sharing = sharing_anchors(index, sharing_trait);
    if let Some(&p) = sharing
        .keys()
        .find(|id| index.providers[id].parent_id.is_some())
    {
        return Err(Unsupported::new(
            FallbackKind::SharingInTree,
            format!("sharing provider {} has a parent", index.providers[&p].uuid),
        )
        .into());
    }
    let root_required = trait_ids(index, &req.root_required)?;
    let root_forbidden = trait_ids(index, &req.root_forbidden)?;
    let anchors = if root_required.is_empty() && root_forbidden.is_empty() {
        None
    } else {
        let roots: BTreeSet<i64> = index
            .providers
            .values()
            .filter(|p| {
                p.parent_id.is_none()
                    && root_required.iter().all(|t| p.traits.contains(t))
                    && !root_forbidden.iter().any(|t| p.traits.contains(t))
            })
            .map(|p| p.id)
            .collect();
        if roots.is_empty() {
            return Err(Stop::Empty);
        }
        Some(roots)
    };
    let search = Search {
        index,
        sharing,
        has_trees: index.has_trees(),
        anchors,
    };
    let groups = req
        .groups
        .iter()
        .map(|g| resolve(index, g))
        .collect::<Result<Vec<_>, _>>()?;
    let mut answers: Vec<Vec<GroupAnswer>> = Vec::with_capacity(groups.len());
    for g in &groups {
        let found =
            if !g.spec.use_same_provider() && (!search.sharing.is_empty() || search.has_trees) {
                let found = search.multiple_providers(g)?;
                if groups.len() > 1 && !search.sharing.is_empty() {
                    refuse_anchorless_duplicates(&found)?;
                }
                found
            } else {
                search.single_provider(g)?
            };
        if found.is_empty() {
            return Err(Stop::Empty);
        }
        answers.push(found);
    }
    let merged = search.merge(req, &groups, &answers)?;
    Ok(search.output(req, merged))
}

/// A class two groups may both take from one provider in a combination Placement
/// keeps: it then adds the second amount into the first group's own request object
/// (copies are made only under `group_policy=none`), which later combinations share.
/// `isolate` keeps granular groups apart, so only the unsuffixed group can meet one.
fn shared_class_summed_in_place(req: &LocalRequest) -> Option<&str> {
    if req.group_policy == Some(GroupPolicy::None) {
        return None;
    }
    let isolate = req.group_policy == Some(GroupPolicy::Isolate);
    for (i, a) in req.groups.iter().enumerate() {
        for b in &req.groups[i + 1..] {
            if isolate && a.use_same_provider() && b.use_same_provider() {
                continue;
            }
            if let Some((rc, _)) = a
                .resources
                .iter()
                .find(|(rc, _)| b.resources.iter().any(|(other, _)| other == rc))
            {
                return Some(rc);
            }
        }
    }
    None
}

/// Every sharing provider with the roots it shares with, from one pass over the
/// providers' aggregates.
fn sharing_anchors(
    index: &ProviderIndex,
    sharing_trait: Option<i64>,
) -> BTreeMap<i64, BTreeSet<i64>> {
    let Some(t) = sharing_trait else {
        return BTreeMap::new();
    };
    let sharing: Vec<&Provider> = index
        .providers
        .values()
        .filter(|p| p.traits.contains(&t))
        .collect();
    if sharing.is_empty() {
        return BTreeMap::new();
    }
    let wanted: BTreeSet<i64> = sharing
        .iter()
        .flat_map(|p| p.aggregates.iter().copied())
        .collect();
    let mut roots_by_aggregate: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
    for q in index.providers.values() {
        for a in q.aggregates.intersection(&wanted) {
            roots_by_aggregate.entry(*a).or_default().insert(q.root_id);
        }
    }
    sharing
        .into_iter()
        .map(|p| {
            let anchors = p
                .aggregates
                .iter()
                .filter_map(|a| roots_by_aggregate.get(a))
                .flatten()
                .copied()
                .collect();
            (p.id, anchors)
        })
        .collect()
}

fn resolve<'r>(index: &ProviderIndex, g: &'r RequestGroup) -> Result<Group<'r>, Stop> {
    let resources = class_ids(index, &g.resources)?;
    let required = trait_ids(index, &g.required)?;
    let forbidden = trait_ids(index, &g.forbidden)?;
    let in_aggregates = if g.member_of.is_empty() {
        None
    } else {
        let lists: Vec<BTreeSet<i64>> = g
            .member_of
            .iter()
            .map(|any_of| {
                any_of
                    .iter()
                    .filter_map(|u| index.aggregates.id(u))
                    .collect()
            })
            .collect();
        if lists.iter().any(BTreeSet::is_empty) {
            return Err(Stop::Empty);
        }
        let members: BTreeSet<i64> = index
            .providers
            .values()
            .filter(|p| {
                lists
                    .iter()
                    .all(|any_of| any_of.iter().any(|a| p.aggregates.contains(a)))
            })
            .map(|p| p.id)
            .collect();
        if members.is_empty() {
            return Err(Stop::Empty);
        }
        Some(members)
    };
    let tree_root = tree_root(index, g.in_tree.as_deref())?;
    Ok(Group {
        spec: g,
        resources,
        required,
        forbidden,
        in_aggregates,
        forbidden_aggregates: g
            .forbidden_aggregates
            .iter()
            .filter_map(|u| index.aggregates.id(u))
            .collect(),
        tree_root,
    })
}

/// A multiple-provider answer the same in several trees: Placement's set keeps one
/// of them, anchored wherever its set order puts it first.
fn refuse_anchorless_duplicates(found: &[GroupAnswer]) -> Result<(), Stop> {
    let mut seen: HashSet<Content<'_>> = HashSet::new();
    for a in found {
        if !seen.insert((&a.resources, &a.providers)) {
            return Err(Unsupported::new(
                FallbackKind::SetOrder,
                "an unsuffixed group satisfied by sharing providers alone, with other groups",
            )
            .into());
        }
    }
    Ok(())
}

/// What Placement compares of an answer (not its anchor).
type Content<'a> = (&'a [(i64, i64, i64)], &'a BTreeSet<i64>);

impl Search<'_> {
    fn provider(&self, id: i64) -> &Provider {
        &self.index.providers[&id]
    }

    fn anchor_allowed(&self, root: i64) -> bool {
        self.anchors.as_ref().is_none_or(|a| a.contains(&root))
    }

    /// Providers with room for `amount` of `rc` by Placement's SQL check, in `tree`
    /// when given: `(provider, root)`.
    fn with_resource(&self, rc: i64, amount: i64, tree: Option<i64>) -> Vec<(i64, i64)> {
        self.index
            .providers
            .values()
            .filter(|p| tree.is_none_or(|t| p.root_id == t))
            .filter(|p| {
                p.inventories
                    .get(&rc)
                    .is_some_and(|inv| inv.fits_sql(p.used(rc), amount))
            })
            .map(|p| (p.id, p.root_id))
            .collect()
    }

    /// `get_provider_ids_matching` + `_alloc_candidates_single_provider`.
    fn single_provider(&self, g: &Group<'_>) -> Result<Vec<GroupAnswer>, Stop> {
        let filtered = |p: &Provider| {
            g.required.iter().all(|t| p.traits.contains(t))
                && g.in_aggregates.as_ref().is_none_or(|m| m.contains(&p.id))
                && !g.forbidden.iter().any(|t| p.traits.contains(t))
                && !p
                    .aggregates
                    .iter()
                    .any(|a| g.forbidden_aggregates.contains(a))
        };
        let matching: Vec<&Provider> = if g.resources.is_empty() {
            // A resourceless group keeps providers by traits and aggregates only,
            // none when it names neither (and `in_tree` plays no part).
            if g.required.is_empty() && g.in_aggregates.is_none() {
                return Err(Stop::Empty);
            }
            self.index
                .providers
                .values()
                .filter(|p| filtered(p))
                .collect()
        } else {
            self.index
                .providers
                .values()
                .filter(|p| g.tree_root.is_none_or(|t| p.root_id == t))
                .filter(|p| {
                    g.resources.iter().all(|(rc, amount)| {
                        p.inventories
                            .get(rc)
                            .is_some_and(|inv| inv.fits_sql(p.used(*rc), *amount))
                    })
                })
                .filter(|p| filtered(p))
                .collect()
        };
        let mut found = Vec::new();
        for p in matching {
            let answer = GroupAnswer {
                anchor: p.root_id,
                resources: g
                    .resources
                    .iter()
                    .map(|(rc, amount)| (p.id, *rc, *amount))
                    .collect(),
                providers: BTreeSet::from([p.id]),
            };
            if let Some(anchors) = self.sharing.get(&p.id) {
                for &anchor in anchors {
                    if anchor != p.root_id && self.anchor_allowed(anchor) {
                        found.push(GroupAnswer {
                            anchor,
                            ..answer.clone()
                        });
                    }
                }
            }
            if self.anchor_allowed(p.root_id) {
                found.push(answer);
            }
        }
        Ok(found)
    }

    /// `get_trees_matching_all` + `_alloc_candidates_multiple_providers`. An answer
    /// given by sharing providers alone comes once per tree they share with;
    /// Placement's set keeps one of them (the merge's own set does the same).
    fn multiple_providers(&self, g: &Group<'_>) -> Result<Vec<GroupAnswer>, Stop> {
        let bad_aggregates: BTreeSet<i64> = if g.forbidden_aggregates.is_empty() {
            BTreeSet::new()
        } else {
            self.index
                .providers
                .values()
                .filter(|p| {
                    p.aggregates
                        .iter()
                        .any(|a| g.forbidden_aggregates.contains(a))
                })
                .map(|p| p.id)
                .collect()
        };
        // (provider, anchor root) per resource class, for trees that have them all.
        let mut by_rc: BTreeMap<i64, BTreeSet<(i64, i64)>> = BTreeMap::new();
        let mut trees: Option<BTreeSet<i64>> = None;
        for (rc, amount) in &g.resources {
            let with_resource = self.with_resource(*rc, *amount, g.tree_root);
            if with_resource.is_empty() {
                return Err(Stop::Empty);
            }
            let mut found: BTreeSet<(i64, i64)> = with_resource.iter().copied().collect();
            if g.tree_root.is_none() {
                for &(p, _) in &with_resource {
                    let Some(anchors) = self.sharing.get(&p) else {
                        continue;
                    };
                    if g.in_aggregates.as_ref().is_none_or(|m| m.contains(&p)) {
                        found.extend(anchors.iter().map(|&a| (p, a)));
                    }
                }
            }
            found.retain(|&(_, anchor)| self.anchor_allowed(anchor));
            if let Some(members) = &g.in_aggregates {
                found.retain(|(p, anchor)| members.contains(p) || members.contains(anchor));
            }
            found.retain(|(p, anchor)| {
                !bad_aggregates.contains(p) && !bad_aggregates.contains(anchor)
            });
            if found.is_empty() {
                return Err(Stop::Empty);
            }
            let these: BTreeSet<i64> = found.iter().map(|&(_, a)| a).collect();
            trees = Some(match trees {
                None => these,
                Some(before) => before.intersection(&these).copied().collect(),
            });
            by_rc.insert(*rc, found);
            if trees.as_ref().is_some_and(BTreeSet::is_empty) {
                return Err(Stop::Empty);
            }
        }
        let trees = trees.unwrap_or_default();
        let amounts: BTreeMap<i64, i64> = g.resources.iter().copied().collect();
        // Providers per anchor per resource class.
        let mut by_anchor: BTreeMap<i64, BTreeMap<i64, Vec<i64>>> = BTreeMap::new();
        for (rc, pairs) in &by_rc {
            for &(p, anchor) in pairs {
                if trees.contains(&anchor) {
                    by_anchor
                        .entry(anchor)
                        .or_default()
                        .entry(*rc)
                        .or_default()
                        .push(p);
                }
            }
        }
        let mut found = Vec::new();
        for (anchor, per_rc) in by_anchor {
            // One provider list per resource class, in class id order.
            let lists: Vec<(i64, Vec<i64>)> = per_rc.into_iter().collect();
            let combinations = lists
                .iter()
                .try_fold(1usize, |n, (_, l)| n.checked_mul(l.len()))
                .filter(|n| *n <= MAX_COMBINATIONS)
                .ok_or_else(|| {
                    Unsupported::new(FallbackKind::Combinations, "too many provider combinations")
                })?;
            if combinations == 0 {
                continue;
            }
            let mut pick = vec![0usize; lists.len()];
            loop {
                let used: Vec<i64> = pick.iter().zip(&lists).map(|(&i, (_, l))| l[i]).collect();
                if self.traits_satisfied(g, &used) {
                    found.push(GroupAnswer {
                        anchor,
                        resources: lists
                            .iter()
                            .zip(&used)
                            .map(|((rc, _), &p)| (p, *rc, amounts[rc]))
                            .collect(),
                        providers: used.iter().copied().collect(),
                    });
                }
                if !advance(&mut pick, lists.iter().map(|(_, l)| l.len())) {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// `_check_traits_for_alloc_request`: no provider used has a forbidden trait, and
    /// together they have every required one.
    fn traits_satisfied(&self, g: &Group<'_>, used: &[i64]) -> bool {
        if used.iter().any(|&p| {
            g.forbidden
                .iter()
                .any(|t| self.provider(p).traits.contains(t))
        }) {
            return false;
        }
        g.required
            .iter()
            .all(|t| used.iter().any(|&p| self.provider(p).traits.contains(t)))
    }

    /// `_merge_candidates`: one answer of every group per anchor, filtered by
    /// `group_policy`, `same_subtree` and the summed capacity.
    fn merge(
        &self,
        req: &LocalRequest,
        groups: &[Group<'_>],
        answers: &[Vec<GroupAnswer>],
    ) -> Result<Vec<Merged>, Stop> {
        let mut by_anchor: BTreeMap<i64, Vec<Vec<&GroupAnswer>>> = BTreeMap::new();
        for (at, found) in answers.iter().enumerate() {
            for a in found {
                by_anchor
                    .entry(a.anchor)
                    .or_insert_with(|| vec![Vec::new(); groups.len()])[at]
                    .push(a);
            }
        }
        let granular = groups.iter().filter(|g| g.spec.use_same_provider()).count();
        let isolate = req.group_policy == Some(GroupPolicy::Isolate);
        let mut seen: HashSet<Merged> = HashSet::new();
        let mut merged = Vec::new();
        for lists in by_anchor.values() {
            if lists.iter().any(Vec::is_empty) {
                continue;
            }
            lists
                .iter()
                .try_fold(1usize, |n, l| n.checked_mul(l.len()))
                .filter(|n| *n <= MAX_COMBINATIONS)
                .ok_or_else(|| {
                    Unsupported::new(
                        FallbackKind::Combinations,
                        "too many combinations of group answers",
                    )
                })?;
            let mut pick = vec![0usize; lists.len()];
            loop {
                let chosen: Vec<&GroupAnswer> =
                    pick.iter().zip(lists).map(|(&i, l)| l[i]).collect();
                let keep = (!isolate || self.isolated(groups, &chosen, granular))
                    && self.same_subtrees(req, groups, &chosen);
                if keep {
                    let candidate = Merged::of(&chosen);
                    // Only sharing providers can give one answer in several trees:
                    // any other provider ties it to its own root.
                    let unique = candidate
                        .amounts
                        .keys()
                        .any(|(p, _)| !self.sharing.contains_key(p));
                    if !self.exceeds_capacity(&candidate)
                        && (unique || seen.insert(candidate.clone()))
                    {
                        merged.push(candidate);
                    }
                }
                if !advance(&mut pick, lists.iter().map(Vec::len)) {
                    break;
                }
            }
        }
        Ok(merged)
    }

    /// `_satisfies_group_policy` for `isolate`: the granular groups on as many
    /// distinct providers as there are groups.
    fn isolated(&self, groups: &[Group<'_>], chosen: &[&GroupAnswer], granular: usize) -> bool {
        let providers: BTreeSet<i64> = groups
            .iter()
            .zip(chosen)
            .filter(|(g, _)| g.spec.use_same_provider())
            .flat_map(|(_, a)| a.providers.iter().copied())
            .collect();
        providers.len() == granular
    }

    /// `_satisfies_same_subtree`: for each `same_subtree` set, one of its groups'
    /// providers is an ancestor of (or is) every other.
    fn same_subtrees(
        &self,
        req: &LocalRequest,
        groups: &[Group<'_>],
        chosen: &[&GroupAnswer],
    ) -> bool {
        req.same_subtrees.iter().all(|suffixes| {
            let providers: BTreeSet<i64> = groups
                .iter()
                .zip(chosen)
                .filter(|(g, _)| suffixes.contains(&g.spec.suffix))
                .flat_map(|(_, a)| a.providers.iter().copied())
                .collect();
            if providers.len() <= 1 {
                return true;
            }
            providers
                .iter()
                .any(|&top| providers.iter().all(|&p| self.is_ancestor_or_self(top, p)))
        })
    }

    fn is_ancestor_or_self(&self, ancestor: i64, mut p: i64) -> bool {
        loop {
            if p == ancestor {
                return true;
            }
            match self.index.providers.get(&p).and_then(|q| q.parent_id) {
                Some(parent) => p = parent,
                None => return false,
            }
        }
    }

    /// `exceeds_capacity`: each summed amount within the provider's capacity as
    /// Placement's Python computes it, and within `max_unit`.
    fn exceeds_capacity(&self, candidate: &Merged) -> bool {
        candidate.amounts.iter().any(|(&(p, rc), &amount)| {
            let provider = self.provider(p);
            match provider.inventories.get(&rc) {
                Some(inv) => {
                    provider.used(rc) + amount > inv.summary_capacity() || amount > inv.max_unit
                }
                None => true,
            }
        })
    }

    fn output(&self, req: &LocalRequest, mut merged: Vec<Merged>) -> AllocationCandidates {
        if let Some(limit) = req.limit {
            merged.truncate(limit as usize);
        }
        let roots: BTreeSet<i64> = merged
            .iter()
            .flat_map(|m| m.amounts.keys().map(|(p, _)| self.provider(*p).root_id))
            .collect();
        let provider_uuids = self
            .index
            .providers
            .values()
            .filter(|p| roots.contains(&p.root_id))
            .map(|p| p.uuid.to_string())
            .collect();
        // One shared string per provider, class and suffix across the candidates.
        let mut names = Names::default();
        let allocation_requests = merged
            .iter()
            .map(|m| self.candidate(req, m, &mut names))
            .collect();
        AllocationCandidates {
            allocation_requests,
            provider_uuids,
        }
    }

    /// The allocation request as Placement writes it at 1.34+, its JSON built when
    /// read.
    fn candidate(&self, req: &LocalRequest, m: &Merged, names: &mut Names) -> AllocationCandidate {
        let mut allocations: SpreadAllocations = Vec::new();
        let mut last = None;
        for (&(p, rc), &amount) in &m.amounts {
            if last != Some(p) {
                allocations.push((names.provider(self.index, p), Vec::new()));
                last = Some(p);
            }
            if let Some((_, amounts)) = allocations.last_mut() {
                amounts.push((names.class(self.index, rc), amount));
            }
        }
        let mappings = req
            .groups
            .iter()
            .zip(&m.mappings)
            .map(|(g, providers)| {
                let list = providers
                    .iter()
                    .map(|&p| names.provider(self.index, p))
                    .collect();
                (Arc::from(g.suffix.as_str()), list)
            })
            .collect();
        AllocationCandidate::spread(allocations, mappings)
    }
}

/// Shared names for the candidates of one answer.
#[derive(Default)]
struct Names {
    providers: HashMap<i64, Arc<str>>,
    classes: HashMap<i64, Arc<str>>,
}

impl Names {
    fn provider(&mut self, index: &ProviderIndex, id: i64) -> Arc<str> {
        Arc::clone(self.providers.entry(id).or_insert_with(|| {
            index
                .providers
                .get(&id)
                .map_or_else(|| Arc::from(""), |p| Arc::clone(&p.uuid))
        }))
    }

    fn class(&mut self, index: &ProviderIndex, id: i64) -> Arc<str> {
        Arc::clone(
            self.classes
                .entry(id)
                .or_insert_with(|| Arc::from(index.resource_classes.name(id).unwrap_or_default())),
        )
    }
}

/// One combined answer (`_consolidate_allocation_requests`), as compared for
/// equality by Placement (amounts and mappings, not the anchor).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Merged {
    /// Summed amount per `(provider id, resource class id)`.
    amounts: BTreeMap<(i64, i64), i64>,
    /// Providers per request group, in group order.
    mappings: Vec<BTreeSet<i64>>,
}

impl Merged {
    fn of(chosen: &[&GroupAnswer]) -> Merged {
        let mut amounts: BTreeMap<(i64, i64), i64> = BTreeMap::new();
        let mut mappings = Vec::with_capacity(chosen.len());
        for a in chosen {
            for &(p, rc, amount) in &a.resources {
                *amounts.entry((p, rc)).or_insert(0) += amount;
            }
            mappings.push(a.providers.clone());
        }
        Merged { amounts, mappings }
    }
}

/// The next combination of a mixed-radix counter; false after the last.
fn advance(pick: &mut [usize], sizes: impl Iterator<Item = usize>) -> bool {
    let sizes: Vec<usize> = sizes.collect();
    for i in (0..pick.len()).rev() {
        pick[i] += 1;
        if pick[i] < sizes[i] {
            return true;
        }
        pick[i] = 0;
    }
    false
}
