//! Kept records (finished jobs kept with their results) in the log store's
//! compaction: a compacted file keeps each kept record's latest Kept op
//! (and nothing of forgotten ones, nor the Adds of the jobs they were),
//! and the rule for when to compact counts those as live and every older
//! version as garbage, at flush and after a reopen. Replayed records own
//! their bytes instead of pinning the file's.

use std::fs;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use gearshift_store::conformance::{job, kept};
use gearshift_store::log::{frame, FILE_NAME};
use gearshift_store::{
    Durability, JobRecord, KeptRecord, LogOptions, LogStore, MemoryStore, Op, Replayed, Store,
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

/// A kept record with a result of `size` bytes and this expiry.
fn big(id: u64, size: usize, expires_ms: u64) -> KeptRecord {
    let result: Vec<u8> = (0..size).map(|i| (i as u64 ^ expires_ms) as u8).collect();
    let mut k = kept(id, (id % 3) as u8, &result);
    k.expires_ms = expires_ms;
    k
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
    fn kept(&mut self, k: &KeptRecord) {
        self.log.kept(k);
        self.mem.kept(k);
    }
    fn forget(&mut self, id: u64) {
        self.log.forget(id);
        self.mem.forget(id);
    }
    fn flush(&mut self) {
        self.log.flush().expect("flush log");
        self.mem.flush().expect("flush memory");
    }
}

#[test]
fn compaction_keeps_each_kept_records_latest_version() {
    for background in [false, true] {
        let dir = TempDir::new().expect("tempdir");
        let mut log = LogStore::open(dir.path(), opts(0, background)).expect("open");
        log.replay().expect("replay");
        let mut b = Both {
            log,
            mem: MemoryStore::new(),
        };
        // Jobs 1..=40 finish and are kept, among jobs 41..=240 whose Adds
        // outweigh the garbage until they end; each kept record is kept
        // longer several times, a third are forgotten.
        for id in 1..=240 {
            let size = if id <= 40 { 100 } else { 500 };
            b.add(&job(id, "f", "", 1, &vec![id as u8; size]));
        }
        b.flush();
        for id in 1..=40 {
            b.done(id);
            b.kept(&big(id, 200, 1_000));
        }
        b.flush();
        for round in 1..=4u64 {
            for id in 1..=40 {
                b.kept(&big(id, 200, 1_000 + round * 60_000));
            }
            b.flush();
        }
        assert_eq!(b.log.compactions(), 0, "background {background}: not yet");
        for id in (1..=40).step_by(3) {
            b.forget(id);
        }
        // A Done of a kept id leaves it alone.
        b.done(2);
        for id in 41..=240 {
            b.done(id);
        }
        b.add(&job(241, "f", "", 1, b"still here"));
        b.flush();
        if background {
            b.log.finish_compaction().expect("compaction");
        }
        assert_eq!(
            b.log.compactions(),
            1,
            "background {background}: the flush of the ends compacted"
        );
        let want = b.mem.reopen().replay().expect("reference replay");
        assert_eq!(want.kept.len(), 26);
        assert!(want.kept.iter().all(|k| k.expires_ms == 241_000));
        drop(b);
        let got = reopened(dir.path());
        assert_eq!(
            got, want,
            "background {background}: replay after compaction"
        );
        // The compacted file: a reservation, each kept record's latest
        // version (where it lay: written in id order), then the job;
        // nothing of older versions, forgotten records or the kept jobs'
        // Adds.
        let ops = ops_on_disk(dir.path());
        let mut want_ops = vec![Op::Reserve(242)];
        want_ops.extend(want.kept.iter().cloned().map(Op::Kept));
        want_ops.push(Op::Add(job(241, "f", "", 1, b"still here")));
        assert_eq!(ops, want_ops, "background {background}: compacted file");
    }
}

#[test]
fn compaction_copies_kept_records_where_their_latest_versions_lie() {
    // Kept ops are copied as the second pass meets them, between the Adds
    // they lie among: the latest version of each, wherever it is.
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("open");
    s.replay().expect("replay");
    s.kept(&big(3, 50, 1));
    s.kept(&big(1, 50, 1));
    s.add(&job(10, "f", "", 1, b"ten"));
    s.kept(&big(2, 50, 1));
    s.flush().expect("flush");
    s.add(&job(11, "f", "", 1, b"eleven"));
    s.kept(&big(3, 50, 2));
    s.add(&job(12, "f", "", 1, &[0; 5000]));
    s.flush().expect("flush");
    s.done(12);
    s.flush().expect("flush compacts");
    assert_eq!(s.compactions(), 1);
    drop(s);
    assert_eq!(
        ops_on_disk(dir.path()),
        vec![
            Op::Reserve(13),
            Op::Kept(big(1, 50, 1)),
            Op::Add(job(10, "f", "", 1, b"ten")),
            Op::Kept(big(2, 50, 1)),
            Op::Add(job(11, "f", "", 1, b"eleven")),
            Op::Kept(big(3, 50, 2)),
        ]
    );
    let r = reopened(dir.path());
    assert_eq!(r.kept, vec![big(1, 50, 1), big(2, 50, 1), big(3, 50, 2)]);
}

#[test]
fn a_background_compaction_keeps_kept_ops_flushed_while_it_ran() {
    // Kept and Forget ops in the frames flushed while the compaction ran
    // are copied after its prefix, and replay applies them to what it kept.
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), opts(0, true)).expect("open");
    s.replay().expect("replay");
    for id in 1..=5 {
        s.kept(&big(id, 100, 1));
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
    s.kept(&big(2, 100, 2));
    s.forget(3);
    s.done(10);
    s.kept(&big(10, 100, 2));
    s.flush().expect("flush");
    s.finish_compaction().expect("compaction");
    assert!(s.compactions() >= 1);
    drop(s);
    let r = reopened(dir.path());
    assert_eq!(
        r.kept,
        vec![
            big(1, 100, 1),
            big(2, 100, 2),
            big(4, 100, 1),
            big(5, 100, 1),
            big(10, 100, 2)
        ]
    );
    assert!(r.jobs.is_empty());
    assert!(r.next_id > 400);
}

