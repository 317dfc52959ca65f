// SPDX-License-Identifier: Apache-2.0
//! `[nova_scheduler_rs]` bounds on what one message may cost, and where the daemon
//! keeps the record of the calls it is handling (its poison-message guard).
//!
//! nova-scheduler has none of these: its API bounds a multi-create only by the
//! project's `instances` quota, and it acknowledges a message before handling it, so
//! a message that kills it is simply lost. This daemon acknowledges after answering,
//! so a message that kills it would be handed to the next daemon, and the next.

use std::path::PathBuf;

use super::error::ConfigError;
use super::host_state_cache::GROUP;
use super::ini::RawConfig;
use super::reader::Reader;

#[derive(Clone, Debug, PartialEq)]
pub struct GuardsSection {
    /// Instances one `select_destinations` may ask for (the length of
    /// `instance_uuids`, or `RequestSpec.num_instances` without them). A larger
    /// request is answered with NoValidHost naming this option.
    pub max_instances_per_request: u32,
    /// Bytes of one RPC message, before and after decompression. A larger message is
    /// answered with a failure before its JSON is parsed.
    pub max_message_bytes: u64,
    /// A call that was being handled when the daemon died (or was still running when
    /// a shutdown gave up on it) this many times is answered with a failure when it
    /// is delivered again, instead of being handled again. 0 turns the guard off.
    pub max_message_crashes: u32,
    /// Directory of the record of calls in flight (`inflight-<host>/inflight.log`,
    /// a line as a call starts and one as it is answered), read at startup to recognise a call that was in flight
    /// when the daemon died.
    pub state_dir: PathBuf,
}

impl Default for GuardsSection {
    fn default() -> Self {
        GuardsSection {
            max_instances_per_request: 1000,
            max_message_bytes: 2 * 1024 * 1024,
            max_message_crashes: 2,
            state_dir: PathBuf::from("/var/lib/nova-scheduler-rs"),
        }
    }
}

impl GuardsSection {
    pub(crate) fn read(raw: &RawConfig, errors: &mut Vec<ConfigError>) -> Self {
        let d = GuardsSection::default();
        let mut r = Reader::new(raw, GROUP, errors);
        GuardsSection {
            max_instances_per_request: r.int(
                "max_instances_per_request",
                d.max_instances_per_request,
                Some(1),
                None,
            ),
            max_message_bytes: r.int(
                "max_message_bytes",
                d.max_message_bytes,
                Some(64 * 1024),
                None,
            ),
            max_message_crashes: r.int("max_message_crashes", d.max_message_crashes, Some(0), None),
            state_dir: PathBuf::from(r.string("state_dir", &d.state_dir.to_string_lossy())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<GuardsSection, Vec<ConfigError>> {
        let mut raw = RawConfig::new();
        raw.add_str("nova.conf", text).expect("ini");
        let mut errors = Vec::new();
        let section = GuardsSection::read(&raw, &mut errors);
        if errors.is_empty() {
            Ok(section)
        } else {
            Err(errors)
        }
    }

    #[test]
    fn defaults_values_and_bounds() {
        assert_eq!(read("[DEFAULT]\n").unwrap(), GuardsSection::default());
        let s = read(
            "[nova_scheduler_rs]\nmax_instances_per_request = 50\nmax_message_bytes = 65536\n\
             max_message_crashes = 0\nstate_dir = /tmp/x\n",
        )
        .unwrap();
        assert_eq!(s.max_instances_per_request, 50);
        assert_eq!(s.max_message_bytes, 65536);
        assert_eq!(s.max_message_crashes, 0);
        assert_eq!(s.state_dir, PathBuf::from("/tmp/x"));
        assert!(read("[nova_scheduler_rs]\nmax_instances_per_request = 0\n").is_err());
        assert!(read("[nova_scheduler_rs]\nmax_message_bytes = 1000\n").is_err());
    }
}
