// SPDX-License-Identifier: Apache-2.0
//! `transport_url` as oslo.messaging's `TransportURL.parse` reads it and as the rabbit driver
//! and kombu turn it into broker addresses.
//!
//! `rabbit://[user[:pass]@]host[:port][,[user[:pass]@]host[:port]...]/[vhost][?key=val&...]`
//!
//! - The scheme is `rabbit` or `kombu` (case-insensitive).
//! - The authority ends at the first `/`, `?` or `#` and is split on `,` (empty elements
//!   are skipped). Credentials split on the last `@`, then user and password on the first
//!   `:`; both are %-decoded. `[v6addr]:port` is supported; the port defaults to 5672, even
//!   with `ssl = true`. Missing (or empty) user or password is `guest`. Host names are
//!   lowercased and kept otherwise (`localhost` stays `localhost`).
//! - Virtual host: the path after its first `/`, %-decoded twice (once by oslo, once by
//!   kombu) and cut at a `?`/`#` that appears after the first decoding; empty or no path is
//!   `/`. So `…:5672/` and `…:5672//` and `…/%2F` all mean `/`.
//! - Query: `key=value` pairs (`+` is a space, %-decoded, empty values ignored, repeated
//!   keys joined with `,`). They override `[oslo_messaging_rabbit]` options.
//! - No host at all (`rabbit://`) means `guest:guest@localhost:5672`.

use std::collections::HashMap;
use std::fmt;

use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};

use super::error::Secret;

/// The AMQP port the driver writes when the URL names none (also with TLS).
pub const DEFAULT_PORT: u16 = 5672;

/// One broker to connect to, with the credentials and virtual host to use on it.
#[derive(Clone, PartialEq, Eq)]
pub struct BrokerAddress {
    /// Host name (lowercased) or IP address (IPv6 without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// User name (`guest` when the URL has none).
    pub username: String,
    /// Password (`guest` when the URL has none). Never printed.
    pub password: Secret,
    /// Virtual host (`/` by default).
    pub virtual_host: String,
}

/// Characters kept as they are in the parts of an AMQP URI.
const URI_KEEP: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

impl BrokerAddress {
    fn host_for_uri(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        }
    }

    fn uri(&self, password: &str) -> String {
        format!(
            "amqp://{}:{}@{}:{}/{}",
            utf8_percent_encode(&self.username, URI_KEEP),
            password,
            self.host_for_uri(),
            self.port,
            utf8_percent_encode(&self.virtual_host, URI_KEEP)
        )
    }

    /// An `amqp://user:pass@host:port/vhost` URI (parts %-encoded, vhost `/` as `%2F`) for
    /// an AMQP client. It holds the password: never log it; log `self` instead.
    pub fn to_amqp_uri(&self) -> String {
        let password = utf8_percent_encode(self.password.expose(), URI_KEEP).to_string();
        self.uri(&password)
    }
}

impl fmt::Display for BrokerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.uri(super::error::MASK))
    }
}

impl fmt::Debug for BrokerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerAddress")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("username", &self.username)
            .field("password", &self.password)
            .field("virtual_host", &self.virtual_host)
            .finish()
    }
}

/// A parsed transport URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportUrl {
    /// `rabbit` or `kombu` (lowercased).
    pub scheme: String,
    /// Brokers in the order written (the Python driver shuffles them once per connection).
    pub hosts: Vec<BrokerAddress>,
    /// Query parameters: key → value (repeats joined with `,`).
    pub query: HashMap<String, String>,
    /// Some hosts have credentials and some not (oslo only warns).
    pub mixed_credentials: bool,
}

impl Default for TransportUrl {
    /// What `rabbit://` (nova's default) gives.
    fn default() -> Self {
        TransportUrl::parse("rabbit://").expect("the default transport URL parses")
    }
}

