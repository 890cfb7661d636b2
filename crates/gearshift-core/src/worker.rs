//! The worker side: abilities, sleeping and waking, grabbing jobs (global
//! priority, round-robin across functions), and taking jobs back from
//! workers that vanish, give up a function or overrun their time limit.

use bytes::Bytes;
use gearshift_proto::{GrabKind, Response};

use crate::conn::Ability;
use crate::effect::{Effect, StoreOp};
use crate::engine::Core;
use crate::history::Step;
use crate::ids::{ConnId, FuncId, JobId};
use crate::job::{ConnList, JobState};
use crate::policy::Reason;
use crate::timers::Timer;
use crate::Millis;

/// A drained queue with more room than this many entries lets go of it.
const SHRINK_QUEUE: usize = 1 << 16;

impl Core {
    pub(crate) fn can_do(&mut self, conn: ConnId, name: Bytes, timeout_ms: Option<u64>) {
        let func = self.table.function_id(&name, &self.policies);
        let Some(added) = self.conns.add_ability(conn, Ability { func, timeout_ms }) else {
            return;
        };
        if added.first && self.wants(crate::events::Kind::WorkerJoined) {
            self.worker_joined(conn);
        }
        if added.new {
            self.table.ability_added(func);
            if let Some(f) = self.table.func_mut(func).filter(|_| added.asleep) {
                f.sleepers.push_back(conn);
            }
        }
    }

    pub(crate) fn cant_do(&mut self, conn: ConnId, name: &Bytes) {
        let Some(func) = self.table.func_named(name) else {
            return;
        };
        self.drop_abilities(conn, |f| f == func);
    }

    pub(crate) fn reset_abilities(&mut self, conn: ConnId) {
        self.drop_abilities(conn, |_| true);
    }

    fn drop_abilities(&mut self, conn: ConnId, which: impl Fn(FuncId) -> bool) {
        let left = match self.conns.get(conn) {
            Some(c) if self.wants(crate::events::Kind::WorkerLeft) && !c.abilities().is_empty() => {
                Some(self.worker_ref(conn, c))
            }
            _ => None,
        };
        let Some(c) = self.conns.get(conn) else {
            return;
        };
        let held: Vec<JobId> = c.held().to_vec();
        let dropped = self.conns.drop_abilities(conn, which);
        let none_left = self
            .conns
            .get(conn)
            .is_some_and(|c| c.abilities().is_empty());
        if let Some(w) = left.filter(|_| none_left) {
            // It dropped its last function: no longer a worker.
            self.push_event(crate::events::EventKind::WorkerLeft(w));
        }
        self.table.abilities_dropped(&dropped);
        for job in held {
            if self
                .table
                .get(job)
                .is_some_and(|j| dropped.iter().any(|a| a.func == j.func()))
            {
                self.requeue(job, Reason::WorkerLost, "worker gave up the function");
            }
        }
    }

    pub(crate) fn pre_sleep(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get(conn) else {
            return;
        };
        let ready = c
            .abilities()
            .iter()
            .any(|a| self.table.func(a.func).is_some_and(|f| f.has_work()));
        self.conns.sleep(conn, ready);
        if ready {
            self.send(conn, Response::Noop);
        } else {
            self.enlist_sleeper(conn);
        }
    }

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
        let (start, n) = self.conns.cursor(conn)?;
        for p in 0..3 {
            for i in 0..n {
                let idx = (start + i) % n;
                let ability = self.conns.ability_at(conn, idx)?;
                let has_work = self
                    .table
                    .func(ability.func)
                    .is_some_and(|f| f.queued[p] > 0 && !f.paused);
                if !has_work {
                    continue;
                }
                if let Some(id) = self.pop_queued(ability.func, p) {
                    self.conns.set_cursor(conn, (idx + 1) % n);
                    return Some((id, ability.timeout_ms));
                }
            }
        }
        None
    }

    /// Pops the first live queued job of a priority, skipping stale ids.
    fn pop_queued(&mut self, func: FuncId, p: usize) -> Option<JobId> {
        loop {
            let f = self.table.func_mut(func)?;
            let q = &mut f.queues[p];
            let id = q.pop_front()?;
            if q.is_empty() && q.capacity() > SHRINK_QUEUE {
                // A deep queue drained: give its memory back.
                *q = Default::default();
            }
            let live = self.table.get(id).is_some_and(|j| {
                j.state == JobState::Queued && j.func() == func && j.priority.index() == p
            });
            if live {
                // Counted as queued until assign moves it to Running.
                return Some(id);
            }
        }
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
