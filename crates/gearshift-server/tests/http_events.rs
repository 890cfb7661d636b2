//! The live event stream over real HTTP: a scripted job's life, and a
//! reader that does not read being dropped while job traffic goes on.

mod http_common;

use std::sync::Arc;
use std::time::Duration;

use gearshift_core::policy::{Policies, Policy, Rule};
use http_common::{config, reverser, start};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Opens the event stream and reads its headers.
async fn subscribe(http: std::net::SocketAddr, query: &str) -> (TcpStream, String) {
    let mut s = TcpStream::connect(http).await.expect("connect");
    let req = format!("GET /api/v1/events{query} HTTP/1.1\r\nHost: t\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut text = String::new();
    let mut buf = [0u8; 4096];
    while !text.contains("\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("headers in time")
            .expect("read");
        assert!(n > 0, "closed before headers");
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("text/event-stream"), "{text}");
    (s, text)
}

/// Reads until `want` event kinds have come (in `kinds`), or 10 s pass.
async fn read_kinds(
    s: &mut TcpStream,
    text: &mut String,
    until: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    let mut buf = [0u8; 8192];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let kinds: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("event: "))
            .map(str::to_owned)
            .collect();
        if until(&kinds) {
            return kinds;
        }
        match tokio::time::timeout_at(deadline, s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => text.push_str(&String::from_utf8_lossy(&buf[..n])),
            _ => return kinds,
        }
    }
}

#[tokio::test]
async fn a_jobs_life_as_events() {
    let mut cfg = config();
    cfg.policies = Policies {
        rules: vec![Rule {
            pattern: "flaky".into(),
            policy: Arc::new(Policy {
                max_attempts: 2,
                initial_delay: 10,
                jitter: false,
                ..Policy::default()
            }),
        }],
        ..Policies::default()
    };
    let s = start(cfg).await;
    let (mut sse, mut text) = subscribe(s.http, "?function=flaky").await;
    let c = s.gearman_client();
    c.job("other", "x")
        .background()
        .await
        .expect("submit other");
    let h = c.job("flaky", "abc").background().await.expect("submit");
    let stop = reverser(s.gearman, "flaky", true);
    let kinds = read_kinds(&mut sse, &mut text, |k| k.iter().any(|k| k == "completed")).await;
    let job: Vec<&str> = kinds
        .iter()
        .map(String::as_str)
        .filter(|k| !matches!(*k, "requeued" | "worker_joined" | "worker_left"))
        .collect();
    assert_eq!(
        job,
        [
            "created",
            "started",
            "failed",
            "retrying",
            "started",
            "completed"
        ],
        "{text}"
    );
    assert!(kinds.iter().any(|k| k == "worker_joined"), "{text}");
    assert!(
        text.contains(&format!("\"handle\":\"{}\"", h.handle().escape_ascii())),
        "{text}"
    );
    assert!(text.contains("\"retry_at_ms\":"), "{text}");
    assert!(text.contains("\"detail\":\"3 bytes\""), "{text}");
    assert!(
        !text.contains("\"function\":\"other\""),
        "the filter lets only flaky through: {text}"
    );
    let _ = stop.send(());
    let kinds = read_kinds(&mut sse, &mut text, |k| {
        k.iter().any(|k| k == "worker_left")
    })
    .await;
    assert!(kinds.iter().any(|k| k == "worker_left"), "{text}");
}

#[tokio::test]
async fn a_reader_that_falls_behind_is_dropped() {
    let mut cfg = config();
    if let Some(h) = cfg.http.as_mut() {
        h.event_buffer = 4;
    }
    let s = start(cfg).await;
    // A small receive buffer, and no reading: the server's writes stall.
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.set_recv_buffer_size(4096).expect("rcvbuf");
    let mut slow = sock.connect(s.http).await.expect("connect");
    slow.write_all(b"GET /api/v1/events HTTP/1.1\r\nHost: t\r\n\r\n")
        .await
        .expect("write");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let c = s.gearman_client();
    // Job traffic goes on regardless of the reader.
    // Enough events to overrun what the kernel buffers on the server's side
    // too (its send buffer grows to megabytes): ~40,000 events.
    for round in 0..200 {
        let jobs: Vec<_> = (0..200)
            .map(|i| {
                let c = c.clone();
                async move {
                    c.job("f", format!("{round}-{i}-{}", "x".repeat(200)))
                        .background()
                        .await
                }
            })
            .collect();
        for r in futures_util::future::join_all(jobs).await {
            r.expect("submission goes through");
        }
    }
    let mut text = String::new();
    let kinds = read_kinds(&mut slow, &mut text, |k| k.iter().any(|k| k == "dropped")).await;
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("dropped"),
        "kinds: {}",
        kinds.len()
    );
    assert!(text.contains("\"kind\":\"dropped\""));
}

