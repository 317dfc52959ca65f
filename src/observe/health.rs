// SPDX-License-Identifier: Apache-2.0
//! Liveness (`/healthz`) and readiness (`/readyz`), and systemd's `sd_notify`.
//!
//! Live: a task on the runtime stamps a heartbeat every second; the process is live
//! while that stamp is recent (a runtime whose workers are all stuck stops stamping).
//! Ready: consuming the `scheduler` topic (which needs the broker), Placement serving
//! this daemon's requests (reachable, TLS and credentials accepted), and, when the
//! warm cache or the provider index is on, each refreshed within its bound.

use super::metrics::{metrics, unix_now};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::{debug, info, warn};

/// How often the liveness heartbeat is stamped, and how old it may be.
const HEARTBEAT: Duration = Duration::from_secs(1);
const HEARTBEAT_STALE: Duration = Duration::from_secs(10);

/// What readiness asks of the background refreshes: `None` where one is off.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadinessBounds {
    /// Oldest acceptable host-state cache pass.
    pub cache: Option<Duration>,
    /// Oldest acceptable provider-index refresh.
    pub index: Option<Duration>,
}

impl ReadinessBounds {
    /// The bound for a refresh that runs every `interval`: ten intervals, at least a
    /// minute, so one slow pass under load does not take the daemon out of rotation.
    pub fn for_interval(interval: Duration) -> Duration {
        (interval * 10).max(Duration::from_secs(60))
    }
}

/// A verdict with its reason, as the endpoints answer it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub ok: bool,
    pub reasons: Vec<String>,
}

impl Verdict {
    pub fn to_json(&self) -> String {
        json!({
            "status": if self.ok { "ok" } else { "unavailable" },
            "reasons": self.reasons,
        })
        .to_string()
    }
}

/// The daemon's health, shared by the listener and the systemd watchdog.
#[derive(Debug)]
pub struct Health {
    bounds: ReadinessBounds,
    /// Unix milliseconds of the last heartbeat.
    heartbeat: AtomicU64,
    /// What startup is waiting for (a database), while it waits.
    starting: Mutex<Option<String>>,
    /// Why Placement cannot serve this daemon's requests, while it cannot.
    placement: Mutex<Option<String>>,
}

impl Health {
    pub fn new(bounds: ReadinessBounds) -> Arc<Health> {
        Arc::new(Health {
            bounds,
            heartbeat: AtomicU64::new(now_ms()),
            starting: Mutex::new(None),
            placement: Mutex::new(None),
        })
    }

    /// Startup is waiting for `what` (e.g. "waiting for the database nova_api at
    /// db:3306"): not ready, with that reason, until [`Health::started`].
    pub fn starting(&self, what: impl Into<String>) {
        *self.starting.lock().unwrap_or_else(|e| e.into_inner()) = Some(what.into());
    }

    /// Startup no longer waits.
    pub fn started(&self) {
        *self.starting.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// What the Placement client found last: `Some(reason)` while Placement cannot
    /// serve requests (unreachable, TLS handshake or credentials refused).
    pub fn placement(&self, problem: Option<String>) {
        *self.placement.lock().unwrap_or_else(|e| e.into_inner()) = problem;
    }

    /// Stamps the heartbeat every second, forever.
    pub async fn beat(self: Arc<Self>) {
        let mut tick = tokio::time::interval(HEARTBEAT);
        loop {
            tick.tick().await;
            self.heartbeat.store(now_ms(), Ordering::Relaxed);
        }
    }

    pub fn live(&self) -> Verdict {
        let age = now_ms().saturating_sub(self.heartbeat.load(Ordering::Relaxed));
        if age > HEARTBEAT_STALE.as_millis() as u64 {
            return Verdict {
                ok: false,
                reasons: vec![format!("event loop unresponsive for {} ms", age)],
            };
        }
        Verdict {
            ok: true,
            reasons: Vec::new(),
        }
    }

    /// `/readyz`: started, consuming, caches fresh, and Placement answering.
    pub fn ready(&self) -> Verdict {
        self.verdict(true)
    }

    /// Ready to serve as far as the daemon itself goes: [`Health::ready`] without
    /// Placement's state. systemd's `READY=1` waits for this, since a Placement outage
    /// at startup is waited out (as nova-scheduler waits it out), not a failed start.
    pub fn started_serving(&self) -> Verdict {
        self.verdict(false)
    }

    fn verdict(&self, with_placement: bool) -> Verdict {
        let m = metrics();
        let mut reasons = Vec::new();
        if let Some(what) = &*self.starting.lock().unwrap_or_else(|e| e.into_inner()) {
            reasons.push(format!("starting: {what}"));
        }
        if m.rpc_consuming.get() != 1 {
            reasons
                .push("not consuming the scheduler topic (broker unreachable or starting)".into());
        }
        if let Some(problem) = with_placement
            .then(|| {
                self.placement
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone()
            })
            .flatten()
        {
            reasons.push(format!("Placement unreachable: {problem}"));
        }
        let now = unix_now();
        let stale = |what: &str, stamp: f64, bound: Duration| -> Option<String> {
            if stamp <= 0.0 {
                return Some(format!("{what} not loaded yet"));
            }
            let age = now - stamp;
            (age > bound.as_secs_f64()).then(|| {
                format!(
                    "{what} last refreshed {age:.0} s ago (bound {} s)",
                    bound.as_secs()
                )
            })
        };
        if let Some(bound) = self.bounds.cache {
            reasons.extend(stale("host-state cache", m.cache_last_pass.get(), bound));
        }
        if let Some(bound) = self.bounds.index {
            reasons.extend(stale(
                "placement provider index",
                m.index_last_refresh.get(),
                bound,
            ));
        }
        Verdict {
            ok: reasons.is_empty(),
            reasons,
        }
    }
}

fn now_ms() -> u64 {
    (unix_now() * 1000.0) as u64
}

/// systemd's notification protocol: `READY=1` once ready, `WATCHDOG=1` while live
/// (when the unit sets `WatchdogSec`), `STOPPING=1` on drain. Does nothing unless
/// systemd set `NOTIFY_SOCKET`.
#[derive(Debug, Clone)]
pub struct SystemdNotifier {
    active: bool,
}

impl SystemdNotifier {
    pub fn from_env() -> SystemdNotifier {
        SystemdNotifier {
            active: std::env::var_os("NOTIFY_SOCKET").is_some(),
        }
    }

