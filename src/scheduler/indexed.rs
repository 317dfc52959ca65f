// SPDX-License-Identifier: Apache-2.0
//! The decision over a [`HostTable`]: nova's `_schedule` without reading every
//! candidate host.
//!
//! nova filters and weighs every candidate for every instance; only the first
//! few hosts of each sorted list are ever used (the pick among the best
//! `host_subset_size`, the hosts tried when a claim is refused, the alternates).
//! Here those first hosts are found in the table's [`WeighIndex`], best first:
//!
//! - a host is filtered when it is looked at (and remembered for the request),
//!   which gives nova's verdict because only filters whose verdict cannot change
//!   between the instances of the request (or that run once per request) are
//!   allowed on this path, and only hosts consumed by the request change;
//! - each weigher's normalization bounds (the min/max over the hosts that pass)
//!   are found by a search of that column;
//! - weights are summed exactly as nova sums them, and ties are ordered as nova's
//!   stable sorts leave them: by the previous instance's list (its pick first,
//!   then its weights, and so on back to the host order);
//! - the hosts consumed (and the hosts picked) are held apart from the table,
//!   with their state and raw weights per instance.
//!
//! A request this path cannot decide exactly like nova is decided by
//! [`Scheduler::schedule`] over host states copied from the table (see
//! `Plan::new` for what sends it there). `tests/core/indexed_core.rs` checks both
//! against `reference::schedule` on random clouds.

use super::row_candidates::RowCandidates;
use super::table::HostTable;
use super::weigh_index::{Slot, WeighIndex, NONE};
use super::{Destination, ScheduleError, ScheduleOutcome, ScheduleRequest, Scheduler};
use crate::filters::FilterRequest;
use crate::model::{HostState, RequestSpec};
use crate::scheduler::Claimer;
use crate::weighers::{RawDependence, WeighError};
use chrono::{DateTime, Utc};
use rand::seq::IndexedRandom;
use rand::Rng;
use rustc_hash::FxHashMap;
use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::sync::Arc;
use tracing::{debug, enabled, Level};

impl Scheduler {
    /// [`schedule`](Self::schedule) for the hosts of `table` that are `candidates`
    /// of the request (each with its allocation candidates), in table order.
    ///
    /// The outcome's `hosts` are the hosts its destinations name (after
    /// consumption), not every candidate. The candidates stay with the caller
    /// (freeing thousands is best done off the reply's path), except when the
    /// request is decided over copied host states, which take them.
    pub async fn schedule_table<C: Claimer, R: Rng + ?Sized>(
        &self,
        table: &HostTable,
        candidates: &mut RowCandidates,
        req: ScheduleRequest,
        claimer: &mut C,
        rng: &mut R,
    ) -> Result<ScheduleOutcome, ScheduleError> {
        let req = match Plan::new(self, table, &req) {
            Some(plan) => {
                let decision = Decision::new(self, table, candidates, plan, &req);
                match decision.run(req, claimer, rng).await {
                    Indexed::Done(outcome) => return outcome,
                    Indexed::Declined(req) => *req,
                }
            }
            None => req,
        };
        let taken = std::mem::replace(candidates, RowCandidates::new(0));
        self.schedule_copied(table, taken, req, claimer, rng).await
    }

    /// The plain decision over copies of the candidate rows.
    async fn schedule_copied<C: Claimer, R: Rng + ?Sized>(
        &self,
        table: &HostTable,
        candidates: RowCandidates,
        req: ScheduleRequest,
        claimer: &mut C,
        rng: &mut R,
    ) -> Result<ScheduleOutcome, ScheduleError> {
        let hosts: Vec<HostState> = candidates
            .into_sorted()
            .into_iter()
            .map(|(row, allocation_candidates)| HostState {
                allocation_candidates,
                ..(**table.row(row)).clone()
            })
            .collect();
        self.schedule(hosts, req, claimer, rng).await
    }

    /// Whether [`schedule_table`](Self::schedule_table) decides `req` on the
    /// index (true) or over copied host states.
    pub fn decides_on_index(&self, table: &HostTable, req: &ScheduleRequest) -> bool {
        Plan::new(self, table, req).is_some()
    }
}

