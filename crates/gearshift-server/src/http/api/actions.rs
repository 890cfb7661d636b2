//! The `/api/v1` actions: cancel, the dead set's retry and drop, a
//! function's pause, resume, creation, removal and queue limits, a
//! schedule's removal (typed core calls), and submissions (through
//! [`super::super::submit`]). Every JSON body is refused (400) if it names a
//! field the route does not take, as the config file refuses unknown keys.

use gearshift_core::function::FunctionError;
use gearshift_core::schedule::{DropScheduleError, Dropped};
use gearshift_core::submit::StopWaiting;
use serde::de::DeserializeOwned;

use super::*;

/// A body's fields: an empty body is no fields; one that is not a JSON
/// object, or names a field `T` does not have, is 400 (naming the field).
/// The fields stay JSON values, checked one by one with messages that name
/// them.
fn fields<T: DeserializeOwned + Default>(b: &[u8]) -> Result<T, ApiError> {
    let m = json_body(b)?;
    if m.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_value(Value::Object(m)).map_err(|e| ApiError::bad(format!("bad body: {e}")))
}

/// `POST /api/v1/jobs`'s body.
#[derive(Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SubmitBody {
    function: Option<Value>,
    data: Option<Value>,
    data_base64: Option<Value>,
    priority: Option<Value>,
    unique: Option<Value>,
    background: Option<Value>,
    at: Option<Value>,
    wait_timeout: Option<Value>,
}

/// The dead set's bulk actions' body.
#[derive(Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DeadBody {
    function: Option<Value>,
    handles: Option<Value>,
}

/// `POST /api/v1/functions/{name}/maxqueue`'s body.
#[derive(Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct MaxQueueBody {
    limit: Option<Value>,
    high: Option<Value>,
    normal: Option<Value>,
    low: Option<Value>,
}

fn control_error(e: ControlError) -> ApiError {
    let status = match e {
        ControlError::UnknownJob | ControlError::UnknownFunction => StatusCode::NOT_FOUND,
        // `cancel` answers a second cancel itself (202, with the handle).
        ControlError::Finished | ControlError::CancelRequested => StatusCode::CONFLICT,
    };
    ApiError::new(status, e.to_string())
}

/// What a cancel did.
enum Cancelled {
    /// The job is gone.
    Gone,
    /// Marked; its worker still runs it (and is not told): it ends when
    /// the worker reports.
    Running,
    /// A cancel was already requested while its worker runs it.
    AlreadyRunning,
}

/// `POST /api/v1/jobs/{handle}/cancel`.
pub async fn cancel(
    State(app): State<crate::http::State>,
    handle: Result<Path<String>, PathRejection>,
) -> Reply {
    let handle = path_of(handle)?;
    let h = handle.clone();
    let done = app
        .ctx
        .control
        .call(move |c| match c.cancel_job(h.as_bytes()) {
            // Still live after a cancel only while its worker holds it.
            Ok(()) if c.live_state_of(h.as_bytes()).is_some() => Ok(Cancelled::Running),
            Ok(()) => Ok(Cancelled::Gone),
            Err(ControlError::CancelRequested) => Ok(Cancelled::AlreadyRunning),
            Err(e) => Err(e),
        })
        .await?
        .map_err(control_error)?;
    match done {
        Cancelled::Gone => ok(&json!({"handle": handle, "cancelled": true, "running": false})),
        Cancelled::Running => ok(&json!({"handle": handle, "cancelled": true, "running": true})),
        Cancelled::AlreadyRunning => Ok(json_reply(
            StatusCode::ACCEPTED,
            &json!({"handle": handle, "cancelled": true, "running": true,
                    "detail": ControlError::CancelRequested.to_string()}),
        )),
    }
}

