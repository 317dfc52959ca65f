// SPDX-License-Identifier: Apache-2.0
//! `AggregateCoreFilter` (removed in nova 22.0.0 Victoria; last shipped in Ussuri):
//! `CoreFilter` with the ratio from the aggregates' `cpu_allocation_ratio` metadata
//! (minimum wins; none or a bad value → the host's ratio).

use super::aggregate_ratio;
use super::core_filter::{core_check, write_limit};
use crate::filters::{FilterRequest, HostFilter};
use crate::model::HostState;

pub struct AggregateCoreFilter;

impl AggregateCoreFilter {
    pub const NAME: &'static str = "AggregateCoreFilter";
    pub const PATH: &'static str = "nova.scheduler.filters.core_filter.AggregateCoreFilter";
}

fn ratio(host: &HostState) -> f64 {
    aggregate_ratio(host, "cpu_allocation_ratio", host.cpu_allocation_ratio)
}

impl HostFilter for AggregateCoreFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        core_check(host, req.spec.flavor.vcpus, ratio(host)).0
    }

    fn writes_host(&self) -> bool {
        true
    }

    fn filter_host(&self, host: &mut HostState, req: &FilterRequest<'_>) -> bool {
        let (ok, limit) = core_check(host, req.spec.flavor.vcpus, ratio(host));
        write_limit(host, "vcpu", limit);
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::legacy::test_support::{req, with_aggregate_metadata};
    use crate::model::RequestSpec;

    fn host(values: &[&str]) -> HostState {
        let h = HostState {
            host: "host1".into(),
            vcpus_total: 4,
            vcpus_used: 7,
            cpu_allocation_ratio: 2.0,
            ..Default::default()
        };
        with_aggregate_metadata(h, "cpu_allocation_ratio", values)
    }

    #[test]
    fn nova_test_aggregate_core_filter_vectors() {
        let mut spec = RequestSpec::default();
        spec.flavor.vcpus = 1;
        // No aggregate value: host ratio 2 → 8 − 7 = 1 free.
        assert!(AggregateCoreFilter.host_passes(&host(&[]), &req(&spec)));
        // Aggregate ratio 1 → 4 − 7 < 1.
        let mut h = host(&["1"]);
        assert!(!AggregateCoreFilter.filter_host(&mut h, &req(&spec)));
        assert_eq!(h.limits.get("vcpu"), Some(&serde_json::json!(4.0)));
        // The minimum of several wins; 3 and 4 → 3 → 12 − 7.
        let mut h = host(&["3", "4"]);
        assert!(AggregateCoreFilter.filter_host(&mut h, &req(&spec)));
        assert_eq!(h.limits.get("vcpu"), Some(&serde_json::json!(12.0)));
        // A value that is not a float: back to the host ratio.
        assert!(AggregateCoreFilter.host_passes(&host(&["XXX", "1"]), &req(&spec)));
    }
}
