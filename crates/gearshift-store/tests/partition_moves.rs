//! A partitioned node's set store taking partitions on and letting them go
//! while it runs ([`Repartition`]), against a throwaway PostgreSQL: an
//! adopted partition's rows come back and are written from then on, with
//! every flush fenced on its epoch too; a released one's are forgotten and
//! no longer written or fenced on.

mod pg_cluster;
mod set_common;

use std::time::Duration;

use bytes::Bytes;
use gearshift_core::Placement;
use gearshift_store::conformance::{func, job, kept, sched};
use gearshift_store::postgres::partitions::PartitionLeases;
use gearshift_store::{
    fault::FaultyStore, DeadMark, FunctionRecord, KeptRecord, Op, PgOptions, PgStore, Replayed,
    ScheduleRecord, Store, StoreError,
};
use pg_cluster::shared;

/// Long enough that no lease expires during a test: only the tests move
/// partitions.
const TIMEOUT: Duration = Duration::from_secs(60);
const COUNT: u32 = 4;

fn leases(url: &str, name: &str) -> PartitionLeases {
    set_common::leases(url, name, TIMEOUT, COUNT)
}

/// A function name that `Placement` puts in `partition`.
fn function_in(partition: u32) -> String {
    set_common::function_in(&Placement::new(COUNT), partition)
}

fn set_store(url: &str, owned: &[(u32, i64)], ids: std::ops::Range<u64>) -> PgStore {
    set_common::set_store(url, owned, ids, Placement::new(COUNT))
}

/// The cluster with every partition owned by one node, and its leases.
fn cluster(url: &str) -> (PartitionLeases, Vec<(u32, i64)>) {
    let mut l = leases(url, "n1");
    let owned = l.beat().expect("beat").owned;
    assert_eq!(owned.len(), COUNT as usize);
    // Id 0 is never a job's: the blocks start past it.
    l.reserve_ids(1).expect("reserve");
    (l, owned)
}

/// `parts` of `owned`.
fn pick(owned: &[(u32, i64)], parts: &[u32]) -> Vec<(u32, i64)> {
    owned
        .iter()
        .filter(|(p, _)| parts.contains(p))
        .copied()
        .collect()
}

/// `partition` handed over and taken again at the next epoch (a move);
/// returns it with its new epoch.
fn moved(l: &mut PartitionLeases, partition: u32) -> (u32, i64) {
    assert_eq!(l.release(&[partition]).expect("release"), [partition]);
    let owned = l.beat().expect("beat").owned;
    let now = pick(&owned, &[partition]);
    assert_eq!(now.len(), 1, "taken again: {owned:?}");
    now[0]
}

/// Raises `partition`'s epoch behind everyone's back (another node's
/// takeover).
fn take_over(url: &str, partition: i32) {
    let mut db = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    db.execute(
        "UPDATE gearshift_partitions SET epoch = epoch + 1 WHERE partition = $1",
        &[&partition],
    )
    .expect("take over");
}

fn setting(name: &str, normal: i64) -> FunctionRecord {
    func(name.as_bytes(), true, [0, normal, 0])
}

fn schedule_of(id: u64, function: &str) -> ScheduleRecord {
    let mut s = sched(id, "0 * * * *", Some(1_700_000_000_000));
    s.function = Bytes::from(function.to_owned());
    s
}

fn kept_of(id: u64, function: &str) -> KeptRecord {
    let mut k: KeptRecord = kept(id, 0, b"done");
    k.function = Bytes::from(function.to_owned());
    k
}

fn mark() -> DeadMark {
    DeadMark {
        died_ms: 1_700_000_005_000,
        error: Bytes::from_static(b"gave up"),
    }
}

/// Writes a live job, a running one, a dead one, a schedule, a kept record
/// and a setting of `function`, from id `at` on.
fn fill(s: &mut PgStore, at: u64, function: &str) {
    s.add(&job(at, function, "", 0, b"live"));
    s.add(&job(at + 1, function, "", 0, b"running"));
    s.started(at + 1);
    s.add(&job(at + 2, function, "", 0, b"dead"));
    s.dead(at + 2, 3, &mark());
    s.schedule(&schedule_of(at + 3, function));
    s.kept(&kept_of(at + 4, function));
    s.append(&[Op::Function(setting(function, 7))]);
    s.flush().expect("flush");
}

