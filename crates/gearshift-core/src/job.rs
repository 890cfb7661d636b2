//! The runtime state of one job: who waits on it, who runs it, where it is
//! in its life. (A later persisted record is a separate type.)

use bytes::Bytes;
use gearshift_proto::Priority;

use crate::ids::{ConnId, FuncId, JobId};
use crate::Millis;

/// How a job takes part in unique-id coalescing.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum UniqueKey {
    /// Empty unique: never coalesced.
    None,
    /// `-`: coalesced on the workload.
    Data,
    /// Any other unique: coalesced on it, within the function.
    Named,
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

/// One job.
#[derive(Debug, Clone)]
pub struct Job {
    /// Number at the end of the handle.
    pub id: JobId,
    /// Full handle, `<prefix>:<id>`.
    pub handle: Bytes,
    /// Function it runs under.
    pub func: FuncId,
    /// Unique id as submitted.
    pub unique: Bytes,
    /// Coalescing class of the unique.
    pub unique_key: UniqueKey,
    /// Workload.
    pub data: Bytes,
    /// Reducer for SUBMIT_REDUCE_JOB*.
    pub reducer: Option<Bytes>,
    /// Queue priority.
    pub priority: Priority,
    /// Some submitter was a background one: the job survives its clients.
    pub background: bool,
    /// Foreground clients attached, one entry per submission.
    pub clients: Vec<ConnId>,
    /// The worker holding it, while running.
    pub worker: Option<ConnId>,
    /// Life stage.
    pub state: JobState,
    /// Times it went back to the queue after its worker vanished or timed out.
    pub retries: u32,
    /// Last WORK_STATUS numerator.
    pub numerator: u32,
    /// Last WORK_STATUS denominator.
    pub denominator: u32,
    /// Due time of an epoch job.
    pub due: Option<Millis>,
    /// Bumped on every assignment, so a stale timeout is recognised.
    pub assignment: u64,
    /// When it was submitted.
    pub created: Millis,
    /// Whether the store holds it.
    pub persist: Persist,
    /// Submitters owed a JOB_CREATED once the store confirms the job.
    pub acks: Vec<ConnId>,
}
