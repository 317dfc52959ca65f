// SPDX-License-Identifier: Apache-2.0
//! `RAMWeigher`: free RAM; a positive multiplier spreads, a negative one packs.

use super::aggregate_multiplier::MultiplierSetting;
use super::{HostWeigher, RawDependence, WeighError};
use crate::model::{HostState, RequestSpec};

pub struct RAMWeigher {
    /// `[filter_scheduler] ram_weight_multiplier`.
    pub multiplier: f64,
}

impl RAMWeigher {
    pub const NAME: &'static str = "RAMWeigher";
}

impl HostWeigher for RAMWeigher {
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
        Ok(host.free_ram_mb as f64)
    }

    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("ram_weight_multiplier", self.multiplier)
    }

    fn minval(&self) -> Option<f64> {
        Some(0.0)
    }
}
