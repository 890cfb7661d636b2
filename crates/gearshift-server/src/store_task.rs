//! Running the durable store: group commit (every batch of store operations
//! queued while the previous flush ran joins the next one, one `fsync` for
//! all of them), on a thread of its own for `fsync` durability or inline in
//! the hub for `interval` durability, where a flush is only a `write`.
//! The thread hands each commit's result to the hub's inbox through a
//! [`Deliver`] callback.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::histogram::AtomicHistogram;
use gearshift_core::{DeadInfo, JobId, StoreOp, StoredJob, StoredKept, StoredSchedule};
use gearshift_proto::Priority;
use gearshift_store::{DeadMark, JobRecord, KeptRecord, ScheduleRecord, Store};

/// A store plus the operations a failed flush could not write: ends,
/// attempt counts and reservations refuse no submitter, so they are written
/// with the next flush instead of being forgotten (a forgotten end would
/// bring a finished job back at the next start).
pub struct Committer {
    store: Box<dyn Store>,
    unwritten: Vec<StoreOp>,
}

/// Where the store thread hands each commit's result (called on that
/// thread, with no store lock held).
pub type Deliver = Box<dyn FnMut(Commit) + Send>;

/// What one group commit achieved.
pub enum Commit {
    /// These new jobs are durable.
    Stored(Vec<JobId>),
    /// These new jobs could not be stored, for this reason.
    Failed(Vec<JobId>, String),
}

impl Committer {
    /// Wraps a store.
    pub fn new(store: Box<dyn Store>) -> Self {
        Committer {
            store,
            unwritten: Vec::new(),
        }
    }

    /// Buffers every batch and flushes once.
    pub fn commit(&mut self, batches: impl IntoIterator<Item = Vec<StoreOp>>) -> Commit {
        let mut added = Vec::new();
        let mut kept = Vec::new();
        let retry = std::mem::take(&mut self.unwritten);
        apply(self.store.as_mut(), retry, &mut added, &mut kept);
        for batch in batches {
            apply(self.store.as_mut(), batch, &mut added, &mut kept);
        }
        match self.store.flush() {
            Ok(()) => Commit::Stored(added),
            Err(e) => {
                tracing::error!(error = %e, jobs = added.len(), "store write failed; refusing the affected submissions");
                self.unwritten = kept;
                Commit::Failed(added, e.to_string())
            }
        }
    }

    /// Lets the store tidy up while no commit comes.
    pub fn idle(&mut self) {
        if let Err(e) = self.store.idle() {
            tracing::error!(error = %e, "store housekeeping failed");
        }
    }

    /// Forces written data to disk.
    pub fn sync(&mut self) {
        if let Err(e) = self.store.sync() {
            tracing::error!(error = %e, "store sync failed");
        }
    }

    /// Writes what is left and syncs: the last call before the store goes.
    pub fn finish(&mut self) {
        let retry = std::mem::take(&mut self.unwritten);
        apply(self.store.as_mut(), retry, &mut Vec::new(), &mut Vec::new());
        if let Err(e) = self.store.flush().and_then(|()| self.store.sync()) {
            tracing::error!(error = %e, "final store flush failed");
        }
    }
}

/// How often an idle store thread lets the store tidy up (a compaction that
/// finished after the last commit is swapped in, its old file freed).
const IDLE_TICK: Duration = Duration::from_millis(200);

/// How long the store thread may hold operations that no one waits on
/// (ends, attempt counts, kept results) before writing them, with
/// `fsync` durability: a drain then writes its ends in a few flushes
/// instead of one synchronous write per handful of jobs. A crash in that
/// window runs a finished job once more, as a crash between a job's end
/// and its group commit already could.
pub const HOLD_UNACKNOWLEDGED: Duration = Duration::from_millis(5);

/// Most operations held that way before they are written anyway.
const HOLD_MAX_OPS: usize = 4096;

/// Most new jobs a batch may carry to be written inline by the hub: a
/// whole read's worth of pipelined submissions, while a read buffer's
/// flood (a few hundred kilobytes at most) still goes to the thread.
const INLINE_MAX: usize = 1024;

