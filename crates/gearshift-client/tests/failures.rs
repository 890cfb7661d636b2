//! How failed jobs reach the client, against in-process Gearshift and
//! gearmand 1.1.20: exceptions with their payload (or downgraded to
//! WORK_FAIL without the option), WORK_FAIL, and ERROR replies.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{worker_for, Kind, RunningWorker, TestServer};
use gearshift_client::{Client, Error, JobEvent, WorkError};

both!(exceptions, work_fail, server_errors);

/// A handler error reaches a client with the exceptions option as
/// WORK_EXCEPTION with its payload, and one without it as WORK_FAIL.
async fn exceptions(kind: Kind) {
    let server = TestServer::start(kind).await;
    let _w = RunningWorker::spawn(
        worker_for(&[&server])
            .function("boom", |job| async move {
                if job.data() == "parse" {
                    let n: u32 = std::str::from_utf8(job.data())?.parse()?;
                    return Ok(n.to_string());
                }
                Err(WorkError::exception("kaboom"))
            })
            .build()
            .expect("worker"),
    );
    let client = server.client();
    match client.run("boom", "x").await {
        Err(Error::JobException { data, .. }) => assert_eq!(data, "kaboom"),
        other => panic!("expected an exception, got {other:?}"),
    }
    let mut job = client.submit("boom", "x").await.expect("submit");
    assert_eq!(
        job.next_event().await.expect("event"),
        Some(JobEvent::Exception("kaboom".into()))
    );
    match client.run("boom", "parse").await {
        Err(Error::JobException { data, .. }) => {
            assert_eq!(data, "invalid digit found in string")
        }
        other => panic!("expected an exception, got {other:?}"),
    }
    // Without the option the server downgrades to WORK_FAIL (gearmand adds a
    // NUL after the handle; the client must still route it).
    let plain = Client::builder()
        .server(server.addr)
        .exceptions(false)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    match plain.run("boom", "x").await {
        Err(Error::JobFailed { .. }) => {}
        other => panic!("expected a failure, got {other:?}"),
    }
    let mut job = plain.submit("boom", "x").await.expect("submit");
    assert_eq!(job.next_event().await.expect("event"), Some(JobEvent::Fail));
}

/// `WorkError::Fail`, and any error from a worker built with
/// `exceptions(false)`, end the job with WORK_FAIL.
async fn work_fail(kind: Kind) {
    let server = TestServer::start(kind).await;
    let _w = RunningWorker::spawn(
        worker_for(&[&server])
            .function("fail", |_job| async { Err::<Bytes, _>(WorkError::Fail) })
            .build()
            .expect("worker"),
    );
    let _quiet = RunningWorker::spawn(
        worker_for(&[&server])
            .exceptions(false)
            .function("quiet", |_job| async {
                Err::<Bytes, _>(WorkError::exception("hidden"))
            })
            .build()
            .expect("worker"),
    );
    let client = server.client();
    for function in ["fail", "quiet"] {
        let err = client.run(function, "x").await.expect_err("must fail");
        assert!(
            matches!(err, Error::JobFailed { .. }),
            "{function}: {err:?}"
        );
    }
    let mut job = client.submit("fail", "x").await.expect("submit");
    assert_eq!(job.next_event().await.expect("event"), Some(JobEvent::Fail));
    assert_eq!(job.next_event().await.expect("after end"), None);
}

/// ERROR replies answer the right request among several in flight on one
/// connection, and leave the connection usable: a unique over 64 bytes
/// (ARGUMENT_TOO_LARGE) and a full queue (QUEUE_ERROR).
async fn server_errors(kind: Kind) {
    let server = TestServer::start(kind).await;
    let client = server.client();
    let too_long = "u".repeat(65);
    let (before, refused, after) = tokio::join!(
        client.echo("before"),
        client.job("f", "x").unique(too_long).background(),
        client.echo("after"),
    );
    assert_eq!(before.expect("echo"), "before");
    match refused {
        Err(Error::Server { code, .. }) => assert_eq!(code, "ARGUMENT_TOO_LARGE"),
        other => panic!("expected ARGUMENT_TOO_LARGE, got {other:?}"),
    }
    assert_eq!(after.expect("echo"), "after");

    client
        .submit_background("mq", "1")
        .await
        .expect("first job");
    let mut admin = server.admin().await;
    admin.max_queue("mq", 1).await.expect("maxqueue");
    match client.submit_background("mq", "2").await {
        Err(Error::Server { code, .. }) => assert_eq!(code, "QUEUE_ERROR"),
        other => panic!("expected QUEUE_ERROR, got {other:?}"),
    }
    assert_eq!(client.echo("still").await.expect("echo"), "still");
}
