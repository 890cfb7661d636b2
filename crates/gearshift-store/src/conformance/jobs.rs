//! Checks of live jobs, their ends and updates, and the handle counter.

use super::*;

pub(super) fn empty_store<S: Store>(mut open: impl FnMut() -> S) {
    let r = open().replay().expect("replay of an empty store");
    assert!(r.jobs.is_empty(), "a new store holds no jobs");
    assert!(r.dead.is_empty(), "a new store holds no dead jobs");
    assert!(r.schedules.is_empty(), "a new store holds no schedules");
    assert!(r.kept.is_empty(), "a new store holds no kept records");
    assert!(r.next_id >= 1, "handle numbers start at 1 or later");
}

pub(super) fn flushed_jobs_survive_reopen<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    for id in [3, 1, 2] {
        s.add(&job(id, "f", &format!("u{id}"), 1, b"x"));
    }
    let (again, r) = replayed_twice(s, &mut open);
    assert_eq!(
        again.jobs.len(),
        3,
        "replay reports every flushed job, however often asked"
    );
    assert_eq!(
        job_ids(&r),
        vec![1, 2, 3],
        "replay returns every flushed job, in id order"
    );
    assert!(r.next_id > 3, "next_id is past every stored id");
}

pub(super) fn unflushed_ops_are_lost<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.add(&job(1, "f", "", 1, b"kept"));
    s.flush().expect("flush");
    s.add(&job(2, "f", "", 1, b"never flushed"));
    s.done(1);
    drop(s);
    let r = open().replay().expect("replay");
    assert_eq!(job_ids(&r), vec![1], "only flushed operations count");
}

pub(super) fn done_and_update<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    for id in 1..=4 {
        s.add(&job(id, "f", "", 1, b"x"));
    }
    s.flush().expect("flush");
    s.done(2);
    s.update(3, 7);
    s.flush().expect("flush");
    s.done(4);
    let r = reopened(s, &mut open);
    assert_eq!(
        ids_and_attempts(&r).0,
        vec![(1, 0), (3, 7)],
        "done removes, update sets attempts"
    );
    assert!(r.next_id > 4, "ids of finished jobs are not reused");
}

pub(super) fn empty_uniques_never_collide<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.add(&job(1, "f", "", 0, b"high"));
    s.add(&job(2, "f", "", 2, b"low"));
    s.add(&job(3, "f", "same", 1, b"a"));
    s.add(&job(4, "f", "same", 1, b"b"));
    let r = reopened(s, &mut open);
    assert_eq!(
        r.jobs.len(),
        4,
        "jobs are keyed by id, never by (function, unique)"
    );
}

pub(super) fn handle_counter_never_goes_back<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.add(&job(10, "f", "", 1, b"x"));
    s.reserve(1000);
    s.flush().expect("flush");
    s.done(10);
    let r = reopened(s, &mut open);
    assert!(r.jobs.is_empty());
    assert!(
        r.next_id >= 1000,
        "a reservation survives even when no job is left"
    );
}

pub(super) fn ids_past_the_largest_are_never_written<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.add(&job(MAX_ID, "f", "", 1, b"last"));
    s.reserve(u64::MAX);
    s.flush().expect("the largest id is stored like any other");
    s.add(&job(7, "f", "", 1, b"same batch"));
    s.add(&job(MAX_ID + 1, "f", "", 1, b"one too far"));
    flush_refuses_past_max_id(&mut s, "an id");
    // A retry or death naming such an id is refused the same way.
    s.retry(MAX_ID + 1, 1, None);
    assert!(
        matches!(s.flush(), Err(StoreError::IdOutOfRange(_))),
        "a retry past MAX_ID fails its flush"
    );
    s.dead(MAX_ID + 1, 1, &mark(1, "e"));
    assert!(
        matches!(s.flush(), Err(StoreError::IdOutOfRange(_))),
        "a death past MAX_ID fails its flush"
    );
    let r = next_batch_stored(s, &mut open);
    assert_eq!(
        job_ids(&r),
        vec![8, MAX_ID],
        "none of the refused batch is stored"
    );
    assert_eq!(r.next_id, MAX_ID + 1, "reservations stop at MAX_ID + 1");
}

pub(super) fn discard_drops_buffered_ops<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.add(&job(1, "f", "", 1, b"x"));
    s.discard();
    s.add(&job(2, "f", "", 1, b"y"));
    let r = reopened(s, &mut open);
    assert_eq!(
        job_ids(&r),
        vec![2],
        "discarded operations are never written"
    );
}

pub(super) fn every_field_round_trips<S: Store>(mut open: impl FnMut() -> S) {
    let mut full = job(5, "fn\u{e9}", "u-5", 2, b"bin\0ary\xff");
    full.reducer = Some(Bytes::from_static(b"reducer"));
    full.due_ms = Some(1_900_000_000_000);
    full.attempts = 3;
    let big = job(6, "big", "", 1, &vec![7u8; 1 << 20]);
    let mut s = opened(&mut open);
    s.add(&full);
    s.add(&big);
    let r = reopened(s, &mut open);
    assert_eq!(
        r.jobs,
        vec![full, big],
        "every field survives, payload bytes included"
    );
}

pub(super) fn many_flushes_keep_order<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    for id in 1..=500u64 {
        s.add(&job(id, "f", "", (id % 3) as u8, &id.to_le_bytes()));
        if id % 7 == 0 {
            s.flush().expect("flush");
        }
        if id % 5 == 0 {
            s.done(id - 2);
        }
    }
    let r = reopened(s, &mut open);
    let expect: Vec<u64> = (1..=500u64)
        .filter(|id| (id + 2) % 5 != 0 || *id > 498)
        .collect();
    assert_eq!(
        job_ids(&r),
        expect,
        "interleaved adds, dones and flushes replay exactly"
    );
}

/// One append of many kinds of ops, a run's start among them, stores what
/// the same ops one call at a time would: in order, and a start changes no
/// record.
pub(super) fn one_append_of_many_ops_keeps_their_order<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    let one = job(1, "f", "", 1, b"one");
    s.append(&[
        Op::Add(one.clone()),
        Op::Add(job(2, "f", "", 2, b"two")),
        Op::Started(1),
        Op::Update { id: 1, attempts: 3 },
        Op::Done(2),
        Op::Schedule(sched(3, "* * * * *", None)),
        Op::Kept(kept(2, 0, b"two's result")),
        Op::Reserve(10),
    ]);
    let r = reopened(s, &mut open);
    let mut want = one;
    want.attempts = 3;
    assert_eq!(r.jobs, vec![want], "job 1 updated, job 2 ended");
    assert!(r.dead.is_empty());
    assert_eq!(r.schedules, vec![sched(3, "* * * * *", None)]);
    assert_eq!(r.kept, vec![kept(2, 0, b"two's result")]);
    assert_eq!(r.next_id, 10);
}
