//! Partitions against a throwaway PostgreSQL: a partition's store (the
//! conformance suite, only its own rows, fenced by its epoch), placing
//! rows written before partitions, and the partition leases of several
//! nodes in one process (spread, join, release, a silent node).

mod pg_cluster;
mod set_common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use gearshift_core::Placement;
use gearshift_store::conformance::{self, func, job, kept, mark, sched};
use gearshift_store::postgres::lease::NodeAddrs;
use gearshift_store::postgres::partitions::{check_partition_epoch, Owned, PartitionLeases};
use gearshift_store::{Op, PgOptions, PgStore, Store, StoreError};
use pg_cluster::shared;
use set_common::epoch_of;

const TIMEOUT: Duration = Duration::from_millis(400);

fn node(name: &str) -> NodeAddrs {
    NodeAddrs {
        name: name.into(),
        gearman: format!("{name}.test:4730"),
        http: None,
    }
}

fn leases(url: &str, name: &str, count: u32) -> PartitionLeases {
    PartitionLeases::open(url, &PgOptions::default(), node(name), TIMEOUT, count)
        .expect("open the partition leases")
}

fn part_store(url: &str, partition: u32, epoch: i64) -> PgStore {
    let opts = PgOptions {
        partition: Some((partition, epoch)),
        ..PgOptions::default()
    };
    PgStore::open(url, opts).expect("open a partition's store")
}

fn sql(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).expect("connect for a check")
}

fn ids(db: &mut postgres::Client, query: &str) -> Vec<i64> {
    db.query(query, &[])
        .expect("read ids")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

#[test]
fn a_partition_store_conforms() {
    let cluster = shared();
    // Each location is a copy of one set up with partition 2 owned: a copy
    // is quicker than migrating anew.
    let template = cluster.fresh_db();
    let epoch = epoch_of(&leases(&template, "n1", 4).beat().expect("beat"), 2);
    let template = template.rsplit('/').next().unwrap_or_default().to_owned();
    let mut admin = sql(&cluster.url("postgres"));
    let mut n = 0;
    conformance::run(|| {
        n += 1;
        let name = format!("{template}_{n}");
        admin
            .batch_execute(&format!("CREATE DATABASE {name} TEMPLATE {template}"))
            .expect("copy the template");
        let url = cluster.url(&name);
        move || part_store(&url, 2, epoch)
    });
}

#[test]
fn partition_stores_see_and_touch_only_their_own_rows() {
    let url = shared().fresh_db();
    let owned = leases(&url, "n1", 8).beat().expect("beat");
    let mut a = part_store(&url, 1, epoch_of(&owned, 1));
    let mut b = part_store(&url, 2, epoch_of(&owned, 2));
    a.replay().expect("replay");
    b.replay().expect("replay");
    a.add(&job(1, "fa", "", 0, b"a1"));
    a.add(&job(2, "fa", "", 0, b"a2"));
    a.schedule(&sched(3, "* * * * *", Some(1)));
    a.kept(&kept(4, 0, b"ka"));
    a.append(&[Op::Function(func(b"fa", true, [0, 3, 0]))]);
    a.started(1);
    a.flush().expect("flush a");
    a.dead(2, 3, &mark(1_700_000_000_000, "boom"));
    a.flush().expect("flush a");
    b.add(&job(10, "fb", "", 0, b"b10"));
    b.kept(&kept(11, 0, b"kb"));
    b.append(&[Op::Function(func(b"fb", false, [1, 0, 0]))]);
    // Ends of a's ids through b change nothing of a's.
    b.done(1);
    b.unschedule(3);
    b.forget(4);
    b.flush().expect("flush b");
    // Nor does writing one of a's ids (ids are unique; this must not steal).
    b.kept(&kept(4, 1, b"stolen"));
    b.flush().expect("flush b");
    // Nor do b's settings for a's function: reset (a delete), then set.
    b.append(&[Op::Function(func(b"fa", false, [0; 3]))]);
    b.flush().expect("flush b");
    b.append(&[Op::Function(func(b"fa", false, [9, 9, 9]))]);
    b.flush().expect("flush b");

    let ra = a.replay().expect("replay a");
    assert_eq!(ra.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [1]);
    assert_eq!(ra.dead.iter().map(|d| d.0.id).collect::<Vec<_>>(), [2]);
    assert_eq!(ra.schedules.iter().map(|s| s.id).collect::<Vec<_>>(), [3]);
    assert_eq!(ra.kept, [kept(4, 0, b"ka")]);
    assert_eq!(ra.running, [1]);
    assert_eq!(ra.functions, [func(b"fa", true, [0, 3, 0])]);
    let rb = b.replay().expect("replay b");
    assert_eq!(rb.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [10]);
    assert!(rb.dead.is_empty() && rb.schedules.is_empty() && rb.running.is_empty());
    assert_eq!(rb.kept.iter().map(|k| k.id).collect::<Vec<_>>(), [11]);
    assert_eq!(rb.functions, [func(b"fb", false, [1, 0, 0])]);

    let mut db = sql(&url);
    let rows: Vec<(i64, Option<i32>)> = db
        .query(
            "SELECT id, partition FROM gearshift_jobs UNION ALL \
             SELECT id, partition FROM gearshift_schedules UNION ALL \
             SELECT id, partition FROM gearshift_kept ORDER BY 1",
            &[],
        )
        .expect("rows")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        rows,
        [
            (1, Some(1)),
            (2, Some(1)),
            (3, Some(1)),
            (4, Some(1)),
            (10, Some(2)),
            (11, Some(2))
        ],
        "every row carries its store's partition"
    );
    let settings: Vec<(Vec<u8>, Option<i32>, i64)> = db
        .query(
            "SELECT function, partition, max_high FROM gearshift_functions ORDER BY 1",
            &[],
        )
        .expect("settings")
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    assert_eq!(
        settings,
        [(b"fa".to_vec(), Some(1), 0), (b"fb".to_vec(), Some(2), 1)],
        "each store's settings in its partition, a's untouched by b"
    );
}

