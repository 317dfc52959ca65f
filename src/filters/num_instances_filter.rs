// SPDX-License-Identifier: Apache-2.0
//! `NumInstancesFilter`: hosts with `max_instances_per_host` instances or more fail.

use super::{FilterRequest, HostFilter};
use crate::model::{HostState, RequestSpec};
use tracing::debug;

pub struct NumInstancesFilter {
    /// `[filter_scheduler] max_instances_per_host` (50).
    pub max_instances_per_host: i64,
}

impl NumInstancesFilter {
    pub const NAME: &'static str = "NumInstancesFilter";
}

/// Pass iff `num_instances < max` (strict), as nova's `NumInstancesFilter.host_passes`.
pub(crate) fn num_instances_passes(host: &HostState, max: i64, filter: &'static str) -> bool {
    let passes = host.num_instances < max;
    if !passes {
        debug!(host = %host.host, node = %host.nodename, max_instances = max,
               "{filter}: fails num_instances check: Max instances per host is set to {max}");
    }
    passes
}

impl HostFilter for NumInstancesFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, _req: &FilterRequest<'_>) -> bool {
        num_instances_passes(host, self.max_instances_per_host, Self::NAME)
    }
    // Runs for every instance (the count grows during a multi-create); not on rebuild.

    /// Reads the host's instance count only.
    fn stable_within_request(&self, _spec: &RequestSpec) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    /// nova's test_num_instances_filters: max 5, 4 passes, 5 fails.
    #[test]
    fn nova_vectors() {
        let spec = RequestSpec::default();
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let filter = NumInstancesFilter {
            max_instances_per_host: 5,
        };
        for (n, want) in [(0, true), (4, true), (5, false), (6, false)] {
            let host = HostState {
                num_instances: n,
                ..Default::default()
            };
            assert_eq!(filter.host_passes(&host, &req), want, "{n}");
        }
        assert!(!filter.once_per_request());
        assert!(!filter.run_on_rebuild());
    }
}
