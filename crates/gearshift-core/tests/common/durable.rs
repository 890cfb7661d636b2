//! Shared pieces of the durable-seam tests: a durable world with a client
//! and workers, and helpers to read the store operations the core emits.

use bytes::Bytes;
use gearshift_core::{JobRecord, StoreOp};
use gearshift_proto::{Priority, Request, Response};

use super::{b, job_with, World};

pub const CLIENT: u64 = 1;
pub const SLEEPER: u64 = 2;
pub const WORKER: u64 = 3;
pub const OTHER: u64 = 4;

/// A durable world with a client, a sleeping worker and an awake worker of `f`.
pub fn world() -> World {
    let mut w = World::durable();
    w.conns(&[CLIENT, SLEEPER, WORKER, OTHER]);
    w.can_do(SLEEPER, &["f"]);
    w.sleep(SLEEPER);
    w.can_do(WORKER, &["f"]);
    w.all_quiet();
    w
}

pub fn bg(function: &str, unique: &str, data: &str) -> gearshift_proto::Submit {
    job_with(function, unique, data, Priority::Normal, true)
}

/// Sends a submission and asserts no packet at all was produced for anyone.
pub fn submit_unacked(w: &mut World, n: u64, s: gearshift_proto::Submit) {
    w.req(n, Request::submit(Box::new(s)));
    w.all_quiet();
}

/// The jobs written by `Add` ops.
pub fn added(ops: &[StoreOp]) -> Vec<JobRecord> {
    ops.iter()
        .filter_map(|op| match op {
            StoreOp::Add(j) => Some(j.clone()),
            _ => None,
        })
        .collect()
}

/// The ops other than `Reserve`.
pub fn without_reserve(ops: Vec<StoreOp>) -> Vec<StoreOp> {
    ops.into_iter()
        .filter(|op| !matches!(op, StoreOp::Reserve(_)))
        .collect()
}

pub fn get_status(w: &mut World, n: u64, handle: &Bytes) -> (bool, bool) {
    w.req(n, Request::GetStatus(handle.clone()));
    match w.pop(n) {
        Response::StatusRes { known, running, .. } => (known, running),
        other => panic!("expected STATUS_RES, got {other:?}"),
    }
}

pub fn expect_queue_error(w: &mut World, n: u64) -> String {
    match w.pop(n) {
        Response::Error { code, text } => {
            assert_eq!(&code[..], b"QUEUE_ERROR", "text {text:?}");
            String::from_utf8_lossy(&text).into_owned()
        }
        other => panic!("conn {n}: expected ERROR QUEUE_ERROR, got {other:?}"),
    }
}

pub fn stored(id: u64, handle: &str, function: &str, unique: &str, p: Priority) -> JobRecord {
    JobRecord {
        id,
        handle: b(handle),
        function: b(function),
        unique: b(unique),
        priority: p.index() as u8,
        data: Bytes::from(format!("data{id}")),
        reducer: None,
        due_ms: None,
        attempts: 0,
        created_ms: 0,
    }
}
