// SPDX-License-Identifier: Apache-2.0
//! distutils' `StrictVersion` and `VersionPredicate` (Python 3.11's, and setuptools'
//! `_distutils`, which behave alike), which nova 29 and 30's `ImagePropertiesFilter`
//! and their oslo.versionedobjects' `VersionPredicateField` use for
//! `img_hv_requested_version`. nova 31 moved to oslo.utils' PEP 440 predicate
//! ([`super::version`]).
//!
//! The grammar, from distutils' regular expressions:
//! - a predicate is `name (clause, clause, ...)`; nova writes `image_prop (<value>)`,
//!   and a newline ends what is read;
//! - a clause is `^\s*(<=|>=|<|>|!=|==)\s*([^\s,]+)\s*$`;
//! - a version is `^(\d+)\.(\d+)(\.(\d+))?([ab](\d+))?$` (ASCII digits): `1.0`, `1.0.4`,
//!   `1.0.4a3`; `1`, `2.7.2.2` and `1.3c4` are invalid. `0.4` equals `0.4.0`; a
//!   pre-release sorts before its release.
//!
//! Every failure is distutils' `ValueError`.

use super::str::strip;
use super::version::{split_clause, Num, Op};
use super::PyError;
use std::cmp::Ordering;

/// `int()` of a run of ASCII digits (`\d` with `re.ASCII`), `None` for anything else.
fn digits(s: &str) -> Option<Num> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Num::parse(s).ok()
}

/// `distutils.version.StrictVersion`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrictVersion {
    numbers: [Num; 3],
    /// `a` or `b`, and its number.
    prerelease: Option<(u8, Num)>,
}

impl StrictVersion {
    pub fn parse(text: &str) -> Result<StrictVersion, PyError> {
        let invalid = || PyError::value_error(format!("invalid version number '{text}'"));
        // `$` also matches before a final newline.
        let s = text.strip_suffix('\n').unwrap_or(text);
        let (release, prerelease) = match s.find(['a', 'b']) {
            Some(at) => {
                let number = digits(&s[at + 1..]).ok_or_else(invalid)?;
                (&s[..at], Some((s.as_bytes()[at], number)))
            }
            None => (s, None),
        };
        let parts: Vec<&str> = release.split('.').collect();
        if !(2..=3).contains(&parts.len()) {
            return Err(invalid());
        }
        let mut numbers = [Num::zero(), Num::zero(), Num::zero()];
        for (slot, part) in numbers.iter_mut().zip(&parts) {
            *slot = digits(part).ok_or_else(invalid)?;
        }
        Ok(StrictVersion {
            numbers,
            prerelease,
        })
    }
}

impl Ord for StrictVersion {
    /// `StrictVersion._cmp`: the numbers, then no pre-release above any, then
    /// `(letter, number)`.
    fn cmp(&self, other: &Self) -> Ordering {
        self.numbers
            .cmp(&other.numbers)
            .then_with(|| match (&self.prerelease, &other.prerelease) {
                (None, None) => Ordering::Equal,
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (Some(a), Some(b)) => a.cmp(b),
            })
    }
}

impl PartialOrd for StrictVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// `distutils.versionpredicate.VersionPredicate`.
#[derive(Debug, Clone)]
pub struct VersionPredicate {
    pub name: String,
    clauses: Vec<(Op, StrictVersion)>,
}

impl VersionPredicate {
    pub fn parse(predicate: &str) -> Result<VersionPredicate, PyError> {
        let text = strip(predicate);
        if text.is_empty() {
            return Err(PyError::value_error("empty package restriction"));
        }
        // re_validPackage: `(?i)^\s*([a-z_]\w*(?:\.[a-z_]\w*)*)(.*)`, ASCII.
        let bad_name = || PyError::value_error(format!("bad package name in '{text}'"));
        let text = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let bytes = text.as_bytes();
        let mut end = 0;
        loop {
            if !bytes
                .get(end)
                .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
            {
                if end == 0 {
                    return Err(bad_name());
                }
                // A trailing '.' that begins no identifier is not part of the name.
                end -= 1;
                break;
            }
            end += 1;
            while bytes.get(end).is_some_and(|b| word(*b)) {
                end += 1;
            }
            if bytes.get(end) != Some(&b'.') {
                break;
            }
            end += 1;
        }
        let name = &text[..end];
        // `(.*)`: up to the first newline.
        let rest = text[end..].split('\n').next().unwrap_or("");
        let paren = strip(rest);
        let clauses = if paren.is_empty() {
            Vec::new()
        } else {
            let inner = paren
                .strip_prefix('(')
                .and_then(|p| p.strip_suffix(')'))
                .ok_or_else(|| {
                    PyError::value_error(format!("expected parenthesized list: '{paren}'"))
                })?;
            inner
                .split(',')
                .map(split_up)
                .collect::<Result<Vec<_>, _>>()?
        };
        Ok(VersionPredicate {
            name: name.to_string(),
            clauses,
        })
    }

