//! A lock-free latency histogram for threads other than the core's (the
//! store thread's group commits): atomic buckets, read by a scrape.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the commit latency buckets, in seconds.
pub const COMMIT_BUCKETS: [f64; 12] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0,
];

/// Commit latencies: per-bucket counts (not cumulative), count and sum.
#[derive(Debug, Default)]
pub struct AtomicHistogram {
    buckets: [AtomicU64; COMMIT_BUCKETS.len()],
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

/// A copy of an [`AtomicHistogram`], cumulative as Prometheus wants it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramSnapshot {
    /// Observations at or below each bound of [`COMMIT_BUCKETS`].
    pub cumulative: [u64; COMMIT_BUCKETS.len()],
    /// Observations in all.
    pub count: u64,
    /// Their sum, in seconds.
    pub sum_seconds: f64,
}

impl AtomicHistogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(i) = COMMIT_BUCKETS.iter().position(|&b| secs <= b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        let nanos = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts now.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = [0; COMMIT_BUCKETS.len()];
        let mut acc = 0;
        for (c, b) in cumulative.iter_mut().zip(&self.buckets) {
            acc += b.load(Ordering::Relaxed);
            *c = acc;
        }
        HistogramSnapshot {
            cumulative,
            count: self.count.load(Ordering::Relaxed).max(acc),
            sum_seconds: self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative() {
        let h = AtomicHistogram::default();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(5));
        let s = h.snapshot();
        assert_eq!(s.cumulative[0], 1);
        assert_eq!(s.cumulative[5], 2);
        assert_eq!(s.cumulative[COMMIT_BUCKETS.len() - 1], 2);
        assert_eq!(s.count, 3);
        assert!((s.sum_seconds - 5.00305).abs() < 1e-6);
    }
}
