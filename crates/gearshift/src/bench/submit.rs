//! The `submit` scenario: background submissions of `--jobs` workloads,
//! `seq:N;` each, on `--clients` connections with `--inflight` requests in
//! flight on each, and no worker attached. Measures submissions per second
//! and the time to JOB_CREATED.
//!
//! Check: no submission failed, and admin `status` shows the function
//! holding as many more jobs as were submitted. The numbers that got a
//! JOB_CREATED are kept for `drain`.

use std::sync::Arc;
use std::time::Duration;

use gearshift_client::Error;
use serde_json::json;

use crate::bench::config::{Config, Scenario};
use crate::bench::load::{self, Load};
use crate::bench::payload::Payloads;
use crate::bench::progress::Progress;
use crate::bench::queue;
use crate::bench::report::Report;
use crate::bench::seqset::SeqSet;

/// How long the queue may take to show every job.
const SETTLE: Duration = Duration::from_secs(2);

/// What a submit run left on the servers, for `drain`.
#[derive(Debug, Clone)]
pub struct Queued {
    /// The sequence numbers that got a JOB_CREATED.
    pub seqs: Arc<SeqSet>,
    /// How many they are.
    pub count: u64,
    /// Jobs the function held before the run (not ours).
    pub before: u64,
}

/// Runs the scenario; `label` names it on the progress display.
pub async fn run(cfg: &Config, label: &str) -> (Report, Option<Queued>) {
    let mut report = Report::new(Scenario::Submit);
    let function = cfg.function.clone();
    let before = match queue::total(cfg, &function).await {
        Ok(n) => n,
        Err(e) => {
            report.fail(e);
            return (report, None);
        }
    };
    let clients = match cfg.clients() {
        Ok(c) => c,
        Err(e) => {
            report.fail(e.to_string());
            return (report, None);
        }
    };
    let seqs = Arc::new(SeqSet::new(cfg.jobs));
    let payloads = Payloads::new(cfg.size);
    let load = Load {
        clients,
        inflight: cfg.inflight,
        limit: Some(cfg.jobs),
        duration: cfg.submit_cap,
    };
    let progress = Progress::start(label, Some(cfg.jobs));
    let (f, marked) = (function.clone(), seqs.clone());
    let tally = load::drive(&load, progress.counter(), move |client, seq| {
        let (f, marked, data) = (f.clone(), marked.clone(), payloads.make(seq));
        async move {
            client
                .job(f, data)
                .background()
                .await
                .map_err(|e: Error| e.to_string())?;
            marked.insert(seq);
            Ok(())
        }
    })
    .await;
    progress.finish();

    report.record(tally);
    report.fail_on_errors();
    let count = seqs.count();
    let want = before + count;
    match queue::settle(cfg, &function, want, SETTLE).await {
        Ok(held) => {
            report.check = format!("admin status shows {held} jobs queued, {want} expected");
            if held != want {
                report.fail(format!(
                    "the queue holds {held} jobs, not the {want} submitted"
                ));
            }
            report.details.push(("queued", json!(held)));
        }
        Err(e) => report.fail(e),
    }
    if count == 0 {
        report.fail("no job was queued");
    }
    let queued = Queued {
        seqs,
        count,
        before,
    };
    (report, Some(queued))
}