fn ids(r: &Replayed) -> (Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>) {
    (
        r.jobs.iter().map(|j| j.id).collect(),
        r.dead.iter().map(|(j, _)| j.id).collect(),
        r.schedules.iter().map(|s| s.id).collect(),
        r.kept.iter().map(|k| k.id).collect(),
    )
}

#[test]
fn adopting_a_partition_returns_its_rows_and_writes_them_from_then_on() {
    let url = shared().fresh_db();
    let (mut l, owned) = cluster(&url);
    let (block_a, block_b) = (
        l.reserve_ids(100).expect("a"),
        l.reserve_ids(100).expect("b"),
    );
    let (f0, f1) = (function_in(0), function_in(1));
    let mut b = set_store(&url, &pick(&owned, &[1]), block_b.clone());
    b.replay().expect("replay b");
    fill(&mut b, block_b.start, &f1);
    let mut a = set_store(&url, &pick(&owned, &[0]), block_a.clone());
    a.replay().expect("replay a");
    fill(&mut a, block_a.start, &f0);
    let before = a.replay().expect("replay a");
    // Partition 1 moves to a's node: b is fenced off.
    let p1 = moved(&mut l, 1);
    assert!(p1.1 > pick(&owned, &[1])[0].1);
    b.done(block_b.start);
    assert!(matches!(b.flush(), Err(StoreError::Fenced(_))));
    drop(b);

    let rep = a.repartition().expect("a set's store repartitions");
    let got = rep.adopt(&[p1]).expect("adopt");
    let s = block_b.start;
    assert_eq!(
        ids(&got),
        (vec![s, s + 1], vec![s + 2], vec![s + 3], vec![s + 4])
    );
    assert_eq!(got.running, [s + 1]);
    assert_eq!(got.functions, [setting(&f1, 7)]);
    assert_eq!(got.next_id, before.next_id, "the store's own");
    let p0 = pick(&owned, &[0])[0];
    assert_eq!(rep.partitions(), [p0, p1]);

    // Partition 1's functions are written now, and its rows are a's.
    a.add(&job(block_a.start + 10, &f1, "", 0, b"new"));
    a.done(s);
    a.update(s + 1, 2);
    a.append(&[Op::Function(setting(&f1, 9))]);
    a.flush().expect("flush partition 1's ops");
    let all = a.replay().expect("replay a");
    let a0 = block_a.start;
    assert_eq!(
        ids(&all),
        (
            vec![a0, a0 + 1, a0 + 10, s + 1],
            vec![a0 + 2, s + 2],
            vec![a0 + 3, s + 3],
            vec![a0 + 4, s + 4]
        )
    );
    // The update ended the run; a's own run mark stands.
    assert_eq!(all.running, [a0 + 1]);
    let mut settings = vec![setting(&f0, 7), setting(&f1, 9)];
    settings.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!(all.functions, settings);
    // A fresh store over both partitions sees the same.
    let fresh = set_store(&url, &[p0, p1], 5000..6000)
        .replay()
        .expect("replay");
    assert_eq!(ids(&fresh), ids(&all));
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let part: Option<i32> = db
        .query_one(
            "SELECT partition FROM gearshift_jobs WHERE id = $1",
            &[&i64::try_from(a0 + 10).expect("small")],
        )
        .expect("the new job")
        .get(0);
    assert_eq!(part, Some(1));
}

#[test]
fn adopting_before_the_first_replay_reads_only_the_new_partitions() {
    let url = shared().fresh_db();
    let (mut l, owned) = cluster(&url);
    let (block_a, block_b) = (
        l.reserve_ids(100).expect("a"),
        l.reserve_ids(100).expect("b"),
    );
    let mut b = set_store(&url, &pick(&owned, &[1]), block_b.clone());
    fill(&mut b, block_b.start, &function_in(1));
    drop(b);
    let mut a = set_store(&url, &pick(&owned, &[0]), block_a.clone());
    fill(&mut a, block_a.start, &function_in(0));
    // A fresh store over partition 0: nothing in memory yet.
    let mut c = set_store(&url, &pick(&owned, &[0]), 7000..7100);
    let got = c
        .repartition()
        .expect("repartitions")
        .adopt(&pick(&owned, &[1]))
        .expect("adopt");
    assert_eq!(got.jobs.len(), 2);
    assert!(got.jobs.iter().all(|j| j.id >= block_b.start));
    assert_eq!(got.next_id, 7000);
    let all = c.replay().expect("replay");
    assert_eq!(all.jobs.len(), 4);
    assert_eq!(all.functions.len(), 2);
}

