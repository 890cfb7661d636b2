//! `gearshift serve`'s log: JSON lines, no colour codes off a terminal, a
//! start-up failure in the log file, and a log file reopened on SIGHUP
//! (logrotate's move-then-signal).

mod common;

use std::process::{Command, Stdio};

use common::{eventually, Proc, BIN};

fn serve(log: &std::path::Path, extra: &[&str]) -> Proc {
    let child = Command::new(BIN)
        .args(["serve", "-L", "127.0.0.1", "-p", "0", "--store", "memory"])
        .args(["--http", "off", "--verbose", "INFO", "--log-file"])
        .arg(log)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn gearshift serve");
    Proc { child }
}

fn read(path: &std::path::Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn json_lines_parse_and_carry_the_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("gs.log");
    let _s = serve(&log, &["--log-format", "json"]);
    eventually("the address in the log", || {
        read(&log).contains("listening on")
    });
    for line in read(&log).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        assert!(v["level"].is_string(), "{line}");
        assert!(v["fields"]["message"].is_string(), "{line}");
    }
}

#[test]
fn stderr_that_is_not_a_terminal_gets_no_colour_codes() {
    let child = Command::new(BIN)
        .args(["serve", "-L", "127.0.0.1", "-p", "0", "--store", "memory"])
        .args(["--http", "off", "--verbose", "INFO"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn gearshift serve");
    let mut p = Proc { child };
    let stderr = p.watch_stderr();
    stderr.wait_for("listening on");
    p.signal("TERM");
    p.wait_within(common::WAIT);
    let text = stderr.all();
    assert!(text.contains("SIGTERM received"), "{text}");
    assert!(!text.contains('\u{1b}'), "{text:?}");
}

#[test]
fn a_server_that_cannot_start_says_why_in_its_log_file_and_on_stderr() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    std::fs::create_dir(&data).expect("data dir");
    std::fs::write(data.join("queue.gslog"), b"not a queue file at all").expect("write");
    let log = dir.path().join("gs.log");
    let out = Command::new(BIN)
        .args(["serve", "-L", "127.0.0.1", "-p", "0", "--http", "off"])
        .arg("--data-dir")
        .arg(&data)
        .arg("--log-file")
        .arg(&log)
        .stdin(Stdio::null())
        .output()
        .expect("run gearshift serve");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let logged = read(&log);
    for text in [&*stderr, &*logged] {
        assert!(text.contains("store file is corrupt"), "{text}");
    }
    assert!(logged.contains("ERROR"), "{logged}");
}

#[test]
fn sighup_reopens_a_log_file_moved_away() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("gs.log");
    let rotated = dir.path().join("gs.log.1");
    let s = serve(&log, &[]);
    eventually("the address in the log", || {
        read(&log).contains("listening on")
    });
    std::fs::rename(&log, &rotated).expect("rotate");
    s.signal("HUP");
    eventually("a new log file", || read(&log).contains("reopened"));
    assert!(read(&rotated).contains("listening on"));
    assert!(!read(&rotated).contains("reopened"));
}

#[test]
fn systemd_hears_ready_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    let dir = tempfile::tempdir().expect("tempdir");
    let sock_path = dir.path().join("notify");
    let sock = UnixDatagram::bind(&sock_path).expect("bind");
    sock.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("timeout");
    let log = dir.path().join("gs.log");
    let child = Command::new(BIN)
        .args(["serve", "-L", "127.0.0.1", "-p", "0", "--store", "memory"])
        .args(["--http", "off", "--log-file"])
        .arg(&log)
        .env("NOTIFY_SOCKET", &sock_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn gearshift serve");
    let p = Proc { child };
    let mut buf = [0u8; 256];
    let n = sock.recv(&mut buf).expect("READY");
    assert_eq!(&buf[..n], b"READY=1");
    // Ready means listening.
    assert!(read(&log).contains("listening on"));
    p.signal("TERM");
    let n = sock.recv(&mut buf).expect("STOPPING");
    assert_eq!(&buf[..n], b"STOPPING=1");
}
