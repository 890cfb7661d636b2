//! The admin text protocol against live state: the listings, cancel,
//! create/drop function, maxqueue, the one-line answers, shutdown and the
//! too-many-words close.

mod common;

use bytes::Bytes;
use common::{b, err, job_with, Out, World};
use gearshift_core::CoreConfig;
use gearshift_proto::{Priority, Request, Response};

fn hs(h: &Bytes) -> String {
    String::from_utf8_lossy(h).into_owned()
}

#[test]
fn status_lists_total_running_workers() {
    let mut w = World::new();
    w.conns(&[1, 2, 3]);
    assert_eq!(w.probe("status"), ".\n");
    w.fg(1, "f", "", "1");
    w.fg(1, "f", "", "2");
    w.bg(1, "g", "", "3");
    w.can_do(2, &["f"]);
    w.can_do(3, &["f", "h"]);
    w.grab_job(2);
    assert_eq!(
        w.admin(1, "status"),
        "f\t2\t1\t2\ng\t1\t0\t0\nh\t0\t0\t1\n.\n"
    );
    assert_eq!(w.admin(1, "STATUS"), w.admin(1, "status"));
}

#[test]
fn prioritystatus_lists_queued_per_priority_and_workers() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.submit(1, job_with("f", "", "h", Priority::High, false));
    w.submit(1, job_with("f", "", "l", Priority::Low, true));
    w.submit(1, job_with("f", "", "l2", Priority::Low, true));
    w.can_do(2, &["f"]);
    assert_eq!(w.admin(1, "prioritystatus"), "f\t1\t0\t2\t1\n.\n");
}

#[test]
fn workers_lists_every_connection_newest_can_do_first() {
    let mut w = World::new();
    w.conn(5);
    w.conn_from(7, "10.0.0.7", false);
    w.can_do(7, &["f1", "f2", "f3"]);
    w.req(7, Request::SetClientId(b("worker-7")));
    // A repeated CAN_DO moves the function to the front, once.
    w.can_do(7, &["f1"]);
    w.conn(9);
    w.req(9, Request::SetClientId(b("")));
    w.can_do(9, &["g"]);
    assert_eq!(
        w.admin(5, "workers"),
        "5 127.0.0.1 - :\n7 10.0.0.7 worker-7 : f1 f3 f2\n9 127.0.0.1  : g\n.\n"
    );
    w.req(7, Request::CantDo(b("f3")));
    w.disconnect(9);
    assert_eq!(
        w.admin(5, "workers"),
        "5 127.0.0.1 - :\n7 10.0.0.7 worker-7 : f1 f2\n.\n"
    );
}

#[test]
fn client_id_is_truncated_to_127_bytes() {
    let mut w = World::new();
    w.conn(1);
    let long = "x".repeat(300);
    w.req(1, Request::SetClientId(b(&long)));
    let out = w.admin(1, "workers");
    assert_eq!(out, format!("1 127.0.0.1 {} :\n.\n", "x".repeat(127)));
}

#[test]
fn show_jobs_and_show_unique_jobs() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    let h1 = w.fg(1, "f", "u1", "a");
    let h2 = w.bg(1, "f", "", "b");
    let h3 = w.fg(1, "g", "-", "c");
    w.can_do(2, &["f"]);
    w.grab_job(2);
    w.disconnect(2); // h1 back with one retry
    let want = format!(
        "{}\t1\t0\t0\n{}\t0\t0\t1\n{}\t0\t0\t0\n.\n",
        hs(&h1),
        hs(&h2),
        hs(&h3)
    );
    assert_eq!(w.admin(1, "show jobs"), want);
    assert_eq!(w.admin(1, "show unique jobs"), "u1\n\n-\n.\n");
}

#[test]
fn cancel_queued_job_removes_it_and_fails_its_clients() {
    let mut w = World::new();
    w.conns(&[1, 2, 3, 8]);
    let h = w.fg(1, "f", "k", "x");
    w.fg(2, "f", "k", "x");
    let other = w.fg(1, "f", "", "y");
    assert_eq!(w.admin(8, &format!("cancel job {}", hs(&h))), "OK\r\n");
    w.expect(1, Response::WorkFail(h.clone()));
    w.expect(2, Response::WorkFail(h.clone()));
    assert_eq!(w.status_of("f"), Some((1, 0, 0)));
    assert_eq!(w.show_jobs().len(), 1);
    w.can_do(3, &["f"]);
    assert_eq!(w.grab_job(3).0, other);
    w.grab_none(3);
    assert_eq!(
        w.admin(8, &format!("cancel job {}", hs(&h))),
        "ERR UNKNOWN_JOB\r\n"
    );
}

