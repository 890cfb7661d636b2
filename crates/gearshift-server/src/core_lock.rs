//! The hub shared by several I/O threads. No thread is set aside for it:
//! messages for the hub go into one queue, and whoever queued one takes the
//! hub (if no one holds it) and runs every message waiting, for every I/O
//! thread, then leaves each thread its outputs as one batch (flat
//! combining). An I/O thread that finds the hub taken leaves: the holder
//! runs its batch before letting go. So the serial part is only the Gearman
//! rules, no thread sleeps waiting for batches, and an I/O thread that
//! combined picks its own answers up without a wake-up.
//!
//! The helper thread (`gearshift-core`) takes the hub for what comes from
//! outside the I/O threads (the store's commits, control calls, reloads,
//! shutdown), when a deadline of the core falls due, and when a holder ran
//! long and let go with messages waiting.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use gearshift_core::ConnId;

use crate::counters::ConnCounters;
use crate::handoff::{Flow, OutSlot};
use crate::hub::{thread_of, Hub, Item, Out, OutSink, ToHub};

/// Most messages taken in one round before outputs are handed out, so a
/// flood of batches cannot delay every answer.
const ROUND: usize = 256;

/// Rounds one holder runs in a row before it leaves the rest to the helper
/// thread (its own connections wait meanwhile).
const MAX_ROUNDS: usize = 4;

/// One outbox per I/O thread, for the hub's holder to hand out.
struct Outboxes(Vec<Vec<Out>>);

impl OutSink for Outboxes {
    fn push(&mut self, out: Out) {
        let n = self.0.len();
        let t = thread_of(out.conn(), n);
        self.0[t].push(out);
    }
}

/// What the hub is told.
pub enum ToCore {
    /// Items from I/O thread `thread`, in the order its connections did them.
    Batch {
        /// Which I/O thread.
        thread: usize,
        /// The items, each with its connection.
        items: Vec<(ConnId, Item)>,
        /// Their size on the wire (subtracted from the thread's in-flight count).
        bytes: usize,
        /// The batch's number (the thread's batches count from 1).
        seq: u64,
    },
    /// From the rest of the server (run by the helper thread).
    Hub(ToHub),
    /// A deadline of the core fell due (the helper thread's nudge).
    Tick,
    /// End at once (the server was dropped).
    Stop,
}

/// The hub is gone: the message was not queued.
#[derive(Debug, Clone, Copy)]
pub struct Gone;

/// The I/O threads as the hub reaches them.
pub struct IoLinks {
    /// Where each thread's outputs go.
    pub slots: Vec<Arc<OutSlot>>,
    /// Each thread's flow of batches.
    pub flows: Vec<Arc<Flow>>,
}

/// What only the holder touches.
struct Held {
    hub: Option<Hub>,
    rx: mpsc::Receiver<ToCore>,
    outboxes: Outboxes,
    /// Batches run this round: (thread, seq, bytes), reported once their
    /// outputs are handed out.
    ran: Vec<(usize, u64, usize)>,
    /// The I/O threads to wake after letting go (their slots got outputs
    /// while they were parked).
    wake: Vec<usize>,
}

/// The hub, its queue and the helper thread's handle.
pub struct CoreLock {
    tx: mpsc::Sender<ToCore>,
    /// Messages queued and not yet taken (can dip below zero for a moment:
    /// a message is counted after it is sent).
    queued: AtomicI64,
    /// Someone holds the hub. Set with a swap, so that a sender that finds
    /// it taken is sure the holder will see its message (see `send`).
    busy: AtomicBool,
    held: Mutex<Held>,
    links: IoLinks,
    /// Nothing more runs: the hub finished or was stopped.
    stopped: AtomicBool,
    helper: OnceLock<Thread>,
    /// The helper thread has something to take the hub for.
    poked: AtomicBool,
    /// The core's next deadline, in ms after `base` (`u64::MAX`: none).
    deadline: AtomicU64,
    base: Instant,
    /// Where the time the hub was held is counted (the serial part of the
    /// server's work, which bounds what more cores can give).
    counters: Arc<ConnCounters>,
}

impl CoreLock {
    /// The hub shared by the I/O threads behind `links`.
    pub fn new(hub: Hub, links: IoLinks, counters: Arc<ConnCounters>) -> Arc<CoreLock> {
        let (tx, rx) = mpsc::channel();
        let n = links.slots.len();
        Arc::new(CoreLock {
            tx,
            queued: AtomicI64::new(0),
            busy: AtomicBool::new(false),
            held: Mutex::new(Held {
                hub: Some(hub),
                rx,
                outboxes: Outboxes((0..n).map(|_| Vec::new()).collect()),
                ran: Vec::new(),
                wake: Vec::new(),
            }),
            links,
            stopped: AtomicBool::new(false),
            helper: OnceLock::new(),
            poked: AtomicBool::new(false),
            deadline: AtomicU64::new(u64::MAX),
            base: Instant::now(),
            counters,
        })
    }

    /// An I/O thread's message: queued, then run at once unless the hub is
    /// held (its holder runs it before letting go).
    pub fn send(&self, msg: ToCore) -> Result<(), Gone> {
        self.queue(msg)?;
        self.combine();
        Ok(())
    }

    /// A message from outside the I/O threads: queued for the helper thread.
    pub fn post(&self, msg: ToCore) -> Result<(), Gone> {
        self.queue(msg)?;
        self.poke();
        Ok(())
    }

