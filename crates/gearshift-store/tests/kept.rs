//! Kept records (finished jobs kept with their results) in the log store's
//! compaction: a compacted file keeps each kept record's latest Kept op
//! (and nothing of forgotten ones, nor the Adds of the jobs they were),
//! and the rule for when to compact counts those as live and every older
//! version as garbage, at flush and after a reopen. Replayed records own
//! their bytes instead of pinning the file's.

mod common;

use common::{big_kept, compacted, fresh, ops_on_disk, opts, reopened, Both, Versioned};
use gearshift_store::conformance::job;
use gearshift_store::{KeptRecord, LogStore, Op, Store};

#[test]
fn compaction_keeps_each_kept_records_latest_version() {
    for background in [false, true] {
        let mut b = Both::new(background);
        // Jobs 1..=40 finish and are kept, among jobs 41..=240 whose Adds
        // outweigh the garbage until they end; each kept record is kept
        // longer several times, a third are forgotten.
        for id in 1..=240 {
            let size = if id <= 40 { 100 } else { 500 };
            b.each(|s| s.add(&job(id, "f", "", 1, &vec![id as u8; size])));
        }
        b.flush();
        for id in 1..=40 {
            b.each(|s| {
                s.done(id);
                s.kept(&big_kept(id, 200, 1_000));
            });
        }
        b.flush();
        for round in 1..=4u64 {
            let expires_ms = 1_000 + round * 60_000;
            b.each(|s| (1..=40).for_each(|id| s.kept(&big_kept(id, 200, expires_ms))));
            b.flush();
        }
        assert_eq!(b.log.compactions(), 0, "background {background}: not yet");
        b.each(|s| (1..=40).step_by(3).for_each(|id| s.forget(id)));
        // A Done of a kept id leaves it alone.
        b.each(|s| s.done(2));
        b.each(|s| (41..=240).for_each(|id| s.done(id)));
        b.each(|s| s.add(&job(241, "f", "", 1, b"still here")));
        b.flush_and_finish();
        assert_eq!(
            b.log.compactions(),
            1,
            "background {background}: the flush of the ends compacted"
        );
        let (want, ops) = b.replay_both();
        assert_eq!(want.kept.len(), 26);
        assert!(want.kept.iter().all(|k| k.expires_ms == 241_000));
        // The compacted file: a reservation, each kept record's latest
        // version (where it lay: written in id order), then the job;
        // nothing of older versions, forgotten records or the kept jobs'
        // Adds.
        let layout = compacted(
            242,
            Versioned::Kept.replayed(&want),
            job(241, "f", "", 1, b"still here"),
        );
        assert_eq!(ops, layout, "background {background}: compacted file");
    }
}

#[test]
fn compaction_copies_kept_records_where_their_latest_versions_lie() {
    // Kept ops are copied as the second pass meets them, between the Adds
    // they lie among: the latest version of each, wherever it is.
    let (dir, mut s) = fresh(opts(0, false));
    s.kept(&big_kept(3, 50, 1));
    s.kept(&big_kept(1, 50, 1));
    s.add(&job(10, "f", "", 1, b"ten"));
    s.kept(&big_kept(2, 50, 1));
    s.flush().expect("flush");
    s.add(&job(11, "f", "", 1, b"eleven"));
    s.kept(&big_kept(3, 50, 2));
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
            Op::Kept(Box::new(big_kept(1, 50, 1))),
            Op::Add(job(10, "f", "", 1, b"ten")),
            Op::Kept(Box::new(big_kept(2, 50, 1))),
            Op::Add(job(11, "f", "", 1, b"eleven")),
            Op::Kept(Box::new(big_kept(3, 50, 2))),
        ]
    );
    let r = reopened(dir.path());
    let want = [(1, 1), (2, 1), (3, 2)].map(|(id, v)| big_kept(id, 50, v));
    assert_eq!(r.kept, want);
}

#[test]
fn a_background_compaction_keeps_kept_ops_flushed_while_it_ran() {
    // Kept and Forget ops in the frames flushed while the compaction ran
    // are copied after its prefix, and replay applies them to what it kept.
    let r = common::during_a_background_compaction(Versioned::Kept, |s| {
        s.kept(&big_kept(2, 100, 2));
        s.forget(3);
        s.done(10);
        s.kept(&big_kept(10, 100, 2));
    });
    let want = [(1, 1), (2, 2), (4, 1), (5, 1), (10, 2)].map(|(id, v)| big_kept(id, 100, v));
    assert_eq!(r.kept, want);
}

#[test]
fn kept_records_are_not_garbage_but_their_old_versions_are() {
    common::latest_versions_live_older_ones_garbage(Versioned::Kept);
}

#[test]
fn forgotten_kept_records_are_garbage() {
    common::ended_records_are_garbage(Versioned::Kept);
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
    let (dir, mut s) = fresh(opts(u64::MAX, false));
    for id in 1..=6 {
        s.kept(&big_kept(id, 300, 1));
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
