//! The actions the HTTP API offers, as typed calls: cancel a job, retry or
//! drop dead jobs, pause or resume a function. The admin text words do the
//! same through the same code.

use bytes::Bytes;

use crate::engine::Core;

/// Why an action was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// No live (or dead) job has that handle.
    #[error("no such job")]
    UnknownJob,
    /// The job already finished.
    #[error("the job has already finished")]
    Finished,
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
    /// Cancels a live job as `cancel job H` does.
    pub fn cancel_job(&mut self, handle: &[u8]) -> Result<(), ControlError> {
        let _ = handle;
        todo!()
    }

    /// Queues dead jobs again; how many.
    pub fn retry_dead_jobs(&mut self, which: &DeadSelect) -> usize {
        let _ = which;
        todo!()
    }

    /// Forgets dead jobs; how many.
    pub fn drop_dead_jobs(&mut self, which: &DeadSelect) -> usize {
        let _ = which;
        todo!()
    }

    /// Pauses or resumes a function (a new name is created paused, as `pause F`).
    pub fn set_paused(&mut self, name: &[u8], paused: bool) -> Result<(), ControlError> {
        let _ = (name, paused);
        todo!()
    }
}
