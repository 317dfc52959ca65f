// SPDX-License-Identifier: Apache-2.0
//! The searches of the weigh index: a host's weight in a list, the order of two
//! hosts (nova's stable sorts), the best host of a list and a column's bounds over
//! the hosts that pass.

use super::level::sum_weight;
use super::weigh_index::{Slot, NONE};
use super::Decision;

/// Rows a search of the tree looks at before it reads the candidates directly,
/// at the least: below it the direct read costs about as much as the search.
const MIN_BUDGET: usize = 64;

impl Decision<'_> {
    /// nova's summed weight of `row` in the list of `level`.
    pub(super) fn weight(&self, level: usize, row: u32) -> f64 {
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
    pub(super) fn earlier(&self, level: Option<usize>, a: u32, b: u32) -> bool {
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
    pub(super) fn could_beat(&self, level: usize, node: u32, best: u32, wb: f64, ub: f64) -> bool {
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
    pub(super) fn best(&self, level: usize, cell: Option<u16>, exclude: &[u32]) -> Option<u32> {
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
        // Where the hosts that weigh most are not candidates (a candidates answer
        // cut at `max_placement_results`, full hosts left out), the tree search
        // would look at many rows for nothing: past a quarter as many rows as the
        // request has candidates, the candidates are read directly (at worst 1.25
        // times their direct read; often far less than the search).
        let budget = (self.candidates.len() / 4).max(MIN_BUDGET);
        let mut looked = 0usize;
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
            looked += (n.end - n.start) as usize;
            if looked > budget {
                return self.best_of_candidates(level, cell, exclude, best);
            }
            for p in n.start as usize..n.end as usize {
                let row = index.row_at(p);
                if self.apart_of_row.contains_key(&row) || exclude.contains(&row) {
                    continue;
                }
                let (raw, mult) = index.values_at(p);
                self.offer(&mut best, prev, row, lv.weigh_tree_row(raw, mult));
            }
        }
        best.map(|(row, _)| row)
    }

    /// [`best`](Self::best) over the request's candidate rows not held apart,
    /// from `best`, the best of the hosts held apart.
    fn best_of_candidates(
        &self,
        level: usize,
        cell: Option<u16>,
        exclude: &[u32],
        mut best: Option<(u32, f64)>,
    ) -> Option<u32> {
        let prev = level.checked_sub(1);
        let lv = &self.levels[level];
        for row in self.candidates.rows() {
            if self.apart_of_row.contains_key(&row)
                || exclude.contains(&row)
                || cell.is_some_and(|c| self.table.cell_of(row as usize) != c)
            {
                continue;
            }
            let (raw, mult) = self.index.values_of_row(row as usize);
            self.offer(&mut best, prev, row, lv.weigh_tree_row(raw, mult));
        }
        best.map(|(row, _)| row)
    }

    /// `row` (not held apart, weight `w`) becomes `best` when it comes before it in
    /// the list and passes.
    fn offer(&self, best: &mut Option<(u32, f64)>, prev: Option<usize>, row: u32, w: f64) {
        let better = best.is_none_or(|(b, wb)| w > wb || (w == wb && self.earlier(prev, row, b)));
        if better && self.passes_fresh(row) {
            *best = Some((row, w));
            self.witness.set(Some(row));
        }
    }

    /// The largest (or smallest) raw weight of column `c` over the hosts in the
    /// list of `level`; `None` when no host is.
    pub(super) fn column_extreme(&self, level: usize, c: usize, largest: bool) -> Option<f64> {
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
        // As in `best`: past a quarter as many rows as there are candidates, they
        // are read directly.
        let budget = (self.candidates.len() / 4).max(MIN_BUDGET);
        let mut looked = 0usize;
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
            looked += (n.end - n.start) as usize;
            if looked > budget {
                for row in self.candidates.rows() {
                    if self.apart_of_row.contains_key(&row) {
                        continue;
                    }
                    let v = index.values_of_row(row as usize).0[t];
                    if improves(v, best) && self.passes_fresh(row) {
                        best = Some(v);
                        self.witness.set(Some(row));
                    }
                }
                return best;
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
    pub(super) fn some_table_row_passes(&self) -> bool {
        if let Some(w) = self.witness.get() {
            if !self.apart_of_row.contains_key(&w) {
                return true;
            }
        }
        // Only a candidate passes.
        for row in self.candidates.rows() {
            if !self.apart_of_row.contains_key(&row) && self.passes_fresh(row) {
                self.witness.set(Some(row));
                return true;
            }
        }
        false
    }
}
