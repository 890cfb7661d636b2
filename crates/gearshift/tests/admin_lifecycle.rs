//! `gearshift admin` for Gearshift's own words (`job`, `dead`, `retry-dead`,
//! `drop-dead`, `pause`, `resume`, `workers --all`) and `gearshift submit
//! --wait-timeout` / `--verbose`, end to end against a `gearshift serve
//! --store memory --config FILE` child whose policy sends a failed
//! background job straight to the dead set; `schedules` and
//! `drop-schedule` against one whose config declares a `[[schedule]]`,
//! with a client's schedule sent as a raw SUBMIT_JOB_SCHED.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::{eventually, Server};
use gearshift_proto::frame::encode_parts;
use gearshift_proto::{Magic, PacketType};
use serde_json::Value;

/// One run, no retry on WORK_FAIL, finished jobs kept an hour.
const POLICY: &str = "[[function]]\nmatch = \"f\"\nmax_attempts = 1\n\
                      retry_on = [\"fail\"]\nkeep_results = \"1h\"\n";

/// A server with [`POLICY`]; the directory holding the file lives as long.
fn server_with_policy() -> (Server, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gearshift.toml");
    std::fs::write(&path, POLICY).expect("write config");
    let p = path.to_string_lossy().into_owned();
    (
        Server::gearshift_with(&["--store", "memory", "--config", &p]),
        dir,
    )
}

/// The rows of `admin dead [F] --json` with this handle.
fn dead_rows(s: &Server, args: &[&str], handle: &str) -> Vec<Value> {
    let mut all = vec!["dead"];
    all.extend_from_slice(args);
    let rows = s.admin_json(&all);
    rows.as_array()
        .expect("an array")
        .iter()
        .filter(|r| r["handle"] == handle)
        .cloned()
        .collect()
}

/// `admin job H --json`, the one object.
fn job(s: &Server, handle: &str) -> Value {
    let rows = s.admin_json(&["job", handle]);
    let rows = rows.as_array().expect("an array");
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows[0].clone()
}

/// Runs `gearshift admin ARGS…` and returns its stdout, asserting exit 0.
fn admin(s: &Server, args: &[&str]) -> String {
    let mut all = vec!["admin"];
    all.extend_from_slice(args);
    let out = s.run(&all, b"");
    assert_eq!(out.code(), 0, "admin {args:?}: {out:?}");
    out.stdout
}

