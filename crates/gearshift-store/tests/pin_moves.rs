//! A pin asked for while a node owns the function's partition, against a
//! throwaway PostgreSQL: it waits for that node, whose store moves the
//! rows and puts the pin in force in one transaction fenced on its epoch,
//! with no partition taken from anyone.

mod pg_cluster;
mod set_common;

use std::time::Duration;

use gearshift_core::Placement;
use gearshift_store::conformance::{func, job};
use gearshift_store::postgres::partitions::{Owned, PartitionLeases};
use gearshift_store::postgres::pins::{Asked, Pins};
use gearshift_store::{Op, PgOptions, PgStore, Repartition, Store, StoreError};
use pg_cluster::shared;
use set_common::{epoch_of, job_partitions};

const COUNT: u32 = 8;

fn leases(url: &str, name: &str) -> PartitionLeases {
    set_common::leases(url, name, Duration::from_secs(5), COUNT)
}

/// A fresh database whose node `n1` owns every partition, and a store over
/// all of them.
fn owned_by_one() -> (String, Owned, PgStore) {
    let url = shared().fresh_db();
    let mut l = leases(&url, "n1");
    let owned = l.beat().expect("beat");
    let ids = l.reserve_ids(1 << 20).expect("ids");
    let store = set_common::set_store(&url, &owned.owned, ids, Placement::new(COUNT));
    (url, owned, store)
}

fn repartition(s: &mut PgStore) -> &mut dyn Repartition {
    s.repartition().expect("a set's store")
}

#[test]
fn an_asked_pin_is_moved_by_the_owner_without_a_fence() {
    let (url, owned, mut store) = owned_by_one();
    let from = Placement::new(COUNT).partition_of(b"resize");
    let to = (from + 3) % COUNT;
    let first = store.replay().expect("replay").next_id;
    store.add(&job(first, "resize", "", 0, b"queued"));
    store.add(&job(first + 1, "other", "", 0, b"stays"));
    store.append(&[Op::Function(func(b"resize", true, [0; 3]))]);
    store.flush().expect("flush");

    let mut pins = Pins::open(&url, &PgOptions::default()).expect("pins");
    let asked = pins.ask(b"resize", Some(to)).expect("ask");
    assert_eq!(
        asked,
        Asked::Waiting {
            from,
            to,
            owner: "n1".into()
        }
    );
    let waiting = pins.asked().expect("asked");
    assert_eq!(
        waiting
            .iter()
            .map(|m| (&m.function[..], m.partition))
            .collect::<Vec<_>>(),
        [(&b"resize"[..], Some(to))]
    );
    assert_eq!(leases(&url, "n1").pin_moves().expect("moves"), waiting);
    // Asked again: another move.
    pins.ask(b"resize", Some(to)).expect("ask again");
    let again = pins.asked().expect("asked");
    assert!(
        again[0].asked_us > waiting[0].asked_us,
        "{again:?} after {waiting:?}"
    );
    assert!(pins.placement().expect("placement").pins.is_empty());
    let at = |p| (first as i64, Some(p as i32));
    assert_eq!(job_partitions(&url)[0], at(from), "nothing moves yet");

    // A move of a pin no longer asked for (asked again elsewhere) moves
    // nothing; the store takes the function back.
    let other = (to + 1) % COUNT;
    let stale = repartition(&mut store)
        .give_function(b"resize", Some(other))
        .expect("a stale move");
    assert!(stale.pins.is_empty());
    assert_eq!(job_partitions(&url)[0], at(from));
    assert_eq!(pins.asked().expect("asked").len(), 1);
    repartition(&mut store)
        .adopt_function(b"resize", stale)
        .expect("taken back");

    // The owner moves it: the rows go, the pin is in force, no epoch moves.
    let placement = repartition(&mut store)
        .give_function(b"resize", Some(to))
        .expect("give");
    assert_eq!(placement.partition_of(b"resize"), to);
    assert_eq!(pins.placement().expect("placement"), placement);
    assert!(pins.asked().expect("asked").is_empty());
    assert_eq!(job_partitions(&url)[0], at(to));
    let again = leases(&url, "n1").beat().expect("beat");
    assert_eq!(
        again.owned, owned.owned,
        "no partition was taken from its owner"
    );
    // The store goes on writing, by the new placement.
    store.done(first + 1);
    store.flush().expect("a flush after the move");
    // Its rows left the store's memory; taken on again they come back once.
    let r = repartition(&mut store)
        .adopt_function(b"resize", placement.clone())
        .expect("adopt");
    assert_eq!(r.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [first]);
    assert_eq!(r.functions, [func(b"resize", true, [0; 3])]);
    let twice = repartition(&mut store)
        .adopt_function(b"resize", placement)
        .expect("adopt again");
    assert!(
        twice.jobs.is_empty() && twice.functions.is_empty(),
        "{twice:?}"
    );
    store.done(first);
    store.flush().expect("its end stored where it lives now");
    assert!(job_partitions(&url).is_empty());

    // Unpinned the same way.
    match pins.ask(b"resize", None).expect("unpin") {
        Asked::Waiting { from: f, to: t, .. } => assert_eq!((f, t), (to, from)),
        other => panic!("expected a wait, got {other:?}"),
    }
    let back = repartition(&mut store)
        .give_function(b"resize", None)
        .expect("give back");
    assert!(back.pins.is_empty());
    assert!(pins.asked().expect("asked").is_empty());
}

