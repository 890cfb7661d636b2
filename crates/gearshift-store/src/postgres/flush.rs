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

/// The flush statement: deletes, then upserts from parallel arrays, for
/// jobs ($1; $2-$13), schedules ($14; $15-$24) and kept records ($25;
/// $26-$41), the high-water mark ($42), and the running marks (gone $43,
/// new $44); it returns one row. Fenced (a cluster's leader), every write
/// also needs the lease to still be at epoch $45, and no row is returned
/// if it has moved on: the lease row is key-share-locked (the epoch is a
/// key), so a takeover, which changes the epoch, waits for this statement,
/// while the leader's renewals (which do not) go on; and once a takeover
/// has committed, the statement writes nothing.
/// A partition's store is fenced the same way on its partition's row
/// (epoch $45, partition $46); it writes its partition into every row and
/// deletes or updates only rows of that partition. A set's store is fenced
/// on every partition of the set (partitions $46, epochs $45, arrays),
/// writes each row's own partition ($47 jobs, $48 schedules, $49 kept),
/// touches only rows of the set, and leaves the reservation alone.
/// Functions' settings come last, numbered on from the fence's parameters
/// (`f` below: from $45 unfenced, $50 for a set): names gone (f + 1), then
/// name, paused and the three limits (f + 2 to f + 6), and a set's
/// partitions (f + 7). A set may move a function's row between its own
/// partitions (a pin changed), never take one from outside the set.
/// Without `functions` (a batch that changes no settings, nearly every
/// one) the statement has neither functions' part nor their parameters:
/// every part costs the database work at each flush, even empty.
/// Deletes join the ids' array (an index probe per id) rather than test
/// `id = ANY(array)`, which a generic plan may check row by row.
pub(super) fn flush_sql(fence: FenceKind, functions: bool) -> String {
    let f = 44 + fence.params();
    let (fn_gone, fn_name, fn_paused) = (f + 1, f + 2, f + 3);
    let (fn_high, fn_normal, fn_low, fn_part) = (f + 4, f + 5, f + 6, f + 7);
    let (fence_cte, and_fence, where_fence, from_fence) = match fence {
        FenceKind::None => ("", "", "", ""),
        FenceKind::Leader => (
            "fence AS (SELECT epoch FROM gearshift_leader WHERE epoch = $45::bigint FOR KEY SHARE),\n",
            " AND EXISTS (SELECT 1 FROM fence)",
            " WHERE EXISTS (SELECT 1 FROM fence)",
            " FROM fence",
        ),
        FenceKind::Partition => (
            "fence AS (SELECT epoch FROM gearshift_partitions\n       \
             WHERE partition = $46::int AND epoch = $45::bigint FOR KEY SHARE),\n",
            " AND EXISTS (SELECT 1 FROM fence)",
            " WHERE EXISTS (SELECT 1 FROM fence)",
            " FROM fence",
        ),
        // Every partition of the set at its epoch ($46, $45), all locked.
        FenceKind::Set => (
            "fence AS (SELECT 1 FROM (SELECT p.partition FROM gearshift_partitions p\n       \
             JOIN UNNEST($46::int[], $45::bigint[]) AS o(partition, epoch)\n       \
             ON p.partition = o.partition AND p.epoch = o.epoch FOR KEY SHARE OF p) held\n       \
             HAVING count(*) = cardinality($46::int[])),\n",
            " AND EXISTS (SELECT 1 FROM fence)",
            " WHERE EXISTS (SELECT 1 FROM fence)",
            " FROM fence",
        ),
    };
    // A partition's rows: its partition written, and only its rows touched;
    // a set's rows carry each its own partition (an array, `arr`).
    let part = |table: &str, arr: &str| match fence {
        FenceKind::Partition => (
            " AND t.partition = $46::int".to_string(),
            ", partition".to_string(),
            ", $46::int".to_string(),
            String::new(),
            format!(" WHERE {table}.partition = EXCLUDED.partition"),
        ),
        FenceKind::Set => (
            " AND t.partition = ANY($46::int[])".to_string(),
            ", partition".to_string(),
            String::new(),
            format!(", {arr}::int[]"),
            format!(" WHERE {table}.partition = EXCLUDED.partition"),
        ),
        _ => Default::default(),
    };
    let (jd_part, ju_col, ju_val, ju_arr, ju_only) = part("gearshift_jobs", "$47");
    let (sd_part, su_col, su_val, su_arr, su_only) = part("gearshift_schedules", "$48");
    let (kd_part, ku_col, ku_val, ku_arr, ku_only) = part("gearshift_kept", "$49");
    let (fd_part, fu_col, fu_val, fu_arr, mut fu_only) =
        part("gearshift_functions", &format!("${fn_part}"));
    // A set's function row may move to another partition of the set.
    let mut fu_partition = "";
    if fence == FenceKind::Set {
        fu_partition = ", partition = EXCLUDED.partition";
        fu_only = " WHERE gearshift_functions.partition = ANY($46::int[])".into();
    }
    let functions = match functions {
        false => String::new(),
        true => format!(
            "fd AS (DELETE FROM gearshift_functions t USING UNNEST(${fn_gone}::bytea[]) AS gone(function)
       WHERE t.function = gone.function{fd_part}{and_fence}),
fu AS (INSERT INTO gearshift_functions (function, paused, max_high, max_normal, max_low{fu_col})
       SELECT *{fu_val} FROM UNNEST(${fn_name}::bytea[], ${fn_paused}::boolean[],
         ${fn_high}::bigint[], ${fn_normal}::bigint[], ${fn_low}::bigint[]{fu_arr}){where_fence}
       ON CONFLICT (function) DO UPDATE SET paused = EXCLUDED.paused,
         max_high = EXCLUDED.max_high, max_normal = EXCLUDED.max_normal,
         max_low = EXCLUDED.max_low{fu_partition}{fu_only}),
"
        ),
    };
    // A set's ids were reserved ahead: the mark is not moved.
    let reserve = match fence {
        FenceKind::Set => " AND FALSE",
        _ => "",
    };
    let fence = fence_cte;
    format!(
        "WITH
{fence}jd AS (DELETE FROM gearshift_jobs t USING UNNEST($1::bigint[]) AS gone(id)
       WHERE t.id = gone.id{jd_part}{and_fence}),
ju AS (INSERT INTO gearshift_jobs (id, handle, function, unique_id, priority, data, reducer,
         due_ms, attempts, created_ms, died_ms, error{ju_col})
       SELECT *{ju_val} FROM UNNEST($2::bigint[], $3::bytea[], $4::bytea[], $5::bytea[],
         $6::smallint[], $7::bytea[], $8::bytea[], $9::bigint[], $10::bigint[], $11::bigint[],
         $12::bigint[], $13::bytea[]{ju_arr}){where_fence}
       ON CONFLICT (id) DO UPDATE SET handle = EXCLUDED.handle, function = EXCLUDED.function,
         unique_id = EXCLUDED.unique_id, priority = EXCLUDED.priority, data = EXCLUDED.data,
         reducer = EXCLUDED.reducer, due_ms = EXCLUDED.due_ms, attempts = EXCLUDED.attempts,
         created_ms = EXCLUDED.created_ms, died_ms = EXCLUDED.died_ms, error = EXCLUDED.error{ju_only}),
sd AS (DELETE FROM gearshift_schedules t USING UNNEST($14::bigint[]) AS gone(id)
       WHERE t.id = gone.id{sd_part}{and_fence}),
su AS (INSERT INTO gearshift_schedules (id, handle, when_fields, monday_zero, function,
         unique_id, data, priority, next_ms, from_config{su_col})
       SELECT *{su_val} FROM UNNEST($15::bigint[], $16::bytea[], $17::bytea[], $18::boolean[],
         $19::bytea[], $20::bytea[], $21::bytea[], $22::smallint[], $23::bigint[],
         $24::boolean[]{su_arr}){where_fence}
       ON CONFLICT (id) DO UPDATE SET handle = EXCLUDED.handle,
         when_fields = EXCLUDED.when_fields, monday_zero = EXCLUDED.monday_zero,
         function = EXCLUDED.function, unique_id = EXCLUDED.unique_id, data = EXCLUDED.data,
         priority = EXCLUDED.priority, next_ms = EXCLUDED.next_ms,
         from_config = EXCLUDED.from_config{su_only}),
kd AS (DELETE FROM gearshift_kept t USING UNNEST($25::bigint[]) AS gone(id)
       WHERE t.id = gone.id{kd_part}{and_fence}),
ku AS (INSERT INTO gearshift_kept (id, handle, function, unique_id, priority, background,
         outcome, attempts, created_ms, started_ms, finished_ms, expires_ms, worker, error,
         result, history{ku_col})
       SELECT *{ku_val} FROM UNNEST($26::bigint[], $27::bytea[], $28::bytea[], $29::bytea[],
         $30::smallint[], $31::boolean[], $32::smallint[], $33::bigint[], $34::bigint[],
         $35::bigint[], $36::bigint[], $37::bigint[], $38::bytea[], $39::bytea[],
         $40::bytea[], $41::bytea[]{ku_arr}){where_fence}
       ON CONFLICT (id) DO UPDATE SET handle = EXCLUDED.handle, function = EXCLUDED.function,
         unique_id = EXCLUDED.unique_id, priority = EXCLUDED.priority,
         background = EXCLUDED.background, outcome = EXCLUDED.outcome,
         attempts = EXCLUDED.attempts, created_ms = EXCLUDED.created_ms,
         started_ms = EXCLUDED.started_ms, finished_ms = EXCLUDED.finished_ms,
         expires_ms = EXCLUDED.expires_ms, worker = EXCLUDED.worker, error = EXCLUDED.error,
         result = EXCLUDED.result, history = EXCLUDED.history{ku_only}),
{functions}rd AS (DELETE FROM gearshift_running t USING UNNEST($43::bigint[]) AS gone(id)
       WHERE t.id = gone.id{and_fence}),
ri AS (INSERT INTO gearshift_running (id) SELECT * FROM UNNEST($44::bigint[]){where_fence}
       ON CONFLICT (id) DO NOTHING),
ru AS (UPDATE gearshift_reservation SET last_reserved = $42::bigint
       WHERE last_reserved < $42::bigint{reserve}{and_fence})
SELECT 1{from_fence}
"
    )
}

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
    fn params(self) -> usize {
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
        let j = &self.jobs;
        let s = &self.schedules;
        let k = &self.kept;
        let mut params: Vec<&'a (dyn ToSql + Sync)> = vec![
            &self.job_gone,
            &j.id,
            &j.handle,
            &j.function,
            &j.unique,
            &j.priority,
            &j.data,
            &j.reducer,
            &j.due_ms,
            &j.attempts,
            &j.created_ms,
            &j.died_ms,
            &j.error,
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
        ];
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
                params.push(&self.job_part);
                params.push(&self.schedule_part);
                params.push(&self.kept_part);
            }
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
