//! Server addresses: normalising what users write (`host`, `host:port`,
//! `10.0.0.1`, `[::1]:4731`, a `SocketAddr`) to `host:port`, and opening a
//! TCP connection to one with a time limit.

use std::fmt;
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::net::TcpStream;

use crate::error::{Error, Result};

/// The Gearman port, used when an address names none.
///
/// ```
/// use gearshift_client::{addr::DEFAULT_PORT, ServerAddr};
/// assert_eq!(ServerAddr::new("h").as_str(), format!("h:{DEFAULT_PORT}"));
/// ```
pub const DEFAULT_PORT: u16 = 4730;

/// One Gearman server, as `host:port`.
///
/// ```
/// use gearshift_client::ServerAddr;
/// assert_eq!(ServerAddr::new("gearman.local").to_string(), "gearman.local:4730");
/// assert_eq!(ServerAddr::new("10.0.0.1").to_string(), "10.0.0.1:4730");
/// assert_eq!(ServerAddr::new("::1").to_string(), "[::1]:4730");
/// assert_eq!(ServerAddr::new("127.0.0.1:4731").to_string(), "127.0.0.1:4731");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerAddr(String);

/// Why an address is unusable ([`ServerAddr::parse`]).
///
/// ```
/// let e = "127.0.0.1:99999".parse::<gearshift_client::ServerAddr>().unwrap_err();
/// assert_eq!(e.to_string(), "invalid port 99999 in 127.0.0.1:99999 (1-65535)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AddrError(String);

impl ServerAddr {
    /// Normalises an address, adding port 4730 when none is given. Never
    /// fails: text [`ServerAddr::parse`] refuses is kept as written (trimmed),
    /// so connecting to it fails and names it as the user wrote it; the
    /// client and worker builders refuse it at `build()`.
    ///
    /// ```
    /// use gearshift_client::ServerAddr;
    /// let a: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    /// assert_eq!(ServerAddr::new(a).as_str(), "127.0.0.1:9");
    /// assert_eq!(ServerAddr::new("h:99999").as_str(), "h:99999");
    /// ```
    pub fn new(addr: impl ToString) -> ServerAddr {
        let s = addr.to_string();
        ServerAddr::parse(&s).unwrap_or_else(|_| ServerAddr(s.trim().to_owned()))
    }

    /// Parses `host`, `host:port`, an IPv4 address, `[IPv6]`, `[IPv6]:port`
    /// or a bare IPv6 address (port 4730 when none is given). A port must be
    /// 1-65535; an IPv6 address with a port needs its brackets.
    ///
    /// ```
    /// use gearshift_client::ServerAddr;
    /// assert_eq!(ServerAddr::parse("[::1]:4731")?.as_str(), "[::1]:4731");
    /// assert_eq!(ServerAddr::parse("fe80::1")?.as_str(), "[fe80::1]:4730");
    /// assert!(ServerAddr::parse("h:0").is_err());
    /// # Ok::<(), gearshift_client::addr::AddrError>(())
    /// ```
    pub fn parse(text: &str) -> Result<ServerAddr, AddrError> {
        let s = text.trim();
        let bad = |why: String| Err(AddrError(why));
        if s.is_empty() {
            return bad("empty server address".to_owned());
        }
        if s.chars().any(char::is_whitespace) {
            return bad(format!("invalid server address {s:?} (it holds a space)"));
        }
        if let Some(rest) = s.strip_prefix('[') {
            // [IPv6] or [IPv6]:port.
            let Some((ip, after)) = rest.split_once(']') else {
                return bad(format!("invalid server address {s}: no closing ']'"));
            };
            let Ok(ip) = ip.parse::<Ipv6Addr>() else {
                return bad(format!("invalid IPv6 address [{ip}] in {s}"));
            };
            let port = match after {
                "" => DEFAULT_PORT,
                _ => match after.strip_prefix(':') {
                    Some(p) => port(p, s)?,
                    None => {
                        return bad(format!(
                            "invalid server address {s}: expected :PORT after ']'"
                        ))
                    }
                },
            };
            return Ok(ServerAddr(
                SocketAddr::new(IpAddr::V6(ip), port).to_string(),
            ));
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            // A bare address, IPv6 included (`::1`, `fe80::1`).
            return Ok(ServerAddr(SocketAddr::new(ip, DEFAULT_PORT).to_string()));
        }
        match s.split_once(':') {
            None => Ok(ServerAddr(format!("{s}:{DEFAULT_PORT}"))),
            Some((host, p)) if !p.contains(':') => {
                if host.is_empty() {
                    return bad(format!("invalid server address {s}: no host before ':'"));
                }
                let port = port(p, s)?;
                Ok(ServerAddr(format!("{host}:{port}")))
            }
            Some(_) => bad(format!(
                "invalid server address {s}: an IPv6 address with a port is written [ADDRESS]:PORT"
            )),
        }
    }

