//! A partitioned node's listeners: a link from another node goes to this
//! node's owner server; every other connection stays here, and its packets
//! go to the owners of the partitions they name ([`gearshift_core::split`])
//! over one link per owner (this node's own included).

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::BytesMut;
use gearshift_core::ids::IdMap;
use gearshift_core::split::{Out, Owner, Owners, Split};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch, Semaphore};

use super::owners::Ownership;
use crate::accept::LinkDoor;
use crate::cluster::link::{ClientTx, Limits, LinkTx, ToClient, ToLink};
use crate::cluster::relay::{accept_capped, Arrival, Origin, RelayGate, Upstream};
use crate::tls::TlsServer;
use crate::AbortOnDrop;

/// Largest read of a client's socket.
const CLIENT_CHUNK: usize = 64 * 1024;
/// Client bytes waiting for a link past which the client is not read.
const MAX_QUEUED: usize = 8 << 20;
/// Most owners' messages taken before writing to the client.
const MAX_BATCH: usize = 64;
/// How often submissions waiting for an owner are sent again.
const PARK_RETRY: Duration = Duration::from_millis(100);
/// How long they may wait, or twice the node timeout if longer (a move
/// drains its old server up to 10 s).
const PARK_LIMIT: Duration = Duration::from_secs(15);
/// How long a connection may go on finishing what runs once the node
/// stops (as long as its job server's drain).
const DRAIN_WAIT: Duration = super::owner::STOP_WAIT;

/// What every connection of a partitioned node shares.
pub(super) struct RouteCtx {
    pub ownership: watch::Receiver<Arc<Ownership>>,
    pub links: Links,
    pub gate: RelayGate,
    pub door: watch::Receiver<Option<LinkDoor>>,
    pub max_packet: usize,
    pub limits: Limits,
    /// How long a link waits for this node's owner server (it restarts
    /// when the partitions move).
    pub wait: Duration,
    /// Connections being served, so the node can wait for them to finish.
    pub active: Arc<AtomicUsize>,
    /// Where their roles are counted.
    pub view: Arc<crate::cluster::view::ClusterView>,
    /// Where failed TLS handshakes are counted (the job servers' counters).
    pub counters: Arc<crate::counters::ConnCounters>,
}

/// A link, and the upstream its task watches (it never changes).
type NodeLink = (LinkTx, watch::Sender<Option<Upstream>>);

/// One link per node, made when a connection first needs it.
pub(super) struct Links {
    secret: Arc<str>,
    node: Arc<str>,
    timeout: Duration,
    limits: Limits,
    next_vid: AtomicU32,
    /// By address, with the (never changing) upstream its task watches.
    map: Mutex<HashMap<String, NodeLink>>,
    /// Node TLS for links to other nodes.
    tls: Option<crate::cluster::node_tls::LinkTls>,
}

impl Links {
    pub fn new(
        secret: Arc<str>,
        node: Arc<str>,
        timeout: Duration,
        limits: Limits,
        tls: Option<crate::cluster::node_tls::LinkTls>,
    ) -> Links {
        Links {
            tls,
            secret,
            node,
            timeout,
            limits,
            next_vid: AtomicU32::new(0),
            map: Mutex::new(HashMap::new()),
        }
    }

    /// The link to `addr`, started if there is none (or it ended); this
    /// node's own (`local`) goes over an in-process pipe through `door`.
    fn to(&self, addr: &str, local: Option<&watch::Receiver<Option<LinkDoor>>>) -> LinkTx {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((link, _)) = map.get(addr) {
            if !link.is_closed() {
                return link.clone();
            }
        }
        let up = Upstream {
            addr: addr.to_owned(),
            secret: self.secret.clone(),
            node: self.node.clone(),
            // This node's own link is a pipe in this process.
            tls: self.tls.clone().filter(|_| local.is_none()),
        };
        let (fixed, rx) = watch::channel(Some(up.clone()));
        let link = match local {
            Some(door) => LinkTx::start_local(up, door.clone(), self.timeout * 2, self.limits),
            None => LinkTx::start(up, rx, self.timeout * 2, self.timeout, self.limits),
        };
        map.insert(addr.to_owned(), (link.clone(), fixed));
        link
    }
}

