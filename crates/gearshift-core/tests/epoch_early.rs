//! OPTION_REQ epoch-early: a worker that schedules jobs itself (the
//! GearMonkey bridge writes them into its scheduled set) is handed epoch
//! jobs at submission, before they are due, and no other jobs. Plain
//! workers still see them only at their time, and a job such a worker
//! loses waits for its time again.

mod common;

use common::policy::{checked, policy, with_policy};
use common::{b, epoch_job, World};
use gearshift_core::policy::Reason;
use gearshift_proto::{Request, Response};

fn early(w: &mut World, n: u64) {
    w.req(n, Request::Option(b("epoch-early")));
    w.expect(n, Response::OptionRes(b("epoch-early")));
}

/// Client 1, plain worker 2 and early taker 3, both on `f`, at 1000 s.
fn world() -> World {
    let mut w = checked(World::new());
    w.conns(&[1, 2, 3]);
    w.now = 1_000_000;
    w.can_do(2, &["f"]);
    early(&mut w, 3);
    w.can_do(3, &["f"]);
    w
}

#[test]
fn an_early_taker_gets_a_future_epoch_job_at_once_and_a_plain_worker_does_not() {
    let mut w = world();
    let h = w.submit(1, epoch_job("f", "", "later", 1_010));
    w.grab_none(2);
    assert_eq!(w.grab_job(3).0, h);
    assert_eq!(w.status_of("f"), Some((1, 1, 2)));
    // Its time coming changes nothing: it already runs.
    w.advance_to(1_010_000);
    w.grab_none(2);
    w.grab_none(3);
    w.complete(3, &h, "done");
    assert_eq!(w.status_of("f"), Some((0, 0, 2)));
}

#[test]
fn epoch_jobs_wake_sleeping_early_takers_only() {
    let mut w = world();
    w.sleep(2);
    w.sleep(3);
    let h = w.submit(1, epoch_job("f", "", "later", 1_010));
    w.expect(3, Response::Noop);
    w.quiet(2);
    assert_eq!(w.grab_job(3).0, h);
    // A plain job wakes the plain sleeper, not the early taker.
    w.sleep(3);
    w.quiet(3);
    let now = w.bg(1, "f", "", "now");
    w.expect(2, Response::Noop);
    w.quiet(3);
    assert_eq!(w.grab_job(2).0, now);
}

#[test]
fn a_sleeping_early_taker_with_an_offered_job_is_noopped_at_pre_sleep() {
    let mut w = world();
    let h = w.submit(1, epoch_job("f", "", "later", 1_010));
    w.sleep(2);
    w.quiet(2);
    w.sleep(3);
    w.expect(3, Response::Noop);
    assert_eq!(w.grab_job(3).0, h);
}

#[test]
fn the_option_counts_for_functions_registered_before_it() {
    let mut w = checked(World::new());
    w.conns(&[1, 3]);
    w.now = 1_000_000;
    w.can_do(3, &["f"]);
    early(&mut w, 3);
    early(&mut w, 3); // asking twice counts once
    let h = w.submit(1, epoch_job("f", "", "later", 1_010));
    assert_eq!(w.grab_job(3).0, h);
}

#[test]
fn an_early_taker_is_handed_no_other_job() {
    let mut w = world();
    // A past epoch job is an ordinary queued job, as is a plain one.
    let past = w.submit(1, epoch_job("f", "", "past", 999));
    let plain = w.bg(1, "f", "", "plain");
    w.grab_none(3);
    w.sleep(3);
    w.quiet(3);
    assert_eq!(w.grab_job(2).0, past);
    assert_eq!(w.grab_job(2).0, plain);
    // Nor an epoch job that became due before it was taken.
    let due = w.submit(1, epoch_job("f", "", "soon", 1_001));
    w.expect(3, Response::Noop);
    w.advance_to(1_001_000);
    w.grab_none(3);
    assert_eq!(w.grab_job(2).0, due);
}

