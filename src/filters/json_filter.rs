// SPDX-License-Identifier: Apache-2.0
//! `JsonFilter`: the tenant's `query` scheduler hint, a JSON expression over the
//! HostState's attributes, must hold for the host. Runs for every instance.
//!
//! The grammar, as nova evaluates it:
//! * `query` unset, empty, or JSON that decodes to an empty/false value (`[]`, `{}`,
//!   `0`, `""`, `null`) → pass.
//! * `[op, arg, ...]` with `op` one of `=` `<` `>` `<=` `>=` `in` `not` `or` `and`.
//!   Each arg: a nested list is evaluated (`[]` → True); `""` → dropped; a string
//!   `$a.b.c` is `getattr(host, 'a').get('b').get('c')` (missing/None → dropped,
//!   `.get` on a non-dict raises `AttributeError`); another string is itself;
//!   numbers, booleans, dicts as given, `null` dropped. Dropping changes the arity:
//!   `['=', '$nope', 1, 1]` is `1 == 1`.
//! * Comparisons need two args (else False) and hold when `args[0] OP a` for every
//!   later `a`, with Python's semantics (`1 == 1.0 == true`; `'a' < 1` raises
//!   `TypeError`, every comparison is made, no short-circuit). `in`: `args[0]` equals
//!   one of the others. `not`: the **list** of negations. `or`/`and`: any/all.
//! * The result passes if truthy; a list result passes if any element is truthy.
//!
//! Where nova raises, the request fails in nova: malformed JSON (`ValueError`), an
//! unknown operator or a non-empty dict/str query not starting with an operator
//! (`KeyError`), a number as the query or an unhashable operator (`TypeError`), a
//! query hint given as several strings (`TypeError` from `jsonutils.loads`),
//! ordering unlike types (`TypeError`), `.get` on a non-dict (`AttributeError`).
//! [`JsonFilter::check`] returns that error; `host_passes` fails the host (so a
//! malformed query leaves no host, and the request ends in NoValidHost instead of
//! nova's error).
//!
//! **Hostile input.** The query is tenant-controlled. It is bounded here, where nova
//! has no bound of its own besides CPython's recursion limit:
//! * more than [`QUERY_MAX_BYTES`] (64 KiB) of query text → `ValueError` (nova would
//!   evaluate it);
//! * JSON nested deeper than [`QUERY_MAX_DEPTH`] (32) → `RecursionError`. CPython
//!   raises `RecursionError` too, but only past ~1000 levels minus the scheduler's
//!   own stack; queries nested 33..~970 levels deep are evaluated by nova and fail
//!   the host here.
//!
//! Everything else is linear in the query size; nothing panics or recurses unbounded.
//!
//! `$variables` resolve against nova's HostState attribute names
//! ([`host_attr`](super::host_attrs::host_attr)): `$free_ram_mb`, `$free_disk_mb`, `$vcpus_total`,
//! `$hypervisor_version`, `$stats.<key>` (string values!), `$service.disabled`,
//! `$host_ip` (a `netaddr.IPAddress`, equal to no string), ... Objects nova keeps
//! (NUMA topology, PCI stats, metrics, aggregates, instances, methods) compare by
//! identity; `.get` on them raises `AttributeError` here (nova's `Instance` objects
//! and `__dict__` would answer it). `$service` lacks the keys our host state does not
//! carry (`uuid`, `report_count`, `availability_zone`): they resolve to None.

use super::host_attrs::{host_attr_as, LockName};
use super::{FilterRequest, HostFilter};
use crate::model::{HostState, RequestSpec};
use crate::py;
use crate::py::str::PyStr;
use crate::py::value::{py_compare, same_or_eq, CmpOp, PyValue};
use crate::py::{PyError, PyExc};
use std::sync::{Arc, Mutex};
use tracing::{debug, warn};

/// Largest query text evaluated (bytes).
pub const QUERY_MAX_BYTES: usize = 64 * 1024;
/// Deepest nesting of JSON arrays/objects in a query.
pub const QUERY_MAX_DEPTH: usize = 32;

type Parsed = Arc<Result<PyValue, PyError>>;

#[derive(Default)]
pub struct JsonFilter {
    /// The last query decoded: a request asks the same question of every host.
    last: Mutex<Option<(String, Parsed)>>,
    /// What `HostState._lock_name` is in the release.
    pub lock_name: LockName,
}

impl JsonFilter {
    pub const NAME: &'static str = "JsonFilter";

    pub fn new() -> Self {
        Self::default()
    }

    /// The filter of a release whose `HostState._lock_name` is `lock_name`.
    pub fn with_lock_name(lock_name: LockName) -> Self {
        JsonFilter {
            lock_name,
            ..Self::default()
        }
    }

