// SPDX-License-Identifier: Apache-2.0
//! Decode requests and encode replies in oslo.messaging's 2.0 envelope
//! (`oslo_messaging/_drivers/common.py`: `serialize_msg`, `deserialize_msg`;
//! `amqpdriver.py` for the call, reply and heartbeat keys).
//!
//! On the wire a message is `{"oslo.version": "2.0", "oslo.message": "<inner JSON as a string>"}`
//! with `content_type: application/json`, optionally zlib-compressed (header
//! `compression: application/x-gzip`). A JSON object without both envelope keys is the
//! legacy "1.0" format and is taken as the inner message itself.

use std::io::{Read, Write};
use std::time::Duration;

use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use lapin::types::{AMQPValue, FieldTable, ShortString};
use lapin::BasicProperties;
use serde_json::{Map, Value};

use super::context::RequestContext;

/// Envelope version emitted and accepted (same major, minor/revision ≤ 0).
pub const ENVELOPE_VERSION: &str = "2.0";
/// Envelope key of the version.
pub const VERSION_KEY: &str = "oslo.version";
/// Envelope key of the inner message.
pub const MESSAGE_KEY: &str = "oslo.message";
/// The only content type kombu turns into a dict.
pub const CONTENT_TYPE_JSON: &str = "application/json";
/// The content encoding oslo sends.
pub const CONTENT_ENCODING_UTF8: &str = "utf-8";
/// kombu's MIME name of its `gzip`/`zlib` codec (a zlib stream, not gzip framing).
pub const COMPRESSION_ZLIB: &str = "application/x-gzip";
/// Header naming the compression codec.
pub const COMPRESSION_HEADER: &str = "compression";
/// The default bound on a message's size, before and after decompression
/// (`[nova_scheduler_rs] max_message_bytes`).
pub const DEFAULT_MAX_MESSAGE_BYTES: u64 = 2 * 1024 * 1024;

/// A decoded request: the inner message with oslo's reserved keys popped.
#[derive(Clone, Debug)]
pub struct Request {
    /// `method`.
    pub method: String,
    /// `args` (`{}` when absent).
    pub args: Map<String, Value>,
    /// `namespace` (absent or null → `None`).
    pub namespace: Option<String>,
    /// `version` (absent → `"1.0"`).
    pub version: String,
    /// The `_context_*` keys, prefix stripped.
    pub context: RequestContext,
    /// `_msg_id`: present and non-empty for calls.
    pub msg_id: Option<String>,
    /// `_reply_q`: the caller's reply queue.
    pub reply_q: Option<String>,
    /// `_timeout`: the call-monitor timeout as sent (number, numeric string or null).
    pub timeout: Option<Value>,
    /// `_unique_id`: duplicate detection.
    pub unique_id: Option<String>,
}

impl Request {
    /// A call expects a reply: oslo recognises it by a non-empty `_msg_id`.
    pub fn is_call(&self) -> bool {
        self.msg_id.as_deref().is_some_and(|m| !m.is_empty())
    }

    /// Interval of call-monitor heartbeats, per `RPCDispatcher._watchdog`.
    pub fn heartbeat_interval(&self) -> Option<Duration> {
        heartbeat_interval(self.timeout.as_ref())
    }
}

/// oslo's watchdog rule: only for a truthy `_timeout`; `int(_timeout) / 2` seconds,
/// none when that is below 1 s or `int()` fails.
pub fn heartbeat_interval(timeout: Option<&Value>) -> Option<Duration> {
    let whole: i64 = match timeout? {
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i
            } else if let Some(u) = n.as_u64() {
                i64::try_from(u).unwrap_or(i64::MAX)
            } else {
                let f = n.as_f64()?;
                if !f.is_finite() {
                    return None;
                }
                f.trunc() as i64
            }
        }
        // Python's int() accepts surrounding whitespace and a sign, not a decimal point.
        Value::String(s) => crate::py::int::int_saturating(s).ok()?,
        // int(True) == 1 gives an interval of 0.5 s: ignored with a warning by oslo.
        _ => return None,
    };
    let interval = whole as f64 / 2.0;
    (interval >= 1.0).then(|| Duration::from_secs_f64(interval.min(86_400.0)))
}

