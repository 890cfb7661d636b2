//! A fault-injecting wrapper: passes operations to an inner store until a
//! countdown runs out, then fails every flush (disk full, I/O error), so
//! error paths can be tested without a broken disk.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::{DeadMark, JobRecord, KeptRecord, Replayed, ScheduleRecord, Store, StoreError};

/// Fails flushes once `budget` buffered operations have been used up.
#[derive(Debug)]
pub struct FaultyStore<S> {
    inner: S,
    budget: Arc<AtomicI64>,
    pending: usize,
}

impl<S: Store> FaultyStore<S> {
    /// Wraps `inner`; it fails once `ops` operations went through.
    pub fn new(inner: S, ops: i64) -> Self {
        FaultyStore {
            inner,
            budget: Arc::new(AtomicI64::new(ops)),
            pending: 0,
        }
    }

    /// A handle to change the remaining budget from a test (e.g. to heal).
    pub fn budget(&self) -> Arc<AtomicI64> {
        self.budget.clone()
    }

    /// The wrapped store.
    pub fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Store> Store for FaultyStore<S> {
    fn replay(&mut self) -> Result<Replayed, StoreError> {
        self.inner.replay()
    }

    fn add(&mut self, job: &JobRecord) {
        self.pending += 1;
        self.inner.add(job);
    }

    fn done(&mut self, id: u64) {
        self.pending += 1;
        self.inner.done(id);
    }

    fn update(&mut self, id: u64, attempts: u32) {
        self.pending += 1;
        self.inner.update(id, attempts);
    }

    fn retry(&mut self, id: u64, attempts: u32, due_ms: Option<u64>) {
        self.pending += 1;
        self.inner.retry(id, attempts, due_ms);
    }

    fn dead(&mut self, id: u64, attempts: u32, mark: &DeadMark) {
        self.pending += 1;
        self.inner.dead(id, attempts, mark);
    }

    fn schedule(&mut self, s: &ScheduleRecord) {
        self.pending += 1;
        self.inner.schedule(s);
    }

    fn unschedule(&mut self, id: u64) {
        self.pending += 1;
        self.inner.unschedule(id);
    }

    fn kept(&mut self, r: &KeptRecord) {
        self.pending += 1;
        self.inner.kept(r);
    }

    fn forget(&mut self, id: u64) {
        self.pending += 1;
        self.inner.forget(id);
    }

    fn reserve(&mut self, upto: u64) {
        self.pending += 1;
        self.inner.reserve(upto);
    }

    fn discard(&mut self) {
        self.pending = 0;
        self.inner.discard();
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        let n = std::mem::take(&mut self.pending) as i64;
        let left = self.budget.fetch_sub(n, Ordering::SeqCst) - n;
        if left < 0 {
            // Like a failed write: what was buffered is not stored.
            self.inner.discard();
            return Err(StoreError::Injected(
                "no space left on device (simulated)".into(),
            ));
        }
        self.inner.flush()
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        self.inner.sync()
    }

    fn idle(&mut self) -> Result<(), StoreError> {
        self.inner.idle()
    }
}
