//! `gearshift serve` and its signals: one SIGINT/SIGTERM stops gracefully
//! (exit 0 once no job runs), a second exits at once with 130 or 143, and
//! the durable store comes back whole after that.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::thread;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use common::{eventually, Server, WAIT};
use gearshift_proto::{decode_frame, Frame, GrabKind, Priority, Request, Response, Submit};

/// A raw Gearman connection with blocking, bounded reads.
struct Conn {
    stream: TcpStream,
    buf: BytesMut,
}

impl Conn {
    fn open(s: &Server) -> Conn {
        let stream = TcpStream::connect(&s.addr).expect("connect");
        stream.set_read_timeout(Some(WAIT)).expect("read timeout");
        Conn {
            stream,
            buf: BytesMut::new(),
        }
    }

    fn send(&mut self, r: Request) {
        let mut out = BytesMut::new();
        r.encode(&mut out);
        self.stream.write_all(&out).expect("write");
    }

    fn recv(&mut self) -> Response {
        loop {
            if let Some(frame) = decode_frame(&mut self.buf, usize::MAX).expect("a frame") {
                let Frame::Packet(p) = frame else {
                    panic!("expected a packet, got {frame:?}");
                };
                return Response::parse(&p).expect("a response");
            }
            let mut chunk = [0; 4096];
            let n = self.stream.read(&mut chunk).expect("read");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Submits a background job and returns its handle.
    fn submit_bg(&mut self, function: &str) -> Bytes {
        self.send(Request::submit(Box::new(Submit {
            function: Bytes::copy_from_slice(function.as_bytes()),
            unique: Bytes::new(),
            data: Bytes::from_static(b"x"),
            priority: Priority::Normal,
            background: true,
            epoch: None,
            reducer: None,
        })));
        match self.recv() {
            Response::JobCreated(h) => h,
            other => panic!("expected JOB_CREATED, got {other:?}"),
        }
    }

    /// Registers `function` and takes one of its jobs, which it never ends.
    fn hold_a_job(&mut self, function: &str) -> Bytes {
        self.send(Request::CanDo(Bytes::copy_from_slice(function.as_bytes())));
        self.send(Request::Grab(GrabKind::Plain));
        match self.recv() {
            Response::JobAssign { handle, .. } => handle,
            other => panic!("expected JOB_ASSIGN, got {other:?}"),
        }
    }
}

/// Sends the first `sig` and waits until the server logged that it started
/// the graceful stop: a second signal sent before the first was taken could
/// be merged with it.
fn first_signal(s: &mut Server, sig: &str) {
    s.proc.signal(sig);
    let log = s.log.as_ref().expect("the server's log file");
    eventually("the graceful stop in the log", || {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains(&format!("SIG{sig} received: stopping"))
    });
}

/// Asserts the server process is still running after `d`.
fn alive_after(s: &mut Server, d: Duration) {
    thread::sleep(d);
    let exited = s.proc.child.try_wait().expect("try_wait");
    assert!(exited.is_none(), "exited after one signal: {exited:?}");
}

#[test]
fn one_signal_with_no_running_job_exits_zero() {
    for sig in ["TERM", "INT"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().to_str().expect("utf-8 path");
        let mut s = Server::gearshift_with(&["--data-dir", data]);
        // An idle client and a queued job do not hold the stop up.
        let mut client = Conn::open(&s);
        client.submit_bg("queued");
        s.proc.signal(sig);
        let status = s.proc.wait_within(WAIT);
        assert_eq!(status.code(), Some(0), "after SIG{sig}");
    }
}

#[test]
fn sigterm_with_a_waiting_foreground_job_exits_zero() {
    // Closing its client drops the foreground job while the engine stops;
    // the stop's count of stored jobs once tripped over that and hung.
    let mut s = Server::gearshift_with(&["--store", "memory"]);
    let mut client = Conn::open(&s);
    client.send(Request::submit(Box::new(Submit {
        function: Bytes::from_static(b"nofn"),
        unique: Bytes::new(),
        data: Bytes::from_static(b"x"),
        priority: Priority::Normal,
        background: false,
        epoch: None,
        reducer: None,
    })));
    assert!(matches!(client.recv(), Response::JobCreated(_)));
    s.proc.signal("TERM");
    let status = s.proc.wait_within(WAIT);
    assert_eq!(status.code(), Some(0));
}

#[test]
fn second_sigterm_exits_at_once_and_the_store_survives() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().to_str().expect("utf-8 path");
    let pid_file = dir.path().join("gearshift.pid");
    let pid = pid_file.to_str().expect("utf-8 path");
    let mut s = Server::gearshift_with(&["--data-dir", data, "-P", pid]);
    let mut client = Conn::open(&s);
    let held = client.submit_bg("held");
    let queued = client.submit_bg("queued");
    let mut worker = Conn::open(&s);
    assert_eq!(worker.hold_a_job("held"), held);

    // The graceful stop waits for the held job, which never ends.
    first_signal(&mut s, "TERM");
    alive_after(&mut s, Duration::from_millis(300));
    // At once: a graceful stop would wait for the held job forever and exit
    // 0; WAIT only bounds a slow machine.
    s.proc.signal("TERM");
    let status = s.proc.wait_within(WAIT);
    assert_eq!(status.code(), Some(143));
    assert!(!pid_file.exists(), "pid file left behind");

    // Both acknowledged jobs are back, the running one queued again.
    let s = Server::gearshift_with(&["--data-dir", data]);
    let jobs = s.admin_json(&["jobs"]);
    let handles: Vec<&str> = jobs
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|j| j["handle"].as_str())
        .collect();
    let want = [&held, &queued].map(|h| std::str::from_utf8(h).expect("ascii handle"));
    assert_eq!(handles, want);
}

#[test]
fn second_sigint_exits_with_130() {
    let mut s = Server::gearshift();
    let mut client = Conn::open(&s);
    client.submit_bg("held");
    let mut worker = Conn::open(&s);
    worker.hold_a_job("held");
    first_signal(&mut s, "INT");
    alive_after(&mut s, Duration::from_millis(300));
    s.proc.signal("INT");
    let status = s.proc.wait_within(WAIT);
    assert_eq!(status.code(), Some(130));
}