    fn queue(&self, msg: ToCore) -> Result<(), Gone> {
        if self.stopped.load(Ordering::Acquire) {
            return Err(Gone);
        }
        self.tx.send(msg).map_err(|_| Gone)?;
        // Counted after the send and before `busy` is tried (SeqCst): a
        // holder that lets go after this sender found `busy` set reads a
        // count that includes this message.
        self.queued.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// Takes the hub while messages wait and no one else holds it.
    fn combine(&self) {
        for _ in 0..MAX_ROUNDS {
            if self.busy.swap(true, Ordering::SeqCst) {
                return;
            }
            let (wake, earlier_deadline) = self.round();
            self.busy.store(false, Ordering::SeqCst);
            // After letting go: a wake-up is a system call.
            for t in wake {
                if let Some(slot) = self.links.slots.get(t) {
                    slot.wake();
                }
            }
            if earlier_deadline {
                self.poke();
            }
            if self.queued.load(Ordering::SeqCst) <= 0 {
                return;
            }
        }
        self.poke();
    }

    /// One round with the hub held: up to [`ROUND`] messages, due timers,
    /// then every I/O thread's outputs handed out. Returns the parked I/O
    /// threads that got outputs, and whether the helper thread must learn
    /// of an earlier deadline.
    fn round(&self) -> (Vec<usize>, bool) {
        let start = Instant::now();
        let mut held = lock(&self.held);
        let held = &mut *held;
        let mut taken = 0;
        while taken < ROUND {
            let Ok(msg) = held.rx.try_recv() else { break };
            taken += 1;
            let Some(hub) = held.hub.as_mut() else {
                // Finished or stopped: what still comes is dropped (a
                // control call's sender answers `Stopped`).
                continue;
            };
            match msg {
                ToCore::Batch {
                    thread,
                    items,
                    bytes,
                    seq,
                } => {
                    for (id, item) in items {
                        hub.input(id, item, &mut held.outboxes);
                    }
                    held.ran.push((thread, seq, bytes));
                }
                ToCore::Hub(msg) => {
                    if let Some(finished) = hub.message(msg, &mut held.outboxes) {
                        held.hub = None;
                        self.stop();
                        self.hand_out(&mut held.outboxes, &mut held.wake);
                        finished.complete();
                    }
                }
                ToCore::Tick => {}
                ToCore::Stop => {
                    held.hub = None;
                    self.stop();
                }
            }
        }
        self.queued.fetch_sub(taken as i64, Ordering::SeqCst);
        let mut earlier_deadline = false;
        if let Some(hub) = held.hub.as_mut() {
            if hub.deadline().is_some_and(|at| at <= Instant::now()) {
                hub.timer(&mut held.outboxes);
            }
            hub.settle(&mut held.outboxes);
            self.hand_out(&mut held.outboxes, &mut held.wake);
            let next = hub.deadline().map_or(u64::MAX, |at| self.ms_of(at));
            let before = self.deadline.swap(next, Ordering::AcqRel);
            earlier_deadline = next < before;
        }
        for (thread, seq, bytes) in held.ran.drain(..) {
            if let Some(f) = self.links.flows.get(thread) {
                f.done(seq, bytes);
            }
        }
        let spent = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.counters
            .core_busy_nanos
            .fetch_add(spent, Ordering::Relaxed);
        self.counters.core_rounds.fetch_add(1, Ordering::Relaxed);
        (std::mem::take(&mut held.wake), earlier_deadline)
    }

    /// Gives every I/O thread what the round produced for its connections;
    /// the parked ones are noted in `wake`, to be woken once the hub is let go.
    fn hand_out(&self, outboxes: &mut Outboxes, wake: &mut Vec<usize>) {
        for (t, outs) in outboxes.0.iter_mut().enumerate() {
            if outs.is_empty() {
                continue;
            }
            // The next round's batch starts at this one's size.
            let batch = std::mem::replace(outs, Vec::with_capacity(outs.len()));
            if let Some(slot) = self.links.slots.get(t) {
                if slot.push(batch) && !wake.contains(&t) {
                    wake.push(t);
                }
            }
        }
    }

    /// `at` in whole ms after `base`, rounded up (so a deadline read as
    /// due has passed).
    fn ms_of(&self, at: Instant) -> u64 {
        let ns = at.saturating_duration_since(self.base).as_nanos();
        u64::try_from(ns.div_ceil(1_000_000)).unwrap_or(u64::MAX - 1)
    }

    /// Whole ms since `base`, rounded down.
    fn ms_now(&self) -> u64 {
        u64::try_from(self.base.elapsed().as_millis()).unwrap_or(u64::MAX - 1)
    }

    /// Nothing more runs; the helper thread is woken to end.
    fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        if let Some(t) = self.helper.get() {
            t.unpark();
        }
    }

    /// Asks the helper thread to take the hub.
    fn poke(&self) {
        self.poked.store(true, Ordering::SeqCst);
        if let Some(t) = self.helper.get() {
            t.unpark();
        }
    }

    /// The helper thread: takes the hub when poked or when a deadline falls
    /// due, until the hub is finished or stopped.
    pub fn helper(self: Arc<Self>) {
        let _ = self.helper.set(std::thread::current());
        loop {
            if self.stopped.load(Ordering::Acquire) {
                return;
            }
            let due = self.deadline.load(Ordering::Acquire);
            let now = self.ms_now();
            if self.poked.swap(false, Ordering::SeqCst) {
                self.combine();
            } else if due <= now {
                // Through the queue, so a holder that is busy runs the
                // timers before it lets go.
                if self.queue(ToCore::Tick).is_err() {
                    return;
                }
                // Cleared unless a round already published the next one.
                let _ = self.deadline.compare_exchange(
                    due,
                    u64::MAX,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                self.combine();
            } else if due == u64::MAX {
                std::thread::park();
            } else {
                std::thread::park_timeout(Duration::from_millis(due - now));
            }
        }
    }

    /// Whether the hub is finished or stopped.
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
