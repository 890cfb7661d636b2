//! `gearshift top --once` against a real server: the function rows with
//! their queues, and the worker registry with what each worker runs; and
//! against gearmand, which has no registry.

mod common;

use common::Server;

fn row<'a>(text: &'a str, first: &str) -> Vec<&'a str> {
    text.lines()
        .find(|l| l.split_whitespace().next() == Some(first))
        .unwrap_or_else(|| panic!("no {first} row in:\n{text}"))
        .split_whitespace()
        .collect()
}

#[test]
fn shows_queues_and_workers() {
    let s = Server::gearshift();
    let _w = s.worker("resize", &["--client-id", "resizer-1"]);
    s.wait_workers("resize", 1);
    for p in [
        "--priority=high",
        "--priority=normal",
        "--priority=low",
        "--priority=low",
    ] {
        let out = s.run(&["submit", "-b", "-f", "waiting", p, "x"], b"");
        assert_eq!(out.code(), 0, "{out:?}");
    }
    let out = s.run(&["top", "--once"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    assert!(out.stdout.contains("queued 4"), "{}", out.stdout);
    // FUNCTION HIGH NORMAL LOW RUNNING WORKERS QUEUE/S
    assert_eq!(
        row(&out.stdout, "waiting"),
        ["waiting", "1", "1", "2", "0", "0", "-"]
    );
    assert_eq!(
        row(&out.stdout, "resize"),
        ["resize", "0", "0", "0", "0", "1", "-"]
    );
    // WORKER ADDRESS DONE FAILED RUNNING FUNCTIONS
    assert_eq!(
        row(&out.stdout, "resizer-1"),
        ["resizer-1", "127.0.0.1", "0", "0", "-", "resize"]
    );
    // The terminal escape codes are only for a terminal.
    assert!(!out.stdout.contains('\x1b'), "{:?}", out.stdout);
}

#[test]
fn watches_gearmand_too() {
    let s = Server::gearmand();
    let _w = s.worker("resize", &["--client-id", "resizer-1"]);
    s.wait_workers("resize", 1);
    let out = s.run(&["top", "--once"], b"");
    assert_eq!(out.code(), 0, "{out:?}");
    assert_eq!(
        row(&out.stdout, "resize"),
        ["resize", "0", "0", "0", "0", "1", "-"]
    );
    // gearmand's `workers` list: no counts.
    assert_eq!(
        row(&out.stdout, "resizer-1"),
        ["resizer-1", "127.0.0.1", "-", "-", "-", "resize"]
    );
}

#[test]
fn no_server_exits_2() {
    let port = common::free_port();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gearshift"))
        .args(["top", "--once", "--server", &format!("127.0.0.1:{port}")])
        .output()
        .expect("run gearshift");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot reach"), "{err}");
}
