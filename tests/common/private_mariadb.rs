// SPDX-License-Identifier: Apache-2.0
//! A private MariaDB server with TLS for the tests of TLS to the databases (the shared
//! one on 127.0.0.1:3306 is never touched).
//!
//! `mariadb-install-db` makes a fresh data directory in a temporary directory (root
//! authenticates with its (empty) password, grants are real), and `mariadbd` serves it
//! as the current user with the test's certificates ([`TestPki`]),
//! `require_secure_transport=ON`, a unix socket in the same directory and a free port
//! on 127.0.0.1 and 127.0.0.2 (the server certificate names 127.0.0.1 only, so
//! 127.0.0.2 shows host name checks). A start that fails (e.g. a port taken meanwhile)
//! is retried with a new port. On drop the server gets SIGTERM, then SIGKILL if it has
//! not stopped after 20 s, and the directory is removed; the error log is printed first
//! when the test panicked.
#![allow(dead_code)]

#[path = "test_pki.rs"]
mod test_pki;
pub use test_pki::TestPki;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BOOT_LIMIT: Duration = Duration::from_secs(60);
const STOP_LIMIT: Duration = Duration::from_secs(20);

/// A running private server.
pub struct PrivateMariaDb {
    pub dir: PathBuf,
    pub port: u16,
    pub socket: PathBuf,
    pub pki: TestPki,
    /// The client certificate and its key in one PEM file.
    pub client_cert_and_key: PathBuf,
    child: Option<Child>,
}

/// `name` on `PATH` or in the sbin directories Debian installs servers to; panics with a
/// clear message when it is missing.
pub fn find_binary(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/local/sbin", "/usr/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "{name} not found on PATH or in /usr/sbin: the TLS tests need MariaDB's server \
                 and client programs (Debian: mariadb-server)"
            )
        })
}

fn free_port() -> u16 {
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if TcpListener::bind(("127.0.0.2", port)).is_ok() {
            return port;
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl PrivateMariaDb {
    /// A server with TLS and `require_secure_transport=ON`.
    pub fn start_tls(tag: &str) -> PrivateMariaDb {
        let mariadbd = find_binary("mariadbd");
        let install_db = find_binary("mariadb-install-db");
        let dir = std::env::temp_dir().join(format!(
            "nsrs-mariadb-{tag}-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let mut db = PrivateMariaDb {
            socket: dir.join("mysqld.sock"),
            pki: TestPki::generate(&dir.join("pki")),
            client_cert_and_key: dir.join("pki/client-with-key.pem"),
            dir,
            port: 0,
            child: None,
        };
        let mut both = std::fs::read(&db.pki.client_cert).unwrap();
        both.extend(std::fs::read(&db.pki.client_key).unwrap());
        std::fs::write(&db.client_cert_and_key, both).unwrap();

        let mut install = Command::new(&install_db);
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", db.dir.join("data").display()))
            .arg("--auth-root-authentication-method=normal")
            .arg("--skip-test-db")
            .arg("--innodb-log-file-size=16M");
        if is_root() {
            install.arg("--user=root");
        }
        let out = install
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", install_db.display()));
        assert!(
            out.status.success(),
            "{} failed:\n{}\n{}",
            install_db.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );

        let mut last_error = String::new();
        for _attempt in 0..3 {
            db.port = free_port();
            match db.boot(&mariadbd) {
                Ok(()) => return db,
                Err(e) => {
                    last_error = e;
                    db.stop();
                }
            }
        }
        panic!(
            "the private MariaDB server in {} did not start: {last_error}",
            db.dir.display()
        );
    }

    fn boot(&mut self, mariadbd: &Path) -> Result<(), String> {
        let log = self.dir.join("error.log");
        let _ = std::fs::remove_file(&log);
        let pki = &self.pki;
        let mut cmd = Command::new(mariadbd);
        cmd.arg("--no-defaults")
            .arg(format!("--datadir={}", self.dir.join("data").display()))
            .arg(format!("--socket={}", self.socket.display()))
            .arg(format!(
                "--pid-file={}",
                self.dir.join("mariadbd.pid").display()
            ))
            .arg(format!("--log-error={}", log.display()))
            .arg(format!("--tmpdir={}", self.dir.display()))
            .arg(format!("--port={}", self.port))
            .arg("--bind-address=127.0.0.1,127.0.0.2")
            .arg("--skip-name-resolve")
            .arg(format!("--ssl-ca={}", pki.ca.display()))
            .arg(format!("--ssl-cert={}", pki.server_cert.display()))
            .arg(format!("--ssl-key={}", pki.server_key.display()))
            .arg("--require-secure-transport=ON")
            .arg("--innodb-buffer-pool-size=32M")
            .arg("--innodb-log-file-size=16M")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if is_root() {
            cmd.arg("--user=root");
        }
        self.child = Some(
            cmd.spawn()
                .map_err(|e| format!("cannot run {}: {e}", mariadbd.display()))?,
        );
        let deadline = Instant::now() + BOOT_LIMIT;
        loop {
            if let Some(Ok(Some(status))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                return Err(format!("mariadbd exited ({status}):\n{}", self.log_tail()));
            }
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if text.contains("ready for connections") && self.socket.exists() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "not ready after {BOOT_LIMIT:?}:\n{}",
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The last lines of the server's error log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// sqlx URL for root over the unix socket (a secure transport for
    /// `require_secure_transport`), for setting the server up.
    pub fn root_socket_url(&self) -> String {
        format!(
            "mysql://root@localhost?socket={}&ssl-mode=DISABLED",
            self.socket.display()
        )
    }

    /// SIGTERM to the server this helper started (by its id), SIGKILL after [`STOP_LIMIT`].
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: kill(2) on the id of our own child process, not yet reaped.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + STOP_LIMIT;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for PrivateMariaDb {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "--- error log of the private MariaDB server ({}):\n{}",
                self.dir.display(),
                self.log_tail()
            );
        }
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
