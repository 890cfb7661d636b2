//! Schedules in the log store's compaction: a compacted file keeps each
//! live schedule's latest Schedule op (and nothing of dropped ones), and
//! the rule for when to compact counts those as live and every older
//! version as garbage, at flush and after a reopen.

use std::fs;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use gearshift_store::conformance::{job, sched};
use gearshift_store::log::{frame, FILE_NAME};
use gearshift_store::{
    Durability, JobRecord, LogOptions, LogStore, MemoryStore, Op, Replayed, ScheduleRecord, Store,
};
use tempfile::TempDir;

fn opts(compact_min_bytes: u64, background_compaction: bool) -> LogOptions {
    LogOptions {
        durability: Durability::Interval(Duration::from_secs(60)),
        compact_min_bytes,
        background_compaction,
        ..LogOptions::default()
    }
}

/// A schedule with `size` bytes of data and this next firing.
fn big(id: u64, size: usize, next_ms: u64) -> ScheduleRecord {
    let mut r = sched(id, "*/5 * * * *", Some(next_ms));
    r.data = (0..size).map(|i| (i as u64 ^ next_ms) as u8).collect();
    r
}

/// Every op of the log file in `dir`, in order.
fn ops_on_disk(dir: &Path) -> Vec<Op> {
    let bytes = Bytes::from(fs::read(dir.join(FILE_NAME)).expect("read log"));
    let mut ops = Vec::new();
    frame::scan(&bytes, |op, _| ops.push(op)).expect("scan");
    ops
}

fn reopened(dir: &Path) -> Replayed {
    LogStore::open(dir, opts(u64::MAX, false))
        .expect("reopen")
        .replay()
        .expect("replay")
}

/// The same calls on the log store and on the in-memory reference.
struct Both {
    log: LogStore,
    mem: MemoryStore,
}

impl Both {
    fn add(&mut self, r: &JobRecord) {
        self.log.add(r);
        self.mem.add(r);
    }
    fn done(&mut self, id: u64) {
        self.log.done(id);
        self.mem.done(id);
    }
    fn schedule(&mut self, r: &ScheduleRecord) {
        self.log.schedule(r);
        self.mem.schedule(r);
    }
    fn unschedule(&mut self, id: u64) {
        self.log.unschedule(id);
        self.mem.unschedule(id);
    }
    fn flush(&mut self) {
        self.log.flush().expect("flush log");
        self.mem.flush().expect("flush memory");
    }
}

#[test]
fn compaction_keeps_each_live_schedules_latest_version() {
    for background in [false, true] {
        let dir = TempDir::new().expect("tempdir");
        let mut log = LogStore::open(dir.path(), opts(0, background)).expect("open");
        log.replay().expect("replay");
        let mut b = Both {
            log,
            mem: MemoryStore::new(),
        };
        // Schedules 1..=30 among jobs 31..=230, each schedule rewritten
        // several times (its next firing moves on), a third dropped, and
        // the jobs ended: garbage enough to compact.
        for id in 1..=30 {
            b.schedule(&big(id, 200, 1_000));
        }
        b.flush();
        for id in 31..=230 {
            b.add(&job(id, "f", "", 1, &[id as u8; 500]));
        }
        b.flush();
        for round in 1..=4u64 {
            for id in 1..=30 {
                b.schedule(&big(id, 200, 1_000 + round * 60_000));
            }
            b.flush();
        }
        for id in (1..=30).step_by(3) {
            b.unschedule(id);
        }
        // A Done of a schedule's id leaves it alone.
        b.done(2);
        for id in 31..=230 {
            b.done(id);
        }
        b.add(&job(231, "f", "", 1, b"still here"));
        b.flush();
        if background {
            b.log.finish_compaction().expect("compaction");
        }
        assert!(
            b.log.compactions() >= 1,
            "background {background}: the flush of the ends compacted"
        );
        let want = b.mem.reopen().replay().expect("reference replay");
        assert_eq!(want.schedules.len(), 20);
        assert!(want.schedules.iter().all(|s| s.next_ms == Some(241_000)));
        drop(b);
        let got = reopened(dir.path());
        assert_eq!(
            got, want,
            "background {background}: replay after compaction"
        );
        // The compacted file: a reservation, each live schedule's latest
        // version in id order, then the job; nothing of older versions or
        // dropped schedules.
        let ops = ops_on_disk(dir.path());
        let mut want_ops = vec![Op::Reserve(232)];
        want_ops.extend(want.schedules.iter().cloned().map(Op::Schedule));
        want_ops.push(Op::Add(job(231, "f", "", 1, b"still here")));
        assert_eq!(ops, want_ops, "background {background}: compacted file");
    }
}

