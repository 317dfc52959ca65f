// SPDX-License-Identifier: Apache-2.0
//! Where formatted lines go: a file, stderr, syslog. One [`Sinks`] is the fmt layer's
//! writer; each event's line is handed to every sink whole.
//!
//! - File: appended to; before each line the path is checked and the file reopened
//!   when it was moved or removed (oslo's default `WatchedFileHandler`, so logrotate
//!   works without `copytruncate`), and on SIGHUP.
//! - Syslog: RFC 3164 datagrams to `/dev/log`, framed as glibc's `syslog(3)` frames
//!   them for oslo's `OSSysLogHandler` (`<PRI>Mmm dd hh:mm:ss ident: line`). The
//!   maintained crates either are `log` backends rather than `tracing` writers or bring
//!   their own formatting; the framing is a few lines over `UnixDatagram`.
//!
//! A sink that fails writes the line to stderr instead (with one error line saying
//! why), so no line is lost silently.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// glibc's `_PATH_LOG`.
pub const SYSLOG_SOCKET: &str = "/dev/log";

/// An open log file and the identity it had when opened.
struct OpenFile {
    file: File,
    dev: u64,
    ino: u64,
}

/// A log file, reopened when moved.
pub struct FileSink {
    path: PathBuf,
    open: Mutex<Option<OpenFile>>,
}