/// Accepts on one listener until `stop`.
pub(super) async fn accept_loop(
    listener: TcpListener,
    ctx: Arc<RouteCtx>,
    mut stop: watch::Receiver<bool>,
    limit: Arc<Semaphore>,
    tls: Option<TlsServer>,
) {
    while let Some((sock, peer, permit)) = accept_capped(&listener, &limit, &mut stop).await {
        let _ = sock.set_nodelay(true);
        let (ctx, stop, tls) = (ctx.clone(), stop.clone(), tls.clone());
        tokio::spawn(async move {
            // Nodes link on any port, a TLS one too (`--ssl`): in the clear,
            // or in a TLS session of their own (`--link-tls-ca`).
            match ctx.gate.arrive(sock).await {
                Ok(Arrival::Node(Origin::Link { node }, sock)) => {
                    drop(permit);
                    let mut door = ctx.door.clone();
                    let mut stop = stop;
                    // A stopping node with no job server left will not get one.
                    let open = tokio::select! {
                        biased;
                        d = tokio::time::timeout(ctx.wait, door.wait_for(|d| d.is_some())) => {
                            d.ok().and_then(|d| d.ok().and_then(|d| d.clone()))
                        }
                        _ = stop.wait_for(|s| *s) => None,
                    };
                    match open {
                        Some(d) => d.hand(sock, peer, node),
                        None => {
                            tracing::info!(%peer, %node, "closing a link: this node serves no partitions now");
                            // Nothing it sent was taken: the node may send it again.
                            let mut sock = sock;
                            let mut bye = BytesMut::new();
                            gearshift_proto::link::LinkFrame::Bye.encode(&mut bye);
                            let sent = async {
                                sock.write_all(&bye).await?;
                                sock.flush().await
                            };
                            let _ = tokio::time::timeout(Duration::from_secs(1), sent).await;
                        }
                    }
                }
                Ok(Arrival::Node(Origin::Relayed(_), _)) => {
                    tracing::warn!(%peer, "closing a relayed connection: partitioned nodes take links only");
                }
                Ok(Arrival::Client(sock)) => {
                    let _permit = permit;
                    match tls {
                        None => {
                            let (r, w) = sock.into_split();
                            serve(r, w, peer, None, &ctx, stop).await;
                        }
                        Some(tls) => serve_tls(&tls, sock, peer, &ctx, stop).await,
                    }
                }
                Err(why) => tracing::warn!(%peer, "closing connection: {why}"),
            }
        });
    }
}

/// This connection's sub-connection on one owner's link.
struct Sub {
    link: LinkTx,
    vid: u32,
    owed: Arc<AtomicUsize>,
    /// What the owner sent, not yet read whole by the splitter.
    input: BytesMut,
    /// What the splitter made for the owner in this round.
    output: BytesMut,
}

/// Routes a TLS client's connection once its handshake is done, with its
/// certificate's subject.
async fn serve_tls(
    tls: &TlsServer,
    sock: tokio::net::TcpStream,
    peer: SocketAddr,
    ctx: &RouteCtx,
    stop: watch::Receiver<bool>,
) {
    match tls.accept_here(sock, peer).await {
        Some((r, w, identity)) => serve(r, w, peer, identity, ctx, stop).await,
        None => crate::counters::ConnCounters::bump(&ctx.counters.tls_failed),
    }
}

/// Routes one client's connection, counted among the node's active ones.
async fn serve<R, W>(
    r: R,
    w: W,
    peer: SocketAddr,
    identity: Option<String>,
    ctx: &RouteCtx,
    stop: watch::Receiver<bool>,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    ctx.active.fetch_add(1, Ordering::AcqRel);
    if let Err(e) = route(r, w, peer, identity, ctx, stop).await {
        tracing::info!(%peer, "connection closed: {e}");
    }
    ctx.active.fetch_sub(1, Ordering::AcqRel);
}

