//! The admin text protocol against live state: the listings, cancel,
//! create/drop function, maxqueue, the one-line answers, shutdown and the
//! too-many-words close.

mod common;

use bytes::Bytes;
use common::{b, err, job_with, Out, World};
use gearshift_core::CoreConfig;
use gearshift_proto::{Priority, Request, Response};

fn hs(h: &Bytes) -> String {
    String::from_utf8_lossy(h).into_owned()
}

#[test]
fn status_lists_total_running_workers() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    assert_eq!(w.probe("status"), ".\n");
    w.fg(1, "f", "", "1");
    w.fg(1, "f", "", "2");
    w.bg(1, "g", "", "3");
    w.can_do(2, &["f"]);
    w.can_do(3, &["f", "h"]);
    w.grab_job(2);
    assert_eq!(
        w.admin(1, "status"),
        "f\t2\t1\t2\ng\t1\t0\t0\nh\t0\t0\t1\n.\n"
    );
    assert_eq!(w.admin(1, "STATUS"), w.admin(1, "status"));
}

#[test]
fn prioritystatus_lists_queued_per_priority_and_workers() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.submit(1, job_with("f", "", "h", Priority::High, false));
    w.submit(1, job_with("f", "", "l", Priority::Low, true));
    w.submit(1, job_with("f", "", "l2", Priority::Low, true));
    w.can_do(2, &["f"]);
    assert_eq!(w.admin(1, "prioritystatus"), "f\t1\t0\t2\t1\n.\n");
}

#[test]
fn workers_lists_every_connection_newest_can_do_first() {
    let mut w = World::new();
    w.conn(5);
    w.conn_from(7, "10.0.0.7", false);
    w.can_do(7, &["f1", "f2", "f3"]);
    w.req(7, Request::SetClientId(b("worker-7")));
    // A repeated CAN_DO moves the function to the front, once.
    w.can_do(7, &["f1"]);
    w.conn(9);
    w.req(9, Request::SetClientId(b("")));
    w.can_do(9, &["g"]);
    assert_eq!(
        w.admin(5, "workers"),
        "5 127.0.0.1 - :\n7 10.0.0.7 worker-7 : f1 f3 f2\n9 127.0.0.1  : g\n.\n"
    );
    w.req(7, Request::CantDo(b("f3")));
    w.disconnect(9);
    assert_eq!(
        w.admin(5, "workers"),
        "5 127.0.0.1 - :\n7 10.0.0.7 worker-7 : f1 f2\n.\n"
    );
}

#[test]
fn client_id_is_truncated_to_127_bytes() {
    let mut w = World::new();
    w.conn(1);
    let long = "x".repeat(300);
    w.req(1, Request::SetClientId(b(&long)));
    let out = w.admin(1, "workers");
    assert_eq!(out, format!("1 127.0.0.1 {} :\n.\n", "x".repeat(127)));
}

#[test]
fn show_jobs_and_show_unique_jobs() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    let h1 = w.fg(1, "f", "u1", "a");
    let h2 = w.bg(1, "f", "", "b");
    let h3 = w.fg(1, "g", "-", "c");
    w.can_do(2, &["f"]);
    w.grab_job(2);
    w.disconnect(2); // h1 back with one retry
    let want = format!(
        "{}\t1\t0\t0\n{}\t0\t0\t1\n{}\t0\t0\t0\n.\n",
        hs(&h1),
        hs(&h2),
        hs(&h3)
    );
    assert_eq!(w.admin(1, "show jobs"), want);
    assert_eq!(w.admin(1, "show unique jobs"), "u1\n\n-\n.\n");
}

#[test]
fn cancel_queued_job_removes_it_and_fails_its_clients() {
    let mut w = World::new();
    w.conns(&[1, 2, 3, 8]);
    let h = w.fg(1, "f", "k", "x");
    w.fg(2, "f", "k", "x");
    let other = w.fg(1, "f", "", "y");
    assert_eq!(w.admin(8, &format!("cancel job {}", hs(&h))), "OK\r\n");
    w.expect(1, Response::WorkFail(h.clone()));
    w.expect(2, Response::WorkFail(h.clone()));
    assert_eq!(w.status_of("f"), Some((1, 0, 0)));
    assert_eq!(w.show_jobs().len(), 1);
    w.can_do(3, &["f"]);
    assert_eq!(w.grab_job(3).0, other);
    w.grab_none(3);
    assert_eq!(
        w.admin(8, &format!("cancel job {}", hs(&h))),
        "ERR UNKNOWN_JOB\r\n"
    );
}

