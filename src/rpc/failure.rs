// SPDX-License-Identifier: Apache-2.0
//! Remote errors: what an endpoint returns instead of a result, and how oslo.messaging
//! puts it on the wire (`serialize_remote_exception` in
//! `oslo_messaging/_drivers/common.py`).
//!
//! The reply's `failure` is the JSON **string** of
//! `{"class", "module", "message", "tb", "args", "kwargs"}`. The caller rebuilds
//! `module.class(*args, **kwargs)` when the module is `builtins` or in its allowed list
//! (nova: `nova.exception`), otherwise it raises `oslo_messaging.RemoteError`. So `args`
//! and `kwargs` must be what the Python constructor accepts: builtins take positional
//! args only, `NovaException` subclasses take `(message, **kwargs)`.

use std::fmt;

use serde_json::{json, Map, Value};

/// Module of oslo.messaging's dispatcher errors.
pub const DISPATCHER_MODULE: &str = "oslo_messaging.rpc.dispatcher";
/// Module of Python's built-in exceptions.
pub const BUILTINS_MODULE: &str = "builtins";
/// Module of nova's exceptions.
pub const NOVA_EXCEPTION_MODULE: &str = "nova.exception";

/// A failure sent back to the caller of an RPC call.
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteError {
    /// Exception class name, e.g. `NoValidHost`.
    pub class: String,
    /// Python module of the class, e.g. `nova.exception`.
    pub module: String,
    /// `str(exception)`.
    pub message: String,
    /// Positional constructor arguments.
    pub args: Vec<Value>,
    /// Keyword constructor arguments (the exception's `kwargs` attribute).
    pub kwargs: Map<String, Value>,
}

impl RemoteError {
    /// An exception built as `class(message)`: `args = [message]`, no kwargs.
    pub fn new(
        class: impl Into<String>,
        module: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        let message = message.into();
        Self {
            class: class.into(),
            module: module.into(),
            args: vec![Value::String(message.clone())],
            message,
            kwargs: Map::new(),
        }
    }

    /// A Python built-in exception (`ValueError`, `TypeError`, `RuntimeError`, …).
    pub fn builtin(class: impl Into<String>, message: impl Into<String>) -> Self {
        Self::new(class, BUILTINS_MODULE, message)
    }

    /// `builtins.ValueError(message)`.
    pub fn value_error(message: impl Into<String>) -> Self {
        Self::builtin("ValueError", message)
    }

    /// `builtins.TypeError(message)`.
    pub fn type_error(message: impl Into<String>) -> Self {
        Self::builtin("TypeError", message)
    }

    /// `builtins.RuntimeError(message)`.
    pub fn runtime_error(message: impl Into<String>) -> Self {
        Self::builtin("RuntimeError", message)
    }

    /// A `nova.exception` class as `NovaException.__init__` serializes it: the formatted
    /// message as the only positional argument, the format kwargs plus `code`.
    pub fn nova(
        class: impl Into<String>,
        message: impl Into<String>,
        code: u16,
        mut kwargs: Map<String, Value>,
    ) -> Self {
        kwargs.insert("code".into(), json!(code));
        Self {
            kwargs,
            ..Self::new(class, NOVA_EXCEPTION_MODULE, message)
        }
    }

    /// `nova.exception.NoValidHost(reason=reason)`: `"No valid host was found. <reason>"`, code 500.
    pub fn no_valid_host(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        let mut kwargs = Map::new();
        kwargs.insert("reason".into(), Value::String(reason.clone()));
        Self::nova(
            "NoValidHost",
            format!("No valid host was found. {reason}"),
            500,
            kwargs,
        )
    }

    /// `oslo_messaging.rpc.dispatcher.NoSuchMethod(method)`.
    pub fn no_such_method(method: &str) -> Self {
        Self::new(
            "NoSuchMethod",
            DISPATCHER_MODULE,
            format!("Endpoint does not support RPC method {method}"),
        )
    }

