//! `GET /api/v1/events`: the live events as Server-Sent Events, filtered
//! per subscriber by kind (`kinds=`: only those are produced at all) and by
//! function; `stats` sends the sampler's totals once a second. A subscriber
//! that falls behind the bus's bounded buffer gets a last `dropped` event
//! and the stream ends; the server never waits for a reader.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{RawQuery, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use gearshift_core::events::{EventKind, Kind, LiveEvent, WorkerRef};
use gearshift_core::lifecycle::{LastFailure, Step};
use gearshift_core::policy::Reason;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{mpsc, watch};

use super::fanout_events::Remote;

use super::api::{lossy, query_pairs, step_detail};
use crate::events::Subscription;

/// How often an idle stream gets a comment line.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// An event's kind word and its JSON.
pub fn event_json(e: &LiveEvent) -> (&'static str, Value) {
    match &e.kind {
        EventKind::Job {
            handle,
            function,
            step,
        } => {
            let kind = match step {
                Step::Queued => "created",
                Step::Started(_) => "started",
                Step::Failed(..) => "failed",
                Step::RetryAt(_) => "retrying",
                Step::Requeued(_) => "requeued",
                Step::Completed(_) => "completed",
                Step::Cancelled => "cancelled",
                Step::Dead => "dead",
                Step::Revived => "revived",
            };
            let mut v = json!({
                "kind": kind, "at_ms": e.at, "handle": lossy(handle),
                "function": lossy(function), "detail": step_detail(step),
            });
            if let (Step::RetryAt(t), Value::Object(m)) = (step, &mut v) {
                m.insert("retry_at_ms".into(), json!(t));
            }
            (kind, v)
        }
        EventKind::Progress {
            handle,
            function,
            numerator,
            denominator,
        } => (
            "progress",
            json!({
                "kind": "progress", "at_ms": e.at, "handle": lossy(handle),
                "function": lossy(function), "numerator": numerator, "denominator": denominator,
            }),
        ),
        EventKind::Dead {
            handle,
            function,
            attempts,
            reason,
            error,
        } => (
            "dead",
            json!({
                "kind": "dead", "at_ms": e.at, "handle": lossy(handle),
                "function": lossy(function),
                "detail": dead_detail(*attempts, *reason, error),
                "attempts": attempts, "reason": reason.map(|r| r.word()), "error": lossy(error),
            }),
        ),
        EventKind::WorkerJoined(w) => ("worker_joined", worker_json("worker_joined", e.at, w)),
        EventKind::WorkerLeft(w) => ("worker_left", worker_json("worker_left", e.at, w)),
    }
}

/// A `dead` event's detail: the runs it had and its last failure, said
/// as a `failed` event's detail says it (`3 attempts; fail: disk full`).
pub fn dead_detail(attempts: u32, reason: Option<Reason>, error: &Bytes) -> String {
    let runs = if attempts == 1 { "attempt" } else { "attempts" };
    if error.is_empty() && reason.is_none() {
        return format!("{attempts} {runs}");
    }
    let failure = LastFailure {
        attempt: None,
        at: None,
        reason,
        error: error.clone(),
    };
    format!("{attempts} {runs}; {}", failure.describe())
}

fn worker_json(kind: &str, at: u64, w: &WorkerRef) -> Value {
    let functions: Vec<Value> = w.functions.iter().map(|f| lossy(f)).collect();
    json!({
        "kind": kind, "at_ms": at, "worker": lossy(&w.label), "address": w.address,
        "functions": functions,
    })
}

/// Which events a subscriber wants: none named, all; else events of the
/// named functions, and worker events of workers that registered one.
#[derive(Debug, Clone, Default)]
pub struct Filter(Vec<Bytes>);

impl Filter {
    /// Whether `e` passes.
    pub fn passes(&self, e: &LiveEvent) -> bool {
        if self.0.is_empty() {
            return true;
        }
        match &e.kind {
            EventKind::Job { function, .. }
            | EventKind::Progress { function, .. }
            | EventKind::Dead { function, .. } => self.0.contains(function),
            EventKind::WorkerJoined(w) | EventKind::WorkerLeft(w) => {
                w.functions.iter().any(|f| self.0.contains(f))
            }
        }
    }
}

struct Reader {
    sub: Subscription,
    filter: Filter,
    /// Once a second a `stats` event, when asked for.
    stats: Option<(tokio::time::Interval, std::sync::Arc<super::series::Series>)>,
    pending: VecDeque<Event>,
    stop: watch::Receiver<bool>,
    ended: bool,
    /// Other nodes' events, on a partitioned node.
    remote: Option<(super::fanout_events::Follow, mpsc::Receiver<Remote>)>,
}

fn sse_event(kind: &str, v: &Value) -> Event {
    Event::default().event(kind).data(v.to_string())
}

