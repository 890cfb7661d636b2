//! The hub's hand-off of outputs to one I/O thread, made so that a busy
//! I/O thread costs the hub's holder no system call.
//!
//! Waking a thread that sleeps in `epoll_wait` takes a `write` to its
//! eventfd, paid by the waker. So the holder queues a batch and wakes
//! the I/O thread only when it is parked (or about to park). A running I/O
//! thread picks the batch up after its current read, or just before it
//! parks (tokio runs the `before_park` hook, and does not park when the
//! hook woke a task).

use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use tokio::sync::Notify;

use crate::hub::Out;

/// Batches for one I/O thread.
pub struct OutSlot {
    /// A lock-free queue: the hub's holder never waits for the I/O thread.
    tx: mpsc::Sender<Vec<Out>>,
    rx: Mutex<mpsc::Receiver<Vec<Out>>>,
    /// The I/O thread parked (or is about to).
    parked: AtomicBool,
    /// The queue has batches (a cheap check for the I/O thread).
    pending: AtomicBool,
    /// Wakes the I/O thread's task that takes the batches.
    wake: Notify,
}

impl OutSlot {
    /// A new, empty slot.
    pub fn new() -> Arc<OutSlot> {
        let (tx, rx) = mpsc::channel();
        Arc::new(OutSlot {
            tx,
            rx: Mutex::new(rx),
            parked: AtomicBool::new(false),
            pending: AtomicBool::new(false),
            wake: Notify::new(),
        })
    }

    /// The hub's holder: queues a batch; true when the I/O thread sleeps
    /// and must be woken ([`OutSlot::wake`], once the hub is let go).
    /// (Only the I/O thread takes, so the receiver's lock is never contended.)
    pub fn push(&self, batch: Vec<Out>) -> bool {
        let _ = self.tx.send(batch);
        self.pending.store(true, Ordering::Release);
        // Pairs with the fence in `before_park`: either this sees the
        // thread parked, or the thread sees the batch before it parks.
        fence(Ordering::SeqCst);
        self.parked.load(Ordering::Relaxed)
    }

    /// Wakes the I/O thread's taker (a system call when the thread sleeps).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// I/O thread: takes every queued batch.
    pub fn take(&self) -> Vec<Vec<Out>> {
        self.pending.store(false, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        lock(&self.rx).try_iter().collect()
    }

    /// I/O thread: whether batches wait (checked after each read).
    pub fn has_pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// I/O thread: what its taker task waits on.
    pub fn waker(&self) -> &Notify {
        &self.wake
    }

    /// I/O thread, in tokio's `before_park` hook: marks the thread parked,
    /// and wakes the taker (so the thread does not park) if batches wait
    /// (a spin here was tried and dropped: perf/history.md, "Store hand-off").
    pub fn before_park(&self) {
        self.parked.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if self.pending.load(Ordering::Relaxed) {
            self.parked.store(false, Ordering::Relaxed);
            self.wake.notify_one();
        }
    }

    /// I/O thread, in tokio's `after_unpark` hook.
    pub fn after_unpark(&self) {
        self.parked.store(false, Ordering::Relaxed);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// What one I/O thread has handed the hub, and how far the hub got: the
/// I/O thread throttles reading on it.
#[derive(Debug, Default)]
pub struct Flow {
    /// Bytes handed over and not yet processed.
    pub in_flight: AtomicUsize,
    /// Sequence number of the last batch processed, and its outputs handed
    /// out (batches count from 1).
    pub processed: AtomicU64,
}

impl Flow {
    /// I/O thread: a batch of `bytes` is on its way.
    pub fn sent(&self, bytes: usize) {
        self.in_flight.fetch_add(bytes, Ordering::AcqRel);
    }

    /// The hub's holder: batch `seq` of `bytes` is processed and its outputs
    /// handed out.
    pub fn done(&self, seq: u64, bytes: usize) {
        self.in_flight.fetch_sub(bytes, Ordering::AcqRel);
        self.processed.store(seq, Ordering::Release);
    }
}
