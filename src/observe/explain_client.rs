// SPDX-License-Identifier: Apache-2.0
//! `nova-scheduler-rs explain`: asks the running daemon's listener for one decision
//! (`GET /decisions?...`), or the list of recent ones (`GET /decisions`), and prints it
//! for a person, or as JSON.

use serde_json::Value;
use std::fmt::Write as _;

/// What to ask and how to print it.
#[derive(Debug, Clone, Default)]
pub struct ExplainRequest {
    /// `http://HOST:PORT` of the listener.
    pub base_url: String,
    pub instance: Option<String>,
    pub request_id: Option<String>,
    pub host: Option<String>,
    /// The list of recent decisions instead of one.
    pub recent: bool,
    pub json: bool,
}

/// Runs the request; the text to print, or the error with the exit code (1: no
/// such decision or no daemon).
pub async fn explain(req: &ExplainRequest) -> Result<String, String> {
    let mut url = format!("{}/decisions", req.base_url.trim_end_matches('/'));
    let mut sep = '?';
    // Without a question the listener answers the list, which must not be taken for one
    // decision.
    let asked = [
        ("instance", &req.instance),
        ("request_id", &req.request_id),
        ("host", &req.host),
    ];
    if req.recent == asked[..2].iter().any(|(_, v)| v.is_some()) {
        return Err("ask for one decision (--instance or --request-id) or --recent".into());
    }
    for (key, value) in asked {
        if let Some(v) = value {
            let v = percent_encoding::utf8_percent_encode(v, percent_encoding::NON_ALPHANUMERIC);
            let _ = write!(url, "{sep}{key}={v}");
            sep = '&';
        }
    }
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let resp = client.get(&url).send().await.map_err(|e| {
        format!(
            "cannot reach the daemon's listener at {}: {e}",
            req.base_url
        )
    })?;
    let status = resp.status().as_u16();
    let body: Value = resp
        .json()
        .await
        .map_err(|e| format!("{url}: not a JSON answer: {e}"))?;
    match status {
        200 if req.json => Ok(serde_json::to_string_pretty(&body).unwrap_or_default() + "\n"),
        200 if req.recent => Ok(render_recent(&body)),
        200 => Ok(render(&body)),
        404 => Err("no such decision in the daemon's ring of recent decisions \
                    ([nova_scheduler_rs] decision_ring_size)"
            .into()),
        _ => Err(format!("{url}: HTTP {status}: {body}")),
    }
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// The ring's list (`{"decisions": [...]}`, newest first), one line a decision.
pub fn render_recent(list: &Value) -> String {
    let decisions = list["decisions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    if decisions.is_empty() {
        return "no recent decision kept ([nova_scheduler_rs] decision_ring_size)\n".into();
    }
    let mut out = format!("{} recent decision(s), newest first:\n", decisions.len());
    for d in decisions {
        let _ = writeln!(
            out,
            "  {}  {}  {:<13}  instances {}",
            s(&d["at"]),
            s(&d["request_id"]),
            s(&d["result"]),
            d["instance_uuids"]
                .as_array()
                .map(|a| a.iter().map(s).collect::<Vec<_>>().join(", "))
                .unwrap_or_default()
        );
    }
    out
}

/// The decision as a person reads it: the request, the candidates question, each
/// filter's count and removed hosts, the weigher table, the result.
pub fn render(d: &Value) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "request {}  instances {}  at {}",
        s(&d["request_id"]),
        d["instance_uuids"]
            .as_array()
            .map(|a| a.iter().map(s).collect::<Vec<_>>().join(", "))
            .unwrap_or_default(),
        s(&d["at"])
    );
    let _ = writeln!(
        out,
        "result: {}{}",
        s(&d["result"]),
        match &d["message"] {
            Value::String(m) if !m.is_empty() => format!(" ({m})"),
            _ => String::new(),
        }
    );
    match &d["candidates"] {
        Value::Object(c) => {
            let _ = writeln!(
                out,
                "candidates: {} hosts ({} allocation requests) from {}\n  query: {}",
                s(&c["providers"]),
                s(&c["allocation_requests"]),
                s(&c["source"]),
                s(&c["query"])
            );
        }
        _ => {
            let _ = writeln!(out, "candidates: no Placement question");
        }
    }
    let e = &d["explanation"];
    if let Some(note) = e["note"].as_str() {
        let _ = writeln!(out, "{note}");
    }
    let as_of = match e["as_of"].as_str() {
        Some("now") => " (run again on the hosts' current state)",
        _ => " (at the decision)",
    };
    if let Some(filters) = e["filters"].as_array().filter(|f| !f.is_empty()) {
        let _ = writeln!(out, "filters{as_of}:");
        for f in filters {
            let _ = writeln!(
                out,
                "  {:<36} {:>5} -> {:<5}",
                s(&f["filter"]),
                s(&f["hosts_in"]),
                s(&f["hosts_out"])
            );
            for r in f["removed"].as_array().into_iter().flatten() {
                let _ = writeln!(
                    out,
                    "      {} ({}): {}",
                    s(&r["host"]),
                    s(&r["node"]),
                    s(&r["reason"])
                );
            }
            if let Some(n) = f["removed_not_listed"].as_u64().filter(|&n| n > 0) {
                let _ = writeln!(out, "      ... and {n} more");
            }
        }
    }
    if let Some(by) = e["emptied_by"].as_str() {
        let _ = writeln!(out, "no host left after: {by}");
    }
    if let Some(hosts) = e["weighing"]["hosts"].as_array() {
        let weighers: Vec<String> = e["weighing"]["weighers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(s)
            .collect();
        let _ = writeln!(out, "weighing{as_of}, best first:");
        for h in hosts {
            let _ = writeln!(
                out,
                "  {:<30} weight {:.4}",
                s(&h["host"]),
                h["weight"].as_f64().unwrap_or(0.0)
            );
            for sc in h["scores"].as_array().into_iter().flatten() {
                let _ = writeln!(
                    out,
                    "      {:<34} raw {:>12.4}  normalized {:.4}  x {:<6} = {:.4}",
                    s(&sc["weigher"]),
                    sc["raw"].as_f64().unwrap_or(0.0),
                    sc["normalized"].as_f64().unwrap_or(0.0),
                    s(&sc["multiplier"]),
                    sc["contribution"].as_f64().unwrap_or(0.0)
                );
            }
        }
        if weighers.is_empty() {
            let _ = writeln!(out, "  (one host: no weigher ran)");
        }
    }
    if let Some(sel) = d["selected"].as_array().filter(|a| !a.is_empty()) {
        let _ = writeln!(
            out,
            "selected: {}  (claims: {})",
            sel.iter().map(s).collect::<Vec<_>>().join(", "),
            s(&d["claim_mode"])
        );
    }
    if let Value::Object(h) = &e["host"] {
        let _ = writeln!(
            out,
            "host {}: {}{}",
            s(&h["name"]),
            s(&h["verdict"]),
            h.get("reason")
                .map(|r| format!(": {}", s(r)))
                .unwrap_or_default()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recent_list_is_one_line_a_decision() {
        let list = serde_json::json!({"decisions": [
            {"at": "2026-11-26T09:21:11+00:00", "request_id": "req-2",
             "instance_uuids": ["u2", "u3"], "result": "no_valid_host"},
            {"at": "2026-11-26T09:21:10+00:00", "request_id": null,
             "instance_uuids": ["u1"], "result": "placed"},
        ]});
        let text = render_recent(&list);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "2 recent decision(s), newest first:");
        assert!(lines[1].contains("req-2") && lines[1].contains("instances u2, u3"));
        assert!(lines[2].contains("  -  placed"), "{text}");
        let empty = render_recent(&serde_json::json!({"decisions": []}));
        assert!(empty.starts_with("no recent decision kept"), "{empty}");
    }

    #[tokio::test]
    async fn a_request_names_one_decision_or_the_list_before_anything_is_sent() {
        // Port 9 (discard): nothing is sent when the request is refused first.
        let base = ExplainRequest {
            base_url: "http://127.0.0.1:9".into(),
            ..ExplainRequest::default()
        };
        for req in [
            base.clone(),
            ExplainRequest {
                host: Some("h".into()),
                ..base.clone()
            },
            ExplainRequest {
                recent: true,
                instance: Some("u1".into()),
                ..base.clone()
            },
        ] {
            let e = explain(&req).await.unwrap_err();
            assert!(e.starts_with("ask for one decision"), "{req:?}: {e}");
        }
    }
}
