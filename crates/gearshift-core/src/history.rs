//! A job's history under a policy: the steps of its life ([`Step`]), their
//! compact encoding for the store, its attempts and last failure ([`Track`]),
//! and the table of live jobs' records ([`History`]), which changes only
//! through its methods.

use bytes::Bytes;

use crate::ids::{IdMap, JobId};
use crate::policy::Reason;
use crate::Millis;

/// Most history entries a job keeps; past it the oldest after the first go.
pub const MAX_HISTORY: usize = 64;
/// Most bytes of a failure's text kept in a job's error and history.
pub const MAX_ERROR: usize = 1024;

/// One transition in a job's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Submitted and waiting in its queue (or for its due time).
    Queued,
    /// Handed to a worker (its client id and address).
    Started(Bytes),
    /// A run ended without a result.
    Failed(Reason, Bytes),
    /// Waits for a retry at this time.
    RetryAt(Millis),
    /// Back in its queue: the retry delay passed, or gearmand's requeue.
    Requeued(&'static str),
    /// Finished with a result of this many bytes.
    Completed(usize),
    /// Cancelled by an admin.
    Cancelled,
    /// Used all its attempts: kept in the dead set.
    Dead,
    /// Taken out of the dead set by an admin and queued again.
    Revived,
}

impl Step {
    /// The event word of a `history:` line.
    pub fn word(&self) -> &'static str {
        match self {
            Step::Queued => "queued",
            Step::Started(_) => "started",
            Step::Failed(..) => "failed",
            Step::RetryAt(_) => "retry",
            Step::Requeued(_) => "requeued",
            Step::Completed(_) => "completed",
            Step::Cancelled => "cancelled",
            Step::Dead => "dead",
            Step::Revived => "revived",
        }
    }
}

/// The fixed reasons a job is requeued, for decoding stored history.
const REQUEUE_WHYS: [&str; 4] = [
    "worker disconnected",
    "worker gave up the function",
    "worker timeout reached on job",
    "retry delay passed",
];

/// Encodes a history for the store: per event its time, a tag and its detail.
pub fn encode_history(history: &[Event]) -> Bytes {
    let mut out = Vec::with_capacity(history.len() * 16);
    let bytes = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    };
    for e in history {
        out.extend_from_slice(&e.at.to_le_bytes());
        match &e.step {
            Step::Queued => out.push(0),
            Step::Started(w) => {
                out.push(1);
                bytes(&mut out, w);
            }
            Step::Failed(r, d) => {
                out.push(2);
                out.push(*r as u8);
                bytes(&mut out, d);
            }
            Step::RetryAt(t) => {
                out.push(3);
                out.extend_from_slice(&t.to_le_bytes());
            }
            Step::Requeued(why) => {
                out.push(4);
                bytes(&mut out, why.as_bytes());
            }
            Step::Completed(n) => {
                out.push(5);
                out.extend_from_slice(&(*n as u64).to_le_bytes());
            }
            Step::Cancelled => out.push(6),
            Step::Dead => out.push(7),
            Step::Revived => out.push(8),
        }
    }
    Bytes::from(out)
}

