//! A link from another cluster node: one socket carrying many of that
//! node's client connections ([`gearshift_proto::link`]). Each becomes a
//! connection of this thread, with its own id, framing and place in the
//! hub, exactly like a socket of its own; only its bytes travel in link
//! frames. The link's task reads for all of them, and when the link ends
//! every one of them is gone.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use gearshift_core::ids::IdMap;
use gearshift_core::{ConnId, ConnInfo};
use gearshift_proto::link::{decode_link, LinkFrame};

use super::{IoThread, MAX_IN_FLIGHT};
use crate::hub::{thread_of, Item};
use crate::signal::Signal;
use crate::sock::{Sock, StdSock};

/// How long the link waits before reading again while the hub is behind.
const THROTTLE_WAIT: Duration = Duration::from_millis(1);
/// Largest read of a link at once.
const READ_CHUNK: usize = 256 * 1024;

/// A link accepted for an I/O thread.
pub struct LinkAccepted {
    /// The socket (still blocking).
    pub stream: StdSock,
    /// Where it comes from.
    pub meta: LinkMeta,
}

/// A link's origin and what its connections' ids are made from.
pub struct LinkMeta {
    /// The node at the other end.
    pub node: String,
    /// Its address.
    pub from: SocketAddr,
    /// Where the server's connection ids come from.
    pub next_id: Arc<AtomicU64>,
    /// How many I/O threads there are (a connection's id names its thread).
    pub threads: usize,
}

/// One connection the link carries.
struct Carried {
    id: ConnId,
    peer: SocketAddr,
    /// Bytes not yet cut into frames.
    buf: BytesMut,
    /// Its framing broke: what else it sends is dropped.
    broken: bool,
}

/// Registers a link and starts its task.
pub(super) fn accept(io: &Rc<RefCell<IoThread>>, a: LinkAccepted) {
    let LinkAccepted { stream, meta: a } = a;
    let stream = match Sock::from_std(stream) {
        Ok(s) => Rc::new(s),
        Err(e) => {
            tracing::warn!(node = %a.node, error = %e, "cannot register a link");
            return;
        }
    };
    let ctl = Rc::new(Signal::new());
    let link = a.next_id.fetch_add(1, Ordering::Relaxed) + 1;
    {
        let mut t = io.borrow_mut();
        t.peers.insert_link(link, stream.clone(), ctl.clone());
        crate::counters::ConnCounters::bump(&t.counters.links_opened);
    }
    tracing::info!(node = %a.node, from = %a.from, "a node links its connections to this one");
    tokio::task::spawn_local(serve(link, a, stream, ctl, io.clone()));
}

async fn serve(
    link: u64,
    a: LinkMeta,
    stream: Rc<Sock>,
    ctl: Rc<Signal>,
    io: Rc<RefCell<IoThread>>,
) {
    let index = io.borrow().index;
    let max_packet = io.borrow().max_packet;
    // A frame carries at most what a client's socket read gives the node.
    let max_frame = max_packet.saturating_add(1 << 20);
    let mut carried: IdMap<u32, Carried> = IdMap::default();
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let why = loop {
        let Some((blocked, paused)) = io
            .borrow_mut()
            .peers
            .link_mut(link)
            .map(|l| (l.blocked, l.paused))
        else {
            break "closed".to_string();
        };
        let throttled = io.borrow().hub_behind();
        tokio::select! {
            biased;
            _ = ctl.wait() => continue,
            w = stream.writable(), if blocked => {
                if let Err(e) = w {
                    break e.to_string();
                }
                io.borrow_mut().link_writable(link);
                continue;
            }
            _ = async { tokio::time::sleep(THROTTLE_WAIT).await }, if !paused && throttled => continue,
            r = stream.readable(), if !paused && !throttled => {
                if let Err(e) = r {
                    break e.to_string();
                }
            }
        }
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        let room = buf.capacity() - buf.len();
        match crate::connection::read_some(&stream, &mut buf, room) {
            Ok(0) => break "the node closed it".to_string(),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => break e.to_string(),
        }
        let mut t = io.borrow_mut();
        let broke = loop {
            match decode_link(&mut buf, max_frame) {
                Ok(Some(frame)) => {
                    on_frame(&mut t, link, frame, &mut carried, &ctl, &a, index);
                }
                Ok(None) => break None,
                Err(e) => break Some(e.to_string()),
            }
        };
        t.pump(None);
        t.peers.write_dirty();
        t.report_failed();
        t.poll_outputs();
        if let Some(e) = broke {
            break e;
        }
    };
    tracing::info!(node = %a.node, connections = carried.len(), "link closed: {why}; its connections are gone");
    let mut t = io.borrow_mut();
    t.peers.drop_link(link);
    for (_, c) in carried {
        t.feed(c.id, Item::Closed, 0);
    }
    t.pump(None);
}

