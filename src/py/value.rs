// SPDX-License-Identifier: Apache-2.0
//! Python values as nova's `ComputeCapabilitiesFilter` and `JsonFilter` see them:
//! the data they compare (`str()`, `repr()`, `==`, `<`, truthiness, Python's exact
//! mixed int/float comparison), built from JSON as Python's `json` module builds it.
//!
//! Both filters evaluate text that comes from outside (tenant queries, flavor extra
//! specs, `cpu_info` JSON from the compute node) with Python semantics, including
//! where Python raises. The evaluators here return [`PyError`] exactly where Python
//! would raise, so the callers can decide what to do with it. Written by hand: the
//! point is CPython's own rules (which types compare, which raise `TypeError`, how
//! an `int` meets a `float`), which no Rust value crate follows.

use super::error::{PyError, PyExc};
use super::int::PyInt;
use super::str::{repr_into as str_repr, PyStr};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::cmp::Ordering;

/// A dict with string keys in insertion order. `user_dict` marks nova's
/// `ReadOnlyDict` (a `collections.UserDict`, which is not a `dict` instance).
#[derive(Clone, Debug, Default)]
pub struct PyDict {
    pub items: Vec<(PyStr, PyValue)>,
    pub user_dict: bool,
}

impl PyDict {
    pub fn get(&self, key: &[u8]) -> Option<&PyValue> {
        self.items
            .iter()
            .find(|(k, _)| k.as_bytes() == key)
            .map(|(_, v)| v)
    }
}

/// An object whose inside the filters never look at: compared by identity.
#[derive(Clone, Debug)]
pub struct PyObject {
    /// Identity: the same id is the same Python object.
    pub id: String,
    pub type_name: &'static str,
    pub truthy: bool,
    /// `str(obj)` when it is reproducible (no memory address in it).
    pub str_value: Option<String>,
    /// Data attributes `getattr` finds on it.
    pub attrs: Vec<(&'static str, PyValue)>,
}

#[derive(Clone, Debug)]
pub enum PyValue {
    None,
    Bool(bool),
    Int(PyInt),
    Float(f64),
    Str(PyStr),
    List(Vec<PyValue>),
    Dict(Box<PyDict>),
    /// A timezone-aware UTC `datetime`, in microseconds since the epoch.
    DateTime(i64),
    Object(Box<PyObject>),
}

impl PyValue {
    pub fn str(s: &str) -> PyValue {
        PyValue::Str(PyStr::new(s))
    }

    pub fn int(v: i64) -> PyValue {
        PyValue::Int(PyInt::Small(v))
    }

    pub fn is_none(&self) -> bool {
        matches!(self, PyValue::None)
    }

    pub fn type_name(&self) -> &'static str {
        match self {
            PyValue::None => "NoneType",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Str(_) => "str",
            PyValue::List(_) => "list",
            PyValue::Dict(d) if d.user_dict => "ReadOnlyDict",
            PyValue::Dict(_) => "dict",
            PyValue::DateTime(_) => "datetime",
            PyValue::Object(o) => o.type_name,
        }
    }

    /// Python truthiness.
    pub fn truthy(&self) -> bool {
        match self {
            PyValue::None => false,
            PyValue::Bool(b) => *b,
            PyValue::Int(i) => !i.is_zero(),
            PyValue::Float(f) => *f != 0.0,
            PyValue::Str(s) => !s.is_empty(),
            PyValue::List(l) => !l.is_empty(),
            PyValue::Dict(d) => !d.items.is_empty(),
            PyValue::DateTime(_) => true,
            PyValue::Object(o) => o.truthy,
        }
    }

    /// A JSON value as Python's `json` module would have built it.
    pub fn from_json(v: &Value) -> PyValue {
        match v {
            Value::Null => PyValue::None,
            Value::Bool(b) => PyValue::Bool(*b),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    PyValue::int(i)
                } else if let Some(u) = n.as_u64() {
                    PyValue::Int(PyInt::from_u128(u128::from(u)))
                } else {
                    PyValue::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => PyValue::str(s),
            Value::Array(a) => PyValue::List(a.iter().map(PyValue::from_json).collect()),
            Value::Object(m) => PyValue::Dict(Box::new(PyDict {
                items: m
                    .iter()
                    .map(|(k, v)| (PyStr::new(k), PyValue::from_json(v)))
                    .collect(),
                user_dict: false,
            })),
        }
    }
}

