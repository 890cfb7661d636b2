//! A partitioned node's store over a set of partitions, against a
//! throwaway PostgreSQL: it replays its set's rows only, writes each row to
//! its function's partition, refuses a function of another set, is fenced
//! when any of its partitions moves, and hands out ids from its block.

mod pg_cluster;
mod set_common;

use std::time::Duration;

use gearshift_core::Placement;
use gearshift_store::conformance::{func, job, kept};
use gearshift_store::postgres::partitions::{Owned, PartitionLeases};
use gearshift_store::{FunctionRecord, Op, PgOptions, PgStore, Store, StoreError};
use pg_cluster::shared;

const TIMEOUT: Duration = Duration::from_millis(400);
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

/// `name`'s settings: paused, at most `normal` of normal priority.
fn setting(name: &str, normal: i64) -> FunctionRecord {
    func(name.as_bytes(), true, [0, normal, 0])
}

/// The stored settings' rows: name, partition, normal limit.
fn setting_rows(db: &mut postgres::Client) -> Vec<(String, Option<i32>, i64)> {
    db.query(
        "SELECT function, partition, max_normal FROM gearshift_functions ORDER BY 1",
        &[],
    )
    .expect("settings")
    .iter()
    .map(|r| {
        let name: Vec<u8> = r.get(0);
        (
            String::from_utf8_lossy(&name).into_owned(),
            r.get(1),
            r.get(2),
        )
    })
    .collect()
}

fn pick(owned: &Owned, parts: &[u32]) -> Vec<(u32, i64)> {
    owned
        .owned
        .iter()
        .filter(|(p, _)| parts.contains(p))
        .copied()
        .collect()
}

#[test]
fn a_set_store_holds_its_partitions_rows_and_hands_out_its_block() {
    let url = shared().fresh_db();
    let mut l = leases(&url, "n1");
    let owned = l.beat().expect("beat");
    assert_eq!(owned.owned.len(), COUNT as usize);
    // Id 0 is never a job's: the first blocks start past it.
    l.reserve_ids(1).expect("reserve");
    let block_a = l.reserve_ids(1000).expect("reserve");
    let block_b = l.reserve_ids(1000).expect("reserve");
    assert!(block_a.end <= block_b.start);
    let mut a = set_store(&url, &pick(&owned, &[0, 1]), block_a.clone());
    let mut b = set_store(&url, &pick(&owned, &[2, 3]), block_b.clone());
    assert_eq!(a.replay().expect("replay a").next_id, block_a.start);
    assert_eq!(b.replay().expect("replay b").next_id, block_b.start);
    let (f0, f1, f2) = (function_in(0), function_in(1), function_in(2));
    a.add(&job(block_a.start, &f0, "", 0, b"x"));
    a.add(&job(block_a.start + 1, &f1, "", 0, b"y"));
    a.kept(&kept(block_a.start + 2, 0, b"k"));
    a.append(&[Op::Function(setting(&f0, 1)), Op::Function(setting(&f1, 2))]);
    a.flush().expect("flush a");
    b.add(&job(block_b.start, &f2, "", 0, b"z"));
    b.append(&[Op::Function(setting(&f2, 3))]);
    b.flush().expect("flush b");

    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let rows = set_common::job_partitions(&url);
    let big = |id: u64| i64::try_from(id).expect("small id");
    assert_eq!(
        rows,
        [
            (big(block_a.start), Some(0)),
            (big(block_a.start + 1), Some(1)),
            (big(block_b.start), Some(2)),
        ]
    );
    // The reservation was not moved by the flushes.
    let reserved: i64 = db
        .query_one("SELECT last_reserved FROM gearshift_reservation", &[])
        .expect("mark")
        .get(0);
    assert_eq!(reserved, big(block_b.end - 1));

    // Each replays its own set only, and a new store on a's set sees a's rows.
    let ra = set_store(&url, &pick(&owned, &[0, 1]), 5000..6000)
        .replay()
        .expect("replay");
    assert_eq!(
        ra.jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        [block_a.start, block_a.start + 1]
    );
    assert_eq!(ra.next_id, 5000);
    let rb = b.replay().expect("replay b");
    assert_eq!(
        rb.jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        [block_b.start]
    );
    // Ending a's job through b changes nothing.
    b.done(block_a.start);
    b.flush().expect("flush b");
    let ra = a.replay().expect("replay a");
    assert_eq!(ra.jobs.len(), 2);

    // Settings too: each set replays its own, and b's reset of a's
    // function (a delete) leaves a's row alone.
    b.append(&[Op::Function(func(f0.as_bytes(), false, [0; 3]))]);
    b.flush().expect("flush b");
    let mut mine = vec![setting(&f0, 1), setting(&f1, 2)];
    mine.sort_by(|x, y| x.name.cmp(&y.name));
    assert_eq!(
        a.replay().expect("replay a").functions,
        mine,
        "in name order"
    );
    assert_eq!(b.replay().expect("replay b").functions, [setting(&f2, 3)]);
    let mut want = vec![(f0.clone(), Some(0), 1), (f1.clone(), Some(1), 2)];
    want.push((f2.clone(), Some(2), 3));
    want.sort();
    assert_eq!(setting_rows(&mut db), want);
    // A function pinned elsewhere in the set: its row moves with it.
    let mut pinned = Placement::new(COUNT);
    pinned.pins.insert(bytes::Bytes::from(f1.clone()), 0);
    let mut a2 = set_common::set_store(&url, &pick(&owned, &[0, 1]), 6000..7000, pinned);
    a2.replay().expect("replay");
    a2.append(&[Op::Function(setting(&f1, 4))]);
    a2.flush().expect("flush");
    for row in want.iter_mut().filter(|r| r.0 == f1) {
        *row = (f1.clone(), Some(0), 4);
    }
    assert_eq!(setting_rows(&mut db), want);
}

