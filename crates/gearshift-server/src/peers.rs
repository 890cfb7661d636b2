//! An I/O thread's connections on the output side: each one's socket,
//! unwritten bytes and flags; the hub's outputs encoded straight into them
//! (the [`OutSink`]); the writes; and the output limits that bound a
//! connection's memory.

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

/// One connection as its thread sees it.
pub struct Peer {
    stream: Rc<Sock>,
    out: BytesMut,
    /// Listed in `Peers::dirty`.
    listed: bool,
    /// A write would block: the connection's task waits for writability.
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
    _permit: OwnedSemaphorePermit,
}

/// Every connection of one I/O thread.
pub struct Peers {
    map: IdMap<ConnId, Peer>,
    /// Connections with output to write.
    dirty: Vec<ConnId>,
    /// Connections whose socket failed (or that were cut off), for the hub.
    failed: Vec<ConnId>,
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
        let peer = Peer {
            stream,
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
        !self.dirty.is_empty()
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
    }

    /// Closes every socket at once (the thread ends).
    pub fn shut_all(&mut self) {
        for (_, p) in self.map.drain() {
            p.stream.shutdown(Shutdown::Both);
            p.ctl.notify();
        }
    }

    /// Writes as much of `id`'s output as the socket takes now, applies the
    /// output limits, and closes it when it was asked to close and all is
    /// written.
    fn write(&mut self, id: ConnId) {
        let Some(p) = self.map.get_mut(&id) else {
            return;
        };
        if !p.blocked {
            while !p.out.is_empty() {
                match p.stream.try_write(&p.out) {
                    Ok(n) => p.out.advance(n),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        p.blocked = true;
                        p.ctl.notify();
                        break;
                    }
                    Err(e) => {
                        tracing::debug!(conn = id.0, error = %e, "write failed");
                        self.cut_off(id);
                        return;
                    }
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
            p.stream.shutdown(Shutdown::Write);
            p.ctl.notify();
            self.map.remove(&id);
        }
    }

    /// Drops a connection whose write failed or which is closed for
    /// misbehaving; the hub is told unless it already forgot it.
    fn cut_off(&mut self, id: ConnId) {
        if let Some(p) = self.map.remove(&id) {
            p.stream.shutdown(Shutdown::Both);
            p.ctl.notify();
            if !p.closing {
                self.failed.push(id);
            }
        }
    }
}
