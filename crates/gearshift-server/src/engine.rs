//! The engine: the one routing core and every connection's outgoing bytes,
//! behind one lock.
//!
//! A connection task takes the lock once per read; the engine decodes each
//! frame of it and runs it through the core at once (plain submissions read
//! in place), and encodes the core's packets straight into the target
//! connections' buffers; before the lock is released each buffer that
//! got bytes is written with one non-blocking `write`. So a read of many
//! pipelined requests costs one lock, one pass through the core and one write
//! per connection it touched, with no message between tasks and no task
//! switch. On the current-thread runtime `serve` uses, the lock is never
//! contended; on a multi-threaded runtime it serialises the core as the
//! engine task of earlier versions did.
//!
//! A write that would block leaves the rest in the buffer and hands it to the
//! connection's own task, which waits until the socket is writable.

use std::net::{Shutdown, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::{Buf, BytesMut};
use gearshift_core::ids::IdMap;
use gearshift_core::{ConnId, ConnInfo, Core, Effect, Input, Millis, StoreOp};
use gearshift_proto::{decode_frame, Frame, FrameError, Request, Response, SubmitInPlace};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};

use crate::clock::Clock;
use crate::store_task::{Commit, StoreTask};

/// An output buffer grown past this is released once it is written.
const KEEP_OUT_BUF: usize = 64 * 1024;

/// The engine shared by every task of one server.
pub type Shared = Arc<Mutex<Engine>>;

/// Takes the engine's lock; a task that panicked while holding it left the
/// state as consistent as any single request leaves it, so go on.
pub fn lock(shared: &Shared) -> MutexGuard<'_, Engine> {
    shared
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One connection as the engine sees it: its socket and unwritten output.
struct Peer {
    stream: Arc<TcpStream>,
    out: BytesMut,
    /// Listed in `Engine::dirty`.
    listed: bool,
    /// A write would block: the connection's task writes the rest.
    blocked: bool,
    /// Close once `out` is written.
    closing: bool,
    /// Wakes the connection's task.
    ctl: Arc<Notify>,
}

/// The output buffer of an open connection that is not closing, listed in
/// `dirty` to be written. (A function of the two fields, so the core can be
/// borrowed beside it.)
fn output<'a>(
    peers: &'a mut IdMap<ConnId, Peer>,
    dirty: &mut Vec<ConnId>,
    id: ConnId,
) -> Option<&'a mut BytesMut> {
    let p = peers.get_mut(&id)?;
    if p.closing {
        return None;
    }
    if !p.listed {
        p.listed = true;
        dirty.push(id);
    }
    Some(&mut p.out)
}

/// What a connection task should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerStatus {
    /// Keep reading; `blocked` means output waits for writability.
    Open {
        /// Output waits for the socket to become writable.
        blocked: bool,
    },
    /// The engine is done with the connection: the task ends.
    Gone,
}

/// Wake-ups the engine sends to the server's other tasks.
pub struct Signals {
    /// The timer task: an earlier deadline was armed.
    pub timer: Arc<Notify>,
    /// The server: a shutdown has finished draining.
    pub done: Arc<Notify>,
    /// The flusher task: connections have output to write.
    pub flush: Arc<Notify>,
    /// The acceptors: stop taking connections.
    pub stop_accepting: watch::Sender<bool>,
}

/// The core, the clock, and every connection's socket and output.
pub struct Engine {
    core: Core,
    clock: Clock,
    peers: IdMap<ConnId, Peer>,
    dirty: Vec<ConnId>,
    effects: Vec<Effect>,
    /// Some(graceful) once a shutdown began.
    draining: Option<bool>,
    finished: bool,
    store: Option<StoreTask>,
    store_batch: Vec<StoreOp>,
    /// The deadline the timer task sleeps towards.
    armed: Option<Millis>,
    /// The flusher task was woken and has not run yet.
    flush_scheduled: bool,
    signals: Signals,
}

impl Engine {
    /// An engine around `core`, with no store until [`Engine::set_store`].
    pub fn new(core: Core, signals: Signals) -> Self {
        Engine {
            core,
            clock: Clock::new(),
            peers: IdMap::default(),
            dirty: Vec::new(),
            effects: Vec::new(),
            draining: None,
            finished: false,
            store: None,
            store_batch: Vec::new(),
            armed: None,
            flush_scheduled: false,
            signals,
        }
    }

