//! Per-function counters and latency histograms, moved where the lifecycle
//! already passes (submission, start, result, failure, retry). The core is
//! single-threaded, so they are plain integers: a scrape copies them.

use crate::Millis;

/// Upper bounds of the histogram buckets, in milliseconds (`+Inf` is the
/// count): 1 ms to 5 min.
pub const BUCKETS_MS: [Millis; 14] = [
    1, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 60_000, 300_000,
];

/// A fixed-bucket latency histogram, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Histogram {
    /// Observations at or below each bound of [`BUCKETS_MS`] (not cumulative).
    pub buckets: [u64; BUCKETS_MS.len()],
    /// Observations in all.
    pub count: u64,
    /// Their sum, in milliseconds.
    pub sum_ms: u64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&mut self, ms: Millis) {
        self.count += 1;
        self.sum_ms = self.sum_ms.saturating_add(ms);
        // Past the last bound it is only in `count` (Prometheus' `+Inf`).
        if let Some(i) = BUCKETS_MS.iter().position(|&b| ms <= b) {
            self.buckets[i] += 1;
        }
    }

    /// Cumulative counts per bound, as Prometheus wants them.
    pub fn cumulative(&self) -> [u64; BUCKETS_MS.len()] {
        let mut out = self.buckets;
        for i in 1..out.len() {
            out[i] += out[i - 1];
        }
        out
    }

    /// Adds another histogram's observations (a dropped function's, into
    /// the server's totals).
    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum_ms = self.sum_ms.saturating_add(other.sum_ms);
    }
}

/// Failure reasons counted apart: fail, exception, timeout, worker_lost
/// (the order of [`crate::policy::Reason`]).
pub const REASONS: [&str; 4] = ["fail", "exception", "timeout", "worker_lost"];

/// What a function did since the server started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FuncStats {
    /// Jobs submitted (a coalesced submission counts once, with its job).
    pub submitted: u64,
    /// Runs that ended with WORK_COMPLETE.
    pub completed: u64,
    /// Runs that ended without a result, by reason ([`REASONS`]).
    pub failed: [u64; 4],
    /// Retries scheduled by a policy, and gearmand-style requeues.
    pub retried: u64,
    /// Queued (or due) to started.
    pub wait: Histogram,
    /// Started to ended (result or failure).
    pub run: Histogram,
}

impl FuncStats {
    /// Failed runs of every reason.
    pub fn failed_total(&self) -> u64 {
        self.failed.iter().sum()
    }

    /// Adds another function's figures (see [`Histogram::merge`]).
    pub fn merge(&mut self, other: &FuncStats) {
        self.submitted += other.submitted;
        self.completed += other.completed;
        for (a, b) in self.failed.iter_mut().zip(other.failed) {
            *a += b;
        }
        self.retried += other.retried;
        self.wait.merge(&other.wait);
        self.run.merge(&other.run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_each_observation_once_and_add_up() {
        let mut h = Histogram::default();
        for ms in [0, 1, 2, 50, 51, 300_000, 300_001] {
            h.observe(ms);
        }
        assert_eq!(h.count, 7);
        assert_eq!(h.sum_ms, 600_105);
        assert_eq!(h.buckets[0], 2, "0 and 1 ms are at or below 1");
        assert_eq!(h.buckets[1], 1);
        assert_eq!(h.buckets[4], 1, "50 ms is in the 50 bucket");
        assert_eq!(h.buckets[5], 1, "51 ms is in the 100 bucket");
        assert_eq!(h.buckets[13], 1);
        let c = h.cumulative();
        assert_eq!(c[0], 2);
        assert_eq!(c[5], 5);
        assert_eq!(c[13], 6, "past the last bound only +Inf counts it");
        let mut sum = FuncStats::default();
        let one = FuncStats {
            run: h,
            failed: [1, 0, 2, 0],
            ..FuncStats::default()
        };
        sum.merge(&one);
        sum.merge(&one);
        assert_eq!(sum.failed_total(), 6);
        assert_eq!(sum.run.count, 14);
    }
}
