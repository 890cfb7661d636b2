//! `gearshift admin` end to end against a `gearshift serve --store memory`
//! child: tables, `--json`, and exit codes on `ERR` replies.

mod common;

use common::Server;

#[test]
fn status_table_and_json() {
    let s = Server::gearshift();
    let _w = s.worker("resize", &["--client-id", "resizer-1"]);
    let out = s.run(&["submit", "-b", "-f", "queued", "x"], b"");
    assert_eq!(out.code(), 0, "{out:?}");

    let out = s.run(&["admin", "status"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "FUNCTION  TOTAL  RUNNING  WORKERS");
    assert!(
        lines.contains(&"resize        0        0        1"),
        "{}",
        out.stdout
    );
    assert!(
        lines.contains(&"queued        1        0        0"),
        "{}",
        out.stdout
    );

    let rows = s.admin_json(&["status"]);
    let rows = rows.as_array().expect("array");
    assert_eq!(rows.len(), 2);
    let queued = rows
        .iter()
        .find(|r| r["function"] == "queued")
        .expect("queued");
    assert_eq!(queued["total"], 1);
    assert_eq!(queued["running"], 0);
    assert_eq!(queued["server"], s.addr.as_str());

    let workers = s.admin_json(&["workers"]);
    let w = workers
        .as_array()
        .and_then(|a| a.iter().find(|w| w["client_id"] == "resizer-1"))
        .unwrap_or_else(|| panic!("no resizer-1 in {workers}"));
    assert_eq!(w["functions"], serde_json::json!(["resize"]));
    let out = s.run(&["admin", "workers"], b"");
    assert!(out.stdout.starts_with("FD  IP"), "{}", out.stdout);
    assert!(out.stdout.contains("resizer-1  resize"), "{}", out.stdout);
}

#[test]
fn drop_function_nosuch_exits_non_zero() {
    let s = Server::gearshift();
    let out = s.run(&["admin", "drop-function", "nosuch"], b"");
    assert_eq!(out.code(), 1, "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("function not found"), "{}", out.stderr);
}

#[test]
fn management_commands() {
    let s = Server::gearshift();
    let pid = s.admin_json(&["getpid"]);
    assert_eq!(pid[0]["pid"], s.proc.pid());
    let out = s.run(&["admin", "version"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    assert!(!out.stdout.trim().is_empty() && out.stdout.lines().count() == 1);

    let out = s.run(&["admin", "create-function", "made"], b"");
    assert_eq!((out.code(), out.stdout.as_str()), (0, "OK\n"), "{out:?}");
    assert!(s.status_of("made").is_some());
    let out = s.run(&["admin", "maxqueue", "made", "1"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    let out = s.run(&["submit", "-b", "-f", "made", "one"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    let handle = out.stdout.trim().to_owned();
    let out = s.run(&["submit", "-b", "-f", "made", "two"], b"");
    assert_eq!(out.code(), 1, "queue full: {out:?}");

    let uniques = s.admin_json(&["unique-jobs"]);
    assert_eq!(uniques.as_array().map(Vec::len), Some(1), "{uniques}");
    let out = s.run(&["admin", "cancel", &handle], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    let out = s.run(&["admin", "cancel", &handle], b"");
    assert_eq!(out.code(), 1, "unknown job: {out:?}");
    let out = s.run(&["admin", "maxqueue", "made", "1", "2"], b"");
    assert_eq!(out.code(), 2, "{out:?}");

    let mut server = s;
    let out = server.run(&["admin", "shutdown"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    assert!(server.proc.wait_within(common::WAIT).success());
}
