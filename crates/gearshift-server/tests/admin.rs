//! The admin text protocol over real sockets: text lines and binary packets
//! mixed on one connection, pipelined lines in one write (LF and CRLF),
//! lines split across writes, and the list formats.

mod common;

use bytes::Bytes;
use common::{submit_bg, Conn, TestServer, PID, VERSION};
use gearshift_proto::{PacketType, Response};

fn echo(data: &[u8]) -> Vec<u8> {
    common::req(PacketType::EchoReq, &[data])
}

async fn expect_echo(conn: &mut Conn, data: &'static [u8]) {
    conn.expect(Response::EchoRes(Bytes::from_static(data)))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_and_text_mixed_in_one_write() {
    let server = TestServer::start_default().await;
    let mut conn = server.connect().await;

    let mut batch = Vec::new();
    batch.extend(echo(b"one"));
    batch.extend(b"status\n");
    batch.extend(echo(b"two\0with nul"));
    batch.extend(b"version\r\n");
    batch.extend(echo(b""));
    conn.send(&batch).await;

    expect_echo(&mut conn, b"one").await;
    assert_eq!(conn.read_list().await, ".\n");
    expect_echo(&mut conn, b"two\0with nul").await;
    assert_eq!(conn.read_text_until(b"\n").await, format!("OK {VERSION}\n"));
    expect_echo(&mut conn, b"").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_and_text_mixed_in_separate_writes() {
    let server = TestServer::start_default().await;
    let mut conn = server.connect().await;

    conn.send(&echo(b"first")).await;
    expect_echo(&mut conn, b"first").await;
    assert_eq!(conn.admin_list("status").await, ".\n");
    conn.send(&echo(b"second")).await;
    expect_echo(&mut conn, b"second").await;
    assert_eq!(conn.admin_line("create function mixed").await, "OK\r\n");
    conn.send(&submit_bg("mixed", "", b"x")).await;
    assert_eq!(conn.expect_created().await, common::handle(1));
    assert_eq!(conn.admin_list("status").await, "mixed\t1\t0\t0\n.\n");
}

/// The replies to the pipelined script below, whichever line ending it used.
fn expect_script(workers: &str) -> String {
    format!(
        "OK\r\n\
         alpha\t0\t0\t0\n.\n\
         OK {VERSION}\n\
         OK {PID}\n\
         OK ERROR\n\
         {workers}\
         alpha\t0\t0\t0\t0\n.\n\
         ERR UNKNOWN_COMMAND Unknown+server+commandbogus\r\n\
         .\n"
    )
}

async fn run_script(conn: &mut Conn, eol: &str) -> String {
    let lines = [
        "create function alpha",
        "status",
        "version",
        "getpid",
        "verbose",
        "workers",
        "prioritystatus",
        "bogus",
        "show jobs",
    ];
    let mut script = String::new();
    for l in lines {
        script.push_str(l);
        script.push_str(eol);
    }
    conn.send(script.as_bytes()).await;
    let mut got = String::new();
    got += &conn.read_text_until(b"\r\n").await;
    got += &conn.read_list().await;
    got += &conn.read_text_until(b"\n").await;
    got += &conn.read_text_until(b"\n").await;
    got += &conn.read_text_until(b"\n").await;
    let workers = conn.read_list().await;
    got += &workers;
    got += &conn.read_list().await;
    got += &conn.read_text_until(b"\r\n").await;
    got += &conn.read_list().await;
    assert_eq!(got, expect_script(&workers));
    workers
}

fn check_workers(list: &str, connections: usize) {
    let lines: Vec<&str> = list.lines().collect();
    assert_eq!(lines.len(), connections + 1, "workers list: {list:?}");
    assert_eq!(lines.last(), Some(&"."));
    for line in &lines[..connections] {
        let mut words = line.split(' ');
        let fd = words.next().expect("fd");
        assert!(fd.parse::<i64>().is_ok(), "fd column in {line:?}");
        assert_eq!(words.collect::<Vec<_>>(), ["127.0.0.1", "-", ":"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_lines_lf() {
    let server = TestServer::start_default().await;
    let mut conn = server.connect().await;
    let workers = run_script(&mut conn, "\n").await;
    check_workers(&workers, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_lines_crlf() {
    let server = TestServer::start_default().await;
    let mut conn = server.connect().await;
    let workers = run_script(&mut conn, "\r\n").await;
    check_workers(&workers, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn line_split_across_writes() {
    let server = TestServer::start_default().await;
    let mut conn = server.connect().await;
    conn.send(b"ver").await;
    conn.expect_silence(std::time::Duration::from_millis(50))
        .await;
    conn.send(b"sion\r").await;
    conn.expect_silence(std::time::Duration::from_millis(50))
        .await;
    conn.send(b"\nSTAT").await;
    assert_eq!(conn.read_text_until(b"\n").await, format!("OK {VERSION}\n"));
    conn.send(b"US\n").await;
    assert_eq!(conn.read_list().await, ".\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn job_lists_and_cancel() {
    let server = TestServer::start_default().await;
    let mut client = server.connect().await;
    let mut admin = server.connect().await;

    client.send(&submit_bg("bg", "uniq-1", b"a")).await;
    let h1 = client.expect_created().await;
    client.send(&submit_bg("bg", "", b"b")).await;
    let h2 = client.expect_created().await;

    assert_eq!(
        admin.admin_list("show jobs").await,
        format!(
            "{}\t0\t0\t1\n{}\t0\t0\t1\n.\n",
            String::from_utf8_lossy(&h1),
            String::from_utf8_lossy(&h2)
        )
    );
    assert_eq!(admin.admin_list("show unique jobs").await, "uniq-1\n\n.\n");
    assert_eq!(
        admin
            .admin_line(&format!("cancel job {}", String::from_utf8_lossy(&h1)))
            .await,
        "OK\r\n"
    );
    assert_eq!(
        admin.admin_line("cancel job H:test:999").await,
        "ERR UNKNOWN_JOB\r\n"
    );
    assert_eq!(admin.admin_list("status").await, "bg\t1\t0\t0\n.\n");
    assert_eq!(
        admin.admin_line("show nonsense").await,
        "ERR UNKNOWN_SHOW_ARGUMENTS\r\n"
    );
}
