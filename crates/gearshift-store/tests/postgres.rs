//! The PostgreSQL store against a throwaway cluster this binary starts:
//! the conformance suite, reopening, a stopped database, a refused batch
//! and the schema's migrations.

mod pg_cluster;

use bytes::Bytes;
use gearshift_store::conformance::{self, func, job, kept, live_ids, mark, sched};
use gearshift_store::{Op, PgOptions, PgStore, Store, StoreError, SCHEMA_VERSION};
use pg_cluster::{shared, Cluster};

fn open(url: &str) -> PgStore {
    PgStore::open(url, PgOptions::default()).expect("open the PostgreSQL store")
}

fn sql(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).expect("connect for a check")
}

#[test]
fn pg_store_conforms() {
    let cluster = shared();
    conformance::run(|| {
        let url = cluster.fresh_db();
        move || open(&url)
    });
}

/// One of every kind of record, flushed in a few batches.
fn fill(s: &mut PgStore) {
    let mut full = job(1, "fn", "u-1", 0, b"bin\0ary\xff");
    full.reducer = Some(Bytes::from_static(b"reducer"));
    full.due_ms = Some(1_900_000_000_000);
    s.add(&full);
    s.add(&job(2, "f", "", 1, b"two"));
    s.add(&job(3, "f", "", 2, b"three"));
    s.flush().expect("flush");
    s.dead(2, 5, &mark(1_700_000_009_000, "boom"));
    s.retry(3, 1, Some(1_800_000_000_000));
    s.schedule(&sched(4, "*/5 * * * *", Some(1_700_000_100_000)));
    s.schedule(&sched(5, "0 0 * * *", None));
    s.kept(&kept(6, 1, b"result"));
    s.kept(&kept(7, 0, b""));
    s.reserve(40);
    s.flush().expect("flush");
    s.unschedule(5);
    s.forget(7);
    s.flush().expect("flush");
}

#[test]
fn reopen_replays_everything() {
    let url = shared().fresh_db();
    let mut s = open(&url);
    s.replay().expect("replay");
    fill(&mut s);
    let before = s.replay().expect("replay");
    drop(s);
    let after = open(&url).replay().expect("replay after reopen");
    assert_eq!(after, before, "a reopened store replays what was flushed");
    assert_eq!(after.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [1, 3]);
    assert_eq!(after.dead.len(), 1, "job 2 is dead");
    assert_eq!(after.dead[0].0.attempts, 5);
    assert_eq!(
        after.jobs[1].due_ms,
        Some(1_800_000_000_000),
        "retry's due time"
    );
    assert_eq!(
        after.schedules,
        vec![sched(4, "*/5 * * * *", Some(1_700_000_100_000))]
    );
    assert_eq!(after.kept, vec![kept(6, 1, b"result")]);
    assert_eq!(after.next_id, 40, "the reservation is kept");
}

#[test]
fn flush_against_a_stopped_database_fails_and_loses_nothing() {
    // A cluster of its own: stopping the shared one would fail the others.
    let cluster = Cluster::start();
    let url = cluster.fresh_db();
    let mut s = open(&url);
    s.replay().expect("replay");
    fill(&mut s);
    let committed = s.replay().expect("replay");

    cluster.stop();
    s.add(&job(50, "f", "", 1, b"lost"));
    s.done(1);
    match s.flush() {
        Err(e @ StoreError::Unreachable { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains(&format!(
                    "cannot reach PostgreSQL at postgres://gearshift@127.0.0.1:{}",
                    cluster.port
                )),
                "the error names the server: {text}"
            );
        }
        other => panic!("a flush to a stopped database must fail as unreachable, got {other:?}"),
    }

    cluster.resume();
    assert_eq!(
        s.replay().expect("the store reconnects"),
        committed,
        "the failed batch is not stored; everything committed before is"
    );
    s.add(&job(51, "f", "", 1, b"after"));
    s.flush().expect("a flush after the database is back");
    drop(s);
    let r = open(&url).replay().expect("replay");
    assert_eq!(r.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [1, 3, 51]);
}

