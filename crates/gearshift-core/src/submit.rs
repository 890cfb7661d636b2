//! Job submission: unique-id coalescing, queue limits, handle assignment,
//! epoch scheduling, and waking the workers asleep on the function.

use std::cmp::Reverse;

use bytes::{BufMut, Bytes, BytesMut};
use gearshift_proto::{Response, Submit};

use crate::config::MAX_UNIQUE;
use crate::engine::{Core, Timer};
use crate::ids::{ConnId, FuncId, JobId};
use crate::job::{Job, JobState, Persist, UniqueKey};
use crate::Millis;

impl Core {
    pub(crate) fn submit(&mut self, conn: ConnId, s: Submit, now: Millis) {
        if s.unique.len() > MAX_UNIQUE {
            self.send(
                conn,
                Response::error("ARGUMENT_TOO_LARGE", "Unique value too large"),
            );
            return;
        }
        let func = self.function_id(&s.function);
        let key = match s.unique.as_ref() {
            b"" => UniqueKey::None,
            b"-" => UniqueKey::Data,
            _ => UniqueKey::Named,
        };
        if let Some(existing) = self.find_duplicate(func, &key, &s) {
            self.join(conn, existing, s.background);
            return;
        }
        let p = s.priority.index();
        if let Some(f) = self.func(func) {
            let limit = f.max_queue[p];
            if limit > 0 && i64::from(f.total) >= limit {
                self.send(conn, Response::error("QUEUE_ERROR", "Job queue is full"));
                return;
            }
        }
        let id = self.next_job;
        self.next_job += 1;
        self.reserve_ahead();
        let handle = self.make_handle(id);
        let due = s
            .epoch
            .map(|secs| (secs.max(0) as u64).saturating_mul(1000))
            .filter(|&d| d > now);
        let job = Job {
            id,
            handle: handle.clone(),
            func,
            unique: s.unique,
            unique_key: key,
            data: s.data,
            reducer: s.reducer,
            priority: s.priority,
            background: s.background,
            clients: if s.background { Vec::new() } else { vec![conn] },
            worker: None,
            state: JobState::Scheduled,
            retries: 0,
            numerator: 0,
            denominator: 0,
            due,
            assignment: 0,
            created: now,
            persist: Persist::No,
            acks: Vec::new(),
        };
        match job.unique_key {
            UniqueKey::None => {}
            UniqueKey::Data => {
                self.by_data.insert((func, job.data.clone()), id);
            }
            UniqueKey::Named => self.uniques.entry(job.unique.clone()).or_default().push(id),
        }
        if !s.background {
            if let Some(c) = self.conns.get_mut(&conn.0) {
                c.waiting.insert(id);
            }
        }
        self.jobs.insert(id, job);
        if let Some(f) = self.func_mut(func) {
            f.total += 1;
        }
        if s.background && self.cfg.durable {
            // Acknowledged, and runnable, only once the store confirms it.
            if let Some(job) = self.jobs.get_mut(&id) {
                job.state = JobState::Pending;
                job.acks.push(conn);
            }
            self.hold_ack(conn, id);
            self.store_add(id);
            return;
        }
        self.send(conn, Response::JobCreated(handle));
        self.release(id, now);
    }

