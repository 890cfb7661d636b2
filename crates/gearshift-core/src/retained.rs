//! What outlives a job: finished jobs kept queryable with their result and
//! history for their policy's `keep_results`, and the dead set (background
//! jobs that used all their attempts), kept with their workload until an
//! admin retries or drops them or `dead_ttl` passes. Both are bounded by
//! time and by count ([`crate::policy::Retention`]); the earliest to expire
//! goes first when a cap is reached.

use bytes::Bytes;
use gearshift_proto::admin::DeadTarget;

use gearshift_persist::{DeadMark, KeptRecord};

use crate::effect::{stored_priority, Effect, StoreOp};
use crate::engine::Core;
use crate::history::Step;
use crate::ids::JobId;
use crate::job::{ConnList, Job, JobExtra, JobState, Payload, Persist};
use crate::Millis;

pub use crate::kept::{Finished, Outcome, Retained, RECORD_COST};

impl Core {
    /// Builds the record of a job that is ending (before it is removed).
    pub(crate) fn finished_record(
        &mut self,
        id: JobId,
        outcome: Outcome,
        result: Bytes,
    ) -> Option<Box<Finished>> {
        let handle = self.handles.of(id);
        let job = self.table.get(id)?;
        let track = self.history.take(id);
        let function = self
            .table
            .func(job.func())
            .map(|f| f.name.clone())
            .unwrap_or_default();
        let dead = outcome == Outcome::Dead;
        Some(Box::new(Finished {
            id,
            handle,
            function,
            unique: job.unique_bytes(),
            priority: job.priority,
            background: job.background,
            outcome,
            attempts: track.attempts,
            created: job.created,
            started: track.started,
            finished: self.now,
            worker: track.worker,
            error: track.error,
            result,
            history: track.history,
            data: if dead { job.data_bytes() } else { Bytes::new() },
            reducer: if dead { job.reducer().cloned() } else { None },
            stored: dead && job.persist != Persist::No,
            expires: 0,
        }))
    }

    /// Keeps a finished record (and writes it to a durable store).
    pub(crate) fn keep_record(&mut self, rec: Box<Finished>) {
        if self.cfg.durable {
            let stored = rec.to_stored();
            self.effects
                .push(Effect::Store(StoreOp::Kept(Box::new(stored))));
        }
        let r = &self.policies.retention;
        let (cap, bytes) = (r.max_kept, r.max_kept_bytes);
        for id in self.retained.keep(rec, cap, bytes) {
            if self.cfg.durable {
                self.effects.push(Effect::Store(StoreOp::Forget(id)));
            }
        }
    }

    /// Rebuilds kept records after a restart; expired ones are forgotten.
    pub fn restore_kept(&mut self, kept: Vec<KeptRecord>) {
        self.seen_ids(kept.iter().map(|s| s.id));
        self.adopt_kept(kept);
    }

    /// Keeps stored finished records (the counter does not move).
    pub(crate) fn adopt_kept(&mut self, kept: Vec<KeptRecord>) {
        for s in kept {
            if s.expires_ms <= self.now {
                self.effects.push(Effect::Store(StoreOp::Forget(s.id)));
                continue;
            }
            let outcome = match s.outcome {
                0 => Outcome::Completed,
                2 => Outcome::Cancelled,
                _ => Outcome::Failed,
            };
            let rec = Box::new(Finished {
                id: s.id,
                handle: s.handle,
                function: s.function,
                unique: s.unique,
                priority: stored_priority(s.priority),
                background: s.background,
                outcome,
                attempts: s.attempts,
                created: s.created_ms,
                started: s.started_ms,
                finished: s.finished_ms,
                worker: (!s.worker.is_empty()).then_some(s.worker),
                error: s.error,
                result: s.result,
                history: crate::history::decode_history(&s.history),
                data: Bytes::new(),
                reducer: None,
                stored: true,
                expires: s.expires_ms,
            });
            let r = &self.policies.retention;
            let (cap, bytes) = (r.max_kept, r.max_kept_bytes);
            for id in self.retained.keep(rec, cap, bytes) {
                self.effects.push(Effect::Store(StoreOp::Forget(id)));
            }
        }
    }

