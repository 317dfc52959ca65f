// SPDX-License-Identifier: Apache-2.0
//! The few Python built-in behaviours nova's resource request code leans on when it
//! reads flavor extra specs (all strings): `int(str)`, `str.strip()`,
//! `oslo_utils.strutils.bool_from_string` and `repr(str)` in error messages.

/// Code points of the digit zero of every Unicode `Nd` block (Unicode 14.0, the
/// database of Python 3.11); each block holds the ten digits in order. Python's
/// `int()` accepts any of them.
const DECIMAL_ZEROS: [u32; 66] = [
    0x30, 0x660, 0x6f0, 0x7c0, 0x966, 0x9e6, 0xa66, 0xae6, 0xb66, 0xbe6, 0xc66, 0xce6, 0xd66,
    0xde6, 0xe50, 0xed0, 0xf20, 0x1040, 0x1090, 0x17e0, 0x1810, 0x1946, 0x19d0, 0x1a80, 0x1a90,
    0x1b50, 0x1bb0, 0x1c40, 0x1c50, 0xa620, 0xa8d0, 0xa900, 0xa9d0, 0xa9f0, 0xaa50, 0xabf0, 0xff10,
    0x104a0, 0x10d30, 0x11066, 0x110f0, 0x11136, 0x111d0, 0x112f0, 0x11450, 0x114d0, 0x11650,
    0x116c0, 0x11730, 0x118e0, 0x11950, 0x11c50, 0x11d50, 0x11da0, 0x16a60, 0x16ac0, 0x16b50,
    0x1d7ce, 0x1d7d8, 0x1d7e2, 0x1d7ec, 0x1d7f6, 0x1e140, 0x1e2f0, 0x1e950, 0x1fbf0,
];

/// Longest digit string `int()` is asked to read here; longer input is refused
/// (nova would read it; no real amount or CPU number is that long).
const MAX_DIGITS: usize = 64;

fn decimal_value(c: char) -> Option<u8> {
    let cp = c as u32;
    DECIMAL_ZEROS
        .iter()
        .find(|&&zero| cp >= zero && cp < zero + 10)
        .map(|&zero| (cp - zero) as u8)
}

/// Python's `str.isspace()`: Unicode White_Space plus the ASCII separators
/// U+001C..U+001F, which Python also counts.
pub fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip()` with no argument.
pub fn strip(s: &str) -> &str {
    s.trim_matches(is_space)
}

/// A Python integer read from text: sign and canonical decimal digits (no leading
/// zeros), so that `str(int(s))` can be reproduced without a bound on size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyInt {
    pub negative: bool,
    pub digits: String,
}

impl PyInt {
    pub fn from_i64(n: i64) -> Self {
        PyInt {
            negative: n < 0,
            digits: n.unsigned_abs().to_string(),
        }
    }

    pub fn is_zero(&self) -> bool {
        self.digits == "0"
    }

    /// The value when it fits (CPU numbers and counts); `None` for huge ones.
    pub fn to_i128(&self) -> Option<i128> {
        let v: i128 = self.digits.parse().ok()?;
        Some(if self.negative { -v } else { v })
    }
}

impl std::fmt::Display for PyInt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.negative && !self.is_zero() {
            write!(f, "-{}", self.digits)
        } else {
            f.write_str(&self.digits)
        }
    }
}

/// Python's `int(s)` for a `str` in base 10: surrounding whitespace, one optional
/// sign, digits of any Unicode decimal block, single underscores between digits.
/// `None` where Python raises `ValueError`.
pub fn int(s: &str) -> Option<PyInt> {
    let s = strip(s);
    let (negative, body) = match s.chars().next() {
        Some('-') => (true, &s[1..]),
        Some('+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut digits = String::new();
    let mut last_was_digit = false;
    for c in body.chars() {
        if c == '_' {
            if !last_was_digit {
                return None;
            }
            last_was_digit = false;
            continue;
        }
        let d = decimal_value(c)?;
        if digits.len() >= MAX_DIGITS {
            return None;
        }
        digits.push(char::from(b'0' + d));
        last_was_digit = true;
    }
    if !last_was_digit {
        return None;
    }
    let trimmed = digits.trim_start_matches('0');
    let digits = if trimmed.is_empty() { "0" } else { trimmed };
    Some(PyInt {
        negative,
        digits: digits.to_string(),
    })
}

/// `oslo_utils.strutils.bool_from_string(s)` (not strict, default False).
pub fn bool_from_string(s: &str) -> bool {
    matches!(
        strip(s).to_lowercase().as_str(),
        "1" | "t" | "true" | "on" | "y" | "yes"
    )
}

/// Python's `repr()` of a `str`, for error messages that use `%r`.
pub fn repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_reads_what_python_reads() {
        let ok = |s: &str, want: &str| {
            assert_eq!(
                int(s).map(|i| i.to_string()).as_deref(),
                Some(want),
                "{s:?}"
            )
        };
        ok("7", "7");
        ok(" 007\n", "7");
        ok("+3", "3");
        ok("-0", "0");
        ok("-12", "-12");
        ok("1_000", "1000");
        ok("\u{0663}", "3");
        ok("\u{ff11}\u{ff10}", "10");
        ok("99999999999999999999999", "99999999999999999999999");
        for bad in [
            "", " ", "1.5", "_1", "1_", "1__0", "0x10", "1e3", "--1", "+", "one",
        ] {
            assert_eq!(int(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn bools_and_reprs() {
        assert!(bool_from_string(" Yes "));
        assert!(bool_from_string("1"));
        assert!(!bool_from_string("2"));
        assert!(!bool_from_string("None"));
        assert_eq!(repr("a'b"), "\"a'b\"");
        assert_eq!(repr("a'b\""), "'a\\'b\"'");
        assert_eq!(repr("0--1"), "'0--1'");
    }
}
