// SPDX-License-Identifier: Apache-2.0
//! `use_journal`: the systemd journal's native protocol on
//! `/run/systemd/journal/socket`, with the fields oslo's `OSJournalHandler` sends:
//! `MESSAGE`, `PRIORITY`, `SYSLOG_IDENTIFIER`, `SYSLOG_FACILITY`, `LOGGER_NAME`,
//! `LOGGER_LEVEL`, `CODE_FILE`, `CODE_LINE`, `THREAD_NAME`, and `REQUEST_ID` (plus
//! `GLOBAL_REQUEST_ID`) of the request being served, so that
//! `journalctl REQUEST_ID=req-...` finds a request's lines as it does for nova.
//!
//! `tracing-journald` names span fields by depth (`S0_REQUEST_ID`, `S1_REQUEST_ID`)
//! and event fields with a prefix, so the request id would not be under oslo's name;
//! the protocol is small (`NAME=value` lines, a length-prefixed form for values with
//! a newline), hence this layer. `MESSAGE` is the message with the event's other
//! fields (`key=value`); the journal records the time, pid and host itself. A
//! datagram the socket refuses (too large) is sent again with `MESSAGE` cut to 64 KiB.

use std::io;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;

use super::json::level_name;
use super::sinks::syslog_severity;

/// systemd's native journal socket.
pub const JOURNAL_SOCKET: &str = "/run/systemd/journal/socket";

/// The request ids a span carries.
#[derive(Clone, Debug, Default)]
struct RequestIds {
    request_id: Option<String>,
    global_request_id: Option<String>,
}

impl Visit for RequestIds {
    fn record_str(&mut self, field: &Field, value: &str) {
        let value = (value != "-" && !value.is_empty()).then(|| value.to_string());
        match field.name() {
            "request_id" => self.request_id = value.or(self.request_id.take()),
            "global_request_id" => self.global_request_id = value.or(self.global_request_id.take()),
            _ => {}
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if matches!(field.name(), "request_id" | "global_request_id") {
            self.record_str(field, format!("{value:?}").trim_matches('"'));
        }
    }
}

/// The event's message and its other fields as `key=value`.
#[derive(Default)]
struct MessageText {
    message: String,
    rest: String,
}

impl Visit for MessageText {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message.push_str(value);
        } else {
            self.rest.push_str(&format!(" {}={value}", field.name()));
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message.push_str(&format!("{value:?}"));
        } else {
            self.rest.push_str(&format!(" {}={value:?}", field.name()));
        }
    }
}

/// Appends one field in the native protocol.
pub fn put_field(buf: &mut Vec<u8>, name: &str, value: &[u8]) {
    buf.extend_from_slice(name.as_bytes());
    if value.contains(&b'\n') {
        buf.push(b'\n');
        buf.extend_from_slice(&(value.len() as u64).to_le_bytes());
    } else {
        buf.push(b'=');
    }
    buf.extend_from_slice(value);
    buf.push(b'\n');
}

/// The journal layer.
pub struct JournalLayer {
    socket: UnixDatagram,
    path: PathBuf,
    identifier: String,
    facility: u8,
    reported: AtomicBool,
}

impl JournalLayer {
    /// Connects to the journal socket at `path`.
    pub fn connect(path: &Path, identifier: &str, facility: u8) -> io::Result<JournalLayer> {
        let socket = UnixDatagram::unbound()?;
        socket.connect(path)?;
        Ok(JournalLayer {
            socket,
            path: path.to_path_buf(),
            identifier: identifier.to_string(),
            facility,
            reported: AtomicBool::new(false),
        })
    }

