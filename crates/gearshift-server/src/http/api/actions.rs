//! The `/api/v1` actions: cancel, the dead set's retry and drop, pause and
//! resume (typed core calls), and submissions (through [`super::super::submit`]).

use super::*;

fn control_error(e: ControlError) -> ApiError {
    let status = match e {
        ControlError::UnknownJob | ControlError::UnknownFunction => StatusCode::NOT_FOUND,
        ControlError::Finished => StatusCode::CONFLICT,
    };
    ApiError::new(status, e.to_string())
}

/// `POST /api/v1/jobs/{handle}/cancel`.
pub async fn cancel(
    State(app): State<crate::http::State>,
    handle: Result<Path<String>, PathRejection>,
) -> Reply {
    let handle = path_of(handle)?;
    let h = handle.clone();
    app.ctx
        .control
        .call(move |c| c.cancel_job(h.as_bytes()))
        .await?
        .map_err(control_error)?;
    ok(&json!({"handle": handle, "cancelled": true}))
}

/// Which dead jobs a body (and `function` query) selects.
fn dead_select(body: &Map<String, Value>, function: Option<&[u8]>) -> Result<DeadSelect, ApiError> {
    if let Some(h) = body.get("handles") {
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
    match body.get("function") {
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
    let which = dead_select(&json_body(&body_of(body)?)?, None)?;
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
    let which = dead_select(&json_body(&body_of(body)?)?, get(&q, "function"))?;
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

/// A submission body.
fn submission(m: &Map<String, Value>) -> Result<Submission, ApiError> {
    let string = |key: &str| -> Result<Option<&str>, ApiError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ApiError::bad(format!("`{key}` must be a string"))),
        }
    };
    let function = match string("function")? {
        Some(f) if !f.is_empty() => Bytes::copy_from_slice(f.as_bytes()),
        _ => return Err(ApiError::bad("`function` is required")),
    };
    let data = match (string("data")?, string("data_base64")?) {
        (Some(_), Some(_)) => return Err(ApiError::bad("give `data` or `data_base64`, not both")),
        (Some(t), None) => Bytes::copy_from_slice(t.as_bytes()),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map(Bytes::from)
            .map_err(|e| ApiError::bad(format!("`data_base64` is not base64: {e}")))?,
        (None, None) => Bytes::new(),
    };
    let priority = match string("priority")? {
        None | Some("normal") => Priority::Normal,
        Some("high") => Priority::High,
        Some("low") => Priority::Low,
        Some(p) => {
            return Err(ApiError::bad(format!(
                "unknown priority {p:?}: high, normal or low"
            )))
        }
    };
    let unique = Bytes::copy_from_slice(string("unique")?.unwrap_or("").as_bytes());
    let background = match m.get("background") {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(ApiError::bad("`background` must be true or false")),
    };
    let epoch = match m.get("at") {
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
    let wait = match m.get("wait_timeout") {
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
    let s = submission(&json_body(&body_of(body)?)?)?;
    match app.submitter.submit(s).await? {
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