/// Decodes [`encode_history`]'s bytes; a damaged tail is dropped.
pub fn decode_history(mut b: &[u8]) -> Vec<Event> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, tail) = (b.get(..n)?, b.get(n..)?);
        *b = tail;
        Some(head)
    }
    fn u64_of(b: &mut &[u8]) -> Option<u64> {
        take(b, 8)
            .and_then(|s| s.try_into().ok())
            .map(u64::from_le_bytes)
    }
    fn bytes_of(b: &mut &[u8]) -> Option<Bytes> {
        let n = take(b, 4)
            .and_then(|s| s.try_into().ok())
            .map(u32::from_le_bytes)?;
        take(b, n as usize).map(Bytes::copy_from_slice)
    }
    let reasons = [
        Reason::Fail,
        Reason::Exception,
        Reason::Timeout,
        Reason::WorkerLost,
    ];
    let mut out = Vec::new();
    while !b.is_empty() {
        let Some(at) = u64_of(&mut b) else { break };
        let Some(&[tag]) = take(&mut b, 1) else { break };
        let step = match tag {
            0 => Some(Step::Queued),
            1 => bytes_of(&mut b).map(Step::Started),
            2 => take(&mut b, 1)
                .and_then(|r| reasons.get(r[0] as usize).copied())
                .and_then(|r| bytes_of(&mut b).map(|d| Step::Failed(r, d))),
            3 => u64_of(&mut b).map(Step::RetryAt),
            4 => bytes_of(&mut b).map(|why| {
                let known = REQUEUE_WHYS.iter().find(|w| w.as_bytes() == &why[..]);
                Step::Requeued(known.copied().unwrap_or("requeued"))
            }),
            5 => u64_of(&mut b).map(|n| Step::Completed(n as usize)),
            6 => Some(Step::Cancelled),
            7 => Some(Step::Dead),
            8 => Some(Step::Revived),
            _ => None,
        };
        let Some(step) = step else { break };
        out.push(Event { at, step });
    }
    out
}

/// A transition and when it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Unix milliseconds.
    pub at: Millis,
    /// What happened.
    pub step: Step,
}

/// A job's last failed run, as `show job`, the HTTP API and the `dead`
/// event report it apart from how the job ended (a job may complete on a
/// later attempt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastFailure {
    /// Which run failed (1 = the first), when the history still says.
    pub attempt: Option<u32>,
    /// When it failed, when the history still says.
    pub at: Option<Millis>,
    /// Why it failed, when the history still says.
    pub reason: Option<Reason>,
    /// The worker's text, else the reason word.
    pub error: Bytes,
}

impl LastFailure {
    /// The last failure of a job with this history, runs started and kept
    /// error text; `None` when no run failed. The attempt is counted back
    /// from the runs started after the failure, which the history never
    /// drops (it drops its oldest entries first).
    pub fn of(history: &[Event], attempts: u32, error: Option<&Bytes>) -> Option<LastFailure> {
        let last = history
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, e)| match &e.step {
                Step::Failed(reason, detail) => Some((i, e.at, *reason, detail)),
                _ => None,
            });
        let Some((i, at, reason, detail)) = last else {
            return error.map(|e| LastFailure {
                attempt: None,
                at: None,
                reason: None,
                error: e.clone(),
            });
        };
        let later_runs = history[i + 1..]
            .iter()
            .filter(|e| matches!(e.step, Step::Started(_)))
            .count() as u32;
        let error = match (error, detail.is_empty()) {
            (Some(e), _) => e.clone(),
            (None, false) => detail.clone(),
            (None, true) => Bytes::from_static(reason.word().as_bytes()),
        };
        Some(LastFailure {
            attempt: attempts.checked_sub(later_runs).filter(|&n| n > 0),
            at: Some(at),
            reason: Some(reason),
            error,
        })
    }

    /// `REASON: TEXT`, or the bare reason word when the text is only that
    /// (as a `failed` history line's detail); the text alone if the reason
    /// is not known.
    pub fn describe(&self) -> String {
        let text = String::from_utf8_lossy(&self.error);
        match self.reason {
            Some(r) if text == r.word() => text.into_owned(),
            Some(r) => format!("{}: {text}", r.word()),
            None => text.into_owned(),
        }
    }
}

/// What the core records about a job under a policy while it lives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Track {
    /// Runs started.
    pub attempts: u32,
    /// When the current or last run started.
    pub started: Option<Millis>,
    /// The worker of the current or last run.
    pub worker: Option<Bytes>,
    /// The last failure's text.
    pub error: Option<Bytes>,
    /// When it may run again, while it waits for a retry.
    pub retry_at: Option<Millis>,
    /// Every transition, oldest first.
    pub history: Vec<Event>,
}

impl Track {
    /// Appends a transition, dropping the oldest but the first past [`MAX_HISTORY`].
    pub fn push(&mut self, at: Millis, step: Step) {
        if self.history.len() >= MAX_HISTORY {
            self.history.remove(1);
        }
        self.history.push(Event { at, step });
    }
}

