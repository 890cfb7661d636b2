//! A following node's side of the link: every Gearman connection it
//! accepts travels to the leader over one shared socket
//! ([`gearshift_proto::link`]) instead of a socket of its own, so the
//! leader reads many clients' requests with one read, and this node writes
//! many with one write.
//!
//! A client's task reads its socket and hands the bytes to the link's task;
//! the link's task hands each client what the leader sent it. A client
//! owed more than the output limit is not read; one owed more than the hard
//! limit (it does not read) is closed, and nothing else waits on it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};

use super::node_tls::Dialed;
use super::pump::{pump, refuse_all};
use super::relay::{accept_capped, link_preamble, watch_closely, Upstream};
use crate::tls::TlsServer;

/// Largest read of a client's socket.
const CLIENT_CHUNK: usize = 64 * 1024;
/// Output collected from clients before the link writes it.
pub(super) const LINK_BATCH: usize = 256 * 1024;
/// The largest frame the leader sends (a client's output, whole packets).
pub(super) const MAX_FRAME: usize = 1 << 30;
/// Client bytes waiting for the link past which its clients are not read.
const MAX_QUEUED: usize = 8 << 20;

/// What a client's task tells the link.
pub(crate) enum ToLink {
    Open {
        vid: u32,
        peer: SocketAddr,
        identity: Option<String>,
        to_client: ClientTx,
        owed: Arc<AtomicUsize>,
    },
    Data {
        vid: u32,
        bytes: Bytes,
    },
    Close {
        vid: u32,
    },
}

/// What the link tells a client's task.
#[derive(Clone)]
pub(crate) enum ToClient {
    Data(Bytes),
    /// The far node is done with the connection.
    Close,
    /// The client is owed more than the hard limit: it does not read.
    Cut,
    /// The link ended (or never connected): the connection is gone.
    Lost,
}

/// Where a link hands one connection's messages: a channel, and the tag
/// that names the connection on it (a task may read several links).
#[derive(Clone)]
pub(crate) struct ClientTx {
    pub tx: mpsc::UnboundedSender<(u32, ToClient)>,
    pub tag: u32,
}

impl ClientTx {
    pub(super) fn send(&self, m: ToClient) -> Result<(), ()> {
        self.tx.send((self.tag, m)).map_err(|_| ())
    }
}

pub(super) type Clients = gearshift_core::ids::IdMap<u32, (ClientTx, Arc<AtomicUsize>)>;

/// Output limits for the clients (as [`crate::ServerConfig::max_output`]).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Owed past this, a client is not read.
    pub max_output: usize,
    /// Owed past this, a client is closed.
    pub hard_output: usize,
}

/// This node's link to the leader, made when the first client needs it and
/// again after the leader changes or the link breaks.
pub struct Linker {
    upstream: watch::Receiver<Option<Upstream>>,
    current: Mutex<Option<(String, LinkTx)>>,
    next_vid: AtomicU32,
    wait: Duration,
    timeout: Duration,
    limits: Limits,
}

impl Linker {
    /// Links to whoever `upstream` names; a connection waits up to `wait`
    /// for a leader; `timeout` watches the link's socket.
    pub fn new(
        upstream: watch::Receiver<Option<Upstream>>,
        wait: Duration,
        timeout: Duration,
        limits: Limits,
    ) -> Self {
        Linker {
            upstream,
            current: Mutex::new(None),
            next_vid: AtomicU32::new(0),
            wait,
            timeout,
            limits,
        }
    }

    /// The link to `up`, started if there is none (or it ended).
    fn link_to(&self, up: &Upstream) -> LinkTx {
        let mut cur = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((addr, link)) = cur.as_ref() {
            if *addr == up.addr && !link.is_closed() {
                return link.clone();
            }
        }
        let tx = LinkTx::start(
            up.clone(),
            self.upstream.clone(),
            self.wait,
            self.timeout,
            self.limits,
        );
        *cur = Some((up.addr.clone(), tx.clone()));
        tx
    }
}

/// A client's way onto a link, and the client bytes waiting for it.
#[derive(Clone)]
pub(crate) struct LinkTx {
    tx: mpsc::UnboundedSender<ToLink>,
    pub queued: Arc<AtomicUsize>,
}

impl LinkTx {
    /// Starts a link to `up`; it ends when `upstream` names another node,
    /// when it breaks, or when every sender is gone.
    pub(crate) fn start(
        up: Upstream,
        upstream: watch::Receiver<Option<Upstream>>,
        wait: Duration,
        timeout: Duration,
        limits: Limits,
    ) -> LinkTx {
        LinkTx::spawn(|rx, queued| run_link(up, rx, queued, upstream, wait, timeout, limits))
    }

