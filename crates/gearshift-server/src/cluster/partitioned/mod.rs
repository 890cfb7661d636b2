//! Partitioned nodes (`--partitioned`, experimental): every node owns a
//! share of the cluster's partitions and serves their jobs; every function
//! lives in one partition. A connection stays on the node it reached,
//! which sends each packet to the owner of the partition it names.
//!
//! - [`beat`]: the partition leases, renewed and shared out evenly;
//! - [`owners`]: who owns which partition;
//! - [`owner`]: the job server over this node's partitions;
//! - [`moves`]: partitions handed over and taken on in that running server;
//! - [`route`]: the listeners, and each connection's splitting.

pub mod beat;
mod moves;
mod owner;
pub mod owners;
mod route;

use std::sync::Arc;
use std::time::{Duration, Instant};

use gearshift_store::postgres::lease::{Lease, NodeAddrs};
use gearshift_store::StoreError;
use tokio::sync::{watch, Semaphore};

use super::link::Limits;
use super::relay::RelayGate;
use super::reloads::Reloads;
use super::trust::LeaseTrust;
use super::view::ClusterView;
use super::Bound;
use crate::ServerConfig;

/// Refuses a partitioned node beside a leader-mode one, and the reverse.
pub(super) fn check_mode(lease: &mut Lease, partitioned: bool) -> Result<(), StoreError> {
    let refuse = |why: String| Err(StoreError::InvalidRequest(why));
    if partitioned {
        if let Some(l) = lease.beat(None)?.leader {
            return refuse(format!(
                "node {} leads this database's cluster without --partitioned",
                l.node.name
            ));
        }
    } else if let Some(node) = lease.partition_owners()?.first() {
        return refuse(format!(
            "node {node} serves this database's partitions: start this node with --partitioned too"
        ));
    }
    Ok(())
}

/// Who this node is to the others, and its config reloads.
pub(super) struct NodeCtx {
    pub me: NodeAddrs,
    /// The cluster's secret, which links present.
    pub secret: Arc<str>,
    pub reloads: Reloads,
    /// Where the job server's only I/O thread runs, if not on its own.
    pub local_io: Option<crate::LocalIo>,
    /// Whether this node runs the cluster's bridge: it serves partition 0.
    pub hosts_bridge: watch::Sender<bool>,
}

/// Runs a partitioned node until `stopping` turns true.
pub(super) async fn run(
    cfg: ServerConfig,
    url: String,
    timeout: Duration,
    bound: Bound,
    sessions: beat::Sessions,
    node: NodeCtx,
    stopping: watch::Receiver<bool>,
) {
    let NodeCtx {
        me,
        secret,
        reloads,
        local_io,
        hosts_bridge,
    } = node;
    let mut slots = owners::Slots::default();
    let (own_tx, own_rx) = watch::channel(Arc::new(owners::Ownership::empty(&me, &mut slots)));
    let (mine_tx, mine_rx) = watch::channel(None);
    let trust = Arc::new(LeaseTrust::new(Instant::now()));
    let (cmd_tx, cmd_rx) = std::sync::mpsc::channel();
    let beat_trust = trust.clone();
    let view = Arc::new(ClusterView::new(me.name.clone()));
    let beat_view = view.clone();
    let beat = std::thread::Builder::new()
        .name("gearshift-partitions".into())
        .spawn(move || {
            beat::run(
                sessions, timeout, slots, mine_tx, own_tx, beat_trust, &beat_view, cmd_rx,
            )
        });
    let beat = match beat {
        Ok(t) => t,
        Err(e) => {
            tracing::error!("cannot start the partitions' thread: {e}");
            return;
        }
    };
    let (serving, trusted) = (mine_rx.clone(), trust.clone());
    tokio::spawn(super::bridge_host::follow(
        hosts_bridge,
        move || {
            let first = |m: &beat::Mine| m.serve.iter().any(|&(p, _)| p == 0);
            trusted.trusted() && serving.borrow().as_ref().is_some_and(first)
        },
        stopping.clone(),
    ));
    let door = Arc::new(watch::channel(None).0);
    let limits = Limits {
        max_output: cfg.max_output,
        hard_output: crate::config::output_hard_limit(cfg.max_output, cfg.max_packet_size),
    };
    let ctx = Arc::new(route::RouteCtx {
        ownership: own_rx.clone(),
        links: route::Links::new(
            secret.clone(),
            me.name.as_str().into(),
            timeout,
            limits,
            bound.link_tls.clone(),
        ),
        gate: RelayGate::new(secret.to_string(), timeout).with_tls(bound.link_tls.clone()),
        door: door.subscribe(),
        max_packet: cfg.max_packet_size,
        limits,
        wait: timeout * 2,
        active: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        view: view.clone(),
        counters: Arc::default(),
    });
    view.entry_roles();
    let limit = Arc::new(Semaphore::new(cfg.max_connections.max(1)));
    let mut tasks = Vec::new();
    let plain = bound.gearman.iter().map(|l| (l, None));
    let tls = bound.tls.iter().map(|l| (l, cfg.tls.clone()));
    for (l, tls) in plain.chain(tls) {
        if let Some(l) = super::tokio_listener(l) {
            tasks.push(tokio::spawn(route::accept_loop(
                l,
                ctx.clone(),
                stopping.clone(),
                limit.clone(),
                tls,
            )));
        }
    }
    let owner_ctx = owner::OwnerCtx {
        cfg,
        url,
        http: bound.http.as_ref().and_then(|l| l.try_clone().ok()),
        trust,
        view,
        entry: bound
            .gearman
            .first()
            .and_then(|l| l.local_addr().ok())
            .map(crate::http::loopback_of),
        door,
        cmds: cmd_tx.clone(),
        reloads,
        local_io,
        counters: ctx.counters.clone(),
        gate: bound.link_tls.as_ref().map(|tls| {
            let gate = RelayGate::new(secret.to_string(), timeout);
            Arc::new(gate.with_tls(Some(tls.clone())))
        }),
    };
    moves::MOVES.register();
    tracing::info!(node = %me.name, "partitioned node: serving the partitions it owns");
    owner::manage(owner_ctx, mine_rx, stopping).await;
    // Connections finish what their workers run and clients wait for.
    let until = Instant::now() + owner::STOP_WAIT;
    while ctx.active.load(std::sync::atomic::Ordering::Acquire) > 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for t in tasks {
        t.abort();
        let _ = t.await;
    }
    let _ = cmd_tx.send(beat::Cmd::Stop);
    let _ = tokio::task::spawn_blocking(move || beat.join()).await;
}
