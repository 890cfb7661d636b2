//! Scaffolding the log store's tests share: a store opened in a fresh
//! directory, its file read back op by op, the same calls on the log store
//! and on the in-memory reference, and the checks of the compaction rule
//! that schedules and kept records share (both are kept by id apart from
//! jobs, each new version replacing the last).

// Each test file uses a part of this.
#![allow(dead_code)]

use std::fs;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use gearshift_store::conformance::{job, kept, sched};
use gearshift_store::log::{frame, FILE_NAME};
use gearshift_store::{
    Durability, JobRecord, KeptRecord, LogOptions, LogStore, MemoryStore, Op, Replayed,
    ScheduleRecord, Store,
};
use tempfile::TempDir;

/// Interval durability (no fsync in the way), compacting once the file is
/// past `compact_min_bytes` and worth it, on a thread of its own if
/// `background_compaction`.
pub fn opts(compact_min_bytes: u64, background_compaction: bool) -> LogOptions {
    LogOptions {
        durability: Durability::Interval(Duration::from_secs(60)),
        compact_min_bytes,
        background_compaction,
        ..LogOptions::default()
    }
}

/// A log store opened with `opts` in a fresh directory, replayed (empty).
pub fn fresh(opts: LogOptions) -> (TempDir, LogStore) {
    let dir = TempDir::new().expect("tempdir");
    let (s, _) = reopen(dir.path(), opts);
    (dir, s)
}

/// The log store in `dir` opened with `opts`, and its replay.
pub fn reopen(dir: &Path, opts: LogOptions) -> (LogStore, Replayed) {
    let mut s = LogStore::open(dir, opts).expect("open");
    let r = s.replay().expect("replay");
    (s, r)
}

/// What the log store in `dir` replays, opened with `opts`.
pub fn replayed(dir: &Path, opts: LogOptions) -> Replayed {
    reopen(dir, opts).1
}

/// What the log store in `dir` replays, opened never to compact.
pub fn reopened(dir: &Path) -> Replayed {
    replayed(dir, opts(u64::MAX, false))
}

/// Flushes `s` and counts its compactions so far.
pub fn compactions_after_flush(s: &mut LogStore) -> u64 {
    s.flush().expect("flush");
    s.compactions()
}

/// The bytes of the log file in `dir`.
pub fn log_file(dir: &Path) -> Vec<u8> {
    fs::read(dir.join(FILE_NAME)).expect("read log")
}

/// Every op of the log file in `dir`, in order.
pub fn ops_on_disk(dir: &Path) -> Vec<Op> {
    let bytes = Bytes::from(log_file(dir));
    let mut ops = Vec::new();
    frame::scan(&bytes, |op, _| ops.push(op)).expect("scan");
    ops
}

/// The ops of a compacted file: a reservation up to `next_id`, then
/// `records`, then the Add of `last`.
pub fn compacted(next_id: u64, records: Vec<Op>, last: JobRecord) -> Vec<Op> {
    let mut ops = vec![Op::Reserve(next_id)];
    ops.extend(records);
    ops.push(Op::Add(last));
    ops
}

/// The same calls on a log store (in a directory of its own, compacting
/// whenever that is worth it) and on the in-memory reference.
pub struct Both {
    pub dir: TempDir,
    pub log: LogStore,
    pub mem: MemoryStore,
    /// Whether the log store compacts on a thread of its own.
    pub background: bool,
}

impl Both {
    /// An empty log store and an empty reference.
    pub fn new(background: bool) -> Both {
        let (dir, log) = fresh(opts(0, background));
        Both {
            dir,
            log,
            mem: MemoryStore::new(),
            background,
        }
    }

    /// Makes the same calls on both.
    pub fn each(&mut self, mut calls: impl FnMut(&mut dyn Store)) {
        calls(&mut self.log);
        calls(&mut self.mem);
    }

    pub fn flush(&mut self) {
        self.log.flush().expect("flush log");
        self.mem.flush().expect("flush memory");
    }