/// Which dead jobs a body (and `function` query) selects.
fn dead_select(body: &DeadBody, function: Option<&[u8]>) -> Result<DeadSelect, ApiError> {
    if let Some(h) = &body.handles {
        let Value::Array(list) = h else {
            return Err(ApiError::bad("`handles` must be a list of strings"));
        };
        let handles = list
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(Bytes::copy_from_slice(s.as_bytes())),
                _ => Err(ApiError::bad("`handles` must be a list of strings")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(DeadSelect::Handles(handles));
    }
    match &body.function {
        Some(Value::String(f)) => {
            return Ok(DeadSelect::Function(Bytes::copy_from_slice(f.as_bytes())))
        }
        Some(_) => return Err(ApiError::bad("`function` must be a string")),
        None => {}
    }
    Ok(function.map_or(DeadSelect::All, |f| {
        DeadSelect::Function(Bytes::copy_from_slice(f))
    }))
}

/// `POST /api/v1/dead/{handle}/retry`.
pub async fn retry_one(
    State(app): State<crate::http::State>,
    handle: Result<Path<String>, PathRejection>,
) -> Reply {
    let which = DeadSelect::Handles(vec![Bytes::from(path_of(handle)?)]);
    let n = app
        .ctx
        .control
        .call(move |c| c.retry_dead_jobs(&which))
        .await?;
    if n == 0 {
        return Err(ApiError::not_found("no such dead job"));
    }
    ok(&json!({"retried": n}))
}

/// `POST /api/v1/dead/retry`.
pub async fn retry_dead(
    State(app): State<crate::http::State>,
    body: Result<Bytes, BytesRejection>,
) -> Reply {
    let which = dead_select(&fields(&body_of(body)?)?, None)?;
    let n = app
        .ctx
        .control
        .call(move |c| c.retry_dead_jobs(&which))
        .await?;
    ok(&json!({"retried": n}))
}

/// `DELETE /api/v1/dead/{handle}`.
pub async fn drop_one(
    State(app): State<crate::http::State>,
    handle: Result<Path<String>, PathRejection>,
) -> Reply {
    let which = DeadSelect::Handles(vec![Bytes::from(path_of(handle)?)]);
    let n = app
        .ctx
        .control
        .call(move |c| c.drop_dead_jobs(&which))
        .await?;
    if n == 0 {
        return Err(ApiError::not_found("no such dead job"));
    }
    ok(&json!({"dropped": n}))
}

/// `DELETE /api/v1/dead?function=F`.
pub async fn drop_dead(
    State(app): State<crate::http::State>,
    RawQuery(raw): RawQuery,
    body: Result<Bytes, BytesRejection>,
) -> Reply {
    let q = query_pairs(raw.as_deref());
    let which = dead_select(&fields(&body_of(body)?)?, get(&q, "function"))?;
    let n = app
        .ctx
        .control
        .call(move |c| c.drop_dead_jobs(&which))
        .await?;
    ok(&json!({"dropped": n}))
}

async fn set_paused(
    app: crate::http::State,
    name: Result<Path<String>, PathRejection>,
    paused: bool,
) -> Reply {
    let name = path_of(name)?;
    let n = name.clone();
    app.ctx
        .control
        .call(move |c| c.set_paused(n.as_bytes(), paused))
        .await?
        .map_err(control_error)?;
    ok(&json!({"name": name, "paused": paused}))
}

/// `POST /api/v1/functions/{name}/pause`.
pub async fn pause(
    State(app): State<crate::http::State>,
    name: Result<Path<String>, PathRejection>,
) -> Reply {
    set_paused(app, name, true).await
}

/// `POST /api/v1/functions/{name}/resume`.
pub async fn resume(
    State(app): State<crate::http::State>,
    name: Result<Path<String>, PathRejection>,
) -> Reply {
    set_paused(app, name, false).await
}

/// A string field (`None`: absent or null).
fn string_field<'a>(v: &'a Option<Value>, key: &str) -> Result<Option<&'a str>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(ApiError::bad(format!("`{key}` must be a string"))),
    }
}

