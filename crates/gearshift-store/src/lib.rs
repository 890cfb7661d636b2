//! Durable job storage for Gearshift.
//!
//! A [`Store`] keeps the set of live background/epoch jobs, the dead ones
//! (jobs that used all their attempts, kept until retried or dropped), the
//! recurring jobs (schedules), the finished jobs kept with their results
//! (until they expire) and the handle counter's high-water mark. What it
//! keeps is the shared vocabulary of `gearshift-persist` ([`Op`] and the
//! records), the same types the core emits: a backend buffers ops with
//! [`Store::append`] and makes them durable together with one
//! [`Store::flush`], which is what lets the server group-commit every
//! submission that arrived while the previous flush ran.
//!
//! - [`record`]: the records, the ops and their encoding (re-exported from
//!   `gearshift-persist`, with the rule for changing the format).
//! - [`memory`]: an in-memory backend (tests; the semantics without a disk).
//! - [`log`]: the embedded default, an append-only log with checksummed
//!   frames, torn-tail recovery and compaction.
//! - [`postgres`]: a PostgreSQL backend (one node; TLS with rustls).
//! - [`fault`]: a wrapper that fails after N operations, for error-path tests.
//! - [`conformance`]: the suite every backend must pass.

mod batch;
pub mod conformance;
pub mod error;
pub mod fault;
pub mod log;
pub mod memory;
pub mod postgres;
pub use gearshift_persist::record;

use std::collections::BTreeMap;

pub use error::StoreError;
pub use log::{Durability, LogOptions, LogStore};
pub use memory::MemoryStore;
pub use postgres::{PgOptions, PgStore, SCHEMA_VERSION};
pub use record::{
    DeadMark, FunctionRecord, JobRecord, KeptRecord, Op, ScheduleRecord, FORMAT_VERSION, MAX_ID,
};

/// What a store holds at startup.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Live jobs in id order (the order they were submitted).
    pub jobs: Vec<JobRecord>,
    /// Dead jobs (used all their attempts) in id order, with why and when
    /// they died; their records carry the attempts of the Dead op. Never in
    /// `jobs`.
    pub dead: Vec<(JobRecord, DeadMark)>,
    /// Live schedules in id order, each as its latest Schedule op left it.
    pub schedules: Vec<ScheduleRecord>,
    /// Kept finished jobs in id order, each as its latest Kept op left it
    /// (forgotten ones gone; expired ones are the caller's to forget).
    pub kept: Vec<KeptRecord>,
    /// The first handle number that was never handed out (past every job,
    /// schedule and kept id ever stored, and every reservation).
    pub next_id: u64,
    /// Live jobs that were running when the store was last written (a
    /// backend that records starts, [`Store::started`]): their run was
    /// cut off. Empty for the others.
    pub running: Vec<u64>,
    /// Functions' admin settings (pause, queue limits) in name order, each
    /// as its latest Function op left it (none at their defaults).
    pub functions: Vec<FunctionRecord>,
}

