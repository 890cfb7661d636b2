//! The HTTP API's read-only views on scripted scenarios: job pages across
//! page boundaries (with function and state filters, and short pages when
//! the scan budget runs out), one job wherever it lives (and `show job`
//! agreeing with it), a job's outcome apart from its last failure, a
//! submitter that stops waiting, workers, the dead set and the server-wide
//! totals.

mod common;

use bytes::Bytes;
use common::policy::*;
use common::{b, epoch_job, World};
use gearshift_core::policy::Reason;
use gearshift_core::retained::Outcome;
use gearshift_core::submit::StopWaiting;
use gearshift_core::view::{JobQuery, StateFilter, MAX_SCAN};
use gearshift_proto::{Request, Response};

/// Every page of a query, followed to the end: the handles, and how many
/// pages it took.
fn all_pages(w: &World, mut q: JobQuery) -> (Vec<Bytes>, usize) {
    let mut out = Vec::new();
    let mut pages = 0;
    loop {
        let page = w.core.jobs_page(&q);
        pages += 1;
        out.extend(page.jobs.into_iter().map(|j| j.handle));
        match page.next {
            Some(n) => q.after = Some(n),
            None => return (out, pages),
        }
    }
}

#[test]
fn job_pages_follow_ids_with_filters_and_never_skip_or_repeat() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.can_do(2, &["a"]);
    let mut a = Vec::new();
    let mut b_jobs = Vec::new();
    for i in 0..25 {
        a.push(w.bg(1, "a", "", &format!("{i}")));
        b_jobs.push(w.bg(1, "b", "", &format!("{i}")));
    }
    // Three of a's jobs run.
    let running: Vec<Bytes> = (0..3).map(|_| w.grab_job(2).0).collect();
    let q = |function: Option<&str>, state: Option<StateFilter>| JobQuery {
        function: function.map(|f| Bytes::copy_from_slice(f.as_bytes())),
        state,
        limit: 4,
        after: None,
    };
    let (got, pages) = all_pages(&w, q(Some("a"), None));
    assert_eq!(got, a);
    assert!(pages >= 7, "4 per page: {pages}");
    let (got, _) = all_pages(&w, q(Some("a"), Some(StateFilter::Queued)));
    assert_eq!(got, a[3..]);
    let (got, _) = all_pages(&w, q(None, Some(StateFilter::Running)));
    assert_eq!(got, running);
    let (got, _) = all_pages(&w, q(None, None));
    assert_eq!(got.len(), 50);
    let mut sorted = got.clone();
    sorted.sort_by_key(|h| {
        String::from_utf8_lossy(h)
            .rsplit(':')
            .next()
            .and_then(|n| n.parse::<u64>().ok())
    });
    assert_eq!(got, sorted, "oldest first");
    let page = w.core.jobs_page(&q(Some("nope"), None));
    assert!(page.jobs.is_empty() && page.next.is_none());
    // Limit 0 is 100; the summary says what the job is.
    let page = w.core.jobs_page(&JobQuery {
        function: Some(Bytes::from_static(b"b")),
        ..JobQuery::default()
    });
    assert_eq!(page.jobs.len(), 25);
    assert_eq!(page.next, None);
    let j = &page.jobs[0];
    assert_eq!(
        (j.state, j.background, j.size, j.attempts),
        ("queued", true, 1, 0)
    );
}

#[test]
fn a_page_stops_after_its_scan_budget_with_a_cursor_to_go_on() {
    let mut w = World::new();
    w.conn(1);
    // Far more jobs than one page may look at; the one wanted is last.
    let n = MAX_SCAN + 2_000;
    for i in 0..n {
        w.bg(1, "bulk", "", &format!("{i}"));
    }
    let last = w.bg(1, "rare", "", "x");
    let q = JobQuery {
        function: Some(Bytes::from_static(b"rare")),
        ..JobQuery::default()
    };
    let first = w.core.jobs_page(&q);
    assert!(first.jobs.is_empty(), "short page");
    assert!(first.next.is_some());
    let (got, pages) = all_pages(&w, q);
    assert_eq!(got, [last]);
    assert!(pages >= 2);
}

