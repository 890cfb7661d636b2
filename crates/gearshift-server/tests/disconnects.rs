//! Peers that vanish: a worker dropped mid-job gives its job back to the
//! queue (a sleeping worker is woken for it); a client dropped before its
//! foreground job started takes the job with it.

mod common;

use bytes::Bytes;
use common::{bare, can_do, submit, wait_status, work_complete, TestServer};
use gearshift_proto::{PacketType, Response};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_dropped_mid_job_requeues_to_sleeping_worker() {
    let server = TestServer::start_default().await;
    let mut client = server.connect().await;
    let mut worker1 = server.connect().await;
    let mut worker2 = server.connect().await;

    worker1.send(&can_do("f")).await;
    client.send(&submit("f", "", b"work")).await;
    let h = client.expect_created().await;
    let assign = Response::JobAssign {
        handle: h.clone(),
        function: Bytes::from_static(b"f"),
        data: Bytes::from_static(b"work"),
    };
    worker1.send(&bare(PacketType::GrabJob)).await;
    worker1.expect(assign.clone()).await;

    worker2.send(&can_do("f")).await;
    worker2.send(&bare(PacketType::GrabJob)).await;
    worker2.expect(Response::NoJob).await;
    worker2.send(&bare(PacketType::PreSleep)).await;
    wait_status(server.addr, "f", (1, 1, 2)).await;

    drop(worker1);

    worker2.expect(Response::Noop).await;
    worker2.send(&bare(PacketType::GrabJob)).await;
    worker2.expect(assign).await;

    let mut admin = server.connect().await;
    let jobs = admin.admin_list("show jobs").await;
    assert_eq!(
        jobs,
        format!("{}\t1\t0\t0\n.\n", String::from_utf8_lossy(&h)),
        "one retry recorded"
    );

    worker2.send(&work_complete(&h, b"done")).await;
    client
        .expect(Response::WorkComplete {
            handle: h,
            data: Bytes::from_static(b"done"),
        })
        .await;
    assert_eq!(admin.admin_list("status").await, "f\t0\t0\t1\n.\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_dropped_before_start_drops_its_job() {
    let server = TestServer::start_default().await;
    let mut client = server.connect().await;
    client.send(&submit("lonely", "", b"x")).await;
    client.expect_created().await;
    wait_status(server.addr, "lonely", (1, 0, 0)).await;

    drop(client);
    wait_status(server.addr, "lonely", (0, 0, 0)).await;

    let mut admin = server.connect().await;
    assert_eq!(admin.admin_list("show jobs").await, ".\n");

    // A worker arriving later finds nothing.
    let mut worker = server.connect().await;
    worker.send(&can_do("lonely")).await;
    worker.send(&bare(PacketType::GrabJob)).await;
    worker.expect(Response::NoJob).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_dropped_after_start_keeps_the_job_running() {
    let server = TestServer::start_default().await;
    let mut client = server.connect().await;
    let mut worker = server.connect().await;
    worker.send(&can_do("f")).await;
    client.send(&submit("f", "", b"x")).await;
    let h = client.expect_created().await;
    worker.send(&bare(PacketType::GrabJob)).await;
    assert!(matches!(worker.recv().await, Response::JobAssign { .. }));

    drop(client);
    // Still running; the worker's result is accepted silently.
    let mut admin = server.connect().await;
    assert_eq!(admin.admin_list("status").await, "f\t1\t1\t1\n.\n");
    worker.send(&work_complete(&h, b"late")).await;
    wait_status(server.addr, "f", (0, 0, 1)).await;
    worker.ping(b"no error was sent").await;
}
