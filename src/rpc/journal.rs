// SPDX-License-Identifier: Apache-2.0
//! The record of requests in flight, kept on disk, so that a request that was being
//! handled when the daemon died is recognised when the broker delivers it again.
//!
//! Requests are acknowledged only once answered, so a request that kills the daemon
//! (or hangs it until an operator restarts it) comes back to the next daemon, and the
//! next: a poison message. The record is one append-only file, `inflight.log`: a line
//! `+<id> <deaths> <unix milliseconds>` when a request's handling starts (`<id>` its
//! `_unique_id`, `<deaths>` the deaths it was in flight at before), `-<id>` once it
//! is answered. The `+` lines without their `-` at startup are the requests the
//! previous process died with. A request seen in flight at `max_crashes` deaths is
//! answered with a failure and acknowledged instead of being handled again.
//!
//! A line is one `write(2)` on the reply's path, where a file per request cost a
//! create and an unlink. Once the file passes [`COMPACT_BYTES`] it is rewritten with
//! only what is still in flight or still suspect. The lines are written without
//! fsync: a killed process leaves its writes in the page cache; only a host crash can
//! lose them, and then the guard starts afresh. A line cut short by the death is
//! ignored.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::{info, warn};

/// The record's file in its directory.
const LOG_FILE: &str = "inflight.log";
/// Past this size the record is rewritten with its live lines only (about 13,000
/// requests' worth of lines).
pub const COMPACT_BYTES: u64 = 1 << 20;

/// What to do with a request.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    /// Handle it; [`InflightJournal::finish`] the entry once it is answered.
    Handle(Entry),
    /// It was in flight at this many deaths of the daemon: answer it without
    /// handling it, then [`InflightJournal::finish`] the entry (kept until then, so
    /// that a death while answering it counts too).
    Poison { crashes: u32, entry: Entry },
}

/// A request's `+` line, closed by [`InflightJournal::finish`].
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    id: Option<String>,
}

/// The requests in flight, in one file under one directory.
#[derive(Debug)]
pub struct InflightJournal {
    log: Option<Mutex<Log>>,
    max_crashes: u32,
    max_age: Duration,
}

/// A request's `+` line: the deaths it was in flight at before, and when it started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Started {
    deaths: u32,
    at: u64,
}

impl Started {
    /// The `+` line of request `id` (read back by [`replay`]).
    fn line(&self, id: &str) -> String {
        format!("+{id} {} {}\n", self.deaths, self.at)
    }
}

#[derive(Debug)]
struct Log {
    dir: PathBuf,
    file: File,
    bytes: u64,
    /// Requests being handled now, as their `+` lines say.
    in_flight: HashMap<String, Started>,
    /// Requests found in flight at startup and not delivered again yet; their lines
    /// are kept, with the deaths before the last one, so that another death before
    /// they come back does not count twice.
    suspects: HashMap<String, Started>,
}

impl InflightJournal {
    /// A journal that records nothing and never finds poison.
    pub fn disabled() -> Self {
        InflightJournal {
            log: None,
            max_crashes: 0,
            max_age: Duration::ZERO,
        }
    }

    /// Opens (creating) `dir`, reads what the previous process left there and forgets
    /// entries older than `max_age` (their messages have expired in the broker). A
    /// directory that cannot be used turns the guard off with one warning.
    pub fn open(dir: &Path, max_crashes: u32, max_age: Duration) -> Self {
        if max_crashes == 0 {
            return Self::disabled();
        }
        let log = match Log::open(dir, max_age) {
            Ok(log) => log,
            Err(e) => {
                warn!(
                    dir = %dir.display(), error = %e,
                    "cannot keep the record of requests in flight; a message that kills the \
                     daemon will be handled again when redelivered ([nova_scheduler_rs] state_dir)"
                );
                return Self::disabled();
            }
        };
        if !log.suspects.is_empty() {
            info!(
                requests = log.suspects.len(),
                "requests were in flight when the previous process stopped"
            );
        }
        InflightJournal {
            log: Some(Mutex::new(log)),
            max_crashes,
            max_age,
        }
    }

    /// Records that the request `id` is being handled, or says it is poison.
    pub fn admit(&self, id: Option<&str>) -> Admission {
        let (Some(log), Some(id)) = (&self.log, id.filter(|id| usable_id(id))) else {
            return Admission::Handle(Entry { id: None });
        };
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        // The deaths it was in flight at, the one just past included.
        let crashes = log
            .suspects
            .remove(id)
            .map_or(0, |s| s.deaths.saturating_add(1));
        let started = Started {
            deaths: crashes,
            at: unix_now(),
        };
        let entry = match log.append(&started.line(id)) {
            Ok(()) => {
                log.in_flight.insert(id.to_string(), started);
                Entry {
                    id: Some(id.to_string()),
                }
            }
            Err(e) => {
                warn!(error = %e, dir = %log.dir.display(), "cannot record the request in flight");
                Entry { id: None }
            }
        };
        if crashes >= self.max_crashes {
            return Admission::Poison { crashes, entry };
        }
        Admission::Handle(entry)
    }

