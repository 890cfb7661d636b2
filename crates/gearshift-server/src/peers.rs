//! An I/O thread's connections on the output side: each one's socket,
//! unwritten bytes and flags; the hub's outputs encoded straight into them
//! (the [`OutSink`]); the writes; and the output limits that bound a
//! connection's memory. A connection another cluster node carries over a
//! link ([`crate::io_thread::link`]) has its output framed into the
//! link's buffer instead, and the link's socket is written once for all.

use std::net::Shutdown;
use std::rc::Rc;

use crate::sock::Sock;
use bytes::{Buf, BytesMut};
use gearshift_core::ids::Handles;
use gearshift_core::ids::IdMap;
use gearshift_core::ConnId;
use tokio::sync::OwnedSemaphorePermit;

use crate::signal::Signal;

use crate::hub::{Out, OutSink};

/// An output buffer grown past this is released once it is written.
const KEEP_OUT_BUF: usize = 64 * 1024;

/// Where a connection's bytes go.
enum Wire {
    /// Its own socket.
    Sock(Rc<Sock>),
    /// Connection `vid` of link `link`.
    Link { link: u64, vid: u32 },
}

/// A link to another cluster node as the output side sees it.
pub struct LinkOut {
    stream: Rc<Sock>,
    out: BytesMut,
    listed: bool,
    /// A write would block: the link's task waits for writability.
    pub blocked: bool,
    /// Too much unwritten output: the link is not read until it drains.
    pub paused: bool,
    /// Connections whose output waits for room on the link.
    waiting: Vec<ConnId>,
    ctl: Rc<Signal>,
}

/// One connection as its thread sees it.
pub struct Peer {
    wire: Wire,
    out: BytesMut,
    /// Listed in `Peers::dirty`.
    listed: bool,
    /// A write would block: the connection's task waits for writability
    /// (carried by a link: its output waits for room on the link).
    pub blocked: bool,
    /// Too much unwritten output: not read until it drains.
    pub paused: bool,
    /// Close once `out` is written; nothing more is added.
    pub closing: bool,
    /// Bytes of requests handed to the shared hub in batches up to
    /// `sent_seq` and maybe not yet processed (several I/O threads).
    pub sent_bytes: usize,
    /// The last batch that carried this connection's requests.
    pub sent_seq: u64,
    /// Wakes the connection's task.
    ctl: Rc<Signal>,
    _permit: Option<OwnedSemaphorePermit>,
}

/// Every connection of one I/O thread.
pub struct Peers {
    map: IdMap<ConnId, Peer>,
    /// Connections with output to write.
    dirty: Vec<ConnId>,
    /// Connections whose socket failed (or that were cut off), for the hub.
    failed: Vec<ConnId>,
    links: IdMap<u64, LinkOut>,
    /// Links with output to write.
    dirty_links: Vec<u64>,
    handles: Handles,
    max_output: usize,
    hard_output: usize,
    counters: std::sync::Arc<crate::counters::ConnCounters>,
}

impl OutSink for Peers {
    #[inline]
    fn push(&mut self, out: Out) {
        let id = out.conn();
        let Some(p) = self.map.get_mut(&id) else {
            return;
        };
        if p.closing {
            return;
        }
        match out {
            Out::Send(_, r) => r.encode(&mut p.out),
            Out::Created(_, job) => self.handles.encode_created(job, &mut p.out),
            Out::Text(_, t) => p.out.extend_from_slice(&t),
            // Rendered here, so the hub's holder only copied the rows.
            Out::Listing(_, l) => p.out.extend_from_slice(&l.render()),
            Out::Close(_) => {
                p.closing = true;
                // Its task stops reading.
                p.ctl.notify();
            }
        }
        if !p.listed {
            p.listed = true;
            self.dirty.push(id);
        }
    }
}

