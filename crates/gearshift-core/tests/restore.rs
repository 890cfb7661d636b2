//! The durable store seam on virtual time, after a job is stored: epoch
//! jobs keep their due time, handle numbers are reserved ahead so they never
//! repeat, and `restore` rebuilds the queues with the stored handles,
//! priorities and attempts.

mod common;

use bytes::Bytes;
use common::durable::*;
use common::{b, epoch_job, job, World};
use gearshift_core::{ConnId, Input, StoreOp};
use gearshift_proto::{Priority, Request, Response};

// ---- epoch jobs ------------------------------------------------------------

#[test]
fn epoch_job_is_stored_with_its_due_time_and_scheduled_once_persisted() {
    let mut w = world();
    w.now = 1_000_000;
    submit_unacked(&mut w, CLIENT, epoch_job("f", "", "later", 1_010));
    let adds = added(&w.take_store_ops());
    assert_eq!(adds.len(), 1);
    assert_eq!(adds[0].due_ms, Some(1_010_000));
    assert_eq!(w.core.next_deadline(), None, "not scheduled before stored");
    w.persisted(&[1]);
    w.expect(CLIENT, Response::JobCreated(World::h(1)));
    w.all_quiet(); // scheduled, not runnable: no NOOP
    assert_eq!(w.core.next_deadline(), Some(1_010_000));
    assert_eq!(w.probe("prioritystatus"), "f\t0\t1\t0\t2\n.\n");
    w.grab_none(WORKER);
    w.advance_to(1_009_999);
    w.all_quiet();
    w.advance_to(1_010_000);
    w.expect(SLEEPER, Response::Noop);
    assert_eq!(w.grab_job(WORKER).0, World::h(1));
}

#[test]
fn epoch_job_due_before_its_store_confirmation_runs_at_once() {
    let mut w = world();
    w.now = 1_000_000;
    submit_unacked(&mut w, CLIENT, epoch_job("f", "", "soon", 1_001));
    w.advance_to(1_005_000);
    w.all_quiet();
    w.persisted(&[1]);
    w.expect(CLIENT, Response::JobCreated(World::h(1)));
    w.expect(SLEEPER, Response::Noop);
    assert_eq!(w.grab_job(WORKER).0, World::h(1));
}

#[test]
fn past_epoch_job_is_stored_without_a_due_time() {
    let mut w = world();
    w.now = 1_000_000;
    submit_unacked(&mut w, CLIENT, epoch_job("f", "", "now", 10));
    assert_eq!(added(&w.take_store_ops())[0].due_ms, None);
}

// ---- handle reservation ----------------------------------------------------

#[test]
fn first_durable_submit_reserves_handles_ahead() {
    let mut w = world();
    submit_unacked(&mut w, CLIENT, bg("f", "", "a"));
    submit_unacked(&mut w, CLIENT, bg("f", "", "b"));
    let ops = w.take_store_ops();
    assert!(matches!(ops[0], StoreOp::Reserve(r) if r > 2), "{ops:?}");
    assert_eq!(
        ops.iter()
            .filter(|op| matches!(op, StoreOp::Reserve(_)))
            .count(),
        1,
        "reserved once, far ahead: {ops:?}"
    );
}

#[test]
fn non_durable_core_writes_nothing() {
    let mut w = World::new();
    w.conns(&[CLIENT, WORKER]);
    let h = w.bg(CLIENT, "f", "", "x");
    w.can_do(WORKER, &["f"]);
    assert_eq!(w.grab_job(WORKER).0, h);
    w.complete(WORKER, &h, "ok");
    assert!(w.take_store_ops().is_empty());
}

