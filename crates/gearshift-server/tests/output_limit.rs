//! Memory per connection is bounded: a peer that sends requests and never
//! reads the replies is not read from once its unwritten output passes
//! `max_output` (so it cannot make the server buffer without end), loses
//! nothing when it reads again, and slows nobody else; a peer whose output
//! grows from other connections' traffic (a worker streaming to a client
//! that never reads) is closed past the hard limit, and the worker goes on.

mod common;

use std::time::Duration;

use common::{can_do, config, req, submit, Conn, TestServer, TIMEOUT};
use gearshift_proto::{PacketType, Response};
use gearshift_server::ServerConfig;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpSocket;

const LIMIT: usize = 64 * 1024;

fn limited() -> ServerConfig {
    ServerConfig {
        max_output: LIMIT,
        max_packet_size: 64 * 1024,
        ..config()
    }
}

fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| ((i * 7 + j) % 253) as u8).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_not_read_either_and_loses_nothing() {
    const SIZE: usize = 4096;
    const N: usize = 12 * 1024; // 48 MiB of ECHO_REQ
    let server = TestServer::start(limited()).await;
    let mut flood = server.connect().await;
    let mut bytes = Vec::with_capacity(N * (SIZE + 12));
    for i in 0..N {
        bytes.extend(req(PacketType::EchoReq, &[&payload(i, SIZE)]));
    }

    // Write until the writes stall: a server reading on regardless would
    // take all 48 MiB (and hold every reply in memory).
    let mut written = 0;
    while written < bytes.len() {
        match tokio::time::timeout(
            Duration::from_millis(500),
            flood.stream.write(&bytes[written..]),
        )
        .await
        {
            Err(_) => break,
            Ok(Ok(n)) => written += n,
            Ok(Err(e)) => panic!("write failed: {e}"),
        }
    }
    assert!(
        written < 24 << 20,
        "the server kept reading a client that does not read: {written} bytes taken"
    );

    // Everyone else is served meanwhile.
    let mut other = server.connect().await;
    for _ in 0..10 {
        other.ping(b"not held up").await;
    }

    // Once the client reads, every echo arrives whole and in order, and the
    // rest of its requests are read again.
    let (mut rd, mut wr) = flood.stream.into_split();
    let rest = bytes[written..].to_vec();
    let writer = tokio::spawn(async move {
        tokio::time::timeout(TIMEOUT * 4, wr.write_all(&rest))
            .await
            .expect("write timed out")
            .expect("write failed");
    });
    common::expect_echoes(&mut rd, N, SIZE, |i| payload(i, SIZE)).await;
    writer.await.expect("writer task");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_a_stream_is_closed_and_the_worker_goes_on() {
    let server = TestServer::start(limited()).await;
    let mut worker = server.connect().await;
    worker.send(&can_do("stream")).await;
    worker.ping(b"registered").await;

    // A client with a small receive buffer that submits and never reads.
    let sock = TcpSocket::new_v4().expect("socket");
    sock.set_recv_buffer_size(4096).expect("rcvbuf");
    let stream = sock.connect(server.addr).await.expect("connect");
    let mut client = Conn::from_stream(stream);
    client.send(&submit("stream", "", b"go")).await;
    let handle = match client.recv().await {
        Response::JobCreated(h) => h,
        other => panic!("expected JOB_CREATED, got {other:?}"),
    };

    worker.send(&common::bare(PacketType::GrabJob)).await;
    match worker.recv().await {
        Response::JobAssign { handle: h, .. } => assert_eq!(h, handle),
        other => panic!("expected JOB_ASSIGN, got {other:?}"),
    }
    // 16 MiB of WORK_DATA: far past the hard limit plus what the kernel's
    // buffers hold for the client.
    let chunk = payload(1, 60 * 1024);
    for _ in 0..280 {
        worker
            .send(&req(PacketType::WorkData, &[&handle, &chunk]))
            .await;
    }
    worker.ping(b"still served").await;
    worker.send(&common::work_complete(&handle, b"done")).await;
    worker.ping(b"after the job").await;

    // The client was cut off: it reads what was in flight, then the end.
    let got = client.read_to_close().await;
    assert!(
        got.len() < 12 << 20,
        "the server buffered {} bytes for a client that did not read",
        got.len()
    );
}
