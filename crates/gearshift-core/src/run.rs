//! A run, from GRAB to its end, in one place. A worker takes a job (GRAB:
//! highest priority first across its functions, round-robin among them),
//! reports on it (WORK_STATUS, WORK_DATA, WORK_WARNING), ends it
//! (WORK_COMPLETE, WORK_FAIL, WORK_EXCEPTION) or loses it (it vanished,
//! gave up the function, or overran its time limit); then this file decides
//! what follows, for every job: a result, a retry after a backoff,
//! gearmand's requeue, or a final failure (for a background job under a
//! policy, the dead set). The job table counts each step (`start`,
//! `set_progress`, `end_run`, `release`, `take`); each transition of a job
//! under a policy goes into its history through [`Core::record`].
//!
//! A function no policy matches keeps gearmand 1.1's rules exactly: WORK_FAIL
//! and WORK_EXCEPTION are final, a lost worker or a CAN_DO_TIMEOUT requeues
//! the job at the head of its queue (bounded by `--job-retries`).

use std::sync::Arc;

use bytes::Bytes;
use gearshift_proto::{GrabKind, Response};

use crate::effect::{Effect, StoreOp};
use crate::engine::Core;
use crate::history::{Step, MAX_ERROR};
use crate::ids::{ConnId, JobId};
use crate::job::{ConnList, Job, JobState, Persist};
use crate::kept::Outcome;
use crate::policy::{Policy, Reason};
use crate::timers::Timer;
use crate::Millis;

/// Taking a job and reporting on it: the worker's packets.
impl Core {
    pub(crate) fn grab(&mut self, conn: ConnId, kind: GrabKind, now: Millis) {
        if !self.conns.wake(conn) {
            return;
        }
        match self.pick_job(conn) {
            Some((id, timeout)) => self.assign(conn, id, kind, timeout, now),
            None => self.send(conn, Response::NoJob),
        }
    }

    /// The next job for a worker: highest priority first across all its
    /// functions; among functions with work at that priority, round-robin.
    fn pick_job(&mut self, conn: ConnId) -> Option<(JobId, Option<u64>)> {
        let Core { conns, table, .. } = self;
        let c = conns.get(conn)?;
        let abilities = c.abilities();
        let (start, n) = (c.cursor(), abilities.len());
        if c.epoch_early() {
            // An early taker takes epoch jobs not yet due, and nothing else.
            return abilities.iter().find_map(|a| {
                let id = table
                    .func(a.func)
                    .is_some_and(|f| f.has_early_work())
                    .then(|| table.pop_early(a.func))??;
                Some((id, a.timeout_ms))
            });
        }
        for p in 0..3 {
            for i in 0..n {
                let idx = (start + i) % n;
                let ability = abilities[idx];
                let has_work = table
                    .func(ability.func)
                    .is_some_and(|f| f.queued[p] > 0 && !f.held());
                if !has_work {
                    continue;
                }
                if let Some(id) = table.pop_queued(ability.func, p) {
                    conns.set_cursor(conn, (idx + 1) % n);
                    return Some((id, ability.timeout_ms));
                }
            }
        }
        None
    }

    fn assign(
        &mut self,
        conn: ConnId,
        id: JobId,
        kind: GrabKind,
        timeout: Option<u64>,
        now: Millis,
    ) {
        let Some(job) = self.table.get(id) else {
            self.send(conn, Response::NoJob);
            return;
        };
        let func = job.func();
        // Waiting since it was submitted, or became due (epoch job, retry).
        let waited = now.saturating_sub(job.created.max(job.due().unwrap_or(0)));
        let (data, unique) = (job.data_bytes(), job.unique_bytes());
        let reducer = match kind {
            GrabKind::All => job.reducer().cloned(),
            _ => None,
        };
        let stored = job.persist != crate::job::Persist::No;
        if stored && self.track_runs {
            self.effects.push(Effect::Store(StoreOp::Started(id)));
        }
        let assignment = self.table.start(id, conn, now);
        let handle = self.handles.of(id);
        let mut function = Bytes::new();
        let mut timeout = timeout;
        if let Some(f) = self.table.func_mut(func) {
            f.stats.wait.observe(waited);
            function = f.name.clone();
            if let Some(t) = f.policy.as_ref().and_then(|p| p.timeout) {
                // The server's limit wins over the worker's CAN_DO_TIMEOUT.
                timeout = Some(t);
            }
        }
        if self.history.contains(id) || self.reports(func, crate::events::Kind::Started) {
            self.note_start(id, conn, now);
        }
        let response = match (kind, reducer) {
            (GrabKind::Plain, _) => Response::JobAssign {
                handle,
                function,
                data,
            },
            (GrabKind::All, Some(reducer)) => Response::JobAssignAll {
                handle,
                function,
                unique,
                reducer,
                data,
            },
            _ => Response::JobAssignUniq {
                handle,
                function,
                unique,
                data,
            },
        };
        self.conns.hold(conn, id);
        if let Some(ms) = timeout {
            self.timers
                .arm(now.saturating_add(ms), Timer::Timeout(id, assignment));
        }
        self.send(conn, response);
    }

