//! The hub: the routing core, the clock and the store, with no sockets.
//!
//! Connections' requests come in as [`Item`]s, already framed and parsed by
//! the I/O thread that owns the connection; what the core answers leaves as
//! plain [`Out`] data through an [`OutSink`]: one outbox per I/O thread when
//! the I/O threads share it ([`crate::core_lock`]), or straight into the
//! connections' buffers on the only I/O thread, where it then runs. Nothing
//! here calls back into the core to carry out an effect.

use std::sync::Arc;
use std::time::Instant;

use crate::config::Reload;
use bytes::Bytes;
use gearshift_core::listing::Listing;
use gearshift_core::{ConnId, ConnInfo, Core, Effect, Input, JobId, Millis, StoreOp};
use gearshift_proto::{Request, Response};
use tokio::sync::{oneshot, watch, Notify};

use crate::clock::Clock;
use crate::cluster::trust::LeaseTrust;
use crate::control::Call;
use crate::events::EventBus;
use crate::store_task::{Commit, StoreCall, StoreTask};
use gearshift_core::events::LiveEvent;

/// Effects that submissions may leave unrouted before a route runs anyway
/// (bounds what waits in the core's effect list).
const ROUTE_AFTER: usize = 128;

/// One thing a connection did, as its I/O thread hands it to the hub.
#[derive(Debug)]
pub enum Item {
    /// The connection opened.
    Open(ConnInfo),
    /// Any other request, a refused packet or an admin line.
    Input(Input),
    /// The peer closed, or reading or writing failed.
    Closed,
    /// The framing broke: send this (if anything), then close.
    Fatal(Option<Response>),
}

/// What the rest of the server tells the hub, wherever it runs
/// ([`crate::control::HubLink`]).
pub enum ToHub {
    /// The store's group commit finished.
    Commit(Commit),
    /// Begin a shutdown (`true`: running jobs finish first).
    Shutdown(bool),
    /// Finish the hub, the connections and the store, then say so.
    Finish(oneshot::Sender<()>),
    /// A config reload.
    Reload(Arc<Reload>),
    /// A control call (the HTTP API).
    Call(Call),
    /// A call on the store, after the operations the core made so far.
    Store(StoreCall),
}

/// A finished hub's last duties: the store, to be flushed and ended, and
/// whoever waits to hear that the server is done.
pub struct Finished {
    store: Option<StoreTask>,
    done: oneshot::Sender<()>,
}

impl Finished {
    /// Ends the store thread (after it flushed what is queued) and says so.
    pub fn complete(self) {
        if let Some(store) = self.store {
            store.finish();
        }
        let _ = self.done.send(());
    }
}

/// One thing an I/O thread must do for a connection it owns, in order.
#[derive(Debug)]
pub enum Out {
    /// Encode and send a packet.
    Send(ConnId, Response),
    /// Send JOB_CREATED for this server's job `id` (encoded by the I/O
    /// thread from the handle prefix).
    Created(ConnId, JobId),
    /// Send admin text.
    Text(ConnId, Bytes),
    /// Render a per-job admin listing and send it.
    Listing(ConnId, Box<Listing>),
    /// Write what is owed, then close. The core has forgotten the
    /// connection: nothing more comes for it.
    Close(ConnId),
}

impl Out {
    /// The connection it is for.
    pub fn conn(&self) -> ConnId {
        let (Out::Send(c, _)
        | Out::Created(c, _)
        | Out::Text(c, _)
        | Out::Listing(c, _)
        | Out::Close(c)) = self;
        *c
    }
}

/// Where the hub puts what it produced: straight into the connections'
/// buffers ([`crate::peers::Peers`], with the hub on the only I/O thread),
/// or into one outbox per I/O thread ([`crate::core_lock`], shared by several).
pub trait OutSink {
    /// Takes one output, in order.
    fn push(&mut self, out: Out);
}

/// The I/O thread (of `threads`) that owns connection `id`: ids are handed
/// out so that `id % threads` names it, so no table is needed.
pub fn thread_of(id: ConnId, threads: usize) -> usize {
    (id.0 % threads.max(1) as u64) as usize
}

/// Wake-ups the hub sends to the rest of the server.
pub struct Signals {
    /// The server: a shutdown has finished draining.
    pub done: Arc<Notify>,
    /// The acceptors: stop taking connections.
    pub stop_accepting: watch::Sender<bool>,
    /// The timer (on a single I/O thread): an earlier deadline was armed.
    pub timer: Arc<Notify>,
}