impl Peers {
    /// No connections; JOB_CREATED is encoded with handle `prefix`; output
    /// limits as in [`crate::ServerConfig::max_output`].
    pub fn new(
        prefix: &str,
        max_output: usize,
        hard_output: usize,
        counters: std::sync::Arc<crate::counters::ConnCounters>,
    ) -> Self {
        Peers {
            map: IdMap::default(),
            dirty: Vec::new(),
            failed: Vec::new(),
            links: Default::default(),
            dirty_links: Vec::new(),
            handles: Handles::new(prefix),
            max_output,
            hard_output,
            counters,
        }
    }

    /// Adds a connection.
    pub fn insert(
        &mut self,
        id: ConnId,
        stream: Rc<Sock>,
        ctl: Rc<Signal>,
        permit: OwnedSemaphorePermit,
    ) {
        self.insert_on(id, Wire::Sock(stream), ctl, Some(permit));
    }

    /// Adds connection `vid` of link `link` as `id`; its task is the link's.
    pub fn insert_linked(&mut self, id: ConnId, link: u64, vid: u32, ctl: Rc<Signal>) {
        self.insert_on(id, Wire::Link { link, vid }, ctl, None);
    }

    fn insert_on(
        &mut self,
        id: ConnId,
        wire: Wire,
        ctl: Rc<Signal>,
        permit: Option<OwnedSemaphorePermit>,
    ) {
        let peer = Peer {
            wire,
            out: BytesMut::new(),
            listed: false,
            blocked: false,
            paused: false,
            closing: false,
            sent_bytes: 0,
            sent_seq: 0,
            ctl,
            _permit: permit,
        };
        self.map.insert(id, peer);
    }

    /// Adds a link to another node whose task waits on `ctl`.
    pub fn insert_link(&mut self, link: u64, stream: Rc<Sock>, ctl: Rc<Signal>) {
        // Said before anything is read: a link that ends without it
        // carried nothing to this server.
        let mut out = BytesMut::new();
        gearshift_proto::link::LinkFrame::Ready.encode(&mut out);
        let l = LinkOut {
            stream,
            out,
            listed: false,
            blocked: false,
            paused: false,
            waiting: Vec::new(),
            ctl,
        };
        self.links.insert(link, l);
        self.write_link(link);
    }

    /// Link `link`, while it is open.
    pub fn link_mut(&mut self, link: u64) -> Option<&mut LinkOut> {
        self.links.get_mut(&link)
    }

    /// Closes link `link`'s socket and forgets it with every connection it
    /// carried (the hub is the caller's to tell).
    pub fn drop_link(&mut self, link: u64) {
        if let Some(l) = self.links.remove(&link) {
            l.stream.shutdown(Shutdown::Both);
        }
        self.map
            .retain(|_, p| !matches!(p.wire, Wire::Link { link: l, .. } if l == link));
    }

    /// The link's socket became writable: write what waits.
    pub fn link_writable(&mut self, link: u64) {
        if let Some(l) = self.links.get_mut(&link) {
            l.blocked = false;
        }
        self.write_link(link);
        self.write_links();
    }

    /// Connection `id`, while it is open.
    pub fn get_mut(&mut self, id: ConnId) -> Option<&mut Peer> {
        self.map.get_mut(&id)
    }

    /// The unwritten output past which a connection is not read.
    pub fn max_output(&self) -> usize {
        self.max_output
    }

    /// Whether output waits for the flusher.
    pub fn has_dirty(&self) -> bool {
        !self.dirty.is_empty() || !self.dirty_links.is_empty()
    }

    /// Connections that failed since the last call, for the hub.
    pub fn take_failed(&mut self) -> Vec<ConnId> {
        std::mem::take(&mut self.failed)
    }

    /// Whether connections failed since the last [`Peers::take_failed`].
    pub fn has_failed(&self) -> bool {
        !self.failed.is_empty()
    }

