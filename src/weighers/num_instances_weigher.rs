// SPDX-License-Identifier: Apache-2.0
//! `NumInstancesWeigher`: instance count; positive packs, negative spreads (default 0.0: inert).

use super::aggregate_multiplier::MultiplierSetting;
use super::{HostWeigher, RawDependence, WeighError};
use crate::model::{HostState, RequestSpec};

pub struct NumInstancesWeigher {
    /// `[filter_scheduler] num_instances_weight_multiplier`.
    pub multiplier: f64,
}

impl NumInstancesWeigher {
    pub const NAME: &'static str = "NumInstancesWeigher";
}

impl HostWeigher for NumInstancesWeigher {
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
        Ok(host.num_instances as f64)
    }

    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("num_instances_weight_multiplier", self.multiplier)
    }
}
