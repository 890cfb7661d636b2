//! Shared helpers of the integration tests: start the real server on an
//! ephemeral loopback port, and talk raw bytes to it. Every read and write
//! is bounded by [`TIMEOUT`], so no test can hang.
//!
//! Each test binary compiles this module on its own and uses only part of
//! it, hence the `dead_code` allowance.
#![allow(dead_code)]

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use gearshift_core::CoreConfig;
use gearshift_proto::frame::{encode_parts, HEADER_LEN};
use gearshift_proto::{decode_frame, Frame, Magic, Packet, PacketType, Request, Response};
use gearshift_server::{Server, ServerConfig, StoreConfig};

pub mod bystander;
pub mod listing;
use gearshift_store::{Durability, Store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Upper bound on any single wait for the server.
pub const TIMEOUT: Duration = Duration::from_secs(5);
/// Job handle prefix of every test server.
pub const PREFIX: &str = "H:test";
/// Version string the test servers report.
pub const VERSION: &str = "gearshift-test";
/// Process id the test servers report.
pub const PID: u32 = 4242;

/// I/O threads of the test servers: `GEARSHIFT_TEST_IO_THREADS` (the test
/// command runs the suite a second time with several, so the shared hub's
/// hand-offs face every test too); by default the machine's choice.
pub fn io_threads() -> usize {
    std::env::var("GEARSHIFT_TEST_IO_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A server config listening on 127.0.0.1 port 0, with known handle prefix,
/// version and pid.
pub fn config() -> ServerConfig {
    ServerConfig {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0))],
        io_threads: io_threads(),
        core: CoreConfig {
            handle_prefix: PREFIX.to_owned(),
            version: VERSION.to_owned(),
            pid: PID,
            ..CoreConfig::default()
        },
        ..ServerConfig::default()
    }
}

/// [`config`] with the embedded log store in `dir`.
pub fn log_config(dir: &std::path::Path, durability: Durability) -> ServerConfig {
    ServerConfig {
        store: StoreConfig::Log {
            dir: dir.to_path_buf(),
            durability,
        },
        ..config()
    }
}

/// The handle of the `n`-th job a test server creates.
pub fn handle(n: u64) -> Bytes {
    Bytes::from(format!("{PREFIX}:{n}"))
}

/// A running in-process server.
pub struct TestServer {
    /// Where it listens.
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
    /// The server's own runtime, when it has one (see [`TestServer::crash`]).
    rt: Option<tokio::runtime::Runtime>,
    /// Replaces the running server's policies.
    pub reloader: gearshift_server::Reloader,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

impl TestServer {
    /// Binds `cfg` and runs it in a task; the shutdown future resolves when
    /// [`TestServer::trigger_shutdown`] is called or the `TestServer` is dropped.
    pub async fn start(cfg: ServerConfig) -> TestServer {
        let server = Server::bind(cfg).await.expect("bind test server");
        TestServer::run(server)
    }

    /// Like [`TestServer::start`] with a store supplied by the test
    /// ([`Server::bind_with_store`]).
    pub async fn start_with_store(cfg: ServerConfig, store: Option<Box<dyn Store>>) -> TestServer {
        let server = Server::bind_with_store(cfg, store)
            .await
            .expect("bind test server");
        TestServer::run(server)
    }

    /// Like [`TestServer::start_with_store`], but the server runs in a
    /// runtime of its own, so [`TestServer::crash`] can kill it outright.
    pub async fn start_crashable(cfg: ServerConfig, store: Option<Box<dyn Store>>) -> TestServer {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("server runtime");
        // Bound inside the server's runtime, so its sockets live there.
        let server = rt
            .spawn(Server::bind_with_store(cfg, store))
            .await
            .expect("bind task")
            .expect("bind test server");
        let handle = rt.handle().clone();
        let mut ts = TestServer::run_on(server, &handle);
        ts.rt = Some(rt);
        ts
    }

    /// Runs a bound server in a task of this runtime.
    pub fn run(server: Server) -> TestServer {
        TestServer::run_on(server, &tokio::runtime::Handle::current())
    }

    fn run_on(server: Server, rt: &tokio::runtime::Handle) -> TestServer {
        let addr = server.local_addrs()[0];
        let reloader = server.reloader();
        let (tx, rx) = oneshot::channel::<()>();
        let task = rt.spawn(server.run(async move {
            let _ = rx.await;
        }));
        TestServer {
            addr,
            stop: Some(tx),
            task: Some(task),
            rt: None,
            reloader,
        }
    }

