//! Many jobs at once, against in-process Gearshift and gearmand 1.1.20:
//! 100 jobs in flight on one connection with a concurrent worker, and
//! coalescing of submissions that share a unique id.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, worker_for, Kind, RunningWorker, TestServer};
use gearshift_client::{JobEvent, WorkError};
use tokio::sync::Notify;

both!(many_in_flight, coalescing);

/// 100 foreground jobs in flight on one client connection, a worker running
/// 8 at a time: every result comes back to its own caller.
async fn many_in_flight(kind: Kind) {
    let server = TestServer::start(kind).await;
    let current = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (c, p) = (current.clone(), peak.clone());
    let _w = RunningWorker::spawn(
        worker_for(&[&server])
            .concurrency(8)
            .function("rev", move |job| {
                let (c, p) = (c.clone(), p.clone());
                async move {
                    let now = c.fetch_add(1, Ordering::SeqCst) + 1;
                    p.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(15)).await;
                    c.fetch_sub(1, Ordering::SeqCst);
                    Ok::<_, WorkError>(job.data().iter().rev().copied().collect::<Vec<u8>>())
                }
            })
            .build()
            .expect("worker"),
    );
    let client = server.client();
    let mut jobs = tokio::task::JoinSet::new();
    for i in 0..100 {
        let client = client.clone();
        jobs.spawn(async move {
            let input = format!("job-{i:03}");
            let out = client.run("rev", input.clone()).await.expect("run");
            let expected: String = input.chars().rev().collect();
            assert_eq!(out, expected);
        });
    }
    let mut done = 0;
    while let Some(r) = jobs.join_next().await {
        r.expect("job task");
        done += 1;
    }
    assert_eq!(done, 100);
    let peak = peak.load(Ordering::SeqCst);
    assert!(peak <= 8, "ran {peak} jobs at once");
    assert!(peak >= 4, "never ran more than {peak} jobs at once");
}

/// Two submissions with one unique on one connection, and a third from
/// another client, share one job: one worker run, and each submitter gets
/// the data and the result exactly once.
async fn coalescing(kind: Kind) {
    let server = TestServer::start(kind).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(Notify::new());
    let (r, go) = (runs.clone(), release.clone());
    let _w = RunningWorker::spawn(
        worker_for(&[&server])
            .concurrency(4)
            .function("co", move |job| {
                let (r, go) = (r.clone(), go.clone());
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    go.notified().await;
                    job.send_data("chunk").await?;
                    Ok::<_, WorkError>("once")
                }
            })
            .build()
            .expect("worker"),
    );
    let client = server.client();
    let other = server.client();
    let a = client
        .job("co", "x")
        .unique("co-1")
        .submit()
        .await
        .expect("a");
    let b = client
        .job("co", "y")
        .unique("co-1")
        .submit()
        .await
        .expect("b");
    let c = other
        .job("co", "z")
        .unique("co-1")
        .submit()
        .await
        .expect("c");
    assert_eq!(a.handle(), b.handle());
    assert_eq!(a.handle().handle(), c.handle().handle());
    eventually("the job to start", || async {
        runs.load(Ordering::SeqCst) == 1
    })
    .await;
    release.notify_one();
    for mut job in [a, b, c] {
        let mut events = Vec::new();
        while let Some(ev) = job.next_event().await.expect("event") {
            events.push(ev);
        }
        assert_eq!(
            events,
            [
                JobEvent::Data("chunk".into()),
                JobEvent::Complete("once".into())
            ]
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}
