//! How a run ends, for every job: the one place that decides between a
//! result, a retry after a backoff, gearmand's requeue, and a final failure
//! (which, for a background job under a policy, is the dead set). Each
//! transition of a job under a policy is also written into its history.
//!
//! A function no policy matches keeps gearmand 1.1's rules exactly: WORK_FAIL
//! and WORK_EXCEPTION are final, a lost worker or a CAN_DO_TIMEOUT requeues
//! the job at the head of its queue (bounded by `--job-retries`).

use std::sync::Arc;

use bytes::Bytes;
use gearshift_proto::Response;

use crate::conn::Conn;
use crate::effect::{Effect, StoreOp};
use crate::engine::Core;
use crate::events::{EventKind, Kind, LiveEvent, WorkerRef};
use crate::ids::{ConnId, JobId};
use crate::job::{Job, JobState, Persist};
use crate::kept::Outcome;
use crate::policy::{Policy, Reason};
use crate::timers::Timer;
use crate::Millis;

pub use crate::history::{
    decode_history, encode_history, Event, LastFailure, Step, Track, MAX_ERROR, MAX_HISTORY,
};

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

impl Core {
    /// The policy of a job's function, if any.
    pub(crate) fn policy_of_job(&self, id: JobId) -> Option<Arc<Policy>> {
        if self.policies.rules.is_empty() {
            // No config: gearmand's rules, and nothing to look up per job.
            return None;
        }
        let job = self.table.get(id)?;
        self.table.func(job.func())?.policy.clone()
    }

    /// The record of a job under a policy, made on first use (a job queued
    /// before its function gained a policy has none until something happens).
    pub(crate) fn track(&mut self, id: JobId) -> Option<&mut Track> {
        self.policy_of_job(id)?;
        Some(self.tracked.entry(id).or_default())
    }

    /// The one place a transition is reported: into a tracked job's
    /// history, and, when lifecycle events are on, out as an
    /// [`Effect::Event`] (for live streams and metrics).
    pub(crate) fn record(&mut self, id: JobId, step: Step) {
        let now = self.now;
        if self.events != 0 && self.wants(crate::events::Kind::of_step(&step)) {
            self.emit_event(id, step.clone());
        }
        if let Some(t) = self.track(id) {
            t.push(now, step);
        }
    }

    /// Whether a transition of `kind` of a job of this function is worth
    /// reporting: it has a policy (history) or events of that kind are on.
    pub(crate) fn reports(&self, func: crate::ids::FuncId, kind: crate::events::Kind) -> bool {
        self.wants(kind) || self.table.func(func).is_some_and(|f| f.policy.is_some())
    }

    fn emit_event(&mut self, id: JobId, step: Step) {
        let handle = self.handles.of(id);
        let function = self.function_of(id);
        let kind = match step {
            // Said with why, which the history's `dead` step leaves to the
            // `failed` step before it.
            Step::Dead => {
                let track = self.tracked.get(&id);
                let attempts = track.map_or_else(
                    || {
                        self.table
                            .get(id)
                            .map_or(0, |j| j.retries.saturating_add(1))
                    },
                    |t| t.attempts,
                );
                let failure =
                    track.and_then(|t| LastFailure::of(&t.history, t.attempts, t.error.as_ref()));
                EventKind::Dead {
                    handle,
                    function,
                    attempts,
                    reason: failure.as_ref().and_then(|f| f.reason),
                    error: failure.map(|f| f.error).unwrap_or_default(),
                }
            }
            step => EventKind::Job {
                handle,
                function,
                step,
            },
        };
        self.push_event(kind);
    }

    /// Turns every kind of live event ([`Effect::Event`]) on or off. Off
    /// (the default) they cost nothing; [`Core::set_event_kinds`] picks kinds.
    pub fn set_lifecycle_events(&mut self, on: bool) {
        self.events = if on { crate::events::Kind::all() } else { 0 };
    }

