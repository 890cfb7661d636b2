//! `gearshift submit` and `gearshift work` end to end: the built binary
//! against a `gearshift serve --store memory` child on a free loopback port.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::{free_port, Proc, Server, WAIT};

#[test]
fn foreground_job_with_a_command_worker() {
    let s = Server::gearshift();
    let _w = s.worker("upper", &["--", "tr", "a-z", "A-Z"]);

    let out = s.run(&["submit", "-f", "upper", "hello"], b"");
    assert_eq!((out.code(), out.stdout.as_str()), (0, "HELLO"), "{out:?}");

    // No DATA: the workload is stdin, byte for byte.
    let out = s.run(&["submit", "-f", "upper"], b"from stdin\n");
    assert_eq!(
        (out.code(), out.stdout.as_str()),
        (0, "FROM STDIN\n"),
        "{out:?}"
    );
}

#[test]
fn work_data_streams_to_stdout_before_the_result() {
    let s = Server::gearshift();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (go_tx, go_rx) = tokio::sync::watch::channel(false);
    let worker = gearshift_client::Worker::builder()
        .server(&s.addr)
        .function("stream", move |job| {
            let mut go = go_rx.clone();
            async move {
                job.send_data("first chunk\n").await?;
                // The result waits until the client has printed the chunk.
                let _ = tokio::time::timeout(WAIT, go.wait_for(|g| *g)).await;
                Ok::<_, gearshift_client::WorkError>("the end\n")
            }
        })
        .build()
        .expect("worker");
    rt.spawn(worker.run(std::future::pending()));
    s.wait_workers("stream", 1);

    let mut client = s.spawn(&["submit", "-f", "stream", "x"]);
    let stdout = client.child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    assert_eq!(rx.recv_timeout(WAIT).expect("first chunk"), "first chunk");
    assert!(client.child.try_wait().expect("try_wait").is_none());
    go_tx.send_replace(true);
    assert_eq!(rx.recv_timeout(WAIT).expect("result"), "the end");
    assert!(client.wait_within(WAIT).success());
}

