//! Retried and dead jobs in the log store's compaction: a compacted file
//! keeps each dead job (its Add, then a Dead op with its mark) and each
//! retried job's latest attempts and due time (patched into its Add), and
//! the rule for when to compact counts dead jobs' records as live.

use std::fs;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use gearshift_store::conformance::{job, mark};
use gearshift_store::log::{frame, FILE_NAME};
use gearshift_store::{
    DeadMark, Durability, JobRecord, LogOptions, LogStore, MemoryStore, Op, Replayed, Store,
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

fn big(id: u64, size: usize) -> JobRecord {
    let data: Vec<u8> = (0..size).map(|i| (i as u64 ^ id) as u8).collect();
    job(id, "resize", &format!("u{id}"), 1, &data)
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
    fn retry(&mut self, id: u64, attempts: u32, due_ms: Option<u64>) {
        self.log.retry(id, attempts, due_ms);
        self.mem.retry(id, attempts, due_ms);
    }
    fn dead(&mut self, id: u64, attempts: u32, m: &DeadMark) {
        self.log.dead(id, attempts, m);
        self.mem.dead(id, attempts, m);
    }
    fn flush(&mut self) {
        self.log.flush().expect("flush log");
        self.mem.flush().expect("flush memory");
    }
}

#[test]
fn compaction_keeps_dead_jobs_and_retried_jobs_latest_attempts_and_due() {
    for background in [false, true] {
        let dir = TempDir::new().expect("tempdir");
        let mut log = LogStore::open(dir.path(), opts(0, background)).expect("open");
        log.replay().expect("replay");
        let mut b = Both {
            log,
            mem: MemoryStore::new(),
        };
        let n = 400u64;
        for id in 1..=n {
            b.add(&big(id, 1000));
            if id % 50 == 0 {
                b.flush();
            }
        }
        b.flush();
        for id in 1..=n {
            match id % 10 {
                0 => {
                    b.retry(id, 1, Some(1_900_000_000_000 + id));
                    b.retry(id, 2, Some(1_900_000_000_500 + id));
                }
                1 => {
                    b.retry(id, 1, Some(1_900_000_000_000));
                    b.dead(id, 3, &mark(1_700_000_000_000 + id, &format!("error {id}")));
                }
                2 => {
                    // Dead, then revived with no due time.
                    b.dead(id, 3, &mark(1, "first life"));
                    b.retry(id, 0, None);
                }
                3 => {}
                _ => b.done(id),
            }
        }
        b.flush();
        if background {
            b.log.finish_compaction().expect("compaction");
        }
        assert!(
            b.log.compactions() >= 1,
            "background {background}: the flush of the ends compacted"
        );
        let want = b.mem.reopen().replay().expect("reference replay");
        assert_eq!(want.jobs.len() as u64, 3 * n / 10);
        assert_eq!(want.dead.len() as u64, n / 10);
        drop(b);
        let got = reopened(dir.path());
        assert_eq!(
            got, want,
            "background {background}: replay after compaction"
        );
        // The compacted file: a reservation, then each stored job's Add as
        // it stands now, a dead one's followed by its Dead op; no Retry is
        // left (its effect is in the Add).
        let ops = ops_on_disk(dir.path());
        assert!(matches!(ops.first(), Some(Op::Reserve(_))));
        let mut dead = want.dead.iter();
        let mut live = want.jobs.iter();
        let mut rest = ops[1..].iter().peekable();
        while let Some(op) = rest.next() {
            let Op::Add(r) = op else {
                panic!("background {background}: unexpected {op:?} in a compacted file");
            };
            if let Some(Op::Dead { id, attempts, mark }) = rest.peek() {
                rest.next();
                let (want_r, want_mark) = dead.next().expect("a dead job");
                assert_eq!((*id, *attempts), (want_r.id, want_r.attempts));
                assert_eq!(mark, want_mark);
                assert_eq!(r, want_r, "the Add carries the last due time and count");
            } else {
                assert_eq!(Some(r), live.next());
            }
        }
        assert!(dead.next().is_none() && live.next().is_none());
    }
}

#[test]
fn dead_jobs_count_as_live_bytes_for_the_compaction_rule() {
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("open");
    s.replay().expect("replay");
    for id in 1..=50 {
        s.add(&big(id, 4000));
    }
    s.flush().expect("flush");
    for id in 1..=50 {
        s.dead(id, 5, &mark(id, "gave up"));
    }
    s.flush().expect("flush");
    // Only headers are obsolete: a compaction would gain nothing.
    assert_eq!(s.compactions(), 0, "dead jobs are not garbage");
    drop(s);
    // The same once the sizes come from reading the file back.
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("reopen");
    let r = s.replay().expect("replay");
    assert_eq!((r.jobs.len(), r.dead.len()), (0, 50));
    s.add(&big(51, 10));
    s.flush().expect("flush");
    assert_eq!(
        s.compactions(),
        0,
        "dead jobs are not garbage after a reopen"
    );
    // Dropping most of them makes the file worth compacting.
    for id in 1..=40 {
        s.done(id);
    }
    s.flush().expect("flush");
    assert_eq!(s.compactions(), 1, "the dropped dead jobs are garbage");
    drop(s);
    let r = reopened(dir.path());
    let dead: Vec<u64> = r.dead.iter().map(|(j, _)| j.id).collect();
    assert_eq!(dead, (41..=50).collect::<Vec<u64>>());
    assert_eq!(r.dead[0].1, mark(41, "gave up"));
    assert_eq!(r.dead[0].0.attempts, 5);
    assert_eq!(r.jobs, vec![big(51, 10)]);
}

#[test]
fn revived_jobs_marks_are_garbage_for_the_compaction_rule() {
    // Dead ops with long errors, then every job revived: the marks are
    // obsolete and outweigh the (small) jobs, so the file is compacted.
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("open");
    s.replay().expect("replay");
    let error = "e".repeat(2000);
    for id in 1..=20 {
        s.add(&big(id, 100));
    }
    s.flush().expect("flush");
    for id in 1..=20 {
        s.dead(id, 1, &mark(id, &error));
    }
    s.flush().expect("flush");
    assert_eq!(s.compactions(), 0, "the marks of dead jobs are not garbage");
    drop(s);
    // Nor once the sizes come from reading the file back.
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("reopen");
    s.replay().expect("replay");
    s.reserve(100);
    s.flush().expect("flush");
    assert_eq!(
        s.compactions(),
        0,
        "the marks are not garbage after a reopen"
    );
    for id in 1..=20 {
        s.retry(id, 2, None);
    }
    s.flush().expect("flush");
    assert_eq!(s.compactions(), 1, "revived jobs' marks are garbage");
    drop(s);
    let r = reopened(dir.path());
    assert!(r.dead.is_empty());
    assert!(r.jobs.iter().all(|j| j.attempts == 2 && j.due_ms.is_none()));
    assert_eq!(r.jobs.len(), 20);
}
