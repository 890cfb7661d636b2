//! The engine task: the one owner of the routing core. Connections send it
//! their decoded inputs; it runs them through the core in arrival order,
//! fires timers, and hands each connection its outgoing packets in one
//! batch per round, so many responses leave in one write.

use bytes::Bytes;
use gearshift_core::ids::IdMap;
use gearshift_core::{ConnId, ConnInfo, Core, Effect, Input, JobId, StoreOp};
use gearshift_proto::{Request, Response};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::clock::Clock;
use crate::store_task::{Commit, StoreTask};

/// Most messages handled in one round before output is flushed.
const ROUND: usize = 1024;

/// One item of a connection's outgoing stream.
#[derive(Debug)]
pub enum Out {
    /// A binary packet.
    Packet(Response),
    /// Admin text.
    Text(Bytes),
    /// Flush, then close the connection.
    Close,
}

/// What connections and the acceptor tell the engine.
#[derive(Debug)]
pub enum EngineMsg {
    /// A connection opened; `tx` reaches its writer.
    Connect {
        /// The connection.
        id: ConnId,
        /// Facts for the core.
        info: ConnInfo,
        /// Its writer's queue.
        tx: mpsc::UnboundedSender<Vec<Out>>,
    },
    /// Inputs decoded from one read.
    Inputs(ConnId, Vec<Input>),
    /// The connection broke its framing: send `reply` (if any), then close.
    Fatal(ConnId, Option<Response>),
    /// The connection closed.
    Disconnect(ConnId),
    /// The store made these new jobs durable.
    Stored(Vec<JobId>),
    /// The store failed to record these new jobs.
    StoreFailed(Vec<JobId>, String),
    /// Stop: a signal arrived (`graceful`: wait for running jobs first).
    Shutdown {
        /// Wait for running jobs to finish first.
        graceful: bool,
    },
}

/// The engine: core, clock and every connection's writer queue.
pub struct Engine {
    core: Core,
    clock: Clock,
    writers: IdMap<ConnId, mpsc::UnboundedSender<Vec<Out>>>,
    outbox: IdMap<ConnId, Vec<Out>>,
    effects: Vec<Effect>,
    draining: Option<bool>,
    stop_accepting: watch::Sender<bool>,
    store: Option<StoreTask>,
    store_batch: Vec<StoreOp>,
}

impl Engine {
    /// An engine around `core`; `stop_accepting` tells the acceptor to stop;
    /// `store` receives the core's store operations.
    pub fn new(core: Core, stop_accepting: watch::Sender<bool>, store: Option<StoreTask>) -> Self {
        Engine {
            core,
            clock: Clock::new(),
            writers: IdMap::default(),
            outbox: IdMap::default(),
            effects: Vec::new(),
            draining: None,
            stop_accepting,
            store,
            store_batch: Vec::new(),
        }
    }

    /// Runs until every sender is gone or a shutdown completes.
    pub async fn run(mut self, mut rx: mpsc::UnboundedReceiver<EngineMsg>) {
        loop {
            let deadline = self.core.next_deadline().map(|t| self.clock.instant_at(t));
            tokio::select! {
                msg = rx.recv() => {
                    let Some(msg) = msg else { break };
                    self.apply(msg);
                    for _ in 1..ROUND {
                        match rx.try_recv() {
                            Ok(msg) => self.apply(msg),
                            Err(_) => break,
                        }
                    }
                }
                _ = sleep_until(deadline) => {}
            }
            self.core.on_timeout(self.clock.now());
            self.dispatch();

            if let Some(graceful) = self.draining {
                // A graceful stop also waits for the store's answer on
                // submissions it holds, so no stored job goes unacknowledged.
                if !graceful || (self.core.running_jobs() == 0 && self.core.awaiting_store() == 0) {
                    break;
                }
            }
        }
        let left = self.core.volatile_job_count();
        if left > 0 {
            tracing::warn!(
                jobs = left,
                "shutting down with jobs held only in memory; they are lost"
            );
        }
        for tx in self.writers.values() {
            let _ = tx.send(vec![Out::Close]);
        }
        if let Some(mut store) = self.store.take() {
            let batch = std::mem::take(&mut self.store_batch);
            if !batch.is_empty() {
                let _ = store.submit(batch);
            }
            // The store thread flushes what is queued, then ends.
            let _ = tokio::task::spawn_blocking(move || store.finish()).await;
        }
        tracing::info!(stored = self.core.job_count() - left, "engine stopped");
    }