#[test]
fn every_handle_is_covered_by_a_reservation_made_before_it() {
    let mut w = World::durable();
    w.conn(CLIENT);
    w.restore(Vec::new(), 1);
    let mut reserved = 0;
    let mut reserves = 0;
    let mut ops = w.take_store_ops();
    for _ in 0..60_000u64 {
        for op in ops.drain(..) {
            match op {
                StoreOp::Reserve(r) => {
                    assert!(r > reserved, "reservations only grow");
                    reserved = r;
                    reserves += 1;
                }
                StoreOp::Add(j) => assert!(j.id < reserved, "handle {} not reserved", j.id),
                other => panic!("unexpected {other:?}"),
            }
        }
        w.core.handle(
            ConnId(CLIENT),
            Input::Request(Request::submit(Box::new(bg("f", "", "x")))),
            0,
        );
        ops.extend(w.core.take_effects().into_iter().map(|e| match e {
            gearshift_core::Effect::Store(op) => op,
            other => panic!("unexpected {other:?}"),
        }));
    }
    assert!(
        reserves >= 2,
        "the reservation was renewed as handles ran on"
    );
}

// ---- restore -----------------------------------------------------------------

#[test]
fn restore_continues_handles_after_next_id_and_reserves_beyond_it() {
    let mut w = World::durable();
    w.conns(&[CLIENT]);
    w.restore(
        vec![stored(5, "H:localhost:5", "f", "", Priority::Normal)],
        20,
    );
    let ops = w.take_store_ops();
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert!(matches!(ops[0], StoreOp::Reserve(r) if r > 20), "{ops:?}");
    w.all_quiet();
    submit_unacked(&mut w, CLIENT, bg("f", "", "new"));
    let adds = added(&w.take_store_ops());
    assert_eq!(adds[0].id, 20);
    assert_eq!(adds[0].handle, World::h(20));
    w.persisted(&[20]);
    w.expect(CLIENT, Response::JobCreated(World::h(20)));
    // A foreground job continues the same counter.
    assert_eq!(w.fg(CLIENT, "f", "", "fg"), World::h(21));
}

#[test]
fn restore_never_reuses_a_stored_handle_even_with_a_stale_next_id() {
    let mut w = World::durable();
    w.conns(&[CLIENT]);
    w.restore(
        vec![stored(10, "H:localhost:10", "f", "", Priority::Normal)],
        2,
    );
    w.take_store_ops();
    assert_eq!(w.fg(CLIENT, "f", "", "fg"), World::h(11));
}

#[test]
fn restore_keeps_handles_priorities_and_attempts() {
    let mut w = World::durable();
    w.conns(&[CLIENT, WORKER]);
    let mut normal = stored(7, "H:localhost:7", "f", "", Priority::Normal);
    normal.attempts = 2;
    w.restore(
        vec![
            stored(5, "H:localhost:5", "f", "", Priority::Low),
            normal,
            stored(9, "H:localhost:9", "f", "", Priority::High),
            stored(11, "H:oldhost:11", "f", "", Priority::Normal),
        ],
        12,
    );
    w.take_store_ops();
    w.all_quiet();
    assert_eq!(w.probe("prioritystatus"), "f\t1\t2\t1\t0\n.\n");
    assert_eq!(
        get_status(&mut w, CLIENT, &b("H:localhost:7")),
        (true, false)
    );
    assert_eq!(
        get_status(&mut w, CLIENT, &b("H:oldhost:11")),
        (true, false),
        "a handle written under another prefix is still found"
    );
    assert_eq!(
        w.show_jobs(),
        vec![
            vec!["H:localhost:5", "0", "0", "1"],
            vec!["H:localhost:7", "2", "0", "1"],
            vec!["H:localhost:9", "0", "0", "1"],
            vec!["H:oldhost:11", "0", "0", "1"],
        ]
    );
    w.can_do(WORKER, &["f"]);
    let order: Vec<(Bytes, Bytes)> = (0..4).map(|_| w.grab_job(WORKER)).collect();
    assert_eq!(
        order,
        vec![
            (b("H:localhost:9"), b("data9")),
            (b("H:localhost:7"), b("data7")),
            (b("H:oldhost:11"), b("data11")),
            (b("H:localhost:5"), b("data5")),
        ]
    );
    w.grab_none(WORKER);
    // The foreign handle works for results too, and its end is recorded.
    w.complete(WORKER, &b("H:oldhost:11"), "ok");
    w.quiet(WORKER);
    assert_eq!(w.take_store_ops(), vec![StoreOp::Done(11)]);
    assert_eq!(
        get_status(&mut w, CLIENT, &b("H:oldhost:11")),
        (false, false)
    );
    // A requeued restored job counts on from its stored attempts.
    w.disconnect(WORKER);
    let ops = w.take_store_ops();
    assert!(
        ops.contains(&StoreOp::Update { id: 7, attempts: 3 }),
        "{ops:?}"
    );
}

