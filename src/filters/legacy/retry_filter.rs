// SPDX-License-Identifier: Apache-2.0
//! `RetryFilter` (deprecated in Train, removed in nova 22.0.0 Victoria; last shipped in
//! Ussuri): skip the nodes a rescheduled request already tried
//! (`RequestSpec.retry.hosts`).

use crate::filters::{FilterRequest, HostFilter};
use crate::model::HostState;

pub struct RetryFilter;

impl RetryFilter {
    pub const NAME: &'static str = "RetryFilter";
    pub const PATH: &'static str = "nova.scheduler.filters.retry_filter.RetryFilter";
}

impl HostFilter for RetryFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        let Some(tried) = &req.spec.retry_hosts else {
            return true;
        };
        // nova compares `[host, nodename]` with `[cn.host, cn.hypervisor_hostname]`.
        !tried.iter().any(|(h, node)| {
            h.as_deref() == Some(&*host.host) && node.as_deref() == Some(&*host.nodename)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::legacy::test_support::req;
    use crate::model::RequestSpec;

    fn host(h: &str, n: &str) -> HostState {
        HostState {
            host: h.into(),
            nodename: n.into(),
            ..Default::default()
        }
    }

    #[test]
    fn nova_test_retry_filter_vectors() {
        let none = RequestSpec::default();
        assert!(RetryFilter.host_passes(&host("host1", "node1"), &req(&none)));
        let tried = RequestSpec {
            retry_hosts: Some(vec![
                (Some("host1".into()), Some("node1".into())),
                (Some("host2".into()), Some("node2".into())),
            ]),
            ..Default::default()
        };
        assert!(RetryFilter.host_passes(&host("host3", "node3"), &req(&tried)));
        assert!(!RetryFilter.host_passes(&host("host1", "node1"), &req(&tried)));
        // Same host, other node: a different compute node, so it passes.
        assert!(RetryFilter.host_passes(&host("host1", "node2"), &req(&tried)));
        let empty = RequestSpec {
            retry_hosts: Some(vec![]),
            ..Default::default()
        };
        assert!(RetryFilter.host_passes(&host("host1", "node1"), &req(&empty)));
    }
}
