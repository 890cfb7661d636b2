//! The core's timers: one heap of `(deadline, Timer)`, lazy like everything
//! that points at a job (a fired timer whose job moved on does nothing).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::ids::JobId;
use crate::Millis;

/// A timer the core armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Timer {
    /// An epoch job becomes due.
    Due(JobId),
    /// A CAN_DO_TIMEOUT runs out for the given assignment of a job.
    Timeout(JobId, u64),
    /// A schedule fires (if this is still its next time).
    Fire(JobId, Millis),
}

/// Every armed timer, soonest first.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Millis, Timer)>>,
}

impl Timers {
    /// Arms `timer` for `at`.
    #[inline]
    pub(crate) fn arm(&mut self, at: Millis, timer: Timer) {
        self.heap.push(Reverse((at, timer)));
    }

    /// When the soonest timer is due.
    pub(crate) fn next(&self) -> Option<Millis> {
        self.heap.peek().map(|Reverse((t, _))| *t)
    }

    /// Takes the soonest timer if it is due at `now`.
    pub(crate) fn pop_due(&mut self, now: Millis) -> Option<Timer> {
        match self.heap.peek() {
            Some(Reverse((t, _))) if *t <= now => self.heap.pop().map(|Reverse((_, timer))| timer),
            _ => None,
        }
    }

    /// Keeps only the timers `keep` picks (the others' jobs or schedules
    /// left this core for good).
    pub(crate) fn retain(&mut self, keep: impl Fn(Timer) -> bool) {
        self.heap.retain(|Reverse((_, timer))| keep(*timer));
    }

    /// Every armed timer with its time, in no particular order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Millis, Timer)> + '_ {
        self.heap.iter().map(|Reverse(entry)| *entry)
    }
}
