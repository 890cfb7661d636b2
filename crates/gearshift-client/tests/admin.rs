//! The admin client against in-process Gearshift and gearmand 1.1.20:
//! `status`, `prioritystatus`, `workers` and `show jobs` parse into types;
//! the other commands answer; `ERR …` replies become typed errors.
//! Gearshift's own words (`show job`, `show dead`, `show workers`, `retry
//! dead`, `drop dead`, `pause`, `resume`) against an in-process Gearshift
//! whose policy sends a failed background job to the dead set, and `show
//! schedules` / `drop schedule` against schedules a raw SUBMIT_JOB_SCHED
//! made (the library has no call for it); gearmand answers them with typed
//! errors.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::BytesMut;
use common::{bounded, eventually, within, worker_for, Kind, RunningWorker, TestServer};
use gearshift_client::admin::{JobDetail, ScheduleEntry};
use gearshift_client::{AdminClient, AdminErrorKind, Client, Error, Priority, WorkError, Worker};
use gearshift_core::policy::{Policies, Policy, Reason, Reasons, Rule};
use gearshift_core::schedule::ScheduleSpec;
use gearshift_core::CoreConfig;
use gearshift_proto::frame::encode_parts;
use gearshift_proto::{decode_frame, Frame, Magic, PacketType};
use gearshift_server::{Server, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

both!(admin_commands);

fn admin_kind<T: std::fmt::Debug>(r: Result<T, Error>) -> AdminErrorKind {
    match r {
        Err(Error::Admin { kind, .. }) => kind,
        other => panic!("expected an ERR reply, got {other:?}"),
    }
}

async fn admin_commands(kind: Kind) {
    let server = TestServer::start(kind).await;
    let _w = RunningWorker::spawn(
        worker_for(&[&server])
            .client_id("adm-worker")
            .function("adm_fn", |_job| async { Ok::<_, WorkError>("") })
            .build()
            .expect("worker"),
    );
    let client = server.client();
    let high = client
        .job("adm_queue", "h")
        .unique("adm-h")
        .priority(Priority::High)
        .background()
        .await
        .expect("submit");
    client
        .job("adm_queue", "l")
        .unique("adm-l")
        .priority(Priority::Low)
        .background()
        .await
        .expect("submit");

    let mut admin = server.admin().await;
    let addr = server.addr;
    eventually("the worker to register", || async move {
        let mut admin = gearshift_client::AdminClient::connect(addr)
            .await
            .expect("admin");
        let status = admin.status().await.expect("status");
        status
            .iter()
            .any(|s| s.function == "adm_fn" && s.workers == 1)
    })
    .await;

    let status = admin.status().await.expect("status");
    let queue = status
        .iter()
        .find(|s| s.function == "adm_queue")
        .expect("adm_queue listed");
    assert_eq!((queue.total, queue.running, queue.workers), (2, 0, 0));

    let prio = admin.priority_status().await.expect("prioritystatus");
    let queue = prio
        .iter()
        .find(|s| s.function == "adm_queue")
        .expect("adm_queue listed");
    assert_eq!(
        (queue.high, queue.normal, queue.low, queue.workers),
        (1, 0, 1, 0)
    );

    let workers = admin.workers().await.expect("workers");
    let w = workers
        .iter()
        .find(|w| w.client_id == "adm-worker")
        .expect("worker listed");
    assert_eq!(w.functions, ["adm_fn"]);
    assert_eq!(w.ip, "127.0.0.1");
    // The admin connection itself (and the client) are listed without functions.
    assert!(workers.iter().any(|w| w.functions.is_empty()));

    let jobs = admin.show_jobs().await.expect("show jobs");
    let listed = jobs
        .iter()
        .find(|j| j.handle.as_bytes() == &high.handle()[..])
        .expect("job listed");
    assert_eq!(
        (listed.retries, listed.ignored, listed.queued),
        (0, false, true)
    );
    let uniques = admin.show_unique_jobs().await.expect("show unique jobs");
    assert!(uniques.contains(&"adm-h".to_owned()), "{uniques:?}");

    assert!(!admin.version().await.expect("version").is_empty());
    let pid = admin.getpid().await.expect("getpid");
    if kind == Kind::Gearshift {
        assert_eq!(pid, std::process::id());
    }
    assert!(!admin.verbose().await.expect("verbose").is_empty());

    assert_eq!(
        admin_kind(admin.drop_function("nosuch").await),
        AdminErrorKind::FunctionNotFound
    );
    assert_eq!(
        admin_kind(admin.drop_function("adm_fn").await),
        AdminErrorKind::FunctionBusy
    );
    assert_eq!(
        admin_kind(admin.cancel_job("H:nosuch:1").await),
        AdminErrorKind::UnknownJob
    );
    assert_eq!(
        admin_kind(admin.command("bogus").await),
        AdminErrorKind::UnknownCommand
    );
    assert_eq!(
        admin_kind(admin.list("show nothing").await),
        AdminErrorKind::UnknownShowArguments
    );

    admin
        .cancel_job(&high.to_string())
        .await
        .expect("cancel job");
    // Gearshift forgets a cancelled queued job at once; gearmand marks it
    // ignored and keeps it (GET_STATUS still says known) until it is reaped.
    let jobs = admin.show_jobs().await.expect("show jobs");
    match jobs
        .iter()
        .find(|j| j.handle.as_bytes() == &high.handle()[..])
    {
        None => assert!(!client.status(&high).await.expect("status").known),
        Some(j) => {
            assert_eq!(kind, Kind::Gearmand, "{j:?}");
            assert!(j.ignored && !j.queued, "{j:?}");
        }
    }

    admin.create_function("adm_created").await.expect("create");
    admin.max_queue("adm_created", 10).await.expect("maxqueue");
    admin
        .max_queue_by_priority("adm_created", 1, 2, 3)
        .await
        .expect("maxqueue 3");
    let status = admin.status().await.expect("status");
    assert!(
        status.iter().any(|s| s.function == "adm_created"),
        "{status:?}"
    );
    admin.drop_function("adm_created").await.expect("drop");

    match kind {
        // gearmand removed `shutdown` in 1.1.15.
        Kind::Gearmand => assert_eq!(
            admin_kind(admin.shutdown(true).await),
            AdminErrorKind::UnknownCommand
        ),
        Kind::Gearshift => admin.shutdown(true).await.expect("shutdown"),
    }
}

/// An in-process Gearshift where `lc_*` jobs run once, WORK_FAIL is final
/// (a failed background job goes to the dead set) and results are kept.
async fn start_with_policy() -> SocketAddr {
    let policy = Policy {
        max_attempts: 1,
        retry_on: Reasons::of(&[Reason::Fail]),
        keep_results: 3_600_000,
        ..Policy::default()
    };
    let cfg = ServerConfig {
        listen: vec![SocketAddr::from(([127, 0, 0, 1], 0))],
        core: CoreConfig {
            handle_prefix: "H:test".to_owned(),
            pid: std::process::id(),
            ..CoreConfig::default()
        },
        policies: Policies {
            rules: vec![Rule {
                pattern: "lc_*".to_owned(),
                policy: Arc::new(policy),
            }],
            ..Policies::default()
        },
        ..ServerConfig::default()
    };
    let server = Server::bind(cfg).await.expect("bind");
    let addr = server.local_addrs()[0];
    tokio::spawn(server.run(std::future::pending()));
    addr
}

async fn dead_handles(addr: SocketAddr, function: Option<&str>) -> Vec<String> {
    let mut admin = AdminClient::connect(addr).await.expect("admin");
    let dead = admin.show_dead(function).await.expect("show dead");
    dead.into_iter().map(|d| d.handle).collect()
}

async fn state_of(admin: &mut AdminClient, handle: &str) -> String {
    admin.show_job(handle).await.expect("show job").state
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_words_gearshift() {
    bounded(lifecycle_words()).await
}

async fn lifecycle_words() {
    let addr = start_with_policy().await;
    let client = Client::builder().server(addr).build().expect("client");
    let submitted = client
        .submit_background("lc_fail", "x")
        .await
        .expect("submit");
    let handle = String::from_utf8_lossy(submitted.handle()).into_owned();
    let _w = RunningWorker::spawn(
        Worker::builder()
            .server(addr)
            .client_id("lc-worker")
            .function("lc_fail", |_job| async { Err::<&str, _>(WorkError::Fail) })
            .build()
            .expect("worker"),
    );
    let h = handle.clone();
    eventually("the job to be dead", || {
        let h = h.clone();
        async move { dead_handles(addr, None).await.contains(&h) }
    })
    .await;

    let mut admin = AdminClient::connect(addr).await.expect("admin");
    let dead = admin.show_dead(Some("lc_fail")).await.expect("show dead");
    assert_eq!(dead.len(), 1, "{dead:?}");
    assert_eq!(
        (dead[0].handle.as_str(), dead[0].function.as_str()),
        (handle.as_str(), "lc_fail")
    );
    assert_eq!(dead[0].attempts, 1);
    assert_eq!(dead[0].error.as_deref(), Some("fail"));
    assert!(dead[0].died_at.ends_with('Z'), "{:?}", dead[0]);
    assert!(admin
        .show_dead(Some("lc_other"))
        .await
        .expect("dead")
        .is_empty());

    let job: JobDetail = admin.show_job(&handle).await.expect("show job");
    assert_eq!(job.handle, handle);
    assert_eq!(job.function, "lc_fail");
    assert_eq!(job.unique, "");
    assert_eq!(job.priority, Priority::Normal);
    assert_eq!((job.state.as_str(), job.attempts), ("dead", 1));
    assert_eq!(job.error.as_deref(), Some("fail"));
    assert_eq!(job.worker.as_deref(), Some("lc-worker@127.0.0.1"));
    assert!(job.started.is_some() && job.finished.is_some(), "{job:?}");
    assert_eq!(job.result_size, 0);
    assert_eq!(job.outcome.as_deref(), Some("dead"));
    let failure = job.last_failure.clone().expect("a last failure");
    assert_eq!(
        (failure.attempt, failure.detail.as_str()),
        (Some(1), "fail")
    );
    assert!(failure.time.is_some_and(|t| t.ends_with('Z')), "{job:?}");
    let events: Vec<&str> = job.history.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(events, ["queued", "started", "failed", "dead"]);
    assert_eq!(job.history[2].detail, "fail");
    assert!(job.history.iter().all(|e| e.time.ends_with('Z')));

    let workers = admin.show_workers().await.expect("show workers");
    let w = workers
        .iter()
        .find(|w| w.client_id == "lc-worker")
        .unwrap_or_else(|| panic!("no lc-worker in {workers:?}"));
    assert_eq!(w.functions, ["lc_fail"]);
    assert_eq!((w.done, w.failed), (0, 1));
    assert!(w.held.is_empty(), "{w:?}");
    assert_eq!(w.address, "127.0.0.1");

    // Paused: retried, the job waits in its queue.
    admin.pause("lc_fail").await.expect("pause");
    assert_eq!(
        admin
            .retry_dead("all", Some("lc_other"))
            .await
            .expect("retry"),
        0
    );
    assert_eq!(admin.retry_dead(&handle, None).await.expect("retry"), 1);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(state_of(&mut admin, &handle).await, "queued");
    admin.resume("lc_fail").await.expect("resume");
    let h = handle.clone();
    eventually("the retried job to die again", || {
        let h = h.clone();
        async move { dead_handles(addr, Some("lc_fail")).await.contains(&h) }
    })
    .await;

    assert_eq!(
        admin
            .drop_dead("all", Some("lc_other"))
            .await
            .expect("drop"),
        0
    );
    assert_eq!(admin.drop_dead(&handle, None).await.expect("drop"), 1);
    assert_eq!(admin.retry_dead("all", None).await.expect("retry"), 0);
    assert!(admin.show_dead(None).await.expect("dead").is_empty());
    assert_eq!(
        admin_kind(admin.show_job(&handle).await),
        AdminErrorKind::UnknownJob
    );
    // Still usable after an ERR reply; arguments must be single words.
    assert!(!admin.version().await.expect("version").is_empty());
    for r in [
        admin.show_job("a b").await.map(drop),
        admin.pause("").await,
        admin.drop_dead("all", Some("x y")).await.map(drop),
    ] {
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_words_gearmand() {
    bounded(async {
        let server = TestServer::start(Kind::Gearmand).await;
        let mut admin = server.admin().await;
        assert_eq!(
            admin_kind(admin.show_job("H:x:1").await),
            AdminErrorKind::UnknownShowArguments
        );
        assert_eq!(
            admin_kind(admin.show_dead(None).await),
            AdminErrorKind::UnknownShowArguments
        );
        assert_eq!(
            admin_kind(admin.show_workers().await),
            AdminErrorKind::UnknownShowArguments
        );
        assert_eq!(
            admin_kind(admin.retry_dead("all", None).await),
            AdminErrorKind::UnknownCommand
        );
        assert_eq!(
            admin_kind(admin.pause("f").await),
            AdminErrorKind::UnknownCommand
        );
        assert!(!admin.version().await.expect("version").is_empty());
    })
    .await
}

/// Sends SUBMIT_JOB_SCHED (`function\0unique\0minute\0hour\0dom\0month\0dow\0data`)
/// on a connection of its own and returns the handle JOB_CREATED names.
async fn submit_sched(addr: SocketAddr, function: &str, unique: &str, when: [&str; 5]) -> String {
    let mut parts: Vec<&[u8]> = vec![function.as_bytes(), unique.as_bytes()];
    parts.extend(when.iter().map(|w| w.as_bytes()));
    parts.push(b"tick");
    let mut out = BytesMut::new();
    encode_parts(Magic::Req, PacketType::SubmitJobSched, &parts, &mut out);
    let mut conn = TcpStream::connect(addr).await.expect("connect");
    conn.write_all(&out).await.expect("send SUBMIT_JOB_SCHED");
    let mut buf = BytesMut::new();
    within("JOB_CREATED", async {
        loop {
            match decode_frame(&mut buf, 1 << 20).expect("a frame") {
                Some(Frame::Packet(p)) if p.kind == PacketType::JobCreated => {
                    return String::from_utf8_lossy(&p.body).into_owned();
                }
                Some(other) => panic!("expected JOB_CREATED, got {other:?}"),
                None => {
                    let n = conn.read_buf(&mut buf).await.expect("read");
                    assert!(n > 0, "the server closed the connection");
                }
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_words_gearshift() {
    bounded(async {
        let server = TestServer::start(Kind::Gearshift).await;
        let nightly =
            submit_sched(server.addr, "sc_nightly", "sc-n", ["0", "3", "", "", "0"]).await;
        // February 30th: accepted, never fires.
        let never = submit_sched(server.addr, "sc_never", "", ["0", "0", "30", "2", ""]).await;
        assert!(nightly.starts_with("H:test:"), "{nightly}");

        let mut admin = server.admin().await;
        let listed = admin.show_schedules().await.expect("show schedules");
        assert_eq!(listed.len(), 2, "{listed:?}");
        let of = |h: &str| -> ScheduleEntry {
            listed
                .iter()
                .find(|s| s.handle == h)
                .cloned()
                .unwrap_or_else(|| panic!("no {h} in {listed:?}"))
        };
        let n = of(&nightly);
        assert_eq!(
            (
                n.function.as_str(),
                n.when.as_str(),
                n.source.as_str(),
                n.unique.as_str()
            ),
            ("sc_nightly", "0 3 * * 0", "client", "sc-n")
        );
        // Day of week 0 is Monday for SUBMIT_JOB_SCHED.
        assert!(
            n.next
                .as_deref()
                .is_some_and(|t| t.ends_with("T03:00:00.000Z")),
            "{n:?}"
        );
        let e = of(&never);
        assert_eq!(
            (e.function.as_str(), e.when.as_str(), e.next.as_deref()),
            ("sc_never", "0 0 30 2 *", None)
        );
        assert_eq!((e.source.as_str(), e.unique.as_str()), ("client", ""));

        admin.drop_schedule(&nightly).await.expect("drop schedule");
        let left: Vec<String> = (admin.show_schedules().await.expect("show schedules"))
            .into_iter()
            .map(|s| s.handle)
            .collect();
        assert_eq!(left, [never.as_str()]);
        assert_eq!(
            admin_kind(admin.drop_schedule(&nightly).await),
            AdminErrorKind::UnknownSchedule
        );
        assert_eq!(
            admin_kind(admin.drop_schedule("H:nosuch:1").await),
            AdminErrorKind::UnknownSchedule
        );
        // Still usable after an ERR reply; the handle must be one word.
        admin.drop_schedule(&never).await.expect("drop schedule");
        assert!(admin
            .show_schedules()
            .await
            .expect("show schedules")
            .is_empty());
        let r = admin.drop_schedule("a b").await;
        assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    })
    .await
}

/// A `[[schedule]]` of the config file is listed as such and refuses `drop schedule`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn config_schedule_refuses_drop() {
    bounded(async {
        let cfg = ServerConfig {
            listen: vec![SocketAddr::from(([127, 0, 0, 1], 0))],
            core: CoreConfig {
                handle_prefix: "H:test".to_owned(),
                ..CoreConfig::default()
            },
            schedules: vec![ScheduleSpec {
                cron: "*/5 * * * *".into(),
                function: bytes::Bytes::from_static(b"report"),
                unique: bytes::Bytes::new(),
                data: bytes::Bytes::from_static(b"x"),
                priority: Priority::Normal,
            }],
            ..ServerConfig::default()
        };
        let server = Server::bind(cfg).await.expect("bind");
        let addr = server.local_addrs()[0];
        tokio::spawn(server.run(std::future::pending()));
        let mut admin = AdminClient::connect(addr).await.expect("admin");
        let listed = admin.show_schedules().await.expect("show schedules");
        assert_eq!(listed.len(), 1, "{listed:?}");
        let s = &listed[0];
        assert_eq!(
            (
                s.function.as_str(),
                s.when.as_str(),
                s.source.as_str(),
                s.unique.as_str()
            ),
            ("report", "*/5 * * * *", "config", "")
        );
        assert!(
            s.next.as_deref().is_some_and(|t| t.ends_with(":00.000Z")),
            "{s:?}"
        );
        assert_eq!(
            admin_kind(admin.drop_schedule(&s.handle).await),
            AdminErrorKind::ScheduleInConfig
        );
        assert_eq!(
            admin.show_schedules().await.expect("show schedules"),
            listed
        );
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedule_words_gearmand() {
    bounded(async {
        let server = TestServer::start(Kind::Gearmand).await;
        let mut admin = server.admin().await;
        assert_eq!(
            admin_kind(admin.show_schedules().await),
            AdminErrorKind::UnknownShowArguments
        );
        assert_eq!(
            admin_kind(admin.drop_schedule("H:x:1").await),
            AdminErrorKind::InvalidArguments
        );
        assert!(!admin.version().await.expect("version").is_empty());
    })
    .await
}
