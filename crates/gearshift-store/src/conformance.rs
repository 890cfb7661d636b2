//! The conformance suite every [`Store`] backend must pass. A backend's
//! test calls [`run`] with a factory: each call of the factory sets up a
//! fresh, empty storage location and returns an `open` closure; each call
//! of `open` opens (or reopens) a store on that location.
//!
//! Every check panics with a message naming the broken rule.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::{DeadMark, JobRecord, KeptRecord, Replayed, ScheduleRecord, Store, StoreError, MAX_ID};

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

/// A test schedule: id, time fields, next firing. Its flags and priority
/// vary with the id, so every field is exercised.
pub fn sched(id: u64, when: &str, next_ms: Option<u64>) -> ScheduleRecord {
    ScheduleRecord {
        id,
        handle: Bytes::from(format!("H:test:{id}")),
        when: Bytes::copy_from_slice(when.as_bytes()),
        monday_zero: id.is_multiple_of(2),
        function: Bytes::from_static(b"report"),
        unique: Bytes::from(format!("sched-{id}")),
        data: Bytes::from(format!("payload of {id}").into_bytes()),
        priority: (id % 3) as u8,
        next_ms,
        from_config: id.is_multiple_of(3),
    }
}

/// A test kept record: id, outcome (0 completed, 1 failed, 2 cancelled),
/// result. The other fields vary with the id and outcome, so every one is
/// exercised: a failed job has an error, every third id never started
/// (and has no worker), even ids ran in the background.
pub fn kept(id: u64, outcome: u8, result: &[u8]) -> KeptRecord {
    let started = !id.is_multiple_of(3);
    KeptRecord {
        id,
        handle: Bytes::from(format!("H:test:{id}")),
        function: Bytes::from_static(b"resize"),
        unique: Bytes::from(format!("kept-{id}")),
        priority: (id % 3) as u8,
        background: id.is_multiple_of(2),
        outcome,
        attempts: (id % 5) as u32,
        created_ms: 1_700_000_000_000 + id,
        started_ms: started.then_some(1_700_000_001_000 + id),
        finished_ms: 1_700_000_002_000 + id,
        expires_ms: 1_700_000_602_000 + id,
        worker: if started {
            Bytes::from(format!("worker-{}", id % 4))
        } else {
            Bytes::new()
        },
        error: (outcome == 1).then(|| Bytes::from(format!("error of {id}"))),
        result: Bytes::copy_from_slice(result),
        history: Bytes::from(format!("history of {id}").into_bytes()),
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
    retry_sets_attempts_and_due(fresh());
    dead_jobs_are_kept_apart(fresh());
    retry_revives_a_dead_job(fresh());
    done_forgets_a_dead_job(fresh());
    retries_and_deaths_survive_churn(fresh());
    schedules_are_replayed(fresh());
    a_new_version_of_a_schedule_replaces_it(fresh());
    unschedule_drops_a_schedule_and_done_does_not(fresh());
    ids_raise_next_id(fresh(), Kind::Schedule);
    ids_past_the_largest_are_refused(fresh(), Kind::Schedule);
    schedules_survive_churn(fresh());
    ends_naming_ids_past_the_largest_change_nothing(fresh());
    kept_records_are_replayed(fresh());
    a_new_version_of_a_kept_record_replaces_it(fresh());
    forget_drops_a_kept_record_and_done_does_not(fresh());
    ids_raise_next_id(fresh(), Kind::Kept);
    ids_past_the_largest_are_refused(fresh(), Kind::Kept);
    kept_records_with_unknown_outcomes_are_refused(fresh());
    kept_records_survive_churn(fresh());
}

/// A test dead mark.
pub fn mark(died_ms: u64, error: &str) -> DeadMark {
    DeadMark {
        died_ms,
        error: Bytes::copy_from_slice(error.as_bytes()),
    }
}

/// (id, attempts) of each job.
type Counts = Vec<(u64, u32)>;

/// (id, attempts) of the live and of the dead jobs.
fn ids_and_attempts(r: &Replayed) -> (Counts, Counts) {
    (
        r.jobs.iter().map(|j| (j.id, j.attempts)).collect(),
        r.dead.iter().map(|(j, _)| (j.id, j.attempts)).collect(),
    )
}

/// The ids of the live jobs a replay returned, in its order.
fn job_ids(r: &Replayed) -> Vec<u64> {
    r.jobs.iter().map(|j| j.id).collect()
}

/// The values of `want`, in key order.
fn values<T: Clone>(want: &BTreeMap<u64, T>) -> Vec<T> {
    want.values().cloned().collect()
}

/// A store from `open`, replayed: where most checks start.
fn opened<S: Store>(open: &mut impl FnMut() -> S) -> S {
    let mut s = open();
    s.replay().expect("replay");
    s
}

/// Flushes `s` and closes it; the store opened anew, and its replay.
fn reopen<S: Store>(mut s: S, open: &mut impl FnMut() -> S) -> (S, Replayed) {
    s.flush().expect("flush");
    drop(s);
    let mut s = open();
    let r = s.replay().expect("replay after reopen");
    (s, r)
}

/// Flushes `s` and closes it; what the store opened anew replays.
fn reopened<S: Store>(s: S, open: &mut impl FnMut() -> S) -> Replayed {
    reopen(s, open).1
}

/// Flushes `s`, then what it replays twice: on the same handle, and once
/// closed and opened anew.
fn replayed_twice<S: Store>(mut s: S, open: &mut impl FnMut() -> S) -> (Replayed, Replayed) {
    s.flush().expect("flush");
    let again = s.replay().expect("a second replay on the same handle");
    drop(s);
    (again, open().replay().expect("replay after reopen"))
}

/// Flushes a batch holding an id past [`MAX_ID`] (of `what`): the flush
/// fails, naming that id.
fn flush_refuses_past_max_id<S: Store>(s: &mut S, what: &str) {
    match s.flush() {
        Err(StoreError::IdOutOfRange(id)) => assert_eq!(id, MAX_ID + 1),
        other => panic!("{what} past MAX_ID must fail its flush, got {other:?}"),
    }
}

/// After a refused batch, the next one (job 8) is stored: what the store,
/// closed and opened anew, replays then.
fn next_batch_stored<S: Store>(mut s: S, open: &mut impl FnMut() -> S) -> Replayed {
    s.add(&job(8, "f", "", 1, b"next batch"));
    s.flush()
        .expect("the refusal does not stick to later batches");
    drop(s);
    open().replay().expect("what was written replays")
}

/// A job added and ended at once: the garbage that makes the log store
/// (with a small threshold) compact often.
fn short_lived<S: Store>(s: &mut S, id: u64, size: usize) {
    s.add(&job(id, "f", "", 1, &vec![0; size]));
    s.done(id);
}

/// The end of round `round` of a churn: a flush after every
/// `flush_every`th round, and after every hundredth the store closed and
/// opened anew, with its replay to check.
fn end_of_round<S: Store>(
    mut s: S,
    open: &mut impl FnMut() -> S,
    round: u64,
    flush_every: u64,
) -> (S, Option<Replayed>) {
    if round.is_multiple_of(flush_every) {
        s.flush().expect("flush");
    }
    if !round.is_multiple_of(100) {
        return (s, None);
    }
    let (s, r) = reopen(s, open);
    (s, Some(r))
}

fn empty_store<S: Store>(mut open: impl FnMut() -> S) {
    let r = open().replay().expect("replay of an empty store");
    assert!(r.jobs.is_empty(), "a new store holds no jobs");
    assert!(r.dead.is_empty(), "a new store holds no dead jobs");
    assert!(r.schedules.is_empty(), "a new store holds no schedules");
    assert!(r.kept.is_empty(), "a new store holds no kept records");
    assert!(r.next_id >= 1, "handle numbers start at 1 or later");
}

fn flushed_jobs_survive_reopen<S: Store>(mut open: impl FnMut() -> S) {
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

fn unflushed_ops_are_lost<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.add(&job(1, "f", "", 1, b"kept"));
    s.flush().expect("flush");
    s.add(&job(2, "f", "", 1, b"never flushed"));
    s.done(1);
    drop(s);
    let r = open().replay().expect("replay");
    assert_eq!(job_ids(&r), vec![1], "only flushed operations count");
}

fn done_and_update<S: Store>(mut open: impl FnMut() -> S) {
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

fn empty_uniques_never_collide<S: Store>(mut open: impl FnMut() -> S) {
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

fn handle_counter_never_goes_back<S: Store>(mut open: impl FnMut() -> S) {
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

fn ids_past_the_largest_are_never_written<S: Store>(mut open: impl FnMut() -> S) {
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

fn discard_drops_buffered_ops<S: Store>(mut open: impl FnMut() -> S) {
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

fn every_field_round_trips<S: Store>(mut open: impl FnMut() -> S) {
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

fn many_flushes_keep_order<S: Store>(mut open: impl FnMut() -> S) {
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

fn retry_sets_attempts_and_due<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    let mut epoch = job(2, "f", "", 1, b"y");
    epoch.due_ms = Some(1_800_000_000_000);
    s.add(&job(1, "f", "", 1, b"x"));
    s.add(&epoch);
    s.add(&job(3, "f", "", 1, b"z"));
    s.flush().expect("flush");
    s.retry(1, 1, Some(1_900_000_000_000));
    s.retry(2, 4, None);
    s.flush().expect("flush");
    s.retry(1, 2, Some(1_900_000_000_500));
    s.retry(99, 9, Some(5));
    let r = reopened(s, &mut open);
    let got: Vec<(u64, u32, Option<u64>)> = r
        .jobs
        .iter()
        .map(|j| (j.id, j.attempts, j.due_ms))
        .collect();
    assert_eq!(
        got,
        vec![(1, 2, Some(1_900_000_000_500)), (2, 4, None), (3, 0, None)],
        "retry sets attempts and due time (None clears it); an unknown id changes nothing"
    );
    assert!(r.dead.is_empty(), "a retry kills nothing");
    let mut want = job(1, "f", "", 1, b"x");
    want.attempts = 2;
    want.due_ms = Some(1_900_000_000_500);
    assert_eq!(r.jobs[0], want, "a retry changes nothing else");
}

fn dead_jobs_are_kept_apart<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    for id in 1..=4 {
        s.add(&job(id, "f", "", 1, b"x"));
    }
    s.flush().expect("flush");
    s.retry(2, 1, Some(1_900_000_000_000));
    s.dead(2, 3, &mark(1_700_000_000_777, "first error"));
    s.dead(4, 2, &mark(1_700_000_000_888, "boom"));
    s.dead(99, 1, &mark(1, "no such job"));
    s.flush().expect("flush");
    // A dead job keeps the count it died with; dying again replaces the
    // count and mark.
    s.update(2, 50);
    s.dead(2, 5, &mark(1_700_000_000_999, "last error"));
    let (again, r) = replayed_twice(s, &mut open);
    assert_eq!(
        again.dead.len(),
        2,
        "replay reports dead jobs, however often asked"
    );
    assert_eq!(
        ids_and_attempts(&r),
        (vec![(1, 0), (3, 0)], vec![(2, 5), (4, 2)]),
        "dead jobs replay apart from live ones, in id order, with the attempts they died with"
    );
    let mut two = job(2, "f", "", 1, b"x");
    two.attempts = 5;
    two.due_ms = Some(1_900_000_000_000);
    assert_eq!(
        r.dead[0],
        (two, mark(1_700_000_000_999, "last error")),
        "a dead job keeps its record, last due time and latest mark"
    );
    assert_eq!(r.dead[1].1, mark(1_700_000_000_888, "boom"));
    assert!(r.next_id > 4, "dead jobs' ids are not reused");
}

fn retry_revives_a_dead_job<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.add(&job(1, "f", "", 1, b"x"));
    s.add(&job(2, "f", "", 1, b"y"));
    s.flush().expect("flush");
    s.dead(1, 3, &mark(10, "gone"));
    s.dead(2, 3, &mark(11, "gone too"));
    let (mut s, r) = reopen(s, &mut open);
    assert_eq!(ids_and_attempts(&r), (vec![], vec![(1, 3), (2, 3)]));
    s.retry(1, 0, Some(1_950_000_000_000));
    let r = reopened(s, &mut open);
    assert_eq!(
        ids_and_attempts(&r),
        (vec![(1, 0)], vec![(2, 3)]),
        "a retry brings a dead job back, its mark gone"
    );
    assert_eq!(r.jobs[0].due_ms, Some(1_950_000_000_000));
    // Revived, it can die again.
    let mut s = opened(&mut open);
    s.dead(1, 1, &mark(12, "again"));
    let r = reopened(s, &mut open);
    assert_eq!(ids_and_attempts(&r), (vec![], vec![(1, 1), (2, 3)]));
    assert_eq!(r.dead[0].1, mark(12, "again"));
}

fn done_forgets_a_dead_job<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    for id in 1..=3 {
        s.add(&job(id, "f", "", 1, b"x"));
    }
    s.flush().expect("flush");
    s.dead(1, 2, &mark(10, "e"));
    s.dead(2, 2, &mark(10, "e"));
    s.flush().expect("flush");
    s.done(1);
    let r = reopened(s, &mut open);
    assert_eq!(
        ids_and_attempts(&r),
        (vec![(3, 0)], vec![(2, 2)]),
        "done drops a dead job"
    );
    // Nor can a retry bring a dropped job back.
    let mut s = opened(&mut open);
    s.retry(1, 0, None);
    s.done(2);
    let r = reopened(s, &mut open);
    assert_eq!(ids_and_attempts(&r), (vec![(3, 0)], vec![]));
    assert!(r.next_id > 3, "ids of dropped dead jobs are not reused");
}

/// Retries and deaths among many jobs coming and going, over many flushes
/// (for the log store with a small threshold: across compactions), checked
/// against the expected outcome after every reopen.
fn retries_and_deaths_survive_churn<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    let mut want_live: BTreeMap<u64, JobRecord> = BTreeMap::new();
    let mut want_dead: BTreeMap<u64, (JobRecord, DeadMark)> = BTreeMap::new();
    for id in 1..=300u64 {
        let r = job(id, "f", "", 1, &[id as u8; 200]);
        s.add(&r);
        want_live.insert(id, r);
        // A short-lived job beside each: the garbage that makes the log
        // store (with a small threshold) compact after most flushes.
        short_lived(&mut s, 1000 + id, 2000);
        match id % 6 {
            // Ends soon: the churn that makes compaction worth it.
            0 | 1 => {
                s.done(id);
                want_live.remove(&id);
            }
            2 => {
                s.retry(id, 2, Some(1_900_000_000_000 + id));
                if let Some(r) = want_live.get_mut(&id) {
                    r.attempts = 2;
                    r.due_ms = Some(1_900_000_000_000 + id);
                }
            }
            3 => {
                s.retry(id, 1, Some(7));
                let m = mark(1_700_000_000_000 + id, &format!("error {id}"));
                s.dead(id, 4, &m);
                if let Some(mut r) = want_live.remove(&id) {
                    r.attempts = 4;
                    r.due_ms = Some(7);
                    want_dead.insert(id, (r, m));
                }
            }
            _ => {}
        }
        // A dead job from a while ago is revived, one before is dropped.
        if id % 12 == 3 && id > 30 {
            let old = id - 24;
            s.retry(old, 9, None);
            if let Some((mut r, _)) = want_dead.remove(&old) {
                r.attempts = 9;
                r.due_ms = None;
                want_live.insert(old, r);
            }
            s.done(old - 6);
            want_live.remove(&(old - 6));
            want_dead.remove(&(old - 6));
        }
        let r;
        (s, r) = end_of_round(s, &mut open, id, 5);
        if let Some(r) = r {
            let after = format!("after {id} submissions");
            assert_eq!(r.jobs, values(&want_live), "live jobs {after}");
            assert_eq!(r.dead, values(&want_dead), "dead jobs {after}");
        }
    }
}

/// Ids of the replayed schedules.
fn schedule_ids(r: &Replayed) -> Vec<u64> {
    r.schedules.iter().map(|s| s.id).collect()
}

fn schedules_are_replayed<S: Store>(mut open: impl FnMut() -> S) {
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

fn a_new_version_of_a_schedule_replaces_it<S: Store>(mut open: impl FnMut() -> S) {
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

fn unschedule_drops_a_schedule_and_done_does_not<S: Store>(mut open: impl FnMut() -> S) {
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
fn schedules_survive_churn<S: Store>(mut open: impl FnMut() -> S) {
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

/// A Done, Update, Unschedule or Forget naming an id no store keeps (past
/// [`MAX_ID`]) changes nothing, fails nothing, and leaves a store that
/// opens again (a log never holds an op its replay refuses).
fn ends_naming_ids_past_the_largest_change_nothing<S: Store>(mut open: impl FnMut() -> S) {
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

/// Ids of the replayed kept records.
fn kept_ids(r: &Replayed) -> Vec<u64> {
    r.kept.iter().map(|k| k.id).collect()
}

/// The records a store keeps by id apart from jobs, for the checks both
/// kinds share.
#[derive(Debug, Clone, Copy)]
enum Kind {
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
fn ending_drops_one_and_done_does_not<S: Store>(
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
fn ids_raise_next_id<S: Store>(mut open: impl FnMut() -> S, kind: Kind) {
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
fn ids_past_the_largest_are_refused<S: Store>(mut open: impl FnMut() -> S, kind: Kind) {
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

fn kept_records_are_replayed<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.add(&job(1, "f", "", 1, b"still running"));
    s.add(&job(2, "f", "", 1, b"about to finish"));
    s.flush().expect("flush");
    // Odd values in every field: no start, no worker, an empty error,
    // times at the ends of their range, empty and binary bytes.
    let mut odd = kept(9, 1, b"");
    odd.started_ms = Some(u64::MAX);
    odd.created_ms = 0;
    odd.finished_ms = u64::MAX;
    odd.expires_ms = u64::MAX;
    odd.error = Some(Bytes::new());
    odd.history = Bytes::new();
    odd.unique = Bytes::new();
    odd.priority = 2;
    odd.attempts = u32::MAX;
    let mut never_ran = kept(12, 2, b"");
    never_ran.started_ms = None;
    never_ran.worker = Bytes::new();
    let all = vec![
        kept(2, 0, b"the result \0\xff"),
        kept(4, 1, b"partial"),
        kept(5, 0, &vec![5u8; 1 << 20]),
        odd,
        never_ran,
    ];
    // The core ends a job with a Done, then keeps it, in one batch; the
    // rest are stored out of id order: replay sorts them.
    s.done(2);
    for k in all.iter().rev() {
        s.kept(k);
    }
    let (again, r) = replayed_twice(s, &mut open);
    assert_eq!(
        again.kept, all,
        "replay reports kept records, however often asked"
    );
    assert_eq!(
        r.kept, all,
        "every field of every kept record survives, in id order"
    );
    assert_eq!(
        r.jobs,
        vec![job(1, "f", "", 1, b"still running")],
        "a kept job is not live (its Done ended it), and kept records are not jobs"
    );
    assert!(r.dead.is_empty() && r.schedules.is_empty());
}

fn a_new_version_of_a_kept_record_replaces_it<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.kept(&kept(1, 0, b"first"));
    s.kept(&kept(2, 1, b"second"));
    s.flush().expect("flush");
    // A longer life, then (same batch) a whole new record.
    let mut longer = kept(1, 0, b"first");
    longer.expires_ms += 3_600_000;
    s.kept(&longer);
    let mut changed = kept(1, 2, b"changed");
    changed.history = Bytes::from_static(b"more history");
    changed.background = !changed.background;
    s.kept(&changed);
    s.flush().expect("flush");
    let mut two = kept(2, 1, b"second");
    two.expires_ms += 1;
    s.kept(&two);
    let r = reopened(s, &mut open);
    assert_eq!(
        r.kept,
        vec![changed, two],
        "the latest version of each kept record wins, once"
    );
}

fn forget_drops_a_kept_record_and_done_does_not<S: Store>(mut open: impl FnMut() -> S) {
    let (mut s, r) = ending_drops_one_and_done_does_not(&mut open, Kind::Kept);
    assert_eq!(r.kept[1], kept(3, 0, b"r"));
    // Forgotten, then kept again (never sent, but well defined): back.
    s.forget(1);
    s.forget(3);
    s.kept(&kept(3, 1, b"again"));
    let r = reopened(s, &mut open);
    assert_eq!(r.kept, vec![kept(3, 1, b"again"), kept(4, 0, b"r")]);
}

/// A kept record whose outcome replay would refuse as corrupt fails its
/// flush, storing none of its batch; the store opens again.
fn kept_records_with_unknown_outcomes_are_refused<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    s.kept(&kept(1, 2, b"cancelled is the last outcome"));
    s.flush().expect("flush");
    for outcome in [3, u8::MAX] {
        s.add(&job(7, "f", "", 1, b"same batch"));
        s.forget(1);
        s.kept(&kept(2, outcome, b"r"));
        match s.flush() {
            Err(StoreError::InvalidRecord(msg)) => {
                assert!(msg.contains(&format!("outcome {outcome}")), "{msg}")
            }
            other => panic!("outcome {outcome} must fail its flush, got {other:?}"),
        }
    }
    // An id past MAX_ID in the same batch: the first refusal is reported.
    s.kept(&kept(MAX_ID + 1, 0, b"r"));
    s.kept(&kept(3, 9, b"r"));
    assert!(
        matches!(s.flush(), Err(StoreError::IdOutOfRange(_))),
        "the first refusal of a batch is the one reported"
    );
    let r = next_batch_stored(s, &mut open);
    assert_eq!(r.kept, vec![kept(1, 2, b"cancelled is the last outcome")]);
    assert_eq!(
        job_ids(&r),
        vec![8],
        "none of the refused batches is stored"
    );
}

/// Jobs finishing into kept records among many jobs coming and going,
/// records kept longer and forgotten, over many flushes (for the log
/// store with a small threshold: across compactions), checked after every
/// reopen: each kept record's latest version, none forgotten.
fn kept_records_survive_churn<S: Store>(mut open: impl FnMut() -> S) {
    let mut s = opened(&mut open);
    let mut want: BTreeMap<u64, KeptRecord> = BTreeMap::new();
    let mut want_live: BTreeMap<u64, JobRecord> = BTreeMap::new();
    let mut next_id = 1u64;
    for round in 1..=300u64 {
        // Garbage: a short-lived job, so the log store compacts often.
        short_lived(&mut s, next_id, 1500);
        next_id += 1;
        // A job that runs a while, then finishes and is kept.
        let r = job(next_id, "f", "", 1, &[1; 200]);
        s.add(&r);
        want_live.insert(r.id, r);
        next_id += 1;
        if round % 2 == 0 {
            if let Some((id, _)) = want_live.pop_first() {
                let k = kept(id, (round % 3) as u8, &[round as u8; 300]);
                s.done(id);
                s.kept(&k);
                want.insert(id, k);
            }
        }
        // Now and then one is kept longer (a new version), the oldest
        // expires (forgotten), and a Done names a kept id (harmless).
        if round % 5 == 0 {
            if let Some(k) = want.values_mut().last() {
                k.expires_ms += 60_000;
                k.history = Bytes::from(format!("read in round {round}").into_bytes());
                s.kept(k);
            }
        }
        if round % 7 == 0 {
            if let Some((id, _)) = want.pop_first() {
                s.forget(id);
            }
            if let Some(&id) = want.keys().next() {
                s.done(id);
            }
        }
        let r;
        (s, r) = end_of_round(s, &mut open, round, 3);
        if let Some(r) = r {
            assert_eq!(r.kept, values(&want), "kept records after {round} rounds");
            assert_eq!(r.jobs, values(&want_live), "live jobs after {round} rounds");
            assert!(r.next_id >= next_id, "after {round} rounds");
        }
    }
}