    /// Kills a server started with [`TestServer::start_crashable`] as a
    /// crash would: every task is dropped at once, nothing is drained or
    /// flushed (a store thread blocked in a flush stays blocked).
    pub fn crash(&mut self) {
        let rt = self.rt.take().expect("crash needs start_crashable");
        self.stop = None;
        self.task = None;
        rt.shutdown_background();
    }

    /// Stops the server gracefully and waits until it is gone.
    pub async fn stop(&mut self) {
        self.trigger_shutdown();
        assert!(
            self.wait_stopped(TIMEOUT).await,
            "Server::run did not return"
        );
    }

    /// Starts a server with [`config`].
    pub async fn start_default() -> TestServer {
        TestServer::start(config()).await
    }

    /// A new connection to the server.
    pub async fn connect(&self) -> Conn {
        Conn::connect(self.addr).await
    }

    /// Resolves the server's shutdown future (a graceful stop).
    pub fn trigger_shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }

    /// True when `Server::run` has returned.
    pub fn is_stopped(&self) -> bool {
        match &self.task {
            Some(t) => t.is_finished(),
            None => true,
        }
    }

    /// Waits up to `within` for `Server::run` to return; true if it did.
    pub async fn wait_stopped(&mut self, within: Duration) -> bool {
        let Some(task) = self.task.as_mut() else {
            return true;
        };
        match tokio::time::timeout(within, task).await {
            Ok(res) => {
                res.expect("server task panicked");
                self.task = None;
                true
            }
            Err(_) => false,
        }
    }
}

/// One raw TCP connection to the server, with a read buffer.
pub struct Conn {
    /// The socket.
    pub stream: TcpStream,
    buf: BytesMut,
}

impl Conn {
    /// Connects (bounded by [`TIMEOUT`]).
    pub async fn connect(addr: SocketAddr) -> Conn {
        let stream = tokio::time::timeout(TIMEOUT, TcpStream::connect(addr))
            .await
            .expect("connect timed out")
            .expect("connect failed");
        stream.set_nodelay(true).expect("nodelay");
        Conn {
            stream,
            buf: BytesMut::new(),
        }
    }

    /// Wraps an already connected socket.
    pub fn from_stream(stream: TcpStream) -> Conn {
        Conn {
            stream,
            buf: BytesMut::new(),
        }
    }

    /// Writes raw bytes.
    pub async fn send(&mut self, bytes: &[u8]) {
        tokio::time::timeout(TIMEOUT, self.stream.write_all(bytes))
            .await
            .expect("write timed out")
            .expect("write failed");
    }

    /// Writes one request packet.
    pub async fn send_req(&mut self, req: &Request) {
        let mut out = BytesMut::new();
        req.encode(&mut out);
        self.send(&out).await;
    }

    /// Writes an admin line (a `\n` is appended).
    pub async fn send_line(&mut self, line: &str) {
        self.send(format!("{line}\n").as_bytes()).await;
    }

    /// Reads more bytes into the buffer; panics on timeout, EOF or error.
    async fn fill(&mut self, what: &str) {
        match tokio::time::timeout(TIMEOUT, self.stream.read_buf(&mut self.buf)).await {
            Err(_) => panic!(
                "timed out waiting for {what}; buffered: {:?}",
                Bytes::copy_from_slice(&self.buf)
            ),
            Ok(Ok(0)) => panic!(
                "connection closed while waiting for {what}; buffered: {:?}",
                Bytes::copy_from_slice(&self.buf)
            ),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("read error while waiting for {what}: {e}"),
        }
    }

    /// The next frame the server sends (binary packet or text line).
    pub async fn recv_frame(&mut self) -> Frame {
        loop {
            match decode_frame(&mut self.buf, usize::MAX) {
                Ok(Some(f)) => return f,
                Ok(None) => self.fill("a frame").await,
                Err(e) => panic!("server sent an undecodable frame: {e}"),
            }
        }
    }

    /// The next binary packet.
    pub async fn recv_packet(&mut self) -> Packet {
        match self.recv_frame().await {
            Frame::Packet(p) => {
                assert_eq!(p.magic, Magic::Res, "server packets carry \\0RES");
                p
            }
            Frame::Text(t) => panic!("expected a packet, got text line {t:?}"),
        }
    }