    /// nova's `host_passes`, raising where nova raises (nova 34's HostState).
    pub fn check(host: &HostState, spec: &RequestSpec) -> Result<bool, PyError> {
        Self::check_as(host, spec, LockName::Joined)
    }

    /// nova's `host_passes` on the HostState of a release whose `_lock_name` is
    /// `lock_name`.
    pub fn check_as(
        host: &HostState,
        spec: &RequestSpec,
        lock_name: LockName,
    ) -> Result<bool, PyError> {
        match query_text(spec)? {
            None => Ok(true),
            Some(text) => evaluate(&decode(text)?, host, lock_name),
        }
    }

    fn decoded(&self, text: &str) -> Parsed {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((t, parsed)) = last.as_ref() {
            if t == text {
                return parsed.clone();
            }
        }
        let parsed = Arc::new(decode(text));
        if let Err(e) = parsed.as_ref() {
            warn!(error = %e, "JsonFilter: the query hint does not decode; nova would fail the request, no host passes");
        }
        *last = Some((text.to_string(), parsed.clone()));
        parsed
    }
}

/// `spec_obj.get_scheduler_hint('query')` up to `jsonutils.loads`: `None` when nova
/// passes without decoding.
fn query_text(spec: &RequestSpec) -> Result<Option<&str>, PyError> {
    match spec.hint("query") {
        None | Some([]) => Ok(None),
        Some([one]) if one.is_empty() => Ok(None),
        Some([one]) => Ok(Some(one.as_str())),
        // A list of several strings reaches jsonutils.loads, whose safe_decode refuses it.
        Some(_) => Err(PyError::new(
            PyExc::TypeError,
            "<class 'list'> can't be decoded",
        )),
    }
}

fn decode(text: &str) -> Result<PyValue, PyError> {
    if text.len() > QUERY_MAX_BYTES {
        return Err(PyError::value_error(format!(
            "query hint is {} bytes, more than the {QUERY_MAX_BYTES} this scheduler evaluates",
            text.len()
        )));
    }
    py::json::loads(text, QUERY_MAX_DEPTH)
}

/// The decoded query against one host: `_process_filter`, then any() of a list.
fn evaluate(query: &PyValue, host: &HostState, lock_name: LockName) -> Result<bool, PyError> {
    Ok(match process(query, host, lock_name)? {
        PyValue::List(items) => items.iter().any(PyValue::truthy),
        other => other.truthy(),
    })
}

#[derive(Clone, Copy)]
enum Command {
    Compare(CmpOp),
    In,
    Not,
    Or,
    And,
}

fn command(cmd: &PyValue) -> Result<Command, PyError> {
    let key_error = |v: &PyValue| {
        let mut text = String::new();
        let _ = py::value::py_repr(v, &mut text);
        PyError::new(PyExc::KeyError, text)
    };
    match cmd {
        PyValue::List(_) | PyValue::Dict(_) => Err(PyError::new(
            PyExc::TypeError,
            format!("unhashable type: '{}'", cmd.type_name()),
        )),
        PyValue::Str(s) => Ok(match s.as_bytes() {
            b"=" => Command::Compare(CmpOp::Eq),
            b"<" => Command::Compare(CmpOp::Lt),
            b">" => Command::Compare(CmpOp::Gt),
            b"<=" => Command::Compare(CmpOp::Le),
            b">=" => Command::Compare(CmpOp::Ge),
            b"in" => Command::In,
            b"not" => Command::Not,
            b"or" => Command::Or,
            b"and" => Command::And,
            _ => return Err(key_error(cmd)),
        }),
        other => Err(key_error(other)),
    }
}

/// nova's `_process_filter(query, host_state)`.
fn process(query: &PyValue, host: &HostState, lock_name: LockName) -> Result<PyValue, PyError> {
    if !query.truthy() {
        return Ok(PyValue::Bool(true));
    }
    // query[0] and query[1:]: a list, or (top level only) the characters of a str.
    let chars: Vec<PyValue>;
    let (cmd, args): (&PyValue, &[PyValue]) = match query {
        PyValue::List(items) => (&items[0], &items[1..]),
        PyValue::Str(s) => {
            chars = s
                .code_points()
                .map(|cp| {
                    let mut c = PyStr::default();
                    c.push_code_point(cp);
                    PyValue::Str(c)
                })
                .collect();
            (&chars[0], &chars[1..])
        }
        PyValue::Dict(_) => return Err(PyError::new(PyExc::KeyError, "0")),
        other => {
            return Err(PyError::new(
                PyExc::TypeError,
                format!("'{}' object is not subscriptable", other.type_name()),
            ))
        }
    };
    let method = command(cmd)?;
    let mut cooked = Vec::with_capacity(args.len());
    for arg in args {
        let v = match arg {
            PyValue::List(_) => process(arg, host, lock_name)?,
            PyValue::Str(s) => parse_string(s, host, lock_name)?,
            other => other.clone(),
        };
        if !v.is_none() {
            cooked.push(v);
        }
    }
    apply(method, &cooked)
}

