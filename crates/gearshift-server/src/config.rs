//! What the server needs to know to run: where to listen, limits, and the
//! core's own settings.

use std::net::SocketAddr;
use std::path::PathBuf;

use gearshift_core::CoreConfig;
use gearshift_store::Durability;

/// Where jobs are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

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
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 4730))],
            max_packet_size: gearshift_proto::frame::DEFAULT_MAX_PACKET,
            max_connections: 100_000,
            core: CoreConfig::default(),
            store: StoreConfig::Memory,
        }
    }
}
