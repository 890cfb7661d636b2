//! [`WorkerBuilder`]: a worker's servers, functions and settings.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Semaphore;

use crate::addr::ServerAddr;
use crate::client::DEFAULT_CONNECT_TIMEOUT;
use crate::error::{Error, Result};
use crate::tls::TlsConfig;
use crate::worker::handler::{erase, WorkError};
use crate::worker::job::WorkerJob;
use crate::worker::{Function, Shared, StatsSource, Worker};

/// Settings of a [`Worker`]; start with [`Worker::builder`].
///
/// ```
/// use std::time::Duration;
/// use gearshift_client::{Worker, WorkError, WorkerJob};
///
/// async fn resize(job: WorkerJob) -> Result<Vec<u8>, WorkError> {
///     Ok(job.data().to_vec())
/// }
///
/// let worker = Worker::builder()
///     .servers(["10.0.0.1", "10.0.0.2"])
///     .client_id("resizer-1")
///     .concurrency(8)
///     .function_with_timeout("resize", Duration::from_secs(30), resize)
///     .reconnect_backoff(Duration::from_millis(100), Duration::from_secs(5))
///     .build()?;
/// # let _ = worker;
/// # Ok::<(), gearshift_client::Error>(())
/// ```
pub struct WorkerBuilder {
    servers: Vec<ServerAddr>,
    functions: Vec<Function>,
    concurrency: usize,
    client_id: Option<Bytes>,
    exceptions: bool,
    epoch_early: bool,
    stats: Option<StatsSource>,
    backoff_min: Duration,
    backoff_max: Duration,
    connect_timeout: Duration,
    tls: Option<TlsConfig>,
}

impl std::fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("servers", &self.servers)
            .field("functions", &self.functions.len())
            .field("concurrency", &self.concurrency)
            .finish_non_exhaustive()
    }
}

impl Default for WorkerBuilder {
    fn default() -> Self {
        WorkerBuilder {
            servers: Vec::new(),
            functions: Vec::new(),
            concurrency: 1,
            client_id: None,
            exceptions: true,
            epoch_early: false,
            stats: None,
            backoff_min: Duration::from_millis(100),
            backoff_max: Duration::from_secs(5),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            tls: None,
        }
    }
}

impl WorkerBuilder {
    /// Adds a server (`host`, `host:port`, an IP or a `SocketAddr`).
    ///
    /// ```
    /// let b = gearshift_client::Worker::builder().server("127.0.0.1:4730");
    /// # let _ = b;
    /// ```
    pub fn server(mut self, addr: impl ToString) -> Self {
        self.servers.push(ServerAddr::new(addr));
        self
    }

    /// Adds several servers; the worker serves all of them.
    ///
    /// ```
    /// let b = gearshift_client::Worker::builder().servers(["a", "b:4731"]);
    /// # let _ = b;
    /// ```
    pub fn servers<I>(mut self, addrs: I) -> Self
    where
        I: IntoIterator,
        I::Item: ToString,
    {
        self.servers.extend(addrs.into_iter().map(ServerAddr::new));
        self
    }

    /// Registers an async handler for `name` (CAN_DO). Its `Ok` value is the
    /// WORK_COMPLETE payload; `Err` becomes WORK_EXCEPTION or WORK_FAIL (see
    /// [`WorkError`]); a panic becomes an exception "handler panicked".
    ///
    /// ```
    /// use gearshift_client::{Worker, WorkError};
    /// let b = Worker::builder().function("len", |job| async move {
    ///     Ok::<_, WorkError>(job.data().len().to_string())
    /// });
    /// # let _ = b;
    /// ```
    pub fn function<F, Fut, T>(self, name: impl Into<Bytes>, handler: F) -> Self
    where
        F: Fn(WorkerJob) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, WorkError>> + Send + 'static,
        T: Into<Bytes>,
    {
        self.add(name.into(), None, erase(handler))
    }

    /// Like [`WorkerBuilder::function`], registered with CAN_DO_TIMEOUT: the
    /// server takes back a job that runs longer than `timeout` (in
    /// milliseconds on the wire) and requeues it; the client is not told.
    /// The handler keeps running; its late result is refused by the server.
    ///
    /// gearmand 1.1.20 caveats: it raises limits under 1 s to 1 s; it never
    /// fires the timer when started with `-t 0`; and it keeps one timer per
    /// connection, which PRE_SLEEP deletes. A worker with `concurrency > 1`
    /// sends PRE_SLEEP whenever it has a free slot and no job is waiting, so
    /// there the limit only holds on Gearshift (which times every job).
    ///
    /// ```
    /// use std::time::Duration;
    /// use gearshift_client::{Worker, WorkError};
    /// let b = Worker::builder().function_with_timeout("slow", Duration::from_secs(10), |_job| async {
    ///     Ok::<_, WorkError>("done")
    /// });
    /// # let _ = b;
    /// ```
    pub fn function_with_timeout<F, Fut, T>(
        self,
        name: impl Into<Bytes>,
        timeout: Duration,
        handler: F,
    ) -> Self
    where
        F: Fn(WorkerJob) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<T, WorkError>> + Send + 'static,
        T: Into<Bytes>,
    {
        self.add(name.into(), Some(timeout), erase(handler))
    }

    fn add(
        mut self,
        name: Bytes,
        timeout: Option<Duration>,
        handler: crate::worker::handler::Handler,
    ) -> Self {
        self.functions.retain(|f| f.name != name);
        self.functions.push(Function {
            name,
            timeout,
            handler,
        });
        self
    }

