// SPDX-License-Identifier: Apache-2.0
//! The INI dialect of oslo.config (`oslo_config/iniparser.py` + `cfg.ConfigParser`) and the
//! store of every value read, in file order.
//!
//! Rules, as oslo has them:
//! - `[section]` starts a group. Group names are case-insensitive (`[Scheduler]` is
//!   `[scheduler]`) except `DEFAULT`, which must be written in capitals: `[default]` is
//!   a group of its own that nothing reads.
//! - `key = value` or `key: value` (whichever of `=`/`:` comes first splits). Keys are
//!   case-sensitive. Values are stripped; one pair of matching surrounding quotes (`"…"` or
//!   `'…'`) is removed.
//! - A line starting with `#` or `;` is a comment; there are no end-of-line comments
//!   (`a = b # c` has the value `b # c`).
//! - A line starting with a space or a tab continues the previous value: the stripped line
//!   is appended after a newline. A blank line ends the value.
//! - A key may repeat. A normal option takes the last value of the last file that sets it;
//!   a multi-valued option takes every value of every file, in order.
//! - `$name`, `${name}` and `$group.name` in a value are replaced by the value of that
//!   option (same group first, then `[DEFAULT]`); `$$` and `\$` are a literal `$`.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::error::{ConfigError, Location};

/// One value as written, with where it was written.
#[derive(Clone, PartialEq, Eq)]
pub struct RawValue {
    /// The value: stripped, quotes removed, continuation lines joined with `\n`.
    pub value: String,
    /// Where the `key = value` line is.
    pub location: Location,
}

impl fmt::Debug for RawValue {
    // Values may be secrets; only the location is shown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RawValue({})", self.location)
    }
}

/// One parsed file: group (normalized name) → key → values in order.
#[derive(Clone, Default)]
struct ParsedFile {
    groups: BTreeMap<String, BTreeMap<String, Vec<RawValue>>>,
}

/// Every value of every file read, in the order the files were read. Unknown groups and
/// options are kept here too, so a value the typed sections do not model can still be read.
#[derive(Clone, Default)]
pub struct RawConfig {
    files: Vec<(Arc<str>, ParsedFile)>,
    /// `OS_<GROUP>__<OPTION>` environment variables, which win over the files.
    env: BTreeMap<String, String>,
}

impl fmt::Debug for RawConfig {
    // Shows files, groups and keys, never values (they may be secrets).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for (name, file) in &self.files {
            let groups: BTreeMap<&str, Vec<&str>> = file
                .groups
                .iter()
                .map(|(g, keys)| (g.as_str(), keys.keys().map(String::as_str).collect()))
                .collect();
            list.entry(&(name, groups));
        }
        list.finish()
    }
}

/// oslo's group-name normalization: `DEFAULT` stays, everything else is lowercased.
pub fn normalize_group(name: &str) -> String {
    if name == "DEFAULT" {
        name.to_string()
    } else {
        name.to_lowercase()
    }
}

impl RawConfig {
    /// An empty store (every option at its default).
    pub fn new() -> Self {
        Self::default()
    }

    /// Takes oslo.config's environment overrides from `vars` (those named
    /// `OS_<GROUP>__<OPTION>`, e.g. `OS_DEFAULT__TRANSPORT_URL`).
    pub fn set_env(&mut self, vars: impl IntoIterator<Item = (String, String)>) {
        self.env = vars
            .into_iter()
            .filter(|(k, _)| k.starts_with("OS_") && k.contains("__"))
            .collect();
    }

    /// The environment variable that overrides `[group] option`, if set: its name and value.
    pub fn env(&self, group: &str, option: &str) -> Option<(String, &str)> {
        let name = format!("OS_{}__{}", group.to_uppercase(), option.to_uppercase());
        let value = self.env.get(&name)?;
        Some((name, value.as_str()))
    }

    /// Parses one file's text and appends it after the files already read. `name` is used
    /// in locations. All syntax errors of the text are returned together.
    pub fn add_str(&mut self, name: &str, text: &str) -> Result<(), Vec<ConfigError>> {
        let name: Arc<str> = Arc::from(name);
        let parsed = parse(&name, text)?;
        self.files.push((name, parsed));
        Ok(())
    }

    /// The names of the files read, in order.
    pub fn files(&self) -> Vec<&str> {
        self.files.iter().map(|(n, _)| &**n).collect()
    }

    /// The value a normal (single-valued) option gets: for the newest file that sets any of
    /// `names` (`(group, key)`, first the option's own name then its deprecated ones), the
    /// last value of the first name that file sets.
    pub fn get_first(&self, names: &[(&str, &str)]) -> Option<&RawValue> {
        self.files.iter().rev().find_map(|(_, file)| {
            names.iter().find_map(|(group, key)| {
                file.groups
                    .get(&normalize_group(group))
                    .and_then(|keys| keys.get(*key))
                    .and_then(|values| values.last())
            })
        })
    }

