//! The schedule record (a recurring job) and its op.

use bytes::Bytes;

use super::{due_word, put_u32_bytes, Op, Reader, NO_DUE, OP_SCHEDULE};
use crate::Corrupt;

/// A recurring job (schedule) as stored. Its id comes from the same counter
/// as job ids and is never reused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScheduleRecord {
    /// The store key, from the job id counter.
    pub id: u64,
    /// The full handle the client was given.
    pub handle: Bytes,
    /// The five time fields, space-separated.
    pub when: Bytes,
    /// Day of week counts from Monday = 0 (SUBMIT_JOB_SCHED), else Sunday = 0 (cron).
    pub monday_zero: bool,
    /// Function of its jobs.
    pub function: Bytes,
    /// Unique id of its jobs (may be empty).
    pub unique: Bytes,
    /// Workload of its jobs.
    pub data: Bytes,
    /// 0 high, 1 normal, 2 low.
    pub priority: u8,
    /// Next firing, Unix ms; None: never fires again (`u64::MAX` reads
    /// back as `None`).
    pub next_ms: Option<u64>,
    /// Declared in the config file.
    pub from_config: bool,
}

impl ScheduleRecord {
    /// The record with its byte fields copied out of whatever buffer they
    /// were decoded from: a schedule may live as long as the server, and
    /// must not keep a whole log file's bytes alive with it.
    pub fn detached(self) -> ScheduleRecord {
        let own = |b: Bytes| Bytes::copy_from_slice(&b);
        ScheduleRecord {
            handle: own(self.handle),
            when: own(self.when),
            function: own(self.function),
            unique: own(self.unique),
            data: own(self.data),
            ..self
        }
    }
}
/// Flag bits of a Schedule op; the other bits are reserved (corruption).
const SCHED_MONDAY_ZERO: u8 = 1;
const SCHED_FROM_CONFIG: u8 = 2;
/// Appends a `Schedule` op (without cloning the record): tag, id, next
/// firing (`u64::MAX`: none), flags, priority, then the length-prefixed
/// handle, time fields, function, unique and data.
pub fn encode_schedule(s: &ScheduleRecord, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.push(OP_SCHEDULE);
    out.extend_from_slice(&s.id.to_le_bytes());
    out.extend_from_slice(&due_word(s.next_ms).to_le_bytes());
    let mut flags = 0;
    if s.monday_zero {
        flags |= SCHED_MONDAY_ZERO;
    }
    if s.from_config {
        flags |= SCHED_FROM_CONFIG;
    }
    out.push(flags);
    out.push(s.priority);
    for field in [&s.handle, &s.when, &s.function, &s.unique, &s.data] {
        put_u32_bytes(out, field);
    }
    out.len() - start
}
impl Reader<'_> {
    /// Decodes a Schedule op after its tag.
    pub(super) fn schedule(&mut self) -> Result<Op, Corrupt> {
        let id = self.id()?;
        let next = self.u64()?;
        let flags = self.u8()?;
        if flags & !(SCHED_MONDAY_ZERO | SCHED_FROM_CONFIG) != 0 {
            return Err(Corrupt(format!(
                "schedule {id} has unknown flags {flags:#04x}"
            )));
        }
        let priority = self.u8()?;
        let mut field = || -> Result<Bytes, Corrupt> {
            let n = self.u32()? as usize;
            self.bytes(n)
        };
        let handle = field()?;
        let when = field()?;
        let function = field()?;
        let unique = field()?;
        let data = field()?;
        Ok(Op::Schedule(ScheduleRecord {
            id,
            handle,
            when,
            monday_zero: flags & SCHED_MONDAY_ZERO != 0,
            function,
            unique,
            data,
            priority,
            next_ms: (next != NO_DUE).then_some(next),
            from_config: flags & SCHED_FROM_CONFIG != 0,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::sched;
    use crate::record::MAX_ID;

    #[test]
    fn a_schedule_with_unknown_flags_or_an_id_past_max_is_corrupt() {
        let mut payload = Vec::new();
        encode_schedule(&sched(1, None, true, true), &mut payload);
        // Flags sit after the tag, id and next firing.
        let flags_at = 1 + 8 + 8;
        assert_eq!(payload[flags_at], SCHED_MONDAY_ZERO | SCHED_FROM_CONFIG);
        payload[flags_at] |= 4;
        let err = Op::decode_all(&Bytes::from(payload)).expect_err("unknown flag");
        assert!(err.to_string().contains("flags"), "{err}");
        for op in [
            Op::Schedule(sched(MAX_ID + 1, None, false, false)),
            Op::Unschedule(u64::MAX),
        ] {
            let mut payload = Vec::new();
            op.encode(&mut payload);
            let err = Op::decode_all(&Bytes::from(payload)).expect_err("id past MAX_ID");
            assert!(err.to_string().contains(&MAX_ID.to_string()), "{err}");
        }
    }
}
