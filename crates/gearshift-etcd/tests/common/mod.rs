//! What the real-etcd tests share: an etcd of their own on free ports, and
//! reading and waiting for documents.
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
