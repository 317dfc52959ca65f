// SPDX-License-Identifier: Apache-2.0
//! The weigher columns of a host table ([`TableRows`]) and a tree of boxes over them, so that
//! the best host of a request is found without weighing every host.
//!
//! For the weighers whose raw weight depends on the host state alone
//! ([`RawDependence::Host`]), every row's raw weight (clamped to the weigher's
//! `minval`/`maxval`, as nova clamps it) and multiplier are computed once per
//! host state. A column that adds nothing to any request's weights (every
//! multiplier 0.0) is left out. A column where every host has the same raw weight
//! and multiplier is kept as those two numbers (the hosts a request consumes
//! may get other values). The rows of each cell are split into a binary tree
//! over the other columns; each node keeps, per column, the range of the raw
//! weights and of the multipliers below it, and its smallest row (nova's
//! tie-break is the host order).
//!
//! From a node's box, [`WeighIndex::upper_bound`] gives a number no host below it
//! can exceed, with the weight computed exactly as nova sums it, in floating
//! point: normalization `(w - lo) / (hi - lo)`, the product by the multiplier and
//! the running sum are each monotone in their operands under IEEE rounding, so
//! evaluating the same expressions at the box's corners bounds every host in it.

use crate::model::{HostState, RequestSpec};
use crate::weighers::aggregate_multiplier::may_override;
use crate::weighers::pipeline::keys_suffixed;
use crate::weighers::{HostWeigher, WeigherPipeline};
use std::sync::Arc;

/// The rows an index is built over, in nova's host order, with their cells: what it
/// needs of the host table (which keeps its indexes, so it cannot be named here).
pub(crate) trait TableRows {
    fn rows(&self) -> &[Arc<HostState>];
    fn row(&self, row: usize) -> &Arc<HostState>;
    /// The cell of a row, as an index below [`TableRows::cell_count`].
    fn cell_of(&self, row: usize) -> u16;
    fn cell_count(&self) -> usize;
    fn len(&self) -> usize {
        self.rows().len()
    }
}

/// A moved row's new tree values: (index into `raw`/`mult`, raw weight, multiplier).
type TreeValues = Vec<(usize, f64, f64)>;

/// Rows per leaf.
const LEAF: usize = 8;
pub(crate) const NONE: u32 = u32::MAX;

/// Offsets of a column's four numbers in a node's box.
const RMIN: usize = 0;
const RMAX: usize = 1;
const MMIN: usize = 2;
const MMAX: usize = 3;

/// A weigher kept as a column.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Column {
    /// Position of the weigher in the pipeline.
    pub weigher: usize,
    pub minval: Option<f64>,
    pub maxval: Option<f64>,
    pub slot: Slot,
}

/// Where a column's numbers are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Slot {
    /// In the tree, at this position among its columns.
    Tree(usize),
    /// The same for every row of the table.
    Uniform { raw: f64, mult: f64 },
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Node {
    /// Tree positions `start..end` are below this node.
    pub start: u32,
    pub end: u32,
    /// `NONE` for a leaf.
    pub left: u32,
    pub right: u32,
    pub parent: u32,
    /// The smallest table row below this node.
    pub min_row: u32,
}

/// See the module docs.
#[derive(Clone)]
pub(crate) struct WeighIndex {
    pub pipeline_id: u64,
    pipeline: std::sync::Weak<()>,
    /// Pipeline positions of the weighers indexed (`RawDependence::Host`).
    pub mask: u64,
    /// False when a raw weight of some row failed or is not finite, or some
    /// multiplier (of any weigher) is not finite: requests are then decided the
    /// plain way, which reproduces nova's error or NaN ordering.
    pub usable: bool,
    pub columns: Vec<Column>,
    weighers: Arc<Vec<Box<dyn HostWeigher>>>,
    /// What changed rows keep (shared with the index's changed copies).
    shape: Arc<Shape>,
    /// Columns in the tree.
    tree_dims: usize,
    /// `raw[p * t + c]`, `mult[p * t + c]` for tree position `p`, tree column `c`.
    raw: Vec<f64>,
    mult: Vec<f64>,
    /// `boxes[node * 4t + 4c + {RMIN, RMAX, MMIN, MMAX}]`.
    boxes: Vec<f64>,
}

