// SPDX-License-Identifier: Apache-2.0
//! The recording of `select_destinations` calls and their answers
//! (`[nova_scheduler_rs] record_calls`): an append-only, size-bounded, rotating,
//! gzip-compressed file of JSON lines that `nova-scheduler-rs replay` reads back.
//!
//! The first line of every file names the format; then come `call` records (the
//! RPC context and arguments as received, secrets removed) and `answer` records
//! (what an answering scheduler said of each instance), joined by the call's id.
//! Writing never waits on the disk: records go over a bounded channel to one
//! writer thread, and a record that finds the channel full is dropped and counted.

use crate::scheduler::compare::Answer;
use chrono::{DateTime, SecondsFormat, Utc};
use flate2::write::GzEncoder;
use flate2::Compression;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tracing::warn;

/// The `format` of the first line of the files this version writes and reads.
pub const FORMAT: &str = "nova-scheduler-rs recording 1";

/// Records waiting for the writer; beyond this they are dropped, never waited for.
const CHANNEL_RECORDS: usize = 10_000;
/// The writer flushes at least this often…
const FLUSH_EVERY: Duration = Duration::from_secs(1);
/// …and after this many records.
const FLUSH_RECORDS: usize = 1_000;
/// Warnings of the same kind (dropped records, write errors) at most this often.
const WARN_EVERY: Duration = Duration::from_secs(60);
/// How deep into `args` secrets are looked for; deeper values are not recorded.
const MAX_DEPTH: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Format { path: PathBuf, reason: String },
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> RecordingError + '_ {
    move |source| RecordingError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Who answered a recorded call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AnsweredBy {
    /// nova's own nova-scheduler (seen by the shadow process).
    #[serde(rename = "nova")]
    Nova,
    /// This daemon.
    #[serde(rename = "nova-scheduler-rs")]
    Daemon,
}

/// Where and how much to record.
#[derive(Debug, Clone)]
pub struct RecorderOptions {
    /// The live file; rotated files are `path.1` (newest) … `path.<keep>`.
    pub path: PathBuf,
    /// Compressed bytes of one file before it is rotated (a file may end past it by
    /// what the compressor held when the bound was crossed: a deflate block).
    pub max_bytes: u64,
    /// Rotated files kept beside the live one (0: only the live file).
    pub keep: u32,
    /// The host named in each file's first line.
    pub host: String,
}

/// One record on its way to the writer thread: values are serialized there, not on
/// the caller's path.
enum Message {
    Call {
        id: u64,
        at: DateTime<Utc>,
        method: String,
        version: String,
        context: Map<String, Value>,
        args: Map<String, Value>,
    },
    Answer {
        id: u64,
        at: DateTime<Utc>,
        by: AnsweredBy,
        instances: Vec<(String, Answer)>,
    },
}

/// The writing end of a recording. Shared by the callers (`Arc`); the file is
/// finished (gzip trailer written) by [`Recorder::close`] or when it is dropped.
pub struct Recorder {
    sender: Mutex<Option<SyncSender<Message>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    next_id: AtomicU64,
    dropped: AtomicU64,
    counters: Arc<WriterCounters>,
    drop_warning: Mutex<RateLimit>,
}

/// What the writer thread reports back.
#[derive(Default)]
struct WriterCounters {
    written: AtomicU64,
    write_errors: AtomicU64,
}

impl Recorder {
    /// Opens the recording at `options.path`: a file already there is rotated away
    /// first (a file left by a crash ends in a gzip member without its trailer,
    /// which cannot be continued), then a new one is started with its format line.
    pub fn open(options: RecorderOptions) -> Result<Arc<Recorder>, RecordingError> {
        Self::open_with_capacity(options, CHANNEL_RECORDS)
    }