#[test]
fn a_released_partition_is_neither_written_nor_fenced_on() {
    let url = shared().fresh_db();
    let (mut l, owned) = cluster(&url);
    let (block_a, block_b) = (
        l.reserve_ids(100).expect("a"),
        l.reserve_ids(100).expect("b"),
    );
    let (f0, f1) = (function_in(0), function_in(1));
    let mut a = set_store(&url, &pick(&owned, &[0, 1]), block_a.clone());
    a.replay().expect("replay");
    fill(&mut a, block_a.start, &f0);
    let a1 = block_a.start + 20;
    fill(&mut a, a1, &f1);

    a.repartition()
        .expect("repartitions")
        .release(&[1, 3, 99])
        .expect("release");
    assert_eq!(
        a.repartition().expect("repartitions").partitions(),
        pick(&owned, &[0])
    );
    // A function of partition 1 is another node's now.
    a.add(&job(block_a.start + 40, &f1, "", 0, b"no"));
    let err = a.flush().expect_err("partition 1 is let go");
    assert!(matches!(err, StoreError::InvalidRequest(_)), "{err:?}");

    // Another node takes partition 1 at a new epoch and changes its rows;
    // a's flushes for partition 0 go on.
    let p1 = moved(&mut l, 1);
    let mut b = set_store(&url, &[p1], block_b.clone());
    let theirs = b.replay().expect("replay b");
    assert_eq!(theirs.jobs.len(), 2);
    b.done(a1);
    b.done(a1 + 1);
    b.flush().expect("flush b");
    let a0 = block_a.start;
    a.add(&job(a0 + 41, &f0, "", 0, b"yes"));
    a.flush().expect("not fenced on partition 1");
    // Ops on partition 1's old ids (gone from memory, not re-read since)
    // write nothing.
    a.update(a1, 5);
    a.retry(a1 + 2, 1, None);
    a.flush().expect("flush");
    let r = a.replay().expect("replay");
    assert_eq!(
        ids(&r),
        (
            vec![a0, a0 + 1, a0 + 41],
            vec![a0 + 2],
            vec![a0 + 3],
            vec![a0 + 4]
        )
    );
    assert_eq!(r.functions, [setting(&f0, 7)]);
    let theirs = b.replay().expect("replay b");
    assert!(theirs.jobs.is_empty(), "{:?}", theirs.jobs);
    assert_eq!(theirs.dead[0].0.attempts, 3);

    // Taken back at yet another epoch: the other node's changes stand.
    let p1 = moved(&mut l, 1);
    let got = a
        .repartition()
        .expect("repartitions")
        .adopt(&[p1])
        .expect("adopt");
    assert!(got.jobs.is_empty());
    assert_eq!(got.dead.len(), 1);
    assert!(got.running.is_empty());
    a.update(a1, 6);
    a.flush().expect("flush");
    assert_eq!(a.replay().expect("replay").jobs.len(), 3);
}

#[test]
fn an_adopted_partition_fences_the_store_when_it_moves() {
    let url = shared().fresh_db();
    let (mut l, owned) = cluster(&url);
    let ids = l.reserve_ids(100).expect("reserve");
    let mut a = set_store(&url, &pick(&owned, &[0]), ids.clone());
    a.replay().expect("replay");
    a.repartition()
        .expect("repartitions")
        .adopt(&pick(&owned, &[1, 2]))
        .expect("adopt");
    a.add(&job(ids.start, &function_in(2), "", 0, b"x"));
    a.flush()
        .expect("flush while every partition is at its epoch");
    take_over(&url, 2);
    a.add(&job(ids.start + 1, &function_in(0), "", 0, b"y"));
    let err = a.flush().expect_err("partition 2 moved");
    assert!(matches!(err, StoreError::Fenced(_)), "{err:?}");
    assert_eq!(a.replay().expect("replay").jobs.len(), 1);
}

