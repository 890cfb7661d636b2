//! The size bookkeeping behind the compaction rule: the encoded size of
//! every op a compaction would keep (each live or dead job's Add, each dead
//! job's Dead, each schedule's and kept record's latest op), kept by id and
//! in total as flushed ops come and go, as replay would apply them.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use super::LogStore;

/// Job ids are dense counters the server hands out (never chosen by a
/// peer), so the id itself picks the bucket: jobs stored one after another
/// land in neighbouring buckets, and the live map's inserts and removals
/// walk memory in order instead of missing the cache on every job (with a
/// multiplied hash they did: the map's insert was the store's costliest
/// line in a profile of pipelined submissions). Only the top seven bits,
/// which the table compares as a tag, are mixed.
#[derive(Default, Clone, Copy)]
pub(super) struct IdHash(u64);

impl Hasher for IdHash {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn write_u64(&mut self, n: u64) {
        const TAG: u64 = 0x7f << 57;
        self.0 = (n & !TAG) | (n.wrapping_mul(0x9E37_79B9_7F4A_7C15) & TAG);
    }
}

/// Encoded size of ops a compaction keeps, by job id.
pub(super) type LiveSizes = HashMap<u64, u64, BuildHasherDefault<IdHash>>;

/// A buffered op's effect on the size bookkeeping, applied once flushed.
#[derive(Debug, Clone, Copy)]
pub(super) enum Sizing {
    /// A job's Add of this size.
    Add(u64, u64),
    /// A job ended.
    Done(u64),
    /// A job died with a Dead op of this size.
    Dead(u64, u64),
    /// A job was retried (a dead one revived: its Dead op is no longer kept).
    Retry(u64),
    /// A schedule's new version, a Schedule op of this size (the one it
    /// replaces is no longer kept).
    Schedule(u64, u64),
    /// A schedule was dropped.
    Unschedule(u64),
    /// A kept record's new version, a Kept op of this size (the one it
    /// replaces is no longer kept).
    Kept(u64, u64),
    /// A kept record was dropped.
    Forget(u64),
}

impl LogStore {
    /// Applies a flushed op to the sizes of what a compaction keeps, as
    /// replay would: a Dead or Retry for a job not stored changes nothing.
    pub(super) fn account(&mut self, op: Sizing) {
        match op {
            Sizing::Add(id, size) => {
                self.high = self.high.max(id + 1);
                self.forget_dead(id);
                // The same id twice (never written): the later one counts.
                if let Some(old) = self.live.insert(id, size) {
                    self.live_bytes -= old;
                }
                self.live_bytes += size;
            }
            Sizing::Done(id) => {
                self.forget_dead(id);
                if let Some(s) = self.live.remove(&id) {
                    self.live_bytes -= s;
                }
            }
            Sizing::Dead(id, size) => {
                if self.live.contains_key(&id) {
                    self.forget_dead(id);
                    self.dead.insert(id, size);
                    self.live_bytes += size;
                }
            }
            Sizing::Retry(id) => self.forget_dead(id),
            Sizing::Schedule(id, size) => {
                self.high = self.high.max(id + 1);
                if let Some(old) = self.schedules.insert(id, size) {
                    self.live_bytes -= old;
                }
                self.live_bytes += size;
            }
            Sizing::Unschedule(id) => {
                if let Some(s) = self.schedules.remove(&id) {
                    self.live_bytes -= s;
                }
            }
            Sizing::Kept(id, size) => {
                self.high = self.high.max(id + 1);
                if let Some(old) = self.kept.insert(id, size) {
                    self.live_bytes -= old;
                }
                self.live_bytes += size;
            }
            Sizing::Forget(id) => {
                if let Some(s) = self.kept.remove(&id) {
                    self.live_bytes -= s;
                }
            }
        }
    }

    /// A dead job's Dead op is no longer kept (it was revived, ended or
    /// died again).
    fn forget_dead(&mut self, id: u64) {
        if let Some(s) = self.dead.remove(&id) {
            self.live_bytes -= s;
        }
    }
}
