// SPDX-License-Identifier: Apache-2.0
//! nova's scheduler notifications: `scheduler.select_destinations.start` and `.end`,
//! legacy (unversioned) and versioned, routed to oslo.messaging's notification drivers
//! as nova 34 configures them (`nova/rpc.py` `init`):
//!
//! | `[notifications] notification_format` | legacy notifier | versioned notifier |
//! |---|---|---|
//! | `unversioned` (default) | `[oslo_messaging_notifications] driver`, `topics` | off |
//! | `both` | same | same drivers, `versioned_notifications_topics` |
//! | `versioned` | off | same drivers, `versioned_notifications_topics` |
//!
//! Drivers: `messaging` (the message dict as the body), `messagingv2` (the 2.0 envelope),
//! `log` (one log line per notification, target `oslo.messaging.notification.<event>`),
//! `noop` and `test` (nothing leaves the process). `routing` is not supported (warned at
//! start, then ignored). Publishers: legacy `scheduler.<host>`, versioned
//! `nova-scheduler:<host>`; priority `INFO`; routing key `<topic>.info`.
//!
//! - [`payload`]: the payloads, pure, from the `RequestSpec` primitive.
//! - [`message`]: the message dict and the redacted context.
//! - The AMQP side is [`crate::rpc::notifier`]; sending never blocks the caller.

pub mod message;
pub mod payload;

use std::sync::Arc;

use chrono::Utc;
use serde_json::Value;

use crate::rpc::RequestContext;
pub use message::Notification;
pub use payload::NotifiedSpec;

/// Where encoded notifications go (the AMQP publisher). Must not block.
pub trait NotificationSink: Send + Sync {
    /// Queue one message for `<topic>.<priority>`; `envelope` = messagingv2.
    fn send(&self, routing_key: String, message: Value, envelope: bool);
}

impl NotificationSink for crate::rpc::notifier::AmqpNotificationPublisher {
    fn send(&self, routing_key: String, message: Value, envelope: bool) {
        self.publish(routing_key, message, envelope);
    }
}

/// One oslo.messaging notification driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// `messaging`: message format 1.0 (the dict itself).
    Messaging,
    /// `messagingv2`: message format 2.0 (`oslo.version` / `oslo.message`).
    MessagingV2,
    /// `log`: a log line.
    Log,
    /// `noop` (and `test`): nothing.
    Noop,
}

impl Driver {
    /// The driver of an entry-point name; `None` for ones this daemon does not have.
    pub fn from_name(name: &str) -> Option<Driver> {
        match name {
            "messaging" => Some(Driver::Messaging),
            "messagingv2" => Some(Driver::MessagingV2),
            "log" => Some(Driver::Log),
            "noop" | "test" => Some(Driver::Noop),
            _ => None,
        }
    }
}

/// One of nova's two notifiers: its drivers and topics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Route {
    /// Drivers (after dropping unsupported names).
    pub drivers: Vec<Driver>,
    /// Topics, e.g. `["notifications"]`.
    pub topics: Vec<String>,
}

impl Route {
    fn needs_amqp(&self) -> bool {
        self.drivers
            .iter()
            .any(|d| matches!(d, Driver::Messaging | Driver::MessagingV2))
    }

    /// nova's `NOTIFIER.is_enabled()`: any driver other than a lone `noop`.
    fn is_enabled(&self) -> bool {
        !self.drivers.iter().all(|d| *d == Driver::Noop) || self.drivers.is_empty()
    }
}

/// The notification settings of nova.conf, resolved.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NotifierSettings {
    /// `[DEFAULT] host` (publisher ids).
    pub host: String,
    /// The legacy notifier; `None` when `notification_format = versioned`.
    pub legacy: Option<Route>,
    /// The versioned notifier; `None` when `notification_format = unversioned`.
    pub versioned: Option<Route>,
}

