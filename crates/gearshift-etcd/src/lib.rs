//! The etcd bridge (issue 35): jobs of the etcd job queue (seed 004: JSON
//! documents under `<P>jobs/`, claimed by compare-and-swap) run on
//! Gearshift's Gearman workers, those workers appear in its registry
//! (`<P>workers/`), and Gearshift harvests lost workers, its own or native
//! ones. It runs inside `gearshift serve` and speaks Gearman to the server
//! over loopback, so a bridged job is an ordinary Gearshift job.
//!
//! - [`events`]: the server's events the bridge follows.
//! - [`keys`]: the key layout. [`doc`]: the documents. [`time`]: timestamps.
//! - [`queue`]: claimable jobs and per-function gates (no I/O).
//! - `store`: the etcd calls. `watch`: the job watch.
//! - `job`: one job from claim to `FINISHED`. `supervisor`: free workers
//!   and which worker runs which job, from the admin port.
//! - `registry`: Gearshift's workers under `<P>workers/`. `harvest`: the
//!   harvester. [`stats`]: counters. [`server`]: the worker list and events
//!   it follows (a job server's, or a partitioned node's HTTP API's).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use gearshift_client::Client;
use tokio::sync::{mpsc, Notify};

pub mod doc;
pub mod events;
mod harvest;
mod job;
pub mod keys;
mod outage;
pub mod queue;
mod registry;
pub mod server;
pub mod stats;
mod store;
mod supervisor;
pub mod time;
mod uncertain;
mod watch;

use keys::{Keys, Layout};

/// The largest job document the bridge reads; larger ones are left alone
/// (logged and counted).
pub const MAX_DOC: usize = 1 << 20;

/// What `--etcd*` and `[etcd]` say.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// `http://` or `https://` endpoints.
    pub endpoints: Vec<String>,
    /// The key prefix (ends in `/`).
    pub prefix: String,
    /// User and password, if etcd's auth is on.
    pub user: Option<(String, String)>,
    /// CA bundle (PEM) for `https://` endpoints.
    pub ca: Option<Vec<u8>>,
    /// Client certificate and key (PEM).
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// Where a job names its Gearman function (a dotted path).
    pub function_field: String,
    /// The function of a job that names none.
    pub default_function: String,
    /// A worker whose heartbeat is older is harvested; heartbeats are
    /// written every third of it.
    pub harvest_after: Duration,
    /// Single or split job directories.
    pub layout: Layout,
    /// This Gearshift's name in instance ids (`gearshift-<node>-<conn>`).
    pub node: String,
    /// The Gearshift server to speak Gearman to.
    pub gearman: SocketAddr,
}

/// What the server tells the bridge (forwarded from its live events).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEvent {
    /// A connection registered its first function.
    WorkerJoined {
        /// Connection id.
        id: u64,
        /// File descriptor (as `show workers` names it).
        fd: i64,
        /// Client id, else `fd@address`.
        label: String,
        /// Peer address.
        address: String,
        /// The subject of its TLS client certificate, if any.
        identity: Option<String>,
    },
    /// A worker connection closed.
    WorkerLeft {
        /// Connection id.
        id: u64,
    },
    /// A job waits out a retry delay.
    Retrying {
        /// Its handle.
        handle: String,
        /// When it runs again (Unix ms).
        at_ms: i64,
    },
    /// Events were lost (the bridge fell behind).
    Lagged,
}

/// A bad etcd setting.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// An endpoint is not `http://` or `https://`.
    #[error("--etcd {0}: endpoints are http://HOST:PORT or https://HOST:PORT")]
    Endpoint(String),
    /// No endpoint.
    #[error("--etcd needs at least one endpoint")]
    NoEndpoint,
    /// The Gearman client could not be built.
    #[error("etcd bridge: {0}")]
    Client(#[from] gearshift_client::Error),
}

/// A job this bridge runs: its id and its fenced state.
pub(crate) struct Running {
    pub id: String,
    pub held: Arc<tokio::sync::Mutex<job::Held>>,
}

/// What the bridge's tasks share.
pub(crate) struct Shared {
    etcd: store::Etcd,
    client: Client,
    /// The admin connection jobs share (a failed job's error, cancelling).
    admin: gearshift_client::admin::SharedAdmin,
    gearman: SocketAddr,
    keys: Keys,
    cfg: BridgeConfig,
    stats: Arc<stats::Stats>,
    queue: Mutex<queue::Queue>,
    /// Wakes the claimer: a new job, a free worker.
    wake: Notify,
    /// Bridged jobs in Gearshift by handle.
    running: Mutex<HashMap<String, Running>>,
    /// `gearshift-<node>`: the claims' `Owner` and the bridge's entry.
    owner: String,
    /// A claim went unanswered: the next harvest round looks for a claim
    /// of this bridge that applied unseen (a job `STARTED` by no task).
    unsure_claims: std::sync::atomic::AtomicBool,
}

