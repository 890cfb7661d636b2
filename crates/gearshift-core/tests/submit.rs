//! Submitting jobs: handles, unique-size limits, the three grab flavours,
//! what a client's disconnect does to its jobs, and the small
//! request/answer packets (ECHO, OPTION_REQ, SET_CLIENT_ID).

mod common;

use common::{b, err, job, job_with, World};
use gearshift_core::CoreConfig;
use gearshift_proto::{GrabKind, Priority, Request, Response, Submit};

#[test]
fn handles_are_prefix_colon_counter_increasing_and_never_reused() {
    let mut w = World::with(CoreConfig {
        handle_prefix: "H:box".to_owned(),
        ..CoreConfig::default()
    });
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    let h1 = w.fg(1, "f", "", "a");
    let h2 = w.bg(1, "f", "", "b");
    assert_eq!(h1, b("H:box:1"));
    assert_eq!(h2, b("H:box:2"));
    // Finish both; new jobs must not get 1 or 2 again.
    for _ in 0..2 {
        let (h, _) = w.grab_job(2);
        w.complete(2, &h, "");
    }
    w.clear();
    assert_eq!(w.core.job_count(), 0);
    assert_eq!(w.fg(1, "f", "", "c"), b("H:box:3"));
    assert_eq!(w.fg(1, "g", "", "d"), b("H:box:4"));
}

#[test]
fn unique_longer_than_64_bytes_is_refused() {
    let mut w = World::new();
    w.conn(1);
    let long = "u".repeat(65);
    w.req(1, Request::submit(Box::new(job("f", &long, "x"))));
    w.expect(1, err("ARGUMENT_TOO_LARGE", "Unique value too large"));
    w.quiet(1);
    assert_eq!(w.core.job_count(), 0);
    // No handle was consumed by the refusal.
    assert_eq!(w.fg(1, "f", "", "x"), World::h(1));
}

#[test]
fn unique_of_exactly_64_bytes_is_kept_whole() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    let uniq: String = (0..64).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let h = w.fg(1, "f", &uniq, "x");
    w.can_do(2, &["f"]);
    match w.grab_kind(2, GrabKind::Uniq) {
        Response::JobAssignUniq {
            handle,
            function,
            unique,
            data,
        } => {
            assert_eq!(handle, h);
            assert_eq!(function, b("f"));
            assert_eq!(unique.len(), 64);
            assert_eq!(unique, b(&uniq));
            assert_eq!(data, b("x"));
        }
        other => panic!("expected JOB_ASSIGN_UNIQ, got {other:?}"),
    }
}

#[test]
fn grab_flavours_pick_the_assign_packet() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.can_do(2, &["f"]);
    let reduce = Submit {
        reducer: Some(b("red")),
        ..job("f", "u1", "d1")
    };
    let h1 = w.submit(1, reduce.clone());
    let h2 = w.fg(1, "f", "u2", "d2");
    let h3 = w.fg(1, "f", "u3", "d3");
    let h4 = w.submit(
        1,
        Submit {
            unique: b("u4"),
            ..reduce
        },
    );
    // GRAB_JOB_ALL on a reduce job → JOB_ASSIGN_ALL with the reducer.
    assert_eq!(
        w.grab_kind(2, GrabKind::All),
        Response::JobAssignAll {
            handle: h1,
            function: b("f"),
            unique: b("u1"),
            reducer: b("red"),
            data: b("d1"),
        }
    );
    // GRAB_JOB_ALL on a plain job → JOB_ASSIGN_UNIQ.
    assert_eq!(
        w.grab_kind(2, GrabKind::All),
        Response::JobAssignUniq {
            handle: h2,
            function: b("f"),
            unique: b("u2"),
            data: b("d2"),
        }
    );
    // GRAB_JOB → JOB_ASSIGN (no unique).
    assert_eq!(
        w.grab_kind(2, GrabKind::Plain),
        Response::JobAssign {
            handle: h3,
            function: b("f"),
            data: b("d3"),
        }
    );
    // GRAB_JOB_UNIQ on a reduce job → JOB_ASSIGN_UNIQ, no reducer.
    assert_eq!(
        w.grab_kind(2, GrabKind::Uniq),
        Response::JobAssignUniq {
            handle: h4,
            function: b("f"),
            unique: b("u4"),
            data: b("d1"),
        }
    );
    assert_eq!(w.grab_kind(2, GrabKind::All), Response::NoJob);
}

