//! Server-side retries, the dead set, kept results and history, pause and
//! resume, require_worker and the worker registry, on virtual time.

mod common;

use std::sync::Arc;

use bytes::Bytes;
use common::{b, job_with, World};
use gearshift_core::policy::{Backoff, Policies, Policy, Reason, Reasons, Retention, Rule};
use gearshift_core::StoreOp;
use gearshift_proto::{Priority, Request, Response};

fn checked(mut w: World) -> World {
    w.check = true;
    w
}

fn policy(max_attempts: u32, retry_on: &[Reason]) -> Policy {
    Policy {
        max_attempts,
        retry_on: Reasons::of(retry_on),
        backoff: Backoff::Exponential,
        initial_delay: 1_000,
        max_delay: 60_000,
        jitter: false,
        keep_results: 3_600_000,
        ..Policy::default()
    }
}

fn with_policy(w: &mut World, pattern: &str, p: Policy) {
    w.core.set_policies(Policies {
        rules: vec![Rule {
            pattern: pattern.into(),
            policy: Arc::new(p),
        }],
        ..Policies::default()
    });
}

/// A world with `p` on functions matching `pattern`, client 1 and worker 2
/// registered for `functions`.
fn setup(mut w: World, pattern: &str, p: Policy, functions: &[&str]) -> World {
    w.check = true;
    with_policy(&mut w, pattern, p);
    w.conns(&[1, 2]);
    w.can_do(2, functions);
    w
}

fn exception(w: &mut World, n: u64, handle: &Bytes, text: &str) {
    w.req(
        n,
        Request::WorkException {
            handle: handle.clone(),
            data: b(text),
        },
    );
}

