//! Runtime glue for Gearshift: listeners, I/O threads, the shared hub,
//! the store thread, shutdown.
//!
//! [`Server::bind`] opens the store and the listeners (port 0 works, for
//! tests); [`Server::run`] starts the threads and accepts connections until
//! the shutdown future resolves or an admin `shutdown` arrives.
//!
//! - [`io_thread`]: each I/O thread owns a share of the connections
//!   ([`connection`]: framing, parsing, encoding, socket I/O, the output
//!   limit), on a single-threaded runtime of its own.
//! - [`peers`]: an I/O thread's connections on the output side: encoding,
//!   writes, the output limits.
//! - [`hub`]: the sans-IO core with the clock and the store, fed
//!   [`hub::Item`]s, answering plain [`hub::Out`]s per I/O thread.
//! - [`core_lock`]: with several I/O threads, the hub they share; each
//!   hands it batches and runs it when no other thread does (with one I/O
//!   thread the hub runs on it).
//! - [`store_task`]: group commits on the store's thread, off the I/O path.
//! - `restore`: the core rebuilt from the store at bind.
//! - [`http`]: metrics, the JSON API, live events ([`events`]) and the
//!   dashboard, reaching the hub through [`control`].
//!
//! The accept loops (`accept`) run on the caller's runtime and deal
//! connections out.

mod accept;
pub mod access;
pub mod allow;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod control;
pub mod core_lock;
pub mod counters;
pub mod events;
pub mod handoff;
pub mod histogram;
pub mod http;
pub mod hub;
pub mod io_thread;
mod listeners;
pub mod peers;
mod pipe;
pub mod policy_file;
mod restore;
pub mod signal;
pub mod sock;
pub mod store_task;
mod threads;
pub mod tls;

pub use listeners::bind_listeners;
use listeners::bind_tls_listeners;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use gearshift_core::Core;
use gearshift_store::{LogOptions, LogStore, PgOptions, PgStore, Store, StoreError};
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify, Semaphore};

pub use config::{HttpConfig, Reload, ServerConfig, StoreConfig};
use control::HubLink;
pub use control::{Control, Stopped};
use core_lock::{CoreLock, IoLinks, ToCore};
use handoff::{Flow, OutSlot};
use hub::{Hub, Signals, ToHub};
pub use io_thread::local::LocalIo;
use io_thread::{Batcher, IoSettings, Sink, ToIo};
use store_task::{Deliver, StoreTask};
use threads::{spawn_thread, Join};

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
    /// Listeners whose connections speak TLS (`--ssl`).
    tls_listeners: Vec<TcpListener>,
    core: Core,
    store: Option<Box<dyn Store>>,
    /// The HTTP listener, if configured and bound.
    http: Option<TcpListener>,
    /// The store thread's commit latencies and failures.
    store_stats: Arc<store_task::StoreStats>,
    /// New policies for the running server ([`Server::reloader`]).
    reload: (ReloadTx, watch::Receiver<Option<Arc<Reload>>>),
    /// A cluster leader's check of relayed connections.
    relays: Option<Arc<cluster::relay::RelayGate>>,
    /// A cluster leader's lease, which the hub obeys.
    lease: Option<Arc<cluster::trust::LeaseTrust>>,
    /// The cluster's members, for the HTTP API.
    cluster: Option<Arc<cluster::view::ClusterView>>,
    /// Live events, for the HTTP listener and in-process subscribers.
    bus: Arc<events::EventBus>,
    /// Calls on the core for in-process users, live once `run` starts.
    control: Control,
    /// Where a partitioned node's listeners hand this server links.
    door: Option<Arc<watch::Sender<Option<accept::LinkDoor>>>>,
    /// Where HTTP submissions go when not to this server's own listener.
    submit_to: Option<SocketAddr>,
    /// The functions a partitioned node's job server takes submissions for.
    owns: Option<hub::Owns>,
    /// Where its only I/O thread runs, when not on a thread of its own.
    local_io: Option<LocalIo>,
    /// Connection events for `/metrics` (a partitioned node's outlive its
    /// job servers, and its listeners count there too).
    counters: Arc<counters::ConnCounters>,
}

/// Puts new per-function policies in force in a running server (a config
/// reload). Cheap to clone; does nothing once the server has stopped.
#[derive(Clone)]
pub struct Reloader(ReloadTx);

/// The sending end of config reloads.
pub(crate) type ReloadTx = watch::Sender<Option<Arc<Reload>>>;

