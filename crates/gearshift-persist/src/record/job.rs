//! The job record and its dead mark, with the job ops that carry more
//! than fixed-size fields: Add and Dead are encoded here, and Add, Retry
//! and Dead decoded here (Done and Update, an id and a count, are encoded
//! and decoded inline in the parent, as is Retry's encoding).

use bytes::Bytes;

use super::{put_u32_bytes, Op, Reader, NO_DUE, OP_ADD, OP_DEAD};
use crate::Corrupt;

/// A job as stored: everything needed to rebuild it after a restart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRecord {
    /// The store key: the number at the end of the handle. Never reused.
    pub id: u64,
    /// The full handle the client was given.
    pub handle: Bytes,
    /// Function name.
    pub function: Bytes,
    /// Unique id as submitted (may be empty; never a key).
    pub unique: Bytes,
    /// 0 high, 1 normal, 2 low.
    pub priority: u8,
    /// Workload.
    pub data: Bytes,
    /// Reducer of a background reduce job.
    pub reducer: Option<Bytes>,
    /// Due time of an epoch job, Unix milliseconds.
    pub due_ms: Option<u64>,
    /// Times the job went back to the queue.
    pub attempts: u32,
    /// Submission time, Unix milliseconds.
    pub created_ms: u64,
}

/// Why and when a job died (used all its attempts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadMark {
    /// When it died, Unix milliseconds.
    pub died_ms: u64,
    /// Its last error, as the worker reported it.
    pub error: Bytes,
}
/// Appends an `Add` op for `r` (without cloning the record).
pub fn encode_add(r: &JobRecord, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.push(OP_ADD);
    out.extend_from_slice(&r.id.to_le_bytes());
    out.extend_from_slice(&r.created_ms.to_le_bytes());
    out.extend_from_slice(&r.due_ms.unwrap_or(NO_DUE).to_le_bytes());
    out.extend_from_slice(&r.attempts.to_le_bytes());
    out.push(r.priority);
    out.push(u8::from(r.reducer.is_some()));
    put_u32_bytes(out, &r.handle);
    put_u32_bytes(out, &r.function);
    put_u32_bytes(out, &r.unique);
    if let Some(red) = &r.reducer {
        put_u32_bytes(out, red);
    }
    put_u32_bytes(out, &r.data);
    out.len() - start
}

/// Appends a `Dead` op (without cloning the mark).
pub fn encode_dead(id: u64, attempts: u32, mark: &DeadMark, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.push(OP_DEAD);
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&attempts.to_le_bytes());
    out.extend_from_slice(&mark.died_ms.to_le_bytes());
    put_u32_bytes(out, &mark.error);
    out.len() - start
}
impl Reader<'_> {
    /// Decodes an Add op after its tag.
    pub(super) fn add(&mut self) -> Result<Op, Corrupt> {
        let id = self.id()?;
        let created_ms = self.u64()?;
        let due = self.u64()?;
        let attempts = self.u32()?;
        let priority = self.u8()?;
        let has_reducer = self.u8()? != 0;
        let n = self.u32()? as usize;
        let handle = self.bytes(n)?;
        let n = self.u32()? as usize;
        let function = self.bytes(n)?;
        let n = self.u32()? as usize;
        let unique = self.bytes(n)?;
        let reducer = if has_reducer {
            let n = self.u32()? as usize;
            Some(self.bytes(n)?)
        } else {
            None
        };
        let n = self.u32()? as usize;
        let data = self.bytes(n)?;
        Ok(Op::Add(JobRecord {
            id,
            handle,
            function,
            unique,
            priority,
            data,
            reducer,
            due_ms: (due != NO_DUE).then_some(due),
            attempts,
            created_ms,
        }))
    }

    /// Decodes a Retry op after its tag.
    pub(super) fn retry(&mut self) -> Result<Op, Corrupt> {
        let id = self.id()?;
        let attempts = self.u32()?;
        let due = self.u64()?;
        Ok(Op::Retry {
            id,
            attempts,
            due_ms: (due != NO_DUE).then_some(due),
        })
    }

    /// Decodes a Dead op after its tag.
    pub(super) fn dead(&mut self) -> Result<Op, Corrupt> {
        let id = self.id()?;
        let attempts = self.u32()?;
        let died_ms = self.u64()?;
        let n = self.u32()? as usize;
        let error = self.bytes(n)?;
        Ok(Op::Dead {
            id,
            attempts,
            mark: DeadMark { died_ms, error },
        })
    }
}
