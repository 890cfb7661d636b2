//! Checks schedules and kept records share, and of ids past the largest
//! a store keeps.

use super::*;

/// A Done, Update, Unschedule or Forget naming an id no store keeps (past
/// [`MAX_ID`]) changes nothing, fails nothing, and leaves a store that
/// opens again (a log never holds an op its replay refuses).
pub(super) fn ends_naming_ids_past_the_largest_change_nothing<S: Store>(
    mut open: impl FnMut() -> S,
) {
    let mut s = opened(&mut open);
    s.add(&job(1, "f", "", 1, b"x"));
    s.schedule(&sched(2, "* * * * *", None));
    s.kept(&kept(3, 0, b"r"));
    s.flush().expect("flush");
    for id in [MAX_ID + 1, u64::MAX] {
        s.done(id);
        s.update(id, 3);
        s.unschedule(id);
        s.forget(id);
    }
    s.update(1, 4);
    s.flush()
        .expect("ops naming no storable id do not fail the flush");
    drop(s);
    let r = open().replay().expect("the store opens again");
    assert_eq!(ids_and_attempts(&r).0, vec![(1, 4)]);
    assert_eq!(schedule_ids(&r), vec![2]);
    assert_eq!(r.kept, vec![kept(3, 0, b"r")]);
}
/// The records a store keeps by id apart from jobs, for the checks both
/// kinds share.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    Schedule,
    Kept,
}

impl Kind {
    /// Its name in messages.
    fn name(self) -> &'static str {
        match self {
            Kind::Schedule => "schedule",
            Kind::Kept => "kept record",
        }
    }

    /// Stores a record of this kind with this id.
    fn store<S: Store>(self, s: &mut S, id: u64) {
        match self {
            Kind::Schedule => s.schedule(&sched(id, "* * * * *", Some(id))),
            Kind::Kept => s.kept(&kept(id, 0, b"r")),
        }
    }

    /// Ends the record with this id: Unschedule, Forget.
    fn end<S: Store>(self, s: &mut S, id: u64) {
        match self {
            Kind::Schedule => s.unschedule(id),
            Kind::Kept => s.forget(id),
        }
    }

    /// The ids of the records of this kind a replay returned, in its order.
    fn ids(self, r: &Replayed) -> Vec<u64> {
        match self {
            Kind::Schedule => schedule_ids(r),
            Kind::Kept => kept_ids(r),
        }
    }
}

/// Ending a record of `kind` drops it (an unknown id, nothing); a Done or
/// an Update of its id leaves it alone. Returns the store, closed and
/// opened anew, and its replay: records 1, 3 and 4.
pub(super) fn ending_drops_one_and_done_does_not<S: Store>(
    open: &mut impl FnMut() -> S,
    kind: Kind,
) -> (S, Replayed) {
    let mut s = opened(open);
    for id in 1..=4 {
        kind.store(&mut s, id);
    }
    s.flush().expect("flush");
    kind.end(&mut s, 2);
    kind.end(&mut s, 99);
    s.done(3);
    s.update(3, 5);
    kind.store(&mut s, 5);
    kind.end(&mut s, 5);
    let (s, r) = reopen(s, open);
    let name = kind.name();
    assert_eq!(
        kind.ids(&r),
        vec![1, 3, 4],
        "ending a {name} drops it (an unknown id, nothing); done, update leave {name}s alone"
    );
    (s, r)
}

/// The ids of records of `kind` raise next_id as jobs' do, and an ended
/// one's id is not handed out again.
pub(super) fn ids_raise_next_id<S: Store>(mut open: impl FnMut() -> S, kind: Kind) {
    let name = kind.name();
    let mut s = opened(&mut open);
    s.add(&job(1, "f", "", 1, b"x"));
    kind.store(&mut s, 500);
    kind.store(&mut s, 700);
    let (mut s, r) = reopen(s, &mut open);
    assert!(
        r.next_id > 700,
        "next_id is past every {name} id (got {})",
        r.next_id
    );
    kind.end(&mut s, 700);
    kind.end(&mut s, 500);
    s.done(1);
    let r = reopened(s, &mut open);
    assert!(kind.ids(&r).is_empty() && r.jobs.is_empty());
    assert!(
        r.next_id > 700,
        "an ended {name}'s id is not handed out again (got {})",
        r.next_id
    );
}

/// A record of `kind` with the largest id is stored like any other; one
/// past it fails its flush, storing none of its batch; ending such an id
/// ends nothing and harms nothing.
pub(super) fn ids_past_the_largest_are_refused<S: Store>(mut open: impl FnMut() -> S, kind: Kind) {
    let mut s = opened(&mut open);
    kind.store(&mut s, MAX_ID);
    s.flush().expect("the largest id is stored like any other");
    s.add(&job(7, "f", "", 1, b"same batch"));
    kind.store(&mut s, MAX_ID + 1);
    flush_refuses_past_max_id(&mut s, &format!("a {} id", kind.name()));
    kind.end(&mut s, MAX_ID + 1);
    kind.end(&mut s, u64::MAX);
    let r = next_batch_stored(s, &mut open);
    assert_eq!(kind.ids(&r), vec![MAX_ID], "none of the refused batch");
    assert_eq!(job_ids(&r), vec![8]);
    assert_eq!(r.next_id, MAX_ID + 1);
}