#[test]
fn changing_the_set_with_ops_buffered_or_at_a_stale_epoch_changes_nothing() {
    let url = shared().fresh_db();
    let (mut l, owned) = cluster(&url);
    let ids = l.reserve_ids(100).expect("reserve");
    let (f0, f1) = (function_in(0), function_in(1));
    // Only a set's store repartitions.
    let mut plain = PgStore::open(&url, PgOptions::default()).expect("open");
    assert!(plain.repartition().is_none());
    drop(plain);
    let one = PgOptions {
        partition: Some(owned[0]),
        ..PgOptions::default()
    };
    assert!(PgStore::open(&url, one)
        .expect("open")
        .repartition()
        .is_none());

    let mut a = set_store(&url, &pick(&owned, &[0, 2]), ids.clone());
    a.replay().expect("replay");
    let set = pick(&owned, &[0, 2]);
    a.add(&job(ids.start, &f0, "", 0, b"x"));
    let rep = a.repartition().expect("repartitions");
    let err = rep.adopt(&pick(&owned, &[1])).expect_err("ops buffered");
    assert!(matches!(err, StoreError::InvalidRequest(_)), "{err:?}");
    let err = rep.release(&[2]).expect_err("ops buffered");
    assert!(matches!(err, StoreError::InvalidRequest(_)), "{err:?}");
    assert_eq!(rep.partitions(), set);
    a.flush().expect("the buffered op is still placed");
    // A run started is buffered too.
    a.started(ids.start);
    let rep = a.repartition().expect("repartitions");
    assert!(matches!(
        rep.release(&[2]),
        Err(StoreError::InvalidRequest(_))
    ));
    a.flush().expect("flush");
    a.add(&job(ids.start + 1, &f1, "", 0, b"y"));
    assert!(matches!(a.flush(), Err(StoreError::InvalidRequest(_))));

    let rep = a.repartition().expect("repartitions");
    // Already held, twice in one call, or past the count: refused.
    for parts in [
        pick(&owned, &[0]),
        [pick(&owned, &[1]), pick(&owned, &[1])].concat(),
        vec![(COUNT, 1)],
    ] {
        let err = rep.adopt(&parts).expect_err("refused");
        assert!(matches!(err, StoreError::InvalidRequest(_)), "{err:?}");
    }
    // Not at the epoch it is adopted at: fenced, and the set unchanged.
    let (p1, e1) = pick(&owned, &[1])[0];
    let err = rep.adopt(&[(p1, e1 + 1)]).expect_err("stale epoch");
    assert!(matches!(err, StoreError::Fenced(_)), "{err:?}");
    assert_eq!(rep.partitions(), set);
    a.add(&job(ids.start + 2, &f1, "", 0, b"z"));
    assert!(matches!(a.flush(), Err(StoreError::InvalidRequest(_))));

    // A connection lost under the adopt: the error, the set as it was, and
    // the next adopt reconnects.
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    db.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'gearshift'",
        &[],
    )
    .expect("cut the store's connection");
    let rep = a.repartition().expect("repartitions");
    let err = rep.adopt(&pick(&owned, &[1])).expect_err("connection lost");
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err:?}");
    assert_eq!(rep.partitions(), set);
    rep.adopt(&pick(&owned, &[1])).expect("adopt again");
    a.add(&job(ids.start + 3, &f1, "", 0, b"w"));
    a.flush().expect("partition 1 is a's now");
    assert_eq!(a.replay().expect("replay").jobs.len(), 2);
}

#[test]
fn a_fault_injecting_wrapper_moves_partitions_as_its_store_does() {
    let url = shared().fresh_db();
    let (mut l, owned) = cluster(&url);
    let ids = l.reserve_ids(100).expect("reserve");
    let mut a = FaultyStore::new(set_store(&url, &pick(&owned, &[0]), ids.clone()), 1);
    a.replay().expect("replay");
    a.repartition()
        .expect("the wrapper repartitions")
        .adopt(&pick(&owned, &[1]))
        .expect("adopt");
    a.add(&job(ids.start, &function_in(1), "", 0, b"x"));
    a.flush().expect("an adopted partition is written");
    // Its budget spent, the wrapper fails the next flush; healed, it goes on.
    a.add(&job(ids.start + 1, &function_in(1), "", 0, b"y"));
    assert!(matches!(a.flush(), Err(StoreError::Injected(_))));
    a.budget().store(10, std::sync::atomic::Ordering::SeqCst);
    a.add(&job(ids.start + 2, &function_in(1), "", 0, b"z"));
    a.flush().expect("healed");
    assert_eq!(a.replay().expect("replay").jobs.len(), 2);
}