#[test]
fn cancel_running_job_waits_for_its_worker() {
    let mut w = World::new();
    w.conns(&[1, 2, 8]);
    let h = w.fg(1, "f", "", "x");
    w.can_do(2, &["f"]);
    w.grab_job(2);
    assert_eq!(w.admin(8, &format!("cancel job {}", hs(&h))), "OK\r\n");
    w.expect(1, Response::WorkFail(h.clone()));
    w.quiet(2); // the worker is not told
    assert_eq!(w.admin(8, "show jobs"), format!("{}\t0\t1\t0\n.\n", hs(&h)));
    assert_eq!(w.status_of("f"), Some((1, 1, 1)));
    // Its progress and completion are accepted silently.
    w.req(
        2,
        Request::WorkData {
            handle: h.clone(),
            data: b("d"),
        },
    );
    w.complete(2, &h, "r");
    w.all_quiet();
    assert_eq!(w.admin(8, "show jobs"), ".\n");
    assert_eq!(w.status_of("f"), Some((0, 0, 1)));
}

#[test]
fn cancelled_running_job_is_reaped_if_its_worker_leaves() {
    let mut w = World::new();
    w.conns(&[1, 2, 3, 8]);
    let h = w.bg(1, "f", "", "x");
    w.can_do(2, &["f"]);
    w.can_do(3, &["f"]);
    w.grab_job(2);
    w.admin(8, &format!("cancel job {}", hs(&h)));
    w.disconnect(2);
    assert_eq!(w.admin(8, "show jobs"), ".\n");
    w.grab_none(3);
}

#[test]
fn cancel_unknown_and_malformed() {
    let mut w = World::new();
    w.conn(8);
    assert_eq!(
        w.admin(8, "cancel job H:localhost:5"),
        "ERR UNKNOWN_JOB\r\n"
    );
    assert_eq!(w.admin(8, "cancel job bogus"), "ERR UNKNOWN_JOB\r\n");
    assert_eq!(w.admin(8, "cancel foo bar"), "ERR UNKNOWN_ERROR\r\n");
}

#[test]
fn create_and_drop_function() {
    let mut w = World::new();
    w.conns(&[1, 2, 8]);
    assert_eq!(w.admin(8, "create function made"), "OK\r\n");
    assert_eq!(w.admin(8, "status"), "made\t0\t0\t0\n.\n");
    assert_eq!(
        w.admin(8, "drop function nope"),
        "ERR function not found\r\n"
    );
    // Queued jobs, no workers.
    let h = w.bg(1, "made", "", "x");
    assert_eq!(
        w.admin(8, "drop function made"),
        "ERR there are still queued jobs\r\n"
    );
    // A worker registered.
    w.can_do(2, &["made"]);
    let busy = "ERR there are still connected workers or executing clients\r\n";
    assert_eq!(w.admin(8, "drop function made"), busy);
    w.grab_job(2);
    w.complete(2, &h, "");
    assert_eq!(w.admin(8, "drop function made"), busy);
    w.req(2, Request::CantDo(b("made")));
    // Idle and empty: dropped, case-insensitively.
    assert_eq!(w.admin(8, "drop function MADE"), "OK\r\n");
    assert_eq!(w.admin(8, "status"), ".\n");
    assert_eq!(
        w.admin(8, "drop function made"),
        "ERR function not found\r\n"
    );
    // The name can come back.
    w.bg(1, "made", "", "y");
    assert_eq!(w.status_of("made"), Some((1, 0, 0)));
}

#[test]
fn maxqueue_refuses_new_jobs_but_not_duplicates() {
    let mut w = World::new();
    w.conns(&[1, 8]);
    assert_eq!(w.admin(8, "create function f"), "OK\r\n");
    assert_eq!(w.admin(8, "maxqueue f 2"), "OK\r\n");
    let h = w.fg(1, "f", "k", "1");
    w.bg(1, "f", "", "2");
    w.req(1, Request::submit(Box::new(common::job("f", "", "3"))));
    w.expect(1, err("QUEUE_ERROR", "Job queue is full"));
    w.req(
        1,
        Request::submit(Box::new(job_with("f", "", "3", Priority::High, true))),
    );
    w.expect(1, err("QUEUE_ERROR", "Job queue is full"));
    // Coalesced duplicates, foreground or background, still go through.
    assert_eq!(w.fg(1, "f", "k", "dup"), h);
    assert_eq!(w.bg(1, "f", "k", "dup"), h);
    assert_eq!(w.status_of("f"), Some((2, 0, 0)));
    // Other functions are not limited.
    w.bg(1, "g", "", "x");
    // 0 lifts the limit.
    assert_eq!(w.admin(8, "maxqueue f 0"), "OK\r\n");
    w.bg(1, "f", "", "4");
    assert_eq!(w.status_of("f"), Some((3, 0, 0)));
}