#[test]
fn exception_and_timeout_exit_1() {
    let s = Server::gearshift();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let worker = gearshift_client::Worker::builder()
        .server(&s.addr)
        .function("explode", |_job| async {
            Err::<&str, _>(gearshift_client::WorkError::exception("disk full"))
        })
        .function("hang", |_job| async {
            tokio::time::sleep(WAIT).await;
            Ok::<_, gearshift_client::WorkError>("too late")
        })
        .concurrency(2)
        .build()
        .expect("worker");
    rt.spawn(worker.run(std::future::pending()));
    s.wait_workers("explode", 1);

    let out = s.run(&["submit", "-f", "explode", "x"], b"");
    assert_eq!(out.code(), 1, "{out:?}");
    assert!(
        out.stderr.contains("raised an exception: disk full"),
        "{}",
        out.stderr
    );

    let start = Instant::now();
    let out = s.run(&["submit", "-f", "hang", "--timeout", "300ms", "x"], b"");
    assert_eq!(out.code(), 1, "{out:?}");
    assert!(
        out.stderr.contains("timed out after 300ms"),
        "{}",
        out.stderr
    );
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[test]
fn background_job_is_listed_by_admin_jobs() {
    let s = Server::gearshift();
    let out = s.run(&["submit", "--background", "-f", "later", "payload"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    let handle = out.stdout.trim().to_owned();
    assert!(handle.starts_with("H:test:"), "{handle:?}");

    let jobs = s.admin_json(&["jobs"]);
    let job = jobs
        .as_array()
        .and_then(|a| a.iter().find(|j| j["handle"] == handle.as_str()))
        .unwrap_or_else(|| panic!("{handle} not in {jobs}"));
    assert_eq!(job["queued"], true);
    assert_eq!(job["server"], s.addr.as_str());
    let status = s.status_of("later").expect("later listed");
    assert_eq!(
        (status["total"].as_u64(), status["workers"].as_u64()),
        (Some(1), Some(0))
    );
}

#[test]
fn priorities_order_the_queue_and_count_stops_the_worker() {
    let s = Server::gearshift();
    for p in ["low", "normal", "high"] {
        let data = format!("{p}\n");
        let out = s.run(&["submit", "-b", "--priority", p, "-f", "prio", &data], b"");
        assert_eq!(out.code(), 0, "{out:?}");
    }
    let rows = s.admin_json(&["prioritystatus"]);
    let row = &rows[0];
    assert_eq!(
        (&row["high"], &row["normal"], &row["low"]),
        (&1.into(), &1.into(), &1.into())
    );

    // An echo worker (no command) prints each workload; --count 3 exits.
    let w = s.spawn(&["work", "-f", "prio", "--count", "3"]);
    let out = w.finish(WAIT);
    assert_eq!(out.code(), 0, "{out:?}");
    assert_eq!(out.stdout, "high\nnormal\nlow\n");
}

#[test]
fn at_runs_an_epoch_job_about_two_seconds_later() {
    let s = Server::gearshift();
    let w = s.worker("tick", &["--count", "1"]);
    let start = Instant::now();
    let out = s.run(&["submit", "-f", "tick", "--at", "+2s", "tock"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    assert!(out.stdout.starts_with("H:test:"), "{out:?}");
    let done = w.finish(WAIT);
    let took = start.elapsed();
    assert_eq!(done.stdout, "tock");
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_millis(5000),
        "ran after {took:?}"
    );
}

#[test]
fn lines_with_failures_counts_and_exits_non_zero() {
    let s = Server::gearshift();
    let script = r#"x=$(cat); case "$x" in *3*) exit 3;; esac; printf 'ok %s' "$x""#;
    let _w = s.worker("check", &["-c", "4", "--", "sh", "-c", script]);
    let input: String = (1..=20).map(|i| format!("{i}\n")).collect();
    let out = s.run(&["submit", "-f", "check", "--lines"], input.as_bytes());
    assert_eq!(out.code(), 1, "{out:?}");
    // Results one per line, in input order; the failures (3, 13) left out.
    let expected: String = (1..=20)
        .filter(|i| !i.to_string().contains('3'))
        .map(|i| format!("ok {i}\n"))
        .collect();
    assert_eq!(out.stdout, expected);
    assert!(out.stderr.contains("line 3: job H:test:"), "{}", out.stderr);
    assert!(out.stderr.contains("line 13: job"), "{}", out.stderr);
    assert!(
        out.stderr.ends_with("18 succeeded, 2 failed\n"),
        "{}",
        out.stderr
    );
    // stderr is a pipe: no progress bar drawing.
    assert!(
        !out.stderr.contains('\x1b') && !out.stderr.contains('\r'),
        "{:?}",
        out.stderr
    );
    assert!(!out.stderr.contains("jobs,"), "{:?}", out.stderr);
}

#[test]
fn failing_command_fails_the_job() {
    let s = Server::gearshift();
    let _w = s.worker("fails", &["--", "sh", "-c", "cat >/dev/null; exit 4"]);
    let out = s.run(&["submit", "-f", "fails", "x"], b"");
    assert_eq!(out.code(), 1, "{out:?}");
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("failed"), "{}", out.stderr);
}

#[test]
fn unknown_command_is_refused_at_start() {
    let s = Server::gearshift();
    let out = s.run(&["work", "-f", "x", "--", "no-such-command-here"], b"");
    assert_eq!(out.code(), 2, "{out:?}");
    assert!(
        out.stderr
            .contains("command not found: no-such-command-here"),
        "{}",
        out.stderr
    );
}

#[test]
fn stderr_lines_become_warnings() {
    let s = Server::gearshift();
    let script = "echo 'first warning' >&2; cat; echo 'second warning' >&2";
    let _w = s.worker("warns", &["--", "sh", "-c", script]);
    let out = s.run(&["submit", "-f", "warns", "data"], b"");
    assert_eq!((out.code(), out.stdout.as_str()), (0, "data"), "{out:?}");
    assert_eq!(out.stderr, "first warning\nsecond warning\n");
}

#[test]
fn concurrency_runs_four_jobs_at_once() {
    let s = Server::gearshift();
    let _w = s.worker("nap", &["-c", "4", "--", "sh", "-c", "sleep 1; cat"]);
    let start = Instant::now();
    let out = s.run(&["submit", "-f", "nap", "--lines"], b"a\nb\nc\nd\n");
    let took = start.elapsed();
    assert_eq!(
        (out.code(), out.stdout.as_str()),
        (0, "a\nb\nc\nd\n"),
        "{out:?}"
    );
    assert!(
        out.stderr.contains("4 succeeded, 0 failed"),
        "{}",
        out.stderr
    );
    assert!(
        took < Duration::from_millis(3000),
        "4 jobs of 1 s took {took:?}"
    );
}

#[test]
fn sigterm_lets_the_running_job_finish() {
    let s = Server::gearshift();
    let mut w = s.worker("slow", &["--", "sh", "-c", "sleep 1; cat"]);
    let client = s.spawn(&["submit", "-f", "slow", "finished"]);
    common::eventually("the job to run", || {
        s.status_of("slow")
            .is_some_and(|r| r["running"].as_u64() == Some(1))
    });
    w.signal("TERM");
    let out = client.finish(WAIT);
    assert_eq!(
        (out.code(), out.stdout.as_str()),
        (0, "finished"),
        "{out:?}"
    );
    assert!(w.wait_within(WAIT).success());
    // No new job is taken once stopping: the worker is gone.
    common::eventually("the worker to unregister", || {
        s.status_of("slow")
            .is_none_or(|r| r["workers"].as_u64() == Some(0))
    });
}

#[test]
fn second_signal_kills_the_running_job() {
    let s = Server::gearshift();
    let mut w = s.worker("stuck", &["--", "sleep", "30"]);
    let _client = s.spawn(&["submit", "-f", "stuck", "x"]);
    common::eventually("the job to run", || {
        s.status_of("stuck")
            .is_some_and(|r| r["running"].as_u64() == Some(1))
    });
    let stderr = w.watch_stderr();
    w.signal("INT");
    // A second signal sent before the first was taken could be merged with it.
    stderr.wait_for("gearshift: stopping");
    w.signal("INT");
    // Killed at once: the graceful stop would wait out the 30 s job and exit
    // 0; WAIT only bounds a slow machine.
    let status = w.wait_within(WAIT);
    assert_eq!(status.code(), Some(130), "{}", stderr.text());
    // The server got the job back (the connection closed mid-job).
    common::eventually("the job to be requeued", || {
        s.status_of("stuck")
            .is_some_and(|r| r["running"].as_u64() == Some(0) && r["total"].as_u64() == Some(1))
    });
}

#[test]
fn server_down_is_a_readable_error() {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    for args in [
        vec!["submit", "-f", "x", "y"],
        vec!["admin", "status"],
        vec!["work", "-f", "x"],
        vec!["work", "-f", "x", "--", "/bin/sh", "-c", "cat"],
    ] {
        let p = Proc {
            child: std::process::Command::new(common::BIN)
                .arg(args[0])
                .args(["--server", &addr])
                .args(&args[1..])
                .env_remove("GEARSHIFT_SERVERS")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn"),
        };
        let out = p.finish(WAIT);
        assert_eq!(out.code(), 2, "{args:?}: {out:?}");
        let want =
            format!("gearshift: cannot reach {addr}: connection refused — is a server running?");
        assert!(out.stderr.starts_with(&want), "{args:?}: {}", out.stderr);
    }
}

/// `gearshift ARGS…` with no server list from the environment, to its end.
fn run_plain(args: &[&str]) -> common::Out {
    Proc {
        child: std::process::Command::new(common::BIN)
            .args(args)
            .env_remove("GEARSHIFT_SERVERS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn"),
    }
    .finish(WAIT)
}

#[test]
fn a_bad_server_address_is_a_usage_error() {
    for (server, want) in [
        (
            "127.0.0.1:99999",
            "invalid port 99999 in 127.0.0.1:99999 (1-65535)",
        ),
        ("[::1]:0", "invalid port 0 in [::1]:0 (1-65535)"),
        ("host:1:2", "[ADDRESS]:PORT"),
    ] {
        for args in [
            vec!["submit", "-f", "x", "y"],
            vec!["admin", "status"],
            vec!["work", "-f", "x"],
        ] {
            let mut all = args.clone();
            all.extend_from_slice(&["-s", server]);
            let out = run_plain(&all);
            assert_eq!(out.code(), 2, "{all:?}: {out:?}");
            assert!(out.stderr.contains(want), "{all:?}: {}", out.stderr);
            assert!(!out.stderr.contains("cannot reach"), "{}", out.stderr);
        }
    }
}

#[test]
fn an_ipv6_address_with_a_port() {
    // Nothing listens there: the message names the address as parsed, not
    // with a default port appended.
    let server = format!("[::1]:{}", free_port());
    let out = run_plain(&["admin", "status", "-s", &server]);
    assert_eq!(out.code(), 2, "{out:?}");
    assert!(
        out.stderr.contains(&format!("cannot reach {server}: ")),
        "{}",
        out.stderr
    );
}

#[test]
fn an_empty_function_name_is_a_usage_error() {
    let s = Server::gearshift();
    for args in [
        vec!["submit", "-f", "", "x"],
        vec!["work", "-f", ""],
        vec!["bench", "-f", ""],
    ] {
        let out = s.run(&args, b"");
        assert_eq!(out.code(), 2, "{args:?}: {out:?}");
        assert!(
            out.stderr.contains("a function name cannot be empty"),
            "{args:?}: {}",
            out.stderr
        );
    }
    // Nothing was queued under an empty name.
    let rows = s.admin_json(&["status"]);
    assert_eq!(rows.as_array().map(Vec::len), Some(0), "{rows}");
}

#[test]
fn an_oversized_job_shows_the_servers_reason() {
    let s = Server::gearshift_with(&["--store", "memory", "--max-packet-size", "1K"]);
    let payload = vec![b'x'; 4 << 20];
    // The server answers ERROR and closes while the client still writes:
    // its reason must win over the broken connection, every time.
    for _ in 0..3 {
        for args in [
            vec!["submit", "-b", "-f", "big"],
            vec!["submit", "-f", "big"],
        ] {
            let out = s.run(&args, &payload);
            assert_eq!(out.code(), 1, "{args:?}: {out:?}");
            assert!(
                out.stderr
                    .contains("server refused the request: ARGUMENT_TOO_LARGE")
                    && out.stderr.contains("exceeds the maximum of 1024"),
                "{args:?}: {}",
                out.stderr
            );
        }
    }
}

#[test]
fn admin_refusals_are_printed_decoded() {
    let s = Server::gearshift();
    let out = s.run(&["admin", "job", "H:test:999"], b"");
    assert_eq!(out.code(), 1, "{out:?}");
    assert_eq!(
        out.stderr,
        format!(
            "gearshift: {}: server refused: UNKNOWN_JOB job not found or expired\n",
            s.addr
        )
    );
}

#[test]
fn the_workers_log_has_no_colour_codes_off_a_terminal() {
    let s = Server::gearshift();
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("w.log");
    // A second server that is down makes the worker log a warning.
    let down = format!("127.0.0.1:{}", free_port());
    let mut c = s.cmd(&["work", "-f", "tint", "-s", &s.addr, "-s", &down]);
    c.stderr(std::fs::File::create(&log).expect("log file"));
    let _w = Proc {
        child: c.spawn().expect("spawn"),
    };
    let text = || std::fs::read(&log).unwrap_or_default();
    common::eventually("a warning in the log", || {
        String::from_utf8_lossy(&text()).contains("worker cannot connect")
    });
    let text = text();
    assert!(
        !text.contains(&0x1b),
        "{:?}",
        String::from_utf8_lossy(&text)
    );
}

/// Runs `gearshift work` on a pseudo-terminal (util-linux `script`) until
/// it has logged a warning; returns what the terminal showed.
fn work_on_a_terminal(s: &Server, no_color: Option<&str>) -> Option<String> {
    let down = format!("127.0.0.1:{}", free_port());
    let line = format!(
        "{} work -f tint -s {} -s {down} --count 1",
        common::BIN,
        s.addr
    );
    let mut c = std::process::Command::new("script");
    c.args(["-qfec", &line, "/dev/null"])
        .env_remove("NO_COLOR")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(v) = no_color {
        c.env("NO_COLOR", v);
    }
    let mut p = Proc {
        child: c.spawn().ok()?,
    };
    let stdout = p.child.stdout.take()?;
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap_or_default());
        }
    });
    let deadline = Instant::now() + WAIT;
    while let Ok(line) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        if line.contains("worker cannot connect") {
            return Some(line);
        }
    }
    None
}

