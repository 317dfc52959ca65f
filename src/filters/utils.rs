// SPDX-License-Identifier: Apache-2.0
//! nova's `nova/scheduler/filters/utils.py` (the aggregate helpers every aggregate
//! filter uses) and the bits of Python's built-ins they rely on: `int()` / `float()`
//! string parsing, `str.split()` and `str.strip()` with Python's idea of whitespace.
//!
//! nova's helpers raise `ValueError` where Python does; here that is [`PyError`], so a
//! caller can do exactly what nova's caller does with it (most fall back to a default).

use crate::model::HostState;
use std::collections::{BTreeMap, BTreeSet};

/// The Python exception classes nova's filter code can raise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PyExc {
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    RecursionError,
}

impl PyExc {
    pub fn name(self) -> &'static str {
        match self {
            PyExc::ValueError => "ValueError",
            PyExc::TypeError => "TypeError",
            PyExc::KeyError => "KeyError",
            PyExc::IndexError => "IndexError",
            PyExc::AttributeError => "AttributeError",
            PyExc::RecursionError => "RecursionError",
        }
    }
}

/// An exception nova's code would raise at this point.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", .kind.name())]
pub struct PyError {
    pub kind: PyExc,
    pub message: String,
}

impl PyError {
    pub fn new(kind: PyExc, message: impl Into<String>) -> Self {
        PyError {
            kind,
            message: message.into(),
        }
    }

    pub fn value_error(message: impl Into<String>) -> Self {
        PyError::new(PyExc::ValueError, message)
    }
}

// ---------------------------------------------------------------------------------
// nova/scheduler/filters/utils.py
// ---------------------------------------------------------------------------------

/// `aggregate_values_from_key(host_state, key)`: the set of **raw** metadata values of
/// `key` over the host's aggregates. No comma splitting: `'6,7'` is one value.
pub fn aggregate_values_from_key(host: &HostState, key: &str) -> BTreeSet<String> {
    host.aggregates
        .iter()
        .filter_map(|a| a.metadata.get(key).cloned())
        .collect()
}

/// `aggregate_metadata_get_by_host(host_state, key=None)`: key → set of values over
/// the host's aggregates (with `key` given, only the aggregates holding that key, but
/// then **all** their metadata). Every value is split on `,` and each part stripped
/// of Python whitespace: `'8, 9'` → `{'8', '9'}`, `'a,'` → `{'a', ''}`.
/// No aggregates → empty map.
pub fn aggregate_metadata_get_by_host(
    host: &HostState,
    key: Option<&str>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for aggr in &host.aggregates {
        if key.is_some_and(|k| !aggr.metadata.contains_key(k)) {
            continue;
        }
        for (k, v) in &aggr.metadata {
            out.entry(k.clone())
                .or_default()
                .extend(v.split(',').map(|x| py_strip(x).to_string()));
        }
    }
    out
}

/// `based_on` of `validate_num_values`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BasedOn {
    Min,
    Max,
}

/// `validate_num_values(vals, default, cast_to, based_on)`: no values → `default`;
/// otherwise **every** value is cast (`cast_to` is [`py_int`] or [`py_float`]) and
/// the min (or max) returned. One value that does not parse is an error for the whole
/// set: nova's callers catch the `ValueError` and use their configured default
/// ([`validate_num_values_or_default`] does that).
///
/// Values are visited in sorted order (nova walks a Python set, in hash order); that
/// only matters for NaN, which Python's `min` keeps or drops depending on position.
pub fn validate_num_values<T: PartialOrd + Copy>(
    vals: &BTreeSet<String>,
    default: T,
    cast_to: fn(&str) -> Result<T, PyError>,
    based_on: BasedOn,
) -> Result<T, PyError> {
    if vals.is_empty() {
        return Ok(default);
    }
    if vals.len() > 1 {
        tracing::info!(
            "{} values found, of which the {} value will be used.",
            vals.len(),
            if based_on == BasedOn::Min {
                "minimum"
            } else {
                "maximum"
            }
        );
    }
    let mut best: Option<T> = None;
    // Python casts the whole list first (the first bad value raises), then min()s it.
    let cast: Vec<T> = vals.iter().map(|v| cast_to(v)).collect::<Result<_, _>>()?;
    for v in cast {
        best = Some(match best {
            None => v,
            // Python's min/max replace the current best only on a strict comparison.
            Some(b) if based_on == BasedOn::Min && v < b => v,
            Some(b) if based_on == BasedOn::Max && v > b => v,
            Some(b) => b,
        });
    }
    Ok(best.unwrap_or(default))
}