    /// Starts a link to this node's own job server over an in-process pipe,
    /// handed through `door` once it is open (it waits up to `wait`).
    pub(crate) fn start_local(
        up: Upstream,
        door: watch::Receiver<Option<crate::accept::LinkDoor>>,
        wait: Duration,
        limits: Limits,
    ) -> LinkTx {
        LinkTx::spawn(|rx, queued| run_local(up, door, rx, queued, wait, limits))
    }

    /// A link's channel and counter, with `task` reading the channel.
    fn spawn<F>(task: impl FnOnce(mpsc::UnboundedReceiver<ToLink>, Arc<AtomicUsize>) -> F) -> LinkTx
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel();
        let queued = Arc::new(AtomicUsize::new(0));
        tokio::spawn(task(rx, queued.clone()));
        LinkTx { tx, queued }
    }

    /// Whether the link's task has ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    pub(crate) fn send(&self, m: ToLink) -> Result<(), &'static str> {
        self.tx.send(m).map_err(|_| "the link ended")
    }
}

/// Accepts connections and carries each over the link to the current
/// leader, until `stop` turns true; with `tls`, each after its handshake
/// (the client's certificate subject travels with it).
pub async fn link_loop(
    listener: Arc<TcpListener>,
    tls: Option<TlsServer>,
    linker: Arc<Linker>,
    mut stop: watch::Receiver<bool>,
    limit: Arc<Semaphore>,
) {
    while let Some((client, peer, permit)) = accept_capped(&listener, &limit, &mut stop).await {
        let _ = client.set_nodelay(true);
        let (linker, stop, tls) = (linker.clone(), stop.clone(), tls.clone());
        tokio::spawn(async move {
            let _permit = permit;
            let carried = match tls {
                None => {
                    let (r, w) = client.into_split();
                    carry(r, w, peer, None, &linker, stop).await
                }
                Some(tls) => match tls.accept_here(client, peer).await {
                    Some((r, w, identity)) => carry(r, w, peer, identity, &linker, stop).await,
                    None => Ok(()),
                },
            };
            if let Err(e) = carried {
                tracing::info!(%peer, "connection to the leader closed: {e}");
            }
        });
    }
}

/// Carries one client's connection until either side is done with it.
async fn carry<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    mut r: R,
    mut w: W,
    peer: SocketAddr,
    identity: Option<String>,
    linker: &Linker,
    mut stop: watch::Receiver<bool>,
) -> Result<(), String> {
    let mut upstream = linker.upstream.clone();
    let up = tokio::time::timeout(linker.wait, upstream.wait_for(|u| u.is_some()))
        .await
        .map_err(|_| format!("no node has led the cluster for {:?}", linker.wait))?
        .map_err(|_| "the node is stopping".to_string())?
        .clone()
        .ok_or("no leader")?;
    let link = linker.link_to(&up);
    let vid = linker.next_vid.fetch_add(1, Ordering::Relaxed);
    let (to_client, mut from_link) = mpsc::unbounded_channel();
    let owed = Arc::new(AtomicUsize::new(0));
    let open = ToLink::Open {
        vid,
        peer,
        identity,
        to_client: ClientTx {
            tx: to_client,
            tag: 0,
        },
        owed: owed.clone(),
    };
    link.send(open)?;
    let max_output = linker.limits.max_output;
    let mut buf = BytesMut::new();
    let mut reading = true;
    let mut sent_close = false;
    let result = loop {
        let may_read = reading
            && owed.load(Ordering::Acquire) <= max_output
            && link.queued.load(Ordering::Acquire) <= MAX_QUEUED;
        if buf.capacity() < CLIENT_CHUNK / 4 {
            buf.reserve(CLIENT_CHUNK);
        }
        tokio::select! {
            n = r.read_buf(&mut buf), if may_read => match n {
                Ok(0) | Err(_) => {
                    reading = false;
                    sent_close = true;
                    if link.send(ToLink::Close { vid }).is_err() {
                        break Err("the link to the leader ended".into());
                    }
                }
                Ok(_) => {
                    let bytes = buf.split().freeze();
                    link.queued.fetch_add(bytes.len(), Ordering::AcqRel);
                    if link.send(ToLink::Data { vid, bytes }).is_err() {
                        break Err("the link to the leader ended".into());
                    }
                }
            },
            m = from_link.recv() => match m.map(|(_, m)| m) {
                Some(ToClient::Data(b)) => {
                    let n = b.len();
                    let wrote = w.write_all(&b).await;
                    owed.fetch_sub(n, Ordering::AcqRel);
                    if let Err(e) = wrote {
                        break Err(format!("writing to the client: {e}"));
                    }
                }
                Some(ToClient::Close) => {
                    let _ = w.shutdown().await;
                    break Ok(());
                }
                // Logged by the link; the leader is told there.
                Some(ToClient::Cut) => {
                    sent_close = true;
                    break Ok(());
                }
                None | Some(ToClient::Lost) => break Err("the link to the leader ended".into()),
            },
            // Owed output drained below the limit: read again.
            _ = tokio::time::sleep(Duration::from_millis(1)), if reading && !may_read => {}
            _ = stopped(&mut stop) => break Err("the node stops relaying".into()),
        }
    };
    if !sent_close {
        let _ = link.send(ToLink::Close { vid });
    }
    result
}

