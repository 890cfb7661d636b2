//! What a client gets back for its jobs: the [`JobEvent`]s of a foreground
//! job and the [`Job`] stream that yields them, the [`JobHandle`] naming a
//! job on one server, and the [`JobStatus`] / [`UniqueStatus`] answers.

use std::fmt;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::error::{Error, Result};

/// One packet a worker sent about a foreground job, as the client sees it.
///
/// ```
/// use gearshift_client::JobEvent;
/// assert!(JobEvent::Complete("done".into()).is_terminal());
/// assert!(!JobEvent::Status { numerator: 1, denominator: 2 }.is_terminal());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobEvent {
    /// WORK_DATA: a chunk of output.
    Data(Bytes),
    /// WORK_WARNING: a warning payload.
    Warning(Bytes),
    /// WORK_STATUS: progress as a fraction.
    Status {
        /// Done so far.
        numerator: u32,
        /// Out of.
        denominator: u32,
    },
    /// WORK_COMPLETE: the job succeeded with this result. Terminal.
    Complete(Bytes),
    /// WORK_FAIL: the job failed. Terminal.
    Fail,
    /// WORK_EXCEPTION: the job failed with this payload. Terminal.
    Exception(Bytes),
}

impl JobEvent {
    /// True for COMPLETE, FAIL and EXCEPTION: nothing follows them.
    ///
    /// ```
    /// assert!(gearshift_client::JobEvent::Fail.is_terminal());
    /// ```
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            JobEvent::Complete(_) | JobEvent::Fail | JobEvent::Exception(_)
        )
    }
}

/// A job handle and the server (by its index in the client's server list)
/// that created it; GET_STATUS must go to that server.
///
/// ```
/// use gearshift_client::JobHandle;
/// let h = JobHandle::new(0, "H:host:42");
/// assert_eq!(h.server(), 0);
/// assert_eq!(&h.handle()[..], b"H:host:42");
/// assert_eq!(h.to_string(), "H:host:42");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct JobHandle {
    server: usize,
    handle: Bytes,
}

impl JobHandle {
    /// A handle known to live on the `server`-th configured server (for
    /// handles kept from an earlier run or another process).
    ///
    /// ```
    /// let h = gearshift_client::JobHandle::new(1, "H:x:7");
    /// assert_eq!(h.server(), 1);
    /// ```
    pub fn new(server: usize, handle: impl Into<Bytes>) -> JobHandle {
        JobHandle {
            server,
            handle: handle.into(),
        }
    }

    /// Index of the server in the client's list.
    ///
    /// ```
    /// assert_eq!(gearshift_client::JobHandle::new(2, "h").server(), 2);
    /// ```
    pub fn server(&self) -> usize {
        self.server
    }

    /// The handle as the server spelled it.
    ///
    /// ```
    /// assert_eq!(&gearshift_client::JobHandle::new(0, "h").handle()[..], b"h");
    /// ```
    pub fn handle(&self) -> &Bytes {
        &self.handle
    }
}

impl fmt::Display for JobHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.handle))
    }
}

/// The answer to GET_STATUS.
///
/// ```
/// let s = gearshift_client::JobStatus { known: true, running: true, numerator: 1, denominator: 4 };
/// assert_eq!(s.progress(), Some(0.25));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobStatus {
    /// The server knows the job (queued or running).
    pub known: bool,
    /// A worker holds it.
    pub running: bool,
    /// Last WORK_STATUS numerator.
    pub numerator: u32,
    /// Last WORK_STATUS denominator.
    pub denominator: u32,
}

impl JobStatus {
    /// `numerator / denominator`, or `None` before any WORK_STATUS.
    ///
    /// ```
    /// let s = gearshift_client::JobStatus { known: true, running: false, numerator: 0, denominator: 0 };
    /// assert_eq!(s.progress(), None);
    /// ```
    pub fn progress(&self) -> Option<f64> {
        (self.denominator > 0).then(|| f64::from(self.numerator) / f64::from(self.denominator))
    }
}

/// The answer to GET_STATUS_UNIQUE.
///
/// ```
/// let s = gearshift_client::UniqueStatus {
///     known: true, running: false, numerator: 0, denominator: 0, waiting: 2,
/// };
/// assert_eq!(s.waiting, 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UniqueStatus {
    /// The server knows a job with this unique id.
    pub known: bool,
    /// A worker holds it.
    pub running: bool,
    /// Last WORK_STATUS numerator.
    pub numerator: u32,
    /// Last WORK_STATUS denominator.
    pub denominator: u32,
    /// Foreground clients waiting on it.
    pub waiting: u32,
}

