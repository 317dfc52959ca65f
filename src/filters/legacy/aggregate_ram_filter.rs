// SPDX-License-Identifier: Apache-2.0
//! `AggregateRamFilter` (removed in nova 22.0.0 Victoria; last shipped in Ussuri):
//! `RamFilter` with the ratio from the aggregates' `ram_allocation_ratio` metadata
//! (minimum wins; none or a bad value → the host's ratio).

use super::aggregate_ratio;
use super::core_filter::write_limit;
use super::ram_filter::ram_check;
use crate::filters::{FilterRequest, HostFilter};
use crate::model::HostState;

pub struct AggregateRamFilter;

impl AggregateRamFilter {
    pub const NAME: &'static str = "AggregateRamFilter";
    pub const PATH: &'static str = "nova.scheduler.filters.ram_filter.AggregateRamFilter";
}

fn ratio(host: &HostState) -> f64 {
    aggregate_ratio(host, "ram_allocation_ratio", host.ram_allocation_ratio)
}

impl HostFilter for AggregateRamFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        ram_check(host, req.spec.flavor.memory_mb, ratio(host)).is_some()
    }

    fn writes_host(&self) -> bool {
        true
    }

    fn filter_host(&self, host: &mut HostState, req: &FilterRequest<'_>) -> bool {
        let limit = ram_check(host, req.spec.flavor.memory_mb, ratio(host));
        write_limit(host, "memory_mb", limit);
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
            free_ram_mb: 1024,
            total_usable_ram_mb: 1024,
            ram_allocation_ratio: 1.0,
            ..Default::default()
        };
        with_aggregate_metadata(h, "ram_allocation_ratio", values)
    }

    #[test]
    fn nova_test_aggregate_ram_filter_vectors() {
        let mut spec = RequestSpec::default();
        spec.flavor.memory_mb = 1024;
        assert!(AggregateRamFilter.host_passes(&host(&[]), &req(&spec)));
        // Aggregate ratio 2.0 → limit 2048 (not the host's 1024).
        let mut h = host(&["2.0"]);
        assert!(AggregateRamFilter.filter_host(&mut h, &req(&spec)));
        assert_eq!(h.limits.get("memory_mb"), Some(&serde_json::json!(2048.0)));
        // Minimum of 1.5 and 0.5 → 0.5: 512 usable < 1024.
        assert!(!AggregateRamFilter.host_passes(&host(&["1.5", "0.5"]), &req(&spec)));
        // Bad value → host ratio 1.0 → passes.
        assert!(AggregateRamFilter.host_passes(&host(&["XXX", "0.5"]), &req(&spec)));
    }
}
