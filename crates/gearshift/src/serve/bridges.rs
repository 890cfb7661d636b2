//! What the bridges running beside the server (GearMonkey, etcd) share in
//! `serve`: the loopback address they speak Gearman to, stopping them
//! before the server so their own Gearman jobs never hold up a graceful
//! stop, and on a cluster node running each only where the cluster has it
//! run: the GearMonkey bridge on one chosen node, the etcd bridge beside
//! a leader-mode node's job server while it leads, or on the chosen
//! partitioned node.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use gearshift_server::cluster::{Leading, Node};

use super::etcd;
use super::gearmonkey::Bridge;

/// A running bridge: its stop switch and task.
pub(super) type Running = Option<(watch::Sender<bool>, JoinHandle<()>)>;

/// The address of the server's first plaintext listener as a bridge in
/// the same process reaches it (a wildcard listener over loopback).
pub(super) fn loopback(addrs: &[SocketAddr]) -> Option<SocketAddr> {
    let first = addrs.first()?;
    Some(match first.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), first.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv6Addr::LOCALHOST.into(), first.port())
        }
        _ => *first,
    })
}

/// The server's stop future, made to stop the bridges first.
pub(super) fn stop_first(
    running: &[&Running],
    stop: impl std::future::Future<Output = ()>,
) -> impl std::future::Future<Output = ()> {
    let txs: Vec<watch::Sender<bool>> = running
        .iter()
        .filter_map(|r| r.as_ref().map(|(tx, _)| tx.clone()))
        .collect();
    async move {
        stop.await;
        for tx in txs {
            let _ = tx.send(true);
        }
    }
}

/// Stops a bridge once the server has stopped (the switch is dropped, so
/// a bridge waiting for its last jobs knows there are no more), waiting a
/// few seconds at most.
pub(super) async fn stop(running: Running) {
    if let Some((tx, task)) = running {
        let _ = tx.send(true);
        drop(tx);
        let _ = tokio::time::timeout(Duration::from_secs(4), task).await;
    }
}

/// A cluster node's bridges: the GearMonkey one runs while the cluster has
/// it run here ([`Node::hosts_bridge`]), the etcd one beside the job server
/// while this leader-mode node leads ([`Node::leading`]), or, on a
/// partitioned node, while the cluster has it run here too.
pub(super) struct OnNode {
    pub gearmonkey: Option<Bridge>,
    pub etcd: Option<etcd::Bridge>,
    /// On a partitioned node: its HTTP address and token, through which
    /// the etcd bridge follows the cluster's workers and events.
    pub partitioned_api: Option<(std::net::SocketAddr, Option<String>)>,
}

impl OnNode {
    /// The node's stop future: runs the bridges as above and, once `signal`
    /// comes, stops them before the node.
    pub(super) fn until(
        self,
        node: &Node,
        signal: impl std::future::Future<Output = ()>,
    ) -> impl std::future::Future<Output = ()> {
        let (stopping_tx, stopping) = watch::channel(false);
        let host = node.hosts_bridge();
        let gm = (self.gearmonkey).map(|b| {
            let start = move || b.spawn();
            tokio::spawn(while_hosted(
                host.clone(),
                stopping.clone(),
                "GearMonkey",
                start,
            ))
        });
        let leading = node.leading();
        let etcd = match (self.etcd, self.partitioned_api) {
            (None, _) => None,
            (Some(b), Some((http, token))) => {
                let start = move || etcd::spawn_on_partitioned(&b, http, token.clone());
                Some(tokio::spawn(while_hosted(host, stopping, "etcd", start)))
            }
            (Some(b), None) => {
                let start = move |l: Leading| etcd::spawn(&b, l.events, l.control);
                Some(tokio::spawn(while_leading(leading, stopping, start)))
            }
        };
        async move {
            signal.await;
            stopping_tx.send_replace(true);
            for task in [gm, etcd].into_iter().flatten() {
                let _ = task.await;
            }
        }
    }
}

/// Runs a bridge beside this node's job server while it leads, until
/// `stopping`: etcd bridges share the queue as its workers do, so one
/// starting before another stopped takes nothing twice.
async fn while_leading<L: Clone>(
    mut leading: watch::Receiver<Option<L>>,
    mut stopping: watch::Receiver<bool>,
    start: impl Fn(L) -> Running,
) {
    loop {
        let server = tokio::select! {
            l = leading.wait_for(Option::is_some) => match l.ok().and_then(|l| l.clone()) {
                Some(l) => l,
                None => return,
            },
            _ = stopping.wait_for(|s| *s) => return,
        };
        tracing::info!("leading: running the etcd bridge here");
        let running = start(server);
        tokio::select! {
            _ = leading.wait_for(Option::is_none) => {
                tracing::info!("no longer leading: stopping the etcd bridge here");
            }
            _ = stopping.wait_for(|s| *s) => {}
        }
        stop(running).await;
        if *stopping.borrow() {
            return;
        }
    }
}

