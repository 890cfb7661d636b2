//! What outlives a job: finished jobs kept queryable with their result and
//! history for their policy's `keep_results`, and the dead set (background
//! jobs that used all their attempts), kept with their workload until an
//! admin retries or drops them or `dead_ttl` passes. Both are bounded by
//! time and by count ([`crate::policy::Retention`]); the earliest to expire
//! goes first when a cap is reached.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use bytes::Bytes;
use gearshift_proto::admin::DeadTarget;
use gearshift_proto::Priority;

use gearshift_persist::{DeadMark, KeptRecord};

use crate::durable::{priority_byte, stored_priority};
use crate::effect::{Effect, StoreOp};
use crate::engine::Core;
use crate::ids::JobId;
use crate::job::{ConnList, Job, JobExtra, JobState, Payload, Persist};
use crate::lifecycle::{Event, Step, Track};
use crate::Millis;

/// What a kept record costs besides its byte fields: the record, its
/// history and its index entries (measured by `benches/memory.rs`).
pub const RECORD_COST: usize = 1024;

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// WORK_COMPLETE.
    Completed,
    /// Failed for good (foreground, or no dead set for it).
    Failed,
    /// In the dead set.
    Dead,
    /// Cancelled by an admin.
    Cancelled,
}

impl Outcome {
    /// The `state:` word of `show job`.
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Failed => "failed",
            Outcome::Dead => "dead",
            Outcome::Cancelled => "cancelled",
        }
    }
}

/// A job that ended, as `show job` and the dead set show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// Handle number.
    pub id: JobId,
    /// Its handle as its clients knew it.
    pub handle: Bytes,
    /// Function name.
    pub function: Bytes,
    /// Unique id.
    pub unique: Bytes,
    /// Queue priority.
    pub priority: Priority,
    /// Submitted in the background.
    pub background: bool,
    /// How it ended.
    pub outcome: Outcome,
    /// Runs started.
    pub attempts: u32,
    /// Submission time.
    pub created: Millis,
    /// Start of the last run.
    pub started: Option<Millis>,
    /// End time.
    pub finished: Millis,
    /// Worker of the last run.
    pub worker: Option<Bytes>,
    /// Last failure's text.
    pub error: Option<Bytes>,
    /// WORK_COMPLETE's data.
    pub result: Bytes,
    /// Transitions, oldest first.
    pub history: Vec<Event>,
    /// Workload (kept for dead jobs, which may run again).
    pub data: Bytes,
    /// Reducer (dead jobs).
    pub reducer: Option<Bytes>,
    /// The store holds it (a dead job written to a durable store).
    pub stored: bool,
    /// When it is forgotten.
    pub expires: Millis,
}

impl Finished {
    /// The record as the store keeps it (kept jobs, not dead ones).
    fn to_stored(&self) -> KeptRecord {
        KeptRecord {
            id: self.id,
            handle: self.handle.clone(),
            function: self.function.clone(),
            unique: self.unique.clone(),
            priority: priority_byte(self.priority),
            background: self.background,
            outcome: match self.outcome {
                Outcome::Completed => 0,
                Outcome::Cancelled => 2,
                Outcome::Failed | Outcome::Dead => 1,
            },
            attempts: self.attempts,
            created_ms: self.created,
            started_ms: self.started,
            finished_ms: self.finished,
            expires_ms: self.expires,
            worker: self.worker.clone().unwrap_or_default(),
            error: self.error.clone(),
            result: self.result.clone(),
            history: crate::lifecycle::encode_history(&self.history),
        }
    }

    /// Bytes it holds, for the retention cap.
    pub fn cost(&self) -> usize {
        RECORD_COST + self.result.len() + self.data.len() + self.unique.len()
    }
}

/// Finished and dead jobs with their expiry order.
#[derive(Debug, Default)]
pub struct Retained {
    /// Finished jobs kept queryable, by handle number (ordered, so the
    /// HTTP API pages through them).
    pub kept: BTreeMap<JobId, Box<Finished>>,
    kept_expiry: BinaryHeap<Reverse<(Millis, JobId)>>,
    /// Bytes the kept records hold, as [`Finished::cost`] counts them.
    pub kept_bytes: usize,
    /// The dead set, by handle number.
    pub dead: BTreeMap<JobId, Box<Finished>>,
    dead_expiry: BinaryHeap<Reverse<(Millis, JobId)>>,
}