#[test]
fn a_flush_after_the_partition_moved_on_is_fenced_and_writes_nothing() {
    let url = shared().fresh_db();
    let mut n1 = leases(&url, "n1", 2);
    let sent = Instant::now();
    let owned = n1.beat().expect("beat");
    // Trusted for three quarters of the timeout from when the beat was sent.
    let trust = TIMEOUT * 3 / 4;
    assert!(owned.trusted_until >= sent + trust && owned.trusted_until <= Instant::now() + trust);
    let epoch = epoch_of(&owned, 0);
    let mut s = part_store(&url, 0, epoch);
    s.replay().expect("replay");
    s.add(&job(1, "f", "", 0, b"x"));
    s.flush().expect("the partition is at the store's epoch");

    // n1 goes silent; n2 takes both partitions once their leases expire.
    let mut n2 = leases(&url, "n2", 2);
    std::thread::sleep(TIMEOUT + Duration::from_millis(50));
    let taken = n2.beat().expect("beat");
    assert_eq!(taken.owned.len(), 2, "{taken:?}");
    assert_eq!(
        epoch_of(&taken, 0),
        epoch + 1,
        "a takeover raises the epoch"
    );

    s.add(&job(2, "f", "", 0, b"y"));
    s.done(1);
    match s.flush() {
        Err(StoreError::Fenced(what)) => assert!(what.ends_with("(partition 0)"), "{what}"),
        other => panic!("expected Fenced, got {other:?}"),
    }
    let mut db = sql(&url);
    assert_eq!(
        ids(&mut db, "SELECT id FROM gearshift_jobs ORDER BY id"),
        [1]
    );
    // The new owner's store carries on from what was stored.
    let mut s2 = part_store(&url, 0, epoch + 1);
    assert_eq!(s2.replay().expect("replay").jobs.len(), 1);

    // The fence inside any transaction: the old epoch fails, the new holds.
    let mut tx = db.transaction().expect("tx");
    let server = s2.server().to_owned();
    match check_partition_epoch(&mut tx, &server, 0, epoch) {
        Err(StoreError::Fenced(_)) => {}
        other => panic!("expected Fenced, got {other:?}"),
    }
    drop(tx);
    let mut tx = db.transaction().expect("tx");
    check_partition_epoch(&mut tx, &server, 0, epoch + 1).expect("the current epoch");
    // While it is held, a takeover (raising the epoch) waits; a renewal
    // does not, and a beat skips the row instead of waiting.
    let mut other = sql(&url);
    other
        .batch_execute("SET lock_timeout = '200ms'")
        .expect("lock timeout");
    other
        .execute(
            "UPDATE gearshift_partitions SET expires_at = now() WHERE partition = 0",
            &[],
        )
        .expect("a renewal goes on");
    let raised = other.execute(
        "UPDATE gearshift_partitions SET epoch = epoch + 1 WHERE partition = 0",
        &[],
    );
    assert!(
        raised.is_err(),
        "a takeover must wait for the fenced transaction"
    );
    // A beat skips the held (and now expired) row instead of waiting for
    // it, and takes it once it is free.
    let (done, beaten) = std::sync::mpsc::channel();
    let beating = std::thread::spawn(move || {
        let b = n2.beat();
        let _ = done.send(());
        (n2, b)
    });
    beaten
        .recv_timeout(Duration::from_secs(3))
        .expect("a beat must not wait for a held partition");
    let (mut n2, b) = beating.join().expect("the beat's thread");
    let b = b.expect("beat");
    assert_eq!(
        b.owned.iter().map(|o| o.0).collect::<Vec<_>>(),
        [1],
        "{b:?}"
    );
    tx.commit().expect("commit");
    assert_eq!(epoch_of(&n2.beat().expect("beat"), 0), epoch + 2);
}

