//! An I/O thread: a single-threaded runtime that owns a share of the
//! connections, their sockets, framing and output buffers.
//!
//! Its connection tasks ([`crate::connection`]) cut reads into frames and
//! parse them into [`Item`]s. With one I/O thread the hub runs right here
//! and each read goes through it at once; with several, a thread collects
//! the items of every connection that was ready together and hands them to
//! the shared hub ([`crate::core_lock`]) as one batch, and gets back one
//! batch of [`crate::hub::Out`]s, which the thread encodes into the
//! connections' buffers and writes with one `write` per connection.
//!
//! The output side of its connections (buffers, writes, the limits that
//! bound a connection's memory) is [`crate::peers`]; reading waits here
//! while the hub is behind on a connection's requests.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use gearshift_core::{ConnId, ConnInfo, Input};
use tokio::sync::{mpsc as tmpsc, OwnedSemaphorePermit};

use crate::core_lock::CoreLock;
use crate::handoff::{Flow, OutSlot};
use crate::hub::{Hub, Item, OutSink, ToHub};
use crate::peers::Peers;
use crate::signal::Signal;

pub mod link;
pub mod local;
mod tasks;
use tasks::{flusher, hub};

/// Bytes an I/O thread may have handed to the hub and not yet seen
/// processed; past it, its connections wait before reading more.
pub const MAX_IN_FLIGHT: usize = 8 << 20;

/// A connection accepted for an I/O thread.
pub struct Accepted {
    /// The socket (still blocking; the thread registers it).
    pub stream: crate::sock::StdSock,
    /// Its id; `id % threads` is the thread.
    pub id: ConnId,
    /// The peer's address.
    pub peer: SocketAddr,
    /// The cluster node that relayed it, if one did.
    pub node: Option<String>,
    /// The subject of the TLS client certificate it presented, if any.
    pub identity: Option<String>,
    /// Held while the connection lives (the connection limit).
    pub permit: OwnedSemaphorePermit,
}

/// What an I/O thread is told.
pub enum ToIo {
    /// Take this new connection.
    Accept(Accepted),
    /// Take this link from another cluster node, and its connections.
    Link(link::LinkAccepted),
    /// For the hub (only when it runs on this, the only I/O thread).
    Hub(ToHub),
    /// Close every socket and end the thread.
    Stop {
        /// Every answer the hub made went out (it was not fenced), so a
        /// link's connections may be told they end in order.
        orderly: bool,
    },
}

/// What a connection task should do next.
#[derive(Debug, Clone, Copy)]
pub struct PeerState {
    /// Output waits for the socket to become writable.
    pub blocked: bool,
    /// Reading is allowed (not paused, not closing).
    pub readable: bool,
    /// The hub is behind: wait a little before reading.
    pub throttled: bool,
}

/// One I/O thread's state, shared by its tasks (never across threads).
pub struct IoThread {
    index: usize,
    peers: Peers,
    /// Largest packet body a connection may send.
    pub max_packet: usize,
    /// How long a new connection may stay silent before it is closed.
    pub idle_timeout: Option<std::time::Duration>,
    /// Connections closed for staying silent.
    pub counters: Arc<crate::counters::ConnCounters>,
    access: Arc<crate::access::AccessCell>,
    route: Sink,
    /// The flusher was woken and has not run yet.
    flush_scheduled: bool,
    flush: Rc<Signal>,
    send: Rc<Signal>,
}

/// Settings of one I/O thread.
pub struct IoSettings {
    /// Its index among the I/O threads.
    pub index: usize,
    /// Handle prefix, for JOB_CREATED.
    pub prefix: String,
    /// Unwritten output past which a connection is not read.
    pub max_output: usize,
    /// Unwritten output past which a connection is closed.
    pub hard_output: usize,
    /// Largest packet body accepted.
    pub max_packet: usize,
    /// How long a new connection may stay silent before it is closed.
    pub idle_timeout: Option<std::time::Duration>,
    /// Connections closed for that, counted for `/metrics`.
    pub counters: Arc<crate::counters::ConnCounters>,
    /// The access rules in force, which give each new connection its rights.
    pub access: Arc<crate::access::AccessCell>,
}

/// Where an I/O thread's items go: the hub itself, run here (the only I/O
/// thread), or batches for the hub the I/O threads share. Every other part
/// of the thread is written once, for both.
pub enum Sink {
    /// Run the hub here.
    Inline(Box<Hub>),
    /// Hand batches to the hub shared by the I/O threads.
    Shared(Batcher),
}

/// An I/O thread's side of the shared hub: the items its connections did,
/// collected until every ready connection has had its turn, then handed
/// over as one batch; the hub leaves the answers in `slot`.
pub struct Batcher {
    core: Arc<CoreLock>,
    /// What was handed over and how far the hub got.
    flow: Arc<Flow>,
    /// Where the hub leaves this thread's outputs.
    slot: Arc<OutSlot>,
    pending: Vec<(ConnId, Item)>,
    pending_bytes: usize,
    /// The number the pending batch will be sent with.
    next_seq: u64,
    /// The sender task is woken and has not run yet.
    scheduled: bool,
}