enum Num<'a> {
    Int(&'a PyInt),
    Bool(bool),
    Float(f64),
}

fn as_num(v: &PyValue) -> Option<Num<'_>> {
    match v {
        PyValue::Bool(b) => Some(Num::Bool(*b)),
        PyValue::Int(i) => Some(Num::Int(i)),
        PyValue::Float(f) => Some(Num::Float(*f)),
        _ => None,
    }
}

fn num_cmp(a: Num<'_>, b: Num<'_>) -> Option<Ordering> {
    let as_int = |n: Num<'_>| -> Result<PyInt, f64> {
        match n {
            Num::Int(i) => Ok(i.clone()),
            Num::Bool(b) => Ok(PyInt::Small(i64::from(b))),
            Num::Float(f) => Err(f),
        }
    };
    match (as_int(a), as_int(b)) {
        (Ok(x), Ok(y)) => Some(x.cmp_int(&y)),
        (Ok(x), Err(f)) => x.cmp_float(f),
        (Err(f), Ok(y)) => y.cmp_float(f).map(Ordering::reverse),
        (Err(f), Err(g)) => f.partial_cmp(&g),
    }
}

/// A rich comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    Lt,
    Le,
    Eq,
    Ne,
    Gt,
    Ge,
}

impl CmpOp {
    fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
        }
    }

    fn holds(self, ord: Option<Ordering>) -> bool {
        match (self, ord) {
            (CmpOp::Ne, None) => true,
            (_, None) => false,
            (CmpOp::Lt, Some(o)) => o == Ordering::Less,
            (CmpOp::Le, Some(o)) => o != Ordering::Greater,
            (CmpOp::Eq, Some(o)) => o == Ordering::Equal,
            (CmpOp::Ne, Some(o)) => o != Ordering::Equal,
            (CmpOp::Gt, Some(o)) => o == Ordering::Greater,
            (CmpOp::Ge, Some(o)) => o != Ordering::Less,
        }
    }
}

/// `a == b` (`operator.eq`): never raises for these types.
pub fn py_eq(a: &PyValue, b: &PyValue) -> bool {
    if let (Some(x), Some(y)) = (as_num(a), as_num(b)) {
        return num_cmp(x, y) == Some(Ordering::Equal);
    }
    match (a, b) {
        (PyValue::None, PyValue::None) => true,
        (PyValue::Str(x), PyValue::Str(y)) => x == y,
        (PyValue::List(x), PyValue::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_or_eq(p, q))
        }
        (PyValue::Dict(x), PyValue::Dict(y)) => dict_eq(x, y),
        (PyValue::DateTime(x), PyValue::DateTime(y)) => x == y,
        (PyValue::Object(x), PyValue::Object(y)) => x.id == y.id,
        _ => false,
    }
}

/// `PyObject_RichCompareBool(a, b, Py_EQ)`: identity first, then `==`. Containers
/// compare their items this way, and so does `in`. The only identical-but-unequal
/// value here is NaN: every NaN `json.loads` produces is the same object.
pub fn same_or_eq(a: &PyValue, b: &PyValue) -> bool {
    if let (PyValue::Float(x), PyValue::Float(y)) = (a, b) {
        if x.is_nan() && y.is_nan() {
            return true;
        }
    }
    py_eq(a, b)
}

fn dict_eq(a: &PyDict, b: &PyDict) -> bool {
    if a.items.len() != b.items.len() {
        return false;
    }
    let mut sorted: Vec<&(PyStr, PyValue)> = b.items.iter().collect();
    sorted.sort_by(|p, q| p.0.cmp(&q.0));
    a.items.iter().all(|(k, v)| {
        sorted
            .binary_search_by(|(bk, _)| bk.cmp(k))
            .is_ok_and(|i| same_or_eq(v, &sorted[i].1))
    })
}

