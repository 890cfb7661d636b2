//! Read-only snapshots of the core's state as plain values, for the HTTP
//! API and the dashboard: functions, live jobs page by page, one job with
//! its history, workers, the dead set, schedules and running totals. A page
//! reads a bounded number of jobs, so no request holds the core for long.

use std::sync::Arc;

use bytes::Bytes;
use gearshift_proto::Priority;

use crate::engine::Core;
use crate::lifecycle::Event;
use crate::policy::Policy;
use crate::Millis;

/// Most jobs a page returns.
pub const MAX_PAGE: usize = 1000;
/// Most table entries one page request looks at before it returns (short,
/// with a cursor to go on).
pub const MAX_SCAN: usize = 20_000;

/// One function as `GET /api/v1/functions` shows it.
#[derive(Debug, Clone)]
pub struct FunctionView {
    /// Name.
    pub name: Bytes,
    /// Grab-able jobs by priority: high, normal, low.
    pub queued: [u32; 3],
    /// Epoch jobs not yet due and jobs waiting out a retry delay.
    pub scheduled: u32,
    /// Jobs held by workers.
    pub running: u32,
    /// Connections that registered it.
    pub workers: u32,
    /// `pause F` is in force.
    pub paused: bool,
    /// Its policy, if a config rule matches it.
    pub policy: Option<Arc<Policy>>,
    /// Running counters since the server started.
    pub stats: crate::metrics::FuncStats,
    /// Jobs of it in the dead set.
    pub dead: u64,
}

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
    /// Its last error.
    pub error: Option<Bytes>,
    /// Size of its kept result.
    pub result_size: usize,
    /// The last WORK_STATUS of a running job.
    pub progress: Option<(u32, u32)>,
    /// Its history (jobs under a policy; empty otherwise).
    pub history: Vec<Event>,
    /// Its kept result, when asked for.
    pub result: Option<Bytes>,
}

/// One worker connection (`GET /api/v1/workers`).
#[derive(Debug, Clone)]
pub struct WorkerView {
    /// Connection id.
    pub id: u64,
    /// Socket fd, as `workers` prints it.
    pub fd: i64,
    /// Peer address.
    pub address: String,
    /// SET_CLIENT_ID, if any.
    pub client_id: Bytes,
    /// Connected at.
    pub connected: Millis,
    /// Last packet at.
    pub last_seen: Millis,
    /// Jobs completed.
    pub jobs_done: u64,
    /// Jobs failed.
    pub jobs_failed: u64,
    /// Handles it holds.
    pub running: Vec<Bytes>,
    /// Functions it registered.
    pub functions: Vec<Bytes>,
}

/// One dead job in a page.
#[derive(Debug, Clone)]
pub struct DeadView {
    /// Full handle.
    pub handle: Bytes,
    /// Function name.
    pub function: Bytes,
    /// Unique id.
    pub unique: Bytes,
    /// Runs it had.
    pub attempts: u32,
    /// When it died.
    pub died: Millis,
    /// Its last error.
    pub error: Option<Bytes>,
    /// Workload size.
    pub size: usize,
}

/// A page of the dead set.
#[derive(Debug, Clone, Default)]
pub struct DeadPage {
    /// The dead jobs, by id.
    pub dead: Vec<DeadView>,
    /// Where the next page starts; `None` on the last one.
    pub next: Option<u64>,
}

/// One recurring schedule.
#[derive(Debug, Clone)]
pub struct ScheduleView {
    /// Its id.
    pub id: u64,
    /// Function it submits.
    pub function: Bytes,
    /// Its time spec (cron line).
    pub when: String,
    /// Unique of the jobs it submits.
    pub unique: Bytes,
    /// Their priority.
    pub priority: Priority,
    /// Next firing.
    pub next: Option<Millis>,
    /// From the config file (else SUBMIT_JOB_SCHED).
    pub from_config: bool,
}

/// Server-wide counts (the overview and the dashboard's charts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Grab-able jobs.
    pub queued: u64,
    /// Epoch jobs not yet due and retries waiting.
    pub scheduled: u64,
    /// Jobs held by workers.
    pub running: u64,
    /// Known functions.
    pub functions: u64,
    /// Worker registrations, summed over functions.
    pub workers: u64,
    /// Jobs in the dead set.
    pub dead: u64,
    /// Jobs submitted since start (every function, dropped ones included).
    pub submitted: u64,
    /// Runs completed since start.
    pub completed: u64,
    /// Runs failed since start.
    pub failed: u64,
    /// Retries scheduled since start.
    pub retried: u64,
    /// Connections that registered a function or hold a job.
    pub worker_conns: u64,
    /// Connections that sent an admin command and nothing else.
    pub admin_conns: u64,
    /// Every other connection.
    pub client_conns: u64,
}

impl Core {
    /// Every function, by name.
    pub fn functions_view(&self) -> Vec<FunctionView> {
        todo!()
    }

    /// A page of live (or kept) jobs.
    pub fn jobs_page(&self, q: &JobQuery) -> JobPage {
        let _ = q;
        todo!()
    }

    /// A live, kept or dead job by handle; its kept result if `with_result`.
    pub fn job_detail(&self, handle: &[u8], with_result: bool) -> Option<JobDetail> {
        let _ = (handle, with_result);
        todo!()
    }

    /// Every connection that registered a function or holds a job.
    pub fn workers_view(&self) -> Vec<WorkerView> {
        todo!()
    }

    /// A page of the dead set, optionally one function's.
    pub fn dead_page(&self, function: Option<&[u8]>, limit: usize, after: Option<u64>) -> DeadPage {
        let _ = (function, limit, after);
        todo!()
    }

    /// Every schedule.
    pub fn schedules_view(&self) -> Vec<ScheduleView> {
        todo!()
    }

    /// Server-wide counts.
    pub fn totals(&self) -> Totals {
        todo!()
    }
}
