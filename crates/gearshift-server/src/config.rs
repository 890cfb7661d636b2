//! What the server needs to know to run: where to listen, limits, and the
//! core's own settings.

use std::net::SocketAddr;
use std::path::PathBuf;

use gearshift_core::policy::Policies;
use gearshift_core::schedule::ScheduleSpec;
use gearshift_core::CoreConfig;
use gearshift_store::Durability;

/// Where jobs are kept.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// In memory only, as gearmand without a queue plugin: a restart loses jobs.
    Memory,
    /// The embedded append-only log in `dir`.
    Log {
        /// Data directory.
        dir: PathBuf,
        /// When an acknowledged job is on disk.
        durability: Durability,
    },
    /// A PostgreSQL database (one node per database for now).
    Postgres {
        /// `postgres://user:pass@host:port/db`; libpq's environment
        /// variables fill what it leaves out. Never printed whole.
        url: String,
    },
}

impl StoreConfig {
    /// Where the store is, for messages: the directory, or the database
    /// without its password.
    pub fn describe(&self) -> String {
        match self {
            StoreConfig::Memory => "memory".to_owned(),
            StoreConfig::Log { dir, .. } => dir.display().to_string(),
            StoreConfig::Postgres { url } => gearshift_store::postgres::describe_url(url),
        }
    }
}

/// By hand, so a database password never reaches a log.
impl std::fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreConfig::Memory => f.write_str("Memory"),
            StoreConfig::Log { dir, durability } => f
                .debug_struct("Log")
                .field("dir", dir)
                .field("durability", durability)
                .finish(),
            StoreConfig::Postgres { .. } => f
                .debug_struct("Postgres")
                .field("server", &self.describe())
                .finish(),
        }
    }
}

/// Default [`ServerConfig::max_output`]: 4 MiB.
pub const DEFAULT_MAX_OUTPUT: usize = 4 << 20;

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Addresses to listen on (port 0 picks a free port).
    pub listen: Vec<SocketAddr>,
    /// Largest packet body accepted; bigger closes the connection after an ERROR.
    pub max_packet_size: usize,
    /// Most simultaneous connections; further ones wait in the backlog.
    pub max_connections: usize,
    /// Settings of the routing core.
    pub core: CoreConfig,
    /// Where jobs are kept.
    pub store: StoreConfig,
    /// Threads that run connections (framing, parsing, encoding, socket
    /// I/O). `0` picks by the machine ([`ServerConfig::resolved_io_threads`]);
    /// with one I/O thread the routing core runs on it too, with more it has
    /// a thread of its own that they hand requests and replies to in batches.
    pub io_threads: usize,
    /// A connection whose unwritten output passes this many bytes is not
    /// read from until it drains below half of it.
    pub max_output: usize,
    /// Per-function policies (`--config`); [`crate::Server::reloader`]
    /// replaces them while the server runs.
    pub policies: Policies,
    /// Recurring jobs declared in the config file.
    pub schedules: Vec<ScheduleSpec>,
    /// The HTTP listener (metrics, JSON API, events, dashboard); `None`: off.
    pub http: Option<HttpConfig>,
    /// A connection that has sent nothing this long after it was accepted
    /// is closed (`--idle-timeout`); `None`: never.
    pub idle_timeout: Option<std::time::Duration>,
    /// Who may submit, work, read and change (`[access]`, `--admin-allow`).
    pub access: crate::access::AccessRules,
    /// TLS for the Gearman listeners (`--ssl`); `None`: plaintext only.
    pub tls: Option<crate::tls::TlsServer>,
    /// Addresses to listen on with TLS, beside the plain `listen` ones.
    pub tls_listen: Vec<SocketAddr>,
}

/// Settings of the HTTP listener (docs/http.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Where to listen (port 0 picks a free one).
    pub addr: SocketAddr,
    /// The bearer token changes (and non-loopback reads) must carry.
    pub token: Option<String>,
    /// Let any peer read without the token.
    pub public_read: bool,
    /// Event batches an event-stream reader may fall behind before it is
    /// dropped.
    pub event_buffer: usize,
    /// Serve HTTPS only, with this certificate (`--http-tls`).
    pub tls: Option<crate::tls::TlsServer>,
}

impl HttpConfig {
    /// Listens on `addr`, no token, reads from loopback only.
    pub fn new(addr: SocketAddr) -> Self {
        HttpConfig {
            addr,
            token: None,
            public_read: false,
            event_buffer: crate::events::DEFAULT_CAPACITY,
            tls: None,
        }
    }
}

/// What a config reload puts in force.
#[derive(Debug, Clone, Default)]
pub struct Reload {
    /// Per-function policies.
    pub policies: Policies,
    /// The config file's schedules.
    pub schedules: Vec<ScheduleSpec>,
    /// New access rules for connections opened from now on; `None` keeps
    /// the rules in force.
    pub access: Option<crate::access::AccessRules>,
}

/// Unwritten output past which a connection is closed. Its own requests
/// cannot get it there (reading stops at [`ServerConfig::max_output`] of
/// output or of requests not yet answered, and one read adds at most a
/// packet), so only other connections' traffic to a peer that does not read
/// at all (a worker streaming to a client that never reads) does.
pub fn output_hard_limit(max_output: usize, max_packet: usize) -> usize {
    max_output
        .saturating_mul(4)
        .saturating_add(max_packet.saturating_mul(2))
        .saturating_add(64 * 1024)
}

impl ServerConfig {
    /// The I/O thread count in force: the configured one, or by default one
    /// thread for a machine of one or two cores (where the hand-off between
    /// threads costs more than a second thread gives) and one per core but
    /// one, at most 16, on larger machines (the last is left to the store
    /// thread, HTTP and the kernel).
    pub fn resolved_io_threads(&self) -> usize {
        if self.io_threads > 0 {
            return self.io_threads;
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        default_io_threads(cores)
    }
}

/// The default I/O thread count for a machine with `cores` cores.
pub fn default_io_threads(cores: usize) -> usize {
    if cores <= 2 {
        1
    } else {
        (cores - 1).min(16)
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 4730))],
            max_packet_size: gearshift_proto::frame::DEFAULT_MAX_PACKET,
            max_connections: 100_000,
            core: CoreConfig::default(),
            store: StoreConfig::Memory,
            io_threads: 0,
            max_output: DEFAULT_MAX_OUTPUT,
            policies: Policies::default(),
            schedules: Vec::new(),
            http: None,
            idle_timeout: None,
            access: crate::access::AccessRules::default(),
            tls: None,
            tls_listen: Vec::new(),
        }
    }
}