/// `op(a, b)` as Python evaluates it, `TypeError` where Python raises one.
pub fn py_compare(a: &PyValue, b: &PyValue, op: CmpOp) -> Result<bool, PyError> {
    match op {
        CmpOp::Eq => return Ok(py_eq(a, b)),
        CmpOp::Ne => return Ok(!py_eq(a, b)),
        _ => {}
    }
    if let (Some(x), Some(y)) = (as_num(a), as_num(b)) {
        return Ok(op.holds(num_cmp(x, y)));
    }
    match (a, b) {
        (PyValue::Str(x), PyValue::Str(y)) => Ok(op.holds(Some(x.cmp(y)))),
        (PyValue::DateTime(x), PyValue::DateTime(y)) => Ok(op.holds(Some(x.cmp(y)))),
        // netaddr orders IPAddresses by (version, value).
        (PyValue::Object(x), PyValue::Object(y))
            if x.type_name == "IPAddress" && y.type_name == "IPAddress" =>
        {
            let key = |o: &PyObject| -> Vec<PyValue> {
                ["version", "value"]
                    .iter()
                    .map(|n| value_attr(&PyValue::Object(Box::new(o.clone())), n))
                    .collect()
            };
            py_compare(&PyValue::List(key(x)), &PyValue::List(key(y)), op)
        }
        // A tuple (nova 29 to 33's `HostState._lock_name`) meets only itself in a
        // filter's expression: one host is evaluated at a time.
        (PyValue::Object(x), PyValue::Object(y))
            if x.type_name == "tuple" && y.type_name == "tuple" && x.id == y.id =>
        {
            Ok(op.holds(Some(std::cmp::Ordering::Equal)))
        }
        (PyValue::List(x), PyValue::List(y)) => {
            for (p, q) in x.iter().zip(y) {
                if !same_or_eq(p, q) {
                    return py_compare(p, q, op);
                }
            }
            Ok(op.holds(Some(x.len().cmp(&y.len()))))
        }
        _ => Err(PyError::new(
            PyExc::TypeError,
            format!(
                "'{}' not supported between instances of '{}' and '{}'",
                op.symbol(),
                a.type_name(),
                b.type_name()
            ),
        )),
    }
}

/// `str(v)`, or `None` when Python's text would hold something we cannot reproduce
/// (a memory address, an object's repr).
pub fn py_str(v: &PyValue) -> Option<PyStr> {
    match v {
        PyValue::Str(s) => Some(s.clone()),
        PyValue::DateTime(us) => Some(PyStr::from(datetime_str(*us)?)),
        PyValue::Object(o) => o.str_value.as_deref().map(PyStr::new),
        other => {
            let mut out = String::new();
            py_repr(other, &mut out)?;
            Some(PyStr::from(out))
        }
    }
}

/// `repr(v)` into `out`; `None` when not reproducible.
pub fn py_repr(v: &PyValue, out: &mut String) -> Option<()> {
    match v {
        PyValue::None => out.push_str("None"),
        PyValue::Bool(true) => out.push_str("True"),
        PyValue::Bool(false) => out.push_str("False"),
        PyValue::Int(i) => out.push_str(&i.to_decimal_string()),
        PyValue::Float(f) => out.push_str(&super::float::repr(*f)),
        PyValue::Str(s) => str_repr(s, out),
        PyValue::List(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_repr(item, out)?;
            }
            out.push(']');
        }
        PyValue::Dict(d) => {
            out.push('{');
            for (i, (k, v)) in d.items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                str_repr(k, out);
                out.push_str(": ");
                py_repr(v, out)?;
            }
            out.push('}');
        }
        // datetime.datetime(..., tzinfo=<whichever tz object>): not reproduced.
        PyValue::DateTime(_) => return None,
        PyValue::Object(_) => return None,
    }
    Some(())
}

/// `repr(v)` of the value `json.loads` makes of the JSON value `v`.
pub fn json_repr(v: &Value) -> String {
    let mut out = String::new();
    // Values from JSON hold no datetime or opaque object: always reproducible.
    let _ = py_repr(&PyValue::from_json(v), &mut out);
    out
}

/// `str(v)` of the value `json.loads` makes of the JSON value `v`.
pub fn json_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => json_repr(other),
    }
}

