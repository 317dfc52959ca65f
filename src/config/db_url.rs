// SPDX-License-Identifier: Apache-2.0
//! SQLAlchemy database URLs (`[database] connection`, `[api_database] connection`,
//! `cell_mappings.database_connection`) and nova's cell-mapping URL templates.
//!
//! [`DbUrl::parse`] follows SQLAlchemy's `make_url` pattern: `driver://user:pass@host:port/
//! database?query`, where the user runs to the first `:` or `/`, the password to the first
//! `@` (so `@`, `/`, `?` in a password must be %-encoded, except that `/` and `?` happen to
//! work), user and password are %-decoded, the host is `[v6]` or anything up to `/`, `:` or
//! `?`, and the database is the path up to `?`, not decoded.
//!
//! [`DbUrl::tls`] reads the TLS arguments the URL passes to the driver (PyMySQL for
//! `mysql+pymysql://`, mysqlclient for `mysql://`) and turns them into sqlx's
//! `ssl-mode`, `ssl-ca`, `ssl-cert` and `ssl-key`:
//!
//! - `ssl_mode` (mysqlclient: `DISABLED`, `PREFERRED`, `REQUIRED`, `VERIFY_CA`,
//!   `VERIFY_IDENTITY`, any case) is used as it is, and the flags below are then unused.
//! - `ssl_disabled=true` (PyMySQL): no TLS.
//! - Otherwise, as SQLAlchemy hands them to PyMySQL: no TLS argument at all means
//!   `PREFERRED` (TLS without verification when the server offers it, as PyMySQL 1.2
//!   does); any of `ssl_ca`, `ssl_cert`, `ssl_key`, `ssl_verify_cert`,
//!   `ssl_verify_identity`, `ssl_check_hostname` means TLS is required. The certificate
//!   is verified when `ssl_verify_cert` says so, else when `ssl_ca` is given, and always
//!   with `ssl_verify_identity=true`; the host name too when `ssl_verify_identity=true`
//!   or `ssl_check_hostname=true`, or when `ssl_ca` is given with neither
//!   `ssl_verify_cert` nor `ssl_check_hostname` (PyMySQL's `check_hostname` default).
//! - Booleans take SQLAlchemy's spellings (`true`/`false`, `yes`/`no`, `on`/`off`,
//!   `y`/`n`, `t`/`f`, `1`/`0`); anything else is an error. `ssl_cert` without `ssl_key`
//!   reads the key from the certificate file, as Python's `load_cert_chain` does.
//! - `ssl_capath` and `ssl_key_password` cannot be honoured (sqlx takes one CA file and
//!   unencrypted keys): errors. `ssl_cipher` is not honoured: a warning.
//!
//! sqlx adds its built-in public roots (Mozilla's, from `webpki-roots`) to `ssl_ca`, and
//! uses them alone when there is no `ssl_ca` (PyMySQL would use the system's CA store);
//! [`DbUrl::driver_warnings`] says so where it matters.

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

/// Query parameters [`DbUrl::to_sqlx_url`] uses (the TLS ones through [`DbUrl::tls`]).
const MAPPED_PARAMS: &[&str] = &[
    "charset",
    "unix_socket",
    "ssl_mode",
    "ssl_disabled",
    "ssl_ca",
    "ssl_cert",
    "ssl_key",
    "ssl_verify_cert",
    "ssl_verify_identity",
    "ssl_check_hostname",
    // Not honoured, each with a message of its own from `DbUrl::tls`.
    "ssl_capath",
    "ssl_key_password",
    "ssl_cipher",
];

/// sqlx's `ssl-mode` (mysqlclient's `ssl_mode` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disabled,
    /// TLS when the server offers it, without verification.
    Preferred,
    /// TLS or no connection, without verification.
    Required,
    /// TLS, the certificate chain verified.
    VerifyCa,
    /// TLS, the certificate chain and the host name verified.
    VerifyIdentity,
}