    /// A run ended without a result, for `reason` (with the worker's text,
    /// if any). Retries it under its policy if the policy says so, else
    /// ends it: clients hear WORK_FAIL (or the exception, if they asked for
    /// exceptions), a background job under a policy goes to the dead set.
    pub(crate) fn run_failed(&mut self, id: JobId, reason: Reason, detail: Bytes, handle: Bytes) {
        self.end_run(id, Some(reason));
        if self.reaped_if_cancelled(id) {
            return;
        }
        let Some(job) = self.table.get(id) else {
            return;
        };
        let attempts = job.retries.saturating_add(1);
        let policy = self.policy_of_job(id);
        // What is kept of the worker's text: a bounded copy, which also lets
        // go of the packet's read buffer (clients still get it whole).
        let kept = Bytes::copy_from_slice(&detail[..detail.len().min(MAX_ERROR)]);
        if let Some(t) = self.track(id) {
            t.error = Some(if kept.is_empty() {
                Bytes::from_static(reason.word().as_bytes())
            } else {
                kept.clone()
            });
        }
        self.record(id, Step::Failed(reason, kept));
        if let Some(p) = policy.as_deref() {
            if p.retries(reason, attempts) && !self.nobody_waits(id) {
                let delay = p.delay(id, attempts);
                self.retry_later(id, delay);
                return;
            }
        }
        self.tell_failure(id, reason, &detail, handle);
        let background = self.table.get(id).is_some_and(|j| j.background);
        if policy.is_some() && background {
            self.bury(id);
        } else {
            self.finish(id, Outcome::Failed, Bytes::new());
        }
    }

    /// A job an admin cancelled while it ran ends when its worker reports,
    /// whatever the report: never retried, kept (under a policy) as cancelled.
    fn reaped_if_cancelled(&mut self, id: JobId) -> bool {
        if self
            .table
            .get(id)
            .is_some_and(|j| j.state == JobState::Cancelled)
        {
            self.finish(id, Outcome::Cancelled, Bytes::new());
            return true;
        }
        false
    }

    /// A foreground job whose clients all left: nobody to retry it for.
    fn nobody_waits(&self, id: JobId) -> bool {
        self.table
            .get(id)
            .is_some_and(|j| !j.background && j.clients.is_empty())
    }

    /// The clients' terminal packet for a final failure.
    fn tell_failure(&mut self, id: JobId, reason: Reason, detail: &Bytes, handle: Bytes) {
        let Some(job) = self.table.get(id) else {
            return;
        };
        if job.clients.is_empty() {
            return;
        }
        let clients = job.clients.clone();
        let h = self.echo_handle(id, handle);
        for &c in &clients {
            let wants = reason == Reason::Exception
                && (self.cfg.exceptions
                    || self.conns.get(&c.0).is_some_and(|conn| conn.exceptions));
            let r = if wants {
                Response::WorkException {
                    handle: h.clone(),
                    data: detail.clone(),
                }
            } else {
                Response::WorkFail(h.clone())
            };
            self.send(c, r);
        }
    }

    /// Takes a running job from its worker to wait `delay` for its next
    /// run; its clients keep waiting. Stored jobs record the attempt count
    /// and the time, so a restart keeps both.
    fn retry_later(&mut self, id: JobId, delay: Millis) {
        let at = self.now.saturating_add(delay);
        self.release_worker(id);
        let Some(attempts) = self.table.retry_at(id, at) else {
            return;
        };
        let stored = self.table.get(id).is_some_and(|j| j.persist != Persist::No);
        self.timers.arm(at, Timer::Due(id));
        if stored {
            self.effects.push(Effect::Store(StoreOp::Retry {
                id,
                attempts,
                due_ms: Some(at),
            }));
        }
        if let Some(t) = self.track(id) {
            t.retry_at = Some(at);
        }
        self.record(id, Step::RetryAt(at));
        tracing::info!(handle = %self.handles.text(id), attempts, delay_ms = delay, "job will be retried");
    }

