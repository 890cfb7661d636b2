//! Submissions from HTTP (the JSON API and gearmand's protocol) go through
//! the Gearman protocol: the listener is a client of its own server over
//! loopback, so coalescing, policies and the store apply as to any client.
//! One multiplexing client carries every submission, except a foreground one
//! with a `wait_timeout`: it gets a connection of its own, so giving up on
//! it (or the HTTP client hanging up) leaves the job exactly as a Gearman
//! client leaving would ([`gearshift_core::Core::stop_waiting`]).

use std::net::SocketAddr;
use std::time::Duration;

use axum::http::StatusCode;
use bytes::Bytes;
use gearshift_client::{Client, Error, Job, JobEvent, Priority};
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
#[derive(Debug)]
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
    /// A foreground job's `wait_timeout` passed before it ended.
    GaveUp {
        /// Its handle.
        handle: Bytes,
        /// Its connection, open until dropped: the caller settles what
        /// becomes of the job first.
        waiter: Waiter,
    },
}

/// The connection a foreground job was submitted on; dropped, it closes.
pub struct Waiter {
    // The job first: its events end before the connection does.
    _job: Job,
    _client: Client,
}

impl std::fmt::Debug for Waiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Waiter")
    }
}

/// The listener's Gearman client.
pub struct Submitter {
    client: Option<Client>,
    gearman: Option<SocketAddr>,
}

impl Submitter {
    /// A client of the server at `gearman` (`None`: no Gearman listener).
    pub fn new(gearman: Option<SocketAddr>) -> Self {
        let client = gearman.and_then(|a| {
            new_client(a)
                .map_err(
                    |e| tracing::error!(error = %e, "cannot set up the HTTP submission client"),
                )
                .ok()
        });
        Submitter { client, gearman }
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
        let client = match (s.wait, self.gearman) {
            (Some(_), Some(addr)) => new_client(addr).map_err(client_error)?,
            _ => client.with_timeout(None),
        };
        let submit = client
            .job(s.function, s.data)
            .unique(s.unique)
            .priority(s.priority)
            .submit();
        let mut job = within(deadline, submit).await?.map_err(client_error)?;
        let handle = job.handle().handle().clone();
        loop {
            let ev = match deadline {
                None => job.next_event().await,
                Some(at) => match tokio::time::timeout_at(at, job.next_event()).await {
                    Ok(ev) => ev,
                    Err(_) => {
                        let waiter = Waiter {
                            _job: job,
                            _client: client,
                        };
                        return Ok(Outcome::GaveUp { handle, waiter });
                    }
                },
            }
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

/// A client of the server at `addr` that asks for exceptions.
fn new_client(addr: SocketAddr) -> Result<Client, Error> {
    Client::builder().server(addr).exceptions(true).build()
}

/// Runs `f` until `deadline`; 504 after it (the server had not taken the
/// job yet: it has no handle).
async fn within<T>(
    deadline: Option<Instant>,
    f: impl std::future::Future<Output = T>,
) -> Result<T, ApiError> {
    let Some(at) = deadline else {
        return Ok(f.await);
    };
    tokio::time::timeout_at(at, f).await.map_err(|_| {
        ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "the server did not take the job within wait_timeout",
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
