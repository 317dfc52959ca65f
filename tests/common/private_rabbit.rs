// SPDX-License-Identifier: Apache-2.0
//! A private RabbitMQ node for tests that must restart the broker or change its listeners
//! (the shared one on 127.0.0.1:5672 is never touched).
//!
//! The node runs as the current user from RabbitMQ's own `bin/` scripts (not the
//! `/usr/sbin` wrappers, which switch to the `rabbitmq` user), with everything in a
//! temporary directory: config, mnesia, logs, and `HOME`, whose `.erlang.cookie` is
//! written before the node starts so that `rabbitmqctl` (same `HOME`) authenticates.
//! It registers with the machine's running epmd under a unique name. Ports are free
//! ephemeral ones; a start that fails (e.g. a port taken meanwhile) is retried with new
//! ones. The node is stopped (`rabbitmqctl stop`, then the process killed) on drop.
#![allow(dead_code)]

#[path = "test_pki.rs"]
mod test_pki;
pub use test_pki::TestPki;

use std::io::Write as _;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const RABBIT_BIN: &str = "/usr/lib/rabbitmq/bin";
const BOOT_LIMIT: Duration = Duration::from_secs(60);

/// A running private node.
pub struct PrivateRabbit {
    pub node: String,
    pub dir: PathBuf,
    /// Plain AMQP listener on 127.0.0.1.
    pub amqp_port: u16,
    /// TLS listener on 127.0.0.1 (with [`PrivateRabbit::start_tls`]).
    pub amqps_port: Option<u16>,
    pub pki: Option<TestPki>,
    home: PathBuf,
    child: Option<Child>,
    /// False for a start attempt that failed: the next attempt boots from the same
    /// directory (cookie, PKI, env file), so dropping this one must not remove it.
    owns_dir: bool,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl PrivateRabbit {
    /// A node with a plain listener.
    pub fn start(tag: &str) -> PrivateRabbit {
        Self::start_with(tag, false)
    }

    /// A node with a plain listener and a TLS listener that requires a client certificate
    /// signed by the generated CA.
    pub fn start_tls(tag: &str) -> PrivateRabbit {
        Self::start_with(tag, true)
    }

    fn start_with(tag: &str, tls: bool) -> PrivateRabbit {
        let node = format!("nsrs-{tag}-{}@localhost", std::process::id());
        let dir = std::env::temp_dir().join(format!(
            "nsrs-rabbit-{tag}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let home = dir.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let cookie = home.join(".erlang.cookie");
        let mut f = std::fs::File::create(&cookie).unwrap();
        f.write_all(
            uuid::Uuid::new_v4()
                .simple()
                .to_string()
                .to_uppercase()
                .as_bytes(),
        )
        .unwrap();
        drop(f);
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cookie, std::fs::Permissions::from_mode(0o400)).unwrap();
        std::fs::write(dir.join("enabled_plugins"), "[].\n").unwrap();
        std::fs::write(dir.join("rabbitmq-env.conf"), "").unwrap();
        let pki = tls.then(|| TestPki::generate(&dir.join("pki")));

        let mut last_error = String::new();
        for _attempt in 0..3 {
            let mut r = PrivateRabbit {
                node: node.clone(),
                dir: dir.clone(),
                amqp_port: free_port(),
                amqps_port: tls.then(free_port),
                pki: pki.clone(),
                home: home.clone(),
                child: None,
                owns_dir: true,
            };
            match r.boot() {
                Ok(()) => return r,
                Err(e) => {
                    last_error = e;
                    r.kill();
                    r.owns_dir = false;
                }
            }
        }
        panic!("the private RabbitMQ node {node} did not start: {last_error}");
    }

    fn write_config(&self) -> PathBuf {
        let mut conf = format!(
            "listeners.tcp.default = 127.0.0.1:{}\nloopback_users = none\n",
            self.amqp_port
        );
        if let (Some(port), Some(pki)) = (self.amqps_port, &self.pki) {
            conf.push_str(&format!(
                "listeners.ssl.default = 127.0.0.1:{port}\n\
                 ssl_options.cacertfile = {}\n\
                 ssl_options.certfile = {}\n\
                 ssl_options.keyfile = {}\n\
                 ssl_options.verify = verify_peer\n\
                 ssl_options.fail_if_no_peer_cert = true\n",
                pki.ca.display(),
                pki.server_cert.display(),
                pki.server_key.display()
            ));
        }
        let path = self.dir.join("rabbitmq.conf");
        std::fs::write(&path, conf).unwrap();
        path
    }

    fn boot(&mut self) -> Result<(), String> {
        let conf = self.write_config();
        let _ = std::fs::remove_dir_all(self.dir.join("mnesia"));
        std::fs::create_dir_all(self.dir.join("mnesia")).unwrap();
        std::fs::create_dir_all(self.dir.join("log")).unwrap();
        let out = std::fs::File::create(self.dir.join("server.out")).unwrap();
        let child = Command::new(format!("{RABBIT_BIN}/rabbitmq-server"))
            .env("HOME", &self.home)
            .env("RABBITMQ_CONF_ENV_FILE", self.dir.join("rabbitmq-env.conf"))
            .env("RABBITMQ_NODENAME", &self.node)
            .env("RABBITMQ_DIST_PORT", free_port().to_string())
            .env("RABBITMQ_CONFIG_FILE", conf.with_extension(""))
            .env("RABBITMQ_MNESIA_BASE", self.dir.join("mnesia"))
            .env("RABBITMQ_LOG_BASE", self.dir.join("log"))
            .env(
                "RABBITMQ_ENABLED_PLUGINS_FILE",
                self.dir.join("enabled_plugins"),
            )
            .env("RABBITMQ_PID_FILE", self.dir.join("rabbit.pid"))
            .env_remove("RABBITMQ_NODE_PORT")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .map_err(|e| format!("cannot run {RABBIT_BIN}/rabbitmq-server: {e}"))?;
        self.child = Some(child);
        self.await_running()
    }

    /// Waits until the RabbitMQ application runs (after start or `start_app`).
    pub fn await_running(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + BOOT_LIMIT;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!(
                        "rabbitmq-server exited ({status}): {}",
                        self.server_out_tail()
                    ));
                }
            }
            let out = self.ctl(&["await_startup", "--timeout", "10"]);
            if out.status.success() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "not running after {BOOT_LIMIT:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    fn server_out_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("server.out")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// `rabbitmqctl -n <node> <args>` with this node's cookie.
    pub fn ctl(&self, args: &[&str]) -> Output {
        Command::new(format!("{RABBIT_BIN}/rabbitmqctl"))
            .env("HOME", &self.home)
            .env("RABBITMQ_CONF_ENV_FILE", self.dir.join("rabbitmq-env.conf"))
            .arg("-n")
            .arg(&self.node)
            .args(args)
            .output()
            .expect("rabbitmqctl")
    }

    fn ctl_ok(&self, args: &[&str]) {
        let out = self.ctl(args);
        assert!(
            out.status.success(),
            "rabbitmqctl {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stops the RabbitMQ application (connections are closed, the Erlang node stays).
    pub fn stop_app(&self) {
        self.ctl_ok(&["stop_app"]);
    }

    /// Starts the application again and waits until it runs.
    pub fn start_app(&mut self) {
        self.ctl_ok(&["start_app"]);
        self.await_running().expect("start_app");
    }

    /// `guest:guest` URI of the plain listener.
    pub fn amqp_url(&self) -> String {
        format!("amqp://guest:guest@127.0.0.1:{}/%2f", self.amqp_port)
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = self.ctl(&["stop"]);
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            // Only the process this helper started, by its id.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for PrivateRabbit {
    fn drop(&mut self) {
        self.kill();
        if self.owns_dir && !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
