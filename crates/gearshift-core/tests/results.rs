//! Work results on their way back: WORK_EXCEPTION versus its WORK_FAIL
//! downgrade, ownership checks with gearmand's exact error texts, and
//! GET_STATUS.

mod common;

use bytes::Bytes;
use common::{b, err, World};
use gearshift_core::CoreConfig;
use gearshift_proto::{Request, Response};

const RESULT_NOT_FOUND: &str = "Job given in work result not found";
const DATA_NOT_FOUND: &str = "Job does not exist on server";
const EXC_NOT_FOUND: &str = "An exception was received for a job that does not exist";

fn exception(w: &mut World, n: u64, h: &Bytes, data: &str) {
    w.req(
        n,
        Request::WorkException {
            handle: h.clone(),
            data: b(data),
        },
    );
}

/// Every WORK_* packet for `h` sent from `n`, each with its expected error text.
fn all_work_packets(h: &Bytes) -> Vec<(Request, &'static str)> {
    vec![
        (
            Request::work_status(h.clone(), b("1"), b("2")),
            RESULT_NOT_FOUND,
        ),
        (
            Request::WorkData {
                handle: h.clone(),
                data: b("d"),
            },
            DATA_NOT_FOUND,
        ),
        (
            Request::WorkWarning {
                handle: h.clone(),
                data: b("w"),
            },
            DATA_NOT_FOUND,
        ),
        (
            Request::WorkException {
                handle: h.clone(),
                data: b("e"),
            },
            EXC_NOT_FOUND,
        ),
        (Request::WorkFail { handle: h.clone() }, RESULT_NOT_FOUND),
        (
            Request::WorkComplete {
                handle: h.clone(),
                data: b("c"),
            },
            RESULT_NOT_FOUND,
        ),
    ]
}

#[test]
fn exception_reaches_clients_that_asked_others_get_bare_fail() {
    let mut w = World::new();
    w.conns(&[1, 2, 9]);
    w.req(1, Request::Option(b("exceptions")));
    w.expect(1, Response::OptionRes(b("exceptions")));
    let h = w.fg(1, "f", "k", "x");
    w.fg(2, "f", "k", "x");
    w.can_do(9, &["f"]);
    w.grab_job(9);
    exception(&mut w, 9, &h, "boom");
    w.expect(
        1,
        Response::WorkException {
            handle: h.clone(),
            data: b("boom"),
        },
    );
    // Just the handle: no trailing NUL, no data.
    let fail = w.pop(2);
    assert_eq!(fail, Response::WorkFail(h.clone()));
    if let Response::WorkFail(body) = fail {
        assert!(!body.ends_with(b"\0"));
    }
    w.all_quiet();
    assert_eq!(w.core.job_count(), 0);
}

#[test]
fn exceptions_config_forwards_to_everyone() {
    let mut w = World::with(CoreConfig {
        exceptions: true,
        ..CoreConfig::default()
    });
    w.conns(&[1, 9]);
    let h = w.fg(1, "f", "", "x");
    w.can_do(9, &["f"]);
    w.grab_job(9);
    exception(&mut w, 9, &h, "boom");
    w.expect(
        1,
        Response::WorkException {
            handle: h,
            data: b("boom"),
        },
    );
}

#[test]
fn work_packets_for_unknown_handles_are_refused_with_gearmand_texts() {
    let mut w = World::new();
    w.conn(9);
    for bad in ["H:localhost:77", "nonsense", "", "H:localhost:01"] {
        for (req, text) in all_work_packets(&b(bad)) {
            w.req(9, req);
            w.expect(9, err("JOB_NOT_FOUND", text));
        }
    }
    w.all_quiet();
}

#[test]
fn work_packets_from_a_non_holder_are_refused_and_change_nothing() {
    let mut w = World::new();
    w.conns(&[1, 8, 9]);
    let h = w.fg(1, "f", "", "x");
    w.can_do(8, &["f"]);
    w.can_do(9, &["f"]);
    // Queued, held by nobody.
    for (req, text) in all_work_packets(&h) {
        w.req(9, req);
        w.expect(9, err("JOB_NOT_FOUND", text));
    }
    w.grab_job(8);
    // Running, held by 8: 9 and the client are still refused.
    for who in [9, 1] {
        for (req, text) in all_work_packets(&h) {
            w.req(who, req);
            w.expect(who, err("JOB_NOT_FOUND", text));
        }
    }
    w.all_quiet();
    assert_eq!(w.status_of("f"), Some((1, 1, 2)));
    w.complete(8, &h, "r");
    w.expect(
        1,
        Response::WorkComplete {
            handle: h,
            data: b("r"),
        },
    );
}

