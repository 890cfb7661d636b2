//! What outlives a job, as data: finished jobs kept queryable ([`Finished`])
//! and the dead set, in one [`Retained`] bounded by time and by count (the
//! earliest to expire goes first). The moves into and out of it are
//! `retained.rs`'s.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use bytes::Bytes;
use gearshift_proto::Priority;

use gearshift_persist::KeptRecord;

use crate::effect::priority_byte;
use crate::history::Event;
use crate::ids::JobId;
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
    pub(crate) fn to_stored(&self) -> KeptRecord {
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
            history: crate::history::encode_history(&self.history),
        }
    }

    /// Bytes it holds, for the retention cap.
    pub fn cost(&self) -> usize {
        RECORD_COST + self.result.len() + self.data.len() + self.unique.len()
    }
}

/// A record that left [`Retained`] (expired or pushed out by a cap).
#[derive(Debug)]
pub(crate) struct Gone {
    pub(crate) id: JobId,
    pub(crate) handle: Bytes,
    /// The store holds it.
    pub(crate) stored: bool,
}

impl Gone {
    fn of(f: &Finished) -> Gone {
        Gone {
            id: f.id,
            handle: f.handle.clone(),
            stored: f.stored,
        }
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
    pub(crate) fn keep(&mut self, f: Box<Finished>, cap: usize, max_bytes: usize) -> Vec<JobId> {
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

    /// Adds a dead job; returns the ones the `max` cap pushed out.
    pub(crate) fn add_dead(&mut self, rec: Box<Finished>, max: usize) -> Vec<Gone> {
        self.dead_expiry.push(Reverse((rec.expires, rec.id)));
        self.dead.insert(rec.id, rec);
        let mut pushed_out = Vec::new();
        while self.dead.len() > max {
            let dead = &self.dead;
            let Some(id) = Self::pop_earliest(&mut self.dead_expiry, |id, t| {
                dead.get(&id).is_some_and(|f| f.expires == t)
            }) else {
                break;
            };
            pushed_out.extend(self.dead.remove(&id).map(|f| Gone::of(&f)));
        }
        Self::compact(&mut self.dead_expiry, self.dead.len());
        pushed_out
    }

    /// Forgets the kept and the dead jobs of the functions `gone` names
    /// (another node holds them now); how many.
    pub(crate) fn forget_functions(&mut self, gone: &dyn Fn(&[u8]) -> bool) -> usize {
        let before = self.kept.len() + self.dead.len();
        let mut bytes = 0;
        self.kept.retain(|_, f| {
            let keep = !gone(&f.function);
            bytes += if keep { 0 } else { f.cost() };
            keep
        });
        self.kept_bytes -= bytes;
        self.dead.retain(|_, f| !gone(&f.function));
        let (kept, dead) = (&self.kept, &self.dead);
        self.kept_expiry
            .retain(|Reverse((_, id))| kept.contains_key(id));
        self.dead_expiry
            .retain(|Reverse((_, id))| dead.contains_key(id));
        before - self.kept.len() - self.dead.len()
    }

    /// Forgets the kept and the dead jobs whose time passed by `now`;
    /// returns both (kept, dead), earliest first.
    pub(crate) fn expire(&mut self, now: Millis) -> (Vec<Gone>, Vec<Gone>) {
        let mut kept = Vec::new();
        while let Some(&Reverse((t, id))) = self.kept_expiry.peek() {
            if t > now {
                break;
            }
            self.kept_expiry.pop();
            if self.kept.get(&id).is_some_and(|f| f.expires == t) {
                if let Some(gone) = self.kept.remove(&id) {
                    self.kept_bytes -= gone.cost();
                    kept.push(Gone::of(&gone));
                }
            }
        }
        let mut dead = Vec::new();
        while let Some(&Reverse((t, id))) = self.dead_expiry.peek() {
            if t > now {
                break;
            }
            self.dead_expiry.pop();
            if self.dead.get(&id).is_some_and(|f| f.expires == t) {
                dead.extend(self.dead.remove(&id).map(|f| Gone::of(&f)));
            }
        }
        (kept, dead)
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

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(id: JobId, function: &'static str, expires: Millis) -> Box<Finished> {
        Box::new(Finished {
            id,
            handle: Bytes::from(format!("H:x:{id}")),
            function: Bytes::from_static(function.as_bytes()),
            unique: Bytes::new(),
            priority: Priority::Normal,
            background: true,
            outcome: Outcome::Completed,
            attempts: 1,
            created: 0,
            started: None,
            finished: 0,
            worker: None,
            error: None,
            result: Bytes::from_static(b"result"),
            history: Vec::new(),
            data: Bytes::new(),
            reducer: None,
            stored: true,
            expires,
        })
    }

    #[test]
    fn forgetting_functions_takes_their_records_bytes_and_expiries() {
        let mut r = Retained::default();
        r.keep(rec(1, "f", 10), usize::MAX, usize::MAX);
        r.keep(rec(2, "g", 20), usize::MAX, usize::MAX);
        r.add_dead(rec(3, "f", 5), usize::MAX);
        let g_bytes = rec(2, "g", 20).cost();
        assert_eq!(r.forget_functions(&|f: &[u8]| f == b"f"), 2);
        assert_eq!(r.kept_bytes, g_bytes);
        assert!(r.dead.is_empty() && r.kept.keys().eq([&2]));
        // f's expiries went with them: the next one is g's.
        assert_eq!(r.next_expiry(), Some(20));
    }
}
