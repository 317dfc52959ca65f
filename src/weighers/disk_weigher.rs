// SPDX-License-Identifier: Apache-2.0
//! `DiskWeigher`: free disk; positive spreads.

use super::aggregate_multiplier::MultiplierSetting;
use super::{HostWeigher, RawDependence, WeighError};
use crate::model::{HostState, RequestSpec};

pub struct DiskWeigher {
    /// `[filter_scheduler] disk_weight_multiplier`.
    pub multiplier: f64,
}

impl DiskWeigher {
    pub const NAME: &'static str = "DiskWeigher";
}

impl HostWeigher for DiskWeigher {
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
        Ok(host.free_disk_mb as f64)
    }

    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("disk_weight_multiplier", self.multiplier)
    }

    fn minval(&self) -> Option<f64> {
        Some(0.0)
    }
}
