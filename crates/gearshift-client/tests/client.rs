//! Client scenarios, each run against in-process Gearshift and gearmand
//! 1.1.20: foreground events, background jobs and status, priorities, echo,
//! timeouts.

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use common::{eventually, within, worker_for, Kind, RunningWorker, TestServer};
use gearshift_client::{Client, Error, JobEvent, Priority, WorkError};
use tokio::sync::{mpsc, Notify};

both!(
    foreground_events,
    background_and_status,
    priorities,
    echo,
    timeout_detaches,
);

/// DATA, WARNING, STATUS arrive in order, then COMPLETE; `run` gives the result.
async fn foreground_events(kind: Kind) {
    let server = TestServer::start(kind).await;
    let _w = RunningWorker::spawn(
        worker_for(&[&server])
            .function("events", |job| async move {
                job.send_data("d1").await?;
                job.send_warning("w1").await?;
                job.send_status(1, 2).await?;
                job.send_data("d2").await?;
                Ok::<_, WorkError>(format!("done:{}", String::from_utf8_lossy(job.data())))
            })
            .build()
            .expect("worker"),
    );
    let client = server.client();
    let mut job = client.submit("events", "x").await.expect("submit");
    let mut events = Vec::new();
    while let Some(ev) = job.next_event().await.expect("event") {
        events.push(ev);
    }
    assert_eq!(
        events,
        vec![
            JobEvent::Data("d1".into()),
            JobEvent::Warning("w1".into()),
            JobEvent::Status {
                numerator: 1,
                denominator: 2
            },
            JobEvent::Data("d2".into()),
            JobEvent::Complete("done:x".into()),
        ]
    );
    assert!(job.next_event().await.expect("after end").is_none());
    assert_eq!(job.result().await.expect("result"), "done:x");
    assert_eq!(client.run("events", "y").await.expect("run"), "done:y");
}

/// Background submit, GET_STATUS (queued, then running with progress, then
/// gone), GET_STATUS_UNIQUE, and an epoch job already due.
async fn background_and_status(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client();
    let handle = client
        .job("bg", "hold")
        .unique("bg-unique-1")
        .background()
        .await
        .expect("background submit");
    let st = client.status(&handle).await.expect("status");
    assert!(st.known && !st.running, "{st:?}");
    let su = client
        .status_unique("bg-unique-1")
        .await
        .expect("status unique");
    assert!(su.known && !su.running && su.waiting == 0, "{su:?}");
    let unknown = gearshift_client::JobHandle::new(0, "H:nosuch:999");
    let st = client.status(&unknown).await.expect("status unknown");
    assert!(!st.known && !st.running, "{st:?}");

    let release = Arc::new(Notify::new());
    let (ran_tx, mut ran_rx) = mpsc::unbounded_channel::<Bytes>();
    let r = release.clone();
    let _w = RunningWorker::spawn(
        worker_for(&[&server])
            .function("bg", move |job| {
                let release = r.clone();
                let ran = ran_tx.clone();
                async move {
                    if job.data() == "hold" {
                        job.send_status(1, 2).await?;
                        release.notified().await;
                    }
                    let _ = ran.send(job.data().clone());
                    Ok::<_, WorkError>("")
                }
            })
            .build()
            .expect("worker"),
    );
    eventually("the job to run with progress 1/2", || async {
        let st = client.status(&handle).await.expect("status");
        st.known && st.running && st.numerator == 1 && st.denominator == 2
    })
    .await;
    let su = client
        .status_unique("bg-unique-1")
        .await
        .expect("status unique");
    assert!(su.known && su.running, "{su:?}");
    release.notify_one();
    assert_eq!(
        within("the held job", ran_rx.recv()).await.expect("ran"),
        "hold"
    );
    eventually("the finished job to be forgotten", || async {
        !client.status(&handle).await.expect("status").known
    })
    .await;

    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs() as i64;
    client
        .job("bg", "due")
        .epoch(now - 1)
        .background()
        .await
        .expect("epoch submit");
    assert_eq!(
        within("the epoch job", ran_rx.recv()).await.expect("ran"),
        "due"
    );
    let err = client
        .job("bg", "x")
        .epoch(now)
        .submit()
        .await
        .expect_err("must fail");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
}

/// Queued HIGH, NORMAL, LOW jobs run in priority order.
async fn priorities(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client();
    for (data, prio) in [
        ("low", Priority::Low),
        ("normal", Priority::Normal),
        ("high", Priority::High),
        ("low2", Priority::Low),
        ("high2", Priority::High),
    ] {
        client
            .job("prio", data)
            .priority(prio)
            .background()
            .await
            .expect("submit");
    }
    let (tx, mut rx) = mpsc::unbounded_channel::<Bytes>();
    let _w = RunningWorker::spawn(
        worker_for(&[&server])
            .concurrency(1)
            .function("prio", move |job| {
                let tx = tx.clone();
                async move {
                    let _ = tx.send(job.data().clone());
                    Ok::<_, WorkError>("")
                }
            })
            .build()
            .expect("worker"),
    );
    let mut order = Vec::new();
    for _ in 0..5 {
        order.push(within("a prio job", rx.recv()).await.expect("ran"));
    }
    assert_eq!(order, ["high", "high2", "normal", "low", "low2"]);
    // A foreground high-priority job works too.
    let out = client
        .job("prio", "fg")
        .priority(Priority::High)
        .run()
        .await
        .expect("run");
    assert_eq!(out, "");
}

/// ECHO round-trips arbitrary bytes, large ones included.
async fn echo(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client();
    assert_eq!(client.echo("hello").await.expect("echo"), "hello");
    let binary = Bytes::from_static(b"a\0b\0\0c");
    assert_eq!(client.echo(binary.clone()).await.expect("echo"), binary);
    let big = Bytes::from(vec![7u8; 1 << 20]);
    assert_eq!(client.echo(big.clone()).await.expect("echo"), big);
    assert_eq!(client.echo_on(0, "").await.expect("echo"), "");
    let connected = Client::connect(server.addr).await.expect("connect");
    assert_eq!(connected.echo("x").await.expect("echo"), "x");
}

/// A call past its timeout fails with `Timeout`; the connection stays
/// usable and late events for the abandoned job are dropped.
async fn timeout_detaches(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client();
    let err = client
        .job("late", "x")
        .timeout(Duration::from_millis(200))
        .run()
        .await
        .expect_err("must fail");
    assert!(matches!(err, Error::Timeout), "{err:?}");
    let hasty = client.with_timeout(Some(Duration::from_millis(100)));
    let mut job = hasty.submit("late", "y").await.expect("submit");
    assert!(matches!(job.next_event().await, Err(Error::Timeout)));
    assert!(matches!(job.next_event().await, Err(Error::Timeout)));
    let _w = RunningWorker::spawn(
        worker_for(&[&server])
            .function("late", |job| async move {
                job.send_data("ignored").await?;
                Ok::<_, WorkError>(job.data().clone())
            })
            .build()
            .expect("worker"),
    );
    assert_eq!(client.run("late", "z").await.expect("run"), "z");
    assert_eq!(client.echo("still fine").await.expect("echo"), "still fine");
}