/// Serves one client's connection (its TLS identity, if any) until it or
/// this node is done.
async fn route<R, W>(
    mut r: R,
    mut w: W,
    peer: SocketAddr,
    identity: Option<String>,
    ctx: &RouteCtx,
    stop: watch::Receiver<bool>,
) -> Result<(), String>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<(u32, ToClient)>();
    let mut split = Split::new(ctx.max_packet);
    let mut subs: IdMap<Owner, Sub> = IdMap::default();
    let mut own = ctx.ownership.clone();
    let mut view = own.borrow_and_update().clone();
    let (mut ctl, _watching) = watch_node(own, stop);
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    // What goes to the client in one write, kept between turns.
    let mut to_client = BytesMut::new();
    let mut parked_since = None;
    let mut next_retry = tokio::time::Instant::now();
    let mut drain_by: Option<tokio::time::Instant> = None;
    let mut reopen_at: Option<tokio::time::Instant> = None;
    let mut failed = Vec::new();
    let park_limit = ctx.wait.max(PARK_LIMIT);
    let roles = ctx.view.entry_roles();
    let mut role = split.role();
    roles.moved(None, Some(role));
    let result = loop {
        let owed: usize = subs.values().map(|s| s.owed.load(Ordering::Acquire)).sum();
        let queued = subs
            .values()
            .map(|s| s.link.queued.load(Ordering::Acquire))
            .max();
        let may_read =
            owed + split.buffered() <= ctx.limits.max_output && queued.unwrap_or(0) <= MAX_QUEUED;
        if buf.capacity() - buf.len() < CLIENT_CHUNK / 4 {
            buf.reserve(CLIENT_CHUNK);
        }
        // The one timer this turn needs: a read held back by owed output
        // looks again in 1 ms; the others are deadlines.
        let wake = [
            (!may_read).then(|| tokio::time::Instant::now() + Duration::from_millis(1)),
            reopen_at,
            split.parked().then_some(next_retry),
            drain_by,
        ]
        .into_iter()
        .flatten()
        .min();
        // Branches are polled in a random order (no `biased`): a client and
        // its owners that never pause must not starve the node's moves, its
        // stop or the deadlines.
        tokio::select! {
            n = r.read_buf(&mut buf), if may_read => match n {
                Ok(0) => break Ok(()),
                Err(e) => break Err(format!("reading: {e}")),
                Ok(_) => split.from_client(&mut buf, &*view, &mut out),
            },
            m = rx.recv() => {
                let Some(mut m) = m else { break Err("no link".into()) };
                // Whatever else the owners sent meanwhile goes out in the
                // same write to the client.
                for _ in 0..MAX_BATCH {
                    from_owner(m, &mut split, &mut subs, &view, &mut out);
                    match rx.try_recv() {
                        Ok(next) => m = next,
                        Err(_) => break,
                    }
                }
            }
            c = ctl.recv() => match c {
                Some(Ctl::Moved(v)) => {
                    view = v;
                    split.owners_changed(&*view, &mut out);
                }
                // The node stops: what runs and waits here may finish first.
                Some(Ctl::Stop) => {
                    if drain_by.is_none() {
                        split.drain();
                        drain_by = Some(tokio::time::Instant::now() + DRAIN_WAIT);
                    }
                }
                None => break Err("the node stops".into()),
            },
            _ = wake_at(wake), if wake.is_some() => {
                let now = tokio::time::Instant::now();
                if drain_by.is_some_and(|d| d <= now) {
                    break Err("the node stops: what this connection waited for did not finish".into());
                }
                // Abilities an unreachable owner held go to their owners again.
                if reopen_at.is_some_and(|t| t <= now) {
                    reopen_at = None;
                    split.owners_changed(&*view, &mut out);
                }
                // Submissions wait for their partition's owner (it moves).
                if split.parked() && next_retry <= now {
                    next_retry = now + PARK_RETRY;
                    let since = *parked_since.get_or_insert(now);
                    match since.elapsed() > park_limit {
                        true => split.give_up_parked(&mut out),
                        false => split.retry_parked(&*view, &mut out),
                    }
                }
                // Otherwise owed output may have drained below the limit:
                // the loop reads again.
            }
        }
        if !split.parked() {
            parked_since = None;
        }
        let carried = loop {
            let c = carry_out(
                &mut out,
                &mut to_client,
                &mut subs,
                &mut w,
                &tx,
                (peer, identity.as_deref()),
                ctx,
                &view,
                &mut failed,
            )
            .await;
            if c.is_err() || failed.is_empty() {
                break c;
            }
            // An owner that could not be reached is gone at once, before
            // anything else goes to it; nothing reached it, so what waits
            // on it waits for an owner again; its abilities go back a bit
            // later.
            for o in failed.drain(..) {
                split.owner_closed(o, &*view, &mut out);
            }
            reopen_at.get_or_insert_with(|| tokio::time::Instant::now() + PARK_RETRY);
        };
        if let Err(e) = carried {
            break Err(e);
        }
        let now = split.role();
        roles.moved(Some(role), Some(now));
        role = now;
        if drain_by.is_some() && split.drained() {
            break Ok(());
        }
    };
    roles.moved(Some(role), None);
    for sub in subs.values() {
        let _ = sub.link.send(ToLink::Close { vid: sub.vid });
    }
    result
}

/// What the node tells each connection.
enum Ctl {
    /// The partitions moved.
    Moved(Arc<Ownership>),
    /// The node stops (sent once).
    Stop,
}

/// Watches the node's ownership and stop for one connection, in a task of
/// its own that wakes only when they change: the connection's loop polls
/// one channel each turn, not two watches. The channel closes when the
/// ownership's sender is gone; the task ends with the returned guard.
fn watch_node(
    mut own: watch::Receiver<Arc<Ownership>>,
    mut stop: watch::Receiver<bool>,
) -> (mpsc::UnboundedReceiver<Ctl>, AbortOnDrop) {
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut stopped = false;
        loop {
            tokio::select! {
                c = own.changed() => {
                    let v = own.borrow_and_update().clone();
                    if c.is_err() || tx.send(Ctl::Moved(v)).is_err() {
                        return;
                    }
                }
                _ = stop.wait_for(|s| *s), if !stopped => {
                    stopped = true;
                    if tx.send(Ctl::Stop).is_err() {
                        return;
                    }
                }
            }
        }
    });
    (rx, AbortOnDrop(vec![task.abort_handle()]))
}

