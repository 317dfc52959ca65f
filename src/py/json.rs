// SPDX-License-Identifier: Apache-2.0
//! Python's `json` module: `json.loads` into [`PyValue`]s and `json.dumps` with its
//! default output format.
//!
//! `loads` reproduces CPython's C scanner where it differs from serde_json: `NaN`,
//! `Infinity` and `-Infinity` are values, ints are unbounded (up to 4300 digits),
//! a duplicate key keeps its first position and its last value, `\ud800` escapes
//! without a partner stay lone surrogates, and the errors are `ValueError`s.
//! `dumps` writes what `json.dumps(v)` (and oslo's `jsonutils.dumps`) writes:
//! `", "` and `": "` separators, ASCII-only output with `\uXXXX` escapes, floats as
//! `repr(float)`. serde_json does neither, and no maintained crate does.

use super::error::{PyError, PyExc};
use super::int::{too_many_digits, PyInt, MAX_STR_DIGITS};
use super::str::PyStr;
use super::value::{PyDict, PyValue};
use serde_json::Value;
use std::fmt::Write;

/// Python's `json.loads(text)` (C scanner, `strict=True`): `NaN`, `Infinity`,
/// `-Infinity`, unbounded ints (Python 3.11 refuses more than 4300 digits), floats
/// with Python's rounding, duplicate keys keep their first position and last value,
/// lone surrogate escapes kept. Errors are `ValueError` (`JSONDecodeError`).
///
/// `max_depth` bounds the nesting of arrays and objects: deeper input is a
/// `RecursionError`, which is what CPython raises, only at a smaller depth than
/// CPython's (~1000 minus the current stack).
pub fn loads(text: &str, max_depth: usize) -> Result<PyValue, PyError> {
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
        if digits.len() > MAX_STR_DIGITS {
            return Err(too_many_digits(digits.len()));
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
                    out.push_utf8_bytes(&self.s[start..self.i]);
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
// json.dumps
// ---------------------------------------------------------------------------------

/// `json.dumps(value)` with the default arguments.
pub fn dumps(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str(out, k);
                out.push_str(": ");
                write_value(out, v);
            }
            out.push('}');
        }
    }
}

/// An int as its digits, a float as `float.__repr__` (what `json.dumps` calls).
fn write_number(out: &mut String, n: &serde_json::Number) {
    match n.as_f64() {
        Some(f) if n.is_f64() => out.push_str(&super::float::repr(f)),
        _ => {
            let _ = write!(out, "{n}");
        }
    }
}

/// A string with `ensure_ascii=True`: everything outside `' '..='~'` escaped.
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loads(s: &str) -> Result<PyValue, PyError> {
        super::loads(s, 32)
    }

    fn repr(v: &PyValue) -> String {
        let mut s = String::new();
        super::super::value::py_repr(v, &mut s).expect("repr");
        s
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
    fn dumps_matches_python_separators_and_order() {
        let v = serde_json::json!({"allocations": {"cn": {"resources": {"VCPU": 2, "DISK_GB": 20}}}, "mappings": {"": ["cn"]}});
        assert_eq!(
            dumps(&v),
            r#"{"allocations": {"cn": {"resources": {"VCPU": 2, "DISK_GB": 20}}}, "mappings": {"": ["cn"]}}"#
        );
    }

    #[test]
    fn dumps_floats_and_non_ascii_as_python() {
        assert_eq!(
            dumps(&serde_json::json!([
                1.0,
                0.5,
                "é\u{7f}",
                null,
                true,
                1e16,
                0.00001,
                18446744073709551615u64
            ])),
            r#"[1.0, 0.5, "\u00e9\u007f", null, true, 1e+16, 1e-05, 18446744073709551615]"#
        );
    }
}
