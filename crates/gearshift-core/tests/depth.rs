//! Results reach their own submitter, at depth: tens of thousands of
//! background jobs wait on other functions (so foreground ids sit far out
//! on the id line), many clients keep foreground jobs in flight, many
//! workers take them in any order and finish them out of order, one
//! worker sits on some for a long time, workers vanish (their jobs are
//! requeued), and halfway through the deep queue drains, so the id index
//! moves stragglers to its side map while new ids keep coming. Every
//! payload is distinct and every unique too (empty, named or `-`), so no
//! submission may join another's job: each client must get exactly one
//! WORK_COMPLETE per submission, under the handle its JOB_CREATED gave,
//! carrying its own job's result, and WORK_DATA only for its own jobs.
//!
//! Virtual and deterministic (a seeded generator), so a failure replays.

mod common;

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use common::{b, job, job_with, Out, World};
use gearshift_proto::{GrabKind, Priority, Request, Response};

/// Background jobs queued on each of the deep functions.
const DEEP_PER_FUNCTION: usize = 12_000;
const DEEP_FUNCTIONS: [&str; 3] = ["deep-a", "deep-b", "deep-c"];
const CLIENTS: u64 = 32;
const WORKERS: u64 = 8;
/// Foreground jobs per client.
const JOBS: usize = 120;
/// Connection numbers: clients from 1, workers from 100, the rest above.
const WORKER_BASE: u64 = 100;
const DEEP_SUBMITTER: u64 = 900;
const DEEP_WORKER: u64 = 901;
/// Workers that replace vanished ones get fresh numbers from here.
const SPARE_BASE: u64 = 1_000;

/// xorshift64*: small, seeded, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Default)]
struct Client {
    /// Payloads submitted, waiting for their JOB_CREATED (in order).
    unacked: VecDeque<String>,
    /// Handle → payload of jobs created and not yet complete.
    open: HashMap<Bytes, String>,
    sent: usize,
    done: usize,
}

struct Worker {
    conn: u64,
    /// (handle, workload) of the jobs it holds.
    held: Vec<(Bytes, Bytes)>,
    /// Holds jobs a long time and finishes them rarely.
    slow: bool,
}

fn result_of(payload: &[u8]) -> Vec<u8> {
    [b"done:", payload].concat()
}

fn part_of(payload: &[u8]) -> Vec<u8> {
    [b"part:", payload].concat()
}

/// Routes everything the core sent, checking each packet against what its
/// receiver may expect.
fn deliver(w: &mut World, clients: &mut [Client], workers: &mut [Worker], deep_acks: &mut usize) {
    for (conn, out) in w.take_all() {
        let Out::Packet(r) = out else {
            panic!("conn {conn}: unexpected {out:?}");
        };
        if conn == DEEP_SUBMITTER {
            assert!(
                matches!(r, Response::JobCreated(_)),
                "deep submitter got {r:?}"
            );
            *deep_acks += 1;
            continue;
        }
        if conn == DEEP_WORKER {
            continue; // checked where it grabs
        }
        if (1..=CLIENTS).contains(&conn) {
            let c = &mut clients[(conn - 1) as usize];
            match r {
                Response::JobCreated(h) => {
                    let payload = c
                        .unacked
                        .pop_front()
                        .unwrap_or_else(|| panic!("client {conn}: JOB_CREATED {h:?} for nothing"));
                    assert!(
                        c.open.insert(h.clone(), payload).is_none(),
                        "client {conn}: handle {h:?} given twice"
                    );
                }
                Response::WorkData { handle, data } => {
                    let mine = c.open.get(&handle).unwrap_or_else(|| {
                        panic!("client {conn}: WORK_DATA for {handle:?}, not its job")
                    });
                    assert_eq!(
                        data,
                        part_of(mine.as_bytes()),
                        "client {conn}: WORK_DATA of another job under {handle:?}"
                    );
                }
                Response::WorkComplete { handle, data } => {
                    let mine = c.open.remove(&handle).unwrap_or_else(|| {
                        panic!("client {conn}: WORK_COMPLETE for {handle:?}, not its open job")
                    });
                    assert_eq!(
                        data,
                        result_of(mine.as_bytes()),
                        "client {conn}: the result of another job under {handle:?}"
                    );
                    c.done += 1;
                }
                other => panic!("client {conn}: unexpected {other:?}"),
            }
            continue;
        }
        let Some(wk) = workers.iter_mut().find(|wk| wk.conn == conn) else {
            // A worker that vanished: nothing may reach it.
            panic!("conn {conn} (gone) was sent {r:?}");
        };
        match r {
            Response::JobAssign { handle, data, .. }
            | Response::JobAssignUniq { handle, data, .. }
            | Response::JobAssignAll { handle, data, .. } => wk.held.push((handle, data)),
            Response::NoJob | Response::Noop => {}
            other => panic!("worker {conn}: unexpected {other:?}"),
        }
    }
}

fn submission(rng: &mut Rng, client: u64, k: usize) -> (Request, String) {
    let payload = format!("c{client}-j{k}-{:x}", rng.next());
    // Distinct uniques of every kind: none of them may coalesce.
    let unique = match rng.below(3) {
        0 => String::new(),
        1 => format!("u-{client}-{k}"),
        _ => "-".to_owned(),
    };
    let prio = match rng.below(4) {
        0 => Priority::High,
        1 => Priority::Low,
        _ => Priority::Normal,
    };
    let s = job_with("echo", &unique, &payload, prio, false);
    (Request::submit(Box::new(s)), payload)
}

