// SPDX-License-Identifier: Apache-2.0
//! The decision core: nova's `SchedulerManager._schedule` without the I/O.
//!
//! Host states and the request go in; per-instance selections (chosen host plus
//! alternates) come out. Claims are the one side effect nova interleaves with the
//! decision (a failed claim moves on to the next host), so they go through the
//! [`Claimer`] trait, implemented over Placement at the edge and in memory in tests.
//! No tokio, sqlx or lapin here; randomness comes from the caller's RNG.
//!
//! The loop (sort, claim first, consume, alternates) is written once, in `decide`,
//! over a host source: the host states copied for the request (`host_list`, every
//! candidate filtered and weighed) or the warm cache's host table (`indexed`, only
//! the first hosts of each list looked at).

pub mod compare;
mod decide;
pub mod explain;
mod host_list;
mod indexed;
pub mod reference;

pub use indexed::{HostTable, RowCandidates};

use crate::filters::{Consumed, FilterChain, FilterRequest};
use crate::model::{HostState, RequestSpec};
use crate::weighers::{WeighCache, WeighError, WeigherPipeline, WeighingExplanation};
use chrono::{DateTime, Utc};
use rand::seq::{IndexedRandom, SliceRandom};
use rand::Rng;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use tracing::{debug, warn};

/// Why scheduling stopped.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    /// nova's `NoValidHost`; `reason` is what follows "No valid host was found. ".
    #[error("No valid host was found. {reason}")]
    NoValidHost { reason: String },
    #[error(transparent)]
    Weigher(#[from] WeighError),
    #[error(transparent)]
    Claim(#[from] ClaimError),
    /// A filter raised (an operator's Python class); the request fails with it.
    #[error(transparent)]
    FilterRaised(#[from] crate::filters::FilterRaised),
}

/// Errors from the claim side that nova propagates to the caller.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClaimError {
    #[error("Failed to update allocations for consumer {consumer_uuid}. Error: {error}")]
    AllocationUpdateFailed {
        consumer_uuid: String,
        error: String,
    },
    #[error("Failed to delete allocations for consumer {consumer_uuid}. Error: {error}")]
    AllocationDeleteFailed {
        consumer_uuid: String,
        error: String,
    },
    /// The request stopped before placing every instance (its caller gave up, or the
    /// daemon is stopping); its claims are released.
    #[error("{reason}")]
    Stopped { reason: String },
}

/// Claims resources for an instance on a host (Placement `PUT /allocations`), and
/// releases the claims of a request that fails later.
#[allow(async_fn_in_trait)]
pub trait Claimer {
    /// `Ok(true)`: claimed; `Ok(false)`: this candidate cannot be claimed, try the next host.
    async fn claim(
        &mut self,
        instance_uuid: &str,
        host: &HostState,
        allocation_request: &Value,
    ) -> Result<bool, ClaimError>;
    async fn release(&mut self, instance_uuids: &[String]) -> Result<(), ClaimError>;
    /// Called before each instance is placed: the caller may let other work run and
    /// stop a request that should not go on (`Err` releases its claims and ends it).
    async fn before_instance(&mut self) -> Result<(), ClaimError> {
        Ok(())
    }
}

/// Static scheduler settings (from `[scheduler]` and `[filter_scheduler]`).
#[derive(Debug)]
pub struct Scheduler {
    pub filters: FilterChain,
    pub weighers: WeigherPipeline,
    /// `host_subset_size`; values below 1 are treated as 1.
    pub host_subset_size: usize,
    pub shuffle_best_same_weighed_hosts: bool,
    /// `[scheduler] max_attempts`: alternates per instance = max_attempts − 1.
    pub max_attempts: usize,
    /// `[compute] packing_host_numa_cells_allocation_strategy`, used by the NUMA fit
    /// of virtual consumption.
    pub packing_host_numa_cells_allocation_strategy: bool,
}

/// One request to place `instance_uuids` (or `spec.num_instances` on the legacy path).
pub struct ScheduleRequest {
    pub spec: RequestSpec,
    /// `None` on RPC ≤ 4.3: nothing is claimed (nova's legacy path).
    pub instance_uuids: Option<Vec<String>>,
    /// True when the host states carry Placement allocation candidates (claim path).
    pub use_placement: bool,
    pub return_alternates: bool,
    pub now: DateTime<Utc>,
}

/// One destination: an index into the request's host states and, on the claim path,
/// the allocation request (claimed for the chosen host, unclaimed for alternates).
#[derive(Debug, Clone, PartialEq)]
pub struct Destination {
    pub host: usize,
    pub allocation_request: Option<Value>,
}

/// The decision: per instance, the chosen host then its alternates; plus the host
/// states after virtual consumption (the Selections are built from them): every
/// candidate host from [`Scheduler::schedule`], the hosts the destinations name
/// from [`Scheduler::schedule_table`].
#[derive(Debug)]
pub struct ScheduleOutcome {
    pub destinations: Vec<Vec<Destination>>,
    pub hosts: Vec<HostState>,
    /// Instances whose claims were made (for the caller's bookkeeping).
    pub claimed: Vec<String>,
}

/// What nova's `_schedule` derives from a request before placing anything.
struct RequestShape {
    /// Instances that must be placed (else NoValidHost).
    num_instances: usize,
    /// Alternates per instance.
    num_alts: usize,
    /// Claims are made (Placement candidates and instance uuids).
    claiming: bool,
    /// Instances the loop tries to place: the uuids on the claim path (an empty
    /// list places nothing and ends in NoValidHost), else `num_instances`.
    iterations: usize,
}

impl Scheduler {
    /// True when a filter or weigher reads nova's own request object (an
    /// operator's Python class): the call's request spec is then kept as it came.
    pub fn reads_request_objects(&self) -> bool {
        self.filters
            .filters()
            .iter()
            .any(|f| f.filters_all_at_once())
            || self.weighers.weighs_any_at_once()
    }

    /// nova's `_get_sorted_hosts`: filter, weigh, optionally shuffle the best ties,
    /// then move a random pick among the best `host_subset_size` to the front.
    pub fn sorted_hosts<R: Rng + ?Sized>(
        &self,
        hosts: &mut [HostState],
        candidates: &[usize],
        spec: &RequestSpec,
        index: usize,
        now: DateTime<Utc>,
        rng: &mut R,
    ) -> Result<Vec<usize>, ScheduleError> {
        self.sorted_hosts_after(hosts, candidates, spec, index, now, rng, None)
    }

    /// [`sorted_hosts`](Self::sorted_hosts); with `after`, `candidates` is the
    /// previous instance's result, `after.1.consumed` the only host changed since,
    /// and `after.0` the weights kept from the previous call: the filters and
    /// weighers that are stable within the request are then evaluated again on
    /// the changed host only. Same result, side effects and random draws.
    #[allow(clippy::too_many_arguments)]
    fn sorted_hosts_after<R: Rng + ?Sized>(
        &self,
        hosts: &mut [HostState],
        candidates: &[usize],
        spec: &RequestSpec,
        index: usize,
        now: DateTime<Utc>,
        rng: &mut R,
        after: Option<(&mut WeighCache, Option<Consumed>)>,
    ) -> Result<Vec<usize>, ScheduleError> {
        let consumed = after.as_ref().and_then(|a| a.1);
        let filtered = self.narrow_and_filter(hosts, candidates, spec, index, now, consumed);
        if let Some(raised) = crate::filters::take_raised() {
            return Err(raised.into());
        }
        if filtered.is_empty() {
            return Ok(Vec::new());
        }
        let hosts: &[HostState] = hosts;
        let weighed = match after {
            Some((cache, consumed)) => self.weighers.weigh_cached(
                hosts,
                &filtered,
                spec,
                cache,
                consumed.and_then(|c| c.consumed),
            )?,
            None => self.weighers.weigh(hosts, &filtered, spec)?,
        };
        let mut order: Vec<usize> = weighed.iter().map(|w| w.index).collect();
        if self.shuffle_best_same_weighed_hosts {
            let best = weighed
                .iter()
                .take_while(|w| w.weight == weighed[0].weight)
                .count();
            order[..best].shuffle(rng);
        }
        let subset = self.host_subset_size.max(1).min(order.len());
        let chosen = *order[..subset].choose(rng).unwrap_or(&order[0]);
        order.retain(|&i| i != chosen);
        order.insert(0, chosen);
        debug!(hosts = ?order.iter().map(|&i| &hosts[i].host).collect::<Vec<_>>(), "Weighed hosts");
        Ok(order)
    }

    /// How the weighers ranked this request's hosts: the hosts that pass filtering
    /// (as in [`sorted_hosts`](Self::sorted_hosts), for instance `index`), each with
    /// every weigher's raw, normalized and weighted value, best first. Same
    /// computation as the decision, without the random pick; for explanations.
    pub fn explain_weighing(
        &self,
        hosts: &[HostState],
        candidates: &[usize],
        spec: &RequestSpec,
        index: usize,
        now: DateTime<Utc>,
    ) -> Result<WeighingExplanation, ScheduleError> {
        // Filters may prune candidates or set limits; the explanation leaves the
        // caller's hosts untouched.
        let mut hosts = hosts.to_vec();
        let filtered = self.narrow_and_filter(&mut hosts, candidates, spec, index, now, None);
        if let Some(raised) = crate::filters::take_raised() {
            return Err(raised.into());
        }
        Ok(self.weighers.weigh_explained(&hosts, &filtered, spec)?.1)
    }

    fn shape_of(&self, req: &ScheduleRequest) -> RequestShape {
        let num_instances = match &req.instance_uuids {
            Some(uuids) if !uuids.is_empty() => uuids.len(),
            _ => req.spec.num_instances.max(0) as usize,
        };
        let num_alts = if req.return_alternates {
            self.max_attempts.saturating_sub(1)
        } else {
            0
        };
        let claiming = req.use_placement && req.instance_uuids.is_some();
        let iterations = if claiming {
            req.instance_uuids.as_ref().map_or(0, Vec::len)
        } else {
            num_instances
        };
        RequestShape {
            num_instances,
            num_alts,
            claiming,
            iterations,
        }
    }

    /// nova's `HostManager.get_filtered_hosts`: requested destination, ignore/force
    /// lists, then the filter chain (skipped entirely when hosts were forced, unless
    /// the request is a rebuild check).
    fn narrow_and_filter(
        &self,
        hosts: &mut [HostState],
        candidates: &[usize],
        spec: &RequestSpec,
        index: usize,
        now: DateTime<Utc>,
        after: Option<Consumed>,
    ) -> Vec<usize> {
        // An exception left by a run that did not take it is not this request's.
        crate::filters::take_raised();
        let mut current: Vec<usize> = candidates.to_vec();
        if let Some(dest) = &spec.requested_destination {
            if let Some(want_host) = &dest.host {
                current.retain(|&i| {
                    *hosts[i].host == **want_host
                        && dest
                            .node
                            .as_ref()
                            .is_none_or(|n| n.is_empty() || *hosts[i].nodename == **n)
                });
            }
        }
        let forced = !spec.force_hosts.is_empty() || !spec.force_nodes.is_empty();
        if !spec.ignore_hosts.is_empty() || forced {
            let ignore: BTreeSet<String> =
                spec.ignore_hosts.iter().map(|h| h.to_lowercase()).collect();
            current.retain(|&i| !ignore.contains(&hosts[i].host.to_lowercase()));
            if current.is_empty() {
                return current;
            }
            if !spec.force_hosts.is_empty() {
                let force: BTreeSet<String> =
                    spec.force_hosts.iter().map(|h| h.to_lowercase()).collect();
                current.retain(|&i| force.contains(&hosts[i].host.to_lowercase()));
            }
            if !spec.force_nodes.is_empty() {
                current.retain(|&i| spec.force_nodes.iter().any(|n| **n == *hosts[i].nodename));
            }
            let check_type = spec.hint("_nova_check_type").is_some_and(|v| !v.is_empty());
            if forced && !check_type {
                return current;
            }
        }
        let req = FilterRequest {
            spec,
            now,
            index,
            is_rebuild: spec.is_rebuild(),
        };
        self.filters.run_mut_after(hosts, &current, &req, after).0
    }

    /// nova's `_schedule`: per instance, sort the previous instance's hosts, claim
    /// on the first host that accepts, consume; then check sufficiency (releasing
    /// every claim of the request on failure) and build alternates.
    ///
    /// Instances 2..N (and the final sort for alternates) re-evaluate the filters
    /// and weighers that are stable within the request only on the host consumed
    /// for the previous instance; see [`reference::schedule`].
    pub async fn schedule<C: Claimer, R: Rng + ?Sized>(
        &self,
        hosts: Vec<HostState>,
        req: ScheduleRequest,
        claimer: &mut C,
        rng: &mut R,
    ) -> Result<ScheduleOutcome, ScheduleError> {
        self.schedule_with(hosts, req, claimer, rng, true).await
    }

    /// The decision; `incremental` carries the stable filters' and weighers' results
    /// from one instance to the next (see [`schedule`](Self::schedule)).
    async fn schedule_with<C: Claimer, R: Rng + ?Sized>(
        &self,
        hosts: Vec<HostState>,
        req: ScheduleRequest,
        claimer: &mut C,
        rng: &mut R,
        incremental: bool,
    ) -> Result<ScheduleOutcome, ScheduleError> {
        let source = host_list::HostList::new(self, hosts, req.now, incremental);
        match self.decide(source, req, claimer, rng).await {
            decide::Decided::Done(outcome) => outcome,
            decide::Decided::Declined(_, never) => match never {},
        }
    }

    /// nova's `consume_from_request` + `_consume_selected_host`.
    fn consume(
        &self,
        host: &mut HostState,
        spec: &mut RequestSpec,
        instance_uuid: Option<&str>,
        now: DateTime<Utc>,
    ) {
        let f = &spec.flavor;
        host.consume_resources(f.memory_mb, f.root_gb, f.ephemeral_gb, f.vcpus);
        // nova's order: NUMA, then PCI, then io_ops and `updated`. When a step raises
        // nova logs and swallows the exception; the remaining steps are skipped.
        // Undecodable PCI requests fail the PCI step (nova could not have read them).
        let pci_requests = crate::host_fit::spec_requests(spec).ok().flatten();
        let mapping = crate::host_fit::request_group_mapping(spec);
        match crate::host_fit::consume_numa(
            host,
            &mut spec.numa_topology,
            pci_requests.as_deref(),
            &mapping,
            self.packing_host_numa_cells_allocation_strategy,
        ) {
            Ok(()) => {
                let cells = spec
                    .numa_topology
                    .as_ref()
                    .map(crate::numa::InstanceTopology::from_primitive)
                    .transpose();
                match cells {
                    Ok(cells) => {
                        let cells = cells.map(|t| t.cells);
                        if crate::host_fit::consume_pci(host, spec, cells.as_deref()) {
                            host.finish_consume(now);
                        } else {
                            warn!(host = %host.host, "Selected host: could not consume PCI devices");
                        }
                    }
                    Err(e) => {
                        warn!(host = %host.host, error = %e, "Selected host: fitted NUMA topology unreadable")
                    }
                }
            }
            Err(e) => {
                warn!(host = %host.host, error = %e, "Selected host: could not consume NUMA resources")
            }
        }
        if let Some(group) = spec.instance_group.as_mut() {
            group.hosts.push(host.host.to_string());
            if let Some(uuid) = instance_uuid {
                if !host.instances.contains(uuid) {
                    Arc::make_mut(&mut host.instances).insert(uuid.to_string());
                    // The new instance is of the requested flavor (for the legacy
                    // TypeAffinityFilter on the next instance of this request).
                    Arc::make_mut(&mut host.instance_flavor_ids)
                        .insert(uuid.to_string(), spec.flavor.id);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
