// SPDX-License-Identifier: Apache-2.0
//! `CrossCellWeigher`: for a move that may cross cells, prefer hosts in the source
//! cell (raw +1) over the others (raw −1); 0 for every host otherwise.

use super::aggregate_multiplier::MultiplierSetting;
use super::{HostWeigher, RawDependence, WeighError};
use crate::model::{HostState, RequestSpec};

pub struct CrossCellWeigher {
    /// `[filter_scheduler] cross_cell_move_weight_multiplier` (1000000.0).
    pub multiplier: f64,
}

impl CrossCellWeigher {
    pub const NAME: &'static str = "CrossCellWeigher";
}

impl HostWeigher for CrossCellWeigher {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn stable_within_request(&self) -> bool {
        true
    }

    /// 0.0 for every host unless the request is a move allowed to cross cells.
    fn raw_dependence(&self, spec: &RequestSpec) -> RawDependence {
        let crossing = spec.requested_destination.as_ref().is_some_and(|d| {
            d.allow_cross_cell_move && d.cell_uuid.as_deref().is_some_and(|c| !c.is_empty())
        });
        if crossing {
            RawDependence::Request
        } else {
            RawDependence::SameForEveryHost(0.0)
        }
    }

    fn weigh(&self, host: &HostState, spec: &RequestSpec) -> Result<f64, WeighError> {
        let Some(dest) = &spec.requested_destination else {
            return Ok(0.0);
        };
        match &dest.cell_uuid {
            Some(cell) if !cell.is_empty() && dest.allow_cross_cell_move => {
                Ok(if *host.cell_uuid == **cell { 1.0 } else { -1.0 })
            }
            _ => Ok(0.0),
        }
    }

    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("cross_cell_move_weight_multiplier", self.multiplier)
    }
}
