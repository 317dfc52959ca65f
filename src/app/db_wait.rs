// SPDX-License-Identifier: Apache-2.0
//! Startup against a database that is not answering yet, as oslo.db does it: each
//! database is tried up to `max_retries` times (`-1`: forever), `retry_interval`
//! seconds apart, before the daemon gives up. One attempt is one connection with a
//! short timeout, so a dead address is named within seconds, with the OS's reason.

use crate::config::DbUrl;
use sqlx::mysql::{MySqlConnectOptions, MySqlConnection, MySqlDatabaseError};
use sqlx::Connection;
use std::str::FromStr;
use std::time::Duration;

/// How long one connection attempt may take (TCP connect, TLS, handshake, login).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A database the daemon needs at startup, described without its password.
pub struct DbTarget {
    /// Where it is: `nova_api at 127.0.0.1:3306`.
    pub what: String,
    /// sqlx URL (holds the password: never printed).
    sqlx_url: String,
    /// `[group] max_retries`: attempts in all; negative = forever; 0 = one attempt.
    pub max_retries: i64,
    /// `[group] retry_interval`.
    pub retry_interval: Duration,
}

/// The database could not be reached (or refused us). Never holds the password.
#[derive(Debug, thiserror::Error)]
#[error("cannot connect to the database {what}: {cause}")]
pub struct ConnectError {
    pub what: String,
    pub cause: String,
    /// Worth another attempt (unreachable, timed out, dropped), as oslo.db's
    /// `DBConnectionError`; a refusal by the server itself (wrong password, unknown
    /// database) is not.
    pub transient: bool,
}

impl DbTarget {
    pub fn new(url: &DbUrl, sqlx_url: String, max_retries: i64, retry_interval: u64) -> Self {
        DbTarget {
            what: describe(url),
            sqlx_url,
            max_retries,
            retry_interval: Duration::from_secs(retry_interval),
        }
    }

    /// A database known by its sqlx URL only (a cell's), probed once.
    pub fn from_sqlx(what: &str, sqlx_url: String) -> Self {
        DbTarget {
            what: what.to_string(),
            sqlx_url,
            max_retries: 0,
            retry_interval: Duration::ZERO,
        }
    }

    /// Attempts in all; `None` = forever.
    fn attempts(&self) -> Option<u64> {
        (self.max_retries >= 0).then(|| self.max_retries.max(1) as u64)
    }

    /// One connection attempt, closed again at once.
    pub async fn probe(&self) -> Result<(), ConnectError> {
        let fail = |cause: String, transient: bool| ConnectError {
            what: self.what.clone(),
            cause,
            transient,
        };
        let options = MySqlConnectOptions::from_str(&self.sqlx_url)
            .map_err(|e| fail(format!("unusable URL: {}", cause_of(&e).0), false))?;
        match tokio::time::timeout(CONNECT_TIMEOUT, MySqlConnection::connect_with(&options)).await {
            Ok(Ok(conn)) => {
                let _ = conn.close().await;
                Ok(())
            }
            Ok(Err(e)) => {
                let (cause, transient) = cause_of(&e);
                Err(fail(cause, transient))
            }
            Err(_) => Err(fail(
                format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
                true,
            )),
        }
    }

    /// Tries until the database answers or the attempts are spent. Each failed
    /// attempt is one warning with its number and the next delay.
    pub async fn wait(&self) -> Result<(), ConnectError> {
        let attempts = self.attempts();
        let mut attempt: u64 = 0;
        loop {
            attempt += 1;
            let err = match self.probe().await {
                Ok(()) => {
                    if attempt > 1 {
                        tracing::info!(
                            "connected to the database {} (attempt {attempt})",
                            self.what
                        );
                    }
                    return Ok(());
                }
                Err(e) => e,
            };
            let last = !err.transient || attempts.is_some_and(|n| attempt >= n);
            if last {
                return Err(err);
            }
            let of = attempts.map_or_else(|| "unlimited".to_string(), |n| n.to_string());
            tracing::warn!(
                "{err}; attempt {attempt} of {of}, next in {} s",
                self.retry_interval.as_secs()
            );
            tokio::time::sleep(self.retry_interval).await;
        }
    }
}