/// Why a delivery could not be turned into a [`Request`], with the reply information
/// that could still be recovered from it (to send a `ValueError` failure back).
#[derive(Clone, Debug, thiserror::Error)]
#[error("{reason}")]
pub struct DecodeError {
    /// Human-readable reason (no message content).
    pub reason: String,
    /// `_msg_id`, if it could be extracted.
    pub msg_id: Option<String>,
    /// `_reply_q`, if it could be extracted.
    pub reply_q: Option<String>,
}

impl DecodeError {
    fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            msg_id: None,
            reply_q: None,
        }
    }

    fn with_reply_info(mut self, (msg_id, reply_q): (Option<String>, Option<String>)) -> Self {
        self.msg_id = msg_id;
        self.reply_q = reply_q;
        self
    }

    /// Both `_msg_id` and `_reply_q` are known: a failure reply can be sent.
    pub fn reply_target(&self) -> Option<(&str, &str)> {
        match (self.msg_id.as_deref(), self.reply_q.as_deref()) {
            (Some(m), Some(q)) if !m.is_empty() && !q.is_empty() => Some((m, q)),
            _ => None,
        }
    }
}

/// Decode an AMQP delivery (properties + body) into a request; a body larger than
/// `max_bytes` (before or after decompression) is refused before it is parsed.
pub fn decode_delivery(
    properties: &BasicProperties,
    body: &[u8],
    max_bytes: u64,
) -> Result<Request, DecodeError> {
    let content_type = properties.content_type().as_ref().map(ShortString::as_str);
    let compression = properties
        .headers()
        .as_ref()
        .and_then(|h| header_str(h, COMPRESSION_HEADER));
    decode_request(content_type, compression.as_deref(), body, max_bytes)
}

/// Decode a request body given its content type and `compression` header; a body
/// larger than `max_bytes` (before or after decompression) is refused unparsed, its
/// `_msg_id` and `_reply_q` found by a scan of the text so that the caller is answered.
pub fn decode_request(
    content_type: Option<&str>,
    compression: Option<&str>,
    body: &[u8],
    max_bytes: u64,
) -> Result<Request, DecodeError> {
    let too_large = |what: &str, text: &[u8]| {
        DecodeError::new(format!(
            "message is larger than {max_bytes} bytes{what} ([nova_scheduler_rs] max_message_bytes)"
        ))
        .with_reply_info(scan_reply_info(&String::from_utf8_lossy(text)))
    };
    if body.len() as u64 > max_bytes {
        return Err(too_large("", body));
    }
    let inflated;
    let body = match compression {
        None | Some("") => body,
        Some(mime) => {
            inflated = decompress(mime, body, max_bytes).map_err(|e| match e {
                Inflate::TooLarge(prefix) => too_large(" once decompressed", &prefix),
                Inflate::Failed(reason) => DecodeError::new(reason),
            })?;
            &inflated[..]
        }
    };
    if content_type != Some(CONTENT_TYPE_JSON) {
        let reason = format!(
            "unsupported content type {:?} (only {CONTENT_TYPE_JSON} is accepted)",
            content_type.unwrap_or("")
        );
        let info = match serde_json::from_slice::<Value>(body) {
            Ok(v) => unwrap_envelope(v)
                .map(|m| reply_info(&m))
                .unwrap_or_default(),
            Err(_) => scan_reply_info(&String::from_utf8_lossy(body)),
        };
        return Err(DecodeError::new(reason).with_reply_info(info));
    }
    let outer: Value = serde_json::from_slice(body).map_err(|e| {
        DecodeError::new(format!("body is not valid JSON: {e}"))
            .with_reply_info(scan_reply_info(&String::from_utf8_lossy(body)))
    })?;
    let message = unwrap_envelope(outer)?;
    request_from_message(message)
}