/// How long a node chosen to run the cluster's bridge waits before it
/// starts it: the node that ran it before stops its bridge within `stop`'s
/// few seconds, and two at once would put back each other's jobs.
pub(super) const HOST_GRACE: Duration = Duration::from_secs(5);

/// Runs a bridge (`what`, for the log) on a cluster node while `host`
/// says this node is the one (after [`HOST_GRACE`]), stopping it when that
/// ends, until `stopping`.
async fn while_hosted(
    mut host: watch::Receiver<bool>,
    mut stopping: watch::Receiver<bool>,
    what: &'static str,
    start: impl Fn() -> Running,
) {
    loop {
        // Chosen, and still so after the grace.
        let chosen = async {
            loop {
                host.wait_for(|h| *h).await.ok()?;
                tracing::info!(grace = ?HOST_GRACE, "chosen to run the cluster's {what} bridge: starting it after the grace");
                tokio::select! {
                    _ = tokio::time::sleep(HOST_GRACE) => return Some(()),
                    r = host.wait_for(|h| !*h) => { r.ok()?; }
                }
            }
        };
        tokio::select! {
            c = chosen => if c.is_none() { return },
            _ = stopping.wait_for(|s| *s) => return,
        }
        tracing::info!("running the cluster's {what} bridge here");
        let running = start();
        tokio::select! {
            _ = host.wait_for(|h| !*h) => {
                tracing::info!("no longer chosen to run the cluster's {what} bridge: stopping it here");
            }
            _ = stopping.wait_for(|s| *s) => {}
        }
        stop(running).await;
        if *stopping.borrow() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A bridge that counts its starts and its stops.
    fn counted() -> (Arc<AtomicUsize>, Arc<AtomicUsize>, impl Fn() -> Running) {
        let (started, stopped) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (s, t) = (started.clone(), stopped.clone());
        let start = move || -> Running {
            s.fetch_add(1, Ordering::SeqCst);
            let (tx, mut rx) = watch::channel(false);
            let t = t.clone();
            let task = tokio::spawn(async move {
                let _ = rx.wait_for(|s| *s).await;
                t.fetch_add(1, Ordering::SeqCst);
            });
            Some((tx, task))
        };
        (started, stopped, start)
    }

    async fn settle() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_chosen_node_starts_after_the_grace_and_stops_when_no_longer_chosen() {
        let (started, stopped, start) = counted();
        let (host_tx, host) = watch::channel(false);
        let (stop_tx, stop) = watch::channel(false);
        let task = tokio::spawn(while_hosted(host, stop, "test", start));
        host_tx.send_replace(true);
        tokio::time::sleep(HOST_GRACE / 2).await;
        // Chosen only for a moment: nothing starts.
        host_tx.send_replace(false);
        tokio::time::sleep(HOST_GRACE * 2).await;
        assert_eq!(started.load(Ordering::SeqCst), 0);
        host_tx.send_replace(true);
        tokio::time::sleep(HOST_GRACE - Duration::from_millis(10)).await;
        assert_eq!(started.load(Ordering::SeqCst), 0, "not before the grace");
        tokio::time::sleep(Duration::from_millis(20)).await;
        settle().await;
        assert_eq!(started.load(Ordering::SeqCst), 1);
        host_tx.send_replace(false);
        settle().await;
        assert_eq!(stopped.load(Ordering::SeqCst), 1, "stopped once not chosen");
        host_tx.send_replace(true);
        tokio::time::sleep(HOST_GRACE * 2).await;
        assert_eq!(started.load(Ordering::SeqCst), 2, "started again");
        stop_tx.send_replace(true);
        task.await.expect("ends at the stop");
        assert_eq!(
            stopped.load(Ordering::SeqCst),
            2,
            "the node's stop stops it"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_leading_node_runs_the_bridge_at_once_and_while_it_leads() {
        let (started, stopped, start) = counted();
        let (lead_tx, leading) = watch::channel(None::<u32>);
        let (stop_tx, stop) = watch::channel(false);
        let task = tokio::spawn(while_leading(leading, stop, move |_| start()));
        settle().await;
        assert_eq!(started.load(Ordering::SeqCst), 0);
        lead_tx.send_replace(Some(1));
        settle().await;
        assert_eq!(started.load(Ordering::SeqCst), 1, "no grace");
        lead_tx.send_replace(None);
        settle().await;
        assert_eq!(stopped.load(Ordering::SeqCst), 1);
        lead_tx.send_replace(Some(2));
        settle().await;
        assert_eq!(started.load(Ordering::SeqCst), 2, "leading again");
        stop_tx.send_replace(true);
        task.await.expect("ends at the stop");
        assert_eq!(stopped.load(Ordering::SeqCst), 2);
    }
}
