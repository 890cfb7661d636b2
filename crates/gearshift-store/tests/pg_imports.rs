//! `gearshift_imports` (schema V4): a fenced flush that records an import
//! stores the jobs and the record together, or neither once fenced out.

mod pg_cluster;

use std::time::Duration;

use gearshift_store::conformance::job;
use gearshift_store::postgres::lease::{Lease, NodeAddrs};
use gearshift_store::{PgOptions, PgStore, Store, StoreError};
use pg_cluster::shared;

fn count(url: &str, table: &str) -> i64 {
    let mut c = postgres::Client::connect(url, postgres::NoTls).expect("connect for a check");
    c.query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .and_then(|r| r.try_get(0))
        .expect("count")
}

/// A store fenced at a freshly taken lease, as `gearshift import` opens it.
fn leading(url: &str) -> (Lease, i64, PgStore) {
    let me = NodeAddrs {
        name: "import-test".into(),
        gearman: "-".into(),
        http: None,
    };
    let mut lease =
        Lease::open(url, &PgOptions::default(), me, Duration::from_secs(30)).expect("lease");
    let epoch = lease.try_take().expect("take").expect("the lease is free");
    let opts = PgOptions {
        fence: Some(epoch),
        ..PgOptions::default()
    };
    let mut store = PgStore::open(url, opts).expect("open fenced");
    store.replay().expect("replay");
    (lease, epoch, store)
}

#[test]
fn an_import_record_commits_with_its_jobs() {
    let url = shared().fresh_db();
    let (mut lease, epoch, mut s) = leading(&url);
    assert_eq!(s.imported("/q.sqlite").expect("read"), None);
    s.add(&job(1, "f", "u", 1, b"x"));
    s.add(&job(2, "f", "v", 1, b"y"));
    s.flush_recording_import("/q.sqlite", "10:20", 2)
        .expect("flush");
    let r = s.imported("/q.sqlite").expect("read").expect("recorded");
    assert_eq!((r.fingerprint.as_str(), r.jobs), ("10:20", 2));
    assert!(r.imported_at_ms > 1_600_000_000_000, "{r:?}");
    assert_eq!(count(&url, "gearshift_jobs"), 2);

    // Again (--force, or a changed queue): the one row is replaced.
    s.flush_recording_import("/q.sqlite", "11:21", 0)
        .expect("flush with nothing buffered");
    let r = s.imported("/q.sqlite").expect("read").expect("recorded");
    assert_eq!((r.fingerprint.as_str(), r.jobs), ("11:21", 0));
    assert_eq!(count(&url, "gearshift_imports"), 1);
    lease.release(epoch).expect("release");
    lease.leave().expect("leave");
}

#[test]
fn a_fenced_out_import_writes_neither_jobs_nor_record() {
    let url = shared().fresh_db();
    let (_lease, _epoch, mut s) = leading(&url);
    // Another node took over since.
    let mut c = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    c.execute("UPDATE gearshift_leader SET epoch = epoch + 1", &[])
        .expect("take over");
    s.add(&job(1, "f", "u", 1, b"x"));
    let e = s
        .flush_recording_import("/q.sqlite", "10:20", 1)
        .expect_err("fenced out");
    assert!(matches!(e, StoreError::Fenced(_)), "{e}");
    assert_eq!(count(&url, "gearshift_jobs"), 0);
    assert_eq!(count(&url, "gearshift_imports"), 0);
}
