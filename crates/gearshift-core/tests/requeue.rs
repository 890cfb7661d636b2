//! Taking jobs back from workers: on disconnect, CANT_DO, RESET_ABILITIES
//! and CAN_DO_TIMEOUT expiry the job returns to the head of its queue with
//! its retry count bumped, until `job_retries` gives up on it.

mod common;

use common::{b, err, job_with, World};
use gearshift_core::CoreConfig;
use gearshift_proto::{Priority, Request, Response};

const NOT_FOUND: &str = "Job given in work result not found";

/// Conn 1 submits `target` then `later` (foreground); worker 2 grabs
/// `target`; sleeper 3 and worker 4 can do `f`.
fn setup() -> (World, bytes::Bytes, bytes::Bytes) {
    let mut w = World::new();
    w.conns(&[1, 2, 3, 4]);
    let target = w.fg(1, "f", "", "target");
    w.can_do(2, &["f"]);
    assert_eq!(w.grab_job(2).0, target);
    let later = w.fg(1, "f", "", "later");
    w.can_do(3, &["f"]);
    w.can_do(4, &["f"]);
    (w, target, later)
}

/// The job comes back first, with retries 1; the old holder is refused;
/// the sleeping worker was woken; the client hears nothing of it.
fn check_requeued(mut w: World, target: bytes::Bytes, old: Option<u64>) {
    assert_eq!(w.retries_of(&target), Some(1));
    assert_eq!(w.status_of("f").map(|s| s.1), Some(0));
    assert_eq!(w.grab_job(4).0, target, "requeued job goes first");
    w.quiet(1);
    if let Some(old) = old {
        w.complete(old, &target, "late");
        w.expect(old, err("JOB_NOT_FOUND", NOT_FOUND));
    }
    w.complete(4, &target, "ok");
    w.expect(
        1,
        Response::WorkComplete {
            handle: target,
            data: b("ok"),
        },
    );
}

#[test]
fn worker_disconnect_requeues_at_the_head() {
    let (mut w, target, _) = setup();
    w.disconnect(2);
    check_requeued(w, target, None);
}

#[test]
fn requeue_wakes_a_sleeping_worker() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    let h = w.fg(1, "f", "", "x");
    w.can_do(2, &["f"]);
    w.can_do(3, &["f"]);
    w.grab_job(2);
    w.sleep(3);
    w.quiet(3);
    w.disconnect(2);
    w.expect(3, Response::Noop);
    assert_eq!(w.grab_job(3).0, h);
}

#[test]
fn cant_do_requeues_the_held_job() {
    let (mut w, target, _) = setup();
    w.req(2, Request::CantDo(b("f")));
    w.quiet(2);
    check_requeued(w, target, Some(2));
}

#[test]
fn cant_do_of_another_function_keeps_the_job() {
    let (mut w, target, _) = setup();
    w.can_do(2, &["g"]);
    w.req(2, Request::CantDo(b("g")));
    assert_eq!(w.retries_of(&target), Some(0));
    w.complete(2, &target, "r");
    w.quiet(2);
}

#[test]
fn reset_abilities_requeues_the_held_job() {
    let (mut w, target, _) = setup();
    w.req(2, Request::ResetAbilities);
    w.quiet(2);
    check_requeued(w, target, Some(2));
}

#[test]
fn two_held_jobs_keep_their_order_when_requeued() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    let h1 = w.fg(1, "f", "", "1");
    let h2 = w.fg(1, "f", "", "2");
    let h3 = w.fg(1, "f", "", "3");
    w.can_do(2, &["f"]);
    assert_eq!(w.grab_job(2).0, h1);
    assert_eq!(w.grab_job(2).0, h2);
    w.disconnect(2);
    w.can_do(3, &["f"]);
    let order: Vec<_> = (0..3).map(|_| w.grab_job(3).0).collect();
    assert_eq!(order, [h1, h2, h3]);
}

#[test]
fn requeue_keeps_the_priority() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    let low = w.submit(1, job_with("f", "", "low", Priority::Low, true));
    w.can_do(2, &["f"]);
    w.grab_job(2);
    w.submit(1, job_with("f", "", "high", Priority::High, true));
    w.submit(1, job_with("f", "", "low2", Priority::Low, true));
    w.disconnect(2);
    assert_eq!(w.probe("prioritystatus"), "f\t1\t0\t2\t0\n.\n");
    w.can_do(3, &["f"]);
    assert_eq!(w.grab_data(3), "high");
    assert_eq!(w.grab_job(3).0, low);
    assert_eq!(w.grab_data(3), "low2");
}

#[test]
fn retries_accumulate_across_requeues() {
    let mut w = World::new();
    w.conns(&[1]);
    let h = w.bg(1, "f", "", "x");
    for i in 0..5u64 {
        let worker = 10 + i;
        w.conn(worker);
        w.can_do(worker, &["f"]);
        assert_eq!(w.grab_job(worker).0, h);
        w.disconnect(worker);
        assert_eq!(w.retries_of(&h), Some(i as u32 + 1));
    }
}

#[test]
fn job_retries_fails_the_job_at_the_nth_requeue() {
    let mut w = World::with(CoreConfig {
        job_retries: 2,
        ..CoreConfig::default()
    });
    w.conns(&[1, 2, 3, 9]);
    let h = w.fg(1, "f", "k", "x");
    w.fg(2, "f", "k", "x");
    w.can_do(9, &["f"]);
    w.grab_job(9);
    w.disconnect(9);
    w.all_quiet();
    assert_eq!(w.retries_of(&h), Some(1));
    w.conn(10);
    w.can_do(10, &["f"]);
    w.grab_job(10);
    w.req(10, Request::ResetAbilities);
    // Second requeue: failed for good.
    w.expect(1, Response::WorkFail(h.clone()));
    w.expect(2, Response::WorkFail(h.clone()));
    w.all_quiet();
    assert_eq!(w.status_of("f"), Some((0, 0, 0)));
    assert_eq!(w.core.job_count(), 0);
    w.complete(10, &h, "late");
    w.expect(10, err("JOB_NOT_FOUND", NOT_FOUND));
    // The unique is free again.
    assert_ne!(w.fg(3, "f", "k", "x"), h);
}