/// Take the inner message out of a 2.0 envelope (or return a legacy message as is).
pub fn unwrap_envelope(outer: Value) -> Result<Map<String, Value>, DecodeError> {
    let Value::Object(mut outer) = outer else {
        return Err(DecodeError::new("message is not a JSON object"));
    };
    if !(outer.contains_key(VERSION_KEY) && outer.contains_key(MESSAGE_KEY)) {
        return Ok(outer); // legacy 1.0: no envelope
    }
    let version = outer.remove(VERSION_KEY).unwrap_or(Value::Null);
    let inner = outer.remove(MESSAGE_KEY).unwrap_or(Value::Null);
    let Value::String(inner) = inner else {
        return Err(DecodeError::new("oslo.message is not a string"));
    };
    let compatible = version
        .as_str()
        .and_then(|v| version_is_compatible(ENVELOPE_VERSION, v).ok())
        .unwrap_or(false);
    if !compatible {
        return Err(DecodeError::new(format!(
            "Specified RPC envelope version, {}, not supported by this endpoint.",
            crate::py::value::json_str(&version)
        ))
        .with_reply_info(scan_reply_info(&inner)));
    }
    match serde_json::from_str::<Value>(&inner) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(DecodeError::new("oslo.message is not a JSON object")),
        Err(e) => Err(
            DecodeError::new(format!("oslo.message is not valid JSON: {e}"))
                .with_reply_info(scan_reply_info(&inner)),
        ),
    }
}

/// Pop oslo's reserved keys out of an inner message (`unpack_context` + the dedupe pop).
pub fn request_from_message(mut message: Map<String, Value>) -> Result<Request, DecodeError> {
    let info = reply_info(&message);
    let fail = |reason: String| DecodeError::new(reason).with_reply_info(info.clone());

    let context_keys: Vec<String> = message
        .keys()
        .filter(|k| k.starts_with("_context_"))
        .cloned()
        .collect();
    let mut context = Map::new();
    for key in context_keys {
        if let Some(v) = message.remove(&key) {
            context.insert(key["_context_".len()..].to_string(), v);
        }
    }
    let msg_id = opt_string(message.remove("_msg_id"), "_msg_id").map_err(&fail)?;
    let reply_q = opt_string(message.remove("_reply_q"), "_reply_q").map_err(&fail)?;
    let timeout = message.remove("_timeout").filter(|v| !v.is_null());
    let unique_id = opt_string(message.remove("_unique_id"), "_unique_id").map_err(&fail)?;

    let method = match message.remove("method") {
        Some(Value::String(m)) if !m.is_empty() => m,
        Some(Value::String(_)) | None | Some(Value::Null) => {
            return Err(fail("message has no 'method'".into()))
        }
        Some(_) => return Err(fail("'method' is not a string".into())),
    };
    let args = match message.remove("args") {
        None => Map::new(),
        Some(Value::Object(a)) => a,
        Some(_) => return Err(fail("'args' is not a JSON object".into())),
    };
    let namespace = opt_string(message.remove("namespace"), "namespace").map_err(&fail)?;
    let version = match message.remove("version") {
        None => "1.0".to_string(),
        Some(Value::String(v)) => v,
        Some(_) => return Err(fail("'version' is not a string".into())),
    };
    if let Some(q) = &reply_q {
        if ShortString::try_new(q.as_str()).is_err() {
            return Err(DecodeError::new("'_reply_q' is longer than 255 bytes"));
        }
    }
    Ok(Request {
        method,
        args,
        namespace,
        version,
        context: RequestContext::from_map(context),
        msg_id,
        reply_q,
        timeout,
        unique_id,
    })
}

fn opt_string(v: Option<Value>, key: &str) -> Result<Option<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("'{key}' is not a string")),
    }
}

