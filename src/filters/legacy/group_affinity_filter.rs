// SPDX-License-Identifier: Apache-2.0
//! `GroupAffinityFilter` (removed in nova 2015.1 Kilo; last shipped in Juno): the
//! pre-server-group affinity of groups made with the `group` hint, whose policy is
//! `legacy`. When the request's group has that policy and already has hosts, the
//! host must be one of them. Today's equivalent is `ServerGroupAffinityFilter`.

use crate::filters::{FilterRequest, HostFilter};
use crate::model::HostState;

pub struct GroupAffinityFilter;

impl GroupAffinityFilter {
    pub const NAME: &'static str = "GroupAffinityFilter";
    pub const PATH: &'static str = "nova.scheduler.filters.affinity_filter.GroupAffinityFilter";
}

/// `filter_properties['group_policies']` / `['group_hosts']` of the legacy dicts,
/// which the RequestSpec carries as its instance group's policies and hosts.
pub(crate) fn legacy_group_hosts<'a>(req: &'a FilterRequest<'_>) -> Option<&'a [String]> {
    let group = req.spec.instance_group.as_ref()?;
    if !group.policies.iter().any(|p| p == "legacy") {
        return None;
    }
    Some(group.hosts.as_slice()).filter(|h| !h.is_empty())
}

impl HostFilter for GroupAffinityFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        legacy_group_hosts(req).is_none_or(|hosts| hosts.iter().any(|h| *h == *host.host))
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
    fn nova_test_group_affinity_filter_vectors() {
        let h = HostState {
            host: "host1".into(),
            ..Default::default()
        };
        assert!(GroupAffinityFilter.host_passes(&h, &req(&RequestSpec::default())));
        assert!(GroupAffinityFilter.host_passes(&h, &req(&spec("legacy", &[]))));
        assert!(GroupAffinityFilter.host_passes(&h, &req(&spec("legacy", &["host1"]))));
        assert!(!GroupAffinityFilter.host_passes(&h, &req(&spec("legacy", &["host2"]))));
        // Server groups with today's policies are not this filter's business.
        assert!(GroupAffinityFilter.host_passes(&h, &req(&spec("affinity", &["host2"]))));
    }
}
