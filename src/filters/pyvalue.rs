// SPDX-License-Identifier: Apache-2.0
//! Python values as nova's `ComputeCapabilitiesFilter` and `JsonFilter` see them:
//! the data they compare (`str()`, `==`, `<`, truthiness, Python's mixed int/float
//! comparison), Python's `json.loads`, and nova's `HostState` attributes by name.
//!
//! Both filters evaluate text that comes from outside (tenant queries, flavor extra
//! specs, `cpu_info` JSON from the compute node) with Python semantics, including
//! where Python raises. The evaluators here return [`PyError`] exactly where nova's
//! code would raise, so the filters can decide what to do with it.
//!
//! Strings are kept as generalized UTF-8 ("WTF-8") bytes: Python's `json.loads`
//! yields lone surrogates for `"\ud800"`, which a Rust `String` cannot hold. Byte
//! order of that encoding is code point order, which is Python's `str` order.

use super::utils::{PyError, PyExc};
use crate::model::HostState;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::cmp::Ordering;

// ---------------------------------------------------------------------------------
// str
// ---------------------------------------------------------------------------------

/// A Python `str`: code points (lone surrogates allowed) as generalized UTF-8.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PyStr(Vec<u8>);

impl PyStr {
    pub fn new(s: &str) -> Self {
        PyStr(s.as_bytes().to_vec())
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The text, unless it holds a lone surrogate.
    pub fn to_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.0).ok()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn push_str(&mut self, s: &str) {
        self.0.extend_from_slice(s.as_bytes());
    }

    /// Appends one code point (a surrogate too).
    pub fn push_code_point(&mut self, cp: u32) {
        match cp {
            0..=0x7f => self.0.push(cp as u8),
            0x80..=0x7ff => {
                self.0.push(0xc0 | (cp >> 6) as u8);
                self.0.push(0x80 | (cp & 0x3f) as u8);
            }
            0x800..=0xffff => {
                self.0.push(0xe0 | (cp >> 12) as u8);
                self.0.push(0x80 | ((cp >> 6) & 0x3f) as u8);
                self.0.push(0x80 | (cp & 0x3f) as u8);
            }
            _ => {
                self.0.push(0xf0 | (cp >> 18) as u8);
                self.0.push(0x80 | ((cp >> 12) & 0x3f) as u8);
                self.0.push(0x80 | ((cp >> 6) & 0x3f) as u8);
                self.0.push(0x80 | (cp & 0x3f) as u8);
            }
        }
    }

    /// The code points.
    pub fn code_points(&self) -> impl Iterator<Item = u32> + '_ {
        let b = &self.0;
        let mut i = 0;
        std::iter::from_fn(move || {
            let first = *b.get(i)?;
            let (len, init) = match first {
                0..=0x7f => (1, u32::from(first)),
                0xc0..=0xdf => (2, u32::from(first & 0x1f)),
                0xe0..=0xef => (3, u32::from(first & 0x0f)),
                _ => (4, u32::from(first & 0x07)),
            };
            let mut cp = init;
            for k in 1..len {
                cp = (cp << 6) | u32::from(b.get(i + k).copied().unwrap_or(0x80) & 0x3f);
            }
            i += len;
            Some(cp)
        })
    }

    /// `needle in self` (substring).
    pub fn contains(&self, needle: &[u8]) -> bool {
        needle.is_empty() || self.0.windows(needle.len()).any(|w| w == needle)
    }
}

impl From<&str> for PyStr {
    fn from(s: &str) -> Self {
        PyStr::new(s)
    }
}

impl From<String> for PyStr {
    fn from(s: String) -> Self {
        PyStr(s.into_bytes())
    }
}

// ---------------------------------------------------------------------------------
// int
// ---------------------------------------------------------------------------------

/// A Python `int`: `i64`, or a decimal magnitude beyond it (JSON allows any size).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PyInt {
    Small(i64),
    /// Magnitude outside `i64`, decimal digits without leading zeros.
    Big {
        neg: bool,
        digits: String,
    },
}

impl PyInt {
    /// From ASCII decimal digits (leading zeros allowed).
    pub fn from_decimal(neg: bool, digits: &str) -> PyInt {
        let digits = digits.trim_start_matches('0');
        if digits.is_empty() {
            return PyInt::Small(0);
        }
        let text = if neg {
            format!("-{digits}")
        } else {
            digits.to_string()
        };
        match text.parse::<i64>() {
            Ok(v) => PyInt::Small(v),
            Err(_) => PyInt::Big {
                neg,
                digits: digits.to_string(),
            },
        }
    }

    pub fn from_u128(v: u128) -> PyInt {
        i64::try_from(v).map_or_else(
            |_| PyInt::Big {
                neg: false,
                digits: v.to_string(),
            },
            PyInt::Small,
        )
    }

    fn is_zero(&self) -> bool {
        matches!(self, PyInt::Small(0))
    }

    fn sign_digits(&self) -> (bool, String) {
        match self {
            PyInt::Small(v) => (*v < 0, v.unsigned_abs().to_string()),
            PyInt::Big { neg, digits } => (*neg, digits.clone()),
        }
    }

    fn cmp_int(&self, other: &PyInt) -> Ordering {
        match (self, other) {
            (PyInt::Small(a), PyInt::Small(b)) => a.cmp(b),
            _ => {
                let (an, ad) = self.sign_digits();
                let (bn, bd) = other.sign_digits();
                cmp_signed_decimal(an, &ad, bn, &bd)
            }
        }
    }

    /// Python's exact int/float comparison; `None` when `f` is NaN.
    fn cmp_float(&self, f: f64) -> Option<Ordering> {
        if f.is_nan() {
            return None;
        }
        if f.is_infinite() {
            return Some(if f > 0.0 {
                Ordering::Less
            } else {
                Ordering::Greater
            });
        }
        match self {
            PyInt::Small(i) => {
                const LIMIT: f64 = 1.7014118346046923e38; // 2**127
                if f >= LIMIT {
                    return Some(Ordering::Less);
                }
                if f < -LIMIT {
                    return Some(Ordering::Greater);
                }
                let t = f.trunc();
                let ord = i128::from(*i).cmp(&(t as i128));
                if ord != Ordering::Equal {
                    return Some(ord);
                }
                let frac = f - t;
                Some(0.0_f64.partial_cmp(&frac).unwrap_or(Ordering::Equal))
            }
            PyInt::Big { neg, digits } => {
                if f.abs() < 9.223_372_036_854_776e18 {
                    return Some(if *neg {
                        Ordering::Less
                    } else {
                        Ordering::Greater
                    });
                }
                // |f| >= 2**63 is an integer: compare decimal expansions.
                let fd = float_integer_digits(f.abs());
                Some(cmp_signed_decimal(*neg, digits, f < 0.0, &fd))
            }
        }
    }

    pub fn to_decimal_string(&self) -> String {
        match self {
            PyInt::Small(v) => v.to_string(),
            PyInt::Big { neg, digits } => {
                format!("{}{digits}", if *neg { "-" } else { "" })
            }
        }
    }
}

/// Compares two signed decimal magnitudes (no leading zeros; zero is "0" unsigned).
fn cmp_signed_decimal(an: bool, ad: &str, bn: bool, bd: &str) -> Ordering {
    let a_zero = ad == "0";
    let b_zero = bd == "0";
    let an = an && !a_zero;
    let bn = bn && !b_zero;
    match (an, bn) {
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
        _ => {
            let mag = ad.len().cmp(&bd.len()).then_with(|| ad.cmp(bd));
            if an {
                mag.reverse()
            } else {
                mag
            }
        }
    }
}

