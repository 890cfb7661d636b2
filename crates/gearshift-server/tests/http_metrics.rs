//! `/metrics` over real HTTP, parsed strictly as the text format 0.0.4 and
//! checked against the admin protocol's `status`.

mod http_common;

use std::collections::HashMap;

use gearshift_store::fault::FaultyStore;
use gearshift_store::MemoryStore;
use http_common::{client, config, get, start, start_with_store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `name{labels}` → value; panics on a malformed line or a sample without
/// a TYPE line before it.
fn parse(text: &str) -> HashMap<String, f64> {
    let mut typed = std::collections::HashSet::new();
    let mut out = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let mut it = rest.split(' ');
            let name = it.next().expect("name");
            let kind = it.next().expect("kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            typed.insert(name.to_owned());
            continue;
        }
        if line.starts_with("# HELP ") || line.is_empty() {
            continue;
        }
        assert!(!line.starts_with('#'), "{line}");
        let (series, value) = line.rsplit_once(' ').expect("value");
        let value: f64 = value.parse().expect("number");
        let name = series.split('{').next().expect("name");
        let base = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|b| typed.contains(*b)))
            .unwrap_or(name);
        assert!(typed.contains(base), "no TYPE for {name}");
        if let Some(labels) = series.strip_prefix(name) {
            if !labels.is_empty() {
                assert!(labels.starts_with('{') && labels.ends_with('}'), "{line}");
            }
        }
        assert!(
            out.insert(series.to_owned(), value).is_none(),
            "duplicate {series}"
        );
    }
    out
}