    fn payload(&self, event: &Event<'_>, ids: &RequestIds, max_message: usize) -> Vec<u8> {
        let meta = event.metadata();
        let mut text = MessageText::default();
        event.record(&mut text);
        let mut message = text.message + &text.rest;
        if message.len() > max_message {
            let mut cut = max_message;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        let mut buf = Vec::with_capacity(message.len() + 256);
        put_field(&mut buf, "MESSAGE", message.as_bytes());
        put_field(
            &mut buf,
            "PRIORITY",
            syslog_severity(meta.level()).to_string().as_bytes(),
        );
        put_field(&mut buf, "SYSLOG_IDENTIFIER", self.identifier.as_bytes());
        put_field(
            &mut buf,
            "SYSLOG_FACILITY",
            self.facility.to_string().as_bytes(),
        );
        put_field(&mut buf, "LOGGER_NAME", meta.target().as_bytes());
        put_field(
            &mut buf,
            "LOGGER_LEVEL",
            level_name(meta.level()).0.as_bytes(),
        );
        if let Some(file) = meta.file() {
            put_field(&mut buf, "CODE_FILE", file.as_bytes());
        }
        if let Some(line) = meta.line() {
            put_field(&mut buf, "CODE_LINE", line.to_string().as_bytes());
        }
        if let Some(name) = std::thread::current().name() {
            put_field(&mut buf, "THREAD_NAME", name.as_bytes());
        }
        if let Some(id) = &ids.request_id {
            put_field(&mut buf, "REQUEST_ID", id.as_bytes());
        }
        if let Some(id) = &ids.global_request_id {
            put_field(&mut buf, "GLOBAL_REQUEST_ID", id.as_bytes());
        }
        buf
    }

    fn send(&self, payload: &[u8]) -> io::Result<()> {
        self.socket
            .send(payload)
            .or_else(|_| self.socket.send_to(payload, &self.path))
            .map(|_| ())
    }
}

impl<S> Layer<S> for JournalLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut ids = RequestIds::default();
        attrs.record(&mut ids);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(ids);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            let mut ext = span.extensions_mut();
            if let Some(ids) = ext.get_mut::<RequestIds>() {
                values.record(ids);
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut ids = RequestIds::default();
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope {
                if let Some(found) = span.extensions().get::<RequestIds>() {
                    if ids.request_id.is_none() {
                        ids.request_id = found.request_id.clone();
                    }
                    if ids.global_request_id.is_none() {
                        ids.global_request_id = found.global_request_id.clone();
                    }
                }
            }
        }
        event.record(&mut ids);
        let payload = self.payload(event, &ids, usize::MAX);
        let sent = self.send(&payload).or_else(|_| {
            let payload = self.payload(event, &ids, 64 * 1024);
            self.send(&payload)
        });
        if let Err(e) = sent {
            let mut text = MessageText::default();
            event.record(&mut text);
            if !self.reported.swap(true, Ordering::Relaxed) {
                eprintln!(
                    "nova-scheduler-rs: cannot write to the journal socket {}: {e}; lines go to stderr",
                    self.path.display()
                );
            }
            eprintln!(
                "{} {} {}{}",
                level_name(event.metadata().level()).0,
                event.metadata().target(),
                text.message,
                text.rest
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn native_protocol_fields() {
        let mut buf = Vec::new();
        put_field(&mut buf, "MESSAGE", b"one line");
        put_field(&mut buf, "MESSAGE", b"two\nlines");
        let mut want = b"MESSAGE=one line\nMESSAGE\n".to_vec();
        want.extend_from_slice(&9u64.to_le_bytes());
        want.extend_from_slice(b"two\nlines\n");
        assert_eq!(buf, want);
    }

    #[test]
    fn events_reach_the_socket_with_the_request_id() {
        let dir = std::env::temp_dir().join(format!("nsrs-journal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("socket");
        let server = UnixDatagram::bind(&path).unwrap();
        let layer = JournalLayer::connect(&path, "nova-scheduler", 1).unwrap();
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("rpc", request_id = "req-9", global_request_id = "-");
            let _g = span.enter();
            tracing::warn!(bytes = 3u64, "reply queue is missing");
        });
        let mut buf = vec![0u8; 4096];
        let n = server.recv(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&buf[..n]).into_owned();
        for line in [
            "MESSAGE=reply queue is missing bytes=3\n",
            "PRIORITY=4\n",
            "SYSLOG_IDENTIFIER=nova-scheduler\n",
            "LOGGER_LEVEL=WARNING\n",
            "REQUEST_ID=req-9\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
        assert!(!text.contains("GLOBAL_REQUEST_ID"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
