//! `/metrics` over real HTTP, parsed strictly as the text format 0.0.4 and
//! checked against the admin protocol's `status`.

mod http_common;

use std::collections::HashMap;

use http_common::{client, config, start};
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
    let c = gearshift_client::Client::builder()
        .server(s.gearman)
        .build()
        .expect("client");
    for i in 0..3 {
        c.job("alpha", format!("{i}"))
            .background()
            .await
            .expect("submit");
    }
    c.job("beta\"x", "1").background().await.expect("submit");
    let text = client()
        .get(format!("{}/metrics", s.base))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("body");
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