    /// The value of `[group] key` as a normal option gets it (see [`RawConfig::get_first`]).
    pub fn get(&self, group: &str, key: &str) -> Option<&RawValue> {
        self.get_first(&[(group, key)])
    }

    /// Every value of a multi-valued option, oldest file first; within one file, the values
    /// of the first of `names` that the file sets.
    pub fn get_all(&self, names: &[(&str, &str)]) -> Vec<&RawValue> {
        let mut out = Vec::new();
        for (_, file) in &self.files {
            let found = names.iter().find_map(|(group, key)| {
                file.groups
                    .get(&normalize_group(group))
                    .and_then(|keys| keys.get(*key))
            });
            out.extend(found.into_iter().flatten());
        }
        out
    }

    /// The (normalized) names of all groups that appear in any file.
    pub fn groups(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .files
            .iter()
            .flat_map(|(_, f)| f.groups.keys().cloned())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// The keys set in `group` in any file, sorted, each once.
    pub fn keys(&self, group: &str) -> Vec<String> {
        let group = normalize_group(group);
        let mut all: Vec<String> = self
            .files
            .iter()
            .filter_map(|(_, f)| f.groups.get(&group))
            .flat_map(|keys| keys.keys().cloned())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// Applies oslo's template substitution to `text`, a value of an option of `group`.
    /// The error text names the reference, never the value.
    pub fn substitute(&self, group: &str, text: &str) -> Result<String, String> {
        self.substitute_depth(group, text, 0)
    }

    fn substitute_depth(&self, group: &str, text: &str, depth: usize) -> Result<String, String> {
        if !text.contains('$') {
            return Ok(text.to_string());
        }
        if depth > 16 {
            return Err("template substitution loops".to_string());
        }
        // oslo treats `\$` like the template escape `$$`.
        let text = text.replace("\\$", "$$");
        let chars: Vec<char> = text.chars().collect();
        let mut out = String::with_capacity(text.len());
        let mut i = 0;
        while i < chars.len() {
            if chars[i] != '$' {
                out.push(chars[i]);
                i += 1;
                continue;
            }
            let next = chars.get(i + 1).copied();
            if next == Some('$') {
                out.push('$');
                i += 2;
                continue;
            }
            let (name, end) = match next {
                Some('{') => match template_name(&chars, i + 2) {
                    Some(end) if chars.get(end) == Some(&'}') => (&chars[i + 2..end], end + 1),
                    _ => (&chars[0..0], i + 1),
                },
                Some(_) => match template_name(&chars, i + 1) {
                    Some(end) => (&chars[i + 1..end], end),
                    None => (&chars[0..0], i + 1),
                },
                None => (&chars[0..0], i + 1),
            };
            if name.is_empty() {
                // Not a placeholder (Python's safe_substitute leaves it alone).
                out.push('$');
                i += 1;
                continue;
            }
            let name: String = name.iter().collect();
            out.push_str(&self.lookup_reference(group, &name, depth)?);
            i = end;
        }
        Ok(out)
    }

    fn lookup_reference(&self, group: &str, name: &str, depth: usize) -> Result<String, String> {
        let candidates: Vec<(&str, &str)> = match name.split_once('.') {
            Some((g, key)) => vec![(g, key)],
            None => vec![(group, name), ("DEFAULT", name)],
        };
        for (g, key) in candidates {
            if let Some((_, v)) = self.env(g, key) {
                return self.substitute_depth(g, v, depth + 1);
            }
            if let Some(v) = self.get(g, key) {
                return self.substitute_depth(g, &v.value, depth + 1);
            }
        }
        Err(format!(
            "template substitution: `${name}` names no option set in the configuration \
             (write `$$` for a literal `$`)"
        ))
    }
}

/// End of a template identifier (`[_a-z][._a-z0-9]*`, case-insensitive) starting at `start`.
fn template_name(chars: &[char], start: usize) -> Option<usize> {
    let first = *chars.get(start)?;
    if !(first == '_' || first.is_ascii_alphabetic()) {
        return None;
    }
    let mut end = start + 1;
    while end < chars.len()
        && (chars[end] == '_' || chars[end] == '.' || chars[end].is_ascii_alphanumeric())
    {
        end += 1;
    }
    Some(end)
}

/// Parser state for the assignment being read (it may continue on the next lines).
struct Pending {
    key: String,
    lines: Vec<String>,
    line: usize,
}

fn parse(name: &Arc<str>, text: &str) -> Result<ParsedFile, Vec<ConfigError>> {
    let mut file = ParsedFile::default();
    let mut errors = Vec::new();
    let mut group: Option<String> = None;
    let mut pending: Option<Pending> = None;
    let syntax = |line: usize, message: &str| ConfigError::Syntax {
        location: Location {
            file: name.clone(),
            line,
        },
        message: message.to_string(),
    };

    let flush = |pending: &mut Option<Pending>, group: &Option<String>, file: &mut ParsedFile| {
        let p = pending.take()?;
        let Some(group) = group else {
            return Some(syntax(p.line, "Section must be started before assignment"));
        };
        let value = RawValue {
            value: p.lines.join("\n"),
            location: Location {
                file: name.clone(),
                line: p.line,
            },
        };
        let keys = file.groups.entry(normalize_group(group)).or_default();
        keys.entry(p.key).or_default().push(value);
        None
    };

    // `str::lines` splits on `\n` and strips a trailing `\r`, like Python's readlines + rstrip.
    for (index, raw_line) in text.lines().enumerate() {
        let lineno = index + 1;
        let line = raw_line.trim_end();
        if line.is_empty() {
            errors.extend(flush(&mut pending, &group, &mut file));
            continue;
        }
        if line.starts_with([' ', '\t']) {
            match pending.as_mut() {
                Some(p) => p.lines.push(line.trim_start().to_string()),
                None => errors.push(syntax(lineno, "Unexpected continuation line")),
            }
            continue;
        }
        errors.extend(flush(&mut pending, &group, &mut file));
        if line.starts_with('[') {
            if !line.ends_with(']') {
                errors.push(syntax(lineno, "Invalid section (must end with ])"));
            } else if line.len() <= 2 {
                errors.push(syntax(lineno, "Empty section name"));
            } else {
                let section = &line[1..line.len() - 1];
                file.groups.entry(normalize_group(section)).or_default();
                group = Some(section.to_string());
            }
        } else if line.starts_with(['#', ';']) {
            // comment
        } else {
            match split_key_value(line) {
                Ok((key, value)) => {
                    pending = Some(Pending {
                        key,
                        lines: vec![value],
                        line: lineno,
                    })
                }
                Err(message) => errors.push(syntax(lineno, message)),
            }
        }
    }
    errors.extend(flush(&mut pending, &group, &mut file));
    if errors.is_empty() {
        Ok(file)
    } else {
        Err(errors)
    }
}

fn split_key_value(line: &str) -> Result<(String, String), &'static str> {
    let split_at = match (line.find(':'), line.find('=')) {
        (None, None) => return Err("No ':' or '=' found in assignment"),
        (Some(c), Some(e)) => c.min(e),
        (Some(c), None) => c,
        (None, Some(e)) => e,
    };
    let key = line[..split_at].trim();
    if key.is_empty() {
        return Err("Key cannot be empty");
    }
    let mut value = line[split_at + 1..].trim();
    let bytes = value.as_bytes();
    // iniparser strips one pair of matching quotes; a lone `"` is left alone.
    if !bytes.is_empty()
        && (bytes[0] == b'"' || bytes[0] == b'\'')
        && bytes[0] == bytes[bytes.len() - 1]
    {
        value = if value.len() >= 2 {
            &value[1..value.len() - 1]
        } else {
            ""
        };
    }
    Ok((key.to_string(), value.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> RawConfig {
        let mut r = RawConfig::new();
        r.add_str("a.conf", text).unwrap();
        r
    }

    fn value<'a>(r: &'a RawConfig, g: &str, k: &str) -> &'a str {
        &r.get(g, k).unwrap().value
    }

    #[test]
    fn keys_values_separators_and_quotes() {
        let r = raw(
            "[DEFAULT]\na = 1\nb: two\nc=x:y\nd : p=q\ne = \"quoted\"\nf = 'single'\n\
                     g = \"unbalanced'\nh =\ni = a # not a comment\nj = \"\n",
        );
        assert_eq!(value(&r, "DEFAULT", "a"), "1");
        assert_eq!(value(&r, "DEFAULT", "b"), "two");
        assert_eq!(value(&r, "DEFAULT", "c"), "x:y");
        assert_eq!(value(&r, "DEFAULT", "d"), "p=q");
        assert_eq!(value(&r, "DEFAULT", "e"), "quoted");
        assert_eq!(value(&r, "DEFAULT", "f"), "single");
        assert_eq!(value(&r, "DEFAULT", "g"), "\"unbalanced'");
        assert_eq!(value(&r, "DEFAULT", "h"), "");
        assert_eq!(value(&r, "DEFAULT", "i"), "a # not a comment");
        assert_eq!(value(&r, "DEFAULT", "j"), "");
    }

    #[test]
    fn comments_and_group_names() {
        let r = raw(
            "# top\n[Filter_Scheduler]\n; c\n#x = 1\nhost_subset_size = 2\n\
                     [default]\ndebug = true\n[DEFAULT]\nKey = v\n",
        );
        assert_eq!(value(&r, "filter_scheduler", "host_subset_size"), "2");
        assert!(r.get("filter_scheduler", "#x").is_none());
        // `[default]` is not `[DEFAULT]`; keys are case-sensitive.
        assert!(r.get("DEFAULT", "debug").is_none());
        assert_eq!(value(&r, "default", "debug"), "true");
        assert!(r.get("DEFAULT", "key").is_none());
        assert_eq!(value(&r, "DEFAULT", "Key"), "v");
        assert_eq!(r.groups(), vec!["DEFAULT", "default", "filter_scheduler"]);
    }

    #[test]
    fn continuation_lines() {
        let r = raw("[g]\nk = first\n  second\n\tthird\n\nother = 1\n");
        assert_eq!(value(&r, "g", "k"), "first\nsecond\nthird");
        assert_eq!(value(&r, "g", "other"), "1");
        let loc = &r.get("g", "other").unwrap().location;
        assert_eq!((&*loc.file, loc.line), ("a.conf", 6));
    }

    #[test]
    fn repeated_keys_last_wins_and_multi_accumulates() {
        let mut r = raw("[g]\nk = 1\nk = 2\n[G]\nk = 3\n");
        r.add_str("b.conf", "[g]\nk = 4\nk = 5\n").unwrap();
        r.add_str("c.conf", "[other]\nk = 9\n").unwrap();
        assert_eq!(value(&r, "g", "k"), "5");
        let all: Vec<&str> = r
            .get_all(&[("g", "k")])
            .iter()
            .map(|v| v.value.as_str())
            .collect();
        assert_eq!(all, vec!["1", "2", "3", "4", "5"]);
        assert_eq!(r.keys("g"), vec!["k"]);
        assert_eq!(r.files(), vec!["a.conf", "b.conf", "c.conf"]);
    }

    #[test]
    fn deprecated_names_per_file() {
        let mut r = raw("[g]\nnew = a\n");
        r.add_str("b.conf", "[g]\nold = b\n").unwrap();
        let names = [("g", "new"), ("g", "old")];
        // The newest file that sets any name wins.
        assert_eq!(r.get_first(&names).unwrap().value, "b");
        r.add_str("c.conf", "[g]\nold = c\nnew = d\n").unwrap();
        assert_eq!(r.get_first(&names).unwrap().value, "d");
    }

    #[test]
    fn syntax_errors_all_reported() {
        let mut r = RawConfig::new();
        let errs = r
            .add_str("bad.conf", "k = v\n[g\n[]\nnovalue\n= x\n[ok]\n  cont\n")
            .unwrap_err();
        let msgs: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        assert_eq!(
            msgs,
            vec![
                "bad.conf:1: Section must be started before assignment",
                "bad.conf:2: Invalid section (must end with ])",
                "bad.conf:3: Empty section name",
                "bad.conf:4: No ':' or '=' found in assignment",
                "bad.conf:5: Key cannot be empty",
                "bad.conf:7: Unexpected continuation line",
            ]
        );
    }

    #[test]
    fn debug_shows_no_values() {
        let r = raw("[database]\nconnection = mysql://u:secret@h/db\n");
        let dbg = format!("{r:?} {:?}", r.get("database", "connection"));
        assert!(!dbg.contains("secret"), "{dbg}");
        assert!(dbg.contains("connection"));
    }

    #[test]
    fn template_substitution() {
        let r = raw("[DEFAULT]\nstate_path = /var/lib/nova\nmy_ip = 10.0.0.1\n\
                     [g]\nlocal = x\nref = $local-${my_ip}-$state_path/tmp\n\
                     dotted = $DEFAULT.my_ip\n");
        let sub = |t: &str| r.substitute("g", t);
        assert_eq!(
            sub(&r.get("g", "ref").unwrap().value).unwrap(),
            "x-10.0.0.1-/var/lib/nova/tmp"
        );
        assert_eq!(sub("$DEFAULT.my_ip").unwrap(), "10.0.0.1");
        assert_eq!(sub("pa$$word and a\\$b").unwrap(), "pa$word and a$b");
        assert_eq!(
            sub("cost: 5$ or $1 or ${ x").unwrap(),
            "cost: 5$ or $1 or ${ x"
        );
        let err = sub("pa$word").unwrap_err();
        assert!(err.contains("`$word`"), "{err}");
        let looped = raw("[g]\na = $b\nb = $a\n");
        assert!(looped.substitute("g", "$a").is_err());
    }
}
