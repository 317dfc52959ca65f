// SPDX-License-Identifier: Apache-2.0
//! `ServerGroupSoftAntiAffinityWeigher`: hosts holding fewer members of a soft-anti-affinity group win.
//! The raw weight is -(number of group members on the host).

use super::aggregate_multiplier::MultiplierSetting;
use super::{HostWeigher, RawDependence, WeighError};
use crate::model::{HostState, RequestSpec};

pub struct ServerGroupSoftAntiAffinityWeigher {
    /// `[filter_scheduler] soft_anti_affinity_weight_multiplier` (1.0, ≥ 0).
    pub multiplier: f64,
}

impl ServerGroupSoftAntiAffinityWeigher {
    pub const NAME: &'static str = "ServerGroupSoftAntiAffinityWeigher";
}

impl HostWeigher for ServerGroupSoftAntiAffinityWeigher {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn stable_within_request(&self) -> bool {
        true
    }

    /// 0.0 for every host unless the request's group has the `soft-anti-affinity` policy.
    fn raw_dependence(&self, spec: &RequestSpec) -> RawDependence {
        let grouped = spec
            .instance_group
            .as_ref()
            .is_some_and(|g| g.policy.as_deref() == Some("soft-anti-affinity"));
        if grouped {
            RawDependence::Request
        } else {
            RawDependence::SameForEveryHost(0.0)
        }
    }

    fn weigh(&self, host: &HostState, spec: &RequestSpec) -> Result<f64, WeighError> {
        let Some(group) = &spec.instance_group else {
            return Ok(0.0);
        };
        if group.policy.as_deref() != Some("soft-anti-affinity") {
            return Ok(0.0);
        }
        // nova intersects sets: a member listed twice counts once.
        let members = group
            .members
            .iter()
            .filter(|m| host.instances.contains(*m))
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        Ok(-(members as f64))
    }

    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("soft_anti_affinity_weight_multiplier", self.multiplier)
    }
}
