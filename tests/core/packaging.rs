// SPDX-License-Identifier: Apache-2.0
//! What ships beside the binary, read as the tools that use it read it: the compose
//! stack gives the daemon a `state_dir` its user can write, and the alerting rules and
//! the Grafana dashboard query only metrics the daemon registers.
//!
//! There is no YAML parser among the dependencies: [`Yaml`] reads the block subset
//! these files use (mappings, sequences, flow sequences, `|`/`>` scalars, comments).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[derive(Debug, Clone, PartialEq)]
enum Yaml {
    Scalar(String),
    List(Vec<Yaml>),
    Map(Vec<(String, Yaml)>),
}

impl Yaml {
    fn parse(text: &str) -> Yaml {
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        let mut i = 0;
        let doc = parse_block(&mut lines, &mut i, 0);
        if let Some(rest) = next_content(&lines, i) {
            panic!("line {}: not read: {:?}", rest + 1, lines[rest]);
        }
        doc
    }

    fn get(&self, key: &str) -> Option<&Yaml> {
        match self {
            Yaml::Map(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    fn str(&self) -> Option<&str> {
        match self {
            Yaml::Scalar(s) => Some(s),
            _ => None,
        }
    }

    fn list(&self) -> &[Yaml] {
        match self {
            Yaml::List(items) => items,
            _ => &[],
        }
    }

    /// `KEY: value` mappings and `- KEY=value` lists alike (compose's `environment`).
    fn pairs(&self) -> Vec<(String, String)> {
        match self {
            Yaml::Map(entries) => entries
                .iter()
                .map(|(k, v)| (k.clone(), v.str().unwrap_or_default().to_string()))
                .collect(),
            Yaml::List(items) => items
                .iter()
                .filter_map(|i| i.str()?.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            Yaml::Scalar(_) => Vec::new(),
        }
    }
}

fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

fn is_blank_or_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with('#')
}

fn next_content(lines: &[String], from: usize) -> Option<usize> {
    (from..lines.len()).find(|&j| !is_blank_or_comment(&lines[j]))
}

/// `text` without a trailing ` # comment` (outside quotes).
fn strip_comment(text: &str) -> &str {
    let (mut single, mut double) = (false, false);
    let mut prev = ' ';
    for (at, c) in text.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => return text[..at].trim_end(),
            _ => {}
        }
        prev = c;
    }
    text.trim_end()
}

fn unquote(text: &str) -> String {
    let t = text.trim();
    if t.len() >= 2 && t.starts_with('"') && t.ends_with('"') {
        serde_json::from_str(t).unwrap_or_else(|e| panic!("{t}: {e}"))
    } else if t.len() >= 2 && t.starts_with('\'') && t.ends_with('\'') {
        t[1..t.len() - 1].replace("''", "'")
    } else {
        t.to_string()
    }
}

/// `[a, "b"]` as a list of scalars; anything else as one scalar.
fn inline_value(text: &str) -> Yaml {
    let t = text.trim();
    if let Some(inner) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        let mut items = Vec::new();
        let (mut start, mut quote) = (0, None);
        for (at, c) in inner.char_indices() {
            match (c, quote) {
                ('"' | '\'', None) => quote = Some(c),
                (q, Some(open)) if q == open => quote = None,
                (',', None) => {
                    items.push(Yaml::Scalar(unquote(&inner[start..at])));
                    start = at + 1;
                }
                _ => {}
            }
        }
        if !inner[start..].trim().is_empty() {
            items.push(Yaml::Scalar(unquote(&inner[start..])));
        }
        return Yaml::List(items);
    }
    Yaml::Scalar(unquote(t))
}

/// The lines of a `|` or `>` scalar below the line at `parent` indentation.
fn block_scalar(lines: &[String], i: &mut usize, parent: usize, style: &str) -> Yaml {
    let mut body: Vec<&str> = Vec::new();
    let mut base = None;
    while *i < lines.len() {
        let line = &lines[*i];
        if !line.trim().is_empty() && indent_of(line) <= parent {
            break;
        }
        let b = *base.get_or_insert_with(|| indent_of(line));
        body.push(line.get(b..).unwrap_or_default());
        *i += 1;
    }
    while body.last().is_some_and(|l| l.trim().is_empty()) {
        body.pop();
    }
    let joined = if style.starts_with('>') {
        body.join(" ")
    } else {
        body.join("\n")
    };
    Yaml::Scalar(joined)
}

