//! Exponential reconnect backoff with a little jitter, shared by the client's
//! server pool and the worker's per-server sessions.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Delays that double from `min` up to `max`; [`Backoff::reset`] after a success.
#[derive(Debug, Clone)]
pub(crate) struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// A backoff starting at `min` and capped at `max` (at least `min`).
    pub(crate) fn new(min: Duration, max: Duration) -> Backoff {
        let min = min.max(Duration::from_millis(1));
        Backoff {
            min,
            max: max.max(min),
            next: min,
        }
    }

    /// The delay before the next attempt (±20 % jitter); doubles the one after.
    pub(crate) fn next_delay(&mut self) -> Duration {
        let base = self.next;
        self.next = (self.next * 2).min(self.max);
        jitter(base)
    }

    /// Back to the shortest delay.
    pub(crate) fn reset(&mut self) {
        self.next = self.min;
    }
}

/// Scales `d` by a factor in [0.8, 1.2) so reconnecting peers spread out.
fn jitter(d: Duration) -> Duration {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|t| t.subsec_nanos())
        .unwrap_or(0);
    let per_mille = 800 + u64::from(nanos % 400);
    let ms = d.as_micros() as u64 * per_mille / 1000;
    Duration::from_micros(ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_and_caps() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_millis(350));
        let d: Vec<u128> = (0..4).map(|_| b.next_delay().as_millis()).collect();
        assert!((80..120).contains(&d[0]), "{d:?}");
        assert!((160..240).contains(&d[1]), "{d:?}");
        assert!((280..420).contains(&d[2]), "{d:?}");
        assert!((280..420).contains(&d[3]), "{d:?}");
        b.reset();
        assert!(b.next_delay() < Duration::from_millis(120));
    }
}