/// Exact decimal digits of an integral, finite, non-negative `f64`.
fn float_integer_digits(f: f64) -> String {
    let bits = f.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    let mut mant = bits & ((1u64 << 52) - 1);
    if exp != 0 {
        mant |= 1u64 << 52;
    }
    let shift = exp - 1075;
    if shift <= 0 {
        return (mant >> (-shift).min(63)).to_string();
    }
    // Base 1e9 limbs, least significant first.
    let mut limbs: Vec<u64> = vec![mant % 1_000_000_000, mant / 1_000_000_000];
    for _ in 0..shift {
        let mut carry = 0;
        for l in limbs.iter_mut() {
            let v = *l * 2 + carry;
            *l = v % 1_000_000_000;
            carry = v / 1_000_000_000;
        }
        if carry > 0 {
            limbs.push(carry);
        }
    }
    while limbs.len() > 1 && limbs.last() == Some(&0) {
        limbs.pop();
    }
    let mut s = limbs.last().map(|l| l.to_string()).unwrap_or_default();
    for l in limbs.iter().rev().skip(1) {
        s.push_str(&format!("{l:09}"));
    }
    s
}

// ---------------------------------------------------------------------------------
// values
// ---------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------
// str() and repr()
// ---------------------------------------------------------------------------------

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
        PyValue::Float(f) => out.push_str(&float_repr(*f)),
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

/// Python's `repr(float)` (shortest round-trip digits, `1e+16` style exponents).
pub fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0.0");
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "d.ddde<exp>".
    let sci = format!("{:e}", f.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let n = digits.len() as i32;
    let decpt = exp + 1;
    if decpt <= -4 || decpt > 16 {
        let mut m = digits[..1].to_string();
        if n > 1 {
            m.push('.');
            m.push_str(&digits[1..]);
        }
        let e = decpt - 1;
        format!(
            "{sign}{m}e{}{:02}",
            if e < 0 { '-' } else { '+' },
            e.unsigned_abs()
        )
    } else if decpt <= 0 {
        format!("{sign}0.{}{digits}", "0".repeat((-decpt) as usize))
    } else if decpt >= n {
        format!("{sign}{digits}{}.0", "0".repeat((decpt - n) as usize))
    } else {
        let (a, b) = digits.split_at(decpt as usize);
        format!("{sign}{a}.{b}")
    }
}

fn is_printable(cp: u32) -> bool {
    if cp < 0x80 {
        return (0x20..0x7f).contains(&cp);
    }
    let i = NON_PRINTABLE.partition_point(|&(start, _)| start <= cp);
    i == 0 || NON_PRINTABLE[i - 1].1 < cp
}

/// Python's `repr(str)`.
pub fn str_repr(s: &PyStr, out: &mut String) {
    let has_single = s.as_bytes().contains(&b'\'');
    let has_double = s.as_bytes().contains(&b'"');
    let quote = if has_single && !has_double { '"' } else { '\'' };
    out.push(quote);
    for cp in s.code_points() {
        match cp {
            0x5c => out.push_str("\\\\"),
            0x09 => out.push_str("\\t"),
            0x0a => out.push_str("\\n"),
            0x0d => out.push_str("\\r"),
            c if c == quote as u32 => {
                out.push('\\');
                out.push(quote);
            }
            c if is_printable(c) => out.push(char::from_u32(c).unwrap_or('\u{fffd}')),
            c if c < 0x100 => out.push_str(&format!("\\x{c:02x}")),
            c if c < 0x10000 => out.push_str(&format!("\\u{c:04x}")),
            c => out.push_str(&format!("\\U{c:08x}")),
        }
    }
    out.push(quote);
}

// ---------------------------------------------------------------------------------
// json.loads
// ---------------------------------------------------------------------------------

/// Python's `json.loads(text)` (C scanner, `strict=True`): `NaN`, `Infinity`,
/// `-Infinity`, unbounded ints (Python 3.11 refuses more than 4300 digits), floats
/// with Python's rounding, duplicate keys keep their first position and last value,
/// lone surrogate escapes kept. Errors are `ValueError` (`JSONDecodeError`).
///
/// `max_depth` bounds the nesting of arrays and objects: deeper input is a
/// `RecursionError`, which is what CPython raises, only at a smaller depth than
/// CPython's (~1000 minus the current stack).
pub fn json_loads(text: &str, max_depth: usize) -> Result<PyValue, PyError> {
    if text.starts_with('\u{feff}') {
        return Err(PyError::value_error(
            "Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)",
        ));
    }
    let mut p = JsonParser {
        s: text.as_bytes(),
        i: 0,
        depth: 0,
        max_depth,
    };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.i != p.s.len() {
        return Err(p.err("Extra data"));
    }
    Ok(v)
}

struct JsonParser<'a> {
    s: &'a [u8],
    i: usize,
    depth: usize,
    max_depth: usize,
}

