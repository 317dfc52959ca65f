// SPDX-License-Identifier: Apache-2.0
//! The `GET /allocation_candidates` query parameters the local search answers: one
//! unsuffixed request group (`resources`, `required`, `member_of`, `in_tree`) and
//! `root_required`, as nova builds them (`ResourceRequest::query_params`). Anything
//! else is [`Unsupported`] and goes to Placement.

use std::collections::BTreeSet;

/// A request the local search can answer.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LocalRequest {
    /// `resources=RC:N,...` in the query's order.
    pub resources: Vec<(String, i64)>,
    /// `required` traits (each must be present).
    pub required: BTreeSet<String>,
    /// `required=!T` traits (none may be present).
    pub forbidden: BTreeSet<String>,
    /// `member_of=in:A,B` (any of), one list per parameter; all lists must match.
    pub member_of: Vec<BTreeSet<String>>,
    /// `member_of=!in:A,B`: in none of these.
    pub forbidden_aggregates: BTreeSet<String>,
    pub in_tree: Option<String>,
    pub root_required: BTreeSet<String>,
    pub root_forbidden: BTreeSet<String>,
    /// `limit` (nova's `max_placement_results`): at most this many candidates are
    /// returned, as Placement truncates its list.
    pub limit: Option<u32>,
}

/// Why a query must go to Placement.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(pub String);

fn unsupported(reason: impl Into<String>) -> Unsupported {
    Unsupported(reason.into())
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

impl LocalRequest {
    /// Reads query parameters; `Unsupported` for anything beyond the single-group shape
    /// (suffixed groups, `same_subtree`, `group_policy`, repeated single-valued keys,
    /// a resourceless request) or anything Placement would reject.
    pub fn from_params(params: &[(String, String)]) -> Result<LocalRequest, Unsupported> {
        let mut req = LocalRequest::default();
        let (mut seen_resources, mut seen_required, mut seen_root, mut seen_limit) =
            (false, false, false, false);
        for (key, value) in params {
            match key.as_str() {
                "resources" => {
                    once(&mut seen_resources, key)?;
                    req.resources = parse_resources(value)?;
                }
                "required" => {
                    once(&mut seen_required, key)?;
                    parse_traits(value, &mut req.required, &mut req.forbidden)?;
                }
                "root_required" => {
                    once(&mut seen_root, key)?;
                    parse_traits(value, &mut req.root_required, &mut req.root_forbidden)?;
                }
                "member_of" => parse_member_of(value, &mut req)?,
                "in_tree" => {
                    if req.in_tree.is_some() {
                        return Err(unsupported("in_tree given twice"));
                    }
                    req.in_tree = Some(
                        canonical_uuid(value)
                            .ok_or_else(|| unsupported(format!("in_tree {value:?}")))?,
                    );
                }
                "limit" => {
                    once(&mut seen_limit, key)?;
                    let limit: u32 = value
                        .parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| unsupported(format!("limit {value:?}")))?;
                    req.limit = Some(limit);
                }
                other => return Err(unsupported(format!("parameter {other}"))),
            }
        }
        if req.resources.is_empty() {
            return Err(unsupported("no resources"));
        }
        Ok(req)
    }
}

fn once(seen: &mut bool, key: &str) -> Result<(), Unsupported> {
    if std::mem::replace(seen, true) {
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

fn parse_member_of(value: &str, req: &mut LocalRequest) -> Result<(), Unsupported> {
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
