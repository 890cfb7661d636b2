//! The job table: every job (with the coalescing indexes) and every
//! function (queues, counts, stats), behind private fields. It is the one
//! place a job enters, changes state or leaves, and a worker gains or loses
//! a function: the function's counters (`total`,
//! `queued[p]`, `scheduled`, `running`, `workers`, and the stats
//! `submitted`, `completed`, `failed`, `retried`) and the table's
//! `job_bytes` move here and nowhere else, so they always equal a recount
//! (`invariants.rs` checks it; a miscount underflows and fails a test).
//! Queue order, timers, the store and the clients are the callers'
//! business; this file only keeps the books.

use std::collections::HashMap;

use bytes::Bytes;

use crate::conn::Ability;
use crate::function::{FuncStats, Function};
use crate::id_index::Walk;
use crate::ids::{ConnId, FuncId, IdMap, JobId};
use crate::job::{ConnList, Job, JobExtra, JobState, Persist, Run};
use crate::jobs::Jobs;
use crate::policy::{Policies, Reason};
use crate::Millis;

/// A drained queue with more room than this many entries lets go of it.
const SHRINK_QUEUE: usize = 1 << 16;

/// Adds (`+1`) or takes away (`-1`) a job in `state` of priority `p`.
fn count(f: &mut Function, state: JobState, p: usize, add: bool) {
    let n = match state {
        JobState::Pending => return,
        JobState::Queued => &mut f.queued[p],
        JobState::Scheduled => &mut f.scheduled,
        JobState::Running | JobState::Cancelled => &mut f.running,
    };
    if add {
        *n += 1;
    } else {
        *n -= 1;
    }
}

/// Why the table refuses a new job (also the index of its count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The function's `maxqueue`.
    Queue = 0,
    /// `--max-queue-memory`.
    Memory = 1,
}

/// Every job and every function, with the counts that follow them.
#[derive(Default)]
pub struct JobTable {
    /// Every job, with the coalescing indexes (named uniques, `-` workloads).
    jobs: Jobs,
    /// Functions by id; a dropped one leaves `None` (ids are not reused).
    funcs: Vec<Option<Function>>,
    index: HashMap<Bytes, FuncId>,
    /// Payload bytes of every job in the table (`--max-queue-memory`).
    bytes: u64,
    /// Submissions refused, by [`Full`].
    refused: [u64; 2],
    /// Submissions refused because the store could not write them.
    refused_store: u64,
    /// Jobs a worker holds (running, or cancelled while running).
    runs: IdMap<JobId, Run>,
    /// Numbers assignments, so a stale CAN_DO_TIMEOUT timer is recognised.
    assignments: u64,
    /// What functions dropped since start did (the totals keep them).
    dropped: FuncStats,
}

impl JobTable {
    /// Number of jobs (queued, scheduled and running).
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    /// No jobs at all.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// A job by id.
    #[inline]
    pub fn get(&self, id: JobId) -> Option<&Job> {
        self.jobs.get(id)
    }

    /// A job by id with its function, in one lookup.
    #[inline]
    pub fn get_with_func(&self, id: JobId) -> Option<(&Job, Option<&Function>)> {
        let job = self.jobs.get(id)?;
        Some((job, self.func(job.func())))
    }

    /// Records whether the store holds job `id`; returns what it was.
    #[inline]
    pub fn set_persist(&mut self, id: JobId, to: Persist) -> Option<Persist> {
        let job = self.jobs.get_mut(id)?;
        Some(std::mem::replace(&mut job.persist, to))
    }

    /// Counts one more attempt of job `id`; returns the count.
    pub fn count_attempt(&mut self, id: JobId) -> Option<u32> {
        let job = self.jobs.get_mut(id)?;
        job.retries = job.retries.saturating_add(1);
        Some(job.retries)
    }

    /// Job `id` runs again at `at`: one more attempt, due then, scheduled.
    /// Returns the attempts so far.
    pub fn retry_at(&mut self, id: JobId, at: Millis) -> Option<u32> {
        let attempts = self.count_attempt(id)?;
        if let Some(job) = self.jobs.get_mut(id) {
            job.extra.get_or_insert_with(Box::<JobExtra>::default).due = Some(at);
        }
        self.set_state(id, JobState::Scheduled);
        Some(attempts)
    }

