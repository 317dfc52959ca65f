// SPDX-License-Identifier: Apache-2.0
//! oslo.versionedobjects on the wire: reading and writing the primitives
//! `{"nova_object.name", "nova_object.namespace", "nova_object.version", "nova_object.data"}`,
//! and the field coercions (`IntegerField` is `int(value)`, `FloatField` is
//! `float(value)`, `StringField` is `str(value)`) applied to what they carry.
//!
//! It sits in `py`, the ground floor, because it is the Python side's wire format
//! and its coercions are Python's built-ins ([`super::int`], [`super::float`]): the
//! model, NUMA and PCI decoders all read primitives, so all of them point down here,
//! and nothing here points back up at them.

use serde_json::{Map, Value};

/// Why a primitive could not be decoded. The message names the object and field,
/// so the failure reply tells the caller what was wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

impl DecodeError {
    pub fn new(msg: impl Into<String>) -> Self {
        DecodeError(msg.into())
    }
}

/// The major version of every object this daemon reads, as nova 34 has them (all are
/// 1.x; `Instance` is 2.x but arrives only in casts, read field by field).
const MAJOR_VERSION: u64 = 1;

/// The `nova_object.data` of an envelope named `expected`. Any version of the same
/// major is accepted: fields added later are simply absent, unknown ones ignored.
/// Another major is refused, as oslo.versionedobjects refuses it
/// (`IncompatibleObjectVersion`): its fields may mean something else.
pub fn object_data<'a>(
    value: &'a Value,
    expected: &str,
) -> Result<&'a Map<String, Value>, DecodeError> {
    let obj = value
        .as_object()
        .ok_or_else(|| DecodeError::new(format!("{expected}: expected an object primitive")))?;
    let name = obj
        .get("nova_object.name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name != expected {
        return Err(DecodeError::new(format!(
            "expected a {expected} object, got {:?}",
            if name.is_empty() {
                "no nova_object.name"
            } else {
                name
            }
        )));
    }
    if let Some(ns) = obj.get("nova_object.namespace").and_then(Value::as_str) {
        if ns != "nova" {
            return Err(DecodeError::new(format!(
                "{expected}: unsupported object namespace {ns:?}"
            )));
        }
    }
    let version = obj
        .get("nova_object.version")
        .and_then(Value::as_str)
        .ok_or_else(|| DecodeError::new(format!("{expected}: missing nova_object.version")))?;
    let major = version
        .split('.')
        .next()
        .and_then(|m| m.parse::<u64>().ok())
        .ok_or_else(|| {
            DecodeError::new(format!(
                "{expected}: nova_object.version {version:?} is not major.minor"
            ))
        })?;
    if major != MAJOR_VERSION {
        return Err(DecodeError::new(format!(
            "Version {version} of {expected} is not supported, supported version is \
             {MAJOR_VERSION}.x"
        )));
    }
    obj.get("nova_object.data")
        .and_then(Value::as_object)
        .ok_or_else(|| DecodeError::new(format!("{expected}: missing nova_object.data")))
}

/// Builds an envelope the way oslo.versionedobjects serializes a fresh object:
/// every set field is listed in `nova_object.changes`.
pub fn envelope(name: &str, version: &str, data: Map<String, Value>) -> Value {
    let changes: Vec<Value> = data.keys().map(|k| Value::String(k.clone())).collect();
    let mut obj = Map::new();
    obj.insert("nova_object.name".into(), Value::String(name.into()));
    obj.insert("nova_object.namespace".into(), Value::String("nova".into()));
    obj.insert("nova_object.version".into(), Value::String(version.into()));
    obj.insert("nova_object.data".into(), Value::Object(data));
    obj.insert("nova_object.changes".into(), Value::Array(changes));
    Value::Object(obj)
}

