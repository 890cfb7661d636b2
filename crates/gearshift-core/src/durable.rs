//! The seam to a durable store: background jobs are written through
//! [`StoreOp`] effects and acknowledged (JOB_CREATED) only once the driver
//! reports them durable; a restart rebuilds the queues from stored jobs with
//! their original handles; the handle counter is reserved ahead so it never
//! goes backwards across restarts.

use bytes::Bytes;
use gearshift_proto::Response;

use crate::effect::{priority_byte, stored_priority, Effect, StoreOp};
use crate::engine::Core;
use crate::ids::JobId;
use crate::job::{ConnList, Job, JobExtra, JobState, Payload, Persist};
use crate::Millis;
use gearshift_persist::{DeadMark, JobRecord};

impl Core {
    /// The store confirmed these jobs durable: their submitters get
    /// JOB_CREATED and new jobs become grab-able (or scheduled).
    pub fn persisted(&mut self, ids: &[JobId], now: Millis) {
        for &id in ids {
            let Some(job) = self.table.get(id) else {
                self.schedule_persisted(id);
                continue;
            };
            if job.persist != Persist::Pending {
                continue;
            }
            let pending = job.state == JobState::Pending;
            self.table.set_persist(id, Persist::Yes);
            let acks = self.acks.take(id).unwrap_or_default();
            if !acks.is_empty() {
                let handle = self.handles.of(id);
                for &c in &acks {
                    self.resolve_ack(c, id, Response::JobCreated(handle.clone()));
                }
            }
            if pending {
                self.release(id, now);
            }
        }
    }

    /// The store could not record these jobs: their submitters get ERROR
    /// QUEUE_ERROR and a job that existed only for them is dropped.
    pub fn persist_failed(&mut self, ids: &[JobId], reason: &str) {
        for &id in ids {
            let Some(job) = self.table.get(id) else {
                self.schedule_failed(id, reason);
                continue;
            };
            if job.persist != Persist::Pending {
                continue;
            }
            let new_job = job.state == JobState::Pending;
            let orphan = !new_job && job.clients.is_empty() && job.state == JobState::Queued;
            self.table.set_persist(id, Persist::No);
            let acks = self.acks.take(id).unwrap_or_default();
            if !new_job {
                // A foreground job a background submitter joined: it goes on
                // as the foreground job it was.
                self.table.set_background(id, false);
            }
            self.table.refused_by_store(acks.len());
            let text = format!("Job could not be stored: {reason}");
            for &c in &acks {
                let refusal = Response::error("QUEUE_ERROR", Bytes::from(text.clone()));
                self.resolve_ack(c, id, refusal);
            }
            if new_job || orphan {
                self.remove_job(id);
            }
        }
    }

    /// Rebuilds stored jobs after a restart, in the order given (id order),
    /// with their original handles, priorities and due times. `next_id` is
    /// the store's first never-used handle number. Stores keep ids below
    /// 2^63 (`gearshift_store::MAX_ID`); larger ones do not panic here, but
    /// the counter stops at `u64::MAX`.
    pub fn restore(&mut self, jobs: Vec<JobRecord>, next_id: JobId, now: Millis) {
        let max_stored = jobs
            .iter()
            .map(|j| j.id.saturating_add(1))
            .max()
            .unwrap_or(1);
        self.handles.restart_at(next_id.max(max_stored));
        self.adopt_jobs(jobs, now);
        self.reserve_ahead();
    }

    /// Puts stored jobs in the table and their queues (or waiting for their
    /// time) under their stored handles, without moving the handle counter:
    /// [`Core::restore`] at start, [`Core::take_over`] while running.
    pub(crate) fn adopt_jobs(&mut self, jobs: Vec<JobRecord>, now: Millis) {
        for s in jobs {
            let func = self.table.function_id(&s.function, &self.policies);
            self.handles.restored(s.id, &s.handle);
            let extra = (s.reducer.is_some() || s.due_ms.is_some()).then(|| {
                Box::new(JobExtra {
                    reducer: s.reducer,
                    due: s.due_ms,
                })
            });
            // The same id twice (a store never replays that): the later
            // record replaces the earlier, as it always has.
            let _ = self.table.take(s.id);
            let payload = Payload::new(s.unique, s.data);
            self.table.insert(
                Job {
                    id: s.id,
                    payload: payload.bytes,
                    unique_len: payload.unique_len,
                    created: s.created_ms,
                    clients: ConnList::Empty,
                    extra,
                    func: func as u32,
                    retries: s.attempts,
                    priority: stored_priority(s.priority),
                    background: true,
                    state: JobState::Pending,
                    persist: Persist::Yes,
                },
                false,
            );
            let retry_at = s.due_ms.filter(|&d| d > now && s.attempts > 0);
            self.release(s.id, now);
            if let Some(at) = retry_at {
                // A stored job waiting for its retry shows as retrying again.
                if self.tracks(s.id) {
                    self.history.restored(s.id, s.attempts, at);
                }
            }
        }
    }

