//! The `/api/v1` reads: each copies a bounded view out of the core with one
//! [`crate::control::Control`] call and writes it as JSON.

use super::*;

/// `GET /api/v1/overview`.
pub async fn overview(State(app): State<crate::http::State>) -> Reply {
    let t = app
        .ctx
        .node_totals(app.ctx.control.call(|c| c.totals()).await?);
    let (totals, connections) = totals_json(&t);
    let figures = app.ctx.store_stats.snapshot();
    let store = json!({
        "failures": figures.failures,
        "last_failure_ms": figures.last_failure_ms,
        "refused": t.refused_store,
    });
    ok(&json!({
        "version": env!("CARGO_PKG_VERSION"),
        "started_ms": app.started_ms,
        "now_ms": crate::clock::unix_ms(),
        "totals": totals,
        "connections": connections,
        "store": store,
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
/// On a partitioned node each function also names its partition and that
/// partition's owner.
pub async fn functions(State(app): State<crate::http::State>) -> Reply {
    let fs = app.ctx.control.call(|c| c.functions_view()).await?;
    let view = app.ctx.cluster.as_deref();
    let list: Vec<Value> = fs
        .iter()
        .map(|f| {
            let mut v = function_json(f);
            // Only a partitioned node's view places functions.
            if let Some(view) = view {
                if let Some(p) = view.partition_of(&f.name) {
                    v["partition"] = p.into();
                    v["node"] = view.function_owner(&f.name).into();
                }
            }
            v
        })
        .collect();
    ok(&json!({ "functions": list }))
}

fn summary_json(j: &JobSummary) -> Map<String, Value> {
    let v = json!({
        "id": j.id,
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
pub async fn jobs(State(app): State<crate::http::State>, RawQuery(raw): RawQuery) -> Reply {
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
    id: u64,
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
            id: j.id,
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

/// A job's last failed run (apart from how it ended).
pub fn last_failure_json(f: &LastFailure) -> Value {
    json!({
        "attempt": f.attempt, "at_ms": f.at,
        "reason": f.reason.map(|r| r.word()), "error": lossy(&f.error),
    })
}

fn detail_json(d: &JobDetail) -> Value {
    let mut m = summary_json(&d.summary);
    m.insert("started_ms".into(), json!(d.started));
    m.insert("finished_ms".into(), json!(d.finished));
    m.insert("worker".into(), opt_lossy(d.worker.as_ref()));
    m.insert("error".into(), opt_lossy(d.error.as_ref()));
    m.insert(
        "outcome".into(),
        d.outcome.map_or(Value::Null, |o| Value::from(o.word())),
    );
    m.insert(
        "last_failure".into(),
        d.last_failure
            .as_ref()
            .map_or(Value::Null, last_failure_json),
    );
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
    State(app): State<crate::http::State>,
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
        "id": w.id, "fd": w.fd, "address": w.address, "port": w.port, "node": w.node,
        "client_id": lossy(&w.client_id), "identity": w.identity,
        "connected_ms": w.connected, "last_seen_ms": w.last_seen,
        "jobs_done": w.jobs_done, "jobs_failed": w.jobs_failed,
        "running": running, "functions": functions,
        "stats": w.stats.map(|s| json!({ "cpu_ms": s.cpu_ms, "max_rss_kib": s.max_rss_kib })),
    })
}

/// `GET /api/v1/workers`.
pub async fn workers(State(app): State<crate::http::State>) -> Reply {
    let ws = app.ctx.control.call(|c| c.workers_view()).await?;
    let list: Vec<Value> = ws.iter().map(worker_json).collect();
    ok(&json!({ "workers": list }))
}

fn dead_json(d: &DeadView) -> Value {
    json!({
        "id": d.id, "handle": lossy(&d.handle), "function": lossy(&d.function), "unique": lossy(&d.unique),
        "attempts": d.attempts, "died_ms": d.died, "error": opt_lossy(d.error.as_ref()),
        "size": d.size,
    })
}

/// `GET /api/v1/dead`.
pub async fn dead(State(app): State<crate::http::State>, RawQuery(raw): RawQuery) -> Reply {
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
        "id": s.id, "handle": lossy(&s.handle), "kind": if s.epoch { "epoch" } else { "recurring" },
        "function": lossy(&s.function), "when": s.when, "unique": lossy(&s.unique),
        "priority": priority_word(s.priority), "next_ms": s.next,
        "source": if s.from_config { "config" } else { "client" },
    })
}

/// `GET /api/v1/schedules`: every recurring schedule, then the epoch jobs
/// due soonest (at most a page's worth; `epoch_total` counts them all).
pub async fn schedules(State(app): State<crate::http::State>) -> Reply {
    let v = app.ctx.control.call(|c| c.schedules_view(MAX_PAGE)).await?;
    let list: Vec<Value> = v.schedules.iter().map(schedule_json).collect();
    ok(&json!({ "schedules": list, "epoch_total": v.epoch_total }))
}

/// `GET /api/v1/cluster`: the nodes (from the node table, refreshed every
/// heartbeat) with the workers connected through each, and on partitioned
/// nodes each partition's owner.
pub async fn cluster(State(app): State<crate::http::State>) -> Reply {
    let Some(view) = app.ctx.cluster.clone() else {
        return Err(ApiError::not_found(
            "not a cluster node (the store is not PostgreSQL)",
        ));
    };
    let ws = app.ctx.control.call(|c| c.workers_view()).await?;
    let on = |name: &str| {
        ws.iter()
            .filter(|w| !w.functions.is_empty())
            .filter(|w| w.node.as_deref().unwrap_or(&view.me) == name)
            .count()
    };
    let nodes: Vec<Value> = view
        .nodes()
        .iter()
        .map(|n| {
            json!({
                "name": n.node.name, "gearman": n.node.gearman, "http": n.node.http,
                "version": n.version, "silent_ms": n.silent_ms, "leader": n.leader,
                "workers": on(&n.node.name),
            })
        })
        .collect();
    let total = ws.iter().filter(|w| !w.functions.is_empty()).count();
    let owners = view.partitions();
    if owners.is_empty() {
        return ok(&json!({ "node": view.me, "mode": "leader", "nodes": nodes, "workers": total }));
    }
    let partitions: Vec<Value> = owners
        .iter()
        .map(|p| json!({ "partition": p.partition, "epoch": p.epoch, "node": p.node.as_ref().map(|n| &n.name) }))
        .collect();
    let owner_of = |n: u32| owners.iter().find(|p| p.partition == n)?.node.as_ref();
    let pins: Vec<Value> = view
        .pins()
        .iter()
        .map(|(f, n)| json!({ "function": lossy(f), "partition": n, "node": owner_of(*n).map(|o| &o.name) }))
        .collect();
    let asked: Vec<Value> = view
        .pins_asked()
        .iter()
        .map(|(f, from, to)| json!({ "function": lossy(f), "from": from, "partition": to, "node": owner_of(*from).map(|o| &o.name) }))
        .collect();
    ok(&json!({
        "node": view.me, "mode": "partitioned", "nodes": nodes, "workers": total,
        "partitions": partitions, "pins": pins, "pins_asked": asked,
    }))
}
