// SPDX-License-Identifier: Apache-2.0
//! `AggregateDiskFilter` (removed in nova 22.0.0 Victoria; last shipped in Ussuri):
//! `DiskFilter` with the ratio from the aggregates' `disk_allocation_ratio` metadata
//! (minimum wins; none or a bad value → the host's ratio).

use super::aggregate_ratio;
use super::core_filter::write_limit;
use super::disk_filter::disk_check;
use crate::filters::{FilterRequest, HostFilter};
use crate::model::HostState;

pub struct AggregateDiskFilter;

impl AggregateDiskFilter {
    pub const NAME: &'static str = "AggregateDiskFilter";
    pub const PATH: &'static str = "nova.scheduler.filters.disk_filter.AggregateDiskFilter";
}

fn ratio(host: &HostState) -> f64 {
    aggregate_ratio(host, "disk_allocation_ratio", host.disk_allocation_ratio)
}

impl HostFilter for AggregateDiskFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        disk_check(host, req.spec, ratio(host)).is_some()
    }

    fn writes_host(&self) -> bool {
        true
    }

    fn filter_host(&self, host: &mut HostState, req: &FilterRequest<'_>) -> bool {
        let limit = disk_check(host, req.spec, ratio(host));
        write_limit(host, "disk_gb", limit);
        limit.is_some()
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
            free_disk_mb: 11 * 1024,
            total_usable_disk_gb: 12,
            disk_allocation_ratio: 1.0,
            ..Default::default()
        };
        with_aggregate_metadata(h, "disk_allocation_ratio", values)
    }

    #[test]
    fn nova_test_aggregate_disk_filter_vectors() {
        let mut spec = RequestSpec::default();
        spec.flavor.root_gb = 12;
        // 12 GB requested, 11 free at ratio 1 → fails; aggregate ratio 2 → passes.
        assert!(!AggregateDiskFilter.host_passes(&host(&[]), &req(&spec)));
        let mut h = host(&["2.0", "3.0"]);
        assert!(AggregateDiskFilter.filter_host(&mut h, &req(&spec)));
        assert_eq!(h.limits.get("disk_gb"), Some(&serde_json::json!(24.0)));
        assert!(!AggregateDiskFilter.host_passes(&host(&["XXX"]), &req(&spec)));
    }
}