/// The core and everything it needs besides sockets.
pub struct Hub {
    core: Core,
    clock: Clock,
    effects: Vec<Effect>,
    /// Some(graceful) once a shutdown began.
    draining: Option<bool>,
    finished: bool,
    store: Option<StoreTask>,
    store_batch: Vec<StoreOp>,
    /// The deadline the timer was last told of.
    armed: Option<Millis>,
    /// The time of the current round's inputs, read once per round.
    now: Option<Millis>,
    signals: Signals,
    /// Where live events go, while someone subscribes.
    bus: Option<Arc<EventBus>>,
    /// The kinds of event the core produces (what subscribers asked for).
    events_on: u16,
    /// This round's events, published as one batch by [`Hub::settle`].
    event_batch: Vec<LiveEvent>,
    /// A cluster leader's lease: once it is no longer trusted, nothing
    /// the core does leaves the hub.
    /// A partitioned node's test of the functions it serves.
    owns: Option<Owns>,
    lease: Option<Arc<LeaseTrust>>,
    fenced: bool,
}

impl Hub {
    /// A hub around `core`, with no store until [`Hub::set_store`].
    pub fn new(core: Core, signals: Signals) -> Self {
        Hub {
            core,
            clock: Clock::new(),
            effects: Vec::new(),
            draining: None,
            finished: false,
            store: None,
            store_batch: Vec::new(),
            armed: None,
            now: None,
            signals,
            bus: None,
            events_on: 0,
            event_batch: Vec::new(),
            lease: None,
            owns: None,
            fenced: false,
        }
    }

    /// Acts only while `lease` is trusted (a cluster's leader).
    pub fn set_lease(&mut self, lease: Arc<LeaseTrust>) {
        self.lease = Some(lease);
    }

    /// Takes submissions only for the functions `owns` says (a partitioned
    /// node's job server, which must not write another node's partition).
    pub fn set_owned(&mut self, owns: Owns) {
        self.owns = Some(owns);
    }

    /// Publishes live events on `bus` while it has subscribers.
    pub fn set_events(&mut self, bus: Arc<EventBus>) {
        self.bus = Some(bus);
    }

    /// Carries out a message from the rest of the server, wherever the hub
    /// runs; after [`ToHub::Finish`], the hub's last duties are returned
    /// (to be done once its outputs are written). Call [`Hub::settle`] after it.
    pub fn message(&mut self, msg: ToHub, sink: &mut impl OutSink) -> Option<Finished> {
        match msg {
            ToHub::Commit(c) => self.commit(c, sink),
            ToHub::Shutdown(graceful) => self.begin_shutdown(graceful),
            ToHub::Reload(r) => self.reload(&r, sink),
            ToHub::Call(c) => self.call(c, sink),
            ToHub::Store(c) => self.store_call(c, sink),
            ToHub::Finish(done) => {
                let store = self.finish(sink);
                return Some(Finished { store, done });
            }
        }
        None
    }

    /// Runs a control call (the HTTP API) on the core and routes what it
    /// produced; a fenced hub runs none. Call [`Hub::settle`] after it.
    fn call(&mut self, call: Call, sink: &mut impl OutSink) {
        if self.lease_lapsed() {
            // Dropped unrun: its caller hears the server stopped.
            return;
        }
        self.sync_events();
        self.core.set_now(self.clock.now());
        call(&mut self.core);
        self.route(sink);
    }

    /// Queues a call on the store behind every operation the core made so
    /// far (a store-less hub drops it: its caller hears the server stopped).
    fn store_call(&mut self, call: StoreCall, sink: &mut impl OutSink) {
        if self.lease_lapsed() {
            return;
        }
        self.settle(sink);
        if let Some(store) = &mut self.store {
            store.call(call);
        }
    }

    /// Gives the core's store operations to `store`.
    pub fn set_store(&mut self, store: StoreTask) {
        self.store = Some(store);
    }

    /// What wakes the timer when an earlier deadline is armed.
    pub fn timer_signal(&self) -> Arc<Notify> {
        self.signals.timer.clone()
    }

    /// The handle prefix the I/O threads encode JOB_CREATED with.
    pub fn handle_prefix(&self) -> String {
        self.core.config().handle_prefix.clone()
    }

    /// Runs one thing connection `id` did through the core and routes what
    /// it produced. Call [`Hub::settle`] after a batch of them.
    pub fn input(&mut self, id: ConnId, item: Item, sink: &mut impl OutSink) {
        let now = self.round_now();
        match item {
            Item::Open(info) => {
                // A connection the acceptor took before a graceful drain
                // began may reach the hub after it: it is served under the
                // drain's rules (no job starts, submissions are refused),
                // like every other connection, not cut off.
                if self.draining == Some(false) || self.finished {
                    sink.push(Out::Close(id));
                    return;
                }
                self.core.set_now(now);
                self.core.connect(id, info);
            }
            Item::Input(input) => return self.request(id, input, sink),
            Item::Closed => {
                if self.core.is_connected(id) {
                    // What its submissions were answered goes out first.
                    self.route(sink);
                    self.disconnect(id, now);
                    sink.push(Out::Close(id));
                }
            }
            Item::Fatal(reply) => {
                if self.core.is_connected(id) {
                    self.route(sink);
                    if let Some(r) = reply {
                        sink.push(Out::Send(id, r));
                    }
                    self.disconnect(id, now);
                    sink.push(Out::Close(id));
                }
            }
        }
        self.route(sink);
    }

