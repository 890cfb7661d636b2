//! What the real-etcd tests share: an etcd of their own on free ports, a
//! client of it and a Gearshift server in process, and reading and waiting
//! for documents.
#![allow(dead_code)] // each test file uses its own part of it

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub struct Etcd {
    child: Child,
    _dir: tempfile::TempDir,
    pub url: String,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client of `etcd`, once it answers.
pub async fn connect(etcd: &Etcd) -> etcd_client::Client {
    loop {
        if let Ok(mut c) = etcd_client::Client::connect([etcd.url.as_str()], None).await {
            if c.get("probe", None).await.is_ok() {
                return c;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Gearshift server of this process on a free port (not yet running).
pub async fn gearshift() -> gearshift_server::Server {
    gearshift_server::Server::bind(gearshift_server::ServerConfig {
        listen: vec!["127.0.0.1:0".parse().expect("addr")],
        ..Default::default()
    })
    .await
    .expect("server")
}

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

pub fn start_etcd() -> Option<Etcd> {
    if Command::new("etcd").arg("--version").output().is_err() {
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let (client, peer) = (free_port(), free_port());
    let url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let child = Command::new("etcd")
        .arg("--data-dir")
        .arg(dir.path())
        .args([
            "--listen-client-urls",
            &url,
            "--advertise-client-urls",
            &url,
        ])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("default={peer_url}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start etcd");
    Some(Etcd {
        child,
        _dir: dir,
        url,
    })
}

pub async fn get(kv: &mut etcd_client::Client, key: &str) -> Option<Value> {
    let r = kv.get(key, None).await.ok()?;
    serde_json::from_slice(r.kvs().first()?.value()).ok()
}

/// Waits until `check` holds for the document at `key`.
pub async fn wait_for(
    kv: &mut etcd_client::Client,
    key: &str,
    check: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(v) = get(kv, key).await {
            if check(&v) {
                return v;
            }
            assert!(Instant::now() < deadline, "{key} never got there: {v}");
        }
        assert!(Instant::now() < deadline, "{key} never appeared");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
