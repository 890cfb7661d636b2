//! The kept record (a finished job kept with its result) and its op.

use bytes::Bytes;

use super::{put_u32_bytes, Op, Reader, OP_KEPT};
use crate::Corrupt;

/// A finished job kept queryable with its result (its function keeps
/// results) until it expires. Its id is the job's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptRecord {
    /// The store key: the finished job's id.
    pub id: u64,
    /// The full handle the client was given.
    pub handle: Bytes,
    /// Function name.
    pub function: Bytes,
    /// Unique id as submitted (may be empty).
    pub unique: Bytes,
    /// 0 high, 1 normal, 2 low.
    pub priority: u8,
    /// Submitted as a background job.
    pub background: bool,
    /// 0 completed, 1 failed, 2 cancelled (others: corrupt).
    pub outcome: u8,
    /// Times the job was tried.
    pub attempts: u32,
    /// Submission time, Unix milliseconds.
    pub created_ms: u64,
    /// When its last run started, Unix milliseconds (None: never ran).
    pub started_ms: Option<u64>,
    /// When it finished, Unix milliseconds.
    pub finished_ms: u64,
    /// When it may be forgotten, Unix milliseconds.
    pub expires_ms: u64,
    /// Worker of the last run (empty: none).
    pub worker: Bytes,
    /// Its last error, if any.
    pub error: Option<Bytes>,
    /// The result bytes.
    pub result: Bytes,
    /// The job's history, encoded by the core; opaque to the store.
    pub history: Bytes,
}

impl KeptRecord {
    /// The record with its byte fields copied out of the buffer they were
    /// decoded from (see [`ScheduleRecord::detached`]): a kept record lives
    /// for its TTL, and must not pin a whole log file's bytes meanwhile.
    pub fn detached(self) -> KeptRecord {
        let own = |b: Bytes| Bytes::copy_from_slice(&b);
        KeptRecord {
            handle: own(self.handle),
            function: own(self.function),
            unique: own(self.unique),
            worker: own(self.worker),
            error: self.error.map(own),
            result: own(self.result),
            history: own(self.history),
            ..self
        }
    }
}
/// Flag bits of a Kept op; the other bits are reserved (corruption). The
/// start time and the error are in the op only when their bit is set.
pub(super) const KEPT_BACKGROUND: u8 = 1;
pub(super) const KEPT_STARTED: u8 = 2;
pub(super) const KEPT_ERROR: u8 = 4;

/// The largest outcome a Kept op may hold (2: cancelled).
pub const KEPT_LAST_OUTCOME: u8 = 2;

/// Appends a `Kept` op (without cloning the record): tag, id, outcome,
/// flags, priority, attempts, creation time, start time (only with
/// [`KEPT_STARTED`]), finish and expiry times, then the length-prefixed
/// handle, function, unique, worker, error (only with [`KEPT_ERROR`]),
/// result and history.
pub fn encode_kept(k: &KeptRecord, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.push(OP_KEPT);
    out.extend_from_slice(&k.id.to_le_bytes());
    out.push(k.outcome);
    let mut flags = 0;
    if k.background {
        flags |= KEPT_BACKGROUND;
    }
    if k.started_ms.is_some() {
        flags |= KEPT_STARTED;
    }
    if k.error.is_some() {
        flags |= KEPT_ERROR;
    }
    out.push(flags);
    out.push(k.priority);
    out.extend_from_slice(&k.attempts.to_le_bytes());
    out.extend_from_slice(&k.created_ms.to_le_bytes());
    if let Some(t) = k.started_ms {
        out.extend_from_slice(&t.to_le_bytes());
    }
    out.extend_from_slice(&k.finished_ms.to_le_bytes());
    out.extend_from_slice(&k.expires_ms.to_le_bytes());
    for field in [&k.handle, &k.function, &k.unique, &k.worker] {
        put_u32_bytes(out, field);
    }
    if let Some(e) = &k.error {
        put_u32_bytes(out, e);
    }
    put_u32_bytes(out, &k.result);
    put_u32_bytes(out, &k.history);
    out.len() - start
}
impl Reader<'_> {
    /// Decodes a Kept op after its tag.
    pub(super) fn kept(&mut self) -> Result<Op, Corrupt> {
        let id = self.id()?;
        let outcome = self.u8()?;
        if outcome > KEPT_LAST_OUTCOME {
            return Err(Corrupt(format!(
                "kept job {id} has unknown outcome {outcome}"
            )));
        }
        let flags = self.u8()?;
        if flags & !(KEPT_BACKGROUND | KEPT_STARTED | KEPT_ERROR) != 0 {
            return Err(Corrupt(format!(
                "kept job {id} has unknown flags {flags:#04x}"
            )));
        }
        let priority = self.u8()?;
        let attempts = self.u32()?;
        let created_ms = self.u64()?;
        let started_ms = if flags & KEPT_STARTED != 0 {
            Some(self.u64()?)
        } else {
            None
        };
        let finished_ms = self.u64()?;
        let expires_ms = self.u64()?;
        let mut field = || -> Result<Bytes, Corrupt> {
            let n = self.u32()? as usize;
            self.bytes(n)
        };
        let handle = field()?;
        let function = field()?;
        let unique = field()?;
        let worker = field()?;
        let error = if flags & KEPT_ERROR != 0 {
            Some(field()?)
        } else {
            None
        };
        let result = field()?;
        let history = field()?;
        Ok(Op::Kept(Box::new(KeptRecord {
            id,
            handle,
            function,
            unique,
            priority,
            background: flags & KEPT_BACKGROUND != 0,
            outcome,
            attempts,
            created_ms,
            started_ms,
            finished_ms,
            expires_ms,
            worker,
            error,
            result,
            history,
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::kept;
    use crate::record::MAX_ID;

    #[test]
    fn a_kept_record_with_unknown_flags_or_outcome_or_an_id_past_max_is_corrupt() {
        let mut payload = Vec::new();
        encode_kept(&kept(1, 2, Some(5), Some(b"e"), true), &mut payload);
        // Outcome and flags sit after the tag and id.
        let (outcome_at, flags_at) = (1 + 8, 1 + 8 + 1);
        assert_eq!(
            payload[flags_at],
            KEPT_BACKGROUND | KEPT_STARTED | KEPT_ERROR
        );
        assert!(Op::decode_all(&Bytes::from(payload.clone())).is_ok());
        let mut bad = payload.clone();
        bad[flags_at] |= 8;
        let err = Op::decode_all(&Bytes::from(bad)).expect_err("unknown flag");
        assert!(err.to_string().contains("flags"), "{err}");
        for outcome in [3, 9, 255] {
            let mut bad = payload.clone();
            bad[outcome_at] = outcome;
            let err = Op::decode_all(&Bytes::from(bad)).expect_err("unknown outcome");
            assert!(err.to_string().contains("outcome"), "{err}");
        }
        for op in [
            Op::Kept(Box::new(kept(MAX_ID + 1, 0, None, None, false))),
            Op::Forget(u64::MAX),
        ] {
            let mut payload = Vec::new();
            op.encode(&mut payload);
            let err = Op::decode_all(&Bytes::from(payload)).expect_err("id past MAX_ID");
            assert!(err.to_string().contains(&MAX_ID.to_string()), "{err}");
        }
    }
}
