// SPDX-License-Identifier: Apache-2.0
//! `DiskFilter` (removed in nova 20.0.0 Train; last shipped in Stein): enough local
//! disk for root + ephemeral + swap under the host's `disk_allocation_ratio`.
//! Records `limits['disk_gb']` on success.

use super::core_filter::write_limit;
use crate::filters::{FilterRequest, HostFilter};
use crate::model::{HostState, RequestSpec};

pub struct DiskFilter;

impl DiskFilter {
    pub const NAME: &'static str = "DiskFilter";
    pub const PATH: &'static str = "nova.scheduler.filters.disk_filter.DiskFilter";
}

/// nova's `BaseDiskFilter.host_passes`: the `disk_gb` limit when the host passes.
pub(crate) fn disk_check(host: &HostState, spec: &RequestSpec, ratio: f64) -> Option<f64> {
    let f = &spec.flavor;
    let requested = 1024 * (f.root_gb + f.ephemeral_gb) + f.swap;
    let total = host.total_usable_disk_gb * 1024;
    // An instance may not overcommit against itself.
    if total < requested {
        return None;
    }
    let limit = total as f64 * ratio;
    let used = (total - host.free_disk_mb) as f64;
    let usable = limit - used;
    // `not usable >= requested`: NaN fails, as in Python.
    if usable
        .partial_cmp(&(requested as f64))
        .is_none_or(|o| o == std::cmp::Ordering::Less)
    {
        return None;
    }
    Some(limit / 1024.0)
}

impl HostFilter for DiskFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        disk_check(host, req.spec, host.disk_allocation_ratio).is_some()
    }

    fn writes_host(&self) -> bool {
        true
    }

    fn filter_host(&self, host: &mut HostState, req: &FilterRequest<'_>) -> bool {
        let limit = disk_check(host, req.spec, host.disk_allocation_ratio);
        write_limit(host, "disk_gb", limit);
        limit.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::legacy::test_support::req;

    fn host(free_mb: i64, total_gb: i64, ratio: f64) -> HostState {
        HostState {
            free_disk_mb: free_mb,
            total_usable_disk_gb: total_gb,
            disk_allocation_ratio: ratio,
            ..Default::default()
        }
    }

    fn spec(root: i64, eph: i64, swap: i64) -> RequestSpec {
        let mut s = RequestSpec::default();
        s.flavor.root_gb = root;
        s.flavor.ephemeral_gb = eph;
        s.flavor.swap = swap;
        s
    }

    #[test]
    fn nova_test_disk_filter_vectors() {
        // passes: 1 GB root + 1 GB ephemeral + 512 MB swap in 11 GB free of 12.
        assert!(DiskFilter.host_passes(&host(11 * 1024, 13, 1.0), &req(&spec(1, 1, 512))));
        // fails: 10 GB root + 1 GB ephemeral + 1 MB swap in 11 GB free.
        assert!(!DiskFilter.host_passes(&host(11 * 1024, 13, 1.0), &req(&spec(10, 1, 1))));
        // oversubscribe: 100 GB root on 12 GB with 11 free, ratio 10 → limit 120 GB.
        let mut h = host(11 * 1024, 12, 10.0);
        assert!(!DiskFilter.filter_host(&mut h, &req(&spec(100, 1, 1))));
        let mut h = host(11 * 1024, 12, 10.0);
        assert!(DiskFilter.filter_host(&mut h, &req(&spec(11, 0, 0))));
        assert_eq!(h.limits.get("disk_gb"), Some(&serde_json::json!(120.0)));
        // oversubscribe fail: 29 GB used of a 120 GB limit is still not enough for 100.
        assert!(!DiskFilter.host_passes(&host(-(29 * 1024), 12, 10.0), &req(&spec(100, 1, 1))));
    }
}