/// A durable set of jobs: what a backend implements is [`Store::replay`],
/// [`Store::append`], [`Store::discard`] and [`Store::flush`] (and, if it
/// has housekeeping, [`Store::sync`] and [`Store::idle`]). The other
/// methods are conveniences over `append`; no backend overrides them.
///
/// The rules every backend keeps (the [`conformance`] suite checks them):
/// an op on an id beyond [`MAX_ID`] that would store it (Add, Retry, Dead,
/// Schedule, Kept) makes the next flush fail with
/// [`StoreError::IdOutOfRange`] and store none of its batch, as does a kept
/// record with an outcome past [`record::KEPT_LAST_OUTCOME`]
/// ([`StoreError::InvalidRecord`]); one that only ends or drops an id
/// beyond it changes nothing. A Done leaves schedules and kept records
/// alone. A reservation is capped at `MAX_ID + 1`. [`Op::Started`] may be
/// ignored (a backend no cluster shares does not record runs).
pub trait Store: Send {
    /// Every live and dead job, every schedule, every kept record and the
    /// first unused handle number, as of the last flush.
    fn replay(&mut self) -> Result<Replayed, StoreError>;
    /// Buffers ops, in order, for the next flush.
    fn append(&mut self, ops: &[Op]);
    /// Drops everything buffered since the last flush.
    fn discard(&mut self);
    /// Makes everything buffered durable (as the store's durability says).
    /// On error nothing buffered since the last flush counts as written.
    fn flush(&mut self) -> Result<(), StoreError>;
    /// Forces written data to disk (for interval durability); default no-op.
    fn sync(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Housekeeping while no flush comes (the server calls it every so
    /// often when idle): the log store swaps in a compaction that finished
    /// after the last flush. Default no-op.
    fn idle(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
    /// A store over a set of partitions that can take some on and let some
    /// go while it runs (PostgreSQL's partition-set store); None for others.
    fn repartition(&mut self) -> Option<&mut dyn Repartition> {
        None
    }

    /// Buffers a new job ([`Op::Add`]).
    fn add(&mut self, job: &JobRecord) {
        self.append(&[Op::Add(job.clone())]);
    }
    /// Buffers the end of a job, live or dead ([`Op::Done`]).
    fn done(&mut self, id: u64) {
        self.append(&[Op::Done(id)]);
    }
    /// Buffers a live job's new attempt count ([`Op::Update`]).
    fn update(&mut self, id: u64, attempts: u32) {
        self.append(&[Op::Update { id, attempts }]);
    }
    /// Buffers a job going back to wait for a retry, or a dead one revived
    /// ([`Op::Retry`]).
    fn retry(&mut self, id: u64, attempts: u32, due_ms: Option<u64>) {
        self.append(&[Op::Retry {
            id,
            attempts,
            due_ms,
        }]);
    }
    /// Buffers a job's death ([`Op::Dead`]).
    fn dead(&mut self, id: u64, attempts: u32, mark: &DeadMark) {
        self.append(&[Op::Dead {
            id,
            attempts,
            mark: mark.clone(),
        }]);
    }
    /// Buffers a schedule, new or replacing its id's ([`Op::Schedule`]).
    fn schedule(&mut self, s: &ScheduleRecord) {
        self.append(&[Op::Schedule(s.clone())]);
    }
    /// Buffers dropping a schedule ([`Op::Unschedule`]).
    fn unschedule(&mut self, id: u64) {
        self.append(&[Op::Unschedule(id)]);
    }
    /// Buffers a kept finished job, new or replacing its id's ([`Op::Kept`]).
    fn kept(&mut self, r: &KeptRecord) {
        self.append(&[Op::Kept(Box::new(r.clone()))]);
    }
    /// Buffers dropping a kept record ([`Op::Forget`]).
    fn forget(&mut self, id: u64) {
        self.append(&[Op::Forget(id)]);
    }
    /// Buffers the start of a live job's run ([`Op::Started`]).
    fn started(&mut self, id: u64) {
        self.append(&[Op::Started(id)]);
    }
    /// Buffers a handle high-water mark ([`Op::Reserve`]).
    fn reserve(&mut self, upto: u64) {
        self.append(&[Op::Reserve(upto)]);
    }
}

/// Changing a partition-set store's partitions while it runs
/// ([`Store::repartition`]), so partitions move without a restart.
pub trait Repartition {
    /// The partitions served, each at its epoch, in partition order.
    fn partitions(&self) -> Vec<(u32, i64)>;
    /// Takes on `parts` (each at its epoch, none already in the set): their
    /// stored rows join the store's state and are returned as a replay
    /// returns them (jobs, dead, schedules, kept, functions, running marks of
    /// those partitions only; `next_id` is the store's own, unchanged), and
    /// from now on rows of their functions are written and every flush is
    /// fenced on their epochs too. A partition no longer at its epoch is
    /// [`StoreError::Fenced`]. Call with nothing buffered (between
    /// flushes): otherwise [`StoreError::InvalidRequest`]. On error the set
    /// is unchanged.
    fn adopt(&mut self, parts: &[(u32, i64)]) -> Result<Replayed, StoreError>;
    /// Lets `parts` go: their rows leave the store's memory, and later
    /// flushes neither lock nor write them (an op on one of their functions
    /// then fails a flush as a function of another node's does). Call with
    /// nothing buffered: otherwise [`StoreError::InvalidRequest`], and
    /// nothing changes. Unknown partitions are ignored.
    fn release(&mut self, parts: &[u32]) -> Result<(), StoreError>;
    /// Writes rows by `placement` from now on (a pin moved a function
    /// between two partitions this set does not hold, so nothing held
    /// moves). Call with nothing buffered: otherwise
    /// [`StoreError::InvalidRequest`], and nothing changes.
    fn place(&mut self, placement: gearshift_core::Placement) -> Result<(), StoreError>;
    /// Moves `function`, which lives in a partition of the set, to
    /// `asked`, as the pin asked for it says (`gearshift pin`; None: where
    /// its name places it): its rows move and the pin is put in force in
    /// one transaction fenced on the set, and the function's rows leave the
    /// store's memory. Returns the store's placement with that pin in force
    /// (unchanged when the pin is no longer asked for), written by from
    /// now on; other pins change only through
    /// [`Repartition::place`] and [`Repartition::adopt_function`]. Call
    /// with nothing buffered.
    fn give_function(
        &mut self,
        function: &[u8],
        asked: Option<u32>,
    ) -> Result<gearshift_core::Placement, StoreError>;
    /// Writes rows by `placement` from now on, under which `function` lives
    /// in a partition of the set, and reads that function's rows there as
    /// [`Repartition::adopt`] reads a partition's (those already in memory
    /// left out). Call with nothing buffered.
    fn adopt_function(
        &mut self,
        function: &[u8],
        placement: gearshift_core::Placement,
    ) -> Result<Replayed, StoreError>;
}

/// What every backend keeps between flushes of what the next flush must
/// refuse, so no store ever writes what its replay would refuse: the first
/// id past [`MAX_ID`] stored since the last flush, or kept record with an
/// outcome no store keeps, whichever came first.
#[derive(Debug, Clone, Default)]
pub(crate) struct Refusal(Option<Refused>);

/// Why a batch is refused.
#[derive(Debug, Clone, Copy)]
enum Refused {
    /// An id past [`MAX_ID`].
    Id(u64),
    /// A kept record's outcome (id, outcome) past the last one.
    Outcome(u64, u8),
}

impl Refusal {
    /// Notes what `op` makes the next flush refuse (an id past
    /// [`MAX_ID`] it would store, a kept record's unknown outcome); false
    /// when the op is to be dropped instead: it ends or drops an id past
    /// [`MAX_ID`], which nothing stored has (and replay would refuse).
    pub(crate) fn admit(&mut self, op: &Op) -> bool {
        match op {
            Op::Add(r) => self.note(r.id),
            Op::Retry { id, .. } | Op::Dead { id, .. } => self.note(*id),
            Op::Schedule(s) => self.note(s.id),
            Op::Kept(k) => {
                self.note(k.id);
                if k.outcome > record::KEPT_LAST_OUTCOME {
                    self.0.get_or_insert(Refused::Outcome(k.id, k.outcome));
                }
            }
            Op::Done(id) | Op::Update { id, .. } | Op::Unschedule(id) | Op::Forget(id) => {
                return *id <= MAX_ID;
            }
            Op::Reserve(_) | Op::Started(_) | Op::Function(_) => {}
        }
        true
    }

    fn note(&mut self, id: u64) {
        if id > MAX_ID {
            self.0.get_or_insert(Refused::Id(id));
        }
    }

    /// The batch was flushed or dropped.
    pub(crate) fn clear(&mut self) {
        self.0 = None;
    }

    /// The error the next flush must return, if any.
    pub(crate) fn refusal(&self) -> Option<StoreError> {
        self.0.map(|r| match r {
            Refused::Id(id) => StoreError::IdOutOfRange(id),
            Refused::Outcome(id, outcome) => StoreError::InvalidRecord(format!(
                "kept job {id} has outcome {outcome}; the last one a store keeps is {}",
                record::KEPT_LAST_OUTCOME
            )),
        })
    }
}

/// A reservation as stored: never past `MAX_ID + 1`.
pub(crate) fn capped(upto: u64) -> u64 {
    upto.min(MAX_ID + 1)
}

/// Dead jobs by id, with their marks.
pub(crate) type DeadSet = BTreeMap<u64, (JobRecord, DeadMark)>;

/// Live schedules by id.
pub(crate) type Schedules = BTreeMap<u64, ScheduleRecord>;

/// Kept finished jobs by id.
pub(crate) type KeptSet = BTreeMap<u64, KeptRecord>;

/// What a backend that rebuilds state from ops holds: live jobs, dead
/// jobs, schedules and kept records by id, and the highest id + 1 and
/// reservation seen.
#[derive(Debug, Clone, Default)]
pub(crate) struct Sets {
    pub(crate) live: BTreeMap<u64, JobRecord>,
    pub(crate) dead: DeadSet,
    pub(crate) schedules: Schedules,
    pub(crate) kept: KeptSet,
    pub(crate) high: u64,
    /// Live jobs whose run started and has not ended (a backend that
    /// records starts).
    pub(crate) running: std::collections::BTreeSet<u64>,
    /// Functions' settings by name (none at their defaults).
    pub(crate) functions: BTreeMap<bytes::Bytes, FunctionRecord>,
}

impl Sets {
    /// The state as a replay hands it out.
    pub(crate) fn replayed(&self) -> Replayed {
        let mut r = replayed(
            self.live.values().cloned().collect(),
            self.dead.values().cloned().collect(),
            self.schedules.values().cloned().collect(),
            self.kept.values().cloned().collect(),
            self.high,
        );
        r.running = self
            .running
            .iter()
            .copied()
            .filter(|id| self.live.contains_key(id))
            .collect();
        r.functions = self.functions.values().cloned().collect();
        r
    }
}

/// Applies ops to the id-ordered sets; shared by backends that rebuild
/// state from a sequence of ops. Raises `high` to the highest job,
/// schedule or kept id + 1 and reservation seen. Ops naming a job that is
/// in neither set (or, for Update, not live) change nothing; a Done leaves
/// schedules and kept records alone.
pub(crate) fn apply_ops(sets: &mut Sets, ops: impl IntoIterator<Item = Op>) {
    let Sets {
        live,
        dead,
        schedules,
        kept,
        high,
        running,
        functions,
    } = sets;
    for op in ops {
        // Whatever else it does, an op on a job ends the run it was in.
        match &op {
            Op::Done(id) | Op::Update { id, .. } | Op::Retry { id, .. } | Op::Dead { id, .. } => {
                running.remove(id);
            }
            _ => {}
        }
        match op {
            Op::Add(r) => {
                *high = (*high).max(r.id.saturating_add(1));
                // The same id twice (never written): the later one wins.
                dead.remove(&r.id);
                live.insert(r.id, r);
            }
            Op::Done(id) => {
                live.remove(&id);
                dead.remove(&id);
            }
            Op::Update { id, attempts } => {
                if let Some(r) = live.get_mut(&id) {
                    r.attempts = attempts;
                }
            }
            Op::Retry {
                id,
                attempts,
                due_ms,
            } => {
                let r = match dead.remove(&id) {
                    Some((r, _mark)) => live.entry(id).or_insert(r),
                    None => match live.get_mut(&id) {
                        Some(r) => r,
                        None => continue,
                    },
                };
                r.attempts = attempts;
                r.due_ms = due_ms.filter(|&d| d != u64::MAX);
            }
            Op::Dead { id, attempts, mark } => {
                let Some(mut r) = live.remove(&id).or_else(|| dead.remove(&id).map(|d| d.0)) else {
                    continue;
                };
                r.attempts = attempts;
                dead.insert(id, (r, mark));
            }
            Op::Schedule(s) => {
                *high = (*high).max(s.id.saturating_add(1));
                schedules.insert(s.id, s);
            }
            Op::Unschedule(id) => {
                schedules.remove(&id);
            }
            Op::Kept(k) => {
                *high = (*high).max(k.id.saturating_add(1));
                kept.insert(k.id, *k);
            }
            Op::Forget(id) => {
                kept.remove(&id);
            }
            Op::Reserve(upto) => *high = (*high).max(upto),
            // Runs are recorded by the backend that keeps them.
            Op::Started(_) => {}
            Op::Function(f) if f.is_default() => {
                functions.remove(&f.name);
            }
            Op::Function(f) => {
                functions.insert(f.name.clone(), f);
            }
        }
    }
}

/// The first handle number never handed out: past the high-water mark
/// and the highest id of each kind held (at least 1).
pub(crate) fn first_unused(high: u64, highest: [Option<u64>; 4]) -> u64 {
    let past = |id: Option<u64>| id.map_or(1, |id| id.saturating_add(1));
    highest.into_iter().map(past).fold(high.max(1), u64::max)
}

/// What a backend holding live and dead sets, schedules and kept records
/// replays: each in id order and the first handle number past every id and
/// reservation.
pub(crate) fn replayed(
    jobs: Vec<JobRecord>,
    dead: Vec<(JobRecord, DeadMark)>,
    schedules: Vec<ScheduleRecord>,
    kept: Vec<KeptRecord>,
    high: u64,
) -> Replayed {
    let next_id = first_unused(
        high,
        [
            jobs.last().map(|r| r.id),
            dead.last().map(|(r, _)| r.id),
            schedules.last().map(|s| s.id),
            kept.last().map(|k| k.id),
        ],
    );
    Replayed {
        jobs,
        dead,
        schedules,
        kept,
        next_id,
        running: Vec::new(),
        functions: Vec::new(),
    }
}
