//! Schedules in the log store's compaction: a compacted file keeps each
//! live schedule's latest Schedule op (and nothing of dropped ones), and
//! the rule for when to compact counts those as live and every older
//! version as garbage, at flush and after a reopen.

mod common;

use common::{big_schedule, compacted, Both, Versioned};
use gearshift_store::conformance::job;
use gearshift_store::Store;

#[test]
fn compaction_keeps_each_live_schedules_latest_version() {
    for background in [false, true] {
        let mut b = Both::new(background);
        // Schedules 1..=30 among jobs 31..=230, each schedule rewritten
        // several times (its next firing moves on), a third dropped, and
        // the jobs ended: garbage enough to compact.
        b.each(|s| (1..=30).for_each(|id| s.schedule(&big_schedule(id, 200, 1_000))));
        b.flush();
        b.each(|s| (31..=230).for_each(|id| s.add(&job(id, "f", "", 1, &[id as u8; 500]))));
        b.flush();
        for round in 1..=4u64 {
            let next_ms = 1_000 + round * 60_000;
            b.each(|s| (1..=30).for_each(|id| s.schedule(&big_schedule(id, 200, next_ms))));
            b.flush();
        }
        b.each(|s| (1..=30).step_by(3).for_each(|id| s.unschedule(id)));
        // A Done of a schedule's id leaves it alone.
        b.each(|s| s.done(2));
        b.each(|s| (31..=230).for_each(|id| s.done(id)));
        b.each(|s| s.add(&job(231, "f", "", 1, b"still here")));
        b.flush_and_finish();
        assert!(
            b.log.compactions() >= 1,
            "background {background}: the flush of the ends compacted"
        );
        let (want, ops) = b.replay_both();
        assert_eq!(want.schedules.len(), 20);
        assert!(want.schedules.iter().all(|s| s.next_ms == Some(241_000)));
        // The compacted file: a reservation, each live schedule's latest
        // version in id order, then the job; nothing of older versions or
        // dropped schedules.
        let layout = compacted(
            232,
            Versioned::Schedules.replayed(&want),
            job(231, "f", "", 1, b"still here"),
        );
        assert_eq!(ops, layout, "background {background}: compacted file");
    }
}

#[test]
fn a_background_compaction_keeps_schedule_ops_flushed_while_it_ran() {
    // Schedule ops in the frames flushed while the compaction ran are
    // copied after its prefix, and replay applies them to what it kept.
    let r = common::during_a_background_compaction(Versioned::Schedules, |s| {
        s.schedule(&big_schedule(2, 100, 2));
        s.unschedule(3);
        s.schedule(&big_schedule(6, 100, 2));
    });
    let want = [(1, 1), (2, 2), (4, 1), (5, 1), (6, 2)].map(|(id, v)| big_schedule(id, 100, v));
    assert_eq!(r.schedules, want);
}

#[test]
fn live_schedules_are_not_garbage_but_their_old_versions_are() {
    common::latest_versions_live_older_ones_garbage(Versioned::Schedules);
}

#[test]
fn dropped_schedules_are_garbage() {
    common::ended_records_are_garbage(Versioned::Schedules);
}