fn open_append(path: &Path) -> io::Result<OpenFile> {
    let file = OpenOptions::new().create(true).append(true).open(path)?;
    let meta = file.metadata()?;
    Ok(OpenFile {
        file,
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

impl FileSink {
    /// Opens `path` for appending (creating it).
    pub fn open(path: &Path) -> io::Result<FileSink> {
        let open = open_append(path)?;
        Ok(FileSink {
            path: path.to_path_buf(),
            open: Mutex::new(Some(open)),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes and reopens the file (SIGHUP).
    pub fn reopen(&self) -> io::Result<()> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        *open = None;
        *open = Some(open_append(&self.path)?);
        Ok(())
    }

    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let moved = match (&*open, std::fs::metadata(&self.path)) {
            (Some(o), Ok(m)) => m.dev() != o.dev || m.ino() != o.ino,
            _ => true,
        };
        if moved {
            *open = None;
            *open = Some(open_append(&self.path)?);
        }
        match &mut *open {
            Some(o) => o.file.write_all(line),
            None => Err(io::Error::other("not open")),
        }
    }
}

/// Syslog severity of a level (oslo's `SYSLOG_MAP`).
pub fn syslog_severity(level: &Level) -> u8 {
    match *level {
        Level::ERROR => 3,
        Level::WARN => 4,
        Level::INFO => 6,
        Level::DEBUG | Level::TRACE => 7,
    }
}

/// One RFC 3164 datagram as glibc's `syslog(3)` builds it (no hostname, no pid:
/// oslo opens syslog without `LOG_PID`); the line's trailing newline is dropped.
pub fn syslog_frame(
    facility: u8,
    level: &Level,
    ident: &str,
    time: chrono::DateTime<chrono::Local>,
    line: &[u8],
) -> Vec<u8> {
    let pri = u16::from(facility) * 8 + u16::from(syslog_severity(level));
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let mut out = format!("<{pri}>{} {ident}: ", time.format("%b %e %H:%M:%S")).into_bytes();
    out.extend_from_slice(line);
    out
}

/// `/dev/log`.
pub struct SyslogSink {
    socket: UnixDatagram,
    path: PathBuf,
    facility: u8,
    ident: String,
}

impl SyslogSink {
    pub fn connect(path: &Path, facility: u8, ident: &str) -> io::Result<SyslogSink> {
        let socket = UnixDatagram::unbound()?;
        socket.connect(path)?;
        Ok(SyslogSink {
            socket,
            path: path.to_path_buf(),
            facility,
            ident: ident.to_string(),
        })
    }

    fn send(&self, level: &Level, line: &[u8]) -> io::Result<()> {
        let frame = syslog_frame(
            self.facility,
            level,
            &self.ident,
            chrono::Local::now(),
            line,
        );
        match self.socket.send(&frame) {
            Ok(_) => Ok(()),
            // syslogd restarted: its socket is new.
            Err(_) => self.socket.send_to(&frame, &self.path).map(|_| ()),
        }
    }
}

/// One destination of formatted lines.
pub enum Sink {
    Stderr,
    File(Arc<FileSink>),
    Syslog(SyslogSink),
}

impl Sink {
    fn name(&self) -> String {
        match self {
            Sink::Stderr => "stderr".into(),
            Sink::File(f) => format!("log file {}", f.path().display()),
            Sink::Syslog(s) => format!("syslog socket {}", s.path.display()),
        }
    }
}

struct Inner {
    sinks: Vec<Sink>,
    /// Whether a failure of each sink was already reported.
    reported: Vec<AtomicBool>,
}

/// The fmt layer's writer: every line to every sink.
#[derive(Clone)]
pub struct Sinks(Arc<Inner>);

impl Sinks {
    pub fn new(sinks: Vec<Sink>) -> Sinks {
        let reported = sinks.iter().map(|_| AtomicBool::new(false)).collect();
        Sinks(Arc::new(Inner { sinks, reported }))
    }

    fn emit(&self, level: &Level, line: &[u8]) {
        for (i, sink) in self.0.sinks.iter().enumerate() {
            let result = match sink {
                Sink::Stderr => io::stderr().lock().write_all(line),
                Sink::File(f) => f.write_line(line),
                Sink::Syslog(s) => s.send(level, line),
            };
            if let Err(e) = result {
                let mut err = io::stderr().lock();
                if !self.0.reported[i].swap(true, Ordering::Relaxed) {
                    let _ = writeln!(
                        err,
                        "nova-scheduler-rs: cannot write to the {}: {e}; lines go to stderr",
                        sink.name()
                    );
                }
                if !matches!(sink, Sink::Stderr) {
                    let _ = err.write_all(line);
                }
            }
        }
    }
}

/// One event's line, handed to the sinks when the fmt layer is done with it.
pub struct LineWriter<'a> {
    sinks: &'a Sinks,
    level: Level,
    buf: Vec<u8>,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            self.sinks.emit(&self.level, &self.buf);
        }
    }
}

impl<'a> MakeWriter<'a> for Sinks {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> LineWriter<'a> {
        LineWriter {
            sinks: self,
            level: Level::INFO,
            buf: Vec::new(),
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> LineWriter<'a> {
        LineWriter {
            sinks: self,
            level: *meta.level(),
            buf: Vec::with_capacity(256),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn rfc3164_frame_as_glibc_writes_it() {
        let t = chrono::Local.with_ymd_and_hms(2024, 3, 7, 9, 5, 2).unwrap();
        let frame = syslog_frame(1, &Level::WARN, "nova-scheduler", t, b"a line\n");
        assert_eq!(
            String::from_utf8(frame).unwrap(),
            "<12>Mar  7 09:05:02 nova-scheduler: a line"
        );
        let frame = syslog_frame(16, &Level::DEBUG, "x", t, b"d");
        assert!(frame.starts_with(b"<135>Mar  7 "));
        assert_eq!(syslog_frame(3, &Level::ERROR, "x", t, b"")[..4], *b"<27>");
    }

    #[test]
    fn syslog_datagrams_reach_the_socket() {
        let dir = std::env::temp_dir().join(format!("nsrs-syslog-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("log");
        let server = UnixDatagram::bind(&path).unwrap();
        let sinks = Sinks::new(vec![Sink::Syslog(
            SyslogSink::connect(&path, 3, "ident").unwrap(),
        )]);
        {
            let mut w = sinks.make_writer();
            w.write_all(b"hello ").unwrap();
            w.write_all(b"world\n").unwrap();
        }
        let mut buf = [0u8; 256];
        let n = server.recv(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.starts_with("<30>"), "{text}");
        assert!(text.ends_with(" ident: hello world"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_moved_file_is_reopened_at_the_next_line() {
        let dir = std::env::temp_dir().join(format!("nsrs-logfile-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.log");
        let sink = FileSink::open(&path).unwrap();
        sink.write_line(b"one\n").unwrap();
        std::fs::rename(&path, dir.join("s.log.1")).unwrap();
        sink.write_line(b"two\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("s.log.1")).unwrap(),
            "one\n"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
        sink.reopen().unwrap();
        sink.write_line(b"three\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\nthree\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
