//! Reading a frame's ops without decoding their records: what compaction
//! needs to copy live jobs without rebuilding them.

use super::kept::{KEPT_ERROR, KEPT_STARTED};
use super::{
    last_op, unknown_op, FORMAT_VERSION, OP_ADD, OP_DEAD, OP_DONE, OP_FORGET, OP_FUNCTION, OP_KEPT,
    OP_RESERVE, OP_RETRY, OP_SCHEDULE, OP_UNSCHEDULE, OP_UPDATE,
};
use crate::Corrupt;

/// An op as it lies in a frame, its record not decoded: what compaction
/// needs to copy live jobs without rebuilding them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawOp<'a> {
    /// A new job: its id and its whole encoded op.
    Add {
        /// Job id.
        id: u64,
        /// The op's bytes, tag included.
        bytes: &'a [u8],
    },
    /// The end of a job.
    Done(u64),
    /// A changed attempt count.
    Update {
        /// Job id.
        id: u64,
        /// New count.
        attempts: u32,
    },
    /// A handle reservation.
    Reserve(u64),
    /// A job back to wait for a retry, or revived.
    Retry {
        /// Job id.
        id: u64,
        /// New count.
        attempts: u32,
        /// Its new due time as stored (`u64::MAX`: none), ready to patch
        /// into its Add at [`ADD_DUE_AT`].
        due_word: u64,
    },
    /// A job that died.
    Dead {
        /// Job id.
        id: u64,
        /// Its final count.
        attempts: u32,
        /// When it died.
        died_ms: u64,
        /// Its last error (borrowed from the frame).
        error: &'a [u8],
    },
    /// A schedule, new or replacing one: its id and its whole encoded op.
    Schedule {
        /// Schedule id.
        id: u64,
        /// The op's bytes, tag included.
        bytes: &'a [u8],
    },
    /// A schedule dropped.
    Unschedule(u64),
    /// A kept record, new or replacing one: its id and its whole encoded op.
    Kept {
        /// Kept record id.
        id: u64,
        /// The op's bytes, tag included.
        bytes: &'a [u8],
    },
    /// A kept record dropped.
    Forget(u64),
    /// A function's settings: its name, whether they are all at their
    /// defaults (the record then goes), and the whole encoded op.
    Function {
        /// The function's name (borrowed from the frame).
        name: &'a [u8],
        /// Nothing set ([`super::FunctionRecord::is_default`]).
        default: bool,
        /// The op's bytes, tag included.
        bytes: &'a [u8],
    },
}

/// Where the due time (u64, little-endian, `u64::MAX` for none) sits in an
/// encoded Add op: after the tag, id and creation time.
pub const ADD_DUE_AT: usize = 1 + 8 + 8;

/// Where the attempt count (u32, little-endian) sits in an encoded Add op:
/// after the tag, id, creation and due times.
pub const ADD_ATTEMPTS_AT: usize = ADD_DUE_AT + 8;

/// Walks the ops of a frame payload, handing each to `f` without decoding
/// records (no allocation).
pub fn scan_ops<'a>(payload: &'a [u8], f: impl FnMut(RawOp<'a>)) -> Result<(), Corrupt> {
    scan_ops_in(FORMAT_VERSION, payload, f)
}

