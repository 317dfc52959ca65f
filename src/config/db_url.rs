// SPDX-License-Identifier: Apache-2.0
//! SQLAlchemy database URLs (`[database] connection`, `[api_database] connection`,
//! `cell_mappings.database_connection`) and nova's cell-mapping URL templates.
//!
//! [`DbUrl::parse`] follows SQLAlchemy's `make_url` pattern: `driver://user:pass@host:port/
//! database?query`, where the user runs to the first `:` or `/`, the password to the first
//! `@` (so `@`, `/`, `?` in a password must be %-encoded, except that `/` and `?` happen to
//! work), user and password are %-decoded, the host is `[v6]` or anything up to `/`, `:` or
//! `?`, and the database is the path up to `?`, not decoded.

use std::fmt;

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::error::{Secret, MASK};

/// The port a MySQL URL without one uses.
pub const DEFAULT_MYSQL_PORT: u16 = 3306;

/// A parsed SQLAlchemy URL.
#[derive(Clone, PartialEq, Eq)]
pub struct DbUrl {
    /// Dialect and driver as written: `mysql`, `mysql+pymysql`, `mariadb+pymysql`, ...
    pub drivername: String,
    /// User name (%-decoded).
    pub username: Option<String>,
    /// Password (%-decoded). Never printed.
    pub password: Option<Secret>,
    /// Host name or address (IPv6 without brackets); `None` = the driver's default.
    pub host: Option<String>,
    /// TCP port.
    pub port: Option<u16>,
    /// Database name.
    pub database: Option<String>,
    /// Query parameters in order (driver arguments such as `charset`, `unix_socket`).
    pub query: Vec<(String, String)>,
}

fn unquote(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// Python's `parse_qsl` with blank values dropped: `+` is a space, parts %-decoded.
pub(crate) fn parse_qsl(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (unquote(&k.replace('+', " ")), unquote(&v.replace('+', " "))))
        .collect()
}

/// Characters kept unencoded in the parts of the sqlx URL.
const KEEP: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Like [`KEEP`], also keeping `/` (socket and certificate paths).
const KEEP_PATH: &AsciiSet = &KEEP.remove(b'/');

