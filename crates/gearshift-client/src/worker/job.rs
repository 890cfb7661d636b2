//! [`WorkerJob`]: what a handler receives: the job's handle, function,
//! unique id and workload, and helpers that send progress to the clients.

use bytes::Bytes;
use gearshift_proto::Request;
use tokio::sync::mpsc;

use crate::error::{Error, Result};

/// One assigned job, given to its handler.
///
/// The progress helpers queue WORK_DATA / WORK_WARNING / WORK_STATUS on the
/// connection the job came from; they fail with [`Error::ConnectionLost`]
/// once that connection is gone (the server then requeues the job).
///
/// ```no_run
/// # fn f() -> gearshift_client::Result<()> {
/// use gearshift_client::{Worker, WorkError, WorkerJob};
///
/// async fn upper(job: WorkerJob) -> Result<Vec<u8>, WorkError> {
///     job.send_status(0, 1).await?;
///     let out = job.data().to_ascii_uppercase();
///     job.send_data(out.clone()).await?;
///     job.send_status(1, 1).await?;
///     Ok(out)
/// }
/// let worker = Worker::builder().server("127.0.0.1").function("upper", upper).build()?;
/// # let _ = worker; Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct WorkerJob {
    handle: Bytes,
    function: Bytes,
    unique: Bytes,
    data: Bytes,
    out: mpsc::Sender<Request>,
}

impl WorkerJob {
    pub(crate) fn new(
        handle: Bytes,
        function: Bytes,
        unique: Bytes,
        data: Bytes,
        out: mpsc::Sender<Request>,
    ) -> WorkerJob {
        WorkerJob {
            handle,
            function,
            unique,
            data,
            out,
        }
    }

    /// The workload.
    ///
    /// ```no_run
    /// # fn f(job: gearshift_client::WorkerJob) { let n = job.data().len(); let _ = n; }
    /// ```
    pub fn data(&self) -> &Bytes {
        &self.data
    }

    /// The unique id the client gave (empty if none).
    ///
    /// ```no_run
    /// # fn f(job: gearshift_client::WorkerJob) { println!("{:?}", job.unique()); }
    /// ```
    pub fn unique(&self) -> &Bytes {
        &self.unique
    }

    /// The job handle the server assigned.
    ///
    /// ```no_run
    /// # fn f(job: gearshift_client::WorkerJob) { println!("{:?}", job.handle()); }
    /// ```
    pub fn handle(&self) -> &Bytes {
        &self.handle
    }

    /// The function name the job was submitted to.
    ///
    /// ```no_run
    /// # fn f(job: gearshift_client::WorkerJob) { println!("{:?}", job.function()); }
    /// ```
    pub fn function(&self) -> &Bytes {
        &self.function
    }

    /// Sends WORK_DATA: a chunk of output to the waiting clients.
    ///
    /// ```no_run
    /// # async fn f(job: gearshift_client::WorkerJob) -> gearshift_client::Result<()> {
    /// job.send_data("partial result").await?;
    /// # Ok(()) }
    /// ```
    pub async fn send_data(&self, data: impl Into<Bytes>) -> Result<()> {
        self.send(Request::WorkData {
            handle: self.handle.clone(),
            data: data.into(),
        })
        .await
    }

    /// Sends WORK_WARNING to the waiting clients.
    ///
    /// ```no_run
    /// # async fn f(job: gearshift_client::WorkerJob) -> gearshift_client::Result<()> {
    /// job.send_warning("input truncated").await?;
    /// # Ok(()) }
    /// ```
    pub async fn send_warning(&self, data: impl Into<Bytes>) -> Result<()> {
        self.send(Request::WorkWarning {
            handle: self.handle.clone(),
            data: data.into(),
        })
        .await
    }

    /// Sends WORK_STATUS (`numerator` of `denominator` done); the server
    /// also keeps it for GET_STATUS.
    ///
    /// ```no_run
    /// # async fn f(job: gearshift_client::WorkerJob) -> gearshift_client::Result<()> {
    /// job.send_status(3, 10).await?;
    /// # Ok(()) }
    /// ```
    pub async fn send_status(&self, numerator: u32, denominator: u32) -> Result<()> {
        self.send(Request::work_status(
            self.handle.clone(),
            numerator.to_string().into(),
            denominator.to_string().into(),
        ))
        .await
    }

    async fn send(&self, req: Request) -> Result<()> {
        self.out.send(req).await.map_err(|_| Error::ConnectionLost)
    }
}
