//! Tokio glue for Gearshift: listeners, connections and the engine task.
//!
//! [`Server::bind`] opens the listeners (port 0 works, for tests);
//! [`Server::run`] accepts connections until the shutdown future resolves or
//! an admin `shutdown` arrives. Each connection is a reader task and a writer
//! task ([`connection`]); all routing happens in one engine task
//! ([`engine`]) that owns the sans-IO core, so there is no shared mutable
//! state and no lock.

pub mod clock;
pub mod config;
pub mod connection;
pub mod engine;
pub mod store_task;

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gearshift_core::{ConnId, ConnInfo, Core, Effect, StoreOp};
use gearshift_store::{Durability, LogOptions, LogStore, Store, StoreError};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify, Semaphore};

pub use config::{ServerConfig, StoreConfig};
use engine::{Engine, EngineMsg};
use store_task::StoreTask;

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration is unusable.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The job store could not be opened or read; no job was discarded.
    #[error("cannot use the job store in {dir}: {source}")]
    Store {
        /// Data directory.
        dir: String,
        /// Why.
        source: StoreError,
    },
}

/// A bound, not yet running server.
pub struct Server {
    cfg: ServerConfig,
    listeners: Vec<TcpListener>,
    core: Core,
    store: Option<Box<dyn Store>>,
}

impl Server {
    /// Opens the configured store (replaying its jobs), then binds every
    /// listen address.
    pub async fn bind(cfg: ServerConfig) -> Result<Server, ServerError> {
        let store: Option<Box<dyn Store>> = match &cfg.store {
            StoreConfig::Memory => None,
            StoreConfig::Log { dir, durability } => {
                let opts = LogOptions {
                    durability: *durability,
                    ..LogOptions::default()
                };
                let store = LogStore::open(dir, opts).map_err(|source| ServerError::Store {
                    dir: dir.display().to_string(),
                    source,
                })?;
                Some(Box::new(store))
            }
        };
        Server::bind_with_store(cfg, store).await
    }

    /// Like [`Server::bind`] with a store supplied by the caller (tests use
    /// this to inject faults); `None` keeps jobs in memory only.
    pub async fn bind_with_store(
        cfg: ServerConfig,
        mut store: Option<Box<dyn Store>>,
    ) -> Result<Server, ServerError> {
        cfg.core.validate().map_err(ServerError::Config)?;
        let store_err = |source| {
            let dir = match &cfg.store {
                StoreConfig::Log { dir, .. } => dir.display().to_string(),
                StoreConfig::Memory => "the supplied store".to_owned(),
            };
            ServerError::Store { dir, source }
        };
        let mut core_cfg = cfg.core.clone();
        core_cfg.durable = store.is_some();
        let mut core = Core::new(core_cfg);
        if let Some(store) = store.as_mut() {
            let replayed = store.replay().map_err(store_err)?;
            let count = replayed.jobs.len();
            let jobs = replayed
                .jobs
                .into_iter()
                .map(store_task::from_record)
                .collect();
            core.restore(jobs, replayed.next_id, clock::Clock::new().now());
            // The first handle reservation is on disk before any handle is
            // handed out, so no handle can repeat after a crash.
            for effect in core.take_effects() {
                if let Effect::Store(StoreOp::Reserve(upto)) = effect {
                    store.reserve(upto);
                }
            }
            store.flush().map_err(store_err)?;
            if count > 0 {
                tracing::info!(jobs = count, "restored stored jobs");
            }
        }
        let mut listeners = Vec::new();
        for &addr in &cfg.listen {
            let l = TcpListener::bind(addr)
                .await
                .map_err(|source| ServerError::Bind { addr, source })?;
            listeners.push(l);
        }
        Ok(Server {
            cfg,
            listeners,
            core,
            store,
        })
    }

    /// The bound addresses (with the real port when 0 was asked).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// Serves until `shutdown` resolves (a graceful stop: running jobs
    /// finish first) or an admin `shutdown` command is accepted.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) {
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop_tx, stop_rx) = watch::channel(false);
        let sync_every = match &self.cfg.store {
            StoreConfig::Log {
                durability: Durability::Interval(every),
                ..
            } => Some(*every),
            _ => None,
        };
        let store = match self.store {
            Some(store) => match StoreTask::spawn(store, tx.clone(), sync_every) {
                Ok(task) => Some(task),
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the store thread");
                    return;
                }
            },
            None => None,
        };
        let engine = Engine::new(self.core, stop_tx, store);
        let engine = tokio::spawn(engine.run(rx));
        let signal_tx = tx.clone();
        tokio::spawn(async move {
            shutdown.await;
            let _ = signal_tx.send(EngineMsg::Shutdown { graceful: true });
        });
        let limit = Arc::new(Semaphore::new(self.cfg.max_connections.max(1)));
        let next_id = Arc::new(AtomicU64::new(1));
        let mut acceptors = Vec::new();
        for listener in self.listeners {
            acceptors.push(tokio::spawn(accept_loop(
                listener,
                tx.clone(),
                stop_rx.clone(),
                limit.clone(),
                next_id.clone(),
                self.cfg.max_packet_size,
            )));
        }
        drop(tx);
        let _ = engine.await;
        for a in acceptors {
            a.abort();
        }
        // Let writers flush what the engine queued last.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn accept_loop(
    listener: TcpListener,
    engine: mpsc::UnboundedSender<EngineMsg>,
    mut stop: watch::Receiver<bool>,
    limit: Arc<Semaphore>,
    next_id: Arc<AtomicU64>,
    max_packet: usize,
) {
    loop {
        let permit = tokio::select! {
            p = limit.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = stop.changed() => return,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => return,
        };
        let (stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let id = ConnId(next_id.fetch_add(1, Ordering::Relaxed));
        configure(&stream);
        let info = ConnInfo {
            fd: i64::from(stream.as_raw_fd()),
            ip: peer.ip().to_canonical().to_string(),
            loopback: peer.ip().to_canonical().is_loopback(),
        };
        let (rd, wr) = stream.into_split();
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        if engine
            .send(EngineMsg::Connect {
                id,
                info,
                tx: out_tx,
            })
            .is_err()
        {
            return;
        }
        let closed = Arc::new(Notify::new());
        tokio::spawn(connection::write_loop(wr, out_rx, closed.clone()));
        let engine = engine.clone();
        tokio::spawn(async move {
            connection::read_loop(id, peer, rd, engine, closed, max_packet).await;
            drop(permit);
        });
    }
}

/// No Nagle delay (request/response traffic), and TCP keepalive so a worker
/// whose link died silently is noticed and its jobs requeued.
fn configure(stream: &TcpStream) {
    let _ = stream.set_nodelay(true);
    let ka = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(60))
        .with_interval(Duration::from_secs(10))
        .with_retries(6);
    let _ = socket2::SockRef::from(stream).set_tcp_keepalive(&ka);
}