    /// The request was answered (or dropped on purpose): it is no longer in flight.
    pub fn finish(&self, entry: Entry) {
        let (Some(log), Some(id)) = (&self.log, entry.id) else {
            return;
        };
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        log.in_flight.remove(&id);
        if let Err(e) = log.append(&format!("-{id}\n")) {
            warn!(error = %e, dir = %log.dir.display(), "cannot record the request answered");
        }
        if log.bytes >= COMPACT_BYTES {
            if let Err(e) = log.compact(self.max_age) {
                warn!(error = %e, dir = %log.dir.display(), "cannot rewrite the record of requests in flight");
            }
        }
    }
}

impl Log {
    /// Reads the record the previous process left (and the one-file-per-request
    /// entries of earlier versions), then rewrites it with the suspects alone (the
    /// rewrite forgets those older than `max_age`).
    fn open(dir: &Path, max_age: Duration) -> std::io::Result<Log> {
        std::fs::create_dir_all(dir)?;
        let mut left: HashMap<String, Started> = HashMap::new();
        for item in std::fs::read_dir(dir)? {
            let item = item?;
            let name = item.file_name().to_string_lossy().into_owned();
            if !usable_id(&name) {
                continue;
            }
            let path = item.path();
            let at = item
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_millis() as u64);
            let deaths = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            left.insert(name, Started { deaths, at });
            std::fs::remove_file(&path)?;
        }
        match std::fs::read_to_string(dir.join(LOG_FILE)) {
            Ok(text) => replay(&text, &mut left),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let mut log = Log {
            dir: dir.to_path_buf(),
            file: File::open("/dev/null")?,
            bytes: 0,
            in_flight: HashMap::new(),
            suspects: left,
        };
        log.compact(max_age)?;
        Ok(log)
    }

    fn append(&mut self, line: &str) -> std::io::Result<()> {
        self.file.write_all(line.as_bytes())?;
        self.bytes += line.len() as u64;
        Ok(())
    }

    /// Writes the live lines to a new file and puts it in place of the record.
    fn compact(&mut self, max_age: Duration) -> std::io::Result<()> {
        let now = unix_now();
        self.suspects
            .retain(|_, s| now.saturating_sub(s.at) <= max_age.as_millis() as u64);
        let mut text = String::new();
        for (id, s) in self.suspects.iter().chain(&self.in_flight) {
            text.push_str(&s.line(id));
        }
        let path = self.dir.join(LOG_FILE);
        let next = self.dir.join(format!("{LOG_FILE}.new"));
        std::fs::write(&next, &text)?;
        std::fs::rename(&next, &path)?;
        self.file = OpenOptions::new().append(true).open(&path)?;
        self.bytes = text.len() as u64;
        Ok(())
    }
}

