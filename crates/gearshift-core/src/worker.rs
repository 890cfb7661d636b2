//! The worker side: abilities, sleeping and waking, grabbing jobs (global
//! priority, round-robin across functions), and taking jobs back from
//! workers that vanish, give up a function or overrun their time limit.

use std::cmp::Reverse;

use bytes::Bytes;
use gearshift_proto::{GrabKind, Response};

use crate::conn::Ability;
use crate::engine::{Core, Timer};
use crate::ids::{ConnId, FuncId, JobId};
use crate::job::{ConnList, JobState, Run};
use crate::Millis;

/// A drained queue with more room than this many entries lets go of it.
const SHRINK_QUEUE: usize = 1 << 16;

impl Core {
    pub(crate) fn can_do(&mut self, conn: ConnId, name: Bytes, timeout_ms: Option<u64>) {
        let Some(func) = self.function_from(conn, &name) else {
            return;
        };
        let Some(c) = self.conns.get_mut(&conn.0) else {
            return;
        };
        let existed = c
            .abilities
            .iter()
            .position(|a| a.func == func)
            .map(|i| c.abilities.remove(i));
        c.abilities.insert(0, Ability { func, timeout_ms });
        let sleeping = c.sleeping && !c.noop_sent;
        if existed.is_none() {
            if let Some(f) = self.func_mut(func) {
                f.workers += 1;
                if sleeping {
                    f.sleepers.push_back(conn);
                }
            }
        }
    }

    pub(crate) fn cant_do(&mut self, conn: ConnId, name: &Bytes) {
        let Some(&func) = self.func_index.get(name) else {
            return;
        };
        self.drop_abilities(conn, |f| f == func);
    }

    pub(crate) fn reset_abilities(&mut self, conn: ConnId) {
        self.drop_abilities(conn, |_| true);
    }

    fn drop_abilities(&mut self, conn: ConnId, which: impl Fn(FuncId) -> bool) {
        let Some(c) = self.conns.get_mut(&conn.0) else {
            return;
        };
        let mut dropped = Vec::new();
        c.abilities.retain(|a| {
            let drop = which(a.func);
            if drop {
                dropped.push(a.func);
            }
            !drop
        });
        c.cursor = 0;
        let held: Vec<JobId> = c.held.clone();
        for &func in &dropped {
            if let Some(f) = self.func_mut(func) {
                f.workers = f.workers.saturating_sub(1);
            }
        }
        for job in held {
            if self
                .jobs
                .get(job)
                .is_some_and(|j| dropped.contains(&j.func()))
            {
                self.requeue(job, "worker gave up the function");
            }
        }
    }

    pub(crate) fn pre_sleep(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get(&conn.0) else {
            return;
        };
        let ready = c
            .abilities
            .iter()
            .any(|a| self.func(a.func).is_some_and(|f| f.has_queued()));
        let Some(c) = self.conns.get_mut(&conn.0) else {
            return;
        };
        c.sleeping = true;
        if ready {
            c.noop_sent = true;
            self.send(conn, Response::Noop);
        } else {
            c.noop_sent = false;
            self.enlist_sleeper(conn);
        }
    }

    pub(crate) fn grab(&mut self, conn: ConnId, kind: GrabKind, now: Millis) {
        let Some(c) = self.conns.get_mut(&conn.0) else {
            return;
        };
        c.sleeping = false;
        c.noop_sent = false;
        match self.pick_job(conn) {
            Some((id, timeout)) => self.assign(conn, id, kind, timeout, now),
            None => self.send(conn, Response::NoJob),
        }
    }

    /// The next job for a worker: highest priority first across all its
    /// functions; among functions with work at that priority, round-robin.
    fn pick_job(&mut self, conn: ConnId) -> Option<(JobId, Option<u64>)> {
        let c = self.conns.get(&conn.0)?;
        let n = c.abilities.len();
        let start = c.cursor;
        for p in 0..3 {
            for i in 0..n {
                let idx = (start + i) % n;
                let ability = self.conns.get(&conn.0)?.abilities[idx];
                let has_work = self.func(ability.func).is_some_and(|f| f.queued[p] > 0);
                if !has_work {
                    continue;
                }
                if let Some(id) = self.pop_queued(ability.func, p) {
                    if let Some(c) = self.conns.get_mut(&conn.0) {
                        c.cursor = (idx + 1) % n;
                    }
                    return Some((id, ability.timeout_ms));
                }
            }
        }
        None
    }