impl DbUrl {
    /// Parses a SQLAlchemy URL. The error text never contains the password.
    pub fn parse(url: &str) -> Result<DbUrl, String> {
        let url = url.trim();
        let bad = || "could not parse a SQLAlchemy URL (driver://user:pass@host/db)".to_string();
        let (drivername, rest) = url.split_once("://").ok_or_else(bad)?;
        if drivername.is_empty()
            || !drivername
                .chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == '+')
        {
            return Err(bad());
        }
        // Credentials: user = [^:/]*, then optional `:` + password [^@]*, then `@`.
        let stop = rest.find([':', '/']).unwrap_or(rest.len());
        let (username, password, rest) = match rest[stop..].strip_prefix(':') {
            Some(after) if after.contains('@') => {
                let at = after.find('@').expect("checked");
                (Some(&rest[..stop]), Some(&after[..at]), &after[at + 1..])
            }
            _ => match rest[..stop].rfind('@') {
                Some(at) => (Some(&rest[..at]), None, &rest[at + 1..]),
                None => (None, None, rest),
            },
        };
        // Host: `[v6]` or [^/:?]+, then optional `:port`.
        let (host, rest) = if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(['/', '?']).unwrap_or(after.len());
            match after[..end].rfind(']') {
                Some(close) if close > 0 => (Some(&after[..close]), &after[close + 1..]),
                _ => (None, rest),
            }
        } else {
            let end = rest.find(['/', ':', '?']).unwrap_or(rest.len());
            ((end > 0).then(|| &rest[..end]), &rest[end..])
        };
        let (port, rest) = match rest.strip_prefix(':') {
            Some(after) => {
                let end = after.find(['/', '?']).unwrap_or(after.len());
                let text = &after[..end];
                let port = if text.is_empty() {
                    None
                } else {
                    Some(
                        text.parse::<u16>()
                            .map_err(|_| "invalid port".to_string())?,
                    )
                };
                (port, &after[end..])
            }
            None => (None, rest),
        };
        let (database, rest) = match rest.strip_prefix('/') {
            Some(after) => {
                let end = after.find('?').unwrap_or(after.len());
                (Some(&after[..end]), &after[end..])
            }
            None => (None, rest),
        };
        let query = rest.strip_prefix('?').map(parse_qsl).unwrap_or_default();
        Ok(DbUrl {
            drivername: drivername.to_string(),
            username: username.map(unquote),
            password: password.map(|p| Secret::new(unquote(p))),
            host: host.map(str::to_string),
            port,
            database: database.map(str::to_string),
            query,
        })
    }

    /// The dialect: `mysql` for `mysql+pymysql`.
    pub fn backend(&self) -> &str {
        self.drivername.split('+').next().unwrap_or("")
    }

    /// A MySQL or MariaDB URL (the only databases the sqlx edge speaks).
    pub fn is_mysql(&self) -> bool {
        matches!(self.backend(), "mysql" | "mariadb")
    }

    /// Appends oslo.db's `connection_parameters` (`a=b&c=d`) to the query.
    pub fn append_parameters(&mut self, parameters: &str) {
        self.query.extend(parse_qsl(parameters));
    }

    fn param(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn flag(&self, key: &str) -> Option<bool> {
        self.param(key)
            .and_then(|v| super::reader::parse_bool(v).ok())
    }

    /// sqlx's `ssl-mode` for the TLS arguments PyMySQL/mysqlclient take: an explicit
    /// `ssl_mode` wins; `ssl_ca` verifies the chain and, unless `ssl_check_hostname` is
    /// false, the host name (PyMySQL's default); a client certificate or
    /// `ssl_verify_cert` alone means TLS; no TLS argument means no TLS.
    fn ssl_mode(&self) -> String {
        if let Some(mode) = self.param("ssl_mode") {
            return mode.to_ascii_uppercase();
        }
        let has_ca = self.param("ssl_ca").is_some() || self.param("ssl_capath").is_some();
        if self.flag("ssl_verify_identity") == Some(true)
            || (has_ca && self.flag("ssl_check_hostname") != Some(false))
        {
            "VERIFY_IDENTITY".to_string()
        } else if has_ca || self.flag("ssl_verify_cert") == Some(true) {
            "VERIFY_CA".to_string()
        } else if self.param("ssl_cert").is_some() || self.param("ssl_key").is_some() {
            "REQUIRED".to_string()
        } else {
            "DISABLED".to_string()
        }
    }

    /// Query parameters [`DbUrl::to_sqlx_url`] does not carry over (to log them).
    pub fn unmapped_params(&self) -> Vec<&str> {
        const MAPPED: &[&str] = &[
            "charset",
            "unix_socket",
            "ssl_ca",
            "ssl_capath",
            "ssl_cert",
            "ssl_key",
            "ssl_mode",
            "ssl_check_hostname",
            "ssl_verify_cert",
            "ssl_verify_identity",
        ];
        self.query
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !MAPPED.contains(k))
            .collect()
    }

    fn sqlx_url(&self, password: Option<&str>) -> String {
        let mut out = String::from("mysql://");
        if let Some(user) = &self.username {
            out.push_str(&utf8_percent_encode(user, KEEP).to_string());
            if let Some(p) = password {
                out.push(':');
                out.push_str(p);
            }
            out.push('@');
        }
        match self.host.as_deref() {
            Some(h) if h.contains(':') => out.push_str(&format!("[{h}]")),
            Some(h) => out.push_str(h),
            None => out.push_str("localhost"),
        }
        out.push_str(&format!(":{}", self.port.unwrap_or(DEFAULT_MYSQL_PORT)));
        if let Some(db) = &self.database {
            out.push('/');
            out.push_str(&utf8_percent_encode(db, KEEP).to_string());
        }
        let mut params = vec![("ssl-mode", self.ssl_mode())];
        for (from, to) in [
            ("ssl_ca", "ssl-ca"),
            ("ssl_cert", "ssl-cert"),
            ("ssl_key", "ssl-key"),
            ("unix_socket", "socket"),
        ] {
            if let Some(v) = self.param(from) {
                params.push((to, v.to_string()));
            }
        }
        let query: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{k}={}", utf8_percent_encode(v, KEEP_PATH)))
            .collect();
        out.push('?');
        out.push_str(&query.join("&"));
        out
    }

    /// A `mysql://user:pass@host:port/db?...` URL for sqlx: `charset` is dropped (sqlx
    /// speaks utf8mb4), `unix_socket` becomes `socket`, `ssl_ca`/`ssl_cert`/`ssl_key` become
    /// `ssl-ca`/`ssl-cert`/`ssl-key`, and `ssl-mode` says what PyMySQL would do. Holds the
    /// password: never log it; log the `DbUrl` (its `Display` masks the password).
    pub fn to_sqlx_url(&self) -> String {
        let password = self
            .password
            .as_ref()
            .map(|p| utf8_percent_encode(p.expose(), KEEP).to_string());
        self.sqlx_url(password.as_deref())
    }
}

impl fmt::Display for DbUrl {
    /// The URL as SQLAlchemy would write it, with the password as `****`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.drivername)?;
        if let Some(user) = &self.username {
            write!(f, "{}", utf8_percent_encode(user, KEEP))?;
            if self.password.is_some() {
                write!(f, ":{MASK}")?;
            }
            f.write_str("@")?;
        }
        match self.host.as_deref() {
            Some(h) if h.contains(':') => write!(f, "[{h}]")?,
            Some(h) => f.write_str(h)?,
            None => {}
        }
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        if let Some(db) = &self.database {
            write!(f, "/{db}")?;
        }
        let query: Vec<String> = self
            .query
            .iter()
            .map(|(k, v)| {
                format!(
                    "{}={}",
                    utf8_percent_encode(k, KEEP),
                    utf8_percent_encode(v, KEEP_PATH)
                )
            })
            .collect();
        if !query.is_empty() {
            write!(f, "?{}", query.join("&"))?;
        }
        Ok(())
    }
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DbUrl({self})")
    }
}

