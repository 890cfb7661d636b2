//! The store thread: holding what no one waits on, and writing it.

use super::*;
use bytes::Bytes;
use gearshift_core::JobRecord;
use gearshift_store::MemoryStore;

fn job(id: JobId) -> JobRecord {
    JobRecord {
        id,
        handle: Bytes::from(format!("H:t:{id}")),
        function: Bytes::from_static(b"f"),
        unique: Bytes::new(),
        priority: 1,
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
    let timing = Timing {
        hold: Some(hold),
        ..Timing::default()
    };
    let task =
        StoreTask::spawn(Box::new(store), deliver, timing, Arc::default()).expect("store thread");
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
    let hold = Duration::from_millis(300);
    let (mut task, view, rx) = task(hold);
    assert!(task
        .submit(vec![StoreOp::Add(job(1)), StoreOp::Add(job(2))])
        .is_none());
    assert_eq!(stored(&rx), vec![1, 2], "a new job is written at once");
    let sent = Instant::now();
    task.submit(vec![StoreOp::Done(1)]);
    task.submit(vec![StoreOp::Done(2)]);
    eventually("the held ends were never written", || {
        live(&view).is_empty()
    });
    // The hold starts once the thread has the ends, after they were sent: a
    // load that slows the thread only writes them later.
    assert!(sent.elapsed() >= hold, "the ends were not held");
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

/// A memory store whose every flush takes `took` (a database's round trip
/// and commit), counting its syncs.
struct Slow {
    store: MemoryStore,
    took: Duration,
    syncs: Arc<AtomicU64>,
}

impl Store for Slow {
    fn replay(&mut self) -> Result<gearshift_store::Replayed, gearshift_store::StoreError> {
        self.store.replay()
    }
    fn append(&mut self, ops: &[StoreOp]) {
        self.store.append(ops);
    }
    fn discard(&mut self) {
        self.store.discard();
    }
    fn flush(&mut self) -> Result<(), gearshift_store::StoreError> {
        std::thread::sleep(self.took);
        self.store.flush()
    }
    fn sync(&mut self) -> Result<(), gearshift_store::StoreError> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

/// A store thread with `company` over a store whose flushes take `took`.
fn slow_task(took: Duration, company: Duration) -> (StoreTask, mpsc::Receiver<Commit>) {
    let (tx, rx) = mpsc::channel();
    let deliver: Deliver = Box::new(move |c| {
        let _ = tx.send(c);
    });
    let store = Slow {
        store: MemoryStore::new(),
        took,
        syncs: Arc::default(),
    };
    let timing = Timing {
        company: Some(company),
        ..Timing::default()
    };
    let task =
        StoreTask::spawn(Box::new(store), deliver, timing, Arc::default()).expect("store thread");
    (task, rx)
}

#[test]
fn a_smaller_group_waits_for_the_last_commits_submitters() {
    // The last commit's time is the bound: 200 ms, far beyond the gap.
    let (mut task, rx) = slow_task(Duration::from_millis(200), Duration::from_secs(1));
    task.submit(vec![StoreOp::Add(job(1)), StoreOp::Add(job(2))]);
    assert_eq!(stored(&rx), vec![1, 2]);
    task.submit(vec![StoreOp::Add(job(3))]);
    std::thread::sleep(Duration::from_millis(5));
    task.submit(vec![StoreOp::Add(job(4))]);
    assert_eq!(
        stored(&rx),
        vec![3, 4],
        "the two were not committed together"
    );
    task.finish();
}

#[test]
fn the_wait_for_company_is_bounded() {
    let company = Duration::from_millis(50);
    let took = Duration::from_millis(200);
    let (mut task, rx) = slow_task(took, company);
    task.submit(vec![StoreOp::Add(job(1)), StoreOp::Add(job(2))]);
    assert_eq!(stored(&rx), vec![1, 2]);
    let sent = Instant::now();
    task.submit(vec![StoreOp::Add(job(3))]);
    assert_eq!(stored(&rx), vec![3], "a lone submission was not written");
    assert!(sent.elapsed() >= company + took, "it did not wait");
    task.finish();
}

#[test]
fn a_store_call_runs_after_the_batches_before_it_even_held_ones() {
    // A long hold: the end would wait for company, but the call behind it
    // must find it written.
    let (mut task, view, rx) = task(Duration::from_secs(30));
    task.submit(vec![StoreOp::Add(job(1)), StoreOp::Add(job(2))]);
    assert_eq!(stored(&rx), vec![1, 2]);
    task.submit(vec![StoreOp::Done(1)]);
    let (tx, seen) = mpsc::channel();
    let probe = view.reopen();
    task.call(Box::new(move |committer| {
        let _ = tx.send((live(&probe), committer.repartition().is_none()));
    }));
    let (live_then, plain) = seen
        .recv_timeout(Duration::from_secs(5))
        .expect("the call ran");
    assert_eq!(
        live_then,
        vec![2],
        "the end queued before the call was written first"
    );
    assert!(plain, "a memory store has no partitions to change");
    task.finish();
}

#[test]
fn forgetting_unwritten_ops_keeps_the_other_functions() {
    let mut c = Committer::new(Box::new(MemoryStore::new()), Arc::default());
    let mut other = job(2);
    other.function = Bytes::from_static(b"g");
    c.unwritten = vec![StoreOp::Add(job(1)), StoreOp::Add(other), StoreOp::Done(3)];
    c.forget_unwritten(&|f: &[u8]| f == b"f");
    assert_eq!(c.unwritten.len(), 2);
    assert!(matches!(&c.unwritten[0], StoreOp::Add(j) if j.id == 2));
    assert!(matches!(c.unwritten[1], StoreOp::Done(3)));
}

#[test]
fn failed_commits_and_syncs_are_counted() {
    let faulty = gearshift_store::fault::FaultyStore::new(MemoryStore::new(), 0);
    let budget = faulty.budget();
    let stats = Arc::new(StoreStats::default());
    let mut c = Committer::new(Box::new(faulty), stats.clone());
    assert_eq!(stats.snapshot().last_failure_ms, None);
    let before = crate::clock::unix_ms();
    assert!(matches!(c.commit([vec![StoreOp::Add(job(1))]]), Commit::Failed(ids, _) if ids == [1]));
    assert_eq!(stats.snapshot().failures, 1);
    let at = stats.snapshot().last_failure_ms.expect("a time");
    assert!((before..=crate::clock::unix_ms()).contains(&at));
    // Healed: the next commit is stored, and the count and time stay.
    budget.store(1_000, std::sync::atomic::Ordering::SeqCst);
    assert!(matches!(c.commit([vec![StoreOp::Add(job(2))]]), Commit::Stored(ids) if ids == [2]));
    assert_eq!(stats.snapshot().failures, 1);
    assert_eq!(stats.snapshot().last_failure_ms, Some(at));
}

#[test]
fn a_handle_reservation_is_synced_as_soon_as_it_is_answered() {
    // `interval` durability whose next sync is an hour away: a power loss
    // must not take a reservation whose handles may be given out sooner.
    let syncs = Arc::new(AtomicU64::new(0));
    let store = Slow {
        store: MemoryStore::new(),
        took: Duration::ZERO,
        syncs: syncs.clone(),
    };
    let (tx, rx) = mpsc::channel();
    let deliver: Deliver = Box::new(move |c| {
        let _ = tx.send(c);
    });
    let timing = Timing {
        sync_every: Some(Duration::from_secs(3600)),
        ..Timing::default()
    };
    let mut task =
        StoreTask::spawn(Box::new(store), deliver, timing, Arc::default()).expect("store thread");
    // Written inline by the hub (the thread idle), not synced.
    assert!(task.submit(vec![StoreOp::Add(job(1))]).is_some());
    // A reservation goes to the thread, which syncs it after answering.
    assert!(task
        .submit(vec![StoreOp::Add(job(2)), StoreOp::Reserve(100_000)])
        .is_none());
    assert_eq!(stored(&rx), vec![2]);
    eventually("the reservation was not synced", || {
        syncs.load(Ordering::SeqCst) == 1
    });
    assert!(task.submit(vec![StoreOp::Add(job(3))]).is_some());
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(syncs.load(Ordering::SeqCst), 1, "no sync without one");
    task.finish();
}