    /// A request, refused packet or admin line: [`Item::Input`] without the
    /// wrapping.
    ///
    /// A submission never makes the core close a connection, so what it
    /// produced may wait for the next route (at the latest the round's
    /// [`Hub::settle`]): a pipelined stream of them is routed in one pass.
    #[inline(always)]
    pub fn request(&mut self, id: ConnId, input: Input, sink: &mut impl OutSink) {
        let now = self.round_now();
        let submit = matches!(input, Input::Request(Request::Submit(_)));
        self.run_input(id, input, now);
        if !submit || self.core.pending_effects() >= ROUTE_AFTER {
            self.route(sink);
        }
    }

    /// The time of this round's inputs, read once per round.
    fn round_now(&mut self) -> Millis {
        match self.now {
            Some(now) => now,
            None => {
                self.sync_events();
                let now = self.clock.now();
                self.now = Some(now);
                now
            }
        }
    }

    /// Inlined into the reading loop, so a request goes from its frame to
    /// the core's rule without being copied into an argument on the way.
    #[inline(always)]
    fn run_input(&mut self, id: ConnId, input: Input, now: Millis) {
        if self.draining.is_some() || self.owns.is_some() || matches!(input, Input::Invalid(_)) {
            return self.run_unusual_input(id, input, now);
        }
        self.core.handle(id, input, now);
    }

    /// [`Hub::run_input`] while draining, or of a refused packet.
    #[inline(never)]
    fn run_unusual_input(&mut self, id: ConnId, input: Input, now: Millis) {
        if self.draining.is_some() && self.refused_while_draining(id, &input) {
            return;
        }
        if let Some(owns) = &self.owns {
            match owned::refusal(&input, &**owns) {
                Some(owned::Refusal::Reply(r)) => return self.core.reply(id, r),
                Some(owned::Refusal::Admin(line)) => return self.core.handle(id, line, now),
                None => {}
            }
        }
        let given_up = self.given_up(id, Some(&input));
        if let Input::Invalid(e) = &input {
            tracing::debug!(conn = id.0, error = %e, "refused packet");
        }
        self.core.handle(id, input, now);
        self.forget_empty(given_up);
    }

    /// A reloaded config file: new policies and schedules (of the
    /// functions served here, on a partitioned node).
    fn reload(&mut self, reload: &Reload, sink: &mut impl OutSink) {
        self.core.set_now(self.clock.now());
        self.core.set_policies(reload.policies.clone());
        let mut schedules = reload.schedules.clone();
        if let Some(owns) = &self.owns {
            schedules.retain(|s| owns(&s.function));
        }
        if let Err(e) = self.core.set_config_schedules(schedules) {
            tracing::error!("reload: keeping the schedules in force: {e}");
        }
        self.route(sink);
    }

    /// The store finished a group commit.
    fn commit(&mut self, commit: Commit, sink: &mut impl OutSink) {
        self.sync_events();
        match commit {
            Commit::Stored(ids) => self.core.persisted(&ids, self.clock.now()),
            Commit::Failed(ids, why) => self.core.persist_failed(&ids, &why),
        }
        self.route(sink);
    }

    /// Fires the core's due timers.
    pub fn timer(&mut self, sink: &mut impl OutSink) {
        self.sync_events();
        self.core.on_timeout(self.clock.now());
        self.armed = None;
        self.route(sink);
    }

    /// When [`Hub::timer`] is next due, if ever (and remember it as armed).
    pub fn deadline(&mut self) -> Option<Instant> {
        self.armed = self.core.next_deadline();
        self.armed.map(|t| self.clock.instant_at(t))
    }

    /// A signal asked for a stop (`graceful`: running jobs finish first).
    fn begin_shutdown(&mut self, graceful: bool) {
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
    }

    /// Ends the server: every connection is closed (after what it is owed),
    /// and the store (if any) is handed back to be finished off.
    fn finish(&mut self, sink: &mut impl OutSink) -> Option<StoreTask> {
        self.route(sink);
        self.finished = true;
        let left = self.core.volatile_job_count();
        // Counted now: the disconnects below remove foreground jobs.
        let stored = self.core.job_count() - left;
        if left > 0 {
            tracing::warn!(
                jobs = left,
                "shutting down with jobs held only in memory; they are lost"
            );
        }
        let now = self.clock.now();
        for id in self.core.connection_ids() {
            self.disconnect(id, now);
            sink.push(Out::Close(id));
        }
        self.settle(sink);
        tracing::info!(stored, "engine stopped");
        let mut store = self.store.take();
        if let Some(store) = store.as_mut() {
            let batch = std::mem::take(&mut self.store_batch);
            if !batch.is_empty() {
                let _ = store.submit(batch);
            }
        }
        store
    }