/// The parts of Python's `urlparse` that nova's `CellMapping._format_url` uses, as text
/// (`None` prints as `None`, like Python's `str.format`).
fn url_parts(url: &str) -> Result<Vec<(String, String)>, String> {
    let show = |v: Option<&str>| v.map_or_else(|| "None".to_string(), str::to_string);
    let (scheme, rest) = match url.split_once(':') {
        Some((s, r)) if s.chars().next().is_some_and(|c| c.is_ascii_alphabetic()) => {
            (s.to_ascii_lowercase(), r)
        }
        _ => (String::new(), url),
    };
    let (netloc, rest) = match rest.strip_prefix("//") {
        Some(r) => {
            let end = r.find(['/', '?', '#']).unwrap_or(r.len());
            (&r[..end], &r[end..])
        }
        None => ("", rest),
    };
    let (rest, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (userinfo, hostinfo) = match netloc.rsplit_once('@') {
        Some((u, h)) => (Some(u), h),
        None => (None, netloc),
    };
    let (username, password) = match userinfo {
        Some(u) => match u.split_once(':') {
            Some((user, pass)) => (Some(user), Some(pass)),
            None => (Some(u), None),
        },
        None => (None, None),
    };
    let (hostname, port) = match hostinfo.split_once('[') {
        Some((_, bracketed)) => {
            let (h, after) = bracketed.split_once(']').unwrap_or((bracketed, ""));
            (h, after.split_once(':').map_or("", |(_, p)| p))
        }
        None => hostinfo.split_once(':').unwrap_or((hostinfo, "")),
    };
    let port = if port.is_empty() {
        None
    } else if port.chars().all(|c| c.is_ascii_digit()) {
        let n: u64 = port
            .parse()
            .map_err(|_| "Port out of range 0-65535".to_string())?;
        if n > 65535 {
            return Err("Port out of range 0-65535".to_string());
        }
        Some(n.to_string())
    } else {
        return Err("Port could not be cast to integer value".to_string());
    };
    let hostname = (!hostname.is_empty()).then(|| match hostname.split_once('%') {
        Some((h, zone)) => format!("{}%{zone}", h.to_lowercase()),
        None => hostname.to_lowercase(),
    });
    let mut subs = vec![
        ("username".to_string(), show(username)),
        ("password".to_string(), show(password)),
        ("hostname".to_string(), show(hostname.as_deref())),
        ("port".to_string(), show(port.as_deref())),
        ("scheme".to_string(), scheme),
        ("query".to_string(), query.to_string()),
        ("fragment".to_string(), fragment.to_string()),
        ("path".to_string(), path.trim_start_matches('/').to_string()),
    ];
    // oslo.messaging-style multi-host netlocs: username1, password1, hostname1, port1, ...
    if netloc.contains(',') {
        for (index, element) in netloc.split(',').enumerate() {
            let (userpass, hostport) = element.split_once('@').unwrap_or(("", element));
            let (user, pass) = match userpass.split_once(':') {
                Some((u, p)) => (Some(u), Some(p)),
                None => (Some(userpass), None),
            };
            let (h, p) = super::transport_url::parse_host_port(hostport)
                .map_err(|e| format!("multi-host URL: {e}"))?;
            let p = p.map(|p| p.to_string());
            let n = index + 1;
            subs.push((format!("username{n}"), show(user)));
            subs.push((format!("password{n}"), show(pass)));
            subs.push((format!("hostname{n}"), h));
            subs.push((format!("port{n}"), show(p.as_deref())));
        }
    }
    Ok(subs)
}

/// Fills a cell mapping's `database_connection` template (`{username}`, `{password}`,
/// `{hostname}`, `{port}`, `{scheme}`, `{path}`, `{query}`, `{fragment}`, and `{username1}`…
/// for comma-separated hosts) from the local `[database] connection` URL, as nova's
/// `CellMapping.format_db_url` does. A URL without placeholders comes back unchanged.
/// On error nova logs it and uses the template as it is; the error text holds no secret.
pub fn format_cell_url(template: &str, local: &str) -> Result<String, super::ConfigError> {
    let fail = |reason: String| super::ConfigError::Invalid {
        group: "database".to_string(),
        option: "connection".to_string(),
        reason: format!("cannot fill the cell database URL template: {reason}"),
    };
    if !template.contains(['{', '}']) {
        return Ok(template.to_string());
    }
    let subs = url_parts(local).map_err(fail)?;
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{").or_else(|| tail.strip_prefix("}}")) {
            out.push_str(&tail[..1]);
            rest = after;
            continue;
        }
        if tail.starts_with('}') {
            return Err(fail("single '}' in the template".to_string()));
        }
        let close = tail
            .find('}')
            .ok_or_else(|| fail("single '{' in the template".to_string()))?;
        let name = &tail[1..close];
        let value = subs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
            .ok_or_else(|| fail(format!("unknown placeholder {{{name}}}")))?;
        out.push_str(value);
        rest = &tail[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}
