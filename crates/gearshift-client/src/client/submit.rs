//! [`JobBuilder`]: one submission's options (unique id, priority, run time,
//! timeout) and the three ways to send it: foreground with events,
//! foreground to the final result, or background.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use gearshift_proto::{Priority, Request, Response, Submit};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::client::conn::Expect;
use crate::client::job::{Job, JobHandle};
use crate::client::Client;
use crate::error::{Error, Result};

/// A submission being configured; made by [`Client::job`].
///
/// ```no_run
/// # async fn f(client: gearshift_client::Client) -> gearshift_client::Result<()> {
/// use std::time::Duration;
/// use gearshift_client::Priority;
///
/// let result = client
///     .job("thumbnail", "photo.jpg")
///     .unique("photo.jpg")            // duplicates coalesce onto one job
///     .priority(Priority::High)
///     .timeout(Duration::from_secs(60))
///     .run()
///     .await?;
/// # let _ = result;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a JobBuilder does nothing until submit, run or background is awaited"]
pub struct JobBuilder<'a> {
    client: &'a Client,
    function: Bytes,
    data: Bytes,
    unique: Bytes,
    priority: Priority,
    epoch: Option<i64>,
    timeout: Option<Duration>,
}

impl<'a> JobBuilder<'a> {
    pub(crate) fn new(client: &'a Client, function: Bytes, data: Bytes) -> Self {
        JobBuilder {
            client,
            function,
            data,
            unique: Bytes::new(),
            priority: Priority::Normal,
            epoch: None,
            timeout: client.timeout,
        }
    }

    /// The unique id: jobs with the same function and unique coalesce on the
    /// server, and the unique picks the server when there are several.
    /// Empty (the default) never coalesces.
    ///
    /// ```no_run
    /// # async fn f(c: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let job = c.job("f", "x").unique("order-17").submit().await?;
    /// # let _ = job; Ok(()) }
    /// ```
    pub fn unique(mut self, unique: impl Into<Bytes>) -> Self {
        self.unique = unique.into();
        self
    }

    /// Queue priority (normal by default).
    ///
    /// ```no_run
    /// # async fn f(c: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let h = c.job("f", "x").priority(gearshift_client::Priority::Low).background().await?;
    /// # let _ = h; Ok(()) }
    /// ```
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Run no earlier than this Unix time in seconds (SUBMIT_JOB_EPOCH).
    /// Only for [`JobBuilder::background`] at normal priority: the packet
    /// has no priority and no foreground form.
    ///
    /// ```no_run
    /// # async fn f(c: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let h = c.job("report", "daily").epoch(1_900_000_000).background().await?;
    /// # let _ = h; Ok(()) }
    /// ```
    pub fn epoch(mut self, unix_seconds: i64) -> Self {
        self.epoch = Some(unix_seconds);
        self
    }

    /// Like [`JobBuilder::epoch`], from a `SystemTime` (whole seconds).
    ///
    /// ```no_run
    /// # async fn f(c: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// use std::time::{Duration, SystemTime};
    /// let at = SystemTime::now() + Duration::from_secs(3600);
    /// let h = c.job("report", "hourly").run_at(at).background().await?;
    /// # let _ = h; Ok(()) }
    /// ```
    pub fn run_at(self, at: SystemTime) -> Self {
        let secs = match at.duration_since(UNIX_EPOCH) {
            Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            Err(e) => -i64::try_from(e.duration().as_secs()).unwrap_or(i64::MAX),
        };
        self.epoch(secs)
    }

    /// This call's time limit instead of the client's.
    ///
    /// ```no_run
    /// # async fn f(c: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let out = c.job("f", "x").timeout(std::time::Duration::from_secs(1)).run().await;
    /// assert!(matches!(out, Err(gearshift_client::Error::Timeout) | Ok(_)));
    /// # Ok(()) }
    /// ```
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = Some(limit);
        self
    }

    /// No time limit for this call.
    ///
    /// ```no_run
    /// # async fn f(c: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let out = c.job("slow", "x").no_timeout().run().await?;
    /// # let _ = out; Ok(()) }
    /// ```
    pub fn no_timeout(mut self) -> Self {
        self.timeout = None;
        self
    }

    /// Submits in the foreground and returns the job's event stream; the
    /// time limit covers the whole job, events included.
    ///
    /// ```no_run
    /// # async fn f(c: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let mut job = c.job("f", "x").submit().await?;
    /// while let Some(ev) = job.next_event().await? { println!("{ev:?}"); }
    /// # Ok(()) }
    /// ```
    pub async fn submit(self) -> Result<Job> {
        if self.epoch.is_some() {
            return Err(Error::InvalidArgument(
                "an epoch job can only be submitted in the background".into(),
            ));
        }
        let deadline = self.timeout.map(|d| Instant::now() + d);
        let (tx, rx) = mpsc::unbounded_channel();
        let pool = &self.client.pool;
        let route = pool.route_for(&self.unique);
        let request = self.request(false);
        let call = pool.call(route, request, Expect::Created, Some(&tx));
        let (server, resp) = match deadline {
            Some(at) => tokio::time::timeout_at(at, call)
                .await
                .unwrap_or(Err(Error::Timeout))?,
            None => call.await?,
        };
        let Response::JobCreated(handle) = resp else {
            return Err(Error::protocol(format!(
                "expected JOB_CREATED, got {resp:?}"
            )));
        };
        drop(tx);
        Ok(Job::new(JobHandle::new(server, handle), rx, deadline))
    }

    /// Submits in the foreground and waits for the WORK_COMPLETE payload.
    ///
    /// ```no_run
    /// # async fn f(c: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let out = c.job("reverse", "abc").run().await?;
    /// assert_eq!(out, "cba");
    /// # Ok(()) }
    /// ```
    pub async fn run(self) -> Result<Bytes> {
        self.submit().await?.result().await
    }

    /// Submits in the background; the server keeps no link to this client.
    ///
    /// ```no_run
    /// # async fn f(c: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let handle = c.job("cleanup", "").background().await?;
    /// println!("{handle}");
    /// # Ok(()) }
    /// ```
    pub async fn background(self) -> Result<JobHandle> {
        if self.epoch.is_some() && self.priority != Priority::Normal {
            return Err(Error::InvalidArgument(
                "an epoch job always has normal priority".into(),
            ));
        }
        let pool = &self.client.pool;
        let route = pool.route_for(&self.unique);
        let request = self.request(true);
        let call = async { pool.call(route, request, Expect::Created, None).await };
        let (server, resp) = super::within(self.timeout, call).await?;
        match resp {
            Response::JobCreated(handle) => Ok(JobHandle::new(server, handle)),
            other => Err(Error::protocol(format!(
                "expected JOB_CREATED, got {other:?}"
            ))),
        }
    }

    fn request(&self, background: bool) -> Request {
        Request::submit(Box::new(Submit {
            function: self.function.clone(),
            unique: self.unique.clone(),
            data: self.data.clone(),
            priority: self.priority,
            background,
            epoch: self.epoch,
            reducer: None,
        }))
    }
}
