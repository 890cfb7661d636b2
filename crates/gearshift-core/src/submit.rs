//! Job submission: unique-id coalescing, queue limits, handle assignment,
//! epoch scheduling, and waking the workers asleep on the function.

use bytes::Bytes;
use gearshift_proto::{Response, Submission};

use crate::config::MAX_UNIQUE;
use crate::effect::{Effect, StoreOp};
use crate::engine::Core;
use crate::history::Step;
use crate::ids::{ConnId, FuncId, JobId};
use crate::job::{ConnList, Job, JobExtra, JobState, Payload, Persist};
use crate::table::Full;
use crate::timers::Timer;
use crate::Millis;

/// A submission's payload (unique and workload) and reducer: one with an
/// empty unique keeps its packet's body as the workload.
fn into_parts(mut s: Submission) -> (Payload, Option<Bytes>) {
    let reducer = s.take_reducer();
    let payload = if s.unique_is_empty() {
        Payload::plain(s.into_data())
    } else {
        Payload::joined(s.unique(), s.data())
    };
    (payload, reducer)
}

impl Core {
    pub(crate) fn submit(&mut self, conn: ConnId, s: Submission, now: Millis) {
        if s.unique().len() > MAX_UNIQUE {
            self.send(
                conn,
                Response::error("ARGUMENT_TOO_LARGE", "Unique value too large"),
            );
            return;
        }
        let func = self.function_id_for(conn, s.function());
        if let Some(existing) = self.table.coalesces_with(func, s.unique(), s.data()) {
            self.join(conn, existing, s.background());
            return;
        }
        let (priority, background) = (s.priority(), s.background());
        let p = priority.index();
        let mut policy = false;
        let bytes = (s.unique().len() + s.data().len()) as u64;
        if let Err(full) = self.table.admit(func, p, bytes, self.cfg.max_job_bytes) {
            let text = match full {
                Full::Memory => {
                    "Job queue is full: the server holds its --max-queue-memory of job data"
                }
                Full::Queue => "Job queue is full",
            };
            self.send(conn, Response::error("QUEUE_ERROR", text));
            return;
        }
        if let Some(f) = self.table.func(func) {
            if let Some(pol) = &f.policy {
                if pol.require_worker && f.workers == 0 {
                    self.refuse_no_worker(conn, func);
                    return;
                }
                policy = true;
            }
        }
        let id = self.new_job_id();
        let due = s
            .epoch()
            .map(|secs| (secs.max(0) as u64).saturating_mul(1000))
            .filter(|&d| d > now);
        let durable = background && self.cfg.durable;
        let (payload, reducer) = into_parts(s);
        let extra =
            (reducer.is_some() || due.is_some()).then(|| Box::new(JobExtra { reducer, due }));
        // A new job starts where it belongs, so it needs no second lookup:
        // acknowledged, and runnable, only once the store confirms it;
        // otherwise queued at once unless it is not due yet.
        let state = if durable {
            JobState::Pending
        } else if due.is_some() {
            JobState::Scheduled
        } else {
            JobState::Queued
        };
        self.table.insert(
            Job {
                id,
                payload: payload.bytes,
                unique_len: payload.unique_len,
                created: now,
                clients: if background {
                    ConnList::Empty
                } else {
                    ConnList::One(conn)
                },
                extra,
                func: func as u32,
                retries: 0,
                priority,
                background,
                state,
                persist: Persist::No,
            },
            true,
        );
        if !background {
            self.conns.wait_on(conn, id);
        }
        if policy || self.wants(crate::events::Kind::Created) {
            self.record(id, Step::Queued);
        }
        let mut sleepers = false;
        if let Some(f) = self.table.func_mut(func) {
            sleepers = !f.sleepers.is_empty() && !f.paused;
            if state == JobState::Queued {
                f.queues[p].push_back(id);
            }
        }
        if durable {
            self.acks.wait(id, conn);
            self.hold_ack(conn, id);
            self.store_add(id);
            return;
        }
        // A new job's handle is always this server's own form.
        self.emit(conn, Effect::Created(conn, id));
        match (state, due) {
            (JobState::Scheduled, Some(at)) => self.timers.arm(at, Timer::Due(id)),
            _ if sleepers => self.wake_sleepers(func),
            _ => {}
        }
    }

    /// A new job's (or schedule's) number, never reused; a durable server
    /// keeps the store's reservation of numbers ahead of it.
    #[inline]
    pub(crate) fn new_job_id(&mut self) -> JobId {
        let id = self.handles.issue();
        if self.cfg.durable {
            if let Some(end) = self.handles.reserve_ahead() {
                self.effects.push(Effect::Store(StoreOp::Reserve(end)));
            }
        }
        id
    }

    /// [`JobTable::function_id`] for a connection's submission: a client
    /// usually submits to the function it named last, so that one is
    /// checked first (by name, so a dropped function never matches).
    fn function_id_for(&mut self, conn: ConnId, name: &[u8]) -> FuncId {
        let hint = self.conns.last_func(conn);
        if self.table.func(hint).is_some_and(|f| f.name[..] == *name) {
            return hint;
        }
        let id = self.table.function_id(name, &self.policies);
        self.conns.set_last_func(conn, id);
        id
    }