/// A submitted foreground job: its handle and the stream of its events.
///
/// Dropping it detaches the listener (the job keeps running on the server).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let server = gearshift_server::Server::bind(gearshift_server::ServerConfig {
/// #     listen: vec!["127.0.0.1:0".parse()?], ..Default::default() }).await?;
/// # let addr = server.local_addrs()[0];
/// # tokio::spawn(server.run(std::future::pending()));
/// use gearshift_client::{Client, JobEvent, Worker, WorkError};
///
/// let worker = Worker::builder()
///     .server(addr)
///     .function("count", |job| async move {
///         for i in 1..=3u32 {
///             job.send_status(i, 3).await?;
///         }
///         Ok::<_, WorkError>("counted")
///     })
///     .build()?;
/// tokio::spawn(worker.run(std::future::pending()));
///
/// let client = Client::builder().server(addr).build()?;
/// let mut job = client.submit("count", "").await?;
/// let mut seen = Vec::new();
/// while let Some(event) = job.next_event().await? {
///     seen.push(event);
/// }
/// assert_eq!(seen.len(), 4);
/// assert_eq!(seen[3], JobEvent::Complete("counted".into()));
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Job {
    handle: JobHandle,
    events: mpsc::UnboundedReceiver<JobEvent>,
    deadline: Option<Instant>,
    terminal: Option<JobEvent>,
}

impl Job {
    pub(crate) fn new(
        handle: JobHandle,
        events: mpsc::UnboundedReceiver<JobEvent>,
        deadline: Option<Instant>,
    ) -> Job {
        Job {
            handle,
            events,
            deadline,
            terminal: None,
        }
    }

    /// The job's handle and server.
    ///
    /// ```no_run
    /// # async fn f(client: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let job = client.submit("reverse", "abc").await?;
    /// println!("submitted as {}", job.handle());
    /// # Ok(()) }
    /// ```
    pub fn handle(&self) -> &JobHandle {
        &self.handle
    }

    /// The next event; `Ok(None)` once the terminal event was returned.
    ///
    /// Fails with [`Error::Timeout`] past the call's deadline (the listener
    /// is then detached) and [`Error::ConnectionLost`] when the connection
    /// died before the job ended.
    ///
    /// ```no_run
    /// # async fn f(client: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let mut job = client.submit("reverse", "abc").await?;
    /// while let Some(event) = job.next_event().await? {
    ///     println!("{event:?}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn next_event(&mut self) -> Result<Option<JobEvent>> {
        if self.terminal.is_some() {
            return Ok(None);
        }
        let received = match self.deadline {
            Some(at) => match tokio::time::timeout_at(at, self.events.recv()).await {
                Ok(r) => r,
                Err(_) => {
                    self.events.close();
                    return Err(Error::Timeout);
                }
            },
            None => self.events.recv().await,
        };
        let Some(event) = received else {
            return Err(if self.events.is_closed() && self.deadline_passed() {
                Error::Timeout
            } else {
                Error::ConnectionLost
            });
        };
        if event.is_terminal() {
            self.terminal = Some(event.clone());
        }
        Ok(Some(event))
    }

    fn deadline_passed(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Waits for the end of the job: the COMPLETE payload, or
    /// [`Error::JobFailed`] / [`Error::JobException`]. Progress events are
    /// skipped.
    ///
    /// ```no_run
    /// # async fn f(client: gearshift_client::Client) -> gearshift_client::Result<()> {
    /// let job = client.submit("reverse", "abc").await?;
    /// assert_eq!(job.result().await?, "cba");
    /// # Ok(()) }
    /// ```
    pub async fn result(mut self) -> Result<Bytes> {
        while self.terminal.is_none() {
            self.next_event().await?;
        }
        let handle = self.handle.to_string();
        match self.terminal.take() {
            Some(JobEvent::Complete(data)) => Ok(data),
            Some(JobEvent::Exception(data)) => Err(Error::JobException { handle, data }),
            _ => Err(Error::JobFailed { handle }),
        }
    }
}