    /// [`Error::InvalidArgument`] unless [`ServerAddr::parse`] accepts the
    /// address (what [`ServerAddr::new`] kept as written is refused here).
    pub(crate) fn check(&self) -> Result<()> {
        ServerAddr::parse(&self.0)
            .map(drop)
            .map_err(|e| Error::InvalidArgument(e.to_string()))
    }

    /// The normalised `host:port` text.
    ///
    /// ```
    /// assert_eq!(gearshift_client::ServerAddr::new("h").as_str(), "h:4730");
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Opens a TCP connection (no Nagle delay), giving up after `limit`.
    pub(crate) async fn connect(&self, limit: Duration) -> Result<TcpStream> {
        let attempt = TcpStream::connect(self.0.as_str());
        let stream = match tokio::time::timeout(limit, attempt).await {
            Ok(Ok(s)) => s,
            Ok(Err(source)) => {
                return Err(Error::Connect {
                    addr: self.0.clone(),
                    source,
                })
            }
            Err(_) => {
                return Err(Error::Connect {
                    addr: self.0.clone(),
                    source: std::io::Error::new(std::io::ErrorKind::TimedOut, "connect timed out"),
                })
            }
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(addr = %self.0, error = %e, "cannot disable Nagle");
        }
        Ok(stream)
    }
}

/// The port of `whole`, 1-65535.
fn port(text: &str, whole: &str) -> Result<u16, AddrError> {
    match text.parse::<u16>() {
        Ok(p) if p > 0 => Ok(p),
        _ if text.is_empty() => Err(AddrError(format!("missing port after ':' in {whole}"))),
        _ => Err(AddrError(format!(
            "invalid port {text} in {whole} (1-65535)"
        ))),
    }
}

impl std::str::FromStr for ServerAddr {
    type Err = AddrError;

    fn from_str(s: &str) -> Result<ServerAddr, AddrError> {
        ServerAddr::parse(s)
    }
}

impl fmt::Display for ServerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> String {
        match ServerAddr::parse(s) {
            Ok(a) => a.0,
            Err(e) => panic!("{s:?}: {e}"),
        }
    }

    fn err(s: &str) -> String {
        match ServerAddr::parse(s) {
            Ok(a) => panic!("{s:?} parsed as {a}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn parses_hosts_ports_and_ip_addresses() {
        assert_eq!(ok("a.b:1"), "a.b:1");
        assert_eq!(ok(" a.b "), "a.b:4730");
        assert_eq!(ok("localhost:65535"), "localhost:65535");
        assert_eq!(ok("10.0.0.1"), "10.0.0.1:4730");
        assert_eq!(ok("10.0.0.1:4731"), "10.0.0.1:4731");
        assert_eq!(ok("[::1]:5"), "[::1]:5");
        assert_eq!(ok("[::1]"), "[::1]:4730");
        assert_eq!(ok("::1"), "[::1]:4730");
        assert_eq!(ok("2001:db8::7"), "[2001:db8::7]:4730");
        assert_eq!(ok("[2001:db8::7]:4731"), "[2001:db8::7]:4731");
    }

    #[test]
    fn refuses_bad_ports_and_ambiguous_addresses() {
        assert_eq!(
            err("127.0.0.1:99999"),
            "invalid port 99999 in 127.0.0.1:99999 (1-65535)"
        );
        assert_eq!(err("h:0"), "invalid port 0 in h:0 (1-65535)");
        assert_eq!(
            err("a.b:notaport"),
            "invalid port notaport in a.b:notaport (1-65535)"
        );
        assert_eq!(err("h:-1"), "invalid port -1 in h:-1 (1-65535)");
        assert_eq!(err("h:"), "missing port after ':' in h:");
        assert_eq!(
            err("[::1]:70000"),
            "invalid port 70000 in [::1]:70000 (1-65535)"
        );
        assert!(err("[::1").contains("no closing ']'"));
        assert!(err("[::1]x").contains("expected :PORT"));
        assert!(err("[host]:1").contains("invalid IPv6 address [host]"));
        assert!(err(":4730").contains("no host"));
        assert!(err("a b").contains("space"));
        assert_eq!(err(" "), "empty server address");
        // Not an IPv6 address, yet several colons: the port is ambiguous.
        assert!(err("host:1:2").contains("[ADDRESS]:PORT"));
    }

    #[test]
    fn new_keeps_what_parse_refuses() {
        assert_eq!(
            ServerAddr::new("127.0.0.1:99999").as_str(),
            "127.0.0.1:99999"
        );
        assert_eq!(ServerAddr::new("a.b:notaport").as_str(), "a.b:notaport");
        assert_eq!(ServerAddr::new("h").as_str(), "h:4730");
        assert_eq!(
            "::1".parse::<ServerAddr>(),
            Ok(ServerAddr::new("[::1]:4730"))
        );
    }
}
