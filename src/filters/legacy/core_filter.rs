// SPDX-License-Identifier: Apache-2.0
//! `CoreFilter` (removed in nova 20.0.0 Train; last shipped in Stein): enough vCPUs
//! under the host's `cpu_allocation_ratio`. Records `limits['vcpu']` for the compute.

use crate::filters::{FilterRequest, HostFilter};
use crate::model::HostState;
use serde_json::Value;

pub struct CoreFilter;

impl CoreFilter {
    pub const NAME: &'static str = "CoreFilter";
    pub const PATH: &'static str = "nova.scheduler.filters.core_filter.CoreFilter";
}

/// nova's `BaseCoreFilter.host_passes`: `Some(limit)` is the `limits['vcpu']` nova
/// writes (only when the limit is positive), also when the host then fails.
pub(crate) fn core_check(host: &HostState, vcpus: i64, ratio: f64) -> (bool, Option<f64>) {
    if host.vcpus_total == 0 {
        // nova's fail-safe: no vCPU count reported, assume collection is broken.
        return (true, None);
    }
    let limit = host.vcpus_total as f64 * ratio;
    let mut written = None;
    if limit > 0.0 {
        written = Some(limit);
        // An instance may not overcommit against itself.
        if vcpus > host.vcpus_total {
            return (false, written);
        }
    }
    let free = limit - host.vcpus_used as f64;
    // Python's `free < vcpus` is false for NaN, so a NaN limit passes.
    let short = free.partial_cmp(&(vcpus as f64)) == Some(std::cmp::Ordering::Less);
    (!short, written)
}

pub(crate) fn write_limit(host: &mut HostState, key: &str, limit: Option<f64>) {
    if let Some(l) = limit {
        host.limits.insert(
            key.to_string(),
            serde_json::Number::from_f64(l).map_or(Value::Null, Value::Number),
        );
    }
}

impl HostFilter for CoreFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        core_check(host, req.spec.flavor.vcpus, host.cpu_allocation_ratio).0
    }

    fn writes_host(&self) -> bool {
        true
    }

    fn filter_host(&self, host: &mut HostState, req: &FilterRequest<'_>) -> bool {
        let (ok, limit) = core_check(host, req.spec.flavor.vcpus, host.cpu_allocation_ratio);
        write_limit(host, "vcpu", limit);
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::legacy::test_support::req;
    use crate::model::RequestSpec;

    fn host(total: i64, used: i64, ratio: f64) -> HostState {
        HostState {
            vcpus_total: total,
            vcpus_used: used,
            cpu_allocation_ratio: ratio,
            ..Default::default()
        }
    }

    fn spec(vcpus: i64) -> RequestSpec {
        let mut s = RequestSpec::default();
        s.flavor.vcpus = vcpus;
        s
    }

    #[test]
    fn nova_test_core_filter_vectors() {
        // passes: 4 total, 7 used, ratio 2 → 1 free for 1 vCPU; the limit is recorded.
        let mut h = host(4, 7, 2.0);
        assert!(CoreFilter.filter_host(&mut h, &req(&spec(1))));
        assert_eq!(h.limits.get("vcpu"), Some(&serde_json::json!(8.0)));
        // fails: 8 used of 8.
        assert!(!CoreFilter.host_passes(&host(4, 8, 2.0), &req(&spec(1))));
        // fail-safe: no vCPU total reported.
        assert!(CoreFilter.host_passes(&host(0, 8, 2.0), &req(&spec(1))));
        // no overcommit against itself: 2 vCPUs on a 1-vCPU host with ratio 16.
        let mut h = host(1, 0, 16.0);
        assert!(!CoreFilter.filter_host(&mut h, &req(&spec(2))));
        assert!(h.limits.contains_key("vcpu"));
        // ratio 0: no positive limit, nothing recorded, 0 free < 1.
        let mut h = host(4, 0, 0.0);
        assert!(!CoreFilter.filter_host(&mut h, &req(&spec(1))));
        assert!(h.limits.is_empty());
    }
}
