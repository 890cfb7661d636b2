//! `gearshift check`: a queue file damaged in its middle stops `serve`,
//! which names the tool; `check` reports the damage and `--repair` keeps
//! every readable frame, so the server starts again with the jobs around
//! the damage and handles past any it may have given out. Under
//! `--durability interval`, damage after the last sync is a power loss's
//! tear: `check` says the server cuts it, and the server starts.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};

use common::{Server, BIN, WAIT};

fn handle_number(handle: &str) -> u64 {
    handle
        .trim()
        .rsplit(':')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a handle: {handle:?}"))
}

/// Where `what` (a job's data) starts in the queue file's bytes.
fn position(raw: &[u8], what: &[u8]) -> usize {
    raw.windows(what.len())
        .position(|w| w == what)
        .expect("the job's data in the file")
}

/// Serves `data` with `--durability interval` ten minutes long, submits
/// `jobs` of `function` in the background and kills the server (no sync
/// of them but what its start recorded); the flags it served with.
fn interval_killed(data: &Path, function: &str, jobs: &[&str]) -> [String; 6] {
    let flags = [
        "--data-dir".to_owned(),
        data.to_str().expect("utf-8 path").to_owned(),
        "--http".to_owned(),
        "off".to_owned(),
        "--durability".to_owned(),
        "interval=600000".to_owned(),
    ];
    let s = Server::gearshift_with(&flags.each_ref().map(|f| f.as_str()));
    for job in jobs {
        let out = s.run(&["submit", "-b", "-f", function, job], b"");
        assert_eq!(out.code(), 0, "{out:?}");
    }
    let mut proc = s.proc;
    proc.signal("KILL");
    proc.wait_within(WAIT);
    flags
}

fn gearshift(args: &[&str], data: &Path) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .arg("--data-dir")
        .arg(data)
        .stdin(Stdio::null())
        .output()
        .expect("run gearshift");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_damaged_queue_file_is_reported_repaired_and_served_again() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let data_flag = data.to_str().expect("utf-8 path");
    let flags = ["--data-dir", data_flag, "--http", "off"];
    let mut last = 0;
    {
        let s = Server::gearshift_with(&flags);
        // One flush each: three frames after the first reservation's.
        for data in ["payload-one", "payload-two", "payload-three"] {
            let out = s.run(&["submit", "-b", "-f", "kept", data], b"");
            assert_eq!(out.code(), 0, "{out:?}");
            last = handle_number(&out.stdout);
        }
        let mut proc = s.proc;
        proc.signal("TERM");
        assert!(proc.wait_within(WAIT).success());
    }
    let (code, out, _) = gearshift(&["check"], &data);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("sound: the server opens it and holds 3 jobs waiting"),
        "{out}"
    );

    // Damage the second job's frame: a later frame follows it.
    let file = data.join("queue.gslog");
    let mut raw = std::fs::read(&file).expect("read");
    let at = position(&raw, b"payload-two");
    raw[at] ^= 0x20;
    std::fs::write(&file, &raw).expect("write");

    let (code, _, err) = gearshift(
        &["serve", "-L", "127.0.0.1", "-p", "0", "--http", "off"],
        &data,
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("store file is corrupt"), "{err}");
    assert!(err.contains("gearshift check --data-dir"), "{err}");

    let (code, out, _) = gearshift(&["check"], &data);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("damaged: the server refuses it"), "{out}");
    assert_eq!(out.matches(" cannot be read").count(), 1, "{out}");
    assert!(
        out.contains("a repair keeps every readable frame: 2 jobs waiting"),
        "{out}"
    );
    assert!(out.contains("gearshift check --repair"), "{out}");
    assert_eq!(
        std::fs::read(&file).expect("read"),
        raw,
        "check changes nothing"
    );

    let (code, out, err) = gearshift(&["check", "--repair"], &data);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("repaired: the damaged file is kept as"),
        "{out}"
    );
    let kept: Vec<_> = std::fs::read_dir(&data)
        .expect("data dir")
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("queue.gslog.damaged-")
        })
        .collect();
    assert_eq!(kept.len(), 1);
    assert_eq!(std::fs::read(kept[0].path()).expect("read"), raw);
    // A sound file: --repair reports it and leaves it be.
    let (code, out, _) = gearshift(&["check", "--repair"], &data);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("sound: the server opens it"), "{out}");
    assert_eq!(
        std::fs::read_dir(&data).expect("data dir").count(),
        3,
        "log, lock, kept"
    );

    let s = Server::gearshift_with(&flags);
    let row = s.status_of("kept").expect("the function is back");
    assert_eq!(row["total"], 2, "{row}");
    let out = s.run(&["submit", "-b", "-f", "kept", "payload-four"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    let next = handle_number(&out.stdout);
    assert!(next > last + 100_000, "new handle {next} after {last}");
}

#[test]
fn check_without_a_store_is_an_error_not_a_verdict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (code, _, err) = gearshift(&["check"], dir.path());
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no queue file"), "{err}");
}

#[test]
fn a_tear_after_the_last_sync_under_interval_durability_is_cut_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let flags = interval_killed(
        &data,
        "torn",
        &["payload-one", "payload-two", "payload-three"],
    );
    // A power loss kept the third job's write but not the second's.
    let file = data.join("queue.gslog");
    let mut raw = std::fs::read(&file).expect("read");
    let at = position(&raw, b"payload-two");
    raw[at..at + 11].fill(0);
    std::fs::write(&file, &raw).expect("write");

    let (code, out, _) = gearshift(&["check"], &data);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("the server cuts the file at byte"), "{out}");
    assert!(out.contains("holds 1 jobs waiting"), "{out}");
    let s = Server::gearshift_with(&flags.each_ref().map(|f| f.as_str()));
    let row = s.status_of("torn").expect("the function is back");
    assert_eq!(row["total"], 1, "{row}");
}

#[test]
fn the_first_handle_reservation_is_on_disk_before_a_handle_is_given_out() {
    // Under --durability interval: the reservation the server writes at
    // start is synced, so damage in it is corruption, not a tear to cut
    // (a cut would let the handles given out be given out again).
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    interval_killed(&data, "first", &["payload-one"]);
    let file = data.join("queue.gslog");
    let mut raw = std::fs::read(&file).expect("read");
    let job = position(&raw, b"payload-one");
    // The file header is 16 bytes; the reservation's frame follows it.
    assert!(job > 40, "a frame before the job's");
    raw[20..28].fill(0);
    std::fs::write(&file, &raw).expect("write");
    let (code, out, _) = gearshift(&["check"], &data);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("damaged: the server refuses it"), "{out}");
}