/// nova's `_parse_string`: `$a.b.c` → `getattr(host, 'a').get('b').get('c')`.
fn parse_string(s: &PyStr, host: &HostState, lock_name: LockName) -> Result<PyValue, PyError> {
    if s.is_empty() {
        return Ok(PyValue::None);
    }
    let bytes = s.as_bytes();
    if bytes[0] != b'$' {
        return Ok(PyValue::Str(s.clone()));
    }
    let mut path = bytes[1..].split(|&b| b == b'.');
    let first = path.next().unwrap_or_default();
    let mut obj = match std::str::from_utf8(first) {
        Ok(name) => host_attr_as(host, name, lock_name),
        Err(_) => PyValue::None,
    };
    if obj.is_none() {
        return Ok(PyValue::None);
    }
    for item in path {
        obj = match &obj {
            PyValue::Dict(d) => d.get(item).cloned().unwrap_or(PyValue::None),
            other => {
                return Err(PyError::new(
                    PyExc::AttributeError,
                    format!("'{}' object has no attribute 'get'", other.type_name()),
                ))
            }
        };
        if obj.is_none() {
            return Ok(PyValue::None);
        }
    }
    Ok(obj)
}

fn apply(method: Command, args: &[PyValue]) -> Result<PyValue, PyError> {
    Ok(PyValue::Bool(match method {
        Command::Compare(op) => {
            if args.len() < 2 {
                return Ok(PyValue::Bool(false));
            }
            // Every comparison is made (a list comprehension), the first raise wins.
            let mut all = true;
            for a in &args[1..] {
                if !py_compare(&args[0], a, op)? {
                    all = false;
                }
            }
            all
        }
        Command::In => args.len() >= 2 && args[1..].iter().any(|a| same_or_eq(a, &args[0])),
        Command::Not => {
            return Ok(PyValue::List(
                args.iter().map(|a| PyValue::Bool(!a.truthy())).collect(),
            ))
        }
        Command::Or => args.iter().any(PyValue::truthy),
        Command::And => args.iter().all(PyValue::truthy),
    }))
}