impl JsonParser<'_> {
    fn err(&self, what: &str) -> PyError {
        PyError::value_error(format!("{what}: char {}", self.i))
    }

    fn ws(&mut self) {
        while matches!(self.s.get(self.i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn starts(&self, lit: &[u8]) -> bool {
        self.s[self.i..].starts_with(lit)
    }

    fn enter(&mut self) -> Result<(), PyError> {
        self.depth += 1;
        if self.depth > self.max_depth {
            return Err(PyError::new(
                PyExc::RecursionError,
                "maximum recursion depth exceeded while decoding a JSON document",
            ));
        }
        Ok(())
    }

    fn value(&mut self) -> Result<PyValue, PyError> {
        let Some(&c) = self.s.get(self.i) else {
            return Err(self.err("Expecting value"));
        };
        match c {
            b'"' => {
                self.i += 1;
                Ok(PyValue::Str(self.string()?))
            }
            b'{' => {
                self.enter()?;
                self.i += 1;
                let v = self.object()?;
                self.depth -= 1;
                Ok(v)
            }
            b'[' => {
                self.enter()?;
                self.i += 1;
                let v = self.array()?;
                self.depth -= 1;
                Ok(v)
            }
            b'n' if self.starts(b"null") => {
                self.i += 4;
                Ok(PyValue::None)
            }
            b't' if self.starts(b"true") => {
                self.i += 4;
                Ok(PyValue::Bool(true))
            }
            b'f' if self.starts(b"false") => {
                self.i += 5;
                Ok(PyValue::Bool(false))
            }
            b'N' if self.starts(b"NaN") => {
                self.i += 3;
                Ok(PyValue::Float(f64::NAN))
            }
            b'I' if self.starts(b"Infinity") => {
                self.i += 8;
                Ok(PyValue::Float(f64::INFINITY))
            }
            b'-' if self.starts(b"-Infinity") => {
                self.i += 9;
                Ok(PyValue::Float(f64::NEG_INFINITY))
            }
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(self.err("Expecting value")),
        }
    }

    fn number(&mut self) -> Result<PyValue, PyError> {
        let start = self.i;
        let neg = self.s[self.i] == b'-';
        if neg {
            self.i += 1;
        }
        let int_start = self.i;
        match self.s.get(self.i) {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => {
                while matches!(self.s.get(self.i), Some(b'0'..=b'9')) {
                    self.i += 1;
                }
            }
            _ => {
                self.i = start;
                return Err(self.err("Expecting value"));
            }
        }
        let int_end = self.i;
        let mut is_float = false;
        if self.s.get(self.i) == Some(&b'.') && matches!(self.s.get(self.i + 1), Some(b'0'..=b'9'))
        {
            is_float = true;
            self.i += 1;
            while matches!(self.s.get(self.i), Some(b'0'..=b'9')) {
                self.i += 1;
            }
        }
        if matches!(self.s.get(self.i), Some(b'e' | b'E')) {
            let mut j = self.i + 1;
            if matches!(self.s.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if matches!(self.s.get(j), Some(b'0'..=b'9')) {
                while matches!(self.s.get(j), Some(b'0'..=b'9')) {
                    j += 1;
                }
                is_float = true;
                self.i = j;
            }
        }
        let text = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("0");
        if is_float {
            return Ok(PyValue::Float(text.parse().unwrap_or(f64::NAN)));
        }
        let digits = std::str::from_utf8(&self.s[int_start..int_end]).unwrap_or("0");
        if digits.len() > super::utils::PY_INT_MAX_STR_DIGITS {
            return Err(PyError::value_error(format!(
                "Exceeds the limit (4300 digits) for integer string conversion: value has {} digits",
                digits.len()
            )));
        }
        Ok(PyValue::Int(PyInt::from_decimal(neg, digits)))
    }

    fn hex4(&mut self) -> Result<u32, PyError> {
        let h = self
            .s
            .get(self.i..self.i + 4)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .ok_or_else(|| self.err("Invalid \\uXXXX escape"))?;
        let v = u32::from_str_radix(std::str::from_utf8(h).unwrap_or("0"), 16)
            .map_err(|_| self.err("Invalid \\uXXXX escape"))?;
        self.i += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<PyStr, PyError> {
        let mut out = PyStr::default();
        loop {
            let Some(&c) = self.s.get(self.i) else {
                return Err(self.err("Unterminated string starting at"));
            };
            match c {
                b'"' => {
                    self.i += 1;
                    return Ok(out);
                }
                b'\\' => {
                    self.i += 1;
                    let Some(&e) = self.s.get(self.i) else {
                        return Err(self.err("Unterminated string starting at"));
                    };
                    self.i += 1;
                    let cp = match e {
                        b'"' => 0x22,
                        b'\\' => 0x5c,
                        b'/' => 0x2f,
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => 0x0a,
                        b'r' => 0x0d,
                        b't' => 0x09,
                        b'u' => {
                            let mut cp = self.hex4()?;
                            if (0xd800..0xdc00).contains(&cp) && self.starts(b"\\u") {
                                let save = self.i;
                                self.i += 2;
                                match self.hex4() {
                                    Ok(lo) if (0xdc00..0xe000).contains(&lo) => {
                                        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                                    }
                                    _ => self.i = save,
                                }
                            }
                            cp
                        }
                        _ => return Err(self.err("Invalid \\escape")),
                    };
                    out.push_code_point(cp);
                }
                0..=0x1f => return Err(self.err("Invalid control character at")),
                _ => {
                    // Copy a run of plain bytes (valid UTF-8: the input is a &str).
                    let start = self.i;
                    while let Some(&b) = self.s.get(self.i) {
                        if b == b'"' || b == b'\\' || b < 0x20 {
                            break;
                        }
                        self.i += 1;
                    }
                    out.0.extend_from_slice(&self.s[start..self.i]);
                }
            }
        }
    }

    fn array(&mut self) -> Result<PyValue, PyError> {
        let mut items = Vec::new();
        self.ws();
        if self.s.get(self.i) == Some(&b']') {
            self.i += 1;
            return Ok(PyValue::List(items));
        }
        loop {
            items.push(self.value()?);
            self.ws();
            match self.s.get(self.i) {
                Some(b']') => {
                    self.i += 1;
                    return Ok(PyValue::List(items));
                }
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                }
                _ => return Err(self.err("Expecting ',' delimiter")),
            }
        }
    }

    fn object(&mut self) -> Result<PyValue, PyError> {
        let mut dict = PyDict::default();
        self.ws();
        if self.s.get(self.i) == Some(&b'}') {
            self.i += 1;
            return Ok(PyValue::Dict(Box::new(dict)));
        }
        let mut index: std::collections::HashMap<PyStr, usize> = Default::default();
        loop {
            if self.s.get(self.i) != Some(&b'"') {
                return Err(self.err("Expecting property name enclosed in double quotes"));
            }
            self.i += 1;
            let key = self.string()?;
            self.ws();
            if self.s.get(self.i) != Some(&b':') {
                return Err(self.err("Expecting ':' delimiter"));
            }
            self.i += 1;
            self.ws();
            let value = self.value()?;
            match index.get(&key) {
                Some(&pos) => dict.items[pos].1 = value,
                None => {
                    index.insert(key.clone(), dict.items.len());
                    dict.items.push((key, value));
                }
            }
            self.ws();
            match self.s.get(self.i) {
                Some(b'}') => {
                    self.i += 1;
                    return Ok(PyValue::Dict(Box::new(dict)));
                }
                Some(b',') => {
                    self.i += 1;
                    self.ws();
                }
                _ => return Err(self.err("Expecting ',' delimiter")),
            }
        }
    }
}

// ---------------------------------------------------------------------------------
// nova's HostState by attribute name
// ---------------------------------------------------------------------------------

/// Every name `dir()` lists on a nova 34 `HostState` that has been updated from a
/// compute node (`hasattr(host_state, name)` is true for exactly these).
pub const HOST_STATE_ATTRS: &[&str] = &[
    "__class__",
    "__delattr__",
    "__dict__",
    "__dir__",
    "__doc__",
    "__eq__",
    "__format__",
    "__ge__",
    "__getattribute__",
    "__getstate__",
    "__gt__",
    "__hash__",
    "__init__",
    "__init_subclass__",
    "__le__",
    "__lt__",
    "__module__",
    "__ne__",
    "__new__",
    "__reduce__",
    "__reduce_ex__",
    "__repr__",
    "__setattr__",
    "__sizeof__",
    "__str__",
    "__subclasshook__",
    "__weakref__",
    "_lock_name",
    "_locked_consume_from_request",
    "_update_from_compute_node",
    "aggregates",
    "allocation_candidates",
    "cell_uuid",
    "consume_from_request",
    "cpu_allocation_ratio",
    "cpu_info",
    "disk_allocation_ratio",
    "disk_mb_used",
    "failed_builds",
    "free_disk_mb",
    "free_ram_mb",
    "host",
    "host_ip",
    "hypervisor_hostname",
    "hypervisor_type",
    "hypervisor_version",
    "instances",
    "limits",
    "metrics",
    "nodename",
    "num_instances",
    "num_io_ops",
    "numa_topology",
    "pci_stats",
    "ram_allocation_ratio",
    "service",
    "stats",
    "supported_instances",
    "total_usable_disk_gb",
    "total_usable_ram_mb",
    "update",
    "updated",
    "uuid",
    "vcpus_total",
    "vcpus_used",
];

/// `hasattr(host_state, name)`.
pub fn host_has_attr(name: &str) -> bool {
    HOST_STATE_ATTRS.binary_search(&name).is_ok()
}

const HOST_STATE_DOC: &str = "Mutable and immutable information tracked for a host.\n    This is an attempt to remove the ad-hoc data structures\n    previously used and lock down access.\n    ";

/// nova's `HostState.__repr__`.
pub fn host_repr(h: &HostState) -> String {
    format!(
        "({}, {}) ram: {}MB disk: {}MB io_ops: {} instances: {}, allocation_candidates: {}",
        h.host,
        h.nodename,
        h.free_ram_mb,
        h.free_disk_mb,
        h.num_io_ops,
        h.num_instances,
        h.allocation_candidates.len()
    )
}

fn opt_str<S: std::ops::Deref<Target = str>>(v: &Option<S>) -> PyValue {
    v.as_deref().map_or(PyValue::None, PyValue::str)
}

fn object(id: String, type_name: &'static str, truthy: bool) -> PyValue {
    PyValue::Object(Box::new(PyObject {
        id,
        type_name,
        truthy,
        str_value: None,
        attrs: Vec::new(),
    }))
}

/// `host_ip`: nova holds a `netaddr.IPAddress`: `str()` is the normalized address,
/// it equals only an IPAddress, is false for `0.0.0.0`/`::`, and has `version`/`value`.
fn ip_address(text: &str) -> PyValue {
    let (norm, version, value) = match text.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(a)) => (a.to_string(), 4, u128::from(u32::from(a))),
        Ok(std::net::IpAddr::V6(a)) => (a.to_string(), 6, u128::from(a)),
        // nova could not have built the HostState; keep the text as it is.
        Err(_) => (text.to_string(), 4, 1),
    };
    PyValue::Object(Box::new(PyObject {
        id: format!("IPAddress:{version}:{value}"),
        type_name: "IPAddress",
        truthy: value != 0,
        str_value: Some(norm),
        attrs: vec![
            ("version", PyValue::int(version)),
            ("value", PyValue::Int(PyInt::from_u128(value))),
        ],
    }))
}

fn datetime(t: &Option<DateTime<Utc>>) -> PyValue {
    t.map_or(PyValue::None, |t| PyValue::DateTime(t.timestamp_micros()))
}

/// `host_state.service`: nova's `ReadOnlyDict(dict(Service))`. Keys we do not hold
/// (`uuid`, `report_count`, `availability_zone`, ...) are absent here.
fn service_dict(h: &HostState) -> PyValue {
    let s = &h.service;
    let items = vec![
        ("id", PyValue::int(s.id)),
        ("host", PyValue::str(&s.host)),
        ("binary", PyValue::str("nova-compute")),
        ("topic", PyValue::str("compute")),
        ("disabled", PyValue::Bool(s.disabled)),
        ("disabled_reason", opt_str(&s.disabled_reason)),
        ("forced_down", PyValue::Bool(s.forced_down)),
        ("last_seen_up", datetime(&s.last_seen_up)),
        ("version", PyValue::int(s.version)),
        ("created_at", datetime(&s.created_at)),
        ("updated_at", datetime(&s.updated_at)),
        ("deleted_at", PyValue::None),
        ("deleted", PyValue::Bool(false)),
    ];
    PyValue::Dict(Box::new(PyDict {
        items: items.into_iter().map(|(k, v)| (PyStr::new(k), v)).collect(),
        user_dict: true,
    }))
}

fn str_dict<'a>(
    items: impl Iterator<Item = (&'a std::sync::Arc<str>, &'a std::sync::Arc<str>)>,
) -> PyValue {
    PyValue::Dict(Box::new(PyDict {
        items: items
            .map(|(k, v)| (PyStr::new(k), PyValue::str(v)))
            .collect(),
        user_dict: false,
    }))
}

