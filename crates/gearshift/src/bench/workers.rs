//! The workers of `drain` and `roundtrip`: `count` library [`Worker`]s,
//! each with its own connection to every server, all running one handler
//! for one function, and stopped together (gracefully: no new job, running
//! ones reported) when the scenario is done.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use gearshift_client::{Error, WorkError, Worker, WorkerJob};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::bench::config::Config;

/// Jobs each worker runs at once: 2 lets the next GRAB go out while a
/// handler finishes.
const CONCURRENCY: usize = 2;
/// How long a graceful stop may take before the workers are dropped.
const STOP_LIMIT: Duration = Duration::from_secs(10);

/// Running workers.
#[derive(Debug)]
pub struct Crew {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

/// Starts `count` workers serving `function` on every server with `handler`.
pub fn start<F, Fut>(cfg: &Config, function: &str, count: usize, handler: F) -> Result<Crew, Error>
where
    F: Fn(WorkerJob) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<Bytes, WorkError>> + Send + 'static,
{
    let (stop, _) = watch::channel(false);
    let mut tasks = JoinSet::new();
    for i in 0..count {
        let mut builder = Worker::builder();
        if let Some(tls) = &cfg.tls {
            builder = builder.tls(tls.clone());
        }
        let worker = builder
            .servers(&cfg.servers)
            .client_id(format!("gearshift-bench-{i}"))
            .concurrency(CONCURRENCY)
            .reconnect_backoff(Duration::from_millis(50), Duration::from_secs(1))
            .function(function.to_owned(), handler.clone())
            .build()?;
        let mut stopped = stop.subscribe();
        tasks.spawn(worker.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        }));
    }
    Ok(Crew { stop, tasks })
}

impl Crew {
    /// Stops every worker gracefully and waits for them (at most
    /// [`STOP_LIMIT`]; then they are dropped and the servers requeue
    /// whatever they still held).
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        let all = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(STOP_LIMIT, all).await.is_err() {
            self.tasks.abort_all();
        }
    }
}