fn value_after(lines: &mut [String], i: &mut usize, indent: usize, rest: &str) -> Yaml {
    let mut rest = strip_comment(rest).trim();
    // An anchor (`&name`) labels the value; aliases and merge keys stay plain scalars.
    if rest.starts_with('&') {
        rest = rest.split_once(' ').map_or("", |(_, r)| r.trim());
    }
    if rest.starts_with('|') || rest.starts_with('>') {
        return block_scalar(lines, i, indent, rest);
    }
    if !rest.is_empty() {
        return inline_value(rest);
    }
    match next_content(lines, *i) {
        Some(j) if indent_of(&lines[j]) > indent => parse_block(lines, i, indent_of(&lines[j])),
        // A sequence may sit at its key's indentation.
        Some(j) if indent_of(&lines[j]) == indent && lines[j].trim_start().starts_with('-') => {
            parse_block(lines, i, indent)
        }
        _ => Yaml::Scalar(String::new()),
    }
}

/// The mapping or sequence whose entries start at `indent`.
fn parse_block(lines: &mut [String], i: &mut usize, indent: usize) -> Yaml {
    let Some(first) = next_content(lines, *i) else {
        return Yaml::Scalar(String::new());
    };
    let is_list = lines[first].trim_start().starts_with('-');
    let (mut items, mut entries) = (Vec::new(), Vec::new());
    while let Some(j) = next_content(lines, *i) {
        let line = lines[j].clone();
        let trimmed = line.trim_start();
        if indent_of(&line) != indent || trimmed.starts_with('-') != is_list {
            break;
        }
        *i = j + 1;
        if is_list {
            let content = trimmed.strip_prefix('-').unwrap_or_default();
            let content = content.strip_prefix(' ').unwrap_or(content);
            let stripped = strip_comment(content);
            if stripped.starts_with('|') || stripped.starts_with('>') {
                items.push(block_scalar(lines, i, indent, stripped));
            } else if stripped.is_empty() {
                items.push(value_after(lines, i, indent, ""));
            } else if key_value(stripped).is_some() {
                // `- key: value` opens a mapping whose keys line up after the dash.
                *i = j;
                lines[j] = format!("{}{}", " ".repeat(indent + 2), content);
                items.push(parse_block(lines, i, indent + 2));
            } else {
                items.push(inline_value(stripped));
            }
        } else {
            let (key, rest) = key_value(strip_comment(trimmed))
                .unwrap_or_else(|| panic!("line {}: not `key: value`: {line:?}", j + 1));
            let value = value_after(lines, i, indent, rest);
            entries.push((key, value));
        }
    }
    if is_list {
        Yaml::List(items)
    } else {
        Yaml::Map(entries)
    }
}

/// `key: rest` or `key:` (a key plain or quoted, not a flow value).
fn key_value(text: &str) -> Option<(String, &str)> {
    if text.starts_with('[') || text.starts_with('{') {
        return None;
    }
    let at = if text.starts_with('"') || text.starts_with('\'') {
        let close = text[1..].find(&text[..1])? + 1;
        close + text[close..].find(':')?
    } else {
        text.find(": ")
            .or_else(|| text.strip_suffix(':').map(str::len))?
    };
    let (key, rest) = text.split_at(at);
    Some((unquote(key), &rest[1..]))
}

#[test]
fn the_yaml_subset_reads_as_yaml_does() {
    let doc = Yaml::parse(
        "# top\na: 1   # one\nb:\n  - x\n  - \"y # not a comment\"\n  - k: v\n    k2: v2\n\
         c: [p, \"q:r\"]\nd: |\n  line 1\n  line 2\ne: >-\n  folded\n  text\nf:\n- same indent\n",
    );
    assert_eq!(doc.get("a"), Some(&Yaml::Scalar("1".into())));
    let b = doc.get("b").unwrap().list();
    assert_eq!(b[1], Yaml::Scalar("y # not a comment".into()));
    assert_eq!(b[2].get("k2").and_then(Yaml::str), Some("v2"));
    assert_eq!(
        doc.get("c"),
        Some(&Yaml::List(vec![
            Yaml::Scalar("p".into()),
            Yaml::Scalar("q:r".into())
        ]))
    );
    assert_eq!(doc.get("d").and_then(Yaml::str), Some("line 1\nline 2"));
    assert_eq!(doc.get("e").and_then(Yaml::str), Some("folded text"));
    assert_eq!(doc.get("f").map(Yaml::list).map(<[Yaml]>::len), Some(1));
}

