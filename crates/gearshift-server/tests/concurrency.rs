//! Many clients and workers at once: every foreground job's result reaches
//! exactly the client that submitted it, whichever worker ran it, and the
//! server ends with nothing queued.

mod common;

use std::collections::HashMap;

use bytes::Bytes;
use common::{bare, can_do, submit, wait_status, work_complete, Conn, TestServer};
use gearshift_proto::{PacketType, Response};

const CLIENTS: usize = 20;
const JOBS_PER_CLIENT: usize = 25;
const WORKERS: usize = 4;

/// A worker that reverses workloads until aborted: GRAB, run, and sleep
/// with PRE_SLEEP when there is nothing to do.
async fn worker(mut conn: Conn) {
    conn.send(&can_do("rev")).await;
    loop {
        conn.send(&bare(PacketType::GrabJob)).await;
        match conn.recv().await {
            Response::JobAssign { handle, data, .. } => {
                let out: Vec<u8> = data.iter().rev().copied().collect();
                conn.send(&work_complete(&handle, &out)).await;
            }
            Response::NoJob => {
                conn.send(&bare(PacketType::PreSleep)).await;
                assert_eq!(conn.recv().await, Response::Noop);
            }
            other => panic!("worker got {other:?}"),
        }
    }
}

async fn client(mut conn: Conn, id: usize) {
    let mut batch = Vec::new();
    let mut payloads = Vec::new();
    for k in 0..JOBS_PER_CLIENT {
        let data = format!("client{id}-job{k}");
        batch.extend(submit("rev", "", data.as_bytes()));
        payloads.push(data);
    }
    conn.send(&batch).await;

    let mut created: Vec<Bytes> = Vec::new();
    let mut results: HashMap<Bytes, Bytes> = HashMap::new();
    while created.len() < JOBS_PER_CLIENT || results.len() < JOBS_PER_CLIENT {
        match conn.recv().await {
            Response::JobCreated(h) => created.push(h),
            Response::WorkComplete { handle, data } => {
                assert!(
                    created.contains(&handle),
                    "client {id}: result for {handle:?} before its JOB_CREATED"
                );
                assert!(
                    results.insert(handle.clone(), data).is_none(),
                    "client {id}: two results for {handle:?}"
                );
            }
            other => panic!("client {id} got {other:?}"),
        }
    }
    for (h, data) in created.iter().zip(&payloads) {
        let want: Vec<u8> = data.bytes().rev().collect();
        assert_eq!(results[h], want, "client {id}: result of {h:?}");
    }
    conn.ping(b"done").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn many_clients_many_workers() {
    let server = TestServer::start_default().await;
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        workers.push(tokio::spawn(worker(server.connect().await)));
    }
    let mut clients = Vec::new();
    for id in 0..CLIENTS {
        clients.push(tokio::spawn(client(server.connect().await, id)));
    }
    for c in clients {
        c.await.expect("client task");
    }
    for w in &workers {
        assert!(!w.is_finished(), "a worker task ended early");
    }
    wait_status(server.addr, "rev", (0, 0, WORKERS as u32)).await;
    for w in workers {
        w.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coalesced_foreground_clients_all_get_the_result() {
    let server = TestServer::start_default().await;
    let mut a = server.connect().await;
    let mut b = server.connect().await;
    let mut bg = server.connect().await;
    a.send(&submit("f", "same", b"one")).await;
    let h = a.expect_created().await;
    b.send(&submit("f", "same", b"two")).await;
    assert_eq!(b.expect_created().await, h);
    bg.send(&common::submit_bg("f", "same", b"three")).await;
    assert_eq!(bg.expect_created().await, h);

    let mut w = server.connect().await;
    w.send(&can_do("f")).await;
    w.send(&bare(PacketType::GrabJob)).await;
    w.expect(Response::JobAssign {
        handle: h.clone(),
        function: Bytes::from_static(b"f"),
        data: Bytes::from_static(b"one"),
    })
    .await;
    w.send(&work_complete(&h, b"r")).await;
    let done = Response::WorkComplete {
        handle: h,
        data: Bytes::from_static(b"r"),
    };
    a.expect(done.clone()).await;
    b.expect(done).await;
    // The background submitter is told nothing.
    bg.ping(b"nothing before this").await;
}
