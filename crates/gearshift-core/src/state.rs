//! The one place a job enters the table, changes state or leaves it: the
//! function's counters (`total`, `queued[p]`, `scheduled`, `running`) move
//! here and nowhere else (and `stats.submitted` with a new job), so they always equal a recount of the jobs
//! (`invariants.rs` checks it). Queue order, timers, the store and the
//! clients are the callers' business; this file only keeps the books.

use crate::engine::Core;
use crate::function::Function;
use crate::ids::JobId;
use crate::job::{Job, JobState};
use crate::metrics::FuncStats;

/// Adds (`+1`) or takes away (`-1`) a job in `state` of priority `p`.
fn count(f: &mut Function, state: JobState, p: usize, add: bool) {
    let n = match state {
        JobState::Pending => return,
        JobState::Queued => &mut f.queued[p],
        JobState::Scheduled => &mut f.scheduled,
        JobState::Running | JobState::Cancelled => &mut f.running,
    };
    *n = if add { *n + 1 } else { n.saturating_sub(1) };
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

    /// The stats of a job's function.
    pub(crate) fn stats_of(&mut self, id: JobId) -> Option<&mut FuncStats> {
        let func = self.jobs.get(id)?.func();
        self.func_mut(func).map(|f| &mut f.stats)
    }

    /// Moves a job to `to`; returns the state it left (`None`: no such job).
    pub(crate) fn set_state(&mut self, id: JobId, to: JobState) -> Option<JobState> {
        let job = self.jobs.get_mut(id)?;
        let from = std::mem::replace(&mut job.state, to);
        let (func, p) = (job.func(), job.priority.index());
        if from != to {
            if let Some(f) = self.func_mut(func) {
                count(f, from, p, false);
                count(f, to, p, true);
            }
        }
        Some(from)
    }

    /// Takes a job out of the table and out of its function's counts (the
    /// rest of what points at it is [`Core::remove_job`]'s business).
    pub(crate) fn take_job(&mut self, id: JobId) -> Option<Job> {
        let job = self.jobs.remove(id)?;
        self.job_bytes = self.job_bytes.saturating_sub(job.held_bytes());
        if let Some(f) = self.funcs.get_mut(job.func()).and_then(Option::as_mut) {
            f.total = f.total.saturating_sub(1);
            count(f, job.state, job.priority.index(), false);
        }
        Some(job)
    }
}
