//! Live events: every job transition, progress report and worker arrival or
//! departure, as [`crate::Effect::Event`] carries them while events are on
//! ([`crate::Core::set_lifecycle_events`]). Off, they cost nothing.

use bytes::Bytes;

use crate::history::Step;
use crate::Millis;

/// One live event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveEvent {
    /// Unix milliseconds.
    pub at: Millis,
    /// What happened.
    pub kind: EventKind,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventKind {
    /// A job changed state (created = [`Step::Queued`]).
    Job {
        /// Its handle.
        handle: Bytes,
        /// Its function.
        function: Bytes,
        /// The transition.
        step: Step,
    },
    /// A worker sent WORK_STATUS.
    Progress {
        /// The job's handle.
        handle: Bytes,
        /// Its function.
        function: Bytes,
        /// Numerator.
        numerator: u32,
        /// Denominator.
        denominator: u32,
    },
    /// A job went into the dead set (its history records [`Step::Dead`]);
    /// the event also says why, which that step does not carry.
    Dead {
        /// Its handle.
        handle: Bytes,
        /// Its function.
        function: Bytes,
        /// Runs it had.
        attempts: u32,
        /// How its last run failed, if its history still says.
        reason: Option<crate::policy::Reason>,
        /// The last failure's text (the worker's, else the reason word).
        error: Bytes,
    },
    /// A connection registered its first function.
    WorkerJoined(WorkerRef),
    /// A worker connection closed (or dropped its last function).
    WorkerLeft(WorkerRef),
}

/// A worker as events name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerRef {
    /// Connection id.
    pub id: u64,
    /// The server's file descriptor for it (as `show workers` lists it).
    pub fd: i64,
    /// Its label (client id, else `fd@address`).
    pub label: Bytes,
    /// Peer address.
    pub address: String,
    /// Functions it registered.
    pub functions: Vec<Bytes>,
    /// The subject of its TLS client certificate, if it presented one.
    pub identity: Option<String>,
}

/// The kinds of live event, each a bit of the mask that says which ones
/// the core produces ([`crate::Core::set_event_kinds`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A new job ([`Step::Queued`]).
    Created,
    /// Handed to a worker.
    Started,
    /// WORK_STATUS.
    Progress,
    /// WORK_COMPLETE.
    Completed,
    /// A run ended without a result.
    Failed,
    /// Waits out a retry delay.
    Retrying,
    /// Back in its queue.
    Requeued,
    /// Into the dead set.
    Dead,
    /// Cancelled by an admin.
    Cancelled,
    /// Out of the dead set, queued again.
    Revived,
    /// A connection registered its first function.
    WorkerJoined,
    /// A worker left.
    WorkerLeft,
}

impl Kind {
    /// Every kind, in mask-bit order.
    pub const ALL: [Kind; 12] = [
        Kind::Created,
        Kind::Started,
        Kind::Progress,
        Kind::Completed,
        Kind::Failed,
        Kind::Retrying,
        Kind::Requeued,
        Kind::Dead,
        Kind::Cancelled,
        Kind::Revived,
        Kind::WorkerJoined,
        Kind::WorkerLeft,
    ];

    /// Its bit in an event mask.
    pub fn bit(self) -> u16 {
        1 << (self as u16)
    }

    /// A mask of every kind.
    pub fn all() -> u16 {
        Kind::ALL.iter().fold(0, |m, k| m | k.bit())
    }

    /// The word the event stream names it by.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Created => "created",
            Kind::Started => "started",
            Kind::Progress => "progress",
            Kind::Completed => "completed",
            Kind::Failed => "failed",
            Kind::Retrying => "retrying",
            Kind::Requeued => "requeued",
            Kind::Dead => "dead",
            Kind::Cancelled => "cancelled",
            Kind::Revived => "revived",
            Kind::WorkerJoined => "worker_joined",
            Kind::WorkerLeft => "worker_left",
        }
    }

    /// The kind a word names.
    pub fn from_word(w: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.word() == w)
    }

    /// The kind of a job transition.
    pub fn of_step(step: &Step) -> Kind {
        match step {
            Step::Queued => Kind::Created,
            Step::Started(_) => Kind::Started,
            Step::Failed(..) => Kind::Failed,
            Step::RetryAt(_) => Kind::Retrying,
            Step::Requeued(_) => Kind::Requeued,
            Step::Completed(_) => Kind::Completed,
            Step::Cancelled => Kind::Cancelled,
            Step::Dead => Kind::Dead,
            Step::Revived => Kind::Revived,
        }
    }
}

impl EventKind {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            EventKind::Job { step, .. } => Kind::of_step(step),
            EventKind::Progress { .. } => Kind::Progress,
            EventKind::Dead { .. } => Kind::Dead,
            EventKind::WorkerJoined(_) => Kind::WorkerJoined,
            EventKind::WorkerLeft(_) => Kind::WorkerLeft,
        }
    }

    /// The function it is about (`None`: a worker event).
    pub fn function(&self) -> Option<&Bytes> {
        match self {
            EventKind::Job { function, .. }
            | EventKind::Progress { function, .. }
            | EventKind::Dead { function, .. } => Some(function),
            EventKind::WorkerJoined(_) | EventKind::WorkerLeft(_) => None,
        }
    }
}
