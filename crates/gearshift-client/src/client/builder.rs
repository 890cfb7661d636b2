//! [`ClientBuilder`]: the servers and settings of a [`Client`].

use std::sync::Arc;
use std::time::Duration;

use crate::addr::ServerAddr;
use crate::client::pool::{Pool, PoolConfig};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::tls::TlsConfig;

/// Default limit on each client call.
///
/// ```
/// use gearshift_client::client::DEFAULT_TIMEOUT;
/// assert_eq!(DEFAULT_TIMEOUT.as_secs(), 30);
/// ```
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Default limit on opening a TCP connection.
///
/// ```
/// use gearshift_client::client::DEFAULT_CONNECT_TIMEOUT;
/// assert_eq!(DEFAULT_CONNECT_TIMEOUT.as_secs(), 3);
/// ```
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Settings of a [`Client`]; start with [`Client::builder`].
///
/// ```
/// use std::time::Duration;
/// use gearshift_client::Client;
///
/// let client = Client::builder()
///     .server("10.0.0.1")
///     .servers(["10.0.0.2:4730", "10.0.0.3:4730"])
///     .timeout(Duration::from_secs(5))
///     .exceptions(true)
///     .build()?;
/// assert_eq!(client.servers().count(), 3);
/// # Ok::<(), gearshift_client::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    servers: Vec<ServerAddr>,
    timeout: Option<Duration>,
    pool: PoolConfig,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            servers: Vec::new(),
            timeout: Some(DEFAULT_TIMEOUT),
            pool: PoolConfig {
                connect_timeout: DEFAULT_CONNECT_TIMEOUT,
                exceptions: true,
                dead_set: false,
                backoff_min: Duration::from_millis(100),
                backoff_max: Duration::from_secs(5),
                tls: None,
            },
        }
    }
}

impl ClientBuilder {
    /// Adds a server (`host`, `host:port`, an IP or a `SocketAddr`; port 4730 by default).
    ///
    /// ```
    /// let b = gearshift_client::Client::builder().server("127.0.0.1:4730");
    /// # let _ = b;
    /// ```
    pub fn server(mut self, addr: impl ToString) -> Self {
        self.servers.push(ServerAddr::new(addr));
        self
    }

    /// Adds several servers.
    ///
    /// ```
    /// let b = gearshift_client::Client::builder().servers(["a:4730", "b:4730"]);
    /// # let _ = b;
    /// ```
    pub fn servers<I>(mut self, addrs: I) -> Self
    where
        I: IntoIterator,
        I::Item: ToString,
    {
        self.servers.extend(addrs.into_iter().map(ServerAddr::new));
        self
    }

    /// The default limit on each call (30 s unless set): a submission until
    /// JOB_CREATED, a [`Client::run`] until the result, a status or echo
    /// until its reply. Override per call with [`Client::with_timeout`] or
    /// [`crate::JobBuilder::timeout`].
    ///
    /// ```
    /// let b = gearshift_client::Client::builder().timeout(std::time::Duration::from_secs(2));
    /// # let _ = b;
    /// ```
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// Calls wait without limit by default.
    ///
    /// ```
    /// let b = gearshift_client::Client::builder().no_timeout();
    /// # let _ = b;
    /// ```
    pub fn no_timeout(mut self) -> Self {
        self.timeout = None;
        self
    }

    /// Limit on opening one TCP connection (3 s unless set); past it the
    /// next server is tried.
    ///
    /// ```
    /// let b = gearshift_client::Client::builder().connect_timeout(std::time::Duration::from_secs(1));
    /// # let _ = b;
    /// ```
    pub fn connect_timeout(mut self, limit: Duration) -> Self {
        self.pool.connect_timeout = limit;
        self
    }

    /// Ask every connection for WORK_EXCEPTION packets (OPTION_REQ
    /// "exceptions"); on by default. Without it servers turn a worker's
    /// exception into a plain WORK_FAIL.
    ///
    /// ```
    /// let b = gearshift_client::Client::builder().exceptions(false);
    /// # let _ = b;
    /// ```
    pub fn exceptions(mut self, on: bool) -> Self {
        self.pool.exceptions = on;
        self
    }

    /// Ask every connection for Gearshift's OPTION_REQ "dead-set": a
    /// foreground job of this client that fails for good under a retry
    /// policy is kept in the dead set, as a background one is. Off by
    /// default; other servers refuse it (logged, the connection still works).
    ///
    /// ```
    /// let b = gearshift_client::Client::builder().dead_set(true);
    /// # let _ = b;
    /// ```
    pub fn dead_set(mut self, on: bool) -> Self {
        self.pool.dead_set = on;
        self
    }

    /// How long an unreachable server is skipped: from `min` (100 ms),
    /// doubling per failure up to `max` (5 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = gearshift_client::Client::builder()
    ///     .reconnect_backoff(Duration::from_millis(50), Duration::from_secs(1));
    /// # let _ = b;
    /// ```
    pub fn reconnect_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.pool.backoff_min = min;
        self.pool.backoff_max = max;
        self
    }

    /// Speaks TLS to every server (see [`TlsConfig`]); plain TCP unless set.
    ///
    /// ```no_run
    /// use gearshift_client::{Client, TlsConfig};
    /// let tls = TlsConfig::builder().ca_file("/etc/gearman/ca.pem").build()?;
    /// let client = Client::builder().server("gearman.internal").tls(tls).build()?;
    /// # let _ = client;
    /// # Ok::<(), gearshift_client::Error>(())
    /// ```
    pub fn tls(mut self, config: TlsConfig) -> Self {
        self.pool.tls = Some(config);
        self
    }

    /// Builds the client. Connections open lazily, on first use.
    ///
    /// ```
    /// let err = gearshift_client::Client::builder().build().unwrap_err();
    /// assert!(matches!(err, gearshift_client::Error::NoServers));
    /// ```
    pub fn build(self) -> Result<Client> {
        if self.servers.is_empty() {
            return Err(Error::NoServers);
        }
        for addr in &self.servers {
            addr.check()?;
        }
        Ok(Client {
            pool: Arc::new(Pool::new(self.servers, self.pool)),
            timeout: self.timeout,
        })
    }
}