/// Beats every node, each releasing what it is told to give up, until
/// each owns its share and all `count` partitions are owned.
fn settle(nodes: &mut [PartitionLeases], count: usize) -> Vec<Owned> {
    for _ in 0..10 {
        let mut beats = Vec::new();
        for n in nodes.iter_mut() {
            let b = n.beat().expect("beat");
            if !b.give_up.is_empty() {
                let released = n.release(&b.give_up).expect("release");
                assert_eq!(released, b.give_up, "a node releases what it owns");
            }
            beats.push(b);
        }
        let owned: usize = beats.iter().map(|b| b.owned.len()).sum();
        if owned == count && beats.iter().all(|b| b.owned.len() == b.share as usize) {
            return beats;
        }
    }
    panic!("the partitions did not settle in 10 rounds");
}

/// Every partition has exactly one owner, the one whose beat lists it, and
/// each node owns the floor or the ceiling of count / nodes.
fn check_spread(nodes: &mut [PartitionLeases], beats: &[Owned], count: u32) {
    let owners = nodes[0].owners().expect("owners");
    assert_eq!(owners.len(), count as usize);
    let mut by_node: BTreeMap<String, Vec<(u32, i64)>> = BTreeMap::new();
    for o in &owners {
        let n = o
            .node
            .as_ref()
            .unwrap_or_else(|| panic!("{o:?} has no owner"));
        assert_eq!(n.gearman, format!("{}.test:4730", n.name));
        by_node
            .entry(n.name.clone())
            .or_default()
            .push((o.partition, o.epoch));
    }
    let live = nodes.len() as u32;
    for (n, b) in nodes.iter().zip(beats) {
        let mine = by_node.remove(&n.me().name).unwrap_or_default();
        assert_eq!(
            mine,
            b.owned,
            "{}'s beat says what the table says",
            n.me().name
        );
        let len = mine.len() as u32;
        assert!(
            len == count / live || len == count.div_ceil(live),
            "{} owns {len} of {count} among {live}",
            n.me().name
        );
        assert_eq!(b.live, live);
    }
    assert!(by_node.is_empty(), "owners that are not nodes: {by_node:?}");
}

#[test]
fn partitions_spread_evenly_as_nodes_join() {
    let url = shared().fresh_db();
    let count = 64;
    let mut nodes = vec![leases(&url, "node-a", count)];
    let beats = settle(&mut nodes, count as usize);
    assert_eq!(beats[0].owned.len(), 64);
    check_spread(&mut nodes, &beats, count);

    // A joining node gets nothing at once: the others give up their
    // surplus, and it takes that at its next beat.
    nodes.push(leases(&url, "node-b", count));
    let first = nodes[1].beat().expect("beat");
    assert!(first.owned.is_empty() && first.share == 32, "{first:?}");
    let a = nodes[0].beat().expect("beat");
    assert_eq!(a.give_up.len(), 32, "{a:?}");
    let beats = settle(&mut nodes, count as usize);
    check_spread(&mut nodes, &beats, count);

    nodes.push(leases(&url, "node-c", count));
    let beats = settle(&mut nodes, count as usize);
    check_spread(&mut nodes, &beats, count);
    let lens: Vec<usize> = beats.iter().map(|b| b.owned.len()).collect();
    assert_eq!(
        lens,
        [22, 21, 21],
        "the first name in order gets the extra one"
    );
}

