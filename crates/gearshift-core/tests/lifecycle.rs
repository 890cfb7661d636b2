//! How a run ends under a policy, on virtual time: retries after their
//! backoff with one terminal packet for the client, timeouts and lost
//! workers following `retry_on`, gearmand's rules without a policy, and the
//! lifecycle events every transition reports.

mod common;

use bytes::Bytes;
use common::policy::*;
use common::{b, World};
use gearshift_core::events::EventKind;
use gearshift_core::policy::Reason;
use gearshift_proto::{Request, Response};

#[test]
fn a_failed_run_is_retried_after_its_backoff_and_the_client_sees_one_result() {
    let mut w = checked(World::new());
    with_policy(&mut w, "resize_*", policy(3, &[Reason::Fail]));
    w.conns(&[1, 2, 3]);
    w.can_do(2, &["resize_png"]);
    let h = w.fg(1, "resize_png", "", "img");
    let (h1, _) = w.grab_job(2);
    w.req(
        2,
        Request::WorkData {
            handle: h1.clone(),
            data: b("partial"),
        },
    );
    w.expect(
        1,
        Response::WorkData {
            handle: h.clone(),
            data: b("partial"),
        },
    );
    w.fail(2, &h1);
    w.quiet(1);
    assert_eq!(value(&show_job(&mut w, &h), "state"), "retrying");
    // Not before its delay (1 s for the first retry).
    w.grab_none(2);
    assert_eq!(w.core.next_deadline(), Some(1_000));
    w.advance_to(999);
    w.grab_none(2);
    w.advance_to(1_000);
    // Any worker may take it.
    w.can_do(3, &["resize_png"]);
    let (h2, data) = w.grab_job(3);
    assert_eq!((h2.clone(), data), (h.clone(), b("img")));
    w.fail(3, &h2);
    w.quiet(1);
    // The second retry waits twice as long.
    assert_eq!(w.core.next_deadline(), Some(3_000));
    w.advance_to(3_000);
    let (h3, _) = w.grab_job(2);
    w.complete(2, &h3, "done");
    w.expect(
        1,
        Response::WorkComplete {
            handle: h.clone(),
            data: b("done"),
        },
    );
    w.quiet(1);
    let f = show_job(&mut w, &h);
    assert_eq!(value(&f, "state"), "completed");
    assert_eq!(value(&f, "attempts"), "3");
    assert_eq!(value(&f, "result_size"), "4");
    assert_eq!(value(&f, "created"), "1970-01-01T00:00:00.000Z");
    assert_eq!(value(&f, "finished"), "1970-01-01T00:00:03.000Z");
    assert_eq!(
        history(&f),
        [
            "queued",
            "started",
            "failed",
            "retry",
            "requeued",
            "started",
            "failed",
            "retry",
            "requeued",
            "started",
            "completed"
        ]
    );
}

#[test]
fn the_last_attempt_fails_the_client_once_with_the_last_exception() {
    let mut w = checked(World::new());
    with_policy(&mut w, "f", policy(2, &[Reason::Fail, Reason::Exception]));
    w.conns(&[1, 2, 3]);
    w.req(1, Request::Option(b("exceptions")));
    w.expect(1, Response::OptionRes(b("exceptions")));
    w.can_do(2, &["f"]);
    let h = w.fg(1, "f", "u", "x");
    // A second client coalesces on the unique and gets the same outcome.
    let h_b = w.fg(3, "f", "u", "x");
    assert_eq!(h, h_b);
    let (h1, _) = w.grab_job(2);
    exception(&mut w, 2, &h1, "first");
    w.quiet(1);
    w.quiet(3);
    w.advance_to(1_000);
    let (h2, _) = w.grab_job(2);
    exception(&mut w, 2, &h2, "second");
    w.expect(
        1,
        Response::WorkException {
            handle: h.clone(),
            data: b("second"),
        },
    );
    // Conn 3 did not ask for exceptions: WORK_FAIL.
    w.expect(3, Response::WorkFail(h.clone()));
    w.quiet(1);
    w.quiet(3);
    let f = show_job(&mut w, &h);
    assert_eq!(value(&f, "state"), "failed");
    assert_eq!(value(&f, "error"), "second");
    assert!(w.status().is_empty() || w.status_of("f").map(|s| s.0) == Some(0));
}