    /// Records a run's start for a job under a policy: attempt, time, worker.
    fn note_start(&mut self, id: JobId, conn: ConnId, now: Millis) {
        let worker = self.conns.get(conn).map(|c| c.label());
        // The run's number follows the job's stored count of ended runs, so
        // it stays right across a restart that lost the in-memory record.
        let attempt = self
            .table
            .get(id)
            .map_or(1, |j| j.retries.saturating_add(1));
        if self.tracks(id) {
            self.history.started(id, attempt, now, worker.clone());
        }
        self.record(id, Step::Started(worker.unwrap_or_default()));
    }

    pub(crate) fn job_timed_out(&mut self, id: JobId, assignment: u64) {
        let current = self
            .table
            .get(id)
            .is_some_and(|j| j.state == JobState::Running)
            && self
                .table
                .run(id)
                .is_some_and(|r| r.assignment == assignment);
        if current {
            if let Some(worker) = self.table.run(id).map(|r| r.worker) {
                self.count_run(worker, false);
            }
            self.requeue(id, Reason::Timeout, "worker timeout reached on job");
        }
    }

    /// The job a WORK_* packet names, if `conn` holds it.
    fn held_job(&self, conn: ConnId, handle: &[u8]) -> Option<JobId> {
        let id = self.job_by_handle(handle)?;
        let run = self.table.run(id)?;
        (run.worker == conn).then_some(id)
    }

    fn not_found(&mut self, conn: ConnId, text: &'static str) {
        self.send(conn, Response::error("JOB_NOT_FOUND", text));
    }

    /// The handle to forward with a worker's WORK_* packet: the one the
    /// worker sent, which [`Core::held_job`] accepted only because it is
    /// exactly this job's handle (or, for a restored job, its stored one).
    pub(crate) fn echo_handle(&self, id: JobId, given: Bytes) -> Bytes {
        match self.handles.foreign(id) {
            Some(h) => h.clone(),
            None => given,
        }
    }

    /// Sends a packet about a job to each of its clients; `handle` is the
    /// one its worker sent.
    fn fan_out(&mut self, id: JobId, handle: Bytes, make: impl FnOnce(Bytes) -> Response) {
        let clients = match self.table.get(id) {
            Some(job) if !job.clients.is_empty() => job.clients.clone(),
            _ => return,
        };
        let r = make(self.echo_handle(id, handle));
        match clients {
            ConnList::One(c) => self.send(c, r),
            other => {
                for &c in &other {
                    self.send(c, r.clone());
                }
            }
        }
    }

    pub(crate) fn work_status(&mut self, conn: ConnId, handle: Bytes, num: Bytes, den: Bytes) {
        let Some(id) = self.held_job(conn, &handle) else {
            return self.not_found(conn, "Job given in work result not found");
        };
        let (n, d) = (
            gearshift_proto::request::parse_atoi(&num) as u32,
            gearshift_proto::request::parse_atoi(&den) as u32,
        );
        self.table.set_progress(id, n, d);
        if self.wants(crate::events::Kind::Progress) {
            self.progress_event(id, n, d);
        }
        self.fan_out(id, handle, |handle| Response::WorkStatus {
            handle,
            numerator: num,
            denominator: den,
        });
    }

    pub(crate) fn work_data(&mut self, conn: ConnId, handle: Bytes, data: Bytes, warning: bool) {
        let Some(id) = self.held_job(conn, &handle) else {
            return self.not_found(conn, "Job does not exist on server");
        };
        self.fan_out(id, handle, |handle| {
            if warning {
                Response::WorkWarning { handle, data }
            } else {
                Response::WorkData { handle, data }
            }
        });
    }

    pub(crate) fn work_complete(&mut self, conn: ConnId, handle: Bytes, data: Bytes) {
        let Some(id) = self.held_job(conn, &handle) else {
            return self.not_found(conn, "Job given in work result not found");
        };
        self.count_run(conn, true);
        self.fan_out(id, handle, |handle| Response::WorkComplete {
            handle,
            data: data.clone(),
        });
        self.run_completed(id, data);
    }

    pub(crate) fn work_fail(&mut self, conn: ConnId, handle: Bytes) {
        if self.follows_exception(conn, &handle) {
            // Perl's Gearman::Worker sends WORK_FAIL after the WORK_EXCEPTION
            // of a job that died; the run already ended (docs/compat.md).
            return;
        }
        let Some(id) = self.held_job(conn, &handle) else {
            return self.not_found(conn, "Job given in work result not found");
        };
        self.count_run(conn, false);
        self.run_failed(id, Reason::Fail, Bytes::new(), handle);
    }

