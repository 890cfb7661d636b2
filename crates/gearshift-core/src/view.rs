//! Read-only snapshots of the core's state as plain values, for the HTTP
//! API and the dashboard: functions, workers, the dead set, schedules and
//! running totals. Jobs, page by page and one by one, are in `job_view.rs`
//! (re-exported here). A page reads a bounded number of entries, so no
//! request holds the core for long.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use gearshift_proto::Priority;

pub use crate::job_view::{
    JobDetail, JobPage, JobQuery, JobSummary, StateFilter, MAX_PAGE, MAX_SCAN,
};

use crate::engine::Core;
use crate::job_view::{page_limit, start_after};
use crate::policy::Policy;
use crate::table::Full;
use crate::Millis;

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
    pub stats: crate::function::FuncStats,
    /// Jobs of it in the dead set.
    pub dead: u64,
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
    /// Peer port.
    pub port: u16,
    /// The cluster node it is connected to, when another node relayed it.
    pub node: Option<String>,
    /// SET_CLIENT_ID, if any.
    pub client_id: Bytes,
    /// The subject of its TLS client certificate, if it presented one.
    pub identity: Option<String>,
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
    /// What its jobs cost so far, if it reports it (OPTION_REQ `stats`).
    pub stats: Option<gearshift_proto::worker_stats::WorkerStats>,
}

/// One dead job in a page.
#[derive(Debug, Clone)]
pub struct DeadView {
    /// Handle number (pages go by it).
    pub id: u64,
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

/// One schedule: a recurring one, or an epoch job waiting for its time.
#[derive(Debug, Clone)]
pub struct ScheduleView {
    /// Its id (an epoch job's: the job's).
    pub id: u64,
    /// Its handle, as `show schedules` and `drop schedule` name it.
    pub handle: Bytes,
    /// An epoch job (SUBMIT_JOB_EPOCH) that runs once, at `next`.
    pub epoch: bool,
    /// Function it submits.
    pub function: Bytes,
    /// Its time spec (cron line; `once` for an epoch job).
    pub when: String,
    /// Unique of the jobs it submits.
    pub unique: Bytes,
    /// Their priority.
    pub priority: Priority,
    /// Next firing.
    pub next: Option<Millis>,
    /// From the config file (else a client's SUBMIT_JOB_SCHED or epoch job).
    pub from_config: bool,
}

/// The schedules view: every recurring schedule, then epoch jobs soonest
/// first, at most the number asked for.
#[derive(Debug, Clone, Default)]
pub struct SchedulesView {
    /// The schedules.
    pub schedules: Vec<ScheduleView>,
    /// Epoch jobs waiting for their time, listed or not.
    pub epoch_total: usize,
}

/// What `when` says for an epoch job.
pub const EPOCH_WHEN: &str = "once";

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
    /// Payload bytes of every job held (`--max-queue-memory` caps it).
    pub job_bytes: u64,
    /// Submissions refused by a function's `maxqueue`.
    pub refused_maxqueue: u64,
    /// Submissions refused by `--max-queue-memory`.
    pub refused_memory: u64,
    /// Submissions refused because the store could not write them.
    pub refused_store: u64,
    /// Requests the access rules refused: submit, work, admin read, admin change.
    pub denied: [u64; 4],
}