    /// A foreground submitter waits on job `id`.
    pub fn add_client(&mut self, id: JobId, conn: ConnId) {
        if let Some(job) = self.jobs.get_mut(id) {
            job.clients.push(conn);
        }
    }

    /// Submitter `conn` no longer waits on job `id`; the job as it is then.
    pub fn remove_client(&mut self, id: JobId, conn: ConnId) -> Option<&Job> {
        let job = self.jobs.get_mut(id)?;
        job.clients.retain(|c| c != conn);
        Some(job)
    }

    /// Every submitter waiting on job `id`, who no longer do.
    pub fn take_clients(&mut self, id: JobId) -> ConnList {
        self.jobs
            .get_mut(id)
            .map(|job| std::mem::take(&mut job.clients))
            .unwrap_or_default()
    }

    /// Whether job `id` outlives its clients.
    pub fn set_background(&mut self, id: JobId, background: bool) {
        if let Some(job) = self.jobs.get_mut(id) {
            job.background = background;
        }
    }

    /// Whether job `id` is in the table.
    #[inline]
    pub fn contains(&self, id: JobId) -> bool {
        self.jobs.contains(id)
    }

    /// Every job, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &Job> {
        self.jobs.iter()
    }

    /// See [`Jobs::walk`].
    pub fn walk(&self, start: JobId, budget: usize, visit: impl FnMut(&Job) -> bool) -> Walk {
        self.jobs.walk(start, budget, visit)
    }

    /// See [`Jobs::coalesces_with`]: the unique-id rule.
    #[inline]
    pub fn coalesces_with(&self, func: FuncId, unique: &[u8], data: &[u8]) -> Option<JobId> {
        self.jobs.coalesces_with(func, unique, data)
    }

    /// See [`Jobs::find_named`].
    pub fn find_named(&self, func: Option<FuncId>, unique: &[u8]) -> Option<&Job> {
        self.jobs.find_named(func, unique)
    }

    /// A cancelled running job leaves the coalescing index at once.
    pub fn unindex_unique(&mut self, id: JobId) {
        self.jobs.unindex_unique(id);
    }

    /// Payload bytes of every job in the table.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// A function by id.
    #[inline]
    pub fn func(&self, f: FuncId) -> Option<&Function> {
        self.funcs.get(f).and_then(Option::as_ref)
    }

    /// A function by id, to change its queues, sleepers, limits, policy or
    /// wait times; its counts move only through this table's moves.
    #[inline]
    pub fn func_mut(&mut self, f: FuncId) -> Option<&mut Function> {
        self.funcs.get_mut(f).and_then(Option::as_mut)
    }

    /// Every function slot, by id (`None`: dropped).
    pub fn funcs(&self) -> &[Option<Function>] {
        &self.funcs
    }

    /// Every live function, to change what is not counted.
    pub fn funcs_mut(&mut self) -> impl Iterator<Item = &mut Function> {
        self.funcs.iter_mut().flatten()
    }

    /// The function called exactly `name`, if it exists.
    #[inline]
    pub fn func_named(&self, name: &[u8]) -> Option<FuncId> {
        self.index.get(name).copied()
    }

    /// The function called `name`, created (under its policy) if new.
    pub fn function_id(&mut self, name: &[u8], policies: &Policies) -> FuncId {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = self.funcs.len();
        // A copy: the name arrived as a slice of some connection's read
        // buffer, which the function table would otherwise keep alive for
        // as long as the function exists.
        let name = Bytes::copy_from_slice(name);
        let mut f = Function::new(name.clone());
        f.policy = policies.lookup(&name);
        self.funcs.push(Some(f));
        self.index.insert(name, id);
        id
    }

    /// Removes a function (the caller checked it is idle and empty); its
    /// stats stay in the totals.
    pub fn drop_function(&mut self, id: FuncId) -> Option<Function> {
        let f = self.funcs.get_mut(id).and_then(Option::take)?;
        self.index.remove(&f.name);
        self.dropped.merge(&f.stats);
        Some(f)
    }

    /// What functions dropped since start did.
    pub fn dropped_stats(&self) -> &FuncStats {
        &self.dropped
    }

    /// Whether a client's new job of priority `p` holding `bytes` may join
    /// `func`: the memory cap `cap` (0: none) first, then the function's
    /// `maxqueue`. A refusal is counted.
    #[inline]
    pub fn admit(&mut self, func: FuncId, p: usize, bytes: u64, cap: u64) -> Result<(), Full> {
        let full = if cap > 0 && self.bytes.saturating_add(bytes) > cap {
            Full::Memory
        } else if self.func(func).is_some_and(|f| f.queue_full(p)) {
            Full::Queue
        } else {
            return Ok(());
        };
        self.refused[full as usize] += 1;
        Err(full)
    }

    /// Submissions refused since start, by [`Full`].
    pub fn refused(&self) -> [u64; 2] {
        self.refused
    }

    /// Counts `n` submissions refused because the store could not write them.
    pub fn refused_by_store(&mut self, n: usize) {
        self.refused_store += n as u64;
    }

    /// Submissions the store could not write, since start.
    pub fn store_refusals(&self) -> u64 {
        self.refused_store
    }

    /// Puts a job in the table, counted in the state it starts in; a
    /// `submitted` one (not restored or revived) also in the function's stats.
    #[inline]
    pub fn insert(&mut self, job: Job, submitted: bool) {
        let (func, state, p) = (job.func(), job.state, job.priority.index());
        self.bytes += job.held_bytes();
        self.jobs.insert(job);
        if let Some(f) = self.func_mut(func) {
            f.total += 1;
            f.stats.submitted += u64::from(submitted);
            count(f, state, p, true);
        }
    }

    /// Moves a job to `to`; returns the state it left (`None`: no such job).
    /// A running job sent back to wait (its queue, or a retry delay) is a
    /// retry in the function's stats.
    #[inline]
    pub fn set_state(&mut self, id: JobId, to: JobState) -> Option<JobState> {
        let job = self.jobs.get_mut(id)?;
        let from = std::mem::replace(&mut job.state, to);
        let (func, p) = (job.func(), job.priority.index());
        if from != to {
            if let Some(f) = self.func_mut(func) {
                count(f, from, p, false);
                count(f, to, p, true);
                let back = matches!(to, JobState::Queued | JobState::Scheduled);
                f.stats.retried += u64::from(from == JobState::Running && back);
            }
        }
        Some(from)
    }

    /// Takes a job out of the table and out of its function's counts (the
    /// rest of what points at it is [`crate::Core`]'s `remove_job`'s business).
    #[inline]
    pub fn take(&mut self, id: JobId) -> Option<Job> {
        let job = self.jobs.remove(id)?;
        self.bytes -= job.held_bytes();
        if let Some(f) = self.func_mut(job.func()) {
            f.total -= 1;
            count(f, job.state, job.priority.index(), false);
        }
        Some(job)
    }

    /// Pops the first live queued job of `func` at priority `p`, skipping
    /// stale ids (it stays counted as queued until [`JobTable::start`]).
    #[inline]
    pub fn pop_queued(&mut self, func: FuncId, p: usize) -> Option<JobId> {
        loop {
            let f = self.func_mut(func)?;
            let q = &mut f.queues[p];
            let id = q.pop_front()?;
            if q.is_empty() && q.capacity() > SHRINK_QUEUE {
                // A deep queue drained: give its memory back.
                *q = Default::default();
            }
            let live = self.get(id).is_some_and(|j| {
                j.state == JobState::Queued && j.func() == func && j.priority.index() == p
            });
            if live {
                return Some(id);
            }
        }
    }

    /// A worker takes job `id` at `now`: it is running, under a new
    /// assignment number (returned).
    #[inline]
    pub fn start(&mut self, id: JobId, worker: ConnId, now: Millis) -> u64 {
        self.set_state(id, JobState::Running);
        self.assignments += 1;
        let run = Run {
            worker,
            assignment: self.assignments,
            numerator: 0,
            denominator: 0,
            started: now,
        };
        self.runs.insert(id, run);
        self.assignments
    }

    /// The run of a job a worker holds.
    #[inline]
    pub fn run(&self, id: JobId) -> Option<&Run> {
        self.runs.get(&id)
    }

    /// A running job's progress, as its worker's WORK_STATUS gave it.
    pub fn set_progress(&mut self, id: JobId, numerator: u32, denominator: u32) {
        if let Some(run) = self.runs.get_mut(&id) {
            run.numerator = numerator;
            run.denominator = denominator;
        }
    }

    /// Every run, in no particular order.
    pub fn runs(&self) -> impl Iterator<Item = (JobId, &Run)> {
        self.runs.iter().map(|(&id, run)| (id, run))
    }

    /// A job leaves its worker: its run is over (its state moves with the
    /// caller's next step).
    #[inline]
    pub fn release(&mut self, id: JobId) -> Option<Run> {
        self.runs.remove(&id)
    }

    /// A worker's run of a job ends at `now` (whatever the outcome, before
    /// [`JobTable::release`]): its length goes into the function's run
    /// histogram (a run restored as cut off has no start to measure from)
    /// and, unless an admin cancelled the job meanwhile, the outcome into
    /// its stats (`failed` `None`: completed).
    #[inline]
    pub fn end_run(&mut self, id: JobId, now: Millis, failed: Option<Reason>) {
        let ms = self.runs.get(&id).map(|r| now.saturating_sub(r.started));
        let Some(job) = self.jobs.get(id) else {
            return;
        };
        let cancelled = job.state == JobState::Cancelled;
        let Some(f) = self.func_mut(job.func()) else {
            return;
        };
        if let Some(ms) = ms {
            f.stats.run.observe(ms);
        }
        match failed {
            _ if cancelled => {}
            None => f.stats.completed += 1,
            Some(reason) => f.stats.failed[reason as usize] += 1,
        }
    }

    /// A connection registered `func`, which it had not (`early`: it takes
    /// epoch jobs before they are due).
    pub fn ability_added(&mut self, func: FuncId, early: bool) {
        if let Some(f) = self.func_mut(func) {
            f.workers += 1;
            f.early_takers += u32::from(early);
        }
    }

    /// A connection that registered `func` asked for epoch jobs early.
    pub fn early_taker_added(&mut self, func: FuncId) {
        if let Some(f) = self.func_mut(func) {
            f.early_takers += 1;
        }
    }

    /// A connection let go of these abilities (CANT_DO, RESET_ABILITIES,
    /// or it closed). Once a function's last early taker is gone, its
    /// offered epoch jobs simply wait for their time.
    pub fn abilities_dropped(&mut self, dropped: &[Ability], early: bool) {
        for a in dropped {
            if let Some(f) = self.func_mut(a.func) {
                f.workers -= 1;
                if early {
                    f.early_takers -= 1;
                    if f.early_takers == 0 {
                        f.early = Default::default();
                        f.early_sleepers = Default::default();
                    }
                }
            }
        }
    }

    /// Offers epoch job `id` (scheduled, not yet due) to its function's
    /// early takers; `false` if it has none.
    pub fn offer_early(&mut self, id: JobId) -> bool {
        let Some(func) = self.get(id).map(|j| j.func()) else {
            return false;
        };
        match self.func_mut(func) {
            Some(f) if f.early_takers > 0 => {
                f.early.push_back(id);
                true
            }
            _ => false,
        }
    }

    /// Pops the first epoch job of `func` still waiting for its time,
    /// skipping stale ids (it stays counted as scheduled until
    /// [`JobTable::start`]).
    pub fn pop_early(&mut self, func: FuncId) -> Option<JobId> {
        loop {
            let id = self.func_mut(func)?.early.pop_front()?;
            let live = self.get(id).is_some_and(|j| {
                j.state == JobState::Scheduled && j.func() == func && j.due().is_some()
            });
            if live {
                return Some(id);
            }
        }
    }
}

#[cfg(test)]
mod tests;