    fn apply(&mut self, msg: EngineMsg) {
        let now = self.clock.now();
        match msg {
            EngineMsg::Connect { id, info, tx } => {
                self.core.connect(id, info);
                self.writers.insert(id, tx);
            }
            EngineMsg::Inputs(id, inputs) => {
                for input in inputs {
                    if self.draining.is_some() && self.refused_while_draining(id, &input) {
                        continue;
                    }
                    let before = self.effects.len();
                    self.core.handle(id, input, now);
                    self.core.drain_effects_into(&mut self.effects);
                    if self.effects[before..].contains(&Effect::Close(id)) {
                        // The core closed the connection (an admin line with
                        // too many words): nothing sent after that may run.
                        self.core.disconnect(id, now);
                        break;
                    }
                }
            }
            EngineMsg::Fatal(id, reply) => {
                self.core.drain_effects_into(&mut self.effects);
                if let Some(r) = reply {
                    self.effects.push(Effect::Send(id, r));
                }
                self.effects.push(Effect::Close(id));
                self.core.disconnect(id, now);
            }
            EngineMsg::Disconnect(id) => {
                self.core.disconnect(id, now);
                self.core.drain_effects_into(&mut self.effects);
                self.route_effects();
                self.flush_one(id);
                self.writers.remove(&id);
            }
            EngineMsg::Stored(ids) => self.core.persisted(&ids, now),
            EngineMsg::StoreFailed(ids, reason) => self.core.persist_failed(&ids, &reason),
            EngineMsg::Shutdown { graceful } => self.begin_shutdown(graceful),
        }
        self.core.drain_effects_into(&mut self.effects);
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
        let _ = self.stop_accepting.send(true);
    }

    fn route_effects(&mut self) {
        for effect in self.effects.drain(..) {
            let (id, out) = match effect {
                Effect::Send(id, r) => (id, Out::Packet(r)),
                Effect::Text(id, t) => (id, Out::Text(t)),
                Effect::Close(id) => (id, Out::Close),
                Effect::Store(op) => {
                    self.store_batch.push(op);
                    continue;
                }
                Effect::Shutdown { graceful } => {
                    // Applied after this round's output is queued.
                    self.draining = Some(graceful && self.draining != Some(false));
                    let _ = self.stop_accepting.send(true);
                    tracing::info!(graceful, "shutdown requested by admin command");
                    continue;
                }
            };
            self.outbox.entry(id).or_default().push(out);
        }
    }

    fn flush_one(&mut self, id: ConnId) {
        if let Some(batch) = self.outbox.remove(&id) {
            if let Some(tx) = self.writers.get(&id) {
                let _ = tx.send(batch);
            }
        }
    }

    fn dispatch(&mut self) {
        self.core.drain_effects_into(&mut self.effects);
        self.route_effects();
        // Inline stores answer at once; their answers (JOB_CREATED, wake-ups)
        // may write again (e.g. a job finishing), hence the loop.
        while !self.store_batch.is_empty() {
            let batch = std::mem::take(&mut self.store_batch);
            let Some(store) = &mut self.store else {
                break;
            };
            match store.submit(batch) {
                None => {}
                Some(Commit::Stored(ids)) => self.core.persisted(&ids, self.clock.now()),
                Some(Commit::Failed(ids, why)) => self.core.persist_failed(&ids, &why),
            }
            self.core.drain_effects_into(&mut self.effects);
            self.route_effects();
        }
        for (id, batch) in self.outbox.drain() {
            let closing = batch.iter().any(|o| matches!(o, Out::Close));
            if let Some(tx) = self.writers.get(&id) {
                let _ = tx.send(batch);
            }
            if closing {
                // Nothing more goes to a closed connection; forget its writer
                // now (a reader that ended on a framing error sends no
                // Disconnect of its own).
                self.writers.remove(&id);
            }
        }
    }
}

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(Instant::from_std(t)).await,
        None => std::future::pending().await,
    }
}
