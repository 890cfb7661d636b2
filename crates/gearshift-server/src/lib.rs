//! Tokio glue for Gearshift: listeners, connections and the engine task.
//!
//! [`Server::bind`] opens the listeners (port 0 works, for tests);
//! [`Server::run`] accepts connections until the shutdown future resolves or
//! an admin `shutdown` arrives. Each connection is one task
//! ([`connection`]) that reads and decodes; all routing happens in the
//! [`engine`], which owns the sans-IO core and every connection's output
//! behind one lock, taken once per read. `serve` runs it all on one
//! thread; the store's group commits run on a thread of their own
//! ([`store_task`]), which answers a commit's submitters itself when the
//! lock is free, else queues the result for the commit task.

pub mod clock;
pub mod config;
pub mod connection;
pub mod engine;
pub mod store_task;

use std::future::Future;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, TryLockError, Weak};
use std::time::Duration;

use std::sync::Mutex;

use gearshift_core::{ConnId, ConnInfo, Core, Effect, StoreOp};
use gearshift_store::{Durability, LogOptions, LogStore, Store, StoreError};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Notify, Semaphore};

pub use config::{ServerConfig, StoreConfig};
use engine::{Engine, Shared, Signals};
use store_task::{Commit, Deliver, StoreTask};

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
        let (stop_tx, stop_rx) = watch::channel(false);
        let sync_every = match &self.cfg.store {
            StoreConfig::Log {
                durability: Durability::Interval(every),
                ..
            } => Some(*every),
            _ => None,
        };
        let signals = Signals {
            timer: Arc::new(Notify::new()),
            flush: Arc::new(Notify::new()),
            done: Arc::new(Notify::new()),
            stop_accepting: stop_tx,
        };
        let (timer, flush, done) = (
            signals.timer.clone(),
            signals.flush.clone(),
            signals.done.clone(),
        );
        let engine: Shared = Arc::new(Mutex::new(Engine::new(self.core, signals)));
        let (commit_tx, commit_rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        if let Some(store) = self.store {
            let deliver = handoff(Arc::downgrade(&engine), commit_tx, queued.clone());
            match StoreTask::spawn(store, deliver, sync_every) {
                Ok(task) => engine::lock(&engine).set_store(task),
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the store thread");
                    return;
                }
            }
        }
        let mut tasks = vec![
            tokio::spawn(timer_loop(engine.clone(), timer)),
            tokio::spawn(flush_loop(engine.clone(), flush)),
            tokio::spawn(commit_loop(engine.clone(), commit_rx, queued)),
        ];
        let limit = Arc::new(Semaphore::new(self.cfg.max_connections.max(1)));
        let next_id = Arc::new(AtomicU64::new(1));
        for listener in self.listeners {
            tasks.push(tokio::spawn(accept_loop(
                listener,
                engine.clone(),
                stop_rx.clone(),
                limit.clone(),
                next_id.clone(),
                self.cfg.max_packet_size,
            )));
        }
        let signalled = tokio::select! {
            _ = shutdown => true,
            _ = done.notified() => false,
        };
        if signalled {
            engine::lock(&engine).begin_shutdown(true);
            done.notified().await;
        }
        for t in &tasks {
            t.abort();
        }
        let store = engine::lock(&engine).finish();
        if let Some(store) = store {
            // The store thread flushes what is queued, then ends.
            let _ = tokio::task::spawn_blocking(move || store.finish()).await;
        }
    }
}

/// Fires the core's timers when they are due; woken early when the engine
/// arms an earlier deadline.
async fn timer_loop(engine: Shared, wake: Arc<Notify>) {
    let mut deadline = engine::lock(&engine).arm();
    loop {
        tokio::select! {
            _ = sleep_until(deadline) => deadline = engine::lock(&engine).on_timer(),
            _ = wake.notified() => deadline = engine::lock(&engine).arm(),
        }
    }
}

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
        None => std::future::pending().await,
    }
}

/// Writes what the engine queued for connections, once the tasks that were
/// ready together have all had their turn.
async fn flush_loop(engine: Shared, wake: Arc<Notify>) {
    loop {
        wake.notified().await;
        engine::lock(&engine).flush();
    }
}

/// How the store thread hands a commit's result to the engine. When the
/// engine is free (and no earlier result is still queued) the store thread
/// takes the lock and answers the submitters itself: a synchronous client's
/// JOB_CREATED then leaves right after the flush, with no wake-up of the
/// runtime in between. When the runtime holds the lock (a busy server), the
/// result is queued for the commit task instead, so the store thread never
/// waits for the lock and the two threads do not trade it back and forth
/// (which cost pipelined `interval` submissions ~15 %). Results keep their
/// order: once one is queued, later ones queue behind it until it is taken.
/// The engine owns the store thread's queue, so the thread holds only a weak
/// reference to it.
fn handoff(
    engine: Weak<Mutex<Engine>>,
    tx: mpsc::UnboundedSender<Commit>,
    queued: Arc<AtomicUsize>,
) -> Deliver {
    Box::new(move |commit: Commit| {
        let Some(engine) = engine.upgrade() else {
            return;
        };
        if queued.load(Ordering::Acquire) == 0 {
            let free = match engine.try_lock() {
                Ok(e) => Some(e),
                Err(TryLockError::Poisoned(p)) => Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => None,
            };
            if let Some(mut e) = free {
                e.on_commit(commit);
                return;
            }
        }
        queued.fetch_add(1, Ordering::AcqRel);
        if tx.send(commit).is_err() {
            queued.fetch_sub(1, Ordering::AcqRel);
        }
    })
}

/// Hands the engine the commit results the store thread queued.
async fn commit_loop(
    engine: Shared,
    mut rx: mpsc::UnboundedReceiver<Commit>,
    queued: Arc<AtomicUsize>,
) {
    while let Some(commit) = rx.recv().await {
        let mut e = engine::lock(&engine);
        e.on_commit(commit);
        queued.fetch_sub(1, Ordering::AcqRel);
        while let Ok(more) = rx.try_recv() {
            e.on_commit(more);
            queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    engine: Shared,
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
        let stream = Arc::new(stream);
        let ctl = {
            let mut e = engine::lock(&engine);
            if !e.connect(id, info, stream.clone()) {
                return;
            }
            e.ctl(id)
        };
        let Some(ctl) = ctl else { return };
        let engine = engine.clone();
        tokio::spawn(async move {
            connection::serve(id, peer, stream, ctl, engine, max_packet).await;
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