    /// Moves a background job that failed for good into the dead set,
    /// durably if the store holds it.
    pub(crate) fn bury(&mut self, id: JobId) {
        self.record(id, Step::Dead);
        let Some(mut rec) = self.finished_record(id, Outcome::Dead, Bytes::new()) else {
            return;
        };
        rec.expires = self.now.saturating_add(self.policies.retention.dead_ttl);
        if rec.stored {
            self.effects.push(Effect::Store(StoreOp::Dead {
                id,
                attempts: rec.attempts,
                mark: DeadMark {
                    died_ms: rec.finished,
                    error: rec.error.clone().unwrap_or_default(),
                },
            }));
        }
        // The store keeps it as dead: removing the live job must not end it there.
        self.table.set_persist(id, Persist::No);
        tracing::warn!(handle = %String::from_utf8_lossy(&rec.handle), attempts = rec.attempts, "job is dead: no attempts left");
        self.insert_dead(rec);
        self.remove_job(id);
    }

    pub(crate) fn insert_dead(&mut self, rec: Box<Finished>) {
        let max = self.policies.retention.max_dead;
        for gone in self.retained.add_dead(rec, max) {
            if gone.stored {
                self.effects.push(Effect::Store(StoreOp::Done(gone.id)));
            }
        }
    }

    /// Forgets kept and dead jobs whose time has passed.
    pub(crate) fn prune_retained(&mut self, now: Millis) {
        let (kept, dead) = self.retained.expire(now);
        for gone in kept {
            if self.cfg.durable {
                self.effects.push(Effect::Store(StoreOp::Forget(gone.id)));
            }
        }
        for gone in dead {
            tracing::info!(handle = %String::from_utf8_lossy(&gone.handle), "dead job expired");
            if gone.stored {
                self.effects.push(Effect::Store(StoreOp::Done(gone.id)));
            }
        }
    }

    /// The dead jobs a `retry dead` / `drop dead` names: one handle, or
    /// all (of one function, if given).
    fn dead_targets(&self, target: &DeadTarget, function: Option<&[u8]>) -> Vec<JobId> {
        let of_function = |f: &Finished| function.is_none_or(|name| f.function[..] == *name);
        match target {
            DeadTarget::Handle(h) => self
                .retained
                .dead
                .values()
                .filter(|f| f.handle[..] == h[..] && of_function(f))
                .map(|f| f.id)
                .collect(),
            DeadTarget::All => self
                .retained
                .dead
                .values()
                .filter(|f| of_function(f))
                .map(|f| f.id)
                .collect(),
        }
    }

    /// `retry dead`: the jobs go back to their queues with a fresh set of
    /// attempts, under their old handles. Returns how many.
    pub(crate) fn retry_dead(&mut self, target: &DeadTarget, function: Option<&[u8]>) -> usize {
        let ids = self.dead_targets(target, function);
        for &id in &ids {
            if let Some(rec) = self.retained.dead.remove(&id) {
                self.revive(*rec);
            }
        }
        ids.len()
    }

    /// `drop dead`: the jobs are forgotten (and removed from the store).
    pub(crate) fn drop_dead(&mut self, target: &DeadTarget, function: Option<&[u8]>) -> usize {
        let ids = self.dead_targets(target, function);
        for &id in &ids {
            if let Some(rec) = self.retained.dead.remove(&id) {
                if rec.stored {
                    self.effects.push(Effect::Store(StoreOp::Done(id)));
                }
            }
        }
        ids.len()
    }

    fn revive(&mut self, rec: Finished) {
        let id = rec.id;
        let func = self.table.function_id(&rec.function, &self.policies);
        self.handles.restored(id, &rec.handle);
        let payload = Payload::new(rec.unique, rec.data);
        let extra = rec.reducer.map(|r| {
            Box::new(JobExtra {
                reducer: Some(r),
                due: None,
            })
        });
        self.table.insert(
            Job {
                id,
                payload: payload.bytes,
                unique_len: payload.unique_len,
                created: rec.created,
                clients: ConnList::Empty,
                extra,
                func: func as u32,
                retries: 0,
                priority: rec.priority,
                background: true,
                state: JobState::Pending,
                persist: if rec.stored {
                    Persist::Yes
                } else {
                    Persist::No
                },
            },
            false,
        );
        if rec.stored {
            self.effects.push(Effect::Store(StoreOp::Retry {
                id,
                attempts: 0,
                due_ms: None,
            }));
        }
        self.history.revive(id, rec.history, rec.error);
        self.record(id, Step::Revived);
        self.enqueue(id, false);
    }
}
