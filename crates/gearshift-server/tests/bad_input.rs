//! Bad input: each kind either closes or answers only the connection that
//! sent it. After every case a bystander client, connected beforehand, must
//! still be served, and a background job queued beforehand must still be
//! there (checked with `status` and `show jobs` on a fresh connection).
//! Names, ids and uniques full of control bytes must leave every admin
//! listing parseable line by line.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::{bare, raw_packet, req, status_of, submit_bg, Conn, TestServer};
use gearshift_proto::frame::{MAGIC_REQ, MAGIC_RES};
use gearshift_proto::{PacketType, Request, Response};
use tokio::io::AsyncWriteExt;

/// `max_packet_size` of the servers in this file.
const MAX_PACKET: usize = 1024;

/// A server with a connected bystander and one queued background job.
struct Fixture {
    server: TestServer,
    bystander: Conn,
    job: Bytes,
}

impl Fixture {
    async fn new() -> Fixture {
        let mut cfg = common::config();
        cfg.max_packet_size = MAX_PACKET;
        let server = TestServer::start(cfg).await;
        let mut bystander = server.connect().await;
        bystander.send(&submit_bg("keep", "", b"payload")).await;
        let job = bystander.expect_created().await;
        Fixture {
            server,
            bystander,
            job,
        }
    }

    /// The bystander is served and the queued job is intact.
    async fn check_unharmed(&mut self) {
        self.bystander.ping(b"still here").await;
        let mut admin = self.server.connect().await;
        let status = admin.admin_list("status").await;
        assert_eq!(status_of(&status, "keep"), Some((1, 0, 0)), "{status}");
        let jobs = admin.admin_list("show jobs").await;
        let line = format!("{}\t0\t0\t1\n", String::from_utf8_lossy(&self.job));
        assert!(jobs.starts_with(&line), "job missing from:\n{jobs}");
    }

