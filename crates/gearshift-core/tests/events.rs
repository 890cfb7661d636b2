//! Live events on virtual time: a job's whole life (with progress and a
//! retry), workers joining and leaving, cancel, dead and revive, and no
//! event at all while they are off.

mod common;

use bytes::Bytes;
use common::policy::*;
use common::{b, epoch_job, World};
use gearshift_core::control::DeadSelect;
use gearshift_core::events::{EventKind, LiveEvent};
use gearshift_core::lifecycle::Step;
use gearshift_core::policy::Reason;
use gearshift_proto::Request;

/// The events so far as short words (`created`, `progress 1/2`,
/// `joined w`, ...), emptied.
fn words(w: &mut World) -> Vec<String> {
    std::mem::take(&mut w.events)
        .into_iter()
        .map(|LiveEvent { kind, .. }| match kind {
            EventKind::Job { step, .. } => match step {
                Step::Queued => "created".to_owned(),
                Step::Failed(r, d) => {
                    format!("failed {} {}", r.word(), String::from_utf8_lossy(&d))
                }
                Step::RetryAt(t) => format!("retrying {t}"),
                other => other.word().to_owned(),
            },
            EventKind::Progress {
                numerator,
                denominator,
                ..
            } => format!("progress {numerator}/{denominator}"),
            EventKind::WorkerJoined(w) => {
                format!(
                    "joined {} {}",
                    String::from_utf8_lossy(&w.label),
                    w.functions.len()
                )
            }
            EventKind::WorkerLeft(w) => format!("left {}", String::from_utf8_lossy(&w.label)),
            EventKind::Dead {
                attempts,
                reason,
                error,
                ..
            } => format!(
                "dead {attempts} {} {}",
                reason.map_or("-", |r| r.word()),
                String::from_utf8_lossy(&error)
            ),
        })
        .collect()
}

fn status(w: &mut World, n: u64, h: &Bytes, num: &str, den: &str) {
    w.req(n, Request::work_status(h.clone(), b(num), b(den)));
}

#[test]
fn a_jobs_life_and_its_workers_are_reported_in_order() {
    let mut w = checked(World::new());
    with_policy(&mut w, "p", policy(3, &[Reason::Exception]));
    w.core.set_lifecycle_events(true);
    w.conns(&[1, 2]);
    w.can_do(2, &["p"]);
    w.can_do(2, &["plain"]);
    assert_eq!(words(&mut w), ["joined 2@127.0.0.1 1"]);
    let h = w.fg(1, "p", "", "x");
    let (held, _) = w.grab_job(2);
    status(&mut w, 2, &held, "1", "2");
    exception(&mut w, 2, &held, "boom");
    w.advance_to(1_000);
    let (held, _) = w.grab_job(2);
    w.complete(2, &held, "ok");
    assert_eq!(
        words(&mut w),
        [
            "created",
            "started",
            "progress 1/2",
            "failed exception boom",
            "retrying 1000",
            "requeued",
            "started",
            "completed"
        ]
    );
    let _ = h;
    w.clear();
    // Every event names the job's handle and function.
    let h = w.bg(1, "plain", "", "y");
    let ev = w.events.pop().expect("created");
    assert_eq!(
        ev.kind,
        EventKind::Job {
            handle: h,
            function: b("plain"),
            step: Step::Queued
        }
    );
    w.req(2, Request::SetClientId(b("thumbs-1")));
    w.disconnect(2);
    assert_eq!(words(&mut w), ["left thumbs-1"]);
}

#[test]
fn jobs_without_a_policy_report_every_step_but_keep_no_history() {
    let mut w = checked(World::new());
    w.core.set_lifecycle_events(true);
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    w.events.clear();
    // A foreground job that completes and is not kept.
    let h = w.fg(1, "f", "", "x");
    let (held, _) = w.grab_job(2);
    w.complete(2, &held, "r");
    w.clear();
    // A coalesced submission is no new job.
    w.bg(1, "f", "u", "y");
    w.bg(1, "f", "u", "y");
    // An epoch job.
    w.submit(1, epoch_job("f", "", "z", 5));
    let (held, _) = w.grab_job(2);
    w.fail(2, &held);
    assert_eq!(
        words(&mut w),
        [
            "created",
            "started",
            "completed",
            "created",
            "created",
            "started",
            "failed fail "
        ]
    );
    assert!(w.core.job_detail(&h, false).is_none());
    // A lost worker requeues; the job is cancelled while queued.
    w.advance_to(5_000);
    w.conn(3);
    w.can_do(3, &["f"]);
    let (held, _) = w.grab_job(3);
    w.disconnect(3);
    assert_eq!(w.core.cancel_job(&held), Ok(()));
    w.advance_to(5_000);
    assert_eq!(
        words(&mut w),
        [
            "joined 3@127.0.0.1 1",
            "started",
            "left 3@127.0.0.1",
            "requeued",
            "cancelled"
        ]
    );
    // Dropping the last function is leaving too.
    w.req(2, Request::CantDo(b("f")));
    assert_eq!(words(&mut w), ["left 2@127.0.0.1"]);
}

