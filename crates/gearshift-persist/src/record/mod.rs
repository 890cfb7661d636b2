//! The binary encoding of [`Op`] inside a log frame, and the records'
//! types (each beside its op's encoder and decoder).
//!
//! # Changing the format
//! The log file starts with a header carrying [`FORMAT_VERSION`]. Any change
//! to how an op is encoded, or a new op code, bumps the version. A reader
//! decodes every version up to its own (keep the old decoder beside the new
//! one) and refuses a newer file (the log store's `StoreError::NewerFormat`) instead of
//! guessing. Compaction always rewrites in the current version.
//!
//! ## Migrations
//! - v1 -> v2: v2 only adds ops ([`Op::Retry`], code 5, [`Op::Dead`], code
//!   6, [`Op::Schedule`], code 7, [`Op::Unschedule`], code 8, [`Op::Kept`],
//!   code 9, and [`Op::Forget`], code 10); every v1 op is encoded as before,
//!   so there is nothing to convert. A v1 file is read as it is (an op code
//!   past 4 in it is corruption); the store raises its header to 2 just
//!   before it first appends a v2 op to it, so an older reader refuses the
//!   file as newer instead of calling it corrupt. Compaction writes v2.
//!   (Ops 7 to 10 joined v2 before it was released, so no v2 file lacks
//!   them.)
//! - v2 -> v3: v3 only adds [`Op::Function`] (code 11), a function's admin
//!   settings; as before, an older file is read as it is and its header
//!   raised to 3 just before the first v3 op is appended.
//!
//! # Layout
//! - this file: [`Op`], the op codes, the version rules and the decoder's
//!   dispatch;
//! - `job`: [`JobRecord`], [`DeadMark`] and the Add and Dead ops;
//! - `schedule`: [`ScheduleRecord`] and its op;
//! - `kept`: [`KeptRecord`] and its op;
//! - `function`: [`FunctionRecord`] and its op;
//! - `raw`: [`RawOp`] and [`scan_ops`], reading ops without decoding them.

mod function;
mod job;
mod kept;
mod raw;
mod schedule;

#[cfg(test)]
mod fixtures;

use bytes::Bytes;

use crate::Corrupt;
pub use function::{encode_function, FunctionRecord};
pub use job::{encode_add, encode_dead, DeadMark, JobRecord};
pub use kept::KEPT_LAST_OUTCOME;
pub use kept::{encode_kept, KeptRecord};
pub use raw::{scan_ops, scan_ops_in, RawOp, ADD_ATTEMPTS_AT, ADD_DUE_AT};
pub use schedule::{encode_schedule, ScheduleRecord};

/// Version written into every log header.
pub const FORMAT_VERSION: u32 = 3;

/// The largest job id a store keeps: what a signed 64-bit integer holds
/// (an SQL `BIGINT`), and far beyond any counter that starts at 1. A log
/// naming a larger id (or reserving past `MAX_ID + 1`) is corrupt.
pub const MAX_ID: u64 = i64::MAX as u64;
/// One change to the stored set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A new job.
    Add(JobRecord),
    /// A job ended (completed, failed, cancelled, dropped).
    Done(u64),
    /// A job's attempt count changed.
    Update {
        /// Job id.
        id: u64,
        /// New attempt count.
        attempts: u32,
    },
    /// Handle numbers up to (excluding) this value may have been handed out.
    Reserve(u64),
    /// A job goes back to wait for a retry (or, for a dead job, is revived):
    /// its attempt count and the time it may run again (None: at once).
    /// Clears a dead mark. (Format version 2.)
    Retry {
        /// Job id.
        id: u64,
        /// New attempt count.
        attempts: u32,
        /// Not to run before this time, Unix milliseconds (`u64::MAX`
        /// reads back as `None`, as in an Add).
        due_ms: Option<u64>,
    },
    /// A job used all its attempts: kept as dead with its attempt count and
    /// mark. (Format version 2.)
    Dead {
        /// Job id.
        id: u64,
        /// Its final attempt count.
        attempts: u32,
        /// Why and when it died.
        mark: DeadMark,
    },
    /// A schedule, new or replacing the stored one with its id. A Done of
    /// its id leaves it alone. (Format version 2.)
    Schedule(ScheduleRecord),
    /// A schedule was dropped; an unknown id changes nothing. (Format
    /// version 2.)
    Unschedule(u64),
    /// A finished job kept with its result, new or replacing the kept
    /// record with its id. A Done of its id leaves it alone. (Format
    /// version 2.) Boxed: the largest record, and an op rides in every
    /// core effect.
    Kept(Box<KeptRecord>),
    /// A kept record was dropped (expired, or removed by an admin); an
    /// unknown id changes nothing. (Format version 2.)
    Forget(u64),
    /// A live job started a run: a store a cluster shares remembers it
    /// until the job's next Done, Update, Retry or Dead, so the node that
    /// takes over counts the cut-off run. Not written to the log (a
    /// restarted single node requeues its running jobs, as gearmand does).
    Started(u64),
    /// A function's admin settings, replacing the stored ones; settings at
    /// their defaults ([`FunctionRecord::is_default`]) remove them.
    /// (Format version 3.)
    Function(FunctionRecord),
}