#[test]
fn a_foreground_job_whose_client_asked_for_the_dead_set_ends_there() {
    let mut w = checked(World::new());
    with_policy(&mut w, "f", policy(2, &[Reason::Fail]));
    w.conns(&[1, 2, 3]);
    w.req(1, Request::Option(b("dead-set")));
    w.expect(1, Response::OptionRes(b("dead-set")));
    w.can_do(3, &["f"]);
    let h = w.fg(1, "f", "u", "x");
    // Without the option, a foreground failure is not kept as dead.
    let plain = w.fg(2, "f", "v", "y");
    for _ in 0..2 {
        let (h1, _) = w.grab_job(3);
        w.fail(3, &h1);
        let (h2, _) = w.grab_job(3);
        w.fail(3, &h2);
        w.advance_to(w.now + 1_000);
    }
    w.expect(1, Response::WorkFail(h.clone()));
    w.expect(2, Response::WorkFail(plain.clone()));
    let dead = w.probe("show dead");
    let handles: Vec<&str> = dead.lines().filter_map(|l| l.split('\t').next()).collect();
    assert_eq!(
        handles,
        [String::from_utf8_lossy(&h).as_ref(), "."],
        "{dead}"
    );
}

#[test]
fn a_function_without_a_policy_keeps_gearmands_rules() {
    let mut w = setup(World::new(), "other", policy(5, &[Reason::Fail]), &["f"]);
    let h = w.fg(1, "f", "", "x");
    let (h1, _) = w.grab_job(2);
    w.fail(2, &h1);
    w.expect(1, Response::WorkFail(h.clone()));
    w.grab_none(2);
    assert_eq!(w.core.next_deadline(), None);
    assert!(w
        .probe(&format!("show job {}", String::from_utf8_lossy(&h)))
        .starts_with("ERR UNKNOWN_JOB"));
}

#[test]
fn the_server_enforces_the_policy_timeout_and_retries() {
    let mut w = checked(World::new());
    let mut p = policy(2, &[Reason::Timeout]);
    p.timeout = Some(5_000);
    with_policy(&mut w, "slow", p);
    w.conns(&[1, 2, 3]);
    w.can_do(2, &["slow"]);
    let h = w.fg(1, "slow", "", "x");
    let (h1, _) = w.grab_job(2);
    assert_eq!(w.core.next_deadline(), Some(5_000));
    w.advance_to(5_000);
    // The late result is refused; the job waits for its retry.
    w.complete(2, &h1, "late");
    assert!(matches!(w.pop(2), Response::Error { .. }));
    w.quiet(1);
    w.advance_to(6_000);
    w.can_do(3, &["slow"]);
    let (h2, _) = w.grab_job(3);
    w.advance_to(11_000);
    // Out of attempts: the client hears WORK_FAIL.
    w.expect(1, Response::WorkFail(h.clone()));
    let f = show_job(&mut w, &h);
    assert_eq!(value(&f, "state"), "failed");
    assert_eq!(h2, h);
    let registry = w.probe("show workers");
    let line = registry
        .lines()
        .find(|l| l.ends_with("\tslow") && l.starts_with("3\t"))
        .unwrap_or_else(|| panic!("{registry}"));
    let cols: Vec<&str> = line.split('\t').collect();
    assert_eq!(cols.len(), 9, "{line}");
    assert_eq!((cols[5], cols[6], cols[7]), ("0", "1", "-"));
}

#[test]
fn a_lost_worker_follows_retry_on() {
    // Listed: the job waits for its backoff like a failure.
    let mut w = checked(World::new());
    with_policy(&mut w, "f", policy(3, &[Reason::WorkerLost]));
    w.conns(&[1, 2, 3]);
    w.can_do(2, &["f"]);
    w.can_do(3, &["f"]);
    let h = w.fg(1, "f", "", "x");
    w.grab_job(2);
    w.disconnect(2);
    w.grab_none(3);
    w.advance_to(1_000);
    assert_eq!(w.grab_job(3).0, h);

    // Not listed: gearmand's requeue, at once.
    let mut w = checked(World::new());
    with_policy(&mut w, "f", policy(3, &[Reason::Fail]));
    w.conns(&[1, 2, 3]);
    w.can_do(2, &["f"]);
    w.can_do(3, &["f"]);
    let h = w.fg(1, "f", "", "x");
    w.grab_job(2);
    w.disconnect(2);
    assert_eq!(w.grab_job(3).0, h);
}

