//! The `/api/v1` routes: reads are [`crate::Control`] calls that copy a
//! view out of the core, actions are typed calls, submissions go through
//! [`super::submit`]. Names are lossy UTF-8; workloads and results base64,
//! plus text when they are UTF-8.

use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::Bytes;
use gearshift_core::control::{ControlError, DeadSelect};
use gearshift_core::lifecycle::{Event, Step};
use gearshift_core::policy::{Backoff, Policy, Reason};
use gearshift_core::view::{
    DeadView, FunctionView, JobDetail, JobQuery, JobSummary, ScheduleView, StateFilter, WorkerView,
    MAX_PAGE,
};
use gearshift_proto::Priority;
use serde_json::{json, Map, Value};

use super::submit::{Outcome, Submission};
use super::{json_reply, ApiError};

type Reply = Result<Response, ApiError>;

fn ok(v: &Value) -> Reply {
    Ok(json_reply(StatusCode::OK, v))
}

/// Bytes as a JSON string (U+FFFD for what is not UTF-8).
pub fn lossy(b: &[u8]) -> Value {
    Value::String(String::from_utf8_lossy(b).into_owned())
}

fn opt_lossy(b: Option<&Bytes>) -> Value {
    b.map_or(Value::Null, |b| lossy(b))
}

/// Adds `{key}_base64` and, when UTF-8, `{key}` text.
fn put_payload(m: &mut Map<String, Value>, key: &str, b: &[u8]) {
    let b64 = base64::engine::general_purpose::STANDARD.encode(b);
    m.insert(format!("{key}_base64"), Value::String(b64));
    if let Ok(s) = std::str::from_utf8(b) {
        m.insert(key.to_owned(), Value::String(s.to_owned()));
    }
}

/// A priority's word.
pub fn priority_word(p: Priority) -> &'static str {
    match p {
        Priority::High => "high",
        Priority::Normal => "normal",
        Priority::Low => "low",
    }
}

/// The query's pairs, percent-decoded (`+` is a space).
pub fn query_pairs(raw: Option<&str>) -> Vec<(String, Vec<u8>)> {
    let Some(raw) = raw else { return Vec::new() };
    raw.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                String::from_utf8_lossy(&percent_decode(k)).into_owned(),
                percent_decode(v),
            )
        })
        .collect()
}

/// Decodes `%XX` escapes and `+`.
pub fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hex = b
                    .get(i + 1..i + 3)
                    .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(v) => {
                        out.push(v);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    out
}

fn get<'a>(q: &'a [(String, Vec<u8>)], key: &str) -> Option<&'a [u8]> {
    q.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_slice())
}

/// `limit` and `cursor`.
fn paging(q: &[(String, Vec<u8>)]) -> Result<(usize, Option<u64>), ApiError> {
    let num = |key: &str| -> Result<Option<u64>, ApiError> {
        match get(q, key) {
            None => Ok(None),
            Some(v) => std::str::from_utf8(v)
                .ok()
                .and_then(|s| s.parse().ok())
                .map(Some)
                .ok_or_else(|| ApiError::bad(format!("`{key}` must be a whole number"))),
        }
    };
    let limit = match num("limit")? {
        None => 100,
        Some(0) => return Err(ApiError::bad("`limit` must be at least 1")),
        Some(n) => (n as usize).min(MAX_PAGE),
    };
    Ok((limit, num("cursor")?))
}

fn cursor(next: Option<u64>) -> Value {
    next.map_or(Value::Null, |n| Value::String(n.to_string()))
}

fn path_of(p: Result<Path<String>, PathRejection>) -> Result<String, ApiError> {
    p.map(|Path(s)| s)
        .map_err(|e| ApiError::bad(format!("bad path: {e}")))
}

fn body_of(b: Result<Bytes, BytesRejection>) -> Result<Bytes, ApiError> {
    b.map_err(|e| {
        let status = e.status();
        let msg = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "the body is larger than the server's packet limit".to_owned()
        } else {
            format!("cannot read the body: {e}")
        };
        ApiError::new(status, msg)
    })
}