#[test]
fn restored_sleeping_worker_is_woken_by_restored_work() {
    let mut w = World::durable();
    w.conns(&[WORKER]);
    w.can_do(WORKER, &["f"]);
    w.sleep(WORKER);
    w.restore(
        vec![stored(3, "H:localhost:3", "f", "", Priority::Normal)],
        4,
    );
    w.expect(WORKER, Response::Noop);
}

#[test]
fn restored_epoch_jobs_keep_their_due_time() {
    let mut w = World::durable();
    w.conns(&[WORKER]);
    w.now = 1_000_000;
    let mut future = stored(1, "H:localhost:1", "f", "", Priority::Normal);
    future.due_ms = Some(1_005_000);
    let mut past = stored(2, "H:localhost:2", "f", "", Priority::Normal);
    past.due_ms = Some(999_000);
    w.restore(vec![future, past], 3);
    assert_eq!(w.core.next_deadline(), Some(1_005_000));
    assert_eq!(w.probe("prioritystatus"), "f\t0\t2\t0\t0\n.\n");
    w.can_do(WORKER, &["f"]);
    assert_eq!(w.grab_job(WORKER).0, World::h(2), "past due: runs at once");
    w.grab_none(WORKER);
    w.sleep(WORKER);
    w.advance_to(1_004_999);
    w.quiet(WORKER);
    w.advance_to(1_005_000);
    w.expect(WORKER, Response::Noop);
    assert_eq!(w.grab_job(WORKER).0, World::h(1));
}

#[test]
fn restored_unique_jobs_still_coalesce() {
    let mut w = World::durable();
    w.conns(&[CLIENT, OTHER, WORKER, 5]);
    let mut data_keyed = stored(4, "H:localhost:4", "f", "-", Priority::Normal);
    data_keyed.data = b("payload");
    w.restore(
        vec![
            stored(3, "H:localhost:3", "f", "u", Priority::Normal),
            data_keyed,
        ],
        5,
    );
    w.take_store_ops();
    // Background duplicate: acknowledged at once, nothing written.
    assert_eq!(w.submit(CLIENT, bg("f", "u", "whatever")), World::h(3));
    assert_eq!(w.submit(CLIENT, bg("f", "-", "payload")), World::h(4));
    assert!(w.take_store_ops().is_empty());
    // Foreground duplicate: attached, gets the result.
    assert_eq!(w.submit(OTHER, job("f", "u", "whatever")), World::h(3));
    w.req(5, Request::GetStatusUnique(b("u")));
    match w.pop(5) {
        Response::StatusResUnique { known, waiting, .. } => {
            assert!(known);
            assert_eq!(waiting, 1);
        }
        other => panic!("{other:?}"),
    }
    // Same unique under another function: a new job.
    submit_unacked(&mut w, CLIENT, bg("g", "u", "x"));
    assert_eq!(added(&w.take_store_ops())[0].id, 5);
    w.can_do(WORKER, &["f"]);
    assert_eq!(w.grab_job(WORKER).0, World::h(3));
    w.complete(WORKER, &World::h(3), "r");
    w.expect(
        OTHER,
        Response::WorkComplete {
            handle: World::h(3),
            data: b("r"),
        },
    );
    assert_eq!(w.take_store_ops(), vec![StoreOp::Done(3)]);
    // The unique is free again.
    submit_unacked(&mut w, CLIENT, bg("f", "u", "again"));
    assert_eq!(added(&w.take_store_ops())[0].id, 6);
}