#[test]
fn kept_records_are_not_garbage_but_their_old_versions_are() {
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("open");
    s.replay().expect("replay");
    for id in 1..=20 {
        s.kept(&big(id, 4000, 1));
    }
    s.flush().expect("flush");
    s.reserve(100);
    s.flush().expect("flush");
    // Only headers are obsolete: a compaction would gain nothing.
    assert_eq!(s.compactions(), 0, "kept records are not garbage");
    drop(s);
    // The same once the sizes come from reading the file back.
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("reopen");
    assert_eq!(s.replay().expect("replay").kept.len(), 20);
    s.reserve(101);
    s.flush().expect("flush");
    assert_eq!(
        s.compactions(),
        0,
        "kept records are not garbage after a reopen"
    );
    // New versions of half of them: the old versions are garbage, but not
    // yet more than what is live.
    for id in 1..=10 {
        s.kept(&big(id, 4000, 2));
    }
    s.flush().expect("flush");
    assert_eq!(s.compactions(), 0, "garbage does not outweigh live yet");
    drop(s);
    // After a reopen the older versions count as garbage too: new versions
    // of the other half tip the balance.
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("reopen");
    s.replay().expect("replay");
    for id in 11..=20 {
        s.kept(&big(id, 4000, 2));
    }
    s.flush().expect("flush");
    assert_eq!(s.compactions(), 1, "superseded versions are garbage");
    let len = s.file_len();
    drop(s);
    let r = reopened(dir.path());
    let want: Vec<KeptRecord> = (1..=20).map(|id| big(id, 4000, 2)).collect();
    assert_eq!(r.kept, want);
    let one: u64 = (1..=20)
        .map(|id| Op::Kept(big(id, 4000, 2)).encode(&mut Vec::new()) as u64)
        .sum();
    assert!(len < one + 100, "the compacted file holds one version each");
}

#[test]
fn forgotten_kept_records_are_garbage() {
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("open");
    s.replay().expect("replay");
    for id in 1..=20 {
        s.kept(&big(id, 4000, 1));
    }
    s.flush().expect("flush");
    drop(s);
    let mut s = LogStore::open(dir.path(), opts(0, false)).expect("reopen");
    s.replay().expect("replay");
    for id in 1..=9 {
        s.forget(id);
    }
    s.flush().expect("flush");
    assert_eq!(s.compactions(), 0, "9 of 20 forgotten: not worth it yet");
    s.forget(10);
    s.forget(11);
    s.flush().expect("flush");
    assert_eq!(s.compactions(), 1, "11 of 20 forgotten: compacted");
    drop(s);
    let r = reopened(dir.path());
    let ids: Vec<u64> = r.kept.iter().map(|k| k.id).collect();
    assert_eq!(ids, (12..=20).collect::<Vec<u64>>());
}

#[test]
fn replayed_kept_records_own_their_bytes() {
    // A kept record lives for its TTL: none of its fields may hold a
    // slice of the buffer it was read from (the whole file at open, a
    // frame on a later replay), which would keep that alive with it.
    let owned = |k: &KeptRecord| {
        let mut fields = vec![
            &k.handle,
            &k.function,
            &k.unique,
            &k.worker,
            &k.result,
            &k.history,
        ];
        fields.extend(k.error.as_ref());
        // Empty fields need no buffer at all.
        fields.iter().all(|b| b.is_empty() || b.is_unique())
    };
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), opts(u64::MAX, false)).expect("open");
    s.replay().expect("replay");
    for id in 1..=6 {
        s.kept(&big(id, 300, 1));
    }
    s.flush().expect("flush");
    drop(s);
    let mut s = LogStore::open(dir.path(), opts(u64::MAX, false)).expect("reopen");
    for what in ["the replay of the file read at open", "a later replay"] {
        let r = s.replay().expect("replay");
        assert_eq!(r.kept.len(), 6, "{what}");
        assert!(r.kept.iter().all(owned), "{what}: records own their bytes");
    }
}
