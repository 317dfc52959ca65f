// SPDX-License-Identifier: Apache-2.0
//! Configuration errors, value locations and the [`Secret`] wrapper.
//!
//! No error message and no `Debug` output carries a secret: values of secret options are
//! replaced by `****` before an error is built, and URLs are shown with their passwords
//! masked.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// What a masked secret looks like in messages and `Debug` output.
pub const MASK: &str = "****";

/// Where a value was written: file and 1-based line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The file as it was named (or `<string>` for [`crate::config::from_ini_str`]).
    pub file: Arc<str>,
    /// 1-based line of the `key = value` line (continuation lines follow it).
    pub line: usize,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Where a bad option value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueSource {
    /// A configuration file line.
    File(Location),
    /// A query parameter of `[DEFAULT] transport_url`, which overrides the option.
    TransportUrlQuery,
    /// An `OS_<GROUP>__<OPTION>` environment variable (oslo.config reads them before the
    /// files).
    Environment(String),
}

impl fmt::Display for ValueSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueSource::File(loc) => loc.fmt(f),
            ValueSource::TransportUrlQuery => f.write_str("[DEFAULT] transport_url query"),
            ValueSource::Environment(name) => write!(f, "environment {name}"),
        }
    }
}

/// A configuration error. Loading collects every error it finds before failing; several
/// errors come back as [`ConfigError::Many`].
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file named explicitly (`--config-file`) does not exist.
    #[error("{}: config file not found", .0.display())]
    FileNotFound(PathBuf),
    /// A directory named by `--config-dir` does not exist.
    #[error("{}: config directory not found", .0.display())]
    DirNotFound(PathBuf),
    /// A file or directory could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path being read.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A line the INI parser rejects (oslo's `iniparser` errors). The line text is not
    /// repeated because it may hold a secret.
    #[error("{location}: {message}")]
    Syntax {
        /// File and line.
        location: Location,
        /// What is wrong, in oslo's words.
        message: String,
    },
    /// An option value that does not convert to the option's type or is out of range.
    #[error("{0}")]
    Value(Box<BadValue>),
    /// A problem with a combination of options, or a value without a single location.
    #[error("[{group}] {option}: {reason}")]
    Invalid {
        /// Option group.
        group: String,
        /// Option name (or names).
        option: String,
        /// Why it was rejected (never contains a secret).
        reason: String,
    },
    /// Bad command-line arguments.
    #[error("{0}")]
    Usage(String),
    /// Several errors, in the order they were found.
    #[error("{} configuration errors:\n{}", .0.len(), list(.0))]
    Many(Vec<ConfigError>),
}

/// A rejected option value (see [`ConfigError::Value`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadValue {
    /// Where the value was written.
    pub origin: ValueSource,
    /// Option group as nova names it (`DEFAULT`, `scheduler`, ...).
    pub group: String,
    /// Option name.
    pub option: String,
    /// The value as written, or `****` (or the URL with its password masked) for secret
    /// options.
    pub value: String,
    /// Why it was rejected.
    pub reason: String,
}

impl fmt::Display for BadValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: [{}] {} = {:?}: {}",
            self.origin, self.group, self.option, self.value, self.reason
        )
    }
}

fn list(errors: &[ConfigError]) -> String {
    let lines: Vec<String> = errors.iter().map(|e| format!("  - {e}")).collect();
    lines.join("\n")
}

impl ConfigError {
    /// Turns a list of collected errors into `Ok(())`, the single error, or
    /// [`ConfigError::Many`].
    pub fn from_list(mut errors: Vec<ConfigError>) -> Result<(), ConfigError> {
        match errors.len() {
            0 => Ok(()),
            1 => Err(errors.remove(0)),
            _ => Err(ConfigError::Many(errors)),
        }
    }

    /// The individual errors (one for anything but [`ConfigError::Many`]).
    pub fn errors(&self) -> Vec<&ConfigError> {
        match self {
            ConfigError::Many(all) => all.iter().collect(),
            other => vec![other],
        }
    }
}