/// `nova_api at 127.0.0.1:3306` (or `at socket /run/mysqld/mysqld.sock`).
pub fn describe(url: &DbUrl) -> String {
    let db = url.database.as_deref().unwrap_or("(no database name)");
    if let Some((_, socket)) = url.query.iter().find(|(k, _)| k == "unix_socket") {
        return format!("{db} at socket {socket}");
    }
    let host = url.host.as_deref().unwrap_or("localhost");
    let port = url
        .port
        .unwrap_or(crate::config::db_url::DEFAULT_MYSQL_PORT);
    if host.contains(':') {
        format!("{db} at [{host}]:{port}")
    } else {
        format!("{db} at {host}:{port}")
    }
}

/// The innermost reason of a connection error, and whether another attempt may
/// help (oslo.db retries MySQL errors 2002, 2003, 2006, 2013, 1047 and 1927).
fn cause_of(e: &sqlx::Error) -> (String, bool) {
    match e {
        sqlx::Error::Io(io) => (io.to_string(), true),
        sqlx::Error::Protocol(p) => (format!("protocol error: {p}"), true),
        sqlx::Error::Tls(t) => (format!("TLS: {t}"), false),
        sqlx::Error::Database(d) => {
            let number = d
                .try_downcast_ref::<MySqlDatabaseError>()
                .map(|m| m.number());
            let transient = matches!(number, Some(1047 | 1927 | 2002 | 2003 | 2006 | 2013));
            let cause = match number {
                Some(n) => format!("{} (error {n})", d.message()),
                None => d.message().to_string(),
            };
            (cause, transient)
        }
        sqlx::Error::PoolTimedOut => ("timed out".into(), true),
        other => (other.to_string(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> DbUrl {
        DbUrl::parse(text).unwrap()
    }

    #[test]
    fn targets_are_named_by_database_host_and_port_never_the_password() {
        assert_eq!(
            describe(&url(
                "mysql+pymysql://nova:s3cret@db.example/nova_api?charset=utf8"
            )),
            "nova_api at db.example:3306"
        );
        assert_eq!(
            describe(&url("mysql+pymysql://nova:s3cret@[::1]:3307/nova")),
            "nova at [::1]:3307"
        );
        assert_eq!(
            describe(&url(
                "mysql+pymysql://nova:s3cret@/nova?unix_socket=/run/mysqld/mysqld.sock"
            )),
            "nova at socket /run/mysqld/mysqld.sock"
        );
    }

    #[test]
    fn max_retries_counts_attempts_and_negative_is_forever() {
        let u = url("mysql+pymysql://nova:s3cret@127.0.0.1/nova");
        let t = |n| DbTarget::new(&u, "mysql://x".into(), n, 1).attempts();
        assert_eq!(t(10), Some(10));
        assert_eq!(t(1), Some(1));
        assert_eq!(t(0), Some(1));
        assert_eq!(t(-1), None);
    }

    #[tokio::test]
    async fn a_refused_port_is_named_with_the_os_error_and_gives_up_after_max_retries() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let u = url(&format!(
            "mysql+pymysql://nova:s3cret@127.0.0.1:{port}/nova_api"
        ));
        let target = DbTarget::new(&u, u.to_sqlx_url().unwrap(), 2, 0);
        let started = std::time::Instant::now();
        let err = target.wait().await.unwrap_err();
        let text = err.to_string();
        assert!(err.transient, "{text}");
        assert!(
            text.starts_with(&format!(
                "cannot connect to the database nova_api at 127.0.0.1:{port}: "
            )),
            "{text}"
        );
        assert!(text.contains("refused"), "{text}");
        assert!(!text.contains("s3cret"), "{text}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