#[test]
fn a_pin_asked_where_no_node_lives_moves_at_once() {
    let url = shared().fresh_db();
    let mut l = leases(&url, "n1");
    l.beat().expect("beat");
    l.leave().expect("leave");
    let from = Placement::new(COUNT).partition_of(b"idle");
    let to = (from + 1) % COUNT;
    let mut pins = Pins::open(&url, &PgOptions::default()).expect("pins");
    match pins.ask(b"idle", Some(to)).expect("ask") {
        Asked::Moved(p) => assert_eq!((p.from, p.to, p.moved), (from, to, 0)),
        other => panic!("expected a move at once, got {other:?}"),
    }
    assert!(pins.asked().expect("asked").is_empty());
    assert_eq!(
        pins.placement().expect("placement").partition_of(b"idle"),
        to
    );
}

#[test]
fn a_move_by_a_node_no_longer_at_its_epoch_is_fenced() {
    let (url, owned, mut store) = owned_by_one();
    let from = Placement::new(COUNT).partition_of(b"taken");
    let to = (from + 1) % COUNT;
    let first = store.replay().expect("replay").next_id;
    store.add(&job(first, "taken", "", 0, b"queued"));
    store.flush().expect("flush");
    let mut pins = Pins::open(&url, &PgOptions::default()).expect("pins");
    assert!(matches!(
        pins.ask(b"taken", Some(to)).expect("ask"),
        Asked::Waiting { .. }
    ));
    // Another node took the partition meanwhile.
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    db.execute(
        "UPDATE gearshift_partitions SET epoch = epoch + 1 WHERE partition = $1",
        &[&(from as i32)],
    )
    .expect("raise the epoch");
    match repartition(&mut store).give_function(b"taken", Some(to)) {
        Err(StoreError::Fenced(_)) => {}
        other => panic!("expected Fenced, got {other:?}"),
    }
    assert_eq!(job_partitions(&url), [(first as i64, Some(from as i32))]);
    assert_eq!(pins.asked().expect("asked").len(), 1, "still asked for");
    // A function of a partition outside the set is refused.
    let only_to = vec![(to, epoch_of(&owned, to))];
    let mut part = set_common::set_store(&url, &only_to, 1..2, Placement::new(COUNT));
    assert!(matches!(
        repartition(&mut part).give_function(b"taken", Some(to)),
        Err(StoreError::InvalidRequest(_))
    ));
}

#[test]
fn a_move_puts_only_its_own_pin_in_force() {
    let (url, _, mut store) = owned_by_one();
    store.replay().expect("replay");
    let placement = Placement::new(COUNT);
    let from = placement.partition_of(b"mine");
    let other = set_common::function_in(&placement, (from + 1) % COUNT);
    let mut pins = Pins::open(&url, &PgOptions::default()).expect("pins");
    // Another function pinned meanwhile: this store learns of it from its
    // node's beat, which takes on what it moves in, not from this move.
    pins.pin(other.as_bytes(), Some((from + 2) % COUNT))
        .expect("another pin");
    pins.ask(b"mine", Some((from + 3) % COUNT)).expect("ask");
    let after = repartition(&mut store)
        .give_function(b"mine", Some((from + 3) % COUNT))
        .expect("give");
    assert_eq!(after.partition_of(b"mine"), (from + 3) % COUNT);
    assert_eq!(
        after.partition_of(other.as_bytes()),
        placement.partition_of(other.as_bytes()),
        "the other pin is not put in force by this move"
    );
    assert_eq!(pins.placement().expect("stored").pins.len(), 2);
}

#[test]
fn a_lost_move_still_running_is_ended_before_the_pins_are_read() {
    let (url, _, mut store) = owned_by_one();
    let from = Placement::new(COUNT).partition_of(b"held");
    let to = (from + 1) % COUNT;
    let first = store.replay().expect("replay").next_id;
    store.add(&job(first, "held", "", 0, b"queued"));
    store.flush().expect("flush");
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    // Holds the move at its COMMIT, as a connection lost there would.
    db.batch_execute(
        "CREATE FUNCTION hold() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN PERFORM pg_sleep(60); RETURN NULL; END $$;
         CREATE CONSTRAINT TRIGGER hold AFTER DELETE ON gearshift_pin_moves
           DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hold();",
    )
    .expect("trigger");
    let mut pins = Pins::open(&url, &PgOptions::default()).expect("pins");
    pins.ask(b"held", Some(to)).expect("ask");
    let mover = std::thread::spawn(move || {
        repartition(&mut store)
            .give_function(b"held", Some(to))
            .map(|_| ())
    });
    let mut sleeping = || {
        let n: i64 = db
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event = 'PgSleep'",
                &[],
            )
            .expect("activity")
            .get(0);
        n == 1
    };
    while !sleeping() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let started = std::time::Instant::now();
    let placement = pins.placement_settled(b"held").expect("settled");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the move's session was ended, not waited for"
    );
    assert_eq!(placement.partition_of(b"held"), from, "rolled back");
    assert!(
        mover.join().expect("mover").is_err(),
        "the mover's answer is lost"
    );
    assert_eq!(job_partitions(&url), [(first as i64, Some(from as i32))]);
    assert_eq!(pins.asked().expect("asked").len(), 1, "still asked for");
    // With no move running, the pins are read at once.
    assert_eq!(
        pins.placement_settled(b"held").expect("again"),
        pins.placement().expect("placement")
    );
}