    /// Flushes both, and waits for a compaction the flush started on its
    /// thread.
    pub fn flush_and_finish(&mut self) {
        self.flush();
        if self.background {
            self.log.finish_compaction().expect("compaction");
        }
    }

    /// What the reference replays, checked to be what the log store
    /// replays after a reopen; and every op of the log file.
    pub fn replay_both(self) -> (Replayed, Vec<Op>) {
        let want = self.mem.reopen().replay().expect("reference replay");
        drop(self.log);
        let got = reopened(self.dir.path());
        let background = self.background;
        assert_eq!(
            got, want,
            "background {background}: replay after compaction"
        );
        (want, ops_on_disk(self.dir.path()))
    }
}

/// A schedule with `size` bytes of data and this next firing.
pub fn big_schedule(id: u64, size: usize, next_ms: u64) -> ScheduleRecord {
    let mut r = sched(id, "*/5 * * * *", Some(next_ms));
    r.data = (0..size).map(|i| (i as u64 ^ next_ms) as u8).collect();
    r
}

/// A kept record with a result of `size` bytes and this expiry.
pub fn big_kept(id: u64, size: usize, expires_ms: u64) -> KeptRecord {
    let result: Vec<u8> = (0..size).map(|i| (i as u64 ^ expires_ms) as u8).collect();
    let mut k: KeptRecord = kept(id, (id % 3) as u8, &result);
    k.expires_ms = expires_ms;
    k
}

/// The records the log keeps by id apart from jobs, each new version
/// replacing the last.
#[derive(Debug, Clone, Copy)]
pub enum Versioned {
    /// Schedules: a version is a next firing; Unschedule ends one.
    Schedules,
    /// Finished jobs' kept records: a version is an expiry; Forget ends one.
    Kept,
}

impl Versioned {
    /// The op storing record `id` with `size` bytes of payload at this
    /// version ([`big_schedule`], [`big_kept`]).
    pub fn op(self, id: u64, size: usize, version: u64) -> Op {
        match self {
            Versioned::Schedules => Op::Schedule(big_schedule(id, size, version)),
            Versioned::Kept => Op::Kept(Box::new(big_kept(id, size, version))),
        }
    }

    /// Stores record `id` with `size` bytes of payload at this version.
    pub fn store(self, s: &mut dyn Store, id: u64, size: usize, version: u64) {
        match self {
            Versioned::Schedules => s.schedule(&big_schedule(id, size, version)),
            Versioned::Kept => s.kept(&big_kept(id, size, version)),
        }
    }

    /// Ends record `id`.
    pub fn end(self, s: &mut dyn Store, id: u64) {
        match self {
            Versioned::Schedules => s.unschedule(id),
            Versioned::Kept => s.forget(id),
        }
    }

    /// The ops storing the records of this kind a replay returned, in its
    /// order.
    pub fn replayed(self, r: &Replayed) -> Vec<Op> {
        match self {
            Versioned::Schedules => r.schedules.iter().cloned().map(Op::Schedule).collect(),
            Versioned::Kept => r
                .kept
                .iter()
                .cloned()
                .map(|k| Op::Kept(Box::new(k)))
                .collect(),
        }
    }

    /// What messages call the live records, and an ended one.
    fn words(self) -> (&'static str, &'static str) {
        match self {
            Versioned::Schedules => ("live schedules", "dropped"),
            Versioned::Kept => ("kept records", "forgotten"),
        }
    }
}

/// Records 1..=20 of `kind` (`size` 4000, version 1) flushed to a log
/// store in a fresh directory, compacting whenever that is worth it.
fn twenty_stored(kind: Versioned) -> (TempDir, LogStore) {
    let (dir, mut s) = fresh(opts(0, false));
    for id in 1..=20 {
        kind.store(&mut s, id, 4000, 1);
    }
    s.flush().expect("flush");
    (dir, s)
}