const OP_ADD: u8 = 1;
const OP_DONE: u8 = 2;
const OP_UPDATE: u8 = 3;
const OP_RESERVE: u8 = 4;
const OP_RETRY: u8 = 5;
const OP_DEAD: u8 = 6;
const OP_SCHEDULE: u8 = 7;
const OP_UNSCHEDULE: u8 = 8;
const OP_KEPT: u8 = 9;
const OP_FORGET: u8 = 10;
const OP_FUNCTION: u8 = 11;
const NO_DUE: u64 = u64::MAX;

/// The highest op code a file of format `version` may hold: decoding a v1
/// file refuses the v2 ops, which no v1 writer could have put there.
fn last_op(version: u32) -> u8 {
    match version {
        0 | 1 => OP_RESERVE,
        2 => OP_FORGET,
        _ => OP_FUNCTION,
    }
}

/// The error for an op code outside what the file's version holds.
fn unknown_op(code: u8, version: u32) -> Corrupt {
    if (OP_ADD..=OP_FUNCTION).contains(&code) {
        Corrupt(format!(
            "op code {code} in a file of format version {version}, which has no such op"
        ))
    } else {
        Corrupt(format!("unknown op code {code}"))
    }
}

/// A due time as stored: `NO_DUE` for none.
fn due_word(due_ms: Option<u64>) -> u64 {
    due_ms.unwrap_or(NO_DUE)
}

fn put_u32_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

