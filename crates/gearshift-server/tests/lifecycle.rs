//! The server's own life: stopping through the admin `shutdown` command or
//! the shutdown future (graceful: running jobs finish first), and the
//! connection cap (extra connections wait in the backlog).

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{bare, can_do, submit, work_complete, Conn, TestServer, TIMEOUT};
use gearshift_proto::{PacketType, Response};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_shutdown_from_loopback_stops_the_server() {
    let mut server = TestServer::start_default().await;
    let mut other = server.connect().await;
    other.ping(b"alive").await;

    let mut admin = server.connect().await;
    assert_eq!(admin.admin_line("shutdown").await, "OK\r\n");
    assert!(
        server.wait_stopped(TIMEOUT).await,
        "Server::run did not return after admin shutdown"
    );
    // Every connection is closed, and nothing listens any more.
    admin.expect_closed().await;
    other.expect_closed().await;
    assert!(tokio::net::TcpStream::connect(server.addr).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_future_with_no_running_jobs_returns_promptly() {
    let mut server = TestServer::start_default().await;
    let mut client = server.connect().await;
    // A queued job is not a running one: it does not delay the stop.
    client.send(&common::submit_bg("f", "", b"x")).await;
    client.expect_created().await;

    let start = std::time::Instant::now();
    server.trigger_shutdown();
    assert!(
        server.wait_stopped(TIMEOUT).await,
        "Server::run did not return"
    );
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "stop took {:?}",
        start.elapsed()
    );
    client.expect_closed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_waits_for_running_jobs() {
    let mut server = TestServer::start_default().await;
    let mut worker = server.connect().await;
    let mut client = server.connect().await;
    worker.send(&can_do("f")).await;
    client.send(&submit("f", "", b"x")).await;
    let h = client.expect_created().await;
    worker.send(&bare(PacketType::GrabJob)).await;
    assert!(matches!(worker.recv().await, Response::JobAssign { .. }));

    server.trigger_shutdown();
    assert!(
        !server.wait_stopped(Duration::from_millis(300)).await,
        "stopped while a job was running"
    );
    // No new connections are served while draining; the existing ones are.
    let refused = async {
        loop {
            match tokio::net::TcpStream::connect(server.addr).await {
                Err(_) => return,
                Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    };
    tokio::time::timeout(TIMEOUT, refused)
        .await
        .expect("listener still accepting while draining");
    worker.ping(b"still served").await;

    worker.send(&work_complete(&h, b"done")).await;
    client
        .expect(Response::WorkComplete {
            handle: h,
            data: Bytes::from_static(b"done"),
        })
        .await;
    assert!(
        server.wait_stopped(TIMEOUT).await,
        "Server::run did not return after the last job finished"
    );
    client.expect_closed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_connections_leaves_extra_ones_in_the_backlog() {
    let mut cfg = common::config();
    cfg.max_connections = 2;
    let server = TestServer::start(cfg).await;

    let mut first = server.connect().await;
    let mut second = server.connect().await;
    first.ping(b"1").await;
    second.ping(b"2").await;

    // The kernel completes the handshake, but the server does not serve it.
    let mut third = Conn::connect(server.addr).await;
    third.send(&common::req(PacketType::EchoReq, &[b"3"])).await;
    third.expect_silence(Duration::from_millis(300)).await;

    drop(first);
    third
        .expect(Response::EchoRes(Bytes::from_static(b"3")))
        .await;
    second.ping(b"2 again").await;

    // Still capped: a fourth waits until another one leaves.
    let mut fourth = Conn::connect(server.addr).await;
    fourth.send_line("version").await;
    fourth.expect_silence(Duration::from_millis(300)).await;
    drop(third);
    assert_eq!(
        fourth.read_text_until(b"\n").await,
        format!("OK {}\n", common::VERSION)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_shutdown_graceful_waits_for_running_jobs() {
    let mut server = TestServer::start_default().await;
    let mut worker = server.connect().await;
    let mut client = server.connect().await;
    worker.send(&can_do("f")).await;
    client.send(&submit("f", "", b"x")).await;
    let h = client.expect_created().await;
    worker.send(&bare(PacketType::GrabJob)).await;
    assert!(matches!(worker.recv().await, Response::JobAssign { .. }));

    let mut admin = server.connect().await;
    assert_eq!(admin.admin_line("shutdown graceful").await, "OK\r\n");
    assert!(
        !server.wait_stopped(Duration::from_millis(300)).await,
        "stopped while a job was running"
    );
    worker.send(&work_complete(&h, b"done")).await;
    client
        .expect(Response::WorkComplete {
            handle: h,
            data: Bytes::from_static(b"done"),
        })
        .await;
    assert!(
        server.wait_stopped(TIMEOUT).await,
        "Server::run did not return"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_closed_by_the_server_free_their_slot() {
    let mut cfg = common::config();
    cfg.max_connections = 1;
    cfg.max_packet_size = 64;
    let server = TestServer::start(cfg).await;

    let closers: [&[u8]; 4] = [
        b"\0XYZ\0\0\0\0\0\0\0\0",
        b"a b c d e f\n",
        &[b'x'; 9000],
        b"\0REQ\0\0\0\x10\0\0\x10\0",
    ];
    for bytes in closers {
        let mut conn = server.connect().await;
        conn.send(bytes).await;
        // Whatever it answers (an ERROR for the oversized body), it closes.
        let _ = conn.read_to_close().await;
        // We keep our end open: the slot must be freed by the server's close.
        let mut next = Conn::connect(server.addr).await;
        next.ping(b"served").await;
        drop(next);
        drop(conn);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_starts_no_new_jobs() {
    let mut server = TestServer::start_default().await;
    let mut client = server.connect().await;
    let mut busy = server.connect().await;
    let mut idle = server.connect().await;
    busy.send(&can_do("f")).await;
    idle.send(&can_do("f")).await;
    let mut batch = Vec::new();
    for i in 0..3 {
        batch.extend(common::submit_bg("f", "", format!("job{i}").as_bytes()));
    }
    client.send(&batch).await;
    let h1 = client.expect_created().await;
    client.expect_created().await;
    client.expect_created().await;
    busy.send(&bare(PacketType::GrabJob)).await;
    assert!(matches!(busy.recv().await, Response::JobAssign { handle, .. } if handle == h1));

    server.trigger_shutdown();
    // Wait until the drain has begun: the listener goes away.
    let refused = async {
        while tokio::net::TcpStream::connect(server.addr).await.is_ok() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(TIMEOUT, refused)
        .await
        .expect("listener still accepting while draining");

    // Queued jobs are not handed out while draining.
    idle.send(&bare(PacketType::GrabJob)).await;
    idle.expect(Response::NoJob).await;
    idle.send(&bare(PacketType::PreSleep)).await;
    // New submissions are refused rather than accepted and lost at exit.
    client.send(&common::submit_bg("f", "", b"late")).await;
    assert!(
        matches!(client.recv().await, Response::Error { code, .. } if code == "QUEUE_ERROR"),
        "a submission during the drain was not refused"
    );

    // The running job finishes, pipelined with the usual next GRAB_JOB:
    // the server stops instead of handing out the next job.
    let mut done = work_complete(&h1, b"ok");
    done.extend(bare(PacketType::GrabJob));
    busy.send(&done).await;
    assert!(
        server.wait_stopped(TIMEOUT).await,
        "Server::run did not return after the running job finished"
    );
    // Its GRAB_JOB is answered NO_JOB, or not at all if the server stopped first.
    let rest = busy.read_to_close().await;
    let mut no_job = bytes::BytesMut::new();
    Response::NoJob.encode(&mut no_job);
    assert!(
        rest.is_empty() || rest == no_job,
        "busy worker got {rest:?} after its last job"
    );
    idle.expect_closed().await;
}
