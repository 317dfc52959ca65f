// SPDX-License-Identifier: Apache-2.0
//! The `GET /allocation_candidates` query parameters the local search answers, read
//! as Placement reads them at the microversion nova uses (1.36): request groups
//! (`resources`, `required`, `member_of`, `in_tree`, unsuffixed or with a suffix),
//! `group_policy`, `same_subtree`, `root_required` and `limit`. Anything Placement
//! would refuse (a 400), and the few shapes whose answer Placement leaves to Python's
//! set order, are [`Unsupported`] and go to Placement.

use super::model::ProviderIndex;
use std::collections::BTreeSet;

/// One request group: the unsuffixed one (`suffix` empty; its resources may come
/// from several providers of one tree and sharing providers) or a granular one
/// (everything from one provider).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RequestGroup {
    pub suffix: String,
    /// `resources{S}=RC:N,...` in the query's order; empty for a resourceless group.
    pub resources: Vec<(String, i64)>,
    /// `required{S}` traits (each must be present).
    pub required: BTreeSet<String>,
    /// `required{S}=!T` traits (none may be present).
    pub forbidden: BTreeSet<String>,
    /// `member_of{S}=in:A,B` (any of), one list per parameter; all lists must match.
    pub member_of: Vec<BTreeSet<String>>,
    /// `member_of{S}=!in:A,B`: in none of these.
    pub forbidden_aggregates: BTreeSet<String>,
    pub in_tree: Option<String>,
}

impl RequestGroup {
    /// Granular groups (any suffix) are satisfied by a single provider each.
    pub fn use_same_provider(&self) -> bool {
        !self.suffix.is_empty()
    }
}

/// `group_policy`: how granular groups may share providers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupPolicy {
    None,
    Isolate,
}

/// A request the local search can answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LocalRequest {
    /// In the order their first parameter appears (Placement's dict order).
    pub groups: Vec<RequestGroup>,
    pub group_policy: Option<GroupPolicy>,
    /// `same_subtree=S1,S2,...`, one set of suffixes per parameter.
    pub same_subtrees: Vec<BTreeSet<String>>,
    pub root_required: BTreeSet<String>,
    pub root_forbidden: BTreeSet<String>,
    /// `limit` (nova's `max_placement_results`): at most this many candidates are
    /// returned, as Placement truncates its list.
    pub limit: Option<u32>,
}

/// Why a query must go to Placement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{detail}")]
pub struct Unsupported {
    pub kind: FallbackKind,
    pub detail: String,
}

/// The kinds of [`Unsupported`], for a metric label (the detail names traits,
/// classes and values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackKind {
    /// Placement would refuse the query (a 400), or reads it differently.
    RequestShape,
    /// The query names a class, trait or provider the index does not hold (yet).
    NotInIndex,
    /// Placement's answer depends on Python's set order.
    SetOrder,
    /// More combinations than the local search walks ([`super::trees::MAX_COMBINATIONS`]).
    Combinations,
    /// A sharing provider inside a tree, which Placement cannot summarize either.
    SharingInTree,
}

impl FallbackKind {
    pub fn label(self) -> &'static str {
        match self {
            FallbackKind::RequestShape => "request_shape",
            FallbackKind::NotInIndex => "not_in_index",
            FallbackKind::SetOrder => "set_order",
            FallbackKind::Combinations => "combinations",
            FallbackKind::SharingInTree => "sharing_in_tree",
        }
    }
}

impl Unsupported {
    pub fn new(kind: FallbackKind, detail: impl Into<String>) -> Self {
        Unsupported {
            kind,
            detail: detail.into(),
        }
    }
}

fn unsupported(reason: impl Into<String>) -> Unsupported {
    Unsupported::new(FallbackKind::RequestShape, reason)
}

/// Names as Placement's schema accepts them (`^[A-Z0-9_]+$`).
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Placement compares uuids as given with the stored (dashed, lower-case) ones;
/// other spellings are left to it.
fn canonical_uuid(text: &str) -> Option<String> {
    uuid::Uuid::try_parse(text)
        .ok()
        .map(|u| u.hyphenated().to_string())
        .filter(|u| u == text)
}

