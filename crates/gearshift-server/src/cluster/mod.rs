//! A cluster of nodes sharing one PostgreSQL database (docs/cluster.md).
//!
//! One node at a time leads: it holds the lease in the database, runs the
//! job server on the shared store (fenced by the lease's epoch), and is
//! what every client and worker of the cluster talks to. The other nodes
//! carry the connections they accept to it over one link each (HTTP
//! connections are relayed byte for byte). When the leader stops
//! heartbeating for longer than the node timeout, another node takes the
//! lease, replays the store and leads; a deposed leader
//! stops before that (its lease is trusted for less than the timeout) and
//! its writes are refused once the epoch moved on.
//!
//! - `lease_thread`: heartbeats, taking and renewing the lease;
//! - [`link`]: a follower's Gearman connections, carried over one socket;
//! - [`relay`]: the followers' relaying of HTTP and the leader's check of
//!   relays and links;
//! - [`trust`]: the lease deadline the leader's hub obeys (`role`: what
//!   each role sets on its server); [`view`]: the node table for HTTP;
//!   `pump`: a link's task, moving its frames both ways; `reloads`: the
//!   config's reloads, followed by whichever job server runs;
//! - [`partitioned`]: nodes that each own a share of the partitions;
//! - `bridge_host`: the one node that runs the cluster's GearMonkey bridge.

mod bridge_host;
pub mod lease_thread;
pub mod link;
pub mod node_tls;
pub mod partitioned;
mod pump;
pub mod relay;
mod reloads;
mod role;
pub mod trust;
pub mod view;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gearshift_store::postgres::lease::{Lease, NodeAddrs};
use gearshift_store::postgres::partitions::{PartitionLeases, DEFAULT_COUNT};
use gearshift_store::{PgOptions, PgStore, Store};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::{bind_listeners, Server, ServerConfig, ServerError, StoreConfig};
use lease_thread::{Cmd, Status};
use relay::{RelayGate, Upstream};
use trust::LeaseTrust;

/// Default `--node-timeout`.
pub const DEFAULT_NODE_TIMEOUT: Duration = Duration::from_secs(5);

/// A node's cluster settings.
#[derive(Debug, Clone, Default)]
pub struct ClusterConfig {
    /// `--node-name`; default `host:port` of the Gearman listener.
    pub name: Option<String>,
    /// The address other nodes reach this node's Gearman listener at;
    /// default the first listen address (the host name if that is a
    /// wildcard address).
    pub advertise: Option<String>,
    /// How long a leader may go without heartbeating before another node
    /// takes over (and how long a relay's silent peer may stay).
    pub node_timeout: Duration,
    /// `--partitioned`: every node owns a share of the partitions
    /// ([`partitioned`]) instead of one node leading.
    pub partitioned: bool,
    /// A partitioned node's router thread, where its job server's only I/O
    /// thread then runs too (the caller drives a `LocalSet` on it).
    pub local_io: Option<crate::LocalIo>,
    /// Links and relays between nodes over TLS, and none in the clear.
    pub link_tls: Option<node_tls::LinkTls>,
}

/// A bound cluster node, not yet running.
pub struct Node {
    cfg: ServerConfig,
    url: String,
    timeout: Duration,
    bound: Bound,
    lease: Lease,
    secret: Arc<str>,
    /// Where the lease stood at bind.
    start: Status,
    /// A partitioned node's partition leases.
    partitions: Option<PartitionLeases>,
    /// Config reloads, put in force whenever this node leads.
    reload: (crate::ReloadTx, watch::Receiver<Option<Arc<crate::Reload>>>),
    /// See [`ClusterConfig::local_io`].
    local_io: Option<crate::LocalIo>,
    /// Whether this node runs the cluster's bridge now ([`Node::hosts_bridge`]).
    hosts_bridge: watch::Sender<bool>,
    /// The job server while this node leads ([`Node::leading`]).
    leading: watch::Sender<Option<Leading>>,
}

