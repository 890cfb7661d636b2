//! The server's one clock: Unix milliseconds read once at start, advanced
//! by the monotonic clock, so epoch jobs compare with wall time while
//! timeouts never jump when the wall clock is set.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use gearshift_core::Millis;

/// The wall clock now, in Unix milliseconds (0 before 1970).
pub fn unix_ms() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as Millis)
}

/// Maps monotonic instants to Unix milliseconds.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    start_unix_ms: Millis,
}

impl Clock {
    /// Anchors the clock at the current wall time.
    pub fn new() -> Self {
        Clock {
            start: Instant::now(),
            start_unix_ms: unix_ms(),
        }
    }

    /// Now, in Unix milliseconds.
    pub fn now(&self) -> Millis {
        self.start_unix_ms + self.start.elapsed().as_millis() as Millis
    }

    /// The monotonic instant at which the clock reads `at`.
    pub fn instant_at(&self, at: Millis) -> Instant {
        let offset = std::time::Duration::from_millis(at.saturating_sub(self.start_unix_ms));
        // A due time centuries away must not overflow; a day ahead is as
        // good, since the core is asked again when the timer fires.
        let day = std::time::Duration::from_secs(86_400);
        self.start
            .checked_add(offset.min(self.start.elapsed() + day))
            .unwrap_or_else(|| Instant::now() + day)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
