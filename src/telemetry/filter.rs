// SPDX-License-Identifier: Apache-2.0
//! The level filter from `debug` and `default_log_levels`, as `tracing` directives.
//!
//! `default_log_levels` names Python loggers. Those that have a counterpart here are
//! mapped to its `tracing` target; a name that already is a Rust target (it has `::`,
//! or is one of the crates below) is used as is; any other name (boto, stevedore,
//! dogpile, ...) names nothing in this daemon and is ignored.
//!
//! | Python logger | `tracing` target |
//! |---|---|
//! | `amqp`, `amqplib`, `kombu` | `lapin` |
//! | `sqlalchemy` (and below) | `sqlx` |
//! | `oslo.messaging`, `oslo_messaging` | `nova_scheduler::rpc` |
//! | `requests` | `reqwest` |
//! | `urllib3`, `urllib3.connectionpool`, `requests.packages.urllib3.connectionpool` | `hyper_util` |
//! | `keystoneauth` | `nova_scheduler::placement::auth` |
//! | `nova`, `nova.scheduler` | `nova_scheduler` and `nova_scheduler_rs` |
//! | `nova.scheduler.manager` | `nova_scheduler::manager` |
//! | `nova.scheduler.filters` | `nova_scheduler::filters` |
//! | `nova.scheduler.weights` | `nova_scheduler::weighers` |
//! | `nova.scheduler.host_manager` | `nova_scheduler::state` |
//! | `nova.scheduler.client.report` | `nova_scheduler::placement` |
//! | `nova.notifications` | `nova_scheduler::notifications` |
//!
//! The daemon always quiets `lapin::returned_messages` to errors (see
//! [`QUIET`]); naming that target in `default_log_levels` overrides it.

use crate::config::logging::python_level;
use tracing_subscriber::filter::Directive;

/// Targets whose lines say nothing the daemon does not say better itself: lapin logs
/// every message the broker returns (a reply whose queue is gone) as a warning
/// carrying the whole body; the server logs such a reply once itself, with its
/// request id and size.
pub const QUIET: &str = "lapin::returned_messages=error";

/// Crates whose names are used as targets as they are.
const RUST_CRATES: &[&str] = &[
    "lapin",
    "amq_protocol",
    "sqlx",
    "reqwest",
    "hyper",
    "hyper_util",
    "h2",
    "rustls",
    "tokio",
    "nova_scheduler",
    "nova_scheduler_rs",
];

/// The `tracing` targets of a Python logger name (empty: none here).
pub fn targets_of(logger: &str) -> Vec<String> {
    let logger = logger.trim();
    if logger.contains("::") || RUST_CRATES.contains(&logger) {
        return vec![logger.to_string()];
    }
    let one = |t: &str| vec![t.to_string()];
    match logger {
        "amqp" | "amqplib" | "kombu" => one("lapin"),
        "requests" => one("reqwest"),
        "urllib3" | "urllib3.connectionpool" | "requests.packages.urllib3.connectionpool" => {
            one("hyper_util")
        }
        "oslo.messaging" | "oslo_messaging" => one("nova_scheduler::rpc"),
        "keystoneauth" | "keystoneauth1" => one("nova_scheduler::placement::auth"),
        "nova" | "nova.scheduler" => vec!["nova_scheduler".into(), "nova_scheduler_rs".into()],
        "nova.scheduler.manager" => one("nova_scheduler::manager"),
        "nova.scheduler.filters" => one("nova_scheduler::filters"),
        "nova.scheduler.weights" => one("nova_scheduler::weighers"),
        "nova.scheduler.host_manager" => one("nova_scheduler::state"),
        "nova.scheduler.client.report" => one("nova_scheduler::placement"),
        "nova.notifications" => one("nova_scheduler::notifications"),
        s if s == "sqlalchemy" || s.starts_with("sqlalchemy.") => one("sqlx"),
        _ => Vec::new(),
    }
}

/// The filter directives: the root level (`debug` or `info`), [`QUIET`], then each
/// `default_log_levels` pair that names something here.
pub fn directives(debug: bool, default_log_levels: &[String]) -> Vec<String> {
    let mut out = vec![if debug { "debug" } else { "info" }.to_string()];
    out.push(QUIET.to_string());
    for pair in default_log_levels {
        let (logger, level) = pair.split_once('=').unwrap_or((pair, ""));
        let Ok(Some(level)) = python_level(level) else {
            continue;
        };
        for target in targets_of(logger) {
            let directive = format!("{target}={level}");
            if directive.parse::<Directive>().is_ok() {
                out.push(directive);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::logging::DEFAULT_LOG_LEVELS;

    #[test]
    fn oslo_defaults_quiet_the_clients_and_keep_the_rest() {
        let levels: Vec<String> = DEFAULT_LOG_LEVELS.iter().map(|s| s.to_string()).collect();
        let d = directives(false, &levels);
        assert_eq!(d[0], "info");
        assert_eq!(d[1], QUIET);
        for want in [
            "lapin=warn",
            "sqlx=warn",
            "nova_scheduler::rpc=info",
            "hyper_util=warn",
            "nova_scheduler::placement::auth=warn",
        ] {
            assert!(d.contains(&want.to_string()), "{want}: {d:?}");
        }
        assert!(!d
            .iter()
            .any(|x| x.starts_with("boto") || x.contains("dogpile")));
        assert_eq!(directives(true, &[])[0], "debug");
    }

    #[test]
    fn rust_targets_and_nova_names() {
        let d = directives(
            false,
            &[
                "nova=DEBUG".into(),
                "lapin::returned_messages=WARN".into(),
                "nova.scheduler.filters=10".into(),
                "sqlalchemy.engine=INFO".into(),
                "stevedore=WARN".into(),
                "x=NOTSET".into(),
            ],
        );
        assert_eq!(
            d[2..],
            [
                "nova_scheduler=debug",
                "nova_scheduler_rs=debug",
                "lapin::returned_messages=warn",
                "nova_scheduler::filters=debug",
                "sqlx=info",
            ]
        );
    }
}
