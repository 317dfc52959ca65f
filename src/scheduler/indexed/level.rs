// SPDX-License-Identifier: Apache-2.0
//! The state of one decision on the index: each sorted list's normalization bounds
//! and pick ([`SortLevel`]), and the hosts held apart from the table ([`Apart`]).

use super::weigh_index::{Slot, WeighIndex, NONE};
use crate::model::HostState;
use crate::weighers::WeighError;

/// One sorted list of the request (an instance's, or the final one for the
/// alternates): the normalization bounds of its hosts and its pick.
pub(super) struct SortLevel {
    /// Per column: `(lo, hi)`.
    pub(super) bounds: Vec<(f64, f64)>,
    /// Per column: `lo != hi` (else the column adds ±0.0).
    pub(super) live: Vec<bool>,
    /// The live columns as a table row (not held apart) weighs them.
    pub(super) terms: Vec<Term>,
    /// The host moved to the front of the list (`NONE` while it is chosen).
    pub(super) chosen: u32,
}

/// One live column's part of a table row's weight.
#[derive(Clone, Copy)]
pub(super) enum Term {
    /// The same for every table row (a uniform column).
    Same(f64),
    /// Tree column `c`: `mult * ((raw - lo) / range)`.
    Tree { c: usize, lo: f64, range: f64 },
}

impl SortLevel {
    pub(super) fn new(index: &WeighIndex, bounds: Vec<(f64, f64)>) -> Self {
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
    pub(super) fn weigh_tree_row(&self, raw: &[f64], mult: &[f64]) -> f64 {
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
pub(super) struct Apart {
    pub(super) row: u32,
    /// Its state once consumed by this request (with its allocation candidates).
    pub(super) state: Option<HostState>,
    /// Raw weights per column from a level on (the first entry: the table's).
    pub(super) raws: Vec<(usize, Vec<f64>)>,
    /// Multipliers per column.
    pub(super) mult: Vec<f64>,
    /// Consumed hosts: still in the list (they are filtered again per instance).
    pub(super) in_list: bool,
    /// The level whose filters took it out of the list.
    pub(super) left_at: Option<usize>,
    /// A weigher failed on the consumed state.
    pub(super) error: Option<WeighError>,
}

impl Apart {
    pub(super) fn raw_at(&self, level: usize) -> &[f64] {
        let (_, raw) = self
            .raws
            .iter()
            .rev()
            .find(|(from, _)| *from <= level)
            .unwrap_or(&self.raws[0]);
        raw
    }
}

/// nova's weight: `0.0`, plus `multiplier * normalized` weigher by weigher.
/// Columns whose bounds are equal add ±0.0 (nova's `[0] * n`), which leaves the
/// sum as it is, so they are skipped.
#[inline]
pub(super) fn sum_weight(level: &SortLevel, raw: &[f64], mult: &[f64]) -> f64 {
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