    fn open_with_capacity(
        options: RecorderOptions,
        capacity: usize,
    ) -> Result<Arc<Recorder>, RecordingError> {
        if options.path.exists() {
            rotate(&options.path, options.keep)?;
        }
        let run = uuid::Uuid::new_v4().to_string();
        let live = LiveFile::create(&options, &run)?;
        let counters = Arc::new(WriterCounters::default());
        let (sender, receiver) = std::sync::mpsc::sync_channel(capacity);
        let writer = Writer {
            options,
            run,
            live: Some(live),
            counters: Arc::clone(&counters),
            error_warning: RateLimit::default(),
            last_reopen: None,
        };
        let handle = std::thread::Builder::new()
            .name("recording".into())
            .spawn(move || writer.run(receiver))
            .map_err(|source| RecordingError::Io {
                path: PathBuf::from("(recording writer thread)"),
                source,
            })?;
        Ok(Arc::new(Recorder {
            sender: Mutex::new(Some(sender)),
            writer: Mutex::new(Some(handle)),
            next_id: AtomicU64::new(1),
            dropped: AtomicU64::new(0),
            counters,
            drop_warning: Mutex::new(RateLimit::default()),
        }))
    }

    /// Records a call as received; returns its id, which its answers name.
    pub fn call(
        &self,
        at: DateTime<Utc>,
        method: &str,
        version: &str,
        context: &Map<String, Value>,
        args: &Map<String, Value>,
    ) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.send(Message::Call {
            id,
            at,
            method: method.to_string(),
            version: version.to_string(),
            context: context.clone(),
            args: args.clone(),
        });
        id
    }

    /// Records what `by` answered for call `id`, instance by instance.
    pub fn answer(&self, id: u64, by: AnsweredBy, instances: &[(String, Answer)]) {
        self.send(Message::Answer {
            id,
            at: Utc::now(),
            by,
            instances: instances.to_vec(),
        });
    }

    /// Records dropped because the writer was behind (or gone).
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Records the writer has written (compressed, not necessarily flushed yet).
    pub fn written(&self) -> u64 {
        self.counters.written.load(Ordering::Relaxed)
    }

    /// Records lost to write errors.
    pub fn write_errors(&self) -> u64 {
        self.counters.write_errors.load(Ordering::Relaxed)
    }

    fn send(&self, message: Message) {
        let sent = match self.sender.lock().ok().as_deref().and_then(Option::as_ref) {
            Some(sender) => match sender.try_send(message) {
                Ok(()) => return,
                Err(TrySendError::Full(_)) => "the recording writer is behind",
                Err(TrySendError::Disconnected(_)) => "the recording writer has stopped",
            },
            None => "the recording is closed",
        };
        let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
        if self.drop_warning.lock().is_ok_and(|mut w| w.due()) {
            warn!(
                dropped,
                "{sent}: a record was dropped ([nova_scheduler_rs] record_calls)"
            );
        }
    }

    /// Stops the writer after the records already sent, and finishes the file.
    pub fn close(&self) {
        if let Ok(mut sender) = self.sender.lock() {
            sender.take();
        }
        let handle = self.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.close();
    }
}

/// True the first time, then at most once per [`WARN_EVERY`].
#[derive(Default)]
struct RateLimit {
    last: Option<Instant>,
}

impl RateLimit {
    fn due(&mut self) -> bool {
        let now = Instant::now();
        if self
            .last
            .is_some_and(|t| now.duration_since(t) < WARN_EVERY)
        {
            return false;
        }
        self.last = Some(now);
        true
    }
}

/// The file being written, with the count of compressed bytes it holds.
struct LiveFile {
    gz: GzEncoder<Counting>,
    unflushed: usize,
    last_flush: Instant,
}

struct Counting {
    file: File,
    bytes: u64,
}

impl Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl LiveFile {
    /// A new file at `options.path` (which must not exist), with its format line,
    /// flushed so that a reader finds it at once.
    fn create(options: &RecorderOptions, run: &str) -> Result<LiveFile, RecordingError> {
        let path = &options.path;
        let file = File::options()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(io_error(path))?;
        let mut live = LiveFile {
            gz: GzEncoder::new(Counting { file, bytes: 0 }, Compression::fast()),
            unflushed: 0,
            last_flush: Instant::now(),
        };
        let header = json!({
            "format": FORMAT,
            "started_at": rfc3339(Utc::now()),
            "host": options.host,
            "run": run,
        });
        live.line(&header).map_err(io_error(path))?;
        live.flush().map_err(io_error(path))?;
        Ok(live)
    }