/// The records of live jobs under a policy, by job. Callers decide whether
/// a job is tracked (it has a policy); a record is made on first use, so a
/// job queued before its function gained a policy has none until then.
#[derive(Debug, Default)]
pub struct History {
    map: IdMap<JobId, Box<Track>>,
}

impl History {
    /// The record of job `id`, if it has one.
    #[inline]
    pub fn get(&self, id: JobId) -> Option<&Track> {
        if self.map.is_empty() {
            return None;
        }
        self.map.get(&id).map(|t| &**t)
    }

    /// Whether job `id` has a record (one test while none exist).
    #[inline]
    pub fn contains(&self, id: JobId) -> bool {
        !self.map.is_empty() && self.map.contains_key(&id)
    }

    /// How many jobs have a record.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether no job has a record.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Every job with a record, in no particular order.
    pub fn ids(&self) -> impl Iterator<Item = JobId> + '_ {
        self.map.keys().copied()
    }

    fn entry(&mut self, id: JobId) -> &mut Track {
        self.map.entry(id).or_default()
    }

    /// Appends a transition to job `id`'s history.
    pub fn push(&mut self, id: JobId, at: Millis, step: Step) {
        self.entry(id).push(at, step);
    }

    /// A run of job `id`, its `attempt`th, started at `at` on `worker`.
    pub fn started(&mut self, id: JobId, attempt: u32, at: Millis, worker: Option<Bytes>) {
        let t = self.entry(id);
        t.attempts = attempt;
        t.started = Some(at);
        t.retry_at = None;
        t.worker = worker;
    }

    /// A run of job `id` failed with `error` (its last failure's text).
    pub fn failed(&mut self, id: JobId, error: Bytes) {
        self.entry(id).error = Some(error);
    }

    /// Job `id` waits for a retry at `at`.
    pub fn retry_at(&mut self, id: JobId, at: Millis) {
        self.entry(id).retry_at = Some(at);
    }

    /// Job `id`'s retry time came: whether it was waiting for one (a
    /// job without a record is left without one).
    pub fn retry_due(&mut self, id: JobId) -> bool {
        if self.map.is_empty() {
            return false;
        }
        self.map
            .get_mut(&id)
            .and_then(|t| t.retry_at.take())
            .is_some()
    }

    /// Whether job `id` waits for a retry.
    pub fn retrying(&self, id: JobId) -> bool {
        self.get(id).is_some_and(|t| t.retry_at.is_some())
    }

    /// A restored job `id` that had run `attempts` times waits for its retry at `at`.
    pub fn restored(&mut self, id: JobId, attempts: u32, at: Millis) {
        let t = self.entry(id);
        t.retry_at = Some(at);
        t.attempts = attempts;
    }

    /// Job `id` has started at least `attempts` runs.
    pub fn at_least(&mut self, id: JobId, attempts: u32) {
        let t = self.entry(id);
        t.attempts = t.attempts.max(attempts);
    }

    /// A dead job `id` comes back with the history and error it died with.
    pub fn revive(&mut self, id: JobId, history: Vec<Event>, error: Option<Bytes>) {
        let track = Track {
            history,
            error,
            ..Track::default()
        };
        self.map.insert(id, Box::new(track));
    }

    /// Takes job `id`'s record as it ends (empty if it had none).
    pub fn take(&mut self, id: JobId) -> Track {
        if self.map.is_empty() {
            return Track::default();
        }
        self.map.remove(&id).map(|t| *t).unwrap_or_default()
    }

    /// Forgets job `id`'s record (one test while none exist).
    #[inline]
    pub fn forget(&mut self, id: JobId) {
        if !self.map.is_empty() {
            self.map.remove(&id);
        }
    }

    /// Keeps only the records of jobs `keep` accepts.
    pub fn retain(&mut self, mut keep: impl FnMut(JobId) -> bool) {
        self.map.retain(|&id, _| keep(id));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_round_trips_and_a_damaged_tail_is_dropped() {
        let history = vec![
            Event {
                at: 1,
                step: Step::Queued,
            },
            Event {
                at: 2,
                step: Step::Started(Bytes::from_static(b"w@127.0.0.1")),
            },
            Event {
                at: 3,
                step: Step::Failed(Reason::Exception, Bytes::from_static(b"boom")),
            },
            Event {
                at: 4,
                step: Step::RetryAt(1_004),
            },
            Event {
                at: 1_004,
                step: Step::Requeued("retry delay passed"),
            },
            Event {
                at: 1_005,
                step: Step::Completed(42),
            },
            Event {
                at: 6,
                step: Step::Cancelled,
            },
            Event {
                at: 7,
                step: Step::Dead,
            },
            Event {
                at: 8,
                step: Step::Revived,
            },
        ];
        let bytes = encode_history(&history);
        assert_eq!(decode_history(&bytes), history);
        assert_eq!(decode_history(&bytes[..bytes.len() - 1]), history[..8]);
        assert_eq!(decode_history(&[0xff; 3]), []);
    }

    #[test]
    fn history_records_are_made_on_first_use_and_changed_by_moves() {
        let mut h = History::default();
        assert!(h.is_empty() && h.get(1).is_none() && !h.contains(1));
        assert!(!h.retry_due(1), "no record: nothing to take");
        assert!(h.is_empty(), "retry_due makes no record");
        h.push(1, 10, Step::Queued);
        h.started(1, 1, 20, Some(Bytes::from_static(b"w@ip")));
        h.failed(1, Bytes::from_static(b"boom"));
        h.retry_at(1, 50);
        assert!(h.retrying(1));
        let t = h.get(1).expect("made");
        assert_eq!((t.attempts, t.started, t.retry_at), (1, Some(20), Some(50)));
        assert_eq!(t.worker.as_deref(), Some(&b"w@ip"[..]));
        assert_eq!(t.error.as_deref(), Some(&b"boom"[..]));
        assert!(h.retry_due(1));
        assert!(!h.retrying(1) && !h.retry_due(1));
        h.started(1, 2, 60, None);
        assert_eq!(h.get(1).map(|t| (t.attempts, t.retry_at)), Some((2, None)));
        h.at_least(1, 1);
        assert_eq!(h.get(1).map(|t| t.attempts), Some(2));
        h.at_least(1, 4);
        assert_eq!(h.get(1).map(|t| t.attempts), Some(4));
        let t = h.take(1);
        assert_eq!(t.history.len(), 1);
        assert!(h.is_empty());
        assert_eq!(h.take(1), Track::default());
    }

    #[test]
    fn restore_revive_forget_and_retain() {
        let mut h = History::default();
        h.restored(3, 2, 99);
        assert_eq!(
            h.get(3).map(|t| (t.attempts, t.retry_at)),
            Some((2, Some(99)))
        );
        let past = vec![Event {
            at: 1,
            step: Step::Dead,
        }];
        h.revive(4, past.clone(), Some(Bytes::from_static(b"e")));
        let t = h.get(4).expect("revived");
        assert_eq!((t.attempts, &t.history), (0, &past));
        h.revive(5, Vec::new(), None);
        h.retain(|id| id != 4);
        let mut ids: Vec<JobId> = h.ids().collect();
        ids.sort_unstable();
        assert_eq!(ids, [3, 5]);
        h.forget(3);
        h.forget(3);
        assert_eq!(h.len(), 1);
        assert!(h.contains(5) && !h.contains(3));
    }

    #[test]
    fn a_long_history_keeps_its_first_step_and_the_newest() {
        let mut h = History::default();
        for at in 0..(MAX_HISTORY as u64 + 5) {
            h.push(1, at, Step::Queued);
        }
        let t = h.get(1).expect("made");
        assert_eq!(t.history.len(), MAX_HISTORY);
        assert_eq!(t.history[0].at, 0);
        assert_eq!(t.history[1].at, 6);
    }
}
