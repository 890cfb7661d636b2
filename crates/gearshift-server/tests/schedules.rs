//! Recurring jobs end to end: a SUBMIT_JOB_SCHED is acknowledged once
//! stored, listed, kept across a restart and dropped by admin; a stored
//! schedule whose time passed while the server was down fires once at
//! start; config schedules are listed as such and refuse `drop schedule`.

mod common;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use common::{config, log_config, req, status_of, TestServer};
use gearshift_core::schedule::ScheduleSpec;
use gearshift_proto::{PacketType, Priority};
use gearshift_store::{Durability, LogOptions, LogStore, ScheduleRecord, Store};

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

fn sched(function: &str, when: [&str; 5]) -> Vec<u8> {
    let mut parts: Vec<&[u8]> = vec![function.as_bytes(), b""];
    parts.extend(when.iter().map(|w| w.as_bytes()));
    parts.push(b"tick");
    req(PacketType::SubmitJobSched, &parts)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_schedule_is_stored_listed_and_dropped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = log_config(dir.path(), Durability::Fsync);
    let mut server = TestServer::start(cfg.clone()).await;
    let mut client = server.connect().await;
    client.send(&sched("nightly", ["0", "3", "", "", ""])).await;
    let h = client.expect_created().await;
    let hs = String::from_utf8_lossy(&h).into_owned();
    let mut admin = server.connect().await;
    let listed = admin.admin_list("show schedules").await;
    let cols: Vec<&str> = listed.lines().next().unwrap_or("").split('\t').collect();
    assert_eq!(cols.len(), 6, "{listed}");
    assert_eq!(
        (cols[0], cols[1], cols[2], cols[4]),
        (&*hs, "nightly", "0 3 * * *", "client")
    );
    assert!(cols[3].ends_with("T03:00:00.000Z"), "{listed}");
    client.send(&sched("bad", ["99", "", "", "", ""])).await;
    client.expect_error("INVALID_ARGUMENT").await;
    server.stop().await;

    let mut server = TestServer::start(cfg.clone()).await;
    let mut admin = server.connect().await;
    assert_eq!(admin.admin_list("show schedules").await, listed);
    assert_eq!(
        admin.admin_line(&format!("drop schedule {hs}")).await,
        "OK\r\n"
    );
    server.stop().await;

    let server = TestServer::start(cfg).await;
    let mut admin = server.connect().await;
    assert_eq!(admin.admin_list("show schedules").await, ".\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_firing_missed_while_down_happens_once_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let mut store = LogStore::open(dir.path(), LogOptions::default()).expect("store");
        store.schedule(&ScheduleRecord {
            id: 5,
            handle: Bytes::from_static(b"H:test:5"),
            when: Bytes::from_static(b"* * * * *"),
            monday_zero: false,
            function: Bytes::from_static(b"minutely"),
            unique: Bytes::new(),
            data: Bytes::from_static(b"x"),
            priority: 1,
            // Missed three times while the server was down.
            next_ms: Some(unix_ms() - 180_000),
            from_config: false,
        });
        store.flush().expect("flush");
    }
    let cfg = log_config(dir.path(), Durability::Fsync);
    let server = TestServer::start(cfg).await;
    let mut admin = server.connect().await;
    let mut status = String::new();
    for _ in 0..100 {
        status = admin.admin_list("status").await;
        if status_of(&status, "minutely").is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status_of(&status, "minutely"), Some((1, 0, 0)), "{status}");
    let listed = admin.admin_list("show schedules").await;
    let next = listed.split('\t').nth(3).unwrap_or("");
    assert!(next.ends_with(":00.000Z"), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_schedules_are_listed_and_not_droppable() {
    let mut cfg = config();
    cfg.schedules = vec![ScheduleSpec {
        cron: "*/5 * * * *".into(),
        function: Bytes::from_static(b"report"),
        unique: Bytes::from_static(b"r"),
        data: Bytes::new(),
        priority: Priority::High,
    }];
    let server = TestServer::start(cfg).await;
    let mut admin = server.connect().await;
    let listed = admin.admin_list("show schedules").await;
    let cols: Vec<&str> = listed.lines().next().unwrap_or("").split('\t').collect();
    assert_eq!(
        (cols[1], cols[2], cols[4], cols[5]),
        ("report", "*/5 * * * *", "config", "r"),
        "{listed}"
    );
    assert!(admin
        .admin_line(&format!("drop schedule {}", cols[0]))
        .await
        .starts_with("ERR SCHEDULE_IN_CONFIG"));
}