impl Reloader {
    /// Replaces the policies and the config's schedules; jobs already
    /// waiting for a retry keep their time, kept schedules their next firing.
    pub fn reload(&self, reload: Reload) {
        let _ = self.0.send(Some(Arc::new(reload)));
    }
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
            StoreConfig::Postgres { url } => {
                // The sync client blocks on a runtime of its own: not here.
                let url = url.clone();
                let opened =
                    tokio::task::spawn_blocking(move || PgStore::open(&url, PgOptions::default()))
                        .await
                        .map_err(|e| {
                            ServerError::Config(format!("opening the store panicked: {e}"))
                        })?;
                let store = opened.map_err(|source| ServerError::Store {
                    dir: cfg.store.describe(),
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
        store: Option<Box<dyn Store>>,
    ) -> Result<Server, ServerError> {
        cfg.core.validate().map_err(ServerError::Config)?;
        let (listeners, http) = bind_listeners(&cfg).await?;
        let tls_listeners = bind_tls_listeners(&cfg).await?;
        Server::bind_on(cfg, store, listeners, tls_listeners, http).await
    }

    /// Like [`Server::bind_with_store`] on listeners bound already (a
    /// cluster node keeps its listeners while it changes role).
    pub async fn bind_on(
        cfg: ServerConfig,
        mut store: Option<Box<dyn Store>>,
        listeners: Vec<TcpListener>,
        tls_listeners: Vec<TcpListener>,
        http: Option<TcpListener>,
    ) -> Result<Server, ServerError> {
        cfg.core.validate().map_err(ServerError::Config)?;
        // Replaying may block (a database store's client blocks on a
        // runtime of its own), so it runs off this task.
        let (cfg, store, core) = tokio::task::spawn_blocking(move || {
            let core = restore::restore(&cfg, store.as_mut());
            (cfg, store, core)
        })
        .await
        .map_err(|e| ServerError::Config(format!("replaying the store panicked: {e}")))?;
        let core = core?;
        let (reload_tx, reload_rx) = watch::channel(None);
        let buffer = cfg
            .http
            .as_ref()
            .map_or(events::DEFAULT_CAPACITY, |h| h.event_buffer);
        Ok(Server {
            bus: events::EventBus::new(buffer),
            control: Control::pending(),
            http,
            relays: None,
            lease: None,
            cluster: None,
            door: None,
            local_io: None,
            submit_to: None,
            owns: None,
            counters: Arc::default(),
            store_stats: Arc::default(),
            reload: (reload_tx, reload_rx),
            cfg,
            listeners,
            tls_listeners,
            core,
            store,
        })
    }

    /// The live event bus: a subscriber in the same process (a bridge)
    /// gets the kinds it asks for from the time it subscribes.
    pub fn events(&self) -> Arc<events::EventBus> {
        self.bus.clone()
    }

    /// Calls on the core (as the HTTP API makes them) for a bridge in the
    /// same process; they fail with [`Stopped`] until the server runs.
    pub fn control(&self) -> Control {
        self.control.clone()
    }

    /// A handle that replaces the policies while the server runs.
    pub fn reloader(&self) -> Reloader {
        Reloader(self.reload.0.clone())
    }

    /// The bound addresses (with the real port when 0 was asked).
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// The bound TLS addresses (`--ssl`).
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        self.tls_listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// The bound HTTP address, if the HTTP listener is on.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// Serves until `shutdown` resolves (a graceful stop: running jobs
    /// finish first) or an admin `shutdown` command is accepted. Dropping
    /// the future stops every thread at once, as a crash would.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) {
        let threads = self.cfg.resolved_io_threads();
        let inline = threads == 1;
        let access = Arc::new(access::AccessCell::new(self.cfg.access.clone()));
        let (stop_tx, stop_rx) = watch::channel(false);
        let done = Arc::new(Notify::new());
        let signals = Signals {
            done: done.clone(),
            stop_accepting: stop_tx,
            timer: Arc::new(Notify::new()),
        };
        let mut hub = Hub::new(self.core, signals);
        let lease = self.lease.clone();
        if let Some(lease) = lease.clone() {
            hub.set_lease(lease);
        }
        if let Some(owns) = self.owns.clone() {
            hub.set_owned(owns);
        }
        hub.set_events(self.bus.clone());
        let bus = self.bus.clone();
        let prefix = hub.handle_prefix();
        // Set once the shared hub exists (several I/O threads): the store
        // thread's commits go to it.
        let shared: Arc<std::sync::OnceLock<std::sync::Weak<CoreLock>>> = Arc::default();
        let mut inboxes = Vec::with_capacity(threads);
        let mut receivers = Vec::with_capacity(threads);
        for _ in 0..threads {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<ToIo>();
            inboxes.push(tx);
            receivers.push(rx);
        }
        if let Some(store) = self.store {
            let deliver: Deliver = if inline {
                let tx = inboxes[0].clone();
                Box::new(move |c| {
                    let _ = tx.send(ToIo::Hub(ToHub::Commit(c)));
                })
            } else {
                let shared = shared.clone();
                Box::new(move |c| {
                    if let Some(core) = shared.get().and_then(std::sync::Weak::upgrade) {
                        let _ = core.post(ToCore::Hub(ToHub::Commit(c)));
                    }
                })
            };
            let timing = store_task::Timing::of(&self.cfg.store);
            match StoreTask::spawn(store, deliver, timing, self.store_stats.clone()) {
                Ok(task) => hub.set_store(task),
                Err(e) => {
                    tracing::error!(error = %e, "cannot start the store thread");
                    return;
                }
            }
        }
        let hard_output = config::output_hard_limit(self.cfg.max_output, self.cfg.max_packet_size);
        let counters = self.counters.clone();
        let flows: Vec<Arc<Flow>> = (0..threads).map(|_| Arc::default()).collect();
        let slots: Vec<Arc<OutSlot>> = (0..threads).map(|_| OutSlot::new()).collect();
        // The hub runs on the only I/O thread, or is shared by all of them.
        let (mut inline_hub, core) = if inline {
            (Some(Box::new(hub)), None)
        } else {
            let links = IoLinks {
                slots: slots.clone(),
                flows: flows.clone(),
            };
            let core = CoreLock::new(hub, links, counters.clone());
            let _ = shared.set(Arc::downgrade(&core));
            (None, Some(core))
        };
        let mut joins = Vec::new();
        for (index, rx) in receivers.into_iter().enumerate() {
            let settings = IoSettings {
                index,
                prefix: prefix.clone(),
                max_output: self.cfg.max_output,
                hard_output,
                max_packet: self.cfg.max_packet_size,
                idle_timeout: self.cfg.idle_timeout,
                access: access.clone(),
                counters: counters.clone(),
            };
            let sink = match (inline_hub.take(), &core) {
                (Some(hub), _) => Sink::Inline(hub),
                (None, None) => return,
                (None, Some(core)) => Sink::Shared(Batcher::new(
                    core.clone(),
                    flows[index].clone(),
                    slots[index].clone(),
                )),
            };
            let name = format!("gearshift-io-{index}");
            joins.push(match (&self.local_io, &sink) {
                (Some(here), Sink::Inline(_)) => here.run(settings, sink, rx).map(Join::Local),
                _ => spawn_thread(name, move || io_thread::run(settings, sink, rx)),
            });
        }
        if let Some(core) = &core {
            let core = core.clone();
            let name = "gearshift-core".to_owned();
            joins.push(spawn_thread(name, move || core.helper()));
        }
        let Some(joins) = joins.into_iter().collect::<Option<Vec<_>>>() else {
            stop_all(&inboxes, core.as_ref());
            return;
        };
        tracing::debug!(io_threads = threads, inline, "threads started");
        let link = match &core {
            None => HubLink::Inline(inboxes[0].clone()),
            Some(core) => HubLink::Shared(core.clone()),
        };
        self.control.attach(link.clone());
        // From here on, a dropped future (a crash in tests) stops the threads.
        let guard = StopGuard {
            inboxes: inboxes.clone(),
            core: core.clone(),
            armed: true,
        };
        let reloads = tokio::spawn(forward_reloads(
            self.reload.1.clone(),
            access.clone(),
            link.clone(),
        ));
        drop(self.reload);
        let (http_stop, http_stop_rx) = watch::channel(false);
        let http_task = match (self.http, &self.cfg.http) {
            (Some(listener), Some(hc)) => {
                let control = Control::new(link.clone());
                let gearman = self.submit_to.or_else(|| {
                    self.listeners
                        .first()
                        .and_then(|l| l.local_addr().ok())
                        .map(http::loopback_of)
                });
                let ctx = http::Context {
                    control,
                    bus,
                    auth: http::auth::Auth::new(hc.token.clone(), hc.public_read),
                    store_stats: self.store_stats.clone(),
                    counters: counters.clone(),
                    access: access.clone(),
                    gearman,
                    max_body: self.cfg.max_packet_size,
                    relays: self.relays.clone(),
                    cluster: self.cluster.clone(),
                    https: hc.tls.clone(),
                };
                Some(tokio::spawn(http::serve(listener, ctx, http_stop_rx)))
            }
            _ => None,
        };
        let limit = Arc::new(Semaphore::new(self.cfg.max_connections.max(1)));
        let next_id = Arc::new(AtomicU64::new(0));
        let door = self.door;
        if let Some(d) = &door {
            d.send_replace(Some(accept::LinkDoor::new(
                inboxes.clone(),
                next_id.clone(),
            )));
        }
        let mut tasks = Vec::new();
        let plain = self.listeners.into_iter().map(|l| (l, None));
        let tls = self
            .tls_listeners
            .into_iter()
            .map(|l| (l, self.cfg.tls.clone()));
        for (listener, tls) in plain.chain(tls) {
            let shared = accept::Shared {
                inboxes: inboxes.clone(),
                stop: stop_rx.clone(),
                limit: limit.clone(),
                next_id: next_id.clone(),
                gate: self.relays.clone(),
                counters: counters.clone(),
            };
            tasks.push(tokio::spawn(accept::accept_loop(listener, tls, shared)));
        }
        let mut aborts = AbortOnDrop(tasks.iter().map(|t| t.abort_handle()).collect());
        aborts.0.push(reloads.abort_handle());
        if let Some(t) = &http_task {
            aborts.0.push(t.abort_handle());
        }
        let signalled = tokio::select! {
            _ = shutdown => true,
            _ = done.notified() => false,
        };
        if signalled {
            link.send(ToHub::Shutdown(true));
            done.notified().await;
        }
        // HTTP ends with the server: event streams close, and requests
        // still in flight get a moment to finish.
        let _ = http_stop.send(true);
        if let Some(mut t) = http_task {
            if tokio::time::timeout(Duration::from_secs(2), &mut t)
                .await
                .is_err()
            {
                t.abort();
            }
        }
        for t in &tasks {
            t.abort();
        }
        // An aborted task drops its listener when the runtime next gets to
        // it; wait for that, so nothing listens once `run` has returned.
        for t in tasks {
            let _ = t.await;
        }
        reloads.abort();
        if let Some(d) = &door {
            d.send_replace(None);
        }
        let (fin_tx, fin_rx) = tokio::sync::oneshot::channel();
        link.send(ToHub::Finish(fin_tx));
        let _ = fin_rx.await;
        // A fenced hub dropped its answers: the connections end unanswered.
        let orderly = lease.as_ref().is_none_or(|l| l.trusted());
        for tx in &inboxes {
            let _ = tx.send(ToIo::Stop { orderly });
        }
        let mut guard = guard;
        guard.armed = false;
        // A thread that panicked is a bug: say so and end `run` with its
        // panic once every thread is joined, rather than stop as if clean.
        if let Some(p) = threads::join_all(joins).await {
            tracing::error!("a server thread panicked; the server stops with its panic");
            std::panic::resume_unwind(p);
        }
    }
}

/// Hands each reload of the policies to the thread that runs the hub.
async fn forward_reloads(
    mut rx: watch::Receiver<Option<Arc<Reload>>>,
    access: Arc<access::AccessCell>,
    link: HubLink,
) {
    while rx.changed().await.is_ok() {
        let Some(p) = rx.borrow_and_update().clone() else {
            continue;
        };
        if let Some(rules) = &p.access {
            access.set(rules.clone());
        }
        link.send(ToHub::Reload(p));
    }
}

/// Aborts tasks when dropped: the server's (accept loops, HTTP) when
/// [`Server::run`]'s future is dropped, so a cluster node that lost its
/// lease stops at once and its listeners serve the next role.
pub(crate) struct AbortOnDrop(pub(crate) Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// Stops every thread when [`Server::run`]'s future is dropped before it
/// finished (nothing is drained: as a crash).
struct StopGuard {
    inboxes: Vec<tokio::sync::mpsc::UnboundedSender<ToIo>>,
    core: Option<Arc<CoreLock>>,
    armed: bool,
}

impl Drop for StopGuard {
    fn drop(&mut self) {
        if self.armed {
            stop_all(&self.inboxes, self.core.as_ref());
        }
    }
}

fn stop_all(inboxes: &[tokio::sync::mpsc::UnboundedSender<ToIo>], core: Option<&Arc<CoreLock>>) {
    if let Some(core) = core {
        let _ = core.post(ToCore::Stop);
    }
    for tx in inboxes {
        let _ = tx.send(ToIo::Stop { orderly: false });
    }
}