    /// Sends `bytes` on a fresh connection and expects it closed with no reply.
    async fn send_expect_close(&mut self, bytes: &[u8]) {
        let mut bad = self.server.connect().await;
        bad.send(bytes).await;
        bad.expect_closed().await;
        self.check_unharmed().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_magic_closes() {
    let mut fx = Fixture::new().await;
    fx.send_expect_close(&raw_packet(b"\0XYZ", 16, b"hi")).await;
    // A partial header is judged as soon as its magic is wrong.
    fx.send_expect_close(b"\0RQ").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_types_close() {
    let mut fx = Fixture::new().await;
    for kind in [0, 43, 0xffff_ffff] {
        fx.send_expect_close(&raw_packet(&MAGIC_REQ, kind, b""))
            .await;
    }
    // Also after a good packet on the same connection: the good one is answered.
    let mut bad = fx.server.connect().await;
    let mut bytes = req(PacketType::EchoReq, &[b"before"]);
    bytes.extend(raw_packet(&MAGIC_REQ, 43, b"x"));
    bad.send(&bytes).await;
    bad.expect(Response::EchoRes(Bytes::from_static(b"before")))
        .await;
    bad.expect_closed().await;
    fx.check_unharmed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_magic_is_answered_and_connection_kept() {
    let mut fx = Fixture::new().await;
    let mut conn = fx.server.connect().await;
    conn.send(&raw_packet(&MAGIC_RES, PacketType::EchoReq.as_u32(), b"x"))
        .await;
    let text = conn.expect_error("INVALID_MAGIC").await;
    assert_eq!(text, "Request magic expected");
    conn.ping(b"usable").await;
    fx.check_unharmed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn body_over_max_packet_size_errors_then_closes() {
    let mut fx = Fixture::new().await;

    // Exactly the maximum is fine.
    let mut conn = fx.server.connect().await;
    let at_max = vec![b'm'; MAX_PACKET];
    conn.send(&req(PacketType::EchoReq, &[&at_max])).await;
    conn.expect(Response::EchoRes(Bytes::from(at_max))).await;

    // One byte more: ERROR, then closed.
    let over = vec![b'o'; MAX_PACKET + 1];
    conn.send(&req(PacketType::SubmitJob, &[b"keep", b"", &over]))
        .await;
    conn.expect_error("ARGUMENT_TOO_LARGE").await;
    conn.expect_closed().await;
    fx.check_unharmed().await;

    // The header alone is enough to refuse.
    let mut conn = fx.server.connect().await;
    let mut header = raw_packet(&MAGIC_REQ, PacketType::EchoReq.as_u32(), b"");
    header[8..12].copy_from_slice(&(u32::MAX).to_be_bytes());
    conn.send(&header).await;
    conn.expect_error("ARGUMENT_TOO_LARGE").await;
    conn.expect_closed().await;
    fx.check_unharmed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_line_over_8k_closes() {
    let mut fx = Fixture::new().await;

    // 8191 characters and the newline fill the 8 KiB buffer exactly: answered.
    let mut conn = fx.server.connect().await;
    let word = "w".repeat(8191);
    assert_eq!(
        conn.admin_line(&word).await,
        format!("ERR UNKNOWN_COMMAND Unknown+server+command{word}\r\n")
    );

    // One more: closed without reply.
    let mut line = "x".repeat(8192);
    line.push('\n');
    conn.send(line.as_bytes()).await;
    conn.expect_closed().await;
    fx.check_unharmed().await;

    // Without any newline at all.
    fx.send_expect_close(&[b's'; 9000]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_packet_then_eof() {
    let mut fx = Fixture::new().await;
    let mut conn = fx.server.connect().await;
    let mut bytes = raw_packet(&MAGIC_REQ, PacketType::SubmitJobBg.as_u32(), &[b'a'; 100]);
    bytes.truncate(12 + 10);
    conn.send(&bytes).await;
    conn.stream.shutdown().await.expect("shutdown write half");
    conn.expect_closed().await;
    fx.check_unharmed().await;

    // A truncated header, and a text line without its newline.
    for partial in [&b"\0RE"[..], b"\0REQ\0\0", b"status"] {
        let mut conn = fx.server.connect().await;
        conn.send(partial).await;
        conn.stream.shutdown().await.expect("shutdown write half");
        conn.expect_closed().await;
        fx.check_unharmed().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_only_packets_are_refused() {
    let mut fx = Fixture::new().await;
    let mut conn = fx.server.connect().await;
    for kind in [
        PacketType::Noop,
        PacketType::NoJob,
        PacketType::JobAssign,
        PacketType::Unused,
        PacketType::AllYours,
        PacketType::SubmitJobSched,
    ] {
        conn.send(&bare(kind)).await;
        let text = conn.expect_error("INVALID_COMMAND").await;
        assert_eq!(text, "Command not expected", "{kind:?}");
    }
    conn.ping(b"usable").await;
    fx.check_unharmed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_arguments_are_answered_with_error() {
    let mut fx = Fixture::new().await;
    let mut conn = fx.server.connect().await;
    conn.send(&raw_packet(
        &MAGIC_REQ,
        PacketType::SubmitJob.as_u32(),
        b"nonul",
    ))
    .await;
    conn.expect_error("INVALID_PACKET").await;
    conn.send(&raw_packet(
        &MAGIC_REQ,
        PacketType::SubmitJobEpoch.as_u32(),
        b"f\0u\0",
    ))
    .await;
    conn.expect_error("INVALID_PACKET").await;
    conn.send(&raw_packet(
        &MAGIC_REQ,
        PacketType::WorkComplete.as_u32(),
        b"no-handle-terminator",
    ))
    .await;
    conn.expect_error("INVALID_PACKET").await;
    conn.ping(b"usable").await;
    // Nothing was created from the refused packets.
    let status = conn.admin_list("status").await;
    assert_eq!(status, "keep\t1\t0\t0\n.\n");
    fx.check_unharmed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_line_with_too_many_words_closes() {
    let mut fx = Fixture::new().await;
    // Five words are still answered.
    let mut conn = fx.server.connect().await;
    assert_eq!(
        conn.admin_line("a b c d e").await,
        "ERR UNKNOWN_COMMAND Unknown+server+commanda\r\n"
    );
    conn.send(b"a b c d e f\n").await;
    conn.expect_closed().await;
    fx.check_unharmed().await;
}

/// xorshift64*: a seeded generator, so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }

    fn pick<'a>(&mut self, items: &[&'a [u8]]) -> &'a [u8] {
        items[self.below(items.len() as u64) as usize]
    }
}

/// One connection's worth of garbage: raw noise, packets with random
/// headers, random admin words, or plausible requests followed by noise.
fn garbage(rng: &mut Rng) -> Vec<u8> {
    // No "keep" (the fixture's function) and no "shutdown" among the words.
    const FUNCS: &[&[u8]] = &[b"f", b"g", b"rev", b""];
    const WORDS: &[&[u8]] = &[
        b"status",
        b"workers",
        b"show",
        b"jobs",
        b"unique",
        b"cancel",
        b"job",
        b"create",
        b"drop",
        b"function",
        b"maxqueue",
        b"prioritystatus",
        b"version",
        b"getpid",
        b"verbose",
        b"f",
        b"H:test:2",
        b"",
        b"\r",
        b"-1",
        b"99999999999999999999",
    ];
    let mut out = Vec::new();
    let pieces = 1 + rng.below(4);
    for _ in 0..pieces {
        match rng.below(4) {
            0 => {
                let n = 1 + rng.below(300) as usize;
                out.extend(rng.bytes(n));
            }
            1 => {
                let magic = if rng.below(2) == 0 {
                    MAGIC_REQ
                } else {
                    MAGIC_RES
                };
                let kind = rng.below(46) as u32;
                let body_len = rng.below(64) as usize;
                let mut p = raw_packet(&magic, kind, &rng.bytes(body_len));
                if rng.below(4) == 0 {
                    // Lie about the size: shorter, longer or over the limit.
                    let size = rng.below(3 * MAX_PACKET as u64) as u32;
                    p[8..12].copy_from_slice(&size.to_be_bytes());
                }
                out.extend(p);
            }
            2 => {
                let words = 1 + rng.below(7);
                for i in 0..words {
                    if i > 0 {
                        out.push(b' ');
                    }
                    out.extend_from_slice(rng.pick(WORDS));
                }
                out.push(b'\n');
            }
            _ => {
                let f = Bytes::copy_from_slice(rng.pick(FUNCS));
                let len = rng.below(20) as usize;
                let data = Bytes::from(rng.bytes(len));
                let r = match rng.below(8) {
                    0 => Request::CanDo(f),
                    1 => Request::PreSleep,
                    2 => Request::Grab(gearshift_proto::GrabKind::Plain),
                    3 => Request::WorkComplete {
                        handle: Bytes::from_static(b"H:test:1"),
                        data,
                    },
                    4 => Request::Echo(data),
                    5 => Request::CanDoTimeout {
                        function: f,
                        timeout: Bytes::from_static(b"1000"),
                    },
                    6 => Request::GetStatus(data),
                    _ => Request::Submit(gearshift_proto::Submit {
                        function: f,
                        unique: data.slice(..data.len().min(3)),
                        data,
                        priority: gearshift_proto::Priority::Normal,
                        background: rng.below(2) == 0,
                        epoch: None,
                        reducer: None,
                    }),
                };
                let mut b = bytes::BytesMut::new();
                r.encode(&mut b);
                out.extend_from_slice(&b);
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_garbage_never_breaks_the_server() {
    let mut fx = Fixture::new().await;
    let mut rng = Rng(0x5eed_0f9e_a25b_f7e1);
    for round in 0..300 {
        let bytes = garbage(&mut rng);
        let mut conn = fx.server.connect().await;
        // The server may close before everything is written; that is fine.
        let _ = tokio::time::timeout(common::TIMEOUT, conn.stream.write_all(&bytes)).await;
        let _ = conn.stream.shutdown().await;
        // Whatever it answered, after our EOF it must close within the timeout.
        let deadline = tokio::time::Instant::now() + common::TIMEOUT;
        let mut sink = Vec::new();
        loop {
            use tokio::io::AsyncReadExt;
            sink.clear();
            match tokio::time::timeout_at(deadline, conn.stream.read_buf(&mut sink)).await {
                Err(_) => panic!("round {round}: connection not closed after EOF; sent {bytes:?}"),
                Ok(Ok(0)) | Ok(Err(_)) => break,
                Ok(Ok(_)) => {}
            }
        }
        if round % 50 == 0 {
            fx.check_unharmed().await;
        }
    }
    // A fresh connection still gets `status`, and the garbage connections
    // are all gone from `workers` (only the bystander and this one remain).
    let mut admin = fx.server.connect().await;
    status_rows(&admin.admin_list("status").await);
    let start = std::time::Instant::now();
    loop {
        let workers = admin.admin_list("workers").await;
        if workers.lines().count() == 3 {
            break;
        }
        assert!(
            start.elapsed() < common::TIMEOUT,
            "garbage connections linger:\n{workers}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fx.check_unharmed().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_after_a_closing_line_is_executed() {
    let mut fx = Fixture::new().await;
    let mut conn = fx.server.connect().await;
    let mut bytes = b"a b c d e f\n".to_vec();
    bytes.extend(submit_bg("ghost", "", b"boo"));
    bytes.extend(b"create function phantom\n");
    conn.send(&bytes).await;
    conn.expect_closed().await;
    fx.check_unharmed().await;
    let mut admin = fx.server.connect().await;
    let status = admin.admin_list("status").await;
    assert_eq!(
        status, "keep\t1\t0\t0\n.\n",
        "input after the closing line ran"
    );
}

// ---- client-chosen bytes in admin listings --------------------------------

/// Asserts `list` is lines of exactly `cols` fields split on `sep`, with no
/// control byte but the separator; returns the rows.
fn listing_rows(list: &str, sep: char, cols: usize) -> Vec<Vec<String>> {
    let body = list
        .strip_suffix(".\n")
        .unwrap_or_else(|| panic!("list not terminated: {list:?}"));
    body.lines()
        .map(|line| {
            let bad = line
                .bytes()
                .any(|c| c != sep as u8 && (c < 0x20 || c == 0x7f));
            assert!(!bad, "control byte in {line:?}");
            let fields: Vec<String> = line.split(sep).map(str::to_owned).collect();
            assert_eq!(fields.len(), cols, "{line:?}");
            fields
        })
        .collect()
}

/// `status` rows: a name and three counts each.
fn status_rows(list: &str) -> Vec<Vec<String>> {
    let rows = listing_rows(list, '\t', 4);
    for row in &rows {
        assert!(row[1..].iter().all(|c| c.parse::<u32>().is_ok()), "{row:?}");
    }
    rows
}

/// `workers` rows as (client id, functions); each line is `FD IP ID : F…`.
fn workers_rows(list: &str) -> Vec<(String, Vec<String>)> {
    let body = list
        .strip_suffix(".\n")
        .unwrap_or_else(|| panic!("list not terminated: {list:?}"));
    body.lines()
        .map(|line| {
            assert!(
                !line.bytes().any(|c| c < 0x20 || c == 0x7f),
                "control byte in {line:?}"
            );
            let f: Vec<&str> = line.split(' ').collect();
            assert!(f.len() >= 4 && f[3] == ":", "{line:?}");
            assert!(f[0].parse::<i64>().is_ok(), "{line:?}");
            let functions = f[4..].iter().map(|s| (*s).to_owned()).collect();
            (f[2].to_owned(), functions)
        })
        .collect()
}

/// Reads every admin listing on a fresh connection and checks each parses
/// line by line; a forged `.` line would leave text behind, which the
/// closing ping would trip over. Returns `status` and `workers`.
async fn listings_parse(server: &TestServer) -> (String, String) {
    let mut admin = server.connect().await;
    let status = admin.admin_list("status").await;
    status_rows(&status);
    listing_rows(&admin.admin_list("prioritystatus").await, '\t', 5);
    let workers = admin.admin_list("workers").await;
    workers_rows(&workers);
    listing_rows(&admin.admin_list("show jobs").await, '\t', 4);
    listing_rows(&admin.admin_list("show unique jobs").await, '\n', 1);
    admin.ping(b"nothing left over").await;
    (status, workers)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn control_bytes_in_names_cannot_forge_admin_lines() {
    let mut fx = Fixture::new().await;
    let mut worker = fx.server.connect().await;
    worker.send(&common::can_do("good")).await;
    worker
        .send(&req(PacketType::SetClientId, &[b"worker-1"]))
        .await;
    let refused_function = "Function name contains a control character";
    let names: [&[u8]; 5] = [
        b"evil\nkeep\t9\t9\t9",
        b"\0starts-like-a-packet",
        b"cr\r",
        b"tab\tx",
        b"del\x7f",
    ];
    for name in names {
        worker.send(&req(PacketType::CanDo, &[name])).await;
        assert_eq!(
            worker.expect_error("INVALID_ARGUMENT").await,
            refused_function
        );
        let id = [b"id-", name].concat();
        worker.send(&req(PacketType::SetClientId, &[&id])).await;
        assert_eq!(
            worker.expect_error("INVALID_ARGUMENT").await,
            "Client id contains a control character"
        );
        if name.contains(&0) {
            // A NUL ends the function name of these packets on the wire.
            continue;
        }
        worker
            .send(&req(PacketType::CanDoTimeout, &[name, b"5000"]))
            .await;
        assert_eq!(
            worker.expect_error("INVALID_ARGUMENT").await,
            refused_function
        );
        for kind in [PacketType::SubmitJob, PacketType::SubmitJobBg] {
            worker.send(&req(kind, &[name, b"", b"data"])).await;
            assert_eq!(
                worker.expect_error("INVALID_ARGUMENT").await,
                refused_function
            );
        }
    }
    worker.ping(b"still a worker").await;
    // Uniques stay accepted (as gearmand accepts them) and are listed escaped.
    fx.bystander
        .send(&submit_bg("uniq", "u\n.\nH:forged", b"x"))
        .await;
    fx.bystander.expect_created().await;

    let (status, workers) = listings_parse(&fx.server).await;
    assert_eq!(status, "keep\t1\t0\t0\ngood\t0\t0\t1\nuniq\t1\t0\t0\n.\n");
    let ids: Vec<(String, Vec<String>)> = workers_rows(&workers);
    assert_eq!(ids.len(), 3, "{workers}");
    assert_eq!(ids[1], ("worker-1".to_owned(), vec!["good".to_owned()]));
    let mut admin = fx.server.connect().await;
    assert_eq!(
        admin.admin_list("show unique jobs").await,
        "\nu\\x0a.\\x0aH:forged\n.\n"
    );
    fx.check_unharmed().await;
}

/// A stream of well-framed packets and admin lines whose names, ids and
/// uniques are random bytes, heavy in controls, spaces and dots; it ends
/// with ECHO_REQ `sync`, so the sender knows the server read it all.
fn hostile_names(rng: &mut Rng, size: usize) -> Vec<u8> {
    let name = |rng: &mut Rng, max: u64| -> Vec<u8> {
        let len = rng.below(max + 1) as usize;
        (0..len)
            .map(|_| match rng.below(10) {
                0..=3 => rng.pick(&[b"\n", b"\r", b"\0", b"\t", b"\x1b", b"\x7f", b"\x01"])[0],
                4 => b' ',
                5 => b'.',
                _ => b'!' + rng.below(94) as u8,
            })
            .collect()
    };
    let pool: Vec<Vec<u8>> = (0..32).map(|_| name(rng, 24)).collect();
    let mut out = Vec::with_capacity(size + 64);
    while out.len() < size {
        let f = &pool[rng.below(pool.len() as u64) as usize];
        let unique = name(rng, 64);
        let packet = match rng.below(8) {
            0 => req(PacketType::CanDo, &[f]),
            1 => req(PacketType::CanDoTimeout, &[f, b"60000"]),
            2 => req(PacketType::SetClientId, &[f]),
            3 => req(PacketType::SubmitJobBg, &[f, &unique, b"w"]),
            4 => req(PacketType::SubmitJobHighBg, &[f, &unique, b"w"]),
            5 => req(PacketType::SubmitJob, &[f, &unique, b"w"]),
            6 => bare(PacketType::GrabJobUniq),
            _ => {
                // One admin word: no space, LF or leading NUL in it.
                let word: Vec<u8> = f
                    .iter()
                    .map(|&c| if c == b' ' || c == b'\n' { b'_' } else { c })
                    .collect();
                [b"create function x", &word[..], b"\n"].concat()
            }
        };
        out.extend(packet);
    }
    out.extend(req(PacketType::EchoReq, &[b"sync"]));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_names_never_break_admin_listings() {
    const CONNS: u64 = 20;
    const BYTES: usize = 256 * 1024;
    let mut fx = Fixture::new().await;
    let mut rng = Rng(0x0dd_ba11_5eed_cafe);
    let mut tasks = Vec::new();
    for c in 0..CONNS {
        let conn = fx.server.connect().await;
        // Half send hostile names on connections they keep open; half send
        // random bytes (with some hostile packets in them) and hang up.
        let hangs_up = c % 2 == 1;
        let bytes = if hangs_up {
            let mut noise = rng.bytes(BYTES / 2);
            noise.extend(hostile_names(&mut rng, BYTES / 2));
            noise
        } else {
            hostile_names(&mut rng, BYTES)
        };
        tasks.push(tokio::spawn(async move {
            let (mut rd, mut wr) = conn.stream.into_split();
            // Read while writing: the server answers much of this stream.
            let reader = tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let mut tail = Tail::default();
                let mut chunk = vec![0; 64 * 1024];
                loop {
                    match rd.read(&mut chunk).await {
                        Ok(0) | Err(_) => return (false, rd),
                        Ok(n) => {
                            if tail.push_and_find(&chunk[..n], &SYNC_REPLY) {
                                return (true, rd);
                            }
                        }
                    }
                }
            });
            let wrote = tokio::time::timeout(common::TIMEOUT, wr.write_all(&bytes)).await;
            if hangs_up {
                let _ = wr.shutdown().await;
            }
            let (synced, rd) = tokio::time::timeout(common::TIMEOUT, reader)
                .await
                .expect("server neither answered the sync nor closed")
                .expect("reader task");
            if !hangs_up {
                assert!(matches!(wrote, Ok(Ok(()))), "write failed: {wrote:?}");
                assert!(synced, "connection {c} closed on well-framed input");
            }
            (rd, wr)
        }));
    }
    // Keep the connections that stayed open: their names are in `workers`.
    let mut open = Vec::new();
    for t in tasks {
        open.push(t.await.expect("connection task"));
    }
    let want_lines = 1 + CONNS as usize / 2 + 1; // bystander, kept ones, the probe
    let start = std::time::Instant::now();
    loop {
        let (_, workers) = listings_parse(&fx.server).await;
        let rows = workers_rows(&workers);
        if rows.len() == want_lines {
            break;
        }
        assert!(
            start.elapsed() < common::TIMEOUT,
            "hung-up connections linger:\n{workers}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    fx.check_unharmed().await;
    drop(open);
}

/// The ECHO_RES that answers `hostile_names`' closing ECHO_REQ.
const SYNC_REPLY: [u8; 16] = *b"\0RES\0\0\0\x11\0\0\0\x04sync";

/// The last bytes a connection read, enough to spot a needle split across reads.
#[derive(Default)]
struct Tail(Vec<u8>);

impl Tail {
    /// Appends `more`; true when `needle` ends in it.
    fn push_and_find(&mut self, more: &[u8], needle: &[u8]) -> bool {
        self.0.extend_from_slice(more);
        let found = self.0.windows(needle.len()).any(|w| w == needle);
        let keep = self.0.len().min(needle.len() - 1);
        self.0.drain(..self.0.len() - keep);
        found
    }
}
