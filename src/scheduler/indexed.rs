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

mod level;
mod plan;
mod row_candidates;
mod search;
pub mod table;
mod weigh_index;

pub use row_candidates::RowCandidates;
pub use table::HostTable;

use super::decide::{Decided, HostSource, Sorted};
use super::{Claimer, Destination, ScheduleError, ScheduleOutcome, ScheduleRequest, Scheduler};
use crate::filters::FilterRequest;
use crate::model::{AllocationCandidate, HostState, RequestSpec};
use crate::weighers::WeighError;
use chrono::{DateTime, Utc};
use level::{Apart, SortLevel};
use plan::{LazyFilter, Narrow, Plan};
use rand::seq::IndexedRandom;
use rand::Rng;
use rustc_hash::FxHashMap;
use std::cell::{Cell, RefCell};
use std::sync::Arc;
use weigh_index::{Slot, WeighIndex};

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
                match self.decide(decision, req, claimer, rng).await {
                    Decided::Done(outcome) => return outcome,
                    Decided::Declined(req, ()) => *req,
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

    /// One of nova's `_get_sorted_hosts` for filter index `index`: filters the
    /// consumed hosts again, finds the normalization bounds, picks among the best
    /// `host_subset_size` and records the new level (returned). `None`: no host
    /// is left.
    fn sort_level<R: Rng + ?Sized>(
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
        // Most rows a search looks at are not candidates: answered without the memo.
        if !self.candidates.contains(row as usize) {
            return false;
        }
        if let Some(&v) = self.verdicts.borrow().get(&row) {
            return v;
        }
        let v = {
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

    /// The hosts of the list of `level` in order, lazily: its pick, then the best
    /// of the rest, skipping `exclude` and hosts outside `cell`.
    fn next_row(&self, level: usize, cell: Option<u16>, seen: &mut Vec<u32>) -> Option<u32> {
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

    /// Consumes the request on `row` (nova's `consume_from_request`) and
    /// re-weighs it for the next lists.
    fn consume_row(&mut self, row: u32, spec: &mut RequestSpec, uuid: Option<&str>) {
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

    /// The outcome with `hosts` holding the hosts the destinations name (by row
    /// until now), consumed ones as consumed.
    fn into_outcome(
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

/// The decision on the index names hosts by table row.
impl HostSource for Decision<'_> {
    /// The level of the list.
    type List = usize;
    /// The rows of the list walked so far.
    type Cursor = Vec<u32>;
    type Decline = ();

    fn sort<R: Rng + ?Sized>(
        &mut self,
        spec: &RequestSpec,
        index: usize,
        rng: &mut R,
    ) -> Result<Sorted<usize, ()>, ScheduleError> {
        Ok(match self.sort_level(spec, index, rng)? {
            Some(level) => Sorted::Hosts(level),
            // No host passes the first filters: the plain way logs which filter
            // emptied the list.
            None if self.levels.is_empty() => Sorted::Declined(()),
            None => {
                self.log_emptied(spec, index);
                Sorted::Empty
            }
        })
    }

    fn next_in_list(
        &self,
        level: usize,
        same_cell_as: Option<usize>,
        seen: &mut Vec<u32>,
    ) -> Option<usize> {
        let cell = same_cell_as.map(|row| self.table.cell_of(row));
        self.next_row(level, cell, seen).map(|row| row as usize)
    }

    fn host(&self, row: usize) -> &HostState {
        match self.apart_of_row.get(&(row as u32)) {
            Some(&i) => self.apart[i].state.as_ref().unwrap_or(self.table.row(row)),
            None => self.table.row(row),
        }
    }

    fn first_candidate(&self, row: usize) -> Option<&AllocationCandidate> {
        self.candidates.get(row).and_then(<[_]>::first)
    }

    fn consume(&mut self, row: usize, spec: &mut RequestSpec, instance_uuid: Option<&str>) {
        self.consume_row(row as u32, spec, instance_uuid);
    }

    fn outcome(self, destinations: Vec<Vec<Destination>>, claimed: Vec<String>) -> ScheduleOutcome {
        self.into_outcome(destinations, claimed)
    }
}