/// The tree and which row sits where in it.
pub(crate) struct Shape {
    /// Weighers left out (every multiplier 0.0: they add ±0.0 to every weight),
    /// by position among the indexed ones; checked again for changed rows.
    dropped: Vec<usize>,
    /// Table row at each tree position.
    rows: Vec<u32>,
    /// Tree position of each table row.
    pos: Vec<u32>,
    pub nodes: Vec<Node>,
    leaf_of_pos: Vec<u32>,
    /// Root node per cell of the table (`NONE`: the cell has no row).
    pub roots: Vec<u32>,
}

/// One row's numbers for every indexed weigher.
struct RowWeights {
    /// Per indexed weigher (in `mask` order).
    raw: Vec<f64>,
    mult: Vec<f64>,
    /// Every weight computed and finite, every multiplier of the pipeline finite.
    ok: bool,
}

fn weigh_row(
    weighers: &[Box<dyn HostWeigher>],
    indexed: &[usize],
    suffixed: bool,
    host: &HostState,
) -> RowWeights {
    // Host-state weighers do not read the request.
    let spec = RequestSpec::default();
    let overridable = !suffixed || may_override(host);
    let multiplier = |w: &dyn HostWeigher| {
        if overridable {
            w.multiplier(host)
        } else {
            w.multiplier_setting().without_override()
        }
    };
    let mut ok = weighers.iter().all(|w| multiplier(w.as_ref()).is_finite());
    let mut raw = Vec::with_capacity(indexed.len());
    let mut mult = Vec::with_capacity(indexed.len());
    for &k in indexed {
        let w = &weighers[k];
        let value = match w.weigh(host, &spec) {
            Ok(mut v) => {
                if let Some(min) = w.minval() {
                    v = v.max(min);
                }
                if let Some(max) = w.maxval() {
                    v = v.min(max);
                }
                v
            }
            Err(_) => {
                ok = false;
                0.0
            }
        };
        ok &= value.is_finite();
        raw.push(value);
        mult.push(multiplier(w.as_ref()));
    }
    RowWeights { raw, mult, ok }
}

impl WeighIndex {
    /// Whether the pipeline indexed still exists (a replaced one's index is dropped).
    pub(crate) fn pipeline_alive(&self) -> bool {
        self.pipeline.strong_count() > 0
    }