/// Carries out one frame of the link.
fn on_frame(
    t: &mut IoThread,
    link: u64,
    frame: LinkFrame,
    carried: &mut IdMap<u32, Carried>,
    ctl: &Rc<Signal>,
    a: &LinkMeta,
    index: usize,
) {
    match frame {
        LinkFrame::Open {
            vid,
            peer,
            identity,
        } => {
            let Ok(peer) = peer.parse::<SocketAddr>() else {
                tracing::warn!(node = %a.node, "link opened a connection with no client address");
                return;
            };
            if carried.contains_key(&vid) {
                tracing::warn!(node = %a.node, vid, "link reopened a connection it still has");
                return;
            }
            let id = id_for(&a.next_id, a.threads, index);
            let ip = peer.ip().to_canonical();
            let info = ConnInfo {
                // What `workers` shows: the client's port, the same on every
                // node its connection reaches (a partitioned node's owners).
                fd: i64::from(peer.port()),
                ip: ip.to_string(),
                port: peer.port(),
                loopback: ip.is_loopback(),
                rights: t.access.get().rights(peer.ip(), identity.as_deref()),
                node: Some(a.node.clone()),
                identity,
            };
            t.peers.insert_linked(id, link, vid, ctl.clone());
            crate::counters::ConnCounters::bump(&t.counters.linked_conns);
            t.feed(id, Item::Open(info), 0);
            carried.insert(
                vid,
                Carried {
                    id,
                    peer,
                    buf: BytesMut::new(),
                    broken: false,
                },
            );
        }
        LinkFrame::Data { vid, bytes } => {
            let Some(c) = carried.get_mut(&vid) else {
                return;
            };
            if c.broken {
                return;
            }
            c.buf.extend_from_slice(&bytes);
            let max_packet = t.max_packet;
            if !crate::connection::feed_frames(t, c.id, &mut c.buf, max_packet, c.peer) {
                c.broken = true;
                c.buf = BytesMut::new();
            }
        }
        LinkFrame::Close { vid } => {
            // The client is done sending: as a socket's end of file.
            if let Some(c) = carried.remove(&vid) {
                if !c.buf.is_empty() {
                    tracing::info!(peer = %c.peer, bytes = c.buf.len(), "connection closed in the middle of a packet; partial packet discarded");
                }
                t.feed(c.id, Item::Closed, 0);
            }
        }
        // Only a job server says these (and the end of file follows a bye).
        LinkFrame::Bye | LinkFrame::Ready => {}
    }
}

/// A fresh connection id that names this thread.
fn id_for(next: &AtomicU64, threads: usize, index: usize) -> ConnId {
    loop {
        let id = ConnId(next.fetch_add(1, Ordering::Relaxed) + 1);
        if thread_of(id, threads) == index {
            return id;
        }
    }
}

impl IoThread {
    /// The shared hub has more than [`MAX_IN_FLIGHT`] of this thread's
    /// requests unprocessed.
    fn hub_behind(&self) -> bool {
        match &self.route {
            super::Sink::Shared(b) => b.flow.in_flight.load(Ordering::Acquire) > MAX_IN_FLIGHT,
            super::Sink::Inline(_) => false,
        }
    }

    /// The link's socket became writable: write what waits.
    fn link_writable(&mut self, link: u64) {
        self.peers.link_writable(link);
        self.report_failed();
        self.pump(None);
    }
}
