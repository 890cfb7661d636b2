//! The conformance suite every [`Store`] backend must pass. A backend's
//! test calls [`run`] with a factory: each call of the factory sets up a
//! fresh, empty storage location and returns an `open` closure; each call
//! of `open` opens (or reopens) a store on that location.
//!
//! Every check panics with a message naming the broken rule.
//!
//! The checks, by what they cover:
//! - `jobs`: live jobs, their ends and updates, the handle counter;
//! - `dead`: retries and dead jobs;
//! - `schedules`: schedules;
//! - `kept`: kept records;
//! - `functions`: functions' admin settings;
//! - `ids`: what schedules and kept records share with each other (by-id
//!   records apart from jobs) and ids past the largest a store keeps.

mod dead;
mod functions;
mod ids;
mod jobs;
mod kept;
mod schedules;

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::{
    DeadMark, FunctionRecord, JobRecord, KeptRecord, Op, Replayed, ScheduleRecord, Store,
    StoreError, MAX_ID,
};
use dead::*;
pub use functions::func;
use functions::*;
use ids::*;
use jobs::*;
use kept::*;
use schedules::*;

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

/// The ids of the live jobs `store` replays, in order.
pub fn live_ids(store: &mut impl Store) -> Vec<u64> {
    let replayed = store.replay().expect("replay");
    replayed.jobs.iter().map(|j| j.id).collect()
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
/// (and has no worker), even ids ran in the background. Generic so one
/// call gives the record or the boxed one [`crate::Op::Kept`] holds.
pub fn kept<K: From<KeptRecord>>(id: u64, outcome: u8, result: &[u8]) -> K {
    let started = !id.is_multiple_of(3);
    K::from(KeptRecord {
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
    })
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
    one_append_of_many_ops_keeps_their_order(fresh());
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
    function_settings_are_replayed(fresh());
    function_settings_survive_churn(fresh());
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
