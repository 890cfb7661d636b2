//! The actions the HTTP API offers, as typed calls: cancel a job, retry or
//! drop dead jobs, pause or resume a function. The admin text words do the
//! same through the same code.

use bytes::Bytes;
use gearshift_proto::admin::DeadTarget;
use gearshift_proto::Response;

use crate::effect::{Effect, StoreOp};
use crate::engine::Core;
use crate::function::FunctionError;
use crate::history::Step;
use crate::ids::JobId;
use crate::job::{JobState, Persist};
use crate::kept::Outcome;

/// Why an action was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// No live (or dead) job has that handle.
    #[error("no such job")]
    UnknownJob,
    /// The job already finished.
    #[error("the job has already finished")]
    Finished,
    /// A cancel was already requested; its worker still runs the job, which
    /// ends when the worker reports.
    #[error(
        "cancel already requested; the job is still running on its worker, and ends when the worker reports"
    )]
    CancelRequested,
    /// No function has that name.
    #[error("no such function")]
    UnknownFunction,
}

/// Which dead jobs an action is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeadSelect {
    /// Every dead job.
    All,
    /// One function's.
    Function(Bytes),
    /// These handles (unknown ones are skipped).
    Handles(Vec<Bytes>),
}

impl Core {
    /// Cancels a live job (`cancel job H`, the HTTP API): `Finished` for a
    /// kept or dead job, `CancelRequested` for one already cancelled while
    /// its worker still holds it (nothing is recorded again).
    pub fn cancel_job(&mut self, handle: &[u8]) -> Result<(), ControlError> {
        let Some(id) = self.job_by_handle(handle) else {
            return Err(match self.find_retained(handle) {
                Some(_) => ControlError::Finished,
                None => ControlError::UnknownJob,
            });
        };
        if self
            .table
            .get(id)
            .is_some_and(|j| j.state == JobState::Cancelled)
        {
            return Err(ControlError::CancelRequested);
        }
        self.cancel_live(id);
        Ok(())
    }

    /// Cancels a live job (`cancel job H`, [`Core::cancel_job`]): waiting
    /// clients get WORK_FAIL; a queued job goes at once, a running one when
    /// its worker reports (the worker is not told).
    pub(crate) fn cancel_live(&mut self, id: JobId) {
        let h = self.handles.of(id);
        let acks = self.acks.take(id).unwrap_or_default();
        let Some(job) = self.table.get(id) else {
            return;
        };
        let running = job.state == JobState::Running;
        let stored = job.persist != Persist::No;
        let clients = self.table.take_clients(id);
        if running {
            // Gone from the store now, not when the worker reports: a crash
            // in between must not bring a cancelled job back.
            self.table.set_persist(id, Persist::No);
            self.table.set_state(id, JobState::Cancelled);
            // Reaped only when its worker reports; meanwhile a resubmission
            // of its unique must make a new job, not wait on this dead one.
            self.table.unindex_unique(id);
            if stored {
                self.effects.push(Effect::Store(StoreOp::Done(id)));
            }
        }
        // Submitters still waiting for the store hear JOB_CREATED first, so
        // the WORK_FAIL that follows names a handle they know.
        for &c in &acks {
            self.resolve_ack(c, id, Response::JobCreated(h.clone()));
        }
        for &c in &clients {
            self.conns.stop_waiting(c, id);
            self.send(c, Response::WorkFail(h.clone()));
        }
        self.record(id, Step::Cancelled);
        if !running
            && self
                .table
                .get(id)
                .is_some_and(|j| j.state != JobState::Cancelled)
        {
            self.finish(id, Outcome::Cancelled, Bytes::new());
        }
        tracing::info!(handle = %String::from_utf8_lossy(&h), "job cancelled by admin");
    }