/// `_msg_id` and `_reply_q` of a parsed message, when they are usable strings.
fn reply_info(message: &Map<String, Value>) -> (Option<String>, Option<String>) {
    let get = |k: &str| {
        message
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| plausible_name(s))
            .map(str::to_string)
    };
    (get("_msg_id"), get("_reply_q"))
}

/// Best-effort extraction of `_msg_id` / `_reply_q` from text that failed to parse
/// (it may be a JSON document quoted inside another, hence the tolerance for `\`).
fn scan_reply_info(text: &str) -> (Option<String>, Option<String>) {
    (scan_value(text, "_msg_id"), scan_value(text, "_reply_q"))
}

fn scan_value(text: &str, key: &str) -> Option<String> {
    let needle = format!("{key}\\\"");
    let plain = format!("{key}\"");
    let start = text
        .find(&needle)
        .map(|i| i + needle.len())
        .or_else(|| text.find(&plain).map(|i| i + plain.len()))?;
    let rest = text[start..].trim_start_matches([' ', '\t', ':', '\\', '"']);
    let end = rest.find(['"', '\\']).unwrap_or(rest.len());
    let value = &rest[..end];
    plausible_name(value).then(|| value.to_string())
}

/// Queue names and message ids as oslo makes them: short, no quotes or spaces.
fn plausible_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '@'))
}

/// oslo's `version_is_compatible(implemented, requested)`: same major, requested minor
/// ≤ implemented minor, revision ≤ when minors are equal. `Err` carries the Python
/// exception (`IndexError`/`ValueError`) the same input raises in oslo.
pub fn version_is_compatible(implemented: &str, requested: &str) -> Result<bool, (String, String)> {
    let parse = |v: &str| -> Result<(i64, i64, i64), (String, String)> {
        let parts: Vec<&str> = v.split('.').collect();
        let int =
            |s: &str| crate::py::int::int_i64(s).map_err(|e| ("ValueError".to_string(), e.message));
        if parts.len() < 2 {
            return Err(("IndexError".into(), "list index out of range".into()));
        }
        let rev = parts.get(2).map(|r| int(r)).transpose()?.unwrap_or(0);
        Ok((int(parts[0])?, int(parts[1])?, rev))
    };
    let (rmaj, rmin, rrev) = parse(requested)?;
    let (imaj, imin, irev) = parse(implemented)?;
    Ok(rmaj == imaj && rmin <= imin && !(rmin == imin && rrev > irev))
}

/// A string header value (long or short string), if present.
fn header_str(headers: &FieldTable, key: &str) -> Option<String> {
    match headers.inner().get(key)? {
        AMQPValue::LongString(s) => Some(String::from_utf8_lossy(s.as_bytes()).into_owned()),
        AMQPValue::ShortString(s) => Some(s.as_str().to_string()),
        _ => None,
    }
}

/// Why a body could not be inflated.
#[derive(Debug)]
pub enum Inflate {
    /// Unsupported codec or a broken stream.
    Failed(String),
    /// More than the bound once inflated (a zlib bomb, or just too large); the
    /// inflated text up to the bound, to find who to answer.
    TooLarge(Vec<u8>),
}

/// Inflate a body compressed with a kombu codec, up to `max_bytes`. Only zlib
/// (`application/x-gzip`) is available.
pub fn decompress(mime: &str, body: &[u8], max_bytes: u64) -> Result<Vec<u8>, Inflate> {
    if mime != COMPRESSION_ZLIB && mime != "application/x-zlib" && mime != "zlib" && mime != "gzip"
    {
        return Err(Inflate::Failed(format!("unsupported compression {mime:?}")));
    }
    let mut out = Vec::new();
    ZlibDecoder::new(body)
        .take(max_bytes + 1)
        .read_to_end(&mut out)
        .map_err(|e| Inflate::Failed(format!("cannot inflate {mime} body: {e}")))?;
    if out.len() as u64 > max_bytes {
        out.truncate(usize::try_from(max_bytes).unwrap_or(usize::MAX));
        return Err(Inflate::TooLarge(out));
    }
    Ok(out)
}

