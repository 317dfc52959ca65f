// SPDX-License-Identifier: Apache-2.0
//! `use_json`: one JSON object per line with the keys of oslo.log's `JSONFormatter`
//! (oslo_log/formatters.py), so that tools written for nova's JSON logs read these.
//!
//! tracing-subscriber's own `json` format has its own schema (`timestamp`, `level`,
//! `fields`, `spans`); this formatter writes oslo's instead: `message`, `asctime`,
//! `name` (the `tracing` target), `levelname`/`levelno`, `pathname`, `filename`,
//! `module`, `lineno`, `created`, `msecs`, `thread`, `thread_name`, `process`,
//! `hostname`, ..., `context` (`request_id` and `global_request_id` of the request
//! being served, from the enclosing spans) and `extra` (the event's other fields and
//! the spans' other fields, such as `method` and `msg_id`).
//!
//! Span fields are kept as JSON text by [`JsonFields`] (the fmt layer stores them per
//! span) and merged innermost-last.

use chrono::{DateTime, Local};
use serde_json::{Map, Value};
use std::fmt;
use std::time::Instant;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;

use super::pytime;

/// Collects fields as JSON values.
#[derive(Default)]
pub struct JsonVisitor(pub Map<String, Value>);

impl Visit for JsonVisitor {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.0
            .insert(field.name().into(), Value::from(value.to_string()));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), Value::from(format!("{value:?}")));
    }
}

/// Span fields as a JSON object (stored by the fmt layer per span).
#[derive(Clone, Copy, Debug, Default)]
pub struct JsonFields;

impl<'w> FormatFields<'w> for JsonFields {
    fn format_fields<R: RecordFields>(&self, mut writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut v = JsonVisitor::default();
        fields.record(&mut v);
        let text = serde_json::to_string(&v.0).map_err(|_| fmt::Error)?;
        writer.write_str(&text)
    }

    fn add_fields(
        &self,
        current: &'w mut FormattedFields<Self>,
        fields: &tracing::span::Record<'_>,
    ) -> fmt::Result {
        let mut v = JsonVisitor(serde_json::from_str(&current.fields).unwrap_or_default());
        fields.record(&mut v);
        current.fields = serde_json::to_string(&v.0).map_err(|_| fmt::Error)?;
        Ok(())
    }
}

/// oslo's level name and number.
pub fn level_name(level: &Level) -> (&'static str, u8) {
    match *level {
        Level::TRACE => ("TRACE", 5),
        Level::DEBUG => ("DEBUG", 10),
        Level::INFO => ("INFO", 20),
        Level::WARN => ("WARNING", 30),
        Level::ERROR => ("ERROR", 40),
    }
}

/// The process's facts that every line repeats.
#[derive(Clone, Debug)]
pub struct ProcessFacts {
    pub hostname: String,
    pub process_name: String,
    pub pid: u32,
    pub started: Instant,
}

/// oslo's `JSONFormatter`.
#[derive(Clone, Debug)]
pub struct OsloJson {
    chrono_format: String,
    facts: ProcessFacts,
}

impl OsloJson {
    pub fn new(log_date_format: &str, facts: ProcessFacts) -> Self {
        OsloJson {
            chrono_format: pytime::to_chrono(log_date_format),
            facts,
        }
    }