/// Resolves once `stop` turns true (or its sender is gone).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// One link's task: connects to the leader, then moves frames both ways
/// until the leader changes, the link breaks or every sender is gone.
async fn run_link(
    up: Upstream,
    rx: mpsc::UnboundedReceiver<ToLink>,
    queued: Arc<AtomicUsize>,
    mut upstream: watch::Receiver<Option<Upstream>>,
    wait: Duration,
    timeout: Duration,
    limits: Limits,
) {
    let mut up = up;
    let stream = match connect(&mut up, &mut upstream, wait).await {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(node = %up.addr, "cannot link to the node: {e}");
            return refuse_all(rx);
        }
    };
    watch_closely(&stream, timeout);
    let out = BytesMut::from(&link_preamble(&up.secret, &up.node)[..]);
    let up_addr = up.addr.clone();
    let changed = async move {
        let _ = upstream
            .wait_for(|u| u.as_ref().map(|u| &u.addr) != Some(&up_addr))
            .await;
    };
    let dialed = match &up.tls {
        None => Ok(Dialed::Clear(stream)),
        Some(tls) => tls.dial_or_clear(stream, &up.addr).await,
    };
    match dialed {
        Ok(Dialed::Clear(stream)) => {
            // Again: a node that refused TLS is linked to on a new connection.
            watch_closely(&stream, timeout);
            let (r, w) = stream.into_split();
            pump(&up.addr, r, w, out, rx, &queued, changed, limits).await;
        }
        // The session is pumped through a pipe, as on the taking side:
        // the link's own pump writes there and never flushes.
        Ok(Dialed::Tls(s)) => {
            let (r, w) = crate::tls::pumped(*s);
            pump(&up.addr, r, w, out, rx, &queued, changed, limits).await;
        }
        Err(e) => {
            tracing::warn!(node = %up.addr, "cannot link to the node over TLS: {e}");
            refuse_all(rx);
        }
    }
}

/// A link to this node's own job server: an in-process pair, one end handed
/// to its I/O threads (no preamble: nothing else can reach that end).
async fn run_local(
    up: Upstream,
    mut door: watch::Receiver<Option<crate::accept::LinkDoor>>,
    rx: mpsc::UnboundedReceiver<ToLink>,
    queued: Arc<AtomicUsize>,
    wait: Duration,
    limits: Limits,
) {
    let open = tokio::time::timeout(wait, door.wait_for(|d| d.is_some())).await;
    let Some(door) = open.ok().and_then(|d| d.ok().and_then(|d| d.clone())) else {
        tracing::warn!("cannot link to this node's job server: it serves no partitions now");
        return refuse_all(rx);
    };
    let (theirs, r, w) = crate::pipe::pair(crate::pipe::LINK_CAP);
    door.hand_local(theirs, up.node.to_string());
    pump(
        &up.addr,
        r,
        w,
        BytesMut::new(),
        rx,
        &queued,
        std::future::pending(),
        limits,
    )
    .await;
}

/// Connects to the leader, retrying a refused connection until `wait` is
/// up; a new leader named meanwhile becomes `up` (nothing was sent yet, so
/// the connections waiting for this link go to it instead).
async fn connect(
    up: &mut Upstream,
    upstream: &mut watch::Receiver<Option<Upstream>>,
    wait: Duration,
) -> Result<TcpStream, String> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, TcpStream::connect(&up.addr)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => {
                tracing::debug!("cannot reach the leader at {}: {e}", up.addr);
                let changed = upstream.wait_for(|u| u.as_ref().is_some_and(|u| u != up));
                tokio::select! {
                    _ = tokio::time::timeout_at(deadline, changed) => {}
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                }
                if let Some(new) = upstream.borrow().as_ref().filter(|u| *u != up) {
                    *up = new.clone();
                }
                if tokio::time::Instant::now() >= deadline {
                    return Err(format!("{e}"));
                }
            }
            Err(_) => return Err("connecting timed out".into()),
        }
    }
}