    /// A job leaves its worker (not its queue or its clients): the worker's
    /// held list and the running table. Its state, and so the function's
    /// counts, change with the caller's next step ([`crate::table::JobTable::set_state`]).
    pub(crate) fn release_worker(&mut self, id: JobId) {
        if let Some(run) = self.table.release(id) {
            if let Some(c) = self.conns.get_mut(&run.worker.0) {
                c.held.retain(|&j| j != id);
            }
        }
    }

    /// Takes a job back from its worker, which vanished, gave up the
    /// function or ran out of time. Under a policy that retries this reason,
    /// the job waits for its backoff like any failure; otherwise gearmand's
    /// rule: to the head of its queue or, past `--job-retries`, failed.
    pub(crate) fn requeue(&mut self, id: JobId, reason: Reason, why: &'static str) {
        let Some(state) = self.table.get(id).map(|j| j.state) else {
            return;
        };
        match state {
            JobState::Cancelled => {
                self.end_run(id, Some(reason));
                self.reaped_if_cancelled(id);
                return;
            }
            JobState::Running => {}
            JobState::Queued | JobState::Scheduled | JobState::Pending => return,
        }
        if self
            .policy_of_job(id)
            .is_some_and(|p| p.retry_on.contains(reason))
        {
            let handle = self.handles.of(id);
            self.run_failed(id, reason, Bytes::from_static(why.as_bytes()), handle);
            return;
        }
        // gearmand's requeue: the run failed for `reason`.
        self.end_run(id, Some(reason));
        let Some(retries) = self.table.count_attempt(id) else {
            return;
        };
        if self.table.get(id).is_some_and(|j| j.persist != Persist::No) {
            self.effects.push(Effect::Store(StoreOp::Update {
                id,
                attempts: retries,
            }));
        }
        let limit = self.cfg.job_retries;
        if limit > 0 && retries >= limit {
            let handle = self.handles.of(id);
            tracing::warn!(
                handle = %String::from_utf8_lossy(&handle),
                retries,
                "dropped job due to max retry count ({why})"
            );
            self.record(id, Step::Failed(reason, Bytes::from_static(why.as_bytes())));
            self.tell_failure(id, reason, &Bytes::new(), handle);
            self.finish(id, Outcome::Failed, Bytes::new());
            return;
        }
        let orphan = self
            .table
            .get(id)
            .is_some_and(|j| !j.background && j.clients.is_empty());
        if orphan {
            // Its clients left while it ran: nobody to run it for any more.
            self.remove_job(id);
            return;
        }
        tracing::info!(handle = %self.handles.text(id), retries, "requeueing job: {why}");
        self.release_worker(id);
        self.record(id, Step::Requeued(why));
        self.enqueue(id, true);
    }

    /// A worker that holds `id` reported WORK_COMPLETE.
    pub(crate) fn run_completed(&mut self, id: JobId, result: Bytes) {
        self.end_run(id, None);
        if self.reaped_if_cancelled(id) {
            return;
        }
        self.record(id, Step::Completed(result.len()));
        self.finish(id, Outcome::Completed, result);
    }

    /// A worker's run of a job ends (whatever the outcome, `None`:
    /// completed): counted by the job table. Called once per run, before
    /// the run leaves the running table.
    #[inline]
    fn end_run(&mut self, id: JobId, failed: Option<Reason>) {
        self.table.end_run(id, self.now, failed);
    }

    /// Ends a job for good: kept queryable if its policy keeps results,
    /// then removed with everything that points at it.
    pub(crate) fn finish(&mut self, id: JobId, outcome: Outcome, result: Bytes) {
        let keep_for = self.policy_of_job(id).map_or(0, |p| p.keep_results);
        if keep_for > 0 {
            if let Some(mut rec) = self.finished_record(id, outcome, result) {
                rec.expires = self.now.saturating_add(keep_for);
                self.keep_record(rec);
            }
        }
        self.remove_job(id);
    }