#[test]
fn restore_at_the_top_of_the_id_range_does_not_panic() {
    // Stores refuse ids of 2^63 and up, so this is a corrupt store's job:
    // the core still serves it and its counter stops instead of wrapping.
    let top = u64::MAX;
    let mut w = World::durable();
    w.conns(&[CLIENT, WORKER]);
    w.restore(
        vec![stored(
            top,
            &format!("H:localhost:{top}"),
            "f",
            "",
            Priority::Normal,
        )],
        top,
    );
    let ops = w.take_store_ops();
    assert!(
        ops.iter()
            .all(|op| matches!(op, StoreOp::Reserve(r) if *r == top)),
        "{ops:?}"
    );
    w.can_do(WORKER, &["f"]);
    assert_eq!(w.grab_job(WORKER).0, World::h(top));
}

// ---- runs cut off by a node's end (a cluster's takeover) -----------------

#[test]
fn starts_of_stored_jobs_reach_the_store_only_when_runs_are_tracked() {
    for track in [false, true] {
        let mut w = World::durable();
        w.conns(&[WORKER]);
        w.core.track_runs(track);
        w.restore(
            vec![stored(3, "H:localhost:3", "f", "", Priority::Normal)],
            4,
        );
        let _ = w.take_store_ops();
        w.can_do(WORKER, &["f"]);
        w.grab_job(WORKER);
        let ops = w.take_store_ops();
        assert_eq!(ops.contains(&StoreOp::Started(3)), track, "{ops:?}");
    }
}

#[test]
fn a_cut_off_run_counts_as_a_lost_worker_without_a_policy() {
    let mut w = World::durable();
    w.conns(&[WORKER]);
    w.restore(
        vec![
            stored(3, "H:localhost:3", "f", "", Priority::Normal),
            stored(4, "H:localhost:4", "f", "", Priority::Normal),
        ],
        5,
    );
    let _ = w.take_store_ops();
    w.core.restore_cut_off_runs(&[4], w.now);
    w.collect();
    // gearmand's requeue: its attempt counted, back in line by number.
    let ops = w.take_store_ops();
    assert!(
        ops.contains(&StoreOp::Update { id: 4, attempts: 1 }),
        "{ops:?}"
    );
    assert_eq!(w.probe("status"), "f\t2\t0\t0\n.\n");
    w.can_do(WORKER, &["f"]);
    assert_eq!(w.grab_job(WORKER).0, World::h(3));
    assert_eq!(w.grab_job(WORKER).0, World::h(4));
    w.grab_none(WORKER);
}

#[test]
fn a_cut_off_run_follows_the_retry_policy() {
    use common::policy::{policy, show_job, value, with_policy};
    use gearshift_core::policy::Reason;
    let mut w = World::durable();
    with_policy(&mut w, "f", policy(2, &[Reason::WorkerLost]));
    w.conns(&[WORKER]);
    let mut tried = stored(7, "H:localhost:7", "f", "", Priority::Normal);
    tried.attempts = 1;
    w.restore(
        vec![stored(6, "H:localhost:6", "f", "", Priority::Normal), tried],
        8,
    );
    let _ = w.take_store_ops();
    w.core.restore_cut_off_runs(&[6, 7], w.now);
    w.collect();
    // 6 waits for its backoff; 7 had used its last attempt: dead.
    let shown = show_job(&mut w, &World::h(6));
    assert_eq!(value(&shown, "state"), "retrying");
    assert_eq!(value(&shown, "attempts"), "1");
    let ops = w.take_store_ops();
    assert!(
        ops.iter().any(|op| matches!(
            op,
            StoreOp::Dead {
                id: 7,
                attempts: 2,
                ..
            }
        )),
        "{ops:?}"
    );
    w.can_do(WORKER, &["f"]);
    w.grab_none(WORKER);
}
