// SPDX-License-Identifier: Apache-2.0
//! Whether a request can be decided on the index exactly as nova would decide it,
//! and with which filters: the [`Plan`], and the narrowing before the filters as a
//! test on one host ([`Narrow`]).

use super::table::HostTable;
use super::weigh_index::WeighIndex;
use crate::filters::FilterRequest;
use crate::model::{HostState, RequestSpec};
use crate::scheduler::{ScheduleRequest, Scheduler};
use crate::weighers::RawDependence;
use std::collections::BTreeSet;
use std::sync::Arc;
use tracing::{enabled, Level};

/// A filter that is evaluated on this path.
#[derive(Debug, Clone, Copy)]
pub(super) struct LazyFilter {
    /// Position in the chain.
    pub(super) position: usize,
    /// Runs for every instance (else only for the first): re-evaluated on the
    /// hosts this request consumes.
    pub(super) every_instance: bool,
}

/// What a request needs from the index, when it can be decided there.
pub(super) struct Plan {
    pub(super) index: Arc<WeighIndex>,
    pub(super) filters: Vec<LazyFilter>,
    pub(super) narrow: Narrow,
}

impl Plan {
    /// `None` when the request must be decided the plain way:
    /// - debug logging of the scheduler, filters or weighers is on (nova's debug
    ///   lines list every host);
    /// - no Placement candidates (legacy and rebuild requests), or
    ///   `shuffle_best_same_weighed_hosts` (it shuffles every tied best host);
    /// - a weigher's raw weight depends on the request (a soft-affinity group, a
    ///   cross-cell move, ImagePropertiesWeigher enabled), or a raw weight or
    ///   multiplier of some host is an error or not finite;
    /// - a filter that runs for this request writes to the host (NUMA, PCI and the
    ///   legacy resource filters) or may read its allocation candidates, or runs
    ///   for every instance of a multi-instance request without being stable
    ///   within it (affinity and anti-affinity groups, for instance).
    pub(super) fn new(sched: &Scheduler, table: &HostTable, req: &ScheduleRequest) -> Option<Plan> {
        if enabled!(target: "nova_scheduler::scheduler", Level::DEBUG)
            || enabled!(target: "nova_scheduler::filters::chain", Level::DEBUG)
            || enabled!(target: "nova_scheduler::weighers::pipeline", Level::DEBUG)
        {
            return None;
        }
        if !req.use_placement || sched.shuffle_best_same_weighed_hosts {
            return None;
        }
        let spec = &req.spec;
        let weighers = sched.weighers.weighers();
        if weighers.len() > 64 {
            return None;
        }
        let mut mask = 0u64;
        for (k, w) in weighers.iter().enumerate() {
            match w.raw_dependence(spec) {
                RawDependence::Host => mask |= 1 << k,
                RawDependence::SameForEveryHost(v) => {
                    // Normalized to 0 for every host unless a bound is set apart from it.
                    let mut v = v;
                    if let Some(min) = w.minval() {
                        v = v.max(min);
                    }
                    if let Some(max) = w.maxval() {
                        v = v.min(max);
                    }
                    if w.minval().unwrap_or(v) != w.maxval().unwrap_or(v) {
                        return None;
                    }
                }
                RawDependence::Request => return None,
            }
        }
        let single = sched.shape_of(req).iterations <= 1;
        let is_rebuild = spec.is_rebuild();
        let first = FilterRequest {
            spec,
            now: req.now,
            index: 0,
            is_rebuild,
        };
        let mut filters = Vec::new();
        for (position, f) in sched.filters.filters().iter().enumerate() {
            if is_rebuild && !f.run_on_rebuild() {
                continue;
            }
            let once = single || f.once_per_request();
            let stable = f.stable_within_request(spec);
            if f.passes_every_host(&first) && (once || stable) {
                continue;
            }
            // The index asks host by host; a filter judging the whole list at once
            // (a plugin's) is asked once over the plain way's list instead.
            if f.writes_host() || f.reads_allocation_candidates(spec) || f.filters_all_at_once() {
                return None;
            }
            if once {
                filters.push(LazyFilter {
                    position,
                    every_instance: false,
                });
            } else if stable {
                filters.push(LazyFilter {
                    position,
                    every_instance: true,
                });
            } else {
                return None;
            }
        }
        let index = table.weigh_index(&sched.weighers, mask);
        if !index.usable {
            return None;
        }
        Some(Plan {
            index,
            filters,
            narrow: Narrow::new(spec),
        })
    }
}

/// nova's `get_filtered_hosts` before the filters, as a test on one host:
/// requested destination, ignored and forced hosts and nodes.
pub(super) struct Narrow {
    host: Option<String>,
    node: Option<String>,
    ignore: BTreeSet<String>,
    force_hosts: BTreeSet<String>,
    force_nodes: Vec<String>,
    /// Forced hosts or nodes without `_nova_check_type`: no filter runs.
    pub(super) skip_filters: bool,
}

impl Narrow {
    fn new(spec: &RequestSpec) -> Self {
        let (host, node) = match &spec.requested_destination {
            Some(dest) => (
                dest.host.clone(),
                dest.node.clone().filter(|n| !n.is_empty()),
            ),
            None => (None, None),
        };
        let forced = !spec.force_hosts.is_empty() || !spec.force_nodes.is_empty();
        let check_type = spec.hint("_nova_check_type").is_some_and(|v| !v.is_empty());
        Narrow {
            node: host.as_ref().and(node),
            host,
            ignore: spec.ignore_hosts.iter().map(|h| h.to_lowercase()).collect(),
            force_hosts: spec.force_hosts.iter().map(|h| h.to_lowercase()).collect(),
            force_nodes: spec.force_nodes.clone(),
            skip_filters: forced && !check_type,
        }
    }

    pub(super) fn passes(&self, h: &HostState) -> bool {
        if let Some(want) = &self.host {
            if *h.host != **want {
                return false;
            }
            if let Some(node) = &self.node {
                if *h.nodename != **node {
                    return false;
                }
            }
        }
        if !self.ignore.is_empty() || !self.force_hosts.is_empty() {
            let lower = h.host.to_lowercase();
            if self.ignore.contains(&lower) {
                return false;
            }
            if !self.force_hosts.is_empty() && !self.force_hosts.contains(&lower) {
                return false;
            }
        }
        self.force_nodes.is_empty() || self.force_nodes.iter().any(|n| **n == *h.nodename)
    }
}
