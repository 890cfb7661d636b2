//! Writing a batch: the buffered ops are applied to the in-memory copy of
//! the state, and every id (or function's settings) they touched is
//! written as it now stands (upserted, or deleted if gone) by ONE
//! statement: its data-modifying CTEs run in one implicit transaction, in
//! one round trip, so a batch is all stored or none of it. A failed
//! statement restores the copy.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use postgres::types::ToSql;

use gearshift_core::placement::Placement;

use super::cols::{big, Bin, Col, FunctionCols, JobCols, KeptCols, ScheduleCols};
use crate::{
    apply_ops, DeadMark, FunctionRecord, JobRecord, KeptRecord, Op, ScheduleRecord, Sets, MAX_ID,
};

/// What a store's flushes are fenced on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Fence {
    /// Nothing (the store holds the database's advisory lock).
    None,
    /// The cluster leader's lease at this epoch.
    Leader(i64),
    /// A partition (as stored: `INT`) at this epoch.
    Partition { partition: i32, epoch: i64 },
    /// A set of partitions, each at its epoch.
    Set(Arc<SetFence>),
}

/// A partition set as the flush statement takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SetFence {
    /// The partitions, and each one's epoch, in the same order.
    pub parts: Vec<i32>,
    pub epochs: Vec<i64>,
    /// Where each function's rows go.
    pub placement: Placement,
    /// The job ids this store hands out.
    pub ids: Range<u64>,
}

/// A [`Fence`] without its values: the statement's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FenceKind {
    None,
    Leader,
    Partition,
    Set,
}

impl FenceKind {
    /// How many parameters the fence adds after the running marks' ($44).
    pub(super) fn params(self) -> usize {
        match self {
            FenceKind::None => 0,
            FenceKind::Leader => 1,
            FenceKind::Partition => 2,
            FenceKind::Set => 5,
        }
    }
}

impl Fence {
    pub(super) fn kind(&self) -> FenceKind {
        match self {
            Fence::None => FenceKind::None,
            Fence::Leader(_) => FenceKind::Leader,
            Fence::Partition { .. } => FenceKind::Partition,
            Fence::Set(_) => FenceKind::Set,
        }
    }
}

/// The ids a batch touched, by table (ids past [`MAX_ID`] are never
/// stored, so never touched), and the functions whose settings it set.
#[derive(Default)]
struct Touched {
    jobs: BTreeSet<u64>,
    schedules: BTreeSet<u64>,
    kept: BTreeSet<u64>,
    functions: BTreeSet<Bytes>,
}

impl Touched {
    fn of(ops: &[Op]) -> Touched {
        let mut t = Touched::default();
        for op in ops {
            let (set, id) = match op {
                Op::Add(r) => (&mut t.jobs, r.id),
                Op::Done(id) | Op::Update { id, .. } => (&mut t.jobs, *id),
                Op::Retry { id, .. } | Op::Dead { id, .. } => (&mut t.jobs, *id),
                Op::Schedule(s) => (&mut t.schedules, s.id),
                Op::Unschedule(id) => (&mut t.schedules, *id),
                Op::Kept(k) => (&mut t.kept, k.id),
                Op::Forget(id) => (&mut t.kept, *id),
                Op::Function(f) => {
                    t.functions.insert(f.name.clone());
                    continue;
                }
                Op::Reserve(_) | Op::Started(_) => continue,
            };
            if id <= MAX_ID {
                set.insert(id);
            }
        }
        t
    }
}

/// A job id, and the job as it was (live, dead, or neither).
type JobWas = (u64, Option<JobRecord>, Option<(JobRecord, DeadMark)>);

/// The touched entries as they were before the batch: what a failed
/// flush puts back.
pub(super) struct Undo {
    jobs: Vec<JobWas>,
    schedules: Vec<(u64, Option<ScheduleRecord>)>,
    kept: Vec<(u64, Option<KeptRecord>)>,
    functions: Vec<(Bytes, Option<FunctionRecord>)>,
    high: u64,
}

impl Undo {
    /// Puts the touched entries of `sets` back as they were.
    pub(super) fn restore(self, sets: &mut Sets) {
        fn put<T>(map: &mut std::collections::BTreeMap<u64, T>, id: u64, v: Option<T>) {
            match v {
                Some(v) => map.insert(id, v),
                None => map.remove(&id),
            };
        }
        for (id, live, dead) in self.jobs {
            put(&mut sets.live, id, live);
            put(&mut sets.dead, id, dead);
        }
        for (id, s) in self.schedules {
            put(&mut sets.schedules, id, s);
        }
        for (id, k) in self.kept {
            put(&mut sets.kept, id, k);
        }
        for (name, f) in self.functions {
            match f {
                Some(f) => sets.functions.insert(name, f),
                None => sets.functions.remove(&name),
            };
        }
        sets.high = self.high;
    }
}

