// SPDX-License-Identifier: Apache-2.0
//! The Placement fast path: a live local view of Placement's providers, inventories,
//! usages, traits and aggregates, read-only from Placement's database
//! (`[placement_database] connection`), from which allocation candidates are
//! computed locally for every request shape nova sends: provider trees, sharing
//! providers, granular groups. Placement is then asked only to commit the claim; its
//! generation checks turn a stale view into a retry, never an overcommit.
//!
//! - [`model`]: the index (pure data).
//! - [`request`]: the `GET /allocation_candidates` query, read as Placement reads it.
//! - [`candidates`]: the local answer (pure), equal to Placement's without `limit`;
//!   the common flat shape directly, every other one through [`trees`].
//! - [`loader`]: the full load and incremental refreshes.

pub mod candidates;
pub mod loader;
pub mod model;
pub mod request;
pub mod trees;

pub use candidates::local_candidates;
pub use loader::{IndexError, IndexLoader, RefreshStats, UsageRead};
pub use model::{Inventory, Provider, ProviderIndex};
pub use request::{FallbackKind, GroupPolicy, LocalRequest, RequestGroup, Unsupported};

use crate::placement::AllocationCandidates;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tracing::{debug, info, warn};

/// Default interval between refreshes.
pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(1);

/// How many requests were answered locally and how many went to Placement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathCounts {
    pub fast: u64,
    pub fallback: u64,
}

/// The index shared by requests and kept fresh by a background task.
pub struct LiveIndex {
    index: RwLock<ProviderIndex>,
    loader: IndexLoader,
    fast: AtomicU64,
    fallback: AtomicU64,
    /// Bumped (under the write lock) whenever a refresh replaces usages with
    /// Placement's: a tentative claim made before a bump may no longer be in them,
    /// so reverting it there would subtract what is not there.
    usages_epoch: AtomicU64,
    /// Which usages were replaced at which epoch (taken under the write lock).
    replaced: Mutex<Replaced>,
}

/// The epochs at which usages were last replaced: all of them (a full sum), or one
/// provider's (its generation moved).
#[derive(Debug, Default)]
struct Replaced {
    all: u64,
    providers: FxHashMap<i64, u64>,
}

/// A claim recorded in the index before Placement accepted it
/// ([`LiveIndex::try_claim`]); [`LiveIndex::revert`] takes it back out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tentative {
    epoch: u64,
    /// `(provider id, resource class id, amount)`.
    amounts: Vec<(i64, i64, i64)>,
}

impl LiveIndex {
    /// Loads the whole index once.
    pub async fn load(loader: IndexLoader) -> Result<Arc<Self>, IndexError> {
        let index = loader.load().await?;
        crate::observe::metrics()
            .index_last_refresh
            .set(crate::observe::metrics::unix_now());
        info!(
            providers = index.providers.len(),
            "placement provider index loaded"
        );
        Ok(Arc::new(LiveIndex::with(index, loader)))
    }

    fn with(index: ProviderIndex, loader: IndexLoader) -> Self {
        LiveIndex {
            index: RwLock::new(index),
            loader,
            fast: AtomicU64::new(0),
            fallback: AtomicU64::new(0),
            usages_epoch: AtomicU64::new(0),
            replaced: Mutex::new(Replaced::default()),
        }
    }

    /// Reads what changed since the last refresh and applies it.
    pub async fn refresh(&self) -> Result<RefreshStats, IndexError> {
        let known = self.read().known();
        let delta = self.loader.read_changes(&known).await?;
        let resummed = match &delta.usages {
            UsageRead::Partial { ids, .. } => Some(ids.clone()),
            _ => None,
        };
        let stats = {
            let mut index = self.write();
            let stats = index.apply(delta);
            if stats.usages_read {
                self.mark_replaced(None);
            } else if let Some(ids) = &resummed {
                self.mark_replaced(Some(ids));
            }
            stats
        };
        crate::observe::metrics()
            .index_last_refresh
            .set(crate::observe::metrics::unix_now());
        debug!(
            providers = stats.providers,
            changed = stats.changed,
            removed = stats.removed,
            usages_read = stats.usages_read,
            "placement provider index refreshed"
        );
        Ok(stats)
    }

    /// Records that a refresh replaced the usages of `ids` (every provider's when
    /// `None`) with Placement's; called under the write lock.
    fn mark_replaced(&self, ids: Option<&std::collections::BTreeSet<i64>>) {
        let epoch = self.usages_epoch.fetch_add(1, Ordering::Relaxed) + 1;
        let mut replaced = self.replaced.lock().unwrap_or_else(|p| p.into_inner());
        match ids {
            None => {
                replaced.all = epoch;
                replaced.providers.clear();
            }
            Some(ids) => {
                for &id in ids {
                    replaced.providers.insert(id, epoch);
                }
            }
        }
    }

