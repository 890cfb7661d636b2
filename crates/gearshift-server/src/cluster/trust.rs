//! How long a leader may act: the instant until which its lease is surely
//! valid, shared with the hub, which stops sending anything (replies, job
//! assignments, store writes) once it has passed, even before the node's
//! runner has stopped the server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// A lease deadline readable from any thread.
#[derive(Debug)]
pub struct LeaseTrust {
    base: Instant,
    /// Milliseconds past `base` the lease is trusted until.
    until_ms: AtomicU64,
}

impl LeaseTrust {
    /// Trusted until `until`.
    pub fn new(until: Instant) -> Self {
        let t = LeaseTrust {
            base: Instant::now(),
            until_ms: AtomicU64::new(0),
        };
        t.extend(until);
        t
    }

    /// Moves the deadline to `until` (a renewal).
    pub fn extend(&self, until: Instant) {
        let ms = until.saturating_duration_since(self.base).as_millis();
        self.until_ms
            .store(u64::try_from(ms).unwrap_or(u64::MAX), Ordering::Release);
    }

    /// Ends the trust now (the lease was lost).
    pub fn revoke(&self) {
        self.until_ms.store(0, Ordering::Release);
    }

    /// Whether the lease is still surely valid.
    pub fn trusted(&self) -> bool {
        (self.base.elapsed().as_millis() as u64) < self.until_ms.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn trust_ends_at_the_deadline_or_when_revoked() {
        let t = LeaseTrust::new(Instant::now() + Duration::from_secs(60));
        assert!(t.trusted());
        t.revoke();
        assert!(!t.trusted());
        t.extend(Instant::now() + Duration::from_secs(60));
        assert!(t.trusted());
        t.extend(Instant::now());
        assert!(!t.trusted());
    }
}
