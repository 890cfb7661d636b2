//! Read-only snapshots of live and kept jobs for the HTTP API and the
//! dashboard: pages of jobs by id, and one job with its history. A page
//! reads a bounded number of jobs, so no request holds the core for long.

use bytes::Bytes;
use gearshift_proto::Priority;

use crate::engine::Core;
use crate::history::{Event, LastFailure};
use crate::id_index::Walk;
use crate::ids::JobId;
use crate::job::Job;
use crate::kept::{Finished, Outcome};
use crate::Millis;

/// Most jobs a page returns.
pub const MAX_PAGE: usize = 1000;
/// Most table entries one page request looks at before it returns (short,
/// with a cursor to go on).
pub const MAX_SCAN: usize = 20_000;

/// Which live jobs a page lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateFilter {
    /// Grab-able (and pending the store).
    Queued,
    /// Epoch jobs not yet due.
    Scheduled,
    /// Waiting out a retry delay.
    Retrying,
    /// Held by a worker.
    Running,
    /// Cancelled while a worker holds it.
    Cancelled,
    /// Kept results.
    Finished,
}

/// A page request.
#[derive(Debug, Clone, Default)]
pub struct JobQuery {
    /// Only this function's jobs.
    pub function: Option<Bytes>,
    /// Only jobs in this state; `None`: every live job.
    pub state: Option<StateFilter>,
    /// Most jobs returned (capped at [`MAX_PAGE`]).
    pub limit: usize,
    /// Start after this job id (from the last page's `next`).
    pub after: Option<u64>,
}

/// One job in a page.
#[derive(Debug, Clone)]
pub struct JobSummary {
    /// Handle number (pages go by it).
    pub id: u64,
    /// Full handle.
    pub handle: Bytes,
    /// Function name.
    pub function: Bytes,
    /// Unique id.
    pub unique: Bytes,
    /// Priority.
    pub priority: Priority,
    /// `queued`, `scheduled`, `retrying`, `running`, `cancelled`, or for a
    /// kept job `completed`, `failed`, `cancelled`.
    pub state: &'static str,
    /// Survives its clients.
    pub background: bool,
    /// Runs started so far.
    pub attempts: u32,
    /// Submission time.
    pub created: Millis,
    /// Due time of an epoch job or a retry.
    pub due: Option<Millis>,
    /// Workload size in bytes.
    pub size: usize,
}

/// A page of jobs.
#[derive(Debug, Clone, Default)]
pub struct JobPage {
    /// The jobs, by id.
    pub jobs: Vec<JobSummary>,
    /// Where the next page starts; `None` on the last one.
    pub next: Option<u64>,
}

/// One job with everything known of it (`GET /api/v1/jobs/{handle}`).
#[derive(Debug, Clone)]
pub struct JobDetail {
    /// What a page shows of it (`state` may also be `dead`).
    pub summary: JobSummary,
    /// When its current or last run started.
    pub started: Option<Millis>,
    /// When it finished (kept and dead jobs).
    pub finished: Option<Millis>,
    /// The worker running it, or that ran it last.
    pub worker: Option<Bytes>,
    /// Its last failure's text, even when a later attempt completed (see
    /// `outcome` and `last_failure`).
    pub error: Option<Bytes>,
    /// How it ended (kept and dead jobs); `None` while it lives.
    pub outcome: Option<Outcome>,
    /// Its last failed run, apart from how it ended.
    pub last_failure: Option<LastFailure>,
    /// Size of its kept result.
    pub result_size: usize,
    /// The last WORK_STATUS of a running job.
    pub progress: Option<(u32, u32)>,
    /// Its history (jobs under a policy; empty otherwise).
    pub history: Vec<Event>,
    /// Its kept result, when asked for.
    pub result: Option<Bytes>,
}

impl Core {
    /// A page of live (or kept) jobs, by id. Live jobs are walked in id
    /// order through the id index ([`crate::jobs::Jobs::walk`]), kept ones
    /// through their ordered map; either way a page looks at about
    /// [`MAX_SCAN`] entries at most, so it may come back short with `next`
    /// set. `state: None` lists the live jobs (kept results only with
    /// [`StateFilter::Finished`]).
    pub fn jobs_page(&self, q: &JobQuery) -> JobPage {
        let limit = page_limit(q.limit);
        let Some(start) = start_after(q.after) else {
            return JobPage::default();
        };
        if q.state == Some(StateFilter::Finished) {
            return self.kept_page(q.function.as_deref(), limit, start);
        }
        let func = match &q.function {
            Some(name) => match self.table.func_named(&name[..]) {
                Some(f) => Some(f),
                None => return JobPage::default(),
            },
            None => None,
        };
        let mut jobs = Vec::new();
        let walk = self.table.walk(start, MAX_SCAN, |job| {
            if func.is_some_and(|f| f != job.func()) {
                return true;
            }
            let (state, attempts) = self.live_state(job);
            if q.state.is_some_and(|want| want.word() != state) {
                return true;
            }
            jobs.push(self.live_summary(job, state, attempts));
            jobs.len() < limit
        });
        let next = match walk {
            Walk::End => None,
            Walk::Stopped(id) => (id < JobId::MAX).then_some(id),
            Walk::Budget(next) => Some(next - 1),
        };
        JobPage { jobs, next }
    }

