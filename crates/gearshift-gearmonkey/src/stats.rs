//! The bridge's counters: every bad input and every failed call to Redis or
//! Gearshift is logged once and counted here (reported in a log line).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters shared by the bridge's tasks.
#[derive(Debug, Default)]
pub struct Stats {
    /// GearMonkey jobs taken from Redis to run on Gearman workers.
    pub taken: AtomicU64,
    /// Of those, finished and written back.
    pub finished: AtomicU64,
    /// Gearman jobs written to Redis for GearMonkey workers.
    pub given: AtomicU64,
    /// Queue entries that were not an integer id.
    pub bad_id: AtomicU64,
    /// Queue entries naming no job hash, or a hash without `input`.
    pub missing_job: AtomicU64,
    /// Hash fields that were not what the layout says (non-UTF-8 status,
    /// a non-integer dividend).
    pub bad_field: AtomicU64,
    /// Failed Redis calls.
    pub redis_errors: AtomicU64,
    /// Failed calls to Gearshift.
    pub gearman_errors: AtomicU64,
    /// Jobs put back into their GearMonkey queue (recovery, lost Gearshift).
    pub put_back: AtomicU64,
}

impl Stats {
    /// Adds one to `counter`.
    pub fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// One line for the log.
    pub fn line(&self) -> String {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "taken={} finished={} given={} put_back={} bad_id={} missing_job={} bad_field={} redis_errors={} gearman_errors={}",
            g(&self.taken),
            g(&self.finished),
            g(&self.given),
            g(&self.put_back),
            g(&self.bad_id),
            g(&self.missing_job),
            g(&self.bad_field),
            g(&self.redis_errors),
            g(&self.gearman_errors),
        )
    }
}
