// SPDX-License-Identifier: Apache-2.0
//! nova's `extra_specs_ops.match(value, req)`: the operator grammar of flavor extra
//! specs, shared by `ComputeCapabilitiesFilter` and `AggregateInstanceExtraSpecsFilter`.
//!
//! `req` is split on Python whitespace; its first word picks the operator:
//!
//! | op | holds when (x = value, y = first operand) |
//! |---|---|
//! | `=` | `float(x) >= float(y)` (**not** equality) |
//! | `==` `!=` `>=` `<=` | `float(x) OP float(y)` |
//! | `s==` `s!=` `s<` `s<=` `s>` `s>=` | string comparison by code point |
//! | `<in>` | `y` is a substring of `x` |
//! | `<all-in>` | every operand is a substring of `x` |
//! | `<or>` | `x` equals one of the words at even positions after `<or>` |
//!
//! Anything else (no operator, unknown word such as `>` or `>=1`) compares the whole
//! unsplit `req` with `x`. Extra operand words are ignored. An operator without an
//! operand is False.
//!
//! Where nova raises, so does this (`Err`): `float()` of a non-number is a
//! `ValueError`, and a bare `<or>` an `IndexError` (`pop from empty list`); nova
//! catches neither, so the whole scheduling request fails with it.

use crate::py;
use crate::py::str::PyStr;
use crate::py::{PyError, PyExc};

/// `match(value, req)` for a host-side value that is a plain string.
pub fn matches(value: Option<&str>, req: &str) -> Result<bool, PyError> {
    let value = value.map(PyStr::new);
    matches_pystr(value.as_ref(), req)
}

/// `match(value, req)`; `value` may hold lone surrogates (from `str()` of JSON data).
pub fn matches_pystr(value: Option<&PyStr>, req: &str) -> Result<bool, PyError> {
    let words = py::str::split(req);
    let (op, operands) = match words.split_first() {
        Some((op, rest)) => (Some(*op), rest),
        None => (None, &words[..]),
    };
    let known = op.is_some_and(|op| OPS.contains(&op));
    if op != Some("<or>") && !known {
        return Ok(value.is_some_and(|v| v.as_bytes() == req.as_bytes()));
    }
    let Some(value) = value else {
        return Ok(false);
    };
    let op = op.unwrap_or_default();
    if op == "<or>" {
        // words.pop(0) == value; stop if none left; pop the separator; stop if none left.
        let mut rest = operands.iter();
        loop {
            let Some(w) = rest.next() else {
                return Err(PyError::new(PyExc::IndexError, "pop from empty list"));
            };
            if w.as_bytes() == value.as_bytes() {
                return Ok(true);
            }
            if rest.next().is_none() || rest.len() == 0 {
                return Ok(false);
            }
        }
    }
    let Some(&y) = operands.first() else {
        return Ok(false);
    };
    let x = value.as_bytes();
    Ok(match op {
        "<all-in>" => operands.iter().all(|w| value.contains(w.as_bytes())),
        "<in>" => value.contains(y.as_bytes()),
        "s==" => x == y.as_bytes(),
        "s!=" => x != y.as_bytes(),
        "s<" => x < y.as_bytes(),
        "s<=" => x <= y.as_bytes(),
        "s>" => x > y.as_bytes(),
        "s>=" => x >= y.as_bytes(),
        _ => {
            // float(x) is evaluated first, then float(y).
            let fx = py_float_of(value)?;
            let fy = py::float::float(y)?;
            match op {
                "=" | ">=" => fx >= fy,
                "==" => fx == fy,
                "!=" => fx != fy,
                "<=" => fx <= fy,
                _ => unreachable!("operator table"),
            }
        }
    })
}

const OPS: [&str; 13] = [
    "=", "<in>", "<all-in>", "==", "!=", ">=", "<=", "s==", "s!=", "s<", "s<=", "s>", "s>=",
];

