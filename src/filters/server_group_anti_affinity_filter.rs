// SPDX-License-Identifier: Apache-2.0
//! `ServerGroupAntiAffinityFilter`: with an `anti-affinity` group, a host passes while
//! it holds fewer than `max_server_per_host` (default 1) members of the group.

use super::{FilterRequest, HostFilter};
use crate::model::{HostState, RequestSpec};
use crate::py;
use crate::py::PyError;
use tracing::{debug, warn};

pub struct ServerGroupAntiAffinityFilter;

impl ServerGroupAntiAffinityFilter {
    pub const NAME: &'static str = "ServerGroupAntiAffinityFilter";

    /// nova's `_GroupAntiAffinityFilter.host_passes`; `Err` where nova raises.
    pub fn check(host: &HostState, spec: &RequestSpec) -> Result<bool, PyError> {
        // nova reads `policy` here (the affinity filter reads `policies`).
        let Some(group) = spec.instance_group.as_ref() else {
            return Ok(true);
        };
        if group.policy.as_deref() != Some("anti-affinity") {
            return Ok(true);
        }
        // A move may consider its source host, which holds the instance itself.
        if let Some(uuid) = spec.instance_uuid.as_deref() {
            if host.instances.contains(uuid) {
                return Ok(true);
            }
        }
        // `InstanceGroup.rules` int()-coerces `max_server_per_host`; a value int()
        // rejects raises there, failing the whole request in nova.
        let max_server_per_host: i64 = match group.rules.get("max_server_per_host") {
            Some(raw) => py::int::int_saturating(raw)?,
            None => 1,
        };
        // |instances on the host ∩ group members|; iterate the smaller side.
        let servers_on_host = if group.members.len() <= host.instances.len() {
            let mut seen: Vec<&str> = group
                .members
                .iter()
                .map(String::as_str)
                .filter(|m| host.instances.contains(*m))
                .collect();
            // `members` is a list; nova makes a set of it.
            seen.sort_unstable();
            seen.dedup();
            seen.len()
        } else {
            let members: std::collections::HashSet<&str> =
                group.members.iter().map(String::as_str).collect();
            host.instances
                .iter()
                .filter(|i| members.contains(i.as_str()))
                .count()
        };
        debug!(group_uuid = group.uuid.as_deref().unwrap_or("n/a"), host = %host.host,
               max_server = %max_server_per_host,
               "Group anti-affinity: check if the number of servers from group {} on host {} is less than {}.",
               group.uuid.as_deref().unwrap_or("n/a"), host.host, max_server_per_host);
        Ok((servers_on_host as i64) < max_server_per_host)
    }
}

impl HostFilter for ServerGroupAntiAffinityFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        Self::check(host, req.spec).unwrap_or_else(|e| {
            // nova raises (ValueError) and the request fails; we fail the host.
            warn!(host = %host.host, error = %e, "ServerGroupAntiAffinityFilter: bad group rule; host fails");
            false
        })
    }
    // Runs for every instance: the scheduler records each placed member on its host.

    /// No `anti-affinity` group: `check` is `Ok(true)` before it reads the host.
    fn passes_every_host(&self, req: &FilterRequest<'_>) -> bool {
        req.spec
            .instance_group
            .as_ref()
            .is_none_or(|g| g.policy.as_deref() != Some("anti-affinity"))
    }

    /// Without an `anti-affinity` group every host passes; with one, the verdict
    /// reads the instance uuid, which changes between instances.
    fn stable_within_request(&self, spec: &RequestSpec) -> bool {
        spec.instance_group
            .as_ref()
            .is_none_or(|g| g.policy.as_deref() != Some("anti-affinity"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{InstanceGroup, RequestSpec};
    use chrono::Utc;
    use std::collections::BTreeSet;
    use std::sync::Arc;

    fn run(
        policy: Option<&str>,
        members: &[&str],
        rules: &[(&str, &str)],
        on_host: &[&str],
        instance_uuid: Option<&str>,
    ) -> Result<bool, PyError> {
        let spec = RequestSpec {
            instance_uuid: instance_uuid.map(str::to_string),
            instance_group: policy.map(|p| InstanceGroup {
                policy: Some(p.into()),
                policies: vec![p.into()],
                members: members.iter().map(|m| m.to_string()).collect(),
                rules: rules
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let host = HostState {
            host: "host1".into(),
            instances: Arc::new(
                on_host
                    .iter()
                    .map(|s| s.to_string())
                    .collect::<BTreeSet<_>>(),
            ),
            ..Default::default()
        };
        ServerGroupAntiAffinityFilter::check(&host, req.spec)
    }

    /// nova's test_affinity_filters (anti-affinity part).
    #[test]
    fn nova_vectors() {
        let aa = Some("anti-affinity");
        assert_eq!(run(aa, &["inst1"], &[], &["inst1"], None), Ok(false));
        let both = ["inst1", "inst2"];
        let max1 = [("max_server_per_host", "1")];
        let max2 = [("max_server_per_host", "2")];
        assert_eq!(run(aa, &["inst1"], &max1, &both, None), Ok(false));
        assert_eq!(run(aa, &both, &max2, &both, None), Ok(false));
        assert_eq!(run(aa, &[], &max1, &both, None), Ok(true));
        assert_eq!(run(aa, &["inst1"], &max2, &both, None), Ok(true));
        // The instance being moved is already on the host.
        assert_eq!(
            run(aa, &["inst1"], &[], &["inst1"], Some("inst1")),
            Ok(true)
        );
        assert_eq!(run(None, &["inst1"], &[], &["inst1"], None), Ok(true));
        assert_eq!(
            run(Some("affinity"), &["inst1"], &[], &["inst1"], None),
            Ok(true)
        );
        assert!(!ServerGroupAntiAffinityFilter.once_per_request());
        assert!(!ServerGroupAntiAffinityFilter.run_on_rebuild());
    }

    #[test]
    fn rule_parsing_as_python_int() {
        let aa = Some("anti-affinity");
        let on = ["a", "b"];
        let rule = |v: &'static str| [("max_server_per_host", v)];
        assert_eq!(run(aa, &on, &rule(" 3 "), &on, None), Ok(true));
        assert_eq!(run(aa, &on, &rule("0"), &["x"], None), Ok(false));
        assert_eq!(run(aa, &on, &rule("-1"), &["x"], None), Ok(false));
        assert_eq!(run(aa, &on, &rule("1_0"), &on, None), Ok(true));
        assert!(run(aa, &on, &rule("two"), &on, None).is_err());
        assert!(run(aa, &on, &rule("1.5"), &on, None).is_err());
        // Duplicate members count once (nova builds a set).
        assert_eq!(run(aa, &["a", "a"], &rule("2"), &on, None), Ok(true));
    }
}