    /// The line's object, given the event's fields and the enclosing spans' fields
    /// (merged, innermost last).
    pub fn object(
        &self,
        now: DateTime<Local>,
        meta: &tracing::Metadata<'_>,
        mut fields: Map<String, Value>,
        mut span_fields: Map<String, Value>,
    ) -> Value {
        let message = match fields.remove("message") {
            Some(Value::String(s)) => s,
            Some(other) => other.to_string(),
            None => String::new(),
        };
        let mut context = Map::new();
        for key in ["request_id", "global_request_id"] {
            let value = fields.remove(key).or_else(|| span_fields.remove(key));
            match value {
                Some(Value::String(s)) if s == "-" || s.is_empty() => {}
                Some(v) => {
                    context.insert(key.into(), v);
                }
                None => {}
            }
        }
        let mut extra = span_fields;
        extra.extend(fields);
        let (levelname, levelno) = level_name(meta.level());
        let created = now.timestamp_micros() as f64 / 1e6;
        let thread = std::thread::current();
        let thread_id = format!("{:?}", thread.id());
        let thread_id: Value = thread_id
            .trim_start_matches("ThreadId(")
            .trim_end_matches(')')
            .parse::<u64>()
            .map(Value::from)
            .unwrap_or(Value::String(thread_id));
        let path = meta.file();
        let filename = path.map(|p| p.rsplit('/').next().unwrap_or(p));
        serde_json::json!({
            "message": message,
            "asctime": pytime::asctime(&now, &self.chrono_format),
            "name": meta.target(),
            "msg": message,
            "args": [],
            "levelname": levelname,
            "levelno": levelno,
            "pathname": path,
            "filename": filename,
            "module": meta.module_path(),
            "lineno": meta.line(),
            "funcname": Value::Null,
            "created": created,
            "msecs": f64::from(now.timestamp_subsec_micros()) / 1000.0,
            "relative_created": self.facts.started.elapsed().as_secs_f64() * 1000.0,
            "thread": thread_id,
            "thread_name": thread.name(),
            "process_name": self.facts.process_name,
            "process": self.facts.pid,
            "traceback": Value::Null,
            "hostname": self.facts.hostname,
            "error_summary": "",
            "context": context,
            "extra": extra,
        })
    }
}

impl<S> FormatEvent<S, JsonFields> for OsloJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, JsonFields>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let now = Local::now();
        let mut fields = JsonVisitor::default();
        event.record(&mut fields);
        let mut span_fields = Map::new();
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let ext = span.extensions();
                if let Some(stored) = ext.get::<FormattedFields<JsonFields>>() {
                    if let Ok(Value::Object(map)) = serde_json::from_str::<Value>(&stored.fields) {
                        span_fields.extend(map);
                    }
                }
            }
        }
        let object = self.object(now, event.metadata(), fields.0, span_fields);
        let text = serde_json::to_string(&object).map_err(|_| fmt::Error)?;
        writeln!(writer, "{text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::fmt::MakeWriter;
    use tracing_subscriber::layer::SubscriberExt;

    #[derive(Clone, Default)]
    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    impl<'a> MakeWriter<'a> for Buf {
        type Writer = Buf;
        fn make_writer(&'a self) -> Buf {
            self.clone()
        }
    }

    #[test]
    fn one_object_per_line_with_oslo_keys_and_the_request_context() {
        let buf = Buf::default();
        let facts = ProcessFacts {
            hostname: "h1".into(),
            process_name: "nova-scheduler".into(),
            pid: 42,
            started: Instant::now(),
        };
        let layer = tracing_subscriber::fmt::layer()
            .fmt_fields(JsonFields)
            .event_format(OsloJson::new("%Y", facts))
            .with_writer(buf.clone());
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::with_default(subscriber, || {
            let outer = tracing::info_span!(
                "rpc",
                request_id = "req-1",
                global_request_id = "-",
                method = "select_destinations"
            );
            let _g = outer.enter();
            let inner = tracing::info_span!("select_destinations", request_id = "req-1");
            let _h = inner.enter();
            tracing::warn!(elapsed_ms = 12u64, "took \"long\"\nreally");
            drop(_h);
            drop(_g);
            tracing::info!(target: "lapin", "no context");
        });
        let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).expect(l))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        let first = &lines[0];
        assert_eq!(first["message"], "took \"long\"\nreally");
        assert_eq!(first["levelname"], "WARNING");
        assert_eq!(first["levelno"], 30);
        assert_eq!(first["name"], module_path!());
        assert_eq!(first["process"], 42);
        assert_eq!(first["hostname"], "h1");
        assert_eq!(first["asctime"].as_str().unwrap().len(), 4);
        assert_eq!(first["context"], serde_json::json!({"request_id": "req-1"}));
        assert_eq!(
            first["extra"],
            serde_json::json!({"method": "select_destinations", "elapsed_ms": 12})
        );
        assert_eq!(lines[1]["name"], "lapin");
        assert_eq!(lines[1]["context"], serde_json::json!({}));
        assert_eq!(lines[1]["extra"], serde_json::json!({}));
    }
}
