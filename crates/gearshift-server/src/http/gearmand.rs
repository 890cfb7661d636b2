//! gearmand's HTTP protocol (its `-r http` plugin): the path names the
//! function, the body is the workload; `X-Gearman-Unique`,
//! `X-Gearman-Background` and `X-Gearman-Priority` headers; the reply
//! carries `X-Gearman-Job-Handle` and `X-Gearman-Command` and, for a
//! foreground job, the result as its body.

use axum::extract::rejection::BytesRejection;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use gearshift_client::Priority;

use super::api::percent_decode;
use super::submit::{Outcome, Submission};
use super::ApiError;

/// Every route the router does not know.
pub async fn fallback(
    State(app): State<super::State>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let path = uri.path();
    let reserved = path.starts_with("/api/")
        || path == "/api"
        || path.starts_with("/metrics")
        || path.starts_with("/assets/");
    let function = percent_decode(path.trim_start_matches('/'));
    if reserved || function.is_empty() {
        return Err(ApiError::not_found("no such route"));
    }
    // A GET never submits: browsers fetch /favicon.ico, prefetch links and
    // crawlers follow them, and none of that may queue a job.
    if method == Method::GET || method == Method::HEAD {
        return Err(ApiError::not_found(
            "no such route (gearmand's protocol submits with POST /FUNCTION)",
        ));
    }
    if method != Method::POST {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "gearmand's protocol takes POST",
        ));
    }
    let data = body.map_err(|e| {
        let status = e.status();
        ApiError::new(status, format!("cannot read the body: {e}"))
    })?;
    let header = |name: &str| headers.get(name).map(HeaderValue::as_bytes);
    let unique = Bytes::copy_from_slice(header("x-gearman-unique").unwrap_or(b"-"));
    let background =
        header("x-gearman-background").is_some_and(|v| v.eq_ignore_ascii_case(b"true"));
    let priority = match header("x-gearman-priority") {
        Some(v) if v.eq_ignore_ascii_case(b"high") => Priority::High,
        Some(v) if v.eq_ignore_ascii_case(b"low") => Priority::Low,
        _ => Priority::Normal,
    };
    let s = Submission {
        function: Bytes::from(function),
        data,
        unique,
        priority,
        background,
        epoch: None,
        // gearmand waits as long as the job takes; so does this.
        wait: None,
    };
    let (handle, command, body) = match app.submitter.submit(s).await? {
        Outcome::Created(h) => (h, "JOB_CREATED", Bytes::new()),
        Outcome::Ended {
            handle,
            status: "completed",
            result,
        } => (handle, "WORK_COMPLETE", result.unwrap_or_default()),
        Outcome::Ended { handle, .. } => (handle, "WORK_FAIL", Bytes::new()),
        // Not with `wait: None`; a wait that ends is no job result.
        Outcome::GaveUp { .. } => {
            return Err(ApiError::new(
                StatusCode::GATEWAY_TIMEOUT,
                "stopped waiting for the job",
            ))
        }
    };
    let mut reply = (StatusCode::OK, body).into_response();
    let h = reply.headers_mut();
    if let Ok(v) = HeaderValue::from_bytes(&handle) {
        h.insert("x-gearman-job-handle", v);
    }
    h.insert("x-gearman-command", HeaderValue::from_static(command));
    Ok(reply)
}
