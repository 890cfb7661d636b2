//! Failures without a broken disk: injected flush errors (`FaultyStore`),
//! directories the log cannot use, a data directory already in use, and
//! the leftovers of a crash during compaction. (A real full disk and a
//! read-only file system are in `disk_full.rs`.)
//!
//! The rule under test: a failed flush stores nothing of its batch, and
//! the store works again once the cause is gone; a place the log cannot
//! use is an error, never a panic.

mod common;

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Arc;

use common::replayed;
use gearshift_store::conformance::job;
use gearshift_store::fault::FaultyStore;
use gearshift_store::log::FILE_NAME;
use gearshift_store::{
    JobRecord, LogOptions, LogStore, MemoryStore, Op, Replayed, Store, StoreError,
};
use tempfile::TempDir;

fn ids(jobs: &[JobRecord]) -> Vec<u64> {
    jobs.iter().map(|j| j.id).collect()
}

/// A log store (default options) in a fresh directory behind a fault
/// wrapper with a budget of `ops` ops, replayed; and the wrapper's budget.
fn faulty_log(ops: i64) -> (TempDir, FaultyStore<LogStore>, Arc<AtomicI64>) {
    let dir = TempDir::new().expect("tempdir");
    let log = LogStore::open(dir.path(), LogOptions::default()).expect("open");
    let mut s = FaultyStore::new(log, ops);
    let budget = s.budget();
    s.replay().expect("replay");
    (dir, s, budget)
}

/// Restores the budget, flushes what is left (nothing: a failed batch is
/// gone), closes the store and returns what the log in `dir` replays.
fn healed(mut s: FaultyStore<LogStore>, budget: &AtomicI64, dir: &Path) -> Replayed {
    budget.store(100, Ordering::SeqCst);
    s.flush().expect("nothing left to write");
    drop(s);
    replayed(dir, LogOptions::default())
}

#[test]
fn a_flush_past_the_budget_stores_nothing_and_healing_resumes() {
    let (dir, mut s, budget) = faulty_log(5);
    for id in 1..=3 {
        s.add(&job(id, "f", "", 1, b"ok"));
    }
    s.flush().expect("within budget");

    // This batch needs 5 more ops, only 2 are left.
    s.add(&job(4, "f", "", 1, b"lost"));
    s.add(&job(5, "f", "", 1, b"lost"));
    s.done(1);
    s.update(2, 9);
    s.reserve(1_000);
    match s.flush() {
        Err(StoreError::Injected(msg)) => assert!(msg.contains("no space"), "{msg}"),
        other => panic!("expected an injected fault, got {other:?}"),
    }
    // Still out of budget: even an empty flush fails.
    assert!(s.flush().is_err(), "an exhausted budget fails every flush");

    budget.store(100, Ordering::SeqCst);
    s.add(&job(6, "f", "", 1, b"after healing"));
    s.flush().expect("flush after the budget is restored");
    drop(s);

    let r = replayed(dir.path(), LogOptions::default());
    let got: Vec<(u64, u32)> = r.jobs.iter().map(|j| (j.id, j.attempts)).collect();
    assert_eq!(
        got,
        vec![(1, 0), (2, 0), (3, 0), (6, 0)],
        "nothing of the failed batch (adds, done, update) is replayed"
    );
    assert!(r.next_id > 6);
}

#[test]
fn a_failed_flush_stores_none_of_its_schedule_ops() {
    use gearshift_store::conformance::sched;
    let (dir, mut s, budget) = faulty_log(2);
    s.schedule(&sched(1, "* * * * *", Some(10)));
    s.schedule(&sched(2, "* * * * *", Some(10)));
    s.flush().expect("within budget");
    // Three ops, none left: a new version, a drop and a new schedule.
    s.schedule(&sched(1, "* * * * *", Some(20)));
    s.unschedule(2);
    s.schedule(&sched(3, "* * * * *", None));
    assert!(matches!(s.flush(), Err(StoreError::Injected(_))));
    let r = healed(s, &budget, dir.path());
    assert_eq!(
        r.schedules,
        vec![
            sched(1, "* * * * *", Some(10)),
            sched(2, "* * * * *", Some(10))
        ],
        "nothing of the failed batch is replayed"
    );
}

#[test]
fn a_failed_flush_stores_none_of_its_kept_ops() {
    use gearshift_store::conformance::kept;
    let (dir, mut s, budget) = faulty_log(3);
    s.add(&job(1, "f", "", 1, b"x"));
    s.kept(&kept(2, 0, b"two"));
    s.kept(&kept(3, 1, b"three"));
    s.flush().expect("within budget");
    // Four ops, none left: a job's end and keeping, a new version, a drop.
    s.done(1);
    s.kept(&kept(1, 0, b"one"));
    s.kept(&kept(2, 0, b"two, kept longer"));
    s.forget(3);
    assert!(matches!(s.flush(), Err(StoreError::Injected(_))));
    let r = healed(s, &budget, dir.path());
    assert_eq!(ids(&r.jobs), vec![1]);
    assert_eq!(
        r.kept,
        vec![kept(2, 0, b"two"), kept(3, 1, b"three")],
        "nothing of the failed batch is replayed"
    );
}

