//! A function's queues and counters: three FIFO lists by priority, counts
//! for `status`/`prioritystatus`, the queue limit, the workers asleep on it,
//! its policy and whether it is paused.

use std::collections::VecDeque;

use std::sync::Arc;

use bytes::Bytes;

use crate::policy::Policy;

use crate::ids::{ConnId, JobId};

/// One function name's queues and statistics.
#[derive(Debug, Default)]
pub struct Function {
    /// Name as first seen.
    pub name: Bytes,
    /// Grab-able jobs by priority; may hold stale ids of jobs that left the
    /// queue (cancelled, dropped), which are skipped when popped.
    pub queues: [VecDeque<JobId>; 3],
    /// Live grab-able jobs per priority (exact; `queues` may be longer).
    pub queued: [u32; 3],
    /// Epoch jobs not yet due (shown as queued at normal priority).
    pub scheduled: u32,
    /// Every job of the function: queued, scheduled and running.
    pub total: u32,
    /// Jobs held by workers.
    pub running: u32,
    /// Connections that registered the function.
    pub workers: u32,
    /// `maxqueue` limits by priority; 0 = unlimited.
    pub max_queue: [i64; 3],
    /// Workers that slept on this function and were not NOOPed since; may
    /// hold stale entries, checked when popped.
    pub sleepers: VecDeque<ConnId>,
    /// The policy of the first config rule matching the name, if any.
    pub policy: Option<Arc<Policy>>,
    /// `pause F`: jobs are queued but not handed out.
    pub paused: bool,
    /// Counters and latencies since the server started.
    pub stats: crate::metrics::FuncStats,
}

impl Function {
    /// A new, empty function.
    pub fn new(name: Bytes) -> Self {
        Function {
            name,
            ..Function::default()
        }
    }

    /// Grab-able jobs at any priority.
    pub fn has_queued(&self) -> bool {
        self.queued.iter().any(|&n| n > 0)
    }

    /// Whether `maxqueue` refuses one more job of priority `p` (counting
    /// every job of the function, as gearmand does).
    #[inline]
    pub fn queue_full(&self, p: usize) -> bool {
        let limit = self.max_queue[p];
        limit > 0 && i64::from(self.total) >= limit
    }

    /// Jobs a worker may take now: queued, and the function not paused.
    pub fn has_work(&self) -> bool {
        !self.paused && self.has_queued()
    }
}

/// Why a function action (the HTTP API's, or `drop function`) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FunctionError {
    /// No function has that name.
    #[error("no such function")]
    NotFound,
    /// The name is empty.
    #[error("a function name may not be empty")]
    BadName,
    /// Workers registered it, or it has jobs running.
    #[error("the function has workers or running jobs")]
    Busy,
    /// It has queued jobs.
    #[error("the function has queued jobs")]
    Queued,
}

impl crate::engine::Core {
    /// `create function F` as a typed call (the HTTP API's); an existing
    /// name is fine, and any bytes are, as gearmand takes them (listings
    /// escape control bytes). Returns whether it was new.
    pub fn create_function(&mut self, name: &[u8]) -> Result<bool, FunctionError> {
        if self.func_index.contains_key(name) {
            return Ok(false);
        }
        if name.is_empty() {
            return Err(FunctionError::BadName);
        }
        self.function_id(name);
        tracing::info!(function = ?String::from_utf8_lossy(name), "function created by admin");
        Ok(true)
    }

    /// `drop function F` (the admin word and the HTTP API): the name
    /// matches without regard to ASCII case, and only an idle, empty
    /// function goes.
    pub fn drop_function_named(&mut self, name: &[u8]) -> Result<(), FunctionError> {
        let id = self
            .funcs
            .iter()
            .position(|f| {
                f.as_ref()
                    .is_some_and(|f| f.name.eq_ignore_ascii_case(name))
            })
            .ok_or(FunctionError::NotFound)?;
        let f = self.func(id).ok_or(FunctionError::NotFound)?;
        if f.workers > 0 || f.running > 0 {
            return Err(FunctionError::Busy);
        }
        if f.total > 0 {
            return Err(FunctionError::Queued);
        }
        if let Some(f) = self.funcs.get_mut(id).and_then(Option::take) {
            self.func_index.remove(&f.name);
            self.dropped_stats.merge(&f.stats);
            tracing::info!(function = ?String::from_utf8_lossy(&f.name), "function dropped by admin");
        }
        Ok(())
    }

    /// `maxqueue F HIGH NORMAL LOW` as a typed call (the HTTP API's): the
    /// limits of an existing function (0 or less: unlimited).
    pub fn set_max_queue(&mut self, name: &[u8], limits: [i64; 3]) -> Result<(), FunctionError> {
        let id = *self.func_index.get(name).ok_or(FunctionError::NotFound)?;
        let f = self.func_mut(id).ok_or(FunctionError::NotFound)?;
        f.max_queue = limits;
        tracing::info!(function = ?String::from_utf8_lossy(name), ?limits, "queue limits set by admin");
        Ok(())
    }
}