/// The size rule for records of `kind`: each one's latest version is live,
/// never garbage (at flush and once the sizes come from reading the file
/// back), and the older versions are garbage once a reopen has read them:
/// the compacted file holds the latest versions only.
pub fn latest_versions_live_older_ones_garbage(kind: Versioned) {
    let (live, _) = kind.words();
    let (dir, mut s) = twenty_stored(kind);
    s.reserve(100);
    // Only headers are obsolete: a compaction would gain nothing.
    let why = format!("{live} are not garbage");
    assert_eq!(compactions_after_flush(&mut s), 0, "{why}");
    drop(s);
    // The same once the sizes come from reading the file back.
    let (mut s, r) = reopen(dir.path(), opts(0, false));
    assert_eq!(kind.replayed(&r).len(), 20);
    s.reserve(101);
    assert_eq!(compactions_after_flush(&mut s), 0, "{why} after a reopen");
    // New versions of half of them: the old versions are garbage, but not
    // yet more than what is live.
    for id in 1..=10 {
        kind.store(&mut s, id, 4000, 2);
    }
    let why = "garbage does not outweigh live yet";
    assert_eq!(compactions_after_flush(&mut s), 0, "{why}");
    drop(s);
    // After a reopen the older versions count as garbage too: new versions
    // of the other half tip the balance.
    let (mut s, _) = reopen(dir.path(), opts(0, false));
    for id in 11..=20 {
        kind.store(&mut s, id, 4000, 2);
    }
    let why = "superseded versions are garbage";
    assert_eq!(compactions_after_flush(&mut s), 1, "{why}");
    let len = s.file_len();
    drop(s);
    let latest: Vec<Op> = (1..=20).map(|id| kind.op(id, 4000, 2)).collect();
    assert_eq!(kind.replayed(&reopened(dir.path())), latest);
    let one: u64 = latest
        .iter()
        .map(|op| op.encode(&mut Vec::new()) as u64)
        .sum();
    assert!(len < one + 100, "the compacted file holds one version each");
}

/// The size rule for records of `kind`: ended ones are garbage, 9 of 20
/// not yet worth a compaction, 11 of 20 worth one; the compacted file
/// holds the other 9.
pub fn ended_records_are_garbage(kind: Versioned) {
    let (_, ended) = kind.words();
    let (dir, s) = twenty_stored(kind);
    drop(s);
    let (mut s, _) = reopen(dir.path(), opts(0, false));
    for id in 1..=9 {
        kind.end(&mut s, id);
    }
    let why = format!("9 of 20 {ended}: not worth it yet");
    assert_eq!(compactions_after_flush(&mut s), 0, "{why}");
    kind.end(&mut s, 10);
    kind.end(&mut s, 11);
    let why = format!("11 of 20 {ended}: compacted");
    assert_eq!(compactions_after_flush(&mut s), 1, "{why}");
    drop(s);
    let left: Vec<Op> = (12..=20).map(|id| kind.op(id, 4000, 1)).collect();
    assert_eq!(kind.replayed(&reopened(dir.path())), left);
}

/// Records 1..=5 of `kind` (`size` 100, version 1) among jobs 10..=400
/// that all end: the flush of the ends starts a background compaction, and
/// `meanwhile` is flushed while it runs. Returns what the file replays
/// once the compaction is done (no job left; ids reserved past them).
pub fn during_a_background_compaction(
    kind: Versioned,
    meanwhile: impl FnOnce(&mut LogStore),
) -> Replayed {
    let (dir, mut s) = fresh(opts(0, true));
    for id in 1..=5 {
        kind.store(&mut s, id, 100, 1);
    }
    for id in 10..=400 {
        s.add(&job(id, "f", "", 1, &[1; 1000]));
    }
    s.flush().expect("flush");
    for id in 10..=400 {
        s.done(id);
    }
    s.flush().expect("flush starts a compaction");
    assert!(s.compacting() || s.compactions() > 0);
    meanwhile(&mut s);
    s.flush().expect("flush");
    s.finish_compaction().expect("compaction");
    assert!(s.compactions() >= 1);
    drop(s);
    let r = reopened(dir.path());
    assert!(r.jobs.is_empty());
    assert!(r.next_id > 400);
    r
}
