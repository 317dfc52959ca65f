// SPDX-License-Identifier: Apache-2.0
//! nova's host filters: one filter per file behind [`HostFilter`], an explicit
//! registry keyed by nova's class names, and the ordered chain runner.
//!
//! Filters are pure predicates over a [`HostState`] and the request; they read no
//! globals (their options are captured when the chain is built) and do no I/O.

pub mod aggregate_image_properties_isolation;
pub mod aggregate_instance_extra_specs_filter;
pub mod aggregate_io_ops_filter;
pub mod aggregate_multi_tenancy_isolation;
pub mod aggregate_num_instances_filter;
pub mod aggregate_type_affinity_filter;
pub mod all_hosts_filter;
pub mod chain;
pub mod compute_capabilities_filter;
pub mod compute_filter;
pub mod different_host_filter;
pub mod extra_specs_ops;
pub mod host_attrs;
pub mod image_properties_filter;
pub mod io_ops_filter;
pub mod isolated_hosts_filter;
pub mod json_filter;
pub mod legacy;
pub mod metrics_filter;
pub mod num_instances_filter;
pub mod numa_topology_filter;
pub mod pci_passthrough_filter;
pub mod registry;
pub mod same_host_filter;
pub mod server_group_affinity_filter;
pub mod server_group_anti_affinity_filter;
pub mod simple_cidr_affinity_filter;
pub mod utils;

use crate::model::{HostState, RequestSpec};
use chrono::{DateTime, Utc};

pub use chain::{Consumed, FilterChain, FilterStep};
pub use registry::{build_chain, build_chain_with, FilterConfig, UnknownFilters};

/// Filter classes from outside this crate (an operator's own), offered by class
/// name beside nova's.
pub trait CustomFilters: Send + Sync {
    /// The class names offered, in the order they were loaded.
    fn names(&self) -> Vec<String>;

    /// A new instance of the class named `name` (`None`: no such class here), or
    /// why it could not be made.
    fn build(&self, name: &str) -> Option<Result<Box<dyn HostFilter>, String>>;
}

/// An exception a filter raised (an operator's Python class): it fails the request
/// with that exception, as nova's filter handler lets it propagate to the caller.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{class}: {message}")]
pub struct FilterRaised {
    pub class: String,
    /// The exception's Python module (`builtins`, the operator's own, ...).
    pub module: String,
    /// `str(exception)`.
    pub message: String,
}

thread_local! {
    /// The first exception a filter raised on this thread since it was last taken:
    /// filters run synchronously on the request's thread, and the scheduler takes it
    /// as soon as the chain has run.
    static RAISED: std::cell::RefCell<Option<FilterRaised>> = const { std::cell::RefCell::new(None) };
}

/// Records that a filter raised (the first exception of a chain run is kept).
pub fn raise(raised: FilterRaised) {
    RAISED.with_borrow_mut(|slot| {
        slot.get_or_insert(raised);
    });
}

/// The exception a filter raised since the last call, if one did.
pub fn take_raised() -> Option<FilterRaised> {
    RAISED.with_borrow_mut(Option::take)
}

/// What a filter may read besides the host: the request and where we are in it.
pub struct FilterRequest<'a> {
    pub spec: &'a RequestSpec,
    /// Wall-clock time of the request (service liveness is judged against it).
    pub now: DateTime<Utc>,
    /// Index of the instance being placed in a multi-instance request.
    pub index: usize,
    /// nova's "rebuild to a new image" marker (`_nova_check_type == ["rebuild"]`).
    pub is_rebuild: bool,
}

/// nova's `BaseHostFilter`: a predicate plus the two behaviour flags nova declares
/// as class attributes.
pub trait HostFilter: Send + Sync {
    /// nova's class name, e.g. `ComputeFilter`.
    fn name(&self) -> &'static str;

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool;

    /// nova's `host_passes` with its side effects on the host state: candidate
    /// filters prune `allocation_candidates`, the legacy resource filters record
    /// `limits`. The chain calls this; by default it has no side effect.
    fn filter_host(&self, host: &mut HostState, req: &FilterRequest<'_>) -> bool {
        self.host_passes(host, req)
    }

    /// `RUN_ON_REBUILD`: when false, a rebuild request passes every host untested.
    fn run_on_rebuild(&self) -> bool {
        false
    }

    /// `run_filter_once_per_request`: when true, skipped for instances 2..N.
    fn once_per_request(&self) -> bool {
        false
    }

    /// True when, for this request, every host passes whatever its state: nova
    /// would call `host_passes` on each and get `True` without the host being read.
    /// The chain then keeps every host without asking. Only for filters that write
    /// nothing to the host (the default [`filter_host`](Self::filter_host)).
    fn passes_every_host(&self, _req: &FilterRequest<'_>) -> bool {
        false
    }

    /// True when, for this request, the verdict on a host depends only on that
    /// host's state and on the parts of the request that stay the same between
    /// its instances (not `instance_uuid`, `instance_group.hosts`, `numa_topology`
    /// nor the instance index), and the filter writes nothing to the host (keeps
    /// the default [`filter_host`](Self::filter_host)). The scheduler then skips
    /// it for instances 2..N on every host that passed it for the previous
    /// instance and was not consumed since: the verdict could not change.
    /// `false` (the default) re-runs it on every host, as nova does.
    fn stable_within_request(&self, _spec: &RequestSpec) -> bool {
        false
    }

    /// True when [`filter_host`](Self::filter_host) writes to the host state
    /// (pruned allocation candidates, limits). The decision index evaluates
    /// filters on shared host states, so it serves a request only when such a
    /// filter never runs for it.
    fn writes_host(&self) -> bool {
        false
    }

    /// True when, for this request, the verdict may read the host's
    /// `allocation_candidates` (nova's attribute lookups reach them). The shared
    /// host states the decision index evaluates filters on carry none, so such a
    /// request is decided the plain way.
    fn reads_allocation_candidates(&self, _spec: &RequestSpec) -> bool {
        false
    }

    /// True for a filter judged over the whole list at once (nova's `filter_all`,
    /// an operator's Python class: one call per request, not one per host); the
    /// chain then calls [`filter_all`](Self::filter_all) instead of `filter_host`.
    fn filters_all_at_once(&self) -> bool {
        false
    }

    /// One verdict per host of `hosts` (the hosts still in the list, in its order),
    /// for a filter that [filters all at once](Self::filters_all_at_once); by
    /// default each host's `host_passes`.
    fn filter_all(&self, hosts: &[&HostState], req: &FilterRequest<'_>) -> Vec<bool> {
        hosts.iter().map(|h| self.host_passes(h, req)).collect()
    }

    /// For a filter that [filters all at once](Self::filters_all_at_once), what
    /// `explain` shows: one entry per host of `hosts`, `None` when it passes, else
    /// the reason the filter gives (by default, that it returned False).
    fn rejection_reasons(
        &self,
        hosts: &[&HostState],
        req: &FilterRequest<'_>,
    ) -> Vec<Option<String>> {
        self.filter_all(hosts, req)
            .into_iter()
            .map(|pass| (!pass).then(|| format!("{} returned False", self.name())))
            .collect()
    }
}
