// SPDX-License-Identifier: Apache-2.0
//! The host states of every enabled cell as one [`HostTable`] for the indexed
//! decision, built once and then brought up to date from the hosts that changed.

use super::cell::CellCache;
use super::HostStateCache;
use crate::model::{HostState, ServiceInfo};
use crate::scheduler::HostTable;
use crate::state::aggregates::AggregateCache;
use crate::state::{lock, read, write, StateError};
use chrono::{DateTime, Utc};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The host states of every enabled cell as a request would read them (see
/// [`HostStateCache::table`]), and what is needed to keep them up to date.
pub(super) struct DecisionTable {
    pub(super) table: Arc<HostTable>,
    /// The cells read, by uuid, in table order.
    pub(super) cells: Vec<(String, Arc<RwLock<CellCache>>)>,
    /// `AggregateCache::generation` when read.
    pub(super) aggregates: u64,
    /// (cell position, host) → its rows and their node ids.
    pub(super) rows_of_host: FxHashMap<(usize, String), Vec<(usize, i64)>>,
    /// When a retained decision stops applying to a host: (time, cell position, host).
    pub(super) expiries: BTreeSet<(DateTime<Utc>, usize, String)>,
}

impl HostStateCache {
    /// The host states of every enabled cell, as [`host_states`](Self::host_states)
    /// gives them for `now` with no uuid and no cell, as a table (same order,
    /// same states). Built once, then brought up to date from the hosts changed
    /// since (a refresh pass, an instance cast, a retained decision, a retained
    /// decision running out); built again when nodes, services, cells or
    /// aggregates come or go.
    pub async fn table(&self, now: DateTime<Utc>) -> Result<Arc<HostTable>, StateError> {
        let mut selected = self.store.select_cells(None).await?;
        selected.sort_by(|a, b| a.cell.uuid.cmp(&b.cell.uuid));
        for db in &selected {
            if self.cell(&db.cell.uuid).is_none() {
                self.full_load(db).await;
            }
        }
        let cells: Vec<(String, Arc<RwLock<CellCache>>)> = selected
            .iter()
            .filter_map(|db| Some((db.cell.uuid.clone(), self.cell(&db.cell.uuid)?)))
            .collect();
        Ok(self.table_of(cells, now))
    }

    /// [`table`](Self::table), after reading from the cells any of `uuids` the
    /// table does not hold (as `host_states` does for a request's providers).
    pub async fn table_for(
        &self,
        uuids: &[String],
        now: DateTime<Utc>,
    ) -> Result<Arc<HostTable>, StateError> {
        let table = self.table(now).await?;
        let missing: Vec<String> = uuids
            .iter()
            .filter(|u| table.row_of_uuid(u).is_none())
            .cloned()
            .collect();
        if missing.is_empty() {
            return Ok(table);
        }
        let selected = self.store.select_cells(None).await?;
        self.fetch_unknown(&selected, &missing).await;
        self.table(now).await
    }

    /// Brings the table up to date when one was built (after a refresh pass, so
    /// that requests seldom have to).
    pub(super) async fn update_table(&self, now: DateTime<Utc>) {
        let built = lock(&self.decision_table).is_some();
        if built {
            if let Err(e) = self.table(now).await {
                tracing::debug!(error = %e, "decision table not updated");
            }
        }
    }

    fn table_of(
        &self,
        cells: Vec<(String, Arc<RwLock<CellCache>>)>,
        now: DateTime<Utc>,
    ) -> Arc<HostTable> {
        let retain = self
            .opts
            .retain_consumption
            .then_some((now, self.opts.consumption_ttl));
        let aggregates = read(&self.store.aggregates);
        let mut kept = lock(&self.decision_table);
        if let Some(dt) = kept.as_mut() {
            let same_cells = dt.cells.len() == cells.len()
                && dt
                    .cells
                    .iter()
                    .zip(&cells)
                    .all(|(a, b)| a.0 == b.0 && Arc::ptr_eq(&a.1, &b.1));
            if same_cells && dt.aggregates == aggregates.generation() {
                if let Some(table) = dt.bring_up_to_date(&aggregates, retain, now) {
                    return table;
                }
            }
        }
        let built = DecisionTable::build(cells, &aggregates, retain, now);
        let table = Arc::clone(&built.table);
        *kept = Some(built);
        table
    }
}

// === impl DecisionTable ===

impl DecisionTable {
    /// Every node of `cells` that a request would see, as `host_states` reads them.
    pub(super) fn build(
        cells: Vec<(String, Arc<RwLock<CellCache>>)>,
        aggregates: &AggregateCache,
        retain: Option<(DateTime<Utc>, Duration)>,
        now: DateTime<Utc>,
    ) -> DecisionTable {
        let mut rows: Vec<Arc<HostState>> = Vec::new();
        let mut rows_of_host: FxHashMap<(usize, String), Vec<(usize, i64)>> = FxHashMap::default();
        let mut expiries = BTreeSet::new();
        let mut seen: FxHashSet<(Arc<str>, Arc<str>)> = FxHashSet::default();
        for (k, (_, cell)) in cells.iter().enumerate() {
            let mut c = write(cell);
            c.rows_changed = false;
            c.changed_hosts.clear();
            c.changed_services.clear();
            let c = &*c;
            for &id in c.nodes.keys() {
                let Some(state) = c.host_state(id, aggregates, retain) else {
                    continue;
                };
                // As `host_states`: a node seen in an earlier cell is skipped.
                if !seen.insert((state.host.clone(), state.nodename.clone())) {
                    continue;
                }
                if let Some((_, ttl)) = retain {
                    if let Some(until) = c.retained_until(id, now, ttl) {
                        expiries.insert((until, k, state.host.to_string()));
                    }
                }
                rows_of_host
                    .entry((k, state.host.to_string()))
                    .or_default()
                    .push((rows.len(), id));
                rows.push(Arc::new(state));
            }
        }
        DecisionTable {
            table: Arc::new(HostTable::from_shared(rows)),
            cells,
            aggregates: aggregates.generation(),
            rows_of_host,
            expiries,
        }
    }

    /// The table with the changed hosts read again; `None` when it must be built
    /// again (rows came or went).
    pub(super) fn bring_up_to_date(
        &mut self,
        aggregates: &AggregateCache,
        retain: Option<(DateTime<Utc>, Duration)>,
        now: DateTime<Utc>,
    ) -> Option<Arc<HostTable>> {
        let mut hosts: BTreeSet<(usize, String)> = BTreeSet::new();
        while let Some(first) = self.expiries.first() {
            if first.0 > now {
                break;
            }
            let (_, k, host) = self.expiries.pop_first()?;
            hosts.insert((k, host));
        }
        let mut services: Vec<(usize, String)> = Vec::new();
        for (k, (_, cell)) in self.cells.iter().enumerate() {
            let mut c = write(cell);
            if c.rows_changed {
                return None;
            }
            hosts.extend(c.changed_hosts.drain().map(|h| (k, h)));
            services.extend(c.changed_services.drain().map(|h| (k, h)));
        }
        // A service change alone (a heartbeat, mostly): the row with its new
        // service; no join, and no weigher reads it. Written in place when no
        // request holds the table (between requests), else on a copy.
        let mut service_changes: Vec<(usize, ServiceInfo)> = Vec::new();
        for (k, host) in services {
            if hosts.contains(&(k, host.clone())) {
                continue;
            }
            let Some(rows) = self.rows_of_host.get(&(k, host)) else {
                continue;
            };
            let c = read(&self.cells[k].1);
            for &(row, _) in rows {
                let service = c.services.get(&*self.table.row(row).host)?.1.clone();
                service_changes.push((row, service));
            }
        }
        if !service_changes.is_empty() {
            match Arc::get_mut(&mut self.table) {
                Some(table) => table.set_services(service_changes),
                None => {
                    let changes = service_changes
                        .into_iter()
                        .map(|(row, service)| {
                            let current = self.table.row(row);
                            (
                                row,
                                Arc::new(HostState {
                                    service,
                                    ..(**current).clone()
                                }),
                            )
                        })
                        .collect();
                    self.table = Arc::new(self.table.with_service_changes(changes));
                }
            }
        }
        if hosts.is_empty() {
            return Some(Arc::clone(&self.table));
        }
        let mut changes = Vec::new();
        for (k, host) in hosts {
            let Some(rows) = self.rows_of_host.get(&(k, host)) else {
                // A host without a node in the table (a service alone).
                continue;
            };
            let c = read(&self.cells[k].1);
            for &(row, id) in rows {
                let state = c.host_state(id, aggregates, retain)?;
                if let Some((_, ttl)) = retain {
                    if let Some(until) = c.retained_until(id, now, ttl) {
                        self.expiries.insert((until, k, state.host.to_string()));
                    }
                }
                changes.push((row, Arc::new(state)));
            }
        }
        if !changes.is_empty() {
            self.table = Arc::new(self.table.with_changes(changes));
        }
        Some(Arc::clone(&self.table))
    }
}