/// Applies `ops` to `sets`; returns the statement's parameters for what
/// they touched, and how to undo it.
pub(super) fn apply(sets: &mut Sets, ops: Vec<Op>) -> (Params, Undo) {
    let t = Touched::of(&ops);
    let undo = Undo {
        jobs: t
            .jobs
            .iter()
            .map(|&id| (id, sets.live.get(&id).cloned(), sets.dead.get(&id).cloned()))
            .collect(),
        schedules: t
            .schedules
            .iter()
            .map(|&id| (id, sets.schedules.get(&id).cloned()))
            .collect(),
        kept: t
            .kept
            .iter()
            .map(|&id| (id, sets.kept.get(&id).cloned()))
            .collect(),
        functions: t
            .functions
            .iter()
            .map(|name| (name.clone(), sets.functions.get(name).cloned()))
            .collect(),
        high: sets.high,
    };
    apply_ops(sets, ops);
    let mut p = Params::default();
    for &id in &t.jobs {
        match (sets.live.get(&id), sets.dead.get(&id)) {
            (Some(r), _) => p.jobs.push(r, None),
            (None, Some((r, mark))) => p.jobs.push(r, Some(mark)),
            (None, None) => p.job_gone.push(big(id)),
        }
    }
    for &id in &t.schedules {
        match sets.schedules.get(&id) {
            Some(s) => p.schedules.push(s),
            None => p.schedule_gone.push(big(id)),
        }
    }
    for &id in &t.kept {
        match sets.kept.get(&id) {
            Some(k) => p.kept.push(k),
            None => p.kept_gone.push(big(id)),
        }
    }
    for name in &t.functions {
        match sets.functions.get(name) {
            Some(f) => p.functions.push(f),
            None => p.function_gone.push(Bin(name.clone())),
        }
    }
    p.last_reserved = sets.high.checked_sub(1).map_or(-1, big);
    (p, undo)
}

/// The index of the last op of the batch that ended each job's run
/// (Done, Update, Retry, Dead).
pub(super) fn run_ends(ops: &[Op]) -> HashMap<u64, usize> {
    let mut last_end = HashMap::new();
    for (i, op) in ops.iter().enumerate() {
        if let Op::Done(id) | Op::Update { id, .. } | Op::Retry { id, .. } | Op::Dead { id, .. } =
            op
        {
            last_end.insert(*id, i);
        }
    }
    last_end
}

/// After the batch is applied: marks the runs `started` (each with the
/// number of ops buffered before it) that no later op ended, on jobs
/// still live.
pub(super) fn mark_runs(sets: &mut Sets, ends: &HashMap<u64, usize>, started: &[(usize, u64)]) {
    for &(at, id) in started {
        let ended_after = ends.get(&id).is_some_and(|&e| e >= at);
        if !ended_after && sets.live.contains_key(&id) {
            sets.running.insert(id);
        }
    }
}

/// The running marks dropped and added from `before` to `after`.
pub(super) fn run_changes(before: &BTreeSet<u64>, after: &BTreeSet<u64>) -> (Vec<i64>, Vec<i64>) {
    (
        before.difference(after).map(|&id| big(id)).collect(),
        after.difference(before).map(|&id| big(id)).collect(),
    )
}

/// Adds the fence's values (the epoch, and a partition's number; a set's
/// epochs and partitions); true for a set, whose rows' partitions follow.
fn fence_values<'a>(fence: &'a Fence, params: &mut Vec<&'a (dyn ToSql + Sync)>) -> bool {
    match fence {
        Fence::None => {}
        Fence::Leader(epoch) => params.push(epoch),
        Fence::Partition { partition, epoch } => {
            params.push(epoch);
            params.push(partition);
        }
        Fence::Set(set) => {
            params.push(&set.epochs);
            params.push(&set.parts);
            return true;
        }
    }
    false
}

/// The flush statement's parameters: one array per column.
#[derive(Default)]
pub(super) struct Params {
    job_gone: Vec<i64>,
    jobs: JobCols,
    schedule_gone: Vec<i64>,
    schedules: ScheduleCols,
    kept_gone: Vec<i64>,
    kept: KeptCols,
    last_reserved: i64,
    /// A set store's rows' partitions, by table.
    job_part: Vec<i32>,
    schedule_part: Vec<i32>,
    kept_part: Vec<i32>,
    /// Functions whose settings went back to their defaults, and the rest.
    function_gone: Col,
    functions: FunctionCols,
    function_part: Vec<i32>,
    /// Running marks to drop and to add.
    pub(super) run_gone: Vec<i64>,
    pub(super) run_new: Vec<i64>,
}