#[test]
fn maxqueue_per_priority() {
    let mut w = World::new();
    w.conns(&[1, 8]);
    w.admin(8, "create function f");
    assert_eq!(w.admin(8, "maxqueue f 3 2 1"), "OK\r\n");
    let sub = |w: &mut World, p| {
        w.req(
            1,
            Request::submit(Box::new(job_with("f", "", "x", p, true))),
        );
        w.pop(1)
    };
    assert!(matches!(
        sub(&mut w, Priority::Low),
        Response::JobCreated(_)
    ));
    // Total is now 1: low limit 1 reached.
    assert_eq!(
        sub(&mut w, Priority::Low),
        err("QUEUE_ERROR", "Job queue is full")
    );
    assert!(matches!(
        sub(&mut w, Priority::Normal),
        Response::JobCreated(_)
    ));
    assert_eq!(
        sub(&mut w, Priority::Normal),
        err("QUEUE_ERROR", "Job queue is full")
    );
    assert!(matches!(
        sub(&mut w, Priority::High),
        Response::JobCreated(_)
    ));
    assert_eq!(
        sub(&mut w, Priority::High),
        err("QUEUE_ERROR", "Job queue is full")
    );
}

#[test]
fn maxqueue_for_unknown_function_is_ok_and_harmless() {
    let mut w = World::new();
    w.conns(&[1, 8]);
    assert_eq!(w.admin(8, "maxqueue ghost 1"), "OK\r\n");
    w.bg(1, "ghost", "", "1");
    w.bg(1, "ghost", "", "2");
    assert_eq!(w.status_of("ghost"), Some((2, 0, 0)));
}

#[test]
fn running_jobs_count_against_maxqueue() {
    let mut w = World::new();
    w.conns(&[1, 2, 8]);
    w.admin(8, "create function f");
    w.admin(8, "maxqueue f 1");
    let h = w.bg(1, "f", "", "1");
    w.can_do(2, &["f"]);
    w.grab_job(2);
    w.req(1, Request::submit(Box::new(common::job("f", "", "2"))));
    w.expect(1, err("QUEUE_ERROR", "Job queue is full"));
    w.complete(2, &h, "");
    w.bg(1, "f", "", "2");
}

#[test]
fn getpid_verbose_version() {
    let mut w = World::with(CoreConfig {
        pid: 4242,
        version: "gearshift-test".to_owned(),
        verbose: "INFO".to_owned(),
        ..CoreConfig::default()
    });
    w.conn(1);
    assert_eq!(w.admin(1, "getpid"), "OK 4242\n");
    assert_eq!(w.admin(1, "verbose"), "OK INFO\n");
    assert_eq!(w.admin(1, "version"), "OK gearshift-test\n");
    assert_eq!(
        w.admin(1, "bogus"),
        "ERR UNKNOWN_COMMAND Unknown+server+commandbogus\r\n"
    );
    assert!(w.shutdowns.is_empty());
}

#[test]
fn too_many_words_closes_without_reply() {
    let mut w = World::new();
    w.conn(1);
    w.core.handle(
        gearshift_core::ConnId(1),
        gearshift_core::Input::Admin(Box::new(gearshift_proto::parse_admin(b"a b c d e f"))),
        0,
    );
    let effects = w.core.take_effects();
    assert_eq!(
        effects,
        vec![gearshift_core::Effect::Close(gearshift_core::ConnId(1))]
    );
    // Five words is still a command.
    assert_eq!(w.admin(1, "cancel job x y z"), "ERR UNKNOWN_ERROR\r\n");
    w.conn(2);
    w.admin(2, "status status status status status status");
    assert_eq!(w.take(2), vec![Out::Close]);
}

#[test]
fn admin_and_binary_mix_on_one_connection() {
    let mut w = World::new();
    w.conn(1);
    let h = w.bg(1, "f", "", "x");
    assert_eq!(w.admin(1, "show jobs"), format!("{}\t0\t0\t1\n.\n", hs(&h)));
    w.req(1, Request::Echo(b("e")));
    w.expect(1, Response::EchoRes(b("e")));
}

// ---- client-chosen bytes in listings --------------------------------------

