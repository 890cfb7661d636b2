//! The accept loops: connections taken under the connection cap, tuned
//! (no Nagle, keepalive) and dealt out to the I/O threads by id.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gearshift_core::ConnId;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};

use crate::cluster::relay::{Arrival, Origin, RelayGate};
use crate::counters::ConnCounters;
use crate::hub;
use crate::io_thread::link::{LinkAccepted, LinkMeta};
use crate::io_thread::{Accepted, ToIo};
use crate::sock::StdSock;
use crate::tls::TlsServer;

/// What every accept loop shares.
#[derive(Clone)]
pub(crate) struct Shared {
    /// The I/O threads' inboxes.
    pub inboxes: Vec<tokio::sync::mpsc::UnboundedSender<ToIo>>,
    /// Turns true when the server stops accepting.
    pub stop: watch::Receiver<bool>,
    /// The connection cap.
    pub limit: Arc<Semaphore>,
    /// The last connection id given out.
    pub next_id: Arc<AtomicU64>,
    /// A cluster leader's check of relayed connections.
    pub gate: Option<Arc<RelayGate>>,
    /// Counters for `/metrics`.
    pub counters: Arc<ConnCounters>,
}

/// Accepts connections and deals them out to the I/O threads in turn;
/// with `tls`, each after its TLS handshake.
pub(crate) async fn accept_loop(listener: TcpListener, tls: Option<TlsServer>, shared: Shared) {
    let mut stop = shared.stop.clone();
    let (limit, inboxes, next_id) = (
        shared.limit.clone(),
        shared.inboxes.clone(),
        shared.next_id.clone(),
    );
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
        if tls.is_some() || shared.gate.is_some() {
            // A preamble or a handshake is read off this loop, so a slow
            // peer delays no other.
            let (tls, shared) = (tls.clone(), shared.clone());
            let mut stop = stop.clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = prepare(stream, peer, tls, permit, &shared) => {}
                    _ = stop.wait_for(|s| *s) => {}
                }
            });
            continue;
        }
        let Some(sock) = into_std(stream, peer) else {
            continue;
        };
        if !hand_over(sock, peer, None, None, permit, &inboxes, &next_id) {
            return;
        }
    }
}

/// Reads a cluster node's preamble when this server leads a cluster (a
/// link, or a relayed connection, both plaintext even on a TLS listener),
/// else runs the TLS handshake on a TLS listener, and hands the connection
/// over.
async fn prepare(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    tls: Option<TlsServer>,
    permit: tokio::sync::OwnedSemaphorePermit,
    shared: &Shared,
) {
    let (inboxes, next_id) = (&shared.inboxes, &shared.next_id);
    let mut stream = stream;
    if let Some(gate) = &shared.gate {
        // On a TLS port a client that sends nothing is bounded as its
        // handshake would be.
        let arrived = match &tls {
            Some(_) => tokio::time::timeout(crate::tls::HANDSHAKE_TIMEOUT, gate.arrive(stream))
                .await
                .unwrap_or_else(|_| {
                    Err(format!(
                        "no TLS handshake within {:?}",
                        crate::tls::HANDSHAKE_TIMEOUT
                    ))
                }),
            None => gate.arrive(stream).await,
        };
        match arrived {
            Ok(Arrival::Client(s)) => stream = s,
            Ok(Arrival::Node(Origin::Link { node }, s)) => {
                if let Some(sock) = s.into_std(peer) {
                    hand_link(sock, peer, node, inboxes, next_id);
                }
                return;
            }
            Ok(Arrival::Node(Origin::Relayed(r), s)) => {
                tracing::debug!(%peer, node = %r.node, client = %r.peer, "relayed connection");
                if let Some(sock) = s.into_std(r.peer) {
                    hand_over(sock, r.peer, Some(r.node), None, permit, inboxes, next_id);
                }
                return;
            }
            Err(why) => {
                tracing::warn!(%peer, "closing connection: {why}");
                return;
            }
        }
    }
    match tls {
        Some(tls) => match tls.accept(stream, peer).await {
            Some((sock, identity)) => {
                tracing::debug!(%peer, identity = identity.as_deref().unwrap_or("-"), "TLS connection");
                hand_over(sock, peer, None, identity, permit, inboxes, next_id);
            }
            None => ConnCounters::bump(&shared.counters.tls_failed),
        },
        None => {
            if let Some(sock) = into_std(stream, peer) {
                hand_over(sock, peer, None, None, permit, inboxes, next_id);
            }
        }
    }
}