    fn line(&mut self, value: &Value) -> std::io::Result<()> {
        let mut text = serde_json::to_vec(value)?;
        text.push(b'\n');
        self.gz.write_all(&text)?;
        self.unflushed += 1;
        Ok(())
    }

    /// A gzip sync flush: everything written so far can be decompressed by a reader.
    fn flush(&mut self) -> std::io::Result<()> {
        self.gz.flush()?;
        self.unflushed = 0;
        self.last_flush = Instant::now();
        Ok(())
    }

    fn bytes(&self) -> u64 {
        self.gz.get_ref().bytes
    }

    /// Writes the gzip trailer.
    fn finish(self) -> std::io::Result<()> {
        let mut inner = self.gz.finish()?;
        inner.flush()
    }
}

/// The writer thread.
struct Writer {
    options: RecorderOptions,
    run: String,
    /// `None` after a write error, until a new file could be started.
    live: Option<LiveFile>,
    counters: Arc<WriterCounters>,
    error_warning: RateLimit,
    last_reopen: Option<Instant>,
}

impl Writer {
    fn run(mut self, receiver: Receiver<Message>) {
        loop {
            let wait = self.live.as_ref().map_or(FLUSH_EVERY, |l| {
                FLUSH_EVERY.saturating_sub(l.last_flush.elapsed())
            });
            match receiver.recv_timeout(wait) {
                Ok(message) => self.write(message),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let flush_due = self.live.as_ref().is_some_and(|l| {
                l.unflushed >= FLUSH_RECORDS
                    || (l.unflushed > 0 && l.last_flush.elapsed() >= FLUSH_EVERY)
            });
            if flush_due {
                let flushed = self.live.as_mut().map(LiveFile::flush);
                if let Some(Err(e)) = flushed {
                    self.failed(&e, 0);
                }
            }
        }
        if let Some(live) = self.live.take() {
            if let Err(e) = live.finish() {
                self.failed(&e, 0);
            }
        }
    }

    fn write(&mut self, message: Message) {
        let value = to_record(message);
        if self.live.is_none() && !self.reopen(true) {
            self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(live) = self.live.as_mut() else {
            return;
        };
        if let Err(e) = live.line(&value) {
            self.failed(&e, 1);
            return;
        }
        self.counters.written.fetch_add(1, Ordering::Relaxed);
        if live.bytes() > self.options.max_bytes {
            let live = self.live.take();
            if let Some(Err(e)) = live.map(LiveFile::finish) {
                self.failed(&e, 0);
            }
            self.reopen(false);
        }
    }

    /// Rotates the files and starts a new one; after a failure, at most once a second.
    fn reopen(&mut self, after_failure: bool) -> bool {
        if after_failure && self.last_reopen.is_some_and(|t| t.elapsed() < FLUSH_EVERY) {
            return false;
        }
        self.last_reopen = Some(Instant::now());
        let started = rotate(&self.options.path, self.options.keep)
            .and_then(|()| LiveFile::create(&self.options, &self.run));
        match started {
            Ok(live) => {
                self.live = Some(live);
                true
            }
            Err(e) => {
                if self.error_warning.due() {
                    warn!(error = %e, "cannot start a new recording file; records are lost until it can");
                }
                false
            }
        }
    }

    /// A write error: the file's gzip stream may be cut, so it is given up (a new
    /// one is started for the next record).
    fn failed(&mut self, e: &std::io::Error, lost: u64) {
        self.counters
            .write_errors
            .fetch_add(lost, Ordering::Relaxed);
        self.live = None;
        if self.error_warning.due() {
            warn!(
                path = %self.options.path.display(),
                error = %e,
                "cannot write the recording of calls; records are lost until a new file is started"
            );
        }
    }
}

/// Moves `path` to `path.1`, `path.1` to `path.2` … up to `path.<keep>`; the oldest
/// beyond `keep` is deleted (with `keep = 0`, `path` itself).
fn rotate(path: &Path, keep: u32) -> Result<(), RecordingError> {
    if keep == 0 {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_error(path)(e)),
            _ => Ok(()),
        };
    }
    for n in (1..keep).rev() {
        let from = numbered(path, n);
        if from.exists() {
            let to = numbered(path, n + 1);
            std::fs::rename(&from, &to).map_err(io_error(&from))?;
        }
    }
    if path.exists() {
        std::fs::rename(path, numbered(path, 1)).map_err(io_error(path))?;
    }
    Ok(())
}

