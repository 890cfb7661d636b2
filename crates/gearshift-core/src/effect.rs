//! What the core asks its driver to do: send, close, shut down.

use bytes::Bytes;
use gearshift_proto::{
    parse_admin, AdminCommand, Frame, Priority, Request, RequestError, Response,
};

use crate::ids::{ConnId, JobId};
use crate::Millis;

/// One input from a connection.
#[derive(Debug, Clone)]
pub enum Input {
    /// A parsed binary request.
    Request(Request),
    /// A well-framed packet the protocol layer refused; answered with ERROR.
    Invalid(RequestError),
    /// An admin text line.
    Admin(AdminCommand),
}

impl From<Frame> for Input {
    /// A decoded frame as the core takes it: a packet parsed into a request
    /// (or refused), a text line parsed as an admin command.
    fn from(frame: Frame) -> Self {
        match frame {
            Frame::Packet(p) => match Request::from_packet(p) {
                Ok(r) => Input::Request(r),
                Err(e) => Input::Invalid(e),
            },
            Frame::Text(line) => Input::Admin(parse_admin(&line)),
        }
    }
}

/// One thing the driver must do, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Send a binary packet to a connection.
    Send(ConnId, Response),
    /// Send JOB_CREATED for a new job, whose handle is this server's own
    /// `<prefix>:<id>`: [`crate::Core::encode_job_created`] writes the
    /// packet (without building a handle buffer for it) and
    /// [`crate::Core::job_created`] gives it as a [`Response`].
    Created(ConnId, JobId),
    /// Send admin text to a connection.
    Text(ConnId, Bytes),
    /// Send a per-job admin listing, rendered by the driver
    /// ([`crate::listing::Listing::render`]) off the core's thread.
    Listing(ConnId, Box<crate::listing::Listing>),
    /// Flush what was sent to the connection, then close it.
    Close(ConnId),
    /// An admin asked the server to stop.
    Shutdown {
        /// Stop accepting, let connections finish.
        graceful: bool,
    },
    /// A change the durable store must record, in order.
    Store(StoreOp),
    /// A job changed state, reported progress, or a worker came or went
    /// ([`crate::Core::set_lifecycle_events`]).
    Event(Box<crate::events::LiveEvent>),
}

/// The core's view of a job the store keeps (the store has its own record type).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredJob {
    /// Handle number.
    pub id: JobId,
    /// Full handle.
    pub handle: Bytes,
    /// Function name.
    pub function: Bytes,
    /// Unique id.
    pub unique: Bytes,
    /// Priority.
    pub priority: Priority,
    /// Workload.
    pub data: Bytes,
    /// Reducer of a reduce job.
    pub reducer: Option<Bytes>,
    /// Due time of an epoch job not yet due when submitted.
    pub due_ms: Option<Millis>,
    /// Requeues so far.
    pub attempts: u32,
    /// Submission time.
    pub created_ms: Millis,
}

/// One change for the durable store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreOp {
    /// Store a new background job; answer with [`crate::Core::persisted`].
    Add(StoredJob),
    /// A stored job ended.
    Done(JobId),
    /// A stored job started a run ([`crate::Core::track_runs`]); the
    /// run ends with the job's next Done, Update, Retry or Dead.
    Started(JobId),
    /// A stored job's attempt count changed.
    Update {
        /// Job id.
        id: JobId,
        /// New attempt count.
        attempts: u32,
    },
    /// Handle numbers below this may be handed out: never reuse them.
    Reserve(JobId),
    /// A stored job waits for a retry (or a dead one was revived): its
    /// attempt count and when it may run (`None`: at once). Clears a dead mark.
    Retry {
        /// Job id.
        id: JobId,
        /// Attempt count.
        attempts: u32,
        /// When it may run again.
        due_ms: Option<Millis>,
    },
    /// Store a schedule, or its new next firing time (by id); answered with
    /// [`crate::Core::persisted`] like a new job.
    Schedule(StoredSchedule),
    /// A schedule was dropped.
    Unschedule(JobId),
    /// Keep a finished job's record and result (replaces one with its id).
    Kept(Box<StoredKept>),
    /// A kept record expired or was pushed out by the retention cap.
    Forget(JobId),
    /// A stored job used all its attempts: kept as dead.
    Dead {
        /// Job id.
        id: JobId,
        /// Runs it had.
        attempts: u32,
        /// When it died.
        died_ms: Millis,
        /// Its last error.
        error: Bytes,
    },
}

/// A recurring job as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSchedule {
    /// Its number.
    pub id: JobId,
    /// Its handle.
    pub handle: Bytes,
    /// The five time fields, space-separated.
    pub when: Bytes,
    /// Day of week counts from Monday = 0 (SUBMIT_JOB_SCHED), else Sunday = 0.
    pub monday_zero: bool,
    /// Function of its jobs.
    pub function: Bytes,
    /// Their unique id.
    pub unique: Bytes,
    /// Their workload.
    pub data: Bytes,
    /// Their priority.
    pub priority: Priority,
    /// Next firing, if any.
    pub next_ms: Option<Millis>,
    /// Declared in the config file.
    pub from_config: bool,
}

/// A finished job kept queryable, as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKept {
    /// Handle number.
    pub id: JobId,
    /// Its handle.
    pub handle: Bytes,
    /// Function name.
    pub function: Bytes,
    /// Unique id.
    pub unique: Bytes,
    /// Priority.
    pub priority: Priority,
    /// Submitted in the background.
    pub background: bool,
    /// 0 completed, 1 failed, 2 cancelled.
    pub outcome: u8,
    /// Runs it had.
    pub attempts: u32,
    /// Submission time.
    pub created_ms: Millis,
    /// Start of its last run.
    pub started_ms: Option<Millis>,
    /// End time.
    pub finished_ms: Millis,
    /// When it is forgotten.
    pub expires_ms: Millis,
    /// Worker of the last run (empty: none).
    pub worker: Bytes,
    /// Last failure's text.
    pub error: Option<Bytes>,
    /// WORK_COMPLETE's data.
    pub result: Bytes,
    /// Its history ([`crate::history::encode_history`]).
    pub history: Bytes,
}

/// What the store kept of a dead job besides its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadInfo {
    /// When it died.
    pub died_ms: Millis,
    /// Its last error.
    pub error: Bytes,
}