/// `str(datetime)` of an aware UTC datetime: `2026-01-02 03:04:05[.ffffff]+00:00`.
fn datetime_str(us: i64) -> Option<String> {
    let dt = DateTime::<Utc>::from_timestamp_micros(us)?;
    let frac = dt.timestamp_subsec_micros();
    Some(if frac == 0 {
        dt.format("%Y-%m-%d %H:%M:%S+00:00").to_string()
    } else {
        format!("{}.{frac:06}+00:00", dt.format("%Y-%m-%d %H:%M:%S"))
    })
}

/// `getattr(value, name, None)` on a value that is neither the HostState nor a dict
/// (the ComputeCapabilitiesFilter walk). Only data attributes are reproduced; a
/// method's `str()` carries a memory address, so those count as absent.
pub fn value_attr(v: &PyValue, name: &str) -> PyValue {
    match (v, name) {
        (PyValue::Int(_) | PyValue::Bool(_), "real" | "numerator") => match v {
            PyValue::Bool(b) => PyValue::int(i64::from(*b)),
            other => other.clone(),
        },
        (PyValue::Int(_) | PyValue::Bool(_), "imag") => PyValue::int(0),
        (PyValue::Int(_) | PyValue::Bool(_), "denominator") => PyValue::int(1),
        (PyValue::Float(_), "real") => v.clone(),
        (PyValue::Float(_), "imag") => PyValue::Float(0.0),
        (PyValue::Dict(d), "data") if d.user_dict => PyValue::Dict(Box::new(PyDict {
            items: d.items.clone(),
            user_dict: false,
        })),
        (PyValue::Object(o), _) => o
            .attrs
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(PyValue::None, |(_, v)| v.clone()),
        _ => PyValue::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loads(s: &str) -> PyValue {
        super::super::json::loads(s, 32).expect("json")
    }

    #[test]
    fn comparisons_as_python() {
        let i = |v| PyValue::int(v);
        let f = PyValue::Float;
        let s = PyValue::str;
        assert!(py_eq(&i(1), &PyValue::Bool(true)));
        assert!(py_eq(&i(1), &f(1.0)));
        assert!(!py_eq(&i(1), &s("1")));
        assert!(py_compare(&i(2), &f(2.5), CmpOp::Lt).unwrap());
        assert!(py_compare(&i(-2), &f(-2.5), CmpOp::Gt).unwrap());
        assert_eq!(
            py_compare(&s("a"), &i(1), CmpOp::Lt).unwrap_err().kind,
            PyExc::TypeError
        );
        assert!(!py_compare(&f(f64::NAN), &f(f64::NAN), CmpOp::Eq).unwrap());
        assert!(py_eq(
            &PyValue::List(vec![f(f64::NAN)]),
            &PyValue::List(vec![f(f64::NAN)])
        ));
        // 2**63 as a float vs ints around it.
        let big = loads("9223372036854775808");
        assert!(py_eq(&big, &f(9.223_372_036_854_776e18)));
        assert!(py_compare(
            &loads("9223372036854775809"),
            &f(9.223_372_036_854_776e18),
            CmpOp::Gt
        )
        .unwrap());
        assert!(!py_eq(&loads("100000000000000000000000000000"), &f(1e29)));
        assert!(py_eq(&loads("99999999999999991433150857216"), &f(1e29)));
        assert!(py_compare(&i(i64::MAX), &f(9.223_372_036_854_776e18), CmpOp::Lt).unwrap());
        // Lists compare element-wise, then by length.
        let l = |v: Vec<PyValue>| PyValue::List(v);
        assert!(py_compare(&l(vec![i(1), i(2)]), &l(vec![i(1), i(3)]), CmpOp::Lt).unwrap());
        assert!(py_compare(&l(vec![i(1)]), &l(vec![i(1), i(0)]), CmpOp::Lt).unwrap());
        assert_eq!(
            py_compare(&l(vec![s("a")]), &l(vec![i(1)]), CmpOp::Lt)
                .unwrap_err()
                .kind,
            PyExc::TypeError
        );
        assert_eq!(
            py_compare(&loads("{}"), &loads("{}"), CmpOp::Le)
                .unwrap_err()
                .kind,
            PyExc::TypeError
        );
        assert!(py_eq(
            &loads(r#"{"a":1,"b":2}"#),
            &loads(r#"{"b":2.0,"a":true}"#)
        ));
    }
}
