// SPDX-License-Identifier: Apache-2.0
//! The Placement fast path: a live local view of Placement's providers, inventories,
//! usages, traits and aggregates, read-only from Placement's database
//! (`[placement_database] connection`), from which the allocation candidates of the
//! common request shape are computed locally. Placement is then asked only to
//! commit the claim; its generation checks turn a stale view into a retry, never an
//! overcommit.
//!
//! - [`model`]: the index (pure data).
//! - [`request`]: which `GET /allocation_candidates` queries are answered locally.
//! - [`candidates`]: the local answer (pure), equal to Placement's without `limit`.
//! - [`loader`]: the full load and incremental refreshes.

pub mod candidates;
pub mod loader;
pub mod model;
pub mod request;

pub use candidates::local_candidates;
pub use loader::{IndexError, IndexLoader, RefreshStats};
pub use model::{Inventory, Provider, ProviderIndex};
pub use request::{LocalRequest, Unsupported};

use crate::placement::AllocationCandidates;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
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
}

impl LiveIndex {
    /// Loads the whole index once.
    pub async fn load(loader: IndexLoader) -> Result<Arc<Self>, IndexError> {
        let index = loader.load().await?;
        info!(
            providers = index.providers.len(),
            "placement provider index loaded"
        );
        Ok(Arc::new(LiveIndex {
            index: RwLock::new(index),
            loader,
            fast: AtomicU64::new(0),
            fallback: AtomicU64::new(0),
        }))
    }

    /// Reads what changed since the last refresh and applies it.
    pub async fn refresh(&self) -> Result<RefreshStats, IndexError> {
        let known = self.read().known();
        let delta = self.loader.read_changes(&known).await?;
        let stats = self.write().apply(delta);
        debug!(
            providers = stats.providers,
            changed = stats.changed,
            removed = stats.removed,
            usages_read = stats.usages_read,
            "placement provider index refreshed"
        );
        Ok(stats)
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
        self.write().apply_claim(&list);
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

#[cfg(test)]
mod tests;
