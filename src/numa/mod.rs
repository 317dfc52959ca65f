// SPDX-License-Identifier: Apache-2.0
//! nova's NUMA placement, pure (no I/O): the host and instance NUMA objects as
//! nova stores and sends them, `numa_fit_instance_to_host` with CPU pinning,
//! thread policies, huge pages, allocation-ratio limits and network affinity,
//! and the usage update used for virtual consumption.
//!
//! Python set iteration order decides which host CPUs nova pins, so host CPU
//! sets are [`crate::py::set::PySet`]s that reproduce CPython's layout.

pub mod fit;
pub mod host;
pub mod instance;
pub mod usage;

pub use fit::{numa_fit_instance_to_host, PciContext};
pub use host::{NetworkMetadata, NumaCell, NumaTopology, PagesTopology};
pub use instance::{CpuPolicy, InstanceCell, InstanceTopology, Limits, ThreadPolicy};
pub use usage::numa_usage_from_instance;

use serde_json::Value;
use std::sync::{Arc, OnceLock};

/// Most NUMA cells accepted in one topology (hosts have at most a few dozen).
pub const MAX_CELLS: usize = 256;
/// Most CPUs (or sibling sets, or physnets) accepted in one set.
pub const MAX_CPUS_PER_SET: usize = 16_384;
/// Most page sizes accepted per cell.
pub const MAX_PAGE_SIZES: usize = 64;
/// Budget of (host cell, instance cell) steps for one fit. Far above what real
/// topologies need (8 host cells × 8 instance cells: 8! permutations × 8 cells,
/// about 320,000);
/// beyond it the host is treated as not fitting instead of running for hours.
pub const MAX_FIT_STEPS: usize = 2_000_000;

/// Where nova's NUMA code raises (or its input cannot be decoded).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NumaError {
    #[error("cannot decode NUMA object: {0}")]
    Decode(String),
    #[error("{0}")]
    Invalid(String),
    /// nova: `NotImplementedError: Cannot load '<field>' in the base class`.
    #[error("Cannot load '{0}' in the base class")]
    FieldNotSet(&'static str),
    /// nova: `max()` over an empty sibling list (ValueError).
    #[error("host NUMA cell {0} lists no CPU siblings")]
    NoSiblings(i64),
    /// nova: `_get_smallest_pagesize` on a cell without pages (IndexError).
    #[error("host NUMA cell {0} has no memory pages")]
    NoPages(i64),
    /// nova: `memory % size_kb` with a zero page size (ZeroDivisionError).
    #[error("host NUMA cell reports a page size of 0 KiB")]
    ZeroPageSize,
    #[error("CPU set to pin {requested:?} must be a subset of known CPU set {available:?}")]
    PinningUnknown {
        requested: Vec<i64>,
        available: Vec<i64>,
    },
    #[error("CPU set to pin {requested:?} must be a subset of free CPU set {available:?}")]
    PinningInvalid {
        requested: Vec<i64>,
        available: Vec<i64>,
    },
    #[error("NUMA fit needs more than {MAX_FIT_STEPS} steps; treated as not fitting")]
    TooComplex,
    /// nova's `PciDeviceStats.support_requests` raised inside the fit.
    #[error("PCI request check raised: {0}")]
    Pci(String),
}

impl NumaError {
    pub fn decode(msg: impl Into<String>) -> Self {
        NumaError::Decode(msg.into())
    }
}

/// The host topology parsed once from `HostState.numa_topology` (lazily, on first
/// use), then replaced by virtual consumption.
#[derive(Debug, Clone, Default)]
pub struct HostNumaCache(OnceLock<Result<Arc<NumaTopology>, NumaError>>);

impl PartialEq for HostNumaCache {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

impl HostNumaCache {
    /// The parsed topology: `Ok(None)` when the host reports none.
    pub fn get(&self, raw: Option<&Value>) -> Result<Option<Arc<NumaTopology>>, NumaError> {
        let Some(raw) = raw else {
            if let Some(Ok(t)) = self.0.get() {
                return Ok(Some(t.clone()));
            }
            return Ok(None);
        };
        self.0
            .get_or_init(|| {
                let parsed = match raw {
                    Value::String(text) => NumaTopology::from_json_str(text),
                    other => NumaTopology::from_primitive(other),
                };
                parsed.map(Arc::new)
            })
            .clone()
            .map(Some)
    }

    /// Replaces the topology after consumption.
    pub fn set(&mut self, topology: NumaTopology) {
        let lock = OnceLock::new();
        let _ = lock.set(Ok(Arc::new(topology)));
        self.0 = lock;
    }
}

/// `(numa_node, count)` of each PCI pool in a `HostState.pci_stats` value (a
/// `PciDevicePoolList` primitive, or a list of pool dicts), in pool order after
/// nova's stable sort by number of keys.
pub fn pci_pool_counts(pci_stats: Option<&Value>) -> Vec<(Option<i64>, i64)> {
    let Some(stats) = pci_stats else {
        return Vec::new();
    };
    let pools = stats
        .get("nova_object.data")
        .and_then(|d| d.get("objects"))
        .or_else(|| stats.get("pools"))
        .unwrap_or(stats);
    let Some(pools) = pools.as_array() else {
        return Vec::new();
    };
    pools
        .iter()
        .map(|p| p.get("nova_object.data").unwrap_or(p))
        .map(|p| {
            let node = p.get("numa_node").and_then(Value::as_i64);
            let count = p.get("count").and_then(Value::as_i64).unwrap_or(0);
            (node, count)
        })
        .collect()
}