#[test]
fn requeued_foreground_job_without_clients_is_dropped() {
    // Its client left while it ran; once the worker gives it back there is
    // nobody to run it for, so it must not be handed out again.
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    w.fg(1, "f", "", "orphan");
    w.can_do(2, &["f"]);
    w.grab_job(2);
    w.disconnect(1);
    w.disconnect(2);
    assert_eq!(w.status_of("f"), Some((0, 0, 0)));
    w.can_do(3, &["f"]);
    w.grab_none(3);
}

#[test]
fn can_do_timeout_requeues_and_refuses_the_late_result() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    let h = w.fg(1, "f", "", "x");
    w.can_do_timeout(2, "f", "5000");
    w.now = 1_000;
    w.grab_job(2);
    assert_eq!(w.core.next_deadline(), Some(6_000));
    w.advance_to(5_999);
    assert_eq!(w.status_of("f"), Some((1, 1, 1)));
    w.can_do(3, &["f"]);
    w.sleep(3);
    w.advance_to(6_000);
    w.expect(3, Response::Noop);
    w.quiet(1); // the client is not told
    assert_eq!(w.retries_of(&h), Some(1));
    assert_eq!(w.grab_job(3).0, h);
    w.complete(2, &h, "late");
    w.expect(2, err("JOB_NOT_FOUND", NOT_FOUND));
    w.complete(3, &h, "ok");
    w.expect(
        1,
        Response::WorkComplete {
            handle: h,
            data: b("ok"),
        },
    );
}

#[test]
fn can_do_timeout_below_1000_is_seconds() {
    // Perl's Gearman::Worker, PHP and libgearman document seconds; gearmand
    // 1.1.19+ reads ms with a 1000 ms floor, so "10" there was one second.
    // Gearshift reads values below 1000 as seconds (docs/compat.md).
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.bg(1, "f", "", "x");
    w.can_do_timeout(2, "f", "10");
    w.now = 500;
    w.grab_job(2);
    assert_eq!(w.core.next_deadline(), Some(10_500));
    w.advance_to(10_499);
    assert_eq!(w.status_of("f").map(|s| s.1), Some(1));
    w.advance_to(10_500);
    assert_eq!(w.status_of("f").map(|s| s.1), Some(0));
}

#[test]
fn can_do_timeout_from_1000_is_milliseconds() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.bg(1, "f", "", "x");
    w.can_do_timeout(2, "f", "1500");
    w.grab_job(2);
    assert_eq!(w.core.next_deadline(), Some(1_500));
}

#[test]
fn zero_or_negative_timeout_means_none() {
    for t in ["0", "-5", "junk"] {
        let mut w = World::new();
        w.conns(&[1, 2]);
        w.bg(1, "f", "", "x");
        w.can_do_timeout(2, "f", t);
        w.grab_job(2);
        assert_eq!(w.core.next_deadline(), None, "timeout {t:?}");
    }
}

#[test]
fn timeouts_are_per_job() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    let h1 = w.bg(1, "f", "", "1");
    let h2 = w.bg(1, "f", "", "2");
    w.can_do_timeout(2, "f", "2000");
    w.now = 0;
    w.grab_job(2);
    w.now = 1_000;
    w.grab_job(2);
    assert_eq!(w.core.next_deadline(), Some(2_000));
    w.advance_to(2_000);
    assert_eq!(w.retries_of(&h1), Some(1));
    assert_eq!(w.retries_of(&h2), Some(0));
    // The second job is still held by worker 2 and may complete.
    assert_eq!(w.core.next_deadline(), Some(3_000));
    w.complete(2, &h2, "");
    w.quiet(2);
    w.advance_to(3_000);
    assert_eq!(w.show_jobs().len(), 1);
    assert_eq!(w.retries_of(&h1), Some(1));
    w.complete(2, &h1, "");
    w.expect(2, err("JOB_NOT_FOUND", NOT_FOUND));
}

#[test]
fn timeout_of_a_completed_job_does_nothing() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    let h = w.fg(1, "f", "", "x");
    w.can_do_timeout(2, "f", "1000");
    w.grab_job(2);
    w.complete(2, &h, "done");
    w.clear();
    w.can_do(3, &["f"]);
    w.sleep(3);
    w.advance_to(10_000);
    w.all_quiet();
    assert_eq!(w.core.job_count(), 0);
    assert_eq!(w.core.next_deadline(), None);
}

#[test]
fn timeout_of_a_reassigned_job_only_counts_the_current_assignment() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    let h = w.bg(1, "f", "", "x");
    w.can_do_timeout(2, "f", "1000");
    w.can_do_timeout(3, "f", "5000");
    w.grab_job(2);
    w.disconnect(2); // requeued at t=0, retries 1
    w.now = 500;
    assert_eq!(w.grab_job(3).0, h);
    // Worker 2's stale deadline at t=1000 must not take the job from 3.
    w.advance_to(1_000);
    assert_eq!(w.retries_of(&h), Some(1));
    w.advance_to(5_500);
    assert_eq!(w.retries_of(&h), Some(2));
}