    /// Refreshes every `interval` until the index is dropped.
    pub fn spawn_refresher(self: &Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let Some(live) = weak.upgrade() else { return };
                if let Err(e) = live.refresh().await {
                    warn!(error = %e, "could not refresh the placement provider index");
                }
            }
        })
    }

    /// The candidates for `params` computed locally, or why Placement must be asked.
    /// Counts the decision.
    pub fn candidates(
        &self,
        params: &[(String, String)],
    ) -> Result<AllocationCandidates, Unsupported> {
        let answer =
            LocalRequest::from_params(params).and_then(|req| local_candidates(&self.read(), &req));
        match &answer {
            Ok(found) => {
                self.fast.fetch_add(1, Ordering::Relaxed);
                debug!(
                    candidates = found.allocation_requests.len(),
                    "allocation candidates: fast path"
                );
            }
            Err(reason) => {
                self.fallback.fetch_add(1, Ordering::Relaxed);
                info!(%reason, "allocation candidates: fallback to Placement");
            }
        }
        answer
    }

    /// Records a claim Placement accepted (an allocation request's `allocations`).
    pub fn apply_claim(&self, allocation_request: &serde_json::Value) {
        let list = claim_amounts(allocation_request);
        self.write().apply_claim(&list);
    }

    /// Records a claim not yet made in Placement, if it fits what the index holds
    /// (Placement's own capacity check, [`Inventory::fits`]), so that the next
    /// instances of the request and concurrent requests see it at once. `None`:
    /// it does not fit (or names a provider or class the index does not know);
    /// nothing is changed then. The check and the write are one critical section:
    /// two requests cannot both take the last room.
    pub fn try_claim(&self, allocation_request: &serde_json::Value) -> Option<Tentative> {
        let requested = claim_amounts(allocation_request);
        let mut index = self.write();
        let mut amounts = Vec::new();
        for (rp, list) in &requested {
            let p = index.provider(rp)?;
            for (rc, amount) in list {
                let rc_id = index.resource_classes.id(rc)?;
                let before: i64 = amounts
                    .iter()
                    .filter(|(id, c, _)| *id == p.id && *c == rc_id)
                    .map(|(_, _, a)| a)
                    .sum();
                if !p
                    .inventories
                    .get(&rc_id)?
                    .fits(p.used(rc_id) + before, *amount)
                {
                    return None;
                }
                amounts.push((p.id, rc_id, *amount));
            }
        }
        for (id, rc_id, amount) in &amounts {
            if let Some(p) = index.providers.get_mut(id) {
                *p.usages.entry(*rc_id).or_insert(0) += amount;
            }
        }
        Some(Tentative {
            epoch: self.usages_epoch.load(Ordering::Relaxed),
            amounts,
        })
    }

    /// Takes a tentative claim back out of the providers whose usages no refresh
    /// has replaced with Placement's (which never held it) since it was made.
    pub fn revert(&self, tentative: &Tentative) {
        let mut index = self.write();
        let replaced = self.replaced.lock().unwrap_or_else(|p| p.into_inner());
        if replaced.all > tentative.epoch {
            return;
        }
        for (id, rc_id, amount) in &tentative.amounts {
            if replaced
                .providers
                .get(id)
                .is_some_and(|&at| at > tentative.epoch)
            {
                continue;
            }
            if let Some(used) = index
                .providers
                .get_mut(id)
                .and_then(|p| p.usages.get_mut(rc_id))
            {
                *used = (*used - amount).max(0);
            }
        }
    }

    /// Whether any of `consumer_uuids` is known to Placement (a row in its
    /// `consumers` table), read-only from Placement's database.
    pub async fn existing_consumers(
        &self,
        consumer_uuids: &[String],
    ) -> Result<Vec<String>, IndexError> {
        self.loader.existing_consumers(consumer_uuids).await
    }

    pub fn counts(&self) -> PathCounts {
        PathCounts {
            fast: self.fast.load(Ordering::Relaxed),
            fallback: self.fallback.load(Ordering::Relaxed),
        }
    }

    /// A copy of the current index (tests, diagnostics).
    pub fn snapshot(&self) -> ProviderIndex {
        self.read().clone()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, ProviderIndex> {
        self.index.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, ProviderIndex> {
        self.index.write().unwrap_or_else(|p| p.into_inner())
    }
}

/// An allocation request's `allocations`: amounts (class name, amount) per provider uuid.
fn claim_amounts(allocation_request: &serde_json::Value) -> Vec<(String, Vec<(String, i64)>)> {
    let mut list = Vec::new();
    if let Some(allocs) = allocation_request
        .get("allocations")
        .and_then(serde_json::Value::as_object)
    {
        for (rp, a) in allocs {
            let amounts = a
                .get("resources")
                .and_then(serde_json::Value::as_object)
                .map(|r| {
                    r.iter()
                        .filter_map(|(rc, n)| Some((rc.clone(), n.as_i64()?)))
                        .collect()
                })
                .unwrap_or_default();
            list.push((rp.clone(), amounts));
        }
    }
    list
}

#[cfg(test)]
mod tests;
