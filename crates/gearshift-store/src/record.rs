//! The persisted job record, kept apart from the core's runtime job state,
//! and its binary encoding inside a log frame.
//!
//! # Changing the format
//! The log file starts with a header carrying [`FORMAT_VERSION`]. Any change
//! to how an op is encoded, or a new op code, bumps the version. A reader
//! decodes every version up to its own (keep the old decoder beside the new
//! one) and refuses a newer file with [`StoreError::NewerFormat`] instead of
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

use bytes::Bytes;

use crate::error::StoreError;

/// Version written into every log header.
pub const FORMAT_VERSION: u32 = 2;

/// The largest job id a store keeps: what a signed 64-bit integer holds
/// (an SQL `BIGINT`), and far beyond any counter that starts at 1. A log
/// naming a larger id (or reserving past `MAX_ID + 1`) is corrupt.
pub const MAX_ID: u64 = i64::MAX as u64;

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
    pub(crate) fn detached(self) -> ScheduleRecord {
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
    pub(crate) fn detached(self) -> KeptRecord {
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
    /// version 2.)
    Kept(KeptRecord),
    /// A kept record was dropped (expired, or removed by an admin); an
    /// unknown id changes nothing. (Format version 2.)
    Forget(u64),
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
const NO_DUE: u64 = u64::MAX;

/// Flag bits of a Schedule op; the other bits are reserved (corruption).
const SCHED_MONDAY_ZERO: u8 = 1;
const SCHED_FROM_CONFIG: u8 = 2;

/// Flag bits of a Kept op; the other bits are reserved (corruption). The
/// start time and the error are in the op only when their bit is set.
const KEPT_BACKGROUND: u8 = 1;
const KEPT_STARTED: u8 = 2;
const KEPT_ERROR: u8 = 4;

/// The largest outcome a Kept op may hold (2: cancelled).
pub(crate) const KEPT_LAST_OUTCOME: u8 = 2;

/// The highest op code a file of format `version` may hold: decoding a v1
/// file refuses the v2 ops, which no v1 writer could have put there.
fn last_op(version: u32) -> u8 {
    if version >= 2 {
        OP_FORGET
    } else {
        OP_RESERVE
    }
}

/// The error for an op code outside what the file's version holds.
fn unknown_op(code: u8, version: u32) -> StoreError {
    if (OP_ADD..=OP_FORGET).contains(&code) {
        StoreError::Corrupt(format!(
            "op code {code} in a file of format version {version}, which has no such op"
        ))
    } else {
        StoreError::Corrupt(format!("unknown op code {code}"))
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
    /// Appends the op's encoding to `out`; returns the bytes written.
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
        }
        out.len() - start
    }

    /// Whether a file must be of format version 2 or later to hold this op.
    pub fn needs_v2(&self) -> bool {
        matches!(
            self,
            Op::Retry { .. }
                | Op::Dead { .. }
                | Op::Schedule(_)
                | Op::Unschedule(_)
                | Op::Kept(_)
                | Op::Forget(_)
        )
    }

    /// Decodes every op of a frame payload.
    pub fn decode_all(payload: &Bytes) -> Result<Vec<Op>, StoreError> {
        let mut ops = Vec::new();
        Op::decode_each(payload, |op, _| ops.push(op))?;
        Ok(ops)
    }

    /// Decodes the ops of a frame payload one at a time, handing each to
    /// `f` with the length of its encoding.
    pub fn decode_each(payload: &Bytes, f: impl FnMut(Op, usize)) -> Result<(), StoreError> {
        Op::decode_each_in(FORMAT_VERSION, payload, f)
    }

    /// [`Op::decode_each`] for a frame of a file of format `version`: the
    /// ops that version does not have are corruption.
    pub fn decode_each_in(
        version: u32,
        payload: &Bytes,
        mut f: impl FnMut(Op, usize),
    ) -> Result<(), StoreError> {
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

struct Reader<'a> {
    buf: &'a Bytes,
    pos: usize,
    /// Format version of the file the payload comes from.
    version: u32,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], StoreError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let end =
            end.ok_or_else(|| StoreError::Corrupt("op runs past the end of its frame".into()))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, StoreError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, StoreError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, StoreError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    fn bytes(&mut self, n: usize) -> Result<Bytes, StoreError> {
        let start = self.pos;
        self.take(n)?;
        Ok(self.buf.slice(start..self.pos))
    }

    /// A job id, refused beyond [`MAX_ID`].
    fn id(&mut self) -> Result<u64, StoreError> {
        let id = self.u64()?;
        if id > MAX_ID {
            return Err(StoreError::Corrupt(format!(
                "job id {id} is beyond the largest a store keeps ({MAX_ID})"
            )));
        }
        Ok(id)
    }

    fn op(&mut self) -> Result<Op, StoreError> {
        let code = self.u8()?;
        if code > last_op(self.version) {
            return Err(unknown_op(code, self.version));
        }
        match code {
            OP_ADD => {
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
            OP_DONE => Ok(Op::Done(self.id()?)),
            OP_UPDATE => Ok(Op::Update {
                id: self.id()?,
                attempts: self.u32()?,
            }),
            OP_RESERVE => {
                let upto = self.u64()?;
                if upto > MAX_ID + 1 {
                    return Err(StoreError::Corrupt(format!(
                        "handle numbers reserved up to {upto}, beyond the largest job id a \
                         store keeps ({MAX_ID})"
                    )));
                }
                Ok(Op::Reserve(upto))
            }
            OP_RETRY => {
                let id = self.id()?;
                let attempts = self.u32()?;
                let due = self.u64()?;
                Ok(Op::Retry {
                    id,
                    attempts,
                    due_ms: (due != NO_DUE).then_some(due),
                })
            }
            OP_DEAD => {
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
            OP_SCHEDULE => {
                let id = self.id()?;
                let next = self.u64()?;
                let flags = self.u8()?;
                if flags & !(SCHED_MONDAY_ZERO | SCHED_FROM_CONFIG) != 0 {
                    return Err(StoreError::Corrupt(format!(
                        "schedule {id} has unknown flags {flags:#04x}"
                    )));
                }
                let priority = self.u8()?;
                let mut field = || -> Result<Bytes, StoreError> {
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
            OP_UNSCHEDULE => Ok(Op::Unschedule(self.id()?)),
            OP_KEPT => {
                let id = self.id()?;
                let outcome = self.u8()?;
                if outcome > KEPT_LAST_OUTCOME {
                    return Err(StoreError::Corrupt(format!(
                        "kept job {id} has unknown outcome {outcome}"
                    )));
                }
                let flags = self.u8()?;
                if flags & !(KEPT_BACKGROUND | KEPT_STARTED | KEPT_ERROR) != 0 {
                    return Err(StoreError::Corrupt(format!(
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
                let mut field = || -> Result<Bytes, StoreError> {
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
                Ok(Op::Kept(KeptRecord {
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
                }))
            }
            OP_FORGET => Ok(Op::Forget(self.id()?)),
            other => Err(unknown_op(other, self.version)),
        }
    }
}

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
}

/// Where the due time (u64, little-endian, `u64::MAX` for none) sits in an
/// encoded Add op: after the tag, id and creation time.
pub const ADD_DUE_AT: usize = 1 + 8 + 8;

/// Where the attempt count (u32, little-endian) sits in an encoded Add op:
/// after the tag, id, creation and due times.
pub const ADD_ATTEMPTS_AT: usize = ADD_DUE_AT + 8;

/// Walks the ops of a frame payload, handing each to `f` without decoding
/// records (no allocation).
pub fn scan_ops<'a>(payload: &'a [u8], f: impl FnMut(RawOp<'a>)) -> Result<(), StoreError> {
    scan_ops_in(FORMAT_VERSION, payload, f)
}

/// [`scan_ops`] for a frame of a file of format `version`: the ops that
/// version does not have are corruption, as in [`Op::decode_each_in`].
pub fn scan_ops_in<'a>(
    version: u32,
    payload: &'a [u8],
    mut f: impl FnMut(RawOp<'a>),
) -> Result<(), StoreError> {
    let mut pos = 0;
    let short = || StoreError::Corrupt("op runs past the end of its frame".into());
    let take = |pos: &mut usize, n: usize| -> Result<&'a [u8], StoreError> {
        let end = pos
            .checked_add(n)
            .filter(|&e| e <= payload.len())
            .ok_or_else(short)?;
        let s = &payload[*pos..end];
        *pos = end;
        Ok(s)
    };
    let u64_at = |pos: &mut usize| -> Result<u64, StoreError> {
        let b = take(pos, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    };
    let u32_at = |pos: &mut usize| -> Result<u32, StoreError> {
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
            other => return Err(unknown_op(other, version)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod raw_tests {
    use super::*;

    fn record(id: u64, unique: &str, reducer: Option<&str>, attempts: u32) -> JobRecord {
        JobRecord {
            id,
            handle: Bytes::from(format!("H:x:{id}")),
            function: Bytes::from_static(b"resize"),
            unique: Bytes::from(unique.to_string()),
            priority: 1,
            data: Bytes::from_static(b"payload bytes"),
            reducer: reducer.map(|r| Bytes::from(r.to_string())),
            due_ms: id.is_multiple_of(2).then_some(1234),
            attempts,
            created_ms: 99,
        }
    }

    fn sched(
        id: u64,
        next_ms: Option<u64>,
        monday_zero: bool,
        from_config: bool,
    ) -> ScheduleRecord {
        ScheduleRecord {
            id,
            handle: Bytes::from(format!("H:x:{id}")),
            when: Bytes::from_static(b"*/5 * * * 1-5"),
            monday_zero,
            function: Bytes::from_static(b"report"),
            unique: Bytes::from_static(b"nightly"),
            data: Bytes::from_static(b"bin\0ary"),
            priority: 2,
            next_ms,
            from_config,
        }
    }

    fn kept(
        id: u64,
        outcome: u8,
        started_ms: Option<u64>,
        error: Option<&'static [u8]>,
        background: bool,
    ) -> KeptRecord {
        KeptRecord {
            id,
            handle: Bytes::from(format!("H:x:{id}")),
            function: Bytes::from_static(b"resize"),
            unique: Bytes::from_static(b"u"),
            priority: 0,
            background,
            outcome,
            attempts: 3,
            created_ms: 10,
            started_ms,
            finished_ms: 30,
            expires_ms: 40,
            worker: Bytes::from_static(b"worker-1"),
            error: error.map(Bytes::from_static),
            result: Bytes::from_static(b"res\0ult"),
            history: Bytes::from_static(b"\x01\x02history"),
        }
    }

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
            Op::Kept(kept(1, 0, Some(20), None, true)),
            Op::Kept(kept(1, 1, None, Some(b"it broke"), false)),
            Op::Kept(kept(4, 2, Some(u64::MAX), Some(b""), true)),
            Op::Forget(1),
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
        if version < 2 {
            assert_eq!(
                decoded.is_ok(),
                !ops.iter().any(Op::needs_v2),
                "a v1 file holds exactly the v1 ops"
            );
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
        let kept = Op::Kept(kept(3, 0, None, None, false));
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
            Op::Kept(kept(MAX_ID + 1, 0, None, None, false)),
            Op::Forget(u64::MAX),
        ] {
            let mut payload = Vec::new();
            op.encode(&mut payload);
            let err = Op::decode_all(&Bytes::from(payload)).expect_err("id past MAX_ID");
            assert!(err.to_string().contains(&MAX_ID.to_string()), "{err}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]
        #[test]
        fn decoder_and_scanner_agree_on_any_payload(
            version in 1u32..=FORMAT_VERSION,
            payload in proptest::collection::vec(
                proptest::prop_oneof![
                    4 => 0u8..=11,
                    1 => proptest::prelude::any::<u8>(),
                ],
                0..160,
            ),
        ) {
            agree(version, &payload);
        }
    }
}