/// A secret string (password, token, URL with credentials). `Debug` and `Display` print
/// `****`; call [`Secret::expose`] to use the value.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret value itself. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MASK)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MASK)
    }
}

/// Masks the password of every `user:password@` element of a URL's authority (also the
/// comma-separated hosts of a transport URL). Used to show URLs in errors and logs.
pub fn mask_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let rest_start = scheme_end + 3;
    let rest = &url[rest_start..];
    // The authority of a SQLAlchemy URL may hold `/`, `?` or `#` in its password (the
    // password runs to the first `@`), so end it at the last `@` before the path when
    // there is one.
    let path_start = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority_end = match rest.rfind('@') {
        Some(at) if at >= path_start => {
            let tail = &rest[at..];
            at + tail.find(['/', '?', '#']).unwrap_or(tail.len())
        }
        _ => path_start,
    };
    // After a `user:pass` element cut off by a `,` written unencoded in a password, the
    // rest of that password stands before the next `@`: mask it too.
    let mut password_cut = false;
    let mut masked: Vec<String> = Vec::new();
    for element in rest[..authority_end].split(',') {
        let shown = match element.rfind('@') {
            Some(at) => {
                let userinfo = &element[..at];
                match userinfo.find(':') {
                    Some(colon) => format!("{}:{MASK}{}", &userinfo[..colon], &element[at..]),
                    None if password_cut => format!("{MASK}{}", &element[at..]),
                    None => element.to_string(),
                }
            }
            // A port is digits; anything else after `:` may be a password.
            None => match element.rsplit_once(':') {
                Some((head, tail))
                    if !element.starts_with('[') && !tail.chars().all(|c| c.is_ascii_digit()) =>
                {
                    password_cut = true;
                    masked.push(format!("{head}:{MASK}"));
                    continue;
                }
                _ if password_cut => MASK.to_string(),
                _ => element.to_string(),
            },
        };
        password_cut = password_cut && !element.contains('@');
        masked.push(shown);
    }
    format!(
        "{}{}{}",
        &url[..rest_start],
        masked.join(","),
        &rest[authority_end..]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_never_prints() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?} {s}"), "**** ****");
        assert_eq!(s.expose(), "hunter2");
    }

    #[test]
    fn mask_url_masks_every_host_password() {
        assert_eq!(
            mask_url("rabbit://u:p@h1:5672,v:q@h2:5672/nova?ssl=1"),
            "rabbit://u:****@h1:5672,v:****@h2:5672/nova?ssl=1"
        );
        assert_eq!(mask_url("rabbit://h1,h2/"), "rabbit://h1,h2/");
        assert_eq!(
            mask_url("mysql+pymysql://nova:s3/cr?t@db/nova?charset=utf8"),
            "mysql+pymysql://nova:****@db/nova?charset=utf8"
        );
        assert_eq!(mask_url("mysql://nova@db/nova"), "mysql://nova@db/nova");
        assert_eq!(mask_url("rabbit://"), "rabbit://");
        assert_eq!(mask_url("rabbit://u:pa,ss@h/"), "rabbit://u:****,****@h/");
        assert_eq!(
            mask_url("rabbit://u:a,b,c@h,x@y/"),
            "rabbit://u:****,****,****@h,x@y/"
        );
        assert_eq!(
            mask_url("rabbit://h:5672,[::1]:5673/"),
            "rabbit://h:5672,[::1]:5673/"
        );
    }

    #[test]
    fn many_lists_each_error() {
        let e = ConfigError::from_list(vec![
            ConfigError::Usage("a".into()),
            ConfigError::Usage("b".into()),
        ])
        .unwrap_err();
        assert_eq!(e.to_string(), "2 configuration errors:\n  - a\n  - b");
        assert_eq!(e.errors().len(), 2);
    }
}