#[test]
fn a_lost_early_job_waits_for_its_time_again() {
    let mut w = world();
    w.conns(&[4]);
    let h = w.submit(1, epoch_job("f", "", "later", 1_010));
    assert_eq!(w.grab_job(3).0, h);
    w.disconnect(3);
    // Not grab-able by the plain worker before its time.
    w.grab_none(2);
    assert_eq!(w.status_of("f"), Some((1, 0, 1)));
    w.advance_to(1_010_000);
    assert_eq!(w.grab_job(2).0, h);
}

#[test]
fn the_first_early_taker_to_come_is_offered_the_epoch_jobs_already_waiting() {
    let mut w = checked(World::new());
    w.conns(&[1, 2, 3, 4]);
    w.now = 1_000_000;
    let late = w.submit(1, epoch_job("f", "", "late", 1_020));
    let soon = w.submit(1, epoch_job("f", "", "soon", 1_010));
    w.submit(1, epoch_job("g", "", "other", 1_010));
    w.bg(1, "f", "", "now");
    // Option before CAN_DO, and CAN_DO before the option.
    early(&mut w, 3);
    w.can_do(3, &["f"]);
    w.can_do(4, &["f"]);
    early(&mut w, 4);
    assert_eq!(w.grab_job(3).0, soon);
    assert_eq!(w.grab_job(4).0, late);
    w.grab_none(3);
    // The plain job waits for a plain worker.
    w.can_do(2, &["f"]);
    assert_eq!(w.grab_data(2), "now");
    w.grab_none(2);
}

#[test]
fn a_lost_early_job_is_offered_to_the_early_takers_still_there() {
    let mut w = world();
    w.conns(&[4]);
    early(&mut w, 4);
    w.can_do(4, &["f"]);
    let h = w.submit(1, epoch_job("f", "", "later", 1_010));
    assert_eq!(w.grab_job(3).0, h);
    w.disconnect(3);
    assert_eq!(w.grab_job(4).0, h);
}

#[test]
fn with_no_early_taker_left_the_job_runs_at_its_time() {
    let mut w = world();
    let h = w.submit(1, epoch_job("f", "", "later", 1_010));
    w.disconnect(3);
    w.grab_none(2);
    w.advance_to(1_010_000);
    assert_eq!(w.grab_job(2).0, h);
}

#[test]
fn a_retry_of_an_early_job_waits_its_delay_not_its_epoch_timer() {
    let mut w = world();
    with_policy(&mut w, "f", policy(3, &[Reason::Fail]));
    // Due in 10 s; it fails after 9.5 s and retries 1 s later, so the
    // epoch timer fires in the middle of the retry delay.
    let h = w.submit(1, epoch_job("f", "", "later", 1_010));
    assert_eq!(w.grab_job(3).0, h);
    w.advance_to(1_009_500);
    w.fail(3, &h);
    w.advance_to(1_010_000);
    w.grab_none(2);
    w.grab_none(3);
    w.advance_to(1_010_500);
    assert_eq!(w.grab_job(2).0, h);
}

#[test]
fn an_unknown_option_is_still_refused() {
    let mut w = World::new();
    w.conns(&[1]);
    w.req(1, Request::Option(b("epoch-late")));
    assert!(matches!(w.pop(1), Response::Error { .. }));
}

#[test]
fn a_worker_that_asks_while_asleep_is_woken_for_epoch_jobs_only() {
    let mut w = checked(World::new());
    w.conns(&[1, 3]);
    w.now = 1_000_000;
    w.can_do(3, &["f"]);
    w.sleep(3);
    early(&mut w, 3);
    // A plain job is not for it: no NOOP.
    w.bg(1, "f", "", "now");
    w.quiet(3);
    // An epoch job not yet due is: it still sleeps, so it is NOOPed.
    let h = w.submit(1, epoch_job("f", "", "later", 1_010));
    w.expect(3, Response::Noop);
    assert_eq!(w.grab_job(3).0, h);
}
