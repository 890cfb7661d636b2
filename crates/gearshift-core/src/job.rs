//! The runtime state of one job: its workload, who waits on it, where it
//! is in its life. (The persisted record is a separate type.)
//!
//! A job is kept small because a queue may hold millions of them: fields
//! only some jobs need (reducer, due time) live in a boxed [`JobExtra`];
//! state only a running job has (its worker, its assignment, its last
//! WORK_STATUS) lives in the core's table of running jobs; submitters owed
//! a JOB_CREATED live in the core's table of pending acknowledgements; and
//! the handle is not stored but printed from the prefix and the id when a
//! packet needs it.

use bytes::Bytes;
use gearshift_proto::Priority;

use crate::ids::{ConnId, FuncId, JobId};
use crate::Millis;

/// How a job takes part in unique-id coalescing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UniqueKey {
    /// Empty unique: never coalesced.
    None,
    /// `-`: coalesced on the workload.
    Data,
    /// Any other unique: coalesced on it, within the function.
    Named,
}

impl UniqueKey {
    /// The coalescing class of a unique as submitted.
    pub fn of(unique: &[u8]) -> UniqueKey {
        match unique {
            b"" => UniqueKey::None,
            b"-" => UniqueKey::Data,
            _ => UniqueKey::Named,
        }
    }
}

/// Where a job is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// A new background job waiting for the store to confirm it is durable;
    /// not grab-able, and its submitters have no JOB_CREATED yet.
    Pending,
    /// An epoch job waiting for its due time (not grab-able yet).
    Scheduled,
    /// In its function's queue, grab-able.
    Queued,
    /// Held by a worker.
    Running,
    /// Cancelled by an admin while a worker held it; reaped when the worker reports.
    Cancelled,
}

/// Whether the store holds the job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persist {
    /// Not stored (foreground, or no durable store).
    No,
    /// Written to the store, not yet confirmed.
    Pending,
    /// Confirmed durable.
    Yes,
}

/// Connections attached to a job, one entry per submission, in order.
/// One connection (the common case) is held inline; more are boxed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ConnList {
    /// Nobody.
    #[default]
    Empty,
    /// Exactly one entry.
    One(ConnId),
    /// Any number of entries.
    Many(Box<Vec<ConnId>>),
}

impl ConnList {
    /// Appends an entry.
    pub fn push(&mut self, conn: ConnId) {
        match self {
            ConnList::Empty => *self = ConnList::One(conn),
            ConnList::One(first) => *self = ConnList::Many(Box::new(vec![*first, conn])),
            ConnList::Many(list) => list.push(conn),
        }
    }

    /// The entries, in order.
    pub fn as_slice(&self) -> &[ConnId] {
        match self {
            ConnList::Empty => &[],
            ConnList::One(conn) => std::slice::from_ref(conn),
            ConnList::Many(list) => list,
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Keeps the entries `keep` accepts, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(ConnId) -> bool) {
        match self {
            ConnList::Empty => {}
            ConnList::One(conn) => {
                if !keep(*conn) {
                    *self = ConnList::Empty;
                }
            }
            ConnList::Many(list) => {
                list.retain(|&c| keep(c));
                match list.as_slice() {
                    [] => *self = ConnList::Empty,
                    &[only] => *self = ConnList::One(only),
                    _ => {}
                }
            }
        }
    }
}

impl<'a> IntoIterator for &'a ConnList {
    type Item = &'a ConnId;
    type IntoIter = std::slice::Iter<'a, ConnId>;

    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

/// What only some jobs have; boxed so the common job does not carry it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobExtra {
    /// Reducer for SUBMIT_REDUCE_JOB*.
    pub reducer: Option<Bytes>,
    /// Due time of an epoch job.
    pub due: Option<Millis>,
}

/// One job.
#[derive(Debug, Clone)]
pub struct Job {
    /// Number at the end of the handle; the handle is `<prefix>:<id>`
    /// (or, for a job restored from another prefix, the stored handle).
    pub id: JobId,
    /// The unique id followed by the workload (see [`Payload`]).
    pub(crate) payload: Bytes,
    /// Length of the unique id at the start of `payload`.
    pub(crate) unique_len: u32,
    /// When it was submitted.
    pub created: Millis,
    /// Foreground clients attached, one entry per submission.
    pub clients: ConnList,
    /// Reducer and due time, for the jobs that have them.
    pub extra: Option<Box<JobExtra>>,
    /// Function it runs under (index in the core's function table).
    pub func: u32,
    /// Times it went back to the queue after its worker vanished or timed out.
    pub retries: u32,
    /// Queue priority.
    pub priority: Priority,
    /// Some submitter was a background one: the job survives its clients.
    pub background: bool,
    /// Life stage.
    pub state: JobState,
    /// Whether the store holds it.
    pub persist: Persist,
}

/// A job's unique id and workload, kept as one buffer: one `Bytes` handle
/// instead of two is 32 bytes less per queued job (a third of the job's
/// slot). An empty unique (the common case for background jobs sent by
/// pipelining clients) takes the workload's slice of the packet as it is;
/// a named one is copied together with the workload into one allocation of
/// their exact size, which also lets go of the packet's header and function
/// name and of the read buffer the packet arrived in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Payload {
    pub(crate) bytes: Bytes,
    pub(crate) unique_len: u32,
}

