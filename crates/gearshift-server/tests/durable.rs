//! The durable server end to end: JOB_CREATED leaves only after the store
//! flush that holds the job returned (a crash before it loses only
//! unacknowledged jobs); submissions that pile up behind a slow flush share
//! the next one (group commit); a failing store refuses submissions with
//! ERROR QUEUE_ERROR while the server keeps serving; a restart on the log
//! store brings every background job back with its handle, priority and
//! due time.

mod common;

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use common::{
    bare, can_do, config, handle, log_config, status_of, submit, submit_bg, wait_status,
    work_complete, Conn, TestServer, PREFIX, TIMEOUT,
};
use gearshift_proto::{PacketType, Priority, Request, Response, Submit};
use gearshift_store::fault::FaultyStore;
use gearshift_store::{Durability, MemoryStore, Op, Replayed, Store, StoreError};

// ---- a store whose flush the test holds ------------------------------------

#[derive(Debug, Default)]
struct GateState {
    open: bool,
    crashed: bool,
    /// Flush calls since the gate was last closed.
    flushes: usize,
    /// A flush is waiting at the gate.
    blocked: bool,
    /// Calls of the store's idle housekeeping.
    idles: usize,
}

/// The test's end of a [`GatedStore`].
#[derive(Debug, Clone, Default)]
struct Gate(Arc<(Mutex<GateState>, Condvar)>);

impl Gate {
    fn open_gate() -> Gate {
        let g = Gate::default();
        g.state().open = true;
        g
    }

