//! A fault-injecting wrapper: passes operations to an inner store until a
//! countdown runs out, then fails every flush (disk full, I/O error), so
//! error paths can be tested without a broken disk.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

use crate::{Op, Repartition, Replayed, Store, StoreError};

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

    fn append(&mut self, ops: &[Op]) {
        // A run's start is not a write the budget counts.
        self.pending += ops
            .iter()
            .filter(|op| !matches!(op, Op::Started(_)))
            .count();
        self.inner.append(ops);
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

    // Partitions move as the inner store's do; only flushes fail.
    fn repartition(&mut self) -> Option<&mut dyn Repartition> {
        self.inner.repartition()
    }
}