/// A request group parameter: `(prefix, suffix)` for `resources`, `required`,
/// `member_of` and `in_tree` with an optional suffix (`[a-zA-Z0-9_-]{1,64}` from 1.33).
fn group_key(key: &str) -> Option<(&'static str, &str)> {
    for prefix in ["resources", "required", "member_of", "in_tree"] {
        if let Some(suffix) = key.strip_prefix(prefix) {
            let valid = suffix.len() <= 64
                && suffix
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if valid {
                return Some((prefix, suffix));
            }
        }
    }
    None
}

impl LocalRequest {
    /// Reads query parameters; `Unsupported` for anything Placement would reject
    /// (unknown parameters, malformed values, a repeated single-valued key, a
    /// missing `group_policy`, resourceless groups outside `same_subtree`) and for
    /// repeated `required{S}` (Placement keeps only the last one before 1.39).
    pub fn from_params(params: &[(String, String)]) -> Result<LocalRequest, Unsupported> {
        let mut req = LocalRequest::default();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for (key, value) in params {
            if let Some((prefix, suffix)) = group_key(key) {
                let at = match req.groups.iter().position(|g| g.suffix == suffix) {
                    Some(at) => at,
                    None => {
                        req.groups.push(RequestGroup {
                            suffix: suffix.to_string(),
                            ..RequestGroup::default()
                        });
                        req.groups.len() - 1
                    }
                };
                let group = &mut req.groups[at];
                match prefix {
                    "resources" => {
                        once(&mut seen, key)?;
                        group.resources = parse_resources(value)?;
                    }
                    "required" => {
                        once(&mut seen, key)?;
                        parse_traits(value, &mut group.required, &mut group.forbidden)?;
                    }
                    "member_of" => parse_member_of(value, group)?,
                    _ => {
                        once(&mut seen, key)?;
                        group.in_tree = Some(
                            canonical_uuid(value)
                                .ok_or_else(|| unsupported(format!("{key} {value:?}")))?,
                        );
                    }
                }
                continue;
            }
            match key.as_str() {
                "root_required" => {
                    once(&mut seen, key)?;
                    parse_traits(value, &mut req.root_required, &mut req.root_forbidden)?;
                }
                "limit" => {
                    once(&mut seen, key)?;
                    let limit: u32 = value
                        .parse()
                        .ok()
                        .filter(|n| *n > 0 && !value.starts_with('0') && !value.starts_with('+'))
                        .ok_or_else(|| unsupported(format!("limit {value:?}")))?;
                    req.limit = Some(limit);
                }
                "group_policy" => {
                    once(&mut seen, key)?;
                    req.group_policy = Some(match value.as_str() {
                        "none" => GroupPolicy::None,
                        "isolate" => GroupPolicy::Isolate,
                        _ => return Err(unsupported(format!("group_policy {value:?}"))),
                    });
                }
                "same_subtree" => {
                    let suffixes: BTreeSet<String> =
                        value.split(',').map(|s| s.trim().to_string()).collect();
                    if suffixes.iter().any(String::is_empty) {
                        return Err(unsupported(format!("same_subtree {value:?}")));
                    }
                    req.same_subtrees.push(suffixes);
                }
                other => return Err(unsupported(format!("parameter {other}"))),
            }
        }
        req.validate()?;
        Ok(req)
    }

    /// Placement's checks across parameters (`dict_from_request` at 1.36 and the
    /// handler's `group_policy` rule).
    fn validate(&self) -> Result<(), Unsupported> {
        if self.groups.iter().all(|g| g.resources.is_empty()) {
            return Err(unsupported("no resources"));
        }
        let in_subtrees: BTreeSet<&String> = self.same_subtrees.iter().flatten().collect();
        for g in &self.groups {
            if g.resources.is_empty() && !in_subtrees.contains(&g.suffix) {
                return Err(unsupported(format!(
                    "resourceless group {:?} outside same_subtree",
                    g.suffix
                )));
            }
        }
        for suffix in in_subtrees {
            if !self.groups.iter().any(|g| &g.suffix == suffix) {
                return Err(unsupported(format!("same_subtree names no group {suffix}")));
            }
        }
        let granular = self.groups.iter().filter(|g| g.use_same_provider()).count();
        if granular > 1 && self.group_policy.is_none() {
            return Err(unsupported(
                "group_policy missing with several granular groups",
            ));
        }
        Ok(())
    }