#[test]
fn job_detail_finds_live_kept_and_dead_jobs() {
    let mut w = setup(World::new(), "p", policy(1, &[]), &["p", "plain"]);
    let live = w.bg(1, "plain", "u1", "data");
    let (h, _) = w.grab_job(2);
    assert_eq!(h, live);
    w.now = 10;
    w.req(
        2,
        gearshift_proto::Request::work_status(
            h.clone(),
            Bytes::from_static(b"1"),
            Bytes::from_static(b"4"),
        ),
    );
    let d = w.core.job_detail(&live, false).expect("live");
    assert_eq!(d.summary.state, "running");
    assert_eq!(d.summary.unique, Bytes::from_static(b"u1"));
    assert_eq!(d.progress, Some((1, 4)));
    assert_eq!(d.started, Some(0));
    assert!(d.history.is_empty(), "no policy, no history");
    w.complete(2, &h, "r");

    // Kept under the policy, with its result on request.
    let kept = w.bg(1, "p", "", "k");
    let (h, _) = w.grab_job(2);
    w.complete(2, &h, "ok");
    let d = w.core.job_detail(&kept, true).expect("kept");
    assert_eq!(d.summary.state, "completed");
    assert_eq!(d.result, Some(Bytes::from_static(b"ok")));
    assert_eq!(d.result_size, 2);
    assert_eq!(d.finished, Some(10));
    let words: Vec<&str> = d.history.iter().map(|e| e.step.word()).collect();
    assert_eq!(words, ["queued", "started", "completed"]);
    assert_eq!(w.core.job_detail(&kept, false).expect("kept").result, None);
    let page = w.core.jobs_page(&JobQuery {
        state: Some(StateFilter::Finished),
        ..JobQuery::default()
    });
    assert_eq!(page.jobs.len(), 1);
    assert_eq!(page.jobs[0].handle, kept);

    // Dead: one attempt, failed.
    let dead = w.bg(1, "p", "", "d");
    let (h, _) = w.grab_job(2);
    w.fail(2, &h);
    let d = w.core.job_detail(&dead, true).expect("dead");
    assert_eq!(d.summary.state, "dead");
    assert_eq!(d.result, None);
    assert_eq!(d.summary.attempts, 1);
    let dp = w.core.dead_page(Some(b"p"), 0, None);
    assert_eq!(dp.dead.len(), 1);
    assert_eq!(dp.dead[0].handle, dead);
    assert_eq!(dp.dead[0].size, 1);
    assert!(w.core.dead_page(Some(b"other"), 0, None).dead.is_empty());

    assert!(w.core.job_detail(b"H:localhost:999", false).is_none());
    assert!(w.core.job_detail(b"nonsense", false).is_none());
}

