//! The `drain` scenario: `--workers` workers take what `submit` queued.
//! Measures jobs per second from the workers' start to the last job.
//!
//! Check: every number that got a JOB_CREATED ran exactly once (none
//! missing, no duplicate, also after a short grace period for late ones),
//! no job without one of our numbers showed up, and admin `status` shows
//! the function empty afterwards. Waiting ends when every job has run, or
//! when no new job has arrived for [`STALL`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use gearshift_client::WorkError;
use serde_json::json;
use tokio::sync::Notify;

use crate::bench::config::{Config, Scenario};
use crate::bench::payload::seq_of;
use crate::bench::progress::Progress;
use crate::bench::queue;
use crate::bench::report::Report;
use crate::bench::seqset::SeqSet;
use crate::bench::submit::Queued;
use crate::bench::workers;

/// Time after the last expected job during which duplicates still count.
const GRACE: Duration = Duration::from_millis(300);
/// Give up when no new job has run for this long.
const STALL: Duration = Duration::from_secs(10);
/// How long the queue may take to show empty.
const SETTLE: Duration = Duration::from_secs(2);

/// What the workers saw.
struct Seen {
    expected: Arc<SeqSet>,
    want: u64,
    ran: SeqSet,
    once: Arc<AtomicU64>,
    duplicates: AtomicU64,
    foreign: AtomicU64,
    all_ran: Notify,
}

impl Seen {
    /// Records one job's workload.
    fn saw(&self, data: &[u8]) {
        let Some(seq) = seq_of(data).filter(|&s| self.expected.contains(s)) else {
            self.foreign.fetch_add(1, Ordering::Relaxed);
            return;
        };
        match self.ran.insert(seq) {
            Some(true) => {
                if self.once.fetch_add(1, Ordering::Relaxed) + 1 == self.want {
                    self.all_ran.notify_one();
                }
            }
            Some(false) => {
                self.duplicates.fetch_add(1, Ordering::Relaxed);
            }
            None => {
                self.foreign.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Runs the scenario on what `queued` describes.
pub async fn run(cfg: &Config, queued: &Queued) -> Report {
    let mut report = Report::new(Scenario::Drain);
    let function = cfg.function.clone();
    if queued.count == 0 {
        report.check = "nothing to drain".into();
        report.fail("submit queued no job");
        return report;
    }
    let progress = Progress::start("drain", Some(queued.count));
    let seen = Arc::new(Seen {
        expected: queued.seqs.clone(),
        want: queued.count,
        ran: SeqSet::new(queued.seqs.capacity()),
        once: progress.counter(),
        duplicates: AtomicU64::new(0),
        foreign: AtomicU64::new(0),
        all_ran: Notify::new(),
    });
    let start = Instant::now();
    let handler_seen = seen.clone();
    let crew = workers::start(cfg, &function, cfg.workers, move |job| {
        let seen = handler_seen.clone();
        async move {
            seen.saw(job.data());
            Ok::<_, WorkError>(Bytes::new())
        }
    });
    let crew = match crew {
        Ok(c) => c,
        Err(e) => {
            progress.finish();
            report.fail(format!("cannot start the workers: {e}"));
            return report;
        }
    };
    let stalled = wait(&seen).await;
    report.seconds = start.elapsed().as_secs_f64();
    tokio::time::sleep(GRACE).await;
    crew.stop().await;
    progress.finish();

    let once = seen.once.load(Ordering::Relaxed);
    let duplicates = seen.duplicates.load(Ordering::Relaxed);
    let foreign = seen.foreign.load(Ordering::Relaxed);
    let missing = queued.count - once.min(queued.count);
    report.jobs = once;
    report.check = format!(
        "{once} of {} ran once: {missing} missing, {duplicates} duplicates, {foreign} not ours",
        queued.count
    );
    if stalled {
        report.fail(format!("no job arrived for {STALL:?}; gave up"));
    }
    if missing > 0 {
        report.fail(format!("{missing} submitted jobs never ran"));
    }
    if duplicates > 0 {
        report.fail(format!("{duplicates} jobs ran more than once"));
    }
    if foreign > 0 {
        report.fail(format!(
            "{foreign} jobs without a seq of this run (the function held {} before)",
            queued.before
        ));
    }
    match queue::settle(cfg, &function, 0, SETTLE).await {
        Ok(0) => report.check.push_str("; queue empty"),
        Ok(left) => {
            report.check.push_str(&format!("; {left} left queued"));
            report.fail(format!("{left} jobs still queued after the drain"));
        }
        Err(e) => report.fail(e),
    }
    report.details.extend([
        ("missing", json!(missing)),
        ("duplicates", json!(duplicates)),
        ("foreign", json!(foreign)),
    ]);
    report
}

/// Waits until every expected job ran; true if it gave up after [`STALL`]
/// without progress.
async fn wait(seen: &Seen) -> bool {
    let mut last = seen.once.load(Ordering::Relaxed);
    let mut last_change = Instant::now();
    loop {
        if last >= seen.want {
            return false;
        }
        let tick = tokio::time::timeout(Duration::from_millis(200), seen.all_ran.notified());
        if tick.await.is_ok() {
            return false;
        }
        let now = seen.once.load(Ordering::Relaxed);
        if now != last {
            last = now;
            last_change = Instant::now();
        } else if last_change.elapsed() >= STALL {
            return true;
        }
    }
}
