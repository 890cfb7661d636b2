//! Server addresses: normalising what users write (`host`, `host:port`,
//! `10.0.0.1`, `[::1]:4731`, a `SocketAddr`) to `host:port`, and opening a
//! TCP connection to one with a time limit.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
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

impl ServerAddr {
    /// Normalises an address, adding port 4730 when none is given.
    ///
    /// ```
    /// use gearshift_client::ServerAddr;
    /// let a: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    /// assert_eq!(ServerAddr::new(a).as_str(), "127.0.0.1:9");
    /// ```
    pub fn new(addr: impl ToString) -> ServerAddr {
        let s = addr.to_string();
        let s = s.trim();
        if s.parse::<SocketAddr>().is_ok() {
            return ServerAddr(s.to_owned());
        }
        if let Ok(ip) = s.parse::<IpAddr>() {
            return ServerAddr(SocketAddr::new(ip, DEFAULT_PORT).to_string());
        }
        if let Some((host, port)) = s.rsplit_once(':') {
            if !host.is_empty() && !host.contains(':') && port.parse::<u16>().is_ok() {
                return ServerAddr(s.to_owned());
            }
        }
        ServerAddr(format!("{s}:{DEFAULT_PORT}"))
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

impl fmt::Display for ServerAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises() {
        assert_eq!(ServerAddr::new("a.b:1").as_str(), "a.b:1");
        assert_eq!(ServerAddr::new(" a.b ").as_str(), "a.b:4730");
        assert_eq!(ServerAddr::new("[::1]:5").as_str(), "[::1]:5");
        assert_eq!(
            ServerAddr::new("a.b:notaport").as_str(),
            "a.b:notaport:4730"
        );
    }
}
