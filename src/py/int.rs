// SPDX-License-Identifier: Apache-2.0
//! Python's `int`: the value ([`PyInt`], unbounded as Python's is), `int(str)` with
//! CPython 3.11's full rules, and the exact comparison of an `int` with a `float`.
//!
//! `int(s)` (`PyLong_FromUnicodeObject`) first maps every non-ASCII decimal digit
//! (any Unicode `Nd` block) to its ASCII digit and every non-ASCII whitespace to a
//! space, refuses any other non-ASCII character, then reads the ASCII text: optional
//! surrounding ASCII whitespace (`Py_ISSPACE`: space, `\t\n\v\f\r`, **not**
//! U+001C..U+001F, which `str.strip()` would remove), one sign, digits with single
//! underscores between them, at most 4300 digits. Rust's `str::parse` knows none of
//! this; no maintained crate reproduces it, so it is written out here.

use super::error::PyError;
use super::str::isspace;
use std::cmp::Ordering;

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

    pub fn is_zero(&self) -> bool {
        matches!(self, PyInt::Small(0))
    }

    fn sign_digits(&self) -> (bool, String) {
        match self {
            PyInt::Small(v) => (*v < 0, v.unsigned_abs().to_string()),
            PyInt::Big { neg, digits } => (*neg, digits.clone()),
        }
    }

    /// Python's comparison of two ints.
    pub fn cmp_int(&self, other: &PyInt) -> Ordering {
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
    pub fn cmp_float(&self, f: f64) -> Option<Ordering> {
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

impl PyInt {
    pub fn from_i64(n: i64) -> PyInt {
        PyInt::Small(n)
    }

    /// The value when it fits in an `i64`.
    pub fn to_i64(&self) -> Option<i64> {
        match self {
            PyInt::Small(v) => Some(*v),
            PyInt::Big { .. } => None,
        }
    }

    /// The value when it fits in an `i128` (CPU numbers and counts); `None` for huge ones.
    pub fn to_i128(&self) -> Option<i128> {
        match self {
            PyInt::Small(v) => Some(i128::from(*v)),
            PyInt::Big { neg, digits } => {
                let v: i128 = digits.parse().ok()?;
                Some(if *neg { -v } else { v })
            }
        }
    }

    /// The value clamped to `i64`: a comparison with any `i64` comes out as Python's
    /// comparison with the unbounded value would.
    pub fn to_i64_saturating(&self) -> i64 {
        match self {
            PyInt::Small(v) => *v,
            PyInt::Big { neg: true, .. } => i64::MIN,
            PyInt::Big { neg: false, .. } => i64::MAX,
        }
    }

    pub fn is_negative(&self) -> bool {
        match self {
            PyInt::Small(v) => *v < 0,
            PyInt::Big { neg, .. } => *neg,
        }
    }
}

/// `str(int)`.
impl std::fmt::Display for PyInt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_decimal_string())
    }
}

/// Python 3.11's limit on the digits of a decimal `int()` (`sys.int_info.default_max_str_digits`).
pub const MAX_STR_DIGITS: usize = 4300;

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
pub(super) fn ascii_number_text(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        // ASCII (below DEL) is kept as is: U+001C..U+001F are not stripped here.
        if (c as u32) < 127 {
            out.push(c);
        } else if isspace(c) {
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
pub(super) fn remove_underscores(s: &str) -> Option<String> {
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

/// The `ValueError` of `int()` beyond [`MAX_STR_DIGITS`] digits.
pub fn too_many_digits(n: usize) -> PyError {
    PyError::value_error(format!(
        "Exceeds the limit ({MAX_STR_DIGITS} digits) for integer string conversion: value has {n} digits"
    ))
}

/// Python's `int(s)` for a str (base 10): surrounding whitespace, sign, `_` between
/// digits, Unicode digits; no decimal point (`int('1.5')` raises); more than 4300
/// digits raise, as in Python 3.11.
pub fn int(s: &str) -> Result<PyInt, PyError> {
    let err = || {
        PyError::value_error(format!(
            "invalid literal for int() with base 10: {}",
            super::str::repr(s)
        ))
    };
    let text = ascii_number_text(s).ok_or_else(err)?;
    let (neg, body) = match text.as_bytes().first() {
        Some(b'-') => (true, &text[1..]),
        Some(b'+') => (false, &text[1..]),
        _ => (false, &text[..]),
    };
    let digits = remove_underscores(body).ok_or_else(err)?;
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(err());
    }
    if digits.len() > MAX_STR_DIGITS {
        return Err(too_many_digits(digits.len()));
    }
    Ok(PyInt::from_decimal(neg, &digits))
}

/// `int(s)` where the caller can hold only an `i64`: a value beyond it is refused
/// (`OverflowError` in CPython's own `int` → C conversions) instead of clamped.
pub fn int_i64(s: &str) -> Result<i64, PyError> {
    int(s)?
        .to_i64()
        .ok_or_else(|| PyError::value_error("Python int too large to convert to C long"))
}

/// `int(s)` where the caller compares the result with `i64` counters: values beyond
/// `i64` saturate, which keeps every such comparison as Python would make it.
pub fn int_saturating(s: &str) -> Result<i64, PyError> {
    int(s).map(|i| i.to_i64_saturating())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_int_parsing() {
        for (s, want) in [
            ("1", Some(1)),
            (" 42\n", Some(42)),
            ("\x0b42\x0c", Some(42)),
            ("-7", Some(-7)),
            ("+0", Some(0)),
            ("-0", Some(0)),
            ("1_000", Some(1000)),
            ("007", Some(7)),
            ("١٢", Some(12)),
            ("\u{ff11}\u{ff10}", Some(10)),
            ("\u{1c}5", None),
            ("5\u{1f}", None),
            ("\u{3000}5\u{a0}", Some(5)),
            ("99999999999999999999999", Some(i64::MAX)),
            ("-99999999999999999999999", Some(i64::MIN)),
            ("1.5", None),
            ("1__0", None),
            ("_1", None),
            ("+_1", None),
            ("1_", None),
            ("", None),
            (" ", None),
            ("-", None),
            ("--1", None),
            ("- 1", None),
            ("1e3", None),
            ("0x10", None),
            ("XXX", None),
        ] {
            assert_eq!(int_saturating(s).ok(), want, "{s:?}");
        }
        assert_eq!(
            int("a'b").unwrap_err().message,
            "invalid literal for int() with base 10: \"a'b\""
        );
        assert!(int_i64("9223372036854775808").is_err());
        assert_eq!(int_i64("-9223372036854775808"), Ok(i64::MIN));
        assert!(int(&"1".repeat(4301)).is_err());
        assert!(int(&"1".repeat(4300)).is_ok());
        let big = int("-0099999999999999999999999").unwrap();
        assert_eq!(big.to_string(), "-99999999999999999999999");
        assert_eq!(big.to_i128(), Some(-99999999999999999999999));
        assert_eq!(big.to_i64(), None);
        assert_eq!(int("-0").unwrap().to_string(), "0");
    }
}