    /// Weighs every row of `table` with the weighers of `pipeline` at the
    /// positions of `mask` and builds the tree.
    pub(crate) fn build(
        table: &impl TableRows,
        pipeline: &WeigherPipeline,
        mask: u64,
    ) -> WeighIndex {
        let weighers = pipeline.weighers().clone();
        let indexed: Vec<usize> = (0..weighers.len())
            .filter(|&k| k < 64 && mask & (1 << k) != 0)
            .collect();
        let suffixed = keys_suffixed(&weighers);
        let n = table.len();
        let mut usable = indexed.len() == (mask.count_ones() as usize);
        let mut raw_by = vec![Vec::with_capacity(n); indexed.len()];
        let mut mult_by = vec![Vec::with_capacity(n); indexed.len()];
        for host in table.rows() {
            let w = weigh_row(&weighers, &indexed, suffixed, host);
            usable &= w.ok;
            for j in 0..indexed.len() {
                raw_by[j].push(w.raw[j]);
                mult_by[j].push(w.mult[j]);
            }
        }
        let mut columns = Vec::new();
        let mut dropped = Vec::new();
        let mut kept = Vec::new();
        for (j, &k) in indexed.iter().enumerate() {
            let w = &weighers[k];
            let (minval, maxval) = (w.minval(), w.maxval());
            if let (Some(lo), Some(hi)) = (minval, maxval) {
                // Not an in-tree case; the bounds below assume lo <= hi.
                usable &= lo <= hi;
            }
            if mult_by[j].iter().all(|&m| m == 0.0) {
                dropped.push(j);
                continue;
            }
            let uniform = match (raw_by[j].first(), mult_by[j].first()) {
                (Some(&r), Some(&m))
                    if raw_by[j].iter().all(|&v| v.to_bits() == r.to_bits())
                        && mult_by[j].iter().all(|&v| v.to_bits() == m.to_bits()) =>
                {
                    Some(Slot::Uniform { raw: r, mult: m })
                }
                _ => None,
            };
            let slot = uniform.unwrap_or_else(|| {
                kept.push(j);
                Slot::Tree(kept.len() - 1)
            });
            columns.push(Column {
                weigher: k,
                minval,
                maxval,
                slot,
            });
        }
        let d = kept.len();
        let raw_of = |row: u32, c: usize| raw_by[kept[c]][row as usize];
        // Rows grouped by cell, in table order; then each cell's range split.
        let cells = table.cell_count();
        let mut order: Vec<u32> = Vec::with_capacity(n);
        let mut ranges = Vec::with_capacity(cells);
        for cell in 0..cells {
            let start = order.len();
            order.extend((0..n as u32).filter(|&r| table.cell_of(r as usize) as usize == cell));
            ranges.push((start, order.len()));
        }
        let global_spread: Vec<f64> = (0..d)
            .map(|c| {
                let (lo, hi) =
                    (0..n as u32).fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), r| {
                        let v = raw_of(r, c);
                        (lo.min(v), hi.max(v))
                    });
                hi - lo
            })
            .collect();
        let mut nodes: Vec<Node> = Vec::with_capacity(2 * n / LEAF + cells + 1);
        let mut roots = vec![NONE; cells];
        for (cell, &(start, end)) in ranges.iter().enumerate() {
            if start < end {
                roots[cell] = split(
                    &mut nodes,
                    &mut order,
                    start,
                    end,
                    NONE,
                    &|r, c| raw_of(r, c),
                    &global_spread,
                );
            }
        }
        let mut pos = vec![NONE; n];
        for (p, &r) in order.iter().enumerate() {
            pos[r as usize] = p as u32;
        }
        let mut raw = Vec::with_capacity(n * d);
        let mut mult = Vec::with_capacity(n * d);
        for &r in &order {
            for &j in &kept {
                raw.push(raw_by[j][r as usize]);
                mult.push(mult_by[j][r as usize]);
            }
        }
        let mut leaf_of_pos = vec![NONE; n];
        for (id, node) in nodes.iter().enumerate() {
            if node.left == NONE {
                for p in node.start..node.end {
                    leaf_of_pos[p as usize] = id as u32;
                }
            }
        }
        let mut index = WeighIndex {
            pipeline_id: pipeline.id(),
            pipeline: pipeline.liveness(),
            mask,
            usable,
            columns,
            tree_dims: d,
            weighers,
            raw,
            mult,
            boxes: vec![0.0; nodes.len() * 4 * d],
            shape: Arc::new(Shape {
                dropped,
                rows: order,
                pos,
                nodes,
                leaf_of_pos,
                roots,
            }),
        };
        // Children come after their parent: fill the boxes from the last node back.
        for id in (0..index.shape.nodes.len()).rev() {
            index.refit_node(id);
        }
        index
    }

    /// This index for `table`, a copy of the index's table with the rows
    /// `changed` replaced: `Some(None)` when no weigher value of those rows moved
    /// (this index serves `table` as it is), `Some(Some(next))` with the values
    /// changed and the boxes refitted, `None` when the change invalidates a column
    /// left out or made uniform (the index is then built again on first use).
    pub(crate) fn with_rows_changed(
        &self,
        table: &impl TableRows,
        changed: &[usize],
    ) -> Option<Option<WeighIndex>> {
        let moved = self.moved_values(table, changed)?;
        if moved.is_empty() {
            return Some(None);
        }
        let mut next = self.clone();
        next.apply_moved(moved);
        Some(Some(next))
    }

    /// [`with_rows_changed`](Self::with_rows_changed) on this index itself: `false`
    /// when the change invalidates it.
    pub(crate) fn change_rows(&mut self, table: &impl TableRows, changed: &[usize]) -> bool {
        match self.moved_values(table, changed) {
            Some(moved) => {
                self.apply_moved(moved);
                true
            }
            None => false,
        }
    }

    /// The tree values of the rows `changed` that moved, by tree position; `None`
    /// when the change invalidates a column left out or made uniform.
    fn moved_values(
        &self,
        table: &impl TableRows,
        changed: &[usize],
    ) -> Option<Vec<(usize, TreeValues)>> {
        if table.len() != self.shape.pos.len() {
            return None;
        }
        let indexed: Vec<usize> = (0..self.weighers.len())
            .filter(|&k| k < 64 && self.mask & (1 << k) != 0)
            .collect();
        let suffixed = keys_suffixed(&self.weighers);
        let d = self.tree_dims;
        // The new tree values of the rows that moved, checked before copying.
        let mut moved: Vec<(usize, TreeValues)> = Vec::new();
        for &row in changed {
            let w = weigh_row(&self.weighers, &indexed, suffixed, table.row(row));
            if !w.ok || self.shape.dropped.iter().any(|&j| w.mult[j] != 0.0) {
                return None;
            }
            let p = self.shape.pos[row] as usize;
            let mut values = Vec::new();
            for col in &self.columns {
                let j = indexed.iter().position(|&k| k == col.weigher).unwrap_or(0);
                match col.slot {
                    Slot::Tree(c) => {
                        let at = p * d + c;
                        if self.raw[at].to_bits() != w.raw[j].to_bits()
                            || self.mult[at].to_bits() != w.mult[j].to_bits()
                        {
                            values.push((at, w.raw[j], w.mult[j]));
                        }
                    }
                    Slot::Uniform { raw, mult } => {
                        if w.raw[j].to_bits() != raw.to_bits()
                            || w.mult[j].to_bits() != mult.to_bits()
                        {
                            return None;
                        }
                    }
                }
            }
            if !values.is_empty() {
                moved.push((p, values));
            }
        }
        Some(moved)
    }

    /// Writes the values `moved` and refits the boxes above them.
    fn apply_moved(&mut self, moved: Vec<(usize, TreeValues)>) {
        let mut dirty: Vec<u32> = Vec::with_capacity(moved.len());
        for (p, values) in moved {
            for (at, raw, mult) in values {
                self.raw[at] = raw;
                self.mult[at] = mult;
            }
            dirty.push(self.shape.leaf_of_pos[p]);
        }
        dirty.sort_unstable();
        dirty.dedup();
        for leaf in dirty {
            let mut node = leaf;
            while node != NONE {
                self.refit_node(node as usize);
                node = self.shape.nodes[node as usize].parent;
            }
        }
    }

    fn refit_node(&mut self, id: usize) {
        let d = self.tree_dims;
        let node = self.shape.nodes[id];
        let mut b = vec![0.0; 4 * d];
        for c in 0..d {
            b[4 * c + RMIN] = f64::INFINITY;
            b[4 * c + RMAX] = f64::NEG_INFINITY;
            b[4 * c + MMIN] = f64::INFINITY;
            b[4 * c + MMAX] = f64::NEG_INFINITY;
        }
        if node.left == NONE {
            for p in node.start as usize..node.end as usize {
                for c in 0..d {
                    let (r, m) = (self.raw[p * d + c], self.mult[p * d + c]);
                    b[4 * c + RMIN] = b[4 * c + RMIN].min(r);
                    b[4 * c + RMAX] = b[4 * c + RMAX].max(r);
                    b[4 * c + MMIN] = b[4 * c + MMIN].min(m);
                    b[4 * c + MMAX] = b[4 * c + MMAX].max(m);
                }
            }
        } else {
            for child in [node.left, node.right] {
                let cb = &self.boxes[child as usize * 4 * d..(child as usize + 1) * 4 * d];
                for c in 0..d {
                    b[4 * c + RMIN] = b[4 * c + RMIN].min(cb[4 * c + RMIN]);
                    b[4 * c + RMAX] = b[4 * c + RMAX].max(cb[4 * c + RMAX]);
                    b[4 * c + MMIN] = b[4 * c + MMIN].min(cb[4 * c + MMIN]);
                    b[4 * c + MMAX] = b[4 * c + MMAX].max(cb[4 * c + MMAX]);
                }
            }
        }
        self.boxes[id * 4 * d..(id + 1) * 4 * d].copy_from_slice(&b);
    }

    /// The table row at tree position `p`.
    #[inline]
    pub(crate) fn row_at(&self, p: usize) -> u32 {
        self.shape.rows[p]
    }

    pub(crate) fn nodes(&self) -> &[Node] {
        &self.shape.nodes
    }

    pub(crate) fn roots(&self) -> &[u32] {
        &self.shape.roots
    }

    /// Raw weights and multipliers at tree position `p`, one per tree column.
    #[inline]
    pub(crate) fn values_at(&self, p: usize) -> (&[f64], &[f64]) {
        let d = self.tree_dims;
        (
            &self.raw[p * d..(p + 1) * d],
            &self.mult[p * d..(p + 1) * d],
        )
    }

    /// Raw weights and multipliers of table row `row`, one per tree column.
    #[inline]
    pub(crate) fn values_of_row(&self, row: usize) -> (&[f64], &[f64]) {
        self.values_at(self.shape.pos[row] as usize)
    }

    /// Raw weights and multipliers of table row `row`, one per column.
    pub(crate) fn row_values(&self, row: usize) -> (Vec<f64>, Vec<f64>) {
        let (raw, mult) = self.values_at(self.shape.pos[row] as usize);
        self.columns
            .iter()
            .map(|col| match col.slot {
                Slot::Tree(c) => (raw[c], mult[c]),
                Slot::Uniform { raw, mult } => (raw, mult),
            })
            .unzip()
    }

    /// Tree column `c`'s raw weights below `node`: `(min, max)`.
    #[inline]
    pub(crate) fn raw_range(&self, node: usize, c: usize) -> (f64, f64) {
        let b = &self.boxes[node * 4 * self.tree_dims + 4 * c..];
        (b[RMIN], b[RMAX])
    }

    /// No host below `node` that lies within `bounds` (per column: the `(lo, hi)`
    /// a candidate list normalizes with; every host of that list has its raw
    /// weight in it) weighs more than this. `live[c]` is false where `lo == hi`
    /// (the column adds ±0.0).
    pub(crate) fn upper_bound(&self, node: usize, bounds: &[(f64, f64)], live: &[bool]) -> f64 {
        let d = self.tree_dims;
        let b = &self.boxes[node * 4 * d..(node + 1) * 4 * d];
        let mut total = 0.0;
        for (col, (&(lo, hi), &live)) in self.columns.iter().zip(bounds.iter().zip(live)) {
            if !live {
                continue;
            }
            let range = hi - lo;
            let c = match col.slot {
                Slot::Tree(c) => c,
                // Every row below weighs exactly this here.
                Slot::Uniform { raw, mult } => {
                    total += mult * ((raw - lo) / range);
                    continue;
                }
            };
            // Hosts of the list have normalized weights in [0, 1].
            let n_hi = ((b[4 * c + RMAX] - lo) / range).min(1.0);
            let n_lo = ((b[4 * c + RMIN] - lo) / range).max(0.0);
            if n_lo > n_hi {
                // No host below this node lies within the bounds.
                return f64::NEG_INFINITY;
            }
            let (m_lo, m_hi) = (b[4 * c + MMIN], b[4 * c + MMAX]);
            let best = (m_hi * n_hi)
                .max(m_hi * n_lo)
                .max(m_lo * n_hi)
                .max(m_lo * n_lo);
            total += best;
        }
        total
    }
}

