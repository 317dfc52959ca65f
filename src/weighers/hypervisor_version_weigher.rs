// SPDX-License-Identifier: Apache-2.0
//! `HypervisorVersionWeigher`: newer hypervisors win by default.

use super::aggregate_multiplier::MultiplierSetting;
use super::{HostWeigher, RawDependence, WeighError};
use crate::model::{HostState, RequestSpec};

pub struct HypervisorVersionWeigher {
    /// `[filter_scheduler] hypervisor_version_weight_multiplier`.
    pub multiplier: f64,
}

impl HypervisorVersionWeigher {
    pub const NAME: &'static str = "HypervisorVersionWeigher";
}

impl HostWeigher for HypervisorVersionWeigher {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn stable_within_request(&self) -> bool {
        true
    }

    /// Reads the host's state only.
    fn raw_dependence(&self, _spec: &RequestSpec) -> RawDependence {
        RawDependence::Host
    }

    fn weigh(&self, host: &HostState, _spec: &RequestSpec) -> Result<f64, WeighError> {
        Ok(host.hypervisor_version.unwrap_or(0) as f64)
    }

    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("hypervisor_version_weight_multiplier", self.multiplier)
    }
}
