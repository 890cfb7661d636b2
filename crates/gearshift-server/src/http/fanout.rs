//! On a partitioned node, the JSON API answers for the whole cluster: a
//! read is asked of every node that owns partitions and the answers are
//! joined; an action on a job or function this node does not hold is
//! passed to the node that holds it (a function's to its partition's
//! owner). Each node answers its own part (the
//! request it is asked carries [`LOCAL`]).

use std::time::Duration;

use axum::body::{to_bytes, Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

/// Asks a node for its own part only.
pub const LOCAL: &str = "x-gearshift-node-local";
/// How long a node waits for another's part.
const PEER_WAIT: Duration = Duration::from_secs(3);

/// How the nodes' answers to one route become one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    /// The node that knows the job answers (404 elsewhere).
    Holder,
    /// The node that serves the function named by this path segment.
    Owner(usize),
    /// These arrays are joined.
    Lists(&'static str),
    /// These numbers are added up.
    Sum(&'static [&'static str]),
    /// Pages of this list by id, merged into one page.
    Page(&'static str),
}

fn rule_for(method: &Method, path: &str) -> Option<Rule> {
    let parts: Vec<&str> = path.trim_start_matches("/api/v1/").split('/').collect();
    let get = method == Method::GET;
    match parts.as_slice() {
        ["overview"] if get => Some(Rule::Sum(&["totals", "connections"])),
        ["jobs"] if get => Some(Rule::Page("jobs")),
        ["dead"] if get => Some(Rule::Page("dead")),
        ["functions"] if get => Some(Rule::Lists("functions")),
        ["workers"] if get => Some(Rule::Lists("workers")),
        ["schedules"] if get => Some(Rule::Lists("schedules")),
        ["jobs", _] if get => Some(Rule::Holder),
        ["jobs", _, "cancel"] | ["dead", _, "retry"] => Some(Rule::Holder),
        ["functions", _, "pause" | "resume" | "maxqueue"] => Some(Rule::Owner(1)),
        ["functions", _] if method == Method::DELETE => Some(Rule::Owner(1)),
        ["dead", _] | ["schedules", _] if method == Method::DELETE => Some(Rule::Holder),
        ["dead", "retry"] if method == Method::POST => Some(Rule::Sum(&["retried"])),
        ["dead"] if method == Method::DELETE => Some(Rule::Sum(&["dropped"])),
        _ => None,
    }
}

/// The middleware: this node's answer, joined with the others' where the
/// route asks for it.
pub async fn middleware(State(app): State<super::State>, req: Request, next: Next) -> Response {
    let Some(view) = app.ctx.cluster.clone() else {
        return next.run(req).await;
    };
    let rule = rule_for(req.method(), req.uri().path());
    let (Some(rule), false) = (rule, req.headers().contains_key(LOCAL)) else {
        return next.run(req).await;
    };
    let peers = view.partition_peers();
    if peers.is_empty() {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    let Ok(body) = to_bytes(body, app.ctx.max_body).await else {
        return super::ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "request body too large")
            .into_response();
    };
    let ask = Ask {
        method: parts.method.clone(),
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_owned(), |p| p.as_str().to_owned()),
        auth: parts.headers.get(header::AUTHORIZATION).cloned(),
        body: body.clone(),
    };
    if let Rule::Owner(i) = rule {
        let segment = parts
            .uri
            .path()
            .trim_start_matches("/api/v1/")
            .split('/')
            .nth(i);
        // A path's `+` is itself, not a space.
        let name = segment.map(|s| crate::http::api::percent_decode(&s.replace('+', "%2B")));
        if let Some(peer) = name.and_then(|n| view.function_peer(&n)) {
            return match ask.of(&peer).await {
                Some((status, bytes)) => json_response(status, bytes),
                None => super::ApiError::new(
                    StatusCode::BAD_GATEWAY,
                    "the node that serves this function did not answer",
                )
                .into_response(),
            };
        }
    }
    let local = next.run(Request::from_parts(parts, Body::from(body))).await;
    match rule {
        Rule::Owner(_) => local,
        Rule::Holder => {
            if local.status() != StatusCode::NOT_FOUND {
                return local;
            }
            for peer in &peers {
                if let Some((status, bytes)) = ask.of(peer).await {
                    if status != StatusCode::NOT_FOUND {
                        return json_response(status, bytes);
                    }
                }
            }
            local
        }
        Rule::Lists(_) | Rule::Sum(_) | Rule::Page(_) => {
            let (status, local_bytes) = split_response(local).await;
            let Some(mut merged) = status
                .is_success()
                .then(|| serde_json::from_slice::<Value>(&local_bytes).ok())
                .flatten()
            else {
                return json_response(status, local_bytes);
            };
            let answers = futures_util::future::join_all(peers.iter().map(|p| ask.of(p))).await;
            let mut missing = Vec::new();
            let mut parts = Vec::new();
            for (peer, answer) in peers.iter().zip(answers) {
                let part = answer
                    .filter(|(s, _)| s.is_success())
                    .and_then(|(_, b)| serde_json::from_slice::<Value>(&b).ok());
                match part {
                    Some(part) => parts.push(part),
                    None => missing.push(Value::String(peer.clone())),
                }
            }
            match rule {
                Rule::Page(key) => merge_pages(key, page_limit(&ask.path), &mut merged, parts),
                _ => parts.into_iter().for_each(|p| join(rule, &mut merged, p)),
            }
            if let Value::Object(m) = &mut merged {
                m.insert("unreachable".into(), Value::Array(missing));
            }
            super::json_reply(status, &merged)
        }
    }
}