#[test]
fn a_refused_batch_is_rolled_back_as_a_whole() {
    let url = shared().fresh_db();
    let mut s = open(&url);
    s.replay().expect("replay");
    s.add(&job(1, "f", "", 1, b"one"));
    s.flush().expect("flush");
    // Kept rows now fail: the jobs of the same batch must not stay.
    sql(&url)
        .batch_execute(
            "CREATE FUNCTION no_kept() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'kept refused by test'; END $$; \
             CREATE TRIGGER no_kept BEFORE INSERT ON gearshift_kept \
             FOR EACH ROW EXECUTE FUNCTION no_kept();",
        )
        .expect("install the trigger");
    s.add(&job(2, "f", "", 1, b"two"));
    s.done(1);
    s.kept(&kept(1, 0, b"done"));
    s.append(&[Op::Function(func(b"f", true, [0; 3]))]);
    match s.flush() {
        Err(e @ StoreError::Database { .. }) => {
            assert!(e.to_string().contains("kept refused by test"), "{e}")
        }
        other => panic!("the flush must fail with the database's error, got {other:?}"),
    }
    // What the database holds, read beside the store (which holds the lock).
    let mut db = sql(&url);
    let ids: Vec<i64> = db
        .query("SELECT id FROM gearshift_jobs ORDER BY id", &[])
        .expect("read the jobs")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, [1], "nothing of the batch");
    let kept: i64 = db
        .query_one("SELECT count(*) FROM gearshift_kept", &[])
        .expect("count kept")
        .get(0);
    assert_eq!(kept, 0);
    let settings: i64 = db
        .query_one("SELECT count(*) FROM gearshift_functions", &[])
        .expect("count settings")
        .get(0);
    assert_eq!(settings, 0, "nor the batch's settings");
    // The store's own copy was put back too: the next batch builds on it.
    s.add(&job(3, "f", "", 1, b"three"));
    s.flush().expect("the next batch is stored");
    let r = s.replay().expect("replay");
    assert_eq!(r.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [1, 3]);
    assert!(r.functions.is_empty(), "{:?}", r.functions);
}

#[test]
fn schema_version_is_recorded_and_migrations_run_once() {
    let url = shared().fresh_db();
    let first = open(&url);
    assert_eq!(
        first.applied_migrations(),
        (1..=SCHEMA_VERSION).collect::<Vec<_>>()
    );
    drop(first);
    let second = open(&url);
    assert!(
        second.applied_migrations().is_empty(),
        "a second open migrates nothing"
    );
    let versions: Vec<i32> = sql(&url)
        .query("SELECT version FROM gearshift_schema ORDER BY version", &[])
        .expect("read the schema table")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=SCHEMA_VERSION as i32).collect::<Vec<_>>());

    // Version 5: the partitions' tables, empty until a node sets them up,
    // and a nullable partition on every table of rows.
    let mut db = sql(&url);
    for table in [
        "gearshift_partitions",
        "gearshift_settings",
        "gearshift_pins",
    ] {
        let n: i64 = db
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .expect("the table exists")
            .get(0);
        assert_eq!(n, 0, "{table}");
    }
    let columns: Vec<(String, String)> = db
        .query(
            "SELECT table_name::text, is_nullable::text FROM information_schema.columns \
             WHERE column_name = 'partition' AND table_name IN \
             ('gearshift_jobs', 'gearshift_schedules', 'gearshift_kept', \
             'gearshift_functions') ORDER BY 1",
            &[],
        )
        .expect("columns")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        columns,
        [
            ("gearshift_functions".into(), "YES".into()),
            ("gearshift_jobs".into(), "YES".into()),
            ("gearshift_kept".into(), "YES".into()),
            ("gearshift_schedules".into(), "YES".into()),
        ]
    );
    let indexes: Vec<String> = db
        .query(
            "SELECT indexname::text FROM pg_indexes WHERE indexname LIKE '%_partition' \
             ORDER BY 1",
            &[],
        )
        .expect("indexes")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        indexes,
        [
            "gearshift_functions_partition",
            "gearshift_jobs_partition",
            "gearshift_kept_partition",
            "gearshift_schedules_partition"
        ]
    );
}

