//! The `echo` scenario: ECHO_REQ round trips from `--clients` connections
//! with `--inflight` requests in flight on each, for `--duration` (or
//! `--jobs`): the server's request path without any job. Measures echoes
//! per second and their latency.
//!
//! Check: every reply equals its payload.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use serde_json::json;

use crate::bench::config::{Config, Scenario};
use crate::bench::load::{self, Load};
use crate::bench::payload::Payloads;
use crate::bench::progress::Progress;
use crate::bench::report::Report;

/// Runs the scenario.
pub async fn run(cfg: &Config) -> Report {
    let mut report = Report::new(Scenario::Echo);
    let clients = match cfg.clients() {
        Ok(c) => c,
        Err(e) => {
            report.fail(e.to_string());
            return report;
        }
    };
    let load = Load::timed(cfg, clients);
    let mismatches = Arc::new(AtomicU64::new(0));
    let payloads = Payloads::new(cfg.size);
    let progress = Progress::start("echo", cfg.timed_jobs);
    let wrong = mismatches.clone();
    let tally = load::drive(&load, progress.counter(), move |client, seq| {
        let (wrong, data) = (wrong.clone(), payloads.make(seq));
        async move {
            let reply = client.echo(data.clone()).await.map_err(|e| e.to_string())?;
            if reply != data {
                wrong.fetch_add(1, Ordering::Relaxed);
                return Err(format!(
                    "echo of seq {seq} differs from its payload ({} bytes, {} sent)",
                    reply.len(),
                    data.len()
                ));
            }
            Ok(())
        }
    })
    .await;
    progress.finish();

    report.record(tally);
    let wrong = mismatches.load(Ordering::Relaxed);
    report.check = format!(
        "{} replies equal their payloads, {wrong} differ",
        report.jobs
    );
    report.fail_on_errors();
    if report.jobs == 0 {
        report.fail("no echo completed");
    }
    report.details.push(("mismatches", json!(wrong)));
    report
}
