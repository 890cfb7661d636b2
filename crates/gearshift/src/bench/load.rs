//! The client side of a scenario: `clients` connections, each carrying
//! `inflight` requests at once (the library multiplexes any number of
//! requests on one connection, so every connection gets `inflight` tasks
//! sharing one [`Client`]), until a job count or a deadline is reached.
//!
//! Each task takes the next sequence number, runs the scenario's operation
//! on it and records its latency in its own [`Histogram`]; the histograms
//! are merged at the end. A failed operation counts as an error (the first
//! few distinct messages are kept); past [`MAX_ERRORS`] the run stops, so a
//! server that went away does not spin the loop for the whole duration.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gearshift_client::Client;
use tokio::task::JoinSet;

use crate::bench::config::Config;
use crate::bench::histogram::Histogram;

/// Errors after which a run gives up.
pub const MAX_ERRORS: u64 = 1000;
/// Distinct error messages kept for the report.
const KEEP_MESSAGES: usize = 5;

/// How much load to apply.
#[derive(Debug, Clone)]
pub struct Load {
    /// One client (one connection per server) per entry.
    pub clients: Vec<Client>,
    /// Requests in flight on each client.
    pub inflight: usize,
    /// Stop after this many operations (sequence numbers `0..limit`).
    pub limit: Option<u64>,
    /// Stop starting operations after this long.
    pub duration: Option<Duration>,
}

impl Load {
    /// The load of a timed scenario (roundtrip, echo): `--jobs` as a limit,
    /// `--duration` as the time.
    pub fn timed(cfg: &Config, clients: Vec<Client>) -> Load {
        Load {
            clients,
            inflight: cfg.inflight,
            limit: cfg.timed_jobs,
            duration: cfg.timed_duration,
        }
    }
}

/// What a run came to.
#[derive(Debug, Default)]
pub struct Tally {
    /// Operations that succeeded.
    pub done: u64,
    /// Operations that failed.
    pub errors: u64,
    /// The first distinct error messages.
    pub messages: Vec<String>,
    /// Latency of the successful operations.
    pub latency: Histogram,
    /// From the first request to the last reply.
    pub elapsed: Duration,
}

/// State shared by the tasks of one run.
struct Shared {
    next: AtomicU64,
    errors: AtomicU64,
    stop: AtomicBool,
    messages: Mutex<Vec<String>>,
    counter: Arc<AtomicU64>,
    limit: Option<u64>,
    deadline: Option<Instant>,
}

impl Shared {
    /// The next sequence number, or `None` once the run should end.
    fn take(&self) -> Option<u64> {
        if self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| Instant::now() >= d) {
            return None;
        }
        let seq = self.next.fetch_add(1, Ordering::Relaxed);
        match self.limit {
            Some(n) if seq >= n => None,
            _ => Some(seq),
        }
    }

    fn failed(&self, message: String) {
        if self.errors.fetch_add(1, Ordering::Relaxed) + 1 >= MAX_ERRORS {
            self.stop.store(true, Ordering::Relaxed);
        }
        if let Ok(mut kept) = self.messages.lock() {
            if kept.len() < KEEP_MESSAGES && !kept.contains(&message) {
                kept.push(message);
            }
        }
    }
}

/// Runs `op(client, seq)` under `load`, bumping `counter` per success.
pub async fn drive<Op, Fut>(load: &Load, counter: Arc<AtomicU64>, op: Op) -> Tally
where
    Op: Fn(Client, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let start = Instant::now();
    let shared = Arc::new(Shared {
        next: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        messages: Mutex::new(Vec::new()),
        counter,
        limit: load.limit,
        deadline: load.duration.map(|d| start + d),
    });
    let op = Arc::new(op);
    let mut tasks = JoinSet::new();
    for client in &load.clients {
        for _ in 0..load.inflight.max(1) {
            let (client, shared, op) = (client.clone(), shared.clone(), op.clone());
            tasks.spawn(async move {
                let mut latency = Histogram::default();
                let mut done = 0u64;
                while let Some(seq) = shared.take() {
                    let t0 = Instant::now();
                    match op(client.clone(), seq).await {
                        Ok(()) => {
                            latency.record(t0.elapsed());
                            done += 1;
                            shared.counter.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(message) => shared.failed(message),
                    }
                }
                (done, latency)
            });
        }
    }
    let mut tally = Tally::default();
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok((done, latency)) => {
                tally.done += done;
                tally.latency.merge(&latency);
            }
            Err(e) => shared.failed(format!("load task ended: {e}")),
        }
    }
    tally.elapsed = start.elapsed();
    tally.errors = shared.errors.load(Ordering::Relaxed);
    tally.messages = shared
        .messages
        .lock()
        .map(|m| m.clone())
        .unwrap_or_default();
    tally
}
