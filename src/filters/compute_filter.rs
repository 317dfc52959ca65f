// SPDX-License-Identifier: Apache-2.0
//! `ComputeFilter`: the host's nova-compute service must be enabled and up.

use super::{FilterRequest, HostFilter};
use crate::model::HostState;
use tracing::debug;

pub struct ComputeFilter {
    /// `[DEFAULT] service_down_time` (60 s).
    pub service_down_time: i64,
    /// `[DEFAULT] report_interval` (10 s); nova raises a too-small down time from it.
    pub report_interval: i64,
}

impl ComputeFilter {
    pub const NAME: &'static str = "ComputeFilter";
}

impl HostFilter for ComputeFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        let service = &host.service;
        if service.disabled {
            debug!(host = %host.host, node = %host.nodename, reason = ?service.disabled_reason,
                   "ComputeFilter: service is disabled");
            return false;
        }
        if !service.is_up(req.now, self.service_down_time, self.report_interval) {
            debug!(host = %host.host, node = %host.nodename, "ComputeFilter: service is down");
            return false;
        }
        true
    }

    fn once_per_request(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RequestSpec, ServiceInfo};
    use chrono::{Duration, Utc};

    fn host(service: ServiceInfo) -> HostState {
        HostState {
            host: "host1".into(),
            nodename: "node1".into(),
            service,
            ..Default::default()
        }
    }

    /// nova's test_compute_filters: up+enabled passes; disabled fails; down fails;
    /// forced_down fails.
    #[test]
    fn nova_vectors() {
        let now = Utc::now();
        let spec = RequestSpec::default();
        let req = FilterRequest {
            spec: &spec,
            now,
            index: 0,
            is_rebuild: false,
        };
        let filter = ComputeFilter {
            service_down_time: 60,
            report_interval: 10,
        };
        let fresh = Some(now - Duration::seconds(5));
        let cases = [
            (
                "up and enabled",
                ServiceInfo {
                    last_seen_up: fresh,
                    ..Default::default()
                },
                true,
            ),
            (
                "disabled",
                ServiceInfo {
                    last_seen_up: fresh,
                    disabled: true,
                    ..Default::default()
                },
                false,
            ),
            (
                "down",
                ServiceInfo {
                    last_seen_up: Some(now - Duration::seconds(300)),
                    ..Default::default()
                },
                false,
            ),
            (
                "forced down",
                ServiceInfo {
                    last_seen_up: fresh,
                    forced_down: true,
                    ..Default::default()
                },
                false,
            ),
        ];
        for (name, svc, want) in cases {
            assert_eq!(filter.host_passes(&host(svc), &req), want, "{name}");
        }
        assert!(filter.once_per_request());
        assert!(!filter.run_on_rebuild());
    }
}