/// `getattr(host_state, name, None)`: `None` for missing attributes and for
/// attributes holding None. Objects nova holds that the filters never look into
/// (NUMA topology, PCI stats, metrics, aggregates, instances, methods) come back as
/// opaque [`PyObject`]s compared by identity.
pub fn host_attr(h: &HostState, name: &str) -> PyValue {
    let int = PyValue::int;
    match name {
        "host" => PyValue::str(&h.host),
        "nodename" => PyValue::str(&h.nodename),
        "uuid" => opt_str(&h.uuid),
        "cell_uuid" => PyValue::str(&h.cell_uuid),
        "_lock_name" => PyValue::str(&format!("{}-{}", h.host, h.nodename)),
        "total_usable_ram_mb" => int(h.total_usable_ram_mb),
        "total_usable_disk_gb" => int(h.total_usable_disk_gb),
        "disk_mb_used" => int(h.disk_mb_used),
        "free_ram_mb" => int(h.free_ram_mb),
        "free_disk_mb" => int(h.free_disk_mb),
        "vcpus_total" => int(h.vcpus_total),
        "vcpus_used" => int(h.vcpus_used),
        "num_instances" => int(h.num_instances),
        "num_io_ops" => int(h.num_io_ops),
        "failed_builds" => int(h.failed_builds),
        "host_ip" => h.host_ip.as_deref().map_or(PyValue::None, ip_address),
        "hypervisor_type" => opt_str(&h.hypervisor_type),
        "hypervisor_version" => h.hypervisor_version.map_or(PyValue::None, int),
        "hypervisor_hostname" => opt_str(&h.hypervisor_hostname),
        "cpu_info" => h.cpu_info.as_deref().map_or(PyValue::None, PyValue::str),
        "supported_instances" => PyValue::List(
            h.supported_instances
                .iter()
                .map(|spec| PyValue::List(spec.iter().map(|s| PyValue::str(s)).collect()))
                .collect(),
        ),
        "limits" => PyValue::Dict(Box::new(PyDict {
            items: h
                .limits
                .iter()
                .map(|(k, v)| (PyStr::new(k), PyValue::from_json(v)))
                .collect(),
            user_dict: false,
        })),
        "cpu_allocation_ratio" => PyValue::Float(h.cpu_allocation_ratio),
        "ram_allocation_ratio" => PyValue::Float(h.ram_allocation_ratio),
        "disk_allocation_ratio" => PyValue::Float(h.disk_allocation_ratio),
        "updated" => datetime(&h.updated),
        "allocation_candidates" => PyValue::List(
            h.allocation_candidates
                .iter()
                .map(|c| PyValue::from_json(c.json()))
                .collect(),
        ),
        "stats" => str_dict(h.stats.iter()),
        "service" => service_dict(h),
        "aggregates" => PyValue::List(
            h.aggregates
                .iter()
                .map(|a| object(format!("Aggregate:{}", a.id), "Aggregate", true))
                .collect(),
        ),
        "instances" => PyValue::Dict(Box::new(PyDict {
            items: h
                .instances
                .iter()
                .map(|u| {
                    (
                        PyStr::new(u),
                        object(format!("Instance:{u}"), "Instance", true),
                    )
                })
                .collect(),
            user_dict: false,
        })),
        "numa_topology" => h.numa_topology.as_ref().map_or(PyValue::None, |_| {
            object("numa_topology".into(), "NUMATopology", true)
        }),
        "pci_stats" => h.pci_stats.as_ref().map_or(PyValue::None, |_| {
            object("pci_stats".into(), "PciDeviceStats", true)
        }),
        "metrics" => h.metrics.as_ref().map_or(PyValue::None, |m| {
            let n = m.as_array().map_or(0, Vec::len);
            object("metrics".into(), "MonitorMetricList", n > 0)
        }),
        "__module__" => PyValue::str("nova.scheduler.host_manager"),
        "__doc__" => PyValue::str(HOST_STATE_DOC),
        "__weakref__" => PyValue::None,
        "update"
        | "consume_from_request"
        | "_locked_consume_from_request"
        | "_update_from_compute_node" => PyValue::Object(Box::new(PyObject {
            id: format!("method:{name}"),
            type_name: "method",
            truthy: true,
            str_value: Some(format!(
                "<bound method HostState.{name} of {}>",
                host_repr(h)
            )),
            attrs: Vec::new(),
        })),
        // The remaining dunders (type, method-wrappers, __dict__): opaque.
        n if host_has_attr(n) => object(format!("dunder:{n}"), "object", true),
        _ => PyValue::None,
    }
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

// Code points >= U+0080 for which Python 3.11's `str.isprintable()` is false.
#[rustfmt::skip]
const NON_PRINTABLE: [(u32, u32); 700] = [
    (0x80, 0xa0), (0xad, 0xad), (0x378, 0x379), (0x380, 0x383), (0x38b, 0x38b), (0x38d, 0x38d),
    (0x3a2, 0x3a2), (0x530, 0x530), (0x557, 0x558), (0x58b, 0x58c), (0x590, 0x590),
    (0x5c8, 0x5cf), (0x5eb, 0x5ee), (0x5f5, 0x605), (0x61c, 0x61c), (0x6dd, 0x6dd),
    (0x70e, 0x70f), (0x74b, 0x74c), (0x7b2, 0x7bf), (0x7fb, 0x7fc), (0x82e, 0x82f),
    (0x83f, 0x83f), (0x85c, 0x85d), (0x85f, 0x85f), (0x86b, 0x86f), (0x88f, 0x897),
    (0x8e2, 0x8e2), (0x984, 0x984), (0x98d, 0x98e), (0x991, 0x992), (0x9a9, 0x9a9),
    (0x9b1, 0x9b1), (0x9b3, 0x9b5), (0x9ba, 0x9bb), (0x9c5, 0x9c6), (0x9c9, 0x9ca),
    (0x9cf, 0x9d6), (0x9d8, 0x9db), (0x9de, 0x9de), (0x9e4, 0x9e5), (0x9ff, 0xa00),
    (0xa04, 0xa04), (0xa0b, 0xa0e), (0xa11, 0xa12), (0xa29, 0xa29), (0xa31, 0xa31),
    (0xa34, 0xa34), (0xa37, 0xa37), (0xa3a, 0xa3b), (0xa3d, 0xa3d), (0xa43, 0xa46),
    (0xa49, 0xa4a), (0xa4e, 0xa50), (0xa52, 0xa58), (0xa5d, 0xa5d), (0xa5f, 0xa65),
    (0xa77, 0xa80), (0xa84, 0xa84), (0xa8e, 0xa8e), (0xa92, 0xa92), (0xaa9, 0xaa9),
    (0xab1, 0xab1), (0xab4, 0xab4), (0xaba, 0xabb), (0xac6, 0xac6), (0xaca, 0xaca),
    (0xace, 0xacf), (0xad1, 0xadf), (0xae4, 0xae5), (0xaf2, 0xaf8), (0xb00, 0xb00),
    (0xb04, 0xb04), (0xb0d, 0xb0e), (0xb11, 0xb12), (0xb29, 0xb29), (0xb31, 0xb31),
    (0xb34, 0xb34), (0xb3a, 0xb3b), (0xb45, 0xb46), (0xb49, 0xb4a), (0xb4e, 0xb54),
    (0xb58, 0xb5b), (0xb5e, 0xb5e), (0xb64, 0xb65), (0xb78, 0xb81), (0xb84, 0xb84),
    (0xb8b, 0xb8d), (0xb91, 0xb91), (0xb96, 0xb98), (0xb9b, 0xb9b), (0xb9d, 0xb9d),
    (0xba0, 0xba2), (0xba5, 0xba7), (0xbab, 0xbad), (0xbba, 0xbbd), (0xbc3, 0xbc5),
    (0xbc9, 0xbc9), (0xbce, 0xbcf), (0xbd1, 0xbd6), (0xbd8, 0xbe5), (0xbfb, 0xbff),
    (0xc0d, 0xc0d), (0xc11, 0xc11), (0xc29, 0xc29), (0xc3a, 0xc3b), (0xc45, 0xc45),
    (0xc49, 0xc49), (0xc4e, 0xc54), (0xc57, 0xc57), (0xc5b, 0xc5c), (0xc5e, 0xc5f),
    (0xc64, 0xc65), (0xc70, 0xc76), (0xc8d, 0xc8d), (0xc91, 0xc91), (0xca9, 0xca9),
    (0xcb4, 0xcb4), (0xcba, 0xcbb), (0xcc5, 0xcc5), (0xcc9, 0xcc9), (0xcce, 0xcd4),
    (0xcd7, 0xcdc), (0xcdf, 0xcdf), (0xce4, 0xce5), (0xcf0, 0xcf0), (0xcf3, 0xcff),
    (0xd0d, 0xd0d), (0xd11, 0xd11), (0xd45, 0xd45), (0xd49, 0xd49), (0xd50, 0xd53),
    (0xd64, 0xd65), (0xd80, 0xd80), (0xd84, 0xd84), (0xd97, 0xd99), (0xdb2, 0xdb2),
    (0xdbc, 0xdbc), (0xdbe, 0xdbf), (0xdc7, 0xdc9), (0xdcb, 0xdce), (0xdd5, 0xdd5),
    (0xdd7, 0xdd7), (0xde0, 0xde5), (0xdf0, 0xdf1), (0xdf5, 0xe00), (0xe3b, 0xe3e),
    (0xe5c, 0xe80), (0xe83, 0xe83), (0xe85, 0xe85), (0xe8b, 0xe8b), (0xea4, 0xea4),
    (0xea6, 0xea6), (0xebe, 0xebf), (0xec5, 0xec5), (0xec7, 0xec7), (0xece, 0xecf),
    (0xeda, 0xedb), (0xee0, 0xeff), (0xf48, 0xf48), (0xf6d, 0xf70), (0xf98, 0xf98),
    (0xfbd, 0xfbd), (0xfcd, 0xfcd), (0xfdb, 0xfff), (0x10c6, 0x10c6), (0x10c8, 0x10cc),
    (0x10ce, 0x10cf), (0x1249, 0x1249), (0x124e, 0x124f), (0x1257, 0x1257), (0x1259, 0x1259),
    (0x125e, 0x125f), (0x1289, 0x1289), (0x128e, 0x128f), (0x12b1, 0x12b1), (0x12b6, 0x12b7),
    (0x12bf, 0x12bf), (0x12c1, 0x12c1), (0x12c6, 0x12c7), (0x12d7, 0x12d7), (0x1311, 0x1311),
    (0x1316, 0x1317), (0x135b, 0x135c), (0x137d, 0x137f), (0x139a, 0x139f), (0x13f6, 0x13f7),
    (0x13fe, 0x13ff), (0x1680, 0x1680), (0x169d, 0x169f), (0x16f9, 0x16ff), (0x1716, 0x171e),
    (0x1737, 0x173f), (0x1754, 0x175f), (0x176d, 0x176d), (0x1771, 0x1771), (0x1774, 0x177f),
    (0x17de, 0x17df), (0x17ea, 0x17ef), (0x17fa, 0x17ff), (0x180e, 0x180e), (0x181a, 0x181f),
    (0x1879, 0x187f), (0x18ab, 0x18af), (0x18f6, 0x18ff), (0x191f, 0x191f), (0x192c, 0x192f),
    (0x193c, 0x193f), (0x1941, 0x1943), (0x196e, 0x196f), (0x1975, 0x197f), (0x19ac, 0x19af),
    (0x19ca, 0x19cf), (0x19db, 0x19dd), (0x1a1c, 0x1a1d), (0x1a5f, 0x1a5f), (0x1a7d, 0x1a7e),
    (0x1a8a, 0x1a8f), (0x1a9a, 0x1a9f), (0x1aae, 0x1aaf), (0x1acf, 0x1aff), (0x1b4d, 0x1b4f),
    (0x1b7f, 0x1b7f), (0x1bf4, 0x1bfb), (0x1c38, 0x1c3a), (0x1c4a, 0x1c4c), (0x1c89, 0x1c8f),
    (0x1cbb, 0x1cbc), (0x1cc8, 0x1ccf), (0x1cfb, 0x1cff), (0x1f16, 0x1f17), (0x1f1e, 0x1f1f),
    (0x1f46, 0x1f47), (0x1f4e, 0x1f4f), (0x1f58, 0x1f58), (0x1f5a, 0x1f5a), (0x1f5c, 0x1f5c),
    (0x1f5e, 0x1f5e), (0x1f7e, 0x1f7f), (0x1fb5, 0x1fb5), (0x1fc5, 0x1fc5), (0x1fd4, 0x1fd5),
    (0x1fdc, 0x1fdc), (0x1ff0, 0x1ff1), (0x1ff5, 0x1ff5), (0x1fff, 0x200f), (0x2028, 0x202f),
    (0x205f, 0x206f), (0x2072, 0x2073), (0x208f, 0x208f), (0x209d, 0x209f), (0x20c1, 0x20cf),
    (0x20f1, 0x20ff), (0x218c, 0x218f), (0x2427, 0x243f), (0x244b, 0x245f), (0x2b74, 0x2b75),
    (0x2b96, 0x2b96), (0x2cf4, 0x2cf8), (0x2d26, 0x2d26), (0x2d28, 0x2d2c), (0x2d2e, 0x2d2f),
    (0x2d68, 0x2d6e), (0x2d71, 0x2d7e), (0x2d97, 0x2d9f), (0x2da7, 0x2da7), (0x2daf, 0x2daf),
    (0x2db7, 0x2db7), (0x2dbf, 0x2dbf), (0x2dc7, 0x2dc7), (0x2dcf, 0x2dcf), (0x2dd7, 0x2dd7),
    (0x2ddf, 0x2ddf), (0x2e5e, 0x2e7f), (0x2e9a, 0x2e9a), (0x2ef4, 0x2eff), (0x2fd6, 0x2fef),
    (0x2ffc, 0x3000), (0x3040, 0x3040), (0x3097, 0x3098), (0x3100, 0x3104), (0x3130, 0x3130),
    (0x318f, 0x318f), (0x31e4, 0x31ef), (0x321f, 0x321f), (0xa48d, 0xa48f), (0xa4c7, 0xa4cf),
    (0xa62c, 0xa63f), (0xa6f8, 0xa6ff), (0xa7cb, 0xa7cf), (0xa7d2, 0xa7d2), (0xa7d4, 0xa7d4),
    (0xa7da, 0xa7f1), (0xa82d, 0xa82f), (0xa83a, 0xa83f), (0xa878, 0xa87f), (0xa8c6, 0xa8cd),
    (0xa8da, 0xa8df), (0xa954, 0xa95e), (0xa97d, 0xa97f), (0xa9ce, 0xa9ce), (0xa9da, 0xa9dd),
    (0xa9ff, 0xa9ff), (0xaa37, 0xaa3f), (0xaa4e, 0xaa4f), (0xaa5a, 0xaa5b), (0xaac3, 0xaada),
    (0xaaf7, 0xab00), (0xab07, 0xab08), (0xab0f, 0xab10), (0xab17, 0xab1f), (0xab27, 0xab27),
    (0xab2f, 0xab2f), (0xab6c, 0xab6f), (0xabee, 0xabef), (0xabfa, 0xabff), (0xd7a4, 0xd7af),
    (0xd7c7, 0xd7ca), (0xd7fc, 0xf8ff), (0xfa6e, 0xfa6f), (0xfada, 0xfaff), (0xfb07, 0xfb12),
    (0xfb18, 0xfb1c), (0xfb37, 0xfb37), (0xfb3d, 0xfb3d), (0xfb3f, 0xfb3f), (0xfb42, 0xfb42),
    (0xfb45, 0xfb45), (0xfbc3, 0xfbd2), (0xfd90, 0xfd91), (0xfdc8, 0xfdce), (0xfdd0, 0xfdef),
    (0xfe1a, 0xfe1f), (0xfe53, 0xfe53), (0xfe67, 0xfe67), (0xfe6c, 0xfe6f), (0xfe75, 0xfe75),
    (0xfefd, 0xff00), (0xffbf, 0xffc1), (0xffc8, 0xffc9), (0xffd0, 0xffd1), (0xffd8, 0xffd9),
    (0xffdd, 0xffdf), (0xffe7, 0xffe7), (0xffef, 0xfffb), (0xfffe, 0xffff), (0x1000c, 0x1000c),
    (0x10027, 0x10027), (0x1003b, 0x1003b), (0x1003e, 0x1003e), (0x1004e, 0x1004f),
    (0x1005e, 0x1007f), (0x100fb, 0x100ff), (0x10103, 0x10106), (0x10134, 0x10136),
    (0x1018f, 0x1018f), (0x1019d, 0x1019f), (0x101a1, 0x101cf), (0x101fe, 0x1027f),
    (0x1029d, 0x1029f), (0x102d1, 0x102df), (0x102fc, 0x102ff), (0x10324, 0x1032c),
    (0x1034b, 0x1034f), (0x1037b, 0x1037f), (0x1039e, 0x1039e), (0x103c4, 0x103c7),
    (0x103d6, 0x103ff), (0x1049e, 0x1049f), (0x104aa, 0x104af), (0x104d4, 0x104d7),
    (0x104fc, 0x104ff), (0x10528, 0x1052f), (0x10564, 0x1056e), (0x1057b, 0x1057b),
    (0x1058b, 0x1058b), (0x10593, 0x10593), (0x10596, 0x10596), (0x105a2, 0x105a2),
    (0x105b2, 0x105b2), (0x105ba, 0x105ba), (0x105bd, 0x105ff), (0x10737, 0x1073f),
    (0x10756, 0x1075f), (0x10768, 0x1077f), (0x10786, 0x10786), (0x107b1, 0x107b1),
    (0x107bb, 0x107ff), (0x10806, 0x10807), (0x10809, 0x10809), (0x10836, 0x10836),
    (0x10839, 0x1083b), (0x1083d, 0x1083e), (0x10856, 0x10856), (0x1089f, 0x108a6),
    (0x108b0, 0x108df), (0x108f3, 0x108f3), (0x108f6, 0x108fa), (0x1091c, 0x1091e),
    (0x1093a, 0x1093e), (0x10940, 0x1097f), (0x109b8, 0x109bb), (0x109d0, 0x109d1),
    (0x10a04, 0x10a04), (0x10a07, 0x10a0b), (0x10a14, 0x10a14), (0x10a18, 0x10a18),
    (0x10a36, 0x10a37), (0x10a3b, 0x10a3e), (0x10a49, 0x10a4f), (0x10a59, 0x10a5f),
    (0x10aa0, 0x10abf), (0x10ae7, 0x10aea), (0x10af7, 0x10aff), (0x10b36, 0x10b38),
    (0x10b56, 0x10b57), (0x10b73, 0x10b77), (0x10b92, 0x10b98), (0x10b9d, 0x10ba8),
    (0x10bb0, 0x10bff), (0x10c49, 0x10c7f), (0x10cb3, 0x10cbf), (0x10cf3, 0x10cf9),
    (0x10d28, 0x10d2f), (0x10d3a, 0x10e5f), (0x10e7f, 0x10e7f), (0x10eaa, 0x10eaa),
    (0x10eae, 0x10eaf), (0x10eb2, 0x10eff), (0x10f28, 0x10f2f), (0x10f5a, 0x10f6f),
    (0x10f8a, 0x10faf), (0x10fcc, 0x10fdf), (0x10ff7, 0x10fff), (0x1104e, 0x11051),
    (0x11076, 0x1107e), (0x110bd, 0x110bd), (0x110c3, 0x110cf), (0x110e9, 0x110ef),
    (0x110fa, 0x110ff), (0x11135, 0x11135), (0x11148, 0x1114f), (0x11177, 0x1117f),
    (0x111e0, 0x111e0), (0x111f5, 0x111ff), (0x11212, 0x11212), (0x1123f, 0x1127f),
    (0x11287, 0x11287), (0x11289, 0x11289), (0x1128e, 0x1128e), (0x1129e, 0x1129e),
    (0x112aa, 0x112af), (0x112eb, 0x112ef), (0x112fa, 0x112ff), (0x11304, 0x11304),
    (0x1130d, 0x1130e), (0x11311, 0x11312), (0x11329, 0x11329), (0x11331, 0x11331),
    (0x11334, 0x11334), (0x1133a, 0x1133a), (0x11345, 0x11346), (0x11349, 0x1134a),
    (0x1134e, 0x1134f), (0x11351, 0x11356), (0x11358, 0x1135c), (0x11364, 0x11365),
    (0x1136d, 0x1136f), (0x11375, 0x113ff), (0x1145c, 0x1145c), (0x11462, 0x1147f),
    (0x114c8, 0x114cf), (0x114da, 0x1157f), (0x115b6, 0x115b7), (0x115de, 0x115ff),
    (0x11645, 0x1164f), (0x1165a, 0x1165f), (0x1166d, 0x1167f), (0x116ba, 0x116bf),
    (0x116ca, 0x116ff), (0x1171b, 0x1171c), (0x1172c, 0x1172f), (0x11747, 0x117ff),
    (0x1183c, 0x1189f), (0x118f3, 0x118fe), (0x11907, 0x11908), (0x1190a, 0x1190b),
    (0x11914, 0x11914), (0x11917, 0x11917), (0x11936, 0x11936), (0x11939, 0x1193a),
    (0x11947, 0x1194f), (0x1195a, 0x1199f), (0x119a8, 0x119a9), (0x119d8, 0x119d9),
    (0x119e5, 0x119ff), (0x11a48, 0x11a4f), (0x11aa3, 0x11aaf), (0x11af9, 0x11bff),
    (0x11c09, 0x11c09), (0x11c37, 0x11c37), (0x11c46, 0x11c4f), (0x11c6d, 0x11c6f),
    (0x11c90, 0x11c91), (0x11ca8, 0x11ca8), (0x11cb7, 0x11cff), (0x11d07, 0x11d07),
    (0x11d0a, 0x11d0a), (0x11d37, 0x11d39), (0x11d3b, 0x11d3b), (0x11d3e, 0x11d3e),
    (0x11d48, 0x11d4f), (0x11d5a, 0x11d5f), (0x11d66, 0x11d66), (0x11d69, 0x11d69),
    (0x11d8f, 0x11d8f), (0x11d92, 0x11d92), (0x11d99, 0x11d9f), (0x11daa, 0x11edf),
    (0x11ef9, 0x11faf), (0x11fb1, 0x11fbf), (0x11ff2, 0x11ffe), (0x1239a, 0x123ff),
    (0x1246f, 0x1246f), (0x12475, 0x1247f), (0x12544, 0x12f8f), (0x12ff3, 0x12fff),
    (0x1342f, 0x143ff), (0x14647, 0x167ff), (0x16a39, 0x16a3f), (0x16a5f, 0x16a5f),
    (0x16a6a, 0x16a6d), (0x16abf, 0x16abf), (0x16aca, 0x16acf), (0x16aee, 0x16aef),
    (0x16af6, 0x16aff), (0x16b46, 0x16b4f), (0x16b5a, 0x16b5a), (0x16b62, 0x16b62),
    (0x16b78, 0x16b7c), (0x16b90, 0x16e3f), (0x16e9b, 0x16eff), (0x16f4b, 0x16f4e),
    (0x16f88, 0x16f8e), (0x16fa0, 0x16fdf), (0x16fe5, 0x16fef), (0x16ff2, 0x16fff),
    (0x187f8, 0x187ff), (0x18cd6, 0x18cff), (0x18d09, 0x1afef), (0x1aff4, 0x1aff4),
    (0x1affc, 0x1affc), (0x1afff, 0x1afff), (0x1b123, 0x1b14f), (0x1b153, 0x1b163),
    (0x1b168, 0x1b16f), (0x1b2fc, 0x1bbff), (0x1bc6b, 0x1bc6f), (0x1bc7d, 0x1bc7f),
    (0x1bc89, 0x1bc8f), (0x1bc9a, 0x1bc9b), (0x1bca0, 0x1ceff), (0x1cf2e, 0x1cf2f),
    (0x1cf47, 0x1cf4f), (0x1cfc4, 0x1cfff), (0x1d0f6, 0x1d0ff), (0x1d127, 0x1d128),
    (0x1d173, 0x1d17a), (0x1d1eb, 0x1d1ff), (0x1d246, 0x1d2df), (0x1d2f4, 0x1d2ff),
    (0x1d357, 0x1d35f), (0x1d379, 0x1d3ff), (0x1d455, 0x1d455), (0x1d49d, 0x1d49d),
    (0x1d4a0, 0x1d4a1), (0x1d4a3, 0x1d4a4), (0x1d4a7, 0x1d4a8), (0x1d4ad, 0x1d4ad),
    (0x1d4ba, 0x1d4ba), (0x1d4bc, 0x1d4bc), (0x1d4c4, 0x1d4c4), (0x1d506, 0x1d506),
    (0x1d50b, 0x1d50c), (0x1d515, 0x1d515), (0x1d51d, 0x1d51d), (0x1d53a, 0x1d53a),
    (0x1d53f, 0x1d53f), (0x1d545, 0x1d545), (0x1d547, 0x1d549), (0x1d551, 0x1d551),
    (0x1d6a6, 0x1d6a7), (0x1d7cc, 0x1d7cd), (0x1da8c, 0x1da9a), (0x1daa0, 0x1daa0),
    (0x1dab0, 0x1deff), (0x1df1f, 0x1dfff), (0x1e007, 0x1e007), (0x1e019, 0x1e01a),
    (0x1e022, 0x1e022), (0x1e025, 0x1e025), (0x1e02b, 0x1e0ff), (0x1e12d, 0x1e12f),
    (0x1e13e, 0x1e13f), (0x1e14a, 0x1e14d), (0x1e150, 0x1e28f), (0x1e2af, 0x1e2bf),
    (0x1e2fa, 0x1e2fe), (0x1e300, 0x1e7df), (0x1e7e7, 0x1e7e7), (0x1e7ec, 0x1e7ec),
    (0x1e7ef, 0x1e7ef), (0x1e7ff, 0x1e7ff), (0x1e8c5, 0x1e8c6), (0x1e8d7, 0x1e8ff),
    (0x1e94c, 0x1e94f), (0x1e95a, 0x1e95d), (0x1e960, 0x1ec70), (0x1ecb5, 0x1ed00),
    (0x1ed3e, 0x1edff), (0x1ee04, 0x1ee04), (0x1ee20, 0x1ee20), (0x1ee23, 0x1ee23),
    (0x1ee25, 0x1ee26), (0x1ee28, 0x1ee28), (0x1ee33, 0x1ee33), (0x1ee38, 0x1ee38),
    (0x1ee3a, 0x1ee3a), (0x1ee3c, 0x1ee41), (0x1ee43, 0x1ee46), (0x1ee48, 0x1ee48),
    (0x1ee4a, 0x1ee4a), (0x1ee4c, 0x1ee4c), (0x1ee50, 0x1ee50), (0x1ee53, 0x1ee53),
    (0x1ee55, 0x1ee56), (0x1ee58, 0x1ee58), (0x1ee5a, 0x1ee5a), (0x1ee5c, 0x1ee5c),
    (0x1ee5e, 0x1ee5e), (0x1ee60, 0x1ee60), (0x1ee63, 0x1ee63), (0x1ee65, 0x1ee66),
    (0x1ee6b, 0x1ee6b), (0x1ee73, 0x1ee73), (0x1ee78, 0x1ee78), (0x1ee7d, 0x1ee7d),
    (0x1ee7f, 0x1ee7f), (0x1ee8a, 0x1ee8a), (0x1ee9c, 0x1eea0), (0x1eea4, 0x1eea4),
    (0x1eeaa, 0x1eeaa), (0x1eebc, 0x1eeef), (0x1eef2, 0x1efff), (0x1f02c, 0x1f02f),
    (0x1f094, 0x1f09f), (0x1f0af, 0x1f0b0), (0x1f0c0, 0x1f0c0), (0x1f0d0, 0x1f0d0),
    (0x1f0f6, 0x1f0ff), (0x1f1ae, 0x1f1e5), (0x1f203, 0x1f20f), (0x1f23c, 0x1f23f),
    (0x1f249, 0x1f24f), (0x1f252, 0x1f25f), (0x1f266, 0x1f2ff), (0x1f6d8, 0x1f6dc),
    (0x1f6ed, 0x1f6ef), (0x1f6fd, 0x1f6ff), (0x1f774, 0x1f77f), (0x1f7d9, 0x1f7df),
    (0x1f7ec, 0x1f7ef), (0x1f7f1, 0x1f7ff), (0x1f80c, 0x1f80f), (0x1f848, 0x1f84f),
    (0x1f85a, 0x1f85f), (0x1f888, 0x1f88f), (0x1f8ae, 0x1f8af), (0x1f8b2, 0x1f8ff),
    (0x1fa54, 0x1fa5f), (0x1fa6e, 0x1fa6f), (0x1fa75, 0x1fa77), (0x1fa7d, 0x1fa7f),
    (0x1fa87, 0x1fa8f), (0x1faad, 0x1faaf), (0x1fabb, 0x1fabf), (0x1fac6, 0x1facf),
    (0x1fada, 0x1fadf), (0x1fae8, 0x1faef), (0x1faf7, 0x1faff), (0x1fb93, 0x1fb93),
    (0x1fbcb, 0x1fbef), (0x1fbfa, 0x1ffff), (0x2a6e0, 0x2a6ff), (0x2b739, 0x2b73f),
    (0x2b81e, 0x2b81f), (0x2cea2, 0x2ceaf), (0x2ebe1, 0x2f7ff), (0x2fa1e, 0x2ffff),
    (0x3134b, 0xe00ff), (0xe01f0, 0x10ffff),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn loads(s: &str) -> Result<PyValue, PyError> {
        json_loads(s, 32)
    }

    fn repr(v: &PyValue) -> String {
        let mut s = String::new();
        py_repr(v, &mut s).expect("repr");
        s
    }

    #[test]
    fn float_repr_as_python() {
        for (f, want) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (-2.5, "-2.5"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (123456789012345680.0, "1.2345678901234568e+17"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e100, "1e+100"),
            (-0.0, "-0.0"),
            (f64::INFINITY, "inf"),
            (f64::NAN, "nan"),
        ] {
            assert_eq!(float_repr(f), want);
        }
    }

    #[test]
    fn json_loads_python_quirks() {
        assert!(matches!(loads("NaN"), Ok(PyValue::Float(f)) if f.is_nan()));
        assert!(matches!(loads(" -Infinity "), Ok(PyValue::Float(f)) if f == f64::NEG_INFINITY));
        assert!(matches!(loads("1e400"), Ok(PyValue::Float(f)) if f == f64::INFINITY));
        assert!(matches!(loads("-0"), Ok(PyValue::Int(PyInt::Small(0)))));
        assert!(matches!(
            loads("123456789012345678901234567890"),
            Ok(PyValue::Int(PyInt::Big { .. }))
        ));
        assert_eq!(
            repr(&loads(r#"{"a": 1, "b": [true, null, 1.0], "a": 2}"#).unwrap()),
            "{'a': 2, 'b': [True, None, 1.0]}"
        );
        assert_eq!(repr(&loads(r#""it's \"x\"""#).unwrap()), r#"'it\'s "x"'"#);
        assert_eq!(
            repr(&loads(r#""\ud800\udc00\ud800x\u00a0é""#).unwrap()),
            "'\u{10000}\\ud800x\\xa0é'"
        );
        for bad in [
            "",
            "[1,]",
            "{\"a\":1,}",
            "01",
            "1.",
            ".5",
            "[1 2]",
            "'a'",
            "\"\u{1}\"",
            "\"\\x\"",
            "\u{feff}1",
            "tru",
            "[",
            "{1:2}",
            "1 2",
            "-",
            "\"\\u12\"",
        ] {
            let err = loads(bad).expect_err(bad);
            assert_eq!(err.kind, PyExc::ValueError, "{bad:?}");
        }
        assert_eq!(
            loads(&"[".repeat(33)).unwrap_err().kind,
            PyExc::RecursionError
        );
        assert!(loads(&format!("{}{}", "[".repeat(32), "]".repeat(32))).is_ok());
        assert_eq!(
            loads(&"1".repeat(4301)).unwrap_err().kind,
            PyExc::ValueError
        );
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
        let big = loads("9223372036854775808").unwrap();
        assert!(py_eq(&big, &f(9.223_372_036_854_776e18)));
        assert!(py_compare(
            &loads("9223372036854775809").unwrap(),
            &f(9.223_372_036_854_776e18),
            CmpOp::Gt
        )
        .unwrap());
        assert!(!py_eq(
            &loads("100000000000000000000000000000").unwrap(),
            &f(1e29)
        ));
        assert!(py_eq(
            &loads("99999999999999991433150857216").unwrap(),
            &f(1e29)
        ));
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
            py_compare(&loads("{}").unwrap(), &loads("{}").unwrap(), CmpOp::Le)
                .unwrap_err()
                .kind,
            PyExc::TypeError
        );
        assert!(py_eq(
            &loads(r#"{"a":1,"b":2}"#).unwrap(),
            &loads(r#"{"b":2.0,"a":true}"#).unwrap()
        ));
    }

    #[test]
    fn host_attributes() {
        let h = HostState {
            host: "h1".into(),
            nodename: "n1".into(),
            free_ram_mb: 1024,
            host_ip: Some("10.0.0.1".into()),
            cpu_allocation_ratio: 16.0,
            ..Default::default()
        };
        assert!(host_has_attr("free_ram_mb") && host_has_attr("update") && !host_has_attr("nope"));
        assert_eq!(
            py_str(&host_attr(&h, "free_ram_mb")).unwrap(),
            PyStr::new("1024")
        );
        assert_eq!(
            py_str(&host_attr(&h, "cpu_allocation_ratio")).unwrap(),
            PyStr::new("16.0")
        );
        assert_eq!(
            py_str(&host_attr(&h, "host_ip")).unwrap(),
            PyStr::new("10.0.0.1")
        );
        assert!(!py_eq(&host_attr(&h, "host_ip"), &PyValue::str("10.0.0.1")));
        assert!(host_attr(&h, "hypervisor_version").is_none());
        assert_eq!(
            py_str(&host_attr(&h, "update")).unwrap(),
            PyStr::new("<bound method HostState.update of (h1, n1) ram: 1024MB disk: 0MB io_ops: 0 instances: 0, allocation_candidates: 0>")
        );
    }
}
