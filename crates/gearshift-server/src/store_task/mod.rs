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

use crate::histogram::{AtomicHistogram, HistogramSnapshot};
use gearshift_core::{JobId, StoreOp};
use gearshift_store::{Repartition, Store};

#[cfg(test)]
mod tests;

/// A store plus the operations a failed flush could not write: ends,
/// attempt counts and reservations refuse no submitter, so they are written
/// with the next flush instead of being forgotten (a forgotten end would
/// bring a finished job back at the next start).
pub struct Committer {
    store: Box<dyn Store>,
    unwritten: Vec<StoreOp>,
    stats: Arc<StoreStats>,
}

/// What `/metrics` shows of the store.
#[derive(Debug, Default)]
pub struct StoreStats {
    /// Group commit latencies (`gearshift_store_commit_seconds`).
    pub commits: AtomicHistogram,
    /// Flushes, syncs and housekeeping that failed
    /// (`gearshift_store_failures_total`): a full disk, an I/O error, a
    /// database that went away.
    pub failures: AtomicU64,
    /// When the last of them happened (Unix milliseconds; 0: never).
    pub last_failure_ms: AtomicU64,
}

/// A copy of [`StoreStats`] for a scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StoreFigures {
    /// Group commit latencies.
    pub commits: HistogramSnapshot,
    /// Failures since start.
    pub failures: u64,
    /// When the last failure happened (Unix milliseconds), if one did.
    pub last_failure_ms: Option<u64>,
}

impl StoreStats {
    fn failed(&self) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        self.last_failure_ms
            .fetch_max(crate::clock::unix_ms(), Ordering::Relaxed);
    }

    /// The figures now.
    pub fn snapshot(&self) -> StoreFigures {
        StoreFigures {
            commits: self.commits.snapshot(),
            failures: self.failures.load(Ordering::Relaxed),
            last_failure_ms: Some(self.last_failure_ms.load(Ordering::Relaxed)).filter(|&t| t > 0),
        }
    }
}

/// Where the store thread hands each commit's result (called on that
/// thread, with no store lock held).
pub type Deliver = Box<dyn FnMut(Commit) + Send>;

/// Work on the store itself (a partitioned node taking partitions on or
/// letting them go), run on the store thread after every batch queued
/// before it is written, with nothing buffered.
pub type StoreCall = Box<dyn FnOnce(&mut Committer) + Send>;

/// What the store thread is handed, in order.
enum Queued {
    Batch(Vec<StoreOp>),
    Call(StoreCall),
}

/// What one group commit achieved.
pub enum Commit {
    /// These new jobs are durable.
    Stored(Vec<JobId>),
    /// These new jobs could not be stored, for this reason.
    Failed(Vec<JobId>, String),
}

impl Committer {
    /// Wraps a store; its failures are counted in `stats`.
    pub fn new(store: Box<dyn Store>, stats: Arc<StoreStats>) -> Self {
        Committer {
            store,
            unwritten: Vec::new(),
            stats,
        }
    }

    /// Buffers every batch and flushes once.
    pub fn commit(&mut self, batches: impl IntoIterator<Item = Vec<StoreOp>>) -> Commit {
        let retry = std::mem::take(&mut self.unwritten);
        self.store.append(&retry);
        let mut added = Vec::new();
        let mut written = Vec::new();
        for batch in batches {
            added.extend(batch.iter().filter_map(awaited));
            self.store.append(&batch);
            written.push(batch);
        }
        match self.store.flush() {
            Ok(()) => Commit::Stored(added),
            Err(e) => {
                self.stats.failed();
                tracing::error!(error = %e, jobs = added.len(), "store write failed; refusing the affected submissions");
                // New jobs and schedules are refused, not written again.
                self.unwritten = retry
                    .into_iter()
                    .chain(written.into_iter().flatten())
                    .filter(|op| awaited(op).is_none())
                    .collect();
                Commit::Failed(added, e.to_string())
            }
        }
    }

