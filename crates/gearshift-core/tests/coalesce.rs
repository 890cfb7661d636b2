//! Unique-id coalescing, keyed on (function, unique): which submissions
//! merge, what a duplicate gets back, and how attached clients share the
//! job's WORK_* packets and its lifetime.

mod common;

use common::{b, job_with, World};
use gearshift_proto::{Priority, Request, Response};

#[test]
fn empty_unique_never_coalesces() {
    let mut w = World::new();
    w.conn(1);
    let h1 = w.fg(1, "f", "", "same");
    let h2 = w.fg(1, "f", "", "same");
    assert_ne!(h1, h2);
    assert_eq!(w.status_of("f"), Some((2, 0, 0)));
}

#[test]
fn dash_coalesces_on_the_data() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    let h1 = w.fg(1, "f", "-", "payload");
    let h2 = w.fg(2, "f", "-", "payload");
    let h3 = w.fg(2, "f", "-", "other payload");
    assert_eq!(h1, h2);
    assert_ne!(h1, h3);
    // Same data, other function: separate job.
    let h4 = w.fg(2, "g", "-", "payload");
    assert_ne!(h1, h4);
    assert_eq!(w.core.job_count(), 3);
}

#[test]
fn named_unique_coalesces_within_a_function_only() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    let h1 = w.fg(1, "f", "k", "a");
    let h2 = w.fg(2, "f", "k", "different data");
    let h3 = w.fg(2, "g", "k", "a");
    assert_eq!(h1, h2);
    assert_ne!(h1, h3);
    assert_eq!(w.status_of("f"), Some((1, 0, 0)));
    assert_eq!(w.status_of("g"), Some((1, 0, 0)));
}

#[test]
fn duplicate_keeps_the_first_priority_and_data() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    let h1 = w.submit(1, job_with("f", "k", "first", Priority::Low, false));
    let h2 = w.submit(2, job_with("f", "k", "second", Priority::High, true));
    assert_eq!(h1, h2);
    let p = w.probe("prioritystatus");
    assert_eq!(p, "f\t0\t0\t1\t0\n.\n");
    w.can_do(3, &["f"]);
    assert_eq!(w.grab_data(3), "first");
}

#[test]
fn foreground_duplicates_all_receive_the_work_packets() {
    let mut w = World::new();
    w.conns(&[1, 2, 3, 9]);
    let h = w.fg(1, "f", "k", "x");
    assert_eq!(w.fg(2, "f", "k", "x"), h);
    w.can_do(9, &["f"]);
    assert_eq!(w.grab_job(9).0, h);
    // Joins while the job runs.
    assert_eq!(w.fg(3, "f", "k", "x"), h);
    w.req(
        9,
        Request::WorkData {
            handle: h.clone(),
            data: b("d"),
        },
    );
    w.req(
        9,
        Request::WorkWarning {
            handle: h.clone(),
            data: b("careful"),
        },
    );
    w.req(9, Request::work_status(h.clone(), b("3"), b("4")));
    w.complete(9, &h, "result");
    for c in [1, 2, 3] {
        assert_eq!(
            w.packets(c),
            vec![
                Response::WorkData {
                    handle: h.clone(),
                    data: b("d")
                },
                Response::WorkWarning {
                    handle: h.clone(),
                    data: b("careful")
                },
                Response::WorkStatus {
                    handle: h.clone(),
                    numerator: b("3"),
                    denominator: b("4")
                },
                Response::WorkComplete {
                    handle: h.clone(),
                    data: b("result")
                },
            ],
            "client {c}"
        );
    }
    w.quiet(9);
}

#[test]
fn duplicate_fail_fans_out_too() {
    let mut w = World::new();
    w.conns(&[1, 2, 9]);
    let h = w.fg(1, "f", "k", "x");
    w.fg(2, "f", "k", "x");
    w.can_do(9, &["f"]);
    w.grab_job(9);
    w.fail(9, &h);
    w.expect(1, Response::WorkFail(h.clone()));
    w.expect(2, Response::WorkFail(h.clone()));
    w.all_quiet();
}

#[test]
fn background_duplicate_keeps_a_foreground_job_alive() {
    let mut w = World::new();
    w.conns(&[1, 2, 9]);
    let h = w.fg(1, "f", "k", "x");
    assert_eq!(w.bg(2, "f", "k", "x"), h);
    w.disconnect(1);
    assert_eq!(w.status_of("f"), Some((1, 0, 0)));
    w.can_do(9, &["f"]);
    assert_eq!(w.grab_job(9).0, h);
    w.complete(9, &h, "r");
    w.all_quiet();
}

