// SPDX-License-Identifier: Apache-2.0
//! `DifferentHostFilter`: with a `different_host` hint, hosts running any of the
//! listed instances fail.

use super::same_host_filter::{affinity_uuids, instance_uuids_overlap};
use super::{FilterRequest, HostFilter};
use crate::model::HostState;
use tracing::warn;

pub struct DifferentHostFilter;

impl DifferentHostFilter {
    pub const NAME: &'static str = "DifferentHostFilter";
}

impl HostFilter for DifferentHostFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        let Some(uuids) = affinity_uuids(req.spec, "different_host") else {
            return true;
        };
        match instance_uuids_overlap(host, uuids) {
            Ok(overlap) => !overlap,
            Err(e) => {
                // Over MAX_HINT_UUIDS: refused, fail closed (nova has no limit).
                warn!(host = %host.host, error = %e, "DifferentHostFilter: hint refused; host fails");
                false
            }
        }
    }

    fn once_per_request(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::same_host_filter::tests::{host_with, passes, spec_with};
    use super::super::same_host_filter::MAX_HINT_UUIDS;
    use super::*;

    /// nova's test_affinity_filters (DifferentHost part).
    #[test]
    fn nova_vectors() {
        let f = DifferentHostFilter;
        let x = "11111111-2222-3333-4444-555555555555";
        assert!(passes(
            &f,
            &host_with(&[x]),
            &spec_with("different_host", Some(&["same"]))
        ));
        assert!(!passes(
            &f,
            &host_with(&[x]),
            &spec_with("different_host", Some(&[x]))
        ));
        assert!(passes(
            &f,
            &host_with(&[x]),
            &spec_with("different_host", None)
        ));
        assert!(f.once_per_request());
        assert!(!f.run_on_rebuild());
    }

    #[test]
    fn truthiness_several_and_oversized() {
        let f = DifferentHostFilter;
        let h = host_with(&["b"]);
        assert!(passes(&f, &h, &spec_with("different_host", Some(&[]))));
        assert!(passes(&f, &h, &spec_with("different_host", Some(&[""]))));
        assert!(!passes(
            &f,
            &h,
            &spec_with("different_host", Some(&["a", "b"]))
        ));
        assert!(passes(
            &f,
            &h,
            &spec_with("different_host", Some(&["a", "c"]))
        ));
        let many: Vec<String> = (0..=MAX_HINT_UUIDS).map(|i| format!("u{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(!passes(&f, &h, &spec_with("different_host", Some(&refs))));
    }
}
