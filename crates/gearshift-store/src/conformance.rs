//! The conformance suite every [`Store`] backend must pass. A backend's
//! test calls [`run`] with a factory: each call of the factory sets up a
//! fresh, empty storage location and returns an `open` closure; each call
//! of `open` opens (or reopens) a store on that location.
//!
//! Every check panics with a message naming the broken rule.

use bytes::Bytes;

use crate::{JobRecord, Store, StoreError, MAX_ID};

/// A test job: id, function, unique, priority, data.
pub fn job(id: u64, function: &str, unique: &str, priority: u8, data: &[u8]) -> JobRecord {
    JobRecord {
        id,
        handle: Bytes::from(format!("H:test:{id}")),
        function: Bytes::copy_from_slice(function.as_bytes()),
        unique: Bytes::copy_from_slice(unique.as_bytes()),
        priority,
        data: Bytes::copy_from_slice(data),
        reducer: None,
        due_ms: None,
        attempts: 0,
        created_ms: 1_700_000_000_000 + id,
    }
}

/// Runs every check against fresh storage locations from `fresh`.
pub fn run<S: Store, O: FnMut() -> S>(mut fresh: impl FnMut() -> O) {
    empty_store(fresh());
    flushed_jobs_survive_reopen(fresh());
    unflushed_ops_are_lost(fresh());
    done_and_update(fresh());
    empty_uniques_never_collide(fresh());
    handle_counter_never_goes_back(fresh());
    discard_drops_buffered_ops(fresh());
    every_field_round_trips(fresh());
    many_flushes_keep_order(fresh());
    ids_past_the_largest_are_never_written(fresh());
}

fn empty_store<S: Store>(mut open: impl FnMut() -> S) {
    let r = open().replay().expect("replay of an empty store");
    assert!(r.jobs.is_empty(), "a new store holds no jobs");
    assert!(r.next_id >= 1, "handle numbers start at 1 or later");
}

fn flushed_jobs_survive_reopen<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = open();
    s.replay().expect("replay");
    for id in [3, 1, 2] {
        s.add(&job(id, "f", &format!("u{id}"), 1, b"x"));
    }
    s.flush().expect("flush");
    let again = s.replay().expect("a second replay on the same handle");
    assert_eq!(
        again.jobs.len(),
        3,
        "replay reports every flushed job, however often asked"
    );
    drop(s);
    let r = open().replay().expect("replay after reopen");
    let ids: Vec<u64> = r.jobs.iter().map(|j| j.id).collect();
    assert_eq!(
        ids,
        vec![1, 2, 3],
        "replay returns every flushed job, in id order"
    );
    assert!(r.next_id > 3, "next_id is past every stored id");
}

fn unflushed_ops_are_lost<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = open();
    s.replay().expect("replay");
    s.add(&job(1, "f", "", 1, b"kept"));
    s.flush().expect("flush");
    s.add(&job(2, "f", "", 1, b"never flushed"));
    s.done(1);
    drop(s);
    let r = open().replay().expect("replay");
    let ids: Vec<u64> = r.jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![1], "only flushed operations count");
}

fn done_and_update<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = open();
    s.replay().expect("replay");
    for id in 1..=4 {
        s.add(&job(id, "f", "", 1, b"x"));
    }
    s.flush().expect("flush");
    s.done(2);
    s.update(3, 7);
    s.flush().expect("flush");
    s.done(4);
    s.flush().expect("flush");
    drop(s);
    let r = open().replay().expect("replay");
    let got: Vec<(u64, u32)> = r.jobs.iter().map(|j| (j.id, j.attempts)).collect();
    assert_eq!(
        got,
        vec![(1, 0), (3, 7)],
        "done removes, update sets attempts"
    );
    assert!(r.next_id > 4, "ids of finished jobs are not reused");
}

