// SPDX-License-Identifier: Apache-2.0
//! `BuildFailureWeigher`: hosts with recent consecutive build failures lose. nova
//! returns `-1 ×` the configured (or aggregate) multiplier, so an aggregate value of
//! `1000` means −1000.

use super::aggregate_multiplier::MultiplierSetting;
use super::{HostWeigher, RawDependence, WeighError};
use crate::model::{HostState, RequestSpec};

pub struct BuildFailureWeigher {
    /// `[filter_scheduler] build_failure_weight_multiplier` (1000000.0).
    pub multiplier: f64,
}

impl BuildFailureWeigher {
    pub const NAME: &'static str = "BuildFailureWeigher";
}

impl HostWeigher for BuildFailureWeigher {
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
        Ok(host.failed_builds as f64)
    }

    fn multiplier_setting(&self) -> MultiplierSetting {
        // nova returns `-1 *` the multiplier.
        MultiplierSetting::negated("build_failure_weight_multiplier", self.multiplier)
    }
}
