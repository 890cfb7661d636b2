//! The registry after missed server events: a bridge that lagged behind
//! the event bus (here: it is never told of joins and leaves, only that it
//! lagged) resynchronises its `workers/` entries from the server's worker
//! list: an entry for a worker it never heard join, `DEAD` for one it never
//! heard leave. Skipped, saying so, where `etcd` is not installed.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use gearshift_client::{WorkError, Worker};
use gearshift_etcd::keys::Layout;
use gearshift_etcd::stats::Stats;
use gearshift_etcd::{BridgeConfig, ServerEvent};
use serde_json::Value;

mod common;
use common::{connect, gearshift, get, start_etcd, wait_for};

/// The entries under `/t/workers/` named `name`.
async fn named(kv: &mut etcd_client::Client, name: &str) -> Vec<Value> {
    let opts = etcd_client::GetOptions::new().with_prefix();
    let r = kv.get("/t/workers/", Some(opts)).await.expect("workers");
    r.kvs()
        .iter()
        .filter_map(|k| serde_json::from_slice::<Value>(k.value()).ok())
        .filter(|d| d["Name"] == name)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagged_bridge_resyncs_the_registry_from_the_worker_list() {
    let Some(etcd) = start_etcd() else {
        eprintln!("SKIPPED: `etcd` is not installed (apt-get install etcd-server)");
        return;
    };
    let mut kv = connect(&etcd).await;
    let server = gearshift().await;
    let gearman = server.local_addrs()[0];
    let control = server.control();
    tokio::spawn(server.run(std::future::pending()));
    // Heartbeats every 20 s: within this test only a lag can bring the
    // registry up to date (the first heartbeat comes before the worker).
    let config = BridgeConfig {
        endpoints: vec![etcd.url.clone()],
        prefix: "/t/".into(),
        user: None,
        ca: None,
        identity: None,
        function_field: "Function".into(),
        default_function: "etcd-job".into(),
        harvest_after: Duration::from_secs(60),
        layout: Layout::Single,
        node: "lag".into(),
        gearman,
    };
    let stats = Arc::new(Stats::default());
    let (events, rx) = tokio::sync::mpsc::unbounded_channel();
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(gearshift_etcd::run(
        config,
        stats.clone(),
        rx,
        gearshift_etcd::server::Server::Core(control),
        stopped,
    ));
    wait_for(&mut kv, "/t/workers/gearshift-lag", |v| {
        v["Status"] == "ALIVE"
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let worker = Worker::builder()
        .server(gearman)
        .client_id("unseen-1")
        .function(
            "f",
            |job| async move { Ok::<_, WorkError>(job.data().clone()) },
        )
        .build()
        .expect("worker");
    let running = tokio::spawn(worker.run(std::future::pending()));
    let mut admin = gearshift_client::AdminClient::connect(gearman)
        .await
        .expect("admin");
    while admin.show_workers().await.expect("workers").is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        named(&mut kv, "unseen-1").await.is_empty(),
        "no event, no entry"
    );

    events.send(ServerEvent::Lagged).expect("send");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let key = loop {
        let opts = etcd_client::GetOptions::new().with_prefix();
        let r = kv.get("/t/workers/", Some(opts)).await.expect("workers");
        let found = r.kvs().iter().find(|k| {
            serde_json::from_slice::<Value>(k.value()).is_ok_and(|d| d["Name"] == "unseen-1")
        });
        if let Some(k) = found {
            break k.key_str().expect("utf-8").to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no entry after the lag"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(key.starts_with("/t/workers/gearshift-lag-"), "{key}");
    let doc = get(&mut kv, &key).await.expect("entry");
    assert_eq!(doc["Status"], "ALIVE", "{doc}");

    running.abort();
    while !admin.show_workers().await.expect("workers").is_empty() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    events.send(ServerEvent::Lagged).expect("send");
    wait_for(&mut kv, &key, |v| v["Status"] == "DEAD").await;
    assert_eq!(stats.events_lagged.load(Ordering::Relaxed), 2);
}
