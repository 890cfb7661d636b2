//! What outlives a job, on virtual time: the dead set (retry, drop, expiry,
//! caps), kept results (expiry, caps by count and bytes, the store), and
//! `show job` on live, kept and cancelled jobs.

mod common;

use std::sync::Arc;

use common::policy::*;
use common::{b, job_with, World};
use gearshift_core::policy::{Policies, Reason, Retention, Rule};
use gearshift_core::StoreOp;
use gearshift_proto::{Priority, Request, Response};

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
        Request::submit(Box::new(job_with(
            "mail",
            "m1",
            "hello",
            Priority::Normal,
            true,
        ))),
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
            mark,
        }] => assert_eq!((mark.died_ms, &mark.error), (1_000, &b("fail"))),
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
            Request::submit(Box::new(job_with("f", "", "x", Priority::Normal, true))),
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
fn kept_results_go_to_the_store_and_come_back_after_a_restart() {
    let mut w = setup(World::durable(), "f", policy(2, &[Reason::Fail]), &["f"]);
    let h = w.fg(1, "f", "", "x");
    let (h1, _) = w.grab_job(2);
    w.fail(2, &h1);
    w.advance_to(1_000);
    let (h2, _) = w.grab_job(2);
    w.complete(2, &h2, "result");
    let before = w.probe(&format!("show job {}", String::from_utf8_lossy(&h)));
    let kept: Vec<gearshift_core::KeptRecord> = w
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
