// SPDX-License-Identifier: Apache-2.0
//! `SimpleCIDRAffinityFilter`: with a `build_near_host_ip` hint, only hosts whose
//! `host_ip` is in the network `build_near_host_ip + cidr` (default `/24`) pass.
//!
//! The network is parsed as netaddr 1.3's `IPNetwork(str)` does it (the version nova
//! 34 pins): IPv4 first, then IPv6; the address with glibc `inet_pton` rules (IPv4:
//! exactly four decimal octets, no leading zeros); after the `/` either a Python
//! `int()` prefix or a netmask/hostmask address; host bits are kept and ignored.

use super::{FilterRequest, HostFilter};
use crate::model::{HostState, RequestSpec};
use crate::py;
use crate::py::{PyError, PyExc};
use tracing::{debug, warn};

/// Longest `build_near_host_ip + cidr` we parse. An IPv6 address with an IPv6 mask
/// is under 100 characters; nova has no limit, but anything this long cannot parse
/// in netaddr either except with absurd whitespace padding of the prefix.
pub const MAX_NETWORK_LEN: usize = 256;

#[derive(Debug, Clone, Copy, Default)]
pub struct SimpleCIDRAffinityFilter {
    pub netaddr: Netaddr,
}

/// The netaddr a release's upper-constraints install, whose parsing the filter meets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Netaddr {
    /// netaddr 1.3 (nova 31 on).
    #[default]
    V1,
    /// netaddr 0.10.1 (nova 29 and 30): every parse failure is an `AddrFormatError`
    /// (a NUL character and `IPAddress(None)` too), and an IPv4 network address that
    /// is not four octets is tried again expanded (`10/8` is `10.0.0.0/8`).
    V0_10,
}

impl SimpleCIDRAffinityFilter {
    pub const NAME: &'static str = "SimpleCIDRAffinityFilter";

    /// nova's `host_passes`; `Err` where nova raises. netaddr's own `AddrFormatError`
    /// (not a `ValueError` subclass) is reported as a `ValueError` whose message starts
    /// with [`ADDR_FORMAT_ERROR`].
    pub fn check(&self, host: &HostState, spec: &RequestSpec) -> Result<bool, PyError> {
        // get_scheduler_hint: a one-element list is unwrapped to its string; other
        // lists stay lists (and then `str.join` raises TypeError).
        let ip = match spec.hint("build_near_host_ip") {
            None | Some([]) => return Ok(true),
            Some([only]) if only.is_empty() => return Ok(true),
            Some([only]) => only.as_str(),
            Some(_) => return Err(type_error("build_near_host_ip")),
        };
        let cidr = match spec.hint("cidr") {
            None => "/24",
            Some([only]) => only.as_str(),
            Some(_) => return Err(type_error("cidr")),
        };
        if ip.len() + cidr.len() > MAX_NETWORK_LEN {
            return Err(PyError::value_error(format!(
                "network longer than {MAX_NETWORK_LEN} characters (not parsed)"
            )));
        }
        let network = format!("{ip}{cidr}");
        // netaddr's AddrFormatError, or the ValueError it lets through.
        let net = Network::parse(&network, self.netaddr).map_err(|e| match e {
            NetErr::AddrFormat => {
                PyError::value_error(format!("{ADDR_FORMAT_ERROR}: invalid IPNetwork {network}"))
            }
            NetErr::Value => PyError::value_error(format!("invalid IPNetwork {network}")),
        })?;
        let host_ip = host.host_ip.as_deref().ok_or_else(|| match self.netaddr {
            Netaddr::V1 => PyError::new(
                PyExc::TypeError,
                "argument of type 'NoneType' is not iterable",
            ),
            Netaddr::V0_10 => PyError::value_error(format!(
                "{ADDR_FORMAT_ERROR}: failed to detect a valid IP address from None"
            )),
        })?;
        let addr = parse_address(host_ip, self.netaddr).ok_or_else(|| {
            PyError::value_error(format!(
                "{ADDR_FORMAT_ERROR}: failed to detect a valid IP address from {host_ip:?}"
            ))
        })?;
        let inside = net.contains(addr);
        debug!(host = %host.host, host_ip, network = %network, inside, "SimpleCIDRAffinityFilter");
        Ok(inside)
    }
}

