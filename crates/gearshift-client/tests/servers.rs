//! Several servers, run against in-process Gearshift and gearmand 1.1.20:
//! the client spreads jobs over both and keeps unique ids on one server,
//! the worker serves both, and the client fails over when one is stopped.

mod common;

use std::collections::HashSet;

use common::{client_for, worker_for, Kind, RunningWorker, TestServer};
use gearshift_client::{Error, WorkError};

both!(two_servers);

async fn two_servers(kind: Kind) {
    let mut a = TestServer::start(kind).await;
    let b = TestServer::start(kind).await;
    let _w = RunningWorker::spawn(
        worker_for(&[&a, &b])
            .concurrency(4)
            .function("echo", |job| async move {
                Ok::<_, WorkError>(job.data().clone())
            })
            .build()
            .expect("worker"),
    );
    let client = client_for(&[&a, &b]);

    // Jobs without a unique go round-robin; the worker serves both servers.
    let mut used = HashSet::new();
    for i in 0..10 {
        let job = client
            .submit("echo", format!("rr-{i}"))
            .await
            .expect("submit");
        used.insert(job.handle().server());
        assert_eq!(job.result().await.expect("result"), format!("rr-{i}"));
    }
    assert_eq!(used, HashSet::from([0, 1]));

    // A unique always lands on the same server, so duplicates coalesce.
    let mut homes = HashSet::new();
    let mut on_a = None;
    for i in 0..12 {
        let unique = format!("u-{i}");
        let first = client
            .job("parked", "x")
            .unique(unique.clone())
            .background()
            .await
            .expect("submit");
        let again = client
            .job("parked", "y")
            .unique(unique.clone())
            .background()
            .await
            .expect("submit");
        assert_eq!(first, again, "unique {unique} did not coalesce");
        homes.insert(first.server());
        if first.server() == 0 {
            on_a = Some((unique, first));
        }
    }
    assert_eq!(
        homes,
        HashSet::from([0, 1]),
        "uniques all hashed to one server"
    );
    let (unique_on_a, handle_on_a) = on_a.expect("a unique hashed to server 0");

    // Server A goes away: everything fails over to B.
    a.stop().await;
    for i in 0..6 {
        let job = client
            .submit("echo", format!("fo-{i}"))
            .await
            .expect("submit");
        assert_eq!(job.handle().server(), 1);
        assert_eq!(job.result().await.expect("result"), format!("fo-{i}"));
    }
    let moved = client
        .job("echo", "moved")
        .unique(unique_on_a)
        .submit()
        .await
        .expect("submit");
    assert_eq!(moved.handle().server(), 1);
    assert_eq!(moved.result().await.expect("result"), "moved");
    // A handle lives on its own server only.
    let err = client.status(&handle_on_a).await.expect_err("must fail");
    assert!(matches!(err, Error::NoServerAvailable { .. }), "{err:?}");
}
