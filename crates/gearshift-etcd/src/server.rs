//! What the bridge reads of Gearshift besides Gearman: its worker list
//! (for the registry) and its live events (workers joining and leaving,
//! retries). Beside a job server (a single server, a leader-mode leader)
//! they come from its core and its event bus; on a partitioned node, whose
//! job server holds only its own partitions, from the node's HTTP API over
//! loopback, which answers for the whole cluster.

use std::net::SocketAddr;
use std::time::Duration;

use gearshift_core::view::WorkerView;
use gearshift_proto::worker_stats::WorkerStats;
use gearshift_server::Control;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::outage::{Change, Outage};
use crate::ServerEvent;

/// How often the worker list is read when no event tells of workers
/// joining and leaving.
const POLL: Duration = Duration::from_secs(1);
/// How long a request to the node's API may take.
const API_WAIT: Duration = Duration::from_secs(5);

/// Where the server's side comes from.
pub enum Server {
    /// The job server beside the bridge: its core.
    Core(Control),
    /// A partitioned node's HTTP API.
    Api(Api),
}

/// A partitioned node's HTTP API, on loopback.
#[derive(Clone)]
pub struct Api {
    base: String,
    token: Option<String>,
    client: reqwest::Client,
    /// The worker list could not be had the last time.
    list_down: Outage,
}

/// The node's API asked every second found out of reach (its job server
/// restarts when partitions move): a warning when it goes, then debug.
fn failed(down: &mut Outage, why: &str) {
    match down.note(true) {
        Change::Went => tracing::warn!("etcd: {why}; asking again every second"),
        _ => tracing::debug!("etcd: {why}"),
    }
}

/// The node's API answered: a line if it had not.
fn answered(down: &mut Outage, what: &str) {
    if let Change::Back(_) = down.note(false) {
        tracing::info!("etcd: {what} answers again");
    }
}

impl Api {
    /// The API at `http` (plain HTTP), sending `token` if the node has one
    /// (other nodes may want it when asked for their part).
    pub fn new(http: SocketAddr, token: Option<String>) -> Api {
        Api {
            base: format!("http://{http}"),
            token,
            client: reqwest::Client::new(),
            list_down: Outage::default(),
        }
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        let req = self.client.get(format!("{}{path}", self.base));
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// Follows the cluster's `retrying` events as [`ServerEvent::Retrying`];
    /// a stream that ends or cannot be had is asked for again a second
    /// later (the worker list, read every second, needs no resync; a retry
    /// in the gap shows only as the job's end). Ends when the receiver goes.
    pub fn events(&self) -> mpsc::UnboundedReceiver<ServerEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        let api = self.clone();
        tokio::spawn(async move {
            let mut down = Outage::default();
            loop {
                match api.get("/api/v1/events?kinds=retrying").send().await {
                    Ok(mut resp) if resp.status().is_success() => {
                        answered(&mut down, "the node's event stream");
                        let read = gearshift_server::http::fanout_events::each_event(
                            &mut resp,
                            |(_, data)| match retrying(&data) {
                                Some(ev) => tx.send(ev).is_ok(),
                                None => true,
                            },
                        );
                        // The bridge stopped: the stream goes with it, even
                        // one no event comes on.
                        let read = tokio::select! {
                            r = read => r,
                            _ = tx.closed() => return,
                        };
                        if let Err(why) = read {
                            failed(&mut down, &format!("the node's event stream: {why}"));
                        }
                    }
                    Ok(resp) => failed(
                        &mut down,
                        &format!("the node refused its event stream ({})", resp.status()),
                    ),
                    Err(e) => failed(&mut down, &format!("the node's event stream: {e}")),
                }
                if tx.is_closed() {
                    return;
                }
                tokio::time::sleep(POLL).await;
            }
        });
        rx
    }

    async fn workers(&mut self) -> Option<Vec<(String, WorkerView)>> {
        let resp = match self.get("/api/v1/workers").timeout(API_WAIT).send().await {
            Ok(r) if r.status().is_success() => r,
            Ok(r) => {
                let why = format!("the node refused its worker list ({})", r.status());
                failed(&mut self.list_down, &why);
                return None;
            }
            Err(e) => {
                failed(&mut self.list_down, &format!("the node's worker list: {e}"));
                return None;
            }
        };
        let body: Value = resp.json().await.ok()?;
        // A node that gave no part would read as its workers all gone.
        if let Some(nodes) = body["unreachable"].as_array().filter(|n| !n.is_empty()) {
            let why = format!("nodes {nodes:?} gave no worker list; the registry waits for them");
            failed(&mut self.list_down, &why);
            return None;
        }
        answered(&mut self.list_down, "the cluster's worker list");
        let list = body.get("workers")?.as_array()?;
        Some(list.iter().filter_map(cluster_worker).collect())
    }
}

impl Server {
    /// Every worker connection, each with the key of its registry entry;
    /// None when the server did not answer.
    pub async fn workers(&mut self) -> Option<Vec<(String, WorkerView)>> {
        match self {
            Server::Core(control) => {
                let view = control.call(|core| core.workers_view()).await.ok()?;
                Some(view.into_iter().map(|w| (key_of_event(w.id), w)).collect())
            }
            Server::Api(api) => api.workers().await,
        }
    }