/// Sleeps until `at`; made each turn without reading the clock or touching
/// the timer unless the turn has a deadline.
pub(super) async fn wake_at(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// One message from an owner's link, for the sub-connection `vid`; one
/// for a sub-connection this connection no longer has is stale.
fn from_owner(
    (vid, m): (u32, ToClient),
    split: &mut Split,
    subs: &mut IdMap<Owner, Sub>,
    view: &Ownership,
    out: &mut Vec<Out>,
) {
    let Some(owner) = subs.iter().find(|(_, s)| s.vid == vid).map(|(o, _)| *o) else {
        return;
    };
    match m {
        ToClient::Data(bytes) => {
            if let Some(sub) = subs.get_mut(&owner) {
                sub.owed.fetch_sub(bytes.len(), Ordering::AcqRel);
                sub.input.extend_from_slice(&bytes);
                split.from_owner(owner, &mut sub.input, view, out);
            }
        }
        // The owner closed it after answering all it read.
        ToClient::Close => {
            subs.remove(&owner);
            split.owner_closed(owner, view, out);
            split.owners_changed(view, out);
        }
        ToClient::Cut | ToClient::Lost => {
            subs.remove(&owner);
            split.owner_lost(owner, view, out);
            split.owners_changed(view, out);
        }
    }
}

/// Sends what the splitter produced: to owners over their links (opening
/// this connection's sub-connection on first use; one message per owner),
/// and to the client (one write). Owners it could not reach go in `failed`.
#[allow(clippy::too_many_arguments)]
async fn carry_out<W: AsyncWrite + Unpin>(
    out: &mut Vec<Out>,
    to_client: &mut BytesMut,
    subs: &mut IdMap<Owner, Sub>,
    w: &mut W,
    tx: &mpsc::UnboundedSender<(u32, ToClient)>,
    client: (SocketAddr, Option<&str>),
    ctx: &RouteCtx,
    view: &Ownership,
    failed: &mut Vec<Owner>,
) -> Result<(), String> {
    to_client.clear();
    let mut closing = None;
    for o in out.drain(..) {
        match o {
            Out::ToClient(bytes) => to_client.extend_from_slice(&bytes),
            Out::Close(why) => {
                closing = Some(why);
                break;
            }
            // What follows for an owner that could not be reached is
            // dropped too: the splitter is told it is lost.
            Out::ToOwner(owner, _) if failed.contains(&owner) => {}
            Out::ToOwner(owner, bytes) => {
                let sub = match subs.entry(owner) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(v) => match open_sub(owner, tx, client, ctx, view) {
                        Some(sub) => v.insert(sub),
                        None => {
                            failed.push(owner);
                            continue;
                        }
                    },
                };
                sub.output.extend_from_slice(&bytes);
            }
        }
    }
    out.clear();
    for sub in subs.values_mut() {
        if sub.output.is_empty() {
            continue;
        }
        let bytes = sub.output.split().freeze();
        let n = bytes.len();
        sub.link.queued.fetch_add(n, Ordering::AcqRel);
        // A link that ended tells this connection so itself.
        if sub
            .link
            .send(ToLink::Data {
                vid: sub.vid,
                bytes,
            })
            .is_err()
        {
            sub.link.queued.fetch_sub(n, Ordering::AcqRel);
        }
    }
    if !to_client.is_empty() {
        w.write_all(to_client)
            .await
            .map_err(|e| format!("writing: {e}"))?;
        // A large result's room is not kept for the connection's life.
        if to_client.capacity() > CLIENT_CHUNK {
            *to_client = BytesMut::new();
        }
    }
    closing.map_or(Ok(()), Err)
}

/// Opens this connection's sub-connection on `owner`'s link; None when the
/// owner is unknown or its link ended.
fn open_sub(
    owner: Owner,
    tx: &mpsc::UnboundedSender<(u32, ToClient)>,
    (peer, identity): (SocketAddr, Option<&str>),
    ctx: &RouteCtx,
    view: &Ownership,
) -> Option<Sub> {
    let node = view.node(owner)?;
    let local = (owner == view.local()).then_some(&ctx.door);
    let link = ctx.links.to(&node.addr, local);
    let vid = ctx.links.next_vid.fetch_add(1, Ordering::Relaxed);
    let owed = Arc::new(AtomicUsize::new(0));
    let open = ToLink::Open {
        vid,
        peer,
        identity: identity.map(str::to_owned),
        to_client: ClientTx {
            tx: tx.clone(),
            tag: vid,
        },
        owed: owed.clone(),
    };
    link.send(open).ok()?;
    Some(Sub {
        link,
        vid,
        owed,
        input: BytesMut::new(),
        output: BytesMut::new(),
    })
}