/// Names a client could use to forge or split listing lines.
const FORGERIES: &[&str] = &[
    "a\nfake\t9\t9\t9",
    "b\r",
    "\0c",
    "d\te",
    "e\x1b[2J",
    "f\x7f",
];

/// Asserts `text` is a listing of exactly `rows` lines of `cols` fields
/// split on `sep`, with no control byte but the separators; returns the rows.
fn well_formed(text: &str, sep: char, cols: usize, rows: usize) -> Vec<Vec<String>> {
    let body = text
        .strip_suffix(".\n")
        .unwrap_or_else(|| panic!("list not terminated: {text:?}"));
    let lines: Vec<&str> = body.lines().collect();
    assert_eq!(lines.len(), rows, "{text:?}");
    lines
        .iter()
        .map(|line| {
            assert!(
                !line
                    .bytes()
                    .any(|c| c != sep as u8 && (c < 0x20 || c == 0x7f)),
                "control byte in {line:?}"
            );
            let fields: Vec<String> = line.split(sep).map(str::to_owned).collect();
            assert_eq!(fields.len(), cols, "{line:?} in {text:?}");
            fields
        })
        .collect()
}

/// Asserts every `workers` line is `FD IP ID : F…` with `functions[i]`
/// functions on line i.
fn workers_well_formed(text: &str, functions: &[usize]) {
    let rows: Vec<Vec<String>> = text
        .strip_suffix(".\n")
        .unwrap_or_else(|| panic!("list not terminated: {text:?}"))
        .lines()
        .map(|l| l.split(' ').map(str::to_owned).collect())
        .collect();
    assert_eq!(rows.len(), functions.len(), "{text:?}");
    for (row, &n) in rows.iter().zip(functions) {
        assert!(row[0].parse::<i64>().is_ok(), "{row:?}");
        assert_eq!(row[3], ":", "{row:?}");
        assert_eq!(row.len(), 4 + n, "{row:?}");
        assert!(!row.concat().bytes().any(|c| c < 0x20 || c == 0x7f));
    }
}

#[test]
fn names_with_control_bytes_are_accepted_and_listed_escaped() {
    // gearmand takes any function name and client id (Perl's prefixed
    // names carry a TAB); only the listings escape them.
    let mut w = World::new();
    w.conns(&[1, 2]);
    let mut functions = 0;
    for (i, name) in FORGERIES.iter().enumerate() {
        w.can_do(2, &[name]);
        w.can_do_timeout(2, name, "5000");
        w.req(2, Request::SetClientId(b(&format!("w{name}"))));
        w.quiet(2);
        functions += 1;
        // A NUL ends a submission's function name on the wire; CAN_DO and
        // SET_CLIENT_ID, whose last argument is the rest of the body, keep it.
        if name.contains('\0') {
            continue;
        }
        let data = format!("d{i}");
        let h = w.bg(1, name, "", &data);
        let status = well_formed(&w.probe("status"), '\t', 4, functions);
        assert_eq!(status[functions - 1][1..], ["1", "0", "1"]);
        assert_eq!(w.grab_job(2), (h.clone(), b(&data)));
        w.complete(2, &h, "ok");
    }
    for name in FORGERIES.iter().filter(|n| !n.contains('\n')) {
        assert_eq!(w.admin(1, &format!("create function x{name}")), "OK\r\n");
        functions += 1;
    }
    let status = well_formed(&w.probe("status"), '\t', 4, functions);
    assert_eq!(status[0][0], "a\\x0afake\\x099\\x099\\x099");
    assert_eq!(status[3][0], "d\\x09e");
    well_formed(&w.probe("prioritystatus"), '\t', 5, functions);
    workers_well_formed(&w.probe("workers"), &[0, FORGERIES.len(), 0]);
    assert!(w.probe("workers").contains(" wf\\x7f : "));
}

#[test]
fn perl_prefixed_names_work_and_list_with_the_tab_escaped() {
    // Gearman::Client->new(prefix => "p") sends "p\tFUNC" everywhere.
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.can_do(2, &["p\treverse"]);
    w.quiet(2);
    let h = w.fg(1, "p\treverse", "", "abc");
    assert_eq!(w.probe("status"), "p\\x09reverse\t1\t0\t1\n.\n");
    assert_eq!(w.grab_job(2), (h.clone(), b("abc")));
    w.complete(2, &h, "cba");
    assert_eq!(
        w.pop(1),
        Response::WorkComplete {
            handle: h,
            data: b("cba")
        }
    );
    assert_eq!(
        w.admin(1, "workers"),
        "1 127.0.0.1 - :\n2 127.0.0.1 - : p\\x09reverse\n.\n"
    );
    // Another prefix is another function.
    w.bg(1, "q\treverse", "", "x");
    w.grab_none(2);
}