/// An optional JSON object body.
fn json_body(b: &[u8]) -> Result<Map<String, Value>, ApiError> {
    if b.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(b) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(ApiError::bad("the body must be a JSON object")),
        Err(e) => Err(ApiError::bad(format!("the body is not valid JSON: {e}"))),
    }
}

// ---- reads ----

/// `GET /api/v1/overview`.
pub async fn overview(State(app): State<super::State>) -> Reply {
    let t = app.ctx.control.call(|c| c.totals()).await?;
    let (totals, connections) = totals_json(&t);
    ok(&json!({
        "version": env!("CARGO_PKG_VERSION"),
        "started_ms": app.started_ms,
        "now_ms": super::now_ms(),
        "totals": totals,
        "connections": connections,
        "series": app.series.snapshot(),
    }))
}

/// The overview's `totals` and `connections` objects (also the event
/// stream's `stats` events).
pub fn totals_json(t: &gearshift_core::view::Totals) -> (Value, Value) {
    (
        json!({
            "queued": t.queued, "scheduled": t.scheduled, "running": t.running,
            "workers": t.workers, "functions": t.functions, "dead": t.dead,
            "submitted": t.submitted, "completed": t.completed,
            "failed": t.failed, "retried": t.retried,
        }),
        json!({"client": t.client_conns, "worker": t.worker_conns, "admin": t.admin_conns}),
    )
}

fn policy_json(p: &Policy) -> Value {
    let reasons = [
        Reason::Fail,
        Reason::Exception,
        Reason::Timeout,
        Reason::WorkerLost,
    ];
    let retry_on: Vec<&str> = reasons
        .iter()
        .filter(|r| p.retry_on.contains(**r))
        .map(|r| r.word())
        .collect();
    json!({
        "max_attempts": p.max_attempts,
        "backoff": match p.backoff { Backoff::Fixed => "fixed", Backoff::Exponential => "exponential" },
        "initial_delay_ms": p.initial_delay,
        "max_delay_ms": p.max_delay,
        "jitter": p.jitter,
        "timeout_ms": p.timeout,
        "keep_results_ms": p.keep_results,
        "retry_on": retry_on,
        "require_worker": p.require_worker,
    })
}

fn function_json(f: &FunctionView) -> Value {
    json!({
        "name": lossy(&f.name),
        "queued": {"high": f.queued[0], "normal": f.queued[1], "low": f.queued[2]},
        "scheduled": f.scheduled,
        "running": f.running,
        "workers": f.workers,
        "paused": f.paused,
        "submitted": f.stats.submitted,
        "completed": f.stats.completed,
        "failed": f.stats.failed.iter().sum::<u64>(),
        "retried": f.stats.retried,
        "dead": f.dead,
        "policy": f.policy.as_deref().map_or(Value::Null, policy_json),
    })
}

/// `GET /api/v1/functions`.
pub async fn functions(State(app): State<super::State>) -> Reply {
    let fs = app.ctx.control.call(|c| c.functions_view()).await?;
    let list: Vec<Value> = fs.iter().map(function_json).collect();
    ok(&json!({ "functions": list }))
}