impl Op {
    /// Appends the op's encoding to `out`; returns the bytes written
    /// (none for [`Op::Started`], which the log does not keep).
    pub fn encode(&self, out: &mut Vec<u8>) -> usize {
        let start = out.len();
        match self {
            Op::Add(r) => {
                encode_add(r, out);
            }
            Op::Done(id) => {
                out.push(OP_DONE);
                out.extend_from_slice(&id.to_le_bytes());
            }
            Op::Update { id, attempts } => {
                out.push(OP_UPDATE);
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&attempts.to_le_bytes());
            }
            Op::Reserve(upto) => {
                out.push(OP_RESERVE);
                out.extend_from_slice(&upto.to_le_bytes());
            }
            Op::Retry {
                id,
                attempts,
                due_ms,
            } => {
                out.push(OP_RETRY);
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&attempts.to_le_bytes());
                out.extend_from_slice(&due_word(*due_ms).to_le_bytes());
            }
            Op::Dead { id, attempts, mark } => {
                encode_dead(*id, *attempts, mark, out);
            }
            Op::Schedule(s) => {
                encode_schedule(s, out);
            }
            Op::Unschedule(id) => {
                out.push(OP_UNSCHEDULE);
                out.extend_from_slice(&id.to_le_bytes());
            }
            Op::Kept(k) => {
                encode_kept(k, out);
            }
            Op::Forget(id) => {
                out.push(OP_FORGET);
                out.extend_from_slice(&id.to_le_bytes());
            }
            Op::Function(f) => {
                encode_function(f, out);
            }
            Op::Started(_) => {}
        }
        out.len() - start
    }

    /// The function an op names, for the ops that carry one.
    pub fn function(&self) -> Option<&[u8]> {
        match self {
            Op::Add(job) => Some(&job.function),
            Op::Schedule(s) => Some(&s.function),
            Op::Kept(k) => Some(&k.function),
            Op::Function(f) => Some(&f.name),
            _ => None,
        }
    }

    /// The oldest format version a file that holds this op may have.
    pub fn min_version(&self) -> u32 {
        match self {
            Op::Add(_) | Op::Done(_) | Op::Update { .. } | Op::Reserve(_) | Op::Started(_) => 1,
            Op::Retry { .. }
            | Op::Dead { .. }
            | Op::Schedule(_)
            | Op::Unschedule(_)
            | Op::Kept(_)
            | Op::Forget(_) => 2,
            Op::Function(_) => 3,
        }
    }

    /// Decodes every op of a frame payload.
    pub fn decode_all(payload: &Bytes) -> Result<Vec<Op>, Corrupt> {
        let mut ops = Vec::new();
        Op::decode_each(payload, |op, _| ops.push(op))?;
        Ok(ops)
    }

    /// Decodes the ops of a frame payload one at a time, handing each to
    /// `f` with the length of its encoding.
    pub fn decode_each(payload: &Bytes, f: impl FnMut(Op, usize)) -> Result<(), Corrupt> {
        Op::decode_each_in(FORMAT_VERSION, payload, f)
    }

    /// [`Op::decode_each`] for a frame of a file of format `version`: the
    /// ops that version does not have are corruption.
    pub fn decode_each_in(
        version: u32,
        payload: &Bytes,
        mut f: impl FnMut(Op, usize),
    ) -> Result<(), Corrupt> {
        let mut r = Reader {
            buf: payload,
            pos: 0,
            version,
        };
        while r.pos < payload.len() {
            let start = r.pos;
            let op = r.op()?;
            f(op, r.pos - start);
        }
        Ok(())
    }
}
struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
    /// Format version of the file the payload comes from.
    version: u32,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Corrupt> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end = end.ok_or_else(|| Corrupt("op runs past the end of its frame".into()))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, Corrupt> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, Corrupt> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, Corrupt> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn bytes(&mut self, n: usize) -> Result<Bytes, Corrupt> {
        let start = self.pos;
        self.take(n)?;
        Ok(self.buf.slice(start..self.pos))
    }

    /// A job id, refused beyond [`MAX_ID`].
    fn id(&mut self) -> Result<u64, Corrupt> {
        let id = self.u64()?;
        if id > MAX_ID {
            return Err(Corrupt(format!(
                "job id {id} is beyond the largest a store keeps ({MAX_ID})"
            )));
        }
        Ok(id)
    }

    fn op(&mut self) -> Result<Op, Corrupt> {
        let code = self.u8()?;
        if code > last_op(self.version) {
            return Err(unknown_op(code, self.version));
        }
        match code {
            OP_ADD => self.add(),
            OP_DONE => Ok(Op::Done(self.id()?)),
            OP_UPDATE => Ok(Op::Update {
                id: self.id()?,
                attempts: self.u32()?,
            }),
            OP_RESERVE => {
                let upto = self.u64()?;
                if upto > MAX_ID + 1 {
                    return Err(Corrupt(format!(
                        "handle numbers reserved up to {upto}, beyond the largest job id a \
                         store keeps ({MAX_ID})"
                    )));
                }
                Ok(Op::Reserve(upto))
            }
            OP_RETRY => self.retry(),
            OP_DEAD => self.dead(),
            OP_SCHEDULE => self.schedule(),
            OP_UNSCHEDULE => Ok(Op::Unschedule(self.id()?)),
            OP_KEPT => self.kept(),
            OP_FORGET => Ok(Op::Forget(self.id()?)),
            OP_FUNCTION => self.function(),
            other => Err(unknown_op(other, self.version)),
        }
    }
}