    /// `satisfied_by(version)`: `version` is read as a `StrictVersion` by each
    /// comparison (an invalid one raises).
    pub fn satisfied_by(&self, version: &str) -> Result<bool, PyError> {
        for (op, required) in &self.clauses {
            let v = StrictVersion::parse(version)?;
            if !op.holds(v.cmp(required)) {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// `splitUp`: `^\s*(<=|>=|<|>|!=|==)\s*([^\s,]+)\s*$` (Unicode `\s`), then the version.
fn split_up(clause: &str) -> Result<(Op, StrictVersion), PyError> {
    let (op, version) = split_clause(clause).ok_or_else(|| {
        PyError::value_error(format!(
            "bad package restriction syntax: {}",
            crate::py::str::repr(clause)
        ))
    })?;
    Ok((op, StrictVersion::parse(version)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> StrictVersion {
        StrictVersion::parse(s).unwrap()
    }

    #[test]
    fn strict_versions_parse_and_order_as_distutils() {
        for ok in [
            "0.4", "0.4.0", "0.4.1", "0.5a1", "0.5b3", "1.0.4a3", "007.1", "1.0\n",
        ] {
            assert!(StrictVersion::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "1", "2.7.2.2", "1.3.a4", "1.3pl1", "1.3c4", "", "1.0a", " 1.0", "1.0 ", "١.٠",
        ] {
            assert!(StrictVersion::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(v("0.4"), v("0.4.0"));
        let sorted = [
            "0.4", "0.4.1", "0.5a1", "0.5b3", "0.5", "0.9.6", "1.0", "1.0.4a3", "1.0.4b1", "1.0.4",
        ];
        for pair in sorted.windows(2) {
            assert!(v(pair[0]) < v(pair[1]), "{} < {}", pair[0], pair[1]);
        }
        assert!(v("10.0") > v("9.99"));
        assert!(v("00012.0") == v("12.0"));
    }

    #[test]
    fn predicates_as_nova_29_builds_them() {
        let p = |req: &str| VersionPredicate::parse(&format!("image_prop ({req})"));
        assert!(p(">= 6.1").unwrap().satisfied_by("6.1.0").unwrap());
        assert!(!p(">=6.1").unwrap().satisfied_by("6.0.0").unwrap());
        assert!(p("> 1.0, < 2.0").unwrap().satisfied_by("1.5.0").unwrap());
        assert!(!p("> 1.0, < 2.0").unwrap().satisfied_by("2.0.0").unwrap());
        assert!(p("!= 1.0").unwrap().satisfied_by("1.0.1").unwrap());
        assert!(p("== 1.0").unwrap().satisfied_by("1.0.0").unwrap());
        // Not PEP 440: a bare version, a one-part version, an empty clause.
        for bad in ["6.1", ">= 6", "", ">= 6.1,", "=> 6.1", ">= 6.1 6.2", ">=="] {
            assert!(p(bad).is_err(), "{bad:?}");
        }
        // A newline ends what is read: the rest is never looked at.
        assert!(p(">= 1.0)\n(garbage")
            .unwrap()
            .satisfied_by("2.0.0")
            .unwrap());
        // The host's version must be a StrictVersion too (four parts is not).
        assert!(p(">= 1.0").unwrap().satisfied_by("1.0.0.0").is_err());
    }

    #[test]
    fn the_package_name_and_parentheses() {
        let p = VersionPredicate::parse("  pkg.sub (>= 1.0)  ").unwrap();
        assert_eq!(p.name, "pkg.sub");
        assert!(VersionPredicate::parse("pkg")
            .unwrap()
            .satisfied_by("junk")
            .unwrap());
        assert!(VersionPredicate::parse("9pkg (>= 1.0)").is_err());
        assert!(VersionPredicate::parse("pkg >= 1.0").is_err());
        assert!(VersionPredicate::parse("   ").is_err());
    }
}
