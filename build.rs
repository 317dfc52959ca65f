// SPDX-License-Identifier: Apache-2.0
//! Build script: the short git commit for `--version` (`NSRS_GIT_COMMIT`, "unknown"
//! outside a git checkout or without git). A non-empty `NSRS_GIT_COMMIT` in the build's
//! environment is taken as it is: a container build has no `.git` to read.
//!
//! It reruns only when the commit can have changed: when `HEAD` moves or the branch it
//! names gets a new commit. Every file named in `rerun-if-changed` exists (cargo
//! reruns a script on every build when one is missing).

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=NSRS_GIT_COMMIT");
    if let Some(given) = std::env::var("NSRS_GIT_COMMIT")
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
    {
        // It ends up in `--version` and a metric label: a commit id, not any text.
        let ok = given.len() <= 48
            && given
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-');
        assert!(ok, "NSRS_GIT_COMMIT={given:?} is not a git commit id");
        println!("cargo:rustc-env=NSRS_GIT_COMMIT={given}");
        return;
    }
    let commit = git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=NSRS_GIT_COMMIT={commit}");
    if commit == "unknown" {
        return;
    }
    // `--git-path` resolves worktrees (HEAD in the worktree's dir, refs in the common dir).
    let mut watched = vec![git(&["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git(&["rev-parse", "--git-path", &branch]));
        watched.push(git(&["rev-parse", "--git-path", "packed-refs"]));
    }
    for path in watched.into_iter().flatten() {
        if Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