fn grab_kind(rng: &mut Rng) -> GrabKind {
    match rng.below(3) {
        0 => GrabKind::Plain,
        1 => GrabKind::Uniq,
        _ => GrabKind::All,
    }
}

#[test]
fn every_result_reaches_its_own_submitter_at_depth() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut w = World::new();
    let mut deep_acks = 0;
    w.conn(DEEP_SUBMITTER);
    for i in 0..DEEP_PER_FUNCTION {
        for f in DEEP_FUNCTIONS {
            let s = job_with(f, "", &format!("{f}-{i}"), Priority::Normal, true);
            w.req(DEEP_SUBMITTER, Request::submit(Box::new(s)));
        }
    }
    let mut clients: Vec<Client> = (0..CLIENTS).map(|_| Client::default()).collect();
    let mut workers: Vec<Worker> = Vec::new();
    for c in 1..=CLIENTS {
        w.conn(c);
    }
    for i in 0..WORKERS {
        let conn = WORKER_BASE + i;
        w.conn(conn);
        w.can_do(conn, &["echo"]);
        workers.push(Worker {
            conn,
            held: Vec::new(),
            slow: i == 0,
        });
    }
    w.conn(DEEP_WORKER);
    w.can_do(DEEP_WORKER, &DEEP_FUNCTIONS);
    deliver(&mut w, &mut clients, &mut workers, &mut deep_acks);
    assert_eq!(deep_acks, DEEP_PER_FUNCTION * DEEP_FUNCTIONS.len());

    let total = CLIENTS as usize * JOBS;
    let mut next_spare = SPARE_BASE;
    let mut deep_left = DEEP_PER_FUNCTION * DEEP_FUNCTIONS.len();
    let mut steps = 0u64;
    while clients.iter().map(|c| c.done).sum::<usize>() < total {
        steps += 1;
        assert!(steps < 2_000_000, "no progress");
        let sent: usize = clients.iter().map(|c| c.sent).sum();
        match rng.below(10) {
            // A client submits, keeping up to four jobs in flight.
            0..=2 => {
                let c = rng.below(CLIENTS);
                let cl = &mut clients[c as usize];
                if cl.sent < JOBS && cl.unacked.len() + cl.open.len() < 4 {
                    let (req, payload) = submission(&mut rng, c + 1, cl.sent);
                    cl.unacked.push_back(payload);
                    cl.sent += 1;
                    w.req(c + 1, req);
                }
            }
            // A worker grabs.
            3..=5 => {
                let i = rng.below(workers.len() as u64) as usize;
                if workers[i].held.len() < if workers[i].slow { 24 } else { 3 } {
                    let kind = grab_kind(&mut rng);
                    w.req(workers[i].conn, Request::Grab(kind));
                }
            }
            // A worker finishes one of its jobs, any one, maybe with a
            // WORK_DATA first.
            6..=8 => {
                let i = rng.below(workers.len() as u64) as usize;
                let wk = &mut workers[i];
                let finish = !wk.held.is_empty() && (!wk.slow || rng.below(50) == 0);
                if finish {
                    let k = rng.below(wk.held.len() as u64) as usize;
                    let (handle, data) = wk.held.swap_remove(k);
                    let conn = wk.conn;
                    if rng.below(4) == 0 {
                        let data = Bytes::from(part_of(&data));
                        let handle = handle.clone();
                        w.req(conn, Request::WorkData { handle, data });
                    }
                    let data = Bytes::from(result_of(&data));
                    w.req(conn, Request::WorkComplete { handle, data });
                }
            }
            // Now and then a worker vanishes; its jobs go back in line and
            // a new connection takes its place.
            _ => {
                if rng.below(40) == 0 {
                    let i = 1 + rng.below(workers.len() as u64 - 1) as usize;
                    let gone = workers[i].conn;
                    w.disconnect(gone);
                    w.conn(next_spare);
                    w.can_do(next_spare, &["echo"]);
                    workers[i] = Worker {
                        conn: next_spare,
                        held: Vec::new(),
                        slow: false,
                    };
                    next_spare += 1;
                }
            }
        }
        // In the second half the deep queue drains, oldest ids first, as
        // foreground traffic goes on.
        if sent > total / 2 && deep_left > 0 {
            for _ in 0..8.min(deep_left) {
                w.req(DEEP_WORKER, Request::Grab(GrabKind::Plain));
                let (handle, data) = match w.pop(DEEP_WORKER) {
                    Response::JobAssign { handle, data, .. } => (handle, data),
                    other => panic!("deep worker got {other:?}"),
                };
                assert!(data.starts_with(b"deep-"), "deep worker ran {data:?}");
                w.req(
                    DEEP_WORKER,
                    Request::WorkComplete {
                        handle,
                        data: b("ok"),
                    },
                );
                deep_left -= 1;
            }
        }
        deliver(&mut w, &mut clients, &mut workers, &mut deep_acks);
    }
    for (i, c) in clients.iter().enumerate() {
        assert_eq!(c.done, JOBS, "client {}", i + 1);
        assert!(c.open.is_empty() && c.unacked.is_empty());
    }
    assert_eq!(deep_left, 0);
    // Nothing is left over: no job of anyone's stayed behind.
    assert_eq!(w.core.job_count(), 0);
    // A late submission still gets a fresh job, not a finished one's.
    w.req(1, Request::submit(Box::new(job("echo", "u-1-0", "late"))));
    let Response::JobCreated(h) = w.pop(1) else {
        panic!("no JOB_CREATED");
    };
    assert!(!clients[0].open.contains_key(&h));
}