    /// Queues dead jobs again, as `retry dead` does; how many.
    pub fn retry_dead_jobs(&mut self, which: &DeadSelect) -> usize {
        match which {
            DeadSelect::All => self.retry_dead(&DeadTarget::All, None),
            DeadSelect::Function(f) => self.retry_dead(&DeadTarget::All, Some(f)),
            DeadSelect::Handles(hs) => hs
                .iter()
                .map(|h| self.retry_dead(&DeadTarget::Handle(h.clone()), None))
                .sum(),
        }
    }

    /// Forgets dead jobs, as `drop dead` does; how many.
    pub fn drop_dead_jobs(&mut self, which: &DeadSelect) -> usize {
        match which {
            DeadSelect::All => self.drop_dead(&DeadTarget::All, None),
            DeadSelect::Function(f) => self.drop_dead(&DeadTarget::All, Some(f)),
            DeadSelect::Handles(hs) => hs
                .iter()
                .map(|h| self.drop_dead(&DeadTarget::Handle(h.clone()), None))
                .sum(),
        }
    }

    /// Pauses or resumes a function, as `pause F` / `resume F` (a new name
    /// is created paused). A resume wakes its sleeping workers if it has
    /// work.
    pub fn set_paused(&mut self, name: &[u8], paused: bool) -> Result<(), ControlError> {
        let id = self.table.function_id(name, &self.policies);
        let Some(f) = self.table.func_mut(id) else {
            return Err(ControlError::UnknownFunction);
        };
        let was = std::mem::replace(&mut f.paused, paused);
        if was && !paused && f.has_queued() {
            self.wake_sleepers(id);
        }
        self.store_settings(name);
        tracing::info!(function = ?String::from_utf8_lossy(name), paused, "function paused or resumed by admin");
        Ok(())
    }
}

impl Core {
    /// `create function F` as a typed call (the HTTP API's); an existing
    /// name is fine, and any bytes are, as gearmand takes them (listings
    /// escape control bytes). Returns whether it was new.
    pub fn create_function(&mut self, name: &[u8]) -> Result<bool, FunctionError> {
        if self.table.func_named(name).is_some() {
            return Ok(false);
        }
        if name.is_empty() {
            return Err(FunctionError::BadName);
        }
        self.table.function_id(name, &self.policies);
        tracing::info!(function = ?String::from_utf8_lossy(name), "function created by admin");
        Ok(true)
    }

    /// `drop function F` (the admin word and the HTTP API): the name
    /// matches without regard to ASCII case, and only an idle, empty
    /// function goes.
    pub fn drop_function_named(&mut self, name: &[u8]) -> Result<(), FunctionError> {
        let id = self
            .table
            .funcs()
            .iter()
            .position(|f| {
                f.as_ref()
                    .is_some_and(|f| f.name.eq_ignore_ascii_case(name))
            })
            .ok_or(FunctionError::NotFound)?;
        let f = self.table.func(id).ok_or(FunctionError::NotFound)?;
        if f.workers > 0 || f.running > 0 {
            return Err(FunctionError::Busy);
        }
        if f.total > 0 {
            return Err(FunctionError::Queued);
        }
        if let Some(f) = self.table.drop_function(id) {
            self.store_settings(&f.name);
            tracing::info!(function = ?String::from_utf8_lossy(&f.name), "function dropped by admin");
        }
        Ok(())
    }

    /// `maxqueue F HIGH NORMAL LOW` as a typed call (the HTTP API's): the
    /// limits of an existing function (0 or less: unlimited).
    pub fn set_max_queue(&mut self, name: &[u8], limits: [i64; 3]) -> Result<(), FunctionError> {
        let id = self.table.func_named(name).ok_or(FunctionError::NotFound)?;
        let f = self.table.func_mut(id).ok_or(FunctionError::NotFound)?;
        f.max_queue = limits;
        self.store_settings(name);
        tracing::info!(function = ?String::from_utf8_lossy(name), ?limits, "queue limits set by admin");
        Ok(())
    }
}