impl Core {
    /// Every function, by name.
    pub fn functions_view(&self) -> Vec<FunctionView> {
        let mut dead: HashMap<&[u8], u64> = HashMap::new();
        for f in self.retained.dead.values() {
            *dead.entry(&f.function[..]).or_default() += 1;
        }
        let mut out: Vec<FunctionView> = self
            .table
            .funcs()
            .iter()
            .flatten()
            .map(|f| FunctionView {
                name: f.name.clone(),
                queued: f.queued,
                scheduled: f.scheduled,
                running: f.running,
                workers: f.workers,
                paused: f.paused,
                policy: f.policy.clone(),
                stats: f.stats,
                dead: dead.get(&f.name[..]).copied().unwrap_or(0),
            })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Every connection that registered a function or holds a job, oldest
    /// first (as `show workers`).
    pub fn workers_view(&self) -> Vec<WorkerView> {
        let mut out = Vec::new();
        for (id, c) in self.conns.in_order() {
            if !c.is_worker() {
                continue;
            }
            let (connected, last_seen) = c.seen();
            let (jobs_done, jobs_failed) = c.runs();
            let running = c
                .held()
                .iter()
                .map(|&job| {
                    let mut h = Vec::new();
                    self.handles.write(&mut h, job);
                    Bytes::from(h)
                })
                .collect();
            out.push(WorkerView {
                id: id.0,
                fd: c.info().fd,
                address: c.info().ip.clone(),
                port: c.info().port,
                node: c.info().node.clone(),
                client_id: c.client_id().clone(),
                identity: c.info().identity.clone(),
                connected,
                last_seen,
                jobs_done,
                jobs_failed,
                running,
                functions: c
                    .abilities()
                    .iter()
                    .filter_map(|a| self.table.func(a.func).map(|f| f.name.clone()))
                    .collect(),
                stats: c.stats(),
            });
        }
        out
    }

    /// A page of the dead set, optionally one function's, by id; looks at
    /// [`MAX_SCAN`] entries at most.
    pub fn dead_page(&self, function: Option<&[u8]>, limit: usize, after: Option<u64>) -> DeadPage {
        let limit = page_limit(limit);
        let Some(start) = start_after(after) else {
            return DeadPage::default();
        };
        let mut page = DeadPage::default();
        for (n, (&id, f)) in self.retained.dead.range(start..).enumerate() {
            if page.dead.len() >= limit || n >= MAX_SCAN {
                page.next = Some(id.saturating_sub(1));
                break;
            }
            if function.is_some_and(|name| f.function[..] != *name) {
                continue;
            }
            page.dead.push(DeadView {
                id,
                handle: f.handle.clone(),
                function: f.function.clone(),
                unique: f.unique.clone(),
                attempts: f.attempts,
                died: f.finished,
                error: f.error.clone(),
                size: f.data.len(),
            });
        }
        page
    }

    /// Every recurring schedule by id, then the `max_epoch` epoch jobs due
    /// soonest ([`Core::epoch_jobs`]).
    pub fn schedules_view(&self, max_epoch: usize) -> SchedulesView {
        let mut out: Vec<ScheduleView> = self
            .schedules
            .values()
            .map(|s| {
                let mut handle = Vec::new();
                self.handles.write(&mut handle, s.id);
                ScheduleView {
                    id: s.id,
                    handle: handle.into(),
                    epoch: false,
                    function: s.function.clone(),
                    when: s.when.clone(),
                    unique: s.unique.clone(),
                    priority: s.priority,
                    next: s.next,
                    from_config: s.from_config,
                }
            })
            .collect();
        let epoch = self.epoch_jobs(max_epoch);
        for &(due, id) in &epoch.1 {
            let Some(job) = self.table.get(id) else {
                continue;
            };
            let mut handle = Vec::new();
            self.handles.write(&mut handle, id);
            out.push(ScheduleView {
                id,
                handle: handle.into(),
                epoch: true,
                function: self
                    .table
                    .func(job.func())
                    .map(|f| f.name.clone())
                    .unwrap_or_default(),
                when: EPOCH_WHEN.to_owned(),
                unique: job.unique_bytes(),
                priority: job.priority,
                next: Some(due),
                from_config: false,
            });
        }
        SchedulesView {
            schedules: out,
            epoch_total: epoch.0,
        }
    }

    /// Server-wide counts: the live functions' figures plus those of
    /// functions dropped since start.
    pub fn totals(&self) -> Totals {
        let mut stats = *self.table.dropped_stats();
        let mut t = Totals {
            dead: self.retained.dead.len() as u64,
            job_bytes: self.table.bytes(),
            refused_maxqueue: self.table.refused()[Full::Queue as usize],
            refused_memory: self.table.refused()[Full::Memory as usize],
            refused_store: self.table.store_refusals(),
            denied: self.denied,
            ..Totals::default()
        };
        for f in self.table.funcs().iter().flatten() {
            t.functions += 1;
            t.queued += f.queued.iter().map(|&n| u64::from(n)).sum::<u64>();
            t.scheduled += u64::from(f.scheduled);
            t.running += u64::from(f.running);
            t.workers += u64::from(f.workers);
            stats.merge(&f.stats);
        }
        t.submitted = stats.submitted;
        t.completed = stats.completed;
        t.failed = stats.failed_total();
        t.retried = stats.retried;
        (t.worker_conns, t.admin_conns, t.client_conns) = self.conns.roles();
        t
    }
}
