// SPDX-License-Identifier: Apache-2.0
//! The request context carried by every RPC message as `_context_<key>` entries
//! (`RequestContext.to_dict()` in nova's `nova/context.py`).

use std::fmt;

use serde_json::{Map, Value};

/// Context keys whose values are secrets or too big for logs: masked by `Debug`.
const MASKED_KEYS: &[&str] = &["auth_token", "service_catalog", "trace_info"];

/// The `_context_*` map of a request, with the prefix stripped.
///
/// `Debug` masks `auth_token`, `service_catalog` and `trace_info` (it holds an HMAC key),
/// and any key naming a password or secret, so the context can be logged.
#[derive(Clone, Default, PartialEq)]
pub struct RequestContext {
    values: Map<String, Value>,
}

impl RequestContext {
    /// Wrap an already prefix-stripped context map.
    pub fn from_map(values: Map<String, Value>) -> Self {
        Self { values }
    }

    /// A raw value (`None` when absent; JSON `null` is `Some(Value::Null)`).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// A string value; `None` when absent, null or not a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.values.get(key).and_then(Value::as_str)
    }

    /// `request_id` (`req-<uuid>`).
    pub fn request_id(&self) -> Option<&str> {
        self.get_str("request_id")
    }

    /// `global_request_id`, often null.
    pub fn global_request_id(&self) -> Option<&str> {
        self.get_str("global_request_id")
    }

    /// `user_id` (falls back to oslo.context's `user`).
    pub fn user_id(&self) -> Option<&str> {
        self.get_str("user_id").or_else(|| self.get_str("user"))
    }

    /// `project_id` (falls back to oslo.context's `project`, then the pre-4.0 `tenant`).
    pub fn project_id(&self) -> Option<&str> {
        self.get_str("project_id")
            .or_else(|| self.get_str("project"))
            .or_else(|| self.get_str("tenant"))
    }

    /// The Keystone token. A secret: never log it.
    pub fn auth_token(&self) -> Option<&str> {
        self.get_str("auth_token")
    }

    /// `roles` (empty when absent).
    pub fn roles(&self) -> Vec<&str> {
        self.values
            .get("roles")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    /// `is_admin` (false when absent).
    pub fn is_admin(&self) -> bool {
        self.values
            .get("is_admin")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    /// `read_deleted` (nova's default `"no"` when absent).
    pub fn read_deleted(&self) -> &str {
        self.get_str("read_deleted").unwrap_or("no")
    }

    /// The whole map.
    pub fn as_map(&self) -> &Map<String, Value> {
        &self.values
    }

    /// The whole map, owned.
    pub fn into_map(self) -> Map<String, Value> {
        self.values
    }

    /// The map as message keys (`_context_<key>`), as oslo's `pack_context` writes them.
    pub fn to_message_keys(&self) -> Map<String, Value> {
        self.values
            .iter()
            .map(|(k, v)| (format!("_context_{k}"), v.clone()))
            .collect()
    }

    fn is_masked(key: &str) -> bool {
        let lower = key.to_ascii_lowercase();
        MASKED_KEYS.contains(&key) || lower.contains("password") || lower.contains("secret")
    }
}

impl fmt::Debug for RequestContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut m = f.debug_map();
        for (k, v) in &self.values {
            if Self::is_masked(k) {
                m.entry(k, &"***");
            } else {
                m.entry(k, v);
            }
        }
        m.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn accessors_and_masked_debug() {
        let ctx = RequestContext::from_map(
            json!({
                "request_id": "req-1",
                "global_request_id": null,
                "user": "u-old",
                "project_id": "p1",
                "auth_token": "gAAAAA-top-secret",
                "service_catalog": [{"endpoints": [{"url": "http://x"}]}],
                "roles": ["member", "reader"],
                "is_admin": true,
            })
            .as_object()
            .unwrap()
            .clone(),
        );
        assert_eq!(ctx.request_id(), Some("req-1"));
        assert_eq!(ctx.global_request_id(), None);
        assert_eq!(ctx.user_id(), Some("u-old"));
        assert_eq!(ctx.project_id(), Some("p1"));
        assert_eq!(ctx.auth_token(), Some("gAAAAA-top-secret"));
        assert_eq!(ctx.roles(), vec!["member", "reader"]);
        assert!(ctx.is_admin());
        assert_eq!(ctx.read_deleted(), "no");
        let dbg = format!("{ctx:?}");
        assert!(!dbg.contains("top-secret"), "{dbg}");
        assert!(!dbg.contains("http://x"), "{dbg}");
        assert!(dbg.contains("req-1"));
        assert_eq!(
            ctx.to_message_keys().get("_context_request_id"),
            Some(&json!("req-1"))
        );
    }
}