#[test]
fn without_a_background_duplicate_the_same_job_is_dropped() {
    let mut w = World::new();
    w.conns(&[1, 2, 9]);
    w.fg(1, "f", "k", "x");
    w.disconnect(1);
    assert_eq!(w.status_of("f"), Some((0, 0, 0)));
    // The unique is free again: a new submission makes a new job.
    let h2 = w.fg(2, "f", "k", "x");
    assert_eq!(h2, World::h(2));
}

#[test]
fn a_job_with_two_clients_survives_one_leaving() {
    let mut w = World::new();
    w.conns(&[1, 2, 9]);
    let h = w.fg(1, "f", "k", "x");
    w.fg(2, "f", "k", "x");
    w.disconnect(1);
    w.can_do(9, &["f"]);
    assert_eq!(w.grab_job(9).0, h);
    w.complete(9, &h, "r");
    w.expect(
        2,
        Response::WorkComplete {
            handle: h.clone(),
            data: b("r"),
        },
    );
    w.all_quiet();
}

#[test]
fn finished_job_frees_its_unique() {
    let mut w = World::new();
    w.conns(&[1, 9]);
    w.can_do(9, &["f"]);
    let h1 = w.fg(1, "f", "k", "x");
    w.grab_job(9);
    w.complete(9, &h1, "r");
    w.clear();
    let h2 = w.fg(1, "f", "k", "x");
    assert_ne!(h1, h2);
    let h3 = w.fg(1, "f", "-", "x");
    w.grab_job(9);
    w.complete(9, &h2, "r");
    w.grab_job(9);
    w.complete(9, &h3, "r");
    w.clear();
    assert_ne!(w.fg(1, "f", "-", "x"), h3);
}

#[test]
fn status_unique_counts_waiting_clients() {
    let mut w = World::new();
    w.conns(&[1, 2, 3, 9]);
    let h = w.fg(1, "f", "shared", "x");
    w.fg(2, "f", "shared", "x");
    w.req(3, Request::GetStatusUnique(b("shared")));
    w.expect(
        3,
        Response::StatusResUnique {
            unique: b("shared"),
            known: true,
            running: false,
            numerator: 0,
            denominator: 0,
            waiting: 2,
        },
    );
    w.can_do(9, &["f"]);
    w.grab_job(9);
    w.req(9, Request::work_status(h.clone(), b("5"), b("10")));
    w.clear();
    w.req(3, Request::GetStatusUnique(b("shared")));
    w.expect(
        3,
        Response::StatusResUnique {
            unique: b("shared"),
            known: true,
            running: true,
            numerator: 5,
            denominator: 10,
            waiting: 2,
        },
    );
    w.req(3, Request::GetStatusUnique(b("nope")));
    w.expect(
        3,
        Response::StatusResUnique {
            unique: b("nope"),
            known: false,
            running: false,
            numerator: 0,
            denominator: 0,
            waiting: 0,
        },
    );
}

#[test]
fn cancelled_running_job_does_not_swallow_new_submissions() {
    // A running job cancelled by an admin is only waiting for its worker to
    // report; a new submission with its unique must become a new job that
    // really runs, not attach to the dead one and wait forever.
    let mut w = World::new();
    w.conns(&[1, 2, 3, 8, 9]);
    let old = w.fg(1, "f", "k", "x");
    let old_dash = w.fg(1, "f", "-", "y");
    w.can_do(9, &["f"]);
    w.grab_job(9);
    w.grab_job(9);
    assert_eq!(w.admin(8, &format!("cancel job {}", s(&old))), "OK\r\n");
    assert_eq!(
        w.admin(8, &format!("cancel job {}", s(&old_dash))),
        "OK\r\n"
    );
    w.clear();
    let new = w.fg(2, "f", "k", "x");
    let new_dash = w.fg(2, "f", "-", "y");
    let new_bg = w.bg(3, "f", "k", "x");
    assert_ne!(new, old);
    assert_ne!(new_dash, old_dash);
    assert_eq!(new_bg, new);
    // The old worker's report reaps the old jobs and must not unhook the new ones.
    w.complete(9, &old, "late");
    w.complete(9, &old_dash, "late");
    w.quiet(9);
    assert_eq!(w.fg(3, "f", "k", "x"), new);
    assert_eq!(w.fg(3, "f", "-", "y"), new_dash);
    w.clear();
    let (h, _) = w.grab_job(9);
    assert_eq!(h, new);
    w.complete(9, &h, "fresh");
    let (h2, _) = w.grab_job(9);
    assert_eq!(h2, new_dash);
    w.complete(9, &h2, "fresh");
    assert_eq!(
        w.packets(2),
        vec![
            Response::WorkComplete {
                handle: new.clone(),
                data: b("fresh")
            },
            Response::WorkComplete {
                handle: new_dash.clone(),
                data: b("fresh")
            },
        ]
    );
}

fn s(h: &bytes::Bytes) -> String {
    String::from_utf8_lossy(h).into_owned()
}
