//! The server's real timers: CAN_DO_TIMEOUT takes a job back from a slow
//! worker, and an epoch job wakes a sleeping worker when it falls due.
//! These use wall-clock time, with generous bounds.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use common::{bare, can_do, req, submit, wait_status, work_complete, TestServer};
use gearshift_proto::{PacketType, Response};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn can_do_timeout_requeues_to_another_worker() {
    let server = TestServer::start_default().await;
    let mut client = server.connect().await;
    let mut slow = server.connect().await;
    let mut spare = server.connect().await;

    slow.send(&req(PacketType::CanDoTimeout, &[b"f", b"1000"]))
        .await;
    client.send(&submit("f", "", b"job")).await;
    let h = client.expect_created().await;
    let assign = Response::JobAssign {
        handle: h.clone(),
        function: Bytes::from_static(b"f"),
        data: Bytes::from_static(b"job"),
    };
    slow.send(&bare(PacketType::GrabJob)).await;
    slow.expect(assign.clone()).await;
    let assigned = Instant::now();

    spare.send(&can_do("f")).await;
    spare.send(&bare(PacketType::GrabJob)).await;
    spare.expect(Response::NoJob).await;
    spare.send(&bare(PacketType::PreSleep)).await;

    spare.expect(Response::Noop).await;
    let waited = assigned.elapsed();
    assert!(
        waited >= Duration::from_millis(800),
        "requeued after only {waited:?}"
    );
    assert!(
        waited <= Duration::from_secs(3),
        "requeued after {waited:?}"
    );
    spare.send(&bare(PacketType::GrabJob)).await;
    spare.expect(assign).await;

    // The slow worker's late result is refused; the client is not told.
    slow.send(&work_complete(&h, b"late")).await;
    let text = slow.expect_error("JOB_NOT_FOUND").await;
    assert_eq!(text, "Job given in work result not found");

    spare.send(&work_complete(&h, b"on time")).await;
    client
        .expect(Response::WorkComplete {
            handle: h,
            data: Bytes::from_static(b"on time"),
        })
        .await;
    wait_status(server.addr, "f", (0, 0, 2)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epoch_job_wakes_sleeping_worker_when_due() {
    let server = TestServer::start_default().await;
    let mut worker = server.connect().await;
    let mut client = server.connect().await;

    worker.send(&can_do("later")).await;
    worker.send(&bare(PacketType::PreSleep)).await;

    // Due on the first whole second at least 2 s from now.
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64;
    let due_secs = (now_ms + 2000).div_ceil(1000);
    let due_in = Duration::from_millis(due_secs * 1000 - now_ms);
    let start = Instant::now();
    client
        .send(&req(
            PacketType::SubmitJobEpoch,
            &[b"later", b"", due_secs.to_string().as_bytes(), b"payload"],
        ))
        .await;
    let h = client.expect_created().await;

    // Counted but not grab-able yet.
    let mut admin = server.connect().await;
    assert_eq!(admin.admin_list("status").await, "later\t1\t0\t1\n.\n");

    worker.expect(Response::Noop).await;
    let woke = start.elapsed();
    assert!(
        woke >= Duration::from_millis(1500) && woke + Duration::from_millis(300) >= due_in,
        "woken after {woke:?}, due in {due_in:?}"
    );
    assert!(
        woke <= due_in + Duration::from_millis(1500),
        "woken after {woke:?}, due in {due_in:?}"
    );
    worker.send(&bare(PacketType::GrabJob)).await;
    worker
        .expect(Response::JobAssign {
            handle: h,
            function: Bytes::from_static(b"later"),
            data: Bytes::from_static(b"payload"),
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epoch_in_the_past_runs_at_once() {
    let server = TestServer::start_default().await;
    let mut worker = server.connect().await;
    let mut client = server.connect().await;
    worker.send(&can_do("past")).await;
    worker.send(&bare(PacketType::GrabJob)).await;
    worker.expect(Response::NoJob).await;
    worker.send(&bare(PacketType::PreSleep)).await;
    client
        .send(&req(
            PacketType::SubmitJobEpoch,
            &[b"past", b"", b"1000", b"old"],
        ))
        .await;
    client.expect_created().await;
    let start = Instant::now();
    worker.expect(Response::Noop).await;
    assert!(start.elapsed() < Duration::from_secs(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn epoch_far_in_the_future_waits_without_breaking_the_timer() {
    let server = TestServer::start_default().await;
    let mut worker = server.connect().await;
    let mut client = server.connect().await;
    worker.send(&can_do("never")).await;
    worker.send(&bare(PacketType::PreSleep)).await;
    // Saturates to i64::MAX seconds: must neither overflow nor fire.
    client
        .send(&req(
            PacketType::SubmitJobEpoch,
            &[b"never", b"", b"99999999999999999999", b"x"],
        ))
        .await;
    client.expect_created().await;
    worker.expect_silence(Duration::from_millis(300)).await;
    // The engine still serves, and other timers still fire.
    wait_status(server.addr, "never", (1, 0, 1)).await;
    client
        .send(&req(
            PacketType::SubmitJobEpoch,
            &[b"never", b"", b"1", b"now"],
        ))
        .await;
    client.expect_created().await;
    worker.expect(Response::Noop).await;
    worker.send(&bare(PacketType::GrabJob)).await;
    assert!(matches!(
        worker.recv().await,
        Response::JobAssign { data, .. } if data == "now"
    ));
}
