// SPDX-License-Identifier: Apache-2.0
//! `GroupAntiAffinityFilter` (removed in nova 2015.1 Kilo; last shipped in Juno): for
//! a `legacy`-policy group (made with the `group` hint) that already has hosts, the
//! host must not be one of them. Today's equivalent is `ServerGroupAntiAffinityFilter`.

use super::group_affinity_filter::legacy_group_hosts;
use crate::filters::{FilterRequest, HostFilter};
use crate::model::HostState;

pub struct GroupAntiAffinityFilter;

impl GroupAntiAffinityFilter {
    pub const NAME: &'static str = "GroupAntiAffinityFilter";
    pub const PATH: &'static str = "nova.scheduler.filters.affinity_filter.GroupAntiAffinityFilter";
}

impl HostFilter for GroupAntiAffinityFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        legacy_group_hosts(req).is_none_or(|hosts| !hosts.iter().any(|h| *h == *host.host))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::legacy::test_support::req;
    use crate::model::{InstanceGroup, RequestSpec};

    fn spec(policy: &str, hosts: &[&str]) -> RequestSpec {
        RequestSpec {
            instance_group: Some(InstanceGroup {
                policy: Some(policy.into()),
                policies: vec![policy.into()],
                hosts: hosts.iter().map(|h| h.to_string()).collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn nova_test_group_anti_affinity_filter_vectors() {
        let h = HostState {
            host: "host1".into(),
            ..Default::default()
        };
        assert!(GroupAntiAffinityFilter.host_passes(&h, &req(&RequestSpec::default())));
        assert!(GroupAntiAffinityFilter.host_passes(&h, &req(&spec("legacy", &[]))));
        assert!(!GroupAntiAffinityFilter.host_passes(&h, &req(&spec("legacy", &["host1"]))));
        assert!(GroupAntiAffinityFilter.host_passes(&h, &req(&spec("legacy", &["host2"]))));
        assert!(GroupAntiAffinityFilter.host_passes(&h, &req(&spec("anti-affinity", &["host1"]))));
    }
}
