// SPDX-License-Identifier: Apache-2.0
//! The opt-in HTTP listener (`[nova_scheduler_rs] http_listen`): `GET /metrics`,
//! `/healthz`, `/readyz`, `/decisions` (the ring of recent decisions, see
//! `nova-scheduler-rs explain`) and, in a shadow, `/shadow` (its comparison with
//! the answering scheduler, see `nova-scheduler-rs shadow report`). HTTP/1.1 only,
//! no TLS: it is meant for a loopback or management address that Prometheus and the
//! service manager reach.

use super::health::{Health, Verdict};
use super::metrics::metrics;
use futures_util::future::BoxFuture;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::convert::Infallible;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::net::TcpListener;
use tracing::{debug, info};

/// The OpenMetrics text format, which Prometheus asks for and reads.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Which decision `/decisions` is asked about: by instance uuid and/or request id
/// (neither: the list of recent ones), and optionally one host.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecisionQuery {
    pub instance: Option<String>,
    pub request_id: Option<String>,
    pub host: Option<String>,
}

impl DecisionQuery {
    /// From `instance=...&request_id=...&host=...` (percent-encoded).
    pub fn from_query(query: &str) -> DecisionQuery {
        let mut q = DecisionQuery::default();
        for pair in query.split('&') {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_encoding::percent_decode_str(&value.replace('+', " "))
                .decode_utf8_lossy()
                .into_owned();
            // Bounded: ids and host names are short.
            if value.is_empty() || value.len() > 255 {
                continue;
            }
            match key {
                "instance" => q.instance = Some(value),
                "request_id" => q.request_id = Some(value),
                "host" => q.host = Some(value),
                _ => {}
            }
        }
        q
    }
}

/// What answers `/decisions` (the scheduler manager's ring) and, in a shadow,
/// `/shadow`.
pub trait Explainer: Send + Sync {
    /// The decision `query` names, as JSON; `None` when the ring has none.
    fn explain<'a>(&'a self, query: DecisionQuery) -> BoxFuture<'a, Option<Value>>;
    /// The shadow's comparison so far; `None` in a process that is no shadow.
    fn shadow_report(&self) -> Option<Value> {
        None
    }
}

/// The explainer, set once the manager exists (the listener starts before it).
pub type ExplainerSlot = Arc<OnceLock<Arc<dyn Explainer>>>;

/// A connection that sends nothing for this long is closed.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds `addr`; the listener then serves with [`serve`].
pub async fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let listener = TcpListener::bind(addr).await?;
    info!(address = %listener.local_addr()?, "HTTP listener for /metrics, /healthz and /readyz");
    Ok(listener)
}

/// Serves connections on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, health: Arc<Health>, explainer: ExplainerSlot) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors or similar: back off instead of spinning.
                debug!(error = %e, "HTTP listener could not accept");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let health = Arc::clone(&health);
        let explainer = Arc::clone(&explainer);
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let health = Arc::clone(&health);
                let explainer = Arc::clone(&explainer);
                async move { Ok::<_, Infallible>(route(&req, &health, &explainer).await) }
            });
            let mut builder = http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT);
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                debug!(%peer, error = %e, "HTTP connection ended with an error");
            }
        });
    }
}

async fn route(
    req: &Request<Incoming>,
    health: &Health,
    explainer: &ExplainerSlot,
) -> Response<Full<Bytes>> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into());
    }
    match req.uri().path() {
        "/metrics" => {
            let mut response = text(StatusCode::OK, metrics().encode());
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(OPENMETRICS));
            response
        }
        "/healthz" => verdict(health.live()),
        "/readyz" => verdict(health.ready()),
        "/decisions" => {
            let query = DecisionQuery::from_query(req.uri().query().unwrap_or(""));
            let Some(explainer) = explainer.get() else {
                return json(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &serde_json::json!({"error": "starting"}),
                );
            };
            match explainer.explain(query).await {
                Some(found) => json(StatusCode::OK, &found),
                None => json(
                    StatusCode::NOT_FOUND,
                    &serde_json::json!({"error": "no such decision in the ring of recent decisions"}),
                ),
            }
        }
        "/shadow" => match explainer.get().map(|e| e.shadow_report()) {
            Some(Some(report)) => json(StatusCode::OK, &report),
            Some(None) => json(
                StatusCode::NOT_FOUND,
                &serde_json::json!({"error": "this process is not a shadow"}),
            ),
            None => json(
                StatusCode::SERVICE_UNAVAILABLE,
                &serde_json::json!({"error": "starting"}),
            ),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: /metrics, /healthz, /readyz, /decisions, /shadow\n".into(),
        ),
    }
}

fn verdict(v: Verdict) -> Response<Full<Bytes>> {
    let status = if v.ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut response = Response::new(Full::new(Bytes::from(v.to_json() + "\n")));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn json(status: StatusCode, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string() + "\n")));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::DecisionQuery;

    #[test]
    fn decision_queries_are_decoded_and_bounded() {
        let q = DecisionQuery::from_query("instance=abc&host=compute%2D1&x=1");
        assert_eq!(q.instance.as_deref(), Some("abc"));
        assert_eq!(q.host.as_deref(), Some("compute-1"));
        assert_eq!(q.request_id, None);
        let long = format!("request_id={}", "a".repeat(300));
        assert_eq!(DecisionQuery::from_query(&long).request_id, None);
    }
}
