// SPDX-License-Identifier: Apache-2.0
//! `ServerGroupAffinityFilter`: with an `affinity` group that already has hosts, only
//! those hosts pass.

use super::{FilterRequest, HostFilter};
use crate::model::{HostState, RequestSpec};
use tracing::debug;

pub struct ServerGroupAffinityFilter;

impl ServerGroupAffinityFilter {
    pub const NAME: &'static str = "ServerGroupAffinityFilter";
}

impl HostFilter for ServerGroupAffinityFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        // nova reads the deprecated `policies` list here (anti-affinity reads `policy`).
        let Some(group) = req.spec.instance_group.as_ref() else {
            return true;
        };
        if !group.policies.iter().any(|p| p == "affinity") {
            return true;
        }
        debug!(host = %host.host, configured = ?group.hosts,
               "Group affinity: check if {} in {:?}", host.host, group.hosts);
        // `group.hosts` holds the hosts of existing members; the scheduler appends
        // each host it picks during a multi-create, so instances 2..N follow the first.
        if group.hosts.is_empty() {
            return true;
        }
        group.hosts.iter().any(|h| *h == *host.host)
    }
    // Runs for every instance; not on rebuild.

    /// No `affinity` group, or one with no hosts yet: `host_passes` is `True`
    /// before it reads the host.
    fn passes_every_host(&self, req: &FilterRequest<'_>) -> bool {
        req.spec
            .instance_group
            .as_ref()
            .is_none_or(|g| !g.policies.iter().any(|p| p == "affinity") || g.hosts.is_empty())
    }

    /// Without an `affinity` group every host passes; with one, the verdict reads
    /// `group.hosts`, which grows with each instance placed.
    fn stable_within_request(&self, spec: &RequestSpec) -> bool {
        spec.instance_group
            .as_ref()
            .is_none_or(|g| !g.policies.iter().any(|p| p == "affinity"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{InstanceGroup, RequestSpec};
    use chrono::Utc;

    fn passes(group: Option<InstanceGroup>, host: &str) -> bool {
        let spec = RequestSpec {
            instance_group: group,
            ..Default::default()
        };
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let host = HostState {
            host: host.into(),
            ..Default::default()
        };
        ServerGroupAffinityFilter.host_passes(&host, &req)
    }

    fn group(policy: &str, hosts: &[&str]) -> Option<InstanceGroup> {
        Some(InstanceGroup {
            policy: Some(policy.into()),
            policies: vec![policy.into()],
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ..Default::default()
        })
    }

    /// nova's test_affinity_filters (affinity part).
    #[test]
    fn nova_vectors() {
        assert!(passes(group("affinity", &["host1"]), "host1"));
        assert!(!passes(group("affinity", &["host2"]), "host1"));
        assert!(passes(None, "host1"));
        assert!(passes(group("anti-affinity", &["host2"]), "host1"));
        // No hosts yet (first member): every host passes.
        assert!(passes(group("affinity", &[]), "host1"));
        // Exact, case-sensitive host names.
        assert!(!passes(group("affinity", &["HOST1"]), "host1"));
        // Soft affinity is a weigher matter.
        assert!(passes(group("soft-affinity", &["host2"]), "host1"));
        assert!(!ServerGroupAffinityFilter.once_per_request());
        assert!(!ServerGroupAffinityFilter.run_on_rebuild());
    }

    /// nova tests membership in the `policies` list, not the `policy` field.
    #[test]
    fn reads_policies_list() {
        let g = InstanceGroup {
            policy: None,
            policies: vec!["affinity".into()],
            hosts: vec!["host2".into()],
            ..Default::default()
        };
        assert!(!passes(Some(g), "host1"));
    }
}
