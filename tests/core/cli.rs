// SPDX-License-Identifier: Apache-2.0
//! The command line of the real binary: help and version read no configuration and
//! start nothing, a bad command line exits 64 with one usage text, `config check`
//! reports every bad value, `config sample` is the committed sample.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The binary with a scratch `HOME` (no `~/.nova`) and no `OS_*` overrides.
fn run(args: &[&str], home: &Path) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_nova-scheduler-rs"));
    cmd.args(args).env("HOME", home);
    for (name, _) in std::env::vars().filter(|(n, _)| n.starts_with("OS_")) {
        cmd.env_remove(name);
    }
    cmd.output().expect("run nova-scheduler-rs")
}

struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("nsrs-cli-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("empty.d")).unwrap();
        Scratch(dir)
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).unwrap();
        path.to_string_lossy().into_owned()
    }

    fn empty_dir(&self) -> String {
        self.0.join("empty.d").to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn help_and_version_exit_0_without_reading_the_configuration() {
    let home = Scratch::new("help");
    // A ~/.nova/nova.conf that would not load: help must not read it.
    std::fs::create_dir_all(home.0.join(".nova")).unwrap();
    home.write(".nova/nova.conf", "[scheduler]\nmax_attempts = zero\n");
    for args in [
        &["--help"][..],
        &["run", "--help"],
        &["simulate", "--help"],
        &["config", "check", "--help"],
        &["config", "sample", "--help"],
        &["capacity", "--help"],
        &["snapshot", "--help"],
        &["replay", "--help"],
        &["explain", "--help"],
        &["--config-file", "/nonexistent", "run", "--help"],
        &["run", "--help", "--config-file", "/nonexistent"],
        &["config", "check", "--config-file", "/nonexistent", "-h"],
    ] {
        let out = run(args, &home.0);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(
            stdout.contains("Usage: nova-scheduler-rs"),
            "{args:?}: {stdout}"
        );
        assert!(out.stderr.is_empty(), "{args:?}: {}", text(&out.stderr));
    }
    let out = run(&["simulate", "--help"], &home.0);
    for flag in [
        "--hosts",
        "--requests",
        "--instances",
        "--seed",
        "--config-file",
    ] {
        assert!(text(&out.stdout).contains(flag), "{flag}");
    }
    let version = format!("nova-scheduler-rs {} (commit ", env!("CARGO_PKG_VERSION"));
    for args in [
        &["--version"][..],
        &["-V"],
        &["--config-file", "/nonexistent", "-V"],
    ] {
        let out = run(args, &home.0);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {out:?}");
        assert!(stdout.starts_with(&version), "{stdout}");
        assert!(
            stdout
                .trim_end()
                .ends_with(", nova 34.x compatible / RPC 4.0\u{2013}4.5)"),
            "{stdout}"
        );
    }
}

#[test]
fn a_bad_command_line_exits_64_with_the_usage_once() {
    let home = Scratch::new("usage");
    for (args, usage) in [
        (&["--bogus"][..], 1),
        (&["run", "--bogus"], 1),
        (&["config", "check", "--frobnicate"], 1),
        (&["serve"], 1),
        // explain names exactly one decision, or --recent: never the list by default.
        (&["explain", "--json", "--url", "http://127.0.0.1:1"], 1),
        (&["explain", "--instance", "u1", "--recent"], 1),
        // A bad or missing value: clap names it and points to --help.
        (&["simulate", "--hosts", "many"], 0),
        (&["config", "check", "--log-file"], 0),
    ] {
        let out = run(args, &home.0);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(64), "{args:?}: {out:?}");
        assert_eq!(
            stderr.matches("Usage:").count(),
            usage,
            "{args:?}: {stderr}"
        );
        assert_eq!(stderr.matches("error:").count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn config_check_reports_every_bad_value_and_starts_nothing() {
    let dir = Scratch::new("check");
    let good = dir.write(
        "good.conf",
        &format!(
            "[DEFAULT]\ntransport_url = rabbit://nova:secret@127.0.0.1:1/\n\
             [database]\nmax_pool_size = 5\n\
             connection = mysql+pymysql://nova:secret@127.0.0.1:1/nova_cell0\n\
             [api_database]\nconnection = mysql+pymysql://nova:secret@127.0.0.1:1/nova_api\n\
             [nova_scheduler_rs]\nstate_dir = {}\n\
             [placement]\nendpoint_override = http://127.0.0.1:1\n",
            dir.0.join("state").display()
        ),
    );
    let extra = dir.write("extra.conf", "[scheduler]\nmax_attempts = 2\n");
    let empty = dir.empty_dir();
    let out = run(
        &[
            "config",
            "check",
            "--config-file",
            &good,
            "--config-dir",
            &empty,
            "--config-file",
            &extra,
        ],
        &dir.0,
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        stdout.contains(&format!("configuration OK: 2 files read ({good}, {extra})")),
        "{stdout}"
    );
    assert!(
        stdout.contains("warning: option [database] max_pool_size is accepted but not honoured"),
        "{stdout}"
    );
    assert!(!stdout.contains("secret"), "{stdout}");

    let bad = dir.write(
        "bad.conf",
        "[scheduler]\nmax_attempts = zero\n[filter_scheduler]\nhost_subset_size = 0\n",
    );
    // Global options after the subcommand words count as well.
    let out = run(
        &[
            "config",
            "check",
            "--config-file",
            &bad,
            "--config-dir",
            &empty,
        ],
        &dir.0,
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(stderr.contains("[scheduler] max_attempts"), "{stderr}");
    assert!(
        stderr.contains("[filter_scheduler] host_subset_size"),
        "{stderr}"
    );
    assert!(!text(&out.stdout).contains("configuration OK"));

    let out = run(
        &["config", "check", "--config-file", "/nonexistent"],
        &dir.0,
    );
    // Nothing read at all.
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(text(&out.stderr).contains("/nonexistent"));
}

#[test]
fn config_sample_is_the_committed_sample() {
    let home = Scratch::new("sample");
    let out = run(&["config", "sample"], &home.0);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let committed = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/nova.conf.sample"),
    )
    .unwrap();
    assert!(
        text(&out.stdout) == committed,
        "config/nova.conf.sample is not current: run \
         `nova-scheduler-rs config sample > config/nova.conf.sample`"
    );
}