/// The job server of a leader-mode node while it leads: what a bridge in
/// the same process follows.
#[derive(Clone)]
pub struct Leading {
    /// Its live events.
    pub events: Arc<crate::events::EventBus>,
    /// Calls on its core.
    pub control: crate::Control,
}

impl Node {
    /// Binds the listeners, registers the node in the database (creating
    /// or migrating the schema) and reads the cluster's secret.
    pub async fn bind(cfg: ServerConfig, cluster: ClusterConfig) -> Result<Node, ServerError> {
        let StoreConfig::Postgres { url } = &cfg.store else {
            return Err(ServerError::Config(
                "a cluster node needs a PostgreSQL store".into(),
            ));
        };
        let url = url.clone();
        cfg.core.validate().map_err(ServerError::Config)?;
        let timeout = if cluster.node_timeout.is_zero() {
            DEFAULT_NODE_TIMEOUT
        } else {
            cluster.node_timeout
        };
        let (listeners, http) = bind_listeners(&cfg).await?;
        let tls = crate::listeners::bind_tls_listeners(&cfg).await?;
        // Links open in plaintext, also on a TLS port (every port is one
        // with gearmand-style `--ssl`).
        let first = listeners
            .iter()
            .chain(&tls)
            .find_map(|l| l.local_addr().ok())
            .ok_or_else(|| ServerError::Config("no listen address".into()))?;
        let gearman = cluster
            .advertise
            .clone()
            .unwrap_or_else(|| advertised(first));
        let http_addr = http
            .as_ref()
            .and_then(|l| l.local_addr().ok())
            .map(advertised);
        let me = NodeAddrs {
            name: cluster.name.clone().unwrap_or_else(|| gearman.clone()),
            gearman,
            http: http_addr,
        };
        if me.name.is_empty() || me.name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(ServerError::Config(format!(
                "--node-name {:?} must be non-empty, without spaces",
                me.name
            )));
        }
        let store_err = |source| ServerError::Store {
            dir: cfg.store.describe(),
            source,
        };
        let opts = PgOptions {
            connect_timeout: timeout,
            tcp_user_timeout: timeout,
            ..PgOptions::default()
        };
        let lease_url = url.clone();
        let partitioned = cluster.partitioned;
        let (lease, secret, start, partitions) = tokio::task::spawn_blocking(move || {
            let mut lease = Lease::open(&lease_url, &opts, me.clone(), timeout)?;
            let secret = lease.secret()?;
            // The two ways of running a cluster do not mix on one database.
            let mode = partitioned::check_mode(&mut lease, partitioned);
            if !partitioned {
                mode?;
                let start = lease_thread::first(&mut lease, timeout)?;
                return Ok((lease, secret, start, None));
            }
            mode?;
            let parts = PartitionLeases::open(&lease_url, &opts, me, timeout, DEFAULT_COUNT)?;
            Ok::<_, gearshift_store::StoreError>((lease, secret, Status::default(), Some(parts)))
        })
        .await
        .map_err(|e| ServerError::Config(format!("joining the cluster panicked: {e}")))?
        .map_err(store_err)?;
        let to_std = |l: TcpListener| l.into_std().map_err(|e| ServerError::Config(e.to_string()));
        Ok(Node {
            bound: Bound {
                gearman: listeners
                    .into_iter()
                    .map(to_std)
                    .collect::<Result<_, _>>()?,
                tls: tls.into_iter().map(to_std).collect::<Result<_, _>>()?,
                http: http.map(to_std).transpose()?,
                link_tls: cluster.link_tls.clone(),
            },
            cfg,
            url,
            timeout,
            lease,
            secret: secret.into(),
            start,
            partitions,
            reload: watch::channel(None),
            local_io: cluster.local_io.clone(),
            hosts_bridge: watch::channel(false).0,
            leading: watch::channel(None).0,
        })
    }

    /// The job server while this (leader-mode) node leads, None otherwise
    /// (always, on a partitioned node).
    pub fn leading(&self) -> watch::Receiver<Option<Leading>> {
        self.leading.subscribe()
    }

    /// Whether this node is the one to run the cluster's GearMonkey bridge
    /// now: the leader, or the owner of partition 0, while its lease is
    /// trusted; false once the node stops.
    pub fn hosts_bridge(&self) -> watch::Receiver<bool> {
        self.hosts_bridge.subscribe()
    }

    /// The bound Gearman addresses.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.bound
            .gearman
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// The bound TLS addresses.
    pub fn tls_addrs(&self) -> Vec<SocketAddr> {
        self.bound
            .tls
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect()
    }

    /// The bound HTTP address.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.bound.http.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// A handle that replaces the policies: at once while this node leads,
    /// and whenever it starts leading later.
    pub fn reloader(&self) -> crate::Reloader {
        crate::Reloader(self.reload.0.clone())
    }

    /// This node's name.
    pub fn name(&self) -> &str {
        &self.lease.me().name
    }

    /// Follows or leads, as the lease says, until `shutdown` resolves (a
    /// leader then stops gracefully and gives the lease up).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) {
        let Node {
            cfg,
            url,
            timeout,
            bound,
            lease,
            secret,
            start,
            partitions,
            reload,
            local_io,
            hosts_bridge,
            leading,
        } = self;
        let (_reload_tx, reloads) = reload;
        if let Some(leases) = partitions {
            let me = lease.me().clone();
            let sessions = partitioned::beat::Sessions {
                leases,
                nodes: lease,
            };
            let (stopping_tx, stopping) = watch::channel(false);
            tokio::spawn(async move {
                shutdown.await;
                let _ = stopping_tx.send(true);
            });
            let node = partitioned::NodeCtx {
                me,
                secret,
                reloads,
                local_io,
                hosts_bridge,
            };
            partitioned::run(cfg, url, timeout, bound, sessions, node, stopping).await;
            return;
        }
        let node: Arc<str> = lease.me().name.as_str().into();
        let me = lease.me().clone();
        let view = Arc::new(view::ClusterView::new(me.name.clone()));
        let thread_view = view.clone();
        let (status_tx, mut status) = watch::channel(start.clone());
        let (cmd_tx, cmd_rx) = std::sync::mpsc::channel();
        let lease_thread = std::thread::Builder::new()
            .name("gearshift-lease".into())
            .spawn(move || {
                lease_thread::run(lease, timeout, start, status_tx, cmd_rx, &thread_view)
            });
        let lease_thread = match lease_thread {
            Ok(t) => t,
            Err(e) => {
                tracing::error!("cannot start the lease thread: {e}");
                return;
            }
        };
        let (stopping_tx, stopping) = watch::channel(false);
        tokio::spawn(async move {
            shutdown.await;
            let _ = stopping_tx.send(true);
        });
        let leads = status.clone();
        tokio::spawn(bridge_host::follow(
            hosts_bridge,
            move || (leads.borrow().leading).is_some_and(|(_, until)| Instant::now() < until),
            stopping.clone(),
        ));
        let limit = Arc::new(Semaphore::new(cfg.max_connections.max(1)));
        let (gearman_tx, gearman_rx) = watch::channel(None);
        let (http_tx, http_rx) = watch::channel(None);
        let (relay_stop_tx, relay_stop) = watch::channel(false);
        let template = Upstream {
            addr: String::new(),
            secret: secret.clone(),
            node: node.clone(),
            tls: bound.link_tls.clone(),
        };
        let publisher = tokio::spawn(relay::publish_upstreams(
            status.clone(),
            me,
            template,
            gearman_tx,
            http_tx,
        ));
        let relays = Relays {
            gearman: gearman_rx,
            http: http_rx,
            stop: relay_stop,
            limits: link::Limits {
                max_output: cfg.max_output,
                hard_output: crate::config::output_hard_limit(cfg.max_output, cfg.max_packet_size),
            },
            tls: cfg.tls.clone(),
            https: cfg.http.as_ref().and_then(|h| h.tls.clone()),
        };
        loop {
            if status.borrow().leading.is_none() {
                follow(&bound, &mut status, &stopping, &limit, &relays, timeout).await;
            }
            if *stopping.borrow() {
                break;
            }
            let Some((epoch, _)) = status.borrow().leading else {
                continue;
            };
            match lead(
                &cfg,
                &url,
                epoch,
                &bound,
                &mut status,
                &stopping,
                &secret,
                timeout,
                &reloads,
                &view,
                &leading,
            )
            .await
            {
                Led::Stopped => break,
                // Back to relaying at once; the lease thread lets another
                // node take the lease before this one may again.
                Led::Deposed => {
                    let _ = cmd_tx.send(Cmd::StepDown);
                    // Not again on the epoch just lost.
                    let _ = status
                        .wait_for(|s| s.leading.map(|(e, _)| e) != Some(epoch))
                        .await;
                }
            }
        }
        let _ = relay_stop_tx.send(true);
        publisher.abort();
        let _ = cmd_tx.send(Cmd::Stop);
        let _ = tokio::task::spawn_blocking(move || lease_thread.join()).await;
    }
}