enum Indexed {
    Done(Result<ScheduleOutcome, ScheduleError>),
    /// Nothing was done (no claim, no random draw): decide the plain way.
    Declined(Box<ScheduleRequest>),
}

/// A filter that is evaluated on this path.
#[derive(Debug, Clone, Copy)]
struct LazyFilter {
    /// Position in the chain.
    position: usize,
    /// Runs for every instance (else only for the first): re-evaluated on the
    /// hosts this request consumes.
    every_instance: bool,
}

/// What a request needs from the index, when it can be decided there.
struct Plan {
    index: Arc<WeighIndex>,
    filters: Vec<LazyFilter>,
    narrow: Narrow,
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
    fn new(sched: &Scheduler, table: &HostTable, req: &ScheduleRequest) -> Option<Plan> {
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
            if f.writes_host() || f.reads_allocation_candidates(spec) {
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
struct Narrow {
    host: Option<String>,
    node: Option<String>,
    ignore: BTreeSet<String>,
    force_hosts: BTreeSet<String>,
    force_nodes: Vec<String>,
    /// Forced hosts or nodes without `_nova_check_type`: no filter runs.
    skip_filters: bool,
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

    fn passes(&self, h: &HostState) -> bool {
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

/// One sorted list of the request (an instance's, or the final one for the
/// alternates): the normalization bounds of its hosts and its pick.
struct SortLevel {
    /// Per column: `(lo, hi)`.
    bounds: Vec<(f64, f64)>,
    /// Per column: `lo != hi` (else the column adds ±0.0).
    live: Vec<bool>,
    /// The live columns as a table row (not held apart) weighs them.
    terms: Vec<Term>,
    /// The host moved to the front of the list (`NONE` while it is chosen).
    chosen: u32,
}

/// One live column's part of a table row's weight.
#[derive(Clone, Copy)]
enum Term {
    /// The same for every table row (a uniform column).
    Same(f64),
    /// Tree column `c`: `mult * ((raw - lo) / range)`.
    Tree { c: usize, lo: f64, range: f64 },
}

impl SortLevel {
    fn new(index: &WeighIndex, bounds: Vec<(f64, f64)>) -> Self {
        let live: Vec<bool> = bounds.iter().map(|(lo, hi)| lo != hi).collect();
        let terms = index
            .columns
            .iter()
            .zip(&bounds)
            .zip(&live)
            .filter(|(_, &live)| live)
            .map(|((col, &(lo, hi)), _)| match col.slot {
                Slot::Uniform { raw, mult } => Term::Same(mult * ((raw - lo) / (hi - lo))),
                Slot::Tree(c) => Term::Tree {
                    c,
                    lo,
                    range: hi - lo,
                },
            })
            .collect();
        SortLevel {
            bounds,
            live,
            terms,
            chosen: NONE,
        }
    }

    /// nova's weight of a table row from its tree columns (see [`sum_weight`]).
    #[inline]
    fn weigh_tree_row(&self, raw: &[f64], mult: &[f64]) -> f64 {
        let mut total = 0.0;
        for term in &self.terms {
            total += match *term {
                Term::Same(v) => v,
                Term::Tree { c, lo, range } => mult[c] * ((raw[c] - lo) / range),
            };
        }
        total
    }
}

/// A host held apart from the table: picked for a list, or consumed.
struct Apart {
    row: u32,
    /// Its state once consumed by this request (with its allocation candidates).
    state: Option<HostState>,
    /// Raw weights per column from a level on (the first entry: the table's).
    raws: Vec<(usize, Vec<f64>)>,
    /// Multipliers per column.
    mult: Vec<f64>,
    /// Consumed hosts: still in the list (they are filtered again per instance).
    in_list: bool,
    /// The level whose filters took it out of the list.
    left_at: Option<usize>,
    /// A weigher failed on the consumed state.
    error: Option<WeighError>,
}

impl Apart {
    fn raw_at(&self, level: usize) -> &[f64] {
        let (_, raw) = self
            .raws
            .iter()
            .rev()
            .find(|(from, _)| *from <= level)
            .unwrap_or(&self.raws[0]);
        raw
    }
}

struct Decision<'a> {
    sched: &'a Scheduler,
    table: &'a HostTable,
    candidates: &'a RowCandidates,
    index: Arc<WeighIndex>,
    filters: Vec<LazyFilter>,
    narrow: Narrow,
    /// The request as the first instance's filters saw it.
    spec0: RequestSpec,
    now: DateTime<Utc>,
    is_rebuild: bool,
    /// Verdicts on unconsumed hosts (valid for every instance).
    verdicts: RefCell<FxHashMap<u32, bool>>,
    /// A table row known to pass and not held apart (uniform columns' bounds).
    witness: Cell<Option<u32>>,
    apart: Vec<Apart>,
    apart_of_row: FxHashMap<u32, usize>,
    levels: Vec<SortLevel>,
}

impl<'a> Decision<'a> {
    fn new(
        sched: &'a Scheduler,
        table: &'a HostTable,
        candidates: &'a RowCandidates,
        plan: Plan,
        req: &ScheduleRequest,
    ) -> Self {
        let mut spec0 = req.spec.clone();
        if let Some(first) = req.instance_uuids.as_ref().and_then(|u| u.first()) {
            spec0.instance_uuid = Some(first.clone());
        }
        Decision {
            sched,
            table,
            candidates,
            index: plan.index,
            filters: plan.filters,
            narrow: plan.narrow,
            is_rebuild: req.spec.is_rebuild(),
            spec0,
            now: req.now,
            verdicts: RefCell::new(FxHashMap::default()),
            witness: Cell::new(None),
            apart: Vec::new(),
            apart_of_row: FxHashMap::default(),
            levels: Vec::new(),
        }
    }

    /// nova's `_schedule` (see `Scheduler::schedule_with`), on the index.
    async fn run<C: Claimer, R: Rng + ?Sized>(
        mut self,
        mut req: ScheduleRequest,
        claimer: &mut C,
        rng: &mut R,
    ) -> Indexed {
        let super::RequestShape {
            num_instances,
            num_alts,
            claiming,
            iterations,
        } = self.sched.shape_of(&req);
        let mut selected: Vec<Destination> = Vec::new();
        let mut claimed: Vec<String> = Vec::new();
        let mut last_index = 0;
        for num in 0..iterations {
            if let Err(e) = claimer.before_instance().await {
                if let Err(e) = claimer.release(&claimed).await {
                    return Indexed::Done(Err(e.into()));
                }
                return Indexed::Done(Err(e.into()));
            }
            last_index = num;
            let uuid = req
                .instance_uuids
                .as_ref()
                .and_then(|u| u.get(num))
                .cloned();
            if let Some(u) = &uuid {
                req.spec.instance_uuid = Some(u.clone());
            }
            let level = match self.sort(&req.spec, num, rng) {
                Ok(Some(level)) => level,
                Ok(None) if num == 0 => {
                    // No host passes: the plain way logs which filter emptied the list.
                    return Indexed::Declined(Box::new(req));
                }
                Ok(None) => {
                    self.log_emptied(&req.spec, num);
                    break;
                }
                Err(e) => return Indexed::Done(Err(e)),
            };
            let pick = if claiming {
                let uuid = uuid.clone().unwrap_or_default();
                match self.claim_first(level, &uuid, claimer).await {
                    Ok(Some(pick)) => {
                        claimed.push(uuid);
                        pick
                    }
                    Ok(None) => {
                        debug!("Unable to successfully claim against any host.");
                        break;
                    }
                    Err(e) => {
                        if let Err(e) = claimer.release(&claimed).await {
                            return Indexed::Done(Err(e.into()));
                        }
                        return Indexed::Done(Err(e.into()));
                    }
                }
            } else {
                Destination {
                    host: self.levels[level].chosen as usize,
                    allocation_request: None,
                }
            };
            self.consume(pick.host as u32, &mut req.spec, uuid.as_deref());
            selected.push(pick);
        }
        if selected.len() < num_instances {
            debug!(
                hosts = selected.len(),
                required = num_instances,
                "There are not enough hosts available"
            );
            if let Err(e) = claimer.release(&claimed).await {
                return Indexed::Done(Err(e.into()));
            }
            return Indexed::Done(Err(ScheduleError::NoValidHost {
                reason: "There are not enough hosts available.".into(),
            }));
        }
        let Some(mut last) = self.levels.len().checked_sub(1) else {
            // Nothing to place (no instance asked for): no list was sorted.
            return Indexed::Done(Ok(self.outcome(Vec::new(), claimed)));
        };
        if last_index > 0 && num_alts > 0 {
            match self.sort(&req.spec, last_index, rng) {
                Ok(Some(level)) => last = level,
                Ok(None) => {
                    // Every host left the list: no alternates (as nova, whose
                    // sort then returns an empty list).
                    self.log_emptied(&req.spec, last_index);
                    return Indexed::Done(Ok(
                        self.outcome(selected.into_iter().map(|d| vec![d]).collect(), claimed)
                    ));
                }
                Err(e) => return Indexed::Done(Err(e)),
            }
        }
        let destinations = self.with_alternates(last, selected, num_alts, claiming);
        Indexed::Done(Ok(self.outcome(destinations, claimed)))
    }

    /// One of nova's `_get_sorted_hosts` for filter index `index`: filters the
    /// consumed hosts again, finds the normalization bounds, picks among the best
    /// `host_subset_size` and records the new level (returned). `None`: no host
    /// is left.
    fn sort<R: Rng + ?Sized>(
        &mut self,
        spec: &RequestSpec,
        index: usize,
        rng: &mut R,
    ) -> Result<Option<usize>, ScheduleError> {
        if !self.levels.is_empty() {
            self.filter_consumed(spec, index);
        }
        let level = self.levels.len();
        let columns = self.index.columns.clone();
        let mut bounds = vec![(0.0, 0.0); columns.len()];
        // Tree columns first: their searches find a passing table row, which the
        // uniform columns' bounds then need not look for.
        let mut order: Vec<usize> = (0..columns.len()).collect();
        order.sort_by_key(|&c| matches!(columns[c].slot, Slot::Uniform { .. }));
        for c in order {
            let col = columns[c];
            let hi = match col.maxval {
                Some(v) => Some(v),
                None => self.column_extreme(level, c, true),
            };
            let lo = match col.minval {
                Some(v) => Some(v),
                None => self.column_extreme(level, c, false),
            };
            match (lo, hi) {
                (Some(lo), Some(hi)) => bounds[c] = (lo, hi),
                // No host passes.
                _ => return Ok(None),
            }
        }
        let sort_level = SortLevel::new(&self.index, bounds);
        self.levels.push(sort_level);
        // nova weighs (and a weigher raises) only when at least two hosts are left.
        if let Some(error) = self.weigh_error(level) {
            self.levels.pop();
            return Err(ScheduleError::Weigher(error));
        }
        let subset = self.sched.host_subset_size.max(1);
        let mut best: Vec<u32> = Vec::with_capacity(subset);
        while best.len() < subset {
            match self.best(level, None, &best) {
                Some(row) => best.push(row),
                None => break,
            }
        }
        if best.is_empty() {
            self.levels.pop();
            return Ok(None);
        }
        let chosen = *best.choose(rng).unwrap_or(&best[0]);

        self.levels[level].chosen = chosen;
        self.set_apart(chosen);
        Ok(Some(level))
    }

    /// The error a weigher raised on a consumed host still in the list, when the
    /// list has another host (nova weighs only then).
    fn weigh_error(&mut self, level: usize) -> Option<WeighError> {
        let failed = self
            .apart
            .iter()
            .find(|a| a.in_list && a.state.is_some() && a.error.is_some())
            .map(|a| (a.row, a.error.clone()))?;
        let other = self.best(level, None, &[failed.0]).is_some();
        other.then_some(failed.1).flatten()
    }

    /// Filters that run for every instance, on the hosts this request consumed.
    fn filter_consumed(&mut self, spec: &RequestSpec, index: usize) {
        let req = FilterRequest {
            spec,
            now: self.now,
            index,
            is_rebuild: self.is_rebuild,
        };
        if self.narrow.skip_filters {
            return;
        }
        let chain = self.sched.filters.filters();
        let level = self.levels.len();
        for apart in self.apart.iter_mut() {
            let Some(state) = &apart.state else {
                continue;
            };
            if !apart.in_list {
                continue;
            }
            apart.in_list = self.filters.iter().filter(|f| f.every_instance).all(|f| {
                let filter = &chain[f.position];
                filter.passes_every_host(&req) || filter.host_passes(state, &req)
            });
            if !apart.in_list {
                apart.left_at = Some(level);
            }
        }
    }

    /// nova's info line when a later instance's filters leave no host.
    fn log_emptied(&self, spec: &RequestSpec, index: usize) {
        let req = FilterRequest {
            spec,
            now: self.now,
            index,
            is_rebuild: self.is_rebuild,
        };
        // Only consumed hosts can leave the list after the first instance: the
        // list the filters emptied held those still in it before this level.
        let level = self.levels.len();
        let hosts: Vec<HostState> = self
            .apart
            .iter()
            .filter(|a| a.in_list || a.left_at == Some(level))
            .filter_map(|a| a.state.clone())
            .collect();
        let all: Vec<usize> = (0..hosts.len()).collect();
        let _ = self.sched.filters.run(&hosts, &all, &req);
    }

    /// Whether `row` passes at the current level: consumed hosts as last
    /// filtered, the others by their (remembered) verdict.
    fn in_list(&self, row: u32) -> bool {
        if let Some(&i) = self.apart_of_row.get(&row) {
            if self.apart[i].state.is_some() {
                return self.apart[i].in_list;
            }
        }
        self.passes_fresh(row)
    }

    /// The verdict on an unconsumed host: a candidate of the request that passes
    /// the narrowing and every filter evaluated on this path, as the first
    /// instance's filters saw it (the same for every instance).
    fn passes_fresh(&self, row: u32) -> bool {
        if let Some(&v) = self.verdicts.borrow().get(&row) {
            return v;
        }
        let v = self.candidates.contains(row as usize) && {
            let host: &HostState = self.table.row(row as usize);
            let req = FilterRequest {
                spec: &self.spec0,
                now: self.now,
                index: 0,
                is_rebuild: self.is_rebuild,
            };
            let chain = self.sched.filters.filters();
            self.narrow.passes(host)
                && (self.narrow.skip_filters
                    || self
                        .filters
                        .iter()
                        .all(|f| chain[f.position].host_passes(host, &req)))
        };
        self.verdicts.borrow_mut().insert(row, v);
        v
    }

    fn set_apart(&mut self, row: u32) {
        if self.apart_of_row.contains_key(&row) {
            return;
        }
        if self.witness.get() == Some(row) {
            self.witness.set(None);
        }
        let (raw, mult) = self.index.row_values(row as usize);
        self.apart_of_row.insert(row, self.apart.len());
        self.apart.push(Apart {
            row,
            state: None,
            raws: vec![(0, raw)],
            mult,
            in_list: true,
            left_at: None,
            error: None,
        });
    }

    /// nova's summed weight of `row` in the list of `level`.
    fn weight(&self, level: usize, row: u32) -> f64 {
        let lv = &self.levels[level];
        match self.apart_of_row.get(&row) {
            Some(&i) => {
                let apart = &self.apart[i];
                sum_weight(lv, apart.raw_at(level), &apart.mult)
            }
            None => {
                let (raw, mult) = self.index.values_of_row(row as usize);
                lv.weigh_tree_row(raw, mult)
            }
        }
    }

    /// Whether `a` comes before `b` in the list of `level` (`None`: the host
    /// order), both being in it.
    fn earlier(&self, level: Option<usize>, a: u32, b: u32) -> bool {
        let mut level = level;
        while let Some(l) = level {
            let chosen = self.levels[l].chosen;
            if a == chosen {
                return true;
            }
            if b == chosen {
                return false;
            }
            let (wa, wb) = (self.weight(l, a), self.weight(l, b));
            if wa != wb {
                return wa > wb;
            }
            level = l.checked_sub(1);
        }
        a < b
    }

    /// Whether a host below `node` (none held apart) can come before `best`
    /// (weight `wb`) in the list of `level`, given `ub`, the node's bound there
    /// (`ub >= wb`).
    fn could_beat(&self, level: usize, node: u32, best: u32, wb: f64, ub: f64) -> bool {
        if ub > wb {
            return true;
        }
        // A tie at `level`: the previous list decides.
        let mut l = level;
        while l > 0 {
            l -= 1;
            let prev = &self.levels[l];
            if prev.chosen == best {
                return false;
            }
            let ub = self
                .index
                .upper_bound(node as usize, &prev.bounds, &prev.live);
            let wb = self.weight(l, best);
            if ub != wb {
                return ub > wb;
            }
        }
        self.index.nodes()[node as usize].min_row < best
    }

    /// The first host of the list of `level` (its pick aside) that is not in
    /// `exclude`, in `cell` when given. A depth-first search of the tree, the
    /// child that may weigh more first, pruned by the nodes' bounds.
    fn best(&self, level: usize, cell: Option<u16>, exclude: &[u32]) -> Option<u32> {
        let prev = level.checked_sub(1);
        let lv = &self.levels[level];
        let index = &*self.index;
        let mut best: Option<(u32, f64)> = None;
        for apart in &self.apart {
            let row = apart.row;
            if exclude.contains(&row)
                || cell.is_some_and(|c| self.table.cell_of(row as usize) != c)
                || !self.in_list(row)
            {
                continue;
            }
            let w = self.weight(level, row);
            if best.is_none_or(|(b, wb)| w > wb || (w == wb && self.earlier(prev, row, b))) {
                best = Some((row, w));
            }
        }
        // (bound, node): the top of the stack is searched next.
        let mut stack: Vec<(f64, u32)> = Vec::with_capacity(48);
        for (c, &root) in index.roots().iter().enumerate() {
            if root != NONE && cell.is_none_or(|want| want as usize == c) {
                stack.push((index.upper_bound(root as usize, &lv.bounds, &lv.live), root));
            }
        }
        stack.sort_by(|a, b| {
            a.0.total_cmp(&b.0).then(
                index.nodes()[b.1 as usize]
                    .min_row
                    .cmp(&index.nodes()[a.1 as usize].min_row),
            )
        });
        while let Some((ub, node)) = stack.pop() {
            if let Some((b, wb)) = best {
                if ub < wb || !self.could_beat(level, node, b, wb, ub) {
                    continue;
                }
            }
            let n = index.nodes()[node as usize];
            if n.left != NONE {
                let l = index.upper_bound(n.left as usize, &lv.bounds, &lv.live);
                let r = index.upper_bound(n.right as usize, &lv.bounds, &lv.live);
                // The right child holds larger rows than the left only by
                // accident of the split: order equal bounds by smallest row.
                let left_first = l > r
                    || (l == r
                        && index.nodes()[n.left as usize].min_row
                            <= index.nodes()[n.right as usize].min_row);
                let (first, second) = if left_first {
                    ((l, n.left), (r, n.right))
                } else {
                    ((r, n.right), (l, n.left))
                };
                for (key, child) in [second, first] {
                    if key > f64::NEG_INFINITY {
                        stack.push((key, child));
                    }
                }
                continue;
            }
            for p in n.start as usize..n.end as usize {
                let row = index.row_at(p);
                if self.apart_of_row.contains_key(&row) || exclude.contains(&row) {
                    continue;
                }
                let (raw, mult) = index.values_at(p);
                let w = lv.weigh_tree_row(raw, mult);
                let better =
                    best.is_none_or(|(b, wb)| w > wb || (w == wb && self.earlier(prev, row, b)));
                if better && self.passes_fresh(row) {
                    best = Some((row, w));
                    self.witness.set(Some(row));
                }
            }
        }
        best.map(|(row, _)| row)
    }

    /// The largest (or smallest) raw weight of column `c` over the hosts in the
    /// list of `level`; `None` when no host is.
    fn column_extreme(&self, level: usize, c: usize, largest: bool) -> Option<f64> {
        let improves =
            |v: f64, best: Option<f64>| best.is_none_or(|b| if largest { v > b } else { v < b });
        let mut best: Option<f64> = None;
        for apart in &self.apart {
            if self.in_list(apart.row) {
                let v = apart.raw_at(level)[c];
                if improves(v, best) {
                    best = Some(v);
                }
            }
        }
        let index = &*self.index;
        let t = match index.columns[c].slot {
            Slot::Tree(t) => t,
            Slot::Uniform { raw, .. } => {
                if improves(raw, best) && self.some_table_row_passes() {
                    best = Some(raw);
                }
                return best;
            }
        };
        let key_of = |node: u32| {
            let (lo, hi) = index.raw_range(node as usize, t);
            if largest {
                hi
            } else {
                lo
            }
        };
        let mut stack: Vec<u32> = Vec::with_capacity(48);
        stack.extend(index.roots().iter().copied().filter(|&r| r != NONE));
        while let Some(node) = stack.pop() {
            if !improves(key_of(node), best) {
                continue;
            }
            let n = index.nodes()[node as usize];
            if n.left != NONE {
                let (l, r) = (key_of(n.left), key_of(n.right));
                // The child that may hold the extreme is searched first.
                if improves(l, Some(r)) {
                    stack.extend([n.right, n.left]);
                } else {
                    stack.extend([n.left, n.right]);
                }
                continue;
            }
            for p in n.start as usize..n.end as usize {
                let row = index.row_at(p);
                if self.apart_of_row.contains_key(&row) {
                    continue;
                }
                let v = index.values_at(p).0[t];
                if improves(v, best) && self.passes_fresh(row) {
                    best = Some(v);
                    self.witness.set(Some(row));
                }
            }
        }
        best
    }

    /// Whether some table row not held apart passes (is in the lists).
    fn some_table_row_passes(&self) -> bool {
        if let Some(w) = self.witness.get() {
            if !self.apart_of_row.contains_key(&w) {
                return true;
            }
        }
        let index = &*self.index;
        for p in 0..self.table.len() {
            let row = index.row_at(p);
            if !self.apart_of_row.contains_key(&row) && self.passes_fresh(row) {
                self.witness.set(Some(row));
                return true;
            }
        }
        false
    }

    /// The hosts of the list of `level` in order, lazily: its pick, then the best
    /// of the rest, skipping `exclude` and hosts outside `cell`.
    fn next_in_list(
        &mut self,
        level: usize,
        cell: Option<u16>,
        seen: &mut Vec<u32>,
    ) -> Option<u32> {
        let chosen = self.levels[level].chosen;
        if !seen.contains(&chosen) {
            seen.push(chosen);
            if cell.is_none_or(|c| self.table.cell_of(chosen as usize) == c) {
                return Some(chosen);
            }
        }
        let next = self.best(level, cell, seen)?;
        seen.push(next);
        Some(next)
    }

    /// Walks the list of `level` and claims the first candidate of the first host
    /// that accepts (nova's claim loop).
    async fn claim_first<C: Claimer>(
        &mut self,
        level: usize,
        uuid: &str,
        claimer: &mut C,
    ) -> Result<Option<Destination>, super::ClaimError> {
        let mut seen = Vec::new();
        while let Some(row) = self.next_in_list(level, None, &mut seen) {
            let Some(candidate) = self.candidates.get(row as usize).and_then(<[_]>::first) else {
                debug!(host = %self.table.row(row as usize).host, "host has no allocation candidate left; skipped");
                continue;
            };
            let host: &HostState = match self.apart_of_row.get(&row) {
                Some(&i) => self.apart[i]
                    .state
                    .as_ref()
                    .unwrap_or(self.table.row(row as usize)),
                None => self.table.row(row as usize),
            };
            if claimer.claim(uuid, host, candidate.json()).await? {
                return Ok(Some(Destination {
                    host: row as usize,
                    allocation_request: Some(candidate.json().clone()),
                }));
            }
        }
        Ok(None)
    }

    /// Consumes the request on `row` (nova's `consume_from_request`) and
    /// re-weighs it for the next lists.
    fn consume(&mut self, row: u32, spec: &mut RequestSpec, uuid: Option<&str>) {
        self.set_apart(row);
        let i = self.apart_of_row[&row];
        let mut state = self.apart[i].state.take().unwrap_or_else(|| HostState {
            allocation_candidates: self
                .candidates
                .get(row as usize)
                .map(<[_]>::to_vec)
                .unwrap_or_default(),
            ..(**self.table.row(row as usize)).clone()
        });
        self.sched.consume(&mut state, spec, uuid, self.now);
        let weighers = self.sched.weighers.weighers();
        let mut raw = Vec::with_capacity(self.index.columns.len());
        let mut error = None;
        for col in &self.index.columns {
            let w = &weighers[col.weigher];
            let mut v = match w.weigh(&state, spec) {
                Ok(v) => v,
                Err(e) => {
                    error.get_or_insert(e);
                    0.0
                }
            };
            if let Some(min) = col.minval {
                v = v.max(min);
            }
            if let Some(max) = col.maxval {
                v = v.min(max);
            }
            raw.push(v);
        }
        let next_level = self.levels.len();
        let apart = &mut self.apart[i];
        apart.raws.push((next_level, raw));
        apart.state = Some(state);
        if error.is_some() {
            apart.error = error;
        }
    }

    /// nova's `_get_alternate_hosts` over the list of `level`.
    fn with_alternates(
        &mut self,
        level: usize,
        selected: Vec<Destination>,
        num_alts: usize,
        placement: bool,
    ) -> Vec<Vec<Destination>> {
        let chosen: Vec<u32> = selected.iter().map(|d| d.host as u32).collect();
        let mut out = Vec::with_capacity(selected.len());
        for main in selected {
            let cell = self.table.cell_of(main.host);
            let mut list = vec![main];
            let mut seen = Vec::new();
            while list.len() < num_alts + 1 {
                let Some(row) = self.next_in_list(level, Some(cell), &mut seen) else {
                    break;
                };
                if chosen.contains(&row) {
                    continue;
                }
                let allocation_request = if placement {
                    match self.candidates.get(row as usize).and_then(<[_]>::first) {
                        Some(c) => Some(c.json().clone()),
                        None => continue,
                    }
                } else {
                    None
                };
                list.push(Destination {
                    host: row as usize,
                    allocation_request,
                });
            }
            out.push(list);
        }
        out
    }

    /// The outcome with `hosts` holding the hosts the destinations name (by row
    /// until now), consumed ones as consumed.
    fn outcome(
        mut self,
        mut destinations: Vec<Vec<Destination>>,
        claimed: Vec<String>,
    ) -> ScheduleOutcome {
        let mut hosts: Vec<HostState> = Vec::new();
        let mut slot_of_row: FxHashMap<usize, usize> = FxHashMap::default();
        for dest in destinations.iter_mut().flatten() {
            let row = dest.host;
            let slot = match slot_of_row.get(&row) {
                Some(&s) => s,
                None => {
                    let state = match self.apart_of_row.get(&(row as u32)) {
                        Some(&i) if self.apart[i].state.is_some() => self.apart[i].state.take(),
                        _ => None,
                    };
                    let state = state.unwrap_or_else(|| HostState {
                        allocation_candidates: self
                            .candidates
                            .get(row)
                            .map(<[_]>::to_vec)
                            .unwrap_or_default(),
                        ..(**self.table.row(row)).clone()
                    });
                    hosts.push(state);
                    slot_of_row.insert(row, hosts.len() - 1);
                    hosts.len() - 1
                }
            };
            dest.host = slot;
        }
        ScheduleOutcome {
            destinations,
            hosts,
            claimed,
        }
    }
}

/// nova's weight: `0.0`, plus `multiplier * normalized` weigher by weigher.
/// Columns whose bounds are equal add ±0.0 (nova's `[0] * n`), which leaves the
/// sum as it is, so they are skipped.
#[inline]
fn sum_weight(level: &SortLevel, raw: &[f64], mult: &[f64]) -> f64 {
    let mut total = 0.0;
    for c in 0..raw.len() {
        if !level.live[c] {
            continue;
        }
        let (lo, hi) = level.bounds[c];
        total += mult[c] * ((raw[c] - lo) / (hi - lo));
    }
    total
}
