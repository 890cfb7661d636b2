//! How a run ends, for every job: the one place that decides between a
//! result, a retry after a backoff, gearmand's requeue, and a final failure
//! (which, for a background job under a policy, is the dead set). Each
//! transition of a job under a policy is also written into its history.
//!
//! A function no policy matches keeps gearmand 1.1's rules exactly: WORK_FAIL
//! and WORK_EXCEPTION are final, a lost worker or a CAN_DO_TIMEOUT requeues
//! the job at the head of its queue (bounded by `--job-retries`).

use std::cmp::Reverse;
use std::sync::Arc;

use bytes::Bytes;
use gearshift_proto::Response;

use crate::effect::{Effect, StoreOp};
use crate::engine::{Core, Timer};
use crate::events::EventKind;
use crate::ids::{ConnId, JobId};
use crate::job::{JobExtra, JobState, Persist};
use crate::policy::{Policy, Reason};
use crate::retained::Outcome;
use crate::Millis;

/// Most history entries a job keeps; past it the oldest after the first go.
pub const MAX_HISTORY: usize = 64;
/// Most bytes of a failure's text kept in a job's error and history.
pub const MAX_ERROR: usize = 1024;

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

/// One transition in a job's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Submitted and waiting in its queue (or for its due time).
    Queued,
    /// Handed to a worker (its client id and address).
    Started(Bytes),
    /// A run ended without a result.
    Failed(Reason, Bytes),
    /// Waits for a retry at this time.
    RetryAt(Millis),
    /// Back in its queue: the retry delay passed, or gearmand's requeue.
    Requeued(&'static str),
    /// Finished with a result of this many bytes.
    Completed(usize),
    /// Cancelled by an admin.
    Cancelled,
    /// Used all its attempts: kept in the dead set.
    Dead,
    /// Taken out of the dead set by an admin and queued again.
    Revived,
}

impl Step {
    /// The event word of a `history:` line.
    pub fn word(&self) -> &'static str {
        match self {
            Step::Queued => "queued",
            Step::Started(_) => "started",
            Step::Failed(..) => "failed",
            Step::RetryAt(_) => "retry",
            Step::Requeued(_) => "requeued",
            Step::Completed(_) => "completed",
            Step::Cancelled => "cancelled",
            Step::Dead => "dead",
            Step::Revived => "revived",
        }
    }
}

/// The fixed reasons a job is requeued, for decoding stored history.
const REQUEUE_WHYS: [&str; 4] = [
    "worker disconnected",
    "worker gave up the function",
    "worker timeout reached on job",
    "retry delay passed",
];

/// Encodes a history for the store: per event its time, a tag and its detail.
pub fn encode_history(history: &[Event]) -> Bytes {
    let mut out = Vec::with_capacity(history.len() * 16);
    let bytes = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    };
    for e in history {
        out.extend_from_slice(&e.at.to_le_bytes());
        match &e.step {
            Step::Queued => out.push(0),
            Step::Started(w) => {
                out.push(1);
                bytes(&mut out, w);
            }
            Step::Failed(r, d) => {
                out.push(2);
                out.push(*r as u8);
                bytes(&mut out, d);
            }
            Step::RetryAt(t) => {
                out.push(3);
                out.extend_from_slice(&t.to_le_bytes());
            }
            Step::Requeued(why) => {
                out.push(4);
                bytes(&mut out, why.as_bytes());
            }
            Step::Completed(n) => {
                out.push(5);
                out.extend_from_slice(&(*n as u64).to_le_bytes());
            }
            Step::Cancelled => out.push(6),
            Step::Dead => out.push(7),
            Step::Revived => out.push(8),
        }
    }
    Bytes::from(out)
}

