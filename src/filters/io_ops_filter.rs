// SPDX-License-Identifier: Apache-2.0
//! `IoOpsFilter`: hosts with `max_io_ops_per_host` concurrent I/O-heavy operations
//! (builds, resizes, snapshots, ... counted in `stats['io_workload']`) or more fail.

use super::{FilterRequest, HostFilter};
use crate::model::{HostState, RequestSpec};
use tracing::debug;

pub struct IoOpsFilter {
    /// `[filter_scheduler] max_io_ops_per_host` (8).
    pub max_io_ops_per_host: i64,
}

impl IoOpsFilter {
    pub const NAME: &'static str = "IoOpsFilter";
}

/// Pass iff `num_io_ops < max` (strict), as nova's `IoOpsFilter.host_passes`.
pub(crate) fn io_ops_passes(host: &HostState, max: i64, filter: &'static str) -> bool {
    let passes = host.num_io_ops < max;
    if !passes {
        debug!(host = %host.host, node = %host.nodename, max_io_ops = max,
               "{filter}: fails I/O ops check: Max IOs per host is set to {max}");
    }
    passes
}

impl HostFilter for IoOpsFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, _req: &FilterRequest<'_>) -> bool {
        io_ops_passes(host, self.max_io_ops_per_host, Self::NAME)
    }
    // Runs for every instance (consumption adds one I/O op per placed instance).

    /// Reads the host's I/O op count only.
    fn stable_within_request(&self, _spec: &RequestSpec) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    /// nova's test_io_ops_filters: max 8, 7 passes, 8 fails.
    #[test]
    fn nova_vectors() {
        let spec = RequestSpec::default();
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let filter = IoOpsFilter {
            max_io_ops_per_host: 8,
        };
        for (n, want) in [(0, true), (7, true), (8, false), (9, false)] {
            let host = HostState {
                num_io_ops: n,
                ..Default::default()
            };
            assert_eq!(filter.host_passes(&host, &req), want, "{n}");
        }
        // max_io_ops_per_host = 0 (its minimum) fails every host.
        let zero = IoOpsFilter {
            max_io_ops_per_host: 0,
        };
        assert!(!zero.host_passes(&HostState::default(), &req));
        assert!(!filter.once_per_request());
        assert!(!filter.run_on_rebuild());
    }
}