#[test]
fn foreground_job_whose_client_leaves_before_start_is_dropped() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    w.fg(1, "f", "", "gone");
    let keep = w.fg(2, "f", "", "kept");
    assert_eq!(w.status_of("f"), Some((2, 0, 0)));
    w.disconnect(1);
    assert_eq!(w.status_of("f"), Some((1, 0, 0)));
    assert_eq!(w.show_jobs().len(), 1);
    w.can_do(3, &["f"]);
    let (h, data) = w.grab_job(3);
    assert_eq!((h, data), (keep, b("kept")));
    w.grab_none(3);
}

#[test]
fn running_foreground_job_finishes_after_its_client_leaves() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    let h = w.fg(1, "f", "", "x");
    w.can_do(2, &["f"]);
    w.grab_job(2);
    w.disconnect(1);
    assert_eq!(w.status_of("f"), Some((1, 1, 1)));
    w.req(2, Request::work_status(h.clone(), b("1"), b("2")));
    w.complete(2, &h, "done");
    // Accepted: no error to the worker, nobody to forward to.
    w.all_quiet();
    assert_eq!(w.status_of("f"), Some((0, 0, 1)));
    assert_eq!(w.core.job_count(), 0);
}

#[test]
fn background_jobs_survive_the_submitter() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    let h = w.submit(1, job_with("f", "", "x", Priority::Low, true));
    w.disconnect(1);
    assert_eq!(w.status_of("f"), Some((1, 0, 0)));
    w.can_do(2, &["f"]);
    assert_eq!(w.grab_job(2).0, h);
    w.complete(2, &h, "r");
    w.all_quiet();
}

#[test]
fn background_submitter_gets_only_job_created() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    let h = w.bg(1, "f", "", "x");
    w.can_do(2, &["f"]);
    w.grab_job(2);
    w.req(
        2,
        Request::WorkData {
            handle: h.clone(),
            data: b("d"),
        },
    );
    w.complete(2, &h, "r");
    w.all_quiet();
}

#[test]
fn echo_is_answered_with_the_same_bytes() {
    let mut w = World::new();
    w.conn(1);
    w.req(1, Request::Echo(b("ping\0pong")));
    w.expect(1, Response::EchoRes(b("ping\0pong")));
    w.quiet(1);
}

#[test]
fn option_exceptions_is_the_only_option() {
    let mut w = World::new();
    w.conn(1);
    w.req(1, Request::Option(b("ExCePtIoNs")));
    w.expect(1, Response::OptionRes(b("ExCePtIoNs")));
    w.req(1, Request::Option(b("exceptionsx")));
    w.expect(
        1,
        err("UNKNOWN_OPTION", "Server does not recognize given option"),
    );
    w.quiet(1);
}

#[test]
fn set_client_id_is_silent() {
    let mut w = World::new();
    w.conn(1);
    w.req(1, Request::SetClientId(b("me")));
    w.quiet(1);
}

#[test]
fn many_submissions_get_distinct_consecutive_handles() {
    let mut w = World::new();
    w.conn(1);
    for i in 1..=50u64 {
        let s = job_with(
            "f",
            "",
            &i.to_string(),
            Priority::ALL[(i % 3) as usize],
            i % 2 == 0,
        );
        assert_eq!(w.submit(1, s), World::h(i));
    }
    assert_eq!(w.core.job_count(), 50);
}