/// `zlib.compress(body)`, what kombu's `gzip` codec sends.
pub fn compress_zlib(body: &[u8]) -> Vec<u8> {
    let mut enc = ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(body).expect("writing to a Vec cannot fail");
    enc.finish().expect("writing to a Vec cannot fail")
}

/// `{"oslo.version": "2.0", "oslo.message": "<inner as JSON>"}`, serialized.
pub fn encode_envelope(inner: &Value) -> Vec<u8> {
    let mut outer = Map::new();
    outer.insert(VERSION_KEY.into(), Value::String(ENVELOPE_VERSION.into()));
    outer.insert(MESSAGE_KEY.into(), Value::String(inner.to_string()));
    Value::Object(outer).to_string().into_bytes()
}

/// A fresh `uuid4().hex`.
pub fn new_unique_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// The inner reply dict: `{result, failure, ending, _msg_id, _unique_id}` (heartbeat when
/// `ending` is false, with null result and failure).
pub fn reply_message(msg_id: &str, result: Value, failure: Option<String>, ending: bool) -> Value {
    let mut m = Map::new();
    m.insert("result".into(), result);
    m.insert("failure".into(), failure.map_or(Value::Null, Value::String));
    m.insert("ending".into(), Value::Bool(ending));
    m.insert("_msg_id".into(), Value::String(msg_id.into()));
    m.insert("_unique_id".into(), Value::String(new_unique_id()));
    Value::Object(m)
}

/// The properties of every message oslo publishes (no `expiration` on replies):
/// `application/json`, `utf-8`, persistent, priority 0, headers `{}` or the compression header.
pub fn reply_properties(compressed: bool) -> BasicProperties {
    let mut headers = FieldTable::default();
    if compressed {
        headers.insert(
            COMPRESSION_HEADER.into(),
            AMQPValue::LongString(COMPRESSION_ZLIB.into()),
        );
    }
    BasicProperties::default()
        .with_content_type(CONTENT_TYPE_JSON.into())
        .with_content_encoding(CONTENT_ENCODING_UTF8.into())
        .with_delivery_mode(2)
        .with_priority(0)
        .with_headers(headers)
}

