//! SUBMIT_JOB_EPOCH: jobs due at a wall-clock second. A future job waits
//! unseen by workers, drives `next_deadline()`, and at its time wakes the
//! sleepers; a past one runs at once.

mod common;

use common::{epoch_job, World};
use gearshift_proto::Response;

#[test]
fn future_epoch_job_waits_then_wakes_sleepers() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    w.now = 1_000_000; // 1000 s
    let h = w.submit(1, epoch_job("f", "", "later", 1_010));
    assert_eq!(w.core.next_deadline(), Some(1_010_000));
    w.can_do(2, &["f"]);
    w.can_do(3, &["g"]);
    w.grab_none(2);
    w.sleep(2);
    w.sleep(3);
    w.all_quiet(); // not grab-able: no immediate NOOP
    assert_eq!(w.status_of("f"), Some((1, 0, 1)));
    w.advance_to(1_009_999);
    w.all_quiet();
    w.grab_none(2);
    w.sleep(2);
    w.advance_to(1_010_000);
    w.expect(2, Response::Noop);
    w.quiet(3);
    assert_eq!(w.grab_job(2).0, h);
    assert_eq!(w.core.next_deadline(), None);
}

#[test]
fn epoch_in_the_past_or_now_runs_immediately() {
    for due in [0, 5, 999, 1_000] {
        let mut w = World::new();
        w.conns(&[1, 2]);
        w.now = 1_000_000;
        w.can_do(2, &["f"]);
        w.sleep(2);
        let h = w.submit(1, epoch_job("f", "", "x", due));
        w.expect(2, Response::Noop);
        assert_eq!(w.grab_job(2).0, h, "due {due}");
    }
}

#[test]
fn negative_epoch_runs_immediately() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.now = 5_000;
    let h = w.submit(1, epoch_job("f", "", "x", -3));
    w.can_do(2, &["f"]);
    assert_eq!(w.grab_job(2).0, h);
}

#[test]
fn absurdly_far_epoch_does_not_panic() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.now = 5_000;
    let h = w.submit(1, epoch_job("f", "", "x", i64::MAX));
    assert_eq!(w.status_of("f"), Some((1, 0, 0)));
    w.can_do(2, &["f"]);
    w.grab_none(2);
    assert!(w.core.next_deadline().is_some_and(|t| t > 5_000));
    assert_eq!(w.retries_of(&h), Some(0));
}

#[test]
fn prioritystatus_counts_scheduled_jobs_as_normal_queued() {
    let mut w = World::new();
    w.conns(&[1]);
    w.submit(1, epoch_job("f", "", "a", 100));
    w.submit(1, epoch_job("f", "", "b", 200));
    assert_eq!(w.probe("prioritystatus"), "f\t0\t2\t0\t0\n.\n");
    assert_eq!(w.status_of("f"), Some((2, 0, 0)));
    // Background, queued: show jobs says QUEUED 1.
    assert_eq!(
        w.probe("show jobs"),
        "H:localhost:1\t0\t0\t1\nH:localhost:2\t0\t0\t1\n.\n"
    );
    w.advance_to(100_000);
    assert_eq!(w.probe("prioritystatus"), "f\t0\t2\t0\t0\n.\n");
    assert_eq!(w.core.next_deadline(), Some(200_000));
}

#[test]
fn several_epoch_jobs_become_due_in_time_order() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    let late = w.submit(1, epoch_job("f", "", "late", 30));
    let early = w.submit(1, epoch_job("f", "", "early", 10));
    let mid = w.submit(1, epoch_job("f", "", "mid", 20));
    w.can_do(2, &["f"]);
    assert_eq!(w.core.next_deadline(), Some(10_000));
    w.advance_to(10_000);
    assert_eq!(w.grab_job(2).0, early);
    assert_eq!(w.core.next_deadline(), Some(20_000));
    w.advance_to(35_000);
    assert_eq!(w.grab_job(2).0, mid);
    assert_eq!(w.grab_job(2).0, late);
}

#[test]
fn due_epoch_job_queues_behind_jobs_already_waiting() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    let sched = w.submit(1, epoch_job("f", "", "sched", 10));
    let now_job = w.bg(1, "f", "", "now");
    w.advance_to(10_000);
    w.can_do(2, &["f"]);
    assert_eq!(w.grab_job(2).0, now_job);
    assert_eq!(w.grab_job(2).0, sched);
}

#[test]
fn cancelled_epoch_job_never_fires() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    let h = w.submit(1, epoch_job("f", "", "x", 10));
    let line = format!("cancel job {}", String::from_utf8_lossy(&h));
    assert_eq!(w.admin(3, &line), "OK\r\n");
    assert_eq!(w.status_of("f"), Some((0, 0, 0)));
    assert_eq!(w.probe("prioritystatus"), "f\t0\t0\t0\t0\n.\n");
    w.can_do(2, &["f"]);
    w.sleep(2);
    w.advance_to(10_000);
    w.all_quiet();
    w.grab_none(2);
}

#[test]
fn epoch_job_coalesces_with_a_foreground_duplicate() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    let h = w.submit(1, epoch_job("f", "k", "x", 10));
    assert_eq!(w.fg(2, "f", "k", "x"), h);
    w.can_do(3, &["f"]);
    w.grab_none(3);
    w.advance_to(10_000);
    assert_eq!(w.grab_job(3).0, h);
    w.complete(3, &h, "r");
    w.expect(
        2,
        Response::WorkComplete {
            handle: h,
            data: common::b("r"),
        },
    );
    w.quiet(1);
}

#[test]
fn a_requeued_job_goes_behind_an_older_due_epoch_job_whatever_was_dropped() {
    // With and without a dropped job between them in the queue: the order
    // must not depend on what left the queue.
    for drop in [false, true] {
        let mut w = World::new();
        w.conns(&[1, 2, 3, 4]);
        let sched = w.submit(1, epoch_job("f", "", "sched", 1));
        let now_job = w.bg(1, "f", "", "now");
        if drop {
            // Foreground, its client gone before it started: dropped.
            w.fg(4, "f", "", "dropped");
            w.disconnect(4);
        }
        w.advance_to(1_000);
        w.can_do(2, &["f"]);
        assert_eq!(w.grab_job(2).0, now_job);
        // Back in line behind the older job that became due meanwhile.
        w.disconnect(2);
        w.can_do(3, &["f"]);
        assert_eq!(w.grab_job(3).0, sched, "drop {drop}");
        assert_eq!(w.grab_job(3).0, now_job, "drop {drop}");
    }
}
