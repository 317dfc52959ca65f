// SPDX-License-Identifier: Apache-2.0
//! `RamFilter` (removed in nova 20.0.0 Train; last shipped in Stein): enough RAM
//! under the host's `ram_allocation_ratio`. Records `limits['memory_mb']` on success.

use super::core_filter::write_limit;
use crate::filters::{FilterRequest, HostFilter};
use crate::model::HostState;

pub struct RamFilter;

impl RamFilter {
    pub const NAME: &'static str = "RamFilter";
    pub const PATH: &'static str = "nova.scheduler.filters.ram_filter.RamFilter";
}

/// nova's `BaseRamFilter.host_passes`: the `memory_mb` limit when the host passes.
pub(crate) fn ram_check(host: &HostState, memory_mb: i64, ratio: f64) -> Option<f64> {
    let total = host.total_usable_ram_mb;
    // An instance may not overcommit against itself.
    if total < memory_mb {
        return None;
    }
    let limit = total as f64 * ratio;
    let used = (total - host.free_ram_mb) as f64;
    let usable = limit - used;
    // `not usable >= requested`: NaN fails, as in Python.
    if usable
        .partial_cmp(&(memory_mb as f64))
        .is_none_or(|o| o == std::cmp::Ordering::Less)
    {
        return None;
    }
    Some(limit)
}

impl HostFilter for RamFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        ram_check(host, req.spec.flavor.memory_mb, host.ram_allocation_ratio).is_some()
    }

    fn writes_host(&self) -> bool {
        true
    }

    fn filter_host(&self, host: &mut HostState, req: &FilterRequest<'_>) -> bool {
        let limit = ram_check(host, req.spec.flavor.memory_mb, host.ram_allocation_ratio);
        write_limit(host, "memory_mb", limit);
        limit.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::legacy::test_support::req;
    use crate::model::RequestSpec;

    fn host(free: i64, total: i64, ratio: f64) -> HostState {
        HostState {
            free_ram_mb: free,
            total_usable_ram_mb: total,
            ram_allocation_ratio: ratio,
            ..Default::default()
        }
    }

    #[test]
    fn nova_test_ram_filter_vectors() {
        let mut spec = RequestSpec::default();
        spec.flavor.memory_mb = 1024;
        // fails: 1023 free of 1024 at ratio 1.
        assert!(!RamFilter.host_passes(&host(1023, 1024, 1.0), &req(&spec)));
        // passes: exactly 1024 free.
        assert!(RamFilter.host_passes(&host(1024, 1024, 1.0), &req(&spec)));
        // oversubscribe: −1024 free of 2048 at ratio 2 → limit 4096 recorded.
        let mut h = host(-1024, 2048, 2.0);
        assert!(RamFilter.filter_host(&mut h, &req(&spec)));
        assert_eq!(h.limits.get("memory_mb"), Some(&serde_json::json!(4096.0)));
        // no overcommit against itself: 2048 MB flavor on a 1024 MB host at ratio 2.
        spec.flavor.memory_mb = 2048;
        let mut h = host(1024, 1024, 2.0);
        assert!(!RamFilter.filter_host(&mut h, &req(&spec)));
        assert!(h.limits.is_empty());
    }
}
