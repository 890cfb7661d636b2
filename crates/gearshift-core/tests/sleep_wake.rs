//! Sleeping workers: PRE_SLEEP, the NOOP that wakes them, the
//! `worker_wakeup` cap, and the rule that a NOOPed worker is not NOOPed
//! again until it shows it is alive.

mod common;

use common::{b, World};
use gearshift_core::CoreConfig;
use gearshift_proto::{Request, Response};

#[test]
fn pre_sleep_with_a_job_waiting_gets_noop_at_once() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.fg(1, "f", "", "x");
    w.can_do(2, &["f"]);
    w.sleep(2);
    w.expect(2, Response::Noop);
    w.quiet(2);
}

#[test]
fn pre_sleep_with_only_other_functions_queued_just_sleeps() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.fg(1, "other", "", "x");
    w.can_do(2, &["f"]);
    w.sleep(2);
    w.quiet(2);
}

#[test]
fn a_new_job_wakes_every_sleeper_of_its_function_only() {
    let mut w = World::new();
    w.conns(&[1, 2, 3, 4, 5]);
    w.can_do(2, &["f"]);
    w.can_do(3, &["g", "f"]);
    w.can_do(4, &["g"]);
    w.can_do(5, &["f"]); // awake: never sleeps
    for c in [2, 3, 4] {
        w.sleep(c);
    }
    w.all_quiet();
    w.bg(1, "f", "", "x");
    w.expect(2, Response::Noop);
    w.expect(3, Response::Noop);
    w.quiet(4);
    w.quiet(5);
}

#[test]
fn worker_wakeup_caps_noops_per_job_and_rotates() {
    let mut w = World::with(CoreConfig {
        worker_wakeup: 2,
        ..CoreConfig::default()
    });
    w.conns(&[1, 2, 3, 4, 5]);
    for c in [2, 3, 4, 5] {
        w.can_do(c, &["f"]);
        w.sleep(c);
    }
    w.bg(1, "f", "", "j1");
    let woken1: Vec<u64> = [2, 3, 4, 5]
        .into_iter()
        .filter(|&c| !w.packets(c).is_empty())
        .collect();
    assert_eq!(woken1.len(), 2, "{woken1:?}");
    // The next job wakes the two not yet woken.
    w.bg(1, "f", "", "j2");
    let woken2: Vec<u64> = [2, 3, 4, 5]
        .into_iter()
        .filter(|&c| !w.packets(c).is_empty())
        .collect();
    assert_eq!(woken2.len(), 2);
    for c in &woken2 {
        assert!(!woken1.contains(c), "{woken1:?} then {woken2:?}");
    }
    // Everyone is NOOPed and silent: a third job wakes nobody.
    w.bg(1, "f", "", "j3");
    w.all_quiet();
}

#[test]
fn noop_is_not_repeated_until_the_worker_speaks() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.can_do(2, &["f", "g"]);
    w.sleep(2);
    w.bg(1, "f", "", "1");
    w.expect(2, Response::Noop);
    // Neither another job of the same function nor of its other function
    // NOOPs it again while it is silent.
    w.bg(1, "f", "", "2");
    w.bg(1, "g", "", "3");
    w.quiet(2);
    // Any packet (here ECHO) proves it alive; it still sleeps, so it can be
    // woken again.
    w.req(2, Request::Echo(b("hi")));
    w.expect(2, Response::EchoRes(b("hi")));
    w.bg(1, "g", "", "4");
    w.expect(2, Response::Noop);
    w.quiet(2);
}

#[test]
fn grabbing_ends_sleep() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    w.sleep(2);
    w.bg(1, "f", "", "1");
    w.expect(2, Response::Noop);
    w.grab_job(2);
    w.grab_none(2);
    // Awake and not sleeping: new jobs do not NOOP it.
    w.bg(1, "f", "", "2");
    w.quiet(2);
    // Sleeping again with a job queued: immediate NOOP.
    w.sleep(2);
    w.expect(2, Response::Noop);
}

#[test]
fn sleeping_again_after_a_noop_rearms_the_wakeup() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    w.sleep(2);
    w.bg(1, "f", "", "1");
    w.expect(2, Response::Noop);
    let (h, _) = w.grab_job(2);
    w.complete(2, &h, "");
    w.grab_none(2);
    w.sleep(2);
    w.quiet(2);
    w.bg(1, "f", "", "2");
    w.expect(2, Response::Noop);
}

#[test]
fn can_do_while_asleep_subscribes_to_the_new_function() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    w.sleep(2);
    w.can_do(2, &["g"]);
    w.bg(1, "g", "", "1");
    w.expect(2, Response::Noop);
}

#[test]
fn cant_do_while_asleep_unsubscribes() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.can_do(2, &["f", "g"]);
    w.sleep(2);
    w.req(2, Request::CantDo(b("g")));
    w.bg(1, "g", "", "1");
    w.quiet(2);
    w.bg(1, "f", "", "2");
    w.expect(2, Response::Noop);
}

#[test]
fn disconnected_sleepers_are_skipped_under_a_wakeup_cap() {
    let mut w = World::with(CoreConfig {
        worker_wakeup: 1,
        ..CoreConfig::default()
    });
    w.conns(&[1, 2, 3]);
    w.can_do(2, &["f"]);
    w.can_do(3, &["f"]);
    w.sleep(2);
    w.sleep(3);
    w.disconnect(2);
    w.bg(1, "f", "", "1");
    // The one wake-up goes to a live worker, not to the departed one.
    w.expect(3, Response::Noop);
}

#[test]
fn many_sleep_cycles_keep_waking_correctly() {
    // Exercises the sleeper-list compaction: a worker sleeping over and
    // over on a function that never gets jobs must still be woken.
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    w.can_do(2, &["idle", "busy"]);
    w.can_do(3, &["idle"]);
    for i in 0..200 {
        w.sleep(2);
        w.sleep(3);
        w.bg(1, "busy", "", &i.to_string());
        w.expect(2, Response::Noop);
        w.quiet(3);
        w.grab_job(2);
    }
    w.sleep(2);
    w.quiet(2);
    w.bg(1, "idle", "", "x");
    w.expect(3, Response::Noop);
    w.expect(2, Response::Noop);
}
