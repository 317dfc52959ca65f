// SPDX-License-Identifier: Apache-2.0
//! The real Placement (openstack-placement 16 from the venv) under gunicorn, started
//! once per test binary on a free port, on a fresh `nsrs_t_placement` database
//! (`placement-manage db sync`), with `auth_strategy = noauth2`
//! (`X-Auth-Token: admin` is an admin). A watchdog shell stops gunicorn when the test
//! process is gone.
#![allow(dead_code)]

use crate::nova_schema;
use crate::venv;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;
use tokio::sync::OnceCell;

const DB_BASE: &str = "nsrs_t_placement";

/// The Placement database of this test run (see `nova_schema::tagged`).
pub fn db() -> String {
    nova_schema::tagged(DB_BASE)
}

static URL: OnceCell<Result<String, String>> = OnceCell::const_new();

/// gunicorn workers; a test binary that sends requests concurrently may raise it
/// with [`set_workers`] before the first [`url`].
static WORKERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);

pub fn set_workers(n: usize) {
    WORKERS.store(n.max(1), std::sync::atomic::Ordering::Relaxed);
}

/// Base URL of the running Placement; panics with the reason if it cannot start.
pub async fn url() -> &'static str {
    match URL.get_or_init(start).await {
        Ok(url) => url,
        Err(e) => panic!("Placement could not be started: {e}"),
    }
}

/// The directory holding `placement.conf` (and the logs) of this test process.
fn conf_dir() -> std::path::PathBuf {
    std::env::temp_dir().join(format!("nsrs-t-placement-{}", std::process::id()))
}

async fn start() -> Result<String, String> {
    let venv = venv::find();
    nova_schema::recreate_databases(&[db()]).await?;
    let dir = conf_dir();
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let conf = dir.join("placement.conf");
    std::fs::write(
        &conf,
        format!(
            "[DEFAULT]\ndebug = false\n[api]\nauth_strategy = noauth2\n\
             [placement_database]\nconnection = {}\n",
            nova_schema::sqla_url(&db())
        ),
    )
    .map_err(|e| e.to_string())?;
    let conf_arg = conf.to_string_lossy().into_owned();
    nova_schema::run(
        &venv.join("bin/placement-manage"),
        &["--config-file".into(), conf_arg, "db".into(), "sync".into()],
        &[],
    )
    .await?;

    serve(&venv, &dir, "gunicorn.log", "", "http", None).await
}

/// The same Placement (same database and placement.conf) served over HTTPS with
/// `cert`/`key` (PEM files): a second gunicorn, for the TLS options of the client.
pub async fn start_tls(cert: &Path, key: &Path) -> Result<String, String> {
    url().await;
    let tls = format!(
        "--certfile \"{}\" --keyfile \"{}\"",
        cert.display(),
        key.display()
    );
    serve(
        &venv::find(),
        &conf_dir(),
        "gunicorn-tls.log",
        &tls,
        "https",
        None,
    )
    .await
}

/// The same Placement over HTTPS requiring a client certificate signed by `ca`
/// (gunicorn's `--ca-certs` and `--cert-reqs 2`, ssl.CERT_REQUIRED). `client` (cert,
/// key) is only used to see it is up.
pub async fn start_mtls(
    cert: &Path,
    key: &Path,
    ca: &Path,
    client: (&Path, &Path),
) -> Result<String, String> {
    url().await;
    let tls = format!(
        "--certfile \"{}\" --keyfile \"{}\" --ca-certs \"{}\" --cert-reqs 2",
        cert.display(),
        key.display(),
        ca.display()
    );
    let mut pem = std::fs::read(client.0).map_err(|e| e.to_string())?;
    pem.extend_from_slice(&std::fs::read(client.1).map_err(|e| e.to_string())?);
    let identity = reqwest::Identity::from_pem(&pem).map_err(|e| e.to_string())?;
    serve(
        &venv::find(),
        &conf_dir(),
        "gunicorn-mtls.log",
        &tls,
        "https",
        Some(identity),
    )
    .await
}

/// gunicorn in the background on a free port; the shell waits while this test
/// process lives. Returns the base URL once Placement answers on it.
async fn serve(
    venv: &Path,
    dir: &Path,
    log_name: &str,
    extra: &str,
    scheme: &str,
    identity: Option<reqwest::Identity>,
) -> Result<String, String> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let log = dir.join(log_name);
    let script = format!(
        "\"{gunicorn}\" --workers {workers} --bind 127.0.0.1:{port} --timeout 120 {extra} \
         --error-logfile \"{log}\" placement.wsgi.api:application >/dev/null 2>&1 & g=$!; \
         while kill -0 {parent} 2>/dev/null && kill -0 $g 2>/dev/null; do sleep 1; done; \
         kill $g 2>/dev/null; wait $g",
        gunicorn = venv.join("bin/gunicorn").display(),
        workers = WORKERS.load(std::sync::atomic::Ordering::Relaxed),
        log = log.display(),
        parent = std::process::id(),
    );
    std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .env("OS_PLACEMENT_CONFIG_DIR", dir)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("sh: {e}"))?;
    let url = format!("{scheme}://127.0.0.1:{port}");
    // Only to see it is up; the client under test checks certificates itself.
    let mut http = reqwest::Client::builder().danger_accept_invalid_certs(true);
    if let Some(identity) = identity {
        http = http.identity(identity);
    }
    let http = http.build().map_err(|e| e.to_string())?;
    for _ in 0..120 {
        if let Ok(resp) = http.get(format!("{url}/")).send().await {
            if resp.status().is_success() {
                return Ok(url);
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let tail = std::fs::read_to_string(&log).unwrap_or_default();
    Err(format!(
        "no answer on {url}/ within 60 s; gunicorn log:\n{tail}"
    ))
}
