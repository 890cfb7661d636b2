//! The in-memory backend: the store semantics with no disk. Clones share
//! one state, so a test can "reopen" it and replay what was flushed.

use std::sync::{Arc, Mutex};

use crate::{
    apply_ops, capped, DeadMark, JobRecord, KeptRecord, Op, Refusal, Replayed, ScheduleRecord,
    Sets, Store, StoreError, MAX_ID,
};

/// A store that keeps flushed jobs in memory.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore {
    shared: Arc<Mutex<Sets>>,
    pending: Vec<Op>,
    /// What the next flush must refuse (an id beyond `MAX_ID`, ...).
    refused: Refusal,
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
            pending: Vec::new(),
            refused: Refusal::default(),
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
        self.refused.note(job.id);
        self.pending.push(Op::Add(job.clone()));
    }

    fn done(&mut self, id: u64) {
        self.pending.push(Op::Done(id));
    }

    fn update(&mut self, id: u64, attempts: u32) {
        self.pending.push(Op::Update { id, attempts });
    }

    fn retry(&mut self, id: u64, attempts: u32, due_ms: Option<u64>) {
        self.refused.note(id);
        self.pending.push(Op::Retry {
            id,
            attempts,
            due_ms,
        });
    }

    fn dead(&mut self, id: u64, attempts: u32, mark: &DeadMark) {
        self.refused.note(id);
        self.pending.push(Op::Dead {
            id,
            attempts,
            mark: mark.clone(),
        });
    }

    fn schedule(&mut self, s: &ScheduleRecord) {
        self.refused.note(s.id);
        self.pending.push(Op::Schedule(s.clone()));
    }

    fn unschedule(&mut self, id: u64) {
        // No stored schedule has an id past MAX_ID: nothing to drop (the
        // log store could not write the op).
        if id <= MAX_ID {
            self.pending.push(Op::Unschedule(id));
        }
    }

    fn kept(&mut self, r: &KeptRecord) {
        self.refused.note_kept(r);
        self.pending.push(Op::Kept(r.clone()));
    }

    fn forget(&mut self, id: u64) {
        // As in `unschedule`.
        if id <= MAX_ID {
            self.pending.push(Op::Forget(id));
        }
    }

    fn reserve(&mut self, upto: u64) {
        self.pending.push(Op::Reserve(capped(upto)));
    }

    fn discard(&mut self) {
        self.pending.clear();
        self.refused.clear();
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        if let Some(e) = self.refused.refusal() {
            self.discard();
            return Err(e);
        }
        let mut s = self
            .shared
            .lock()
            .map_err(|_| StoreError::Corrupt("poisoned".into()))?;
        apply_ops(&mut s, self.pending.drain(..));
        Ok(())
    }
}
