// SPDX-License-Identifier: Apache-2.0
//! Host states that outlive a request: the input of the indexed decision
//! ([`Scheduler::schedule_table`](super::Scheduler::schedule_table)).
//!
//! A [`HostTable`] holds every host the state edge knows, in nova's host order
//! (cells by uuid, compute nodes by id: the order a request's host list has), as
//! shared states without allocation candidates. A request names its candidates
//! per row ([`RowCandidates`](super::RowCandidates)). The weigher columns of the rows (raw weights and
//! multipliers, which depend on the host state alone for most weighers) are kept
//! in a [`WeighIndex`] built on first use and carried from one table to the next
//! by [`HostTable::with_changes`], which re-reads only the changed rows.

use super::weigh_index::{TableRows, WeighIndex};
use crate::model::{HostState, ServiceInfo};
use crate::weighers::WeigherPipeline;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex};

/// Hosts in nova's order, shared between requests (see the module docs).
pub struct HostTable {
    rows: Vec<Arc<HostState>>,
    /// What a change of rows keeps (shared between a table and its changed copies).
    layout: Arc<Layout>,
    /// Built on first use, per weigher pipeline and set of weigher columns.
    indexes: Mutex<Vec<Arc<WeighIndex>>>,
}

/// The rows' cells and uuids.
struct Layout {
    /// Per row: index into `cells`.
    row_cell: Vec<u16>,
    cells: Vec<Arc<str>>,
    by_uuid: FxHashMap<Arc<str>, u32>,
}

impl std::fmt::Debug for HostTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostTable")
            .field("rows", &self.rows.len())
            .field("cells", &self.layout.cells)
            .finish()
    }
}

impl HostTable {
    /// A table of `hosts`, which must be in nova's host order; their allocation
    /// candidates are dropped (a request brings its own).
    pub fn new(hosts: Vec<HostState>) -> Self {
        Self::from_shared(
            hosts
                .into_iter()
                .map(|mut h| {
                    h.allocation_candidates = Vec::new();
                    Arc::new(h)
                })
                .collect(),
        )
    }

    /// A table of shared states (without allocation candidates), in nova's host order.
    pub fn from_shared(rows: Vec<Arc<HostState>>) -> Self {
        let mut cells: Vec<Arc<str>> = Vec::new();
        let mut row_cell = Vec::with_capacity(rows.len());
        let mut by_uuid = FxHashMap::with_capacity_and_hasher(rows.len(), Default::default());
        for (i, h) in rows.iter().enumerate() {
            let cell = match cells.iter().position(|c| *c == h.cell_uuid) {
                Some(c) => c,
                None => {
                    cells.push(h.cell_uuid.clone());
                    cells.len() - 1
                }
            };
            row_cell.push(u16::try_from(cell).unwrap_or(u16::MAX));
            if let Some(u) = &h.uuid {
                by_uuid.entry(u.clone()).or_insert(i as u32);
            }
        }
        HostTable {
            rows,
            layout: Arc::new(Layout {
                row_cell,
                cells,
                by_uuid,
            }),
            indexes: Mutex::new(Vec::new()),
        }
    }

