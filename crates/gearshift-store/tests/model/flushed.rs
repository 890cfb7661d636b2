//! The reference model: what has been flushed (acknowledged).

use std::collections::BTreeMap;

use gearshift_store::{DeadMark, JobRecord, KeptRecord, Op, ScheduleRecord};

/// What has been acknowledged.
#[derive(Debug, Clone, Default)]
pub(crate) struct Flushed {
    pub(crate) live: BTreeMap<u64, JobRecord>,
    pub(crate) dead: BTreeMap<u64, (JobRecord, DeadMark)>,
    pub(crate) schedules: BTreeMap<u64, ScheduleRecord>,
    pub(crate) kept: BTreeMap<u64, KeptRecord>,
    /// Every acknowledged job, schedule or kept id + 1 and every
    /// acknowledged reservation.
    pub(crate) high: u64,
}

impl Flushed {
    pub(crate) fn apply(&mut self, ops: &[Op]) {
        for op in ops {
            match op {
                Op::Add(r) => {
                    self.high = self.high.max(r.id + 1);
                    self.live.insert(r.id, r.clone());
                }
                Op::Done(id) => {
                    self.live.remove(id);
                    self.dead.remove(id);
                }
                // A dead job keeps the count it died with.
                Op::Update { id, attempts } => {
                    if let Some(r) = self.live.get_mut(id) {
                        r.attempts = *attempts;
                    }
                }
                Op::Retry {
                    id,
                    attempts,
                    due_ms,
                } => {
                    if let Some((r, _)) = self.dead.remove(id) {
                        self.live.insert(*id, r);
                    }
                    if let Some(r) = self.live.get_mut(id) {
                        r.attempts = *attempts;
                        r.due_ms = *due_ms;
                    }
                }
                Op::Dead { id, attempts, mark } => {
                    let r = self
                        .live
                        .remove(id)
                        .or_else(|| self.dead.remove(id).map(|d| d.0));
                    if let Some(mut r) = r {
                        r.attempts = *attempts;
                        self.dead.insert(*id, (r, mark.clone()));
                    }
                }
                Op::Schedule(r) => {
                    self.high = self.high.max(r.id + 1);
                    self.schedules.insert(r.id, r.clone());
                }
                // Done leaves schedules alone; only this drops one.
                Op::Unschedule(id) => {
                    self.schedules.remove(id);
                }
                Op::Kept(k) => {
                    self.high = self.high.max(k.id + 1);
                    self.kept.insert(k.id, (**k).clone());
                }
                // Done leaves kept records alone too.
                Op::Forget(id) => {
                    self.kept.remove(id);
                }
                Op::Reserve(upto) => self.high = self.high.max(*upto),
                // Not generated: the conformance suite checks settings.
                Op::Started(_) | Op::Function(_) => {}
            }
        }
    }

    /// Ids of every stored job, live or dead, in order.
    pub(crate) fn stored(&self) -> Vec<u64> {
        let mut ids: Vec<u64> = self.live.keys().chain(self.dead.keys()).copied().collect();
        ids.sort_unstable();
        ids
    }
}