#[test]
fn a_failed_batch_never_leaks_into_the_next_flush_of_a_memory_store() {
    let base = MemoryStore::new();
    let mut s = FaultyStore::new(base.reopen(), 1);
    let budget = s.budget();
    s.add(&job(1, "f", "", 1, b"a"));
    s.add(&job(2, "f", "", 1, b"b"));
    assert!(s.flush().is_err(), "two ops with a budget of one");
    budget.store(1, Ordering::SeqCst);
    s.add(&job(3, "f", "", 1, b"c"));
    s.flush().expect("one op with a budget of one");
    assert_eq!(ids(&base.reopen().replay().expect("replay").jobs), vec![3]);
}

/// Counts `sync` calls reaching the wrapped store.
struct CountingSync {
    inner: MemoryStore,
    syncs: Arc<AtomicUsize>,
}

impl Store for CountingSync {
    fn replay(&mut self) -> Result<Replayed, StoreError> {
        self.inner.replay()
    }
    fn append(&mut self, ops: &[Op]) {
        self.inner.append(ops);
    }
    fn discard(&mut self) {
        self.inner.discard();
    }
    fn flush(&mut self) -> Result<(), StoreError> {
        self.inner.flush()
    }
    fn sync(&mut self) -> Result<(), StoreError> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[test]
fn the_fault_wrapper_passes_sync_through() {
    // With interval durability the server calls sync() on its store; a
    // wrapped store must still reach the disk.
    let syncs = Arc::new(AtomicUsize::new(0));
    let inner = CountingSync {
        inner: MemoryStore::new(),
        syncs: syncs.clone(),
    };
    let mut s = FaultyStore::new(inner, 10);
    s.sync().expect("sync");
    assert_eq!(
        syncs.load(Ordering::SeqCst),
        1,
        "sync reached the inner store"
    );
}

#[test]
fn a_directory_where_the_queue_file_belongs_is_an_error() {
    let dir = TempDir::new().expect("tempdir");
    fs::create_dir(dir.path().join(FILE_NAME)).expect("mkdir");
    let err = LogStore::open(dir.path(), LogOptions::default()).expect_err("must not open");
    assert!(matches!(err, StoreError::Io(_)), "{err:?}");
}

#[test]
fn a_file_where_the_data_directory_belongs_is_an_error() {
    let dir = TempDir::new().expect("tempdir");
    let not_a_dir = dir.path().join("data");
    fs::write(&not_a_dir, b"x").expect("write");
    let err = LogStore::open(&not_a_dir, LogOptions::default()).expect_err("must not open");
    assert!(matches!(err, StoreError::Io(_)), "{err:?}");
    let err =
        LogStore::open(&not_a_dir.join("below"), LogOptions::default()).expect_err("must not open");
    assert!(matches!(err, StoreError::Io(_)), "{err:?}");
}

#[test]
fn a_second_store_on_the_same_directory_is_refused_until_the_first_closes() {
    let dir = TempDir::new().expect("tempdir");
    let opts = LogOptions::default();
    let mut first = LogStore::open(dir.path(), opts).expect("open");
    first.add(&job(1, "f", "", 1, b"x"));
    first.flush().expect("flush");
    match LogStore::open(dir.path(), opts) {
        Err(e @ StoreError::Locked(_)) => {
            assert!(e.to_string().contains("in use"), "{e}");
        }
        other => panic!("expected Locked, got {other:?}"),
    }
    // The refused open touched nothing: the first store goes on.
    first.add(&job(2, "f", "", 1, b"y"));
    first.flush().expect("flush");
    drop(first);
    assert_eq!(ids(&replayed(dir.path(), opts).jobs), vec![1, 2]);
}

#[test]
#[ignore = "file permissions do not bind root: run with --ignored as an unprivileged user"]
fn a_read_only_directory_is_an_error_for_unprivileged_users() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new().expect("tempdir");
    let data = dir.path().join("data");
    fs::create_dir(&data).expect("mkdir");
    fs::set_permissions(&data, fs::Permissions::from_mode(0o555)).expect("chmod");
    // Asked for explicitly: a check that cannot apply is a failure, not a pass.
    assert!(
        fs::write(data.join("probe"), b"").is_err(),
        "a read-only directory took a write (running as root?): nothing was checked; \
         disk_full.rs has the read-only mount test for root"
    );
    let err = LogStore::open(&data, LogOptions::default()).expect_err("must not open");
    assert!(matches!(err, StoreError::Io(_)), "{err:?}");
}

#[test]
fn a_temp_file_left_by_a_crash_during_compaction_is_removed_on_open() {
    let dir = TempDir::new().expect("tempdir");
    let opts = LogOptions::default();
    let mut s = LogStore::open(dir.path(), opts).expect("open");
    s.add(&job(1, "f", "", 1, b"x"));
    s.flush().expect("flush");
    drop(s);
    let tmp = dir.path().join(format!("{FILE_NAME}.compact"));
    fs::write(&tmp, vec![7u8; 10_000]).expect("half-written temp file");
    assert_eq!(ids(&replayed(dir.path(), opts).jobs), vec![1]);
    assert!(!tmp.exists(), "the stale temp file is gone");
}