impl Payload {
    /// Joins a unique id (at most [`crate::config::MAX_UNIQUE`] bytes in
    /// practice; anything past 4 GiB is cut) and a workload.
    pub fn new(unique: Bytes, data: Bytes) -> Payload {
        if unique.is_empty() {
            return Payload::plain(data);
        }
        Payload::joined(&unique, &data)
    }

    /// A workload with an empty unique id, kept as it is.
    pub fn plain(data: Bytes) -> Payload {
        Payload {
            bytes: data,
            unique_len: 0,
        }
    }

    /// A unique id and workload copied into one buffer of their size.
    pub fn joined(unique: &[u8], data: &[u8]) -> Payload {
        let unique = &unique[..unique.len().min(u32::MAX as usize)];
        let mut joined = Vec::with_capacity(unique.len() + data.len());
        joined.extend_from_slice(unique);
        joined.extend_from_slice(data);
        Payload {
            bytes: Bytes::from(joined),
            unique_len: unique.len() as u32,
        }
    }
}

impl Job {
    /// Workload.
    pub fn data(&self) -> &[u8] {
        &self.payload[self.unique_len as usize..]
    }

    /// Unique id as submitted.
    pub fn unique(&self) -> &[u8] {
        &self.payload[..self.unique_len as usize]
    }

    /// The workload as a shared buffer (no copy).
    pub fn data_bytes(&self) -> Bytes {
        self.payload.slice(self.unique_len as usize..)
    }

    /// The unique id as a shared buffer (no copy).
    pub fn unique_bytes(&self) -> Bytes {
        self.payload.slice(..self.unique_len as usize)
    }

    /// Function it runs under.
    pub fn func(&self) -> FuncId {
        self.func as FuncId
    }

    /// Coalescing class of the unique.
    pub fn unique_key(&self) -> UniqueKey {
        UniqueKey::of(self.unique())
    }

    /// What the job counts toward `--max-queue-memory`: its unique id,
    /// data and reducer.
    pub fn held_bytes(&self) -> u64 {
        (self.payload.len() + self.reducer().map_or(0, Bytes::len)) as u64
    }

    /// Reducer for SUBMIT_REDUCE_JOB*.
    pub fn reducer(&self) -> Option<&Bytes> {
        self.extra.as_ref().and_then(|e| e.reducer.as_ref())
    }

    /// Due time of an epoch job.
    pub fn due(&self) -> Option<Millis> {
        self.extra.as_ref().and_then(|e| e.due)
    }
}

/// State of a job a worker holds (running or cancelled while running).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// The worker holding it.
    pub worker: ConnId,
    /// Which assignment this is; a CAN_DO_TIMEOUT timer names it, so a
    /// timer from an earlier assignment is recognised as stale.
    pub assignment: u64,
    /// Last WORK_STATUS numerator.
    pub numerator: u32,
    /// Last WORK_STATUS denominator.
    pub denominator: u32,
    /// When the worker grabbed it (the run-time histogram).
    pub started: Millis,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_keeps_unique_and_workload_apart() {
        let packet = Bytes::from_static(b"resize\0\0workload");
        let data = packet.slice(8..);
        // Empty unique: the workload's own slice, not a copy.
        let p = Payload::new(Bytes::new(), data.clone());
        assert_eq!(p.unique_len, 0);
        assert_eq!(p.bytes.as_ptr(), data.as_ptr());
        // Named unique: one buffer, unique first.
        let p = Payload::new(Bytes::from_static(b"u-1"), data);
        assert_eq!(&p.bytes[..], b"u-1workload");
        assert_eq!(p.unique_len, 3);
        let job = Job {
            id: 1,
            payload: p.bytes,
            unique_len: p.unique_len,
            created: 0,
            clients: ConnList::Empty,
            extra: None,
            func: 0,
            retries: 0,
            priority: Priority::Normal,
            background: true,
            state: JobState::Queued,
            persist: Persist::No,
        };
        assert_eq!(job.unique(), b"u-1");
        assert_eq!(job.data(), b"workload");
        assert_eq!(job.unique_bytes(), Bytes::from_static(b"u-1"));
        assert_eq!(job.data_bytes(), Bytes::from_static(b"workload"));
        assert_eq!(job.unique_key(), UniqueKey::Named);
    }

    #[test]
    fn a_job_stays_small() {
        // 88 bytes on 64-bit targets; the slab slot is the same size.
        assert!(std::mem::size_of::<Job>() <= 88);
        assert_eq!(std::mem::size_of::<ConnList>(), 16);
    }

    #[test]
    fn conn_list_keeps_order_and_duplicates() {
        let mut l = ConnList::default();
        assert!(l.is_empty());
        l.push(ConnId(1));
        assert_eq!(l, ConnList::One(ConnId(1)));
        l.push(ConnId(2));
        l.push(ConnId(1));
        assert_eq!(l.as_slice(), &[ConnId(1), ConnId(2), ConnId(1)]);
        l.retain(|c| c != ConnId(1));
        assert_eq!(l, ConnList::One(ConnId(2)));
        l.retain(|_| false);
        assert_eq!(l, ConnList::Empty);
    }
}