    /// The exact bytes (header and body) of the next binary packet.
    pub async fn recv_raw_packet(&mut self) -> Vec<u8> {
        loop {
            if self.buf.len() >= HEADER_LEN {
                assert_eq!(self.buf[0], 0, "expected a binary packet");
                let size =
                    u32::from_be_bytes([self.buf[8], self.buf[9], self.buf[10], self.buf[11]])
                        as usize;
                if self.buf.len() >= HEADER_LEN + size {
                    return self.buf.split_to(HEADER_LEN + size).to_vec();
                }
            }
            self.fill("a raw packet").await;
        }
    }

    /// The next packet, parsed.
    pub async fn recv(&mut self) -> Response {
        let p = self.recv_packet().await;
        Response::parse(&p).unwrap_or_else(|e| panic!("unparsable {p:?}: {e}"))
    }

    /// Asserts the next packet is `expected`.
    pub async fn expect(&mut self, expected: Response) {
        let got = self.recv().await;
        assert_eq!(got, expected);
    }

    /// Asserts the next packet is an ERROR with `code`; returns its text.
    pub async fn expect_error(&mut self, code: &str) -> Bytes {
        match self.recv().await {
            Response::Error { code: c, text } => {
                assert_eq!(c, code.as_bytes(), "error code (text {text:?})");
                text
            }
            other => panic!("expected ERROR {code}, got {other:?}"),
        }
    }

    /// Asserts the next packet is JOB_CREATED; returns the handle.
    pub async fn expect_created(&mut self) -> Bytes {
        match self.recv().await {
            Response::JobCreated(h) => h,
            other => panic!("expected JOB_CREATED, got {other:?}"),
        }
    }

    /// Reads text until `term` has been seen; returns everything up to and
    /// including it.
    pub async fn read_text_until(&mut self, term: &[u8]) -> String {
        loop {
            if let Some(pos) = find(&self.buf, term) {
                let bytes = self.buf.split_to(pos + term.len());
                return String::from_utf8_lossy(&bytes).into_owned();
            }
            self.fill("admin text").await;
        }
    }

    /// Reads an admin list reply, up to and including its `.\n` line.
    pub async fn read_list(&mut self) -> String {
        loop {
            let end = if self.buf.starts_with(b".\n") {
                Some(2)
            } else {
                find(&self.buf, b"\n.\n").map(|p| p + 3)
            };
            if let Some(end) = end {
                let bytes = self.buf.split_to(end);
                return String::from_utf8_lossy(&bytes).into_owned();
            }
            self.fill("an admin list").await;
        }
    }

    /// Sends a list command (`status`, `workers`, `show jobs`…) and reads the list.
    pub async fn admin_list(&mut self, cmd: &str) -> String {
        self.send_line(cmd).await;
        self.read_list().await
    }

    /// Sends a one-line command (`version`, `cancel job…`) and reads one line.
    pub async fn admin_line(&mut self, cmd: &str) -> String {
        self.send_line(cmd).await;
        self.read_text_until(b"\n").await
    }

    /// ECHO_REQ round trip: proves the connection is open and served.
    pub async fn ping(&mut self, data: &'static [u8]) {
        self.send_req(&Request::Echo(Bytes::from_static(data)))
            .await;
        self.expect(Response::EchoRes(Bytes::from_static(data)))
            .await;
    }

    /// Asserts the server closes the connection (EOF or reset) within
    /// [`TIMEOUT`] without sending anything more.
    pub async fn expect_closed(&mut self) {
        let extra = self.read_to_close().await;
        assert!(
            extra.is_empty(),
            "server sent {extra:?} before closing the connection"
        );
    }