#[tokio::test]
async fn kinds_pick_what_is_produced_and_stats_come_each_second() {
    let mut cfg = config();
    cfg.policies = Policies {
        rules: vec![Rule {
            pattern: "flaky".into(),
            policy: Arc::new(Policy {
                max_attempts: 2,
                initial_delay: 10,
                jitter: false,
                ..Policy::default()
            }),
        }],
        ..Policies::default()
    };
    let s = start(cfg).await;
    // A bad kind is refused.
    let r = http_common::client()
        .get(format!("{}/api/v1/events?kinds=created,nonsense", s.base))
        .send()
        .await
        .expect("get");
    assert_eq!(r.status().as_u16(), 400);
    let body: serde_json::Value = r.json().await.expect("json");
    assert!(
        body["error"].as_str().unwrap_or("").contains("nonsense"),
        "{body}"
    );
    // What the dashboard asks for: failures, retries, workers, and stats.
    let (mut sse, mut text) = subscribe(
        s.http,
        "?kinds=failed,retrying,dead,worker_joined,worker_left,stats",
    )
    .await;
    let c = s.gearman_client();
    c.job("flaky", "abc").background().await.expect("submit");
    let _w = reverser(s.gearman, "flaky", true);
    let kinds = read_kinds(&mut sse, &mut text, |k| {
        k.iter().filter(|k| *k == "stats").count() >= 3 && k.contains(&"retrying".to_owned())
    })
    .await;
    let jobs: Vec<&String> = kinds.iter().filter(|k| *k != "stats").collect();
    assert_eq!(jobs, ["worker_joined", "failed", "retrying"], "{text}");
    // The job completed, yet neither created, started nor completed came.
    let last_stats = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .rfind(|d| d.contains("\"kind\":\"stats\""))
        .expect("a stats event");
    let v: serde_json::Value = serde_json::from_str(last_stats).expect("stats JSON");
    assert_eq!(v["totals"]["submitted"], 1, "{v}");
    assert_eq!(v["totals"]["completed"], 1, "{v}");
    assert_eq!(v["totals"]["failed"], 1, "{v}");
    assert_eq!(v["connections"]["worker"], 1, "{v}");
}

#[tokio::test]
async fn a_dead_event_says_why_and_after_how_many_attempts() {
    let mut cfg = config();
    cfg.policies = Policies {
        rules: vec![Rule {
            pattern: "doomed".into(),
            policy: Arc::new(Policy {
                max_attempts: 1,
                ..Policy::default()
            }),
        }],
        ..Policies::default()
    };
    let s = start(cfg).await;
    let (mut sse, mut text) = subscribe(s.http, "?kinds=failed,dead").await;
    let c = s.gearman_client();
    let h = c.job("doomed", "abc").background().await.expect("submit");
    let _w = reverser(s.gearman, "doomed", true);
    let kinds = read_kinds(&mut sse, &mut text, |k| k.iter().any(|k| k == "dead")).await;
    assert_eq!(kinds, ["failed", "dead"], "{text}");
    let dead = text
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .find(|d| d.contains("\"kind\":\"dead\""))
        .expect("a dead event");
    let v: serde_json::Value = serde_json::from_str(dead).expect("JSON");
    assert_eq!(v["handle"], String::from_utf8_lossy(h.handle()).as_ref());
    // Filled like the other events' detail (a `failed` one says `fail`).
    assert_eq!(v["detail"], "1 attempt; fail", "{v}");
    assert_eq!(v["attempts"], 1, "{v}");
    assert_eq!(v["reason"], "fail", "{v}");
    assert_eq!(v["error"], "fail", "{v}");
}