/// `path.<n>`.
pub fn numbered(path: &Path, n: u32) -> PathBuf {
    let mut name = path.as_os_str().to_os_string();
    name.push(format!(".{n}"));
    PathBuf::from(name)
}

fn rfc3339(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

/// The JSON line of a record, secrets removed.
fn to_record(message: Message) -> Value {
    match message {
        Message::Call {
            id,
            at,
            method,
            version,
            context,
            args,
        } => {
            let mut context = Value::Object(context);
            let mut args = Value::Object(args);
            strip_secrets(&mut context, 0);
            strip_secrets(&mut args, 0);
            json!({
                "kind": "call", "id": id, "at": rfc3339(at), "method": method,
                "version": version, "context": context, "args": args,
            })
        }
        Message::Answer {
            id,
            at,
            by,
            instances,
        } => json!({
            "kind": "answer", "id": id, "at": rfc3339(at), "by": by,
            "instances": instances.iter().map(|(uuid, answer)| instance_entry(uuid, answer)).collect::<Vec<_>>(),
        }),
    }
}

fn instance_entry(uuid: &str, answer: &Answer) -> Value {
    let mut entry = serde_json::to_value(answer).unwrap_or_else(|_| json!({"result": "unknown"}));
    if let Value::Object(map) = &mut entry {
        map.insert("instance_uuid".into(), Value::from(uuid));
    }
    entry
}

/// A key whose value is never recorded: oslo's context secrets and anything that
/// looks like a credential.
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    key == "auth_token"
        || key == "service_catalog"
        || ["token", "password", "secret"]
            .iter()
            .any(|word| key.contains(word))
}

/// Removes every secret key from `value`, at any depth up to [`MAX_DEPTH`]; a value
/// nested deeper is replaced by null (it cannot be checked).
pub fn strip_secrets(value: &mut Value, depth: usize) {
    if depth >= MAX_DEPTH {
        *value = Value::Null;
        return;
    }
    match value {
        Value::Object(map) => {
            map.retain(|k, _| !is_secret_key(k));
            for v in map.values_mut() {
                strip_secrets(v, depth + 1);
            }
        }
        Value::Array(items) => {
            for v in items {
                strip_secrets(v, depth + 1);
            }
        }
        _ => {}
    }
}

/// One recorded call with the answers recorded for it, in the order written.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedCall {
    pub id: u64,
    pub at: DateTime<Utc>,
    pub method: String,
    pub version: String,
    pub context: Map<String, Value>,
    pub args: Map<String, Value>,
    pub answers: Vec<RecordedAnswer>,
}

/// One scheduler's answer to a recorded call.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedAnswer {
    pub by: AnsweredBy,
    pub at: DateTime<Utc>,
    pub instances: Vec<(String, Answer)>,
}

impl RecordedCall {
    /// nova's answer when one was recorded, else this daemon's.
    pub fn reference_answer(&self) -> Option<&RecordedAnswer> {
        self.answers
            .iter()
            .find(|a| a.by == AnsweredBy::Nova)
            .or_else(|| self.answers.first())
    }
}

/// What [`read`] found.
#[derive(Debug, Default)]
pub struct Recording {
    /// The calls in recording order.
    pub calls: Vec<RecordedCall>,
    /// What was ignored: a truncated tail, an answer without its call.
    pub warnings: Vec<String>,
}

