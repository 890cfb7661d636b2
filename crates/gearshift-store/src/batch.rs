//! The ops a backend that writes at flush time buffers meanwhile, with what
//! the next flush must refuse: the buffering half of [`crate::Store`] that
//! the memory and PostgreSQL backends share (the log store encodes as it
//! goes).

use crate::{capped, Op, Refusal, StoreError};

/// Operations since the last flush.
#[derive(Debug, Clone, Default)]
pub(crate) struct Batch {
    ops: Vec<Op>,
    /// Runs started, each with the number of ops buffered before it.
    started: Vec<(usize, u64)>,
    refused: Refusal,
}

/// What a flush writes: the ops, and the runs started among them.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    pub(crate) ops: Vec<Op>,
    pub(crate) started: Vec<(usize, u64)>,
}

impl Batch {
    /// Buffers `ops` (see [`crate::Store`] for what is refused or dropped).
    pub(crate) fn append(&mut self, ops: &[Op]) {
        for op in ops {
            if !self.refused.admit(op) {
                continue;
            }
            match op {
                Op::Reserve(upto) => self.ops.push(Op::Reserve(capped(*upto))),
                Op::Started(id) => self.started.push((self.ops.len(), *id)),
                _ => self.ops.push(op.clone()),
            }
        }
    }

    /// Drops what is buffered.
    pub(crate) fn discard(&mut self) {
        self.ops.clear();
        self.started.clear();
        self.refused.clear();
    }

    /// Operations buffered.
    pub(crate) fn len(&self) -> usize {
        self.ops.len()
    }

    /// Whether nothing is buffered (no op, no run started).
    pub(crate) fn is_empty(&self) -> bool {
        self.ops.is_empty() && self.started.is_empty()
    }

    /// What to flush, emptying the batch; a batch that must be refused is
    /// dropped and its error returned.
    pub(crate) fn take(&mut self) -> Result<Taken, StoreError> {
        if let Some(e) = self.refused.refusal() {
            self.discard();
            return Err(e);
        }
        self.refused.clear();
        Ok(Taken {
            ops: std::mem::take(&mut self.ops),
            started: std::mem::take(&mut self.started),
        })
    }
}
