//! Live lifecycle events: how a job's transitions (from [`Core::record`]),
//! progress reports and workers joining and leaving leave the core as
//! [`Effect::Event`]s, for live streams and metrics. Off by default, when
//! they cost one test of a mask ([`Core::wants`]). The history types are
//! re-exported here for the drivers.

use bytes::Bytes;

use crate::conn::Conn;
use crate::effect::Effect;
use crate::engine::Core;
use crate::events::{EventKind, LiveEvent, WorkerRef};
use crate::ids::{ConnId, JobId};

pub use crate::history::{
    decode_history, encode_history, Event, LastFailure, Step, Track, MAX_ERROR, MAX_HISTORY,
};

impl Core {
    /// Sends a job's transition out as a live event.
    pub(crate) fn emit_event(&mut self, id: JobId, step: Step) {
        let handle = self.handles.of(id);
        let function = self.function_of(id);
        let kind = match step {
            // Said with why, which the history's `dead` step leaves to the
            // `failed` step before it.
            Step::Dead => {
                let track = self.history.get(id);
                let attempts = track.map_or_else(
                    || {
                        self.table
                            .get(id)
                            .map_or(0, |j| j.retries.saturating_add(1))
                    },
                    |t| t.attempts,
                );
                let failure =
                    track.and_then(|t| LastFailure::of(&t.history, t.attempts, t.error.as_ref()));
                EventKind::Dead {
                    handle,
                    function,
                    attempts,
                    reason: failure.as_ref().and_then(|f| f.reason),
                    error: failure.map(|f| f.error).unwrap_or_default(),
                }
            }
            step => EventKind::Job {
                handle,
                function,
                step,
            },
        };
        self.push_event(kind);
    }

    /// Turns every kind of live event ([`Effect::Event`]) on or off. Off
    /// (the default) they cost nothing; [`Core::set_event_kinds`] picks kinds.
    pub fn set_lifecycle_events(&mut self, on: bool) {
        self.events = if on { crate::events::Kind::all() } else { 0 };
    }
}

impl Core {
    /// Produces only the kinds in `mask` (bits of [`Kind::bit`]); 0 turns
    /// events off, when they cost one test of the mask each.
    pub fn set_event_kinds(&mut self, mask: u16) {
        self.events = mask;
    }

    /// Sends out a live event, stamped now (callers check [`Core::wants`]).
    pub(crate) fn push_event(&mut self, kind: EventKind) {
        let at = self.now;
        self.effects
            .push(Effect::Event(Box::new(LiveEvent { at, kind })));
    }

    /// A worker as events name it.
    pub(crate) fn worker_ref(&self, id: ConnId, c: &Conn) -> WorkerRef {
        WorkerRef {
            id: id.0,
            fd: c.info().fd,
            label: c.event_label(),
            address: c.info().ip.clone(),
            functions: c
                .abilities()
                .iter()
                .filter_map(|a| self.table.func(a.func).map(|f| f.name.clone()))
                .collect(),
            identity: c.info().identity.clone(),
        }
    }

    /// The name of a live job's function (empty if it has none).
    pub(crate) fn function_of(&self, id: crate::ids::JobId) -> Bytes {
        self.table
            .get(id)
            .and_then(|j| self.table.func(j.func()))
            .map(|f| f.name.clone())
            .unwrap_or_default()
    }

    /// A worker sent WORK_STATUS for a job it holds.
    pub(crate) fn progress_event(
        &mut self,
        id: crate::ids::JobId,
        numerator: u32,
        denominator: u32,
    ) {
        let handle = self.handles.of(id);
        let function = self.function_of(id);
        self.push_event(EventKind::Progress {
            handle,
            function,
            numerator,
            denominator,
        });
    }

    /// A connection registered its first function.
    pub(crate) fn worker_joined(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get(id) {
            let w = self.worker_ref(id, c);
            self.push_event(EventKind::WorkerJoined(w));
        }
    }
}