/// The hub's end of the store: a thread that group-commits, and, for
/// `interval` durability (where a flush is one `write` to the page cache),
/// a shortcut that writes a batch inline when the thread is idle.
///
/// The shortcut spares a submission two thread hand-offs and a wake-up of
/// the store thread, which is what a synchronous client waits on and what
/// pipelined submissions spend their CPU on. Against writing only batches
/// of up to 8 inline: 0.86x the CPU per job at 1.06x the rate
/// (`perf/results/interval-inline-1024.json`). It cost rate before the
/// store's live map stopped missing the cache on every job. Batches that
/// arrive while the thread still has work (it holds the store during its
/// periodic sync) go to the thread, so the file sees the batches in order.
pub struct StoreTask {
    tx: mpsc::Sender<Vec<StoreOp>>,
    thread: JoinHandle<()>,
    committer: Arc<Mutex<Committer>>,
    /// Batches handed to the thread.
    sent: u64,
    /// Batches the thread has written (or failed to).
    done: Arc<AtomicU64>,
    /// Written since the last sync (set by either side).
    dirty: Arc<AtomicBool>,
    inline: bool,
    /// The thread holds operations no one waits on (see `spawn`).
    hold: bool,
    /// Group commit latencies (`gearshift_store_commit_seconds`).
    latency: Arc<AtomicHistogram>,
}

impl StoreTask {
    /// Starts the thread; its commits' results go to `deliver`. With `sync_every`
    /// (interval durability), written data is forced to disk at that
    /// interval and small batches may be written inline.
    ///
    /// With `hold`, a group of operations that acknowledges nothing (no new
    /// job, schedule or handle reservation) may wait that long for company
    /// before it is written ([`HOLD_UNACKNOWLEDGED`]).
    pub fn spawn(
        store: Box<dyn Store>,
        deliver: Deliver,
        sync_every: Option<Duration>,
        hold: Option<Duration>,
        latency: Arc<AtomicHistogram>,
    ) -> std::io::Result<StoreTask> {
        let (tx, rx) = mpsc::channel::<Vec<StoreOp>>();
        let committer = Arc::new(Mutex::new(Committer::new(store)));
        let done = Arc::new(AtomicU64::new(0));
        let dirty = Arc::new(AtomicBool::new(false));
        let (c, d, w, l) = (
            committer.clone(),
            done.clone(),
            dirty.clone(),
            latency.clone(),
        );
        let thread = std::thread::Builder::new()
            .name("gearshift-store".into())
            .spawn(move || {
                let settings = ThreadSettings { sync_every, hold };
                store_thread(rx, c, d, w, l, deliver, settings)
            })?;
        Ok(StoreTask {
            tx,
            thread,
            committer,
            sent: 0,
            done,
            dirty,
            inline: sync_every.is_some(),
            hold: hold.is_some(),
            latency,
        })
    }

    /// Writes a batch: inline when that is allowed and cheap (the result is
    /// returned), else through the thread (the result comes as an
    /// [`Commit`] in the hub's inbox).
    pub fn submit(&mut self, batch: Vec<StoreOp>) -> Option<Commit> {
        let adds = batch
            .iter()
            .filter(|op| matches!(op, StoreOp::Add(_)))
            .count();
        if self.inline && adds <= INLINE_MAX && self.done.load(Ordering::Acquire) == self.sent {
            if let Ok(mut committer) = self.committer.try_lock() {
                let started = Instant::now();
                let result = committer.commit([batch]);
                self.latency.observe(started.elapsed());
                self.dirty.store(true, Ordering::Release);
                return Some(result);
            }
        }
        self.sent += 1;
        let wake = self.hold && acknowledged(&batch);
        if self.tx.send(batch).is_err() {
            tracing::error!("store thread is gone; store operations dropped");
        }
        if wake {
            // The thread may be holding other operations, asleep outside `recv`.
            self.thread.thread().unpark();
        }
        None
    }

