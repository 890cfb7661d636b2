//! `gearshift serve`'s HTTP flags with the real binary: a taken HTTP port
//! leaves the Gearman server serving, `--http off` turns it off, the
//! default is logged, and an empty token file is refused.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{Server, BIN};

fn log_of(s: &Server) -> String {
    s.log
        .as_ref()
        .map(|p| std::fs::read_to_string(p).unwrap_or_default())
        .unwrap_or_default()
}

#[test]
fn a_taken_http_port_leaves_gearman_serving() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port();
    let http = format!("127.0.0.1:{port}");
    let s = Server::gearshift_with(&["--store", "memory", "--http", &http]);
    assert!(s.status_of("nothing").is_none());
    let log = log_of(&s);
    assert!(log.contains("cannot listen for HTTP"), "{log}");
    assert!(!log.contains("http listening on"), "{log}");
}

#[test]
fn http_off_and_default() {
    let off = Server::gearshift_with(&["--store", "memory", "--http", "off"]);
    assert!(off.status_of("nothing").is_none());
    assert!(!log_of(&off).contains("http listening on"));
    let on = Server::gearshift();
    assert!(on.status_of("nothing").is_none());
    common::eventually("the HTTP address in the log", || {
        log_of(&on).contains("http listening on 127.0.0.1:")
    });
}

#[test]
fn an_empty_token_file_is_refused() {
    let mut f = tempfile::NamedTempFile::new().expect("file");
    writeln!(f, "   ").expect("write");
    let out = Command::new(BIN)
        .args([
            "serve",
            "-p",
            "0",
            "--store",
            "memory",
            "--log-file",
            "none",
        ])
        .arg("--http-token-file")
        .arg(f.path())
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--http-token-file"), "{err}");
}