    fn send(&self, state: sd_notify::NotifyState<'_>, what: &str) {
        if !self.active {
            return;
        }
        match sd_notify::notify(&[state]) {
            Ok(()) => debug!(state = what, "notified systemd"),
            Err(e) => warn!(error = %e, state = what, "could not notify systemd"),
        }
    }

    /// Waits until the daemon serves (Placement's state aside), says `READY=1`, then,
    /// when systemd watches, says `WATCHDOG=1` every half period while the daemon is
    /// live. Readiness is not
    /// asked: a broker outage is waited out by reconnecting, and a restart by
    /// systemd would only wait for the same broker.
    pub async fn run(self, health: Arc<Health>) {
        if !self.active {
            return;
        }
        let mut poll = tokio::time::interval(Duration::from_millis(200));
        while !health.started_serving().ok {
            poll.tick().await;
        }
        self.send(sd_notify::NotifyState::Ready, "READY=1");
        info!("told systemd the daemon is ready");
        let Some(period) = sd_notify::watchdog_enabled() else {
            return;
        };
        let mut tick = tokio::time::interval(period / 2);
        loop {
            tick.tick().await;
            if health.live().ok {
                self.send(sd_notify::NotifyState::Watchdog, "WATCHDOG=1");
            }
        }
    }

    /// `STATUS=...`: what `systemctl status` shows (startup waiting for a database).
    pub fn status(&self, text: &str) {
        self.send(sd_notify::NotifyState::Status(text), "STATUS");
    }

    /// `STOPPING=1`: the daemon drains and stops.
    pub fn stopping(&self) {
        self.send(sd_notify::NotifyState::Stopping, "STOPPING=1");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_bound_is_ten_intervals_and_at_least_a_minute() {
        assert_eq!(
            ReadinessBounds::for_interval(Duration::from_secs(1)),
            Duration::from_secs(60)
        );
        assert_eq!(
            ReadinessBounds::for_interval(Duration::from_secs(30)),
            Duration::from_secs(300)
        );
    }

    #[test]
    fn a_fresh_heartbeat_is_live_and_verdicts_say_why() {
        let health = Health::new(ReadinessBounds::default());
        assert!(health.live().ok);
        health.heartbeat.store(now_ms() - 60_000, Ordering::Relaxed);
        let v = health.live();
        assert!(!v.ok);
        assert!(v.to_json().contains("unresponsive"), "{}", v.to_json());
    }

    #[test]
    fn a_waiting_startup_is_a_readiness_reason_until_started() {
        let health = Health::new(ReadinessBounds::default());
        health.starting("waiting for the database nova_api at db:3306");
        let v = health.ready();
        assert!(!v.ok);
        assert_eq!(
            v.reasons[0],
            "starting: waiting for the database nova_api at db:3306"
        );
        health.started();
        assert!(!health
            .ready()
            .reasons
            .iter()
            .any(|r| r.starts_with("starting")));
    }
}