/// A database of schema version 5 (before functions' settings) gains
/// their table at the next open, and keeps what it held.
#[test]
fn a_version_5_database_gains_the_functions_table() {
    let url = shared().fresh_db();
    let mut s = open(&url);
    s.replay().expect("replay");
    s.add(&job(1, "f", "", 0, b"kept across"));
    s.flush().expect("flush");
    drop(s);
    // Back to version 5: the table and its record gone.
    sql(&url)
        .batch_execute(
            "DROP TABLE gearshift_functions, gearshift_pin_moves;
             DELETE FROM gearshift_schema WHERE version >= 6",
        )
        .expect("make the database version 5");
    let mut s = open(&url);
    assert_eq!(
        s.applied_migrations(),
        [6, 7],
        "only versions 6 and 7 are applied"
    );
    let r = s.replay().expect("replay");
    assert_eq!(r.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [1]);
    assert!(r.functions.is_empty());
    s.append(&[Op::Function(func(b"f", true, [0, 2, 0]))]);
    s.flush().expect("flush settings");
    drop(s);
    let r = open(&url).replay().expect("replay after reopen");
    assert_eq!(r.functions, [func(b"f", true, [0, 2, 0])]);
    let row: (Vec<u8>, bool, i64, i64, i64, Option<i32>) = sql(&url)
        .query_one(
            "SELECT function, paused, max_high, max_normal, max_low, partition \
             FROM gearshift_functions",
            &[],
        )
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)))
        .expect("the function's row");
    assert_eq!(row, (b"f".to_vec(), true, 0, 2, 0, None));
}

#[test]
fn a_newer_schema_is_refused() {
    let url = shared().fresh_db();
    drop(open(&url));
    sql(&url)
        .execute("INSERT INTO gearshift_schema (version) VALUES (999)", &[])
        .expect("pretend a newer Gearshift migrated");
    let e = PgStore::open(&url, PgOptions::default()).expect_err("a newer schema is refused");
    assert!(e.to_string().contains("version 999 is newer"), "{e}");
}

#[test]
fn an_unreachable_server_is_named() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("postgres://nobody:secret@127.0.0.1:{port}/x");
    let e = PgStore::open(&url, PgOptions::default()).expect_err("nothing listens there");
    let text = e.to_string();
    assert!(
        text.starts_with(&format!(
            "cannot reach PostgreSQL at postgres://nobody@127.0.0.1:{port}/x: "
        )),
        "{text}"
    );
    assert!(
        !text.contains("secret"),
        "the password is never shown: {text}"
    );
}

#[test]
fn a_flush_is_one_transaction() {
    let url = shared().fresh_db();
    let mut s = open(&url);
    s.replay().expect("replay");
    for id in 1..=100 {
        s.add(&job(id, "f", "", 1, b"batch"));
    }
    s.schedule(&sched(101, "* * * * *", Some(1)));
    s.kept(&kept(102, 0, b"r"));
    s.append(&[Op::Function(func(b"f", false, [5, 0, 0]))]);
    s.reserve(200);
    s.flush().expect("flush");
    // Every row written by the batch carries the same inserting transaction.
    let xids: Vec<String> = sql(&url)
        .query(
            "SELECT DISTINCT xmin::text FROM (SELECT xmin FROM gearshift_jobs \
             UNION ALL SELECT xmin FROM gearshift_schedules \
             UNION ALL SELECT xmin FROM gearshift_kept \
             UNION ALL SELECT xmin FROM gearshift_functions \
             UNION ALL SELECT xmin FROM gearshift_reservation) t",
            &[],
        )
        .expect("read the rows' transactions")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(xids.len(), 1, "one transaction wrote the batch: {xids:?}");
}

#[test]
fn one_store_per_database_until_the_holder_goes() {
    let url = shared().fresh_db();
    let mut first = open(&url);
    first.replay().expect("replay");
    let quick = PgOptions {
        lock_wait: std::time::Duration::from_millis(300),
        ..PgOptions::default()
    };
    match PgStore::open(&url, quick) {
        Err(StoreError::Locked(server)) => assert!(server.starts_with("postgres://"), "{server}"),
        Err(e) => panic!("expected Locked, got {e}"),
        Ok(_) => panic!("a second store opened the same database"),
    }
    // Another database of the same server is free.
    let other = shared().fresh_db();
    open(&other).replay().expect("another database");
    drop(first);
    // The lock goes with the holder's session (open waits for it).
    open(&url).replay().expect("reopen");
}