    /// A page of kept results from id `start` on.
    fn kept_page(&self, function: Option<&[u8]>, limit: usize, start: JobId) -> JobPage {
        let mut page = JobPage::default();
        for (n, (&id, f)) in self.retained.kept.range(start..).enumerate() {
            if page.jobs.len() >= limit || n >= MAX_SCAN {
                page.next = Some(id.saturating_sub(1));
                break;
            }
            if function.is_none_or(|name| f.function[..] == *name) {
                page.jobs.push(finished_summary(f));
            }
        }
        page
    }

    /// A live job as a page shows it.
    fn live_summary(&self, job: &Job, state: &'static str, attempts: u32) -> JobSummary {
        let mut handle = Vec::new();
        self.handles.write(&mut handle, job.id);
        JobSummary {
            id: job.id,
            handle: handle.into(),
            function: self
                .table
                .func(job.func())
                .map(|f| f.name.clone())
                .unwrap_or_default(),
            unique: job.unique_bytes(),
            priority: job.priority,
            state,
            background: job.background,
            attempts,
            created: job.created,
            due: job.due(),
            size: job.data().len(),
        }
    }

    /// A live, kept or dead job by handle; its kept result if `with_result`.
    pub fn job_detail(&self, handle: &[u8], with_result: bool) -> Option<JobDetail> {
        if let Some(job) = self.job_by_handle(handle).and_then(|id| self.table.get(id)) {
            let (state, attempts) = self.live_state(job);
            let track = self.history.get(job.id);
            let run = self.table.run(job.id);
            let holder = run.and_then(|r| self.conns.get(r.worker));
            return Some(JobDetail {
                summary: self.live_summary(job, state, attempts),
                started: run
                    .map(|r| r.started)
                    .or_else(|| track.and_then(|t| t.started)),
                finished: None,
                worker: holder
                    .map(|c| c.label())
                    .or_else(|| track.and_then(|t| t.worker.clone())),
                error: track.and_then(|t| t.error.clone()),
                outcome: None,
                last_failure: track
                    .and_then(|t| LastFailure::of(&t.history, t.attempts, t.error.as_ref())),
                result_size: 0,
                progress: run
                    .filter(|r| r.numerator != 0 || r.denominator != 0)
                    .map(|r| (r.numerator, r.denominator)),
                history: track.map(|t| t.history.clone()).unwrap_or_default(),
                result: None,
            });
        }
        let f = self.find_retained(handle)?;
        let kept = f.outcome != Outcome::Dead;
        Some(JobDetail {
            summary: finished_summary(f),
            started: f.started,
            finished: Some(f.finished),
            worker: f.worker.clone(),
            error: f.error.clone(),
            outcome: Some(f.outcome),
            last_failure: LastFailure::of(&f.history, f.attempts, f.error.as_ref()),
            result_size: f.result.len(),
            progress: None,
            history: f.history.clone(),
            result: (with_result && kept).then(|| f.result.clone()),
        })
    }

    /// A live job's state word (`queued`, `scheduled`, `retrying`,
    /// `running`, `cancelled`: cancelled while its worker still runs it).
    pub fn live_state_of(&self, handle: &[u8]) -> Option<&'static str> {
        let job = self
            .job_by_handle(handle)
            .and_then(|id| self.table.get(id))?;
        Some(self.live_state(job).0)
    }
}

impl StateFilter {
    /// The state word a job in this state shows.
    pub fn word(self) -> &'static str {
        match self {
            StateFilter::Queued => "queued",
            StateFilter::Scheduled => "scheduled",
            StateFilter::Retrying => "retrying",
            StateFilter::Running => "running",
            StateFilter::Cancelled => "cancelled",
            StateFilter::Finished => "finished",
        }
    }
}

/// A page's size: 0 means 100, never more than [`MAX_PAGE`].
pub(crate) fn page_limit(limit: usize) -> usize {
    match limit {
        0 => 100,
        n => n.min(MAX_PAGE),
    }
}

/// The first id a page looks at (`None`: past the last possible id).
pub(crate) fn start_after(after: Option<u64>) -> Option<JobId> {
    match after {
        Some(a) => a.checked_add(1),
        None => Some(0),
    }
}

/// A kept or dead job as a page shows it.
fn finished_summary(f: &Finished) -> JobSummary {
    JobSummary {
        id: f.id,
        handle: f.handle.clone(),
        function: f.function.clone(),
        unique: f.unique.clone(),
        priority: f.priority,
        state: f.outcome.word(),
        background: f.background,
        attempts: f.attempts,
        created: f.created,
        due: None,
        size: f.data.len(),
    }
}