impl Shared {
    fn queue(&self) -> std::sync::MutexGuard<'_, queue::Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn running(&self) -> std::sync::MutexGuard<'_, HashMap<String, Running>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Checks the settings without connecting (for `serve` to refuse bad ones).
pub fn check(config: &BridgeConfig) -> Result<(), ConfigError> {
    if config.endpoints.is_empty() {
        return Err(ConfigError::NoEndpoint);
    }
    for e in &config.endpoints {
        if !(e.starts_with("http://") || e.starts_with("https://")) {
            return Err(ConfigError::Endpoint(e.clone()));
        }
    }
    Ok(())
}

fn options(config: &BridgeConfig) -> etcd_client::ConnectOptions {
    let mut o = etcd_client::ConnectOptions::new()
        .with_connect_timeout(Duration::from_secs(2))
        .with_keep_alive(Duration::from_secs(5), Duration::from_secs(3))
        .with_keep_alive_while_idle(true)
        .with_require_leader(true);
    if let Some((u, p)) = &config.user {
        o = o.with_user(u.clone(), p.clone());
    }
    let https = config.endpoints.iter().any(|e| e.starts_with("https://"));
    if https {
        let mut tls = etcd_client::TlsOptions::new();
        if let Some(ca) = &config.ca {
            tls = tls.ca_certificate(etcd_client::Certificate::from_pem(ca));
        }
        if let Some((cert, key)) = &config.identity {
            tls = tls.identity(etcd_client::Identity::from_pem(cert, key));
        }
        o = o.with_tls(tls);
    }
    o
}

/// Runs the bridge (`server` gives the worker list for the registry, and
/// `events` the server's events): at `shutdown` true it claims nothing more, and it
/// returns once its running jobs are written back or the sender is dropped
/// (the server has stopped). etcd not being there yet is not an error: the
/// bridge waits for it (logging) while Gearshift runs.
pub async fn run(
    config: BridgeConfig,
    stats: Arc<stats::Stats>,
    events: mpsc::UnboundedReceiver<ServerEvent>,
    server: server::Server,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
) -> Result<(), ConfigError> {
    check(&config)?;
    let client = loop {
        match etcd_client::Client::connect(&config.endpoints, Some(options(&config))).await {
            Ok(c) => break c,
            Err(e) => {
                Stats::bump(&stats.etcd_errors);
                tracing::warn!("etcd: cannot reach {:?} yet: {e}", config.endpoints);
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = shutdown.changed() => {}
                }
                if *shutdown.borrow() {
                    return Ok(());
                }
            }
        }
    };
    let gearman = Client::builder()
        .server(config.gearman)
        .exceptions(true)
        .no_timeout()
        .build()?;
    let shared = Arc::new(Shared {
        etcd: store::Etcd::new(client, config.user.clone()),
        client: gearman,
        admin: gearshift_client::admin::SharedAdmin::new(config.gearman),
        gearman: config.gearman,
        keys: Keys::new(&config.prefix, config.layout),
        owner: format!("gearshift-{}", config.node),
        cfg: config,
        stats,
        queue: Mutex::default(),
        wake: Notify::new(),
        running: Mutex::default(),
        unsure_claims: std::sync::atomic::AtomicBool::new(false),
    });
    tracing::info!(
        "etcd bridge: {:?}, prefix {}, node {}",
        shared.cfg.endpoints,
        shared.keys.prefix(),
        shared.owner
    );
    // A previous run's entries first: their jobs go back before any claim.
    harvest::previous_run(&shared, &shutdown).await;
    let (jobs_tx, jobs_rx) = mpsc::unbounded_channel();
    let tasks = vec![
        tokio::spawn(watch::run(shared.clone())),
        tokio::spawn(job::claimer(shared.clone())),
        tokio::spawn(supervisor::run(shared.clone(), jobs_tx)),
        tokio::spawn(harvest::run(shared.clone())),
    ];
    let (registry_stop, registry_stopped) = tokio::sync::watch::channel(false);
    let registry = tokio::spawn(registry::run(
        shared.clone(),
        server,
        events,
        jobs_rx,
        registry_stopped,
    ));
    while !*shutdown.borrow() {
        if shutdown.changed().await.is_err() {
            break;
        }
    }
    // Stopping: claim nothing more; jobs claimed or running in Gearshift
    // finish (a graceful stop waits for them, a refused submission goes
    // back) and are written back, until the server has stopped (the
    // sender is dropped). A claim still being submitted is not running
    // yet, but is held: waited for too, or the process would end with it
    // STARTED under this owner.
    for t in &tasks {
        t.abort();
    }
    let busy = |s: &Shared| {
        let running = !s.running().is_empty();
        running || s.queue().holds_any()
    };
    while busy(&shared) {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            r = shutdown.changed() => if r.is_err() { break },
        }
    }
    let _ = registry_stop.send(true);
    let _ = registry.await;
    tracing::info!("etcd bridge stopped: {}", shared.stats.line());
    Ok(())
}

use stats::Stats;