#[test]
fn release_hands_over_at_once_and_a_silent_node_loses_its_partitions() {
    let url = shared().fresh_db();
    let count = 8;
    let mut nodes = vec![leases(&url, "n1", count), leases(&url, "n2", count)];
    let beats = settle(&mut nodes, count as usize);
    check_spread(&mut nodes, &beats, count);
    let before: BTreeMap<u32, i64> = beats.iter().flat_map(|b| b.owned.clone()).collect();

    // n2 leaves on purpose: n1 takes its partitions at once, not after
    // the timeout, each at the next epoch.
    let n2_parts: Vec<u32> = beats[1].owned.iter().map(|(p, _)| *p).collect();
    let started = Instant::now();
    nodes[1].leave().expect("leave");
    let after = nodes[0].beat().expect("beat");
    assert!(started.elapsed() < TIMEOUT, "no wait for the expiry");
    assert_eq!(after.owned.len(), 8, "{after:?}");
    for &p in &n2_parts {
        assert_eq!(epoch_of(&after, p), before[&p] + 1, "partition {p}");
    }

    // n2 comes back and gets its share by release again.
    let beats = settle(&mut nodes, count as usize);
    check_spread(&mut nodes, &beats, count);
    let before: BTreeMap<u32, i64> = beats.iter().flat_map(|b| b.owned.clone()).collect();
    let n1_parts: Vec<u32> = beats[0].owned.iter().map(|(p, _)| *p).collect();
    let n2_parts: Vec<u32> = beats[1].owned.iter().map(|(p, _)| *p).collect();

    // n2 stops beating: n1 takes its partitions within the timeout (plus
    // a beat), each at the next epoch; its own keep theirs.
    let silent = Instant::now();
    let taken = loop {
        std::thread::sleep(TIMEOUT / 4);
        let b = nodes[0].beat().expect("beat");
        if b.owned.len() == 8 {
            break b;
        }
        assert!(
            silent.elapsed() < TIMEOUT * 2,
            "n1 has not taken over: {b:?}"
        );
    };
    // (n2's last renewal was a little before `silent`.)
    assert!(
        silent.elapsed() >= TIMEOUT * 3 / 4,
        "nothing is taken before it expires"
    );
    for &p in &n2_parts {
        assert_eq!(epoch_of(&taken, p), before[&p] + 1, "taken partition {p}");
    }
    for &p in &n1_parts {
        assert_eq!(epoch_of(&taken, p), before[&p], "kept partition {p}");
    }
    // The deposed node's next beat says it owns none of them.
    let deposed = nodes[1].beat().expect("beat");
    assert!(deposed.owned.is_empty(), "{deposed:?}");
}

