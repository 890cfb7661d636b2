//! The accept loops: connections taken under the connection cap, tuned
//! (no Nagle, keepalive) and dealt out to the I/O threads by id.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gearshift_core::ConnId;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::cluster::relay::{watch_closely, RelayGate};
use crate::hub;
use crate::io_thread::{Accepted, ToIo};

/// Accepts connections and deals them out to the I/O threads in turn.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    inboxes: Vec<tokio::sync::mpsc::UnboundedSender<ToIo>>,
    mut stop: watch::Receiver<bool>,
    limit: Arc<Semaphore>,
    next_id: Arc<AtomicU64>,
    gate: Option<Arc<RelayGate>>,
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
        configure(&stream);
        if let Some(gate) = &gate {
            // A relayed connection names its client in a first line: read
            // it off this loop, so a slow peer delays no other.
            let (gate, inboxes, next_id) = (gate.clone(), inboxes.clone(), next_id.clone());
            let mut stop = stop.clone();
            tokio::spawn(async move {
                let checked = tokio::select! {
                    c = gate.check(&stream) => c,
                    _ = stop.wait_for(|s| *s) => return,
                };
                let (peer, node) = match checked {
                    Ok(None) => (peer, None),
                    Ok(Some(r)) => {
                        watch_closely(&stream, gate.node_timeout);
                        tracing::debug!(%peer, node = %r.node, client = %r.peer, "relayed connection");
                        (r.peer, Some(r.node))
                    }
                    Err(why) => {
                        tracing::warn!(%peer, "closing connection: {why}");
                        return;
                    }
                };
                hand_over(stream, peer, node, permit, &inboxes, &next_id);
            });
            continue;
        }
        if !hand_over(stream, peer, None, permit, &inboxes, &next_id) {
            return;
        }
    }
}

/// Deals a connection out to its I/O thread; false once the threads are gone.
fn hand_over(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    node: Option<String>,
    permit: tokio::sync::OwnedSemaphorePermit,
    inboxes: &[tokio::sync::mpsc::UnboundedSender<ToIo>],
    next_id: &AtomicU64,
) -> bool {
    let threads = inboxes.len() as u64;
    {
        let stream = match stream.into_std() {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "cannot hand a connection over");
                return true;
            }
        };
        // Ids start at 1; `id % threads` names the owning thread.
        let n = next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let id = ConnId(n);
        let thread = hub::thread_of(id, threads as usize);
        let accepted = Accepted {
            stream,
            id,
            peer,
            node,
            permit,
        };
        inboxes[thread].send(ToIo::Accept(accepted)).is_ok()
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
