//! The worker side: abilities, sleeping and waking, grabbing jobs (global
//! priority, round-robin across functions), and taking jobs back from
//! workers that vanish, give up a function or overrun their time limit.

use std::cmp::Reverse;

use bytes::Bytes;
use gearshift_proto::{GrabKind, Response};

use crate::conn::Ability;
use crate::engine::{Core, Timer};
use crate::ids::{ConnId, FuncId, JobId};
use crate::job::JobState;
use crate::Millis;

impl Core {
    pub(crate) fn can_do(&mut self, conn: ConnId, name: Bytes, timeout_ms: Option<u64>) {
        let func = self.function_id(&name);
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
                .get(&job)
                .is_some_and(|j| dropped.contains(&j.func))
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
            let id = self.funcs.get_mut(func)?.as_mut()?.queues[p].pop_front()?;
            let live = self.jobs.get(&id).is_some_and(|j| {
                j.state == JobState::Queued && j.func == func && j.priority.index() == p
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
        let Some(job) = self.jobs.get_mut(&id) else {
            self.send(conn, Response::NoJob);
            return;
        };
        job.state = JobState::Running;
        job.worker = Some(conn);
        job.assignment += 1;
        let assignment = job.assignment;
        let function = self
            .funcs
            .get(job.func)
            .and_then(Option::as_ref)
            .map(|f| f.name.clone());
        let function = function.unwrap_or_default();
        let (handle, data, unique) = (job.handle.clone(), job.data.clone(), job.unique.clone());
        let response = match (kind, &job.reducer) {
            (GrabKind::Plain, _) => Response::JobAssign {
                handle,
                function,
                data,
            },
            (GrabKind::All, Some(reducer)) => Response::JobAssignAll {
                handle,
                function,
                unique,
                reducer: reducer.clone(),
                data,
            },
            _ => Response::JobAssignUniq {
                handle,
                function,
                unique,
                data,
            },
        };
        let func = job.func;
        if let Some(f) = self.func_mut(func) {
            f.running += 1;
        }
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
        let Some(job) = self.jobs.get_mut(&id) else {
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
            if let Some(job) = self.remove_job(id) {
                tracing::warn!(
                    handle = %String::from_utf8_lossy(&job.handle),
                    retries,
                    "dropped job due to max retry count ({why})"
                );
                for c in job.clients {
                    self.send(c, Response::WorkFail(job.handle.clone()));
                }
            }
            return;
        }
        if !job.background && job.clients.is_empty() {
            // Its clients left while it ran: nobody to run it for any more.
            self.remove_job(id);
            return;
        }
        let worker = job.worker.take();
        job.numerator = 0;
        job.denominator = 0;
        let func = job.func;
        tracing::info!(handle = %String::from_utf8_lossy(&job.handle), retries, "requeueing job: {why}");
        if let Some(w) = worker {
            if let Some(c) = self.conns.get_mut(&w.0) {
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
            .get(&id)
            .is_some_and(|j| j.state == JobState::Running && j.assignment == assignment);
        if current {
            self.requeue(id, "worker timeout reached on job");
        }
    }

    /// The job a WORK_* packet names, if `conn` holds it.
    fn held_job(&self, conn: ConnId, handle: &[u8]) -> Option<JobId> {
        let id = self.job_by_handle(handle)?;
        let job = self.jobs.get(&id)?;
        (job.worker == Some(conn)).then_some(id)
    }

    fn not_found(&mut self, conn: ConnId, text: &'static str) {
        self.send(conn, Response::error("JOB_NOT_FOUND", text));
    }

    fn fan_out(&mut self, id: JobId, make: impl Fn(&Bytes) -> Response) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        let r = make(&job.handle);
        let clients = job.clients.clone();
        for c in clients {
            self.send(c, r.clone());
        }
    }

    pub(crate) fn work_status(&mut self, conn: ConnId, handle: Bytes, num: Bytes, den: Bytes) {
        let Some(id) = self.held_job(conn, &handle) else {
            return self.not_found(conn, "Job given in work result not found");
        };
        if let Some(job) = self.jobs.get_mut(&id) {
            job.numerator = gearshift_proto::request::parse_atoi(&num) as u32;
            job.denominator = gearshift_proto::request::parse_atoi(&den) as u32;
        }
        self.fan_out(id, |h| Response::WorkStatus {
            handle: h.clone(),
            numerator: num.clone(),
            denominator: den.clone(),
        });
    }

    pub(crate) fn work_data(&mut self, conn: ConnId, handle: Bytes, data: Bytes, warning: bool) {
        let Some(id) = self.held_job(conn, &handle) else {
            return self.not_found(conn, "Job does not exist on server");
        };
        self.fan_out(id, |h| {
            if warning {
                Response::WorkWarning {
                    handle: h.clone(),
                    data: data.clone(),
                }
            } else {
                Response::WorkData {
                    handle: h.clone(),
                    data: data.clone(),
                }
            }
        });
    }

    pub(crate) fn work_complete(&mut self, conn: ConnId, handle: Bytes, data: Bytes) {
        let Some(id) = self.held_job(conn, &handle) else {
            return self.not_found(conn, "Job given in work result not found");
        };
        self.fan_out(id, |h| Response::WorkComplete {
            handle: h.clone(),
            data: data.clone(),
        });
        self.remove_job(id);
    }

    pub(crate) fn work_fail(&mut self, conn: ConnId, handle: Bytes) {
        let Some(id) = self.held_job(conn, &handle) else {
            return self.not_found(conn, "Job given in work result not found");
        };
        self.fan_out(id, |h| Response::WorkFail(h.clone()));
        self.remove_job(id);
    }

    pub(crate) fn work_exception(&mut self, conn: ConnId, handle: Bytes, data: Bytes) {
        let Some(id) = self.held_job(conn, &handle) else {
            return self.not_found(
                conn,
                "An exception was received for a job that does not exist",
            );
        };
        if let Some(job) = self.jobs.get(&id) {
            let h = job.handle.clone();
            for c in job.clients.clone() {
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
        let r = match self
            .job_by_handle(&handle)
            .and_then(|id| self.jobs.get(&id))
        {
            Some(job) => Response::StatusRes {
                handle,
                known: true,
                running: matches!(job.state, JobState::Running | JobState::Cancelled),
                numerator: job.numerator,
                denominator: job.denominator,
            },
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
        let job = self
            .uniques
            .get(&unique)
            .and_then(|ids| ids.first())
            .and_then(|id| self.jobs.get(id));
        let r = match job {
            Some(job) => Response::StatusResUnique {
                unique,
                known: true,
                running: matches!(job.state, JobState::Running | JobState::Cancelled),
                numerator: job.numerator,
                denominator: job.denominator,
                waiting: job.clients.len() as u32,
            },
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
