//! Checks of schedules.

use super::*;

/// Ids of the replayed schedules.
pub(super) fn schedule_ids(r: &Replayed) -> Vec<u64> {
    r.schedules.iter().map(|s| s.id).collect()
}

pub(super) fn schedules_are_replayed<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = open();
    let r = s.replay().expect("replay");
    assert!(r.schedules.is_empty(), "a new store holds no schedules");
    let mut odd = sched(7, "0 3 * * 1-5", None);
    odd.data = Bytes::from_static(b"bin\0ary\xff");
    odd.unique = Bytes::new();
    let all = [
        sched(3, "*/5 * * * *", Some(1_900_000_000_000)),
        sched(4, "0 0 1 1 *", Some(u64::MAX - 1)),
        sched(6, "30 12 * * 0", Some(0)),
        odd,
    ];
    s.add(&job(1, "f", "", 1, b"x"));
    // Stored out of id order: replay sorts them.
    for r in all.iter().rev() {
        s.schedule(r);
    }
    let (again, r) = replayed_twice(s, &mut open);
    assert_eq!(
        again.schedules, all,
        "replay reports schedules, however often asked"
    );
    assert_eq!(
        r.schedules, all,
        "every field of every schedule survives, in id order"
    );
    assert_eq!(
        r.jobs,
        vec![job(1, "f", "", 1, b"x")],
        "schedules are not jobs"
    );
    assert!(r.dead.is_empty(), "schedules are not dead jobs");
}

pub(super) fn a_new_version_of_a_schedule_replaces_it<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.schedule(&sched(1, "0 * * * *", Some(1_000)));
    s.schedule(&sched(2, "0 * * * *", Some(1_000)));
    s.flush().expect("flush");
    // A new next firing, then (same batch) a whole new definition.
    s.schedule(&sched(1, "0 * * * *", Some(2_000)));
    let mut changed = sched(1, "15 2 * * 6", None);
    changed.data = Bytes::from_static(b"changed");
    changed.from_config = !changed.from_config;
    s.schedule(&changed);
    s.flush().expect("flush");
    s.schedule(&sched(2, "0 * * * *", Some(3_000)));
    let r = reopened(s, &mut open);
    assert_eq!(
        r.schedules,
        vec![changed, sched(2, "0 * * * *", Some(3_000))],
        "the latest version of each schedule wins, once"
    );
}

pub(super) fn unschedule_drops_a_schedule_and_done_does_not<S: Store>(mut open: impl FnMut() -> S) {
    let (mut s, r) = ending_drops_one_and_done_does_not(&mut open, Kind::Schedule);
    assert_eq!(r.schedules[1], sched(3, "* * * * *", Some(3)));
    s.unschedule(1);
    s.unschedule(3);
    let r = reopened(s, &mut open);
    assert_eq!(schedule_ids(&r), vec![4]);
}

/// Schedules changing among many jobs coming and going, over many flushes
/// (for the log store with a small threshold: across compactions), checked
/// after every reopen: each live schedule's latest version, none dropped.
pub(super) fn schedules_survive_churn<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    let mut want: BTreeMap<u64, ScheduleRecord> = BTreeMap::new();
    let mut next_id = 1u64;
    for round in 1..=300u64 {
        // Garbage: a short-lived job, so the log store compacts often.
        short_lived(&mut s, next_id, 1500);
        next_id += 1;
        if round % 4 == 1 {
            let r = sched(next_id, "*/10 * * * *", Some(1_800_000_000_000 + round));
            s.schedule(&r);
            want.insert(r.id, r);
            next_id += 1;
        }
        // Each live schedule fires now and then: a new next time.
        let ids: Vec<u64> = want.keys().copied().collect();
        for (i, id) in ids.iter().enumerate() {
            if (round + i as u64).is_multiple_of(3) {
                let mut r = want[id].clone();
                r.next_ms = r.next_ms.map(|n| n + 600_000);
                r.data = Bytes::from(vec![round as u8; 300]);
                s.schedule(&r);
                want.insert(*id, r);
            }
        }
        // One is dropped now and then; another ends its firings.
        if round % 10 == 0 {
            if let Some(&id) = want.keys().nth(1) {
                s.unschedule(id);
                want.remove(&id);
            }
            if let Some(r) = want.values_mut().next() {
                r.next_ms = None;
                s.schedule(r);
            }
            // A Done of a schedule's id (never sent, but harmless).
            if let Some(&id) = want.keys().last() {
                s.done(id);
            }
        }
        let r;
        (s, r) = end_of_round(s, &mut open, round, 3);
        if let Some(r) = r {
            assert_eq!(r.schedules, values(&want), "schedules after {round} rounds");
            assert!(r.jobs.is_empty(), "after {round} rounds");
            assert!(r.next_id >= next_id, "after {round} rounds");
        }
    }
}