/// The request as another node is asked it.
struct Ask {
    method: Method,
    path: String,
    auth: Option<axum::http::HeaderValue>,
    body: Bytes,
}

impl Ask {
    /// `peer`'s own answer (its HTTP address), or None if it gave none.
    async fn of(&self, peer: &str) -> Option<(StatusCode, Bytes)> {
        let mut headers = HeaderMap::new();
        headers.insert(LOCAL, axum::http::HeaderValue::from_static("1"));
        if let Some(a) = &self.auth {
            headers.insert(header::AUTHORIZATION, a.clone());
        }
        if !self.body.is_empty() {
            headers.insert(
                header::CONTENT_TYPE,
                axum::http::HeaderValue::from_static("application/json"),
            );
        }
        let url = format!("http://{peer}{}", self.path);
        let sent = client()
            .request(self.method.clone(), url)
            .headers(headers)
            .body(self.body.clone())
            .timeout(PEER_WAIT)
            .send()
            .await;
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                tracing::info!(%peer, "another node did not answer its part: {e}");
                return None;
            }
        };
        let status = resp.status();
        resp.bytes().await.ok().map(|b| (status, b))
    }
}

pub(super) fn client() -> &'static reqwest::Client {
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(reqwest::Client::new)
}

async fn split_response(r: Response) -> (StatusCode, Bytes) {
    let status = r.status();
    let bytes = to_bytes(r.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    (status, bytes)
}

fn json_response(status: StatusCode, body: Bytes) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Adds another node's part to `merged`.
fn join(rule: Rule, merged: &mut Value, part: Value) {
    match rule {
        Rule::Lists(key) => {
            if let (Some(Value::Array(all)), Some(Value::Array(more))) =
                (merged.get_mut(key), part.get(key))
            {
                all.extend(more.iter().cloned());
            }
            if let (Some(Value::Number(a)), Some(Value::Number(b))) =
                (merged.get("epoch_total"), part.get("epoch_total"))
            {
                let n = a.as_u64().unwrap_or(0) + b.as_u64().unwrap_or(0);
                merged["epoch_total"] = Value::from(n);
            }
        }
        Rule::Sum(keys) => {
            for key in keys {
                if let Some(b) = part.get(*key) {
                    add(&mut merged[*key], b);
                }
            }
        }
        Rule::Holder | Rule::Owner(_) | Rule::Page(_) => {}
    }
}

/// The page size a list request asks for (as the handlers read it).
fn page_limit(path_and_query: &str) -> usize {
    let query = path_and_query.split_once('?').map(|(_, q)| q);
    let limit = crate::http::api::query_pairs(query)
        .into_iter()
        .find(|(k, _)| k == "limit")
        .and_then(|(_, v)| std::str::from_utf8(&v).ok()?.parse::<usize>().ok());
    limit
        .unwrap_or(100)
        .clamp(1, gearshift_core::view::MAX_PAGE)
}

/// Merges every node's page after the same cursor (ids are unique across
/// nodes) into one: the items up to the first point some node has not
/// looked past yet, by id, `limit` at most; `next_cursor` goes on from there.
fn merge_pages(key: &str, limit: usize, merged: &mut Value, parts: Vec<Value>) {
    let mut pages = vec![std::mem::take(merged)];
    pages.extend(parts);
    let mut items: Vec<Value> = Vec::new();
    // How far every node has looked: the least of their next cursors.
    let mut bound: Option<u64> = None;
    for page in &mut pages {
        if let Some(Value::Array(list)) = page.get_mut(key) {
            items.append(list);
        }
        let next = page
            .get("next_cursor")
            .and_then(Value::as_str)
            .and_then(|c| c.parse::<u64>().ok());
        if let Some(n) = next {
            bound = Some(bound.map_or(n, |b| b.min(n)));
        }
    }
    let id = |v: &Value| v.get("id").and_then(Value::as_u64).unwrap_or(u64::MAX);
    items.retain(|v| bound.is_none_or(|b| id(v) <= b));
    items.sort_by_key(id);
    let mut next = bound;
    if items.len() > limit {
        items.truncate(limit);
        next = items.last().map(id);
    }
    let mut out = std::mem::take(&mut pages[0]);
    out[key] = Value::Array(items);
    out["next_cursor"] = next.map_or(Value::Null, |n| Value::String(n.to_string()));
    *merged = out;
}

/// `a += b` for numbers, field by field for objects of numbers.
fn add(a: &mut Value, b: &Value) {
    match (a, b) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                add(a.entry(k.clone()).or_insert(Value::from(0)), v);
            }
        }
        (a @ Value::Number(_), Value::Number(b)) => {
            let n = a.as_u64().unwrap_or(0) + b.as_u64().unwrap_or(0);
            *a = Value::from(n);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn routes_get_their_rule() {
        assert_eq!(
            rule_for(&Method::GET, "/api/v1/functions"),
            Some(Rule::Lists("functions"))
        );
        assert_eq!(
            rule_for(&Method::GET, "/api/v1/jobs/H:x:1"),
            Some(Rule::Holder)
        );
        assert_eq!(rule_for(&Method::POST, "/api/v1/jobs"), None);
        assert_eq!(
            rule_for(&Method::GET, "/api/v1/jobs"),
            Some(Rule::Page("jobs"))
        );
        assert_eq!(
            rule_for(&Method::DELETE, "/api/v1/dead"),
            Some(Rule::Sum(&["dropped"]))
        );
        assert_eq!(rule_for(&Method::POST, "/api/v1/functions/f"), None);
        assert_eq!(
            rule_for(&Method::POST, "/api/v1/functions/f/pause"),
            Some(Rule::Owner(1))
        );
        assert_eq!(rule_for(&Method::GET, "/metrics"), None);
    }

    #[test]
    fn pages_merge_by_id_up_to_what_every_node_has_seen() {
        let mut a = json!({"jobs": [{"id": 1}, {"id": 9}], "next_cursor": null});
        let b = json!({"jobs": [{"id": 4}, {"id": 6}], "next_cursor": "6"});
        let c = json!({"jobs": [{"id": 2}], "next_cursor": null});
        merge_pages("jobs", 10, &mut a, vec![b.clone(), c.clone()]);
        // 9 waits: node b has not looked past 6 yet.
        assert_eq!(
            a,
            json!({"jobs": [{"id": 1}, {"id": 2}, {"id": 4}, {"id": 6}], "next_cursor": "6"})
        );
        let mut a = json!({"jobs": [{"id": 1}, {"id": 9}], "next_cursor": null});
        merge_pages("jobs", 2, &mut a, vec![b, c]);
        assert_eq!(
            a,
            json!({"jobs": [{"id": 1}, {"id": 2}], "next_cursor": "2"})
        );
        let mut end = json!({"dead": [], "next_cursor": null});
        merge_pages(
            "dead",
            5,
            &mut end,
            vec![json!({"dead": [{"id": 3}], "next_cursor": null})],
        );
        assert_eq!(end, json!({"dead": [{"id": 3}], "next_cursor": null}));
        assert_eq!(page_limit("/api/v1/jobs?limit=3&cursor=9"), 3);
        assert_eq!(page_limit("/api/v1/jobs"), 100);
    }

    #[test]
    fn parts_are_joined_and_summed() {
        let mut a = json!({"functions": [{"name": "a"}], "x": 1});
        join(
            Rule::Lists("functions"),
            &mut a,
            json!({"functions": [{"name": "b"}], "x": 5}),
        );
        assert_eq!(
            a,
            json!({"functions": [{"name": "a"}, {"name": "b"}], "x": 1})
        );
        let mut o = json!({"totals": {"queued": 2, "dead": 1}, "version": "v"});
        join(
            Rule::Sum(&["totals"]),
            &mut o,
            json!({"totals": {"queued": 3, "dead": 0}, "version": "w"}),
        );
        assert_eq!(
            o,
            json!({"totals": {"queued": 5, "dead": 1}, "version": "v"})
        );
    }
}