    /// Reads until the server closes the connection (EOF or reset) within
    /// [`TIMEOUT`]; returns every byte that came before.
    pub async fn read_to_close(&mut self) -> Bytes {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            match tokio::time::timeout_at(deadline, self.stream.read_buf(&mut self.buf)).await {
                Err(_) => panic!(
                    "connection still open after {TIMEOUT:?}; buffered: {:?}",
                    Bytes::copy_from_slice(&self.buf)
                ),
                Ok(Ok(0)) => break,
                Ok(Ok(_)) => {}
                Ok(Err(e)) if is_reset(&e) => break,
                Ok(Err(e)) => panic!("read error: {e}"),
            }
        }
        self.buf.split().freeze()
    }

    /// Asserts nothing at all arrives for `d`.
    pub async fn expect_silence(&mut self, d: Duration) {
        assert!(self.buf.is_empty(), "unread bytes: {:?}", &self.buf[..]);
        match tokio::time::timeout(d, self.stream.read_buf(&mut self.buf)).await {
            Err(_) => {}
            Ok(Ok(0)) => panic!("connection closed; expected it to stay silent"),
            Ok(Ok(_)) => panic!("expected silence, got {:?}", &self.buf[..]),
            Ok(Err(e)) => panic!("read error: {e}"),
        }
    }

    /// Drops whatever is buffered but unread.
    pub fn discard_buffered(&mut self) {
        self.buf.advance(self.buf.len());
    }
}

/// A reset or broken-pipe error: the peer is gone.
pub fn is_reset(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe
    )
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// Reads `n` ECHO_RES packets of `size` bytes from `rd`, each bounded by
/// [`TIMEOUT`], and checks the `i`-th against `payload(i)`.
pub async fn expect_echoes<R: tokio::io::AsyncRead + Unpin>(
    rd: &mut R,
    n: usize,
    size: usize,
    payload: impl Fn(usize) -> Vec<u8>,
) {
    let mut buf = vec![0u8; HEADER_LEN + size];
    for i in 0..n {
        tokio::time::timeout(TIMEOUT, rd.read_exact(&mut buf))
            .await
            .expect("echo timed out")
            .expect("read failed");
        assert_eq!(&buf[4..8], &(PacketType::EchoRes as u32).to_be_bytes());
        assert_eq!(
            u32::from_be_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize,
            size,
            "echo {i} has the wrong size"
        );
        assert!(buf[HEADER_LEN..] == payload(i)[..], "echo {i} differs");
    }
}

/// A packet with `\0REQ` magic whose body is `parts` joined by NULs.
pub fn req(kind: PacketType, parts: &[&[u8]]) -> Vec<u8> {
    let mut out = BytesMut::new();
    encode_parts(Magic::Req, kind, parts, &mut out);
    out.to_vec()
}

/// A packet built by hand: any magic, any type number, any body.
pub fn raw_packet(magic: &[u8; 4], kind: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&kind.to_be_bytes());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(body);
    out
}

/// A foreground SUBMIT_JOB request.
pub fn submit(function: &str, unique: &str, data: &[u8]) -> Vec<u8> {
    req(
        PacketType::SubmitJob,
        &[function.as_bytes(), unique.as_bytes(), data],
    )
}

/// A SUBMIT_JOB_BG request.
pub fn submit_bg(function: &str, unique: &str, data: &[u8]) -> Vec<u8> {
    req(
        PacketType::SubmitJobBg,
        &[function.as_bytes(), unique.as_bytes(), data],
    )
}

/// CAN_DO function.
pub fn can_do(function: &str) -> Vec<u8> {
    req(PacketType::CanDo, &[function.as_bytes()])
}

/// A body-less request (GRAB_JOB, PRE_SLEEP, …).
pub fn bare(kind: PacketType) -> Vec<u8> {
    req(kind, &[])
}

/// WORK_COMPLETE handle, data.
pub fn work_complete(handle: &[u8], data: &[u8]) -> Vec<u8> {
    req(PacketType::WorkComplete, &[handle, data])
}

/// The `status` line of `function`: (total, running, workers).
pub fn status_of(list: &str, function: &str) -> Option<(u32, u32, u32)> {
    list.lines().find_map(|line| {
        let mut cols = line.split('\t');
        if cols.next()? != function {
            return None;
        }
        let mut n = || cols.next()?.parse::<u32>().ok();
        Some((n()?, n()?, n()?))
    })
}

/// Asks `status` on a fresh connection until `function` shows `want`
/// (total, running, workers); panics after [`TIMEOUT`].
pub async fn wait_status(addr: SocketAddr, function: &str, want: (u32, u32, u32)) {
    let mut admin = Conn::connect(addr).await;
    let start = Instant::now();
    loop {
        let list = admin.admin_list("status").await;
        if status_of(&list, function) == Some(want) {
            return;
        }
        assert!(
            start.elapsed() < TIMEOUT,
            "status of {function} never became {want:?}; last:\n{list}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