/// A fresh database whose one node owns every partition, and a store
/// over partitions 0 and 1 handing out 100 ids, replayed.
fn fresh_set_of_0_and_1() -> (String, std::ops::Range<u64>, PgStore) {
    let url = shared().fresh_db();
    let mut l = leases(&url, "n1");
    let owned = l.beat().expect("beat");
    let ids = l.reserve_ids(100).expect("reserve");
    let mut a = set_store(&url, &pick(&owned, &[0, 1]), ids.clone());
    a.replay().expect("replay");
    (url, ids, a)
}

#[test]
fn a_set_store_refuses_another_sets_function_and_is_fenced_by_any_move() {
    let (url, ids, mut a) = fresh_set_of_0_and_1();
    a.add(&job(ids.start, &function_in(3), "", 0, b"x"));
    let err = a.flush().expect_err("a function of partition 3");
    assert!(matches!(err, StoreError::InvalidRequest(_)), "{err:?}");
    // So are its settings, with the rest of their batch.
    a.add(&job(ids.start + 3, &function_in(0), "", 0, b"w"));
    a.append(&[Op::Function(setting(&function_in(3), 1))]);
    let err = a
        .flush()
        .expect_err("settings of a function of partition 3");
    assert!(matches!(err, StoreError::InvalidRequest(_)), "{err:?}");
    assert!(a.replay().expect("replay").functions.is_empty());
    // Refused means not stored, and the store goes on.
    a.add(&job(ids.start + 1, &function_in(1), "", 0, b"y"));
    a.flush().expect("flush");
    assert_eq!(a.replay().expect("replay").jobs.len(), 1);

    // Partition 1 is taken over (its epoch raised): nothing more is stored.
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    db.execute(
        "UPDATE gearshift_partitions SET epoch = epoch + 1 WHERE partition = 1",
        &[],
    )
    .expect("take over");
    a.add(&job(ids.start + 2, &function_in(0), "", 0, b"z"));
    let err = a.flush().expect_err("fenced");
    assert!(matches!(err, StoreError::Fenced(_)), "{err:?}");
    let n: i64 = db
        .query_one("SELECT count(*) FROM gearshift_jobs", &[])
        .expect("count")
        .get(0);
    assert_eq!(n, 1);
}

#[test]
fn rows_of_a_single_leader_are_served_by_their_partitions_set() {
    let url = shared().fresh_db();
    // Written by a single node, before any partitions.
    let mut single = PgStore::open(&url, PgOptions::default()).expect("open");
    single.replay().expect("replay");
    let (f0, f3) = (function_in(0), function_in(3));
    single.add(&job(1, &f0, "", 0, b"x"));
    single.add(&job(2, &f3, "", 0, b"y"));
    single.flush().expect("flush");
    drop(single);
    let mut l = leases(&url, "n1");
    let owned = l.beat().expect("beat");
    let ids = l.reserve_ids(100).expect("reserve");
    let r0 = set_store(&url, &pick(&owned, &[0]), ids.clone())
        .replay()
        .expect("replay");
    assert_eq!(r0.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [1]);
    let r3 = set_store(&url, &pick(&owned, &[3]), ids)
        .replay()
        .expect("replay");
    assert_eq!(r3.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [2]);
}

#[test]
fn a_set_store_takes_a_new_placement_while_it_runs() {
    let (url, ids, mut a) = fresh_set_of_0_and_1();
    // A function of partition 3, pinned into partition 1: refused until
    // the store takes the placement with the pin.
    let f = function_in(3);
    let mut pinned = Placement::new(COUNT);
    pinned.pins.insert(bytes::Bytes::from(f.clone()), 1);
    a.add(&job(ids.start, &f, "", 0, b"x"));
    assert!(
        a.repartition()
            .expect("a set")
            .place(pinned.clone())
            .is_err(),
        "ops buffered"
    );
    assert!(matches!(a.flush(), Err(StoreError::InvalidRequest(_))));
    a.repartition()
        .expect("a set")
        .place(pinned)
        .expect("place");
    a.add(&job(ids.start + 1, &f, "", 0, b"y"));
    a.flush().expect("stored in partition 1");
    assert_eq!(
        set_common::job_partitions(&url),
        [(i64::try_from(ids.start + 1).expect("small"), Some(1))]
    );
    // A store over one partition is not a set: it has no placement to take.
    let mut single = PgStore::open(&url, PgOptions::default()).expect("open");
    assert!(single
        .repartition()
        .is_none_or(|r| r.place(Placement::new(COUNT)).is_err()));
}
