//! What the bridges running beside the server (GearMonkey, etcd) share in
//! `serve`: the loopback address they speak Gearman to, and stopping them
//! before the server so their own Gearman jobs never hold up a graceful stop.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

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