    /// How often the registry reads the list besides its heartbeat: only
    /// when no event tells it of joins and leaves.
    pub fn poll(&self) -> Option<Duration> {
        match self {
            Server::Core(_) => None,
            Server::Api(_) => Some(POLL),
        }
    }
}

/// The registry's key of a job server's connection `id` (as its events
/// and its worker list name it).
pub fn key_of_event(id: u64) -> String {
    id.to_string()
}

/// A worker of the cluster's list, keyed by the node it connected to, its
/// address and port (its connection ids differ from owner to owner).
fn cluster_worker(v: &Value) -> Option<(String, WorkerView)> {
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let num = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let list = |k: &str| -> Vec<bytes::Bytes> {
        v.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(|s| bytes::Bytes::copy_from_slice(s.as_bytes()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let address = text("address")?;
    let port = u16::try_from(v.get("port")?.as_u64()?).ok()?;
    let node = text("node");
    let key = format!("{}-{address}-{port}", node.as_deref().unwrap_or("-"));
    let stats = v
        .get("stats")
        .filter(|s| s.is_object())
        .map(|s| WorkerStats {
            cpu_ms: s.get("cpu_ms").and_then(Value::as_u64).unwrap_or(0),
            max_rss_kib: s.get("max_rss_kib").and_then(Value::as_u64).unwrap_or(0),
        });
    let w = WorkerView {
        id: num("id"),
        fd: v.get("fd").and_then(Value::as_i64).unwrap_or(-1),
        address,
        port,
        node,
        client_id: bytes::Bytes::from(text("client_id").unwrap_or_default()),
        identity: text("identity"),
        connected: num("connected_ms"),
        last_seen: num("last_seen_ms"),
        jobs_done: num("jobs_done"),
        jobs_failed: num("jobs_failed"),
        running: list("running"),
        functions: list("functions"),
        stats,
    };
    Some((key, w))
}

/// A `retrying` event's JSON as the bridge's event.
fn retrying(data: &str) -> Option<ServerEvent> {
    let v: Value = serde_json::from_str(data).ok()?;
    if v.get("kind")?.as_str()? != "retrying" {
        return None;
    }
    Some(ServerEvent::Retrying {
        handle: v.get("handle")?.as_str()?.to_owned(),
        at_ms: v.get("retry_at_ms")?.as_i64()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_cluster_worker_is_keyed_by_node_address_and_port() {
        let v = json!({
            "id": 9, "fd": 51234, "address": "10.0.0.7", "port": 51234, "node": "b",
            "client_id": "w1", "identity": null, "connected_ms": 5, "last_seen_ms": 6,
            "jobs_done": 3, "jobs_failed": 1, "running": ["H:x:1"], "functions": ["f", "g"],
            "stats": {"cpu_ms": 40, "max_rss_kib": 2048},
        });
        let (key, w) = cluster_worker(&v).expect("a worker");
        assert_eq!(key, "b-10.0.0.7-51234");
        assert_eq!((w.fd, w.port, w.node.as_deref()), (51234, 51234, Some("b")));
        assert_eq!(&w.client_id[..], b"w1");
        assert_eq!(w.functions.len(), 2);
        assert_eq!(w.stats.map(|s| (s.cpu_ms, s.max_rss_kib)), Some((40, 2048)));
        assert!(
            cluster_worker(&json!({"address": "a"})).is_none(),
            "no port"
        );
    }

    #[tokio::test]
    async fn the_event_stream_goes_when_the_bridge_does() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let api = Api::new(listener.local_addr().expect("addr"), None);
        let mut rx = api.events();
        let (mut sock, _) = listener.accept().await.expect("the stream is asked for");
        let mut request = [0u8; 1024];
        let n = sock.read(&mut request).await.expect("request");
        assert!(request[..n].starts_with(b"GET /api/v1/events?kinds=retrying "));
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                    transfer-encoding: chunked\r\n\r\n";
        let event = r#"event: retrying
data: {"kind":"retrying","handle":"H:x:1","retry_at_ms":7}

"#;
        let chunk = format!("{head}{:x}\r\n{event}\r\n", event.len());
        sock.write_all(chunk.as_bytes()).await.expect("an event");
        let got = rx.recv().await.expect("the event");
        assert_eq!(
            got,
            ServerEvent::Retrying {
                handle: "H:x:1".into(),
                at_ms: 7
            }
        );
        // No more events come; the bridge stops: the connection closes.
        drop(rx);
        let closed = tokio::time::timeout(Duration::from_secs(5), sock.read(&mut request)).await;
        assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "{closed:?}");
    }

    #[test]
    fn only_retrying_events_become_retries() {
        let ev = retrying(r#"{"kind":"retrying","at_ms":1,"handle":"H:x:5","retry_at_ms":99}"#);
        assert_eq!(
            ev,
            Some(ServerEvent::Retrying {
                handle: "H:x:5".into(),
                at_ms: 99
            })
        );
        assert_eq!(retrying(r#"{"kind":"failed","handle":"H:x:5"}"#), None);
        assert_eq!(retrying("not json"), None);
    }
}