impl Batcher {
    /// This thread's link to the shared hub `core`.
    pub fn new(core: Arc<CoreLock>, flow: Arc<Flow>, slot: Arc<OutSlot>) -> Self {
        Batcher {
            core,
            flow,
            slot,
            pending: Vec::new(),
            pending_bytes: 0,
            next_seq: 1,
            scheduled: false,
        }
    }
}

/// Runs an I/O thread until [`ToIo::Stop`] (or its inbox closes).
pub fn run(settings: IoSettings, sink: Sink, inbox: tmpsc::UnboundedReceiver<ToIo>) {
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    if let Sink::Shared(b) = &sink {
        let (a, b) = (b.slot.clone(), b.slot.clone());
        builder
            .on_thread_park(move || a.before_park())
            .on_thread_unpark(move || b.after_unpark());
    }
    let rt = match builder.build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!(error = %e, "cannot start an I/O thread's runtime");
            return;
        }
    };
    let local = tokio::task::LocalSet::new();
    local.block_on(&rt, main(settings, sink, inbox));
}

async fn main(settings: IoSettings, sink: Sink, mut inbox: tmpsc::UnboundedReceiver<ToIo>) {
    let io = Rc::new(RefCell::new(IoThread {
        index: settings.index,
        peers: Peers::new(
            &settings.prefix,
            settings.max_output,
            settings.hard_output,
            settings.counters.clone(),
        ),
        max_packet: settings.max_packet,
        idle_timeout: settings.idle_timeout,
        counters: settings.counters.clone(),
        access: settings.access.clone(),
        route: sink,
        flush_scheduled: false,
        flush: Rc::new(Signal::new()),
        send: Rc::new(Signal::new()),
    }));
    // The flusher, and the link to the hub (its timer when it runs here;
    // otherwise the sender of batches and the taker of the shared hub's outputs).
    let mut helpers = vec![tokio::task::spawn_local(flusher(io.clone()))];
    helpers.extend(hub(&io));
    // The inbox has a task of its own: the future `block_on` runs is polled
    // on every wake-up of the thread, so it only checks a flag.
    let stopped = Rc::new(Signal::new());
    let orderly = Rc::new(std::cell::Cell::new(false));
    helpers.push(tokio::task::spawn_local({
        let (io, stopped, orderly) = (io.clone(), stopped.clone(), orderly.clone());
        async move {
            while let Some(msg) = inbox.recv().await {
                if let Some(o) = control(&io, msg) {
                    orderly.set(o);
                    break;
                }
            }
            stopped.notify();
        }
    }));
    stopped.wait().await;
    stop(&io, helpers, orderly.get());
}

/// Carries out a control message; Some (whether orderly) when the thread
/// must stop.
fn control(io: &Rc<RefCell<IoThread>>, msg: ToIo) -> Option<bool> {
    match msg {
        ToIo::Accept(a) => accept(io, a),
        ToIo::Link(a) => link::accept(io, a),
        ToIo::Hub(msg) => hub_message(io, msg),
        ToIo::Stop { orderly } => return Some(orderly),
    }
    None
}

/// Carries out a message for the hub that runs on this thread.
fn hub_message(io: &Rc<RefCell<IoThread>>, msg: ToHub) {
    let mut guard = io.borrow_mut();
    let t = &mut *guard;
    // A commit's answers (JOB_CREATED) are written at once: their
    // submitters wait on them, and nothing else batches with them.
    let write_now = matches!(msg, ToHub::Commit(_) | ToHub::Finish(_));
    let finished = match t.hub_and_sink() {
        Some((hub, peers)) => hub.message(msg, peers),
        None => None,
    };
    t.pump(None);
    if write_now {
        t.peers.write_dirty();
        t.report_failed();
        t.pump(None);
    }
    drop(guard);
    if let Some(finished) = finished {
        finished.complete();
    }
}

fn stop(io: &Rc<RefCell<IoThread>>, helpers: Vec<tokio::task::JoinHandle<()>>, orderly: bool) {
    for h in helpers {
        h.abort();
    }
    let mut t = io.borrow_mut();
    t.take_outputs();
    t.peers.write_dirty();
    t.peers.shut_all(orderly);
}

/// Registers a new connection and starts its task.
fn accept(io: &Rc<RefCell<IoThread>>, a: Accepted) {
    let Accepted {
        stream,
        id,
        peer,
        node,
        identity,
        permit,
    } = a;
    let stream = match crate::sock::Sock::from_std(stream) {
        Ok(s) => Rc::new(s),
        Err(e) => {
            tracing::warn!(%peer, error = %e, "cannot register a new connection");
            return;
        }
    };
    let info = ConnInfo {
        fd: i64::from(stream.raw_fd()),
        ip: peer.ip().to_canonical().to_string(),
        port: peer.port(),
        loopback: peer.ip().to_canonical().is_loopback(),
        rights: io
            .borrow()
            .access
            .get()
            .rights(peer.ip(), identity.as_deref()),
        node,
        identity,
    };
    let ctl = Rc::new(Signal::new());
    {
        let mut t = io.borrow_mut();
        t.peers.insert(id, stream.clone(), ctl.clone(), permit);
        t.feed(id, Item::Open(info), 0);
        t.pump(None);
    }
    tokio::task::spawn_local(crate::connection::serve(id, peer, stream, ctl, io.clone()));
}

