// SPDX-License-Identifier: Apache-2.0
//! A CA, server and client certificates made with the `openssl` CLI for the tests of TLS
//! listeners (the private RabbitMQ node, the private MariaDB server).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Certificates made with the `openssl` CLI for a TLS listener.
#[derive(Clone, Debug)]
pub struct TestPki {
    /// The CA that signed the server and client certificates.
    pub ca: PathBuf,
    /// Another self-signed CA (signed nothing here).
    pub wrong_ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// A client certificate signed by `ca`, and its PKCS#8 key.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the openssl CLI ({e}); is openssl installed?"));
    assert!(
        out.status.success(),
        "openssl {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl TestPki {
    /// A CA, a server certificate for `localhost` / `127.0.0.1`, a client certificate, and
    /// an unrelated CA, in `dir`.
    pub fn generate(dir: &Path) -> TestPki {
        std::fs::create_dir_all(dir).unwrap();
        let self_signed = |key: &str, cert: &str, cn: &str| {
            openssl(
                dir,
                &[
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "2", "-subj", cn,
                ],
            )
        };
        self_signed("ca.key", "ca.pem", "/CN=nsrs test CA");
        self_signed("wrong-ca.key", "wrong-ca.pem", "/CN=nsrs wrong CA");
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").unwrap();
        for (name, cn) in [("server", "/CN=localhost"), ("client", "/CN=nsrs-client")] {
            let key = format!("{name}.key");
            let csr = format!("{name}.csr");
            let pem = format!("{name}.pem");
            let ext = format!("{name}.ext");
            openssl(
                dir,
                &[
                    "req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj",
                    cn,
                ],
            );
            openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &csr,
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-out",
                    &pem,
                    "-days",
                    "2",
                    "-extfile",
                    &ext,
                ],
            );
        }
        TestPki {
            ca: dir.join("ca.pem"),
            wrong_ca: dir.join("wrong-ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
        }
    }
}
