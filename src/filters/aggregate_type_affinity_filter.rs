// SPDX-License-Identifier: Apache-2.0
//! `AggregateTypeAffinityFilter`: a host in aggregates with `instance_type` metadata
//! only takes flavors named there (comma-separated lists allowed).

use super::utils::aggregate_values_from_key;
use super::{FilterRequest, HostFilter};
use crate::model::HostState;
use crate::py;
use tracing::debug;

pub struct AggregateTypeAffinityFilter;

impl AggregateTypeAffinityFilter {
    pub const NAME: &'static str = "AggregateTypeAffinityFilter";
}

impl HostFilter for AggregateTypeAffinityFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        // Raw values (one per aggregate), each split on ',' and stripped here.
        let values = aggregate_values_from_key(host, "instance_type");
        if values.is_empty() {
            return true;
        }
        // A flavor without a name (None) matches nothing.
        let Some(name) = req.spec.flavor.name.as_deref() else {
            return false;
        };
        let passes = values
            .iter()
            .any(|v| v.split(',').any(|x| py::str::strip(x) == name));
        if !passes {
            debug!(host = %host.host, flavor = name, allowed = ?values,
                   "AggregateTypeAffinityFilter: flavor not allowed by the host's aggregates");
        }
        passes
    }

    fn once_per_request(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Aggregate, Flavor, RequestSpec};
    use chrono::Utc;
    use std::sync::Arc;

    fn passes(values: &[&str], flavor: Option<&str>) -> bool {
        let spec = RequestSpec {
            flavor: Flavor {
                name: flavor.map(str::to_string),
                ..Default::default()
            },
            ..Default::default()
        };
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let mut aggregates: Vec<Arc<Aggregate>> = values
            .iter()
            .map(|v| {
                Arc::new(Aggregate {
                    metadata: [("instance_type".to_string(), v.to_string())].into(),
                    ..Default::default()
                })
            })
            .collect();
        aggregates.push(Arc::new(Aggregate {
            metadata: [("other".to_string(), "fake2".to_string())].into(),
            ..Default::default()
        }));
        let host = HostState {
            aggregates,
            ..Default::default()
        };
        AggregateTypeAffinityFilter.host_passes(&host, &req)
    }

    /// nova's test_type_filters.
    #[test]
    fn nova_vectors() {
        assert!(passes(&[], Some("fake1")));
        assert!(passes(&["fake1"], Some("fake1")));
        assert!(!passes(&["fake1"], Some("fake2")));
        for vals in [
            &["fake1", "fake2"][..],
            &["fake1,fake2"][..],
            &["fake1, fake2"][..],
        ] {
            assert!(passes(vals, Some("fake1")), "{vals:?}");
            assert!(passes(vals, Some("fake2")), "{vals:?}");
            assert!(!passes(vals, Some("fake3")), "{vals:?}");
        }
        // Exact, case-sensitive; a nameless flavor matches nothing.
        assert!(!passes(&["Fake1"], Some("fake1")));
        assert!(!passes(&["fake1"], None));
        assert!(passes(&[""], Some("")));
        assert!(AggregateTypeAffinityFilter.once_per_request());
        assert!(!AggregateTypeAffinityFilter.run_on_rebuild());
    }
}