impl SslMode {
    /// The name sqlx and mysqlclient use.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disabled => "DISABLED",
            SslMode::Preferred => "PREFERRED",
            SslMode::Required => "REQUIRED",
            SslMode::VerifyCa => "VERIFY_CA",
            SslMode::VerifyIdentity => "VERIFY_IDENTITY",
        }
    }

    /// A mysqlclient `ssl_mode` value, in any case.
    pub fn parse(text: &str) -> Option<SslMode> {
        [
            SslMode::Disabled,
            SslMode::Preferred,
            SslMode::Required,
            SslMode::VerifyCa,
            SslMode::VerifyIdentity,
        ]
        .into_iter()
        .find(|m| m.as_str().eq_ignore_ascii_case(text.trim()))
    }
}

/// How a connection is secured, as sqlx takes it: its `ssl-mode`, the CA file, and the
/// client certificate and key files (paths as written in the URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbTls {
    pub mode: SslMode,
    pub ca: Option<String>,
    pub cert: Option<String>,
    pub key: Option<String>,
    /// Warnings: arguments without effect, or a verification weaker than it may seem.
    pub notes: Vec<String>,
}

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

    /// A boolean argument with SQLAlchemy's `asbool` spellings; `None` when absent.
    fn flag(&self, key: &str) -> Result<Option<bool>, String> {
        let Some(text) = self.param(key) else {
            return Ok(None);
        };
        match text.trim().to_ascii_lowercase().as_str() {
            "true" | "yes" | "on" | "y" | "t" | "1" => Ok(Some(true)),
            "false" | "no" | "off" | "n" | "f" | "0" => Ok(Some(false)),
            _ => Err(format!(
                "{key}={text:?} is not a boolean (true/false, yes/no, on/off, y/n, t/f, 1/0)"
            )),
        }
    }

    /// The TLS settings for sqlx, from the URL's TLS arguments (see the module docs).
    /// The error text names the argument and never holds the password.
    pub fn tls(&self) -> Result<DbTls, String> {
        for (key, why) in [
            (
                "ssl_capath",
                "sqlx takes one CA file, not a directory: put the CA certificates into one \
                 PEM file and give it as ssl_ca",
            ),
            (
                "ssl_key_password",
                "sqlx reads unencrypted private keys only: give an unencrypted key as ssl_key",
            ),
        ] {
            if self.param(key).is_some() {
                return Err(format!("{key} is not supported ({why})"));
            }
        }
        let verify_cert = self.flag("ssl_verify_cert")?;
        let verify_identity = self.flag("ssl_verify_identity")?;
        let check_hostname = self.flag("ssl_check_hostname")?;
        let disabled = self.flag("ssl_disabled")?;
        let ca = self.param("ssl_ca").map(str::to_string);
        let cert = self.param("ssl_cert").map(str::to_string);
        let key = self.param("ssl_key").map(str::to_string);
        let mut notes = Vec::new();
        let mode = if let Some(text) = self.param("ssl_mode") {
            let mode = SslMode::parse(text).ok_or_else(|| {
                format!(
                    "ssl_mode={text:?} is not one of DISABLED, PREFERRED, REQUIRED, VERIFY_CA, \
                     VERIFY_IDENTITY"
                )
            })?;
            if disabled == Some(true) && mode != SslMode::Disabled {
                return Err(format!(
                    "ssl_disabled=true contradicts ssl_mode={}",
                    mode.as_str()
                ));
            }
            let unused: Vec<&str> = [
                "ssl_verify_cert",
                "ssl_verify_identity",
                "ssl_check_hostname",
            ]
            .into_iter()
            .filter(|k| self.param(k).is_some())
            .collect();
            if !unused.is_empty() {
                notes.push(format!(
                    "ssl_mode={} decides the TLS mode; {} not used",
                    mode.as_str(),
                    unused.join(", ")
                ));
            }
            mode
        } else if disabled == Some(true) {
            SslMode::Disabled
        } else if ca.is_none()
            && cert.is_none()
            && key.is_none()
            && verify_cert.is_none()
            && verify_identity.is_none()
            && check_hostname.is_none()
        {
            SslMode::Preferred
        } else {
            let verify = verify_identity == Some(true) || verify_cert.unwrap_or(ca.is_some());
            let hostname = verify_identity == Some(true)
                || check_hostname.unwrap_or(ca.is_some() && verify_cert.is_none());
            if check_hostname == Some(true) && !verify {
                notes.push(
                    "ssl_check_hostname=true has no effect without ssl_ca or ssl_verify_cert \
                     (the certificate is not verified, as with PyMySQL)"
                        .to_string(),
                );
            }
            match (verify, hostname) {
                (true, true) => SslMode::VerifyIdentity,
                (true, false) => SslMode::VerifyCa,
                (false, _) => SslMode::Required,
            }
        };
        let uses_tls = mode != SslMode::Disabled;
        if uses_tls && key.is_some() && cert.is_none() {
            notes.push(
                "ssl_key without ssl_cert: no client certificate is sent (as with PyMySQL)"
                    .to_string(),
            );
        }
        if matches!(mode, SslMode::VerifyCa | SslMode::VerifyIdentity) {
            if ca.is_none() {
                notes.push(format!(
                    "ssl-mode {} without ssl_ca: the server certificate must chain to one of \
                     sqlx's built-in public roots (webpki-roots), not to the system CA store",
                    mode.as_str()
                ));
            } else if mode == SslMode::VerifyCa {
                notes.push(
                    "ssl-mode VERIFY_CA: the host name is not checked and sqlx trusts its \
                     built-in public roots besides ssl_ca; check the host name \
                     (ssl_check_hostname=true) to accept only the database's certificate"
                        .to_string(),
                );
            }
        }
        if self.param("ssl_cipher").is_some() {
            notes.push(
                "ssl_cipher is not honoured (rustls negotiates among its own cipher suites)"
                    .to_string(),
            );
        }
        // Without a separate key file, the key is read from the certificate file.
        let key = match (&cert, key) {
            (Some(cert), None) => Some(cert.clone()),
            (Some(_), key) => key,
            (None, _) => None,
        };
        Ok(DbTls {
            mode,
            ca,
            cert,
            key,
            notes,
        })
    }

    /// Query parameters [`DbUrl::to_sqlx_url`] does not carry over (to log them).
    pub fn unmapped_params(&self) -> Vec<&str> {
        self.query
            .iter()
            .map(|(k, _)| k.as_str())
            .filter(|k| !MAPPED_PARAMS.contains(k))
            .collect()
    }

    /// One line per thing worth a startup warning: parameters not passed to the driver,
    /// and TLS arguments without effect or with a caveat (nothing when [`DbUrl::tls`]
    /// fails: that is an error of its own).
    pub fn driver_warnings(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .unmapped_params()
            .into_iter()
            .map(|p| format!("parameter {p:?} is not passed to the database driver"))
            .collect();
        if let Ok(tls) = self.tls() {
            out.extend(tls.notes);
        }
        out
    }

    fn sqlx_url(&self, password: Option<&str>) -> Result<String, String> {
        let tls = self.tls()?;
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
        let mut params: Vec<(&str, &str)> = vec![("ssl-mode", tls.mode.as_str())];
        if tls.mode != SslMode::Disabled {
            for (to, value) in [
                ("ssl-ca", &tls.ca),
                ("ssl-cert", &tls.cert),
                ("ssl-key", &tls.key),
            ] {
                if let Some(v) = value {
                    params.push((to, v));
                }
            }
        }
        if let Some(v) = self.param("unix_socket") {
            params.push(("socket", v));
        }
        let query: Vec<String> = params
            .iter()
            .map(|(k, v)| format!("{k}={}", utf8_percent_encode(v, KEEP_PATH)))
            .collect();
        out.push('?');
        out.push_str(&query.join("&"));
        Ok(out)
    }

    /// A `mysql://user:pass@host:port/db?...` URL for sqlx: `charset` is dropped (sqlx
    /// speaks utf8mb4), `unix_socket` becomes `socket`, and the TLS arguments become
    /// `ssl-mode`, `ssl-ca`, `ssl-cert`, `ssl-key` ([`DbUrl::tls`], whose error this
    /// returns). Holds the password: never log it; log the `DbUrl` (its `Display` masks
    /// the password).
    pub fn to_sqlx_url(&self) -> Result<String, String> {
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
