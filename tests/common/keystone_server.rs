// SPDX-License-Identifier: Apache-2.0
//! A real keystone (requirements/keystone.txt, in the venv `scripts/stack.sh
//! keystone-venv` builds under $NSRS_CACHE) under gunicorn on a free port, on a fresh
//! `nsrs_t_keystone` database: `keystone-manage db_sync`, `fernet_setup`, `bootstrap`
//! (user `admin` in project `admin`, region `RegionOne`). A watchdog shell stops
//! gunicorn when the test process is gone.
#![allow(dead_code)]

use crate::nova_schema;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// The bootstrap admin's password (a throwaway keystone on loopback).
pub const ADMIN_PASSWORD: &str = "nsrs-admin-pw";

pub struct Keystone {
    /// Base URL without `/v3`.
    pub url: String,
    pub http: reqwest::Client,
    /// A token of the bootstrap admin, scoped to project `admin`.
    pub admin_token: String,
}

/// `$NSRS_KEYSTONE_VENV`, else the newest complete `keystone-venv-*` under
/// `$NSRS_CACHE`. Panics with what to run when there is none.
pub fn find_venv() -> PathBuf {
    if let Some(dir) = std::env::var_os("NSRS_KEYSTONE_VENV") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("NSRS_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/nova-scheduler-rs"))
        });
    let mut found: Vec<PathBuf> = cache
        .and_then(|c| std::fs::read_dir(c).ok())
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("keystone-venv-"))
                && p.join(".nsrs-complete").is_file()
                && p.join("bin/keystone-manage").is_file()
        })
        .collect();
    found.sort_by_key(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok());
    found.pop().unwrap_or_else(|| {
        panic!(
            "no keystone venv found: run `scripts/stack.sh keystone-venv` (it builds one \
             from requirements/keystone.txt under $NSRS_CACHE) or set NSRS_KEYSTONE_VENV"
        )
    })
}

/// Starts keystone with `[token] expiration = token_expiration` seconds.
pub async fn start(token_expiration: u32) -> Keystone {
    match try_start(token_expiration).await {
        Ok(k) => k,
        Err(e) => panic!("keystone could not be started: {e}"),
    }
}

async fn try_start(token_expiration: u32) -> Result<Keystone, String> {
    let venv = find_venv();
    let db = nova_schema::tagged("nsrs_t_keystone");
    nova_schema::recreate_databases(std::slice::from_ref(&db)).await?;
    let dir = std::env::temp_dir().join(format!("nsrs-t-keystone-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let conf = dir.join("keystone.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ndebug = false\n[database]\nconnection = {}\n[token]\nexpiration = {}\n\
             [fernet_tokens]\nkey_repository = {}\n[fernet_receipts]\nkey_repository = {}\n",
            nova_schema::sqla_url(&db),
            token_expiration,
            dir.join("fernet-keys").display(),
            dir.join("fernet-receipts").display(),
        ),
    )
    .map_err(|e| e.to_string())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let manage = venv.join("bin/keystone-manage");
    let user = std::env::var("USER").unwrap_or_else(|_| "root".into());
    let conf_arg = conf.to_string_lossy().into_owned();
    let args = |rest: &[&str]| {
        let mut a = vec!["--config-file".to_string(), conf_arg.clone()];
        a.extend(rest.iter().map(|s| s.to_string()));
        a
    };
    nova_schema::run(&manage, &args(&["db_sync"]), &[]).await?;
    for setup in ["fernet_setup", "receipt_setup"] {
        nova_schema::run(
            &manage,
            &args(&[setup, "--keystone-user", &user, "--keystone-group", &user]),
            &[],
        )
        .await?;
    }
    let v3 = format!("{url}/v3");
    nova_schema::run(
        &manage,
        &args(&[
            "bootstrap",
            "--bootstrap-password",
            ADMIN_PASSWORD,
            "--bootstrap-admin-url",
            &v3,
            "--bootstrap-internal-url",
            &v3,
            "--bootstrap-public-url",
            &v3,
            "--bootstrap-region-id",
            "RegionOne",
        ]),
        &[],
    )
    .await?;
    serve(&venv, &dir, port).await?;
    let http = reqwest::Client::new();
    let admin_token = password_token(&http, &url, "admin", ADMIN_PASSWORD, "admin").await?;
    Ok(Keystone {
        url,
        http,
        admin_token,
    })
}

async fn serve(venv: &Path, dir: &Path, port: u16) -> Result<(), String> {
    let log = dir.join("gunicorn.log");
    // keystone's app parses sys.argv with oslo.config, which refuses gunicorn's own
    // arguments (the worker exits 2); it is loaded with an empty command line.
    std::fs::write(
        dir.join("nsrs_keystone_app.py"),
        "import sys\nsys.argv = sys.argv[:1]\nfrom keystone.wsgi.api import application  # noqa\n",
    )
    .map_err(|e| e.to_string())?;
    let script = format!(
        "\"{gunicorn}\" --workers 1 --bind 127.0.0.1:{port} --timeout 120 \
         --error-logfile \"{log}\" --pythonpath \"{dir}\" nsrs_keystone_app:application >/dev/null 2>&1 & g=$!; \
         while kill -0 {parent} 2>/dev/null && kill -0 $g 2>/dev/null; do sleep 1; done; \
         kill $g 2>/dev/null; wait $g",
        gunicorn = venv.join("bin/gunicorn").display(),
        log = log.display(),
        dir = dir.display(),
        parent = std::process::id(),
    );
    std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .env("OS_KEYSTONE_CONFIG_DIR", dir)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("sh: {e}"))?;
    let http = reqwest::Client::new();
    for _ in 0..120 {
        if let Ok(resp) = http.get(format!("http://127.0.0.1:{port}/v3")).send().await {
            if resp.status().is_success() {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let tail = std::fs::read_to_string(&log).unwrap_or_default();
    Err(format!(
        "keystone did not answer within 60 s; gunicorn log:\n{tail}"
    ))
}

/// A project-scoped token for a user of domain `default`.
pub async fn password_token(
    http: &reqwest::Client,
    url: &str,
    user: &str,
    password: &str,
    project: &str,
) -> Result<String, String> {
    let body = json!({"auth": {"identity": {"methods": ["password"], "password": {"user": {
        "name": user, "domain": {"id": "default"}, "password": password}}},
        "scope": {"project": {"name": project, "domain": {"id": "default"}}}}});
    let resp = http
        .post(format!("{url}/v3/auth/tokens"))
        .json(&body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let token = resp
        .headers()
        .get("X-Subject-Token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let status = resp.status();
    token.ok_or_else(|| format!("keystone answered {status} without a token"))
}

impl Keystone {
    /// `method path` with the admin token: status and JSON body.
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.call_as(&self.admin_token, method, path, body).await
    }

    pub async fn call_as(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.url))
            .header("X-Auth-Token", token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("keystone answers");
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    /// `POST path` that must answer 201: the created object under `key`.
    pub async fn create(&self, path: &str, key: &str, body: Value) -> Value {
        let (status, got) = self
            .call(reqwest::Method::POST, path, Some(json!({ key: body })))
            .await;
        assert_eq!(status, 201, "POST {path}: {got}");
        got[key].clone()
    }

    /// True when keystone still accepts `token` (`GET /v3/auth/tokens`).
    pub async fn token_valid(&self, token: &str) -> bool {
        let resp = self
            .http
            .get(format!("{}/v3/auth/tokens", self.url))
            .header("X-Auth-Token", &self.admin_token)
            .header("X-Subject-Token", token)
            .send()
            .await
            .expect("keystone answers");
        resp.status().as_u16() == 200
    }
}