#[test]
fn dead_pages_go_on_from_their_cursor() {
    let mut w = setup(
        World::new(),
        "*",
        policy(1, &[Reason::Timeout]),
        &["f", "g"],
    );
    let mut dead = Vec::new();
    for i in 0..5 {
        let f = if i % 2 == 0 { "f" } else { "g" };
        let h = w.bg(1, f, "", &format!("{i}"));
        let (held, _) = w.grab_job(2);
        w.fail(2, &held);
        dead.push((f, h));
    }
    let mut got = Vec::new();
    let mut after = None;
    loop {
        let page = w.core.dead_page(Some(b"f"), 1, after);
        got.extend(page.dead.into_iter().map(|d| d.handle));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let want: Vec<Bytes> = dead
        .iter()
        .filter(|(f, _)| *f == "f")
        .map(|(_, h)| h.clone())
        .collect();
    assert_eq!(got, want);
}

#[test]
fn scheduled_and_retrying_jobs_are_told_apart() {
    let mut w = setup(World::new(), "p", policy(3, &[Reason::Fail]), &["p"]);
    let later = w.submit(1, epoch_job("p", "", "x", 1_000));
    let h = w.bg(1, "p", "", "y");
    let (held, _) = w.grab_job(2);
    assert_eq!(held, h);
    w.fail(2, &held);
    let state = |w: &World, s| {
        w.core
            .jobs_page(&JobQuery {
                state: Some(s),
                ..JobQuery::default()
            })
            .jobs
            .into_iter()
            .map(|j| j.handle)
            .collect::<Vec<_>>()
    };
    assert_eq!(state(&w, StateFilter::Scheduled), [later]);
    assert_eq!(state(&w, StateFilter::Retrying), [h]);
    let fv = w.core.functions_view();
    assert_eq!(fv.len(), 1);
    assert_eq!(fv[0].scheduled, 2);
    assert!(fv[0].policy.is_some());
}

#[test]
fn workers_and_totals_sort_connections_by_role() {
    let mut w = World::new();
    w.conns(&[1, 2, 3, 4, 5]);
    w.can_do(2, &["a"]);
    w.can_do(3, &["a", "b"]);
    w.admin(4, "status");
    // 5 sends nothing; 1 submits.
    let h = w.bg(1, "a", "", "x");
    let (held, _) = w.grab_job(3);
    assert_eq!(held, h);
    w.admin(1, "status");
    let workers = w.core.workers_view();
    assert_eq!(workers.iter().map(|v| v.id).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(workers[1].running, [h]);
    assert_eq!(
        workers[1].functions,
        [Bytes::from_static(b"b"), Bytes::from_static(b"a")]
    );
    let t = w.core.totals();
    assert_eq!((t.worker_conns, t.admin_conns, t.client_conns), (2, 1, 2));
    assert_eq!((t.running, t.queued, t.functions, t.workers), (1, 0, 2, 3));
}

#[test]
fn a_workers_stats_option_shows_in_its_view() {
    let mut w = World::new();
    w.conns(&[1]);
    w.can_do(1, &["a"]);
    assert_eq!(w.core.workers_view()[0].stats, None);
    w.req(1, Request::Option(b("stats cpu=2.5 rss=4096")));
    w.expect(1, Response::OptionRes(b("stats cpu=2.5 rss=4096")));
    let s = w.core.workers_view()[0].stats.expect("stats");
    assert_eq!((s.cpu_ms, s.max_rss_kib), (2_500, 4_096));
    // A malformed one is refused and changes nothing.
    w.req(1, Request::Option(b("stats cpu=lots")));
    w.expect(
        1,
        Response::error("INVALID_ARGUMENT", "stats takes cpu=SECONDS rss=KIB"),
    );
    assert_eq!(w.core.workers_view()[0].stats, Some(s));
}

#[test]
fn show_job_and_the_detail_agree_on_a_running_job_without_a_policy() {
    // No policy: nothing tracked, yet a running job has a start time in
    // both views (show job used to print `started: -`).
    let mut w = checked(World::new());
    w.conns(&[1, 2]);
    w.can_do(2, &["plain"]);
    let h = w.bg(1, "plain", "", "x");
    w.now = 1_234;
    let (held, _) = w.grab_job(2);
    assert_eq!(held, h);
    let d = w.core.job_detail(&h, false).expect("live");
    assert_eq!(d.started, Some(1_234));
    let fields = show_job(&mut w, &h);
    assert_eq!(value(&fields, "state"), "running");
    assert_eq!(value(&fields, "started"), "1970-01-01T00:00:01.234Z");
    assert_eq!(value(&fields, "worker"), "-@127.0.0.1");
    assert_eq!(value(&fields, "outcome"), "-");
    assert_eq!(value(&fields, "last_failure"), "-");
}

#[test]
fn a_job_that_completed_after_failures_is_not_shown_as_failed() {
    let retry = [Reason::Fail, Reason::Exception];
    let mut w = setup(World::new(), "p", policy(3, &retry), &["p"]);
    let h = w.bg(1, "p", "", "x");
    let (held, _) = w.grab_job(2);
    w.fail(2, &held);
    // Waiting for its retry: live, no outcome, its first run failed.
    let d = w.core.job_detail(&h, false).expect("retrying");
    assert_eq!(d.outcome, None);
    let f = d.last_failure.expect("a failure");
    assert_eq!((f.attempt, f.at, f.error), (Some(1), Some(0), b("fail")));
    w.advance_to(1_000);
    let (held, _) = w.grab_job(2);
    common::policy::exception(&mut w, 2, &held, "disk full");
    w.advance_to(3_000);
    let (held, _) = w.grab_job(2);
    w.complete(2, &held, "ok");

    let d = w.core.job_detail(&h, false).expect("kept");
    assert_eq!(d.summary.state, "completed");
    assert_eq!(d.outcome, Some(Outcome::Completed));
    // The failure of the second run, apart from how the job ended.
    let f = d.last_failure.clone().expect("a failure");
    assert_eq!(f.attempt, Some(2));
    assert_eq!(f.at, Some(1_000));
    assert_eq!(f.reason, Some(Reason::Exception));
    assert_eq!(f.describe(), "exception: disk full");
    // `error` keeps its meaning: the last failure's text.
    assert_eq!(d.error, Some(b("disk full")));
    let fields = show_job(&mut w, &h);
    assert_eq!(value(&fields, "state"), "completed");
    assert_eq!(value(&fields, "outcome"), "completed");
    assert_eq!(
        value(&fields, "last_failure"),
        "2 1970-01-01T00:00:01.000Z exception: disk full"
    );
    assert_eq!(value(&fields, "attempts"), "3");

    // One that never failed has none; a dead one failed on its last run.
    let ok = w.bg(1, "p", "", "y");
    let (held, _) = w.grab_job(2);
    w.complete(2, &held, "ok");
    assert_eq!(
        w.core.job_detail(&ok, false).expect("kept").last_failure,
        None
    );
    assert_eq!(value(&show_job(&mut w, &ok), "last_failure"), "-");
    let mut d1 = setup(World::new(), "p", policy(1, &[]), &["p"]);
    let dead = d1.bg(1, "p", "", "z");
    let (held, _) = d1.grab_job(2);
    d1.fail(2, &held);
    let d = d1.core.job_detail(&dead, false).expect("dead");
    assert_eq!(d.outcome, Some(Outcome::Dead));
    assert_eq!(d.last_failure.and_then(|f| f.attempt), Some(1));
}

#[test]
fn a_submitter_that_stops_waiting_drops_a_queued_job_not_a_running_one() {
    let mut w = checked(World::new());
    w.conns(&[1, 2, 3]);
    // Queued, only this submitter waits: dropped, it never runs.
    let queued = w.fg(1, "f", "", "a");
    assert_eq!(w.core.stop_waiting(&queued), StopWaiting::Dropped);
    assert!(w.core.job_detail(&queued, false).is_none());
    assert!(w.status_of("f").is_none_or(|s| s.0 == 0));
    // Two submissions of one job (one unique): left as it is.
    let shared = w.fg(1, "f", "u", "b");
    assert_eq!(w.fg(3, "f", "u", "b"), shared);
    assert_eq!(
        w.core.stop_waiting(&shared),
        StopWaiting::Shared { running: false }
    );
    assert_eq!(w.status_of("f").map(|s| s.0), Some(1));
    // Running: goes on, and its result goes to nobody.
    w.can_do(2, &["g"]);
    let running = w.fg(1, "g", "", "c");
    let (held, _) = w.grab_job(2);
    assert_eq!(w.core.stop_waiting(&running), StopWaiting::Running);
    assert_eq!(
        w.core.job_detail(&running, false).map(|d| d.summary.state),
        Some("running")
    );
    w.clear();
    w.complete(2, &held, "r");
    w.quiet(1);
    assert_eq!(w.core.stop_waiting(&running), StopWaiting::Ended);
    // A background job is nobody's to drop.
    let bg = w.bg(1, "f", "", "d");
    assert_eq!(
        w.core.stop_waiting(&bg),
        StopWaiting::Shared { running: false }
    );
}