/// The final stage of a Dockerfile as the image runs it.
#[derive(Debug, Default)]
struct Image {
    user: Option<String>,
    env: Vec<(String, String)>,
    volumes: Vec<String>,
    /// Directories made with `install -d -o OWNER ... [-m MODE] DIR` or `chown`ed, with
    /// their owner and mode.
    dirs: Vec<(String, String, Option<String>)>,
}

impl Image {
    fn parse(text: &str) -> Image {
        // Continuation lines joined, comments dropped.
        let mut instructions: Vec<String> = Vec::new();
        let mut current = String::new();
        for line in text.lines() {
            if line.trim_start().starts_with('#') {
                continue;
            }
            let (body, continued) = match line.trim_end().strip_suffix('\\') {
                Some(b) => (b, true),
                None => (line, false),
            };
            current.push_str(body.trim());
            current.push(' ');
            if !continued {
                if !current.trim().is_empty() {
                    instructions.push(current.trim().to_string());
                }
                current.clear();
            }
        }
        let last_from = instructions
            .iter()
            .rposition(|i| i.to_ascii_uppercase().starts_with("FROM "))
            .expect("a FROM");
        let mut image = Image::default();
        for ins in &instructions[last_from + 1..] {
            let (word, args) = ins.split_once(' ').unwrap_or((ins, ""));
            let args = args.trim();
            match word.to_ascii_uppercase().as_str() {
                "USER" => image.user = Some(args.split(':').next().unwrap_or(args).to_string()),
                "ENV" => {
                    for pair in args.split_whitespace() {
                        if let Some((k, v)) = pair.split_once('=') {
                            image.env.push((k.to_string(), unquote(v)));
                        }
                    }
                }
                "VOLUME" => match inline_value(args) {
                    Yaml::List(items) => image
                        .volumes
                        .extend(items.iter().filter_map(Yaml::str).map(str::to_string)),
                    Yaml::Scalar(s) => image.volumes.extend(s.split_whitespace().map(String::from)),
                    Yaml::Map(_) => {}
                },
                "RUN" => {
                    for command in args.split("&&") {
                        image.dirs.extend(dirs_made(command));
                    }
                }
                _ => {}
            }
        }
        image
    }