impl HostFilter for JsonFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        let result = match query_text(req.spec) {
            Ok(None) => return true,
            Ok(Some(text)) => match self.decoded(text).as_ref() {
                Ok(query) => evaluate(query, host, self.lock_name),
                Err(e) => Err(e.clone()),
            },
            Err(e) => Err(e),
        };
        result.unwrap_or_else(|e| {
            // nova lets this exception end the whole request; we fail the host.
            debug!(host = %host.host, node = %host.nodename, error = %e,
                   "JsonFilter: nova would raise here; failing the host");
            false
        })
    }

    /// No `query` hint: `host_passes` is `True` before it reads the host.
    fn passes_every_host(&self, req: &FilterRequest<'_>) -> bool {
        matches!(query_text(req.spec), Ok(None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServiceInfo;
    use chrono::Utc;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn spec(query: &str) -> RequestSpec {
        RequestSpec {
            scheduler_hints: Some(BTreeMap::from([(
                "query".to_string(),
                vec![query.to_string()],
            )])),
            ..Default::default()
        }
    }

    fn host(ram: i64, disk: i64) -> HostState {
        HostState {
            host: "host1".into(),
            nodename: "node1".into(),
            free_ram_mb: ram,
            free_disk_mb: disk,
            ..Default::default()
        }
    }

    fn run(h: &HostState, query: serde_json::Value) -> Result<bool, PyError> {
        JsonFilter::check(h, &spec(&query.to_string()))
    }

    fn passes(filter: &JsonFilter, h: &HostState, s: &RequestSpec) -> bool {
        filter.host_passes(
            h,
            &FilterRequest {
                spec: s,
                now: Utc::now(),
                index: 0,
                is_rebuild: false,
            },
        )
    }

    /// nova's test_json_filters.py.
    #[test]
    fn nova_vectors() {
        let q = json!([
            "and",
            [">=", "$free_ram_mb", 1024],
            [">=", "$free_disk_mb", 200 * 1024]
        ]);
        assert_eq!(run(&host(1024, 200 * 1024), q.clone()), Ok(true));
        assert_eq!(run(&host(1023, 200 * 1024), q.clone()), Ok(false));
        assert_eq!(run(&host(1024, 200 * 1024 - 1), q.clone()), Ok(false));
        assert_eq!(
            JsonFilter::check(&host(0, 0), &RequestSpec::default()),
            Ok(true),
            "no hints"
        );
        let disabled = json!([
            "and",
            [">=", "$free_ram_mb", 1024],
            [">=", "$free_disk_mb", 200 * 1024],
            ["not", "$service.disabled"]
        ]);
        let mut h = host(1024, 200 * 1024);
        assert_eq!(run(&h, disabled.clone()), Ok(true));
        h.service = ServiceInfo {
            disabled: true,
            ..Default::default()
        };
        // nova's own test only fails because its fake host has no `service` (`not` of
        // nothing is `[]`, false). A non-empty `not` list inside `and` is always truthy.
        assert_eq!(run(&h, disabled), Ok(true));
        let strict = json!([
            "and",
            [">=", "$free_ram_mb", 1024],
            ["=", "$service.disabled", false]
        ]);
        assert_eq!(run(&h, strict), Ok(false));

        let happy = json!([
            "and",
            "$capabilities.enabled",
            ["=", "$capabilities.opt1", "match"],
            [
                "or",
                [
                    "and",
                    ["<", "$free_ram_mb", 30],
                    ["<", "$free_disk_mb", 300]
                ],
                [
                    "and",
                    [">", "$free_ram_mb", 30],
                    [">", "$free_disk_mb", 300]
                ]
            ]
        ]);
        // `$capabilities` is no HostState attribute: dropped, so `['=', 'match']` is False.
        assert_eq!(run(&host(10, 200), happy.clone()), Ok(false));

        let h = host(0, 0);
        let ops = [
            (json!(["=", 1, 1]), true),
            (json!(["=", 1, 2]), false),
            (json!(["<", 1, 2]), true),
            (json!(["<", 1, 1]), false),
            (json!(["<", 2, 1]), false),
            (json!([">", 2, 1]), true),
            (json!([">", 2, 2]), false),
            (json!([">", 2, 3]), false),
            (json!(["<=", 1, 2]), true),
            (json!(["<=", 1, 1]), true),
            (json!(["<=", 2, 1]), false),
            (json!([">=", 2, 1]), true),
            (json!([">=", 2, 2]), true),
            (json!([">=", 2, 3]), false),
            (json!(["in", 1, 1]), true),
            (json!(["in", 1, 1, 2, 3]), true),
            (json!(["in", 4, 1, 2, 3]), false),
            (json!(["not", true]), false),
            (json!(["not", false]), true),
            (json!(["or", true, false]), true),
            (json!(["or", false, false]), false),
            (json!(["and", true, true]), true),
            (json!(["and", false, false]), false),
            (json!(["and", true, false]), false),
            (json!(["and", ["or", true, false], [">", 2, 1]]), true),
            (json!(["not", true, false, true, false]), true),
            (json!(["not", true, true, true]), false),
            (json!([]), true),
            (json!({}), true),
            (
                json!([">", ["and", ["or", ["not", ["<", [">=", ["<=", ["in"]]]]]]]]),
                false,
            ),
            (json!([">", 1]), false),
            (json!(["=", "$........", 1, 1]), true),
            (json!(["=", "$foo", 2, 2]), true),
        ];
        for (q, want) in ops {
            assert_eq!(run(&h, q.clone()), Ok(want), "{q}");
        }
        assert_eq!(
            run(&h, json!(["!=", 1, 2])).unwrap_err().kind,
            PyExc::KeyError
        );
    }

    #[test]
    fn python_semantics_and_errors() {
        let mut h = host(2048, 0);
        std::sync::Arc::make_mut(&mut h.stats).insert("gpu".into(), "2".into());
        h.host_ip = Some("10.0.0.1".into());
        let cases = [
            (json!(["=", "$stats.gpu", "2"]), Ok(true)),
            (json!(["=", "$stats.gpu", 2]), Ok(false)),
            (json!(["=", 1, true, 1.0]), Ok(true)),
            (json!(["in", "$free_ram_mb", 1, 2048.0]), Ok(true)),
            (json!(["=", "$host_ip", "10.0.0.1"]), Ok(false)),
            (json!(["=", "$host_ip", "$host_ip"]), Ok(true)),
            (json!(["=", {"a": [1]}, {"a": [1.0]}]), Ok(true)),
            (json!(["<", ["not", false], ["not", true, true]]), Ok(false)),
            (json!(["and", ["not", false, false]]), Ok(true)),
            (json!(["=", "", "", 1]), Ok(false)),
            (json!(["<", "$stats.gpu", 3]), Err(PyExc::TypeError)),
            // No short-circuit: the second comparison raises although the first failed.
            (json!(["<", 5, 1, "x"]), Err(PyExc::TypeError)),
            (json!(["<", {}, {}]), Err(PyExc::TypeError)),
            (
                json!(["=", "$free_ram_mb.x", 1]),
                Err(PyExc::AttributeError),
            ),
            (json!(["=", "$stats.gpu.x", 1]), Err(PyExc::AttributeError)),
            (json!([1, 2]), Err(PyExc::KeyError)),
            (json!([["="], 2]), Err(PyExc::TypeError)),
            (json!({"=": 1}), Err(PyExc::KeyError)),
            (json!(5), Err(PyExc::TypeError)),
            (json!(0), Ok(true)),
            (json!(null), Ok(true)),
            (json!("=ab"), Ok(false)),
            (json!("=aa"), Ok(true)),
            (json!("abc"), Err(PyExc::KeyError)),
            // The operator is looked up before the arguments are evaluated.
            (json!(["nope", ["<", 1, "x"]]), Err(PyExc::KeyError)),
        ];
        for (q, want) in cases {
            let got = run(&h, q.clone()).map_err(|e| e.kind);
            assert_eq!(got, want, "{q}");
        }
    }

    #[test]
    fn hostile_and_malformed_queries_fail_the_host_without_panicking() {
        let filter = JsonFilter::new();
        let h = host(1, 1);
        for (text, kind) in [
            ("[", PyExc::ValueError),
            ("[\"=\", 1, 1", PyExc::ValueError),
            ("{'a': 1}", PyExc::ValueError),
            ("NaN]", PyExc::ValueError),
        ] {
            assert_eq!(
                JsonFilter::check(&h, &spec(text)).unwrap_err().kind,
                kind,
                "{text}"
            );
            assert!(!passes(&filter, &h, &spec(text)));
        }
        let deep = format!("{}[]{}", "[\"and\", ".repeat(40), "]".repeat(40));
        assert_eq!(
            JsonFilter::check(&h, &spec(&deep)).unwrap_err().kind,
            PyExc::RecursionError
        );
        let very_deep = "[".repeat(1_000_000);
        assert!(!passes(&filter, &h, &spec(&very_deep)));
        let ok_deep = format!("{}[]{}", "[\"and\", ".repeat(31), "]".repeat(31));
        assert_eq!(JsonFilter::check(&h, &spec(&ok_deep)), Ok(true));
        let big = format!("[\"in\", 1{}]", ", 2".repeat(QUERY_MAX_BYTES / 3));
        assert_eq!(
            JsonFilter::check(&h, &spec(&big)).unwrap_err().kind,
            PyExc::ValueError
        );
        // Several strings in the hint: jsonutils.loads refuses a list.
        let two = RequestSpec {
            scheduler_hints: Some(BTreeMap::from([(
                "query".to_string(),
                vec!["[]".to_string(), "[]".to_string()],
            )])),
            ..Default::default()
        };
        assert_eq!(
            JsonFilter::check(&h, &two).unwrap_err().kind,
            PyExc::TypeError
        );
        assert!(passes(&filter, &h, &spec("")));
        assert!(passes(&filter, &h, &spec("[\">=\", \"$free_ram_mb\", 1]")));
        assert!(!filter.once_per_request());
        assert!(!filter.run_on_rebuild());
    }

    /// nova 29 to 33: `_lock_name` is a tuple, ordered against itself and a
    /// `TypeError` against a string; nova 34's is the string `host-node`.
    #[test]
    fn lock_name_by_release() {
        let h = host(0, 0);
        let tuple =
            |q: serde_json::Value| JsonFilter::check_as(&h, &spec(&q.to_string()), LockName::Tuple);
        assert_eq!(tuple(json!(["<=", "$_lock_name", "$_lock_name"])), Ok(true));
        assert_eq!(tuple(json!([">", "$_lock_name", "$_lock_name"])), Ok(false));
        assert_eq!(
            tuple(json!(["<", "$_lock_name", "host1-node1"]))
                .unwrap_err()
                .kind,
            PyExc::TypeError
        );
        assert_eq!(
            JsonFilter::check(
                &h,
                &spec(&json!(["=", "$_lock_name", "host1-node1"]).to_string())
            ),
            Ok(true)
        );
        assert_eq!(tuple(json!(["=", "$_lock_name", "host1-node1"])), Ok(false));
    }
}
