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