#[test]
fn the_workers_log_is_coloured_on_a_terminal_unless_no_color() {
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: no `script` (util-linux) to make a terminal");
        return;
    }
    let s = Server::gearshift();
    let coloured = work_on_a_terminal(&s, None).expect("a warning on the terminal");
    assert!(coloured.contains('\x1b'), "{coloured:?}");
    let plain = work_on_a_terminal(&s, Some("1")).expect("a warning on the terminal");
    assert!(!plain.contains('\x1b'), "{plain:?}");
}

#[test]
fn a_server_that_closes_without_a_word_gets_the_tls_hint() {
    // What some TLS servers do with a plain first packet: read it, close.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
            let mut buf = [0u8; 256];
            let _ = std::io::Read::read(&mut conn, &mut buf);
        }
    });
    let hint = "(if that port serves TLS, pass --tls / --tls-ca FILE)";
    for (args, said) in [
        (
            vec!["submit", "-f", "x", "y"],
            "no server reachable: the server closed the connection without answering",
        ),
        (
            vec!["admin", "status"],
            "the connection to the server was lost",
        ),
    ] {
        let mut all = args.clone();
        all.extend_from_slice(&["-s", &addr]);
        let out = run_plain(&all);
        assert_eq!(out.code(), 2, "{all:?}: {out:?}");
        assert!(
            out.stderr.contains(&format!("{said} {hint}")),
            "{all:?}: {}",
            out.stderr
        );
    }
}
