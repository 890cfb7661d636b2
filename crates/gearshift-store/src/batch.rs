//! The operations a backend buffers between flushes, with what the next
//! flush must refuse: the buffering half of [`crate::Store`] that the memory
//! and PostgreSQL backends share (the log store encodes as it goes).

use crate::{
    capped, DeadMark, JobRecord, KeptRecord, Op, Refusal, ScheduleRecord, StoreError, MAX_ID,
};

/// Operations since the last flush.
#[derive(Debug, Clone, Default)]
pub(crate) struct Batch {
    ops: Vec<Op>,
    refused: Refusal,
}

impl Batch {
    pub(crate) fn add(&mut self, job: &JobRecord) {
        self.refused.note(job.id);
        self.ops.push(Op::Add(job.clone()));
    }

    pub(crate) fn done(&mut self, id: u64) {
        self.ops.push(Op::Done(id));
    }

    pub(crate) fn update(&mut self, id: u64, attempts: u32) {
        self.ops.push(Op::Update { id, attempts });
    }

    pub(crate) fn retry(&mut self, id: u64, attempts: u32, due_ms: Option<u64>) {
        self.refused.note(id);
        self.ops.push(Op::Retry {
            id,
            attempts,
            due_ms,
        });
    }

    pub(crate) fn dead(&mut self, id: u64, attempts: u32, mark: &DeadMark) {
        self.refused.note(id);
        self.ops.push(Op::Dead {
            id,
            attempts,
            mark: mark.clone(),
        });
    }

    pub(crate) fn schedule(&mut self, s: &ScheduleRecord) {
        self.refused.note(s.id);
        self.ops.push(Op::Schedule(s.clone()));
    }

    pub(crate) fn unschedule(&mut self, id: u64) {
        // No stored schedule has an id past MAX_ID: nothing to drop (the
        // log store could not write the op).
        if id <= MAX_ID {
            self.ops.push(Op::Unschedule(id));
        }
    }

    pub(crate) fn kept(&mut self, r: &KeptRecord) {
        self.refused.note_kept(r);
        self.ops.push(Op::Kept(r.clone()));
    }

    pub(crate) fn forget(&mut self, id: u64) {
        // As in `unschedule`.
        if id <= MAX_ID {
            self.ops.push(Op::Forget(id));
        }
    }

    pub(crate) fn reserve(&mut self, upto: u64) {
        self.ops.push(Op::Reserve(capped(upto)));
    }

    /// Drops what is buffered.
    pub(crate) fn discard(&mut self) {
        self.ops.clear();
        self.refused.clear();
    }

    /// Operations buffered.
    pub(crate) fn len(&self) -> usize {
        self.ops.len()
    }

    /// The operations to flush, emptying the batch; a batch that must be
    /// refused is dropped and its error returned.
    pub(crate) fn take(&mut self) -> Result<Vec<Op>, StoreError> {
        if let Some(e) = self.refused.refusal() {
            self.discard();
            return Err(e);
        }
        self.refused.clear();
        Ok(std::mem::take(&mut self.ops))
    }
}
