//! Foreground results under load, over real sockets: 50,000 background
//! jobs wait on three other functions, 8 echo workers serve 32 client
//! connections that submit 3,200 foreground jobs, each with a payload of
//! its own, most back to back (as `gearman_client_do` does) and some with
//! several in flight; uniques are empty, `-` or named, all distinct, so no
//! job may join another. Every client must get, for each submission, its
//! JOB_CREATED and then WORK_COMPLETE under that handle carrying exactly
//! its own payload's echo (and any WORK_DATA only for its own job), and
//! the deep queue must be untouched at the end. Run with the memory store,
//! with four I/O threads sharing the hub, and with the durable log store.
//!
//! The long version of this check, with libgearman clients and a deeper
//! queue, is `tests/stress/results.sh`.

mod common;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;

use bytes::Bytes;
use common::{bare, can_do, req, submit, submit_bg, wait_status, Conn, TestServer};
use gearshift_proto::{PacketType, Response};
use gearshift_server::ServerConfig;
use gearshift_store::Durability;

const DEEP: [&str; 3] = ["deep-a", "deep-b", "deep-c"];
const DEEP_JOBS: usize = 50_000;
const CLIENTS: usize = 32;
const WORKERS: usize = 8;
const JOBS_PER_CLIENT: usize = 100;

/// Queues `DEEP_JOBS` background jobs over the deep functions, a batch at
/// a time, reading each batch's JOB_CREATED.
async fn fill_deep_queue(addr: SocketAddr) {
    let mut conn = Conn::connect(addr).await;
    let batch = 1_000;
    for start in (0..DEEP_JOBS).step_by(batch) {
        let mut wire = Vec::new();
        for i in start..(start + batch).min(DEEP_JOBS) {
            let f = DEEP[i % DEEP.len()];
            wire.extend(submit_bg(f, "", format!("{f}-{i}").as_bytes()));
        }
        conn.send(&wire).await;
        for _ in start..(start + batch).min(DEEP_JOBS) {
            conn.expect_created().await;
        }
    }
}

/// An echo worker: GRAB_JOB_UNIQ, then (every third job) a WORK_DATA of
/// the workload and a WORK_COMPLETE echoing it; PRE_SLEEP when idle.
async fn worker(mut conn: Conn) {
    conn.send(&can_do("echo")).await;
    let mut n = 0u64;
    loop {
        conn.send(&bare(PacketType::GrabJobUniq)).await;
        match conn.recv().await {
            Response::JobAssignUniq { handle, data, .. } => {
                n += 1;
                let mut out = Vec::new();
                if n.is_multiple_of(3) {
                    let part = [b"part:", &data[..]].concat();
                    out.extend(req(PacketType::WorkData, &[&handle, &part]));
                }
                out.extend(req(PacketType::WorkComplete, &[&handle, &data]));
                conn.send(&out).await;
            }
            Response::NoJob => {
                conn.send(&bare(PacketType::PreSleep)).await;
                assert_eq!(conn.recv().await, Response::Noop);
            }
            other => panic!("worker got {other:?}"),
        }
    }
}

/// One client: `JOBS_PER_CLIENT` jobs, up to `depth` in flight, each
/// result checked against its own payload.
async fn client(mut conn: Conn, id: usize, depth: usize) {
    let mut next = 0;
    let mut unacked: VecDeque<Vec<u8>> = VecDeque::new();
    let mut open: HashMap<Bytes, Vec<u8>> = HashMap::new();
    let mut done = 0;
    while done < JOBS_PER_CLIENT {
        while next < JOBS_PER_CLIENT && unacked.len() + open.len() < depth {
            let payload = format!("client {id} job {next} {}", "x".repeat(next % 97)).into_bytes();
            let unique = match next % 3 {
                0 => String::new(),
                1 => "-".to_owned(),
                _ => format!("c{id}-j{next}"),
            };
            conn.send(&submit("echo", &unique, &payload)).await;
            unacked.push_back(payload);
            next += 1;
        }
        match conn.recv().await {
            Response::JobCreated(h) => {
                let payload = unacked
                    .pop_front()
                    .unwrap_or_else(|| panic!("client {id}: JOB_CREATED {h:?} for nothing"));
                assert!(
                    open.insert(h.clone(), payload).is_none(),
                    "client {id}: handle {h:?} given twice"
                );
            }
            Response::WorkData { handle, data } => {
                let mine = open.get(&handle).unwrap_or_else(|| {
                    panic!("client {id}: WORK_DATA for {handle:?}, not its job")
                });
                assert_eq!(&data[..], &[b"part:", &mine[..]].concat()[..]);
            }
            Response::WorkComplete { handle, data } => {
                let mine = open.remove(&handle).unwrap_or_else(|| {
                    panic!("client {id}: WORK_COMPLETE for {handle:?}, not its open job")
                });
                assert_eq!(
                    data, mine,
                    "client {id}: the result of another job under {handle:?}"
                );
                done += 1;
            }
            other => panic!("client {id} got {other:?}"),
        }
    }
    assert!(open.is_empty() && unacked.is_empty());
}

async fn run(cfg: ServerConfig) {
    let server = TestServer::start(cfg).await;
    fill_deep_queue(server.addr).await;
    let mut workers = Vec::new();
    for _ in 0..WORKERS {
        workers.push(tokio::spawn(worker(server.connect().await)));
    }
    let mut clients = Vec::new();
    for id in 0..CLIENTS {
        // Most back to back, like gearman_client_do; every fourth with
        // several jobs in flight.
        let depth = if id % 4 == 3 { 4 } else { 1 };
        clients.push(tokio::spawn(client(server.connect().await, id, depth)));
    }
    for c in clients {
        c.await.expect("client task");
    }
    for w in &workers {
        assert!(!w.is_finished(), "a worker task ended early");
    }
    wait_status(server.addr, "echo", (0, 0, WORKERS as u32)).await;
    let per = (DEEP_JOBS / DEEP.len()) as u32;
    for (i, f) in DEEP.iter().enumerate() {
        let extra = u32::from(i < DEEP_JOBS % DEEP.len());
        wait_status(server.addr, f, (per + extra, 0, 0)).await;
    }
    for w in workers {
        w.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_gets_its_own_results_with_a_deep_queue() {
    run(common::config()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_gets_its_own_results_with_four_io_threads_sharing_the_hub() {
    let mut cfg = common::config();
    cfg.io_threads = 4;
    run(cfg).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_gets_its_own_results_with_a_deep_durable_queue() {
    let dir = tempfile::tempdir().expect("temp dir");
    run(common::log_config(dir.path(), Durability::Fsync)).await;
}
