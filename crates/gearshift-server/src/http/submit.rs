//! Submissions from HTTP (the JSON API and gearmand's protocol) go through
//! the Gearman protocol: the listener is a client of its own server over
//! loopback, so coalescing, policies and the store apply as to any client.
//! One multiplexing client carries every submission.

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::StatusCode;
use bytes::Bytes;
use gearshift_client::{Client, Error, JobEvent, Priority};
use tokio::time::Instant;

use super::ApiError;

/// One submission.
#[derive(Debug, Clone)]
pub struct Submission {
    /// Function name.
    pub function: Bytes,
    /// Workload.
    pub data: Bytes,
    /// Unique id.
    pub unique: Bytes,
    /// Priority.
    pub priority: Priority,
    /// Background (else wait for the end).
    pub background: bool,
    /// Run at this Unix time (background only).
    pub epoch: Option<i64>,
    /// How long a foreground job is waited for (`None`: as long as it takes).
    pub wait: Option<Duration>,
}

/// How a submission ended.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A background job was created.
    Created(Bytes),
    /// A foreground job ended.
    Ended {
        /// Its handle.
        handle: Bytes,
        /// `completed`, `failed` or `exception`.
        status: &'static str,
        /// WORK_COMPLETE's result or the exception's payload.
        result: Option<Bytes>,
    },
}

/// The listener's Gearman client.
pub struct Submitter {
    client: Option<Client>,
}

impl Submitter {
    /// A client of the server at `gearman` (`None`: no Gearman listener).
    pub fn new(gearman: Option<SocketAddr>) -> Self {
        let client = gearman.and_then(|a| {
            Client::builder()
                .server(a)
                .exceptions(true)
                .build()
                .map_err(
                    |e| tracing::error!(error = %e, "cannot set up the HTTP submission client"),
                )
                .ok()
        });
        Submitter { client }
    }

    /// Submits and, in the foreground, waits for the end.
    pub async fn submit(&self, s: Submission) -> Result<Outcome, ApiError> {
        let Some(client) = &self.client else {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "no Gearman listener to submit through",
            ));
        };
        if s.background {
            let client = client.with_timeout(Some(s.wait.unwrap_or(super::DEFAULT_WAIT)));
            let mut job = client
                .job(s.function, s.data)
                .unique(s.unique)
                .priority(s.priority);
            if let Some(at) = s.epoch {
                job = job.epoch(at);
            }
            let handle = job.background().await.map_err(client_error)?;
            return Ok(Outcome::Created(handle.handle().clone()));
        }
        if s.epoch.is_some() {
            return Err(ApiError::bad(
                "`at` needs a background job (\"background\": true)",
            ));
        }
        let deadline = s.wait.map(|w| Instant::now() + w);
        let client = client.with_timeout(None);
        let submit = client
            .job(s.function, s.data)
            .unique(s.unique)
            .priority(s.priority)
            .submit();
        let mut job = within(deadline, submit, None)
            .await?
            .map_err(client_error)?;
        let handle = job.handle().handle().clone();
        loop {
            let ev = within(deadline, job.next_event(), Some(&handle))
                .await?
                .map_err(client_error)?;
            let (status, result) = match ev {
                Some(JobEvent::Complete(r)) => ("completed", Some(r)),
                Some(JobEvent::Fail) => ("failed", None),
                Some(JobEvent::Exception(p)) => ("exception", Some(p)),
                Some(_) => continue,
                None => {
                    return Err(ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the job's connection closed before it ended",
                    ))
                }
            };
            return Ok(Outcome::Ended {
                handle,
                status,
                result,
            });
        }
    }
}

/// Runs `f` until `deadline`; 504 after it (naming the job if known).
async fn within<T>(
    deadline: Option<Instant>,
    f: impl std::future::Future<Output = T>,
    handle: Option<&Bytes>,
) -> Result<T, ApiError> {
    let Some(at) = deadline else {
        return Ok(f.await);
    };
    tokio::time::timeout_at(at, f).await.map_err(|_| {
        let which = handle.map_or(String::new(), |h| {
            format!(" (job {})", String::from_utf8_lossy(h))
        });
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            format!("the job did not end within wait_timeout{which}"),
        )
    })
}

/// The status code a client error deserves.
fn client_error(e: Error) -> ApiError {
    let status = match &e {
        Error::Timeout => StatusCode::GATEWAY_TIMEOUT,
        Error::InvalidArgument(_) => StatusCode::BAD_REQUEST,
        Error::Server { text, .. } if text.contains("shutting down") => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        Error::Server { .. } => StatusCode::BAD_REQUEST,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    };
    ApiError::new(status, format!("submission failed: {e}"))
}
