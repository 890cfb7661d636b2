//! Per-function counters and histograms on virtual time: what counts as a
//! submission, completion, failure (by reason) and retry, the wait and run
//! latencies, and totals that outlive a dropped function.

mod common;

use common::policy::*;
use common::{b, World};
use gearshift_core::function::FuncStats;
use gearshift_core::policy::Reason;
use gearshift_core::JobRecord;

fn stats(w: &World, name: &str) -> FuncStats {
    w.core
        .functions_view()
        .into_iter()
        .find(|f| f.name[..] == *name.as_bytes())
        .map(|f| f.stats)
        .unwrap_or_else(|| panic!("no function {name}"))
}

#[test]
fn wait_and_run_land_in_their_buckets() {
    let mut w = checked(World::new());
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    w.bg(1, "f", "", "x");
    w.now = 30;
    let (h, _) = w.grab_job(2);
    w.now = 130;
    w.complete(2, &h, "r");
    let s = stats(&w, "f");
    assert_eq!((s.submitted, s.completed, s.retried), (1, 1, 0));
    assert_eq!(s.failed, [0; 4]);
    assert_eq!((s.wait.count, s.wait.sum_ms), (1, 30));
    assert_eq!(s.wait.buckets[4], 1, "30 ms waits in the 50 ms bucket");
    assert_eq!((s.run.count, s.run.sum_ms), (1, 100));
    assert_eq!(s.run.buckets[5], 1, "100 ms runs in the 100 ms bucket");
}

#[test]
fn a_coalesced_submission_counts_once_and_restored_jobs_not_at_all() {
    let mut w = World::new();
    w.conns(&[1, 3]);
    w.bg(1, "f", "u", "x");
    w.fg(3, "f", "u", "x");
    w.bg(1, "f", "-", "y");
    w.bg(1, "f", "-", "y");
    assert_eq!(stats(&w, "f").submitted, 2);
    w.restore(
        vec![JobRecord {
            id: 100,
            handle: b("H:localhost:100"),
            function: b("g"),
            unique: b(""),
            priority: 1,
            data: b("d"),
            reducer: None,
            due_ms: None,
            attempts: 0,
            created_ms: 0,
        }],
        101,
    );
    assert_eq!(stats(&w, "g").submitted, 0);
    assert_eq!(w.core.totals().submitted, 2);
}

#[test]
fn failures_count_by_reason_and_retries_by_policy_or_requeue() {
    let mut w = setup(
        World::new(),
        "p",
        policy(3, &[Reason::Fail, Reason::Exception]),
        &["p", "plain"],
    );
    let h = w.bg(1, "p", "", "x");
    let (held, _) = w.grab_job(2);
    exception(&mut w, 2, &held, "boom");
    w.advance_to(1_000);
    let (held, _) = w.grab_job(2);
    w.fail(2, &held);
    w.advance_to(3_000);
    let (held, _) = w.grab_job(2);
    assert_eq!(held, h);
    w.complete(2, &held, "ok");
    let s = stats(&w, "p");
    assert_eq!(s.failed, [1, 1, 0, 0]);
    assert_eq!((s.retried, s.completed, s.run.count), (2, 1, 3));
    // The retry waited from its due time, not its submission.
    assert_eq!(s.wait.sum_ms, 0);

    // No policy: a lost worker requeues (gearmand), a WORK_FAIL is final.
    w.conn(5);
    w.can_do(5, &["plain"]);
    w.bg(1, "plain", "", "y");
    w.grab_job(5);
    w.disconnect(5);
    let (held, _) = w.grab_job(2);
    w.fail(2, &held);
    let s = stats(&w, "plain");
    assert_eq!(s.failed, [1, 0, 0, 1]);
    assert_eq!((s.retried, s.completed, s.run.count), (1, 0, 2));
    let t = w.core.totals();
    assert_eq!(
        (t.submitted, t.completed, t.failed, t.retried),
        (2, 1, 4, 3)
    );
}

#[test]
fn totals_keep_what_a_dropped_function_did() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    w.bg(1, "f", "", "x");
    let (h, _) = w.grab_job(2);
    w.complete(2, &h, "r");
    w.req(2, gearshift_proto::Request::ResetAbilities);
    assert_eq!(w.probe("drop function f"), "OK\r\n");
    let t = w.core.totals();
    assert_eq!((t.functions, t.submitted, t.completed), (0, 1, 1));
}
