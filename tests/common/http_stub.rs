// SPDX-License-Identifier: Apache-2.0
//! A few lines of HTTP/1.1 over a tokio TcpListener: a stand-in for peers that are
//! not available here (Keystone) and for Placement answers the real one cannot be
//! made to give on demand (provider-generation races). Records every request.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == &name.to_ascii_lowercase())
            .map(|(_, v)| v.as_str())
    }
}

pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn json(status: u16, body: serde_json::Value) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: body.to_string(),
        }
    }
}

pub type Handler = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

/// An answer computed asynchronously (a proxy, a gate); `None` closes the
/// connection without answering (a peer that is down).
pub type AsyncHandler = Arc<
    dyn Fn(Recorded) -> std::pin::Pin<Box<dyn std::future::Future<Output = Option<Reply>> + Send>>
        + Send
        + Sync,
>;

pub struct Stub {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
}

impl Stub {
    pub fn recorded(&self) -> Vec<Recorded> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

/// Serves `handler` on 127.0.0.1:<free port> until the test's runtime ends.
pub async fn start(handler: Handler) -> Stub {
    start_async(Arc::new(move |r: Recorded| {
        let reply = handler(&r);
        Box::pin(async move { Some(reply) })
    }))
    .await
}

/// Like [`start`], with an asynchronous handler.
pub async fn start_async(handler: AsyncHandler) -> Stub {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let log = requests.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (handler, log) = (handler.clone(), log.clone());
            tokio::spawn(async move {
                let _ = serve(stream, handler, log).await;
            });
        }
    });
    Stub { url, requests }
}

async fn serve(
    mut stream: TcpStream,
    handler: AsyncHandler,
    log: Arc<Mutex<Vec<Recorded>>>,
) -> std::io::Result<()> {
    loop {
        let Some(req) = read_request(&mut stream).await? else {
            return Ok(());
        };
        if let Ok(mut l) = log.lock() {
            l.push(req.clone());
        }
        let Some(mut reply) = handler(req).await else {
            return Ok(());
        };
        if reply.status == 204 || reply.status == 304 {
            reply.body.clear();
        }
        let mut head = format!(
            "HTTP/1.1 {} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n",
            reply.status,
            reply.body.len()
        );
        for (k, v) in &reply.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(reply.body.as_bytes()).await?;
        stream.flush().await?;
    }
}

async fn read_request(stream: &mut TcpStream) -> std::io::Result<Option<Recorded>> {
    let mut buf = Vec::new();
    let header_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let path = first.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[header_end + 4..].to_vec();
    while body.len() < len {
        let mut chunk = vec![0u8; len - body.len()];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Ok(Some(Recorded {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }))
}