#[test]
fn cancel_running_job_waits_for_its_worker() {
    let mut w = World::new();
    w.conns(&[1, 2, 8]);
    let h = w.fg(1, "f", "", "x");
    w.can_do(2, &["f"]);
    w.grab_job(2);
    assert_eq!(w.admin(8, &format!("cancel job {}", hs(&h))), "OK\r\n");
    w.expect(1, Response::WorkFail(h.clone()));
    w.quiet(2); // the worker is not told
    assert_eq!(w.admin(8, "show jobs"), format!("{}\t0\t1\t0\n.\n", hs(&h)));
    assert_eq!(w.status_of("f"), Some((1, 1, 1)));
    // Its progress and completion are accepted silently.
    w.req(
        2,
        Request::WorkData {
            handle: h.clone(),
            data: b("d"),
        },
    );
    w.complete(2, &h, "r");
    w.all_quiet();
    assert_eq!(w.admin(8, "show jobs"), ".\n");
    assert_eq!(w.status_of("f"), Some((0, 0, 1)));
}

#[test]
fn cancelled_running_job_is_reaped_if_its_worker_leaves() {
    let mut w = World::new();
    w.conns(&[1, 2, 3, 8]);
    let h = w.bg(1, "f", "", "x");
    w.can_do(2, &["f"]);
    w.can_do(3, &["f"]);
    w.grab_job(2);
    w.admin(8, &format!("cancel job {}", hs(&h)));
    w.disconnect(2);
    assert_eq!(w.admin(8, "show jobs"), ".\n");
    w.grab_none(3);
}

#[test]
fn cancel_unknown_and_malformed() {
    let mut w = World::new();
    w.conn(8);
    assert_eq!(
        w.admin(8, "cancel job H:localhost:5"),
        "ERR UNKNOWN_JOB\r\n"
    );
    assert_eq!(w.admin(8, "cancel job bogus"), "ERR UNKNOWN_JOB\r\n");
    assert_eq!(w.admin(8, "cancel foo bar"), "ERR UNKNOWN_ERROR\r\n");
}

#[test]
fn create_and_drop_function() {
    let mut w = World::new();
    w.conns(&[1, 2, 8]);
    assert_eq!(w.admin(8, "create function made"), "OK\r\n");
    assert_eq!(w.admin(8, "status"), "made\t0\t0\t0\n.\n");
    assert_eq!(
        w.admin(8, "drop function nope"),
        "ERR function not found\r\n"
    );
    // Queued jobs, no workers.
    let h = w.bg(1, "made", "", "x");
    assert_eq!(
        w.admin(8, "drop function made"),
        "ERR there are still queued jobs\r\n"
    );
    // A worker registered.
    w.can_do(2, &["made"]);
    let busy = "ERR there are still connected workers or executing clients\r\n";
    assert_eq!(w.admin(8, "drop function made"), busy);
    w.grab_job(2);
    w.complete(2, &h, "");
    assert_eq!(w.admin(8, "drop function made"), busy);
    w.req(2, Request::CantDo(b("made")));
    // Idle and empty: dropped, case-insensitively.
    assert_eq!(w.admin(8, "drop function MADE"), "OK\r\n");
    assert_eq!(w.admin(8, "status"), ".\n");
    assert_eq!(
        w.admin(8, "drop function made"),
        "ERR function not found\r\n"
    );
    // The name can come back.
    w.bg(1, "made", "", "y");
    assert_eq!(w.status_of("made"), Some((1, 0, 0)));
}

#[test]
fn maxqueue_refuses_new_jobs_but_not_duplicates() {
    let mut w = World::new();
    w.conns(&[1, 8]);
    assert_eq!(w.admin(8, "create function f"), "OK\r\n");
    assert_eq!(w.admin(8, "maxqueue f 2"), "OK\r\n");
    let h = w.fg(1, "f", "k", "1");
    w.bg(1, "f", "", "2");
    w.req(1, Request::Submit(common::job("f", "", "3")));
    w.expect(1, err("QUEUE_ERROR", "Job queue is full"));
    w.req(
        1,
        Request::Submit(job_with("f", "", "3", Priority::High, true)),
    );
    w.expect(1, err("QUEUE_ERROR", "Job queue is full"));
    // Coalesced duplicates, foreground or background, still go through.
    assert_eq!(w.fg(1, "f", "k", "dup"), h);
    assert_eq!(w.bg(1, "f", "k", "dup"), h);
    assert_eq!(w.status_of("f"), Some((2, 0, 0)));
    // Other functions are not limited.
    w.bg(1, "g", "", "x");
    // 0 lifts the limit.
    assert_eq!(w.admin(8, "maxqueue f 0"), "OK\r\n");
    w.bg(1, "f", "", "4");
    assert_eq!(w.status_of("f"), Some((3, 0, 0)));
}