#[derive(Deserialize)]
struct Header {
    format: String,
    #[serde(default)]
    run: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Line {
    Call {
        id: u64,
        at: DateTime<Utc>,
        method: String,
        version: String,
        #[serde(default)]
        context: Map<String, Value>,
        #[serde(default)]
        args: Map<String, Value>,
    },
    Answer {
        id: u64,
        at: DateTime<Utc>,
        by: AnsweredBy,
        instances: Vec<InstanceLine>,
    },
}

#[derive(Deserialize)]
struct InstanceLine {
    instance_uuid: String,
    #[serde(flatten)]
    answer: Answer,
}

/// Reads recordings. Files of one rotation set (`path.N` … `path.1`, `path`) are
/// read oldest first whatever the order given; sets are read in the order their
/// first file was given. An answer joins its call by id within one writer's run
/// (ids restart with each process), across the files of a rotation set. A file
/// cut short (still being written, or left by a crash) ends at its last whole
/// line, with a warning.
pub fn read(paths: &[PathBuf]) -> Result<Recording, RecordingError> {
    let mut recording = Recording::default();
    let mut joins: HashMap<(String, u64), usize> = HashMap::new();
    for (set, path) in reading_order(paths).into_iter().enumerate() {
        read_file(&path, set, &mut recording, &mut joins)?;
    }
    Ok(recording)
}

/// The paths in reading order: grouped by rotation set, oldest file first.
fn reading_order(paths: &[PathBuf]) -> Vec<PathBuf> {
    let split = |p: &PathBuf| -> (PathBuf, u32) {
        let text = p.to_string_lossy();
        if let Some((base, n)) = text.rsplit_once('.') {
            if let Ok(n) = n.parse::<u32>() {
                if !base.is_empty() && !n.to_string().starts_with('+') {
                    return (PathBuf::from(base), n);
                }
            }
        }
        (p.clone(), 0)
    };
    let mut sets: Vec<(PathBuf, Vec<(u32, PathBuf)>)> = Vec::new();
    for p in paths {
        let (base, n) = split(p);
        match sets.iter_mut().find(|(b, _)| *b == base) {
            Some((_, files)) => files.push((n, p.clone())),
            None => sets.push((base, vec![(n, p.clone())])),
        }
    }
    sets.into_iter()
        .flat_map(|(_, mut files)| {
            files.sort_by_key(|f| std::cmp::Reverse(f.0));
            files.dedup_by(|a, b| a.0 == b.0);
            files.into_iter().map(|(_, p)| p)
        })
        .collect()
}

fn read_file(
    path: &Path,
    set: usize,
    recording: &mut Recording,
    joins: &mut HashMap<(String, u64), usize>,
) -> Result<(), RecordingError> {
    let format_error = |reason: String| RecordingError::Format {
        path: path.to_path_buf(),
        reason,
    };
    let file = File::open(path).map_err(io_error(path))?;
    let mut reader = BufReader::new(flate2::read::MultiGzDecoder::new(file));
    let mut buf = Vec::new();
    let mut number = 0usize;
    let mut run = String::new();
    let mut unjoined = 0usize;
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Err(e) if number == 0 => {
                return Err(format_error(format!("not a recording: {e}")));
            }
            Err(e) => {
                recording.warnings.push(format!(
                    "{}: cut short after line {number} (a file being written, or left by a \
                     crash): the {} decompressed byte(s) after it were ignored ({e})",
                    path.display(),
                    buf.len()
                ));
                break;
            }
            Ok(0) => break,
            Ok(_) if buf.last() != Some(&b'\n') => {
                recording.warnings.push(format!(
                    "{}: the last line ({} byte(s)) has no end: ignored",
                    path.display(),
                    buf.len()
                ));
                break;
            }
            Ok(_) => {}
        }
        number += 1;
        if number == 1 {
            let header: Header = serde_json::from_slice(&buf).map_err(|e| {
                format_error(format!(
                    "the first line is not a recording's format line: {e}"
                ))
            })?;
            if header.format != FORMAT {
                return Err(format_error(format!(
                    "format {:?} is not {FORMAT:?}",
                    header.format
                )));
            }
            // Files without a run id join within the rotation set they belong to.
            run = header.run.unwrap_or_else(|| format!("set {set}"));
            continue;
        }
        let line: Line = serde_json::from_slice(&buf)
            .map_err(|e| format_error(format!("line {number}: {e}")))?;
        match line {
            Line::Call {
                id,
                at,
                method,
                version,
                context,
                args,
            } => {
                joins.insert((run.clone(), id), recording.calls.len());
                recording.calls.push(RecordedCall {
                    id,
                    at,
                    method,
                    version,
                    context,
                    args,
                    answers: Vec::new(),
                });
            }
            Line::Answer {
                id,
                at,
                by,
                instances,
            } => match joins.get(&(run.clone(), id)) {
                Some(&i) => recording.calls[i].answers.push(RecordedAnswer {
                    by,
                    at,
                    instances: instances
                        .into_iter()
                        .map(|l| (l.instance_uuid, l.answer))
                        .collect(),
                }),
                None => unjoined += 1,
            },
        }
    }
    if number == 0 {
        return Err(format_error("empty: no format line".into()));
    }
    if unjoined > 0 {
        recording.warnings.push(format!(
            "{}: {unjoined} answer(s) whose call is not in the files given were ignored",
            path.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "nsrs-recording-{name}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn options(path: &Path, max_bytes: u64, keep: u32) -> RecorderOptions {
        RecorderOptions {
            path: path.to_path_buf(),
            max_bytes,
            keep,
            host: "sched-1".into(),
        }
    }

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => panic!("not an object"),
        }
    }

    fn placed(host: &str) -> Answer {
        Answer::Placed {
            host: host.into(),
            node: format!("{host}.node"),
        }
    }

    #[test]
    fn calls_and_answers_round_trip_and_secrets_are_removed() {
        let dir = scratch("round-trip");
        let path = dir.join("calls.jsonl.gz");
        let recorder = Recorder::open(options(&path, 1 << 30, 2)).unwrap();
        let context = map(json!({
            "auth_token": "gAAAA-secret", "service_catalog": [{"type": "placement"}],
            "user_id": "u1", "request_id": "req-1", "X-Subject-Token": "t", "db_password": "p",
        }));
        let args = map(json!({
            "instance_uuids": ["9f1c4a9e-2d7e-4c35-8f5e-0d6f7f9a1b2c"],
            "spec_obj": {"nova_object.data": {"flavor": {"memory_mb": 512},
                "scheduler_hints": {"admin_secret": "x", "keep": [{"refresh_token": "y", "n": 1}]}}},
        }));
        let at = Utc::now();
        let id = recorder.call(at, "select_destinations", "4.5", &context, &args);
        recorder.answer(
            id,
            AnsweredBy::Daemon,
            &[(
                "9f1c4a9e-2d7e-4c35-8f5e-0d6f7f9a1b2c".into(),
                placed("cmp1"),
            )],
        );
        recorder.answer(
            id,
            AnsweredBy::Nova,
            &[(
                "9f1c4a9e-2d7e-4c35-8f5e-0d6f7f9a1b2c".into(),
                Answer::NoValidHost,
            )],
        );
        recorder.close();
        assert_eq!((recorder.written(), recorder.dropped()), (3, 0));

        let raw = {
            let mut text = String::new();
            std::io::Read::read_to_string(
                &mut flate2::read::MultiGzDecoder::new(File::open(&path).unwrap()),
                &mut text,
            )
            .unwrap();
            text
        };
        for secret in [
            "gAAAA",
            "placement",
            "X-Subject-Token",
            "db_password",
            "admin_secret",
            "refresh_token",
        ] {
            assert!(!raw.contains(secret), "{secret} written: {raw}");
        }
        let first: Value = serde_json::from_str(raw.lines().next().unwrap()).unwrap();
        assert_eq!(first["format"], FORMAT);
        assert_eq!(first["host"], "sched-1");

        let recording = read(std::slice::from_ref(&path)).unwrap();
        assert!(recording.warnings.is_empty(), "{:?}", recording.warnings);
        assert_eq!(recording.calls.len(), 1);
        let call = &recording.calls[0];
        assert_eq!(
            (call.id, call.method.as_str(), call.version.as_str()),
            (id, "select_destinations", "4.5")
        );
        assert_eq!(call.at, at.trunc_subsecs(6));
        assert_eq!(call.context.get("user_id"), Some(&json!("u1")));
        assert!(call.context.get("auth_token").is_none());
        assert_eq!(
            call.args["spec_obj"]["nova_object.data"]["scheduler_hints"],
            json!({"keep": [{"n": 1}]})
        );
        assert_eq!(call.answers.len(), 2);
        assert_eq!(call.answers[0].by, AnsweredBy::Daemon);
        assert_eq!(call.answers[0].instances[0].1, placed("cmp1"));
        // nova's answer is the one to compare with when there is one.
        assert_eq!(call.reference_answer().unwrap().by, AnsweredBy::Nova);
        std::fs::remove_dir_all(dir).unwrap();
    }

    use chrono::SubsecRound;

    #[test]
    fn files_rotate_within_their_bound_and_are_read_oldest_first() {
        let dir = scratch("rotate");
        let path = dir.join("calls.gz");
        // A file left by an earlier run is rotated away, never appended to.
        std::fs::write(&path, b"an earlier run's file").unwrap();
        let recorder = Recorder::open(options(&path, 50_000, 3)).unwrap();
        assert_eq!(
            std::fs::read(numbered(&path, 1)).unwrap(),
            b"an earlier run's file"
        );
        let mut ids = Vec::new();
        for i in 0..6_000u64 {
            // Random-looking payloads so that compression does not hide the volume.
            let noise = [
                uuid::Uuid::new_v4().to_string(),
                uuid::Uuid::new_v4().to_string(),
            ];
            let args = map(json!({"n": i, "noise": noise}));
            let id = recorder.call(Utc::now(), "select_destinations", "4.5", &Map::new(), &args);
            recorder.answer(id, AnsweredBy::Daemon, &[(format!("u{i}"), placed("h"))]);
            ids.push(id);
            if i % 500 == 0 {
                // Let the writer keep up: this test is about rotation, not drops.
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        recorder.close();
        assert_eq!(recorder.dropped(), 0);
        for n in 1..=3 {
            assert!(numbered(&path, n).exists(), "{n}");
        }
        assert!(!numbered(&path, 4).exists());
        for p in [path.clone(), numbered(&path, 2), numbered(&path, 3)] {
            // Each file ends near its bound: past it by what the compressor still
            // held when the bound was crossed (a deflate block, tens of KB at most).
            let len = std::fs::metadata(&p).unwrap().len();
            assert!(len < 50_000 + 48 * 1024, "{}: {len}", p.display());
        }
        // Given in any order, read oldest first: the ids come out in order.
        let given = vec![
            numbered(&path, 1),
            path.clone(),
            numbered(&path, 3),
            numbered(&path, 2),
        ];
        let recording = read(&given).unwrap();
        let read_ids: Vec<u64> = recording.calls.iter().map(|c| c.id).collect();
        assert!(
            read_ids.windows(2).all(|w| w[1] == w[0] + 1),
            "{read_ids:?}"
        );
        assert_eq!(read_ids.last(), ids.last());
        assert!(recording.calls.iter().all(|c| c.answers.len() == 1));
        // The oldest files were deleted: the first id left is well past 1.
        assert!(read_ids[0] > 1);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn keep_zero_keeps_only_the_live_file() {
        let dir = scratch("keep0");
        let path = dir.join("calls.gz");
        let recorder = Recorder::open(options(&path, 20_000, 0)).unwrap();
        for i in 0..5_000u64 {
            if i % 1_000 == 0 {
                std::thread::sleep(Duration::from_millis(20));
            }
            let args = map(json!({"noise": uuid::Uuid::new_v4().to_string(), "i": i}));
            recorder.call(Utc::now(), "select_destinations", "4.5", &Map::new(), &args);
        }
        recorder.close();
        assert!(!numbered(&path, 1).exists());
        let recording = read(&[path]).unwrap();
        assert!(!recording.calls.is_empty() && recording.calls.len() < 5_000);
        // Only the newest records are left, in order, up to the last one.
        assert_eq!(recording.calls.last().map(|c| c.id), Some(5_000));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_being_written_is_read_up_to_the_last_flush() {
        let dir = scratch("live");
        let path = dir.join("calls.gz");
        let recorder = Recorder::open(options(&path, 1 << 30, 1)).unwrap();
        for i in 0..10u64 {
            recorder.call(
                Utc::now(),
                "select_destinations",
                "4.5",
                &Map::new(),
                &map(json!({"i": i})),
            );
        }
        // Within about a second of being sent, every record can be read back.
        let deadline = Instant::now() + Duration::from_secs(5);
        let recording = loop {
            let recording = read(std::slice::from_ref(&path)).unwrap();
            if recording.calls.len() == 10 || Instant::now() > deadline {
                break recording;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        assert_eq!(recording.calls.len(), 10);
        assert!(
            recording.warnings.iter().any(|w| w.contains("cut short")),
            "{:?}",
            recording.warnings
        );
        // A copy cut in the middle of the compressed data reads as far as it goes.
        let bytes = std::fs::read(&path).unwrap();
        let cut = dir.join("cut.gz");
        std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
        let recording = read(&[cut]).unwrap();
        assert!(recording.calls.len() <= 10);
        assert_eq!(recording.warnings.len(), 1, "{:?}", recording.warnings);
        recorder.close();
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_full_channel_drops_and_counts_instead_of_waiting() {
        let dir = scratch("full");
        let path = dir.join("calls.gz");
        let recorder = Recorder::open_with_capacity(options(&path, 1 << 30, 1), 4).unwrap();
        let started = Instant::now();
        for i in 0..20_000u64 {
            recorder.call(
                Utc::now(),
                "select_destinations",
                "4.5",
                &Map::new(),
                &map(json!({"i": i})),
            );
        }
        assert!(started.elapsed() < Duration::from_secs(5));
        recorder.close();
        assert!(recorder.dropped() > 0);
        assert_eq!(recorder.dropped() + recorder.written(), 20_000);
        assert_eq!(
            read(&[path]).unwrap().calls.len() as u64,
            recorder.written()
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn bad_files_are_named() {
        let dir = scratch("bad");
        let plain = dir.join("plain.json");
        std::fs::write(&plain, b"{}\n").unwrap();
        assert!(read(std::slice::from_ref(&plain))
            .unwrap_err()
            .to_string()
            .contains("plain.json"));
        let other = dir.join("other.gz");
        let mut gz = GzEncoder::new(File::create(&other).unwrap(), Compression::fast());
        gz.write_all(b"{\"format\":\"something else 2\"}\n")
            .unwrap();
        gz.finish().unwrap();
        let err = read(std::slice::from_ref(&other)).unwrap_err().to_string();
        assert!(
            err.contains("other.gz") && err.contains("something else 2"),
            "{err}"
        );
        let missing = Recorder::open(options(&dir.join("no/such/dir/calls.gz"), 1, 1));
        assert!(missing.err().unwrap().to_string().contains("no/such/dir"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn rotation_sets_are_ordered_oldest_first() {
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(
            reading_order(&[p("a.gz"), p("b.gz.1"), p("a.gz.2"), p("a.gz.1"), p("b.gz")]),
            vec![p("a.gz.2"), p("a.gz.1"), p("a.gz"), p("b.gz.1"), p("b.gz")]
        );
    }
}
