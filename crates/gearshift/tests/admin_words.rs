//! `gearshift admin` against a `gearshift serve` child, for what an operator
//! reads and types: a name the admin text protocol cannot carry is refused
//! before anything is sent (naming the HTTP route), `retry-dead` /
//! `drop-dead` of a handle not in the dead set fail, `job H` agrees with the
//! HTTP API on a running job's start and shows a job's outcome apart from
//! its last failure, and epoch jobs are listed and dropped as schedules.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::{eventually, Server};
use serde_json::Value;

/// Runs `gearshift admin ARGS…` and returns its stdout, asserting exit 0.
fn admin(s: &Server, args: &[&str]) -> String {
    let mut all = vec!["admin"];
    all.extend_from_slice(args);
    let out = s.run(&all, b"");
    assert_eq!(out.code(), 0, "admin {args:?}: {out:?}");
    out.stdout
}

/// The server's HTTP address, from its log.
fn http_addr(s: &Server) -> String {
    let mut addr = String::new();
    eventually("the HTTP address in the log", || {
        let log = s
            .log
            .as_ref()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .unwrap_or_default();
        addr = log
            .split("http listening on ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or("")
            .to_owned();
        !addr.is_empty()
    });
    addr
}

/// `GET path` over plain HTTP/1.1: the JSON body.
fn http_get(addr: &str, path: &str) -> Value {
    let mut c = TcpStream::connect(addr).expect("connect HTTP");
    c.set_read_timeout(Some(common::WAIT)).expect("timeout");
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut text = String::new();
    c.read_to_string(&mut text).expect("read");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The value of `key` in `job H`'s `key  value` lines, if it has one.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(key).filter(|rest| rest.starts_with(' ')))
        .map(str::trim)
}

#[test]
fn a_name_the_text_protocol_cannot_carry_is_refused_with_the_http_route() {
    let s = Server::gearshift();
    for (args, route) in [
        (
            vec!["pause", "my func"],
            "POST /api/v1/functions/my%20func/pause",
        ),
        (
            vec!["drop-function", "my func"],
            "DELETE /api/v1/functions/my%20func",
        ),
        (
            vec!["maxqueue", "my func", "10"],
            r#"POST /api/v1/functions/my%20func/maxqueue with {"limit": 10}"#,
        ),
        (
            vec!["create-function", "two\nlines"],
            "POST /api/v1/functions/two%0Alines",
        ),
        (
            vec!["retry-dead", "all", "my func"],
            r#"POST /api/v1/dead/retry with {"function": "my func"}"#,
        ),
    ] {
        let mut all = vec!["admin"];
        all.extend_from_slice(&args);
        let out = s.run(&all, b"");
        assert_eq!(out.code(), 2, "{args:?}: {out:?}");
        assert_eq!(out.stdout, "", "{args:?}");
        assert!(out.stderr.contains(route), "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("admin text protocol cannot carry"),
            "{}",
            out.stderr
        );
    }
    // Nothing reached the server: neither half of the name is a function.
    let status = s.admin_json(&["status"]);
    assert_eq!(status, serde_json::json!([]), "{status}");
    // A plain name still goes through.
    assert_eq!(admin(&s, &["maxqueue", "plain", "10"]), "OK\n");
}

#[test]
fn retry_dead_and_drop_dead_of_a_handle_not_in_the_dead_set_fail() {
    let s = Server::gearshift();
    for (args, said) in [
        (vec!["retry-dead", "H:test:999"], "no dead job H:test:999"),
        (vec!["drop-dead", "H:test:999"], "no dead job H:test:999"),
        (
            vec!["drop-dead", "H:test:999", "f"],
            "no dead job H:test:999 of function f",
        ),
    ] {
        let mut all = vec!["admin"];
        all.extend_from_slice(&args);
        let out = s.run(&all, b"");
        assert_eq!(out.code(), 1, "{args:?}: {out:?}");
        assert_eq!(out.stdout, "", "{args:?}");
        assert!(out.stderr.contains(said), "{args:?}: {}", out.stderr);
    }
    // `all` matching nothing is no error.
    assert_eq!(admin(&s, &["retry-dead", "all"]), "0\n");
    assert_eq!(admin(&s, &["drop-dead", "all", "f"]), "0\n");
}

#[test]
fn job_shows_a_running_jobs_start_as_the_http_api_does() {
    let s = Server::gearshift();
    let http = http_addr(&s);
    let _slow = s.worker("slow", &["--", "sleep", "5"]);
    let out = s.run(&["submit", "-b", "-f", "slow", "x"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    let handle = out.stdout.trim().to_owned();
    let path = format!("/api/v1/jobs/{handle}");
    eventually("the job to run", || {
        http_get(&http, &path)["state"] == "running"
    });
    let api = http_get(&http, &path);
    let started_ms = api["started_ms"].as_u64().expect("started_ms");
    let text = admin(&s, &["job", &handle]);
    assert_eq!(field(&text, "state"), Some("running"), "{text}");
    // The same millisecond, as RFC 3339 (it used to print `-`).
    assert_eq!(
        field(&text, "started"),
        Some(gearshift_core::timefmt::rfc3339(started_ms).as_str()),
        "{text}"
    );
    assert_eq!(field(&text, "outcome"), Some("-"), "{text}");
}

#[test]
fn a_job_that_completed_after_a_failure_reads_completed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("gearshift.toml");
    std::fs::write(
        &cfg,
        "[[function]]\nmatch = \"flaky\"\nmax_attempts = 3\nretry_on = [\"fail\"]\n\
         initial_delay = \"10ms\"\njitter = false\nkeep_results = \"1h\"\n",
    )
    .expect("write config");
    let c = cfg.to_string_lossy().into_owned();
    let s = Server::gearshift_with(&["--store", "memory", "--config", &c]);
    // Fails its first run (no marker yet), completes the next.
    let marker = dir.path().join("ran");
    let script = format!(
        "if [ -e '{m}' ]; then cat; else touch '{m}'; exit 1; fi",
        m = marker.display()
    );
    let _w = s.worker("flaky", &["--", "sh", "-c", &script]);
    let out = s.run(&["submit", "-b", "-f", "flaky", "x"], b"");
    let handle = out.stdout.trim().to_owned();
    eventually("the job to complete", || {
        s.run(&["admin", "job", &handle], b"")
            .stdout
            .lines()
            .any(|l| l.starts_with("state") && l.ends_with("completed"))
    });
    let text = admin(&s, &["job", &handle]);
    assert_eq!(field(&text, "outcome"), Some("completed"), "{text}");
    let failure = field(&text, "last_failure").expect("a last_failure line");
    assert!(failure.starts_with("fail (attempt 1, "), "{text}");
    // The bare `error` row is left to JSON: no `error fail` beside `completed`.
    assert_eq!(field(&text, "error"), None, "{text}");
    let rows = s.admin_json(&["job", &handle]);
    let j = &rows[0];
    assert_eq!(j["state"], "completed", "{j}");
    assert_eq!(j["outcome"], "completed", "{j}");
    assert_eq!(j["error"], "fail", "{j}");
    assert!(
        j["last_failure"]
            .as_str()
            .is_some_and(|f| f.starts_with("fail (attempt 1, ")),
        "{j}"
    );
}

#[test]
fn epoch_jobs_are_listed_and_dropped_as_schedules() {
    let s = Server::gearshift();
    let out = s.run(
        &[
            "submit", "-f", "report", "--at", "+1h", "--unique", "daily", "x",
        ],
        b"",
    );
    assert_eq!(out.code(), 0, "{out:?}");
    let handle = out.stdout.trim().to_owned();
    let rows = s.admin_json(&["schedules"]);
    let rows = rows.as_array().expect("an array");
    assert_eq!(rows.len(), 1, "{rows:?}");
    let r = &rows[0];
    assert_eq!(r["handle"], handle.as_str(), "{r}");
    assert_eq!(
        (&r["function"], &r["when"], &r["source"], &r["unique"]),
        (
            &Value::from("report"),
            &Value::from("once"),
            &Value::from("client"),
            &Value::from("daily")
        ),
        "{r}"
    );
    assert!(r["next"].as_str().is_some_and(|t| t.ends_with('Z')), "{r}");
    let table = admin(&s, &["schedules"]);
    assert!(
        table.contains(&handle) && table.contains(" once "),
        "{table}"
    );

    // Dropping it cancels the job; a second drop is refused.
    assert_eq!(admin(&s, &["drop-schedule", &handle]), "OK\n");
    assert_eq!(s.admin_json(&["schedules"]), serde_json::json!([]));
    let out = s.run(&["admin", "job", &handle], b"");
    assert_eq!(out.code(), 1, "{out:?}");
    let out = s.run(&["admin", "drop-schedule", &handle], b"");
    assert_eq!(out.code(), 1, "{out:?}");
    assert!(out.stderr.contains("UNKNOWN_SCHEDULE"), "{}", out.stderr);
}