    /// Pops the first live queued job of a priority, skipping stale ids.
    fn pop_queued(&mut self, func: FuncId, p: usize) -> Option<JobId> {
        loop {
            let f = self.funcs.get_mut(func)?.as_mut()?;
            let q = &mut f.queues[p];
            let id = q.pop_front()?;
            if q.is_empty() && q.capacity() > SHRINK_QUEUE {
                // A deep queue drained: give its memory back.
                *q = Default::default();
            }
            let live = self.jobs.get(id).is_some_and(|j| {
                j.state == JobState::Queued && j.func() == func && j.priority.index() == p
            });
            if live {
                let f = self.func_mut(func)?;
                f.queued[p] = f.queued[p].saturating_sub(1);
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
        let Some(job) = self.jobs.get_mut(id) else {
            self.send(conn, Response::NoJob);
            return;
        };
        job.state = JobState::Running;
        let func = job.func();
        let (data, unique) = (job.data_bytes(), job.unique_bytes());
        let reducer = match kind {
            GrabKind::All => job.reducer().cloned(),
            _ => None,
        };
        self.next_assignment += 1;
        let assignment = self.next_assignment;
        self.running.insert(
            id,
            Run {
                worker: conn,
                assignment,
                numerator: 0,
                denominator: 0,
            },
        );
        let handle = self.handle_of(id);
        let mut function = Bytes::new();
        if let Some(f) = self.func_mut(func) {
            f.running += 1;
            function = f.name.clone();
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
        if let Some(c) = self.conns.get_mut(&conn.0) {
            c.held.push(id);
        }
        if let Some(ms) = timeout {
            self.timers.push(Reverse((
                now.saturating_add(ms),
                Timer::Timeout(id, assignment),
            )));
        }
        self.send(conn, response);
    }

    /// Takes a job back from its worker: to the head of its queue, or, past
    /// `--job-retries`, failed for good.
    pub(crate) fn requeue(&mut self, id: JobId, why: &str) {
        let Some(job) = self.jobs.get_mut(id) else {
            return;
        };
        match job.state {
            JobState::Cancelled => {
                self.remove_job(id);
                return;
            }
            JobState::Running => {}
            JobState::Queued | JobState::Scheduled | JobState::Pending => return,
        }
        job.retries += 1;
        let retries = job.retries;
        if job.persist != crate::job::Persist::No {
            self.effects.push(crate::effect::Effect::Store(
                crate::effect::StoreOp::Update {
                    id,
                    attempts: retries,
                },
            ));
        }
        let limit = self.cfg.job_retries;
        if limit > 0 && retries >= limit {
            let handle = self.handle_of(id);
            if let Some(job) = self.remove_job(id) {
                tracing::warn!(
                    handle = %String::from_utf8_lossy(&handle),
                    retries,
                    "dropped job due to max retry count ({why})"
                );
                for &c in &job.clients {
                    self.send(c, Response::WorkFail(handle.clone()));
                }
            }
            return;
        }
        if !job.background && job.clients.is_empty() {
            // Its clients left while it ran: nobody to run it for any more.
            self.remove_job(id);
            return;
        }
        let func = job.func();
        tracing::info!(handle = %self.handle_text(id), retries, "requeueing job: {why}");
        if let Some(run) = self.running.remove(&id) {
            if let Some(c) = self.conns.get_mut(&run.worker.0) {
                c.held.retain(|&j| j != id);
            }
        }
        if let Some(f) = self.func_mut(func) {
            f.running = f.running.saturating_sub(1);
        }
        self.enqueue(id, true);
    }

    pub(crate) fn job_timed_out(&mut self, id: JobId, assignment: u64) {
        let current = self
            .jobs
            .get(id)
            .is_some_and(|j| j.state == JobState::Running)
            && self
                .running
                .get(&id)
                .is_some_and(|r| r.assignment == assignment);
        if current {
            self.requeue(id, "worker timeout reached on job");
        }
    }

    /// The job a WORK_* packet names, if `conn` holds it.
    fn held_job(&self, conn: ConnId, handle: &[u8]) -> Option<JobId> {
        let id = self.job_by_handle(handle)?;
        let run = self.running.get(&id)?;
        (run.worker == conn).then_some(id)
    }

    fn not_found(&mut self, conn: ConnId, text: &'static str) {
        self.send(conn, Response::error("JOB_NOT_FOUND", text));
    }

    /// The handle to forward with a worker's WORK_* packet: the one the
    /// worker sent, which [`Core::held_job`] accepted only because it is
    /// exactly this job's handle (or, for a restored job, its stored one).
    fn echo_handle(&self, id: JobId, given: Bytes) -> Bytes {
        if !self.foreign_ids.is_empty() {
            if let Some(h) = self.foreign_ids.get(&id) {
                return h.clone();
            }
        }
        given
    }

    /// Sends a packet about a job to each of its clients; `handle` is the
    /// one its worker sent.
    fn fan_out(&mut self, id: JobId, handle: Bytes, make: impl FnOnce(Bytes) -> Response) {
        let clients = match self.jobs.get(id) {
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
        if let Some(run) = self.running.get_mut(&id) {
            run.numerator = gearshift_proto::request::parse_atoi(&num) as u32;
            run.denominator = gearshift_proto::request::parse_atoi(&den) as u32;
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
        self.fan_out(id, handle, |handle| Response::WorkComplete { handle, data });
        self.remove_job(id);
    }

    pub(crate) fn work_fail(&mut self, conn: ConnId, handle: Bytes) {
        let Some(id) = self.held_job(conn, &handle) else {
            return self.not_found(conn, "Job given in work result not found");
        };
        self.fan_out(id, handle, Response::WorkFail);
        self.remove_job(id);
    }

    pub(crate) fn work_exception(&mut self, conn: ConnId, handle: Bytes, data: Bytes) {
        let Some(id) = self.held_job(conn, &handle) else {
            return self.not_found(
                conn,
                "An exception was received for a job that does not exist",
            );
        };
        let clients = self.jobs.get(id).map(|job| job.clients.clone());
        if let Some(clients) = clients.filter(|c| !c.is_empty()) {
            let h = self.echo_handle(id, handle);
            for &c in &clients {
                let wants =
                    self.cfg.exceptions || self.conns.get(&c.0).is_some_and(|conn| conn.exceptions);
                let r = if wants {
                    Response::WorkException {
                        handle: h.clone(),
                        data: data.clone(),
                    }
                } else {
                    Response::WorkFail(h.clone())
                };
                self.send(c, r);
            }
        }
        self.remove_job(id);
    }

    pub(crate) fn get_status(&mut self, conn: ConnId, handle: Bytes) {
        let r = match self.job_by_handle(&handle).and_then(|id| self.jobs.get(id)) {
            Some(job) => {
                let run = self.running.get(&job.id);
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
        let job = self.jobs.find_named(None, &unique);
        let r = match job {
            Some(job) => {
                let run = self.running.get(&job.id);
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
