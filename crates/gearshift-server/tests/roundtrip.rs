//! The protocol reference's example flow over real sockets: a worker
//! registers, finds nothing, sleeps; a client submits; the worker is woken,
//! grabs the job and completes it; the result reaches the client byte for
//! byte.

mod common;

use bytes::Bytes;
use common::{bare, can_do, handle, raw_packet, submit, work_complete, TestServer};
use gearshift_proto::frame::MAGIC_RES;
use gearshift_proto::{PacketType, Response};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reference_example_flow() {
    let server = TestServer::start_default().await;
    let mut worker = server.connect().await;
    let mut client = server.connect().await;

    worker.send(&can_do("reverse")).await;
    worker.send(&bare(PacketType::GrabJob)).await;
    worker.expect(Response::NoJob).await;
    worker.send(&bare(PacketType::PreSleep)).await;

    // Binary workload with NULs and non-UTF-8 bytes.
    let data: &[u8] = b"te\0st\xff";
    client.send(&submit("reverse", "", data)).await;
    let h = client.expect_created().await;
    assert_eq!(h, handle(1));

    worker.expect(Response::Noop).await;
    worker.send(&bare(PacketType::GrabJob)).await;
    worker
        .expect(Response::JobAssign {
            handle: h.clone(),
            function: Bytes::from_static(b"reverse"),
            data: Bytes::from_static(data),
        })
        .await;

    let result: Vec<u8> = data.iter().rev().copied().collect();
    worker.send(&work_complete(&h, &result)).await;

    // Exactly the worker's packet, with the response magic.
    let mut body = h.to_vec();
    body.push(0);
    body.extend_from_slice(&result);
    let expected = raw_packet(&MAGIC_RES, PacketType::WorkComplete.as_u32(), &body);
    assert_eq!(client.recv_raw_packet().await, expected);

    // The job is gone; the worker is still registered.
    let list = client.admin_list("status").await;
    assert_eq!(list, "reverse\t0\t0\t1\n.\n");
    worker.send(&bare(PacketType::GrabJob)).await;
    worker.expect(Response::NoJob).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_updates_are_forwarded_in_order() {
    let server = TestServer::start_default().await;
    let mut worker = server.connect().await;
    let mut client = server.connect().await;

    worker.send(&can_do("f")).await;
    client.send(&submit("f", "u1", b"x")).await;
    let h = client.expect_created().await;
    worker.send(&bare(PacketType::GrabJob)).await;
    worker
        .expect(Response::JobAssign {
            handle: h.clone(),
            function: Bytes::from_static(b"f"),
            data: Bytes::from_static(b"x"),
        })
        .await;

    let mut batch = Vec::new();
    batch.extend(common::req(PacketType::WorkStatus, &[&h, b"1", b"2"]));
    batch.extend(common::req(PacketType::WorkData, &[&h, b"partial"]));
    batch.extend(common::req(PacketType::WorkWarning, &[&h, b"careful"]));
    batch.extend(work_complete(&h, b"done"));
    worker.send(&batch).await;

    client
        .expect(Response::WorkStatus {
            handle: h.clone(),
            numerator: Bytes::from_static(b"1"),
            denominator: Bytes::from_static(b"2"),
        })
        .await;
    client
        .expect(Response::WorkData {
            handle: h.clone(),
            data: Bytes::from_static(b"partial"),
        })
        .await;
    client
        .expect(Response::WorkWarning {
            handle: h.clone(),
            data: Bytes::from_static(b"careful"),
        })
        .await;
    client
        .expect(Response::WorkComplete {
            handle: h.clone(),
            data: Bytes::from_static(b"done"),
        })
        .await;

    // A second WORK_COMPLETE for the finished job is refused.
    worker.send(&work_complete(&h, b"again")).await;
    worker.expect_error("JOB_NOT_FOUND").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_megabyte_payloads_survive_intact() {
    let server = TestServer::start_default().await;
    let mut worker = server.connect().await;
    let mut client = server.connect().await;
    worker.send(&can_do("big")).await;

    let data: Vec<u8> = (0..5 << 20).map(|i: u32| (i % 251) as u8).collect();
    // The server reads while we write; it answers only once all is in.
    client.send(&submit("big", "", &data)).await;
    let h = client.expect_created().await;

    worker.send(&bare(PacketType::GrabJob)).await;
    match worker.recv().await {
        Response::JobAssign {
            handle, data: got, ..
        } => {
            assert_eq!(handle, h);
            assert!(got == data, "5 MiB workload changed on the way");
        }
        other => panic!("expected JOB_ASSIGN, got {other:?}"),
    }
    let result = vec![0x5a; 3 << 20];
    worker.send(&work_complete(&h, &result)).await;
    client
        .expect(Response::WorkComplete {
            handle: h,
            data: Bytes::from(result),
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn packets_trickling_in_one_byte_at_a_time() {
    let server = TestServer::start_default().await;
    let mut client = server.connect().await;
    let mut bytes = submit("slow", "u", b"drip");
    bytes.extend(b"status\r\n");
    for b in &bytes {
        client.send(std::slice::from_ref(b)).await;
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    assert_eq!(client.expect_created().await, handle(1));
    assert_eq!(client.read_list().await, "slow\t1\t0\t0\n.\n");
}
