// SPDX-License-Identifier: Apache-2.0
//! PEP 440 versions and oslo.utils' `versionutils.VersionPredicate`, as `packaging`
//! 26.3 parses and orders them on CPython 3.11.7 (its possessive-quantifier pattern).
//!
//! nova's `ImagePropertiesFilter` checks `img_hv_requested_version` with oslo's
//! predicate over `packaging.version.Version`. Written by hand because the Rust PEP
//! 440 crates differ from `packaging` where nova's inputs can reach: `packaging`
//! strips Python whitespace (U+001C..U+001F and Unicode spaces too), matches its
//! regex ASCII-case-insensitively, bounds numbers only by Python's 4300-digit
//! `int()` limit, and normalizes aliases (`c`, `pre`, `preview` → `rc`, `r`/`rev` →
//! `post`) in its own order.

use super::error::PyError;
use super::int::MAX_STR_DIGITS as PY_INT_MAX_STR_DIGITS;
use super::str::isspace as py_isspace;
use std::cmp::Ordering;

/// A non-negative integer of any size: its decimal digits without leading zeros.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Num(String);

impl Num {
    pub(crate) fn parse(digits: &str) -> Result<Num, PyError> {
        if digits.len() > PY_INT_MAX_STR_DIGITS {
            return Err(PyError::value_error(format!(
                "Exceeds the limit ({PY_INT_MAX_STR_DIGITS} digits) for integer string conversion"
            )));
        }
        Ok(Num(digits.trim_start_matches('0').to_string()))
    }
    pub(crate) fn zero() -> Num {
        Num(String::new())
    }
    fn is_zero(&self) -> bool {
        self.0.is_empty()
    }
}

impl Ord for Num {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.cmp(&other.0))
    }
}

impl PartialOrd for Num {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A local version segment: strings sort before numbers.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Local {
    Str(String),
    Int(Num),
}

/// `packaging.version.Version._key`: epoch, release without trailing zeros, the
/// pre/post/dev suffix `(pre_rank, pre_n, post_rank, post_n, dev_rank, dev_n)`,
/// then the local segments (absent sorts first).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    epoch: Num,
    release: Vec<Num>,
    suffix: (i8, Num, i8, Num, i8, Num),
    local: Option<Vec<Local>>,
}

fn invalid(s: &str) -> PyError {
    PyError::value_error(format!("Invalid version: {s:?}"))
}

