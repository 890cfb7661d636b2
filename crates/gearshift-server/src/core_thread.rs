//! The core thread (with more than one I/O thread): it owns the hub, takes
//! batches of items from the I/O threads and the store's commit results
//! from one inbox, and after each round hands every I/O thread the
//! outputs for its connections as one batch. No socket, no encoding and no
//! lock is on this thread: only the Gearman rules and the routing.

use std::sync::{mpsc, Arc};
use std::time::Instant;

use crate::config::Reload;
use gearshift_core::ConnId;
use tokio::sync::oneshot;

use crate::handoff::{Flow, OutSlot};
use crate::hub::{Hub, Item, Outboxes};
use crate::store_task::Commit;

/// Most inbox messages taken in one round before outputs are handed out,
/// so a flood of batches cannot delay every answer.
const ROUND: usize = 256;

/// What the core thread is told.
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
    /// The store's group commit finished.
    Commit(Commit),
    /// Begin a shutdown.
    Shutdown(bool),
    /// Finish the hub and the store, then say so.
    Finish(oneshot::Sender<()>),
    /// A config reload.
    Reload(Arc<Reload>),
    /// A control call (the HTTP API).
    Call(crate::control::Call),
    /// End at once (the server was dropped).
    Stop,
}

/// The I/O threads as the core thread reaches them.
pub struct IoLinks {
    /// Where each thread's outputs go.
    pub slots: Vec<Arc<OutSlot>>,
    /// Each thread's flow of batches.
    pub flows: Vec<Arc<Flow>>,
}

/// Runs the hub until told to finish or stop.
pub fn run(mut hub: Hub, inbox: mpsc::Receiver<ToCore>, links: IoLinks) {
    let mut outboxes = Outboxes(links.slots.iter().map(|_| Vec::new()).collect());
    // Batches run this round: (thread, seq, bytes), reported once their
    // outputs are handed out.
    let mut ran: Vec<(usize, u64, usize)> = Vec::new();
    loop {
        let first = match hub.deadline() {
            Some(at) => {
                let wait = at.saturating_duration_since(Instant::now());
                match inbox.recv_timeout(wait) {
                    Ok(m) => Some(m),
                    Err(mpsc::RecvTimeoutError::Timeout) => None,
                    Err(mpsc::RecvTimeoutError::Disconnected) => return,
                }
            }
            None => match inbox.recv() {
                Ok(m) => Some(m),
                Err(_) => return,
            },
        };
        let mut next = first;
        let mut taken = 0;
        while let Some(msg) = next {
            match msg {
                ToCore::Batch {
                    thread,
                    items,
                    bytes,
                    seq,
                } => {
                    for (id, item) in items {
                        hub.input(id, item, &mut outboxes);
                    }
                    ran.push((thread, seq, bytes));
                }
                ToCore::Commit(c) => hub.commit(c, &mut outboxes),
                ToCore::Shutdown(graceful) => hub.begin_shutdown(graceful),
                ToCore::Finish(done) => {
                    let store = hub.finish(&mut outboxes);
                    hand_out(&mut outboxes, &links);
                    if let Some(store) = store {
                        // The store thread flushes what is queued, then ends.
                        store.finish();
                    }
                    let _ = done.send(());
                    return;
                }
                ToCore::Reload(r) => hub.reload(&r, &mut outboxes),
                ToCore::Call(c) => hub.call(c, &mut outboxes),
                ToCore::Stop => return,
            }
            taken += 1;
            next = if taken < ROUND {
                inbox.try_recv().ok()
            } else {
                None
            };
        }
        if hub.deadline().is_some_and(|at| at <= Instant::now()) {
            hub.timer(&mut outboxes);
        }
        hub.settle(&mut outboxes);
        hand_out(&mut outboxes, &links);
        for (thread, seq, bytes) in ran.drain(..) {
            if let Some(f) = links.flows.get(thread) {
                f.done(seq, bytes);
            }
        }
    }
}

/// Gives every I/O thread what the round produced for its connections.
fn hand_out(outboxes: &mut Outboxes, links: &IoLinks) {
    for (t, outs) in outboxes.0.iter_mut().enumerate() {
        if outs.is_empty() {
            continue;
        }
        // The next round's batch starts at this one's size.
        let batch = std::mem::replace(outs, Vec::with_capacity(outs.len()));
        if let Some(slot) = links.slots.get(t) {
            slot.push(batch);
        }
    }
}