impl IoThread {
    fn deadline(&mut self) -> Option<std::time::Instant> {
        match &mut self.route {
            Sink::Inline(hub) => hub.deadline(),
            Sink::Shared(_) => None,
        }
    }

    /// How connection `id`'s task should go on; `None` once it is gone.
    /// Reading waits while the hub is behind on this thread's
    /// batches, or on more than `max_output` of this connection's requests
    /// (their answers could come back all at once).
    pub fn peer_state(&mut self, id: ConnId) -> Option<PeerState> {
        let max_output = self.peers.max_output();
        let p = self.peers.get_mut(id)?;
        let throttled = match &self.route {
            Sink::Shared(Batcher { flow, .. }) => {
                if p.sent_bytes > 0 && flow.processed.load(Ordering::Acquire) >= p.sent_seq {
                    p.sent_bytes = 0;
                }
                p.sent_bytes > max_output || flow.in_flight.load(Ordering::Acquire) > MAX_IN_FLIGHT
            }
            Sink::Inline(_) => false,
        };
        Some(PeerState {
            blocked: p.blocked,
            readable: !p.paused && !p.closing,
            throttled,
        })
    }

    /// Encodes and writes the batches the hub left.
    fn take_outputs(&mut self) {
        let Sink::Shared(b) = &self.route else {
            return;
        };
        let slot = b.slot.clone();
        for batch in slot.take() {
            for out in batch {
                self.peers.push(out);
            }
        }
        self.peers.write_dirty();
        self.report_failed();
    }

    /// After a read: if the hub left outputs, has the taker run
    /// (woken from this thread, which costs no system call).
    pub fn poll_outputs(&self) {
        if let Sink::Shared(b) = &self.route {
            if b.slot.has_pending() {
                b.slot.waker().notify_one();
            }
        }
    }

    /// A request of connection `id`: [`IoThread::feed`] of an
    /// [`Item::Input`], moved as little as possible.
    #[inline(always)]
    pub fn feed_input(&mut self, id: ConnId, input: Input, bytes: usize) {
        if let Some((hub, peers)) = self.hub_and_sink() {
            return hub.request(id, input, peers);
        }
        self.feed(id, Item::Input(input), bytes);
    }

    /// One thing connection `id` did (`bytes`: its size on the wire).
    pub fn feed(&mut self, id: ConnId, item: Item, bytes: usize) {
        if let Some((hub, peers)) = self.hub_and_sink() {
            return hub.input(id, item, peers);
        }
        if let Sink::Shared(b) = &mut self.route {
            b.pending.push((id, item));
            b.pending_bytes += bytes;
            if let Some(p) = self.peers.get_mut(id) {
                p.sent_bytes += bytes;
                p.sent_seq = b.next_seq;
            }
            if !b.scheduled {
                b.scheduled = true;
                self.send.notify();
            }
        }
    }

    /// After a connection's items were fed: with the hub here, routes what
    /// they produced; the reading connection (`own`) is written at once
    /// (its next request may wait on the answer), other connections by the
    /// flusher.
    pub fn pump(&mut self, own: Option<ConnId>) {
        loop {
            let Some((hub, peers)) = self.hub_and_sink() else {
                return;
            };
            hub.settle(peers);
            if let Some(own) = own {
                self.peers.write_own(own);
            }
            if self.peers.has_dirty() && !self.flush_scheduled {
                self.flush_scheduled = true;
                self.flush.notify();
            }
            if !self.peers.has_failed() {
                return;
            }
            self.report_failed();
        }
    }

    /// Tells the hub of connections whose socket failed.
    fn report_failed(&mut self) {
        for id in self.peers.take_failed() {
            self.feed(id, Item::Closed, 0);
        }
    }

    /// The peer closed its end: the hub forgets the connection, whose
    /// socket closes once what it is owed is written.
    pub fn peer_closed(&mut self, id: ConnId) {
        self.feed(id, Item::Closed, 0);
        self.pump(None);
    }

    /// The socket failed: nothing owed can be written any more.
    pub fn peer_failed(&mut self, id: ConnId) {
        self.peers.forget(id);
        self.feed(id, Item::Closed, 0);
        self.pump(None);
    }

    /// The socket became writable: write what waits.
    pub fn on_writable(&mut self, id: ConnId) {
        self.peers.writable(id);
        self.report_failed();
        self.pump(None);
    }

    /// The hub (when it runs on this thread) and this thread's connections,
    /// its output sink, borrowed together.
    fn hub_and_sink(&mut self) -> Option<(&mut Hub, &mut Peers)> {
        let Sink::Inline(hub) = &mut self.route else {
            return None;
        };
        Some((hub, &mut self.peers))
    }
}
