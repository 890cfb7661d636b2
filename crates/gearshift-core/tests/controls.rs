//! Operator controls on virtual time: `require_worker` refuses what no
//! worker can run, `pause` / `resume` hold a function's jobs.

mod common;

use common::policy::*;
use common::{b, World};
use gearshift_proto::{Request, Response};

#[test]
fn require_worker_refuses_a_submission_nobody_can_run() {
    let mut w = checked(World::new());
    let mut p = policy(1, &[]);
    p.require_worker = true;
    with_policy(&mut w, "needs_*", p);
    w.conns(&[1, 2]);
    w.req(
        1,
        Request::submit(Box::new(common::job("needs_w", "", "x"))),
    );
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
fn function_actions_take_any_name_the_text_protocol_cannot() {
    use gearshift_core::function::FunctionError;
    let mut w = checked(World::new());
    w.conns(&[1, 2]);
    // A name with a space: one function, whatever the admin line would split.
    assert_eq!(w.core.create_function(b"my func"), Ok(true));
    assert_eq!(w.core.create_function(b"my func"), Ok(false));
    assert_eq!(w.status_of("my func"), Some((0, 0, 0)));
    // Any bytes, as gearmand takes them (Perl's prefixed names hold a TAB).
    assert_eq!(w.core.create_function(b"p\tname"), Ok(true));
    assert_eq!(w.core.create_function(b""), Err(FunctionError::BadName));

    // Queue limits: the next submission past them is refused.
    assert_eq!(w.core.set_max_queue(b"my func", [1, 1, 1]), Ok(()));
    assert_eq!(
        w.core.set_max_queue(b"no such", [1, 1, 1]),
        Err(FunctionError::NotFound)
    );
    w.bg(1, "my func", "", "a");
    w.req(
        1,
        Request::submit(Box::new(common::job_with(
            "my func",
            "",
            "b",
            gearshift_proto::Priority::Normal,
            true,
        ))),
    );
    assert_eq!(w.pop(1), common::err("QUEUE_ERROR", "Job queue is full"));

    // Dropped only when idle and empty; the name matches in any ASCII case.
    assert_eq!(
        w.core.drop_function_named(b"MY FUNC"),
        Err(FunctionError::Queued)
    );
    w.can_do(2, &["my func"]);
    assert_eq!(
        w.core.drop_function_named(b"my func"),
        Err(FunctionError::Busy)
    );
    let (h, _) = w.grab_job(2);
    w.complete(2, &h, "ok");
    w.req(2, Request::ResetAbilities);
    assert_eq!(w.core.drop_function_named(b"My Func"), Ok(()));
    assert_eq!(w.status_of("my func"), None);
    assert_eq!(
        w.core.drop_function_named(b"my func"),
        Err(FunctionError::NotFound)
    );
}