impl NotifierSettings {
    /// From `[oslo_messaging_notifications] driver` / `topics` and `[notifications]`.
    /// Returns the settings and the driver names that are not supported.
    pub fn new(
        host: &str,
        driver_names: &[String],
        topics: &[String],
        notification_format: &str,
        versioned_topics: &[String],
    ) -> (Self, Vec<String>) {
        let mut unsupported = Vec::new();
        let mut drivers = Vec::new();
        for name in driver_names {
            match Driver::from_name(name) {
                Some(d) => drivers.push(d),
                None => unsupported.push(name.clone()),
            }
        }
        let legacy = Route {
            drivers: drivers.clone(),
            topics: topics.to_vec(),
        };
        let versioned = Route {
            drivers,
            topics: versioned_topics.to_vec(),
        };
        let settings = NotifierSettings {
            host: host.to_string(),
            legacy: (notification_format != "versioned").then_some(legacy),
            versioned: (notification_format != "unversioned").then_some(versioned),
        };
        (settings, unsupported)
    }

    /// Whether any notification would leave the process (needs a publisher).
    pub fn needs_amqp(&self) -> bool {
        self.legacy.as_ref().is_some_and(Route::needs_amqp)
            || self.versioned.as_ref().is_some_and(Route::needs_amqp)
    }

    /// Whether there is anything to build at all.
    pub fn is_active(&self) -> bool {
        let legacy = self
            .legacy
            .as_ref()
            .is_some_and(|r| r.drivers.iter().any(|d| *d != Driver::Noop));
        let versioned = self
            .versioned
            .as_ref()
            .is_some_and(|r| r.is_enabled() && r.drivers.iter().any(|d| *d != Driver::Noop));
        legacy || versioned
    }
}

/// The two phases of `select_destinations`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Before host selection.
    Start,
    /// After a successful selection.
    End,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Start => "start",
            Phase::End => "end",
        }
    }
}

/// Sends nova's scheduler notifications through the configured drivers.
pub struct Notifier {
    settings: NotifierSettings,
    sink: Option<Arc<dyn NotificationSink>>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("settings", &self.settings)
            .field("sink", &self.sink.is_some())
            .finish()
    }
}

impl Notifier {
    /// `sink` receives the messaging/messagingv2 traffic; without one those drivers
    /// send nothing.
    pub fn new(settings: NotifierSettings, sink: Option<Arc<dyn NotificationSink>>) -> Self {
        Notifier { settings, sink }
    }

    /// Whether [`Self::select_destinations`] does anything.
    pub fn is_active(&self) -> bool {
        self.settings.is_active()
    }

    /// The legacy and then the versioned `scheduler.select_destinations.<phase>`, as
    /// nova's `_select_destinations` sends them. Never blocks.
    pub fn select_destinations(&self, ctx: &RequestContext, spec: &mut NotifiedSpec, phase: Phase) {
        let now = Utc::now();
        let event_type = format!("scheduler.select_destinations.{}", phase.as_str());
        let context = message::notification_context(ctx, now);
        let timestamp = message::python_timestamp(now);
        if let Some(route) = self.settings.legacy.as_ref().filter(|r| r.is_enabled()) {
            let n = Notification {
                event_type: event_type.clone(),
                publisher_id: format!("scheduler.{}", self.settings.host),
                priority: "INFO".into(),
                payload: spec.legacy_payload(),
                context: context.clone(),
                message_id: uuid::Uuid::new_v4().to_string(),
                timestamp: timestamp.clone(),
            };
            self.emit(route, &n);
        }
        if let Some(route) = self.settings.versioned.as_ref().filter(|r| r.is_enabled()) {
            let n = Notification {
                event_type,
                publisher_id: format!("nova-scheduler:{}", self.settings.host),
                priority: "INFO".into(),
                payload: spec.versioned_payload(),
                context,
                message_id: uuid::Uuid::new_v4().to_string(),
                timestamp,
            };
            self.emit(route, &n);
        }
    }