#[test]
fn uniques_with_control_bytes_are_listed_escaped() {
    let mut w = World::new();
    w.conn(1);
    for (i, unique) in ["u\nH:forged:1", "\r", "a\tb", ".", "\x1b", "plain"]
        .iter()
        .enumerate()
    {
        w.bg(1, "f", unique, &i.to_string());
    }
    let text = w.probe("show unique jobs");
    assert_eq!(
        text,
        "u\\x0aH:forged:1\n\\x0d\na\\x09b\n\\x2e\n\\x1b\nplain\n.\n"
    );
    well_formed(&text, '\n', 1, 6);
    // GET_STATUS_UNIQUE still finds them by their real bytes.
    w.req(1, Request::GetStatusUnique(b("a\tb")));
    match w.pop(1) {
        Response::StatusResUnique { known, .. } => assert!(known),
        other => panic!("expected STATUS_RES_UNIQUE, got {other:?}"),
    }
}

#[test]
fn spaces_in_names_cannot_shift_workers_columns() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    w.can_do(2, &["my func", "plain"]);
    w.req(2, Request::SetClientId(b("two words")));
    w.bg(1, "my func", "", "x");
    assert_eq!(
        w.admin(1, "workers"),
        "1 127.0.0.1 - :\n2 127.0.0.1 two\\x20words : plain my\\x20func\n.\n"
    );
    // TAB-separated listings show the space as it is, as gearmand does.
    assert_eq!(w.probe("status"), "my func\t1\t0\t1\nplain\t0\t0\t1\n.\n");
}

#[test]
fn restored_state_with_control_bytes_cannot_split_listings() {
    let mut w = World::new();
    w.conns(&[1, 2]);
    // Written by an older build or imported from gearmand: nothing checked it.
    let jobs = FORGERIES
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let id = i as u64 + 1;
            common::durable::stored(
                id,
                &format!("H:x\ny\t{id}"),
                f,
                &format!("u\n{f}"),
                Priority::ALL[i % 3],
            )
        })
        .collect();
    w.restore(jobs, 100);
    w.can_do(2, &["ok"]);
    let n = FORGERIES.len();

    let status = well_formed(&w.probe("status"), '\t', 4, n + 1);
    assert_eq!(status[0][0], "a\\x0afake\\x099\\x099\\x099");
    assert_eq!(status[2][0], "\\x00c");
    for row in &status {
        assert!(row[1..].iter().all(|c| c.parse::<u32>().is_ok()), "{row:?}");
    }
    let prio = well_formed(&w.probe("prioritystatus"), '\t', 5, n + 1);
    for row in &prio {
        assert!(row[1..].iter().all(|c| c.parse::<u32>().is_ok()), "{row:?}");
    }
    let jobs = well_formed(&w.probe("show jobs"), '\t', 4, n);
    assert_eq!(jobs[0][0], "H:x\\x0ay\\x091");
    let uniques = well_formed(&w.probe("show unique jobs"), '\n', 1, n);
    assert_eq!(uniques[1][0], "u\\x0ab\\x0d");
    // Clients, the worker of `ok`, and the probe itself.
    workers_well_formed(&w.probe("workers"), &[0, 1, 0]);

    // The state itself is untouched: a restored function may still be
    // named (its jobs must not be stranded), a job is found by its stored
    // handle, and only the listings escape them.
    w.can_do(2, &[FORGERIES[0], FORGERIES[2]]);
    w.quiet(2);
    workers_well_formed(&w.probe("workers"), &[0, 3, 0]);
    assert!(w
        .probe("workers")
        .contains(" : \\x00c a\\x0afake\\x099\\x099\\x099 ok\n"));
    assert_eq!(
        w.grab_job(2),
        (b("H:x\ny\t1"), b("data1")),
        "the oldest job of the worker's restored functions"
    );
    w.bg(1, FORGERIES[2], "", "again");
    assert_eq!(
        w.admin(1, &format!("create function {}", FORGERIES[3])),
        "OK\r\n"
    );
    let foreign = b("H:x\ny\t2");
    assert_eq!(
        w.admin(1, &format!("cancel job {}", hs(&foreign))),
        "OK\r\n"
    );
    well_formed(&w.probe("show jobs"), '\t', 4, n);
    well_formed(&w.probe("status"), '\t', 4, n + 1);
}