#[test]
fn duplicate_terminal_packets_are_refused() {
    let mut w = World::new();
    w.conns(&[1, 9]);
    w.can_do(9, &["f"]);
    let h = w.fg(1, "f", "", "x");
    w.grab_job(9);
    w.complete(9, &h, "r");
    w.expect(
        1,
        Response::WorkComplete {
            handle: h.clone(),
            data: b("r"),
        },
    );
    for (req, text) in all_work_packets(&h) {
        w.req(9, req);
        w.expect(9, err("JOB_NOT_FOUND", text));
    }
    w.all_quiet();
}

#[test]
fn fail_and_exception_end_the_job() {
    let mut w = World::new();
    w.conns(&[1, 9]);
    w.can_do(9, &["f"]);
    let h1 = w.fg(1, "f", "", "1");
    let h2 = w.fg(1, "f", "", "2");
    w.grab_job(9);
    w.grab_job(9);
    w.fail(9, &h1);
    exception(&mut w, 9, &h2, "e");
    assert_eq!(
        w.packets(1),
        vec![
            Response::WorkFail(h1.clone()),
            Response::WorkFail(h2.clone())
        ]
    );
    w.fail(9, &h1);
    w.expect(9, err("JOB_NOT_FOUND", RESULT_NOT_FOUND));
    assert_eq!(w.status_of("f"), Some((0, 0, 1)));
}

#[test]
fn get_status_reports_known_running_and_progress() {
    let mut w = World::new();
    w.conns(&[1, 9]);
    let h = w.fg(1, "f", "", "x");
    let status = |h: &Bytes, known, running, numerator, denominator| Response::StatusRes {
        handle: h.clone(),
        known,
        running,
        numerator,
        denominator,
    };
    w.req(1, Request::GetStatus(h.clone()));
    w.expect(1, status(&h, true, false, 0, 0));
    w.can_do(9, &["f"]);
    w.grab_job(9);
    w.req(1, Request::GetStatus(h.clone()));
    w.expect(1, status(&h, true, true, 0, 0));
    w.req(9, Request::work_status(h.clone(), b("7"), b("9")));
    w.expect(
        1,
        Response::WorkStatus {
            handle: h.clone(),
            numerator: b("7"),
            denominator: b("9"),
        },
    );
    w.req(1, Request::GetStatus(h.clone()));
    w.expect(1, status(&h, true, true, 7, 9));
    // A requeue resets the progress.
    w.disconnect(9);
    w.req(1, Request::GetStatus(h.clone()));
    w.expect(1, status(&h, true, false, 0, 0));
    // Unknown (or finished) handles: all zero.
    let unknown = b("H:localhost:999");
    w.req(1, Request::GetStatus(unknown.clone()));
    w.expect(1, status(&unknown, false, false, 0, 0));
    w.conn(10);
    w.can_do(10, &["f"]);
    w.grab_job(10);
    w.complete(10, &h, "");
    w.clear();
    w.req(1, Request::GetStatus(h.clone()));
    w.expect(1, status(&h, false, false, 0, 0));
}

#[test]
fn work_data_before_completion_is_forwarded_in_order() {
    let mut w = World::new();
    w.conns(&[1, 9]);
    let h = w.fg(1, "f", "", "x");
    w.can_do(9, &["f"]);
    w.grab_job(9);
    for i in 0..5 {
        w.req(
            9,
            Request::WorkData {
                handle: h.clone(),
                data: b(&i.to_string()),
            },
        );
    }
    w.complete(9, &h, "end");
    let got = w.packets(1);
    assert_eq!(got.len(), 6);
    for (i, r) in got[..5].iter().enumerate() {
        assert_eq!(
            r,
            &Response::WorkData {
                handle: h.clone(),
                data: b(&i.to_string())
            }
        );
    }
    w.quiet(9);
}