#[test]
fn maxqueue_per_priority() {
    let mut w = World::new();
    w.conns(&[1, 8]);
    w.admin(8, "create function f");
    assert_eq!(w.admin(8, "maxqueue f 3 2 1"), "OK\r\n");
    let sub = |w: &mut World, p| {
        w.req(1, Request::Submit(job_with("f", "", "x", p, true)));
        w.pop(1)
    };
    assert!(matches!(
        sub(&mut w, Priority::Low),
        Response::JobCreated(_)
    ));
    // Total is now 1: low limit 1 reached.
    assert_eq!(
        sub(&mut w, Priority::Low),
        err("QUEUE_ERROR", "Job queue is full")
    );
    assert!(matches!(
        sub(&mut w, Priority::Normal),
        Response::JobCreated(_)
    ));
    assert_eq!(
        sub(&mut w, Priority::Normal),
        err("QUEUE_ERROR", "Job queue is full")
    );
    assert!(matches!(
        sub(&mut w, Priority::High),
        Response::JobCreated(_)
    ));
    assert_eq!(
        sub(&mut w, Priority::High),
        err("QUEUE_ERROR", "Job queue is full")
    );
}

#[test]
fn maxqueue_for_unknown_function_is_ok_and_harmless() {
    let mut w = World::new();
    w.conns(&[1, 8]);
    assert_eq!(w.admin(8, "maxqueue ghost 1"), "OK\r\n");
    w.bg(1, "ghost", "", "1");
    w.bg(1, "ghost", "", "2");
    assert_eq!(w.status_of("ghost"), Some((2, 0, 0)));
}

#[test]
fn running_jobs_count_against_maxqueue() {
    let mut w = World::new();
    w.conns(&[1, 2, 8]);
    w.admin(8, "create function f");
    w.admin(8, "maxqueue f 1");
    let h = w.bg(1, "f", "", "1");
    w.can_do(2, &["f"]);
    w.grab_job(2);
    w.req(1, Request::Submit(common::job("f", "", "2")));
    w.expect(1, err("QUEUE_ERROR", "Job queue is full"));
    w.complete(2, &h, "");
    w.bg(1, "f", "", "2");
}

#[test]
fn getpid_verbose_version() {
    let mut w = World::with(CoreConfig {
        pid: 4242,
        version: "gearshift-test".to_owned(),
        verbose: "INFO".to_owned(),
        ..CoreConfig::default()
    });
    w.conn(1);
    assert_eq!(w.admin(1, "getpid"), "OK 4242\n");
    assert_eq!(w.admin(1, "verbose"), "OK INFO\n");
    assert_eq!(w.admin(1, "version"), "OK gearshift-test\n");
    assert_eq!(
        w.admin(1, "bogus"),
        "ERR UNKNOWN_COMMAND Unknown+server+commandbogus\r\n"
    );
    assert!(w.shutdowns.is_empty());
}

#[test]
fn shutdown_only_from_loopback() {
    let mut w = World::new();
    w.conn_from(1, "10.1.2.3", false);
    assert_eq!(
        w.admin(1, "shutdown"),
        "ERR PERMISSION_DENIED shutdown+is+only+accepted+from+loopback\r\n"
    );
    assert!(w.shutdowns.is_empty());
    w.conn(2);
    assert_eq!(w.admin(2, "shutdown"), "OK\r\n");
    assert_eq!(w.shutdowns, [false]);
    assert_eq!(w.admin(2, "shutdown graceful"), "OK\r\n");
    assert_eq!(w.shutdowns, [false, true]);
}

#[test]
fn too_many_words_closes_without_reply() {
    let mut w = World::new();
    w.conn(1);
    w.core.handle(
        gearshift_core::ConnId(1),
        gearshift_core::Input::Admin(gearshift_proto::parse_admin(b"a b c d e f")),
        0,
    );
    let effects = w.core.take_effects();
    assert_eq!(
        effects,
        vec![gearshift_core::Effect::Close(gearshift_core::ConnId(1))]
    );
    // Five words is still a command.
    assert_eq!(w.admin(1, "cancel job x y z"), "ERR UNKNOWN_ERROR\r\n");
    w.conn(2);
    w.admin(2, "status status status status status status");
    assert_eq!(w.take(2), vec![Out::Close]);
}

#[test]
fn admin_and_binary_mix_on_one_connection() {
    let mut w = World::new();
    w.conn(1);
    let h = w.bg(1, "f", "", "x");
    assert_eq!(w.admin(1, "show jobs"), format!("{}\t0\t0\t1\n.\n", hs(&h)));
    w.req(1, Request::Echo(b("e")));
    w.expect(1, Response::EchoRes(b("e")));
}