#[test]
fn a_client_that_leaves_during_the_backoff_drops_its_foreground_job() {
    let mut w = setup(World::new(), "f", policy(3, &[Reason::Fail]), &["f"]);
    let h = w.fg(1, "f", "", "x");
    let (h1, _) = w.grab_job(2);
    w.fail(2, &h1);
    w.disconnect(1);
    assert!(w.status_of("f").is_none_or(|s| s.0 == 0));
    w.advance_to(1_000);
    w.grab_none(2);
    let _ = h;
}

#[test]
fn perls_fail_after_an_exception_is_taken_as_the_same_failure() {
    // Gearman::Worker answers a job that died with WORK_EXCEPTION, then
    // WORK_FAIL: the second must not get an ERROR (Perl workers exit on it).
    for with_policy_too in [false, true] {
        let mut w = checked(World::new());
        if with_policy_too {
            with_policy(&mut w, "f", policy(2, &[Reason::Exception]));
        }
        w.conns(&[1, 2]);
        w.can_do(2, &["f"]);
        let h = w.fg(1, "f", "", "x");
        let (h1, _) = w.grab_job(2);
        exception(&mut w, 2, &h1, "died");
        w.fail(2, &h1);
        w.quiet(2);
        if with_policy_too {
            w.quiet(1);
            w.advance_to(1_000);
            assert_eq!(w.grab_job(2).0, h);
        } else {
            w.expect(1, Response::WorkFail(h.clone()));
            w.quiet(1);
        }
    }
    // Anything else in between: a WORK_FAIL for a job it no longer holds
    // is answered as gearmand does.
    let mut w = checked(World::new());
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    w.fg(1, "f", "", "x");
    let (h1, _) = w.grab_job(2);
    exception(&mut w, 2, &h1, "died");
    w.req(2, Request::Echo(b("ping")));
    w.expect(2, Response::EchoRes(b("ping")));
    w.fail(2, &h1);
    assert!(matches!(w.pop(2), Response::Error { .. }));
}

#[test]
fn attempts_follow_the_stored_count_after_a_restart() {
    let mut w = checked(World::durable());
    with_policy(&mut w, "f", policy(3, &[Reason::Fail]));
    // A job stored with two ended runs whose retry time has passed.
    w.core.restore(
        vec![gearshift_core::JobRecord {
            id: 4,
            handle: b("H:localhost:4"),
            function: b("f"),
            unique: Bytes::new(),
            priority: 1,
            data: b("x"),
            reducer: None,
            due_ms: Some(0),
            attempts: 2,
            created_ms: 0,
        }],
        5,
        1_000,
    );
    w.now = 1_000;
    w.conns(&[2]);
    w.can_do(2, &["f"]);
    let (h, _) = w.grab_job(2);
    w.fail(2, &h);
    let dead = w.probe("show dead");
    assert!(dead.starts_with("H:localhost:4\tf\t3\t"), "{dead}");
}

