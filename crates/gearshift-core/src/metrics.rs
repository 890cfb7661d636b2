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
        let _ = ms;
        todo!()
    }

    /// Cumulative counts per bound, as Prometheus wants them.
    pub fn cumulative(&self) -> [u64; BUCKETS_MS.len()] {
        todo!()
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