    /// Forgets a job entirely: indexes, counters, holders and waiters.
    pub(crate) fn remove_job(&mut self, id: JobId) -> Option<Job> {
        let job = self.table.take(id)?;
        if let Some(run) = self.table.release(id) {
            if let Some(c) = self.conns.get_mut(&run.worker.0) {
                c.held.retain(|&j| j != id);
            }
        }
        if !self.tracked.is_empty() {
            self.tracked.remove(&id);
        }
        for client in &job.clients {
            if let Some(c) = self.conns.get_mut(&client.0) {
                c.waiting.remove(&id);
            }
        }
        if job.persist != crate::job::Persist::No {
            self.effects
                .push(Effect::Store(crate::effect::StoreOp::Done(id)));
        }
        // Submitters still owed an answer: the job was accepted, then ended
        // before the store confirmed it.
        let acks = self.acks.take(id);
        if let Some(acks) = acks {
            let handle = self.handles.of(id);
            for &c in &acks {
                self.resolve_ack(c, id, Response::JobCreated(handle.clone()));
            }
        }
        self.handles.forget(id);
        Some(job)
    }

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
        if let Some(c) = self.conns.get_mut(&only.0) {
            c.waiting.remove(&id);
        }
        if self.detach_client(id, only) {
            tracing::info!(handle = %String::from_utf8_lossy(handle), "foreground job dropped: its submitter stopped waiting before it started");
            StopWaiting::Dropped
        } else {
            StopWaiting::Running
        }
    }

    /// Counts a finished run on the worker that held it.
    pub(crate) fn count_run(&mut self, worker: ConnId, ok: bool) {
        if let Some(c) = self.conns.get_mut(&worker.0) {
            if ok {
                c.jobs_done += 1;
            } else {
                c.jobs_failed += 1;
            }
        }
    }
}

impl Core {
    /// Whether events of `kind` are wanted (one AND; 0 when none are).
    pub(crate) fn wants(&self, kind: Kind) -> bool {
        self.events & kind.bit() != 0
    }

    /// Produces only the kinds in `mask` (bits of [`Kind::bit`]); 0 turns
    /// events off, when they cost one test of the mask each.
    pub fn set_event_kinds(&mut self, mask: u16) {
        self.events = mask;
    }

    /// Sends out a live event, stamped now (callers check [`Core::wants`]).
    pub(crate) fn push_event(&mut self, kind: EventKind) {
        let at = self.now;
        self.effects
            .push(Effect::Event(Box::new(LiveEvent { at, kind })));
    }

    /// A worker as events name it.
    pub(crate) fn worker_ref(&self, id: ConnId, c: &Conn) -> WorkerRef {
        WorkerRef {
            id: id.0,
            fd: c.info.fd,
            label: c.event_label(),
            address: c.info.ip.clone(),
            functions: c
                .abilities
                .iter()
                .filter_map(|a| self.table.func(a.func).map(|f| f.name.clone()))
                .collect(),
        }
    }

    /// The name of a live job's function (empty if it has none).
    pub(crate) fn function_of(&self, id: crate::ids::JobId) -> Bytes {
        self.table
            .get(id)
            .and_then(|j| self.table.func(j.func()))
            .map(|f| f.name.clone())
            .unwrap_or_default()
    }

    /// A worker sent WORK_STATUS for a job it holds.
    pub(crate) fn progress_event(
        &mut self,
        id: crate::ids::JobId,
        numerator: u32,
        denominator: u32,
    ) {
        let handle = self.handles.of(id);
        let function = self.function_of(id);
        self.push_event(EventKind::Progress {
            handle,
            function,
            numerator,
            denominator,
        });
    }

    /// A connection registered its first function.
    pub(crate) fn worker_joined(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get(&id.0) {
            let w = self.worker_ref(id, c);
            self.push_event(EventKind::WorkerJoined(w));
        }
    }
}
