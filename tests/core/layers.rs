// SPDX-License-Identifier: Apache-2.0
//! The house's layers as tests, read from the source: the decision core imports no
//! edge, and the layout lists of `src/lib.rs` and `docs/architecture.md` name every
//! module and file under `src/`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The pure core: host states in, decisions out.
const CORE: &[&str] = &[
    "model",
    "py",
    "numa",
    "pci",
    "hardware",
    "host_fit",
    "filters",
    "weighers",
    "scheduler",
    "release",
];

/// What does I/O, or holds the process's state, or serves the operator.
const EDGES: &[&str] = &[
    "rpc",
    "state",
    "placement",
    "manager",
    "app",
    "config",
    "observe",
    "telemetry",
    "notifications",
    "recording",
    "plugins",
    "tools",
    "simulate",
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file of top-level module `module` (its `module.rs` and its folder).
fn files_of(module: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let file = src().join(format!("{module}.rs"));
    if file.is_file() {
        files.push(file);
    }
    let mut dirs = vec![src().join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The crate's top-level modules a file names through `crate::` (in code, not in
/// comments), with the line.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                // `use crate::{a, b::c}`: the group may run over several lines.
                let start = text.lines().skip(n).collect::<Vec<_>>().join("\n");
                let from = start.find("crate::{").map_or(0, |i| i + "crate::{".len());
                let body = &start[from..];
                let body = &body[..body.find('}').unwrap_or(body.len())];
                for item in body.split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !name.is_empty() {
                        found.push((n + 1, name));
                    }
                }
                rest = group;
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push((n + 1, name));
            }
        }
    }
    found
}

#[test]
fn the_core_imports_no_edge() {
    let mut wrong = Vec::new();
    let mut read = 0;
    for module in CORE {
        for file in files_of(module) {
            let text = std::fs::read_to_string(&file).expect("source file");
            read += 1;
            for (line, name) in crate_paths(&text) {
                if EDGES.contains(&name.as_str()) {
                    wrong.push(format!(
                        "{}:{line} names crate::{name}",
                        file.strip_prefix(src()).unwrap_or(&file).display()
                    ));
                }
            }
        }
    }
    assert!(read > 50, "only {read} core files found under {:?}", src());
    assert!(
        wrong.is_empty(),
        "the core reaches the edges:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn an_import_from_an_edge_is_seen() {
    let text = "use crate::model::HostState;\n// crate::config in a comment\nuse crate::{py, observe::metrics};\nlet x = crate::config::scheduler::X;\n";
    let names: Vec<String> = crate_paths(text).into_iter().map(|(_, n)| n).collect();
    assert_eq!(names, ["model", "py", "observe", "config"]);
}

/// The top-level modules `src/lib.rs` declares.
fn top_level_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    lib.lines()
        .filter_map(|l| l.trim().strip_prefix("pub mod "))
        .map(|m| m.trim_end_matches(';').to_string())
        .collect()
}

#[test]
fn lib_rs_and_the_architecture_name_every_module() {
    let modules = top_level_modules();
    assert!(modules.len() > 15, "{modules:?}");
    let lib = std::fs::read_to_string(src().join("lib.rs")).expect("lib.rs");
    let lib_doc: String = lib
        .lines()
        .filter(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join("\n");
    let architecture = std::fs::read_to_string(src().join("../docs/architecture.md"))
        .expect("docs/architecture.md");
    let layout = layout_block(&architecture);
    let mut missing = Vec::new();
    for m in &modules {
        if !lib_doc.contains(&format!("[`{m}`]")) {
            missing.push(format!("src/lib.rs's layout does not name [`{m}`]"));
        }
        if !layout
            .lines()
            .any(|l| l.starts_with(&format!("src/{m}.rs")) || l.starts_with(&format!("src/{m}/")))
        {
            missing.push(format!(
                "docs/architecture.md's layout has no line for src/{m}"
            ));
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The ```text block under `### Layout`.
fn layout_block(architecture: &str) -> String {
    let from = architecture
        .find("### Layout")
        .expect("a ### Layout section");
    let rest = &architecture[from..];
    let start = rest.find("```text\n").expect("a text block") + "```text\n".len();
    let end = rest[start..].find("```").expect("the block's end");
    rest[start..start + end].to_string()
}

#[test]
fn the_architecture_layout_names_every_source_file() {
    let architecture = std::fs::read_to_string(src().join("../docs/architecture.md"))
        .expect("docs/architecture.md");
    let layout = layout_block(&architecture);
    let mut missing = Vec::new();
    for module in top_level_modules() {
        let lines: Vec<&str> = layout
            .lines()
            .filter(|l| {
                l.starts_with(&format!("src/{module}.rs"))
                    || l.starts_with(&format!("src/{module}/"))
            })
            .collect();
        let line = lines.join("\n");
        // "one filter per file": a file registered under nova's class name.
        let one_per_file = line.contains(" per file");
        let dir = src().join(&module);
        for file in files_of(&module) {
            let Ok(inside) = file.strip_prefix(&dir) else {
                continue; // the module's own `module.rs`
            };
            let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
            // Unit tests and a folder's own module file are not part of the map.
            if name.ends_with("tests.rs") || name == "mod.rs" || inside.starts_with("tests") {
                continue;
            }
            if one_per_file {
                let text = std::fs::read_to_string(&file).expect("source file");
                if text.contains("const NAME: &") {
                    continue;
                }
            }
            if !names_file(&line, name) {
                missing.push(format!("src/{module}/{}", inside.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/architecture.md's layout does not name:\n{}",
        missing.join("\n")
    );
}

/// Whether `line` names `file` as a word (`cell.rs`, not the end of `cells.rs`'s
/// neighbour `subcell.rs`).
fn names_file(line: &str, file: &str) -> bool {
    line.match_indices(file).any(|(at, _)| {
        !line[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}