    /// Registers a new connection; false when the server is stopping.
    pub fn connect(&mut self, id: ConnId, info: ConnInfo, stream: Arc<TcpStream>) -> bool {
        if self.draining.is_some() || self.finished {
            return false;
        }
        self.core.connect(id, info);
        self.peers.insert(
            id,
            Peer {
                stream,
                out: BytesMut::new(),
                listed: false,
                blocked: false,
                closing: false,
                ctl: Arc::new(Notify::new()),
            },
        );
        true
    }

    /// The notifier that wakes connection `id`'s task.
    pub fn ctl(&self, id: ConnId) -> Option<Arc<Notify>> {
        self.peers.get(&id).map(|p| p.ctl.clone())
    }

    /// What connection `id`'s task should do.
    pub fn status(&self, id: ConnId) -> PeerStatus {
        match self.peers.get(&id) {
            Some(p) => PeerStatus::Open { blocked: p.blocked },
            None => PeerStatus::Gone,
        }
    }

    /// Runs every whole frame in `buf` (one read's worth) through the core,
    /// in order, each as soon as it is decoded, so a request is built once
    /// and handed on without being queued. Returns what to send before
    /// closing when the framing broke (`Some(None)`: close silently); the
    /// caller then calls [`Engine::on_fatal`].
    pub fn on_read(
        &mut self,
        id: ConnId,
        buf: &mut BytesMut,
        max_packet: usize,
        peer: SocketAddr,
    ) -> Option<Option<Response>> {
        let now = self.clock.now();
        let mut fatal = None;
        loop {
            if self.peers.get(&id).is_none_or(|p| p.closing) {
                // Closed (or closing) already: nothing it sent may run,
                // and nothing it sends later is kept.
                buf.clear();
                break;
            }
            let input = match decode_frame(buf, max_packet) {
                // The commonest packet, a plain submission, is read in
                // place instead of being parsed into a request first.
                Ok(Some(Frame::Packet(p))) => match SubmitInPlace::cut(p) {
                    Ok(s) if self.draining.is_none() => {
                        self.core.handle_submit(id, s, now);
                        self.after_input(id, now);
                        continue;
                    }
                    Ok(s) => Input::Request(Request::Submit(s.into_submit())),
                    Err(p) => Input::from(Frame::Packet(p)),
                },
                Ok(Some(frame)) => Input::from(frame),
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(%peer, error = %e, "closing connection: unusable input");
                    fatal = Some(match e {
                        FrameError::TooLarge { .. } => {
                            Some(Response::error("ARGUMENT_TOO_LARGE", e.to_string()))
                        }
                        _ => None,
                    });
                    break;
                }
            };
            if let Input::Invalid(e) = &input {
                tracing::debug!(%peer, error = %e, "refused packet");
            }
            self.run_input(id, input, now);
        }
        self.process(false, Some(id));
        fatal
    }

    /// Runs one request of connection `id` through the core and routes
    /// what it produced.
    fn run_input(&mut self, id: ConnId, input: Input, now: Millis) {
        if self.draining.is_some() && self.refused_while_draining(id, &input) {
            return;
        }
        self.core.handle(id, input, now);
        self.after_input(id, now);
    }

    /// Routes what one request produced; a connection the core closed
    /// runs nothing more.
    fn after_input(&mut self, id: ConnId, now: Millis) {
        self.core.drain_effects_into(&mut self.effects);
        // Routed request by request, so the effect buffers are only
        // ever swapped, never copied.
        if self.route_effects(Some(id)) {
            // The core closed the connection (an admin line with too
            // many words): nothing sent after that may run.
            self.core.disconnect(id, now);
            self.core.drain_effects_into(&mut self.effects);
        }
    }

    /// The connection broke its framing: send `reply` (if any), then close.
    pub fn on_fatal(&mut self, id: ConnId, reply: Option<Response>) {
        let now = self.clock.now();
        self.core.drain_effects_into(&mut self.effects);
        if let Some(r) = reply {
            self.effects.push(Effect::Send(id, r));
        }
        self.effects.push(Effect::Close(id));
        self.core.disconnect(id, now);
        self.settle();
    }

    /// The peer closed (or the socket failed): the core forgets the
    /// connection; its socket closes once owed output is written.
    pub fn on_disconnect(&mut self, id: ConnId) {
        let now = self.clock.now();
        self.core.disconnect(id, now);
        // Output already owed (an admin reply to a half-closed socket) is
        // still written; the peer goes once it is.
        if let Some(p) = self.peers.get_mut(&id) {
            p.closing = true;
            if !p.listed {
                p.listed = true;
                self.dirty.push(id);
            }
        }
        self.settle();
    }

    /// Drops connection `id` and whatever output it still owed.
    pub fn forget(&mut self, id: ConnId) {
        self.peers.remove(&id);
    }

    /// The connection's socket became writable: write what waits.
    pub fn on_writable(&mut self, id: ConnId) {
        if let Some(p) = self.peers.get_mut(&id) {
            p.blocked = false;
        }
        self.write_peer(id);
        self.process(true, None);
    }

    /// Due timers fire.
    pub fn on_timer(&mut self) -> Option<std::time::Instant> {
        self.core.on_timeout(self.clock.now());
        self.armed = None;
        self.settle();
        self.arm()
    }

    /// The deadline the timer task should sleep towards (and remember it).
    pub fn arm(&mut self) -> Option<std::time::Instant> {
        self.armed = self.core.next_deadline();
        self.armed.map(|t| self.clock.instant_at(t))
    }

    /// Gives the core's store operations to `store`.
    pub fn set_store(&mut self, store: StoreTask) {
        self.store = Some(store);
    }

    /// The store thread finished a group commit (called on that thread or
    /// by the commit task): the answers (JOB_CREATED) are written at once,
    /// since the submitters wait on them and nothing else batches with them.
    pub fn on_commit(&mut self, commit: Commit) {
        match commit {
            Commit::Stored(ids) => self.core.persisted(&ids, self.clock.now()),
            Commit::Failed(ids, why) => self.core.persist_failed(&ids, &why),
        }
        self.process(true, None);
    }

    /// A signal asked for a stop (`graceful`: running jobs finish first).
    pub fn begin_shutdown(&mut self, graceful: bool) {
        if self.draining == Some(false) {
            return;
        }
        tracing::info!(
            graceful,
            running = self.core.running_jobs(),
            "shutdown requested"
        );
        self.draining = Some(graceful && self.draining.is_none());
        let _ = self.signals.stop_accepting.send(true);
        self.settle();
    }

    /// Ends the server: every connection is flushed and closed, and the
    /// store (if any) is handed back to be finished off the runtime.
    pub fn finish(&mut self) -> Option<StoreTask> {
        self.finished = true;
        let left = self.core.volatile_job_count();
        if left > 0 {
            tracing::warn!(
                jobs = left,
                "shutting down with jobs held only in memory; they are lost"
            );
        }
        let ids: Vec<ConnId> = self.peers.keys().copied().collect();
        for id in ids {
            self.effects.push(Effect::Close(id));
        }
        self.process(true, None);
        for (_, p) in self.peers.drain() {
            let _ = socket2::SockRef::from(&*p.stream).shutdown(Shutdown::Both);
            p.ctl.notify_one();
        }
        tracing::info!(stored = self.core.job_count() - left, "engine stopped");
        let mut store = self.store.take();
        if let Some(store) = store.as_mut() {
            let batch = std::mem::take(&mut self.store_batch);
            if !batch.is_empty() {
                let _ = store.submit(batch);
            }
        }
        store
    }

    /// While draining no job may start, or the drain could last as long as
    /// the queue: GRAB gets NO_JOB, PRE_SLEEP is ignored (the core would
    /// NOOP the worker at once for a queued job it cannot have), and new
    /// submissions are refused.
    fn refused_while_draining(&mut self, id: ConnId, input: &Input) -> bool {
        match input {
            Input::Request(Request::Grab(_)) => {
                self.core.reply(id, Response::NoJob);
                true
            }
            Input::Request(Request::PreSleep) => true,
            Input::Request(Request::Submit(_)) => {
                // Jobs live in memory: one accepted now would be lost at exit.
                let refusal = Response::error("QUEUE_ERROR", "Server is shutting down");
                self.core.reply(id, refusal);
                true
            }
            _ => false,
        }
    }

    /// Routes every pending effect and runs inline store commits; the
    /// writes are left to the flusher task, which runs once the other
    /// connections that are ready now have been read, so a connection that
    /// gets output from several of them gets it in one write.
    fn settle(&mut self) {
        self.process(false, None);
    }

    /// Writes every connection that has output (the flusher task's turn).
    pub fn flush(&mut self) {
        self.flush_scheduled = false;
        self.process(true, None);
    }

    /// Routes effects, runs inline commits, writes (when `write`) or
    /// schedules the flusher, re-arms the timer and checks whether a
    /// shutdown has drained.
    fn process(&mut self, write: bool, own: Option<ConnId>) {
        loop {
            self.core.drain_effects_into(&mut self.effects);
            self.route_effects(None);
            // Inline stores answer at once; their answers (JOB_CREATED,
            // wake-ups) may produce more output, hence the loop.
            while !self.store_batch.is_empty() {
                let batch = std::mem::take(&mut self.store_batch);
                let Some(store) = &mut self.store else {
                    self.store_batch.clear();
                    break;
                };
                match store.submit(batch) {
                    None => {}
                    Some(Commit::Stored(ids)) => self.core.persisted(&ids, self.clock.now()),
                    Some(Commit::Failed(ids, why)) => self.core.persist_failed(&ids, &why),
                }
                self.core.drain_effects_into(&mut self.effects);
                self.route_effects(None);
            }
            if self.dirty.is_empty() {
                break;
            }
            if !write {
                if let Some(own) = own {
                    // The reading connection's own replies leave at once
                    // (its next request may wait on them); only output for
                    // others waits for the flusher.
                    self.write_peer(own);
                    if self.dirty.len() == 1 && self.dirty[0] == own {
                        self.dirty.clear();
                        if let Some(p) = self.peers.get_mut(&own) {
                            p.listed = false;
                        }
                        continue;
                    }
                }
                if !self.flush_scheduled {
                    self.flush_scheduled = true;
                    self.signals.flush.notify_one();
                }
                break;
            }
            // A connection closed by a failed write is forgotten by the
            // core, which may requeue its jobs: the loop routes that too.
            let mut dirty = std::mem::take(&mut self.dirty);
            for id in dirty.drain(..) {
                if let Some(p) = self.peers.get_mut(&id) {
                    p.listed = false;
                }
                self.write_peer(id);
            }
            self.dirty = dirty;
        }
        if let Some(d) = self.core.next_deadline() {
            if self.armed.is_none_or(|a| d < a) {
                self.armed = Some(d);
                self.signals.timer.notify_one();
            }
        }
        if let Some(graceful) = self.draining {
            // A graceful stop also waits for the store's answer on
            // submissions it holds, so no stored job goes unacknowledged.
            if !graceful || (self.core.running_jobs() == 0 && self.core.awaiting_store() == 0) {
                self.signals.done.notify_one();
            }
        }
    }

    /// Carries out the pending effects; true when one closed `watch`.
    fn route_effects(&mut self, watch: Option<ConnId>) -> bool {
        let mut closed = false;
        let mut effects = std::mem::take(&mut self.effects);
        for effect in effects.drain(..) {
            match effect {
                Effect::Send(id, r) => {
                    if let Some(out) = output(&mut self.peers, &mut self.dirty, id) {
                        r.encode(out);
                    }
                }
                Effect::Created(id, job) => {
                    if let Some(out) = output(&mut self.peers, &mut self.dirty, id) {
                        self.core.encode_job_created(job, out);
                    }
                }
                Effect::Text(id, t) => {
                    if let Some(out) = output(&mut self.peers, &mut self.dirty, id) {
                        out.extend_from_slice(&t);
                    }
                }
                Effect::Close(id) => {
                    closed |= watch == Some(id);
                    if output(&mut self.peers, &mut self.dirty, id).is_some() {
                        if let Some(p) = self.peers.get_mut(&id) {
                            p.closing = true;
                        }
                    }
                }
                Effect::Store(op) => self.store_batch.push(op),
                Effect::Shutdown { graceful } => {
                    // Applied after this round's output is written.
                    self.draining = Some(graceful && self.draining != Some(false));
                    let _ = self.signals.stop_accepting.send(true);
                    tracing::info!(graceful, "shutdown requested by admin command");
                }
            }
        }
        // Nothing routed above produces effects: the buffer is kept.
        self.effects = effects;
        closed
    }

    /// Writes as much of `id`'s output as the socket takes now; closes it
    /// when it was asked to close and everything is written.
    fn write_peer(&mut self, id: ConnId) {
        let Some(p) = self.peers.get_mut(&id) else {
            return;
        };
        if p.blocked {
            return;
        }
        while !p.out.is_empty() {
            match p.stream.try_write(&p.out) {
                Ok(n) => p.out.advance(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    p.blocked = true;
                    p.ctl.notify_one();
                    return;
                }
                Err(e) => {
                    tracing::debug!(conn = id.0, error = %e, "write failed");
                    p.out.clear();
                    p.closing = true;
                }
            }
        }
        if p.out.capacity() > KEEP_OUT_BUF {
            p.out = BytesMut::new();
        }
        if p.closing {
            let _ = socket2::SockRef::from(&*p.stream).shutdown(Shutdown::Write);
            p.ctl.notify_one();
            self.peers.remove(&id);
            // The core forgot it when it asked to close; a write failure
            // is forgotten here.
            self.core.disconnect(id, self.clock.now());
        }
    }
}
