//! The `roundtrip` scenario: foreground jobs through `--workers` echo
//! workers, from `--clients` connections with `--inflight` jobs in flight
//! on each, for `--duration` (or `--jobs`). Measures jobs per second and
//! each job's latency from SUBMIT_JOB to WORK_COMPLETE.
//!
//! Check: every job completed and its result equals its workload.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use gearshift_client::WorkError;
use serde_json::json;

use crate::bench::config::{Config, Scenario};
use crate::bench::load::{self, Load};
use crate::bench::payload::Payloads;
use crate::bench::progress::Progress;
use crate::bench::queue;
use crate::bench::report::Report;
use crate::bench::workers;

/// How long the workers may take to register.
const REGISTER: Duration = Duration::from_secs(10);

/// Runs the scenario.
pub async fn run(cfg: &Config) -> Report {
    let mut report = Report::new(Scenario::Roundtrip);
    let function = cfg
        .function_for(Scenario::Roundtrip)
        .unwrap_or_else(|| cfg.function.clone());
    let crew = workers::start(cfg, &function, cfg.workers, |job| async move {
        Ok::<_, WorkError>(job.data().clone())
    });
    let crew = match crew {
        Ok(c) => c,
        Err(e) => {
            report.fail(format!("cannot start the workers: {e}"));
            return report;
        }
    };
    let workers = u64::try_from(cfg.workers).unwrap_or(u64::MAX);
    if let Err(e) = queue::wait_workers(cfg, &function, workers, REGISTER).await {
        crew.stop().await;
        report.fail(e);
        return report;
    }
    let clients = match cfg.clients() {
        Ok(c) => c,
        Err(e) => {
            crew.stop().await;
            report.fail(e.to_string());
            return report;
        }
    };
    let load = Load::timed(cfg, clients);
    let mismatches = Arc::new(AtomicU64::new(0));
    let payloads = Payloads::new(cfg.size);
    let progress = Progress::start("roundtrip", cfg.timed_jobs);
    let (f, wrong) = (function.clone(), mismatches.clone());
    let tally = load::drive(&load, progress.counter(), move |client, seq| {
        let (f, wrong, data) = (f.clone(), wrong.clone(), payloads.make(seq));
        async move {
            let result = client
                .job(f, data.clone())
                .run()
                .await
                .map_err(|e| e.to_string())?;
            if result != data {
                wrong.fetch_add(1, Ordering::Relaxed);
                return Err(format!(
                    "result of job seq {seq} differs from its payload ({} bytes, {} sent)",
                    result.len(),
                    data.len()
                ));
            }
            Ok(())
        }
    })
    .await;
    progress.finish();
    crew.stop().await;

    report.record(tally);
    let wrong = mismatches.load(Ordering::Relaxed);
    report.check = format!(
        "{} results equal their payloads, {wrong} differ",
        report.jobs
    );
    report.fail_on_errors();
    if report.jobs == 0 {
        report.fail("no job completed");
    }
    report.details.push(("mismatches", json!(wrong)));
    report
}
