//! The HTTP API's actions as typed calls: cancelling queued and running
//! jobs, retrying and dropping dead jobs by set, function or handles, and
//! pausing and resuming a function (a resume wakes its sleeping workers).

mod common;

use bytes::Bytes;
use common::policy::*;
use common::World;
use gearshift_core::control::{ControlError, DeadSelect};
use gearshift_core::policy::Reason;
use gearshift_proto::Response;

#[test]
fn cancel_takes_queued_and_running_jobs_and_refuses_the_rest() {
    let mut w = setup(World::new(), "kept", policy(1, &[]), &["f", "kept"]);
    let queued = w.fg(1, "f", "", "a");
    let running = w.bg(1, "f", "", "b");
    // The queued foreground job is first in line: take it off the queue.
    assert_eq!(w.core.cancel_job(&queued), Ok(()));
    w.advance_to(0);
    w.expect(1, Response::WorkFail(queued.clone()));
    assert_eq!(w.core.cancel_job(&queued), Err(ControlError::UnknownJob));
    let (held, _) = w.grab_job(2);
    assert_eq!(held, running);
    assert_eq!(w.core.cancel_job(&running), Ok(()));
    assert_eq!(
        w.core.job_detail(&running, false).map(|d| d.summary.state),
        Some("cancelled")
    );
    // Already cancelled while its worker holds it: said as such.
    assert_eq!(
        w.core.cancel_job(&running),
        Err(ControlError::CancelRequested)
    );
    w.complete(2, &held, "late");
    assert!(w.core.job_detail(&running, false).is_none());
    // A kept result has finished.
    let kept = w.bg(1, "kept", "", "c");
    let (held, _) = w.grab_job(2);
    w.complete(2, &held, "ok");
    assert_eq!(w.core.cancel_job(&kept), Err(ControlError::Finished));
    assert_eq!(
        w.core.cancel_job(b"H:localhost:99"),
        Err(ControlError::UnknownJob)
    );
    // The admin word is the same code.
    let h = w.bg(1, "f", "", "d");
    assert_eq!(
        w.probe(&format!("cancel job {}", String::from_utf8_lossy(&h))),
        "OK\r\n"
    );
    assert_eq!(w.core.job_count(), 0);
}

/// Kills `n` jobs of `f` under a one-attempt policy; their handles.
fn kill(w: &mut World, f: &str, n: usize) -> Vec<Bytes> {
    (0..n)
        .map(|i| {
            let h = w.bg(1, f, "", &format!("{f}{i}"));
            let (held, _) = w.grab_job(2);
            w.fail(2, &held);
            h
        })
        .collect()
}

#[test]
fn dead_jobs_are_retried_or_dropped_by_set_function_or_handles() {
    let mut w = setup(World::new(), "*", policy(1, &[Reason::Fail]), &["f", "g"]);
    let f = kill(&mut w, "f", 3);
    let g = kill(&mut w, "g", 2);
    assert_eq!(w.core.retained_counts().1, 5);
    assert_eq!(
        w.core
            .retry_dead_jobs(&DeadSelect::Function(Bytes::from_static(b"g"))),
        2
    );
    assert_eq!(w.core.retained_counts().1, 3);
    let page = w.core.jobs_page(&Default::default());
    assert_eq!(
        page.jobs
            .iter()
            .map(|j| j.handle.clone())
            .collect::<Vec<_>>(),
        g
    );
    let pick = DeadSelect::Handles(vec![f[0].clone(), Bytes::from_static(b"H:nope:1")]);
    assert_eq!(w.core.retry_dead_jobs(&pick), 1);
    assert_eq!(
        w.core
            .drop_dead_jobs(&DeadSelect::Handles(vec![f[1].clone()])),
        1
    );
    assert_eq!(
        w.core
            .drop_dead_jobs(&DeadSelect::Handles(vec![f[1].clone()])),
        0
    );
    assert_eq!(w.core.drop_dead_jobs(&DeadSelect::All), 1);
    assert_eq!(w.core.retained_counts().1, 0);
    assert_eq!(w.core.retry_dead_jobs(&DeadSelect::All), 0);
    // The revived jobs run again.
    kill(&mut w, "f", 1);
    assert_eq!(w.core.retry_dead_jobs(&DeadSelect::All), 1);
    assert_eq!(w.core.job_count(), 4);
}

#[test]
fn a_resume_wakes_a_sleeping_worker() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    assert_eq!(w.core.set_paused(b"f", true), Ok(()));
    w.bg(1, "f", "", "x");
    w.sleep(2);
    w.quiet(2);
    assert_eq!(
        w.core.functions_view().first().map(|f| f.paused),
        Some(true)
    );
    assert_eq!(w.core.set_paused(b"f", false), Ok(()));
    // The effects of a direct call are collected by the next step.
    w.advance_to(1);
    w.expect(2, Response::Noop);
    // A new name is created paused, whatever bytes it holds (as CAN_DO).
    assert_eq!(w.core.set_paused(b"later", true), Ok(()));
    assert_eq!(w.core.set_paused(b"p\tlater", true), Ok(()));
    assert_eq!(w.core.functions_view().len(), 3);
}