    fn emit(&self, route: &Route, n: &Notification) {
        for driver in &route.drivers {
            match driver {
                Driver::Noop => {}
                Driver::Log => {
                    let line = n.wire_message(&crate::rpc::envelope::new_unique_id());
                    tracing::info!(
                        target: "oslo.messaging.notification",
                        event_type = %n.event_type,
                        "{}",
                        strip_unique_id(line)
                    );
                }
                Driver::Messaging | Driver::MessagingV2 => {
                    let Some(sink) = &self.sink else { continue };
                    for topic in &route.topics {
                        let routing_key = format!("{topic}.{}", n.priority.to_lowercase());
                        let message = n.wire_message(&crate::rpc::envelope::new_unique_id());
                        sink.send(routing_key, message, *driver == Driver::MessagingV2);
                    }
                }
            }
        }
    }
}

/// oslo's log driver logs the notifier's message (no `_unique_id`, no context keys).
fn strip_unique_id(mut v: Value) -> Value {
    if let Some(m) = v.as_object_mut() {
        m.retain(|k, _| !k.starts_with('_'));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Capture(Mutex<Vec<(String, Value, bool)>>);
    impl NotificationSink for Capture {
        fn send(&self, routing_key: String, message: Value, envelope: bool) {
            self.0
                .lock()
                .unwrap()
                .push((routing_key, message, envelope));
        }
    }

    fn settings(drivers: &[&str], format: &str) -> NotifierSettings {
        let names: Vec<String> = drivers.iter().map(|s| s.to_string()).collect();
        NotifierSettings::new(
            "h1",
            &names,
            &["notifications".into()],
            format,
            &["versioned_notifications".into()],
        )
        .0
    }

    #[test]
    fn format_selects_the_notifiers() {
        let spec = serde_json::json!({"nova_object.name": "RequestSpec", "nova_object.data": {}});
        for (format, drivers, expect) in [
            (
                "unversioned",
                vec!["messagingv2"],
                vec!["notifications.info"],
            ),
            (
                "both",
                vec!["messaging", "messagingv2"],
                vec![
                    "notifications.info",
                    "notifications.info",
                    "versioned_notifications.info",
                    "versioned_notifications.info",
                ],
            ),
            (
                "versioned",
                vec!["messagingv2"],
                vec!["versioned_notifications.info"],
            ),
            ("both", vec!["noop"], vec![]),
            ("both", vec![], vec![]),
        ] {
            let sink = Arc::new(Capture::default());
            let n = Notifier::new(settings(&drivers, format), Some(sink.clone()));
            let mut s = NotifiedSpec::new(spec.clone(), crate::release::NovaSeries::NEWEST);
            n.select_destinations(&RequestContext::default(), &mut s, Phase::Start);
            let got: Vec<String> = sink.0.lock().unwrap().iter().map(|x| x.0.clone()).collect();
            assert_eq!(got, expect, "{format} {drivers:?}");
        }
    }

    #[test]
    fn publishers_and_unsupported_drivers() {
        let (s, unsupported) = NotifierSettings::new(
            "h1",
            &["routing".into(), "messagingv2".into()],
            &["n".into()],
            "both",
            &["v".into()],
        );
        assert_eq!(unsupported, vec!["routing"]);
        let sink = Arc::new(Capture::default());
        let n = Notifier::new(s, Some(sink.clone()));
        let mut spec = NotifiedSpec::new(
            serde_json::json!({"nova_object.data": {}}),
            crate::release::NovaSeries::NEWEST,
        );
        n.select_destinations(&RequestContext::default(), &mut spec, Phase::End);
        let sent = sink.0.lock().unwrap();
        assert_eq!(sent[0].1["publisher_id"], "scheduler.h1");
        assert_eq!(sent[1].1["publisher_id"], "nova-scheduler:h1");
        assert_eq!(sent[1].1["event_type"], "scheduler.select_destinations.end");
        assert!(sent.iter().all(|x| x.2));
    }
}
