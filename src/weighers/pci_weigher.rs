// SPDX-License-Identifier: Apache-2.0
//! `PCIWeigher`: keep hosts with free PCI devices for the requests that need them.
//! The raw weight is `100 − min(free devices, 99)`, independent of the request.

use super::aggregate_multiplier::MultiplierSetting;
use super::{HostWeigher, RawDependence, WeighError};
use crate::model::{HostState, RequestSpec};
use serde_json::Value;

/// nova's `MAX_DEVS`.
const MAX_DEVS: i64 = 100;

pub struct PCIWeigher {
    /// `[filter_scheduler] pci_weight_multiplier` (1.0, ≥ 0).
    pub multiplier: f64,
}

impl PCIWeigher {
    pub const NAME: &'static str = "PCIWeigher";
}

/// Total `count` over the host's PCI device pools (a `PciDevicePoolList` primitive
/// or a bare list of pool dicts).
pub fn free_pci_devices(pci_stats: Option<&Value>) -> i64 {
    let Some(stats) = pci_stats else { return 0 };
    let pools = stats
        .get("nova_object.data")
        .and_then(|d| d.get("objects"))
        .or_else(|| stats.get("pools"))
        .unwrap_or(stats);
    let Some(pools) = pools.as_array() else {
        return 0;
    };
    pools
        .iter()
        .map(|p| p.get("nova_object.data").unwrap_or(p))
        .filter_map(|p| p.get("count").and_then(Value::as_i64))
        .sum()
}

impl HostWeigher for PCIWeigher {
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
        // The parsed pools, when loaded, include this request's earlier consumption.
        let free = match &host.pci {
            Some(stats) => stats.free_devices(),
            None => free_pci_devices(host.pci_stats.as_deref()),
        };
        Ok((MAX_DEVS - free.min(MAX_DEVS - 1)) as f64)
    }

    fn multiplier_setting(&self) -> MultiplierSetting {
        MultiplierSetting::new("pci_weight_multiplier", self.multiplier)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn counts_pools_in_every_encoding() {
        assert_eq!(free_pci_devices(None), 0);
        let list = json!({"nova_object.name": "PciDevicePoolList", "nova_object.data": {"objects": [
            {"nova_object.name": "PciDevicePool", "nova_object.data": {"count": 4}},
            {"nova_object.name": "PciDevicePool", "nova_object.data": {"count": 2}}]}});
        assert_eq!(free_pci_devices(Some(&list)), 6);
        assert_eq!(free_pci_devices(Some(&json!([{"count": 3}]))), 3);
        let w = PCIWeigher { multiplier: 1.0 };
        let host = HostState {
            pci_stats: Some(std::sync::Arc::new(json!([{"count": 500}]))),
            ..Default::default()
        };
        assert_eq!(w.weigh(&host, &RequestSpec::default()).ok(), Some(1.0));
    }
}