    /// Writes the reading connection's output at once; if it was the only
    /// one with output, nothing is left for the flusher.
    pub fn write_own(&mut self, own: ConnId) {
        self.write(own);
        if self.dirty.len() == 1 && self.dirty[0] == own {
            self.dirty.clear();
            if let Some(p) = self.map.get_mut(&own) {
                p.listed = false;
            }
        }
        self.write_links();
    }

    /// The socket became writable: write what waits.
    pub fn writable(&mut self, id: ConnId) {
        if let Some(p) = self.map.get_mut(&id) {
            p.blocked = false;
        }
        self.write(id);
    }

    /// Forgets a connection whose socket failed (its task reports it).
    pub fn forget(&mut self, id: ConnId) {
        if let Some(p) = self.map.remove(&id) {
            p.ctl.notify();
        }
    }

    /// Writes every connection that has output.
    pub fn write_dirty(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for id in dirty.drain(..) {
            if let Some(p) = self.map.get_mut(&id) {
                p.listed = false;
            }
            self.write(id);
        }
        if self.dirty.is_empty() {
            self.dirty = dirty;
        }
        self.write_links();
    }

    /// Writes every link that has output.
    fn write_links(&mut self) {
        while let Some(link) = self.dirty_links.pop() {
            if let Some(l) = self.links.get_mut(&link) {
                l.listed = false;
            }
            self.write_link(link);
        }
    }

    /// Writes as much of a link's output as its socket takes now; while
    /// more than `max_output` waits, the link is not read, and once there
    /// is room the connections whose output waited are moved onto it.
    fn write_link(&mut self, link: u64) {
        let Some(l) = self.links.get_mut(&link) else {
            return;
        };
        if !l.blocked {
            match write_some(&l.stream, &mut l.out) {
                Ok(false) => {}
                Ok(true) => {
                    l.blocked = true;
                    l.ctl.notify();
                }
                Err(e) => {
                    tracing::debug!(link, error = %e, "link write failed");
                    l.stream.shutdown(Shutdown::Both);
                    l.ctl.notify();
                    return;
                }
            }
        }
        if l.out.is_empty() && l.out.capacity() > KEEP_OUT_BUF {
            l.out = BytesMut::new();
        }
        let pending = l.out.len();
        if pending > self.max_output {
            l.paused = true;
            return;
        }
        if l.paused && pending <= self.max_output / 2 {
            l.paused = false;
            l.ctl.notify();
        }
        // Room again: the connections whose output waited go on.
        for id in std::mem::take(&mut l.waiting) {
            if let Some(p) = self.map.get_mut(&id) {
                p.blocked = false;
            }
            self.write(id);
        }
    }

    /// Closes every socket at once (the thread ends); `orderly`: every
    /// answer went out, and a link's connections are told they end.
    pub fn shut_all(&mut self, orderly: bool) {
        // A link's connections end in order: the node at the other end
        // learns that all they sent and this server took was answered,
        // and, by the goodbye, that nothing else it sent was taken.
        if orderly {
            for p in self.map.values() {
                if let Wire::Link { link, vid } = &p.wire {
                    if let Some(l) = self.links.get_mut(link) {
                        gearshift_proto::link::LinkFrame::Close { vid: *vid }.encode(&mut l.out);
                    }
                }
            }
            for (id, l) in &mut self.links {
                gearshift_proto::link::LinkFrame::Bye.encode(&mut l.out);
                if !l.listed {
                    l.listed = true;
                    self.dirty_links.push(*id);
                }
            }
        }
        self.write_links();
        for (_, p) in self.map.drain() {
            if let Wire::Sock(s) = &p.wire {
                s.shutdown(Shutdown::Both);
            }
            p.ctl.notify();
        }
        for (_, l) in self.links.drain() {
            l.stream.shutdown(Shutdown::Both);
            l.ctl.notify();
        }
    }