/// The event words of the job events emitted so far, as `FUNCTION EVENT`.
fn event_words(w: &mut World) -> Vec<String> {
    std::mem::take(&mut w.events)
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::Job { function, step, .. } => Some(format!(
                "{} {}",
                String::from_utf8_lossy(&function),
                step.word()
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn lifecycle_events_report_every_job_when_on_and_nothing_when_off() {
    let mut w = checked(World::new());
    with_policy(&mut w, "p", policy(2, &[Reason::Fail]));
    w.conns(&[1, 2]);
    w.can_do(2, &["plain", "p"]);
    // Off (the default): no events, whatever happens.
    let h = w.fg(1, "plain", "", "x");
    let (h1, _) = w.grab_job(2);
    w.complete(2, &h1, "r");
    w.clear();
    assert!(w.events.is_empty());
    let _ = h;

    w.core.set_lifecycle_events(true);
    // A job with no policy: every transition, and no history kept.
    let h = w.bg(1, "plain", "", "x");
    let (h1, _) = w.grab_job(2);
    w.fail(2, &h1);
    assert_eq!(
        event_words(&mut w),
        ["plain queued", "plain started", "plain failed"]
    );
    assert!(w
        .probe(&format!("show job {}", String::from_utf8_lossy(&h)))
        .starts_with("ERR UNKNOWN_JOB"));
    // Under a policy: the same events as its history.
    let h = w.bg(1, "p", "", "x");
    let (h1, _) = w.grab_job(2);
    w.fail(2, &h1);
    w.advance_to(1_000);
    let (h2, _) = w.grab_job(2);
    w.complete(2, &h2, "r");
    let words = event_words(&mut w);
    assert_eq!(
        words,
        [
            "p queued",
            "p started",
            "p failed",
            "p retry",
            "p requeued",
            "p started",
            "p completed"
        ]
    );
    let f = show_job(&mut w, &h);
    let hist: Vec<String> = history(&f).into_iter().map(|e| format!("p {e}")).collect();
    assert_eq!(hist, words);
}

#[test]
fn a_failures_text_is_kept_bounded_and_clients_get_it_whole() {
    let mut w = setup(World::new(), "f", policy(1, &[]), &["f"]);
    w.req(1, Request::Option(b("exceptions")));
    w.expect(1, Response::OptionRes(b("exceptions")));
    let h = w.fg(1, "f", "", "x");
    let (h1, _) = w.grab_job(2);
    let big = "e".repeat(100_000);
    exception(&mut w, 2, &h1, &big);
    w.expect(
        1,
        Response::WorkException {
            handle: h.clone(),
            data: b(&big),
        },
    );
    let f = show_job(&mut w, &h);
    assert_eq!(
        value(&f, "error").len(),
        gearshift_core::lifecycle::MAX_ERROR
    );
}

#[test]
fn a_job_cancelled_while_it_runs_is_never_retried() {
    for report in ["fail", "exception", "complete", "disconnect"] {
        let mut w = setup(
            World::new(),
            "f",
            policy(3, &[Reason::Fail, Reason::Exception, Reason::WorkerLost]),
            &["f"],
        );
        w.conns(&[3]);
        w.can_do(3, &["f"]);
        let h = w.bg(1, "f", "", "x");
        let (h1, _) = w.grab_job(2);
        let hs = String::from_utf8_lossy(&h).into_owned();
        assert_eq!(w.probe(&format!("cancel job {hs}")), "OK\r\n");
        match report {
            "fail" => w.fail(2, &h1),
            "exception" => exception(&mut w, 2, &h1, "late"),
            "complete" => w.complete(2, &h1, "late"),
            _ => w.disconnect(2),
        }
        w.advance_to(w.now + 10_000);
        w.grab_none(3);
        let f = show_job(&mut w, &h);
        assert_eq!(value(&f, "state"), "cancelled", "{report}");
        assert!(w.status_of("f").is_none_or(|s| s.0 == 0), "{report}");
    }
}

#[test]
fn a_second_admin_cancel_of_a_running_job_is_ok_and_recorded_once() {
    let mut w = setup(World::new(), "f", policy(1, &[]), &["f"]);
    w.core.set_lifecycle_events(true);
    let h = w.bg(1, "f", "", "x");
    w.grab_job(2);
    assert_eq!(event_words(&mut w), ["f queued", "f started"]);
    let cancel = format!("cancel job {}", String::from_utf8_lossy(&h));
    assert_eq!(w.probe(&cancel), "OK\r\n");
    // Its worker still holds it: OK again (as gearmand), nothing recorded.
    assert_eq!(w.probe(&cancel), "OK\r\n");
    assert_eq!(event_words(&mut w), ["f cancelled"]);
    let f = show_job(&mut w, &h);
    assert_eq!(value(&f, "state"), "cancelled");
    assert_eq!(history(&f), ["queued", "started", "cancelled"]);
}