/// A submission body.
fn submission(m: &SubmitBody) -> Result<Submission, ApiError> {
    let function = match string_field(&m.function, "function")? {
        Some(f) if !f.is_empty() => Bytes::copy_from_slice(f.as_bytes()),
        _ => return Err(ApiError::bad("`function` is required")),
    };
    let data = match (
        string_field(&m.data, "data")?,
        string_field(&m.data_base64, "data_base64")?,
    ) {
        (Some(_), Some(_)) => return Err(ApiError::bad("give `data` or `data_base64`, not both")),
        (Some(t), None) => Bytes::copy_from_slice(t.as_bytes()),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map(Bytes::from)
            .map_err(|e| ApiError::bad(format!("`data_base64` is not base64: {e}")))?,
        (None, None) => Bytes::new(),
    };
    let priority = match string_field(&m.priority, "priority")? {
        None | Some("normal") => Priority::Normal,
        Some("high") => Priority::High,
        Some("low") => Priority::Low,
        Some(p) => {
            return Err(ApiError::bad(format!(
                "unknown priority {p:?}: high, normal or low"
            )))
        }
    };
    let unique =
        Bytes::copy_from_slice(string_field(&m.unique, "unique")?.unwrap_or("").as_bytes());
    let background = match &m.background {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::bad("`background` must be true or false")),
    };
    let epoch = match &m.at {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => Some(
            n.as_i64()
                .ok_or_else(|| ApiError::bad("`at` must be whole Unix seconds"))?,
        ),
        Some(Value::String(s)) => Some(
            gearshift_core::timefmt::parse_rfc3339(s)
                .ok_or_else(|| ApiError::bad("`at` must be Unix seconds or an RFC 3339 time"))?,
        ),
        Some(_) => {
            return Err(ApiError::bad(
                "`at` must be Unix seconds or an RFC 3339 time",
            ))
        }
    };
    let wait = match &m.wait_timeout {
        None | Some(Value::Null) => crate::http::DEFAULT_WAIT,
        Some(Value::Number(n)) => match n.as_f64() {
            Some(s) if s > 0.0 && s <= 86_400.0 => std::time::Duration::from_secs_f64(s),
            _ => {
                return Err(ApiError::bad(
                    "`wait_timeout` must be seconds, above 0, at most a day",
                ))
            }
        },
        Some(_) => return Err(ApiError::bad("`wait_timeout` must be a number of seconds")),
    };
    Ok(Submission {
        function,
        data,
        unique,
        priority,
        background,
        epoch,
        wait: Some(wait),
    })
}

/// `POST /api/v1/jobs`.
pub async fn submit(
    State(app): State<crate::http::State>,
    body: Result<Bytes, BytesRejection>,
) -> Reply {
    let s = submission(&fields(&body_of(body)?)?)?;
    match app.submitter.submit(s).await? {
        Outcome::GaveUp { handle, waiter } => {
            let h = handle.clone();
            let left = app.ctx.control.call(move |c| c.stop_waiting(&h)).await;
            // Its connection closes only now that the job is settled.
            drop(waiter);
            let (job, error) = match left? {
                StopWaiting::Dropped => (
                    "dropped",
                    "the job did not start within wait_timeout: it was dropped and will not run",
                ),
                StopWaiting::Running => (
                    "running",
                    "the job did not end within wait_timeout: a worker runs it, and it goes on without anyone waiting",
                ),
                StopWaiting::Shared { running: true } => (
                    "running",
                    "the job did not end within wait_timeout: a worker runs it for other clients, and it goes on",
                ),
                StopWaiting::Shared { running: false } => (
                    "queued",
                    "the job did not start within wait_timeout: other clients wait for it, so it stays queued",
                ),
                StopWaiting::Ended => ("ended", "the job ended just as wait_timeout passed"),
            };
            Ok(json_reply(
                StatusCode::GATEWAY_TIMEOUT,
                &json!({"error": error, "handle": lossy(&handle), "job": job}),
            ))
        }
        Outcome::Created(h) => Ok(json_reply(
            StatusCode::ACCEPTED,
            &json!({"handle": lossy(&h)}),
        )),
        Outcome::Ended {
            handle,
            status,
            result,
        } => {
            let mut m = Map::new();
            m.insert("handle".into(), lossy(&handle));
            m.insert("status".into(), json!(status));
            if let Some(r) = &result {
                put_payload(&mut m, "result", r);
            }
            ok(&Value::Object(m))
        }
    }
}