    /// Ends a round of inputs: runs store batches (inline commits answer at
    /// once, and their answers are routed too), tells the timer of an
    /// earlier deadline, and checks whether a shutdown has drained.
    pub fn settle(&mut self, sink: &mut impl OutSink) {
        self.now = None;
        self.route(sink);
        self.events_round();
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
            self.route(sink);
        }
        if let Some(d) = self.core.next_deadline() {
            if self.armed.is_none_or(|a| d < a) {
                self.armed = Some(d);
                self.signals.timer.notify_one();
            }
        }
        self.events_round();
        if let Some(graceful) = self.draining {
            // A graceful stop also waits for the store's answer on
            // submissions it holds, so no stored job goes unacknowledged;
            // a fenced hub sends nothing more, so it waits for nothing.
            let settled = self.core.running_jobs() == 0 && self.core.awaiting_store() == 0;
            if !graceful || self.fenced || settled {
                self.signals.done.notify_one();
            }
        }
    }

    /// Publishes the round's events as one batch.
    fn events_round(&mut self) {
        let Some(bus) = &self.bus else { return };
        if !self.event_batch.is_empty() {
            bus.publish(std::mem::take(&mut self.event_batch));
        }
    }

    /// Tells the core which kinds of event to produce as subscribers come
    /// and go: one relaxed load at the start of a round.
    fn sync_events(&mut self) {
        let Some(bus) = &self.bus else { return };
        let wanted = bus.wanted();
        if wanted != self.events_on {
            self.events_on = wanted;
            self.core.set_event_kinds(wanted);
        }
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
                let refusal = Response::error("QUEUE_ERROR", gearshift_core::split::SHUTTING_DOWN);
                self.core.reply(id, refusal);
                true
            }
            _ => false,
        }
    }

    /// Whether the hub is fenced: its lease stopped being trusted at some
    /// point, and from then on nothing the core does leaves it.
    fn lease_lapsed(&mut self) -> bool {
        if let Some(lease) = &self.lease {
            if !self.fenced && !lease.trusted() {
                tracing::error!(
                    "the cluster lease is no longer trusted: this node stops answering"
                );
                self.fenced = true;
            }
        }
        self.fenced
    }

    /// Carries out the core's pending effects, until it has none: a close
    /// makes the core forget the connection, which may produce more.
    fn route(&mut self, sink: &mut impl OutSink) {
        if self.lease_lapsed() {
            // Another node may own these jobs now: nothing goes out.
            self.core.drain_effects_into(&mut self.effects);
            self.effects.clear();
            return;
        }
        loop {
            self.core.drain_effects_into(&mut self.effects);
            // Only a close (the core forgets the connection) makes more.
            let mut again = false;
            let mut effects = std::mem::take(&mut self.effects);
            for effect in effects.drain(..) {
                match effect {
                    Effect::Send(id, r) => sink.push(Out::Send(id, r)),
                    Effect::Created(id, job) => sink.push(Out::Created(id, job)),
                    Effect::Text(id, t) => sink.push(Out::Text(id, t)),
                    Effect::Listing(id, l) => sink.push(Out::Listing(id, l)),
                    Effect::Close(id) => {
                        // Nothing the connection sent after this may run.
                        self.disconnect(id, self.clock.now());
                        sink.push(Out::Close(id));
                        again = true;
                    }
                    // Settings of a function whose partition this server
                    // does not own (an HTTP call raced a move; admin lines
                    // are refused) stay in memory: the store would refuse
                    // the whole batch.
                    Effect::Store(StoreOp::Function(f))
                        if self.owns.as_ref().is_some_and(|owns| !owns(&f.name)) =>
                    {
                        tracing::info!(function = ?String::from_utf8_lossy(&f.name), "settings of a function this node does not own are not stored");
                    }
                    Effect::Store(op) => self.store_batch.push(op),
                    Effect::Event(e) => {
                        if self.events_on != 0 {
                            self.event_batch.push(*e);
                        }
                    }
                    Effect::Shutdown { graceful } => {
                        self.draining = Some(graceful && self.draining != Some(false));
                        let _ = self.signals.stop_accepting.send(true);
                        tracing::info!(graceful, "shutdown requested by admin command");
                    }
                }
            }
            // Keep the buffer's capacity for the next round.
            self.effects = effects;
            if !again {
                return;
            }
        }
    }
}

mod owned;
pub use owned::Owns;

#[cfg(test)]
mod tests;