#[test]
fn a_background_compaction_keeps_schedule_ops_flushed_while_it_ran() {
    // Schedule ops in the frames flushed while the compaction ran are
    // copied after its prefix, and replay applies them to what it kept.
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), opts(0, true)).expect("open");
    s.replay().expect("replay");
    for id in 1..=5 {
        s.schedule(&big(id, 100, 1));
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
    s.schedule(&big(2, 100, 2));
    s.unschedule(3);
    s.schedule(&big(6, 100, 2));
    s.flush().expect("flush");
    s.finish_compaction().expect("compaction");
    assert!(s.compactions() >= 1);
    drop(s);
    let r = reopened(dir.path());
    assert_eq!(
        r.schedules,
        vec![
            big(1, 100, 1),
            big(2, 100, 2),
            big(4, 100, 1),
            big(5, 100, 1),
            big(6, 100, 2)
        ]
    );
    assert!(r.jobs.is_empty());
    assert!(r.next_id > 400);
}

#[test]
fn live_schedules_are_not_garbage_but_their_old_versions_are() {
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("open");
    s.replay().expect("replay");
    for id in 1..=20 {
        s.schedule(&big(id, 4000, 1));
    }
    s.flush().expect("flush");
    s.reserve(100);
    s.flush().expect("flush");
    // Only headers are obsolete: a compaction would gain nothing.
    assert_eq!(s.compactions(), 0, "live schedules are not garbage");
    drop(s);
    // The same once the sizes come from reading the file back.
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("reopen");
    assert_eq!(s.replay().expect("replay").schedules.len(), 20);
    s.reserve(101);
    s.flush().expect("flush");
    assert_eq!(
        s.compactions(),
        0,
        "live schedules are not garbage after a reopen"
    );
    // New versions of half of them: the old versions are garbage, but not
    // yet more than what is live.
    for id in 1..=10 {
        s.schedule(&big(id, 4000, 2));
    }
    s.flush().expect("flush");
    assert_eq!(s.compactions(), 0, "garbage does not outweigh live yet");
    drop(s);
    // After a reopen the older versions count as garbage too: new versions
    // of the other half tip the balance.
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("reopen");
    s.replay().expect("replay");
    for id in 11..=20 {
        s.schedule(&big(id, 4000, 2));
    }
    s.flush().expect("flush");
    assert_eq!(s.compactions(), 1, "superseded versions are garbage");
    let len = s.file_len();
    drop(s);
    let r = reopened(dir.path());
    let want: Vec<ScheduleRecord> = (1..=20).map(|id| big(id, 4000, 2)).collect();
    assert_eq!(r.schedules, want);
    let one: u64 = (1..=20)
        .map(|id| Op::Schedule(big(id, 4000, 2)).encode(&mut Vec::new()) as u64)
        .sum();
    assert!(len < one + 100, "the compacted file holds one version each");
}

#[test]
fn dropped_schedules_are_garbage() {
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("open");
    s.replay().expect("replay");
    for id in 1..=20 {
        s.schedule(&big(id, 4000, 1));
    }
    s.flush().expect("flush");
    drop(s);
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("reopen");
    s.replay().expect("replay");
    for id in 1..=9 {
        s.unschedule(id);
    }
    s.flush().expect("flush");
    assert_eq!(s.compactions(), 0, "9 of 20 dropped: not worth it yet");
    s.unschedule(10);
    s.unschedule(11);
    s.flush().expect("flush");
    assert_eq!(s.compactions(), 1, "11 of 20 dropped: compacted");
    drop(s);
    let r = reopened(dir.path());
    let ids: Vec<u64> = r.schedules.iter().map(|s| s.id).collect();
    assert_eq!(ids, (12..=20).collect::<Vec<u64>>());
}
