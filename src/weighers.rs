// SPDX-License-Identifier: Apache-2.0
//! nova's host weighers: each returns a raw number per host; the [`WeigherPipeline`]
//! (nova's `BaseWeightHandler`) clamps, normalizes per weigher over the candidate list,
//! multiplies by the per-host multiplier and sums.

pub mod aggregate_multiplier;
pub mod build_failure_weigher;
pub mod cpu_weigher;
pub mod cross_cell_weigher;
pub mod disk_weigher;
pub mod hypervisor_version_weigher;
pub mod image_properties_weigher;
pub mod image_props;
pub mod io_ops_weigher;
pub mod metrics_weigher;
pub mod normalize;
pub mod num_instances_weigher;
pub mod pci_weigher;
pub mod pipeline;
pub mod ram_weigher;
pub mod registry;
pub mod server_group_soft_affinity_weigher;
pub mod server_group_soft_anti_affinity_weigher;

use crate::model::{HostState, RequestSpec};

pub use pipeline::{
    HostWeighing, WeighCache, WeighedHost, WeigherPipeline, WeigherScore, WeighingExplanation,
};
pub use registry::{build_pipeline, build_pipeline_with, UnknownWeighers, WeigherConfig};

/// A weigher failed in a way nova reports to the caller (e.g. a required metric is missing).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct WeighError {
    /// nova exception class, in module `nova.exception`.
    pub class: &'static str,
    pub message: String,
}

/// nova's `BaseHostWeigher`.
pub trait HostWeigher: Send + Sync {
    /// nova's class name, e.g. `RAMWeigher`.
    fn name(&self) -> &'static str;

    /// The raw weight (`_weigh_object`). Higher wins before the multiplier.
    fn weigh(&self, host: &HostState, spec: &RequestSpec) -> Result<f64, WeighError>;

    /// Where the multiplier comes from: the config value and the aggregate
    /// metadata key that overrides it.
    fn multiplier_setting(&self) -> aggregate_multiplier::MultiplierSetting;

    /// The multiplier for this host: config, or aggregate metadata override.
    fn multiplier(&self, host: &HostState) -> f64 {
        self.multiplier_setting().for_host(host)
    }

    /// nova's `minval`: raw weights are clamped to it and it is the normalization floor.
    fn minval(&self) -> Option<f64> {
        None
    }

    /// nova's `maxval` (no in-tree weigher sets one).
    fn maxval(&self) -> Option<f64> {
        None
    }

    /// True when the raw weight of a host depends only on that host's state and
    /// on the parts of the request that stay the same between its instances (not
    /// `instance_uuid`, `instance_group.hosts` nor `numa_topology`). The scheduler
    /// then keeps a host's raw weight from one instance to the next unless the
    /// host was consumed. `false` (the default) re-weighs every host every time.
    fn stable_within_request(&self) -> bool {
        false
    }

    /// How the raw weight depends on the request, for the decision index
    /// (`scheduler::table`), which computes raw weights once per host state and
    /// reuses them across requests. [`RawDependence::Request`] (the default) keeps
    /// the request off the index: every host is weighed for it, as nova does.
    fn raw_dependence(&self, _spec: &RequestSpec) -> RawDependence {
        RawDependence::Request
    }

    /// True for a weigher that weighs the whole list at once (an operator's
    /// Python class: nova's `weigh_objects` and `weight_multiplier`, one call per
    /// request); the pipeline then calls [`weigh_all`](Self::weigh_all).
    fn weighs_all_at_once(&self) -> bool {
        false
    }

    /// The raw weights (already held within `minval`/`maxval`), the bounds to
    /// normalize with and each host's multiplier, for `hosts` in the list's order;
    /// by default from [`weigh`](Self::weigh) and [`multiplier`](Self::multiplier).
    fn weigh_all(
        &self,
        hosts: &[&HostState],
        spec: &RequestSpec,
    ) -> Result<AllWeights, WeighError> {
        let (minval, maxval) = (self.minval(), self.maxval());
        let mut raw = Vec::with_capacity(hosts.len());
        for host in hosts {
            let mut value = self.weigh(host, spec)?;
            if let Some(min) = minval {
                value = value.max(min);
            }
            if let Some(max) = maxval {
                value = value.min(max);
            }
            raw.push(value);
        }
        Ok(AllWeights {
            raw,
            minval,
            maxval,
            multipliers: hosts.iter().map(|h| self.multiplier(h)).collect(),
        })
    }
}

/// A whole list weighed at once (see [`HostWeigher::weigh_all`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AllWeights {
    pub raw: Vec<f64>,
    pub minval: Option<f64>,
    pub maxval: Option<f64>,
    pub multipliers: Vec<f64>,
}

/// Weigher classes from outside this crate (an operator's own), named by
/// `weight_classes` entries beside nova's.
pub trait CustomWeighers: Send + Sync {
    /// The weighers the `weight_classes` entry `entry` names (a class path, or the
    /// path of a function returning classes), in order; `None` when the entry is
    /// not one of these, or why they could not be made.
    fn build(&self, entry: &str) -> Option<Result<Vec<Box<dyn HostWeigher>>, String>>;
}

/// How a weigher's raw weight depends on the request (see
/// [`HostWeigher::raw_dependence`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RawDependence {
    /// On the host's state alone, whatever the request.
    Host,
    /// For this request, this value for every host, whatever its state.
    SameForEveryHost(f64),
    /// On the request and the host.
    Request,
}
