//! A function's admin settings (paused, queue limits) and their op.

use bytes::Bytes;

use super::{put_u32_bytes, Op, Reader, OP_FUNCTION};
use crate::Corrupt;

/// What an admin set on a function: whether it is paused, and its queue
/// limits per priority (high, normal, low; 0 or less: none). Stored by
/// name; settings at their defaults are not kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionRecord {
    /// The function's name.
    pub name: Bytes,
    /// Workers get none of its jobs.
    pub paused: bool,
    /// `maxqueue`'s limits: high, normal, low.
    pub max_queue: [i64; 3],
}

impl FunctionRecord {
    /// Nothing set: a store drops the record rather than keep it.
    pub fn is_default(&self) -> bool {
        !self.paused && self.max_queue.iter().all(|&m| m <= 0)
    }

    /// The record with its name copied out of the buffer it was decoded
    /// from (see [`super::ScheduleRecord::detached`]).
    pub fn detached(self) -> FunctionRecord {
        FunctionRecord {
            name: Bytes::copy_from_slice(&self.name),
            ..self
        }
    }
}

/// Flag bits of a Function op; the other bits are reserved (corruption).
const FUNC_PAUSED: u8 = 1;

/// Appends a `Function` op: tag, flags, the three limits, then the
/// length-prefixed name.
pub fn encode_function(f: &FunctionRecord, out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.push(OP_FUNCTION);
    out.push(if f.paused { FUNC_PAUSED } else { 0 });
    for m in f.max_queue {
        out.extend_from_slice(&m.to_le_bytes());
    }
    put_u32_bytes(out, &f.name);
    out.len() - start
}

impl Reader<'_> {
    /// Decodes a Function op after its tag.
    pub(super) fn function(&mut self) -> Result<Op, Corrupt> {
        let flags = self.u8()?;
        if flags & !FUNC_PAUSED != 0 {
            return Err(Corrupt(format!(
                "function settings with unknown flags {flags:#04x}"
            )));
        }
        let mut max_queue = [0i64; 3];
        for m in &mut max_queue {
            *m = self.u64()? as i64;
        }
        let n = self.u32()? as usize;
        let name = self.bytes(n)?;
        Ok(Op::Function(FunctionRecord {
            name,
            paused: flags & FUNC_PAUSED != 0,
            max_queue,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(paused: bool, max_queue: [i64; 3]) -> FunctionRecord {
        FunctionRecord {
            name: Bytes::from_static(b"resize \x00 it"),
            paused,
            max_queue,
        }
    }

    #[test]
    fn settings_round_trip_and_unknown_flags_are_corrupt() {
        for r in [rec(true, [0, 0, 0]), rec(false, [-1, 5, i64::MAX])] {
            let mut payload = Vec::new();
            Op::Function(r.clone()).encode(&mut payload);
            assert_eq!(
                Op::decode_all(&Bytes::from(payload)),
                Ok(vec![Op::Function(r)])
            );
        }
        let mut payload = Vec::new();
        encode_function(&rec(true, [1, 2, 3]), &mut payload);
        payload[1] |= 2;
        let err = Op::decode_all(&Bytes::from(payload)).expect_err("unknown flag");
        assert!(err.to_string().contains("flags"), "{err}");
        assert!(rec(false, [0, -3, 0]).is_default());
        assert!(!rec(false, [0, 1, 0]).is_default());
    }

    #[test]
    fn a_version_2_file_has_no_function_op() {
        let mut payload = Vec::new();
        encode_function(&rec(true, [0; 3]), &mut payload);
        let err = Op::decode_each_in(2, &Bytes::from(payload), |_, _| {}).expect_err("v2");
        assert!(err.to_string().contains("version 2"), "{err}");
    }
}