    fn state(&self) -> MutexGuard<'_, GateState> {
        self.0 .0.lock().expect("gate lock")
    }

    /// Every flush from now on blocks until [`Gate::open`]; the flush count restarts.
    fn close(&self) {
        let mut s = self.state();
        s.open = false;
        s.flushes = 0;
    }

    fn open(&self) {
        self.state().open = true;
        self.0 .1.notify_all();
    }

    /// The process "died": blocked and later flushes write nothing and fail.
    fn crash(&self) {
        self.state().crashed = true;
        self.0 .1.notify_all();
    }

    fn flushes(&self) -> usize {
        self.state().flushes
    }

    /// Waits until the store thread sits in a flush at the closed gate.
    async fn wait_blocked(&self) {
        let start = Instant::now();
        while !self.state().blocked {
            assert!(start.elapsed() < TIMEOUT, "no flush reached the gate");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// A [`MemoryStore`] whose flush waits at a [`Gate`].
struct GatedStore {
    inner: MemoryStore,
    gate: Gate,
}

impl Store for GatedStore {
    fn replay(&mut self) -> Result<Replayed, StoreError> {
        self.inner.replay()
    }
    fn append(&mut self, ops: &[Op]) {
        self.inner.append(ops);
    }
    fn discard(&mut self) {
        self.inner.discard();
    }
    fn flush(&mut self) -> Result<(), StoreError> {
        let (lock, cv) = &*self.gate.0;
        let mut s = lock.lock().expect("gate lock");
        s.flushes += 1;
        while !s.open && !s.crashed {
            s.blocked = true;
            s = cv.wait(s).expect("gate lock");
        }
        s.blocked = false;
        if s.crashed {
            drop(s);
            self.inner.discard();
            return Err(StoreError::Injected("process crashed".into()));
        }
        drop(s);
        self.inner.flush()
    }
    fn idle(&mut self) -> Result<(), StoreError> {
        self.gate.state().idles += 1;
        self.inner.idle()
    }
}

/// A server on a gated memory store; returns it, the gate (open) and the
/// shared memory state to reopen.
async fn gated_server(crashable: bool) -> (TestServer, Gate, MemoryStore) {
    let mem = MemoryStore::new();
    let gate = Gate::open_gate();
    let store: Box<dyn Store> = Box::new(GatedStore {
        inner: mem.reopen(),
        gate: gate.clone(),
    });
    let server = if crashable {
        TestServer::start_crashable(config(), Some(store)).await
    } else {
        TestServer::start_with_store(config(), Some(store)).await
    };
    (server, gate, mem)
}

// ---- small helpers -----------------------------------------------------------

fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

fn bg_submit(function: &str, data: &str, priority: Priority) -> Request {
    Request::submit(Box::new(Submit {
        function: b(function),
        unique: Bytes::new(),
        data: b(data),
        priority,
        background: true,
        epoch: None,
        reducer: None,
    }))
}

fn epoch_submit(function: &str, data: &str, epoch: i64) -> Request {
    Request::submit(Box::new(Submit {
        epoch: Some(epoch),
        ..match bg_submit(function, data, Priority::Normal) {
            Request::Submit(s) => s.into_submit(),
            _ => unreachable!(),
        }
    }))
}

/// The number at the end of a handle.
fn number(h: &Bytes) -> u64 {
    let s = std::str::from_utf8(h).expect("utf-8 handle");
    let n = s
        .strip_prefix(PREFIX)
        .and_then(|r| r.strip_prefix(':'))
        .unwrap_or_else(|| panic!("handle {s} lacks prefix {PREFIX}"));
    n.parse().expect("numeric handle")
}

async fn get_status(conn: &mut Conn, h: &Bytes) -> (bool, bool) {
    conn.send_req(&Request::GetStatus(h.clone())).await;
    match conn.recv().await {
        Response::StatusRes { known, running, .. } => (known, running),
        other => panic!("expected STATUS_RES, got {other:?}"),
    }
}

/// GRAB_JOB; the (handle, data) assigned, or None on NO_JOB.
async fn grab(worker: &mut Conn) -> Option<(Bytes, Bytes)> {
    worker.send(&bare(PacketType::GrabJob)).await;
    match worker.recv().await {
        Response::JobAssign { handle, data, .. } => Some((handle, data)),
        Response::NoJob => None,
        other => panic!("expected JOB_ASSIGN or NO_JOB, got {other:?}"),
    }
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

// ---- JOB_CREATED follows the flush -----------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_created_waits_for_the_flush_that_holds_the_job() {
    let (server, gate, _mem) = gated_server(false).await;
    let mut client = server.connect().await;
    let mut worker = server.connect().await;
    worker.send(&can_do("f")).await;
    worker.send(&bare(PacketType::PreSleep)).await;

    gate.close();
    client.send(&submit_bg("f", "", b"x")).await;
    gate.wait_blocked().await;
    client.expect_silence(Duration::from_millis(300)).await;
    // Not grab-able either: the sleeping worker was not woken.
    worker.expect_silence(Duration::from_millis(10)).await;

    gate.open();
    assert_eq!(client.expect_created().await, handle(1));
    worker.expect(Response::Noop).await;
    assert_eq!(grab(&mut worker).await, Some((handle(1), b("x"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_before_the_commit_loses_only_the_unacknowledged_job() {
    let (mut server, gate, mem) = gated_server(true).await;
    let mut client = server.connect().await;
    client.send(&submit_bg("f", "", b"committed")).await;
    let committed = client.expect_created().await;

    gate.close();
    client.send(&submit_bg("f", "", b"in flight")).await;
    gate.wait_blocked().await;
    client.expect_silence(Duration::from_millis(100)).await;

    server.crash();
    let seen = client.read_to_close().await;
    assert!(
        seen.is_empty(),
        "the client must never hear of the uncommitted job: {seen:?}"
    );

    // A new process on the same (memory) storage.
    let mut server2 = TestServer::start_with_store(config(), Some(Box::new(mem.reopen()))).await;
    let mut admin = server2.connect().await;
    assert_eq!(
        status_of(&admin.admin_list("status").await, "f"),
        Some((1, 0, 0))
    );
    assert_eq!(
        admin.admin_list("show jobs").await,
        format!("{}\t0\t0\t1\n.\n", String::from_utf8_lossy(&committed))
    );
    assert_eq!(get_status(&mut admin, &handle(2)).await, (false, false));
    let mut worker = server2.connect().await;
    worker.send(&can_do("f")).await;
    assert_eq!(grab(&mut worker).await, Some((committed, b("committed"))));
    assert_eq!(grab(&mut worker).await, None);

    // Let the dead server's store thread go; it writes nothing.
    gate.crash();
    drop(worker);
    server2.stop().await;
    assert_eq!(
        mem.reopen().replay().expect("replay").jobs.len(),
        1,
        "the crashed flush never landed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submissions_piled_up_behind_a_flush_share_the_next_one() {
    const CLIENTS: usize = 200;
    let (server, gate, mem) = gated_server(false).await;
    gate.close();
    let mut clients = Vec::with_capacity(CLIENTS);
    for _ in 0..CLIENTS {
        clients.push(server.connect().await);
    }
    for (i, c) in clients.iter_mut().enumerate() {
        c.send(&submit_bg("f", "", format!("job{i}").as_bytes()))
            .await;
    }
    gate.wait_blocked().await;
    // Every submission reached the engine (pending jobs count in `status`).
    wait_status(server.addr, "f", (CLIENTS as u32, 0, 0)).await;
    for c in clients.iter_mut().take(5) {
        c.expect_silence(Duration::from_millis(20)).await;
    }

    gate.open();
    let mut handles = std::collections::BTreeSet::new();
    for c in &mut clients {
        handles.insert(c.expect_created().await);
    }
    assert_eq!(handles.len(), CLIENTS, "one job each");
    let flushes = gate.flushes();
    assert!(
        flushes <= 10,
        "{CLIENTS} submissions took {flushes} flushes; group commit should need ~2"
    );
    assert_eq!(mem.reopen().replay().expect("replay").jobs.len(), CLIENTS);
}

// ---- a failing store ------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_store_refuses_submissions_and_the_server_keeps_serving() {
    let mem = MemoryStore::new();
    let faulty = FaultyStore::new(mem.reopen(), 1_000);
    let budget = faulty.budget();
    let mut server = TestServer::start_with_store(config(), Some(Box::new(faulty))).await;
    let mut client = server.connect().await;
    client.send(&submit_bg("f", "", b"early1")).await;
    let early1 = client.expect_created().await;
    client.send(&submit_bg("f", "", b"early2")).await;
    let early2 = client.expect_created().await;

    // The disk fills up.
    budget.store(0, std::sync::atomic::Ordering::SeqCst);
    client.send(&submit_bg("f", "", b"refused")).await;
    let text = client.expect_error("QUEUE_ERROR").await;
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("could not be stored"), "{text:?}");
    assert!(text.contains("no space left on device"), "{text:?}");

    // Still serving: echo, admin, a foreground job end to end, and the
    // jobs stored before the failure.
    client.ping(b"alive").await;
    let mut admin = server.connect().await;
    assert_eq!(
        status_of(&admin.admin_list("status").await, "f"),
        Some((2, 0, 0))
    );
    let mut worker = server.connect().await;
    worker.send(&can_do("g")).await;
    client.send(&submit("g", "", b"fg")).await;
    let fg = client.expect_created().await;
    assert_eq!(grab(&mut worker).await, Some((fg.clone(), b("fg"))));
    worker.send(&work_complete(&fg, b"fg done")).await;
    client
        .expect(Response::WorkComplete {
            handle: fg,
            data: b("fg done"),
        })
        .await;
    worker.send(&can_do("f")).await;
    assert_eq!(grab(&mut worker).await, Some((early1.clone(), b("early1"))));
    // Its end cannot be written while the disk is full...
    worker.send(&work_complete(&early1, b"ok")).await;
    client.send(&submit_bg("f", "", b"refused again")).await;
    client.expect_error("QUEUE_ERROR").await;

    // ...and is once the disk has room again.
    budget.store(1_000, std::sync::atomic::Ordering::SeqCst);
    client.send(&submit_bg("f", "", b"late")).await;
    let late = client.expect_created().await;
    assert!(number(&late) > number(&early2));

    // After a restart exactly the jobs still owed come back: not the one
    // completed during the outage, not the refused ones.
    server.stop().await;
    let server2 = TestServer::start_with_store(config(), Some(Box::new(mem.reopen()))).await;
    let mut worker = server2.connect().await;
    worker.send(&can_do("f")).await;
    assert_eq!(grab(&mut worker).await, Some((early2, b("early2"))));
    assert_eq!(grab(&mut worker).await, Some((late, b("late"))));
    assert_eq!(grab(&mut worker).await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graceful_shutdown_answers_submissions_awaiting_the_store() {
    let (mut server, gate, mem) = gated_server(false).await;
    let mut client = server.connect().await;
    gate.close();
    client.send(&submit_bg("f", "", b"x")).await;
    gate.wait_blocked().await;
    server.trigger_shutdown();
    tokio::time::sleep(Duration::from_millis(100)).await;
    gate.open();
    // The job is stored, so its submitter must hear of it before the close.
    let rest = client.read_to_close().await;
    let mut expected = bytes::BytesMut::new();
    Response::JobCreated(handle(1)).encode(&mut expected);
    assert_eq!(rest, expected.freeze());
    assert!(server.wait_stopped(TIMEOUT).await);
    assert_eq!(mem.reopen().replay().expect("replay").jobs.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_server_lets_the_store_tidy_up() {
    // The log store swaps in a compaction that finished after the last
    // flush only when asked: an idle server must keep asking, or the old
    // log and the compacted copy would both stay on disk until the next
    // submission.
    let (server, gate, _mem) = gated_server(false).await;
    let mut client = server.connect().await;
    client
        .send_req(&bg_submit("f", "one", Priority::Normal))
        .await;
    client.expect_created().await;
    let start = Instant::now();
    let before = gate.state().idles;
    while gate.state().idles < before + 2 {
        assert!(
            start.elapsed() < TIMEOUT,
            "the idle store thread never called the store's housekeeping"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---- restart on the log store ------------------------------------------------------

async fn restart_keeps_jobs(durability: Durability) {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = log_config(dir.path(), durability);
    let mut server = TestServer::start(cfg.clone()).await;
    let mut client = server.connect().await;
    let mut handles = Vec::new();
    for (data, p) in [
        ("low", Priority::Low),
        ("normal", Priority::Normal),
        ("high", Priority::High),
    ] {
        client.send_req(&bg_submit("f", data, p)).await;
        handles.push(client.expect_created().await);
    }
    let [low, normal, high] = <[Bytes; 3]>::try_from(handles).expect("three");
    // An epoch job due 1.5 to 2.5 s from now (epochs are whole seconds).
    let epoch = (unix_ms() + 2_500) / 1_000;
    let due_ms = epoch * 1_000;
    client
        .send_req(&epoch_submit("e", "scheduled", epoch as i64))
        .await;
    let scheduled = client.expect_created().await;
    let mut admin = server.connect().await;
    let before = admin.admin_list("prioritystatus").await;
    assert_eq!(before, "f\t1\t1\t1\t0\ne\t0\t1\t0\t0\n.\n");

    server.stop().await;
    client.expect_closed().await;

    let server = TestServer::start(cfg).await;
    let mut admin = server.connect().await;
    assert_eq!(admin.admin_list("prioritystatus").await, before);
    assert_eq!(get_status(&mut admin, &normal).await, (true, false));
    assert_eq!(get_status(&mut admin, &scheduled).await, (true, false));

    let mut worker = server.connect().await;
    worker.send(&can_do("f")).await;
    assert_eq!(grab(&mut worker).await, Some((high, b("high"))));
    assert_eq!(grab(&mut worker).await, Some((normal.clone(), b("normal"))));
    assert_eq!(grab(&mut worker).await, Some((low.clone(), b("low"))));
    assert_eq!(grab(&mut worker).await, None);

    // New handles continue after every old one.
    let mut client = server.connect().await;
    client.send(&submit_bg("f", "", b"new")).await;
    let new = client.expect_created().await;
    for old in [&low, &normal, &scheduled] {
        assert!(number(&new) > number(old), "{new:?} after {old:?}");
    }

    // The epoch job wakes its worker at its time, not before.
    let mut sleeper = server.connect().await;
    sleeper.send(&can_do("e")).await;
    if unix_ms() + 200 < due_ms {
        assert_eq!(grab(&mut sleeper).await, None, "not due yet");
    }
    sleeper.send(&bare(PacketType::PreSleep)).await;
    sleeper.expect(Response::Noop).await;
    let woke = unix_ms();
    assert!(
        woke + 50 >= due_ms,
        "woken {} ms before its due time",
        due_ms - woke
    );
    assert!(woke < due_ms + 2_000, "woken {} ms late", woke - due_ms);
    assert_eq!(grab(&mut sleeper).await, Some((scheduled, b("scheduled"))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_on_the_log_store_with_fsync_keeps_jobs_and_handles() {
    restart_keeps_jobs(Durability::Fsync).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_on_the_log_store_with_interval_sync_keeps_jobs_and_handles() {
    restart_keeps_jobs(Durability::Interval(Duration::from_millis(50))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completed_job_does_not_come_back_after_a_restart() {
    for durability in [
        Durability::Fsync,
        Durability::Interval(Duration::from_millis(50)),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let cfg = log_config(dir.path(), durability);
        let mut server = TestServer::start(cfg.clone()).await;
        let mut client = server.connect().await;
        client.send(&submit_bg("f", "", b"done")).await;
        let done = client.expect_created().await;
        client.send(&submit_bg("f", "", b"kept")).await;
        let kept = client.expect_created().await;
        let mut worker = server.connect().await;
        worker.send(&can_do("f")).await;
        assert_eq!(grab(&mut worker).await, Some((done.clone(), b("done"))));
        worker.send(&work_complete(&done, b"ok")).await;
        wait_status(server.addr, "f", (1, 0, 1)).await;
        server.stop().await;

        let mut server = TestServer::start(cfg).await;
        let mut admin = server.connect().await;
        assert_eq!(
            status_of(&admin.admin_list("status").await, "f"),
            Some((1, 0, 0)),
            "{durability:?}"
        );
        assert_eq!(get_status(&mut admin, &done).await, (false, false));
        let mut worker = server.connect().await;
        worker.send(&can_do("f")).await;
        assert_eq!(grab(&mut worker).await, Some((kept, b("kept"))));
        assert_eq!(grab(&mut worker).await, None);
        drop(worker);
        server.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_and_queue_limits_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = log_config(dir.path(), Durability::Fsync);
    let mut server = TestServer::start(cfg.clone()).await;
    let mut admin = server.connect().await;
    assert_eq!(admin.admin_line("pause held").await, "OK\r\n");
    assert_eq!(admin.admin_line("pause resumed").await, "OK\r\n");
    assert_eq!(admin.admin_line("resume resumed").await, "OK\r\n");
    assert_eq!(admin.admin_line("create function capped").await, "OK\r\n");
    assert_eq!(admin.admin_line("maxqueue capped 1").await, "OK\r\n");
    let mut client = server.connect().await;
    client.send(&submit_bg("held", "", b"waits")).await;
    let held = client.expect_created().await;
    server.stop().await;

    let server = TestServer::start(cfg).await;
    let mut worker = server.connect().await;
    worker.send(&can_do("held")).await;
    assert_eq!(
        grab(&mut worker).await,
        None,
        "still paused after the restart"
    );
    let mut client = server.connect().await;
    client.send(&submit_bg("capped", "", b"one")).await;
    client.expect_created().await;
    client.send(&submit_bg("capped", "", b"two")).await;
    client.expect_error("QUEUE_ERROR").await;
    let mut admin = server.connect().await;
    assert_eq!(admin.admin_line("resume held").await, "OK\r\n");
    assert_eq!(grab(&mut worker).await, Some((held, b("waits"))));
    // A function resumed before the restart is not brought back paused.
    worker.send(&can_do("resumed")).await;
    client.send(&submit_bg("resumed", "", b"runs")).await;
    let runs = client.expect_created().await;
    assert_eq!(grab(&mut worker).await, Some((runs, b("runs"))));
}