    fn env(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .rev()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `install -d -o OWNER [-g G] [-m MODE] DIR...` and `chown [-R] OWNER[:G] PATH...`.
fn dirs_made(command: &str) -> Vec<(String, String, Option<String>)> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let mut out = Vec::new();
    match words.first() {
        Some(&"install") if words.contains(&"-d") => {
            let (mut owner, mut mode, mut paths) = (None, None, Vec::new());
            let mut w = words[1..].iter();
            while let Some(&word) = w.next() {
                match word {
                    "-o" => owner = w.next().map(|s| s.to_string()),
                    "-m" => mode = w.next().map(|s| s.to_string()),
                    "-g" => {
                        w.next();
                    }
                    "-d" => {}
                    path => paths.push(path.to_string()),
                }
            }
            let owner = owner.unwrap_or_else(|| "root".into());
            out.extend(paths.into_iter().map(|p| (p, owner.clone(), mode.clone())));
        }
        Some(&"chown") => {
            let rest: Vec<&str> = words[1..]
                .iter()
                .copied()
                .filter(|w| !w.starts_with('-'))
                .collect();
            if let Some((owner, paths)) = rest.split_first() {
                let owner: &str = owner.split(':').next().unwrap_or_default();
                out.extend(
                    paths
                        .iter()
                        .map(|p| (p.to_string(), owner.to_string(), None)),
                );
            }
        }
        _ => {}
    }
    out
}

/// The `[nova_scheduler_rs] state_dir` default, as the daemon reads it.
fn default_state_dir() -> String {
    let config = nova_scheduler::config::from_ini_str("").expect("defaults load");
    config.guards.state_dir.to_string_lossy().into_owned()
}

#[test]
fn the_compose_scheduler_can_write_its_state_dir() {
    let compose = Yaml::parse(&read("docker-compose.yml"));
    let scheduler = compose
        .get("services")
        .and_then(|s| s.get("scheduler"))
        .expect("services.scheduler");
    let dockerfile = scheduler
        .get("build")
        .and_then(|b| b.get("dockerfile"))
        .and_then(Yaml::str)
        .expect("scheduler.build.dockerfile");
    let image = Image::parse(&read(dockerfile));

    // The user: compose's `user:` over the image's USER.
    let user = scheduler
        .get("user")
        .and_then(Yaml::str)
        .map(|u| u.split(':').next().unwrap_or(u).to_string())
        .or_else(|| image.user.clone())
        .unwrap_or_else(|| "root".into());
    assert_ne!(
        user, "root",
        "{dockerfile}: the daemon should not run as root"
    );

    // The state dir: an OS_ override (compose's environment over the image's ENV),
    // else the configuration file's. The stack's nova.conf is written at run time by
    // the root-run stack service, so only an override can name a directory the image
    // prepares.
    const OVERRIDE: &str = "OS_NOVA_SCHEDULER_RS__STATE_DIR";
    let compose_env = scheduler
        .get("environment")
        .map(Yaml::pairs)
        .unwrap_or_default();
    let state_dir = compose_env
        .iter()
        .rev()
        .find(|(k, _)| k == OVERRIDE)
        .map(|(_, v)| v.clone())
        .or_else(|| image.env(OVERRIDE).map(str::to_string))
        .unwrap_or_else(|| {
            panic!(
                "docker-compose.yml: the scheduler's state_dir comes from the generated \
                 nova.conf (under the root-owned /stack volume); set {OVERRIDE}"
            )
        });
    let config = nova_scheduler::config::from_ini_str(&format!(
        "[nova_scheduler_rs]\nstate_dir = {state_dir}\n"
    ))
    .expect("the override is a valid state_dir");
    let state_dir = config.guards.state_dir.to_string_lossy().into_owned();

    // Made in the image for that user, writable by it.
    let (_, owner, mode) = image
        .dirs
        .iter()
        .rev()
        .find(|(d, _, _)| d.trim_end_matches('/') == state_dir.trim_end_matches('/'))
        .unwrap_or_else(|| panic!("{dockerfile} does not create {state_dir} for {user}"));
    assert_eq!(
        owner, &user,
        "{dockerfile}: {state_dir} is {owner}'s, the daemon runs as {user}"
    );
    if let Some(mode) = mode {
        let bits = u32::from_str_radix(mode, 8).unwrap_or_else(|e| panic!("mode {mode}: {e}"));
        assert_eq!(
            bits & 0o300,
            0o300,
            "{state_dir} mode {mode}: its owner cannot write in it"
        );
    }

    // Mounted so it keeps the image's owner and outlives the container: a named
    // volume at exactly that path (a new one is filled from the image, owner
    // included), or the image's anonymous VOLUME; never a bind mount or a mount
    // over a parent directory, which would bring their own owner.
    let named: BTreeSet<String> = compose
        .get("volumes")
        .map(|v| match v {
            Yaml::Map(entries) => entries.iter().map(|(k, _)| k.clone()).collect(),
            _ => BTreeSet::new(),
        })
        .unwrap_or_default();
    let mut kept = image.volumes.iter().any(|v| v == &state_dir);
    for volume in scheduler.get("volumes").map(Yaml::list).unwrap_or_default() {
        let spec = volume.str().expect("short volume syntax");
        let mut parts = spec.split(':');
        let (source, target) = (
            parts.next().unwrap_or_default(),
            parts.next().unwrap_or_default(),
        );
        let target = target.trim_end_matches('/');
        if target == state_dir {
            assert!(
                named.contains(source),
                "{spec}: {state_dir} must be a named volume"
            );
            assert!(parts.next() != Some("ro"), "{spec}: read-only");
            kept = true;
        } else {
            assert!(
                !state_dir.starts_with(&format!("{target}/")),
                "{spec} hides the image's {state_dir}"
            );
        }
    }
    assert!(kept, "{state_dir} is not a volume: the record of requests in flight would not survive a new container");
    // The unit and the image use the daemon's default, so operators find it there.
    assert_eq!(state_dir, default_state_dir());
}

/// Every sample name `/metrics` can show, from the daemon's own registry (each
/// family registered, samples or not).
fn registered_samples() -> BTreeSet<String> {
    let metrics = nova_scheduler::observe::metrics();
    let mut names = BTreeSet::new();
    for (name, kind) in metrics.families() {
        let suffixes: &[&str] = match kind {
            "counter" => &["_total"],
            "histogram" => &["_bucket", "_sum", "_count"],
            "info" => &["_info"],
            "gauge" => &[""],
            other => panic!("{name}: a {other} is not read here"),
        };
        names.extend(suffixes.iter().map(|s| format!("{name}{s}")));
    }
    // The samples encoded so far are among them (the suffixes above are the encoder's).
    let text = metrics.encode();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let sample = line.split(['{', ' ']).next().unwrap_or_default();
        assert!(
            names.contains(sample),
            "{sample} is not derived from its family"
        );
    }
    names
}