/// Decodes [`encode_history`]'s bytes; a damaged tail is dropped.
pub fn decode_history(mut b: &[u8]) -> Vec<Event> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (b.get(..n)?, b.get(n..)?);
        *b = tail;
        Some(head)
    }
    fn u64_of(b: &mut &[u8]) -> Option<u64> {
        take(b, 8)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_le_bytes)
    }
    fn bytes_of(b: &mut &[u8]) -> Option<Bytes> {
        let n = take(b, 4)
            .and_then(|s| s.try_into().ok())
            .map(u32::from_le_bytes)?;
        take(b, n as usize).map(Bytes::copy_from_slice)
    }
    let reasons = [
        Reason::Fail,
        Reason::Exception,
        Reason::Timeout,
        Reason::WorkerLost,
    ];
    let mut out = Vec::new();
    while !b.is_empty() {
        let Some(at) = u64_of(&mut b) else { break };
        let Some(&[tag]) = take(&mut b, 1) else { break };
        let step = match tag {
            0 => Some(Step::Queued),
            1 => bytes_of(&mut b).map(Step::Started),
            2 => take(&mut b, 1)
                .and_then(|r| reasons.get(r[0] as usize).copied())
                .and_then(|r| bytes_of(&mut b).map(|d| Step::Failed(r, d))),
            3 => u64_of(&mut b).map(Step::RetryAt),
            4 => bytes_of(&mut b).map(|why| {
                let known = REQUEUE_WHYS.iter().find(|w| w.as_bytes() == &why[..]);
                Step::Requeued(known.copied().unwrap_or("requeued"))
            }),
            5 => u64_of(&mut b).map(|n| Step::Completed(n as usize)),
            6 => Some(Step::Cancelled),
            7 => Some(Step::Dead),
            8 => Some(Step::Revived),
            _ => None,
        };
        let Some(step) = step else { break };
        out.push(Event { at, step });
    }
    out
}

/// A transition and when it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Unix milliseconds.
    pub at: Millis,
    /// What happened.
    pub step: Step,
}

/// A job's last failed run, as `show job`, the HTTP API and the `dead`
/// event report it apart from how the job ended (a job may complete on a
/// later attempt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastFailure {
    /// Which run failed (1 = the first), when the history still says.
    pub attempt: Option<u32>,
    /// When it failed, when the history still says.
    pub at: Option<Millis>,
    /// Why it failed, when the history still says.
    pub reason: Option<Reason>,
    /// The worker's text, else the reason word.
    pub error: Bytes,
}

impl LastFailure {
    /// The last failure of a job with this history, runs started and kept
    /// error text; `None` when no run failed. The attempt is counted back
    /// from the runs started after the failure, which the history never
    /// drops (it drops its oldest entries first).
    pub fn of(history: &[Event], attempts: u32, error: Option<&Bytes>) -> Option<LastFailure> {
        let last = history
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, e)| match &e.step {
                Step::Failed(reason, detail) => Some((i, e.at, *reason, detail)),
                _ => None,
            });
        let Some((i, at, reason, detail)) = last else {
            return error.map(|e| LastFailure {
                attempt: None,
                at: None,
                reason: None,
                error: e.clone(),
            });
        };
        let later_runs = history[i + 1..]
            .iter()
            .filter(|e| matches!(e.step, Step::Started(_)))
            .count() as u32;
        let error = match (error, detail.is_empty()) {
            (Some(e), _) => e.clone(),
            (None, false) => detail.clone(),
            (None, true) => Bytes::from_static(reason.word().as_bytes()),
        };
        Some(LastFailure {
            attempt: attempts.checked_sub(later_runs).filter(|&n| n > 0),
            at: Some(at),
            reason: Some(reason),
            error,
        })
    }

    /// `REASON: TEXT`, or the bare reason word when the text is only that
    /// (as a `failed` history line's detail); the text alone if the reason
    /// is not known.
    pub fn describe(&self) -> String {
        let text = String::from_utf8_lossy(&self.error);
        match self.reason {
            Some(r) if text == r.word() => text.into_owned(),
            Some(r) => format!("{}: {text}", r.word()),
            None => text.into_owned(),
        }
    }
}

/// What the core records about a job under a policy while it lives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Track {
    /// Runs started.
    pub attempts: u32,
    /// When the current or last run started.
    pub started: Option<Millis>,
    /// The worker of the current or last run.
    pub worker: Option<Bytes>,
    /// The last failure's text.
    pub error: Option<Bytes>,
    /// When it may run again, while it waits for a retry.
    pub retry_at: Option<Millis>,
    /// Every transition, oldest first.
    pub history: Vec<Event>,
}

impl Track {
    /// Appends a transition, dropping the oldest but the first past [`MAX_HISTORY`].
    pub fn push(&mut self, at: Millis, step: Step) {
        if self.history.len() >= MAX_HISTORY {
            self.history.remove(1);
        }
        self.history.push(Event { at, step });
    }
}

