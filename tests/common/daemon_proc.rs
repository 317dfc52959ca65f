// SPDX-License-Identifier: Apache-2.0
//! What the end-to-end tests that run the daemon binary share: a RabbitMQ vhost of
//! their own, a few hosts seeded by `scripts/seed_cloud.py`, the daemon as a child
//! process, and nova's Python client run against it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `rabbitmqctl`; "already exists" counts as success. Returns its stdout.
pub fn rabbitmqctl(args: &[&str]) -> String {
    let out = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .expect("rabbitmqctl");
    assert!(
        out.status.success() || String::from_utf8_lossy(&out.stderr).contains("already"),
        "rabbitmqctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Creates `vhost` for guest; returns the transport url that names it.
pub fn own_vhost(vhost: &str) -> String {
    rabbitmqctl(&["add_vhost", vhost]);
    rabbitmqctl(&["set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"]);
    format!("rabbit://guest:guest@127.0.0.1:5672/{vhost}")
}

/// `nova.conf` of a schema made by `nova_schema::create`, pointed at `transport`.
pub fn nova_conf_on(dir: &Path, transport: &str) -> String {
    let base = std::fs::read_to_string(dir.join("nova.conf")).expect("nova.conf");
    base.replace(
        "transport_url = rabbit://guest:guest@127.0.0.1:5672/",
        &format!("transport_url = {transport}"),
    )
}

/// The `[placement]` section for the test Placement (admin token auth).
pub fn placement_section(url: &str) -> String {
    format!(
        "\n[placement]\nauth_type = admin_token\ntoken = admin\n\
         endpoint = {url}\nendpoint_override = {url}\n"
    )
}

/// Seeds `hosts` compute hosts in one cell (none big, none disabled) with
/// `scripts/seed_cloud.py` reading `conf`; its state files go to `dir`.
pub fn seed_cloud(venv: &Path, conf: &Path, dir: &Path, hosts: u32, seed: u32) {
    seed_cloud_with(venv, conf, dir, hosts, seed, &[]);
}

/// [`seed_cloud`] with more of `seed_cloud.py`'s options (`--nested`, ...).
pub fn seed_cloud_with(
    venv: &Path,
    conf: &Path,
    dir: &Path,
    hosts: u32,
    seed: u32,
    extra: &[&str],
) {
    let out = Command::new(venv.join("bin/python"))
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/scripts/seed_cloud.py"
        ))
        .args(["--config-file", &conf.to_string_lossy()])
        .args(["--state-dir", &dir.to_string_lossy()])
        .args([
            "--hosts",
            &hosts.to_string(),
            "--cells",
            "1",
            "--big-hosts",
            "0",
        ])
        .args(["--disabled-hosts", "0", "--seed", &seed.to_string()])
        .args(extra)
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .output()
        .expect("seed_cloud.py");
    assert!(
        out.status.success(),
        "seeding failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a Python `script` with nova's client set up: `argv[1]` is `client_conf`,
/// `argv[2]` the conformance helpers' folder, then `args`.
pub fn nova_client(venv: &Path, script: &str, client_conf: &Path, args: &[String]) -> Output {
    Command::new(venv.join("bin/python"))
        .arg("-c")
        .arg(script)
        .arg(client_conf)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/conformance"))
        .args(args)
        .env("OS_NOVA_DISABLE_EVENTLET_PATCHING", "true")
        .output()
        .expect("python client")
}

/// The daemon binary as a child process logging to a file; killed on drop if
/// still running.
pub struct Daemon {
    pub child: Child,
    pub log: PathBuf,
}

impl Daemon {
    /// Starts the daemon on `conf` with its own default log filter (`RUST_LOG`
    /// unset) and the extra `env`. Unless `conf` or `env` names a `state_dir`, the
    /// daemon keeps its record of requests in flight in `state` beside its log, never
    /// in the system's default directory.
    pub fn start(conf: &Path, log: PathBuf, env: &[(&str, &str)]) -> Daemon {
        let file = std::fs::File::create(&log).expect("log file");
        let names_state_dir = std::fs::read_to_string(conf)
            .unwrap_or_default()
            .contains("state_dir")
            || env.iter().any(|(k, _)| k.ends_with("__STATE_DIR"));
        let state_dir = log
            .parent()
            .expect("a log file in a directory")
            .join("state");
        let mut command = Command::new(env!("CARGO_BIN_EXE_nova-scheduler-rs"));
        if !names_state_dir {
            command.env("OS_NOVA_SCHEDULER_RS__STATE_DIR", &state_dir);
        }
        let child = command
            .arg("--config-file")
            .arg(conf)
            .env_remove("RUST_LOG")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("log file"))
            .stderr(file)
            .spawn()
            .expect("start the daemon");
        Daemon { child, log }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (60 s at most) for "scheduler ready"; returns the log so far.
    pub fn wait_ready(&self) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = self.log_text();
            if text.contains("scheduler ready") {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "daemon not ready in 60 s:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
