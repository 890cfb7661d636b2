//! The core's store operations and records carried into the store's own
//! (and back, for a restart): what a flush buffers and what replay returns.

use gearshift_core::{DeadInfo, JobId, StoreOp, StoredJob, StoredKept, StoredSchedule};
use gearshift_proto::Priority;
use gearshift_store::{DeadMark, JobRecord, KeptRecord, ScheduleRecord, Store};

/// Buffers `batch` in the store: new jobs' ids go to `added`, every other
/// op also to `kept` (to be written again if the flush fails).
pub(crate) fn apply(
    store: &mut dyn Store,
    batch: Vec<StoreOp>,
    added: &mut Vec<JobId>,
    kept: &mut Vec<StoreOp>,
) {
    for op in batch {
        match op {
            StoreOp::Add(job) => {
                added.push(job.id);
                store.add(&to_record(job));
                continue;
            }
            StoreOp::Schedule(s) => {
                // Like a new job: reported with the commit (its submitter
                // waits for JOB_CREATED), not written again after a failure.
                added.push(s.id);
                store.schedule(&to_schedule_record(s));
                continue;
            }
            StoreOp::Unschedule(id) => store.unschedule(id),
            StoreOp::Kept(ref k) => store.kept(&to_kept_record(k)),
            StoreOp::Forget(id) => store.forget(id),
            StoreOp::Done(id) => store.done(id),
            StoreOp::Started(id) => store.started(id),
            StoreOp::Update { id, attempts } => store.update(id, attempts),
            StoreOp::Reserve(upto) => store.reserve(upto),
            StoreOp::Retry {
                id,
                attempts,
                due_ms,
            } => store.retry(id, attempts, due_ms),
            StoreOp::Dead {
                id,
                attempts,
                died_ms,
                ref error,
            } => store.dead(
                id,
                attempts,
                &DeadMark {
                    died_ms,
                    error: error.clone(),
                },
            ),
        }
        kept.push(op);
    }
}

/// The core's view of a job → the store's record.
pub fn to_record(j: StoredJob) -> JobRecord {
    JobRecord {
        id: j.id,
        handle: j.handle,
        function: j.function,
        unique: j.unique,
        priority: j.priority.index() as u8,
        data: j.data,
        reducer: j.reducer,
        due_ms: j.due_ms,
        attempts: j.attempts,
        created_ms: j.created_ms,
    }
}

/// The core's view of a schedule → the store's record.
pub fn to_schedule_record(s: StoredSchedule) -> ScheduleRecord {
    ScheduleRecord {
        id: s.id,
        handle: s.handle,
        when: s.when,
        monday_zero: s.monday_zero,
        function: s.function,
        unique: s.unique,
        data: s.data,
        priority: s.priority.index() as u8,
        next_ms: s.next_ms,
        from_config: s.from_config,
    }
}

/// A stored schedule → the core's view.
pub fn from_schedule_record(r: ScheduleRecord) -> StoredSchedule {
    StoredSchedule {
        id: r.id,
        handle: r.handle,
        when: r.when,
        monday_zero: r.monday_zero,
        function: r.function,
        unique: r.unique,
        data: r.data,
        priority: priority_of(r.priority),
        next_ms: r.next_ms,
        from_config: r.from_config,
    }
}

fn priority_of(p: u8) -> Priority {
    match p {
        0 => Priority::High,
        2 => Priority::Low,
        _ => Priority::Normal,
    }
}

/// The core's kept record → the store's.
pub fn to_kept_record(k: &StoredKept) -> KeptRecord {
    KeptRecord {
        id: k.id,
        handle: k.handle.clone(),
        function: k.function.clone(),
        unique: k.unique.clone(),
        priority: k.priority.index() as u8,
        background: k.background,
        outcome: k.outcome,
        attempts: k.attempts,
        created_ms: k.created_ms,
        started_ms: k.started_ms,
        finished_ms: k.finished_ms,
        expires_ms: k.expires_ms,
        worker: k.worker.clone(),
        error: k.error.clone(),
        result: k.result.clone(),
        history: k.history.clone(),
    }
}

/// A stored kept record → the core's view.
pub fn from_kept_record(r: KeptRecord) -> StoredKept {
    StoredKept {
        id: r.id,
        handle: r.handle,
        function: r.function,
        unique: r.unique,
        priority: priority_of(r.priority),
        background: r.background,
        outcome: r.outcome,
        attempts: r.attempts,
        created_ms: r.created_ms,
        started_ms: r.started_ms,
        finished_ms: r.finished_ms,
        expires_ms: r.expires_ms,
        worker: r.worker,
        error: r.error,
        result: r.result,
        history: r.history,
    }
}

/// A stored dead mark → the core's view.
pub fn dead_info(m: DeadMark) -> DeadInfo {
    DeadInfo {
        died_ms: m.died_ms,
        error: m.error,
    }
}

/// A stored record → the core's view (unknown priorities become normal).
pub fn from_record(r: JobRecord) -> StoredJob {
    let priority = priority_of(r.priority);
    StoredJob {
        id: r.id,
        handle: r.handle,
        function: r.function,
        unique: r.unique,
        priority,
        data: r.data,
        reducer: r.reducer,
        due_ms: r.due_ms,
        attempts: r.attempts,
        created_ms: r.created_ms,
    }
}