impl Reader {
    /// The next event to send; `None` ends the stream.
    async fn next(&mut self) -> Option<Event> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            if self.ended {
                return None;
            }
            let stats_tick = async {
                match &mut self.stats {
                    Some((tick, _)) => {
                        tick.tick().await;
                    }
                    None => std::future::pending().await,
                }
            };
            let remote = async {
                match &mut self.remote {
                    Some((_, rx)) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            let got = tokio::select! {
                r = self.sub.rx.recv() => r,
                Some((kind, data)) = remote => {
                    return Some(Event::default().event(kind).data(data));
                }
                _ = stats_tick => {
                    if let Some((at, t)) = self.stats.as_ref().and_then(|(_, s)| s.latest()) {
                        let (totals, connections) = super::api::totals_json(&t);
                        let v = json!({"kind": "stats", "at_ms": at, "totals": totals, "connections": connections});
                        return Some(sse_event("stats", &v));
                    }
                    continue;
                }
                _ = self.stop.wait_for(|s| *s) => return None,
            };
            match got {
                Ok(batch) => {
                    let mask = self.sub.mask;
                    let wanted = |e: &&LiveEvent| mask & e.kind.kind().bit() != 0;
                    for e in batch
                        .iter()
                        .filter(wanted)
                        .filter(|e| self.filter.passes(e))
                    {
                        let (kind, v) = event_json(e);
                        self.pending.push_back(sse_event(kind, &v));
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    self.ended = true;
                    let reason = format!("the reader fell behind by {n} event batches");
                    let v = json!({"kind": "dropped", "reason": reason});
                    tracing::debug!("event stream dropped: {reason}");
                    return Some(sse_event("dropped", &v));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

/// What `kinds=` asks for (comma-separated, the parameter repeatable): the
/// mask of job and worker kinds, and whether `stats` is in it. No `kinds`:
/// every kind and no `stats`.
pub fn parse_kinds(values: &[String]) -> Result<(u16, bool), String> {
    if values.is_empty() {
        return Ok((Kind::all(), false));
    }
    let (mut mask, mut stats) = (0, false);
    for word in values.iter().flat_map(|v| v.split(',')).map(str::trim) {
        match (word, Kind::from_word(word)) {
            ("", _) => {}
            ("stats", _) => stats = true,
            (_, Some(k)) => mask |= k.bit(),
            (_, None) => return Err(format!("unknown event kind {word:?}")),
        }
    }
    Ok((mask, stats))
}

/// `GET /api/v1/events?function=F&kinds=K,...`.
pub async fn stream(
    State(app): State<super::State>,
    headers: axum::http::HeaderMap,
    RawQuery(raw): RawQuery,
) -> Response {
    let pairs = query_pairs(raw.as_deref());
    let functions = pairs
        .iter()
        .filter(|(k, _)| k == "function")
        .map(|(_, v)| Bytes::from(v.clone()))
        .collect();
    let kinds: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "kinds")
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect();
    let (mask, stats) = match parse_kinds(&kinds) {
        Ok(k) => k,
        Err(e) => {
            return super::ApiError::new(axum::http::StatusCode::BAD_REQUEST, e).into_response()
        }
    };
    let sub = app.ctx.bus.subscribe(mask);
    // An empty call starts a hub round, which turns the core's events on
    // before the stream's first byte: nothing after this reply is missed.
    if let Err(e) = app.ctx.control.call(|_| ()).await {
        return super::ApiError::from(e).into_response();
    }
    let stats = stats.then(|| {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        (tick, app.series.clone())
    });
    let remote = app
        .ctx
        .cluster
        .clone()
        .filter(|v| !headers.contains_key(super::fanout::LOCAL) && !v.partition_peers().is_empty())
        .map(|view| {
            let auth = headers.get(axum::http::header::AUTHORIZATION).cloned();
            super::fanout_events::follow(
                view,
                super::fanout_events::peer_query(raw.as_deref()),
                auth,
                {
                    let tls = app.ctx.relays.as_ref().and_then(|g| g.tls()).cloned();
                    move || super::fanout::client(tls.as_ref())
                },
            )
        });
    let reader = Reader {
        sub,
        filter: Filter(functions),
        stats,
        pending: VecDeque::new(),
        stop: app.stop.clone(),
        ended: false,
        remote,
    };
    let events = futures_util::stream::unfold(reader, |mut r| async move {
        r.next().await.map(|e| (Ok::<_, Infallible>(e), r))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_events_detail_names_the_runs_and_the_last_failure() {
        let text = Bytes::from_static(b"disk full");
        assert_eq!(
            dead_detail(3, Some(Reason::Exception), &text),
            "3 attempts; exception: disk full"
        );
        assert_eq!(
            dead_detail(1, Some(Reason::Timeout), &Bytes::from_static(b"timeout")),
            "1 attempt; timeout"
        );
        assert_eq!(dead_detail(2, None, &Bytes::new()), "2 attempts");
    }
}
