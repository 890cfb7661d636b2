//! The bridge against a real etcd (Debian's `etcd-server`, started here on
//! free ports of 127.0.0.1) and a Gearshift server in this process: a job
//! put in etcd runs on a Gearman worker and is written back, the worker
//! appears in the registry, bad documents are counted and left alone, and
//! a native worker whose heartbeat lapsed is harvested. Skipped, saying
//! so, where `etcd` is not installed.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gearshift_client::{WorkError, Worker};
use gearshift_etcd::keys::Layout;
use gearshift_etcd::stats::Stats;
use gearshift_etcd::BridgeConfig;
use serde_json::Value;

mod common;
use common::{connect, gearshift, get, start_etcd, wait_for, Etcd};

fn last_state(v: &Value) -> &str {
    v["States"]
        .as_array()
        .and_then(|s| s.last())
        .and_then(|s| s["State"].as_str())
        .unwrap_or("")
}

/// A Gearshift in this process with a worker for `upper` (progress 1/2,
/// then the workload in capitals) and `chatty` (50 progress reports), and
/// the bridge on `etcd` under `/t/`.
struct Setup {
    kv: etcd_client::Client,
    stats: Arc<Stats>,
    stop: tokio::sync::watch::Sender<bool>,
    bridge: tokio::task::JoinHandle<Result<(), gearshift_etcd::ConfigError>>,
}

