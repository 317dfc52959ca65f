// SPDX-License-Identifier: Apache-2.0
//! `SameHostFilter`: with a `same_host` hint, only hosts running at least one of the
//! listed instances pass.

use super::{FilterRequest, HostFilter};
use crate::model::{HostState, RequestSpec};
use tracing::warn;

/// Most instance uuids read from a `same_host` / `different_host` hint. nova has no
/// limit (the API's 112 KiB body limit allows ~2,900); more than this is refused:
/// the request then finds no valid host instead of costing (uuids × hosts) lookups.
pub const MAX_HINT_UUIDS: usize = 1000;

pub struct SameHostFilter;

impl SameHostFilter {
    pub const NAME: &'static str = "SameHostFilter";
}

/// The uuids of an affinity hint as nova's `get_scheduler_hint` gives them, `None`
/// when it is falsy (unset, `[]`, or a one-element list holding `""`).
pub(crate) fn affinity_uuids<'a>(spec: &'a RequestSpec, hint: &str) -> Option<&'a [String]> {
    match spec.hint(hint)? {
        [] => None,
        // A one-element list is unwrapped to its string: "" is falsy.
        [only] if only.is_empty() => None,
        uuids => Some(uuids),
    }
}

/// nova's `utils.instance_uuids_overlap`: is any of `uuids` on the host? `Err` when
/// the hint is over [`MAX_HINT_UUIDS`].
pub(crate) fn instance_uuids_overlap(host: &HostState, uuids: &[String]) -> Result<bool, String> {
    if uuids.len() > MAX_HINT_UUIDS {
        return Err(format!(
            "{} instance uuids in the hint (at most {MAX_HINT_UUIDS} are read)",
            uuids.len()
        ));
    }
    Ok(uuids.iter().any(|u| host.instances.contains(u.as_str())))
}

impl HostFilter for SameHostFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        let Some(uuids) = affinity_uuids(req.spec, "same_host") else {
            return true;
        };
        instance_uuids_overlap(host, uuids).unwrap_or_else(|e| {
            warn!(host = %host.host, error = %e, "SameHostFilter: hint refused; host fails");
            false
        })
    }

    fn once_per_request(&self) -> bool {
        true
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use chrono::Utc;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    pub(crate) fn host_with(instances: &[&str]) -> HostState {
        HostState {
            host: "host1".into(),
            instances: Arc::new(instances.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        }
    }

    pub(crate) fn spec_with(hint: &str, values: Option<&[&str]>) -> RequestSpec {
        RequestSpec {
            scheduler_hints: values.map(|v| {
                BTreeMap::from([(hint.to_string(), v.iter().map(|s| s.to_string()).collect())])
            }),
            ..Default::default()
        }
    }

    pub(crate) fn passes(filter: &dyn HostFilter, host: &HostState, spec: &RequestSpec) -> bool {
        let req = FilterRequest {
            spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        filter.host_passes(host, &req)
    }

    /// nova's test_affinity_filters (SameHost part).
    #[test]
    fn nova_vectors() {
        let f = SameHostFilter;
        let x = "11111111-2222-3333-4444-555555555555";
        assert!(passes(
            &f,
            &host_with(&[x]),
            &spec_with("same_host", Some(&[x]))
        ));
        assert!(!passes(
            &f,
            &host_with(&[x]),
            &spec_with("same_host", Some(&["same"]))
        ));
        assert!(!passes(
            &f,
            &host_with(&[]),
            &spec_with("same_host", Some(&["same"]))
        ));
        assert!(passes(&f, &host_with(&[x]), &spec_with("same_host", None)));
        assert!(f.once_per_request());
        assert!(!f.run_on_rebuild());
    }

    #[test]
    fn python_truthiness_of_the_hint() {
        let f = SameHostFilter;
        let empty = host_with(&[]);
        // [] and [""] are falsy: pass; ["", ""] is a truthy list: fail on an empty host.
        assert!(passes(&f, &empty, &spec_with("same_host", Some(&[]))));
        assert!(passes(&f, &empty, &spec_with("same_host", Some(&[""]))));
        assert!(!passes(
            &f,
            &empty,
            &spec_with("same_host", Some(&["", ""]))
        ));
        // Any one of several is enough.
        assert!(passes(
            &f,
            &host_with(&["b"]),
            &spec_with("same_host", Some(&["a", "b"]))
        ));
        // Other hints do not matter.
        assert!(passes(
            &f,
            &empty,
            &spec_with("different_host", Some(&["a"]))
        ));
    }

    #[test]
    fn oversized_hint_is_refused() {
        let many: Vec<String> = (0..=MAX_HINT_UUIDS).map(|i| format!("u{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(!passes(
            &SameHostFilter,
            &host_with(&["u0"]),
            &spec_with("same_host", Some(&refs))
        ));
        assert!(passes(
            &SameHostFilter,
            &host_with(&["u0"]),
            &spec_with("same_host", Some(&refs[..MAX_HINT_UUIDS]))
        ));
    }
}