fn function_error(e: FunctionError) -> ApiError {
    let status = match e {
        FunctionError::NotFound => StatusCode::NOT_FOUND,
        FunctionError::BadName => StatusCode::BAD_REQUEST,
        FunctionError::Busy | FunctionError::Queued => StatusCode::CONFLICT,
    };
    ApiError::new(status, e.to_string())
}

/// `POST /api/v1/functions/{name}`: `create function F`.
pub async fn create_function(
    State(app): State<crate::http::State>,
    name: Result<Path<String>, PathRejection>,
) -> Reply {
    let name = path_of(name)?;
    let n = name.clone();
    let created = app
        .ctx
        .control
        .call(move |c| c.create_function(n.as_bytes()))
        .await?
        .map_err(function_error)?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok(json_reply(
        status,
        &json!({"name": name, "created": created}),
    ))
}

/// `DELETE /api/v1/functions/{name}`: `drop function F`.
pub async fn drop_function(
    State(app): State<crate::http::State>,
    name: Result<Path<String>, PathRejection>,
) -> Reply {
    let name = path_of(name)?;
    let n = name.clone();
    app.ctx
        .control
        .call(move |c| c.drop_function_named(n.as_bytes()))
        .await?
        .map_err(function_error)?;
    ok(&json!({"name": name, "dropped": true}))
}

/// A queue limit (0 or less: unlimited).
fn limit_field(v: &Option<Value>, key: &str) -> Result<Option<i64>, ApiError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| ApiError::bad(format!("`{key}` must be a whole number"))),
        Some(_) => Err(ApiError::bad(format!("`{key}` must be a whole number"))),
    }
}

/// `POST /api/v1/functions/{name}/maxqueue`: `maxqueue F N` with
/// `{"limit": N}`, `maxqueue F H N L` with `{"high", "normal", "low"}`.
pub async fn max_queue(
    State(app): State<crate::http::State>,
    name: Result<Path<String>, PathRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Reply {
    let name = path_of(name)?;
    let b: MaxQueueBody = fields(&body_of(body)?)?;
    let each = [
        limit_field(&b.high, "high")?,
        limit_field(&b.normal, "normal")?,
        limit_field(&b.low, "low")?,
    ];
    let limits = match (limit_field(&b.limit, "limit")?, each) {
        (Some(n), [None, None, None]) => [n; 3],
        (None, [Some(h), Some(n), Some(l)]) => [h, n, l],
        _ => {
            return Err(ApiError::bad(
                "give `limit`, or all of `high`, `normal` and `low`",
            ))
        }
    };
    let n = name.clone();
    app.ctx
        .control
        .call(move |c| c.set_max_queue(n.as_bytes(), limits))
        .await?
        .map_err(function_error)?;
    ok(
        &json!({"name": name, "max_queue": {"high": limits[0], "normal": limits[1], "low": limits[2]}}),
    )
}

/// `DELETE /api/v1/schedules/{handle}`: `drop schedule H`. A client's
/// schedule is removed; an epoch job waiting for its time is cancelled; a
/// config schedule is 409.
pub async fn drop_schedule(
    State(app): State<crate::http::State>,
    handle: Result<Path<String>, PathRejection>,
) -> Reply {
    let handle = path_of(handle)?;
    let h = handle.clone();
    let done = app
        .ctx
        .control
        .call(move |c| c.drop_schedule_handle(h.as_bytes()))
        .await?
        .map_err(|e| {
            let status = match e {
                DropScheduleError::Unknown => StatusCode::NOT_FOUND,
                DropScheduleError::InConfig => StatusCode::CONFLICT,
            };
            ApiError::new(status, e.to_string())
        })?;
    let kind = match done {
        Dropped::Schedule => "recurring",
        Dropped::EpochJob => "epoch",
    };
    ok(&json!({"handle": handle, "dropped": true, "kind": kind}))
}
