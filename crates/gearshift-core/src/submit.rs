//! The client side: job submission (unique-id coalescing, queue limits,
//! handle assignment, epoch scheduling), status requests, and a submitter
//! that stops waiting (its job dropped if nobody else waits and it has not
//! started).

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

/// What [`Core::stop_waiting`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopWaiting {
    /// It had not started: dropped, it never runs.
    Dropped,
    /// A worker runs it: it goes on, with nobody waiting for its result.
    Running,
    /// Other submissions wait for it too: left as it is.
    Shared {
        /// A worker runs it (else it is still queued).
        running: bool,
    },
    /// It had already ended (or never existed).
    Ended,
}

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
            sleepers = !f.sleepers.is_empty() && !f.held();
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
            (JobState::Scheduled, Some(at)) => {
                self.timers.arm(at, Timer::Due(id));
                self.offer_early(id, func);
            }
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
        let func = job.func();
        match job.due().filter(|&d| d > now) {
            Some(at) => {
                self.table.set_state(id, JobState::Scheduled);
                self.timers.arm(at, Timer::Due(id));
                self.offer_early(id, func);
            }
            None => self.enqueue(id, false),
        }
    }

    /// Offers an epoch job that is not due yet to the workers of its
    /// function that take such jobs early (OPTION_REQ epoch-early: a bridge
    /// to a queue that schedules jobs itself), waking those asleep. Its
    /// timer stays armed: if none takes it, it is queued when due.
    pub(crate) fn offer_early(&mut self, id: JobId, func: FuncId) {
        if !self.table.offer_early(id) {
            return;
        }
        self.wake_early_sleepers(func);
    }

    /// An early taker registered `func`: if it is the function's first,
    /// the epoch jobs already waiting for their time are offered, soonest
    /// first (found through the timers; this happens once per such worker).
    pub(crate) fn early_taker_joined(&mut self, func: FuncId) {
        let first = self
            .table
            .func(func)
            .is_some_and(|f| f.early_takers == 1 && f.scheduled > 0);
        if !first {
            return;
        }
        let mut offered = false;
        for (_, id) in self.epoch_jobs(usize::MAX).1 {
            if self.table.get(id).is_some_and(|j| j.func() == func) {
                offered |= self.table.offer_early(id);
            }
        }
        if offered {
            self.wake_early_sleepers(func);
        }
    }

    /// NOOPs every early taker asleep on `func`.
    fn wake_early_sleepers(&mut self, func: FuncId) {
        let Some(f) = self.table.func_mut(func).filter(|f| !f.held()) else {
            return;
        };
        for w in std::mem::take(&mut f.early_sleepers) {
            if self.conns.noop(w, func, true) {
                self.send(w, Response::Noop);
            }
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
        // Back in line where its number puts it: ahead of every job
        // submitted after it, and behind older jobs that came back before
        // it (several held jobs may come back in any order) or became due.
        // Ids of jobs that left the queue are skipped: the place must not
        // depend on them once due epoch jobs put the queue out of handle order.
        let mut at = None;
        if front {
            let table = &self.table;
            let later = |j: &JobId| {
                *j > id
                    && table.get(*j).is_some_and(|x| {
                        x.state == JobState::Queued && x.func() == func && x.priority.index() == p
                    })
            };
            at = table.func(func).map(|f| f.queues[p].iter().position(later));
        }
        let Some(f) = self.table.func_mut(func) else {
            return;
        };
        let q = &mut f.queues[p];
        match at {
            Some(at) => q.insert(at.unwrap_or(q.len()), id),
            None => q.push_back(id),
        }
        if !f.held() {
            self.wake_sleepers(func);
        }
    }

    /// A job a worker lost goes back to the head of its queue, or, an epoch
    /// job an early taker lost, to waiting for its time (its timer is still
    /// armed), offered early again.
    pub(crate) fn back_in_line(&mut self, id: JobId) {
        let Some(job) = self.table.get(id) else {
            return;
        };
        let func = job.func();
        if job.due().is_some_and(|due| due > self.now) {
            self.table.set_state(id, JobState::Scheduled);
            self.offer_early(id, func);
        } else {
            self.enqueue(id, true);
        }
    }

    /// An epoch job's time came.
    pub(crate) fn epoch_due(&mut self, id: JobId) {
        let Some(job) = self.table.get(id) else {
            return;
        };
        // Not yet due: an earlier timer of a job an early taker ran
        // (OPTION_REQ epoch-early) that now waits out a retry delay.
        if job.state != JobState::Scheduled || job.due().is_some_and(|d| d > self.now) {
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
}

/// A client asks about a job.
impl Core {
    pub(crate) fn get_status(&mut self, conn: ConnId, handle: Bytes) {
        let r = match self
            .job_by_handle(&handle)
            .and_then(|id| self.table.get(id))
        {
            Some(job) => {
                let run = self.table.run(job.id);
                Response::StatusRes {
                    handle,
                    known: true,
                    running: matches!(job.state, JobState::Running | JobState::Cancelled),
                    numerator: run.map_or(0, |r| r.numerator),
                    denominator: run.map_or(0, |r| r.denominator),
                }
            }
            None => Response::StatusRes {
                handle,
                known: false,
                running: false,
                numerator: 0,
                denominator: 0,
            },
        };
        self.send(conn, r);
    }

    pub(crate) fn get_status_unique(&mut self, conn: ConnId, unique: Bytes) {
        let job = self.table.find_named(None, &unique);
        let r = match job {
            Some(job) => {
                let run = self.table.run(job.id);
                Response::StatusResUnique {
                    unique,
                    known: true,
                    running: matches!(job.state, JobState::Running | JobState::Cancelled),
                    numerator: run.map_or(0, |r| r.numerator),
                    denominator: run.map_or(0, |r| r.denominator),
                    waiting: job.clients.len() as u32,
                }
            }
            None => Response::StatusResUnique {
                unique,
                known: false,
                running: false,
                numerator: 0,
                denominator: 0,
                waiting: 0,
            },
        };
        self.send(conn, r);
    }
}

/// A client stops waiting.
impl Core {
    /// A client stops waiting on a job; an unstarted foreground job nobody
    /// waits on any more is dropped.
    /// Detaches a submitter from a job (its connection closed, or it gave up
    /// waiting): a foreground job nobody waits for any more is dropped
    /// unless a worker holds it. Returns whether it was dropped.
    pub(crate) fn detach_client(&mut self, id: JobId, conn: ConnId) -> bool {
        let Some(job) = self.table.remove_client(id, conn) else {
            return false;
        };
        // A foreground job waiting for a retry is dropped like a queued one.
        let waiting = matches!(job.state, JobState::Queued | JobState::Scheduled);
        if job.clients.is_empty() && !job.background && waiting {
            self.remove_job(id);
            return true;
        }
        false
    }

    /// A submitter gives up waiting for a foreground job (the HTTP API's
    /// `wait_timeout`): when it is the job's only waiting client, it is
    /// detached as if its connection had closed, which is what `gearshift
    /// submit --wait-timeout` does and gearmand's rule: a job still queued
    /// is dropped, one a worker runs goes on with nobody waiting. A job
    /// other submissions also wait for is left as it is.
    pub fn stop_waiting(&mut self, handle: &[u8]) -> StopWaiting {
        let Some(id) = self.job_by_handle(handle) else {
            return StopWaiting::Ended;
        };
        let Some(job) = self.table.get(id) else {
            return StopWaiting::Ended;
        };
        let running = matches!(job.state, JobState::Running | JobState::Cancelled);
        // One entry per submission: a single one is the caller's, which
        // still waits; with more, others wait too.
        let only = match job.clients.as_slice() {
            &[only] if !job.background => only,
            _ => return StopWaiting::Shared { running },
        };
        self.conns.stop_waiting(only, id);
        if self.detach_client(id, only) {
            tracing::info!(handle = %String::from_utf8_lossy(handle), "foreground job dropped: its submitter stopped waiting before it started");
            StopWaiting::Dropped
        } else {
            StopWaiting::Running
        }
    }
}