fn summary_json(j: &JobSummary) -> Map<String, Value> {
    let v = json!({
        "handle": lossy(&j.handle),
        "function": lossy(&j.function),
        "unique": lossy(&j.unique),
        "priority": priority_word(j.priority),
        "state": j.state,
        "background": j.background,
        "attempts": j.attempts,
        "created_ms": j.created,
        "due_ms": j.due,
        "size": j.size,
    });
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn state_filter(s: &[u8]) -> Result<StateFilter, ApiError> {
    Ok(match s {
        b"queued" => StateFilter::Queued,
        b"scheduled" => StateFilter::Scheduled,
        b"retrying" => StateFilter::Retrying,
        b"running" => StateFilter::Running,
        b"cancelled" => StateFilter::Cancelled,
        b"finished" => StateFilter::Finished,
        other => {
            return Err(ApiError::bad(format!(
                "unknown state {:?}: queued, scheduled, retrying, running, cancelled or finished",
                String::from_utf8_lossy(other)
            )))
        }
    })
}

/// `GET /api/v1/jobs`.
pub async fn jobs(State(app): State<super::State>, RawQuery(raw): RawQuery) -> Reply {
    let q = query_pairs(raw.as_deref());
    let (limit, after) = paging(&q)?;
    let query = JobQuery {
        function: get(&q, "function").map(Bytes::copy_from_slice),
        state: get(&q, "state").map(state_filter).transpose()?,
        limit,
        after,
    };
    let page = app.ctx.control.call(move |c| c.jobs_page(&query)).await?;
    // Written straight from typed rows: a page of 1000 costs a third of
    // building it as `Value` maps first.
    let out = PageOut {
        jobs: page.jobs.iter().map(SummaryOut::of).collect(),
        next_cursor: page.next.map(|n| n.to_string()),
    };
    let body = serde_json::to_vec(&out)
        .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    Ok((
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// A page of jobs as `GET /api/v1/jobs` writes it.
#[derive(serde::Serialize)]
struct PageOut<'a> {
    jobs: Vec<SummaryOut<'a>>,
    next_cursor: Option<String>,
}

/// One job of a page; the same fields as [`summary_json`].
#[derive(serde::Serialize)]
struct SummaryOut<'a> {
    handle: std::borrow::Cow<'a, str>,
    function: std::borrow::Cow<'a, str>,
    unique: std::borrow::Cow<'a, str>,
    priority: &'static str,
    state: &'static str,
    background: bool,
    attempts: u32,
    created_ms: u64,
    due_ms: Option<u64>,
    size: usize,
}

impl<'a> SummaryOut<'a> {
    fn of(j: &'a JobSummary) -> Self {
        SummaryOut {
            handle: String::from_utf8_lossy(&j.handle),
            function: String::from_utf8_lossy(&j.function),
            unique: String::from_utf8_lossy(&j.unique),
            priority: priority_word(j.priority),
            state: j.state,
            background: j.background,
            attempts: j.attempts,
            created_ms: j.created,
            due_ms: j.due,
            size: j.size,
        }
    }
}

/// A history line's detail, as `show job` writes it.
pub fn step_detail(step: &Step) -> String {
    match step {
        Step::Started(w) => String::from_utf8_lossy(w).into_owned(),
        Step::Failed(reason, d) if d.is_empty() => reason.word().to_owned(),
        Step::Failed(reason, d) => format!("{}: {}", reason.word(), String::from_utf8_lossy(d)),
        Step::RetryAt(t) => gearshift_core::timefmt::rfc3339(*t),
        Step::Requeued(why) => (*why).to_owned(),
        Step::Completed(n) => format!("{n} bytes"),
        Step::Queued | Step::Cancelled | Step::Dead | Step::Revived => String::new(),
    }
}

fn history_json(e: &Event) -> Value {
    json!({"at_ms": e.at, "event": e.step.word(), "detail": step_detail(&e.step)})
}

fn detail_json(d: &JobDetail) -> Value {
    let mut m = summary_json(&d.summary);
    m.insert("started_ms".into(), json!(d.started));
    m.insert("finished_ms".into(), json!(d.finished));
    m.insert("worker".into(), opt_lossy(d.worker.as_ref()));
    m.insert("error".into(), opt_lossy(d.error.as_ref()));
    m.insert("result_size".into(), json!(d.result_size));
    m.insert(
        "progress".into(),
        d.progress.map_or(
            Value::Null,
            |(n, dd)| json!({"numerator": n, "denominator": dd}),
        ),
    );
    m.insert(
        "history".into(),
        Value::Array(d.history.iter().map(history_json).collect()),
    );
    if let Some(r) = &d.result {
        put_payload(&mut m, "result", r);
    }
    Value::Object(m)
}

/// `GET /api/v1/jobs/{handle}`.
pub async fn job(
    State(app): State<super::State>,
    handle: Result<Path<String>, PathRejection>,
    RawQuery(raw): RawQuery,
) -> Reply {
    let handle = path_of(handle)?;
    let q = query_pairs(raw.as_deref());
    let with_result = matches!(get(&q, "result"), Some(b"1" | b"true"));
    let d = app
        .ctx
        .control
        .call(move |c| c.job_detail(handle.as_bytes(), with_result))
        .await?
        .ok_or_else(|| ApiError::not_found("no such job"))?;
    ok(&detail_json(&d))
}

fn worker_json(w: &WorkerView) -> Value {
    let running: Vec<Value> = w.running.iter().map(|h| lossy(h)).collect();
    let functions: Vec<Value> = w.functions.iter().map(|f| lossy(f)).collect();
    json!({
        "id": w.id, "fd": w.fd, "address": w.address, "client_id": lossy(&w.client_id),
        "connected_ms": w.connected, "last_seen_ms": w.last_seen,
        "jobs_done": w.jobs_done, "jobs_failed": w.jobs_failed,
        "running": running, "functions": functions,
    })
}

/// `GET /api/v1/workers`.
pub async fn workers(State(app): State<super::State>) -> Reply {
    let ws = app.ctx.control.call(|c| c.workers_view()).await?;
    let list: Vec<Value> = ws.iter().map(worker_json).collect();
    ok(&json!({ "workers": list }))
}

fn dead_json(d: &DeadView) -> Value {
    json!({
        "handle": lossy(&d.handle), "function": lossy(&d.function), "unique": lossy(&d.unique),
        "attempts": d.attempts, "died_ms": d.died, "error": opt_lossy(d.error.as_ref()),
        "size": d.size,
    })
}

/// `GET /api/v1/dead`.
pub async fn dead(State(app): State<super::State>, RawQuery(raw): RawQuery) -> Reply {
    let q = query_pairs(raw.as_deref());
    let (limit, after) = paging(&q)?;
    let function = get(&q, "function").map(Bytes::copy_from_slice);
    let page = app
        .ctx
        .control
        .call(move |c| c.dead_page(function.as_deref(), limit, after))
        .await?;
    let list: Vec<Value> = page.dead.iter().map(dead_json).collect();
    ok(&json!({ "dead": list, "next_cursor": cursor(page.next) }))
}

fn schedule_json(s: &ScheduleView) -> Value {
    json!({
        "id": s.id, "function": lossy(&s.function), "when": s.when, "unique": lossy(&s.unique),
        "priority": priority_word(s.priority), "next_ms": s.next,
        "source": if s.from_config { "config" } else { "client" },
    })
}

/// `GET /api/v1/schedules`.
pub async fn schedules(State(app): State<super::State>) -> Reply {
    let ss = app.ctx.control.call(|c| c.schedules_view()).await?;
    let list: Vec<Value> = ss.iter().map(schedule_json).collect();
    ok(&json!({ "schedules": list }))
}

// ---- actions ----

fn control_error(e: ControlError) -> ApiError {
    let status = match e {
        ControlError::UnknownJob | ControlError::UnknownFunction => StatusCode::NOT_FOUND,
        ControlError::Finished => StatusCode::CONFLICT,
    };
    ApiError::new(status, e.to_string())
}

/// `POST /api/v1/jobs/{handle}/cancel`.
pub async fn cancel(
    State(app): State<super::State>,
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
    State(app): State<super::State>,
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
    State(app): State<super::State>,
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
    State(app): State<super::State>,
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
    State(app): State<super::State>,
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
    app: super::State,
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
    State(app): State<super::State>,
    name: Result<Path<String>, PathRejection>,
) -> Reply {
    set_paused(app, name, true).await
}

/// `POST /api/v1/functions/{name}/resume`.
pub async fn resume(
    State(app): State<super::State>,
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
        None | Some(Value::Null) => super::DEFAULT_WAIT,
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
pub async fn submit(State(app): State<super::State>, body: Result<Bytes, BytesRejection>) -> Reply {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%20b+c"), b"a b c");
        assert_eq!(percent_decode("%zz%4"), b"%zz%4");
        assert_eq!(percent_decode("H%3Ahost%3A1"), b"H:host:1");
        assert_eq!(percent_decode("%ff"), vec![0xff]);
    }

    #[test]
    fn queries() {
        let q = query_pairs(Some("function=a&function=b&limit=5"));
        assert_eq!(q.len(), 3);
        assert_eq!(paging(&q).ok(), Some((5, None)));
        let bad = query_pairs(Some("cursor=x"));
        assert!(paging(&bad).is_err());
        let big = query_pairs(Some("limit=5000&cursor=42"));
        assert_eq!(paging(&big).ok(), Some((MAX_PAGE, Some(42))));
    }
}