#[test]
fn runs_in_flight_are_remembered_until_their_job_moves_on() {
    let url = shared().fresh_db();
    let mut s = open(&url);
    s.replay().expect("replay");
    for id in 1..=4 {
        s.add(&job(id, "f", "", 0, b"x"));
    }
    s.flush().expect("flush");
    // 1 runs; 2 starts and ends in the same batch; 3 ends then starts again.
    s.started(1);
    s.started(2);
    s.done(2);
    s.update(3, 1);
    s.started(3);
    s.flush().expect("flush");
    drop(s);
    let mut s = open(&url);
    let r = s.replay().expect("replay");
    assert_eq!(r.running, vec![1, 3]);
    // A requeue (Update), a retry and a completion end the runs.
    s.update(1, 1);
    s.started(4);
    s.retry(3, 2, None);
    s.flush().expect("flush");
    drop(s);
    let mut s = open(&url);
    assert_eq!(s.replay().expect("replay").running, vec![4]);
    s.done(4);
    s.flush().expect("flush");
    let count: i64 = sql(&url)
        .query_one("SELECT count(*) FROM gearshift_running", &[])
        .and_then(|r| r.try_get(0))
        .expect("count");
    assert_eq!(count, 0);
}

#[test]
fn a_fenced_store_writes_nothing_once_the_lease_moved_on() {
    let url = shared().fresh_db();
    let mut db = sql(&url);
    let mut s = PgStore::open(
        &url,
        PgOptions {
            fence: Some(0),
            ..PgOptions::default()
        },
    )
    .expect("open");
    s.replay().expect("replay");
    s.add(&job(1, "f", "", 0, b"x"));
    s.append(&[Op::Function(func(b"f", true, [0; 3]))]);
    s.flush().expect("the lease is at epoch 0");
    db.execute("UPDATE gearshift_leader SET epoch = epoch + 1", &[])
        .expect("takeover");
    s.add(&job(2, "f", "", 0, b"y"));
    s.done(1);
    s.append(&[
        Op::Function(func(b"f", false, [0; 3])),
        Op::Function(func(b"g", true, [0; 3])),
    ]);
    match s.flush() {
        Err(StoreError::Fenced(server)) => assert!(server.starts_with("postgres://"), "{server}"),
        other => panic!("expected Fenced, got {other:?}"),
    }
    let ids: Vec<i64> = db
        .query("SELECT id FROM gearshift_jobs ORDER BY id", &[])
        .expect("jobs")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(ids, vec![1], "the fenced batch stored nothing");
    let paused: Vec<(Vec<u8>, bool)> = db
        .query("SELECT function, paused FROM gearshift_functions", &[])
        .expect("settings")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(paused, [(b"f".to_vec(), true)], "nor its settings");
}

/// A queue that grows past the re-planning points (1,024 and 2,048 jobs)
/// is stored and ended whole: the flush statement prepared again mid-way
/// writes as before.
#[test]
fn a_growing_queue_survives_the_flush_being_planned_again() {
    let url = shared().fresh_db();
    let mut s = open(&url);
    s.replay().expect("replay");
    for batch in 0..30u64 {
        for id in batch * 100 + 1..=batch * 100 + 100 {
            s.add(&job(id, "f", "", 0, b"x"));
        }
        s.flush().expect("flush a batch of adds");
    }
    let count = |db: &mut postgres::Client| -> i64 {
        db.query_one("SELECT count(*) FROM gearshift_jobs", &[])
            .expect("count")
            .get(0)
    };
    let mut db = sql(&url);
    assert_eq!(count(&mut db), 3000);
    for id in 1..=2990 {
        s.done(id);
    }
    s.flush().expect("flush the ends");
    assert_eq!(count(&mut db), 10);
    drop(s);
    let ids = live_ids(&mut open(&url));
    assert_eq!(ids, (2991..=3000).collect::<Vec<u64>>());
}