    /// Closes the queue and waits until everything queued is flushed.
    pub fn finish(self) {
        drop(self.tx);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

/// How the store thread paces its writes.
struct ThreadSettings {
    /// `interval` durability: sync this often.
    sync_every: Option<Duration>,
    /// How long operations no one waits on may be held.
    hold: Option<Duration>,
}

/// True when someone waits for this batch to be durable: a submitter for
/// its new job or schedule, or the hub for its handle reservation.
fn acknowledged(batch: &[StoreOp]) -> bool {
    batch.iter().any(|op| {
        matches!(
            op,
            StoreOp::Add(_) | StoreOp::Schedule(_) | StoreOp::Reserve(_)
        )
    })
}

fn store_thread(
    rx: mpsc::Receiver<Vec<StoreOp>>,
    committer: Arc<Mutex<Committer>>,
    done: Arc<AtomicU64>,
    dirty: Arc<AtomicBool>,
    latency: Arc<AtomicHistogram>,
    mut deliver: Deliver,
    settings: ThreadSettings,
) {
    let ThreadSettings { sync_every, hold } = settings;
    let lock = || {
        committer
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    };
    let mut last_sync = Instant::now();
    // Wakes up at least this often when no commit comes, for the store's
    // housekeeping (and, with interval durability, the sync).
    let tick = sync_every.map_or(IDLE_TICK, |every| every.min(IDLE_TICK));
    // What the next flush writes; with `hold`, kept until `held_until`
    // while no one waits on it.
    let mut pending: Vec<Vec<StoreOp>> = Vec::new();
    let mut pending_ops = 0usize;
    let mut held_until: Option<Instant> = None;
    'serve: loop {
        let first = if let Some(until) = held_until {
            // Holding: asleep outside `recv`, so the batches that keep coming
            // do not each wake the thread; one someone waits on unparks it
            // (`StoreTask::submit`), as does the queue's end.
            std::thread::park_timeout(until.saturating_duration_since(Instant::now()));
            match rx.try_recv() {
                Ok(batch) => Some(batch),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => break,
            }
        } else {
            match rx.recv_timeout(tick) {
                Ok(batch) => Some(batch),
                Err(RecvTimeoutError::Timeout) => {
                    lock().idle();
                    None
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        };
        if let Some(first) = first {
            // Group commit: everything queued meanwhile joins this flush.
            let mut next = Some(first);
            while let Some(batch) = next {
                pending_ops += batch.len();
                pending.push(batch);
                next = match rx.try_recv() {
                    Ok(batch) => Some(batch),
                    Err(TryRecvError::Empty) => None,
                    // Closed: the final flush below writes what is pending.
                    Err(TryRecvError::Disconnected) => break 'serve,
                };
            }
        }
        if let (Some(hold), false) = (hold, pending.is_empty()) {
            let now = Instant::now();
            let due = held_until.is_some_and(|t| now >= t);
            if !due && pending_ops < HOLD_MAX_OPS && !pending.iter().any(|b| acknowledged(b)) {
                held_until.get_or_insert(now + hold);
                continue;
            }
        }
        held_until = None;
        pending_ops = 0;
        if !pending.is_empty() {
            let batches = std::mem::take(&mut pending);
            let n = batches.len() as u64;
            let result = {
                let mut c = lock();
                let started = Instant::now();
                let result = c.commit(batches);
                latency.observe(started.elapsed());
                done.fetch_add(n, Ordering::Release);
                result
            };
            dirty.store(true, Ordering::Release);
            // Delivered with the committer unlocked, so the hub's inline
            // path (which tries that lock) is not turned away meanwhile.
            match result {
                Commit::Stored(added) if !added.is_empty() => deliver(Commit::Stored(added)),
                Commit::Failed(added, why) if !added.is_empty() => {
                    deliver(Commit::Failed(added, why))
                }
                _ => {}
            }
        }
        if let Some(every) = sync_every {
            if last_sync.elapsed() >= every {
                if dirty.swap(false, Ordering::AcqRel) {
                    lock().sync();
                }
                last_sync = Instant::now();
            }
        }
    }
    // The queue closed: what is pending (held, or taken with the close)
    // goes out with the final flush.
    if !pending.is_empty() {
        let result = lock().commit(pending);
        match result {
            Commit::Stored(added) if !added.is_empty() => deliver(Commit::Stored(added)),
            Commit::Failed(added, why) if !added.is_empty() => deliver(Commit::Failed(added, why)),
            _ => {}
        }
    }
    lock().finish();
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use gearshift_store::MemoryStore;

    fn job(id: JobId) -> StoredJob {
        StoredJob {
            id,
            handle: Bytes::from(format!("H:t:{id}")),
            function: Bytes::from_static(b"f"),
            unique: Bytes::new(),
            priority: Priority::Normal,
            data: Bytes::from_static(b"x"),
            reducer: None,
            due_ms: None,
            attempts: 0,
            created_ms: 0,
        }
    }

    /// A store thread with `hold`, the flushed view of its store, and the
    /// commits it delivers.
    fn task(hold: Duration) -> (StoreTask, MemoryStore, mpsc::Receiver<Commit>) {
        let store = MemoryStore::new();
        let view = store.reopen();
        let (tx, rx) = mpsc::channel();
        let deliver: Deliver = Box::new(move |c| {
            let _ = tx.send(c);
        });
        let task = StoreTask::spawn(Box::new(store), deliver, None, Some(hold), Arc::default())
            .expect("store thread");
        (task, view, rx)
    }

    fn live(view: &MemoryStore) -> Vec<JobId> {
        let mut v = view.reopen();
        v.replay()
            .expect("replay")
            .jobs
            .iter()
            .map(|j| j.id)
            .collect()
    }

    /// Waits (up to 5 s, far beyond any hold a test does not make long)
    /// until `done` holds.
    fn eventually(what: &str, mut done: impl FnMut() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(5), "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn stored(rx: &mpsc::Receiver<Commit>) -> Vec<JobId> {
        match rx.recv_timeout(Duration::from_secs(5)) {
            Ok(Commit::Stored(ids)) => ids,
            Ok(Commit::Failed(..)) => panic!("the commit failed"),
            Err(e) => panic!("no commit came: {e}"),
        }
    }

    #[test]
    fn ends_wait_for_company_then_are_written_together() {
        let (mut task, view, rx) = task(Duration::from_millis(300));
        assert!(task
            .submit(vec![StoreOp::Add(job(1)), StoreOp::Add(job(2))])
            .is_none());
        assert_eq!(stored(&rx), vec![1, 2], "a new job is written at once");
        task.submit(vec![StoreOp::Done(1)]);
        task.submit(vec![StoreOp::Done(2)]);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(live(&view), vec![1, 2], "the ends are held");
        eventually("the held ends were never written", || {
            live(&view).is_empty()
        });
        task.finish();
    }

    #[test]
    fn a_new_job_takes_the_held_ends_along_at_once() {
        let (mut task, view, rx) = task(Duration::from_secs(3600));
        task.submit(vec![StoreOp::Add(job(1))]);
        assert_eq!(stored(&rx), vec![1]);
        task.submit(vec![StoreOp::Done(1)]);
        task.submit(vec![StoreOp::Add(job(2))]);
        assert_eq!(
            stored(&rx),
            vec![2],
            "the submission did not wait for the hold"
        );
        assert_eq!(live(&view), vec![2], "the end went out with it, in order");
        task.finish();
    }

    #[test]
    fn a_reservation_is_not_held() {
        let (mut task, view, _rx) = task(Duration::from_secs(3600));
        task.submit(vec![StoreOp::Reserve(500)]);
        eventually("the reservation was held", || {
            view.reopen().replay().expect("replay").next_id >= 500
        });
        task.finish();
    }

    #[test]
    fn finishing_writes_what_is_held() {
        let (mut task, view, rx) = task(Duration::from_secs(3600));
        task.submit(vec![StoreOp::Add(job(1)), StoreOp::Add(job(2))]);
        assert_eq!(stored(&rx), vec![1, 2]);
        task.submit(vec![StoreOp::Done(2)]);
        task.finish();
        assert_eq!(live(&view), vec![1]);
    }

    #[test]
    fn too_many_held_operations_are_written_without_waiting() {
        let (mut task, view, rx) = task(Duration::from_secs(3600));
        let ids: Vec<JobId> = (1..=HOLD_MAX_OPS as JobId).collect();
        task.submit(ids.iter().map(|&id| StoreOp::Add(job(id))).collect());
        assert_eq!(stored(&rx).len(), HOLD_MAX_OPS);
        task.submit(ids.iter().map(|&id| StoreOp::Done(id)).collect());
        eventually("a full hold was not written", || live(&view).is_empty());
        task.finish();
    }
}