/// The `+` lines of `text` that no `-` line closes, added to `open`. A line that is
/// not one of the two forms (cut short by a death) is skipped.
fn replay(text: &str, open: &mut HashMap<String, Started>) {
    for line in text.lines() {
        if let Some(id) = line.strip_prefix('-') {
            open.remove(id);
            continue;
        }
        let Some(rest) = line.strip_prefix('+') else {
            continue;
        };
        let mut fields = rest.split(' ');
        let (Some(id), Some(deaths), Some(at), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let (Ok(deaths), Ok(at)) = (deaths.parse(), at.parse()) else {
            continue;
        };
        if usable_id(id) {
            open.insert(id.to_string(), Started { deaths, at });
        }
    }
}

/// Milliseconds since the epoch.
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// oslo's ids are uuid4 hex; anything else is not recorded.
fn usable_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("nsrs-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn a_request_in_flight_at_a_death_is_poison_after_max_crashes() {
        let dir = tmp("poison");
        // First process: two requests start, one is answered, then it dies.
        let first = InflightJournal::open(&dir, 2, DAY);
        let Admission::Handle(answered) = first.admit(Some("aaaa")) else {
            panic!("new request refused")
        };
        let Admission::Handle(_lost) = first.admit(Some("bbbb")) else {
            panic!("new request refused")
        };
        first.finish(answered);
        drop(first);
        // Second process: "bbbb" comes back once (one death): handled again, and the
        // process dies again with it.
        let second = InflightJournal::open(&dir, 2, DAY);
        assert!(matches!(second.admit(Some("aaaa")), Admission::Handle(_)));
        assert!(matches!(second.admit(Some("bbbb")), Admission::Handle(_)));
        drop(second);
        // Third process: two deaths with "bbbb" in flight.
        let third = InflightJournal::open(&dir, 2, DAY);
        let Admission::Poison { crashes: 2, entry } = third.admit(Some("bbbb")) else {
            panic!("two deaths with it in flight: poison")
        };
        drop(third);
        // A death while answering it counts as well.
        let fourth = InflightJournal::open(&dir, 2, DAY);
        let Admission::Poison {
            crashes: 3,
            entry: again,
        } = fourth.admit(Some("bbbb"))
        else {
            panic!("poison again, one more death")
        };
        fourth.finish(again);
        let _ = entry;
        // Answered as poison: its entry is gone.
        let fifth = InflightJournal::open(&dir, 2, DAY);
        assert!(matches!(fifth.admit(Some("bbbb")), Admission::Handle(_)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn one_death_is_enough_by_default_and_old_entries_are_forgotten() {
        let dir = tmp("old");
        let first = InflightJournal::open(&dir, 1, DAY);
        let _ = first.admit(Some("cccc"));
        drop(first);
        let j = InflightJournal::open(&dir, 1, DAY);
        let Admission::Poison { crashes: 1, entry } = j.admit(Some("cccc")) else {
            panic!("one death is enough")
        };
        j.finish(entry);
        let second = InflightJournal::open(&dir, 1, DAY);
        let _ = second.admit(Some("dddd"));
        drop(second);
        // Its message expired in the broker long ago: nothing to recognise.
        std::thread::sleep(Duration::from_millis(20));
        let third = InflightJournal::open(&dir, 1, Duration::from_millis(10));
        assert!(matches!(third.admit(Some("dddd")), Admission::Handle(_)));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn ids_that_are_not_file_names_and_unusable_directories_disable_the_record() {
        let dir = tmp("ids");
        let j = InflightJournal::open(&dir, 1, DAY);
        assert_eq!(
            j.admit(Some("../../etc/passwd")),
            Admission::Handle(Entry { id: None })
        );
        assert_eq!(j.admit(None), Admission::Handle(Entry { id: None }));
        let _ = std::fs::remove_dir_all(&dir);
        let unusable = InflightJournal::open(Path::new("/proc/nsrs-no-such-dir"), 1, DAY);
        assert!(unusable.log.is_none());
        assert!(InflightJournal::open(&dir, 0, DAY).log.is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_record_is_rewritten_past_its_size_with_what_is_still_in_flight() {
        let dir = tmp("compact");
        let first = InflightJournal::open(&dir, 1, DAY);
        let Admission::Handle(kept) = first.admit(Some("keep-me")) else {
            panic!("new request refused")
        };
        let mut n = 0u64;
        let mut before = 0;
        loop {
            let id = format!("{n:032x}");
            let Admission::Handle(e) = first.admit(Some(&id)) else {
                panic!("new request refused")
            };
            first.finish(e);
            n += 1;
            let size = std::fs::metadata(dir.join(LOG_FILE)).unwrap().len();
            if size < before {
                // Rewritten: only the request still in flight is left.
                assert!(size < 100, "{size} bytes after the rewrite");
                break;
            }
            assert!(size < COMPACT_BYTES + 200, "never rewritten: {size} bytes");
            before = size;
        }
        assert!(n > 1000, "rewritten after {n} requests");
        let _ = kept;
        drop(first);
        // The request in flight across the rewrite is still recognised.
        let second = InflightJournal::open(&dir, 1, DAY);
        assert!(matches!(
            second.admit(Some("keep-me")),
            Admission::Poison { crashes: 1, .. }
        ));
        assert!(matches!(
            second.admit(Some(&format!("{:032x}", n - 1))),
            Admission::Handle(_)
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_line_cut_short_is_skipped_and_older_entries_are_read() {
        let dir = tmp("cut");
        std::fs::create_dir_all(&dir).unwrap();
        let now = unix_now();
        std::fs::write(
            dir.join(LOG_FILE),
            format!("+aaaa 0 {now}\n+bbbb 0 {now}\n-aaaa\n+cccc 0 {now}\n-cc"),
        )
        .unwrap();
        // An entry as a file of its own, as earlier versions kept them.
        std::fs::write(dir.join("dddd"), "1").unwrap();
        let j = InflightJournal::open(&dir, 2, DAY);
        assert!(matches!(j.admit(Some("aaaa")), Admission::Handle(_)));
        assert!(matches!(j.admit(Some("bbbb")), Admission::Handle(_)));
        // The cut `-cc` closes nothing: cccc was in flight.
        assert!(matches!(j.admit(Some("cccc")), Admission::Handle(_)));
        assert!(matches!(
            j.admit(Some("dddd")),
            Admission::Poison { crashes: 2, .. }
        ));
        assert!(!dir.join("dddd").exists());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