/// A cursor over the version text (ASCII matching; other characters never match).
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }
    fn digits(&mut self) -> Option<&'a str> {
        let n = self
            .rest()
            .bytes()
            .take_while(|b| b.is_ascii_digit())
            .count();
        (n > 0).then(|| {
            let d = &self.rest()[..n];
            self.pos += n;
            d
        })
    }
    fn sep(&mut self) -> bool {
        if matches!(self.rest().bytes().next(), Some(b'.' | b'_' | b'-')) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn byte(&mut self, b: u8) -> bool {
        if self.rest().as_bytes().first() == Some(&b) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    /// The first alternative (in regex order) that prefixes the rest, ASCII
    /// case-insensitively.
    fn word(&mut self, alternatives: &[&'static str]) -> Option<&'static str> {
        let rest = self.rest().as_bytes();
        let found = alternatives.iter().find(|w| {
            rest.len() >= w.len() && rest[..w.len()].eq_ignore_ascii_case(w.as_bytes())
        })?;
        self.pos += found.len();
        Some(found)
    }
    fn alnum_run(&mut self) -> Option<&'a str> {
        let n = self
            .rest()
            .bytes()
            .take_while(|b| b.is_ascii_alphanumeric())
            .count();
        (n > 0).then(|| {
            let d = &self.rest()[..n];
            self.pos += n;
            d
        })
    }
}

impl Version {
    /// `packaging.version.Version(s)`.
    pub fn parse(s: &str) -> Result<Version, PyError> {
        // The fast path for digits and dots only (no stripping there).
        if s.bytes().all(|b| b == b'.' || b.is_ascii_digit()) {
            let mut release = Vec::new();
            for part in s.split('.') {
                if part.is_empty() {
                    return Err(invalid(s));
                }
                release.push(Num::parse(part)?);
            }
            return Ok(Version::build(Num::zero(), release, None, None, None, None));
        }
        let trimmed_start = s.trim_start_matches(py_isspace);
        let mut c = Cursor {
            s: trimmed_start,
            pos: 0,
        };
        // v?+
        let _ = c.byte(b'v') || c.byte(b'V');
        // (?:(?P<epoch>[0-9]+)!)?+
        let save = c.pos;
        let epoch = match c.digits() {
            Some(d) if c.byte(b'!') => Num::parse(d)?,
            _ => {
                c.pos = save;
                Num::zero()
            }
        };
        // (?P<release>[0-9]+(?:\.[0-9]+)*+)
        let mut release = vec![Num::parse(c.digits().ok_or_else(|| invalid(s))?)?];
        loop {
            let save = c.pos;
            if c.byte(b'.') {
                if let Some(d) = c.digits() {
                    release.push(Num::parse(d)?);
                    continue;
                }
            }
            c.pos = save;
            break;
        }
        // pre: [._-]?+ (alpha|a|beta|b|preview|pre|c|rc) [._-]?+ ([0-9]+)?
        let save = c.pos;
        c.sep();
        let pre = match c.word(&["alpha", "a", "beta", "b", "preview", "pre", "c", "rc"]) {
            Some(letter) => {
                c.sep();
                let n = c.digits().map(Num::parse).transpose()?;
                let rank = match letter {
                    "alpha" | "a" => 0,
                    "beta" | "b" => 1,
                    _ => 2, // c, pre, preview, rc → rc
                };
                Some((rank, n.unwrap_or_else(Num::zero)))
            }
            None => {
                c.pos = save;
                None
            }
        };
        // post: -([0-9]+) | [._-]? (post|rev|r) [._-]? ([0-9]+)?
        let save = c.pos;
        let post = if let (true, Some(d)) = (c.byte(b'-'), c.digits()) {
            Some(Num::parse(d)?)
        } else {
            c.pos = save;
            c.sep();
            if c.word(&["post", "rev", "r"]).is_some() {
                c.sep();
                Some(
                    c.digits()
                        .map(Num::parse)
                        .transpose()?
                        .unwrap_or_else(Num::zero),
                )
            } else {
                c.pos = save;
                None
            }
        };
        // dev: [._-]?+ dev [._-]?+ ([0-9]+)?
        let save = c.pos;
        c.sep();
        let dev = if c.word(&["dev"]).is_some() {
            c.sep();
            Some(
                c.digits()
                    .map(Num::parse)
                    .transpose()?
                    .unwrap_or_else(Num::zero),
            )
        } else {
            c.pos = save;
            None
        };
        // local: \+ [a-z0-9]+ (?:[._-][a-z0-9]+)*+
        let save = c.pos;
        let local = match (c.byte(b'+'), c.alnum_run()) {
            (true, Some(first)) => {
                let mut parts = vec![first];
                loop {
                    let save = c.pos;
                    if c.sep() {
                        if let Some(p) = c.alnum_run() {
                            parts.push(p);
                            continue;
                        }
                    }
                    c.pos = save;
                    break;
                }
                Some(
                    parts
                        .into_iter()
                        .map(|p| {
                            if p.bytes().all(|b| b.is_ascii_digit()) {
                                Num::parse(p).map(Local::Int)
                            } else {
                                Ok(Local::Str(p.to_ascii_lowercase()))
                            }
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                )
            }
            _ => {
                c.pos = save;
                None
            }
        };
        if !c.rest().chars().all(py_isspace) {
            return Err(invalid(s));
        }
        Ok(Version::build(epoch, release, pre, post, dev, local))
    }

    fn build(
        epoch: Num,
        mut release: Vec<Num>,
        pre: Option<(i8, Num)>,
        post: Option<Num>,
        dev: Option<Num>,
        local: Option<Vec<Local>>,
    ) -> Version {
        while release.last().is_some_and(Num::is_zero) {
            release.pop();
        }
        let (pre_rank, pre_n) = match (&pre, &post, &dev) {
            (None, None, Some(_)) => (-1, Num::zero()),
            (None, _, _) => (3, Num::zero()),
            (Some((rank, n)), _, _) => (*rank, n.clone()),
        };
        let (post_rank, post_n) = match post {
            None => (0, Num::zero()),
            Some(n) => (1, n),
        };
        let (dev_rank, dev_n) = match dev {
            None => (1, Num::zero()),
            Some(n) => (0, n),
        };
        Version {
            epoch,
            release,
            suffix: (pre_rank, pre_n, post_rank, post_n, dev_rank, dev_n),
            local,
        }
    }
}

/// A comparison of a version predicate's clause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    Lt,
    Le,
    Eq,
    Gt,
    Ge,
    Ne,
}

impl Op {
    /// Whether `ordering` (of the version against the clause's) satisfies it.
    pub(crate) fn holds(self, ordering: Ordering) -> bool {
        match self {
            Op::Lt => ordering == Ordering::Less,
            Op::Le => ordering != Ordering::Greater,
            Op::Eq => ordering == Ordering::Equal,
            Op::Gt => ordering == Ordering::Greater,
            Op::Ge => ordering != Ordering::Less,
            Op::Ne => ordering != Ordering::Equal,
        }
    }
}

/// One clause, `^\s*(<=|>=|<|>|!=|==)\s*(\S+)\s*$` (Python's `\s`): its operator and
/// version text, `None` where the expression does not match. Without commas in the
/// clause, distutils' `[^\s,]+` is the same.
pub(crate) fn split_clause(clause: &str) -> Option<(Op, &str)> {
    let t = clause.trim_start_matches(py_isspace);
    let (op, rest) = [
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("<", Op::Lt),
        (">", Op::Gt),
        ("!=", Op::Ne),
        ("==", Op::Eq),
    ]
    .iter()
    .find_map(|(p, op)| t.strip_prefix(p).map(|r| (*op, r)))?;
    let version = rest.trim_matches(py_isspace);
    // One run of non-whitespace. (A shorter operator match would leave a version
    // starting with '=', which never parses either.)
    (!version.is_empty() && !version.chars().any(py_isspace)).then_some((op, version))
}

/// oslo.utils `versionutils.VersionPredicate`: comma-separated clauses, each
/// `^\s*(<=|>=|<|>|!=|==)\s*(\S+)\s*$`, all of which must hold.
#[derive(Debug, Clone)]
pub struct VersionPredicate {
    clauses: Vec<(Op, Version)>,
}

impl VersionPredicate {
    pub fn parse(predicate: &str) -> Result<VersionPredicate, PyError> {
        let clauses = predicate
            .split(',')
            .map(|clause| {
                let (op, version) = split_clause(clause).ok_or_else(|| {
                    PyError::value_error(format!("bad package restriction syntax: {clause}"))
                })?;
                Ok((op, Version::parse(version)?))
            })
            .collect::<Result<_, _>>()?;
        Ok(VersionPredicate { clauses })
    }

    pub fn satisfied_by(&self, version: &str) -> Result<bool, PyError> {
        let v = Version::parse(version)?;
        Ok(self.clauses.iter().all(|(op, req)| op.holds(v.cmp(req))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pep440_against_packaging() {
        let classes: &[&[&str]] = &[
            &["0", "0.0"],
            &["1.0dev", "1.0.dev", "1.0-dev", "1.0.dev0"],
            &["1.0.dev1", "1.0Dev1"],
            &["1.0a", "1.0a-", "1.0a.", "1.0a0"],
            &["1.0a1.dev2"],
            &["1.0a1", "1.0alpha1", "1.0.a.1", "1.0-a-1"],
            &["1.0a_1.post-2.dev_3+x.Y-z"],
            &["1.0beta"],
            &["1.0b2"],
            &["1.0pre", "1.0pre-"],
            &["1.0c1", "1.0rc1", "1.0RC1"],
            &["1.0preview2"],
            &[
                "1",
                "1.0",
                "1.0.0",
                "v1.0",
                "V1.0",
                " 1.0 ",
                "0!1.0",
                "01.00",
                "1.0.0.0.0",
                "1.0\u{a0}",
                "\u{2003}1.0",
                "1.0\u{1c}",
                "1.0\u{a}",
            ],
            &["1.0+a"],
            &["1.0+abc"],
            &["1.0+ABC-def_1"],
            &["1.0+abc.1"],
            &["1.0+b"],
            &["1.0+1", "1.0+01"],
            &["1.0+1.a"],
            &["1.0+1.abc"],
            &["1.0+1.0"],
            &["1.0post", "1.0post.", "1.0.r", "1.0r", "1.0.post0"],
            &["1.0.post1.dev3"],
            &["1.0.post1", "1.0-1", "1.0-r1", "1.0POST1"],
            &["1.0rev2"],
            &["6.0"],
            &["6.2"],
            &["99999999999999999999.1"],
            &["1!1.0"],
        ];
        let invalid: &[&str] = &[
            "1..0",
            "1.",
            "1.0+",
            "1.0_1",
            "abc",
            "",
            "1.0 x",
            "=1.0",
            "1.0-",
            "1.0.devx",
            "1!",
            "!1",
            "1.0+a..b",
            "v 1.0",
            "1.0a1b2",
            "1.0\u{661}",
        ];
        let host_strs: &[&str] = &[
            "6.0.0", "6.1.0", "6.2.0", "5.0", "1", "7.0.0", "1.0", "6.0.1",
        ];
        let predicates: &[(&str, Option<&[bool]>)] = &[
            (
                ">=6.0,<6.2",
                Some(&[true, true, false, false, false, false, false, true]),
            ),
            (
                "==6.0",
                Some(&[true, false, false, false, false, false, false, false]),
            ),
            (
                "==6",
                Some(&[true, false, false, false, false, false, false, false]),
            ),
            (
                "!=6.0.0",
                Some(&[false, true, true, true, true, true, true, true]),
            ),
            (
                ">6.0.0",
                Some(&[false, true, true, false, false, true, false, true]),
            ),
            (
                "<= 6.0 ",
                Some(&[true, false, false, true, true, false, true, false]),
            ),
            (
                ">=6.0, <6.2",
                Some(&[true, true, false, false, false, false, false, true]),
            ),
            (
                " >= 6.0",
                Some(&[true, true, true, false, false, true, false, true]),
            ),
            (" >=6.0,", None),
            (">=6.0,,<7", None),
            ("=6.0", None),
            (">=", None),
            ("<=6.0x", None),
            ("~=6.0", None),
            (">=6.0 6.1", None),
            (
                "==6.0\u{a}",
                Some(&[true, false, false, false, false, false, false, false]),
            ),
            (
                ">=1!0",
                Some(&[false, false, false, false, false, false, false, false]),
            ),
            (
                "<7.0.dev1",
                Some(&[true, true, true, true, true, false, true, true]),
            ),
            (
                ">6.0.post1",
                Some(&[false, true, true, false, false, true, false, true]),
            ),
            (
                "<6.0.1a1",
                Some(&[true, false, false, true, true, false, true, false]),
            ),
            ("===6.0", None),
            ("<==6", None),
            (
                "!=6.0+local",
                Some(&[true, true, true, true, true, true, true, true]),
            ),
        ];
        let parsed: Vec<Vec<Version>> = classes
            .iter()
            .map(|c| {
                c.iter()
                    .map(|v| Version::parse(v).unwrap_or_else(|e| panic!("{v:?}: {e}")))
                    .collect()
            })
            .collect();
        for (i, ci) in parsed.iter().enumerate() {
            for (j, cj) in parsed.iter().enumerate() {
                for (a, va) in ci.iter().enumerate() {
                    for (b, vb) in cj.iter().enumerate() {
                        assert_eq!(
                            va.cmp(vb),
                            i.cmp(&j),
                            "{:?} vs {:?}",
                            classes[i][a],
                            classes[j][b]
                        );
                    }
                }
            }
        }
        for v in invalid {
            assert!(Version::parse(v).is_err(), "{v:?} should not parse");
        }
        for (p, want) in predicates {
            match (VersionPredicate::parse(p), want) {
                (Ok(pred), Some(want)) => {
                    let got: Vec<bool> = host_strs
                        .iter()
                        .map(|s| pred.satisfied_by(s).unwrap())
                        .collect();
                    assert_eq!(got, want.to_vec(), "{p:?}");
                }
                (Err(_), None) => {}
                (got, want) => panic!("{p:?}: got {got:?}, want {want:?}"),
            }
        }
        assert!(Version::parse(&format!("1.{}", "9".repeat(4301))).is_err());
        assert!(Version::parse(&format!("1.{}", "9".repeat(4300))).is_ok());
    }
}