#[tokio::test]
async fn metrics_agree_with_status() {
    let s = start(config()).await;
    let c = s.gearman_client();
    for i in 0..3 {
        c.job("alpha", format!("{i}"))
            .background()
            .await
            .expect("submit");
    }
    c.job("beta\"x", "1").background().await.expect("submit");
    let (text, _) = scrape(&s.base).await;
    let m = parse(&text);
    // `status`: FUNCTION\tTOTAL\tRUNNING\tWORKERS
    let mut admin = tokio::net::TcpStream::connect(s.gearman)
        .await
        .expect("admin");
    admin.write_all(b"status\n").await.expect("write");
    let mut got = String::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(".\n") {
        let n = admin.read(&mut buf).await.expect("read");
        assert!(n > 0);
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let mut seen = 0;
    for line in got.lines().filter(|l| *l != ".") {
        let f: Vec<&str> = line.split('\t').collect();
        let name = f[0].replace('\\', "\\\\").replace('"', "\\\"");
        let total: f64 = f[1].parse().expect("total");
        let running: f64 = f[2].parse().expect("running");
        let workers: f64 = f[3].parse().expect("workers");
        assert_eq!(
            m[&format!("gearman_jobs{{function=\"{name}\"}}")],
            total,
            "{line}"
        );
        assert_eq!(
            m[&format!("gearman_jobs_running{{function=\"{name}\"}}")],
            running
        );
        assert_eq!(
            m[&format!("gearman_workers{{function=\"{name}\"}}")],
            workers
        );
        assert_eq!(
            m[&format!("gearman_jobs_waiting{{function=\"{name}\"}}")],
            total - running
        );
        seen += 1;
    }
    assert_eq!(seen, 2, "{got}");
    assert_eq!(
        m["gearshift_jobs_queued{function=\"alpha\",priority=\"normal\"}"],
        3.0
    );
    assert_eq!(m["gearshift_jobs_submitted_total{function=\"alpha\"}"], 3.0);
    assert_eq!(
        m["gearshift_jobs_failed_total{function=\"alpha\",reason=\"timeout\"}"],
        0.0
    );
    assert_eq!(
        m["gearshift_job_wait_seconds_bucket{function=\"alpha\",le=\"+Inf\"}"],
        0.0
    );
    assert!(m.contains_key("gearshift_job_run_seconds_count{function=\"alpha\"}"));
    assert!(m.contains_key("gearshift_jobs_dead{function=\"alpha\"}"));
    assert!(m.contains_key("gearshift_jobs_retried_total{function=\"alpha\"}"));
    assert!(m.contains_key("gearshift_jobs_completed_total{function=\"alpha\"}"));
    assert!(m.contains_key("gearshift_workers{function=\"alpha\"}"));
    assert!(m.contains_key("gearshift_connections{role=\"client\"}"));
    assert!(m.contains_key("gearshift_store_commit_seconds_count"));
    assert_eq!(
        m[&format!(
            "gearshift_build_info{{version=\"{}\"}}",
            env!("CARGO_PKG_VERSION")
        )],
        1.0
    );
    assert_eq!(m["gearman_up"], 1.0);
}

/// The samples of one scrape as a third-party parser (`prometheus-parse`)
/// reads them.
async fn scrape(base: &str) -> (String, prometheus_parse::Scrape) {
    let text = client()
        .get(format!("{base}/metrics"))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("body");
    let lines = text.lines().map(|l| Ok(l.to_owned()));
    let parsed = prometheus_parse::Scrape::parse(lines).expect("parse");
    (text, parsed)
}

fn value(s: &prometheus_parse::Scrape, metric: &str, labels: &[(&str, &str)]) -> f64 {
    use prometheus_parse::Value;
    let sample = s
        .samples
        .iter()
        .find(|x| x.metric == metric && labels.iter().all(|(k, v)| x.labels.get(k) == Some(*v)))
        .unwrap_or_else(|| panic!("no {metric} {labels:?}"));
    match &sample.value {
        Value::Counter(v) | Value::Gauge(v) | Value::Untyped(v) => *v,
        Value::Histogram(buckets) => buckets.iter().map(|b| b.count).fold(0.0, f64::max),
        Value::Summary(_) => panic!("{metric} is a summary"),
    }
}

#[tokio::test]
async fn metrics_follow_a_jobs_life() {
    use gearshift_core::policy::{Backoff, Policies, Policy, Reason, Reasons, Rule};
    use std::sync::Arc;
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config();
    cfg.store = gearshift_server::StoreConfig::Log {
        dir: dir.path().to_owned(),
        durability: gearshift_store::Durability::Fsync,
    };
    cfg.policies = Policies {
        rules: vec![Rule {
            pattern: "flaky".into(),
            policy: Arc::new(Policy {
                max_attempts: 2,
                retry_on: Reasons::of(&[Reason::Fail]),
                backoff: Backoff::Fixed,
                initial_delay: 50,
                max_delay: 50,
                jitter: false,
                ..Policy::default()
            }),
        }],
        ..Policies::default()
    };
    let s = start(cfg).await;
    let c = s.gearman_client();
    // Fails its first run, is retried after 50 ms, then completes.
    c.job("flaky", "abc").background().await.expect("submit");
    c.job("later", "x").background().await.expect("submit");
    // It waits 150 ms for a worker; its retry is taken as soon as it is due.
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let _worker = http_common::reverser(s.gearman, "flaky", true);
    let base = s.base.clone();
    http_common::eventually(|| {
        let base = base.clone();
        async move {
            let (_, m) = scrape(&base).await;
            value(
                &m,
                "gearshift_jobs_completed_total",
                &[("function", "flaky")],
            ) == 1.0
        }
    })
    .await;
    let (text, m) = scrape(&s.base).await;
    let f = [("function", "flaky")];
    assert_eq!(
        value(&m, "gearshift_jobs_submitted_total", &f),
        1.0,
        "{text}"
    );
    let fail = [("function", "flaky"), ("reason", "fail")];
    assert_eq!(value(&m, "gearshift_jobs_failed_total", &fail), 1.0);
    assert_eq!(value(&m, "gearshift_jobs_retried_total", &f), 1.0);
    assert_eq!(value(&m, "gearshift_jobs_running", &f), 0.0);
    // Two runs: two waits and two run times, each in the +Inf bucket.
    assert_eq!(value(&m, "gearshift_job_run_seconds_count", &f), 2.0);
    assert_eq!(value(&m, "gearshift_job_wait_seconds_count", &f), 2.0);
    assert_eq!(value(&m, "gearshift_job_run_seconds", &f), 2.0);
    // Waits count from submission or due time: the first run waited for
    // the worker (at least 150 ms), the retry hardly at all.
    let sample = m
        .samples
        .iter()
        .find(|x| {
            x.metric == "gearshift_job_wait_seconds" && x.labels.get("function") == Some("flaky")
        })
        .expect("wait histogram");
    let prometheus_parse::Value::Histogram(buckets) = &sample.value else {
        panic!("not a histogram: {sample:?}");
    };
    let under = |le: f64| {
        buckets
            .iter()
            .filter(|b| b.less_than <= le)
            .map(|b| b.count)
            .fold(0.0, f64::max)
    };
    assert_eq!(under(0.1), 1.0, "{buckets:?}");
    assert_eq!(under(10.0), 2.0, "{buckets:?}");
    let later = [("function", "later"), ("priority", "normal")];
    assert_eq!(value(&m, "gearshift_jobs_queued", &later), 1.0);
    assert_eq!(
        value(&m, "gearman_jobs_waiting", &[("function", "later")]),
        1.0
    );
    assert_eq!(value(&m, "gearshift_workers", &f), 1.0);
    assert_eq!(
        value(&m, "gearshift_connections", &[("role", "worker")]),
        1.0
    );
    // The durable store committed the submissions, the retry and the ends.
    assert!(
        value(&m, "gearshift_store_commit_seconds_count", &[]) >= 3.0,
        "{text}"
    );
}

#[tokio::test]
async fn the_grafana_dashboard_charts_only_exported_series() {
    let dash: serde_json::Value =
        serde_json::from_str(include_str!("../../../docs/grafana-dashboard.json"))
            .expect("dashboard JSON");
    let s = start(config()).await;
    let c = s.gearman_client();
    c.job("f", "x").background().await.expect("submit");
    let (text, _) = scrape(&s.base).await;
    let exported: std::collections::HashSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let mut exprs = Vec::new();
    fn walk<'a>(v: &'a serde_json::Value, out: &mut Vec<&'a str>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    match (k.as_str(), v) {
                        ("expr" | "definition", serde_json::Value::String(s)) => out.push(s),
                        _ => walk(v, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    walk(&dash, &mut exprs);
    assert!(exprs.len() >= 16, "{exprs:?}");
    for e in exprs {
        let names = e
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("gearshift_") || w.starts_with("gearman_"));
        for name in names {
            assert!(
                exported.contains(name),
                "the dashboard charts {name}, which /metrics lacks"
            );
        }
    }
}

#[tokio::test]
async fn a_store_that_cannot_write_is_counted_with_the_submissions_it_refused() {
    let faulty = FaultyStore::new(MemoryStore::new(), 1_000);
    let budget = faulty.budget();
    let s = start_with_store(config(), Box::new(faulty)).await;
    let c = s.gearman_client();
    c.job("f", "stored").background().await.expect("stored");
    let refused = |m: &HashMap<String, f64>, reason: &str| {
        m[&format!("gearshift_submissions_refused_total{{reason=\"{reason}\"}}")]
    };
    let (text, _) = scrape(&s.base).await;
    let m = parse(&text);
    assert_eq!(m["gearshift_store_failures_total"], 0.0);
    assert_eq!(refused(&m, "store"), 0.0);
    // The disk fills up.
    let (_, v) = get(&s.base, "/api/v1/overview").await;
    assert_eq!(
        v["store"]["last_failure_ms"],
        serde_json::Value::Null,
        "{v}"
    );
    let before = gearshift_server::clock::unix_ms();
    budget.store(0, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..2 {
        let answer = c.job("f", "not stored").background().await;
        assert!(answer.is_err(), "{answer:?}");
    }
    let (text, _) = scrape(&s.base).await;
    let m = parse(&text);
    assert!(m["gearshift_store_failures_total"] >= 2.0, "{text}");
    assert_eq!(refused(&m, "store"), 2.0);
    assert_eq!(refused(&m, "maxqueue"), 0.0);
    // The JSON API's overview says the same.
    let (_, v) = get(&s.base, "/api/v1/overview").await;
    assert!(v["store"]["failures"].as_u64() >= Some(2), "{v}");
    assert_eq!(v["store"]["refused"], 2, "{v}");
    let at = v["store"]["last_failure_ms"].as_u64().expect("a time");
    assert!(
        (before..=gearshift_server::clock::unix_ms()).contains(&at),
        "{v}"
    );
}

#[tokio::test]
async fn refusals_by_the_queue_memory_cap_are_counted() {
    let mut cfg = config();
    cfg.core.max_job_bytes = 250;
    let s = start(cfg).await;
    let c = s.gearman_client();
    let mut refused = 0;
    for _ in 0..4 {
        // 100 bytes each: the third passes 250.
        if c.job("big", vec![b'x'; 100]).background().await.is_err() {
            refused += 1;
        }
    }
    assert_eq!(refused, 2);
    let (text, _) = scrape(&s.base).await;
    let m = parse(&text);
    assert_eq!(m["gearshift_job_bytes"], 200.0);
    assert_eq!(
        m["gearshift_submissions_refused_total{reason=\"queue_memory\"}"],
        2.0
    );
    assert_eq!(
        m["gearshift_submissions_refused_total{reason=\"maxqueue\"}"],
        0.0
    );
}

#[tokio::test]
async fn silent_connections_are_closed_after_the_idle_timeout() {
    let mut cfg = config();
    cfg.idle_timeout = Some(std::time::Duration::from_millis(300));
    let s = start(cfg).await;
    let mut silent = tokio::net::TcpStream::connect(s.gearman)
        .await
        .expect("connect");
    let mut talker = tokio::net::TcpStream::connect(s.gearman)
        .await
        .expect("connect");
    talker.write_all(b"version\n").await.expect("write");
    let mut buf = [0u8; 64];
    assert!(talker.read(&mut buf).await.expect("version") > 0);
    // The silent one is closed; the one that spoke stays, however quiet.
    let closed = tokio::time::timeout(std::time::Duration::from_secs(5), silent.read(&mut buf))
        .await
        .expect("closed in time");
    assert!(matches!(closed, Ok(0) | Err(_)), "{closed:?}");
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    talker.write_all(b"version\n").await.expect("write");
    assert!(talker.read(&mut buf).await.expect("still served") > 0);
    let (text, _) = scrape(&s.base).await;
    // The HTTP client's own connections spoke at once; only one was silent.
    assert_eq!(parse(&text)["gearshift_connections_idle_closed_total"], 1.0);
}

#[tokio::test]
async fn a_peer_that_does_not_read_and_access_refusals_are_counted() {
    fn packet(kind: u32, args: &[&[u8]]) -> Vec<u8> {
        let body = args.join(&b"\0"[..]);
        let mut p = b"\0REQ".to_vec();
        p.extend_from_slice(&kind.to_be_bytes());
        p.extend_from_slice(&(body.len() as u32).to_be_bytes());
        p.extend_from_slice(&body);
        p
    }
    let mut cfg = config();
    cfg.max_output = 64 * 1024;
    cfg.max_packet_size = 64 * 1024;
    // Only 127.0.0.1 may read: a peer on 127.0.0.2 is refused and counted.
    cfg.access.admin_read = Some(vec![
        gearshift_server::access::Who::parse("127.0.0.1").unwrap_or_else(|e| panic!("{e}"))
    ]);
    let s = start(cfg).await;
    let other = tokio::net::TcpSocket::new_v4().expect("socket");
    other
        .bind("127.0.0.2:0".parse().expect("addr"))
        .expect("bind");
    let mut denied = other.connect(s.gearman).await.expect("connect");
    denied.write_all(b"status\n").await.expect("write");
    let mut buf = [0u8; 256];
    let n = denied.read(&mut buf).await.expect("reply");
    assert!(
        buf[..n].starts_with(b"ERR PERMISSION_DENIED"),
        "{:?}",
        &buf[..n]
    );
    // A foreground client with a small receive buffer that never reads,
    // and a worker streaming WORK_DATA to it far past the hard cap
    // (4 x 64 KiB + 2 x 64 KiB): the client is closed.
    let mut worker = tokio::net::TcpStream::connect(s.gearman)
        .await
        .expect("connect");
    worker
        .write_all(&packet(1, &[b"stream"]))
        .await
        .expect("can_do");
    let sock = tokio::net::TcpSocket::new_v4().expect("socket");
    sock.set_recv_buffer_size(4096).expect("rcvbuf");
    let mut stuck = sock.connect(s.gearman).await.expect("connect");
    stuck
        .write_all(&packet(7, &[b"stream", b"", b"go"]))
        .await
        .expect("submit");
    let n = stuck.read(&mut buf).await.expect("job created");
    assert!(n >= 12 && buf[7] == 8, "JOB_CREATED: {:?}", &buf[..n]);
    let handle = buf[12..n].to_vec();
    worker.write_all(&packet(9, &[])).await.expect("grab");
    let mut assign = [0u8; 512];
    let n = worker.read(&mut assign).await.expect("assign");
    assert!(n >= 12 && assign[7] == 11, "JOB_ASSIGN: {:?}", &assign[..n]);
    let chunk = vec![7u8; 60 * 1024];
    let data = packet(28, &[&handle, &chunk]);
    for _ in 0..200 {
        worker.write_all(&data).await.expect("work data");
    }
    let mut closed = 0.0;
    for _ in 0..100 {
        let (text, _) = scrape(&s.base).await;
        let m = parse(&text);
        assert_eq!(
            m["gearshift_access_denied_total{right=\"admin_read\"}"],
            1.0
        );
        assert_eq!(m["gearshift_access_denied_total{right=\"submit\"}"], 0.0);
        closed = m["gearshift_connections_output_closed_total"];
        if closed >= 1.0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(closed, 1.0);
}

#[tokio::test]
async fn the_time_the_shared_hub_was_held_is_counted() {
    for threads in [1, 3] {
        let mut cfg = config();
        cfg.io_threads = threads;
        let s = start(cfg).await;
        let mut c = tokio::net::TcpStream::connect(s.gearman)
            .await
            .expect("connect");
        let mut buf = [0u8; 64];
        for _ in 0..20 {
            c.write_all(b"version\n").await.expect("write");
            assert!(c.read(&mut buf).await.expect("version") > 0);
        }
        let (text, _) = scrape(&s.base).await;
        let m = parse(&text);
        let (busy, rounds) = (
            m["gearshift_core_busy_seconds_total"],
            m["gearshift_core_rounds_total"],
        );
        if threads == 1 {
            // The hub runs on the only I/O thread: nothing is shared.
            assert_eq!((busy, rounds), (0.0, 0.0));
        } else {
            // At least one round per request that waited for its answer.
            assert!(rounds >= 20.0, "{rounds}");
            assert!(busy > 0.0 && busy < 5.0, "{busy}");
        }
    }
}