    pub fn len(&self) -> usize {
        self.rows.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The shared state of `row`.
    pub fn row(&self, row: usize) -> &Arc<HostState> {
        &self.rows[row]
    }

    pub fn rows(&self) -> &[Arc<HostState>] {
        &self.rows
    }

    /// The row of the compute node with this uuid (its resource provider uuid).
    pub fn row_of_uuid(&self, uuid: &str) -> Option<usize> {
        self.layout.by_uuid.get(uuid).map(|&r| r as usize)
    }

    pub(crate) fn cell_of(&self, row: usize) -> u16 {
        self.layout.row_cell[row]
    }

    pub(crate) fn cell_count(&self) -> usize {
        self.layout.cells.len()
    }

    /// This table with `changes` (row, new state) applied. Every row keeps its
    /// place; a change must keep the row's cell and uuid. The weigh indexes built
    /// so far are carried over with only the changed rows re-weighed.
    pub fn with_changes(&self, changes: Vec<(usize, Arc<HostState>)>) -> HostTable {
        self.changed(changes, true)
    }

    /// [`with_changes`](Self::with_changes) for changes of the rows' `service`
    /// alone (heartbeats, a disabled service), which no weigher reads: the weigh
    /// indexes are shared as they are.
    pub fn with_service_changes(&self, changes: Vec<(usize, Arc<HostState>)>) -> HostTable {
        self.changed(changes, false)
    }

    /// [`with_changes`](Self::with_changes) on this table itself, for a holder that
    /// changes rows after every request (a replay): no copy of the rows, and the
    /// weigh indexes no request holds are changed in place.
    pub fn change_rows(&mut self, changes: Vec<(usize, Arc<HostState>)>) {
        let changed: Vec<usize> = changes.iter().map(|(r, _)| *r).collect();
        for (row, state) in changes {
            debug_assert_eq!(state.cell_uuid, self.rows[row].cell_uuid);
            self.rows[row] = state;
        }
        let indexes = std::mem::take(self.indexes.get_mut().unwrap_or_else(|p| p.into_inner()));
        let mut kept = Vec::with_capacity(indexes.len());
        for mut index in indexes {
            match Arc::get_mut(&mut index) {
                Some(own) => {
                    if own.change_rows(&*self, &changed) {
                        kept.push(index);
                    }
                }
                None => match index.with_rows_changed(&*self, &changed) {
                    None => {}
                    Some(None) => kept.push(index),
                    Some(Some(next)) => kept.push(Arc::new(next)),
                },
            }
        }
        *self.indexes.get_mut().unwrap_or_else(|p| p.into_inner()) = kept;
    }

    /// Sets the `service` of rows in place, in a table no one else holds (the
    /// rows not shared either are written, the others replaced by a copy); the
    /// weigh indexes stay as they are (no weigher reads the service).
    pub fn set_services(&mut self, services: Vec<(usize, ServiceInfo)>) {
        for (row, service) in services {
            let slot = &mut self.rows[row];
            match Arc::get_mut(slot) {
                Some(state) => state.service = service,
                None => {
                    *slot = Arc::new(HostState {
                        service,
                        ..(**slot).clone()
                    })
                }
            }
        }
    }

    fn changed(&self, changes: Vec<(usize, Arc<HostState>)>, reweigh: bool) -> HostTable {
        let mut rows = self.rows.clone();
        for (row, state) in &changes {
            debug_assert_eq!(state.cell_uuid, rows[*row].cell_uuid);
            rows[*row] = state.clone();
        }
        let changed: Vec<usize> = changes.iter().map(|(r, _)| *r).collect();
        let table = HostTable {
            rows,
            layout: Arc::clone(&self.layout),
            indexes: Mutex::new(Vec::new()),
        };
        let carried: Vec<Arc<WeighIndex>> = lock(&self.indexes)
            .iter()
            .filter_map(|index| {
                // A pipeline replaced (the release changed) leaves its index behind.
                if !index.pipeline_alive() {
                    return None;
                }
                if !reweigh {
                    return Some(Arc::clone(index));
                }
                match index.with_rows_changed(&table, &changed)? {
                    // No weigher value moved: the same index serves the new rows.
                    None => Some(Arc::clone(index)),
                    Some(next) => Some(Arc::new(next)),
                }
            })
            .collect();
        *lock(&table.indexes) = carried;
        table
    }

    /// The weigh index of `pipeline` over the weighers at the positions of `mask`,
    /// built now if this table has none yet.
    pub(crate) fn weigh_index(&self, pipeline: &WeigherPipeline, mask: u64) -> Arc<WeighIndex> {
        if let Some(found) = lock(&self.indexes)
            .iter()
            .find(|i| i.pipeline_id == pipeline.id() && i.mask == mask)
        {
            return found.clone();
        }
        // Built outside the lock: another request may build the same one meanwhile;
        // the first stored is kept.
        let built = Arc::new(WeighIndex::build(self, pipeline, mask));
        let mut indexes = lock(&self.indexes);
        if let Some(found) = indexes
            .iter()
            .find(|i| i.pipeline_id == pipeline.id() && i.mask == mask)
        {
            return found.clone();
        }
        indexes.push(built.clone());
        built
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TableRows for HostTable {
    fn rows(&self) -> &[Arc<HostState>] {
        HostTable::rows(self)
    }

    fn row(&self, row: usize) -> &Arc<HostState> {
        HostTable::row(self, row)
    }

    fn cell_of(&self, row: usize) -> u16 {
        HostTable::cell_of(self, row)
    }

    fn cell_count(&self) -> usize {
        HostTable::cell_count(self)
    }
}
