//! The one place a job enters the table, changes state or leaves it, and
//! a worker gains or loses a function: the function's counters (`total`,
//! `queued[p]`, `scheduled`, `running`, `workers`, and the stats
//! `submitted`, `completed`, `failed`, `retried`) and the table's
//! `job_bytes` move here and nowhere else, so they always equal a recount
//! (`invariants.rs` checks it; a miscount underflows and fails a test).
//! Queue order, timers, the store and the clients are the callers'
//! business; this file only keeps the books.

use crate::conn::Ability;
use crate::engine::Core;
use crate::function::Function;
use crate::ids::{FuncId, JobId};
use crate::job::{Job, JobState};
use crate::policy::Reason;

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

impl Core {
    /// Puts a job in the table, counted in the state it starts in; a
    /// `submitted` one (not restored or revived) also in the function's stats.
    #[inline]
    pub(crate) fn insert_job(&mut self, job: Job, submitted: bool) {
        let (func, state, p) = (job.func(), job.state, job.priority.index());
        self.job_bytes += job.held_bytes();
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
    pub(crate) fn set_state(&mut self, id: JobId, to: JobState) -> Option<JobState> {
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
    /// rest of what points at it is [`Core::remove_job`]'s business).
    pub(crate) fn take_job(&mut self, id: JobId) -> Option<Job> {
        let job = self.jobs.remove(id)?;
        self.job_bytes -= job.held_bytes();
        if let Some(f) = self.funcs.get_mut(job.func()).and_then(Option::as_mut) {
            f.total -= 1;
            count(f, job.state, job.priority.index(), false);
        }
        Some(job)
    }

    /// A worker's run of a job ends: its length goes into the function's
    /// run histogram and, unless an admin cancelled the job meanwhile, the
    /// outcome into its stats (`None`: completed). Called once per run,
    /// before the run leaves the running table.
    #[inline]
    pub(crate) fn end_run(&mut self, id: JobId, failed: Option<Reason>) {
        // A run restored as cut off has no start to measure from.
        let ms = self
            .running
            .get(&id)
            .map(|r| self.now.saturating_sub(r.started));
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

    /// A connection registered `func`, which it had not.
    pub(crate) fn ability_added(&mut self, func: FuncId) {
        if let Some(f) = self.func_mut(func) {
            f.workers += 1;
        }
    }

    /// A connection let go of these abilities (CANT_DO, RESET_ABILITIES,
    /// or it closed).
    pub(crate) fn abilities_dropped(&mut self, dropped: &[Ability]) {
        for a in dropped {
            if let Some(f) = self.func_mut(a.func) {
                f.workers -= 1;
            }
        }
    }
}
