//! The `submit --lines` progress bar: drawn when stderr is a terminal (a
//! pty made by util-linux `script`), absent when it is a pipe.

mod common;

use std::process::{Command, Stdio};

use common::{Proc, Server, WAIT};

#[test]
fn progress_bar_only_on_a_terminal() {
    let s = Server::gearshift();
    let _w = s.worker("echo", &["-c", "4"]);
    let dir = tempfile::tempdir().expect("tempdir");
    let input = dir.path().join("lines.txt");
    let lines: String = (1..=20).map(|i| format!("{i}\n")).collect();
    std::fs::write(&input, &lines).expect("write input");

    // Through a pipe: results and the summary, no drawing.
    let piped = s.run(&["submit", "-f", "echo", "--lines"], lines.as_bytes());
    assert_eq!(piped.code(), 0, "{piped:?}");
    assert_eq!(piped.stdout, lines);
    assert_eq!(piped.stderr, "20 succeeded, 0 failed\n");

    // In a pty: the bar is drawn (and cleared) on stderr.
    let inner = format!(
        "'{}' submit -f echo --lines < '{}'",
        common::BIN,
        input.display()
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
    assert!(tty.stdout.contains("/20 jobs"), "{:?}", tty.stdout);
    assert!(tty.stdout.contains("\x1b[2K"), "{:?}", tty.stdout);
    assert!(
        tty.stdout.contains("20 succeeded, 0 failed"),
        "{:?}",
        tty.stdout
    );
}