/// What nova's aggregate filters do around `validate_num_values`: a value that does
/// not parse logs a warning and the configured default is used for the whole set.
pub fn validate_num_values_or_default<T: PartialOrd + Copy>(
    vals: &BTreeSet<String>,
    default: T,
    cast_to: fn(&str) -> Result<T, PyError>,
    based_on: BasedOn,
    what: &str,
) -> T {
    validate_num_values(vals, default, cast_to, based_on).unwrap_or_else(|e| {
        tracing::warn!("Could not decode {what}: '{}'", e.message);
        default
    })
}

// ---------------------------------------------------------------------------------
// Python built-ins
// ---------------------------------------------------------------------------------

/// `str.isspace()` for one character (Python 3.11): Unicode White_Space plus the
/// ASCII separators U+001C..U+001F, which Python counts and Rust does not.
pub fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `s.strip()` with no argument.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(py_isspace)
}

/// `s.split()` with no argument: runs of Python whitespace separate, no empty words.
pub fn py_split(s: &str) -> Vec<&str> {
    s.split(py_isspace).filter(|w| !w.is_empty()).collect()
}

/// First code point of each run of ten Unicode decimal digits (category Nd) as
/// Python 3.11 (Unicode 14.0) knows them; `int()` and `float()` accept all of them.
const DECIMAL_ZEROS: [u32; 66] = [
    0x30, 0x660, 0x6f0, 0x7c0, 0x966, 0x9e6, 0xa66, 0xae6, 0xb66, 0xbe6, 0xc66, 0xce6, 0xd66,
    0xde6, 0xe50, 0xed0, 0xf20, 0x1040, 0x1090, 0x17e0, 0x1810, 0x1946, 0x19d0, 0x1a80, 0x1a90,
    0x1b50, 0x1bb0, 0x1c40, 0x1c50, 0xa620, 0xa8d0, 0xa900, 0xa9d0, 0xa9f0, 0xaa50, 0xabf0, 0xff10,
    0x104a0, 0x10d30, 0x11066, 0x110f0, 0x11136, 0x111d0, 0x112f0, 0x11450, 0x114d0, 0x11650,
    0x116c0, 0x11730, 0x118e0, 0x11950, 0x11c50, 0x11d50, 0x11da0, 0x16a60, 0x16ac0, 0x16b50,
    0x1d7ce, 0x1d7d8, 0x1d7e2, 0x1d7ec, 0x1d7f6, 0x1e140, 0x1e2f0, 0x1e950, 0x1fbf0,
];

/// The value of a Unicode decimal digit, as `unicodedata.decimal()`.
fn decimal_value(c: char) -> Option<u8> {
    let cp = c as u32;
    let i = DECIMAL_ZEROS.partition_point(|&z| z <= cp);
    let zero = *DECIMAL_ZEROS.get(i.checked_sub(1)?)?;
    (cp - zero < 10).then(|| (cp - zero) as u8)
}

/// CPython's `_PyUnicode_TransformDecimalAndSpaceToASCII` followed by stripping
/// ASCII whitespace: non-ASCII digits become ASCII digits, non-ASCII whitespace a
/// space, anything else non-ASCII makes the text invalid (`None`).
fn ascii_number_text(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        // ASCII (below DEL) is kept as is: U+001C..U+001F are not stripped here.
        if (c as u32) < 127 {
            out.push(c);
        } else if py_isspace(c) {
            out.push(' ');
        } else if let Some(d) = decimal_value(c) {
            out.push((b'0' + d) as char);
        } else {
            return None;
        }
    }
    Some(
        out.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b')
            .to_string(),
    )
}

