// SPDX-License-Identifier: Apache-2.0
//! The notification message oslo.messaging's `Notifier` sends: `{message_id, publisher_id,
//! event_type, priority, payload, timestamp}`, plus the `_unique_id` and the
//! `_context_*` keys its AMQP driver adds, with the context of nova's
//! `RequestContext.redacted_copy().to_dict()`.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};

use crate::rpc::RequestContext;

/// The context dict nova serializes into a notification: `redacted_copy()` keeps the
/// identity fields and drops the token, the catalog, the address and the quota class;
/// the copy gets a fresh timestamp.
pub fn notification_context(ctx: &RequestContext, now: DateTime<Utc>) -> Map<String, Value> {
    let get = |k: &str| ctx.get(k).cloned().unwrap_or(Value::Null);
    let user_id = get("user_id");
    let project_id = get("project_id");
    let domain = get("domain");
    let user_domain = get("user_domain");
    let project_domain = get("project_domain");
    let dash = |v: &Value| match v {
        Value::String(s) if !s.is_empty() => s.clone(),
        _ => "-".to_string(),
    };
    let user_identity = format!(
        "{} {} {} {} {}",
        dash(&user_id),
        dash(&project_id),
        dash(&domain),
        dash(&user_domain),
        dash(&project_domain)
    );
    let is_admin = match ctx.get("is_admin") {
        Some(Value::Bool(b)) => Value::Bool(*b),
        _ => Value::Bool(false),
    };
    let roles = match ctx.get("roles") {
        Some(Value::Array(r)) => Value::Array(r.clone()),
        _ => Value::Array(Vec::new()),
    };
    let mut m = Map::new();
    m.insert("user".into(), user_id.clone());
    m.insert("project_id".into(), project_id.clone());
    m.insert("system_scope".into(), get("system_scope"));
    m.insert("project".into(), project_id.clone());
    m.insert("domain".into(), domain);
    m.insert("user_domain".into(), user_domain);
    m.insert("project_domain".into(), project_domain);
    m.insert("is_admin".into(), is_admin);
    m.insert("read_only".into(), Value::Bool(false));
    m.insert("show_deleted".into(), Value::Bool(false));
    m.insert("auth_token".into(), Value::Null);
    m.insert("request_id".into(), get("request_id"));
    m.insert("global_request_id".into(), get("global_request_id"));
    m.insert("resource_uuid".into(), Value::Null);
    m.insert("roles".into(), roles);
    m.insert("user_identity".into(), Value::String(user_identity));
    m.insert("is_admin_project".into(), Value::Bool(true));
    m.insert("user_id".into(), user_id);
    m.insert("read_deleted".into(), Value::String("no".into()));
    m.insert("remote_address".into(), Value::Null);
    m.insert(
        "timestamp".into(),
        Value::String(now.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()),
    );
    m.insert("quota_class".into(), Value::Null);
    m.insert("user_name".into(), get("user_name"));
    m.insert("service_catalog".into(), Value::Array(Vec::new()));
    m.insert("project_name".into(), get("project_name"));
    m
}

/// `str(timeutils.utcnow())`: `YYYY-MM-DD HH:MM:SS.ffffff`, without the fraction when
/// the microseconds are 0 (Python's `datetime.__str__`).
pub fn python_timestamp(now: DateTime<Utc>) -> String {
    if now.timestamp_subsec_micros() == 0 {
        now.format("%Y-%m-%d %H:%M:%S").to_string()
    } else {
        now.format("%Y-%m-%d %H:%M:%S%.6f").to_string()
    }
}

/// One notification as its drivers receive it.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// e.g. `scheduler.select_destinations.start`.
    pub event_type: String,
    /// `scheduler.<host>` (legacy) or `nova-scheduler:<host>` (versioned).
    pub publisher_id: String,
    /// `INFO`, ...
    pub priority: String,
    /// The payload (a dict for legacy, an object primitive for versioned).
    pub payload: Value,
    /// `notification_context` of the request.
    pub context: Map<String, Value>,
    /// uuid4, hyphenated.
    pub message_id: String,
    /// [`python_timestamp`].
    pub timestamp: String,
}

impl Notification {
    /// The dict the AMQP driver publishes (before the 2.0 envelope, if any):
    /// `_unique_id` and `_context_<key>` added to the notifier's message.
    pub fn wire_message(&self, unique_id: &str) -> Value {
        let mut m = Map::new();
        m.insert("message_id".into(), Value::String(self.message_id.clone()));
        m.insert(
            "publisher_id".into(),
            Value::String(self.publisher_id.clone()),
        );
        m.insert("event_type".into(), Value::String(self.event_type.clone()));
        m.insert("priority".into(), Value::String(self.priority.clone()));
        m.insert("payload".into(), self.payload.clone());
        m.insert("timestamp".into(), Value::String(self.timestamp.clone()));
        m.insert("_unique_id".into(), Value::String(unique_id.into()));
        for (k, v) in &self.context {
            m.insert(format!("_context_{k}"), v.clone());
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    #[test]
    fn timestamps_as_python_prints_them() {
        let t = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap();
        assert_eq!(python_timestamp(t), "2026-01-02 03:04:05");
        let t = t + chrono::Duration::microseconds(42);
        assert_eq!(python_timestamp(t), "2026-01-02 03:04:05.000042");
    }

    #[test]
    fn context_is_redacted() {
        let mut m = Map::new();
        m.insert("auth_token".into(), json!("secret"));
        m.insert("user_id".into(), json!("u"));
        m.insert("project_id".into(), json!("p"));
        m.insert("remote_address".into(), json!("10.0.0.1"));
        let c = notification_context(&RequestContext::from_map(m), Utc::now());
        assert_eq!(c["auth_token"], Value::Null);
        assert_eq!(c["remote_address"], Value::Null);
        assert_eq!(c["user_identity"], "u p - - -");
        assert_eq!(c.len(), 25);
    }
}
