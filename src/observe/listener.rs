// SPDX-License-Identifier: Apache-2.0
//! The opt-in HTTP listener (`[nova_scheduler_rs] http_listen`): `GET /metrics`,
//! `/healthz` and `/readyz`. HTTP/1.1 only, no TLS: it is meant for a loopback or
//! management address that Prometheus and the service manager reach.

use super::health::{Health, Verdict};
use super::metrics::metrics;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tracing::{debug, info};

/// The OpenMetrics text format, which Prometheus asks for and reads.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A connection that sends nothing for this long is closed.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds `addr`; the listener then serves with [`serve`].
pub async fn bind(addr: std::net::SocketAddr) -> std::io::Result<TcpListener> {
    let listener = TcpListener::bind(addr).await?;
    info!(address = %listener.local_addr()?, "HTTP listener for /metrics, /healthz and /readyz");
    Ok(listener)
}

/// Serves connections on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, health: Arc<Health>) {
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
        tokio::spawn(async move {
            let service = service_fn(move |req| {
                let health = Arc::clone(&health);
                async move { Ok::<_, Infallible>(route(&req, &health)) }
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

fn route(req: &Request<Incoming>, health: &Health) -> Response<Full<Bytes>> {
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
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: /metrics, /healthz, /readyz\n".into(),
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

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