    /// The store's partitions, when it can change them while it runs.
    pub fn repartition(&mut self) -> Option<&mut dyn Repartition> {
        self.store.repartition()
    }

    /// Forgets operations a failed flush left to write again that name a
    /// function `gone` says (their partition went to another node, whose
    /// store would be the one to write them).
    pub fn forget_unwritten(&mut self, gone: &dyn Fn(&[u8]) -> bool) {
        self.unwritten
            .retain(|op| op.function().is_none_or(|f| !gone(f)));
    }

    /// Lets the store tidy up while no commit comes.
    pub fn idle(&mut self) {
        if let Err(e) = self.store.idle() {
            self.stats.failed();
            tracing::error!(error = %e, "store housekeeping failed");
        }
    }

    /// Forces written data to disk.
    pub fn sync(&mut self) {
        if let Err(e) = self.store.sync() {
            self.stats.failed();
            tracing::error!(error = %e, "store sync failed");
        }
    }

    /// Writes what is left and syncs: the last call before the store goes.
    pub fn finish(&mut self) {
        let retry = std::mem::take(&mut self.unwritten);
        self.store.append(&retry);
        if let Err(e) = self.store.flush().and_then(|()| self.store.sync()) {
            self.stats.failed();
            tracing::error!(error = %e, "final store flush failed");
        }
    }
}

