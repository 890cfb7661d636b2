//! The Gearman worker: async handlers registered by function name, run up
//! to a concurrency limit, on every configured server at once.
//!
//! - [`Worker`] (this file): running and stopping.
//! - `builder`: [`WorkerBuilder`], servers, functions and settings.
//! - `handler`: [`WorkError`] and the stored handler type.
//! - `job`: [`WorkerJob`], what a handler gets.
//! - `session`: the per-server grab loop and reconnects.

mod builder;
mod handler;
mod job;
mod session;

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{watch, Semaphore};

pub use builder::WorkerBuilder;
pub use handler::WorkError;
pub use job::WorkerJob;

use crate::addr::ServerAddr;
use crate::tls::TlsConfig;
use handler::Handler;

/// One registered function.
pub(crate) struct Function {
    pub name: Bytes,
    pub timeout: Option<Duration>,
    pub handler: Handler,
}

/// Where a worker's stats come from ([`WorkerBuilder::report_stats`]).
pub(crate) type StatsSource =
    Arc<dyn Fn() -> Option<gearshift_proto::worker_stats::WorkerStats> + Send + Sync>;

/// What every session of a worker shares.
pub(crate) struct Shared {
    pub functions: Vec<Function>,
    pub by_name: HashMap<Bytes, usize>,
    pub permits: Arc<Semaphore>,
    pub client_id: Option<Bytes>,
    pub exceptions: bool,
    pub epoch_early: bool,
    pub stats: Option<StatsSource>,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    pub connect_timeout: Duration,
    pub tls: Option<TlsConfig>,
}

impl Shared {
    fn handler(&self, function: &[u8]) -> Option<Handler> {
        let &i = self.by_name.get(function)?;
        self.functions.get(i).map(|f| f.handler.clone())
    }
}

/// An async Gearman worker; build one with [`Worker::builder`].
///
/// [`Worker::run`] connects to every server (as libgearman does, a worker
/// serves them all at once), runs up to `concurrency` jobs at a time across
/// them, reconnects with exponential backoff when a server goes away, and
/// stops gracefully when its shutdown future resolves: no new job is taken,
/// running handlers finish and report, then connections close.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = gearshift_server::Server::bind(gearshift_server::ServerConfig {
/// #     listen: vec!["127.0.0.1:0".parse()?], ..Default::default() }).await?;
/// # let addr = server.local_addrs()[0];
/// # tokio::spawn(server.run(std::future::pending()));
/// use gearshift_client::{Client, Worker, WorkError};
/// use tokio::sync::oneshot;
///
/// let worker = Worker::builder()
///     .server(addr)
///     .concurrency(4)
///     .function("double", |job| async move {
///         let n: u64 = std::str::from_utf8(job.data())?.parse()?;
///         Ok::<_, WorkError>((2 * n).to_string())
///     })
///     .build()?;
/// let (stop, stopped) = oneshot::channel::<()>();
/// let running = tokio::spawn(worker.run(async { let _ = stopped.await; }));
///
/// let client = Client::builder().server(addr).build()?;
/// assert_eq!(client.run("double", "21").await?, "42");
/// assert!(client.run("double", "x").await.is_err());
///
/// stop.send(()).ok();
/// running.await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Worker {
    servers: Vec<ServerAddr>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let functions: Vec<_> = self
            .shared
            .functions
            .iter()
            .map(|f| String::from_utf8_lossy(&f.name).into_owned())
            .collect();
        f.debug_struct("Worker")
            .field("servers", &self.servers)
            .field("functions", &functions)
            .finish()
    }
}

impl Worker {
    /// Starts configuring a worker.
    ///
    /// ```
    /// use gearshift_client::{Worker, WorkError};
    /// let worker = Worker::builder()
    ///     .server("127.0.0.1")
    ///     .function("echo", |job| async move { Ok::<_, WorkError>(job.data().clone()) })
    ///     .build()?;
    /// # let _ = worker;
    /// # Ok::<(), gearshift_client::Error>(())
    /// ```
    pub fn builder() -> WorkerBuilder {
        WorkerBuilder::default()
    }

    /// Serves every server until `shutdown` resolves, then stops gracefully
    /// and returns once every running job has been reported. Dropping the
    /// returned future (or aborting its task) instead closes the connections
    /// at once and aborts running handlers; the servers requeue their jobs.
    ///
    /// ```no_run
    /// # async fn f(worker: gearshift_client::Worker) {
    /// worker.run(async { let _ = tokio::signal::ctrl_c().await; }).await;
    /// # }
    /// ```
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        let (stop_tx, stop_rx) = watch::channel(false);
        // The sessions run inside this future, not as tasks of their own, and
        // every poll polls `shutdown` first: a session freed by a finishing
        // job cannot send a GRAB before a stop requested meanwhile (say, by
        // that job's handler) has reached it. (A spawned session could be
        // scheduled before this task and take one more job.)
        let mut sessions: Vec<Pin<Box<dyn Future<Output = ()> + Send>>> = (self.servers.iter())
            .map(|addr| {
                let s = session::session(self.shared.clone(), addr.clone(), stop_rx.clone());
                Box::pin(s) as Pin<Box<dyn Future<Output = ()> + Send>>
            })
            .collect();
        let mut shutdown = std::pin::pin!(shutdown);
        let mut signalled = false;
        std::future::poll_fn(|cx| {
            if !signalled && shutdown.as_mut().poll(cx).is_ready() {
                signalled = true;
                tracing::info!("worker stopping: no new jobs, finishing running ones");
                let _ = stop_tx.send(true);
            }
            sessions.retain_mut(|s| {
                // A panicking session ends alone, as a task of its own would.
                match std::panic::catch_unwind(AssertUnwindSafe(|| s.as_mut().poll(cx))) {
                    Ok(p) => p.is_pending(),
                    Err(_) => {
                        tracing::error!("worker session panicked");
                        false
                    }
                }
            });
            if sessions.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
    }
}
