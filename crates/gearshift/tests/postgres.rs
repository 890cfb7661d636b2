//! `gearshift serve --store postgres://...` (and `GEARSHIFT_STORE`): a
//! background job is a row in the database, and a restarted server
//! restores it. The cluster is the store crate's test helper.

#[path = "../../gearshift-store/tests/pg_cluster/mod.rs"]
mod pg_cluster;

mod common;

use common::Server;

#[test]
fn serve_keeps_background_jobs_in_postgres_across_a_restart() {
    let url = pg_cluster::shared().fresh_db();
    let s = Server::gearshift_with(&["--store", &url]);
    let out = s.run(&["submit", "-b", "-f", "pgq", "payload"], b"");
    assert_eq!(out.code(), 0, "{out:?}");

    // Acknowledged means committed: the row is there already.
    let mut db = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
    let rows: i64 = db
        .query_one(
            "SELECT count(*) FROM gearshift_jobs WHERE function = 'pgq'::bytea AND data = 'payload'::bytea",
            &[],
        )
        .and_then(|r| r.try_get(0))
        .expect("count the stored jobs");
    assert_eq!(rows, 1, "the acknowledged job is a row");
    drop(s); // killed: no clean shutdown

    // The same database through the environment this time.
    let s = Server::gearshift_env(&[], &[("GEARSHIFT_STORE", &url)]);
    let row = s.status_of("pgq").expect("pgq is listed after the restart");
    assert_eq!(row["total"], 1, "the job was restored: {row}");
}