    /// The unsuffixed group when it is the only one and nothing request-wide but
    /// `root_required` and `limit` is asked: the common shape of a boot.
    pub fn single_unsuffixed_group(&self) -> Option<&RequestGroup> {
        match self.groups.as_slice() {
            [g] if g.suffix.is_empty() && self.same_subtrees.is_empty() => Some(g),
            _ => None,
        }
    }
}

fn once(seen: &mut BTreeSet<String>, key: &str) -> Result<(), Unsupported> {
    if !seen.insert(key.to_string()) {
        return Err(unsupported(format!("{key} given twice")));
    }
    Ok(())
}

fn parse_resources(value: &str) -> Result<Vec<(String, i64)>, Unsupported> {
    let mut out: Vec<(String, i64)> = Vec::new();
    for item in value.split(',') {
        let (rc, amount) = item
            .split_once(':')
            .ok_or_else(|| unsupported(format!("resources item {item:?}")))?;
        let amount: i64 = amount
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| unsupported(format!("resources amount {item:?}")))?;
        if !valid_name(rc) || out.iter().any(|(seen, _)| seen == rc) {
            return Err(unsupported(format!("resources item {item:?}")));
        }
        out.push((rc.to_string(), amount));
    }
    Ok(out)
}

fn parse_traits(
    value: &str,
    required: &mut BTreeSet<String>,
    forbidden: &mut BTreeSet<String>,
) -> Result<(), Unsupported> {
    for item in value.split(',') {
        let (set, name) = match item.strip_prefix('!') {
            Some(name) => (&mut *forbidden, name),
            None => (&mut *required, item),
        };
        if !valid_name(name) {
            // `in:` any-of lists (1.39+) and malformed names go to Placement.
            return Err(unsupported(format!("trait {item:?}")));
        }
        set.insert(name.to_string());
    }
    if required.intersection(forbidden).next().is_some() {
        return Err(unsupported("a trait both required and forbidden"));
    }
    Ok(())
}

fn parse_member_of(value: &str, req: &mut RequestGroup) -> Result<(), Unsupported> {
    let (negated, rest) = match value.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, value),
    };
    let list = rest.strip_prefix("in:").unwrap_or(rest);
    let mut uuids = BTreeSet::new();
    for item in list.split(',') {
        let uuid =
            canonical_uuid(item).ok_or_else(|| unsupported(format!("member_of {value:?}")))?;
        uuids.insert(uuid);
    }
    if value.contains(',') && !rest.starts_with("in:") {
        // Placement: several values need the `in:` prefix (400).
        return Err(unsupported(format!("member_of {value:?}")));
    }
    if negated {
        req.forbidden_aggregates.extend(uuids);
    } else {
        req.member_of.push(uuids);
    }
    Ok(())
}

/// The index's ids of trait `names`; a name not in the index may be newer than it.
pub(super) fn trait_ids(
    index: &ProviderIndex,
    names: &BTreeSet<String>,
) -> Result<Vec<i64>, Unsupported> {
    names
        .iter()
        .map(|n| {
            index.traits.id(n).ok_or_else(|| {
                Unsupported::new(
                    FallbackKind::NotInIndex,
                    format!("trait {n} is not in the index"),
                )
            })
        })
        .collect()
}

/// `(resource class id, amount)` of a group's resources, in their order.
pub(super) fn class_ids(
    index: &ProviderIndex,
    resources: &[(String, i64)],
) -> Result<Vec<(i64, i64)>, Unsupported> {
    resources
        .iter()
        .map(|(rc, amount)| {
            index
                .resource_classes
                .id(rc)
                .map(|id| (id, *amount))
                .ok_or_else(|| {
                    Unsupported::new(
                        FallbackKind::NotInIndex,
                        format!("resource class {rc} is not in the index"),
                    )
                })
        })
        .collect()
}

/// The root of `in_tree`'s provider; an unknown one may be newer than the index.
pub(super) fn tree_root(
    index: &ProviderIndex,
    in_tree: Option<&str>,
) -> Result<Option<i64>, Unsupported> {
    in_tree
        .map(|uuid| {
            index.provider(uuid).map(|p| p.root_id).ok_or_else(|| {
                Unsupported::new(
                    FallbackKind::NotInIndex,
                    format!("in_tree provider {uuid} is not in the index"),
                )
            })
        })
        .transpose()
}