    pub(crate) fn work_exception(&mut self, conn: ConnId, handle: Bytes, data: Bytes) {
        let Some(id) = self.held_job(conn, &handle) else {
            return self.not_found(
                conn,
                "An exception was received for a job that does not exist",
            );
        };
        self.count_run(conn, false);
        self.conns.set_after_exception(conn, id);
        self.run_failed(id, Reason::Exception, data, handle);
    }

    /// Whether a WORK_FAIL names the job whose WORK_EXCEPTION this worker
    /// sent just before (nothing else in between).
    fn follows_exception(&mut self, conn: ConnId, handle: &[u8]) -> bool {
        let Some(id) = self.conns.take_after_exception(conn) else {
            return false;
        };
        let same = self.handles.is(handle, id);
        same && self.table.run(id).is_none_or(|r| r.worker != conn)
    }
}

/// What follows a run's end, and how a job ends for good.
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

    /// Whether a job's steps go into its history: its function has a policy.
    pub(crate) fn tracks(&self, id: JobId) -> bool {
        self.policy_of_job(id).is_some()
    }

    /// The one place a transition is reported: into a tracked job's
    /// history, and, when lifecycle events are on, out as an
    /// [`Effect::Event`] (for live streams and metrics).
    pub(crate) fn record(&mut self, id: JobId, step: Step) {
        let now = self.now;
        if self.events != 0 && self.wants(crate::events::Kind::of_step(&step)) {
            self.emit_event(id, step.clone());
        }
        if self.tracks(id) {
            self.history.push(id, now, step);
        }
    }

    /// Whether a transition of `kind` of a job of this function is worth
    /// reporting: it has a policy (history) or events of that kind are on.
    pub(crate) fn reports(&self, func: crate::ids::FuncId, kind: crate::events::Kind) -> bool {
        self.wants(kind) || self.table.func(func).is_some_and(|f| f.policy.is_some())
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
        if policy.is_some() {
            let error = if kept.is_empty() {
                Bytes::from_static(reason.word().as_bytes())
            } else {
                kept.clone()
            };
            self.history.failed(id, error);
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
        if policy.is_some() && self.buried_when_failed(id) {
            self.bury(id);
        } else {
            self.finish(id, Outcome::Failed, Bytes::new());
        }
    }

    /// Whether a job that failed for good under a policy goes to the dead
    /// set: a background one, or one a client waits on that asked for it
    /// (OPTION_REQ dead-set).
    fn buried_when_failed(&self, id: JobId) -> bool {
        self.table.get(id).is_some_and(|j| {
            j.background
                || j.clients
                    .as_slice()
                    .iter()
                    .any(|&c| self.conns.wants_dead_set(c))
        })
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
                && (self.cfg.exceptions || self.conns.wants_exceptions(c));
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
        if self.tracks(id) {
            self.history.retry_at(id, at);
        }
        self.record(id, Step::RetryAt(at));
        tracing::info!(handle = %self.handles.text(id), attempts, delay_ms = delay, "job will be retried");
    }

    /// A job leaves its worker (not its queue or its clients): the worker's
    /// held list and the running table. Its state, and so the function's
    /// counts, change with the caller's next step ([`crate::table::JobTable::set_state`]).
    pub(crate) fn release_worker(&mut self, id: JobId) {
        if let Some(run) = self.table.release(id) {
            self.conns.let_go(run.worker, id);
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
        self.back_in_line(id);
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
        self.forget_job(id, false)
    }

    /// [`Core::remove_job`]; `moved`: another node's store holds it now, so
    /// no store op, and a submitter still owed an answer hears it moved.
    pub(crate) fn forget_job(&mut self, id: JobId, moved: bool) -> Option<Job> {
        let job = self.table.take(id)?;
        if let Some(run) = self.table.release(id) {
            self.conns.let_go(run.worker, id);
        }
        self.history.forget(id);
        for client in &job.clients {
            self.conns.stop_waiting(*client, id);
        }
        if job.persist != Persist::No && !moved {
            self.effects.push(Effect::Store(StoreOp::Done(id)));
        }
        // Submitters still owed an answer: the job was accepted, then ended
        // (or moved) before the store confirmed it.
        if let Some(acks) = self.acks.take(id) {
            let answer = match moved {
                true => crate::acks::moved(),
                false => Response::JobCreated(self.handles.of(id)),
            };
            for &c in &acks {
                self.resolve_ack(c, id, answer.clone());
            }
        }
        self.handles.forget(id);
        Some(job)
    }

    /// Counts a finished run on the worker that held it.
    pub(crate) fn count_run(&mut self, worker: ConnId, ok: bool) {
        self.conns.count_run(worker, ok);
    }
}
