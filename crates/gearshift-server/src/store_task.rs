//! The store thread: owns the durable store, group-commits every batch of
//! store operations queued while the previous flush ran (one `fsync` for
//! all of them), and reports back which new jobs are durable.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gearshift_core::{JobId, StoreOp, StoredJob};
use gearshift_proto::Priority;
use gearshift_store::{JobRecord, Store};
use tokio::sync::mpsc::UnboundedSender;

use crate::engine::EngineMsg;

/// The engine's end of the store thread.
pub struct StoreTask {
    tx: mpsc::Sender<Vec<StoreOp>>,
    thread: JoinHandle<()>,
}

impl StoreTask {
    /// Starts the thread; results go to `engine`. With `sync_every`, written
    /// data is forced to disk at that interval (interval durability).
    pub fn spawn(
        mut store: Box<dyn Store>,
        engine: UnboundedSender<EngineMsg>,
        sync_every: Option<Duration>,
    ) -> std::io::Result<StoreTask> {
        let (tx, rx) = mpsc::channel::<Vec<StoreOp>>();
        let thread = std::thread::Builder::new().name("gearshift-store".into()).spawn(move || {
            let mut dirty = false;
            let mut last_sync = Instant::now();
            // Ends, attempt counts and reservations of a failed flush: no
            // submitter can be refused for them, so they are written with
            // the next flush instead of being forgotten (a forgotten end
            // would bring a finished job back at the next start).
            let mut unwritten: Vec<StoreOp> = Vec::new();
            loop {
                let first = match sync_every {
                    Some(every) => match rx.recv_timeout(every) {
                        Ok(batch) => Some(batch),
                        Err(RecvTimeoutError::Timeout) => None,
                        Err(RecvTimeoutError::Disconnected) => break,
                    },
                    None => match rx.recv() {
                        Ok(batch) => Some(batch),
                        Err(_) => break,
                    },
                };
                if let Some(first) = first {
                    // Group commit: everything queued meanwhile joins this flush.
                    let mut added = Vec::new();
                    let mut kept = Vec::new();
                    let retry = std::mem::take(&mut unwritten);
                    apply(store.as_mut(), retry, &mut added, &mut kept);
                    apply(store.as_mut(), first, &mut added, &mut kept);
                    while let Ok(more) = rx.try_recv() {
                        apply(store.as_mut(), more, &mut added, &mut kept);
                    }
                    match store.flush() {
                        Ok(()) => {
                            dirty = true;
                            if !added.is_empty() {
                                let _ = engine.send(EngineMsg::Stored(added));
                            }
                        }
                        Err(e) => {
                            tracing::error!(error = %e, jobs = added.len(), "store write failed; refusing the affected submissions");
                            unwritten = kept;
                            if !added.is_empty() {
                                let _ = engine.send(EngineMsg::StoreFailed(added, e.to_string()));
                            }
                        }
                    }
                }
                if let Some(every) = sync_every {
                    if dirty && last_sync.elapsed() >= every {
                        if let Err(e) = store.sync() {
                            tracing::error!(error = %e, "store sync failed");
                        }
                        dirty = false;
                        last_sync = Instant::now();
                    }
                }
            }
            apply(store.as_mut(), unwritten, &mut Vec::new(), &mut Vec::new());
            if let Err(e) = store.flush().and_then(|()| store.sync()) {
                tracing::error!(error = %e, "final store flush failed");
            }
        })?;
        Ok(StoreTask { tx, thread })
    }

    /// Queues a batch for the next group commit.
    pub fn send(&self, batch: Vec<StoreOp>) {
        if self.tx.send(batch).is_err() {
            tracing::error!("store thread is gone; store operations dropped");
        }
    }

    /// Closes the queue and waits until everything queued is flushed.
    pub fn finish(self) {
        drop(self.tx);
        let _ = self.thread.join();
    }
}

/// Buffers `batch` in the store: new jobs' ids go to `added`, every other
/// op also to `kept` (to be written again if the flush fails).
fn apply(
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
            StoreOp::Done(id) => store.done(id),
            StoreOp::Update { id, attempts } => store.update(id, attempts),
            StoreOp::Reserve(upto) => store.reserve(upto),
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

/// A stored record → the core's view (unknown priorities become normal).
pub fn from_record(r: JobRecord) -> StoredJob {
    let priority = match r.priority {
        0 => Priority::High,
        2 => Priority::Low,
        _ => Priority::Normal,
    };
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
