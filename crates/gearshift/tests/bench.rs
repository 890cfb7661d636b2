//! `gearshift bench` end to end: the built binary against a
//! `gearshift serve --store memory` child (and a real gearmand) on a free
//! loopback port, with small counts, checking its `--json` lines, its
//! table, its exit codes and its progress display.

mod common;

use std::process::{Command, Stdio};

use common::{free_port, Proc, Server, WAIT};
use serde_json::Value;

/// The JSON objects `bench --json` printed, one per line.
fn objects(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

fn num(o: &Value, key: &str) -> f64 {
    o[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is not a number in {o}"))
}

/// The checks every passing scenario object must meet.
fn assert_passed(o: &Value, scenario: &str, jobs: Option<u64>) {
    assert_eq!(o["scenario"], scenario, "{o}");
    assert_eq!(o["ok"], true, "{o}");
    assert_eq!(o["errors"], 0, "{o}");
    assert_eq!(o["failures"].as_array().map(Vec::len), Some(0), "{o}");
    if let Some(n) = jobs {
        assert_eq!(o["jobs"].as_u64(), Some(n), "{o}");
    }
    assert!(num(o, "seconds") > 0.0, "{o}");
    assert!(num(o, "rate") > 0.0, "{o}");
    if scenario == "drain" {
        for k in ["p50_us", "p90_us", "p99_us", "p999_us", "max_us"] {
            assert!(o[k].is_null(), "drain has no latency: {o}");
        }
    } else {
        let p: Vec<f64> = ["p50_us", "p90_us", "p99_us", "p999_us", "max_us"]
            .iter()
            .map(|k| num(o, k))
            .collect();
        assert!(p.windows(2).all(|w| w[0] <= w[1]), "unordered {p:?}: {o}");
        assert!(p[4] > 0.0, "{o}");
    }
}

/// Every scenario with small counts: the JSON lines, in order, all ok.
fn all_scenarios(s: &Server) {
    let args = [
        "bench", "--json", "-n", "300", "-c", "2", "-i", "4", "-w", "2", "--size", "64",
    ];
    let out = s.run(&args, b"");
    assert_eq!(out.code(), 0, "{out:?}");
    assert_eq!(out.stderr, "", "no progress display without a terminal");
    let objs = objects(&out.stdout);
    let names: Vec<&str> = objs.iter().filter_map(|o| o["scenario"].as_str()).collect();
    assert_eq!(names, ["submit", "drain", "roundtrip", "echo"]);
    for o in &objs {
        let name = o["scenario"].as_str().unwrap_or_default();
        assert_passed(o, name, Some(300));
        assert_eq!(o["size"], 64);
        assert_eq!(o["clients"], 2);
        assert_eq!(o["servers"][0], s.addr.as_str());
    }
    assert_eq!(objs[0]["queued"], 300);
    assert_eq!(objs[0]["workers"], 0);
    assert_eq!(objs[1]["workers"], 2);
    assert_eq!(
        (&objs[1]["missing"], &objs[1]["duplicates"]),
        (&0.into(), &0.into())
    );
    assert_eq!(objs[2]["mismatches"], 0);
    assert!(objs[3]["function"].is_null());
    // Submit and drain share the run's own function; roundtrip has FN.rt.
    assert_eq!(objs[0]["function"], objs[1]["function"]);
    let rt = format!("{}.rt", objs[0]["function"].as_str().unwrap_or_default());
    assert_eq!(objs[2]["function"], rt.as_str());
    // Drained and stopped: the queue is empty, no worker is left.
    let row = s.status_of(objs[0]["function"].as_str().unwrap_or_default());
    assert!(row.is_none_or(|r| r["total"] == 0 && r["workers"] == 0));
}

#[test]
fn every_scenario_against_gearshift() {
    all_scenarios(&Server::gearshift());
}

#[test]
fn every_scenario_against_gearmand() {
    all_scenarios(&Server::gearmand());
}

#[test]
fn timed_roundtrip_and_lone_drain() {
    let s = Server::gearshift();
    let out = s.run(
        &[
            "bench",
            "--json",
            "--scenario",
            "roundtrip",
            "--duration",
            "300ms",
            "-i",
            "2",
        ],
        b"",
    );
    assert_eq!(out.code(), 0, "{out:?}");
    let objs = objects(&out.stdout);
    assert_eq!(objs.len(), 1, "{out:?}");
    assert_passed(&objs[0], "roundtrip", None);
    assert!(num(&objs[0], "jobs") > 0.0 && num(&objs[0], "seconds") >= 0.3);

    // drain without submit queues its own jobs first, and only reports drain.
    let out = s.run(
        &["bench", "--json", "--scenario", "drain", "-n", "150"],
        b"",
    );
    assert_eq!(out.code(), 0, "{out:?}");
    let objs = objects(&out.stdout);
    assert_eq!(objs.len(), 1, "{out:?}");
    assert_passed(&objs[0], "drain", Some(150));
}

#[test]
fn summary_table() {
    let s = Server::gearshift();
    let out = s.run(&["bench", "-n", "100", "--scenario", "submit,echo"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("gearshift bench: "), "{out:?}");
    let header = lines
        .iter()
        .find(|l| l.starts_with("SCENARIO"))
        .unwrap_or_else(|| panic!("no table: {out:?}"));
    for col in [
        "JOBS", "SECONDS", "JOBS/S", "P50 µs", "P99 µs", "MAX µs", "ERRORS", "CHECK",
    ] {
        assert!(header.contains(col), "{header}");
    }
    let row = |name: &str| {
        lines
            .iter()
            .find(|l| l.starts_with(&format!("{name} ")))
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .unwrap_or_else(|| panic!("no {name} row: {out:?}"))
    };
    for name in ["submit", "echo"] {
        let r = row(name);
        assert_eq!((r[1], r.last().copied()), ("100", Some("ok")), "{r:?}");
    }
    assert!(out
        .stdout
        .contains("submit: ok: admin status shows 100 jobs queued"));
    assert!(!lines.iter().any(|l| l.starts_with("drain")), "{out:?}");
}

#[test]
fn a_failed_check_exits_1() {
    let s = Server::gearshift();
    // Jobs of someone else under the function: drain takes them too and
    // cannot account for them.
    for data in ["a", "b", "c"] {
        let out = s.run(&["submit", "-b", "-f", "shared", data], b"");
        assert_eq!(out.code(), 0, "{out:?}");
    }
    let out = s.run(
        &[
            "bench",
            "--json",
            "-f",
            "shared",
            "-n",
            "50",
            "--scenario",
            "submit,drain",
        ],
        b"",
    );
    assert_eq!(out.code(), 1, "{out:?}");
    let objs = objects(&out.stdout);
    assert_passed(&objs[0], "submit", Some(50));
    assert_eq!(objs[0]["queued"], 53, "the 3 older jobs are counted in");
    let drain = &objs[1];
    assert_eq!(drain["ok"], false, "{drain}");
    assert_eq!((&drain["jobs"], &drain["foreign"]), (&50.into(), &3.into()));
    let why = drain["failures"][0].as_str().unwrap_or_default();
    assert!(why.contains("3 jobs without a seq"), "{drain}");

    // The drain took them too; one more, and the table says FAILED and why.
    let out = s.run(&["submit", "-b", "-f", "shared", "d"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    let out = s.run(
        &[
            "bench",
            "-f",
            "shared",
            "-n",
            "20",
            "--scenario",
            "submit,drain",
        ],
        b"",
    );
    assert_eq!(out.code(), 1, "{out:?}");
    let drain_row = out.stdout.lines().find(|l| l.starts_with("drain "));
    assert!(drain_row.is_some_and(|l| l.ends_with("FAILED")), "{out:?}");
    assert!(
        out.stdout
            .contains("drain:   1 jobs without a seq of this run"),
        "{out:?}"
    );
}

#[test]
fn unreachable_server_is_a_clear_error() {
    let addr = format!("127.0.0.1:{}", free_port());
    let out = Command::new(common::BIN)
        .args(["bench", "-s", &addr, "-n", "10"])
        .env_remove("GEARSHIFT_SERVERS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(|child| Proc { child })
        .expect("spawn gearshift")
        .finish(WAIT);
    assert_eq!(out.code(), 2, "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.starts_with(&format!(
            "gearshift: cannot reach {addr}: connection refused"
        )),
        "{out:?}"
    );
}

#[test]
fn progress_only_on_a_terminal() {
    let s = Server::gearshift();
    let inner = format!(
        "'{}' bench --json --scenario echo -n 3000 -i 1",
        common::BIN
    );
    let child = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .env("GEARSHIFT_SERVERS", &s.addr)
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("util-linux script");
    let tty = Proc { child }.finish(WAIT);
    assert_eq!(tty.code(), 0, "{tty:?}");
    assert!(tty.stdout.contains("/3000 jobs"), "{:?}", tty.stdout);
    assert!(tty.stdout.contains("\x1b[2K"), "{:?}", tty.stdout);
    assert!(
        tty.stdout.contains("\"scenario\":\"echo\""),
        "{:?}",
        tty.stdout
    );
}