    /// Makes a new job grab-able, or schedules it if it is not due yet.
    pub(crate) fn release(&mut self, id: JobId, now: Millis) {
        let Some(job) = self.table.get(id) else {
            return;
        };
        match job.due().filter(|&d| d > now) {
            Some(at) => {
                self.table.set_state(id, JobState::Scheduled);
                self.timers.arm(at, Timer::Due(id));
            }
            None => self.enqueue(id, false),
        }
    }

    /// A duplicate submission joins the existing job: same handle; a
    /// foreground submitter is attached, a background one makes the job
    /// outlive its clients.
    fn join(&mut self, conn: ConnId, id: JobId, background: bool) {
        let Some(job) = self.table.get(id) else {
            return;
        };
        if job.state == JobState::Cancelled {
            // The job is on its way out; nobody may wait on it.
            let handle = self.handles.of(id);
            self.send(conn, Response::JobCreated(handle));
            return;
        }
        let (was_background, persist) = (job.background, job.persist);
        if !background {
            self.table.add_client(id, conn);
            self.conns.wait_on(conn, id);
        }
        if background && !was_background {
            self.table.set_background(id, true);
            if self.cfg.durable {
                // A foreground job becomes a background one: it must be
                // stored before this submitter hears JOB_CREATED.
                self.acks.wait(id, conn);
                self.hold_ack(conn, id);
                self.store_add(id);
                return;
            }
        }
        if persist == Persist::Pending {
            self.acks.wait(id, conn);
            self.hold_ack(conn, id);
            return;
        }
        let handle = self.handles.of(id);
        self.send(conn, Response::JobCreated(handle));
    }

    /// Puts a job in its function's queue (when it comes back from a worker,
    /// at its place in line by handle number, so before every later job)
    /// and wakes sleepers.
    pub(crate) fn enqueue(&mut self, id: JobId, front: bool) {
        let Some(job) = self.table.get(id) else {
            return;
        };
        let (func, p) = (job.func(), job.priority.index());
        self.table.set_state(id, JobState::Queued);
        let Some(f) = self.table.func_mut(func) else {
            return;
        };
        if front {
            // Back in line where its number puts it: ahead of every job
            // submitted after it, and behind older jobs that came back
            // before it (several held jobs may come back in any order).
            let q = &mut f.queues[p];
            let at = q.iter().position(|&j| j > id).unwrap_or(q.len());
            q.insert(at, id);
        } else {
            f.queues[p].push_back(id);
        }
        if !f.paused {
            self.wake_sleepers(func);
        }
    }

    /// An epoch job's time came.
    pub(crate) fn epoch_due(&mut self, id: JobId) {
        let Some(job) = self.table.get(id) else {
            return;
        };
        if job.state != JobState::Scheduled {
            return;
        }
        if self.history.retry_due(id) {
            self.record(id, Step::Requeued("retry delay passed"));
        }
        self.enqueue(id, false);
    }

    /// `require_worker`: a submission to a function no connected worker can
    /// run is refused at once (ERROR NO_WORKER) instead of waiting. (A
    /// submission that joins an existing job by its unique is not refused:
    /// that job waits anyway.)
    fn refuse_no_worker(&mut self, conn: ConnId, func: FuncId) {
        let Some(f) = self.table.func(func) else {
            return;
        };
        let text = format!(
            "No worker can run function {}",
            String::from_utf8_lossy(&f.name).escape_debug()
        );
        self.send(conn, Response::error("NO_WORKER", Bytes::from(text)));
    }

    /// NOOPs up to `--worker-wakeup` sleeping workers of `func` (0 = all).
    pub(crate) fn wake_sleepers(&mut self, func: FuncId) {
        let limit = match self.cfg.worker_wakeup {
            0 => usize::MAX,
            n => n as usize,
        };
        let mut woken = 0;
        while woken < limit {
            let Some(w) = self
                .table
                .func_mut(func)
                .and_then(|f| f.sleepers.pop_front())
            else {
                break;
            };
            if !self.conns.noop(w, func) {
                continue;
            }
            woken += 1;
            self.send(w, gearshift_proto::Response::Noop);
        }
    }

    /// Puts a sleeping worker on the wake lists of all its functions.
    pub(crate) fn enlist_sleeper(&mut self, conn: ConnId) {
        let Core { conns, table, .. } = self;
        let Some(c) = conns.get(conn) else {
            return;
        };
        for a in c.abilities() {
            let func = a.func;
            let Some(f) = table.func_mut(func) else {
                continue;
            };
            f.sleepers.push_back(conn);
            // Stale entries pile up when a worker sleeps again and again on a
            // function that never gets jobs; compact once they outnumber
            // the function's workers.
            if f.sleepers.len() > 2 * f.workers as usize + 16 {
                let mut seen = crate::ids::IdSet::default();
                f.sleepers.retain(|c| seen.insert(c.0));
                f.sleepers.retain(|&c| conns.wakeable_for(c, func));
            }
        }
    }
}
