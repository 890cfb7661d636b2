//! Bad input: each kind either closes or answers only the connection that
//! sent it. After every case a bystander client, connected beforehand, must
//! still be served, and a background job queued beforehand must still be
//! there (checked with `status` and `show jobs` on a fresh connection).
//! Control bytes in names and ids are in `admin_lines.rs`.

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::bystander::{Fixture, Rng, MAX_PACKET};
use common::listing::status_rows;
use common::{bare, raw_packet, req, submit_bg};
use gearshift_proto::frame::{MAGIC_REQ, MAGIC_RES};
use gearshift_proto::{PacketType, Request, Response};
use tokio::io::AsyncWriteExt;

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
                    _ => Request::submit(Box::new(gearshift_proto::Submit {
                        function: f,
                        unique: data.slice(..data.len().min(3)),
                        data,
                        priority: gearshift_proto::Priority::Normal,
                        background: rng.below(2) == 0,
                        epoch: None,
                        reducer: None,
                    })),
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
