//! The live display of a running scenario on stderr: a bar towards the job
//! count, or a spinner for a timed run, with the jobs done and the current
//! rate. Drawn only when stderr is a terminal; otherwise nothing is drawn
//! and the counter is merely kept.
//!
//! The load tasks only bump an atomic counter; a ticker task copies it to
//! the display ten times a second, so drawing costs the load nothing.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::task::JoinHandle;

/// How often the display is refreshed.
const TICK: Duration = Duration::from_millis(100);

/// One scenario's display and its job counter.
#[derive(Debug)]
pub struct Progress {
    bar: ProgressBar,
    count: Arc<AtomicU64>,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// Starts a display labelled `label`: a bar when `total` is known, a
    /// spinner otherwise. Must be called inside the runtime.
    pub fn start(label: &str, total: Option<u64>) -> Progress {
        let count = Arc::new(AtomicU64::new(0));
        if !std::io::stderr().is_terminal() {
            return Progress {
                bar: ProgressBar::hidden(),
                count,
                ticker: None,
            };
        }
        let (bar, template) = match total {
            Some(n) => (
                ProgressBar::with_draw_target(Some(n), ProgressDrawTarget::stderr()),
                "{prefix:>9} [{bar:30}] {pos}/{len} jobs  {msg}  {elapsed}",
            ),
            None => (
                ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr()),
                "{prefix:>9} {spinner} {pos} jobs  {msg}  {elapsed}",
            ),
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_owned());
        let ticker = tokio::spawn(tick(bar.clone(), count.clone()));
        Progress {
            bar,
            count,
            ticker: Some(ticker),
        }
    }

    /// The counter the load tasks bump once per finished job.
    pub fn counter(&self) -> Arc<AtomicU64> {
        self.count.clone()
    }

    /// Stops and erases the display.
    pub fn finish(self) {
        if let Some(t) = &self.ticker {
            t.abort();
        }
        self.bar.finish_and_clear();
    }
}

/// Copies the counter to the display, with the rate since the start.
async fn tick(bar: ProgressBar, count: Arc<AtomicU64>) {
    let start = Instant::now();
    let mut every = tokio::time::interval(TICK);
    loop {
        every.tick().await;
        let done = count.load(Ordering::Relaxed);
        let secs = start.elapsed().as_secs_f64();
        if secs > 0.0 {
            bar.set_message(format!("{:.0} jobs/s", done as f64 / secs));
        }
        bar.set_position(done);
    }
}