fn empty_uniques_never_collide<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = open();
    s.replay().expect("replay");
    s.add(&job(1, "f", "", 0, b"high"));
    s.add(&job(2, "f", "", 2, b"low"));
    s.add(&job(3, "f", "same", 1, b"a"));
    s.add(&job(4, "f", "same", 1, b"b"));
    s.flush().expect("flush");
    drop(s);
    let r = open().replay().expect("replay");
    assert_eq!(
        r.jobs.len(),
        4,
        "jobs are keyed by id, never by (function, unique)"
    );
}

fn handle_counter_never_goes_back<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = open();
    s.replay().expect("replay");
    s.add(&job(10, "f", "", 1, b"x"));
    s.reserve(1000);
    s.flush().expect("flush");
    s.done(10);
    s.flush().expect("flush");
    drop(s);
    let r = open().replay().expect("replay");
    assert!(r.jobs.is_empty());
    assert!(
        r.next_id >= 1000,
        "a reservation survives even when no job is left"
    );
}

fn ids_past_the_largest_are_never_written<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = open();
    s.replay().expect("replay");
    s.add(&job(MAX_ID, "f", "", 1, b"last"));
    s.reserve(u64::MAX);
    s.flush().expect("the largest id is stored like any other");
    s.add(&job(7, "f", "", 1, b"same batch"));
    s.add(&job(MAX_ID + 1, "f", "", 1, b"one too far"));
    match s.flush() {
        Err(StoreError::IdOutOfRange(id)) => assert_eq!(id, MAX_ID + 1),
        other => panic!("an id past MAX_ID must fail its flush, got {other:?}"),
    }
    s.add(&job(8, "f", "", 1, b"next batch"));
    s.flush()
        .expect("the refusal does not stick to later batches");
    drop(s);
    let r = open().replay().expect("what was written replays");
    let ids: Vec<u64> = r.jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, vec![8, MAX_ID], "none of the refused batch is stored");
    assert_eq!(r.next_id, MAX_ID + 1, "reservations stop at MAX_ID + 1");
}

fn discard_drops_buffered_ops<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = open();
    s.replay().expect("replay");
    s.add(&job(1, "f", "", 1, b"x"));
    s.discard();
    s.add(&job(2, "f", "", 1, b"y"));
    s.flush().expect("flush");
    drop(s);
    let ids: Vec<u64> = open()
        .replay()
        .expect("replay")
        .jobs
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(ids, vec![2], "discarded operations are never written");
}

fn every_field_round_trips<S: Store>(mut open: impl FnMut() -> S) {
    let mut full = job(5, "fn\u{e9}", "u-5", 2, b"bin\0ary\xff");
    full.reducer = Some(Bytes::from_static(b"reducer"));
    full.due_ms = Some(1_900_000_000_000);
    full.attempts = 3;
    let big = job(6, "big", "", 1, &vec![7u8; 1 << 20]);
    let mut s = open();
    s.replay().expect("replay");
    s.add(&full);
    s.add(&big);
    s.flush().expect("flush");
    drop(s);
    let r = open().replay().expect("replay");
    assert_eq!(
        r.jobs,
        vec![full, big],
        "every field survives, payload bytes included"
    );
}

fn many_flushes_keep_order<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = open();
    s.replay().expect("replay");
    for id in 1..=500u64 {
        s.add(&job(id, "f", "", (id % 3) as u8, &id.to_le_bytes()));
        if id % 7 == 0 {
            s.flush().expect("flush");
        }
        if id % 5 == 0 {
            s.done(id - 2);
        }
    }
    s.flush().expect("flush");
    drop(s);
    let r = open().replay().expect("replay");
    let expect: Vec<u64> = (1..=500u64)
        .filter(|id| (id + 2) % 5 != 0 || *id > 498)
        .collect();
    let got: Vec<u64> = r.jobs.iter().map(|j| j.id).collect();
    assert_eq!(
        got, expect,
        "interleaved adds, dones and flushes replay exactly"
    );
}