/// CPython's `_Py_string_to_number_with_underscores` check: an underscore must sit
/// between two digits; returns the text without them.
fn remove_underscores(s: &str) -> Option<String> {
    if !s.contains('_') {
        return Some(s.to_string());
    }
    let mut out = String::with_capacity(s.len());
    let mut prev = '\0';
    for c in s.chars() {
        if c == '_' {
            if !prev.is_ascii_digit() {
                return None;
            }
        } else {
            if prev == '_' && !c.is_ascii_digit() {
                return None;
            }
            out.push(c);
        }
        prev = c;
    }
    (prev != '_').then_some(out)
}

/// Python's `float(s)` for a str: surrounding whitespace, sign, `_` between digits,
/// `1.`, `.5`, exponents, `inf`/`infinity`/`nan` in any case, Unicode digits.
pub fn py_float(s: &str) -> Result<f64, PyError> {
    let err = || PyError::value_error(format!("could not convert string to float: {s:?}"));
    let text = ascii_number_text(s).ok_or_else(err)?;
    let text = remove_underscores(&text).ok_or_else(err)?;
    let (neg, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, &text[..]),
    };
    let lower = body.to_ascii_lowercase();
    let value = match lower.as_str() {
        "inf" | "infinity" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => {
            if !is_decimal_float(body) {
                return Err(err());
            }
            body.parse::<f64>().map_err(|_| err())?
        }
    };
    Ok(if neg { -value } else { value })
}

/// `digits [. digits] [e [sign] digits]` with at least one mantissa digit.
fn is_decimal_float(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let int_digits = b.iter().take_while(|c| c.is_ascii_digit()).count();
    i += int_digits;
    let mut frac_digits = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        frac_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        i += frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if exp_digits == 0 {
            return false;
        }
        i += exp_digits;
    }
    i == b.len()
}

/// Python 3.11's limit on the digits of a decimal `int()` (`sys.int_info.default_max_str_digits`).
pub const PY_INT_MAX_STR_DIGITS: usize = 4300;