    /// Most jobs run at once, across all servers (1 unless set).
    ///
    /// ```
    /// let b = gearshift_client::Worker::builder().concurrency(16);
    /// # let _ = b;
    /// ```
    pub fn concurrency(mut self, jobs: usize) -> Self {
        self.concurrency = jobs;
        self
    }

    /// SET_CLIENT_ID: the name the `workers` admin command shows.
    ///
    /// ```
    /// let b = gearshift_client::Worker::builder().client_id("thumbnailer-3");
    /// # let _ = b;
    /// ```
    pub fn client_id(mut self, id: impl Into<Bytes>) -> Self {
        self.client_id = Some(id.into());
        self
    }

    /// Report handler exceptions as WORK_EXCEPTION (the default) or, when
    /// false, as WORK_FAIL.
    ///
    /// ```
    /// let b = gearshift_client::Worker::builder().exceptions(false);
    /// # let _ = b;
    /// ```
    pub fn exceptions(mut self, on: bool) -> Self {
        self.exceptions = on;
        self
    }

    /// Gearshift's `OPTION_REQ epoch-early`: be handed epoch jobs at
    /// submission, before they are due (for a worker that schedules jobs
    /// itself; `show job` gives their due time). Other servers refuse the
    /// option and hand them out when due, as always.
    ///
    /// ```
    /// let b = gearshift_client::Worker::builder().epoch_early(true);
    /// # let _ = b;
    /// ```
    pub fn epoch_early(mut self, on: bool) -> Self {
        self.epoch_early = on;
        self
    }

    /// After each job, report what `source` returns to the server with
    /// Gearshift's OPTION_REQ `stats` (docs/compat.md). A server that
    /// refuses the option (gearmand) is not sent it again on that connection.
    ///
    /// ```
    /// use gearshift_client::WorkerStats;
    /// let b = gearshift_client::Worker::builder()
    ///     .report_stats(|| Some(WorkerStats { cpu_ms: 1500, max_rss_kib: 4096 }));
    /// # let _ = b;
    /// ```
    pub fn report_stats(
        mut self,
        source: impl Fn() -> Option<crate::WorkerStats> + Send + Sync + 'static,
    ) -> Self {
        self.stats = Some(Arc::new(source));
        self
    }

    /// Delay before reconnecting to a server that went away: `min` (100 ms)
    /// doubling up to `max` (5 s); reset once connected.
    ///
    /// ```
    /// use std::time::Duration;
    /// let b = gearshift_client::Worker::builder()
    ///     .reconnect_backoff(Duration::from_millis(50), Duration::from_secs(2));
    /// # let _ = b;
    /// ```
    pub fn reconnect_backoff(mut self, min: Duration, max: Duration) -> Self {
        self.backoff_min = min;
        self.backoff_max = max;
        self
    }

    /// Limit on opening one TCP connection (3 s unless set).
    ///
    /// ```
    /// let b = gearshift_client::Worker::builder().connect_timeout(std::time::Duration::from_secs(1));
    /// # let _ = b;
    /// ```
    pub fn connect_timeout(mut self, limit: Duration) -> Self {
        self.connect_timeout = limit;
        self
    }

    /// Speaks TLS to every server (see [`TlsConfig`]), on every reconnect
    /// too; plain TCP unless set.
    ///
    /// ```no_run
    /// use gearshift_client::{TlsConfig, Worker};
    /// let tls = TlsConfig::builder().ca_file("/etc/gearman/ca.pem").build()?;
    /// let b = Worker::builder().server("gearman.internal").tls(tls);
    /// # let _ = b;
    /// # Ok::<(), gearshift_client::Error>(())
    /// ```
    pub fn tls(mut self, config: TlsConfig) -> Self {
        self.tls = Some(config);
        self
    }

    /// Builds the worker; it connects when [`Worker::run`] starts.
    ///
    /// ```
    /// use gearshift_client::{Error, Worker};
    /// let no_function = Worker::builder().server("localhost").build();
    /// assert!(matches!(no_function, Err(Error::InvalidArgument(_))));
    /// ```
    pub fn build(self) -> Result<Worker> {
        if self.servers.is_empty() {
            return Err(Error::NoServers);
        }
        for addr in &self.servers {
            addr.check()?;
        }
        if self.functions.is_empty() {
            return Err(Error::InvalidArgument("no function registered".into()));
        }
        if self.concurrency == 0 {
            return Err(Error::InvalidArgument(
                "concurrency must be at least 1".into(),
            ));
        }
        if self.functions.iter().any(|f| f.name.is_empty()) {
            return Err(Error::InvalidArgument("empty function name".into()));
        }
        let by_name: HashMap<Bytes, usize> = self
            .functions
            .iter()
            .enumerate()
            .map(|(i, f)| (f.name.clone(), i))
            .collect();
        Ok(Worker {
            servers: self.servers,
            shared: Arc::new(Shared {
                functions: self.functions,
                by_name,
                permits: Arc::new(Semaphore::new(self.concurrency)),
                client_id: self.client_id,
                exceptions: self.exceptions,
                epoch_early: self.epoch_early,
                stats: self.stats,
                backoff_min: self.backoff_min,
                backoff_max: self.backoff_max,
                connect_timeout: self.connect_timeout,
                tls: self.tls,
            }),
        })
    }
}