    /// Writes as much of `id`'s output as the socket takes now, applies the
    /// output limits, and closes it when it was asked to close and all is
    /// written.
    fn write(&mut self, id: ConnId) {
        let Some(p) = self.map.get_mut(&id) else {
            return;
        };
        let stream = match &p.wire {
            Wire::Sock(s) => s,
            Wire::Link { link, vid } => {
                let (link, vid) = (*link, *vid);
                let Some(l) = self.links.get_mut(&link) else {
                    self.map.remove(&id);
                    return;
                };
                // Output moves onto the link while the link's backlog is
                // short; past it, it waits here under this connection's own
                // limits, so one connection's flood closes that connection,
                // not the link and the others it carries.
                let room = self.max_output.saturating_sub(l.out.len());
                if room > 0 && !p.out.is_empty() {
                    let n = room.min(p.out.len());
                    gearshift_proto::link::encode_data(&mut l.out, vid, &p.out[..n]);
                    p.out.advance(n);
                }
                if !p.out.is_empty() {
                    if !p.blocked {
                        p.blocked = true;
                        l.waiting.push(id);
                    }
                } else if p.closing {
                    gearshift_proto::link::LinkFrame::Close { vid }.encode(&mut l.out);
                    self.map.remove(&id);
                }
                if !l.listed && !l.out.is_empty() {
                    l.listed = true;
                    self.dirty_links.push(link);
                }
                let pending = self.map.get(&id).map_or(0, |p| p.out.len());
                if pending > self.hard_output {
                    tracing::warn!(
                        conn = id.0,
                        pending,
                        "closing connection: its peer does not read what it is sent"
                    );
                    crate::counters::ConnCounters::bump(&self.counters.output_closed);
                    self.cut_off(id);
                }
                return;
            }
        };
        if !p.blocked {
            match write_some(stream, &mut p.out) {
                Ok(false) => {}
                Ok(true) => {
                    p.blocked = true;
                    p.ctl.notify();
                }
                Err(e) => {
                    tracing::debug!(conn = id.0, error = %e, "write failed");
                    self.cut_off(id);
                    return;
                }
            }
        }
        if p.out.is_empty() && p.out.capacity() > KEEP_OUT_BUF {
            p.out = BytesMut::new();
        }
        let pending = p.out.len();
        if pending > self.hard_output {
            tracing::warn!(
                conn = id.0,
                pending,
                "closing connection: its peer does not read what it is sent"
            );
            crate::counters::ConnCounters::bump(&self.counters.output_closed);
            self.cut_off(id);
            return;
        }
        if pending > self.max_output {
            p.paused = true;
        } else if p.paused && pending <= self.max_output / 2 {
            p.paused = false;
            p.ctl.notify();
        }
        if p.closing && p.out.is_empty() {
            stream.shutdown(Shutdown::Write);
            p.ctl.notify();
            self.map.remove(&id);
        }
    }

    /// Drops a connection whose write failed or which is closed for
    /// misbehaving; the hub is told unless it already forgot it.
    fn cut_off(&mut self, id: ConnId) {
        if let Some(p) = self.map.remove(&id) {
            match &p.wire {
                Wire::Sock(s) => s.shutdown(Shutdown::Both),
                // The node at the other end closes its client.
                Wire::Link { link, vid } => {
                    if let Some(l) = self.links.get_mut(link) {
                        gearshift_proto::link::LinkFrame::Close { vid: *vid }.encode(&mut l.out);
                        if !l.listed {
                            l.listed = true;
                            self.dirty_links.push(*link);
                        }
                    }
                }
            }
            p.ctl.notify();
            if !p.closing {
                self.failed.push(id);
            }
        }
    }
}

/// Writes as much of `out` as `stream` takes now; `Ok(true)` when the
/// rest would block.
#[inline]
fn write_some(stream: &Sock, out: &mut BytesMut) -> std::io::Result<bool> {
    while !out.is_empty() {
        match stream.try_write(out) {
            Ok(n) => out.advance(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) => return Err(e),
        }
    }
    Ok(false)
}