    /// Sends the start of every stored job's run to the store
    /// ([`StoreOp::Started`]): a cluster's shared store remembers the runs
    /// in flight, so the node that takes over counts them
    /// ([`Core::restore_cut_off_runs`]).
    pub fn track_runs(&mut self, on: bool) {
        self.track_runs = on;
    }

    /// Restored jobs whose run was cut off (their node stopped while a
    /// worker ran them): each counts as a run lost with its worker, under
    /// the retry policy (a backoff, or the dead set once out of attempts)
    /// or else gearmand's requeue with `--job-retries`. Call after
    /// [`Core::restore`] and [`Core::set_policies`].
    pub fn restore_cut_off_runs(&mut self, ids: &[JobId], now: Millis) {
        self.now = self.now.max(now);
        for &id in ids {
            let queued = self
                .table
                .get(id)
                .is_some_and(|j| j.state == JobState::Queued);
            if !queued {
                continue;
            }
            // Back out of its queue into a run, so it leaves that run the
            // way a job whose worker vanished does.
            if let Some((func, p)) = self.table.get(id).map(|j| (j.func(), j.priority.index())) {
                if let Some(f) = self.table.func_mut(func) {
                    f.queues[p].retain(|&j| j != id);
                }
            }
            self.table.set_state(id, JobState::Running);
            let started = self
                .table
                .get(id)
                .map_or(1, |j| j.retries.saturating_add(1));
            if self.tracks(id) {
                self.history.at_least(id, started);
            }
            self.requeue(
                id,
                crate::policy::Reason::WorkerLost,
                "its node stopped while it ran",
            );
        }
    }

    /// Rebuilds the dead set after a restart. Call after [`Core::restore`]
    /// and [`Core::set_policies`] (a dead job's time to live comes from the
    /// retention settings).
    pub fn restore_dead(&mut self, dead: Vec<(JobRecord, DeadMark)>) {
        self.seen_ids(dead.iter().map(|(s, _)| s.id));
        self.adopt_dead(dead);
    }

    /// The handle counter moves past these restored numbers, and the
    /// reservation covers them (at start only: a take-over's numbers are
    /// other nodes').
    pub(crate) fn seen_ids(&mut self, ids: impl Iterator<Item = JobId>) {
        for id in ids {
            self.handles.seen(id);
        }
        self.handles.cover_seen();
    }

    /// Puts stored dead jobs in the dead set (the counter does not move).
    pub(crate) fn adopt_dead(&mut self, dead: Vec<(JobRecord, DeadMark)>) {
        let ttl = self.policies.retention.dead_ttl;
        for (s, info) in dead {
            let rec = crate::kept::Finished {
                id: s.id,
                handle: s.handle,
                function: s.function,
                unique: s.unique,
                priority: stored_priority(s.priority),
                background: true,
                outcome: crate::kept::Outcome::Dead,
                attempts: s.attempts,
                created: s.created_ms,
                started: None,
                finished: info.died_ms,
                worker: None,
                error: (!info.error.is_empty()).then_some(info.error),
                result: Bytes::new(),
                history: Vec::new(),
                data: s.data,
                reducer: s.reducer,
                stored: true,
                expires: info.died_ms.saturating_add(ttl),
            };
            self.insert_dead(Box::new(rec));
        }
    }

    /// Keeps the stored handle reservation well ahead of the counter.
    fn reserve_ahead(&mut self) {
        if !self.cfg.durable {
            return;
        }
        if let Some(end) = self.handles.reserve_ahead() {
            self.effects.push(Effect::Store(StoreOp::Reserve(end)));
        }
    }

    /// Writes a job to the store.
    pub(crate) fn store_add(&mut self, id: JobId) {
        // A slice of the shared handle buffer for its own form: the record
        // lives only until the store thread has encoded it, so it pins a
        // chunk briefly, and saves an allocation per stored job.
        let handle = self.handles.of(id);
        if self.table.set_persist(id, Persist::Pending).is_none() {
            return;
        }
        let Some((job, func)) = self.table.get_with_func(id) else {
            return;
        };
        let function = func.map(|f| f.name.clone());
        let stored = JobRecord {
            id,
            handle,
            function: function.unwrap_or_default(),
            unique: job.unique_bytes(),
            priority: priority_byte(job.priority),
            data: job.data_bytes(),
            reducer: job.reducer().cloned(),
            due_ms: job.due(),
            attempts: job.retries,
            created_ms: job.created,
        };
        self.effects.push(Effect::Store(StoreOp::Add(stored)));
    }

    /// Jobs sent to the store and not yet confirmed or refused: their
    /// submitters still wait for an answer.
    pub fn awaiting_store(&self) -> usize {
        self.table
            .iter()
            .filter(|j| j.persist == Persist::Pending)
            .count()
    }

    /// Jobs that live only in memory (lost if the process stops).
    pub fn volatile_job_count(&self) -> usize {
        self.table
            .iter()
            .filter(|j| j.persist == Persist::No)
            .count()
    }
}