/// [`scan_ops`] for a frame of a file of format `version`: the ops that
/// version does not have are corruption, as in [`Op::decode_each_in`].
pub fn scan_ops_in<'a>(
    version: u32,
    payload: &'a [u8],
    mut f: impl FnMut(RawOp<'a>),
) -> Result<(), Corrupt> {
    let mut pos = 0;
    let short = || Corrupt("op runs past the end of its frame".into());
    let take = |pos: &mut usize, n: usize| -> Result<&'a [u8], Corrupt> {
        let end = pos
            .checked_add(n)
            .filter(|&e| e <= payload.len())
            .ok_or_else(short)?;
        let s = &payload[*pos..end];
        *pos = end;
        Ok(s)
    };
    let u64_at = |pos: &mut usize| -> Result<u64, Corrupt> {
        let b = take(pos, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    };
    let u32_at = |pos: &mut usize| -> Result<u32, Corrupt> {
        let b = take(pos, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    while pos < payload.len() {
        let start = pos;
        let tag = take(&mut pos, 1)?[0];
        if tag > last_op(version) {
            return Err(unknown_op(tag, version));
        }
        match tag {
            OP_ADD => {
                let id = u64_at(&mut pos)?;
                take(&mut pos, 8 + 8 + 4 + 1)?;
                let has_reducer = take(&mut pos, 1)?[0] != 0;
                let fields = if has_reducer { 5 } else { 4 };
                for _ in 0..fields {
                    let n = u32_at(&mut pos)? as usize;
                    take(&mut pos, n)?;
                }
                f(RawOp::Add {
                    id,
                    bytes: &payload[start..pos],
                });
            }
            OP_DONE => f(RawOp::Done(u64_at(&mut pos)?)),
            OP_UPDATE => {
                let id = u64_at(&mut pos)?;
                let attempts = u32_at(&mut pos)?;
                f(RawOp::Update { id, attempts });
            }
            OP_RESERVE => f(RawOp::Reserve(u64_at(&mut pos)?)),
            OP_RETRY => {
                let id = u64_at(&mut pos)?;
                let attempts = u32_at(&mut pos)?;
                let due_word = u64_at(&mut pos)?;
                f(RawOp::Retry {
                    id,
                    attempts,
                    due_word,
                });
            }
            OP_DEAD => {
                let id = u64_at(&mut pos)?;
                let attempts = u32_at(&mut pos)?;
                let died_ms = u64_at(&mut pos)?;
                let n = u32_at(&mut pos)? as usize;
                let error = take(&mut pos, n)?;
                f(RawOp::Dead {
                    id,
                    attempts,
                    died_ms,
                    error,
                });
            }
            OP_SCHEDULE => {
                let id = u64_at(&mut pos)?;
                // Next firing, flags, priority.
                take(&mut pos, 8 + 1 + 1)?;
                for _ in 0..5 {
                    let n = u32_at(&mut pos)? as usize;
                    take(&mut pos, n)?;
                }
                f(RawOp::Schedule {
                    id,
                    bytes: &payload[start..pos],
                });
            }
            OP_UNSCHEDULE => f(RawOp::Unschedule(u64_at(&mut pos)?)),
            OP_KEPT => {
                let id = u64_at(&mut pos)?;
                // Outcome, flags, priority.
                let head = take(&mut pos, 3)?;
                let flags = head[1];
                // Attempts, creation time, start time if any, finish and
                // expiry times.
                let started = if flags & KEPT_STARTED != 0 { 8 } else { 0 };
                take(&mut pos, 4 + 8 + started + 8 + 8)?;
                let fields = if flags & KEPT_ERROR != 0 { 7 } else { 6 };
                for _ in 0..fields {
                    let n = u32_at(&mut pos)? as usize;
                    take(&mut pos, n)?;
                }
                f(RawOp::Kept {
                    id,
                    bytes: &payload[start..pos],
                });
            }
            OP_FORGET => f(RawOp::Forget(u64_at(&mut pos)?)),
            OP_FUNCTION => {
                let paused = take(&mut pos, 1)?[0] & 1 != 0;
                let mut limited = false;
                for _ in 0..3 {
                    limited |= (u64_at(&mut pos)? as i64) > 0;
                }
                let n = u32_at(&mut pos)? as usize;
                let name = take(&mut pos, n)?;
                f(RawOp::Function {
                    name,
                    default: !paused && !limited,
                    bytes: &payload[start..pos],
                });
            }
            other => return Err(unknown_op(other, version)),
        }
    }
    Ok(())
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::{kept, record, sched};
    use crate::record::*;
    use bytes::Bytes;

    #[test]
    fn scan_ops_agrees_with_the_encoder_and_decoder() {
        let ops = vec![
            Op::Reserve(100),
            Op::Add(record(1, "", None, 0)),
            Op::Update { id: 1, attempts: 3 },
            Op::Add(record(2, "u-2", Some("reduce"), 7)),
            Op::Retry {
                id: 2,
                attempts: 8,
                due_ms: Some(5678),
            },
            Op::Retry {
                id: 2,
                attempts: 9,
                due_ms: None,
            },
            Op::Dead {
                id: 2,
                attempts: 10,
                mark: DeadMark {
                    died_ms: 77,
                    error: Bytes::from_static(b"worker said no"),
                },
            },
            Op::Schedule(sched(3, Some(1_900_000_000_000), true, false)),
            Op::Schedule(sched(3, None, false, true)),
            Op::Unschedule(3),
            Op::Done(1),
            Op::Kept(Box::new(kept(1, 0, Some(20), None, true))),
            Op::Kept(Box::new(kept(1, 1, None, Some(b"it broke"), false))),
            Op::Kept(Box::new(kept(4, 2, Some(u64::MAX), Some(b""), true))),
            Op::Forget(1),
            Op::Function(FunctionRecord {
                name: Bytes::from_static(b"f"),
                paused: true,
                max_queue: [0, 0, 0],
            }),
            Op::Function(FunctionRecord {
                name: Bytes::from_static(b"g"),
                paused: false,
                max_queue: [0, -1, 0],
            }),
        ];
        let mut payload = Vec::new();
        for op in &ops {
            op.encode(&mut payload);
        }
        let mut seen = Vec::new();
        scan_ops(&payload, |op| seen.push(op)).expect("scan");
        assert_eq!(seen.len(), ops.len());
        for (raw, op) in seen.iter().zip(&ops) {
            match (raw, op) {
                (RawOp::Add { id, bytes }, Op::Add(r)) => {
                    assert_eq!(*id, r.id);
                    // The raw bytes are exactly the op, and its attempt
                    // count and due time sit where compaction patches them.
                    let mut copy = bytes.to_vec();
                    copy[ADD_ATTEMPTS_AT..ADD_ATTEMPTS_AT + 4]
                        .copy_from_slice(&42u32.to_le_bytes());
                    copy[ADD_DUE_AT..ADD_DUE_AT + 8].copy_from_slice(&4242u64.to_le_bytes());
                    let decoded = Op::decode_all(&Bytes::from(copy.clone())).expect("decode");
                    let mut want = r.clone();
                    want.attempts = 42;
                    want.due_ms = Some(4242);
                    assert_eq!(decoded, vec![Op::Add(want.clone())]);
                    copy[ADD_DUE_AT..ADD_DUE_AT + 8].copy_from_slice(&NO_DUE.to_le_bytes());
                    want.due_ms = None;
                    let decoded = Op::decode_all(&Bytes::from(copy)).expect("decode");
                    assert_eq!(decoded, vec![Op::Add(want)]);
                }
                (
                    RawOp::Retry {
                        id,
                        attempts,
                        due_word: d,
                    },
                    Op::Retry {
                        id: i,
                        attempts: a,
                        due_ms,
                    },
                ) => {
                    assert_eq!((id, attempts, *d), (i, a, due_word(*due_ms)));
                }
                (
                    RawOp::Dead {
                        id,
                        attempts,
                        died_ms,
                        error,
                    },
                    Op::Dead {
                        id: i,
                        attempts: a,
                        mark,
                    },
                ) => {
                    assert_eq!((id, attempts, died_ms), (i, a, &mark.died_ms));
                    assert_eq!(*error, &mark.error[..]);
                }
                (RawOp::Schedule { id, bytes }, Op::Schedule(s)) => {
                    assert_eq!(*id, s.id);
                    // The raw bytes are exactly the op: compaction copies them.
                    let decoded = Op::decode_all(&Bytes::copy_from_slice(bytes)).expect("decode");
                    assert_eq!(decoded, vec![Op::Schedule(s.clone())]);
                }
                (RawOp::Unschedule(a), Op::Unschedule(b)) => assert_eq!(a, b),
                (RawOp::Kept { id, bytes }, Op::Kept(k)) => {
                    assert_eq!(*id, k.id);
                    // The raw bytes are exactly the op: compaction copies them.
                    let decoded = Op::decode_all(&Bytes::copy_from_slice(bytes)).expect("decode");
                    assert_eq!(decoded, vec![Op::Kept(k.clone())]);
                }
                (RawOp::Forget(a), Op::Forget(b)) => assert_eq!(a, b),
                (
                    RawOp::Function {
                        name,
                        default,
                        bytes,
                    },
                    Op::Function(f),
                ) => {
                    assert_eq!((*name, *default), (&f.name[..], f.is_default()));
                    let decoded = Op::decode_all(&Bytes::copy_from_slice(bytes)).expect("decode");
                    assert_eq!(decoded, vec![Op::Function(f.clone())]);
                }
                (RawOp::Done(a), Op::Done(b)) => assert_eq!(a, b),
                (RawOp::Update { id, attempts }, Op::Update { id: i, attempts: a }) => {
                    assert_eq!((id, attempts), (i, a));
                }
                (RawOp::Reserve(a), Op::Reserve(b)) => assert_eq!(a, b),
                other => panic!("mismatch {other:?}"),
            }
        }
        // Cut anywhere: only a cut at an op boundary scans cleanly; the
        // rest are refused, never read past the end.
        let mut ends = Vec::new();
        let mut at = 0;
        for op in &ops {
            at += op.encode(&mut Vec::new());
            ends.push(at);
        }
        for cut in 1..payload.len() {
            let clean = scan_ops(&payload[..cut], |_| {}).is_ok();
            assert_eq!(clean, ends.contains(&cut), "cut at {cut}");
        }
    }

    /// The two readers of a frame's payload, on any bytes and for either
    /// format version: they accept or refuse alike (the decoder also checks
    /// ids, so it may refuse what the scanner takes), with the same ops;
    /// decoded ops encode and decode back to themselves.
    fn agree(version: u32, payload: &[u8]) {
        let mut raw = Vec::new();
        let scanned = scan_ops_in(version, payload, |op| raw.push(op));
        let decoded = Op::decode_each_in(version, &Bytes::copy_from_slice(payload), |_, _| {});
        if scanned.is_err() {
            assert!(decoded.is_err(), "scanned refused what the decoder took");
        }
        let Ok(ops) = Op::decode_all(&Bytes::copy_from_slice(payload)) else {
            return;
        };
        assert_eq!(
            decoded.is_ok(),
            ops.iter().all(|op| op.min_version() <= version),
            "a file holds exactly its version's ops"
        );
        if decoded.is_err() {
            return;
        }
        assert!(scanned.is_ok(), "decoded but not scanned: {ops:?}");
        let ids = |op: &Op| match op {
            Op::Add(r) => (1, r.id, 0, 0, Vec::new()),
            Op::Done(id) => (2, *id, 0, 0, Vec::new()),
            Op::Update { id, attempts } => (3, *id, *attempts, 0, Vec::new()),
            Op::Reserve(upto) => (4, *upto, 0, 0, Vec::new()),
            Op::Retry {
                id,
                attempts,
                due_ms,
            } => (5, *id, *attempts, due_word(*due_ms), Vec::new()),
            Op::Dead { id, attempts, mark } => {
                (6, *id, *attempts, mark.died_ms, mark.error.to_vec())
            }
            Op::Schedule(s) => {
                let mut bytes = Vec::new();
                encode_schedule(s, &mut bytes);
                (7, s.id, 0, 0, bytes)
            }
            Op::Unschedule(id) => (8, *id, 0, 0, Vec::new()),
            Op::Kept(k) => {
                let mut bytes = Vec::new();
                encode_kept(k, &mut bytes);
                (9, k.id, 0, 0, bytes)
            }
            Op::Forget(id) => (10, *id, 0, 0, Vec::new()),
            Op::Started(id) => (11, *id, 0, 0, Vec::new()),
            Op::Function(f) => {
                let mut bytes = Vec::new();
                encode_function(f, &mut bytes);
                (12, 0, 0, 0, bytes)
            }
        };
        let raw_ids = |op: &RawOp<'_>| match op {
            RawOp::Add { id, .. } => (1, *id, 0, 0, Vec::new()),
            RawOp::Done(id) => (2, *id, 0, 0, Vec::new()),
            RawOp::Update { id, attempts } => (3, *id, *attempts, 0, Vec::new()),
            RawOp::Reserve(upto) => (4, *upto, 0, 0, Vec::new()),
            RawOp::Retry {
                id,
                attempts,
                due_word,
            } => (5, *id, *attempts, *due_word, Vec::new()),
            RawOp::Dead {
                id,
                attempts,
                died_ms,
                error,
            } => (6, *id, *attempts, *died_ms, error.to_vec()),
            RawOp::Schedule { id, bytes } => (7, *id, 0, 0, bytes.to_vec()),
            RawOp::Unschedule(id) => (8, *id, 0, 0, Vec::new()),
            RawOp::Kept { id, bytes } => (9, *id, 0, 0, bytes.to_vec()),
            RawOp::Forget(id) => (10, *id, 0, 0, Vec::new()),
            RawOp::Function { bytes, .. } => (12, 0, 0, 0, bytes.to_vec()),
        };
        let a: Vec<_> = ops.iter().map(ids).collect();
        let b: Vec<_> = raw.iter().map(raw_ids).collect();
        assert_eq!(a, b);
        let mut again = Vec::new();
        for op in &ops {
            op.encode(&mut again);
        }
        assert_eq!(Op::decode_all(&Bytes::from(again)).expect("re-decode"), ops);
    }

    #[test]
    fn a_version_1_payload_refuses_the_version_2_ops() {
        let dead = Op::Dead {
            id: 1,
            attempts: 3,
            mark: DeadMark {
                died_ms: 5,
                error: Bytes::from_static(b"boom"),
            },
        };
        let retry = Op::Retry {
            id: 1,
            attempts: 1,
            due_ms: None,
        };
        let schedule = Op::Schedule(sched(2, None, false, false));
        let kept = Op::Kept(Box::new(kept(3, 0, None, None, false)));
        for op in [
            retry,
            dead,
            schedule,
            Op::Unschedule(2),
            kept,
            Op::Forget(3),
        ] {
            let mut payload = Vec::new();
            Op::Done(9).encode(&mut payload);
            op.encode(&mut payload);
            let bytes = Bytes::from(payload.clone());
            assert!(Op::decode_each_in(2, &bytes, |_, _| {}).is_ok());
            for err in [
                Op::decode_each_in(1, &bytes, |_, _| {}).expect_err("decoder"),
                scan_ops_in(1, &payload, |_| {}).expect_err("scanner"),
            ] {
                let msg = err.to_string();
                assert!(msg.contains("format version 1"), "{msg}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        #[test]
        fn decoder_and_scanner_agree_on_any_payload(
            version in 1u32..=FORMAT_VERSION,
            payload in proptest::collection::vec(
                proptest::prop_oneof![
                    4 => 0u8..=12,
                    1 => proptest::prelude::any::<u8>(),
                ],
                0..160,
            ),
        ) {
            agree(version, &payload);
        }
    }
}
