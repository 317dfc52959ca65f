// SPDX-License-Identifier: Apache-2.0
//! The release a running daemon schedules as, kept to the control plane's: when the
//! control plane reads as another release (its conductors upgraded, read again on
//! SIGHUP) or first appears (the daemon started before any nova service), the
//! manager's profile is rebuilt as that release and swapped in, and the `services` row
//! takes that release's version, never above the control plane's, so that release's
//! own nova-scheduler can take the host back. Calls in flight finish as they started.

use super::{profile_as, release_warnings};
use crate::config::Config;
use crate::manager::SchedulerManager;
use crate::release::{self, NovaSeries};
use crate::state::service_row::{self, ServiceRow};
use crate::state::HostStateStore;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::{error, info, warn};

/// Follows the control plane's release for one running daemon.
pub(super) struct ReleaseFollower {
    config: Arc<Config>,
    manager: Arc<SchedulerManager>,
    store: Arc<HostStateStore>,
    row: ServiceRow,
    /// What calls are now decided as.
    scheduling_as: Mutex<NovaSeries>,
    /// Held through a whole [`follow`](Self::follow): a SIGHUP while the first rows
    /// are being followed waits, so the profile and the row are swapped in one order.
    following: tokio::sync::Mutex<()>,
}

impl ReleaseFollower {
    pub(super) fn new(
        config: Arc<Config>,
        manager: Arc<SchedulerManager>,
        store: Arc<HostStateStore>,
        row: ServiceRow,
        scheduling_as: NovaSeries,
    ) -> Self {
        ReleaseFollower {
            config,
            manager,
            store,
            row,
            scheduling_as: Mutex::new(scheduling_as),
            following: tokio::sync::Mutex::new(()),
        }
    }

    /// The release calls are now decided as.
    pub(super) fn scheduling_as(&self) -> NovaSeries {
        *self.scheduling_as.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the control plane's service rows and follows them (`why` opens the log
    /// lines). Returns false when no database holds a nova service row yet.
    pub(super) async fn follow(&self, why: &str) -> bool {
        let _one_at_a_time = self.following.lock().await;
        let readings = self.store.newest_service_versions().await;
        let chosen = service_row::choose_version(&readings);
        let Some(newest) = chosen.source.newest() else {
            return false;
        };
        let before = self.scheduling_as();
        let choice = self.config.nova_scheduler_rs.nova_release;
        let now = match release::resolve(choice, Some(newest)) {
            Ok(resolved) if resolved.series == before => {
                info!("{why}: still {resolved}");
                before
            }
            Ok(resolved) => match profile_as(&self.config, resolved.series) {
                Ok(profile) => {
                    self.manager.set_profile(profile);
                    *self.scheduling_as.lock().unwrap_or_else(|p| p.into_inner()) = resolved.series;
                    info!(
                        filters = ?self.manager.profile().scheduler.filters.names(),
                        weighers = ?self.manager.profile().scheduler.weighers.names(),
                        "{why}: {resolved}, from now on (was {before})"
                    );
                    for warning in release_warnings(&self.config, resolved.series) {
                        warn!("{warning}");
                    }
                    resolved.series
                }
                Err(e) => {
                    error!(
                        "{why}: the control plane reads as {}, but nova.conf does not \
                         build as it: {e}; still scheduling as {before}",
                        resolved.series
                    );
                    before
                }
            },
            Err(too_old) => {
                error!("{why}: {too_old}; still scheduling as {before}");
                before
            }
        };
        let version = chosen.version.min(now.service_version());
        match self.row.set_version(version).await {
            Ok(true) => info!("{why}: nova-scheduler service row version {version} ({chosen})"),
            Ok(false) => {}
            Err(e) => {
                warn!(error = %e, "{why}: could not write the nova-scheduler service row's version {version}")
            }
        }
        true
    }

    /// Started when no database held a nova service row at startup (a cloud being
    /// installed, this daemon first): every `interval`, until the first nova service
    /// rows appear and are followed.
    pub(super) async fn await_first_service_rows(self: Arc<Self>, interval: Duration) {
        let mut tick = tokio::time::interval(interval);
        tick.tick().await;
        loop {
            tick.tick().await;
            if self.follow("the first nova service rows appeared").await {
                return;
            }
        }
    }

    /// SIGHUP: the logging options are applied again ([`crate::telemetry::reload`]);
    /// nova's `reset()` re-reads the cell mappings; the cache then re-reads every cell
    /// and the aggregates; then the control plane's release is followed.
    pub(super) async fn reload_on_sighup(
        self: Arc<Self>,
        cache: Option<Arc<crate::state::HostStateCache>>,
    ) {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let Ok(mut hup) = signal(SignalKind::hangup()) else {
                warn!("cannot listen for SIGHUP; cell mappings reload only at restart");
                return;
            };
            while hup.recv().await.is_some() {
                // oslo.log's mutable options (debug, default_log_levels); the log file
                // is reopened.
                crate::telemetry::reload();
                info!("SIGHUP: reloading cell mappings and host states");
                match &cache {
                    Some(cache) => cache.reset().await,
                    None => self.store.reload_cells().await,
                }
                if !self.follow("SIGHUP").await {
                    info!(
                        "SIGHUP: no nova service row yet; still scheduling as {}",
                        self.scheduling_as()
                    );
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = cache;
        }
    }
}
