//! Pinning a function against a throwaway PostgreSQL: the pin moves the
//! function's stored rows to its new partition, and fences the partition
//! it left, so a node still writing it there stores nothing.

mod pg_cluster;
mod set_common;

use std::time::Duration;

use gearshift_core::Placement;
use gearshift_store::conformance::{func, job, kept};
use gearshift_store::postgres::partitions::{check_partition_epoch, Owned, PartitionLeases};
use gearshift_store::postgres::pins::{Pinned, Pins};
use gearshift_store::{Op, PgOptions, PgStore, Store, StoreError};
use pg_cluster::shared;
use set_common::epoch_of;

const COUNT: u32 = 8;

fn leases(url: &str, name: &str) -> PartitionLeases {
    set_common::leases(url, name, Duration::from_secs(5), COUNT)
}

fn part_store(url: &str, partition: u32, epoch: i64) -> PgStore {
    let opts = PgOptions {
        partition: Some((partition, epoch)),
        ..PgOptions::default()
    };
    let mut s = PgStore::open(url, opts).expect("open a partition's store");
    s.replay().expect("replay");
    s
}

/// A fresh database whose one node owns every partition: its URL, that
/// node's beat, and the partition `function`'s name places it in.
fn fresh(function: &[u8]) -> (String, Owned, u32) {
    let url = shared().fresh_db();
    let owned = leases(&url, "n1").beat().expect("beat");
    (url, owned, Placement::new(COUNT).partition_of(function))
}