fn py_float_of(value: &PyStr) -> Result<f64, PyError> {
    match value.to_str() {
        Some(s) => py::float::float(s),
        // A lone surrogate is neither a digit nor whitespace.
        None => Err(PyError::value_error("could not convert string to float")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(value: &str, req: &str) -> Result<bool, PyError> {
        matches(Some(value), req)
    }

    /// nova's test_extra_specs_ops.py, every vector.
    #[test]
    fn nova_vectors() {
        let cases: &[(&str, &str, bool)] = &[
            ("1", "1", true),
            ("", "1", false),
            ("3", "1", false),
            ("222", "2", false),
            ("4", "> 2", false),
            ("123", "= 123", true),
            ("124", "= 123", true),
            ("34", "= 234", false),
            ("34", "=", false),
            ("123", "s== 123", true),
            ("1234", "s== 123", false),
            ("1234", "s!= 123", true),
            ("123", "s!= 123", false),
            ("1000", "s>= 234", false),
            ("1234", "s<= 1000", false),
            ("2", "s< 12", false),
            ("12", "s> 2", false),
            ("12311321", "<in> 11", true),
            ("12311321", "<in> 12311321", true),
            ("12311321", "<in> 12311321 <in>", true),
            ("12310321", "<in> 11", false),
            ("12310321", "<in>", false),
            ("12", "<or> 11 <or> 12", true),
            ("13", "<or> 11 <or> 12", false),
            ("13", "<or> 11 <or>", false),
            ("12", "<or> 11 <or> 12 <or>", true),
            ("2", "<= 10", true),
            ("3", "<= 2", false),
            ("3", ">= 1", true),
            ("2", ">= 3", false),
            ("['aes', 'mmx', 'aux']", "<all-in> aes mmx", true),
            ("['aes', 'mmx', 'aux']", "<all-in> mmx", true),
            ("['aes', 'mmx', 'aux']", "<all-in> txt", false),
            ("['aes', 'mmx', 'aux']", "<all-in> txt 3dnow", false),
            ("['aes', 'mmx', 'aux']", "<all-in> txt aes", false),
        ];
        for (value, req, want) in cases {
            assert_eq!(m(value, req), Ok(*want), "match({value:?}, {req:?})");
        }
    }

    #[test]
    fn edge_cases_as_nova() {
        // Only even positions after <or> are alternatives; the separators are not checked.
        assert_eq!(m("abc", "<or> x abc"), Ok(false));
        assert_eq!(m("abc", "<or> x foo abc"), Ok(true));
        assert_eq!(m("x", "<or> x"), Ok(true));
        assert_eq!(m("y", "<or> x"), Ok(false));
        assert_eq!(m("y", "<or>").unwrap_err().kind, PyExc::IndexError);
        assert_eq!(matches(None, "<or>"), Ok(false), "None is checked first");
        // Unknown operators compare the whole string.
        assert_eq!(m(">=1", ">=1"), Ok(true));
        assert_eq!(m("", ""), Ok(true));
        assert_eq!(m("", "  "), Ok(false));
        assert_eq!(matches(None, "1"), Ok(false));
        assert_eq!(matches(None, "= 1"), Ok(false));
        // Float ops raise on text, value first.
        assert_eq!(m("abc", "= 1").unwrap_err().kind, PyExc::ValueError);
        assert_eq!(m("1", "== abc").unwrap_err().kind, PyExc::ValueError);
        assert_eq!(m("abc", "s== abc"), Ok(true));
        // Python float(): whitespace, underscores, inf/nan, extra words ignored.
        assert_eq!(m(" 1_000 ", ">= 999.5 junk"), Ok(true));
        assert_eq!(m("nan", "== nan"), Ok(false));
        assert_eq!(m("nan", "!= nan"), Ok(true));
        assert_eq!(m("inf", "= 1e308"), Ok(true));
        assert_eq!(m("1.0", "== 1"), Ok(true));
        // Python whitespace splits (U+3000, U+001C) the words.
        assert_eq!(m("5", "==\u{3000}5"), Ok(true));
        assert_eq!(m("5", "==\u{1c}5"), Ok(true));
    }
}