    /// Makes a new job grab-able, or schedules it if it is not due yet.
    pub(crate) fn release(&mut self, id: JobId, now: Millis) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        let func = job.func;
        match job.due.filter(|&d| d > now) {
            Some(at) => {
                job.state = JobState::Scheduled;
                if let Some(f) = self.func_mut(func) {
                    f.scheduled += 1;
                }
                self.timers.push(Reverse((at, Timer::Due(id))));
            }
            None => self.enqueue(id, false),
        }
    }

    fn find_duplicate(&self, func: FuncId, key: &UniqueKey, s: &Submit) -> Option<JobId> {
        match key {
            UniqueKey::None => None,
            UniqueKey::Data => self.by_data.get(&(func, s.data.clone())).copied(),
            UniqueKey::Named => self
                .uniques
                .get(&s.unique)?
                .iter()
                .copied()
                .find(|j| self.jobs.get(j).is_some_and(|job| job.func == func)),
        }
    }

    /// A duplicate submission joins the existing job: same handle; a
    /// foreground submitter is attached, a background one makes the job
    /// outlive its clients.
    fn join(&mut self, conn: ConnId, id: JobId, background: bool) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        let handle = job.handle.clone();
        if job.state == JobState::Cancelled {
            // The job is on its way out; nobody may wait on it.
            self.send(conn, Response::JobCreated(handle));
            return;
        }
        if !background {
            job.clients.push(conn);
            if let Some(c) = self.conns.get_mut(&conn.0) {
                c.waiting.insert(id);
            }
        }
        if background && !job.background {
            job.background = true;
            if self.cfg.durable {
                // A foreground job becomes a background one: it must be
                // stored before this submitter hears JOB_CREATED.
                job.acks.push(conn);
                self.hold_ack(conn, id);
                self.store_add(id);
                return;
            }
        }
        if job.persist == Persist::Pending {
            job.acks.push(conn);
            self.hold_ack(conn, id);
            return;
        }
        self.send(conn, Response::JobCreated(handle));
    }

    pub(crate) fn make_handle(&self, id: JobId) -> Bytes {
        let prefix = self.cfg.handle_prefix.as_bytes();
        let mut b = BytesMut::with_capacity(prefix.len() + 21);
        b.put_slice(prefix);
        b.put_u8(b':');
        b.put_slice(id.to_string().as_bytes());
        b.freeze()
    }

    /// Puts a job in its function's queue (when it comes back from a worker,
    /// at its place in line by handle number, so before every later job)
    /// and wakes sleepers.
    pub(crate) fn enqueue(&mut self, id: JobId, front: bool) {
        let Some(job) = self.jobs.get_mut(&id) else {
            return;
        };
        job.state = JobState::Queued;
        let (func, p) = (job.func, job.priority.index());
        let Some(f) = self.func_mut(func) else {
            return;
        };
        if front {
            // Back in line where its number puts it: ahead of every job
            // submitted after it, and behind older jobs that came back
            // before it (several held jobs may come back in any order).
            let q = &mut f.queues[p];
            let at = q.iter().position(|&j| j > id).unwrap_or(q.len());
            q.insert(at, id);
        } else {
            f.queues[p].push_back(id);
        }
        f.queued[p] += 1;
        self.wake_sleepers(func);
    }

    /// An epoch job's time came.
    pub(crate) fn epoch_due(&mut self, id: JobId) {
        let Some(job) = self.jobs.get(&id) else {
            return;
        };
        if job.state != JobState::Scheduled {
            return;
        }
        let func = job.func;
        if let Some(f) = self.func_mut(func) {
            f.scheduled = f.scheduled.saturating_sub(1);
        }
        self.enqueue(id, false);
    }

    /// NOOPs up to `--worker-wakeup` sleeping workers of `func` (0 = all).
    pub(crate) fn wake_sleepers(&mut self, func: FuncId) {
        let limit = match self.cfg.worker_wakeup {
            0 => usize::MAX,
            n => n as usize,
        };
        let mut woken = 0;
        while woken < limit {
            let Some(w) = self.func_mut(func).and_then(|f| f.sleepers.pop_front()) else {
                break;
            };
            let Some(c) = self.conns.get_mut(&w.0) else {
                continue;
            };
            if !c.wakeable_for(func) {
                continue;
            }
            c.noop_sent = true;
            woken += 1;
            self.send(w, gearshift_proto::Response::Noop);
        }
    }

    /// Puts a sleeping worker on the wake lists of all its functions.
    pub(crate) fn enlist_sleeper(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get(&conn.0) else {
            return;
        };
        let funcs: Vec<FuncId> = c.abilities.iter().map(|a| a.func).collect();
        let workers = |f: &crate::function::Function| f.workers as usize;
        for func in funcs {
            let Some(f) = self.func_mut(func) else {
                continue;
            };
            f.sleepers.push_back(conn);
            // Stale entries pile up when a worker sleeps again and again on a
            // function that never gets jobs; compact once they outnumber
            // the function's workers.
            if f.sleepers.len() > 2 * workers(f) + 16 {
                let mut seen = crate::ids::IdSet::default();
                f.sleepers.retain(|c| seen.insert(c.0));
                let conns = &self.conns;
                if let Some(f) = self.funcs.get_mut(func).and_then(Option::as_mut) {
                    f.sleepers
                        .retain(|c| conns.get(&c.0).is_some_and(|conn| conn.wakeable_for(func)));
                }
            }
        }
    }
}
