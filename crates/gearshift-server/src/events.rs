//! The live event bus: the hub publishes the core's [`LiveEvent`]s here,
//! one batch per round, only while someone subscribes (the hub reads the
//! subscriber count once per round and turns the core's events on or off).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use gearshift_core::events::LiveEvent;
use tokio::sync::broadcast;

/// One hub round's events.
pub type Batch = Arc<Vec<LiveEvent>>;

/// Default number of batches a subscriber may fall behind before it is dropped.
pub const DEFAULT_CAPACITY: usize = 1024;

/// Fans event batches out to subscribers.
pub struct EventBus {
    tx: broadcast::Sender<Batch>,
    subscribers: AtomicUsize,
}

impl EventBus {
    /// A bus whose subscribers may lag `capacity` batches.
    pub fn new(capacity: usize) -> Arc<Self> {
        let (tx, _) = broadcast::channel(capacity.max(1));
        Arc::new(EventBus {
            tx,
            subscribers: AtomicUsize::new(0),
        })
    }

    /// Whether anyone listens (one relaxed load: read once per hub round).
    pub fn wanted(&self) -> bool {
        self.subscribers.load(Ordering::Relaxed) > 0
    }

    /// Publishes one round's events (dropped if nobody listens).
    pub fn publish(&self, batch: Vec<LiveEvent>) {
        let _ = self.tx.send(Arc::new(batch));
    }

    /// A new subscriber; events flow until it is dropped.
    pub fn subscribe(self: &Arc<Self>) -> Subscription {
        let rx = self.tx.subscribe();
        self.subscribers.fetch_add(1, Ordering::Relaxed);
        Subscription {
            rx,
            bus: self.clone(),
        }
    }
}

/// A subscriber's end of the bus; counts as one subscriber while it lives.
pub struct Subscription {
    /// Its receiver.
    pub rx: broadcast::Receiver<Batch>,
    bus: Arc<EventBus>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.bus.subscribers.fetch_sub(1, Ordering::Relaxed);
    }
}