    /// `oslo_messaging.rpc.dispatcher.UnsupportedVersion(version, method=method)`.
    pub fn unsupported_version(version: &str, method: &str) -> Self {
        let mut message = format!("Endpoint does not support RPC version {version}");
        if !method.is_empty() {
            message = format!("{message}. Attempted method: {method}");
        }
        Self::new("UnsupportedVersion", DISPATCHER_MODULE, message)
    }

    /// Replace the positional arguments.
    pub fn with_args(mut self, args: Vec<Value>) -> Self {
        self.args = args;
        self
    }

    /// Replace the keyword arguments.
    pub fn with_kwargs(mut self, kwargs: Map<String, Value>) -> Self {
        self.kwargs = kwargs;
        self
    }

    /// A short Python-style traceback: it ends up in the caller's `str(exception)` and
    /// logs, so it names only the method, never arguments or context.
    pub fn traceback(&self, method: &str) -> Vec<String> {
        let qualified = if self.module == BUILTINS_MODULE || self.module.is_empty() {
            self.class.clone()
        } else {
            format!("{}.{}", self.module, self.class)
        };
        vec![
            "Traceback (most recent call last):\n".to_string(),
            format!("  File \"nova-scheduler-rs\", in {method}\n"),
            format!("{qualified}: {}\n", self.message),
        ]
    }

    /// The failure dict of a reply, as a JSON value (`tb` from [`Self::traceback`]).
    pub fn to_failure_value(&self, method: &str) -> Value {
        json!({
            "class": self.class,
            "module": self.module,
            "message": self.message,
            "tb": self.traceback(method),
            "args": self.args,
            "kwargs": self.kwargs,
        })
    }

    /// The reply's `failure` field: the failure dict encoded as a JSON string.
    pub fn to_failure_string(&self, method: &str) -> String {
        self.to_failure_value(method).to_string()
    }

    /// Parse a reply's `failure` string back (tests, tooling). Missing keys default to empty.
    pub fn from_failure_str(failure: &str) -> Option<Self> {
        let v: Value = serde_json::from_str(failure).ok()?;
        let o = v.as_object()?;
        let s = |k: &str| o.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Some(Self {
            class: s("class"),
            module: s("module"),
            message: s("message"),
            args: o
                .get("args")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            kwargs: o
                .get("kwargs")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default(),
        })
    }
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}: {}", self.module, self.class, self.message)
    }
}

impl std::error::Error for RemoteError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatcher_errors_match_oslo_constructors() {
        let e = RemoteError::no_such_method("frobnicate");
        assert_eq!(e.module, "oslo_messaging.rpc.dispatcher");
        assert_eq!(e.message, "Endpoint does not support RPC method frobnicate");
        assert_eq!(e.args, vec![json!(e.message)]);
        assert!(e.kwargs.is_empty());

        let e = RemoteError::unsupported_version("5.0", "select_destinations");
        assert_eq!(
            e.message,
            "Endpoint does not support RPC version 5.0. Attempted method: select_destinations"
        );
        assert_eq!(e.args, vec![json!(e.message)]);
    }

    #[test]
    fn failure_is_a_json_string_with_list_tb() {
        let s = RemoteError::no_valid_host("").to_failure_string("select_destinations");
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["class"], "NoValidHost");
        assert_eq!(v["module"], "nova.exception");
        assert_eq!(v["message"], "No valid host was found. ");
        assert_eq!(v["args"], json!(["No valid host was found. "]));
        assert_eq!(v["kwargs"], json!({"reason": "", "code": 500}));
        let tb = v["tb"].as_array().unwrap();
        assert!(tb.iter().all(Value::is_string));
        assert_eq!(
            tb.last().unwrap(),
            "nova.exception.NoValidHost: No valid host was found. \n"
        );
        assert_eq!(
            RemoteError::from_failure_str(&s).unwrap(),
            RemoteError::no_valid_host("")
        );
    }

    #[test]
    fn builtin_traceback_has_no_module_prefix() {
        let tb = RemoteError::value_error("bad").traceback("m");
        assert_eq!(tb.last().unwrap(), "ValueError: bad\n");
    }
}
