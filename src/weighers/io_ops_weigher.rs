// SPDX-License-Identifier: Apache-2.0
//! `IoOpsWeigher`: I/O-heavy operations on the host; nova's default multiplier (−1.0) prefers idle hosts.

use super::aggregate_multiplier::MultiplierSetting;
use super::{HostWeigher, RawDependence, WeighError};
use crate::model::{HostState, RequestSpec};

pub struct IoOpsWeigher {
    /// `[filter_scheduler] io_ops_weight_multiplier`.
    pub multiplier: f64,
}

impl IoOpsWeigher {
    pub const NAME: &'static str = "IoOpsWeigher";
}

impl HostWeigher for IoOpsWeigher {
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
        Ok(host.num_io_ops as f64)
    }

    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("io_ops_weight_multiplier", self.multiplier)
    }

    fn minval(&self) -> Option<f64> {
        Some(0.0)
    }
}