/// Each table's (id or function, partition) rows of function `f`.
fn rows_of(url: &str, f: &str) -> Vec<(String, i32)> {
    let mut db = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    db.query(
        "SELECT 'job ' || id, partition FROM gearshift_jobs WHERE function = $1
         UNION ALL SELECT 'kept ' || id, partition FROM gearshift_kept WHERE function = $1
         UNION ALL SELECT 'settings', partition FROM gearshift_functions WHERE function = $1
         ORDER BY 1",
        &[&f.as_bytes()],
    )
    .expect("rows")
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

#[test]
fn a_pin_moves_the_rows_and_fences_the_partition_left() {
    let (url, owned, from) = fresh(b"resize");
    let to = (from + 3) % COUNT;
    let mut old = part_store(&url, from, epoch_of(&owned, from));
    old.add(&job(1, "resize", "", 0, b"queued"));
    old.add(&job(2, "other", "", 0, b"stays"));
    old.kept(&kept(3, 0, b"kept"));
    old.append(&[Op::Function(func(b"resize", true, [0; 3]))]);
    old.flush().expect("flush");

    let mut pins = Pins::open(&url, &PgOptions::default()).expect("pins");
    let pinned = pins.pin(b"resize", Some(to)).expect("pin");
    assert_eq!(
        pinned,
        Pinned {
            from,
            to,
            moved: 3,
            fenced: vec![from]
        }
    );
    assert_eq!(
        pins.placement().expect("placement").partition_of(b"resize"),
        to
    );
    assert_eq!(
        rows_of(&url, "resize"),
        [
            ("job 1".to_owned(), to as i32),
            ("kept 3".to_owned(), to as i32),
            ("settings".to_owned(), to as i32)
        ]
    );
    assert_eq!(rows_of(&url, "other"), [("job 2".to_owned(), from as i32)]);

    // The old owner, writing where the function was, is fenced.
    old.done(1);
    match old.flush() {
        Err(StoreError::Fenced(what)) => assert!(what.contains(&format!("partition {from}"))),
        other => panic!("expected Fenced, got {other:?}"),
    }
    // The new partition's store replays what moved.
    let mut new = part_store(&url, to, epoch_of(&owned, to));
    let r = new.replay().expect("replay");
    assert_eq!(r.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [1]);
    assert_eq!(r.kept.iter().map(|k| k.id).collect::<Vec<_>>(), [3]);
    assert_eq!(r.functions, [func(b"resize", true, [0; 3])]);
    // The partition left was freed one epoch on, and is taken again at the
    // next; the one joined stays as it was.
    let again = leases(&url, "n1").beat().expect("beat");
    assert_eq!(epoch_of(&again, from), epoch_of(&owned, from) + 2);
    assert_eq!(epoch_of(&again, to), epoch_of(&owned, to));

    // Unpinned: back where the name hashes, rows with it.
    let back = pins.pin(b"resize", None).expect("unpin");
    assert_eq!((back.from, back.to, back.moved), (to, from, 3));
    assert_eq!(back.fenced, vec![to]);
    assert!(pins.placement().expect("placement").pins.is_empty());
    assert!(rows_of(&url, "resize")
        .iter()
        .all(|(_, p)| *p == from as i32));
}

#[test]
fn a_pin_of_a_function_with_no_rows_still_fences_where_it_was() {
    let (url, owned, from) = fresh(b"new");
    let mut pins = Pins::open(&url, &PgOptions::default()).expect("pins");
    let to = (from + 1) % COUNT;
    let pinned = pins.pin(b"new", Some(to)).expect("pin");
    assert_eq!((pinned.moved, pinned.fenced), (0, vec![from]));
    // A node that has not seen the pin yet cannot store the function there.
    let mut stale = part_store(&url, from, epoch_of(&owned, from));
    stale.add(&job(1, "new", "", 0, b"late"));
    assert!(matches!(stale.flush(), Err(StoreError::Fenced(_))));
    // Pinning it where it already is changes nothing.
    let same = pins.pin(b"new", Some(to)).expect("pin again");
    assert_eq!((same.from, same.to, same.moved), (to, to, 0));
    assert!(same.fenced.is_empty());
}

#[test]
fn pins_are_refused_past_the_count_and_before_partitions() {
    let url = shared().fresh_db();
    match Pins::open(&url, &PgOptions::default()) {
        Err(StoreError::InvalidRequest(why)) => assert!(why.contains("--partitioned"), "{why}"),
        Err(e) => panic!("expected InvalidRequest, got {e:?}"),
        Ok(_) => panic!("a database without partitions must be refused"),
    }
    leases(&url, "n1");
    let mut pins = Pins::open(&url, &PgOptions::default()).expect("pins");
    match pins.pin(b"hot", Some(COUNT)) {
        Err(StoreError::InvalidRequest(why)) => assert!(why.contains("past"), "{why}"),
        other => panic!("a pin past the count must be refused, got {other:?}"),
    }
    assert!(pins.placement().expect("placement").pins.is_empty());
}

#[test]
fn a_pin_waits_for_a_flush_in_flight_instead_of_deadlocking_with_it() {
    let (url, owned, from) = fresh(b"busy");
    let to = (from + 1) % COUNT;
    let epoch = epoch_of(&owned, from);
    let mut s = part_store(&url, from, epoch);
    s.add(&job(1, "busy", "", 0, b"before"));
    s.flush().expect("flush");
    // A flush in flight: the partition's row key-share-locked, its rows
    // still to be written.
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let mut tx = db.transaction().expect("tx");
    let server = s.server().to_owned();
    check_partition_epoch(&mut tx, &server, from, epoch).expect("the fence");
    let pin_url = url.clone();
    let pinning = std::thread::spawn(move || {
        let mut pins = Pins::open(&pin_url, &PgOptions::default()).expect("pins");
        pins.pin(b"busy", Some(to))
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(!pinning.is_finished(), "the pin waits for the flush");
    tx.execute("UPDATE gearshift_jobs SET data = 'after' WHERE id = 1", &[])
        .expect("the flush writes its rows");
    tx.commit().expect("the flush commits");
    let pinned = pinning.join().expect("the pin's thread").expect("pin");
    assert_eq!(pinned.moved, 1);
    let row = db
        .query_one(
            "SELECT partition, data FROM gearshift_jobs WHERE id = 1",
            &[],
        )
        .expect("row");
    assert_eq!(row.get::<_, i32>(0), to as i32);
    assert_eq!(row.get::<_, Vec<u8>>(1), b"after");
}