async fn setup(etcd: &Etcd, layout: Layout) -> Setup {
    let kv = connect(etcd).await;
    let server = gearshift().await;
    let gearman = server.local_addrs()[0];
    let events = gearshift_etcd::events::forward(&server.events());
    let control = server.control();
    tokio::spawn(server.run(std::future::pending()));
    let worker = Worker::builder()
        .server(gearman)
        .client_id("upper-1")
        .function("upper", |job| async move {
            job.send_status(1, 2).await.map_err(|_| WorkError::Fail)?;
            Ok::<_, WorkError>(job.data().to_ascii_uppercase())
        })
        .function("chatty", |job| async move {
            for n in 1..=50 {
                job.send_status(n, 50).await.map_err(|_| WorkError::Fail)?;
            }
            Ok::<_, WorkError>("said it all")
        })
        .build()
        .expect("worker");
    tokio::spawn(worker.run(std::future::pending()));
    let stats = Arc::new(Stats::default());
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let config = BridgeConfig {
        endpoints: vec![etcd.url.clone()],
        prefix: "/t/".into(),
        user: None,
        ca: None,
        identity: None,
        function_field: "Function".into(),
        default_function: "etcd-job".into(),
        harvest_after: Duration::from_secs(3),
        layout,
        node: "test".into(),
        gearman,
    };
    let bridge = tokio::spawn(gearshift_etcd::run(
        config,
        stats.clone(),
        events,
        gearshift_etcd::server::Server::Core(control),
        stopped,
    ));
    Setup {
        kv,
        stats,
        stop,
        bridge,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_run_workers_register_and_lost_workers_are_harvested() {
    let Some(etcd) = start_etcd() else {
        eprintln!("SKIPPED: `etcd` is not installed (apt-get install etcd-server)");
        return;
    };
    let Setup {
        mut kv,
        stats,
        stop,
        bridge,
    } = setup(&etcd, Layout::Single).await;

    let queued = r#"{"Function":"upper","Keep":{"a":1},"States":[{"State":"QUEUED","Step":"","Date":"2026-11-28T10:00:00Z"}]}"#;
    kv.put("/t/jobs/00000000000000000001", queued, None)
        .await
        .expect("put");
    kv.put("/t/jobs/00000000000000000002", "junk", None)
        .await
        .expect("put");
    let nobody = queued.replace("upper", "nobody");
    kv.put("/t/jobs/00000000000000000003", nobody.as_str(), None)
        .await
        .expect("put");

    let done = wait_for(&mut kv, "/t/jobs/00000000000000000001", |v| {
        last_state(v) == "FINISHED"
    })
    .await;
    assert_eq!(done["Result"]["Status"], "SUCCESS", "{done}");
    assert!(
        done["Result"]["Info"]
            .as_str()
            .is_some_and(|i| i.contains("\"KEEP\"")),
        "{done}"
    );
    assert_eq!(done["Keep"]["a"], 1, "unknown fields are kept: {done}");
    assert_eq!(done["Owner"], "gearshift-test");
    let states = done["States"].as_array().expect("states");
    assert_eq!(states.len(), 3, "{done}");
    assert_eq!(
        (states[1]["State"].as_str(), states[1]["Step"].as_str()),
        (Some("STARTED"), Some("1/2"))
    );

    // A chatty worker's progress is coalesced; the last one is kept.
    let chatty = queued.replace("upper", "chatty");
    kv.put("/t/jobs/00000000000000000004", chatty.as_str(), None)
        .await
        .expect("put");
    let done = wait_for(&mut kv, "/t/jobs/00000000000000000004", |v| {
        last_state(v) == "FINISHED"
    })
    .await;
    assert_eq!(done["States"][1]["Step"], "50/50", "{done}");
    let r = kv
        .get("/t/jobs/00000000000000000004", None)
        .await
        .expect("get");
    let writes = r.kvs()[0].version();
    assert!(writes < 10, "50 progress reports took {writes} writes");

    // The Gearman worker is in the registry, and so is the bridge.
    let entries = kv
        .get(
            "/t/workers/",
            Some(etcd_client::GetOptions::new().with_prefix()),
        )
        .await
        .expect("workers");
    let docs: Vec<Value> = entries
        .kvs()
        .iter()
        .filter_map(|k| serde_json::from_slice(k.value()).ok())
        .collect();
    assert!(
        docs.iter()
            .any(|d| d["Name"] == "upper-1" && d["Status"] == "ALIVE"),
        "{docs:?}"
    );
    assert!(docs
        .iter()
        .any(|d| d["InstanceId"] == "gearshift-test" && d["Role"] == "gearshift-bridge"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while stats.bad_json.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "junk is counted");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A native worker lost holding job 3: harvested, its job back to QUEUED.
    let mut started: Value = serde_json::from_str(&nobody).expect("json");
    started["Owner"] = "native-1".into();
    started["States"]
        .as_array_mut()
        .expect("states")
        .push(serde_json::json!({"State":"STARTED","Step":"","Date":"2020-01-01T00:00:00Z"}));
    kv.put("/t/jobs/00000000000000000003", started.to_string(), None)
        .await
        .expect("put");
    let lost = r#"{"Name":"native-1","InstanceId":"native-1","Job":"3","Heartbeat":"2020-01-01T00:00:00Z","Status":"ALIVE","Stats":{"Cpu":1}}"#;
    kv.put("/t/workers/native-1", lost, None)
        .await
        .expect("put");
    let dead = wait_for(&mut kv, "/t/workers/native-1", |v| v["Status"] == "DEAD").await;
    assert_eq!(dead["Stats"]["Cpu"], 1, "the rest of the entry is kept");
    let back = get(&mut kv, "/t/jobs/00000000000000000003")
        .await
        .expect("job 3");
    assert_eq!(last_state(&back), "QUEUED", "{back}");
    assert_eq!(back["States"][2]["Step"], "harvested: worker native-1 lost");
    assert_eq!(stats.jobs_harvested.load(Ordering::Relaxed), 1);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let still = get(&mut kv, "/t/jobs/00000000000000000003")
        .await
        .expect("job 3");
    assert_eq!(
        last_state(&still),
        "QUEUED",
        "no Gearman worker for it: never claimed"
    );

    // A graceful stop marks the bridge's entries DEAD.
    stop.send(true).expect("stop");
    let _ = tokio::time::timeout(Duration::from_secs(5), bridge).await;
    let bridge_entry = get(&mut kv, "/t/workers/gearshift-test")
        .await
        .expect("entry");
    assert_eq!(bridge_entry["Status"], "DEAD");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_split_layout_moves_a_job_from_new_to_finished() {
    let Some(etcd) = start_etcd() else {
        eprintln!("SKIPPED: `etcd` is not installed (apt-get install etcd-server)");
        return;
    };
    // The stop switch lives to the end: dropped, it stops the bridge.
    let Setup {
        mut kv,
        stop: _stop,
        ..
    } = setup(&etcd, Layout::Split).await;
    let queued = r#"{"Function":"upper","States":[{"State":"QUEUED","Step":"","Date":"2026-11-28T10:00:00Z"}]}"#;
    kv.put("/t/new/00000000000000000001", queued, None)
        .await
        .expect("put");
    let done = wait_for(&mut kv, "/t/finished/00000000000000000001", |v| {
        last_state(v) == "FINISHED"
    })
    .await;
    assert_eq!(done["Result"]["Status"], "SUCCESS", "{done}");
    for gone in [
        "/t/new/00000000000000000001",
        "/t/running/00000000000000000001",
    ] {
        let r = kv.get(gone, None).await.expect("get");
        assert!(r.kvs().is_empty(), "{gone} is left behind");
    }
}
