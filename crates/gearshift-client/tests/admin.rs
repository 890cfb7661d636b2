//! The admin client against in-process Gearshift and gearmand 1.1.20:
//! `status`, `prioritystatus`, `workers` and `show jobs` parse into types;
//! the other commands answer; `ERR …` replies become typed errors.

mod common;

use common::{eventually, worker_for, Kind, RunningWorker, TestServer};
use gearshift_client::{AdminErrorKind, Error, Priority, WorkError};

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
