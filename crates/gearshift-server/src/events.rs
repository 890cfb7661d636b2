//! The live event bus: the hub publishes the core's [`LiveEvent`]s here,
//! one batch per round, only of the kinds someone subscribed to (the hub
//! reads the wanted kinds once per round and tells the core).

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};

use gearshift_core::events::{Kind, LiveEvent};
use tokio::sync::broadcast;

/// One hub round's events.
pub type Batch = Arc<Vec<LiveEvent>>;

/// Default number of batches a subscriber may fall behind before it is dropped.
pub const DEFAULT_CAPACITY: usize = 1024;

/// Fans event batches out to subscribers.
pub struct EventBus {
    tx: broadcast::Sender<Batch>,
    /// Subscribers per kind (in [`Kind::ALL`] order); changed on
    /// subscribe and drop only.
    counts: Mutex<[usize; Kind::ALL.len()]>,
    /// The kinds with a subscriber, as a mask the hub reads each round.
    mask: AtomicU16,
}

impl EventBus {
    /// A bus whose subscribers may lag `capacity` batches.
    pub fn new(capacity: usize) -> Arc<Self> {
        let (tx, _) = broadcast::channel(capacity.max(1));
        Arc::new(EventBus {
            tx,
            counts: Mutex::new([0; Kind::ALL.len()]),
            mask: AtomicU16::new(0),
        })
    }

    /// The kinds someone listens to (one relaxed load: read once per hub
    /// round); 0 when nobody does.
    pub fn wanted(&self) -> u16 {
        self.mask.load(Ordering::Relaxed)
    }

    /// Adds (`+1`) or takes away a subscriber of the kinds in `mask`.
    fn count(&self, mask: u16, add: bool) {
        let mut counts = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        let mut wanted = 0;
        for (i, k) in Kind::ALL.iter().enumerate() {
            if mask & k.bit() != 0 {
                counts[i] = if add {
                    counts[i] + 1
                } else {
                    counts[i].saturating_sub(1)
                };
            }
            if counts[i] > 0 {
                wanted |= k.bit();
            }
        }
        self.mask.store(wanted, Ordering::Relaxed);
    }

    /// Publishes one round's events (dropped if nobody listens).
    pub fn publish(&self, batch: Vec<LiveEvent>) {
        let _ = self.tx.send(Arc::new(batch));
    }

    /// A new subscriber to the kinds in `mask`; they flow until it is dropped.
    pub fn subscribe(self: &Arc<Self>, mask: u16) -> Subscription {
        let rx = self.tx.subscribe();
        self.count(mask, true);
        Subscription {
            rx,
            mask,
            bus: self.clone(),
        }
    }
}

/// A subscriber's end of the bus; counts as one subscriber while it lives.
pub struct Subscription {
    /// Its receiver.
    pub rx: broadcast::Receiver<Batch>,
    /// The kinds it asked for (the batches also carry others').
    pub mask: u16,
    bus: Arc<EventBus>,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.bus.count(self.mask, false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wanted_kinds_follow_the_subscribers() {
        let bus = EventBus::new(4);
        assert_eq!(bus.wanted(), 0);
        let failed = Kind::Failed.bit();
        let all = Kind::all();
        let a = bus.subscribe(failed);
        assert_eq!(bus.wanted(), failed);
        let b = bus.subscribe(all);
        assert_eq!(bus.wanted(), all);
        drop(b);
        assert_eq!(bus.wanted(), failed);
        let c = bus.subscribe(failed | Kind::Dead.bit());
        drop(a);
        assert_eq!(bus.wanted(), failed | Kind::Dead.bit());
        drop(c);
        assert_eq!(bus.wanted(), 0);
    }
}
