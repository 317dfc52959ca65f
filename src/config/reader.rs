// SPDX-License-Identifier: Apache-2.0
//! oslo.config option types (`oslo_config/types.py`) and the reader the typed sections use.
//!
//! Conversions, as oslo has them:
//! - Boolean: `true/false`, `yes/no`, `on/off`, `1/0`, any case; anything else (also an
//!   empty value) is an error.
//! - Integer / Float: Python's `int()` / `float()` of the text (`+5`, `1_000`, `1e6`), then the
//!   `min`/`max` checks. An empty value means "unset" in oslo (the option becomes `None`);
//!   here an optional option stays `None` and an option with a default keeps its default.
//! - String: as written (`""` is a value). Options with choices must match one exactly.
//! - List: strip, drop trailing commas, split on `,`, strip each item; an empty value is
//!   `[]`. Empty items in the middle are kept (`a,,b` is `["a", "", "b"]`), as in oslo.
//! - MultiString: every value of every file, each kept whole; no value keeps the default.
//!
//! Every value goes through template substitution (`$name`, `$$`) before conversion.
//!
//! [`record_lookups`] lists what the sections ask the reader for (each option's group,
//! name, type, default, bounds, choices, deprecated names): the option table of
//! [`super::options`] is checked against it, so the table cannot drift from the reader.

use std::cell::RefCell;
use std::collections::HashMap;

use super::error::{BadValue, ConfigError, ValueSource, MASK};
use super::ini::RawConfig;
use super::options::Kind;
use crate::py;

/// What the sections asked the reader about one option (see [`record_lookups`]). Type,
/// default and bounds are written as the sample shows them; `None` where the section
/// converts or defaults the value itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Lookup {
    /// Group.
    pub group: String,
    /// Option name.
    pub name: String,
    /// Type, when read through a typed method.
    pub kind: Option<Kind>,
    /// Default, when the reader was given one.
    pub default: Option<String>,
    /// Lower bound.
    pub min: Option<String>,
    /// Upper bound.
    pub max: Option<String>,
    /// Allowed values (empty: any).
    pub choices: Vec<String>,
    /// Deprecated `(group, name)`s also read.
    pub deprecated: Vec<(String, String)>,
}

thread_local! {
    static LOOKUPS: RefCell<Option<Vec<Lookup>>> = const { RefCell::new(None) };
}

/// Runs `f` and returns, with its result, every option the reader was asked for on this
/// thread meanwhile, in the order first asked.
pub fn record_lookups<T>(f: impl FnOnce() -> T) -> (T, Vec<Lookup>) {
    let outer = LOOKUPS.with(|l| l.borrow_mut().replace(Vec::new()));
    let out = f();
    let lookups = LOOKUPS.with(|l| std::mem::replace(&mut *l.borrow_mut(), outer));
    (out, lookups.unwrap_or_default())
}

/// A float as Python's `repr` writes the values nova uses (`1.0`, `0.05`, `1000000.0`).
fn float_text(v: f64) -> String {
    format!("{v:?}")
}

/// Parses an oslo Boolean.
pub fn parse_bool(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "true" | "1" | "on" | "yes" => Ok(true),
        "false" | "0" | "off" | "no" => Ok(false),
        _ => Err("not a boolean (true/false, yes/no, on/off, 1/0)".to_string()),
    }
}

/// Parses an oslo Integer (no range check): `int(value)` unless `value.strip()` is
/// empty, which is `Ok(None)`. Python's int is unbounded; beyond `i64` is refused.
pub fn parse_int(text: &str) -> Result<Option<i64>, String> {
    if py::str::strip(text).is_empty() {
        return Ok(None);
    }
    let n = py::int::int(text).map_err(|_| "not an integer".to_string())?;
    n.to_i64()
        .map(Some)
        .ok_or_else(|| "integer out of range".to_string())
}

/// Parses an oslo Float (no range check): `float(value)` unless `value.strip()` is
/// empty, which is `Ok(None)`.
pub fn parse_float(text: &str) -> Result<Option<f64>, String> {
    if py::str::strip(text).is_empty() {
        return Ok(None);
    }
    py::float::float(text)
        .map(Some)
        .map_err(|_| "not a number".to_string())
}