/// How a node names an address of its own to the others: a wildcard
/// address becomes the host's name.
fn advertised(addr: SocketAddr) -> String {
    if addr.ip().is_unspecified() {
        format!("{}:{}", hostname(), addr.port())
    } else {
        addr.to_string()
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Clones a listener for one role's loops.
fn tokio_listener(l: &std::net::TcpListener) -> Option<TcpListener> {
    let l = l.try_clone().ok()?;
    l.set_nonblocking(true).ok()?;
    TcpListener::from_std(l).ok()
}

/// Where relayed connections go, kept in step with the lease: the
/// leader's addresses, or this node's own while it leads (a connection
/// accepted while this node was taking over is then served by it).
struct Relays {
    gearman: watch::Receiver<Option<Upstream>>,
    http: watch::Receiver<Option<Upstream>>,
    stop: watch::Receiver<bool>,
    /// The output limits of carried connections.
    limits: link::Limits,
    /// TLS for the node's TLS listeners, and for its HTTP port (`--http-tls`).
    tls: Option<crate::tls::TlsServer>,
    https: Option<crate::tls::TlsServer>,
}

/// Carries every accepted connection to the leader until this node leads
/// or stops.
async fn follow(
    bound: &Bound,
    status: &mut watch::Receiver<Status>,
    stopping: &watch::Receiver<bool>,
    limit: &Arc<Semaphore>,
    relays: &Relays,
    timeout: Duration,
) {
    let mut tasks = Vec::new();
    let wait = timeout * 2;
    let linker = Arc::new(link::Linker::new(
        relays.gearman.clone(),
        wait,
        timeout,
        relays.limits,
    ));
    let plain = bound.gearman.iter().map(|l| (l, None));
    let tls = bound.tls.iter().map(|l| (l, relays.tls.clone()));
    for (l, tls) in plain.chain(tls) {
        if let Some(l) = tokio_listener(l) {
            tasks.push(tokio::spawn(link::link_loop(
                Arc::new(l),
                tls,
                linker.clone(),
                relays.stop.clone(),
                limit.clone(),
            )));
        }
    }
    if let Some(l) = bound.http.as_ref().and_then(tokio_listener) {
        tasks.push(tokio::spawn(relay::relay_loop(
            Arc::new(l),
            relays.http.clone(),
            relays.stop.clone(),
            limit.clone(),
            (wait, timeout),
            relays.https.clone(),
        )));
    }
    let mut stopping = stopping.clone();
    loop {
        if status.borrow_and_update().leading.is_some() {
            break;
        }
        tokio::select! {
            c = status.changed() => if c.is_err() { break },
            _ = stopping.wait_for(|s| *s) => break,
        }
    }
    // The listeners go to the server; connections already accepted stay
    // with their relay tasks (those to the old leader end as it changes).
    for t in tasks {
        t.abort();
        let _ = t.await;
    }
}

/// A node's bound listeners, taken by whichever role it plays.
struct Bound {
    gearman: Vec<std::net::TcpListener>,
    tls: Vec<std::net::TcpListener>,
    http: Option<std::net::TcpListener>,
    /// Node TLS ([`ClusterConfig::link_tls`]).
    link_tls: Option<node_tls::LinkTls>,
}

/// How leading ended.
enum Led {
    /// The node was asked to stop and has (the lease is given up).
    Stopped,
    /// The lease was lost (or the server could not start): follow.
    Deposed,
}

/// Runs the job server on the shared store while this node holds the
/// lease at `epoch`.
#[allow(clippy::too_many_arguments)]
async fn lead(
    cfg: &ServerConfig,
    url: &str,
    epoch: i64,
    bound: &Bound,
    status: &mut watch::Receiver<Status>,
    stopping: &watch::Receiver<bool>,
    secret: &Arc<str>,
    timeout: Duration,
    reloads: &reloads::Reloads,
    view: &Arc<view::ClusterView>,
    leading: &watch::Sender<Option<Leading>>,
) -> Led {
    let url = url.to_owned();
    let opts = PgOptions {
        fence: Some(epoch),
        ..PgOptions::default()
    };
    let opened = tokio::task::spawn_blocking(move || PgStore::open(&url, opts)).await;
    let store: Box<dyn Store> = match opened {
        Ok(Ok(s)) => Box::new(s),
        Ok(Err(e)) => {
            tracing::error!("cannot open the cluster's store to lead: {e}");
            return Led::Deposed;
        }
        Err(e) => {
            tracing::error!("opening the store panicked: {e}");
            return Led::Deposed;
        }
    };
    let gearman: Vec<TcpListener> = bound.gearman.iter().filter_map(tokio_listener).collect();
    let http = bound.http.as_ref().and_then(tokio_listener);
    let tls = bound.tls.iter().filter_map(tokio_listener).collect();
    let mut server = match Server::bind_on(cfg.clone(), Some(store), gearman, tls, http).await {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot start leading: {e}");
            return Led::Deposed;
        }
    };
    let gate = RelayGate::new(secret.to_string(), timeout).with_tls(bound.link_tls.clone());
    server.accept_relays(Arc::new(gate));
    let until = match status.borrow().leading {
        Some((e, until)) if e == epoch => until,
        _ => return Led::Deposed,
    };
    let trust = Arc::new(LeaseTrust::new(until));
    server.obey_lease(trust.clone());
    server.show_cluster(view.clone());
    tracing::info!(epoch, "leading: serving jobs from the shared store");
    let _forwarding = reloads::follow(server.reloader(), reloads);
    let mut stopping = stopping.clone();
    let graceful = async move {
        let _ = stopping.wait_for(|s| *s).await;
    };
    leading.send_replace(Some(Leading {
        events: server.events(),
        control: server.control(),
    }));
    let led = tokio::select! {
        _ = server.run(graceful) => Led::Stopped,
        _ = deposed(status, epoch, &trust) => {
            tracing::error!(epoch, "this node no longer holds the cluster lease: it stops leading at once");
            Led::Deposed
        }
    };
    leading.send_replace(None);
    led
}

/// Resolves when this node's lease at `epoch` has ended or can no longer
/// be trusted (no renewal within [`lease_thread::trusted_for`]).
async fn deposed(status: &mut watch::Receiver<Status>, epoch: i64, trust: &LeaseTrust) {
    loop {
        let until = match status.borrow_and_update().leading {
            Some((e, until)) if e == epoch => until,
            _ => {
                trust.revoke();
                return;
            }
        };
        trust.extend(until);
        tokio::select! {
            _ = tokio::time::sleep_until(until.into()) => return,
            c = status.changed() => if c.is_err() { return },
        }
    }
}