impl HostFilter for SimpleCIDRAffinityFilter {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn host_passes(&self, host: &HostState, req: &FilterRequest<'_>) -> bool {
        self.check(host, req.spec).unwrap_or_else(|e| {
            // nova raises (netaddr AddrFormatError / TypeError) and the request fails.
            warn!(host = %host.host, error = %e, "SimpleCIDRAffinityFilter: bad hint or host_ip; host fails");
            false
        })
    }

    fn once_per_request(&self) -> bool {
        true
    }
}

/// Prefix of the message of a [`PyError`] standing for netaddr's `AddrFormatError`.
pub const ADDR_FORMAT_ERROR: &str = "AddrFormatError";

/// How netaddr fails: its own `AddrFormatError` (caught between the IPv4 and IPv6
/// attempts) or a `ValueError` that escapes (a `/` in a mask, a NUL character).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NetErr {
    AddrFormat,
    Value,
}

/// `str.join` on a list: `TypeError`.
fn type_error(hint: &str) -> PyError {
    PyError::new(
        PyExc::TypeError,
        format!("sequence item: expected str instance, list found ({hint} hint)"),
    )
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Family {
    V4,
    V6,
}

impl Family {
    fn width(self) -> u32 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }
    fn max(self) -> u128 {
        match self {
            Family::V4 => u32::MAX as u128,
            Family::V6 => u128::MAX,
        }
    }
    /// netaddr's `str_to_int` for the family (INET_PTON for IPv4); Python's
    /// `socket.inet_pton` raises ValueError on a NUL character, which netaddr 0.10
    /// turns into an AddrFormatError.
    fn str_to_int(self, s: &str, netaddr: Netaddr) -> Result<u128, NetErr> {
        let nul = match netaddr {
            Netaddr::V1 => NetErr::Value,
            Netaddr::V0_10 => NetErr::AddrFormat,
        };
        match self {
            Family::V4 => {
                if s.contains(':') || s.split('.').any(|p| p.len() > 1 && p.starts_with('0')) {
                    return Err(NetErr::AddrFormat);
                }
                if s.contains('\0') {
                    return Err(nul);
                }
                inet_pton4(s.as_bytes())
                    .map(u128::from)
                    .ok_or(NetErr::AddrFormat)
            }
            Family::V6 => {
                if s.contains('\0') {
                    return Err(nul);
                }
                inet_pton6(s.as_bytes()).ok_or(NetErr::AddrFormat)
            }
        }
    }

    /// `IPAddress(s, version, flags=INET_PTON)`: a `/` is a ValueError.
    fn ip_address(self, s: &str, netaddr: Netaddr) -> Result<u128, NetErr> {
        if s.contains('/') {
            return Err(NetErr::Value);
        }
        self.str_to_int(s, netaddr)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Network {
    family: Family,
    value: u128,
    prefixlen: u32,
}

impl Network {
    /// netaddr `IPNetwork(addr)`: IPv4; on AddrFormatError IPv6; else AddrFormatError.
    fn parse(s: &str, netaddr: Netaddr) -> Result<Network, NetErr> {
        match Self::parse_family(Family::V4, s, netaddr) {
            Err(NetErr::AddrFormat) => Self::parse_family(Family::V6, s, netaddr),
            other => other,
        }
    }

    /// netaddr `parse_ip_network(module, addr)` for a string.
    fn parse_family(family: Family, s: &str, netaddr: Netaddr) -> Result<Network, NetErr> {
        let (val1, val2) = match s.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (s, None),
        };
        let value = match family.ip_address(val1, netaddr) {
            // netaddr 0.10: "Try a partial IPv4 network address..."
            Err(NetErr::AddrFormat) if family == Family::V4 && netaddr == Netaddr::V0_10 => {
                let expanded = expand_partial_address(val1).ok_or(NetErr::AddrFormat)?;
                family.ip_address(&expanded, netaddr)?
            }
            other => other?,
        };
        let prefixlen: i64 = match val2 {
            None => family.width() as i64,
            Some(v) => match py::int::int_saturating(v) {
                Ok(n) => n,
                // Not an integer: a netmask or hostmask address.
                Err(_) => {
                    let mask = family.ip_address(v, netaddr)?;
                    if is_netmask(family, mask) {
                        // netaddr's netmask_to_prefix: the number of leading ones.
                        mask.count_ones() as i64
                    } else if is_hostmask(mask) {
                        family.width() as i64 - mask.count_ones() as i64
                    } else {
                        return Err(NetErr::AddrFormat);
                    }
                }
            },
        };
        if !(0..=family.width() as i64).contains(&prefixlen) {
            return Err(NetErr::AddrFormat);
        }
        Ok(Network {
            family,
            value,
            prefixlen: prefixlen as u32,
        })
    }

    /// netaddr `IPAddress in IPNetwork`: same family and same network bits.
    fn contains(&self, (family, value): (Family, u128)) -> bool {
        if family != self.family {
            return false;
        }
        let shift = self.family.width() - self.prefixlen;
        value.checked_shr(shift).unwrap_or(0) == self.value.checked_shr(shift).unwrap_or(0)
    }
}

/// netaddr `IPAddress.is_netmask`: ones then zeros (all-zero and all-one included).
fn is_netmask(family: Family, mask: u128) -> bool {
    let inverted = family.max() ^ mask; // trailing ones
    inverted & inverted.wrapping_add(1) == 0
}

/// netaddr `IPAddress.is_hostmask`: zeros then ones.
fn is_hostmask(mask: u128) -> bool {
    mask & mask.wrapping_add(1) == 0
}

/// netaddr `IPAddress(str)` with the version detected: IPv4 then IPv6.
fn parse_address(s: &str, netaddr: Netaddr) -> Option<(Family, u128)> {
    [Family::V4, Family::V6]
        .into_iter()
        .find_map(|f| f.ip_address(s, netaddr).ok().map(|v| (f, v)))
}

/// netaddr 0.10's `ipv4.expand_partial_address`: one to four dot-separated Python
/// `int()`s, printed back and padded with `.0` to four; `None` where it raises.
fn expand_partial_address(addr: &str) -> Option<String> {
    if addr.contains(':') {
        return None;
    }
    let tokens: Vec<String> = addr
        .split('.')
        .map(|o| py::int::int_saturating(o).ok().map(|n| n.to_string()))
        .collect::<Option<_>>()?;
    if !(1..=4).contains(&tokens.len()) {
        return None;
    }
    let mut octets = tokens;
    octets.resize(4, "0".to_string());
    Some(octets.join("."))
}

/// glibc `inet_pton4`: four decimal octets ≤ 255, no leading zeros, nothing else.
fn inet_pton4(src: &[u8]) -> Option<u32> {
    let mut octets = [0u32; 4];
    let mut idx = 0usize;
    let mut count = 0;
    let mut saw_digit = false;
    for &ch in src {
        match ch {
            b'0'..=b'9' => {
                let new = octets[idx] * 10 + u32::from(ch - b'0');
                if saw_digit && octets[idx] == 0 {
                    return None;
                }
                if new > 255 {
                    return None;
                }
                octets[idx] = new;
                if !saw_digit {
                    count += 1;
                    if count > 4 {
                        return None;
                    }
                    saw_digit = true;
                }
            }
            b'.' if saw_digit => {
                if count == 4 {
                    return None;
                }
                idx += 1;
                saw_digit = false;
            }
            _ => return None,
        }
    }
    if count < 4 {
        return None;
    }
    Some(octets.iter().fold(0u32, |acc, o| (acc << 8) | o))
}

/// glibc `inet_pton6`: hex groups of 1-4 digits, one `::`, an optional dotted IPv4 tail.
fn inet_pton6(src: &[u8]) -> Option<u128> {
    let mut tmp = [0u8; 16];
    let mut tp = 0usize;
    let mut colonp: Option<usize> = None;
    let mut i = 0usize;
    if src.is_empty() {
        return None;
    }
    if src[0] == b':' {
        i = 1;
        if src.len() == 1 || src[1] != b':' {
            return None;
        }
    }
    let mut curtok = i;
    let mut xdigits_seen = 0;
    let mut val: u32 = 0;
    while i < src.len() {
        let ch = src[i];
        i += 1;
        if let Some(digit) = (ch as char).to_digit(16) {
            if xdigits_seen == 4 {
                return None;
            }
            val = (val << 4) | digit;
            if val > 0xffff {
                return None;
            }
            xdigits_seen += 1;
            continue;
        }
        if ch == b':' {
            curtok = i;
            if xdigits_seen == 0 {
                if colonp.is_some() {
                    return None;
                }
                colonp = Some(tp);
                continue;
            } else if i == src.len() {
                return None;
            }
            if tp + 2 > 16 {
                return None;
            }
            tmp[tp] = (val >> 8) as u8;
            tmp[tp + 1] = val as u8;
            tp += 2;
            xdigits_seen = 0;
            val = 0;
            continue;
        }
        if ch == b'.' && tp + 4 <= 16 {
            if let Some(v4) = inet_pton4(&src[curtok..]) {
                tmp[tp..tp + 4].copy_from_slice(&v4.to_be_bytes());
                tp += 4;
                xdigits_seen = 0;
                break;
            }
        }
        return None;
    }
    if xdigits_seen > 0 {
        if tp + 2 > 16 {
            return None;
        }
        tmp[tp] = (val >> 8) as u8;
        tmp[tp + 1] = val as u8;
        tp += 2;
    }
    if let Some(cp) = colonp {
        if tp == 16 {
            return None;
        }
        let n = tp - cp;
        tmp.copy_within(cp..tp, 16 - n);
        for b in &mut tmp[cp..16 - n] {
            *b = 0;
        }
        tp = 16;
    }
    if tp != 16 {
        return None;
    }
    Some(u128::from_be_bytes(tmp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::RequestSpec;
    use chrono::Utc;
    use std::collections::BTreeMap;

    fn evaluate(hints: &[(&str, &[&str])], host_ip: Option<&str>) -> Result<bool, PyError> {
        evaluate_with(Netaddr::V1, hints, host_ip)
    }

    fn evaluate_with(
        netaddr: Netaddr,
        hints: &[(&str, &[&str])],
        host_ip: Option<&str>,
    ) -> Result<bool, PyError> {
        let spec = RequestSpec {
            scheduler_hints: Some(
                hints
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Default::default()
        };
        let req = FilterRequest {
            spec: &spec,
            now: Utc::now(),
            index: 0,
            is_rebuild: false,
        };
        let host = HostState {
            host: "host1".into(),
            host_ip: host_ip.map(std::sync::Arc::from),
            ..Default::default()
        };
        SimpleCIDRAffinityFilter { netaddr }.check(&host, req.spec)
    }

    /// netaddr 0.10 (nova 29, 30): partial IPv4 network addresses are expanded, and
    /// every failure is an AddrFormatError.
    #[test]
    fn netaddr_0_10_expands_partial_networks() {
        let old = |hints: &[(&str, &[&str])], ip| evaluate_with(Netaddr::V0_10, hints, ip);
        fn near<'a>(ip: &'a [&'a str], cidr: &'a [&'a str]) -> [(&'a str, &'a [&'a str]); 2] {
            [("build_near_host_ip", ip), ("cidr", cidr)]
        }
        assert_eq!(old(&near(&["10"], &["/8"]), Some("10.1.2.3")), Ok(true));
        assert_eq!(old(&near(&["010.1"], &["/16"]), Some("10.1.2.3")), Ok(true));
        assert_eq!(old(&near(&["10.2"], &["/16"]), Some("10.1.2.3")), Ok(false));
        assert!(evaluate(&near(&["10"], &["/8"]), Some("10.1.2.3")).is_err());
        let none = old(&near(&["10.0.0.1"], &["/24"]), None).expect_err("raises");
        assert!(none.message.starts_with(ADDR_FORMAT_ERROR), "{none:?}");
        assert_eq!(
            evaluate(&near(&["10.0.0.1"], &["/24"]), None)
                .unwrap_err()
                .kind,
            PyExc::TypeError
        );
        let nul = old(&near(&["10.0.0.1\0"], &["/24"]), Some("10.0.0.1")).expect_err("raises");
        assert!(nul.message.starts_with(ADDR_FORMAT_ERROR), "{nul:?}");
        assert!(old(&near(&["10.0.0.256"], &["/24"]), Some("10.0.0.1")).is_err());
    }

    /// nova's test_affinity_filters (SimpleCIDR part).
    #[test]
    fn nova_vectors() {
        let near: &[&str] = &["10.8.1.100"];
        let ip = Some("10.8.1.1");
        assert_eq!(
            evaluate(&[("build_near_host_ip", near), ("cidr", &["/24"])], ip),
            Ok(true)
        );
        assert_eq!(
            evaluate(&[("build_near_host_ip", near), ("cidr", &["/32"])], ip),
            Ok(false)
        );
        assert_eq!(evaluate(&[], ip), Ok(true));
        // cidr defaults to /24.
        assert_eq!(evaluate(&[("build_near_host_ip", near)], ip), Ok(true));
        assert!(SimpleCIDRAffinityFilter::default().once_per_request());
        assert!(!SimpleCIDRAffinityFilter::default().run_on_rebuild());
    }

    #[test]
    fn hint_shapes() {
        let ip = Some("10.8.1.1");
        // Falsy address hints pass without looking at cidr.
        assert_eq!(
            evaluate(&[("build_near_host_ip", &[]), ("cidr", &["x", "y"])], ip),
            Ok(true)
        );
        assert_eq!(evaluate(&[("build_near_host_ip", &[""])], ip), Ok(true));
        // Lists of several are not strings: nova raises TypeError in str.join.
        assert!(evaluate(&[("build_near_host_ip", &["10.8.1.1", "10.8.1.2"])], ip).is_err());
        assert!(evaluate(&[("build_near_host_ip", &["10.8.1.1"]), ("cidr", &[])], ip).is_err());
        // An empty cidr leaves a single-address network.
        assert_eq!(
            evaluate(
                &[("build_near_host_ip", &["10.8.1.1"]), ("cidr", &[""])],
                ip
            ),
            Ok(true)
        );
        // No host_ip: IPAddress(None) raises.
        assert!(evaluate(&[("build_near_host_ip", &["10.8.1.1"])], None).is_err());
        let long = format!("/{}24", " ".repeat(MAX_NETWORK_LEN));
        assert!(evaluate(
            &[
                ("build_near_host_ip", &["10.8.1.1"]),
                ("cidr", &[long.as_str()])
            ],
            ip
        )
        .is_err());
    }

    /// `IPAddress(host) in IPNetwork(ip + cidr)` as computed by netaddr 1.3.0 (nova 34's
    /// venv), or the class of the exception it raises.
    #[test]
    fn netaddr_vectors() {
        let cases: &[(&str, &str, &str, Result<bool, &str>)] = &[
            ("10.8.1.100", "/24", "10.8.1.1", Ok(true)),
            ("10.8.1.100", "/32", "10.8.1.1", Ok(false)),
            ("10.8.1.1", "/32", "10.8.1.1", Ok(true)),
            ("10.8.1.100", "/0", "192.168.0.1", Ok(true)),
            ("10.8.1.100", "/33", "10.8.1.1", Err("AddrFormatError")),
            ("10.8.1.100", "/-1", "10.8.1.1", Err("AddrFormatError")),
            ("10.8.1.100", "/ 24 ", "10.8.1.1", Ok(true)),
            ("10.8.1.100", "/+24", "10.8.1.1", Ok(true)),
            ("10.8.1.100", "/2_4", "10.8.1.1", Ok(true)),
            ("10.8.1.100", "/255.255.255.0", "10.8.1.1", Ok(true)),
            (
                "10.8.1.100",
                "/255.255.0.255",
                "10.8.1.1",
                Err("AddrFormatError"),
            ),
            ("10.8.1.100", "/0.0.0.255", "10.8.2.1", Ok(false)),
            ("10.8.1.100", "/0.0.255.255", "10.8.2.1", Ok(true)),
            ("10.8.1.100", "/0.0.0.0", "1.1.1.1", Ok(true)),
            ("10.8.1.100", "/255.255.255.255", "10.8.1.100", Ok(true)),
            ("10.8.1.100", "", "10.8.1.100", Ok(true)),
            ("10.8.1.100", "", "10.8.1.101", Ok(false)),
            ("10.8.1.100", "/", "10.8.1.1", Err("AddrFormatError")),
            ("10.8.1.100", "/24/1", "10.8.1.1", Err("ValueError")),
            ("010.8.1.100", "/24", "10.8.1.1", Err("AddrFormatError")),
            ("10.8.1", "/24", "10.8.1.1", Err("AddrFormatError")),
            ("10.8.1.256", "/24", "10.8.1.1", Err("AddrFormatError")),
            ("10.8.1.1.", "/24", "10.8.1.1", Err("AddrFormatError")),
            ("fe80::1", "/64", "fe80::2", Ok(true)),
            ("fe80::1", "/64", "fe81::2", Ok(false)),
            ("fe80::1", "/24", "10.8.1.1", Ok(false)),
            ("10.8.1.1", "/24", "::ffff:10.8.1.1", Ok(false)),
            ("::ffff:10.8.1.1", "/120", "::ffff:10.8.1.7", Ok(true)),
            ("::", "/0", "2001:db8::1", Ok(true)),
            ("fe80::1", "/ffff:ffff:ffff:ffff::", "fe80::abcd", Ok(true)),
            ("fe80::1", "/::ffff", "fe80::1:0", Ok(false)),
            ("fe80::1", "/129", "fe80::1", Err("AddrFormatError")),
            ("1:2:3:4:5:6:7::", "/128", "1:2:3:4:5:6:7:0", Ok(true)),
            (
                "1:2:3:4:5:6:7:8::",
                "/64",
                "1:2:3:4::",
                Err("AddrFormatError"),
            ),
            ("::1.2.3.4", "/96", "::5.6.7.8", Ok(true)),
            ("1::2::3", "/64", "1::", Err("AddrFormatError")),
            ("12345::", "/16", "1234::", Err("AddrFormatError")),
            ("FE80::1", "/10", "fe80::9", Ok(true)),
            (":1::", "/64", "1::", Err("AddrFormatError")),
            ("1.2.3.4", "/24", "1.2.3.4 ", Err("AddrFormatError")),
            ("10.0.0.1", "/8", "10.255.255.255", Ok(true)),
            ("10.0.0.1", "/8", "11.0.0.0", Ok(false)),
            ("10.0.0.1", "/08", "10.1.1.1", Ok(true)),
            ("10.0.0.1", "/1.2.3.4", "10.0.0.1", Err("AddrFormatError")),
            ("a.b.c.d", "/8", "10.1.1.1", Err("AddrFormatError")),
            ("1.2.3.4", "/::", "1.2.3.4", Err("AddrFormatError")),
            ("::", "/0.0.0.0", "::1", Err("AddrFormatError")),
            ("1::", "/ffff::", "1:ffff::", Ok(true)),
            (
                "::",
                "/ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
                "::",
                Ok(true),
            ),
            ("::", "/::", "1::", Ok(true)),
            ("10.8.1.100", "/24", "not-an-ip", Err("AddrFormatError")),
            ("10.8.1.100", "/24", "0.0.0.0", Ok(false)),
            ("1.2.3.4", "/24", "::", Ok(false)),
            ("0:0:0:0:0:0:0:0:0", "/24", "::", Err("AddrFormatError")),
            ("::1:2:3:4:5:6:7", "/128", "0:1:2:3:4:5:6:7", Ok(true)),
            (
                "1:2:3:4:5:6::1.2.3.4",
                "/128",
                "1:2:3:4:5:6:0:0",
                Err("AddrFormatError"),
            ),
            (
                "1:2:3:4:5:6:1.2.3.4",
                "/128",
                "1:2:3:4:5:6:102:304",
                Ok(true),
            ),
            (
                "1:2:3:4:5:6:7:1.2.3.4",
                "/128",
                "::",
                Err("AddrFormatError"),
            ),
            ("00001::", "/16", "1::", Err("AddrFormatError")),
            ("::ffff:1.2.3", "/16", "::", Err("AddrFormatError")),
            ("::ffff:01.2.3.4", "/16", "::", Err("AddrFormatError")),
            ("1.2.3.4", "/24\n", "1.2.3.1", Ok(true)),
            ("1.2.3.4\0", "/24", "1.2.3.1", Err("ValueError")),
            ("1.2.3.4", "/255.0\0", "1.2.3.1", Err("AddrFormatError")),
            ("::1\0", "/24", "::1", Err("ValueError")),
            ("1.2.3.4", "/24\0", "1.2.3.1", Err("ValueError")),
            ("::1", "/ffff::/3", "::1", Err("ValueError")),
            ("zz", "/24/3", "::1", Err("AddrFormatError")),
            ("1.2.3.4", "/1.2.3.4/5", "1.2.3.4", Err("ValueError")),
            ("1.2.3.4", "/\u{662}\u{664}", "1.2.3.1", Ok(true)),
        ];
        for (ip, cidr, host_ip, want) in cases {
            let got = evaluate(
                &[("build_near_host_ip", &[ip]), ("cidr", &[cidr])],
                Some(host_ip),
            )
            .map_err(|e| {
                if e.message.starts_with(ADDR_FORMAT_ERROR) {
                    "AddrFormatError"
                } else {
                    e.kind.name()
                }
            });
            assert_eq!(got, *want, "{ip:?}{cidr:?} ∋ {host_ip:?}");
        }
    }
}