impl Params {
    /// How many rows the batch writes or deletes.
    pub(super) fn rows(&self) -> usize {
        self.job_gone.len()
            + self.jobs.id.len()
            + self.schedule_gone.len()
            + self.schedules.id.len()
            + self.kept_gone.len()
            + self.kept.id.len()
            + self.run_gone.len()
            + self.run_new.len()
            + self.function_gone.len()
            + self.functions.name.len()
    }

    /// The parameters in statement order, then `fence`'s (the epoch, and
    /// a partition's number), then the functions'.
    pub(super) fn as_sql<'a>(&'a self, fence: &'a Fence) -> Vec<&'a (dyn ToSql + Sync)> {
        let s = &self.schedules;
        let k = &self.kept;
        let mut params: Vec<&'a (dyn ToSql + Sync)> = vec![&self.job_gone];
        params.extend(self.jobs.values());
        params.extend::<[&'a (dyn ToSql + Sync); 31]>([
            &self.schedule_gone,
            &s.id,
            &s.handle,
            &s.when,
            &s.monday_zero,
            &s.function,
            &s.unique,
            &s.data,
            &s.priority,
            &s.next_ms,
            &s.from_config,
            &self.kept_gone,
            &k.id,
            &k.handle,
            &k.function,
            &k.unique,
            &k.priority,
            &k.background,
            &k.outcome,
            &k.attempts,
            &k.created_ms,
            &k.started_ms,
            &k.finished_ms,
            &k.expires_ms,
            &k.worker,
            &k.error,
            &k.result,
            &k.history,
            &self.last_reserved,
            &self.run_gone,
            &self.run_new,
        ]);
        if fence_values(fence, &mut params) {
            params.extend::<[&'a (dyn ToSql + Sync); 3]>([
                &self.job_part,
                &self.schedule_part,
                &self.kept_part,
            ]);
        }
        if !self.has_functions() {
            return params;
        }
        let f = &self.functions;
        params.extend([
            &self.function_gone as &(dyn ToSql + Sync),
            &f.name,
            &f.paused,
            &f.max_high,
            &f.max_normal,
            &f.max_low,
        ]);
        if let Fence::Set(_) = fence {
            params.push(&self.function_part);
        }
        params
    }

    /// Whether the batch only adds or rewrites live jobs: the lean
    /// statement ([`super::statement::adds_sql`]) writes it.
    pub(super) fn only_adds(&self) -> bool {
        self.job_gone.is_empty()
            && self.schedule_gone.is_empty()
            && self.schedules.id.is_empty()
            && self.kept_gone.is_empty()
            && self.kept.id.is_empty()
            && self.run_gone.is_empty()
            && self.run_new.is_empty()
            && !self.has_functions()
    }

    /// The lean statement's parameters: the jobs', the mark, the fence's.
    pub(super) fn as_sql_adds<'a>(&'a self, fence: &'a Fence) -> Vec<&'a (dyn ToSql + Sync)> {
        let mut params: Vec<&'a (dyn ToSql + Sync)> = self.jobs.values().to_vec();
        params.push(&self.last_reserved);
        if fence_values(fence, &mut params) {
            params.push(&self.job_part);
        }
        params
    }

    /// Whether the batch changes functions' settings: the statement with
    /// their part ([`flush_sql`]) is the one to run.
    pub(super) fn has_functions(&self) -> bool {
        !self.function_gone.is_empty() || !self.functions.name.is_empty()
    }

    /// Places every row a set store writes; the first function placed
    /// outside the set is an error (another node owns it).
    pub(super) fn place(&mut self, set: &SetFence) -> Result<(), Bytes> {
        let place = |functions: &Col, out: &mut Vec<i32>| -> Result<(), Bytes> {
            out.clear();
            for f in functions {
                let p = set.placement.partition_of(&f.0) as i32;
                if !set.parts.contains(&p) {
                    return Err(f.0.clone());
                }
                out.push(p);
            }
            Ok(())
        };
        place(&self.jobs.function, &mut self.job_part)?;
        place(&self.schedules.function, &mut self.schedule_part)?;
        place(&self.kept.function, &mut self.kept_part)?;
        place(&self.functions.name, &mut self.function_part)
    }
}
