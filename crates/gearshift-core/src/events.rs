//! Live events: every job transition, progress report and worker arrival or
//! departure, as [`crate::Effect::Event`] carries them while events are on
//! ([`crate::Core::set_lifecycle_events`]). Off, they cost nothing.

use bytes::Bytes;

use crate::conn::Conn;
use crate::effect::Effect;
use crate::engine::Core;
use crate::ids::ConnId;
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

impl Core {
    /// Sends out a live event, stamped now (callers check `self.events`).
    pub(crate) fn push_event(&mut self, kind: EventKind) {
        let at = self.now;
        self.effects
            .push(Effect::Event(Box::new(LiveEvent { at, kind })));
    }

    /// A worker as events name it.
    pub(crate) fn worker_ref(&self, id: ConnId, c: &Conn) -> WorkerRef {
        WorkerRef {
            id: id.0,
            label: c.event_label(),
            address: c.info.ip.clone(),
            functions: c
                .abilities
                .iter()
                .filter_map(|a| self.func(a.func).map(|f| f.name.clone()))
                .collect(),
        }
    }

    /// A worker sent WORK_STATUS for a job it holds.
    pub(crate) fn progress_event(
        &mut self,
        id: crate::ids::JobId,
        numerator: u32,
        denominator: u32,
    ) {
        let handle = self.handle_of(id);
        let function = self
            .jobs
            .get(id)
            .and_then(|j| self.func(j.func()))
            .map(|f| f.name.clone())
            .unwrap_or_default();
        self.push_event(EventKind::Progress {
            handle,
            function,
            numerator,
            denominator,
        });
    }

    /// A connection registered its first function.
    pub(crate) fn worker_joined(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get(&id.0) {
            let w = self.worker_ref(id, c);
            self.push_event(EventKind::WorkerJoined(w));
        }
    }
}
