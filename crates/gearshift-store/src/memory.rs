//! The in-memory backend: the store semantics with no disk. Clones share
//! one state, so a test can "reopen" it and replay what was flushed.

use std::sync::{Arc, Mutex};

use crate::batch::Batch;
use crate::{
    apply_ops, DeadMark, JobRecord, KeptRecord, Replayed, ScheduleRecord, Sets, Store, StoreError,
};

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

    fn add(&mut self, job: &JobRecord) {
        self.batch.add(job);
    }

    fn done(&mut self, id: u64) {
        self.batch.done(id);
    }

    fn update(&mut self, id: u64, attempts: u32) {
        self.batch.update(id, attempts);
    }

    fn retry(&mut self, id: u64, attempts: u32, due_ms: Option<u64>) {
        self.batch.retry(id, attempts, due_ms);
    }

    fn dead(&mut self, id: u64, attempts: u32, mark: &DeadMark) {
        self.batch.dead(id, attempts, mark);
    }

    fn schedule(&mut self, s: &ScheduleRecord) {
        self.batch.schedule(s);
    }

    fn unschedule(&mut self, id: u64) {
        self.batch.unschedule(id);
    }

    fn kept(&mut self, r: &KeptRecord) {
        self.batch.kept(r);
    }

    fn forget(&mut self, id: u64) {
        self.batch.forget(id);
    }

    fn reserve(&mut self, upto: u64) {
        self.batch.reserve(upto);
    }

    fn discard(&mut self) {
        self.batch.discard();
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        let ops = self.batch.take()?;
        let mut s = self
            .shared
            .lock()
            .map_err(|_| StoreError::Corrupt("poisoned".into()))?;
        apply_ops(&mut s, ops);
        Ok(())
    }
}
