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

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use gearshift_proto::Priority;

    use super::*;
    use crate::config::CoreConfig;
    use crate::conn::{Conn, ConnInfo, Rights};
    use crate::ids::ConnId;
    use crate::job::{ConnList, Persist, Run};

    fn job(id: JobId, func: FuncId, state: JobState, data: &'static str) -> Job {
        Job {
            id,
            payload: Bytes::from_static(data.as_bytes()),
            unique_len: 0,
            created: 0,
            clients: ConnList::Empty,
            extra: None,
            func: func as u32,
            retries: 0,
            priority: Priority::High,
            background: true,
            state,
            persist: Persist::No,
        }
    }

    /// A core with one function; its id.
    fn core() -> (Core, FuncId) {
        let mut core = Core::new(CoreConfig::default());
        let f = core.function_id(b"f");
        (core, f)
    }

    fn f(core: &Core, func: FuncId) -> &Function {
        core.func(func).expect("the function exists")
    }

    /// Hands job `id` to worker `w` as GRAB does (its run, its held list).
    fn run_on(core: &mut Core, id: JobId, w: ConnId) {
        core.set_state(id, JobState::Running);
        let run = Run {
            worker: w,
            assignment: 1,
            numerator: 0,
            denominator: 0,
            started: 10,
        };
        core.running.insert(id, run);
        core.conns.get_mut(&w.0).expect("worker").held.push(id);
    }

    fn worker(core: &mut Core, w: ConnId) {
        let info = ConnInfo {
            fd: 1,
            ip: "127.0.0.1".into(),
            loopback: true,
            rights: Rights::ALL,
            node: None,
            identity: None,
        };
        core.conns.insert(w.0, Conn::new(info, 0));
    }

    #[test]
    fn insert_counts_the_job_in_its_state_its_bytes_and_submissions() {
        let (mut core, func) = core();
        core.insert_job(job(1, func, JobState::Queued, "abc"), true);
        core.insert_job(job(2, func, JobState::Scheduled, "de"), false);
        let mut pending = job(3, func, JobState::Pending, "");
        pending.persist = Persist::Pending;
        core.insert_job(pending, true);
        let f = f(&core, func);
        assert_eq!(
            (f.total, f.queued, f.scheduled, f.running),
            (3, [1, 0, 0], 1, 0)
        );
        assert_eq!(f.stats.submitted, 2, "a restored job is not a submission");
        assert_eq!(core.job_bytes, 5);
        core.check_invariants().expect("books match the jobs");
    }

    #[test]
    fn set_state_moves_one_count_and_counts_a_run_sent_back_as_a_retry() {
        let (mut core, func) = core();
        worker(&mut core, ConnId(7));
        core.insert_job(job(1, func, JobState::Queued, "x"), true);
        run_on(&mut core, 1, ConnId(7));
        assert_eq!((f(&core, func).queued[0], f(&core, func).running), (0, 1));
        assert_eq!(f(&core, func).stats.retried, 0, "a start is no retry");
        core.check_invariants().expect("running job counted");
        core.running.remove(&1);
        core.conns.get_mut(&7).expect("worker").held.clear();
        assert_eq!(core.set_state(1, JobState::Queued), Some(JobState::Running));
        assert_eq!(f(&core, func).stats.retried, 1);
        run_on(&mut core, 1, ConnId(7));
        core.running.remove(&1);
        core.conns.get_mut(&7).expect("worker").held.clear();
        core.set_state(1, JobState::Scheduled);
        let f = f(&core, func);
        assert_eq!((f.queued[0], f.scheduled, f.running, f.total), (0, 1, 0, 1));
        assert_eq!(f.stats.retried, 2);
        assert_eq!(core.set_state(9, JobState::Queued), None, "no such job");
        core.check_invariants().expect("books match the jobs");
    }

    #[test]
    fn take_uncounts_the_job_and_its_bytes() {
        let (mut core, func) = core();
        core.insert_job(job(1, func, JobState::Queued, "abc"), true);
        core.insert_job(job(2, func, JobState::Queued, "de"), true);
        assert_eq!(core.take_job(1).map(|j| j.id), Some(1));
        assert!(core.take_job(1).is_none(), "taken once");
        let f = f(&core, func);
        assert_eq!((f.total, f.queued[0]), (1, 1));
        assert_eq!(core.job_bytes, 2);
        core.check_invariants().expect("books match the jobs");
    }

    #[test]
    fn end_run_counts_the_outcome_unless_the_job_was_cancelled() {
        let (mut core, func) = core();
        worker(&mut core, ConnId(7));
        for id in 1..=3 {
            core.insert_job(job(id, func, JobState::Queued, "x"), true);
            run_on(&mut core, id, ConnId(7));
        }
        core.now = 25;
        core.end_run(1, None);
        core.end_run(2, Some(Reason::Exception));
        core.set_state(3, JobState::Cancelled);
        core.end_run(3, Some(Reason::Fail));
        let s = &f(&core, func).stats;
        assert_eq!(s.completed, 1);
        assert_eq!(s.failed, [0, 1, 0, 0]);
        assert_eq!(
            (s.run.count, s.run.sum_ms),
            (3, 45),
            "every run's length is observed"
        );
    }

    #[test]
    fn abilities_count_workers_and_the_checker_sees_a_miscount() {
        let (mut core, func) = core();
        worker(&mut core, ConnId(7));
        let ability = Ability {
            func,
            timeout_ms: None,
        };
        core.conns
            .get_mut(&7)
            .expect("worker")
            .abilities
            .push(ability);
        core.ability_added(func);
        assert_eq!(f(&core, func).workers, 1);
        core.check_invariants().expect("one worker");
        core.func_mut(func).expect("f").workers += 1;
        assert!(core.check_invariants().is_err(), "a miscount is caught");
        core.func_mut(func).expect("f").workers -= 1;
        let c = core.conns.remove(&7).expect("worker");
        core.abilities_dropped(&c.abilities);
        assert_eq!(f(&core, func).workers, 0);
        core.check_invariants().expect("no workers");
    }

    #[test]
    fn the_checker_sees_miscounted_jobs_and_bytes() {
        let (mut core, func) = core();
        core.insert_job(job(1, func, JobState::Queued, "abc"), true);
        core.job_bytes += 1;
        assert!(core.check_invariants().is_err(), "bytes miscounted");
        core.job_bytes -= 1;
        core.func_mut(func).expect("f").queued[0] += 1;
        assert!(core.check_invariants().is_err(), "queue miscounted");
    }

    #[test]
    #[should_panic(expected = "overflow")]
    fn a_count_taken_below_zero_fails_instead_of_hiding() {
        let (mut core, func) = core();
        let ability = Ability {
            func,
            timeout_ms: None,
        };
        core.abilities_dropped(&[ability]);
    }
}
