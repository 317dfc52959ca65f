// SPDX-License-Identifier: Apache-2.0
//! Python's `float`: `float(str)` and `repr(float)` (which is also `str(float)` and
//! what `json.dumps` writes), as CPython 3.11 has them.
//!
//! Rust's `f64` parsing and `Display` disagree with CPython at the edges: Rust
//! accepts neither Unicode digits nor `_` between digits, and writes `1e16` as
//! `10000000000000000` and `1e-5` as `0.00001` where Python writes `1e+16` and
//! `1e-05`. The digits themselves are the same (both are shortest round-trip), so
//! [`repr`] reuses Rust's and only lays them out as `float_repr_style = 'short'`
//! does; [`float`] reuses Rust's correctly rounded parser after checking Python's
//! grammar. No maintained crate reproduces either.

use super::error::PyError;
use super::int::{ascii_number_text, remove_underscores};

/// Python's `float(s)` for a str: surrounding whitespace, sign, `_` between digits,
/// `1.`, `.5`, exponents, `inf`/`infinity`/`nan` in any case, Unicode digits.
pub fn float(s: &str) -> Result<f64, PyError> {
    let err = || {
        PyError::value_error(format!(
            "could not convert string to float: {}",
            super::str::repr(s)
        ))
    };
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

/// Python's `repr(float)` (shortest round-trip digits, `1e+16` style exponents).
pub fn repr(f: f64) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
            assert_eq!(float(s).ok(), want, "{s:?}");
        }
        assert!(float("nan").unwrap().is_nan());
        assert!(float("-NaN").unwrap().is_nan());
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
            assert_eq!(repr(f), want);
        }
    }
}
