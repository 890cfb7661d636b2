//! Output flow: a peer that stops reading makes the server's writes block
//! (and, past the output limit, its reads stop: see `output_limit.rs`);
//! what it is owed must still arrive whole and in order once it reads, while
//! every other connection keeps being served; and a peer that half-closes
//! its socket still gets the answer to what it sent before.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{can_do, req, submit, TestServer, TIMEOUT};
use gearshift_proto::{PacketType, Response};
use tokio::io::AsyncWriteExt;

const BIG: usize = 256 * 1024;

fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| ((i * 31 + j) % 251) as u8).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_that_stops_reading_gets_everything_later_and_blocks_nobody() {
    let server = TestServer::start_default().await;
    let mut slow = server.connect().await;
    const N: usize = 48; // 12 MiB of echoes: far beyond the socket buffers
    let mut batch = Vec::new();
    for i in 0..N {
        batch.extend(req(PacketType::EchoReq, &[&payload(i, BIG)]));
    }
    // Written from another task: once its replies back up past the output
    // limit the server stops reading this socket, so the write finishes only
    // after the client reads.
    let (mut rd, mut wr) = slow.stream.into_split();
    let writer = tokio::spawn(async move {
        tokio::time::timeout(TIMEOUT * 2, wr.write_all(&batch))
            .await
            .expect("write timed out")
            .expect("write failed");
        wr
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Meanwhile the server answers everyone else at once.
    let mut other = server.connect().await;
    for _ in 0..20 {
        other.ping(b"still here").await;
    }

    common::expect_echoes(&mut rd, N, BIG, |i| payload(i, BIG)).await;
    let wr = writer.await.expect("writer task");
    slow.stream = rd.reunite(wr).expect("same socket");
    slow.ping(b"after the backlog").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_for_a_blocked_client_from_a_worker_arrives_in_order() {
    let server = TestServer::start_default().await;
    let mut client = server.connect().await;
    let mut worker = server.connect().await;
    worker.send(&can_do("flood")).await;
    client.send(&submit("flood", "", b"go")).await;
    let handle = client.expect_created().await;
    worker.send(&req(PacketType::GrabJobAll, &[])).await;
    match worker.recv().await {
        // Like gearmand, a job without a reducer is assigned as JOB_ASSIGN_UNIQ.
        Response::JobAssignUniq { handle: h, .. } => assert_eq!(h, handle),
        other => panic!("expected JOB_ASSIGN_UNIQ, got {other:?}"),
    }
    // The client does not read while the worker streams 12 MiB at it.
    const N: usize = 48;
    let mut batch = Vec::new();
    for i in 0..N {
        batch.extend(req(PacketType::WorkData, &[&handle, &payload(i, BIG)]));
    }
    batch.extend(req(PacketType::WorkComplete, &[&handle, b"done"]));
    let (wrd, mut wwr) = worker.stream.into_split();
    let writer = tokio::spawn(async move {
        tokio::time::timeout(TIMEOUT, wwr.write_all(&batch))
            .await
            .expect("worker write timed out")
            .expect("worker write failed");
        wwr
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    for i in 0..N {
        match client.recv().await {
            Response::WorkData { handle: h, data } => {
                assert_eq!(h, handle);
                assert_eq!(data, Bytes::from(payload(i, BIG)), "WORK_DATA {i} differs");
            }
            other => panic!("expected WORK_DATA {i}, got {other:?}"),
        }
    }
    match client.recv().await {
        Response::WorkComplete { handle: h, data } => {
            assert_eq!(h, handle);
            assert_eq!(&data[..], b"done");
        }
        other => panic!("expected WORK_COMPLETE, got {other:?}"),
    }
    let wwr = writer.await.expect("writer task");
    worker.stream = wrd.reunite(wwr).expect("same socket");
    worker.ping(b"worker still served").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_closed_peer_still_gets_its_answers() {
    let server = TestServer::start_default().await;
    let mut conn = server.connect().await;
    let mut bytes = req(PacketType::EchoReq, &[&payload(1, BIG)]);
    bytes.extend_from_slice(b"version\n");
    conn.send(&bytes).await;
    conn.stream.shutdown().await.expect("half-close");
    let all = conn.read_to_close().await;
    let mut expected = bytes::BytesMut::new();
    Response::EchoRes(Bytes::from(payload(1, BIG))).encode(&mut expected);
    expected.extend_from_slice(b"OK gearshift-test\n");
    assert_eq!(all.len(), expected.len(), "everything owed, then close");
    assert!(all[..] == expected[..], "echo then version, byte for byte");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_half_closed_submitter_gets_every_job_created_first() {
    // More submissions than the hub lets wait unrouted, in one write, then
    // the end of the stream: every JOB_CREATED comes back before the close.
    let server = TestServer::start_default().await;
    let mut conn = server.connect().await;
    let n = 300;
    let mut bytes = Vec::new();
    for i in 0..n {
        let data = format!("job {i}");
        bytes.extend_from_slice(&req(
            PacketType::SubmitJobBg,
            &[b"half_closed_fn", b"", data.as_bytes()],
        ));
    }
    conn.send(&bytes).await;
    conn.stream.shutdown().await.expect("half-close");
    let all = conn.read_to_close().await;
    let mut buf = bytes::BytesMut::from(&all[..]);
    let mut handles = Vec::new();
    while let Some(frame) = gearshift_proto::decode_frame(&mut buf, 1 << 20).expect("frames") {
        let gearshift_proto::Frame::Packet(p) = frame else {
            panic!("expected a binary packet, got {frame:?}");
        };
        match Response::parse(&p) {
            Ok(Response::JobCreated(h)) => handles.push(h),
            other => panic!("expected JOB_CREATED, got {other:?}"),
        }
    }
    assert!(buf.is_empty(), "nothing after the last whole packet");
    assert_eq!(handles.len(), n, "one JOB_CREATED per submission");
    let mut unique = handles.clone();
    unique.dedup();
    assert_eq!(unique.len(), n, "every handle different");
}