/// The id a submitter waits on to be durable: a new job's or schedule's
/// (reported with the commit, as JOB_CREATED waits for it).
fn awaited(op: &StoreOp) -> Option<JobId> {
    match op {
        StoreOp::Add(job) => Some(job.id),
        StoreOp::Schedule(s) => Some(s.id),
        _ => None,
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

/// Longest a smaller group of new jobs waits, with PostgreSQL, for as many
/// as the last commit carried (and never longer than that commit took):
/// synchronous submitters otherwise split into alternating commits of about
/// half of them each. A lone submitter never waits.
pub const COMPANY_MAX: Duration = Duration::from_millis(2);

/// Most new jobs a batch may carry to be written inline by the hub: a
/// whole read's worth of pipelined submissions, while a read buffer's
/// flood (a few hundred kilobytes at most) still goes to the thread.
const INLINE_MAX: usize = 1024;

/// The hub's end of the store: a thread that group-commits, and, for
/// `interval` durability (a flush is one `write`), a shortcut that writes a
/// batch inline when the thread is idle, sparing two hand-offs and a
/// wake-up; a batch that finds the thread busy goes to it, so the file sees
/// batches in order (figures: perf/history.md, "Store hand-off").
pub struct StoreTask {
    tx: mpsc::Sender<Queued>,
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
    /// Commit latencies and failures.
    stats: Arc<StoreStats>,
}

impl StoreTask {
    /// Starts the thread; its commits' results go to `deliver`, at the
    /// pace `timing` sets.
    pub fn spawn(
        store: Box<dyn Store>,
        deliver: Deliver,
        timing: Timing,
        stats: Arc<StoreStats>,
    ) -> std::io::Result<StoreTask> {
        let (tx, rx) = mpsc::channel::<Queued>();
        let committer = Arc::new(Mutex::new(Committer::new(store, stats.clone())));
        let done = Arc::new(AtomicU64::new(0));
        let dirty = Arc::new(AtomicBool::new(false));
        let (c, d, w, l) = (
            committer.clone(),
            done.clone(),
            dirty.clone(),
            stats.clone(),
        );
        let thread = std::thread::Builder::new()
            .name("gearshift-store".into())
            .spawn(move || store_thread(rx, c, d, w, l, deliver, timing))?;
        Ok(StoreTask {
            tx,
            thread,
            committer,
            sent: 0,
            done,
            dirty,
            inline: timing.sync_every.is_some(),
            hold: timing.hold.is_some(),
            stats,
        })
    }

    /// Writes a batch: inline when that is allowed and cheap (the result is
    /// returned), else through the thread (the result comes as an
    /// [`Commit`] in the hub's inbox).
    pub fn submit(&mut self, batch: Vec<StoreOp>) -> Option<Commit> {
        let (mut adds, mut reserves) = (0, false);
        for op in &batch {
            match op {
                StoreOp::Add(_) => adds += 1,
                StoreOp::Reserve(_) => reserves = true,
                _ => {}
            }
        }
        // A handle reservation goes to the thread, which syncs it at once.
        let quick = adds <= INLINE_MAX && !reserves;
        if self.inline && quick && self.done.load(Ordering::Acquire) == self.sent {
            if let Ok(mut committer) = self.committer.try_lock() {
                let started = Instant::now();
                let result = committer.commit([batch]);
                self.stats.commits.observe(started.elapsed());
                self.dirty.store(true, Ordering::Release);
                return Some(result);
            }
        }
        self.sent += 1;
        let wake = self.hold && acknowledged(&batch);
        if self.tx.send(Queued::Batch(batch)).is_err() {
            tracing::error!("store thread is gone; store operations dropped");
        }
        if wake {
            // The thread may be holding other operations, asleep outside `recv`.
            self.thread.thread().unpark();
        }
        None
    }

    /// Runs `call` on the store thread once everything queued before it is
    /// written (dropped unrun if the thread is gone).
    pub fn call(&mut self, call: StoreCall) {
        self.sent += 1;
        if self.tx.send(Queued::Call(call)).is_err() {
            tracing::error!("store thread is gone; a store call dropped");
        }
        self.thread.thread().unpark();
    }

    /// Closes the queue and waits until everything queued is flushed.
    pub fn finish(self) {
        drop(self.tx);
        self.thread.thread().unpark();
        let _ = self.thread.join();
    }
}

/// How the store thread paces its writes.
/// When the store thread writes and syncs.
#[derive(Debug, Clone, Copy, Default)]
pub struct Timing {
    /// `interval` durability: written data is forced to disk this often,
    /// and small batches may be written inline by the hub.
    pub sync_every: Option<Duration>,
    /// How long a group that acknowledges nothing (no new job, schedule
    /// or handle reservation) may wait for company ([`HOLD_UNACKNOWLEDGED`]).
    pub hold: Option<Duration>,
    /// How long a group awaited by fewer submitters than the last commit
    /// may wait for the others, at most the last commit's time
    /// ([`COMPANY_MAX`]).
    pub company: Option<Duration>,
}

impl Timing {
    /// What suits `store`: interval durability syncs on a clock; with fsync
    /// durability a flush is a synchronous disk write, so ends and other
    /// unacknowledged operations wait a little for company; with PostgreSQL
    /// a commit is a round trip and a flush, so a smaller group of new jobs
    /// waits briefly for the rest of the last one's.
    pub fn of(store: &crate::StoreConfig) -> Timing {
        use crate::StoreConfig;
        use gearshift_store::Durability;
        match store {
            StoreConfig::Log {
                durability: Durability::Interval(every),
                ..
            } => Timing {
                sync_every: Some(*every),
                ..Timing::default()
            },
            StoreConfig::Log {
                durability: Durability::Fsync,
                ..
            } => Timing {
                hold: Some(HOLD_UNACKNOWLEDGED),
                ..Timing::default()
            },
            StoreConfig::Postgres { .. } => Timing {
                company: Some(COMPANY_MAX),
                ..Timing::default()
            },
            _ => Timing::default(),
        }
    }
}

/// How many submitters wait on a group's commit.
fn awaited_in(batches: &[Vec<StoreOp>]) -> usize {
    batches
        .iter()
        .flatten()
        .filter(|op| awaited(op).is_some())
        .count()
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
    rx: mpsc::Receiver<Queued>,
    committer: Arc<Mutex<Committer>>,
    done: Arc<AtomicU64>,
    dirty: Arc<AtomicBool>,
    stats: Arc<StoreStats>,
    mut deliver: Deliver,
    timing: Timing,
) {
    let Timing {
        sync_every,
        hold,
        company,
    } = timing;
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
    // What the last commit acknowledged, and how long it took.
    let mut last_awaited = 0usize;
    let mut last_took = Duration::ZERO;
    'serve: loop {
        // A store call ends the group: it runs right after its flush.
        let mut call: Option<StoreCall> = None;
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
            while let Some(queued) = next {
                match queued {
                    Queued::Batch(batch) => {
                        pending_ops += batch.len();
                        pending.push(batch);
                    }
                    Queued::Call(c) => {
                        call = Some(c);
                        break;
                    }
                }
                next = match rx.try_recv() {
                    Ok(batch) => Some(batch),
                    Err(TryRecvError::Empty) => None,
                    // Closed: the final flush below writes what is pending.
                    Err(TryRecvError::Disconnected) => break 'serve,
                };
            }
        }
        if let (Some(company), None) = (company, &call) {
            // Fewer wait on this group than on the last commit: the others
            // are likely resubmitting now that it acknowledged them.
            let mut waiting = awaited_in(&pending);
            if waiting > 0 && waiting < last_awaited {
                let until = Instant::now() + company.min(last_took);
                while waiting < last_awaited {
                    match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                        Ok(Queued::Batch(batch)) => {
                            waiting += awaited_in(std::slice::from_ref(&batch));
                            pending_ops += batch.len();
                            pending.push(batch);
                        }
                        Ok(Queued::Call(c)) => {
                            call = Some(c);
                            break;
                        }
                        Err(RecvTimeoutError::Timeout) => break,
                        Err(RecvTimeoutError::Disconnected) => break 'serve,
                    }
                }
            }
        }
        if let (Some(hold), false, None) = (hold, pending.is_empty(), &call) {
            let now = Instant::now();
            let due = held_until.is_some_and(|t| now >= t);
            if !due && pending_ops < HOLD_MAX_OPS && !pending.iter().any(|b| acknowledged(b)) {
                held_until.get_or_insert(now + hold);
                continue;
            }
        }
        held_until = None;
        pending_ops = 0;
        let mut reserved = false;
        if !pending.is_empty() {
            let batches = std::mem::take(&mut pending);
            reserved = batches
                .iter()
                .flatten()
                .any(|op| matches!(op, StoreOp::Reserve(_)));
            let n = batches.len() as u64;
            let awaited_now = awaited_in(&batches);
            let result = {
                let mut c = lock();
                let started = Instant::now();
                let result = c.commit(batches);
                last_took = started.elapsed();
                stats.commits.observe(last_took);
                if awaited_now > 0 {
                    last_awaited = awaited_now;
                }
                done.fetch_add(n, Ordering::Release);
                result
            };
            dirty.store(true, Ordering::Release);
            // Delivered with the committer unlocked, so the hub's inline
            // path (which tries that lock) is not turned away meanwhile.
            deliver_new_jobs(&mut deliver, result);
        }
        if let Some(call) = call.take() {
            call(&mut lock());
            done.fetch_add(1, Ordering::Release);
        }
        if let Some(every) = sync_every {
            // A handle reservation goes to disk as soon as its commit is
            // answered, not at the next sync: its handles are given out
            // once the counter passes the previous reservation's end,
            // which half a reservation (50,000 handles) of slack keeps
            // later than that, and a power loss must not take them.
            if reserved || last_sync.elapsed() >= every {
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
        deliver_new_jobs(&mut deliver, result);
    }
    lock().finish();
}

/// Hands a commit's result to the hub when it concerns new jobs (the only
/// ones a submitter waits on).
fn deliver_new_jobs(deliver: &mut Deliver, result: Commit) {
    match result {
        Commit::Stored(added) if !added.is_empty() => deliver(Commit::Stored(added)),
        Commit::Failed(added, why) if !added.is_empty() => deliver(Commit::Failed(added, why)),
        _ => {}
    }
}