#[test]
fn dead_and_revived_jobs_are_reported() {
    let mut w = setup(World::new(), "p", policy(1, &[]), &["p"]);
    w.core.set_lifecycle_events(true);
    let h = w.bg(1, "p", "", "x");
    let (held, _) = w.grab_job(2);
    w.fail(2, &held);
    assert_eq!(w.core.retry_dead_jobs(&DeadSelect::Handles(vec![h])), 1);
    w.advance_to(0);
    assert_eq!(
        words(&mut w),
        [
            "created",
            "started",
            "failed fail ",
            "dead 1 fail fail",
            "revived"
        ]
    );
}

#[test]
fn a_dead_event_says_the_attempts_and_the_last_failure() {
    // Retried after a WORK_FAIL, then dead after an exception with a text:
    // the event carries the last one, with the runs it had.
    let mut w = setup(World::new(), "p", policy(2, &[Reason::Fail]), &["p"]);
    w.core.set_lifecycle_events(true);
    let h = w.bg(1, "p", "", "x");
    let (held, _) = w.grab_job(2);
    w.fail(2, &held);
    w.advance_to(1_000);
    let (held, _) = w.grab_job(2);
    exception(&mut w, 2, &held, "disk full");
    let dead: Vec<LiveEvent> = std::mem::take(&mut w.events)
        .into_iter()
        .filter(|e| matches!(e.kind, EventKind::Dead { .. }))
        .collect();
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(
        dead[0].kind,
        EventKind::Dead {
            handle: h,
            function: b("p"),
            attempts: 2,
            reason: Some(Reason::Exception),
            error: b("disk full"),
        }
    );
}

#[test]
fn with_events_off_nothing_is_reported() {
    let mut w = setup(World::new(), "p", policy(2, &[Reason::Fail]), &["p", "f"]);
    w.conn(3);
    w.can_do(3, &["f"]);
    let h = w.bg(1, "p", "", "x");
    let (held, _) = w.grab_job(2);
    status(&mut w, 2, &held, "1", "2");
    w.fail(2, &held);
    w.advance_to(1_000);
    let (held, _) = w.grab_job(2);
    w.complete(2, &held, "ok");
    w.fg(1, "f", "", "y");
    w.grab_job(3);
    w.disconnect(3);
    w.core.cancel_job(&h).ok();
    assert!(w.events.is_empty(), "{:?}", w.events);
}

#[test]
fn only_the_kinds_asked_for_are_reported() {
    use gearshift_core::events::Kind;
    let mut w = checked(World::new());
    with_policy(&mut w, "p", policy(2, &[Reason::Fail]));
    // What a dashboard asks for: failures, retries, the dead set, workers.
    let mask = [
        Kind::Failed,
        Kind::Retrying,
        Kind::Dead,
        Kind::WorkerJoined,
        Kind::WorkerLeft,
    ]
    .iter()
    .fold(0, |m, k| m | k.bit());
    w.core.set_event_kinds(mask);
    w.conns(&[1, 2, 3]);
    w.can_do(2, &["p"]);
    let h = w.bg(1, "p", "", "x");
    let (held, _) = w.grab_job(2);
    status(&mut w, 2, &held, "1", "2");
    w.fail(2, &held);
    w.advance_to(1_000);
    let (held, _) = w.grab_job(2);
    w.fail(2, &held);
    w.can_do(3, &["f"]);
    w.fg(1, "f", "", "y");
    let (held, _) = w.grab_job(3);
    w.complete(3, &held, "ok");
    w.disconnect(3);
    assert_eq!(
        words(&mut w),
        [
            "joined 2@127.0.0.1 1",
            "failed fail ",
            "retrying 1000",
            "failed fail ",
            "dead 2 fail fail",
            "joined 3@127.0.0.1 1",
            "left 3@127.0.0.1"
        ]
    );
    let _ = h;
    // Kinds map to words and back, and `all` has every bit.
    for k in Kind::ALL {
        assert_eq!(Kind::from_word(k.word()), Some(k));
        assert_ne!(Kind::all() & k.bit(), 0);
    }
    assert_eq!(Kind::from_word("stats"), None);
}
