//! The Gearman client: submit jobs, follow them, ask for their status.
//!
//! - [`Client`]: the cheap, clonable entry point (`client.rs` is this file).
//! - `builder`: [`ClientBuilder`], servers and settings.
//! - `submit`: [`JobBuilder`], one submission's options.
//! - `job`: [`Job`], [`JobEvent`], [`JobHandle`], [`JobStatus`], [`UniqueStatus`].
//! - `pool`: server choice, failover and reconnect backoff.
//! - `conn`: the task owning one connection, and reply/event routing.

mod builder;
mod conn;
mod job;
mod pool;
mod submit;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use gearshift_proto::{Request, Response};

pub use builder::{ClientBuilder, DEFAULT_CONNECT_TIMEOUT, DEFAULT_TIMEOUT};
pub use job::{Job, JobEvent, JobHandle, JobStatus, UniqueStatus};
pub use submit::JobBuilder;

use crate::addr::ServerAddr;
use crate::error::{Error, Result};
use conn::Expect;
use pool::{Pool, Route};

/// An async Gearman client over one or more servers.
///
/// Cloning is cheap and clones share connections: one connection per server
/// carries every request of every clone, with any number of jobs in flight.
///
/// With several servers, a job with a unique id goes to the server a stable
/// hash of the unique picks (so duplicates coalesce, as with libgearman);
/// other requests go round-robin. An unreachable server is skipped (and
/// left alone for a backoff delay) and the next one used. A request lost
/// with its connection is resent elsewhere, except a background
/// submission, which fails with [`Error::ConnectionLost`]: the server may
/// have queued it. A foreground job whose connection drops after
/// JOB_CREATED ends with [`Error::ConnectionLost`] too.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = gearshift_server::Server::bind(gearshift_server::ServerConfig {
/// #     listen: vec!["127.0.0.1:0".parse()?], ..Default::default() }).await?;
/// # let addr = server.local_addrs()[0];
/// # tokio::spawn(server.run(std::future::pending()));
/// use gearshift_client::{Client, Worker, WorkError};
///
/// let worker = Worker::builder()
///     .server(addr)
///     .function("reverse", |job| async move {
///         Ok::<_, WorkError>(job.data().iter().rev().copied().collect::<Vec<u8>>())
///     })
///     .build()?;
/// tokio::spawn(worker.run(std::future::pending()));
///
/// let client = Client::builder().server(addr).build()?;
/// assert_eq!(client.run("reverse", "hello").await?, "olleh");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pool: Arc<Pool>,
    timeout: Option<Duration>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("servers", &self.pool.addrs().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Client {
    /// Starts configuring a client.
    ///
    /// ```
    /// let client = gearshift_client::Client::builder().server("localhost").build()?;
    /// # let _ = client;
    /// # Ok::<(), gearshift_client::Error>(())
    /// ```
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// A client for one server with default settings, connected now (an
    /// unreachable server is an error here rather than at first use).
    ///
    /// ```no_run
    /// # async fn f() -> gearshift_client::Result<()> {
    /// let client = gearshift_client::Client::connect("127.0.0.1:4730").await?;
    /// # let _ = client;
    /// # Ok(()) }
    /// ```
    pub async fn connect(addr: impl ToString) -> Result<Client> {
        let client = Client::builder().server(addr).build()?;
        client.echo_on(0, Bytes::new()).await?;
        Ok(client)
    }

    /// The same client with another per-call limit (`None`: no limit).
    ///
    /// ```
    /// use std::time::Duration;
    /// let client = gearshift_client::Client::builder().server("localhost").build()?;
    /// let patient = client.with_timeout(None);
    /// let hasty = client.with_timeout(Some(Duration::from_millis(200)));
    /// # let _ = (patient, hasty);
    /// # Ok::<(), gearshift_client::Error>(())
    /// ```
    pub fn with_timeout(&self, limit: Option<Duration>) -> Client {
        Client {
            pool: self.pool.clone(),
            timeout: limit,
        }
    }

    /// The configured servers, in order (a [`JobHandle::server`] indexes this).
    ///
    /// ```
    /// let client = gearshift_client::Client::builder().servers(["a", "b"]).build()?;
    /// let names: Vec<String> = client.servers().map(|s| s.to_string()).collect();
    /// assert_eq!(names, ["a:4730", "b:4730"]);
    /// # Ok::<(), gearshift_client::Error>(())
    /// ```
    pub fn servers(&self) -> impl Iterator<Item = &ServerAddr> {
        self.pool.addrs()
    }

    /// A submission to configure (unique, priority, timeout) before sending.
    ///
    /// ```no_run
    /// # async fn f(client: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// use gearshift_client::Priority;
    /// let handle = client
    ///     .job("resize", "img-42.png")
    ///     .unique("img-42")
    ///     .priority(Priority::High)
    ///     .background()
    ///     .await?;
    /// # let _ = handle;
    /// # Ok(()) }
    /// ```
    pub fn job(&self, function: impl Into<Bytes>, data: impl Into<Bytes>) -> JobBuilder<'_> {
        JobBuilder::new(self, function.into(), data.into())
    }

    /// Submits a normal-priority foreground job and returns its event stream.
    ///
    /// ```no_run
    /// # async fn f(client: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let mut job = client.submit("reverse", "abc").await?;
    /// while let Some(event) = job.next_event().await? {
    ///     println!("{event:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn submit(&self, function: impl Into<Bytes>, data: impl Into<Bytes>) -> Result<Job> {
        self.job(function, data).submit().await
    }

    /// Runs a normal-priority foreground job to its end and returns the
    /// WORK_COMPLETE payload ([`Error::JobFailed`] / [`Error::JobException`]
    /// otherwise).
    ///
    /// ```no_run
    /// # async fn f(client: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let out = client.run("reverse", "abc").await?;
    /// assert_eq!(out, "cba");
    /// # Ok(()) }
    /// ```
    pub async fn run(&self, function: impl Into<Bytes>, data: impl Into<Bytes>) -> Result<Bytes> {
        self.job(function, data).run().await
    }

    /// Submits a normal-priority background job and returns its handle.
    ///
    /// ```no_run
    /// # async fn f(client: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let handle = client.submit_background("cleanup", "").await?;
    /// println!("queued as {handle}");
    /// # Ok(()) }
    /// ```
    pub async fn submit_background(
        &self,
        function: impl Into<Bytes>,
        data: impl Into<Bytes>,
    ) -> Result<JobHandle> {
        self.job(function, data).background().await
    }

    /// GET_STATUS: asks the job's own server about it.
    ///
    /// ```no_run
    /// # async fn f(client: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let handle = client.submit_background("cleanup", "").await?;
    /// let status = client.status(&handle).await?;
    /// println!("known={} running={}", status.known, status.running);
    /// # Ok(()) }
    /// ```
    pub async fn status(&self, handle: &JobHandle) -> Result<JobStatus> {
        let req = Request::GetStatus(handle.handle().clone());
        let route = Route::Only(handle.server());
        match self.call(route, req, Expect::Status).await? {
            Response::StatusRes {
                known,
                running,
                numerator,
                denominator,
                ..
            } => Ok(JobStatus {
                known,
                running,
                numerator,
                denominator,
            }),
            other => Err(unexpected(&other)),
        }
    }

    /// GET_STATUS_UNIQUE: asks the server the unique id hashes to (where a
    /// job with that unique was submitted) about it.
    ///
    /// ```no_run
    /// # async fn f(client: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let status = client.status_unique("img-42").await?;
    /// println!("{} clients waiting", status.waiting);
    /// # Ok(()) }
    /// ```
    pub async fn status_unique(&self, unique: impl Into<Bytes>) -> Result<UniqueStatus> {
        let unique = unique.into();
        let route = self.pool.route_for(&unique);
        match self
            .call(
                route,
                Request::GetStatusUnique(unique),
                Expect::StatusUnique,
            )
            .await?
        {
            Response::StatusResUnique {
                known,
                running,
                numerator,
                denominator,
                waiting,
                ..
            } => Ok(UniqueStatus {
                known,
                running,
                numerator,
                denominator,
                waiting,
            }),
            other => Err(unexpected(&other)),
        }
    }

    /// ECHO_REQ to the next server (round-robin): a round-trip check.
    ///
    /// ```no_run
    /// # async fn f(client: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// assert_eq!(client.echo("ping").await?, "ping");
    /// # Ok(()) }
    /// ```
    pub async fn echo(&self, data: impl Into<Bytes>) -> Result<Bytes> {
        let route = self.pool.route_for(b"");
        self.echo_route(route, data.into()).await
    }

    /// ECHO_REQ to the `server`-th configured server only.
    ///
    /// ```no_run
    /// # async fn f(client: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// assert_eq!(client.echo_on(0, "ping").await?, "ping");
    /// # Ok(()) }
    /// ```
    pub async fn echo_on(&self, server: usize, data: impl Into<Bytes>) -> Result<Bytes> {
        self.echo_route(Route::Only(server), data.into()).await
    }

    async fn echo_route(&self, route: Route, data: Bytes) -> Result<Bytes> {
        match self.call(route, Request::Echo(data), Expect::Echo).await? {
            Response::EchoRes(data) => Ok(data),
            other => Err(unexpected(&other)),
        }
    }

    /// One request/reply under the client's timeout.
    async fn call(&self, route: Route, req: Request, expect: Expect) -> Result<Response> {
        let fut = async {
            let (_, resp) = self.pool.call(route, req, expect, None).await?;
            Ok(resp)
        };
        within(self.timeout, fut).await
    }
}

/// Runs `fut` with an optional time limit; past it, [`Error::Timeout`].
pub(crate) async fn within<T>(
    limit: Option<Duration>,
    fut: impl Future<Output = Result<T>>,
) -> Result<T> {
    match limit {
        Some(d) => tokio::time::timeout(d, fut)
            .await
            .unwrap_or(Err(Error::Timeout)),
        None => fut.await,
    }
}

fn unexpected(resp: &Response) -> Error {
    Error::protocol(format!("unexpected reply {resp:?}"))
}
