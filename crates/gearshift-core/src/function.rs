//! A function's queues and counters: three FIFO lists by priority, counts
//! for `status`/`prioritystatus`, the queue limit, the workers asleep on it,
//! its policy and whether it is paused; and its statistics ([`FuncStats`]):
//! counters and latency histograms moved where the lifecycle already passes
//! (submission, start, result, failure, retry). The core is single-threaded,
//! so they are plain integers: a scrape copies them.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;

use crate::ids::{ConnId, JobId};
use crate::policy::Policy;
use crate::Millis;

/// One function name's queues and statistics.
#[derive(Debug, Default)]
pub struct Function {
    /// Name as first seen.
    pub name: Bytes,
    /// Grab-able jobs by priority; may hold stale ids of jobs that left the
    /// queue (cancelled, dropped), which are skipped when popped.
    pub queues: [VecDeque<JobId>; 3],
    /// Live grab-able jobs per priority (exact; `queues` may be longer).
    pub queued: [u32; 3],
    /// Epoch jobs not yet due (shown as queued at normal priority).
    pub scheduled: u32,
    /// Every job of the function: queued, scheduled and running.
    pub total: u32,
    /// Jobs held by workers.
    pub running: u32,
    /// Connections that registered the function.
    pub workers: u32,
    /// Of those, the ones that take only epoch jobs, before they are due
    /// (OPTION_REQ epoch-early).
    pub early_takers: u32,
    /// Epoch jobs not yet due offered to those (while there are any); may
    /// hold stale ids, skipped when popped.
    pub early: VecDeque<JobId>,
    /// `maxqueue` limits by priority; 0 = unlimited.
    pub max_queue: [i64; 3],
    /// Workers that slept on this function and were not NOOPed since; may
    /// hold stale entries, checked when popped.
    pub sleepers: VecDeque<ConnId>,
    /// The policy of the first config rule matching the name, if any.
    pub policy: Option<Arc<Policy>>,
    /// Early takers asleep on the function, woken only by [`Function::early`]
    /// jobs (as `sleepers`, may hold stale entries).
    pub early_sleepers: VecDeque<ConnId>,
    /// `pause F`: jobs are queued but not handed out.
    pub paused: bool,
    /// Its partition is being handed over to another node: no job is
    /// handed out (not stored and not shown, unlike `paused`).
    pub moving: bool,
    /// Counters and latencies since the server started.
    pub stats: FuncStats,
}

impl Function {
    /// A new, empty function.
    pub fn new(name: Bytes) -> Self {
        Function {
            name,
            ..Function::default()
        }
    }

    /// Grab-able jobs at any priority.
    pub fn has_queued(&self) -> bool {
        self.queued.iter().any(|&n| n > 0)
    }

    /// Whether `maxqueue` refuses one more job of priority `p` (counting
    /// every job of the function, as gearmand does).
    #[inline]
    pub fn queue_full(&self, p: usize) -> bool {
        let limit = self.max_queue[p];
        limit > 0 && i64::from(self.total) >= limit
    }

    /// Whether its jobs are held back from workers (paused, or moving).
    pub fn held(&self) -> bool {
        self.paused || self.moving
    }

    /// Jobs a worker may take now: queued, and the function not held.
    pub fn has_work(&self) -> bool {
        !self.held() && self.has_queued()
    }

    /// The sleepers list a worker goes on: early takers' or the others'.
    pub fn sleepers_of(&mut self, early: bool) -> &mut VecDeque<ConnId> {
        match early {
            true => &mut self.early_sleepers,
            false => &mut self.sleepers,
        }
    }

    /// Epoch jobs an early taker may take now (some may be stale).
    pub fn has_early_work(&self) -> bool {
        !self.held() && !self.early.is_empty()
    }
}

/// Why a function action (the HTTP API's, or `drop function`) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FunctionError {
    /// No function has that name.
    #[error("no such function")]
    NotFound,
    /// The name is empty.
    #[error("a function name may not be empty")]
    BadName,
    /// Workers registered it, or it has jobs running.
    #[error("the function has workers or running jobs")]
    Busy,
    /// It has queued jobs.
    #[error("the function has queued jobs")]
    Queued,
}

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