#[test]
fn rows_written_before_partitions_are_placed_once() {
    let url = shared().fresh_db();
    {
        // A single node's store writes rows without a partition.
        let mut s = PgStore::open(&url, PgOptions::default()).expect("open");
        s.replay().expect("replay");
        s.add(&job(1, "alpha", "", 0, b"1"));
        s.add(&job(2, "beta", "", 0, b"2"));
        s.add(&job(3, "gamma", "", 0, b"3"));
        s.schedule(&sched(4, "* * * * *", None));
        s.kept(&kept(5, 0, b"k"));
        s.append(&[Op::Function(func(b"gamma", true, [0; 3]))]);
        s.flush().expect("flush");
    }
    let mut db = sql(&url);
    db.execute(
        "INSERT INTO gearshift_pins (function, partition) VALUES ('beta'::bytea, 7)",
        &[],
    )
    .expect("pin beta");
    let mut n1 = leases(&url, "n1", 8);
    let mut placement = Placement::new(8);
    placement.pins.insert(Bytes::from_static(b"beta"), 7);
    assert_eq!(n1.placement().expect("placement"), placement);
    let rows: Vec<(Vec<u8>, i32)> = db
        .query(
            "SELECT function, partition FROM gearshift_jobs UNION ALL \
             SELECT function, partition FROM gearshift_schedules UNION ALL \
             SELECT function, partition FROM gearshift_kept UNION ALL \
             SELECT function, partition FROM gearshift_functions",
            &[],
        )
        .expect("rows")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(rows.len(), 6);
    for (f, p) in &rows {
        assert_eq!(
            *p as u32,
            placement.partition_of(f),
            "{}",
            String::from_utf8_lossy(f)
        );
    }
    assert!(
        rows.iter().any(|(f, p)| f == b"beta" && *p == 7),
        "the pin wins"
    );

    // Each partition's store replays what was placed in it.
    let owned = n1.beat().expect("beat");
    let p = placement.partition_of(b"alpha");
    let got = part_store(&url, p, epoch_of(&owned, p))
        .replay()
        .expect("replay");
    assert!(got.jobs.iter().any(|j| j.id == 1), "{got:?}");
    assert!(got
        .jobs
        .iter()
        .all(|j| placement.partition_of(&j.function) == p));
    let p = placement.partition_of(b"gamma");
    let got = part_store(&url, p, epoch_of(&owned, p))
        .replay()
        .expect("replay");
    assert_eq!(got.functions, [func(b"gamma", true, [0; 3])]);

    // Rows that appear unplaced later (a single leader) are placed at the
    // next open, and their partition is taken from its owner so that it is
    // replayed with them.
    let p = placement.partition_of(b"delta");
    let epoch = epoch_of(&n1.beat().expect("beat"), p);
    db.execute(
        "INSERT INTO gearshift_jobs (id, handle, function, unique_id, priority, data, \
         attempts, created_ms) VALUES (9, 'H:9', 'delta', '', 0, '', 0, 0)",
        &[],
    )
    .expect("an unplaced row");
    leases(&url, "n2", 8).leave().expect("n2 leaves");
    let part: i32 = db
        .query_one("SELECT partition FROM gearshift_jobs WHERE id = 9", &[])
        .expect("row")
        .get(0);
    assert_eq!(part as u32, p);
    let now = n1.beat().expect("beat");
    assert_eq!(
        epoch_of(&now, p),
        epoch + 2,
        "deposed (+1) and taken again (+1)"
    );
    let unplaced: i64 = db
        .query_one(
            "SELECT count(*) FROM gearshift_jobs WHERE partition IS NULL",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(unplaced, 0);
}

#[test]
fn the_first_node_sets_the_count_and_pins_are_kept() {
    let url = shared().fresh_db();
    let mut n1 = leases(&url, "n1", 8);
    let mut n2 = leases(&url, "n2", 16);
    assert_eq!(
        (n1.count(), n2.count()),
        (8, 8),
        "later nodes read the count"
    );
    assert_eq!(n2.owners().expect("owners").len(), 8);

    // A pin (tests/pins.rs) is in every node's placement.
    let mut pins =
        gearshift_store::postgres::pins::Pins::open(&url, &PgOptions::default()).expect("pins");
    pins.pin(b"hot", Some(5)).expect("pin");
    assert_eq!(n2.placement().expect("placement").partition_of(b"hot"), 5);
    pins.pin(b"hot", None).expect("unpin");
    assert!(n1.placement().expect("placement").pins.is_empty());

    let both = PgOptions {
        fence: Some(0),
        partition: Some((0, 0)),
        ..PgOptions::default()
    };
    match PgStore::open(&url, both) {
        Err(StoreError::InvalidRequest(why)) => assert!(why.contains("one only"), "{why}"),
        other => panic!("a leader's fence and a partition at once must be refused: {other:?}"),
    }
}

#[test]
fn handle_blocks_are_disjoint_across_nodes() {
    let url = shared().fresh_db();
    let mut n1 = leases(&url, "n1", 2);
    let mut n2 = leases(&url, "n2", 2);
    let a = n1.reserve_ids(1000).expect("reserve");
    let b = n2.reserve_ids(1000).expect("reserve");
    let c = n1.reserve_ids(10).expect("reserve");
    assert_eq!(a, 0..1000);
    assert_eq!(b, 1000..2000);
    assert_eq!(c, 2000..2010);
    // A partition's store replays past every block, and its own
    // reservation, from an older view, never lowers the cluster's.
    let owned = n1.beat().expect("beat");
    let mut s = part_store(&url, owned.owned[0].0, owned.owned[0].1);
    assert_eq!(s.replay().expect("replay").next_id, 2010);
    assert_eq!(n2.reserve_ids(1000).expect("reserve"), 2010..3010);
    s.reserve(2500);
    s.flush().expect("flush");
    assert_eq!(n2.reserve_ids(1).expect("reserve"), 3010..3011);
}