/// Field accessors that distinguish "unset" (absent) from `null`, and report type
/// errors with the object and field name.
pub struct Fields<'a> {
    pub object: &'static str,
    pub data: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    pub fn new(object: &'static str, data: &'a Map<String, Value>) -> Self {
        Fields { object, data }
    }

    /// The raw value when present and not null.
    pub fn get(&self, field: &str) -> Option<&'a Value> {
        self.data.get(field).filter(|v| !v.is_null())
    }

    pub fn is_set(&self, field: &str) -> bool {
        self.data.contains_key(field)
    }

    fn err(&self, field: &str, want: &str) -> DecodeError {
        DecodeError::new(format!("{}.{field}: expected {want}", self.object))
    }

    pub fn str(&self, field: &str) -> Result<Option<String>, DecodeError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            // oslo's StringField coerces numbers and booleans with str() (a float
            // as `repr(float)`).
            Some(v @ Value::Number(_)) => Ok(Some(super::value::json_str(v))),
            Some(Value::Bool(b)) => Ok(Some(if *b { "True" } else { "False" }.to_string())),
            Some(_) => Err(self.err(field, "a string")),
        }
    }

    /// An `IntegerField`: [`coerce_int`].
    pub fn int(&self, field: &str) -> Result<Option<i64>, DecodeError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => coerce_int(v)
                .map(Some)
                .map_err(|_| self.err(field, "an integer")),
        }
    }

    /// A `FloatField`: `float(value)`.
    pub fn float(&self, field: &str) -> Result<Option<f64>, DecodeError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(Value::Bool(b)) => Ok(Some(f64::from(u8::from(*b)))),
            Some(Value::String(s)) => super::float::float(s)
                .map(Some)
                .map_err(|_| self.err(field, "a number")),
            Some(_) => Err(self.err(field, "a number")),
        }
    }

    pub fn bool(&self, field: &str) -> Result<Option<bool>, DecodeError> {
        match self.get(field) {
            None => Ok(None),
            Some(v) => flexible_bool(v)
                .map(Some)
                .ok_or_else(|| self.err(field, "a boolean")),
        }
    }

    pub fn strings(&self, field: &str) -> Result<Option<Vec<String>>, DecodeError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.clone()),
                    Value::Number(_) => Ok(super::value::json_str(v)),
                    _ => Err(self.err(field, "a list of strings")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(self.err(field, "a list of strings")),
        }
    }

    pub fn string_map(&self, field: &str) -> Result<Option<Vec<(String, String)>>, DecodeError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Object(m)) => m
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), s.clone())),
                    Value::Number(_) => Ok((k.clone(), super::value::json_str(v))),
                    Value::Bool(b) => {
                        Ok((k.clone(), if *b { "True" } else { "False" }.to_string()))
                    }
                    _ => Err(self.err(field, "a dict of strings")),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(_) => Err(self.err(field, "a dict of strings")),
        }
    }
}

/// Why a JSON value is not an `IntegerField` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntCoerceError {
    /// `int()` raises (`ValueError`, or `TypeError` for a list, dict or None).
    NotAnInteger,
    /// Python holds it; an `i64` cannot.
    OutOfRange,
}

/// oslo's `Integer.coerce`, `int(value)`, of a JSON value: an int as it is, a
/// float truncated toward zero, a bool as 0 or 1, a string by Python's `int(str)`.
pub fn coerce_int(v: &Value) -> Result<i64, IntCoerceError> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| {
                n.as_f64()
                    .filter(|f| f.is_finite() && f.abs() < 9.0e18)
                    .map(|f| f.trunc() as i64)
            })
            .ok_or(IntCoerceError::OutOfRange),
        Value::Bool(b) => Ok(i64::from(*b)),
        Value::String(s) => super::int::int(s)
            .map_err(|_| IntCoerceError::NotAnInteger)?
            .to_i64()
            .ok_or(IntCoerceError::OutOfRange),
        _ => Err(IntCoerceError::NotAnInteger),
    }
}

/// oslo's FlexibleBooleanField: true for `true`, `"true"`, `"t"`, `"yes"`, `"y"`, `"on"`, `"1"`.
pub fn flexible_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => Some(n.as_f64().is_some_and(|f| f != 0.0)),
        Value::String(s) => Some(matches!(
            s.trim().to_ascii_lowercase().as_str(),
            "true" | "t" | "yes" | "y" | "on" | "1"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn flavor(version: Value) -> Value {
        json!({"nova_object.name": "Flavor", "nova_object.namespace": "nova",
               "nova_object.version": version, "nova_object.data": {"vcpus": 1}})
    }

    #[test]
    fn any_minor_of_major_one_is_read_and_another_major_is_refused() {
        for v in ["1.2", "1.99"] {
            assert!(object_data(&flavor(json!(v)), "Flavor").is_ok(), "{v}");
        }
        for v in [
            json!("2.0"),
            json!("0.9"),
            json!("x.1"),
            json!(1),
            Value::Null,
        ] {
            let e = object_data(&flavor(v.clone()), "Flavor").unwrap_err();
            assert!(e.0.contains("Flavor"), "{v}: {e}");
        }
        let mut no_version = flavor(json!("1.2"));
        no_version
            .as_object_mut()
            .unwrap()
            .remove("nova_object.version");
        assert!(object_data(&no_version, "Flavor").is_err());
    }
}
