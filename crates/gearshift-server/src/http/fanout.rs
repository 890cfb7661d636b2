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

use super::fanout_merge::{
    join_lists, join_sums, merge_functions, merge_pages, merge_workers, page_limit,
};

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
    /// Prometheus expositions, joined ([`super::fanout_metrics`]).
    Metrics,
    /// Workers, one entry per connection ([`merge_workers`]).
    Workers,
    /// Functions, each from its owner ([`merge_functions`]).
    Functions,
}

fn rule_for(method: &Method, path: &str) -> Option<Rule> {
    if path == "/metrics" {
        return (method == Method::GET).then_some(Rule::Metrics);
    }
    let parts: Vec<&str> = path.trim_start_matches("/api/v1/").split('/').collect();
    let get = method == Method::GET;
    match parts.as_slice() {
        ["overview"] if get => Some(Rule::Sum(&["totals", "connections", "store"])),
        ["jobs"] if get => Some(Rule::Page("jobs")),
        ["dead"] if get => Some(Rule::Page("dead")),
        ["functions"] if get => Some(Rule::Functions),
        ["workers"] if get => Some(Rule::Workers),
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
    let local_only = req.headers().contains_key(LOCAL) || asks_node_scope(req.uri().query());
    let (Some(rule), false) = (rule, local_only) else {
        return next.run(req).await;
    };
    let peers = view.partition_peers();
    if peers.is_empty() {
        return next.run(req).await;
    }
    let (client, scheme) = client(app.ctx.relays.as_ref().and_then(|g| g.tls()));
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
        client,
        scheme,
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
        Rule::Metrics => {
            let (status, local_bytes) = split_response(local).await;
            if !status.is_success() {
                return (status, local_bytes).into_response();
            }
            let mut all =
                super::fanout_metrics::Exposition::parse(&String::from_utf8_lossy(&local_bytes));
            let (parts, missing) = ask.of_all(&peers).await;
            let answered = parts.len() + 1;
            for (_, b) in parts {
                all.add(super::fanout_metrics::Exposition::parse(
                    &String::from_utf8_lossy(&b),
                ));
            }
            (
                StatusCode::OK,
                [(header::CONTENT_TYPE, super::metrics::CONTENT_TYPE)],
                all.render(answered, missing.len()),
            )
                .into_response()
        }
        Rule::Lists(_) | Rule::Sum(_) | Rule::Page(_) | Rule::Workers | Rule::Functions => {
            let (status, local_bytes) = split_response(local).await;
            let Some(mut merged) = status
                .is_success()
                .then(|| serde_json::from_slice::<Value>(&local_bytes).ok())
                .flatten()
            else {
                return json_response(status, local_bytes);
            };
            let (answers, mut missing) = ask.of_all(&peers).await;
            let mut parts = Vec::new();
            for (peer, bytes) in answers {
                match serde_json::from_slice::<Value>(&bytes) {
                    Ok(part) => parts.push((peer, part)),
                    Err(_) => missing.push(peer),
                }
            }
            let values = |parts: Vec<(String, Value)>| parts.into_iter().map(|(_, v)| v);
            match rule {
                Rule::Page(key) => merge_pages(
                    key,
                    page_limit(&ask.path),
                    &mut merged,
                    values(parts).collect(),
                ),
                Rule::Workers => merge_workers(&mut merged, values(parts).collect()),
                Rule::Lists(key) => values(parts).for_each(|p| join_lists(key, &mut merged, &p)),
                Rule::Sum(keys) => values(parts).for_each(|p| join_sums(keys, &mut merged, &p)),
                Rule::Functions => {
                    let mine = (Some(view.me.clone()), merged.clone());
                    let theirs = parts.into_iter().map(|(p, v)| (view.name_at(&p), v));
                    let all = std::iter::once(mine).chain(theirs).collect();
                    merge_functions(&mut merged, all, |f| view.function_owner(f.as_bytes()));
                }
                _ => {}
            }
            if let Value::Object(m) = &mut merged {
                let missing = missing.into_iter().map(Value::String).collect();
                m.insert("unreachable".into(), Value::Array(missing));
            }
            super::json_reply(status, &merged)
        }
    }
}

/// Whether a query asks for this node's own part (`scope=node`).
fn asks_node_scope(query: Option<&str>) -> bool {
    crate::http::api::query_pairs(query)
        .iter()
        .any(|(k, v)| k == "scope" && v[..] == b"node"[..])
}

/// The request as another node is asked it.
struct Ask {
    method: Method,
    path: String,
    auth: Option<axum::http::HeaderValue>,
    body: Bytes,
    client: reqwest::Client,
    scheme: &'static str,
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
        let url = format!("{}://{peer}{}", self.scheme, self.path);
        let sent = (self.client)
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

    /// Every peer's successful answer, and the peers that gave none.
    async fn of_all(&self, peers: &[String]) -> (Vec<(String, Bytes)>, Vec<String>) {
        let answers = futures_util::future::join_all(peers.iter().map(|p| self.of(p))).await;
        let mut parts = Vec::new();
        let mut missing = Vec::new();
        for (peer, answer) in peers.iter().zip(answers) {
            match answer {
                Some((s, b)) if s.is_success() => parts.push((peer.clone(), b)),
                _ => missing.push(peer.clone()),
            }
        }
        (parts, missing)
    }
}

/// The client that asks other nodes, and its scheme: over node TLS when
/// the nodes talk over it (`--link-tls-ca`), else plain HTTP (which every
/// node's HTTP port takes, so also while `--link-tls-allow-clear` lets
/// nodes without node TLS in). The TLS client is built again after a
/// reload of the node's certificate.
pub(super) fn client(
    tls: Option<&crate::cluster::node_tls::LinkTls>,
) -> (reqwest::Client, &'static str) {
    static PLAIN: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    static TLS: std::sync::Mutex<Option<(u64, reqwest::Client)>> = std::sync::Mutex::new(None);
    let Some(tls) = tls.filter(|t| !t.allows_clear()) else {
        return (PLAIN.get_or_init(reqwest::Client::new).clone(), "http");
    };
    let mut built = TLS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let generation = tls.generation();
    if let Some((_, client)) = built.as_ref().filter(|(g, _)| *g == generation) {
        return (client.clone(), "https");
    }
    let client = reqwest::Client::builder()
        .use_preconfigured_tls(tls.client_config())
        .build()
        .unwrap_or_else(|e| {
            tracing::error!("cannot build the HTTP client for node TLS: {e}");
            reqwest::Client::new()
        });
    *built = Some((generation, client.clone()));
    (client, "https")
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_get_their_rule() {
        assert_eq!(
            rule_for(&Method::GET, "/api/v1/functions"),
            Some(Rule::Functions)
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
        assert_eq!(rule_for(&Method::GET, "/metrics"), Some(Rule::Metrics));
        assert_eq!(rule_for(&Method::POST, "/metrics"), None);
        assert_eq!(
            rule_for(&Method::GET, "/api/v1/workers"),
            Some(Rule::Workers)
        );
        assert!(asks_node_scope(Some("limit=3&scope=node")));
        assert!(!asks_node_scope(Some("scope=cluster")));
    }
}
