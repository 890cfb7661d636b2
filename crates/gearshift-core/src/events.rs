//! Live events: every job transition, progress report and worker arrival or
//! departure, as [`crate::Effect::Event`] carries them while events are on
//! ([`crate::Core::set_lifecycle_events`]). Off, they cost nothing.

use bytes::Bytes;

use crate::lifecycle::Step;
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
    /// Its label (client id, else `fd@address`).
    pub label: Bytes,
    /// Peer address.
    pub address: String,
    /// Functions it registered.
    pub functions: Vec<Bytes>,
}

impl EventKind {
    /// The function it is about (`None`: a worker event).
    pub fn function(&self) -> Option<&Bytes> {
        match self {
            EventKind::Job { function, .. } | EventKind::Progress { function, .. } => {
                Some(function)
            }
            EventKind::WorkerJoined(_) | EventKind::WorkerLeft(_) => None,
        }
    }
}
