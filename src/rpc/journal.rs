// SPDX-License-Identifier: Apache-2.0
//! The record of requests in flight, kept on disk, so that a request that was being
//! handled when the daemon died is recognised when the broker delivers it again.
//!
//! Requests are acknowledged only once answered, so a request that kills the daemon
//! (or hangs it until an operator restarts it) comes back to the next daemon, and the
//! next: a poison message. One small file per request, named by its `_unique_id`,
//! exists while it is handled; the files found at startup are the requests the
//! previous process died with, and the number a file holds counts the deaths before
//! that one. A request seen in flight at `max_crashes` deaths is answered with a
//! failure and acknowledged instead of being handled again.
//!
//! The files are written without fsync: a killed process leaves its writes in the
//! page cache; only a host crash can lose them, and then the guard starts afresh.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use tracing::{info, warn};

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

/// A request's file, removed by [`InflightJournal::finish`].
#[derive(Debug, PartialEq, Eq)]
pub struct Entry {
    path: Option<PathBuf>,
}

/// The requests in flight, on disk under one directory.
#[derive(Debug)]
pub struct InflightJournal {
    dir: Option<PathBuf>,
    max_crashes: u32,
    /// Requests found in flight at startup: id → deaths seen while handling it.
    suspects: Mutex<HashMap<String, u32>>,
}

impl InflightJournal {
    /// A journal that records nothing and never finds poison.
    pub fn disabled() -> Self {
        InflightJournal {
            dir: None,
            max_crashes: 0,
            suspects: Mutex::new(HashMap::new()),
        }
    }

    /// Opens (creating) `dir`, reads what the previous process left there and forgets
    /// entries older than `max_age` (their messages have expired in the broker). A
    /// directory that cannot be used turns the guard off with one warning.
    pub fn open(dir: &Path, max_crashes: u32, max_age: Duration) -> Self {
        if max_crashes == 0 {
            return Self::disabled();
        }
        let suspects = match load(dir, max_age) {
            Ok(found) => found,
            Err(e) => {
                warn!(
                    dir = %dir.display(), error = %e,
                    "cannot keep the record of requests in flight; a message that kills the \
                     daemon will be handled again when redelivered ([nova_scheduler_rs] state_dir)"
                );
                return Self::disabled();
            }
        };
        if !suspects.is_empty() {
            info!(
                requests = suspects.len(),
                "requests were in flight when the previous process stopped"
            );
        }
        InflightJournal {
            dir: Some(dir.to_path_buf()),
            max_crashes,
            suspects: Mutex::new(suspects),
        }
    }

    /// Records that the request `id` is being handled, or says it is poison.
    pub fn admit(&self, id: Option<&str>) -> Admission {
        let (Some(dir), Some(id)) = (&self.dir, id.filter(|id| usable_id(id))) else {
            return Admission::Handle(Entry { path: None });
        };
        let crashes = self
            .suspects
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id)
            .unwrap_or(0);
        let path = dir.join(id);
        let entry = match std::fs::write(&path, crashes.to_string()) {
            Ok(()) => Entry { path: Some(path) },
            Err(e) => {
                warn!(error = %e, path = %path.display(), "cannot record the request in flight");
                Entry { path: None }
            }
        };
        if crashes >= self.max_crashes {
            return Admission::Poison { crashes, entry };
        }
        Admission::Handle(entry)
    }

    /// The request was answered (or dropped on purpose): it is no longer in flight.
    pub fn finish(&self, entry: Entry) {
        if let Some(path) = entry.path {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// oslo's ids are uuid4 hex; anything else is not used as a file name.
fn usable_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
}

/// The entries the previous process left: id → its deaths, this one included.
fn load(dir: &Path, max_age: Duration) -> std::io::Result<HashMap<String, u32>> {
    std::fs::create_dir_all(dir)?;
    let now = SystemTime::now();
    let mut found = HashMap::new();
    for item in std::fs::read_dir(dir)? {
        let item = item?;
        let path = item.path();
        let name = item.file_name().to_string_lossy().into_owned();
        let age = item
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default();
        if !usable_id(&name) || age > max_age {
            let _ = std::fs::remove_file(&path);
            continue;
        }
        let before: u32 = std::fs::read_to_string(&path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        found.insert(name, before.saturating_add(1));
    }
    // A probe write: a directory we can read but not write is no journal.
    let probe = dir.join(".probe");
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(probe)?;
    Ok(found)
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
            Admission::Handle(Entry { path: None })
        );
        assert_eq!(j.admit(None), Admission::Handle(Entry { path: None }));
        let _ = std::fs::remove_dir_all(&dir);
        let unusable = InflightJournal::open(Path::new("/proc/nsrs-no-such-dir"), 1, DAY);
        assert!(unusable.dir.is_none());
        assert_eq!(InflightJournal::open(&dir, 0, DAY).dir, None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
