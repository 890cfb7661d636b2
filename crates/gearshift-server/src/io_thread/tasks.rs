//! An I/O thread's helper tasks besides its connections: the flusher of
//! other connections' output, and its link to the hub ([`hub`]): the timer
//! of a hub that runs here, or the sender of batches to the shared hub and
//! the taker of its output batches.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use tokio::task::{spawn_local, JoinHandle};

use crate::core_lock::ToCore;
use crate::handoff::OutSlot;

use super::{IoThread, Sink};

/// Starts the thread's side of the hub, whichever way it runs (matched
/// once, when the thread starts): the timer of a hub that runs here, or the
/// sender of batches to the shared hub and the taker of its outputs.
pub(super) fn hub(io: &Rc<RefCell<IoThread>>) -> Vec<JoinHandle<()>> {
    let slot = match &io.borrow().route {
        Sink::Inline(_) => None,
        Sink::Shared(b) => Some(b.slot.clone()),
    };
    match slot {
        None => vec![spawn_local(timer(io.clone()))],
        Some(slot) => vec![
            spawn_local(sender(io.clone())),
            spawn_local(taker(io.clone(), slot)),
        ],
    }
}

/// Takes the hub's output batches and writes them: every batch
/// that came meanwhile is encoded first, then each connection gets one write.
async fn taker(io: Rc<RefCell<IoThread>>, slot: Arc<OutSlot>) {
    loop {
        slot.waker().notified().await;
        io.borrow_mut().take_outputs();
    }
}

/// Writes the output that was routed to connections other than the one
/// being read, once every task that was ready has had its turn, so a
/// connection that gets output from several of them gets one write.
pub(super) async fn flusher(io: Rc<RefCell<IoThread>>) {
    let wake = io.borrow().flush.clone();
    loop {
        wake.wait().await;
        let mut t = io.borrow_mut();
        t.flush_scheduled = false;
        t.peers.write_dirty();
        t.report_failed();
        t.pump(None);
    }
}

/// Hands the items collected from every connection that was ready to the
/// shared hub as one batch, once all of them have had their turn; when this
/// thread ran the hub itself, its own answers are written at once.
async fn sender(io: Rc<RefCell<IoThread>>) {
    let wake = io.borrow().send.clone();
    let (core, slot) = match &io.borrow().route {
        Sink::Shared(b) => (b.core.clone(), b.slot.clone()),
        Sink::Inline(_) => return,
    };
    loop {
        wake.wait().await;
        let mut t = io.borrow_mut();
        let index = t.index;
        let Sink::Shared(b) = &mut t.route else {
            return;
        };
        b.scheduled = false;
        if b.pending.is_empty() {
            continue;
        }
        let bytes = std::mem::take(&mut b.pending_bytes);
        b.flow.sent(bytes);
        let batch = ToCore::Batch {
            thread: index,
            items: std::mem::take(&mut b.pending),
            bytes,
            seq: b.next_seq,
        };
        b.next_seq += 1;
        // Not borrowed while the hub runs: it touches only the slots.
        drop(t);
        if core.send(batch).is_err() {
            tracing::debug!("the hub is gone; items dropped");
        }
        if slot.has_pending() {
            io.borrow_mut().take_outputs();
        }
    }
}

/// Fires the hub's timers when they are due (single I/O thread); woken
/// early when the hub arms an earlier deadline.
async fn timer(io: Rc<RefCell<IoThread>>) {
    let wake = match &io.borrow().route {
        Sink::Inline(hub) => hub.timer_signal(),
        Sink::Shared(_) => return,
    };
    let mut deadline = io.borrow_mut().deadline();
    loop {
        tokio::select! {
            _ = sleep_until(deadline) => {
                let mut t = io.borrow_mut();
                if let Some((hub, peers)) = t.hub_and_sink() {
                    hub.timer(peers);
                }
                t.pump(None);
                deadline = t.deadline();
            }
            _ = wake.notified() => deadline = io.borrow_mut().deadline(),
        }
    }
}

async fn sleep_until(deadline: Option<std::time::Instant>) {
    match deadline {
        Some(t) => tokio::time::sleep_until(tokio::time::Instant::from_std(t)).await,
        None => std::future::pending().await,
    }
}
