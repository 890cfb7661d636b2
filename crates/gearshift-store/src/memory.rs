//! The in-memory backend: the store semantics with no disk. Clones share
//! one state, so a test can "reopen" it and replay what was flushed.

use std::sync::{Arc, Mutex};

use crate::batch::Batch;
use crate::{apply_ops, Op, Replayed, Sets, Store, StoreError};

/// A store that keeps flushed jobs in memory.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    shared: Arc<Mutex<Sets>>,
    /// Operations since the last flush.
    batch: Batch,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStore::default()
    }

    /// Another handle on the same flushed state, with nothing buffered (a "reopen").
    pub fn reopen(&self) -> Self {
        MemoryStore {
            shared: self.shared.clone(),
            batch: Batch::default(),
        }
    }
}

impl Store for MemoryStore {
    fn replay(&mut self) -> Result<Replayed, StoreError> {
        let s = self
            .shared
            .lock()
            .map_err(|_| StoreError::Corrupt("poisoned".into()))?;
        Ok(s.replayed())
    }

    fn append(&mut self, ops: &[Op]) {
        self.batch.append(ops);
    }

    fn discard(&mut self) {
        self.batch.discard();
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        // Runs are not recorded: a restarted node requeues its running jobs.
        let ops = self.batch.take()?.ops;
        let mut s = self
            .shared
            .lock()
            .map_err(|_| StoreError::Corrupt("poisoned".into()))?;
        apply_ops(&mut s, ops);
        Ok(())
    }
}