impl Core {
    /// The policy of a job's function, if any.
    pub(crate) fn policy_of_job(&self, id: JobId) -> Option<Arc<Policy>> {
        if self.policies.rules.is_empty() {
            // No config: gearmand's rules, and nothing to look up per job.
            return None;
        }
        let job = self.jobs.get(id)?;
        self.func(job.func())?.policy.clone()
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
        self.wants(kind) || self.func(func).is_some_and(|f| f.policy.is_some())
    }

    fn emit_event(&mut self, id: JobId, step: Step) {
        let handle = self.handle_of(id);
        let function = self.function_of(id);
        let kind = match step {
            // Said with why, which the history's `dead` step leaves to the
            // `failed` step before it.
            Step::Dead => {
                let track = self.tracked.get(&id);
                let attempts = track.map_or_else(
                    || self.jobs.get(id).map_or(0, |j| j.retries.saturating_add(1)),
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
        let Some(job) = self.jobs.get(id) else {
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
        let background = self.jobs.get(id).is_some_and(|j| j.background);
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
            .jobs
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
        self.jobs
            .get(id)
            .is_some_and(|j| !j.background && j.clients.is_empty())
    }

    /// The clients' terminal packet for a final failure.
    fn tell_failure(&mut self, id: JobId, reason: Reason, detail: &Bytes, handle: Bytes) {
        let Some(job) = self.jobs.get(id) else {
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
        let Some(job) = self.jobs.get_mut(id) else {
            return;
        };
        job.retries = job.retries.saturating_add(1);
        job.extra.get_or_insert_with(Box::<JobExtra>::default).due = Some(at);
        let (attempts, stored) = (job.retries, job.persist != Persist::No);
        self.set_state(id, JobState::Scheduled);
        self.timers.push(Reverse((at, Timer::Due(id))));
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
        tracing::info!(handle = %self.handle_text(id), attempts, delay_ms = delay, "job will be retried");
    }

    /// A job leaves its worker (not its queue or its clients): the worker's
    /// held list and the running table. Its state, and so the function's
    /// counts, change with the caller's next step ([`Core::set_state`]).
    pub(crate) fn release_worker(&mut self, id: JobId) {
        if let Some(run) = self.running.remove(&id) {
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
        let Some(job) = self.jobs.get_mut(id) else {
            return;
        };
        match job.state {
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
            let handle = self.handle_of(id);
            self.run_failed(id, reason, Bytes::from_static(why.as_bytes()), handle);
            return;
        }
        // gearmand's requeue: the run failed for `reason`.
        self.end_run(id, Some(reason));
        let Some(job) = self.jobs.get_mut(id) else {
            return;
        };
        job.retries += 1;
        let retries = job.retries;
        if job.persist != Persist::No {
            self.effects.push(Effect::Store(StoreOp::Update {
                id,
                attempts: retries,
            }));
        }
        let limit = self.cfg.job_retries;
        if limit > 0 && retries >= limit {
            let handle = self.handle_of(id);
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
        if !job.background && job.clients.is_empty() {
            // Its clients left while it ran: nobody to run it for any more.
            self.remove_job(id);
            return;
        }
        tracing::info!(handle = %self.handle_text(id), retries, "requeueing job: {why}");
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
        let Some(job) = self.jobs.get(id) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_round_trips_and_a_damaged_tail_is_dropped() {
        let history = vec![
            Event {
                at: 1,
                step: Step::Queued,
            },
            Event {
                at: 2,
                step: Step::Started(Bytes::from_static(b"w@127.0.0.1")),
            },
            Event {
                at: 3,
                step: Step::Failed(Reason::Exception, Bytes::from_static(b"boom")),
            },
            Event {
                at: 4,
                step: Step::RetryAt(1_004),
            },
            Event {
                at: 1_004,
                step: Step::Requeued("retry delay passed"),
            },
            Event {
                at: 1_005,
                step: Step::Completed(42),
            },
            Event {
                at: 6,
                step: Step::Cancelled,
            },
            Event {
                at: 7,
                step: Step::Dead,
            },
            Event {
                at: 8,
                step: Step::Revived,
            },
        ];
        let bytes = encode_history(&history);
        assert_eq!(decode_history(&bytes), history);
        assert_eq!(decode_history(&bytes[..bytes.len() - 1]), history[..8]);
        assert_eq!(decode_history(&[0xff; 3]), []);
    }
}