/// Python's `int(s)` for a str (base 10): surrounding whitespace, sign, `_` between
/// digits, Unicode digits; no decimal point (`int('1.5')` raises). Python's ints are
/// unbounded: values beyond `i64` saturate here, which keeps every comparison with a
/// host counter as Python would make it. More than 4300 digits raise, as in Python 3.11.
pub fn py_int(s: &str) -> Result<i64, PyError> {
    let err = || PyError::value_error(format!("invalid literal for int() with base 10: {s:?}"));
    let text = ascii_number_text(s).ok_or_else(err)?;
    let (neg, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, &text[..]),
    };
    if body.is_empty() || body.starts_with('_') {
        return Err(err());
    }
    let digits = remove_underscores(body).ok_or_else(err)?;
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(err());
    }
    if digits.len() > PY_INT_MAX_STR_DIGITS {
        return Err(PyError::value_error(format!(
            "Exceeds the limit ({PY_INT_MAX_STR_DIGITS} digits) for integer string conversion: value has {} digits",
            digits.len()
        )));
    }
    let mut v: i64 = 0;
    for d in digits.bytes() {
        let d = i64::from(d - b'0');
        v = v.saturating_mul(10);
        v = if neg {
            v.saturating_sub(d)
        } else {
            v.saturating_add(d)
        };
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Aggregate;
    use std::sync::Arc;

    fn host_with(aggs: &[&[(&str, &str)]]) -> HostState {
        HostState {
            aggregates: aggs
                .iter()
                .enumerate()
                .map(|(i, md)| {
                    Arc::new(Aggregate {
                        id: i as i64 + 1,
                        metadata: md
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .collect(),
                        ..Default::default()
                    })
                })
                .collect(),
            ..Default::default()
        }
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    /// nova's test_utils.py: aggregates k1 '1'/'3'/'6,7', k2 '2'/'4'/'8, 9'.
    #[test]
    fn nova_vectors_aggregate_helpers() {
        let host = host_with(&[
            &[("k1", "1"), ("k2", "2")],
            &[("k1", "3"), ("k2", "4")],
            &[("k1", "6,7"), ("k2", "8, 9")],
        ]);
        assert_eq!(
            aggregate_values_from_key(&host, "k1"),
            set(&["1", "3", "6,7"])
        );
        assert!(aggregate_values_from_key(&host, "k3").is_empty());
        let md = aggregate_metadata_get_by_host(&host, None);
        assert_eq!(md["k1"], set(&["1", "3", "6", "7"]));
        assert_eq!(md["k2"], set(&["2", "4", "8", "9"]));
        assert!(aggregate_metadata_get_by_host(&HostState::default(), None).is_empty());
    }

    #[test]
    fn metadata_by_key_keeps_every_key_of_matching_aggregates() {
        let host = host_with(&[&[("a", "x, y,"), ("b", "1")], &[("b", "2")]]);
        let md = aggregate_metadata_get_by_host(&host, Some("a"));
        assert_eq!(md["a"], set(&["x", "y", ""]));
        assert_eq!(md["b"], set(&["1"]), "only aggregates holding 'a' count");
        assert!(aggregate_metadata_get_by_host(&host, Some("zz")).is_empty());
    }

    #[test]
    fn nova_vectors_validate_num_values() {
        assert_eq!(
            validate_num_values(&set(&[]), 7, py_int, BasedOn::Min),
            Ok(7)
        );
        assert_eq!(
            validate_num_values(&set(&["1"]), 0, py_int, BasedOn::Min),
            Ok(1)
        );
        assert_eq!(
            validate_num_values(&set(&["1"]), 0.0, py_float, BasedOn::Min),
            Ok(1.0)
        );
        assert_eq!(
            validate_num_values(&set(&["10", "9"]), 0, py_int, BasedOn::Min),
            Ok(9)
        );
        assert_eq!(
            validate_num_values(&set(&["1", "2"]), 0, py_int, BasedOn::Max),
            Ok(2)
        );
        let bad = validate_num_values(&set(&["3", "XXX"]), 8, py_int, BasedOn::Min);
        assert_eq!(bad.unwrap_err().kind, PyExc::ValueError);
        assert_eq!(
            validate_num_values_or_default(&set(&["3", "XXX"]), 8, py_int, BasedOn::Min, "x"),
            8
        );
    }

    #[test]
    fn python_int_parsing() {
        for (s, want) in [
            ("1", Some(1)),
            (" 42\n", Some(42)),
            ("-7", Some(-7)),
            ("+0", Some(0)),
            ("1_000", Some(1000)),
            ("007", Some(7)),
            ("١٢", Some(12)),
            ("\u{1c}5", None),
            ("\u{3000}5\u{a0}", Some(5)),
            ("99999999999999999999999", Some(i64::MAX)),
            ("1.5", None),
            ("1__0", None),
            ("_1", None),
            ("1_", None),
            ("", None),
            ("-", None),
            ("1e3", None),
            ("0x10", None),
            ("XXX", None),
        ] {
            assert_eq!(py_int(s).ok(), want, "{s:?}");
        }
        assert!(py_int(&"1".repeat(4301)).is_err());
        assert!(py_int(&"1".repeat(4300)).is_ok());
    }

    #[test]
    fn python_float_parsing() {
        for (s, want) in [
            ("1", Some(1.0)),
            (" 1.5 ", Some(1.5)),
            ("1.", Some(1.0)),
            (".5", Some(0.5)),
            ("-2e3", Some(-2000.0)),
            ("1E+2", Some(100.0)),
            ("1_0.2_5", Some(10.25)),
            ("1e1_0", Some(1e10)),
            ("inf", Some(f64::INFINITY)),
            ("-Infinity", Some(f64::NEG_INFINITY)),
            ("１２", Some(12.0)),
            ("1e400", Some(f64::INFINITY)),
            (".", None),
            ("1e", None),
            ("e5", None),
            ("1_.5", None),
            ("infinit", None),
            ("0x1p3", None),
            ("1 2", None),
            ("", None),
            ("abc", None),
        ] {
            assert_eq!(py_float(s).ok(), want, "{s:?}");
        }
        assert!(py_float("nan").unwrap().is_nan());
        assert!(py_float("-NaN").unwrap().is_nan());
    }

    #[test]
    fn python_whitespace() {
        assert_eq!(py_split(" a\u{1c}b \u{3000}c\t"), vec!["a", "b", "c"]);
        assert!(py_split("  ").is_empty());
        assert_eq!(py_strip("\u{a0} x \u{85}"), "x");
    }
}
