//! Shared helpers of the HTTP tests: a server with HTTP on 127.0.0.1 port 0
//! (honouring GEARSHIFT_TEST_IO_THREADS), and a worker.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::time::Duration;

use gearshift_client::{WorkError, Worker};
use gearshift_core::CoreConfig;
use gearshift_server::{HttpConfig, Server, ServerConfig};
use serde_json::Value;
use tokio::sync::oneshot;

/// A running server with HTTP.
pub struct Http {
    /// Gearman address.
    pub gearman: SocketAddr,
    /// HTTP base URL.
    pub base: String,
    /// HTTP address.
    pub http: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
}

impl Drop for Http {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

impl Http {
    /// A Gearman client of this server.
    pub fn gearman_client(&self) -> gearshift_client::Client {
        gearshift_client::Client::builder()
            .server(self.gearman)
            .build()
            .expect("client")
    }
}

/// A config like the other tests', with HTTP on port 0.
pub fn config() -> ServerConfig {
    let threads = std::env::var("GEARSHIFT_TEST_IO_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    ServerConfig {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0))],
        io_threads: threads,
        core: CoreConfig {
            handle_prefix: "H:test".to_owned(),
            ..CoreConfig::default()
        },
        http: Some(HttpConfig::new(SocketAddr::from(([127, 0, 0, 1], 0)))),
        ..ServerConfig::default()
    }
}

/// Starts `cfg`.
pub async fn start(cfg: ServerConfig) -> Http {
    run(Server::bind(cfg).await.expect("bind"))
}

/// Starts `cfg` on a store the test made.
pub async fn start_with_store(cfg: ServerConfig, store: Box<dyn gearshift_store::Store>) -> Http {
    run(Server::bind_with_store(cfg, Some(store))
        .await
        .expect("bind"))
}

fn run(server: Server) -> Http {
    let gearman = server.local_addrs()[0];
    let http = server.http_addr().expect("http bound");
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = rx.await;
    }));
    Http {
        gearman,
        base: format!("http://{http}"),
        http,
        stop: Some(tx),
    }
}

/// A plain HTTP client.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

/// A worker for `function` that reverses its workload ("fail" fails once
/// per distinct workload when `fail_first`).
pub fn reverser(gearman: SocketAddr, function: &str, fail_first: bool) -> oneshot::Sender<()> {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    let worker = Worker::builder()
        .server(gearman)
        .client_id("w1")
        .function(function.to_owned(), move |job| {
            let seen = seen.clone();
            async move {
                let data = job.data().to_vec();
                if fail_first
                    && seen
                        .lock()
                        .map(|mut s| s.insert(data.clone()))
                        .unwrap_or(false)
                {
                    return Err(WorkError::Fail);
                }
                let mut r = data;
                r.reverse();
                Ok::<_, WorkError>(r)
            }
        })
        .build()
        .expect("worker");
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(worker.run(async move {
        let _ = rx.await;
    }));
    tx
}

/// Waits until `f` is true (polling), panicking after 10 s.
pub async fn eventually<F, Fut>(mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..200 {
        if f().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("condition not met in time");
}

/// GET `base+path`: the status and the JSON body (null if none).
pub async fn get(base: &str, path: &str) -> (u16, Value) {
    let r = client()
        .get(format!("{base}{path}"))
        .send()
        .await
        .expect("get");
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

/// A request with an optional JSON body: the status and the JSON body.
pub async fn send(
    method: reqwest::Method,
    base: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = client().request(method, format!("{base}{path}"));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.expect("send");
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

/// POST, as [`send`].
pub async fn post(base: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    send(reqwest::Method::POST, base, path, body).await
}

pub async fn delete(base: &str, path: &str) -> (u16, Value) {
    send(reqwest::Method::DELETE, base, path, None).await
}
