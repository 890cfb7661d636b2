//! `gearshift serve --config FILE`: a bad file at start is an error naming
//! its line; SIGHUP reloads the file, and a bad file on reload keeps the
//! policies in force while the server goes on.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::{eventually, free_port, Server, BIN, WAIT};
use gearshift_proto::{decode_frame, Frame, Priority, Request, Response, Submit};

/// Submits a background job to `function` on a fresh connection and
/// returns the answer (JOB_CREATED or ERROR).
fn submit(addr: &str, function: &str) -> Response {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_read_timeout(Some(WAIT)).expect("read timeout");
    let mut out = BytesMut::new();
    Request::submit(Box::new(Submit {
        function: Bytes::copy_from_slice(function.as_bytes()),
        unique: Bytes::new(),
        data: Bytes::from_static(b"x"),
        priority: Priority::Normal,
        background: true,
        epoch: None,
        reducer: None,
    }))
    .encode(&mut out);
    stream.write_all(&out).expect("write");
    let mut buf = BytesMut::new();
    loop {
        if let Some(Frame::Packet(p)) = decode_frame(&mut buf, usize::MAX).expect("a frame") {
            return Response::parse(&p).expect("a response");
        }
        let mut chunk = [0; 4096];
        let n = stream.read(&mut chunk).expect("read");
        assert!(n > 0, "connection closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn refused(r: &Response) -> bool {
    matches!(r, Response::Error { code, .. } if &code[..] == b"NO_WORKER")
}

const STRICT: &str = "[[function]]\nmatch = \"needs_*\"\nrequire_worker = true\n";
const LAX: &str = "[[function]]\nmatch = \"needs_*\"\nrequire_worker = false\n";

#[test]
fn a_bad_file_at_start_is_an_error_naming_its_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, "[[function]]\nmatch = \"f\"\nmax_atempts = 3\n").expect("write");
    let out = Command::new(BIN)
        .args(["serve", "-L", "127.0.0.1", "-p"])
        .arg(free_port().to_string())
        .args(["--store", "memory", "--log-file", "none", "--config"])
        .arg(&path)
        .stdin(Stdio::null())
        .output()
        .expect("run gearshift serve");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3"), "{err}");
    assert!(err.contains("max_atempts"), "{err}");
    assert!(err.contains("bad.toml"), "{err}");
}

#[test]
fn sighup_reloads_and_a_bad_reload_keeps_the_policies_in_force() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("gearshift.toml");
    std::fs::write(&path, LAX).expect("write");
    let p = path.to_string_lossy().into_owned();
    let server = Server::gearshift_with(&["--store", "memory", "--config", &p]);
    assert!(matches!(
        submit(&server.addr, "needs_a"),
        Response::JobCreated(_)
    ));

    std::fs::write(&path, STRICT).expect("write");
    server.proc.signal("HUP");
    eventually("the reload to refuse jobs nobody can run", || {
        refused(&submit(&server.addr, "needs_b"))
    });

    std::fs::write(
        &path,
        "[[function]]\nmatch = \"needs_*\"\nrequire_worker = maybe\n",
    )
    .expect("write");
    server.proc.signal("HUP");
    std::thread::sleep(Duration::from_millis(300));
    // Still running, still strict.
    assert!(refused(&submit(&server.addr, "needs_c")));
    assert!(matches!(
        submit(&server.addr, "other"),
        Response::JobCreated(_)
    ));
}