/// The blocking socket an I/O thread registers; `None` (logged) on failure.
fn into_std(stream: TcpStream, peer: std::net::SocketAddr) -> Option<StdSock> {
    match stream.into_std() {
        Ok(s) => Some(StdSock::Tcp(s)),
        Err(e) => {
            tracing::warn!(%peer, error = %e, "cannot hand a connection over");
            None
        }
    }
}

/// Deals a connection out to its I/O thread; false once the threads are gone.
fn hand_over(
    stream: StdSock,
    peer: std::net::SocketAddr,
    node: Option<String>,
    identity: Option<String>,
    permit: tokio::sync::OwnedSemaphorePermit,
    inboxes: &[tokio::sync::mpsc::UnboundedSender<ToIo>],
    next_id: &AtomicU64,
) -> bool {
    let threads = inboxes.len();
    // Ids start at 1; `id % threads` names the owning thread.
    let id = ConnId(next_id.fetch_add(1, Ordering::Relaxed) + 1);
    let accepted = Accepted {
        stream,
        id,
        peer,
        node,
        identity,
        permit,
    };
    inboxes[hub::thread_of(id, threads)]
        .send(ToIo::Accept(accepted))
        .is_ok()
}

/// Deals a link from another node out to an I/O thread, which takes all of
/// its connections. A link holds no permit: its node counts its clients.
fn hand_link(
    stream: StdSock,
    from: std::net::SocketAddr,
    node: String,
    inboxes: &[tokio::sync::mpsc::UnboundedSender<ToIo>],
    next_id: &Arc<AtomicU64>,
) {
    let threads = inboxes.len();
    let pick = ConnId(next_id.fetch_add(1, Ordering::Relaxed) + 1);
    let link = LinkAccepted {
        stream,
        meta: LinkMeta {
            node,
            from,
            next_id: next_id.clone(),
            threads,
        },
    };
    let _ = inboxes[hub::thread_of(pick, threads)].send(ToIo::Link(link));
}

/// A running server's entrance for links another loop accepted and
/// checked (a partitioned node's public listeners).
#[derive(Clone)]
pub(crate) struct LinkDoor {
    inboxes: Vec<tokio::sync::mpsc::UnboundedSender<ToIo>>,
    next_id: Arc<AtomicU64>,
}

impl LinkDoor {
    /// The door of the server whose I/O threads these are.
    pub(crate) fn new(
        inboxes: Vec<tokio::sync::mpsc::UnboundedSender<ToIo>>,
        next_id: Arc<AtomicU64>,
    ) -> Self {
        LinkDoor { inboxes, next_id }
    }

    /// Hands a link, its preamble read, to an I/O thread.
    pub(crate) fn hand(
        &self,
        stream: crate::cluster::node_tls::NodeStream,
        from: std::net::SocketAddr,
        node: String,
    ) {
        if let Some(sock) = stream.into_std(from) {
            hand_link(sock, from, node, &self.inboxes, &self.next_id);
        }
    }

    /// Hands this node's own link (one end of an in-process pair) to an
    /// I/O thread.
    pub(crate) fn hand_local(&self, end: crate::pipe::End, node: String) {
        let from = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        hand_link(StdSock::Mem(end), from, node, &self.inboxes, &self.next_id);
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