/// Checks `min <= v <= max` with oslo's messages.
pub fn check_range<T: PartialOrd + std::fmt::Display>(
    v: T,
    min: Option<T>,
    max: Option<T>,
) -> Result<T, String> {
    if let Some(min) = min {
        if v < min {
            return Err(format!("should be greater than or equal to {min}"));
        }
    }
    if let Some(max) = max {
        if v > max {
            return Err(format!("should be less than or equal to {max}"));
        }
    }
    Ok(v)
}

/// Splits an oslo List value.
pub fn parse_list(text: &str) -> Vec<String> {
    let s = py::str::strip(text).trim_end_matches(',');
    if s.is_empty() {
        return Vec::new();
    }
    s.split(',')
        .map(|item| py::str::strip(item).to_string())
        .collect()
}

/// Checks a value against choices.
pub fn check_choice(text: &str, choices: &[&str], ignore_case: bool) -> Result<String, String> {
    let found = choices.iter().any(|c| {
        if ignore_case {
            c.eq_ignore_ascii_case(text)
        } else {
            *c == text
        }
    });
    if found {
        Ok(text.to_string())
    } else {
        Err(format!("valid values are [{}]", choices.join(", ")))
    }
}

/// Reads the options of one group with their types, collecting every bad value as an
/// error and keeping the default in its place.
pub struct Reader<'a> {
    raw: &'a RawConfig,
    group: &'a str,
    /// Values that override the files (transport URL query parameters).
    overrides: Option<&'a HashMap<String, String>>,
    /// Deprecated names: option → `(group, name)` aliases.
    aliases: HashMap<&'static str, Vec<(&'a str, &'a str)>>,
    /// Options read as secrets (their values are masked in errors).
    secrets: &'static [&'static str],
    errors: &'a mut Vec<ConfigError>,
}

/// A value found for an option, after template substitution.
struct Found {
    text: String,
    source: ValueSource,
}

impl<'a> Reader<'a> {
    /// A reader of `group` over `raw`, pushing errors onto `errors`.
    pub fn new(raw: &'a RawConfig, group: &'a str, errors: &'a mut Vec<ConfigError>) -> Self {
        Reader {
            raw,
            group,
            overrides: None,
            aliases: HashMap::new(),
            secrets: &[],
            errors,
        }
    }

    /// Values that win over the files (the transport URL's query parameters).
    pub fn with_overrides(mut self, overrides: &'a HashMap<String, String>) -> Self {
        self.overrides = Some(overrides);
        self
    }

