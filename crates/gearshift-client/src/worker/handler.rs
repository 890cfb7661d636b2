//! Job handlers: the [`WorkError`] a handler fails with, and the type-erased
//! form in which the worker stores each registered async function.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

use crate::worker::job::WorkerJob;

/// How a handler fails: with an exception payload (WORK_EXCEPTION) or a
/// plain WORK_FAIL.
///
/// Any `std::error::Error` converts into an exception carrying its text, so
/// `?` works in handlers.
///
/// ```
/// use gearshift_client::WorkError;
///
/// fn parse(data: &[u8]) -> Result<u32, WorkError> {
///     let text = std::str::from_utf8(data)?;      // Utf8Error → exception
///     let n: u32 = text.trim().parse()?;          // ParseIntError → exception
///     if n == 0 {
///         return Err(WorkError::Fail);            // WORK_FAIL, no payload
///     }
///     Ok(n)
/// }
/// assert_eq!(parse(b"7").unwrap(), 7);
/// assert!(matches!(parse(b"x"), Err(WorkError::Exception(_))));
/// assert!(matches!(parse(b"0"), Err(WorkError::Fail)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkError {
    /// Report WORK_FAIL.
    Fail,
    /// Report WORK_EXCEPTION with this payload (WORK_FAIL when the worker was
    /// built with `exceptions(false)`).
    Exception(Bytes),
}

impl WorkError {
    /// An exception with `payload`.
    ///
    /// ```
    /// let e = gearshift_client::WorkError::exception("disk full");
    /// assert_eq!(e.to_string(), "exception: disk full");
    /// ```
    pub fn exception(payload: impl Into<Bytes>) -> WorkError {
        WorkError::Exception(payload.into())
    }
}

impl fmt::Display for WorkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkError::Fail => f.write_str("fail"),
            WorkError::Exception(p) => write!(f, "exception: {}", String::from_utf8_lossy(p)),
        }
    }
}

impl<E: std::error::Error> From<E> for WorkError {
    fn from(e: E) -> WorkError {
        WorkError::Exception(Bytes::from(e.to_string()))
    }
}

/// What a stored handler returns.
pub(crate) type HandlerFuture = Pin<Box<dyn Future<Output = Result<Bytes, WorkError>> + Send>>;

/// A registered handler, type-erased.
pub(crate) type Handler = Arc<dyn Fn(WorkerJob) -> HandlerFuture + Send + Sync>;

/// Boxes a user handler.
pub(crate) fn erase<F, Fut, T>(f: F) -> Handler
where
    F: Fn(WorkerJob) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<T, WorkError>> + Send + 'static,
    T: Into<Bytes>,
{
    Arc::new(move |job| {
        let fut = f(job);
        Box::pin(async move { fut.await.map(Into::into) })
    })
}
