// SPDX-License-Identifier: Apache-2.0
//! Finds the Python virtualenv holding nova 34 and openstack-placement 16 (the real
//! peers the integration tests run against). Never a silent pass: no venv, no test.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Tools a usable venv has.
const TOOLS: [&str; 4] = ["python", "nova-manage", "placement-manage", "gunicorn"];

/// `$NSRS_VENV`, else the newest complete `venv-*` under `$NSRS_CACHE` (default
/// `~/.cache/nova-scheduler-rs`, where `scripts/stack.sh venv` builds it and marks it
/// complete). Panics with a clear message if none is usable.
pub fn find() -> PathBuf {
    if let Some(dir) = std::env::var_os("NSRS_VENV") {
        let dir = PathBuf::from(dir);
        if let Some(missing) = missing_tool(&dir) {
            panic!(
                "NSRS_VENV={} has no bin/{missing}; install nova==34.0.0, \
                 openstack-placement==16.0.0, pymysql and gunicorn into it",
                dir.display()
            );
        }
        return dir;
    }
    let cache = std::env::var_os("NSRS_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/nova-scheduler-rs"))
        });
    let mut candidates: Vec<PathBuf> = cache
        .and_then(|c| std::fs::read_dir(c).ok())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("venv-"))
        })
        .collect();
    candidates.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    candidates.reverse();
    candidates
        .into_iter()
        // A venv still being built by `stack.sh venv` has no completion marker yet.
        .find(|p| p.join(".nsrs-complete").is_file() && missing_tool(p).is_none())
        .unwrap_or_else(|| {
            panic!(
                "no Python venv with nova 34 and placement 16 found: set NSRS_VENV, or run \
                 `scripts/stack.sh venv` (it builds one under $NSRS_CACHE); this test needs \
                 nova-manage, placement-manage and gunicorn from it"
            )
        })
}

fn missing_tool(dir: &Path) -> Option<&'static str> {
    TOOLS
        .into_iter()
        .find(|t| !dir.join("bin").join(t).is_file())
}

/// A shell script in `dir` that runs `venv`'s python with the operator's test
/// classes (`tests/plugins`) on its path, as an operator's environment has them
/// installed: what `[nova_scheduler_rs] python` names in the plugin tests.
pub fn with_operator_plugins(dir: &Path, venv: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("python");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nPYTHONPATH={}/tests/plugins exec {} \"$@\"\n",
            env!("CARGO_MANIFEST_DIR"),
            venv.join("bin/python").display()
        ),
    )
    .expect("write the interpreter script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}