/// Splits `order[start..end]` below a new node (returned), recursively: at the
/// median of the column whose values spread most (relative to its spread over
/// the table), or, when no column spreads, in row order (so that identical hosts
/// are found lowest row first).
fn split(
    nodes: &mut Vec<Node>,
    order: &mut [u32],
    start: usize,
    end: usize,
    parent: u32,
    raw_of: &dyn Fn(u32, usize) -> f64,
    global_spread: &[f64],
) -> u32 {
    let id = nodes.len() as u32;
    let min_row = order[start..end].iter().copied().min().unwrap_or(NONE);
    nodes.push(Node {
        start: start as u32,
        end: end as u32,
        left: NONE,
        right: NONE,
        parent,
        min_row,
    });
    if end - start <= LEAF {
        return id;
    }
    let mut widest: Option<(usize, f64)> = None;
    for (c, &spread) in global_spread.iter().enumerate() {
        if spread <= 0.0 || !spread.is_finite() {
            continue;
        }
        let (lo, hi) =
            order[start..end]
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &r| {
                    let v = raw_of(r, c);
                    (lo.min(v), hi.max(v))
                });
        let relative = (hi - lo) / spread;
        if relative > 0.0 && widest.is_none_or(|(_, w)| relative > w) {
            widest = Some((c, relative));
        }
    }
    let mid = start + (end - start) / 2;
    match widest {
        Some((c, _)) => {
            order[start..end].select_nth_unstable_by(mid - start, |&a, &b| {
                raw_of(a, c).total_cmp(&raw_of(b, c)).then(a.cmp(&b))
            });
        }
        None => order[start..end].sort_unstable(),
    }
    let left = split(nodes, order, start, mid, id, raw_of, global_spread);
    let right = split(nodes, order, mid, end, id, raw_of, global_spread);
    let node = &mut nodes[id as usize];
    node.left = left;
    node.right = right;
    id
}