    /// Names whose values are secrets: masked in any error.
    pub fn with_secrets(mut self, secrets: &'static [&'static str]) -> Self {
        self.secrets = secrets;
        self
    }

    /// Declares a deprecated name (`old_group`, `old_name`) of `option`.
    pub fn alias(&mut self, option: &'static str, old_group: &'a str, old_name: &'a str) {
        let old = (old_group.to_string(), old_name.to_string());
        self.note(
            option,
            Lookup {
                deprecated: vec![old],
                ..Lookup::default()
            },
        );
        self.aliases
            .entry(option)
            .or_default()
            .push((old_group, old_name));
    }

    /// Records what is asked about `option` while [`record_lookups`] runs: fields
    /// already known stay, unknown ones are filled from `what`.
    fn note(&self, option: &str, what: Lookup) {
        LOOKUPS.with(|l| {
            let mut l = l.borrow_mut();
            let Some(list) = l.as_mut() else { return };
            let i = match list
                .iter()
                .position(|e| e.group == self.group && e.name == option)
            {
                Some(i) => i,
                None => {
                    list.push(Lookup {
                        group: self.group.to_string(),
                        name: option.to_string(),
                        ..Lookup::default()
                    });
                    list.len() - 1
                }
            };
            let e = &mut list[i];
            e.kind = e.kind.or(what.kind);
            e.default = e.default.take().or(what.default);
            e.min = e.min.take().or(what.min);
            e.max = e.max.take().or(what.max);
            if e.choices.is_empty() {
                e.choices = what.choices;
            }
            for d in what.deprecated {
                if !e.deprecated.contains(&d) {
                    e.deprecated.push(d);
                }
            }
        });
    }

    /// [`Self::note`] of a type, default and bounds.
    fn note_typed(
        &self,
        option: &str,
        kind: Kind,
        default: Option<String>,
        min: Option<String>,
        max: Option<String>,
    ) {
        let what = Lookup {
            kind: Some(kind),
            default,
            min,
            max,
            ..Lookup::default()
        };
        self.note(option, what);
    }

    fn names(&self, option: &'static str) -> Vec<(&'a str, &'a str)> {
        let mut names = vec![(self.group, option)];
        if let Some(extra) = self.aliases.get(option) {
            names.extend(extra.iter().copied());
        }
        names
    }

    fn lookup(&mut self, option: &'static str) -> Option<Found> {
        self.note(option, Lookup::default());
        if let Some(text) = self.overrides.and_then(|o| o.get(option)) {
            return Some(Found {
                text: text.clone(),
                source: ValueSource::TransportUrlQuery,
            });
        }
        let (source, value) = match self.raw.env(self.group, option) {
            Some((name, value)) => (ValueSource::Environment(name), value),
            None => {
                let raw = self.raw.get_first(&self.names(option))?;
                (ValueSource::File(raw.location.clone()), raw.value.as_str())
            }
        };
        match self.raw.substitute(self.group, value) {
            Ok(text) => Some(Found { text, source }),
            Err(reason) => {
                let value = value.to_string();
                self.error(option, source, &value, reason);
                None
            }
        }
    }

    fn error(&mut self, option: &str, source: ValueSource, value: &str, reason: String) {
        let value = if self.secrets.contains(&option) {
            MASK.to_string()
        } else {
            value.to_string()
        };
        self.errors.push(ConfigError::Value(Box::new(BadValue {
            origin: source,
            group: self.group.to_string(),
            option: option.to_string(),
            value,
            reason,
        })));
    }

    /// Converts the value of `option` with `convert`; `None` when unset or bad (the bad
    /// value is recorded as an error).
    pub fn convert<T>(
        &mut self,
        option: &'static str,
        convert: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<T> {
        let found = self.lookup(option)?;
        match convert(&found.text) {
            Ok(v) => Some(v),
            Err(reason) => {
                self.error(option, found.source, &found.text, reason);
                None
            }
        }
    }

    /// A string option; `None` when unset.
    pub fn opt_string(&mut self, option: &'static str) -> Option<String> {
        self.note_typed(option, Kind::String, None, None, None);
        self.lookup(option).map(|f| f.text)
    }

    /// A string option with a default.
    pub fn string(&mut self, option: &'static str, default: &str) -> String {
        self.note_typed(option, Kind::String, Some(default.into()), None, None);
        self.opt_string(option)
            .unwrap_or_else(|| default.to_string())
    }

    /// A string option restricted to `choices`.
    pub fn choice(
        &mut self,
        option: &'static str,
        default: &str,
        choices: &[&str],
        ignore_case: bool,
    ) -> String {
        self.note_typed(option, Kind::String, Some(default.into()), None, None);
        self.opt_choice(option, choices, ignore_case)
            .unwrap_or_else(|| default.to_string())
    }

    /// An optional string option restricted to `choices`.
    pub fn opt_choice(
        &mut self,
        option: &'static str,
        choices: &[&str],
        ignore_case: bool,
    ) -> Option<String> {
        self.note(
            option,
            Lookup {
                kind: Some(Kind::String),
                choices: choices.iter().map(|c| c.to_string()).collect(),
                ..Lookup::default()
            },
        );
        self.convert(option, |t| check_choice(t, choices, ignore_case))
    }

    /// A Boolean option.
    pub fn bool(&mut self, option: &'static str, default: bool) -> bool {
        self.note_typed(option, Kind::Bool, Some(default.to_string()), None, None);
        self.convert(option, parse_bool).unwrap_or(default)
    }

    /// An optional Integer option with bounds, converted to `T` (`u32`, `i64`, ...).
    pub fn opt_int<T: TryFrom<i64>>(
        &mut self,
        option: &'static str,
        min: Option<i64>,
        max: Option<i64>,
    ) -> Option<T> {
        let text = |v: Option<i64>| v.map(|v| v.to_string());
        self.note_typed(option, Kind::Int, None, text(min), text(max));
        self.convert(option, |t| match parse_int(t)? {
            None => Ok(None),
            Some(v) => {
                let v = check_range(v, min, max)?;
                T::try_from(v)
                    .map(Some)
                    .map_err(|_| "integer out of range".to_string())
            }
        })
        .flatten()
    }

    /// An Integer option with a default and bounds.
    pub fn int<T: TryFrom<i64> + std::fmt::Display>(
        &mut self,
        option: &'static str,
        default: T,
        min: Option<i64>,
        max: Option<i64>,
    ) -> T {
        self.note_typed(option, Kind::Int, Some(default.to_string()), None, None);
        self.opt_int(option, min, max).unwrap_or(default)
    }

    /// An optional Float option with bounds.
    pub fn opt_float(
        &mut self,
        option: &'static str,
        min: Option<f64>,
        max: Option<f64>,
    ) -> Option<f64> {
        let text = |v: Option<f64>| v.map(float_text);
        self.note_typed(option, Kind::Float, None, text(min), text(max));
        self.convert(option, |t| match parse_float(t)? {
            None => Ok(None),
            Some(v) => check_range(v, min, max).map(Some),
        })
        .flatten()
    }

    /// A Float option with a default and bounds.
    pub fn float(
        &mut self,
        option: &'static str,
        default: f64,
        min: Option<f64>,
        max: Option<f64>,
    ) -> f64 {
        self.note_typed(option, Kind::Float, Some(float_text(default)), None, None);
        self.opt_float(option, min, max).unwrap_or(default)
    }

    /// A List option.
    pub fn list(&mut self, option: &'static str, default: &[&str]) -> Vec<String> {
        self.note_typed(option, Kind::List, Some(default.join(",")), None, None);
        self.lookup(option)
            .map(|f| parse_list(&f.text))
            .unwrap_or_else(|| default.iter().map(|s| s.to_string()).collect())
    }

    /// A MultiString option: every value of every file (a transport URL query value, which
    /// joins repeats with `,`, counts as one value).
    pub fn multi(&mut self, option: &'static str, default: &[&str]) -> Vec<String> {
        self.note_typed(option, Kind::Multi, Some(default.join(",")), None, None);
        if let Some(text) = self.overrides.and_then(|o| o.get(option)) {
            return vec![text.clone()];
        }
        if self.raw.env(self.group, option).is_some() {
            return self.opt_string(option).into_iter().collect();
        }
        let names = self.names(option);
        let raws = self.raw.get_all(&names);
        if raws.is_empty() {
            return default.iter().map(|s| s.to_string()).collect();
        }
        let mut out = Vec::new();
        for raw in raws {
            match self.raw.substitute(self.group, &raw.value) {
                Ok(text) => out.push(text),
                Err(reason) => {
                    let source = ValueSource::File(raw.location.clone());
                    let value = raw.value.clone();
                    self.error(option, source, &value, reason);
                }
            }
        }
        out
    }

    /// Records an error about `option`'s current value (for checks done after reading).
    pub fn reject(&mut self, option: &'static str, reason: impl Into<String>) {
        if let Some(found) = self.lookup(option) {
            self.error(option, found.source, &found.text, reason.into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oslo_bools() {
        for t in ["true", "TRUE", "Yes", "on", "1"] {
            assert_eq!(parse_bool(t), Ok(true), "{t}");
        }
        for t in ["false", "False", "NO", "off", "0"] {
            assert_eq!(parse_bool(t), Ok(false), "{t}");
        }
        for t in ["", "t", "y", "2", "enabled", " true"] {
            assert!(parse_bool(t).is_err(), "{t}");
        }
    }

    #[test]
    fn oslo_ints_and_floats() {
        assert_eq!(parse_int(" 42 "), Ok(Some(42)));
        assert_eq!(parse_int("+5"), Ok(Some(5)));
        assert_eq!(parse_int("-1"), Ok(Some(-1)));
        assert_eq!(parse_int("1_000"), Ok(Some(1000)));
        assert_eq!(parse_int(""), Ok(None));
        assert_eq!(parse_int("  "), Ok(None));
        for bad in ["zero", "3.0", "0x10", "1__0", "_1", "1_", "--1"] {
            assert_eq!(parse_int(bad), Err("not an integer".to_string()), "{bad}");
        }
        assert!(parse_int("99999999999999999999").is_err());
        assert_eq!(parse_float("1e6"), Ok(Some(1e6)));
        assert_eq!(parse_float(" -1.5 "), Ok(Some(-1.5)));
        assert_eq!(parse_float("2"), Ok(Some(2.0)));
        assert_eq!(parse_float("1_000.5"), Ok(Some(1000.5)));
        assert_eq!(parse_float(""), Ok(None));
        assert!(parse_float("1,5").is_err());
        assert!(parse_float("_1").is_err());
        assert_eq!(
            check_range(0, Some(1), None),
            Err("should be greater than or equal to 1".to_string())
        );
        assert_eq!(
            check_range(5.0, None, Some(4.5)),
            Err("should be less than or equal to 4.5".to_string())
        );
    }

    #[test]
    fn oslo_lists() {
        assert_eq!(parse_list(" a , b,c "), vec!["a", "b", "c"]);
        assert_eq!(parse_list("a,b,,"), vec!["a", "b"]);
        assert_eq!(parse_list("a,,b"), vec!["a", "", "b"]);
        assert!(parse_list("").is_empty());
        assert!(parse_list(" , ").is_empty());
        assert_eq!(parse_list("x\ny"), vec!["x\ny"]);
    }

    #[test]
    fn reader_collects_errors_and_keeps_defaults() {
        let mut raw = RawConfig::new();
        raw.add_str(
            "n.conf",
            "[g]\ni = zero\nj = 0\nf = x\nb = maybe\nl = a, b\nm = 1\nm = 2\ns = $nope\ne =\n",
        )
        .unwrap();
        let mut errors = Vec::new();
        let mut r = Reader::new(&raw, "g", &mut errors).with_secrets(&["s"]);
        assert_eq!(r.int::<u32>("i", 3, Some(1), None), 3);
        assert_eq!(r.int::<u32>("j", 3, Some(1), None), 3);
        assert_eq!(r.float("f", 1.0, None, None), 1.0);
        assert!(r.bool("b", true));
        assert_eq!(r.list("l", &[]), vec!["a", "b"]);
        assert_eq!(r.multi("m", &["d"]), vec!["1", "2"]);
        assert_eq!(r.multi("unset", &["d"]), vec!["d"]);
        assert_eq!(r.string("s", "dflt"), "dflt");
        assert_eq!(r.int::<i64>("e", 7, None, None), 7);
        assert_eq!(r.opt_int::<i64>("e", None, None), None);
        let msgs: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(msgs.len(), 5, "{msgs:#?}");
        assert_eq!(msgs[0], "n.conf:2: [g] i = \"zero\": not an integer");
        assert_eq!(
            msgs[1],
            "n.conf:3: [g] j = \"0\": should be greater than or equal to 1"
        );
        assert!(msgs[4].starts_with("n.conf:9: [g] s = \"****\": template substitution"));
    }

    #[test]
    fn overrides_win_and_aliases_work() {
        let mut raw = RawConfig::new();
        raw.add_str("n.conf", "[g]\na = 1\nold = 5\n").unwrap();
        let overrides = HashMap::from([("a".to_string(), "2".to_string())]);
        let mut errors = Vec::new();
        let mut r = Reader::new(&raw, "g", &mut errors).with_overrides(&overrides);
        r.alias("new", "g", "old");
        assert_eq!(r.int::<i64>("a", 0, None, None), 2);
        assert_eq!(r.int::<i64>("new", 0, None, None), 5);
        assert!(errors.is_empty());
    }
}