/// `key: value` lines of `show job H` (history lines kept in order).
fn show_job(w: &mut World, handle: &Bytes) -> Vec<(String, String)> {
    let text = w.probe(&format!("show job {}", String::from_utf8_lossy(handle)));
    assert!(text.ends_with(".\n"), "{text:?}");
    text.lines()
        .take_while(|l| *l != ".")
        .map(|l| {
            let (k, v) = l.split_once(": ").expect("key: value");
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

fn value(fields: &[(String, String)], key: &str) -> String {
    fields
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no {key} in {fields:?}"))
}

fn history(fields: &[(String, String)]) -> Vec<String> {
    fields
        .iter()
        .filter(|(k, _)| k == "history")
        .map(|(_, v)| v.split(' ').nth(1).unwrap_or("").to_owned())
        .collect()
}

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
fn a_background_job_that_uses_its_attempts_goes_to_the_dead_set() {
    let mut w = setup(
        World::durable(),
        "mail",
        policy(2, &[Reason::Fail]),
        &["mail"],
    );
    w.req(
        1,
        Request::Submit(job_with("mail", "m1", "hello", Priority::Normal, true)),
    );
    w.persisted(&[1]);
    let h = match w.pop(1) {
        Response::JobCreated(h) => h,
        other => panic!("{other:?}"),
    };
    w.store_ops.clear();
    let (h1, _) = w.grab_job(2);
    w.fail(2, &h1);
    assert_eq!(
        w.store_ops,
        [StoreOp::Retry {
            id: 1,
            attempts: 1,
            due_ms: Some(1_000)
        }]
    );
    w.store_ops.clear();
    w.advance_to(1_000);
    let (h2, _) = w.grab_job(2);
    w.fail(2, &h2);
    match &w.store_ops[..] {
        [StoreOp::Dead {
            id: 1,
            attempts: 2,
            died_ms: 1_000,
            error,
        }] => assert_eq!(error, &b("fail")),
        other => panic!("{other:?}"),
    }
    w.store_ops.clear();
    assert_eq!(w.status_of("mail").map(|s| s.0), Some(0));
    let dead = w.probe("show dead");
    assert_eq!(
        dead,
        format!(
            "{}\tmail\t2\t1970-01-01T00:00:01.000Z\tfail\n.\n",
            String::from_utf8_lossy(&h)
        )
    );
    assert_eq!(w.probe("show dead other"), ".\n");
    assert_eq!(value(&show_job(&mut w, &h), "state"), "dead");
    // Retried: back in the queue under its handle, with fresh attempts.
    assert_eq!(
        w.probe(&format!("retry dead {}", String::from_utf8_lossy(&h))),
        "OK 1\r\n"
    );
    assert_eq!(
        w.store_ops,
        [StoreOp::Retry {
            id: 1,
            attempts: 0,
            due_ms: None
        }]
    );
    assert_eq!(w.probe("show dead"), ".\n");
    let (h3, data) = w.grab_job(2);
    assert_eq!((h3.clone(), data), (h.clone(), b("hello")));
    w.fail(2, &h3);
    w.advance_to(3_000);
    let (h4, _) = w.grab_job(2);
    w.fail(2, &h4);
    w.store_ops.clear();
    assert_eq!(w.probe("drop dead all mail"), "OK 1\r\n");
    assert_eq!(w.store_ops, [StoreOp::Done(1)]);
    assert_eq!(w.probe("drop dead all"), "OK 0\r\n");
}

#[test]
fn dead_jobs_expire_after_dead_ttl_and_are_capped() {
    let mut w = checked(World::durable());
    w.core.set_policies(Policies {
        rules: vec![Rule {
            pattern: "*".into(),
            policy: Arc::new(policy(1, &[Reason::Fail])),
        }],
        retention: Retention {
            dead_ttl: 10_000,
            max_kept: 10,
            max_dead: 2,
            ..Retention::default()
        },
    });
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    for i in 1..=3u64 {
        w.req(
            1,
            Request::Submit(job_with("f", "", "x", Priority::Normal, true)),
        );
        w.persisted(&[i]);
        let (h, _) = w.grab_job(2);
        w.fail(2, &h);
        w.now += 1;
    }
    w.clear();
    // The cap keeps the two latest; the first is gone from the store too.
    assert_eq!(w.probe("show dead").lines().count(), 3);
    assert!(w.store_ops.contains(&StoreOp::Done(1)));
    w.store_ops.clear();
    w.advance_to(20_000);
    assert_eq!(w.probe("show dead"), ".\n");
    assert_eq!(w.store_ops, [StoreOp::Done(2), StoreOp::Done(3)]);
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
fn kept_results_expire_and_get_status_stays_unknown() {
    let mut w = checked(World::new());
    let mut p = policy(1, &[]);
    p.keep_results = 60_000;
    with_policy(&mut w, "f", p);
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    let h = w.bg(1, "f", "", "x");
    let (h1, _) = w.grab_job(2);
    w.complete(2, &h1, "result");
    w.req(1, Request::GetStatus(h.clone()));
    w.expect(
        1,
        Response::StatusRes {
            handle: h.clone(),
            known: false,
            running: false,
            numerator: 0,
            denominator: 0,
        },
    );
    assert_eq!(value(&show_job(&mut w, &h), "result_size"), "6");
    assert_eq!(w.core.retained_counts(), (1, 0));
    w.advance_to(60_000);
    assert_eq!(w.core.retained_counts(), (0, 0));
    assert!(w
        .probe(&format!("show job {}", String::from_utf8_lossy(&h)))
        .starts_with("ERR UNKNOWN_JOB "));
}

#[test]
fn kept_results_are_capped() {
    let mut w = checked(World::new());
    w.core.set_policies(Policies {
        rules: vec![Rule {
            pattern: "*".into(),
            policy: Arc::new(policy(1, &[])),
        }],
        retention: Retention {
            max_kept: 5,
            ..Retention::default()
        },
    });
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    for _ in 0..50 {
        w.bg(1, "f", "", "x");
        let (h, _) = w.grab_job(2);
        w.complete(2, &h, "r");
        w.now += 1;
    }
    assert_eq!(w.core.retained_counts(), (5, 0));
}

#[test]
fn require_worker_refuses_a_submission_nobody_can_run() {
    let mut w = checked(World::new());
    let mut p = policy(1, &[]);
    p.require_worker = true;
    with_policy(&mut w, "needs_*", p);
    w.conns(&[1, 2]);
    w.req(1, Request::Submit(common::job("needs_w", "", "x")));
    match w.pop(1) {
        Response::Error { code, text } => {
            assert_eq!(code, b("NO_WORKER"));
            assert!(String::from_utf8_lossy(&text).contains("needs_w"));
        }
        other => panic!("{other:?}"),
    }
    assert!(w.status_of("needs_w").is_none_or(|s| s.0 == 0));
    w.can_do(2, &["needs_w"]);
    w.fg(1, "needs_w", "", "x");
    // Functions without the policy queue as gearmand does.
    w.fg(1, "plain", "", "x");
}

#[test]
fn a_paused_function_queues_but_hands_nothing_out() {
    let mut w = checked(World::new());
    w.conns(&[1, 2]);
    w.can_do(2, &["f", "g"]);
    assert_eq!(w.probe("pause f"), "OK\r\n");
    w.bg(1, "f", "", "1");
    w.bg(1, "g", "", "2");
    assert_eq!(w.grab_data(2), "2");
    w.grab_none(2);
    w.sleep(2);
    w.quiet(2);
    w.bg(1, "f", "", "3");
    w.quiet(2);
    assert_eq!(w.status_of("f").map(|s| s.0), Some(2));
    assert_eq!(w.probe("resume f"), "OK\r\n");
    w.expect(2, Response::Noop);
    assert_eq!(w.grab_data(2), "1");
    assert_eq!(
        w.probe("pause"),
        "ERR INVALID_ARGUMENTS An+incomplete+set+of+arguments+was+sent+to+this+command+pause\r\n"
    );
}

#[test]
fn cancelled_jobs_are_kept_as_cancelled() {
    let mut w = checked(World::new());
    with_policy(&mut w, "f", policy(1, &[]));
    w.conns(&[1]);
    let h = w.bg(1, "f", "", "x");
    let hs = String::from_utf8_lossy(&h).into_owned();
    assert_eq!(w.probe(&format!("cancel job {hs}")), "OK\r\n");
    let f = show_job(&mut w, &h);
    assert_eq!(value(&f, "state"), "cancelled");
    assert_eq!(history(&f), ["queued", "cancelled"]);
}

#[test]
fn show_job_escapes_client_bytes_and_shows_live_jobs_without_a_policy() {
    let mut w = checked(World::new());
    w.conns(&[1, 2]);
    let h = w.fg(1, "f", "u\u{1}x", "x");
    let f = show_job(&mut w, &h);
    assert_eq!(value(&f, "unique"), "u\\x01x");
    assert_eq!(value(&f, "state"), "queued");
    assert_eq!(value(&f, "attempts"), "0");
    assert_eq!(value(&f, "started"), "-");
    w.can_do(2, &["f"]);
    w.grab_job(2);
    let f = show_job(&mut w, &h);
    assert_eq!(value(&f, "state"), "running");
    assert_eq!(value(&f, "worker"), "-@127.0.0.1");
}

#[test]
fn kept_results_are_bounded_in_bytes() {
    let mut w = checked(World::new());
    w.core.set_policies(Policies {
        rules: vec![Rule {
            pattern: "*".into(),
            policy: Arc::new(policy(1, &[])),
        }],
        retention: Retention {
            max_kept_bytes: 64 << 10,
            ..Retention::default()
        },
    });
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    let big = "r".repeat(10_000);
    for _ in 0..50 {
        w.bg(1, "f", "", "x");
        let (h, _) = w.grab_job(2);
        w.complete(2, &h, &big);
        w.now += 1;
    }
    // Each costs its 10 000-byte result plus the record: 5 fit in 64 KiB.
    assert_eq!(w.core.retained_counts(), (5, 0));
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
        vec![gearshift_core::StoredJob {
            id: 4,
            handle: b("H:localhost:4"),
            function: b("f"),
            unique: Bytes::new(),
            priority: Priority::Normal,
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

#[test]
fn kept_results_go_to_the_store_and_come_back_after_a_restart() {
    let mut w = setup(World::durable(), "f", policy(2, &[Reason::Fail]), &["f"]);
    let h = w.fg(1, "f", "", "x");
    let (h1, _) = w.grab_job(2);
    w.fail(2, &h1);
    w.advance_to(1_000);
    let (h2, _) = w.grab_job(2);
    w.complete(2, &h2, "result");
    let before = w.probe(&format!("show job {}", String::from_utf8_lossy(&h)));
    let kept: Vec<gearshift_core::StoredKept> = w
        .store_ops
        .iter()
        .filter_map(|op| match op {
            StoreOp::Kept(k) => Some((**k).clone()),
            _ => None,
        })
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].result, b("result"));
    assert_eq!(kept[0].expires_ms, 1_000 + 3_600_000);

    // A new server on the same store: the same answer, until it expires.
    let mut w2 = checked(World::durable());
    with_policy(&mut w2, "f", policy(2, &[Reason::Fail]));
    w2.now = 2_000;
    w2.core.set_now(2_000);
    w2.core.restore_kept(kept.clone());
    assert_eq!(
        w2.probe(&format!("show job {}", String::from_utf8_lossy(&h))),
        before
    );
    w2.store_ops.clear();
    w2.advance_to(1_000 + 3_600_000);
    assert_eq!(w2.store_ops, [StoreOp::Forget(kept[0].id)]);
    // Already expired at start: forgotten at once.
    let mut w3 = checked(World::durable());
    w3.core.set_now(5_000_000);
    w3.core.restore_kept(kept.clone());
    assert_eq!(w3.core.retained_counts(), (0, 0));
    assert_eq!(
        w3.core.take_effects(),
        [gearshift_core::Effect::Store(StoreOp::Forget(kept[0].id))]
    );
}

/// The event words of the events emitted so far, as `FUNCTION EVENT`.
fn event_words(w: &mut World) -> Vec<String> {
    std::mem::take(&mut w.events)
        .into_iter()
        .map(|e| format!("{} {}", String::from_utf8_lossy(&e.function), e.step.word()))
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