impl Retained {
    /// When the next kept or dead job expires.
    pub fn next_expiry(&self) -> Option<Millis> {
        let k = self.kept_expiry.peek().map(|Reverse((t, _))| *t);
        let d = self.dead_expiry.peek().map(|Reverse((t, _))| *t);
        match (k, d) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Keeps a record; returns the ids the caps pushed out.
    fn keep(&mut self, f: Box<Finished>, cap: usize, max_bytes: usize) -> Vec<JobId> {
        self.kept_expiry.push(Reverse((f.expires, f.id)));
        self.kept_bytes += f.cost();
        if let Some(old) = self.kept.insert(f.id, f) {
            self.kept_bytes -= old.cost();
        }
        let mut pushed_out = Vec::new();
        while self.kept.len() > cap || self.kept_bytes > max_bytes {
            let kept = &self.kept;
            let Some(gone) = Self::pop_earliest(&mut self.kept_expiry, |id, t| {
                kept.get(&id).is_some_and(|f| f.expires == t)
            })
            .and_then(|id| self.kept.remove(&id)) else {
                break;
            };
            self.kept_bytes -= gone.cost();
            pushed_out.push(gone.id);
        }
        Self::compact(&mut self.kept_expiry, self.kept.len());
        pushed_out
    }

    /// Pops the earliest heap entry that still names a live record.
    fn pop_earliest(
        heap: &mut BinaryHeap<Reverse<(Millis, JobId)>>,
        live: impl Fn(JobId, Millis) -> bool,
    ) -> Option<JobId> {
        while let Some(Reverse((t, id))) = heap.pop() {
            if live(id, t) {
                return Some(id);
            }
        }
        None
    }

    /// Stale heap entries (records dropped by hand) are bounded by the
    /// records: rebuilt once they outnumber them.
    fn compact(heap: &mut BinaryHeap<Reverse<(Millis, JobId)>>, live: usize) {
        if heap.len() > 2 * live + 64 {
            let mut entries = std::mem::take(heap).into_vec();
            entries.sort_unstable();
            entries.dedup();
            *heap = entries.into();
        }
    }
}

impl Core {
    /// Builds the record of a job that is ending (before it is removed).
    fn finished_record(
        &mut self,
        id: JobId,
        outcome: Outcome,
        result: Bytes,
    ) -> Option<Box<Finished>> {
        let handle = self.handle_of(id);
        let job = self.jobs.get(id)?;
        let track = self.tracked.remove(&id).map(|t| *t).unwrap_or_default();
        let function = self
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

    /// Ends a job for good: kept queryable if its policy keeps results,
    /// then removed with everything that points at it.
    pub(crate) fn finish(&mut self, id: JobId, outcome: Outcome, result: Bytes) {
        let keep_for = self.policy_of_job(id).map_or(0, |p| p.keep_results);
        if keep_for > 0 {
            if let Some(mut rec) = self.finished_record(id, outcome, result) {
                rec.expires = self.now.saturating_add(keep_for);
                self.keep_record(rec);
            }
        }
        self.remove_job(id);
    }

    /// Keeps a finished record (and writes it to a durable store).
    fn keep_record(&mut self, rec: Box<Finished>) {
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
        for s in kept {
            self.next_job = self.next_job.max(s.id.saturating_add(1));
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
                history: crate::lifecycle::decode_history(&s.history),
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
        self.reserved = self.reserved.max(self.next_job);
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
        if let Some(job) = self.jobs.get_mut(id) {
            // The store keeps it as dead: removing the live job must not end it there.
            job.persist = Persist::No;
        }
        tracing::warn!(handle = %String::from_utf8_lossy(&rec.handle), attempts = rec.attempts, "job is dead: no attempts left");
        self.insert_dead(rec);
        self.remove_job(id);
    }

    pub(crate) fn insert_dead(&mut self, rec: Box<Finished>) {
        let r = &mut self.retained;
        r.dead_expiry.push(Reverse((rec.expires, rec.id)));
        r.dead.insert(rec.id, rec);
        while r.dead.len() > self.policies.retention.max_dead {
            let dead = &r.dead;
            let Some(id) = Retained::pop_earliest(&mut r.dead_expiry, |id, t| {
                dead.get(&id).is_some_and(|f| f.expires == t)
            }) else {
                break;
            };
            if let Some(gone) = r.dead.remove(&id) {
                if gone.stored {
                    self.effects.push(Effect::Store(StoreOp::Done(id)));
                }
            }
        }
        Retained::compact(&mut r.dead_expiry, r.dead.len());
    }

    /// Forgets kept and dead jobs whose time has passed.
    pub(crate) fn prune_retained(&mut self, now: Millis) {
        let r = &mut self.retained;
        while let Some(&Reverse((t, id))) = r.kept_expiry.peek() {
            if t > now {
                break;
            }
            r.kept_expiry.pop();
            if r.kept.get(&id).is_some_and(|f| f.expires == t) {
                if let Some(gone) = r.kept.remove(&id) {
                    r.kept_bytes -= gone.cost();
                    if self.cfg.durable {
                        self.effects.push(Effect::Store(StoreOp::Forget(id)));
                    }
                }
            }
        }
        while let Some(&Reverse((t, id))) = r.dead_expiry.peek() {
            if t > now {
                break;
            }
            r.dead_expiry.pop();
            if r.dead.get(&id).is_some_and(|f| f.expires == t) {
                if let Some(gone) = r.dead.remove(&id) {
                    tracing::info!(handle = %String::from_utf8_lossy(&gone.handle), "dead job expired");
                    if gone.stored {
                        self.effects.push(Effect::Store(StoreOp::Done(id)));
                    }
                }
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
        let func = self.function_id(&rec.function);
        if !self.handles.is(&rec.handle, id) {
            self.foreign_handles.insert(rec.handle.clone(), id);
            self.foreign_ids.insert(id, rec.handle.clone());
        }
        let payload = Payload::new(rec.unique, rec.data);
        let extra = rec.reducer.map(|r| {
            Box::new(JobExtra {
                reducer: Some(r),
                due: None,
            })
        });
        self.insert_job(
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
        let track = Track {
            history: rec.history,
            error: rec.error,
            ..Track::default()
        };
        self.tracked.insert(id, Box::new(track));
        self.record(id, Step::Revived);
        self.enqueue(id, false);
    }
}