#[test]
fn dead_job_listed_shown_retried_while_paused_and_dropped() {
    let (s, _dir) = server_with_policy();
    let out = s.run(&["submit", "-b", "-f", "f", "payload"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    let handle = out.stdout.trim().to_owned();
    assert!(handle.starts_with("H:test:"), "{handle}");

    // A worker whose command fails: WORK_FAIL, and the policy buries the job.
    let _w = s.worker("f", &["--client-id", "failer", "--", "/bin/false"]);
    eventually("the job to be dead", || {
        !dead_rows(&s, &[], &handle).is_empty()
    });

    let rows = dead_rows(&s, &["f"], &handle);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["function"], "f");
    assert_eq!(rows[0]["attempts"], 1);
    assert_eq!(rows[0]["error"], "fail");
    assert_eq!(rows[0]["server"], s.addr.as_str());
    assert!(rows[0]["died_at"]
        .as_str()
        .is_some_and(|t| t.ends_with('Z')));
    assert!(dead_rows(&s, &["other"], &handle).is_empty());
    let table = admin(&s, &["dead"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        header,
        ["HANDLE", "FUNCTION", "ATTEMPTS", "DIED AT", "ERROR"],
        "{table}"
    );
    assert!(table.contains(&handle), "{table}");

    // `job H`: `key  value` lines, a `history` line per event.
    let text = admin(&s, &["job", &handle]);
    let value_of = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key).filter(|rest| rest.starts_with(' ')))
            .map(str::trim)
            .unwrap_or_else(|| panic!("no {key} in {text}"))
    };
    assert_eq!(value_of("handle"), handle);
    assert_eq!(value_of("state"), "dead");
    assert_eq!(value_of("attempts"), "1");
    assert_eq!(value_of("worker"), "failer@127.0.0.1");
    let events: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("history"))
        .filter_map(|rest| rest.split_whitespace().nth(1))
        .collect();
    assert_eq!(events, ["queued", "started", "failed", "dead"], "{text}");

    let j = job(&s, &handle);
    assert_eq!(j["state"], "dead");
    assert_eq!(j["function"], "f");
    assert_eq!(j["priority"], "normal");
    assert_eq!(j["attempts"], 1);
    assert_eq!(j["error"], "fail");
    assert_eq!(j["result_size"], 0);
    assert!(j["finished"].is_string(), "{j}");
    assert_eq!(j["history"][1]["event"], "started");
    assert_eq!(j["history"][1]["detail"], "failer@127.0.0.1");

    // The registry: the worker, its failure, no job held.
    let workers = s.admin_json(&["workers", "--all"]);
    let w = workers
        .as_array()
        .and_then(|a| a.iter().find(|w| w["client_id"] == "failer"))
        .unwrap_or_else(|| panic!("no failer in {workers}"));
    assert_eq!(w["functions"], serde_json::json!(["f"]));
    assert_eq!(w["failed"], 1);
    assert_eq!(w["done"], 0);
    assert_eq!(w["held"], serde_json::json!([]));
    assert_eq!(w["address"], "127.0.0.1");
    let table = admin(&s, &["workers", "--all"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        header,
        [
            "FD",
            "ADDRESS",
            "CLIENT ID",
            "CONNECTED",
            "LAST SEEN",
            "DONE",
            "FAILED",
            "HELD",
            "FUNCTIONS"
        ],
        "{table}"
    );
    // Plain `workers` keeps gearmand's listing.
    let table = admin(&s, &["workers"]);
    assert!(table.starts_with("FD  IP"), "{table}");

    // Paused, a retried job waits in its queue with a worker ready.
    assert_eq!(admin(&s, &["pause", "f"]), "OK\n");
    assert_eq!(admin(&s, &["retry-dead", "all", "other"]), "0\n");
    assert_eq!(admin(&s, &["retry-dead", "all"]), "1\n");
    assert!(dead_rows(&s, &[], &handle).is_empty());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(job(&s, &handle)["state"], "queued");
    assert_eq!(s.status_of("f").expect("f listed")["total"], 1);

    // Resumed, it runs, fails and is dead again.
    assert_eq!(admin(&s, &["resume", "f"]), "OK\n");
    eventually("the retried job to die again", || {
        !dead_rows(&s, &[], &handle).is_empty()
    });

    let dropped = s.admin_json(&["drop-dead", &handle]);
    assert_eq!(dropped[0]["dropped"], 1, "{dropped}");
    assert_eq!(admin(&s, &["drop-dead", "all"]), "0\n");
    assert_eq!(s.admin_json(&["dead"]), serde_json::json!([]));

    // Forgotten: `job` is refused with exit 1.
    let out = s.run(&["admin", "job", &handle], b"");
    assert_eq!(out.code(), 1, "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("UNKNOWN_JOB"), "{}", out.stderr);
}

#[test]
fn submit_wait_timeout_gives_up_and_the_running_job_stays() {
    let s = Server::gearshift();
    let mut slow = s.worker("slow", &["--", "sleep", "5"]);
    let start = Instant::now();
    let out = s.run(
        &[
            "submit",
            "-f",
            "slow",
            "--wait-timeout",
            "1s",
            "--verbose",
            "x",
        ],
        b"",
    );
    assert_eq!(out.code(), 1, "{out:?}");
    assert!(start.elapsed() < Duration::from_secs(4), "{out:?}");
    assert_eq!(out.stdout, "");
    let handle = out
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("handle: "))
        .unwrap_or_else(|| panic!("no handle line: {}", out.stderr))
        .to_owned();
    assert!(
        out.stderr
            .contains(&format!("gave up waiting for job {handle} after 1s")),
        "{}",
        out.stderr
    );
    // Not cancelled: the worker still runs it.
    assert_eq!(job(&s, &handle)["state"], "running");
    // Two SIGTERMs: the worker kills its `sleep` and exits with 130 (the
    // second sent once the first was taken, or the two could merge).
    let stderr = slow.watch_stderr();
    slow.signal("TERM");
    stderr.wait_for("gearshift: stopping");
    slow.signal("TERM");
    assert_eq!(slow.wait_within(common::WAIT).code(), Some(130));

    // --verbose leaves stdout to the result.
    let _echo = s.worker("echo", &[]);
    let out = s.run(&["submit", "-f", "echo", "-v", "hello"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    assert_eq!(out.stdout, "hello");
    assert!(out.stderr.starts_with("handle: H:test:"), "{}", out.stderr);
    let out = s.run(&["submit", "-f", "echo", "--wait-timeout", "5s", "hi"], b"");
    assert_eq!((out.code(), out.stdout.as_str()), (0, "hi"), "{out:?}");
    assert_eq!(out.stderr, "");

    // Background jobs are not waited for.
    let out = s.run(
        &["submit", "-b", "-f", "echo", "--wait-timeout", "1s", "x"],
        b"",
    );
    assert_eq!(out.code(), 2, "{out:?}");
}

/// A config with one schedule (cron: every five minutes).
const SCHEDULE: &str = "[[schedule]]\ncron = \"*/5 * * * *\"\nfunction = \"report\"\n\
                        workload = \"x\"\n";

/// Sends SUBMIT_JOB_SCHED (`gearshift submit` has no schedule) and returns
/// the handle JOB_CREATED names.
fn submit_sched(s: &Server, function: &str, unique: &str, when: [&str; 5]) -> String {
    let mut parts: Vec<&[u8]> = vec![function.as_bytes(), unique.as_bytes()];
    parts.extend(when.iter().map(|w| w.as_bytes()));
    parts.push(b"tick");
    let mut out = BytesMut::new();
    encode_parts(Magic::Req, PacketType::SubmitJobSched, &parts, &mut out);
    let mut conn = TcpStream::connect(&s.addr).expect("connect");
    conn.set_read_timeout(Some(common::WAIT)).expect("timeout");
    conn.write_all(&out).expect("send SUBMIT_JOB_SCHED");
    let mut header = [0u8; 12];
    conn.read_exact(&mut header).expect("a reply");
    let kind = u32::from_be_bytes([header[4], header[5], header[6], header[7]]);
    let len = u32::from_be_bytes([header[8], header[9], header[10], header[11]]);
    let mut body = vec![0u8; len as usize];
    conn.read_exact(&mut body).expect("its body");
    assert_eq!(
        kind,
        PacketType::JobCreated.as_u32(),
        "{}",
        String::from_utf8_lossy(&body)
    );
    String::from_utf8_lossy(&body).into_owned()
}

#[test]
fn schedules_listed_a_clients_dropped_a_configs_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gearshift.toml");
    std::fs::write(&path, SCHEDULE).expect("write config");
    let p = path.to_string_lossy().into_owned();
    let s = Server::gearshift_with(&["--store", "memory", "--config", &p]);

    let rows = s.admin_json(&["schedules"]);
    let rows = rows.as_array().expect("an array").clone();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let config = &rows[0];
    assert_eq!(config["function"], "report");
    assert_eq!(config["when"], "*/5 * * * *");
    assert_eq!(config["source"], "config");
    assert_eq!(config["unique"], "");
    assert_eq!(config["server"], s.addr.as_str());
    assert!(
        config["next"]
            .as_str()
            .is_some_and(|t| t.ends_with(":00.000Z")),
        "{config}"
    );
    let config_handle = config["handle"].as_str().expect("a handle").to_owned();

    // A client's schedule (day of week 0 = Monday), and one that never fires.
    let nightly = submit_sched(&s, "nightly", "n1", ["0", "3", "", "", "0"]);
    let never = submit_sched(&s, "never", "", ["0", "0", "30", "2", ""]);
    let rows = s.admin_json(&["schedules"]);
    let row = |h: &str| {
        rows.as_array()
            .and_then(|a| a.iter().find(|r| r["handle"] == h))
            .cloned()
            .unwrap_or_else(|| panic!("no {h} in {rows}"))
    };
    let n = row(&nightly);
    assert_eq!(
        (&n["function"], &n["when"], &n["source"], &n["unique"]),
        (
            &Value::from("nightly"),
            &Value::from("0 3 * * 0"),
            &Value::from("client"),
            &Value::from("n1")
        ),
        "{n}"
    );
    assert_eq!(row(&never)["next"], Value::Null);

    let table = admin(&s, &["schedules"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or("")
        .split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect();
    assert_eq!(
        header,
        ["HANDLE", "FUNCTION", "WHEN", "NEXT", "SOURCE", "UNIQUE"],
        "{table}"
    );
    let line = table
        .lines()
        .find(|l| l.starts_with(&format!("{never} ")))
        .unwrap_or_else(|| panic!("no {never} in {table}"));
    assert!(line.contains(" - "), "{table}");
    assert!(line.trim_end().ends_with("client"), "{table}");

    assert_eq!(admin(&s, &["drop-schedule", &nightly]), "OK\n");
    let dropped = s.admin_json(&["drop-schedule", &never]);
    assert_eq!(dropped[0]["ok"], true, "{dropped}");
    let rows = s.admin_json(&["schedules"]);
    let handles: Vec<&str> = (rows.as_array().expect("an array").iter())
        .filter_map(|r| r["handle"].as_str())
        .collect();
    assert_eq!(handles, [config_handle.as_str()]);

    // Refused with exit 1: gone, or from the config file.
    let out = s.run(&["admin", "drop-schedule", &nightly], b"");
    assert_eq!(out.code(), 1, "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("UNKNOWN_SCHEDULE"), "{}", out.stderr);
    let out = s.run(&["admin", "drop-schedule", &config_handle], b"");
    assert_eq!(out.code(), 1, "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("SCHEDULE_IN_CONFIG"), "{}", out.stderr);
    // Still listed.
    assert_eq!(s.admin_json(&["schedules"]), rows);
}
