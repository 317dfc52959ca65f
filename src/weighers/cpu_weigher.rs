// SPDX-License-Identifier: Apache-2.0
//! `CPUWeigher`: free vCPUs (total × allocation ratio − used); positive spreads.

use super::aggregate_multiplier::MultiplierSetting;
use super::{HostWeigher, RawDependence, WeighError};
use crate::model::{HostState, RequestSpec};

pub struct CPUWeigher {
    /// `[filter_scheduler] cpu_weight_multiplier`.
    pub multiplier: f64,
}

impl CPUWeigher {
    pub const NAME: &'static str = "CPUWeigher";
}

impl HostWeigher for CPUWeigher {
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
        Ok(host.vcpus_total as f64 * host.cpu_allocation_ratio - host.vcpus_used as f64)
    }

    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("cpu_weight_multiplier", self.multiplier)
    }

    fn minval(&self) -> Option<f64> {
        Some(0.0)
    }
}