/// The metric names an expression uses: identifiers starting with the prefix.
fn metric_names(expr: &str) -> Vec<String> {
    let prefix = format!("{}_", nova_scheduler::observe::metrics::PREFIX);
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find(&prefix) {
        let before = rest[..at].chars().next_back();
        let tail = &rest[at..];
        let len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(tail.len());
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            out.push(tail[..len].to_string());
        }
        rest = &tail[len..];
    }
    out
}

/// Every `expr` string in a JSON document (Grafana's targets), and the template
/// variables' queries.
fn json_queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map {
                match (k.as_str(), x) {
                    ("expr" | "definition" | "query", serde_json::Value::String(s)) => {
                        out.push(s.clone())
                    }
                    _ => json_queries(x, out),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|x| json_queries(x, out)),
        _ => {}
    }
}

#[test]
fn alerts_and_dashboard_query_only_registered_metrics() {
    let registered = registered_samples();
    assert!(registered.contains("nova_scheduler_select_destinations_total"));
    assert!(registered.contains("nova_scheduler_build_info"));

    let rules = Yaml::parse(&read("packaging/prometheus/alerts.yml"));
    let mut alert_exprs = Vec::new();
    for group in rules.get("groups").map(Yaml::list).unwrap_or_default() {
        for rule in group.get("rules").map(Yaml::list).unwrap_or_default() {
            let name = rule.get("alert").and_then(Yaml::str).expect("alert: NAME");
            let expr = rule.get("expr").and_then(Yaml::str).expect("expr");
            alert_exprs.push((name.to_string(), expr.to_string()));
        }
    }
    assert!(alert_exprs.len() >= 8, "{alert_exprs:?}");

    let dashboard: serde_json::Value =
        serde_json::from_str(&read("packaging/grafana/nova-scheduler-rs.json"))
            .expect("the dashboard is JSON");
    let mut queries = Vec::new();
    json_queries(&dashboard, &mut queries);
    assert!(queries.len() >= 10, "{queries:?}");

    let mut used = BTreeSet::new();
    let mut unknown = Vec::new();
    let sources = alert_exprs
        .iter()
        .map(|(name, expr)| (format!("alerts.yml {name}"), expr.clone()))
        .chain(
            queries
                .iter()
                .map(|q| ("the dashboard".to_string(), q.clone())),
        );
    for (source, expr) in sources {
        for name in metric_names(&expr) {
            if !registered.contains(&name) {
                unknown.push(format!("{source}: {name}"));
            }
            used.insert(name);
        }
    }
    assert!(
        unknown.is_empty(),
        "not registered by the daemon: {unknown:#?}"
    );
    // The alerts cover what an operator pages on.
    for needed in [
        "nova_scheduler_rpc_consuming",
        "nova_scheduler_select_destinations_total",
        "nova_scheduler_placement_requests_total",
        "nova_scheduler_claims_total",
        "nova_scheduler_host_state_cache_last_pass_timestamp_seconds",
        "nova_scheduler_placement_index_last_refresh_timestamp_seconds",
        "nova_scheduler_rpc_redeliveries_total",
    ] {
        assert!(
            alert_exprs
                .iter()
                .any(|(_, e)| metric_names(e).iter().any(|n| n == needed)),
            "no alert on {needed}"
        );
    }
    // Every family is on the dashboard.
    let family = |n: &str| {
        ["_total", "_bucket", "_sum", "_count", "_info"]
            .iter()
            .find_map(|s| n.strip_suffix(s))
            .unwrap_or(n)
            .to_string()
    };
    let families: BTreeSet<String> = registered.iter().map(|n| family(n.as_str())).collect();
    let shown: BTreeSet<String> = queries
        .iter()
        .flat_map(|q| metric_names(q.as_str()))
        .map(|n| family(&n))
        .collect();
    let missing: Vec<_> = families.difference(&shown).collect();
    assert!(missing.is_empty(), "not on the dashboard: {missing:?}");
}

#[test]
fn the_debian_package_ships_the_alerts_and_the_dashboard() {
    let manifest = read("Cargo.toml");
    for file in [
        "packaging/prometheus/alerts.yml",
        "packaging/grafana/nova-scheduler-rs.json",
    ] {
        assert!(
            manifest.contains(&format!("[\"{file}\", ")),
            "Cargo.toml's [package.metadata.deb] assets lack {file}"
        );
    }
}