fn unquote(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

/// Python's `unquote_plus`, used on query keys and values.
fn unquote_plus(s: &str) -> String {
    unquote(&s.replace('+', " "))
}

/// `oslo_utils.netutils.parse_host_port`.
pub(crate) fn parse_host_port(address: &str) -> Result<(String, Option<u16>), String> {
    let (host, port) = if let Some(rest) = address.strip_prefix('[') {
        let parts: Vec<&str> = rest.split(']').collect();
        if parts.len() != 2 {
            return Err("invalid IPv6 address".to_string());
        }
        (parts[0], parts[1].split(':').nth(1))
    } else if address.matches(':').count() == 1 {
        let (h, p) = address.split_once(':').expect("one colon");
        (h, Some(p))
    } else {
        // No colon: a name or IPv4; several: an IPv6 address without a port.
        (address, None)
    };
    let port = match port {
        None => None,
        Some(p) => Some(
            p.trim()
                .parse::<u16>()
                .map_err(|_| "invalid port".to_string())?,
        ),
    };
    if host.is_empty() {
        return Err("empty host name".to_string());
    }
    Ok((host.to_string(), port))
}

/// The virtual host kombu ends up using, from the URL path (which starts with `/`).
fn virtual_host(path: Option<&str>) -> String {
    // oslo: unquote(path[1:]); the driver writes it into kombu's URL unquoted; kombu cuts
    // that URL's path at `?`/`#`, drops one leading `/` and unquotes again.
    let once = path.map(|p| unquote(&p[1..])).unwrap_or_default();
    let cut = once.split(['?', '#']).next().unwrap_or("");
    let twice = unquote(cut);
    if twice.is_empty() {
        "/".to_string()
    } else {
        twice
    }
}

impl TransportUrl {
    /// Parses a transport URL. The error text never contains the password.
    pub fn parse(url: &str) -> Result<TransportUrl, String> {
        // Python's urlsplit drops tabs and newlines and strips surrounding blanks.
        let url: String = url
            .trim()
            .chars()
            .filter(|c| !matches!(c, '\t' | '\r' | '\n'))
            .collect();
        let Some((scheme, rest)) = url.split_once(':') else {
            return Err("No scheme specified".to_string());
        };
        let scheme_ok = scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !scheme_ok {
            return Err("No scheme specified".to_string());
        }
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "rabbit" && scheme != "kombu" {
            return Err(format!(
                "unsupported transport {scheme:?}: only rabbit:// (or kombu://) is supported"
            ));
        }
        let (netloc, after) = match rest.strip_prefix("//") {
            Some(r) => {
                let end = r.find(['/', '?', '#']).unwrap_or(r.len());
                (&r[..end], &r[end..])
            }
            None => ("", rest),
        };
        if netloc.contains('[') != netloc.contains(']') {
            return Err("Invalid IPv6 URL".to_string());
        }
        let after = after.split('#').next().unwrap_or("");
        let (path, query_text) = match after.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (after, None),
        };
        let vhost = virtual_host(path.starts_with('/').then_some(path));

        let mut query: HashMap<String, String> = HashMap::new();
        for pair in query_text.unwrap_or("").split('&') {
            let Some((k, v)) = pair.split_once('=') else {
                continue;
            };
            if v.is_empty() {
                continue;
            }
            let (k, v) = (unquote_plus(k), unquote_plus(v));
            match query.get_mut(&k) {
                Some(existing) => {
                    existing.push(',');
                    existing.push_str(&v);
                }
                None => {
                    query.insert(k, v);
                }
            }
        }

        let mut hosts = Vec::new();
        let (mut with_creds, mut without_creds) = (0, 0);
        for element in netloc.split(',').filter(|e| !e.is_empty()) {
            let (userinfo, hostport) = match element.rsplit_once('@') {
                Some((u, h)) => (Some(u), h),
                None => (None, element),
            };
            let (username, password) = match userinfo {
                Some(u) => match u.split_once(':') {
                    Some((user, pass)) => (Some(unquote(user)), Some(unquote(pass))),
                    None => (Some(unquote(u)), None),
                },
                None => (None, None),
            };
            if username.is_some() && password.is_some() {
                with_creds += 1;
            } else {
                without_creds += 1;
            }
            let (host, port) = parse_host_port(hostport)?;
            let or_guest = |v: Option<String>| {
                v.filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "guest".into())
            };
            hosts.push(BrokerAddress {
                host: unquote(&host.to_lowercase()),
                // The driver writes `port or 5672`, so port 0 also means 5672.
                port: port.filter(|p| *p != 0).unwrap_or(DEFAULT_PORT),
                username: or_guest(username),
                password: Secret::new(or_guest(password)),
                virtual_host: vhost.clone(),
            });
        }
        if hosts.is_empty() {
            hosts.push(BrokerAddress {
                host: "localhost".to_string(),
                port: DEFAULT_PORT,
                username: "guest".to_string(),
                password: Secret::new("guest"),
                virtual_host: vhost,
            });
        }
        Ok(TransportUrl {
            scheme,
            hosts,
            query,
            mixed_credentials: with_creds > 0 && without_creds > 0,
        })
    }

    /// The virtual host (the same for every host).
    pub fn virtual_host(&self) -> &str {
        &self.hosts[0].virtual_host
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(url: &str) -> BrokerAddress {
        let t = TransportUrl::parse(url).unwrap();
        assert_eq!(t.hosts.len(), 1, "{url}");
        t.hosts[0].clone()
    }

    fn triple(b: &BrokerAddress) -> (String, u16, String) {
        (b.host.clone(), b.port, b.virtual_host.clone())
    }

    #[test]
    fn default_url_is_guest_on_localhost() {
        let b = one("rabbit://");
        assert_eq!(triple(&b), ("localhost".into(), 5672, "/".into()));
        assert_eq!(
            (b.username.as_str(), b.password.expose()),
            ("guest", "guest")
        );
        assert_eq!(TransportUrl::default().hosts[0], b);
    }

    #[test]
    fn virtual_host_rules() {
        let vhost = |url: &str| one(url).virtual_host;
        assert_eq!(vhost("rabbit://u:p@h:5672/"), "/");
        assert_eq!(vhost("rabbit://u:p@h:5672//"), "/");
        assert_eq!(vhost("rabbit://u:p@h:5672/%2F"), "/");
        assert_eq!(vhost("rabbit://u:p@h:5672/nova"), "nova");
        assert_eq!(vhost("rabbit://u:p@h:5672"), "/");
        assert_eq!(vhost("rabbit://u:p@h/a%2Fb"), "a/b");
        assert_eq!(vhost("rabbit://u:p@h/%252F"), "/");
        assert_eq!(vhost("rabbit://u:p@h/nova?ssl=1"), "nova");
        assert_eq!(vhost("rabbit:///nova"), "nova");
    }

    #[test]
    fn credentials_and_ports() {
        let b = one("rabbit://nova:pa%40ss%3Aw@rabbit1:5671/");
        assert_eq!(
            (b.username.as_str(), b.password.expose()),
            ("nova", "pa@ss:w")
        );
        assert_eq!(b.port, 5671);
        // Last `@` splits credentials from the host; first `:` splits user and password.
        let b = one("rabbit://us@er:pa:ss@Rabbit1/");
        assert_eq!(
            (b.username.as_str(), b.password.expose()),
            ("us@er", "pa:ss")
        );
        assert_eq!(b.host, "rabbit1");
        let b = one("rabbit://justuser@h");
        assert_eq!(
            (b.username.as_str(), b.password.expose()),
            ("justuser", "guest")
        );
        assert_eq!(b.port, 5672);
        assert_eq!(one("kombu://h:0/").port, 5672);
        assert!(TransportUrl::parse("rabbit://h:abc/")
            .unwrap_err()
            .contains("invalid port"));
        assert!(TransportUrl::parse("rabbit://h:70000/").is_err());
        assert!(TransportUrl::parse("rabbit://u:p@/").is_err());
    }

    #[test]
    fn multi_host_and_ipv6() {
        let t = TransportUrl::parse("rabbit://a:1@r1:5672,b:2@r2,,[fd00::1]:5673,::1/v").unwrap();
        let got: Vec<(String, u16, String)> = t.hosts.iter().map(triple).collect();
        assert_eq!(
            got,
            vec![
                ("r1".into(), 5672, "v".into()),
                ("r2".into(), 5672, "v".into()),
                ("fd00::1".into(), 5673, "v".into()),
                ("::1".into(), 5672, "v".into()),
            ]
        );
        assert_eq!(t.hosts[1].password.expose(), "2");
        assert_eq!(t.hosts[2].username, "guest");
        assert!(t.mixed_credentials);
        assert_eq!(
            t.hosts[2].to_amqp_uri(),
            "amqp://guest:guest@[fd00::1]:5673/v"
        );
        assert!(TransportUrl::parse("rabbit://[fd00::1:5672/").is_err());
    }

    #[test]
    fn localhost_and_scheme() {
        assert_eq!(one("RABBIT://localhost/").host, "localhost");
        assert_eq!(TransportUrl::parse("Kombu://h/").unwrap().scheme, "kombu");
        assert_eq!(TransportUrl::parse("").unwrap_err(), "No scheme specified");
        assert_eq!(
            TransportUrl::parse("//h/").unwrap_err(),
            "No scheme specified"
        );
        assert!(TransportUrl::parse("kafka://h/")
            .unwrap_err()
            .contains("unsupported"));
        assert!(TransportUrl::parse("amqp://h/").is_err());
    }

    #[test]
    fn query_parameters() {
        let t = TransportUrl::parse("rabbit://h/?ssl=1&a=x&a=y&empty=&flag&sp=a+b%21").unwrap();
        assert_eq!(t.query.get("ssl").map(String::as_str), Some("1"));
        assert_eq!(t.query.get("a").map(String::as_str), Some("x,y"));
        assert_eq!(t.query.get("sp").map(String::as_str), Some("a b!"));
        assert!(!t.query.contains_key("empty"));
        assert!(!t.query.contains_key("flag"));
    }

    #[test]
    fn password_never_printed() {
        let t = TransportUrl::parse("rabbit://nova:TopSecret@h:5672/nova").unwrap();
        let shown = format!("{t:?} {} {:?}", t.hosts[0], t.hosts[0]);
        assert!(!shown.contains("TopSecret"), "{shown}");
        assert_eq!(t.hosts[0].to_string(), "amqp://nova:****@h:5672/nova");
        assert_eq!(
            t.hosts[0].to_amqp_uri(),
            "amqp://nova:TopSecret@h:5672/nova"
        );
        assert_eq!(
            one("rabbit://h/").to_amqp_uri(),
            "amqp://guest:guest@h:5672/%2F"
        );
        let err = TransportUrl::parse("rabbit://nova:TopSecret@h:x/").unwrap_err();
        assert!(!err.contains("TopSecret"));
    }
}