/// Body and properties of a reply, enveloped and optionally compressed.
pub fn encode_reply(inner: &Value, compressed: bool) -> (Vec<u8>, BasicProperties) {
    let body = encode_envelope(inner);
    let body = if compressed {
        compress_zlib(&body)
    } else {
        body
    };
    (body, reply_properties(compressed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope(inner: &Value) -> Vec<u8> {
        encode_envelope(inner)
    }

    #[test]
    fn decodes_enveloped_call() {
        let inner = json!({
            "method": "select_destinations", "args": {"a": 1}, "version": "4.5",
            "_msg_id": "m1", "_reply_q": "reply_x", "_timeout": 60, "_unique_id": "u1",
            "_context_request_id": "req-1", "_context_auth_token": "tok",
        });
        let r = decode_request(
            Some(CONTENT_TYPE_JSON),
            None,
            &envelope(&inner),
            DEFAULT_MAX_MESSAGE_BYTES,
        )
        .unwrap();
        assert_eq!(r.method, "select_destinations");
        assert_eq!(r.args, *json!({"a": 1}).as_object().unwrap());
        assert_eq!(r.version, "4.5");
        assert_eq!(r.namespace, None);
        assert!(r.is_call());
        assert_eq!(r.reply_q.as_deref(), Some("reply_x"));
        assert_eq!(r.unique_id.as_deref(), Some("u1"));
        assert_eq!(r.context.request_id(), Some("req-1"));
        assert_eq!(r.context.auth_token(), Some("tok"));
        assert_eq!(r.heartbeat_interval(), Some(Duration::from_secs(30)));
    }

    #[test]
    fn legacy_message_and_defaults() {
        let body = json!({"method": "ping", "namespace": "baseapi"}).to_string();
        let r = decode_request(
            Some(CONTENT_TYPE_JSON),
            None,
            body.as_bytes(),
            DEFAULT_MAX_MESSAGE_BYTES,
        )
        .unwrap();
        assert_eq!(r.version, "1.0");
        assert!(r.args.is_empty());
        assert_eq!(r.namespace.as_deref(), Some("baseapi"));
        assert!(!r.is_call());
    }

    #[test]
    fn compressed_body() {
        let inner = json!({"method": "m", "args": {}});
        let body = compress_zlib(&envelope(&inner));
        let r = decode_request(
            Some(CONTENT_TYPE_JSON),
            Some(COMPRESSION_ZLIB),
            &body,
            DEFAULT_MAX_MESSAGE_BYTES,
        )
        .unwrap();
        assert_eq!(r.method, "m");
        let err = decode_request(
            Some(CONTENT_TYPE_JSON),
            Some("application/x-bz2"),
            &body,
            DEFAULT_MAX_MESSAGE_BYTES,
        )
        .unwrap_err();
        assert!(err.reason.contains("unsupported compression"));
    }

    #[test]
    fn errors_keep_reply_info_when_possible() {
        // Not JSON at all: nothing to reply to.
        let e = decode_request(
            Some(CONTENT_TYPE_JSON),
            None,
            b"\xff not json",
            DEFAULT_MAX_MESSAGE_BYTES,
        )
        .unwrap_err();
        assert!(e.reply_target().is_none());
        // Envelope fine, inner JSON broken: the ids are scanned out of the text.
        let outer = json!({"oslo.version": "2.0",
            "oslo.message": "{\"_msg_id\": \"abc123\", \"_reply_q\": \"reply_q1\", \"method\": "});
        let e = decode_request(
            Some(CONTENT_TYPE_JSON),
            None,
            outer.to_string().as_bytes(),
            DEFAULT_MAX_MESSAGE_BYTES,
        )
        .unwrap_err();
        assert_eq!(e.reply_target(), Some(("abc123", "reply_q1")));
        // Raw broken body with an escaped inner document.
        let raw = r#"{"oslo.version": "2.0", "oslo.message": "{\"_msg_id\": \"abc\", \"_reply_q\": \"reply_9\", "#;
        let e = decode_request(
            Some(CONTENT_TYPE_JSON),
            None,
            raw.as_bytes(),
            DEFAULT_MAX_MESSAGE_BYTES,
        )
        .unwrap_err();
        assert_eq!(e.reply_target(), Some(("abc", "reply_9")));
        // Wrong content type, otherwise fine.
        let inner = json!({"method": "m", "_msg_id": "m2", "_reply_q": "reply_2"});
        let e = decode_request(
            Some("text/plain"),
            None,
            &envelope(&inner),
            DEFAULT_MAX_MESSAGE_BYTES,
        )
        .unwrap_err();
        assert_eq!(e.reply_target(), Some(("m2", "reply_2")));
        // Missing method.
        let inner = json!({"args": {}, "_msg_id": "m3", "_reply_q": "reply_3"});
        let e = decode_request(
            Some(CONTENT_TYPE_JSON),
            None,
            &envelope(&inner),
            DEFAULT_MAX_MESSAGE_BYTES,
        )
        .unwrap_err();
        assert_eq!(e.reply_target(), Some(("m3", "reply_3")));
        // Bad envelope version.
        let outer = json!({"oslo.version": "3.0", "oslo.message": "{}"});
        let e = decode_request(
            Some(CONTENT_TYPE_JSON),
            None,
            outer.to_string().as_bytes(),
            DEFAULT_MAX_MESSAGE_BYTES,
        )
        .unwrap_err();
        assert!(e.reason.contains("envelope version, 3.0"));
    }

    #[test]
    fn heartbeat_interval_follows_oslo_watchdog() {
        let hb = |v: Value| heartbeat_interval(Some(&v));
        assert_eq!(hb(json!(60)), Some(Duration::from_secs(30)));
        assert_eq!(hb(json!(4)), Some(Duration::from_secs(2)));
        assert_eq!(hb(json!(2)), Some(Duration::from_secs(1)));
        assert_eq!(hb(json!(3.9)), Some(Duration::from_secs_f64(1.5)));
        assert_eq!(hb(json!(1)), None);
        assert_eq!(hb(json!(1.99)), None);
        assert_eq!(hb(json!(0)), None);
        assert_eq!(hb(json!(-10)), None);
        assert_eq!(hb(json!("10")), Some(Duration::from_secs(5)));
        assert_eq!(hb(json!("10.5")), None);
        assert_eq!(hb(json!(true)), None);
        assert_eq!(hb(Value::Null), None);
        assert_eq!(heartbeat_interval(None), None);
    }

    #[test]
    fn version_compatibility() {
        let c = |i, r| version_is_compatible(i, r).unwrap();
        assert!(c("4.5", "4.0"));
        assert!(c("4.5", "4.5"));
        assert!(!c("4.5", "4.6"));
        assert!(!c("4.5", "5.0"));
        assert!(!c("4.5", "3.9"));
        assert!(c("2.0", "2.0"));
        assert!(c("2.0", "2.0.0"));
        assert!(!c("2.0", "2.0.1"));
        assert_eq!(
            version_is_compatible("4.5", "4").unwrap_err().0,
            "IndexError"
        );
        assert_eq!(
            version_is_compatible("4.5", "4.x").unwrap_err().0,
            "ValueError"
        );
    }

    #[test]
    fn reply_encoding() {
        let inner = reply_message("m1", json!([1]), None, true);
        let (body, props) = encode_reply(&inner, false);
        let outer: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(outer["oslo.version"], "2.0");
        let back: Value = serde_json::from_str(outer["oslo.message"].as_str().unwrap()).unwrap();
        assert_eq!(back["result"], json!([1]));
        assert_eq!(back["failure"], Value::Null);
        assert_eq!(back["ending"], true);
        assert_eq!(back["_unique_id"].as_str().unwrap().len(), 32);
        assert_eq!(props.delivery_mode(), &Some(2));
        assert!(props.expiration().is_none());

        let (zbody, zprops) = encode_reply(&inner, true);
        assert_eq!(
            decompress(COMPRESSION_ZLIB, &zbody, DEFAULT_MAX_MESSAGE_BYTES).unwrap(),
            body
        );
        let h = zprops.headers().as_ref().unwrap();
        assert_eq!(
            header_str(h, COMPRESSION_HEADER).as_deref(),
            Some(COMPRESSION_ZLIB)
        );
    }

    #[test]
    fn a_message_over_the_bound_is_refused_unparsed_and_still_answered() {
        let mut inner = json!({"method": "select_destinations", "args": {"pad": "x".repeat(4096)},
            "_msg_id": "m1", "_reply_q": "reply_q1"});
        let body = envelope(&inner);
        let e = decode_request(Some(CONTENT_TYPE_JSON), None, &body, 1024).unwrap_err();
        assert!(e.reason.contains("larger than 1024 bytes"), "{}", e.reason);
        assert_eq!(e.reply_target(), Some(("m1", "reply_q1")));
        // A small compressed body that inflates past the bound (a zlib bomb).
        inner["args"]["pad"] = json!("y".repeat(1 << 20));
        let bomb = compress_zlib(&envelope(&inner));
        assert!(bomb.len() < 8192);
        let e = decode_request(
            Some(CONTENT_TYPE_JSON),
            Some(COMPRESSION_ZLIB),
            &bomb,
            64 * 1024,
        )
        .unwrap_err();
        assert!(e.reason.contains("once decompressed"), "{}", e.reason);
        // Under the bound, the same message decodes.
        assert!(decode_request(
            Some(CONTENT_TYPE_JSON),
            Some(COMPRESSION_ZLIB),
            &bomb,
            2 << 20
        )
        .is_ok());
    }
}
