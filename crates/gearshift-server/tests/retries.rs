//! Retries, the dead set and policy reloads end to end: a failed
//! background job waits for its retry and dies across restarts of the log
//! store without losing its attempts or its error; a dead job retried by an
//! admin runs again under its handle; new policies reach a running server.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{
    bare, can_do, config, log_config, req, submit, submit_bg, work_complete, Conn, TestServer,
};
use gearshift_core::policy::{Backoff, Policies, Policy, Reason, Reasons, Rule};
use gearshift_proto::{PacketType, Response};
use gearshift_store::Durability;

fn retry_policy(pattern: &str, max_attempts: u32, delay_ms: u64) -> Policies {
    Policies {
        rules: vec![Rule {
            pattern: pattern.into(),
            policy: Arc::new(Policy {
                max_attempts,
                retry_on: Reasons::of(&[Reason::Fail, Reason::Exception]),
                backoff: Backoff::Fixed,
                initial_delay: delay_ms,
                max_delay: delay_ms,
                jitter: false,
                keep_results: 3_600_000,
                ..Policy::default()
            }),
        }],
        ..Policies::default()
    }
}

async fn grab(worker: &mut Conn) -> Option<(Bytes, Bytes)> {
    worker.send(&bare(PacketType::GrabJob)).await;
    match worker.recv().await {
        Response::JobAssign { handle, data, .. } => Some((handle, data)),
        Response::NoJob => None,
        other => panic!("expected JOB_ASSIGN or NO_JOB, got {other:?}"),
    }
}

/// Grabs until a job comes (a retry becomes due), for at most 10 s.
async fn grab_when_due(worker: &mut Conn) -> (Bytes, Bytes) {
    for _ in 0..200 {
        if let Some(j) = grab(worker).await {
            return j;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no job became due");
}

fn fail(handle: &[u8]) -> Vec<u8> {
    req(PacketType::WorkFail, &[handle])
}

fn field(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{key}: ")))
        .unwrap_or_else(|| panic!("no {key} in {text}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_and_dead_jobs_survive_restarts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = log_config(dir.path(), Durability::Fsync);
    // A backoff long enough that the restart below (slow on a loaded
    // machine) surely comes before the retry is due.
    cfg.policies = retry_policy("mail*", 2, 3000);
    let mut server = TestServer::start(cfg.clone()).await;
    let mut client = server.connect().await;
    client.send(&submit_bg("mail_out", "m-1", b"hello")).await;
    let h = client.expect_created().await;
    let hs = String::from_utf8_lossy(&h).into_owned();
    let mut worker = server.connect().await;
    worker.send(&can_do("mail_out")).await;
    let (got, _) = grab(&mut worker).await.expect("job");
    assert_eq!(got, h);
    worker.send(&fail(&h)).await;
    // The admin connection may sit on another I/O thread than the worker's,
    // so its question can overtake the WORK_FAIL: ask until it has landed.
    let mut admin = server.connect().await;
    let mut shown = String::new();
    for _ in 0..100 {
        shown = admin.admin_list(&format!("show job {hs}")).await;
        if field(&shown, "state") != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(field(&shown, "state"), "retrying", "{shown}");
    server.stop().await;

    // Restarted before the retry: it still waits, with its attempt counted.
    let mut server = TestServer::start(cfg.clone()).await;
    let mut admin = server.connect().await;
    let shown = admin.admin_list(&format!("show job {hs}")).await;
    assert_eq!(field(&shown, "state"), "retrying", "{shown}");
    assert_eq!(field(&shown, "attempts"), "1", "{shown}");
    let mut worker = server.connect().await;
    worker.send(&can_do("mail_out")).await;
    let (got, data) = grab_when_due(&mut worker).await;
    assert_eq!((got, data), (h.clone(), Bytes::from_static(b"hello")));
    worker.send(&fail(&h)).await;
    // The last attempt failed: dead, not queued.
    let mut dead = String::new();
    for _ in 0..100 {
        dead = admin.admin_list("show dead").await;
        if dead != ".\n" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cols: Vec<&str> = dead.lines().next().unwrap_or("").split('\t').collect();
    assert_eq!(cols.len(), 5, "{dead}");
    assert_eq!(
        (cols[0], cols[1], cols[2], cols[4]),
        (&*hs, "mail_out", "2", "fail")
    );
    assert!(grab(&mut worker).await.is_none());
    server.stop().await;

    // The dead set survives a restart; retried, the job runs again under its handle.
    let mut server = TestServer::start(cfg.clone()).await;
    let mut admin = server.connect().await;
    assert_eq!(admin.admin_list("show dead").await, dead);
    assert_eq!(
        admin.admin_line("retry dead all mail_out").await,
        "OK 1\r\n"
    );
    assert_eq!(admin.admin_list("show dead").await, ".\n");
    let mut worker = server.connect().await;
    worker.send(&can_do("mail_out")).await;
    let (got, _) = grab(&mut worker).await.expect("revived job");
    assert_eq!(got, h);
    worker.send(&work_complete(&h, b"sent")).await;
    let mut shown = String::new();
    for _ in 0..100 {
        shown = admin.admin_list(&format!("show job {hs}")).await;
        if shown.contains("state: completed") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(field(&shown, "result_size"), "4", "{shown}");
    server.stop().await;

    let server = TestServer::start(cfg).await;
    let mut admin = server.connect().await;
    assert_eq!(admin.admin_list("status").await, ".\n");
    assert_eq!(admin.admin_list("show dead").await, ".\n");
    // The kept result and its history came back with the store.
    assert_eq!(admin.admin_list(&format!("show job {hs}")).await, shown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_puts_new_policies_in_force() {
    let server = TestServer::start(config()).await;
    let mut client = server.connect().await;
    let mut worker = server.connect().await;
    let mut admin = server.connect().await;
    worker.send(&can_do("f")).await;
    // No policy: WORK_FAIL is final, as in gearmand.
    client.send(&submit("f", "", b"1")).await;
    let h = client.expect_created().await;
    grab(&mut worker).await.expect("job");
    worker.send(&fail(&h)).await;
    client.expect(Response::WorkFail(h)).await;

    server.reloader.reload(gearshift_server::Reload {
        policies: retry_policy("f", 2, 100),
        schedules: Vec::new(),
        access: None,
    });
    // The reload reaches the core in order with other work: until it has,
    // a failure is still final.
    for _ in 0..100 {
        client.send(&submit("f", "", b"2")).await;
        let h = client.expect_created().await;
        grab(&mut worker).await.expect("job");
        worker.send(&fail(&h)).await;
        // Unknown: final (no policy yet). The admin connection may sit on
        // another I/O thread than the worker's, so its question can
        // overtake the WORK_FAIL: ask until the job no longer runs.
        let mut state = None;
        for _ in 0..100 {
            let cmd = format!("show job {}", String::from_utf8_lossy(&h));
            let first = admin.admin_line(&cmd).await;
            if first.starts_with("ERR UNKNOWN_JOB") {
                break;
            }
            let shown = first + &admin.read_list().await;
            if field(&shown, "state") != "running" {
                state = Some(field(&shown, "state"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let Some(state) = state else {
            client.expect(Response::WorkFail(h)).await;
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        assert_eq!(state, "retrying");
        let (again, _) = grab_when_due(&mut worker).await;
        assert_eq!(again, h);
        worker.send(&work_complete(&h, b"ok")).await;
        client
            .expect(Response::WorkComplete {
                handle: h,
                data: Bytes::from_static(b"ok"),
            })
            .await;
        return;
    }
    panic!("the reload never took effect");
}
