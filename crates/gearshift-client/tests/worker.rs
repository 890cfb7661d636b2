//! Worker scenarios, each run against in-process Gearshift and gearmand
//! 1.1.20: a worker killed mid-job, a graceful stop (also when the stop
//! comes in the same instant as a free job slot), and reconnecting after
//! the server restarts.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{eventually, within, worker_for, Kind, RunningWorker, TestServer};
use gearshift_client::WorkError;
use tokio::sync::{mpsc, watch, Notify};

both!(
    killed_mid_job,
    graceful_stop,
    stop_requested_as_job_starts,
    reconnect_after_restart,
    can_do_timeout
);

/// The first worker dies while its handler runs; the server requeues the
/// job, a second worker finishes it, and the client gets that result.
async fn killed_mid_job(kind: Kind) {
    let server = TestServer::start(kind).await;
    let (started_tx, mut started) = mpsc::unbounded_channel::<()>();
    let doomed = RunningWorker::spawn(
        worker_for(&[&server])
            .function("fragile", move |job| {
                let started = started_tx.clone();
                async move {
                    job.send_status(1, 10).await?;
                    let _ = started.send(());
                    std::future::pending::<()>().await;
                    Ok::<_, WorkError>("never")
                }
            })
            .build()
            .expect("worker"),
    );
    let client = server.client();
    let caller = {
        let client = client.clone();
        tokio::spawn(async move { client.run("fragile", "payload").await })
    };
    within("the first worker to start the job", started.recv())
        .await
        .expect("started");
    doomed.abort().await;
    let _rescuer = RunningWorker::spawn(
        worker_for(&[&server])
            .function("fragile", |job| async move {
                Ok::<_, WorkError>(format!("rescued {}", String::from_utf8_lossy(job.data())))
            })
            .build()
            .expect("worker"),
    );
    let out = within("the rescued result", caller)
        .await
        .expect("caller task")
        .expect("run");
    assert_eq!(out, "rescued payload");
}

/// After a stop is requested the worker finishes its running job (the
/// client gets the result) and takes no new one.
async fn graceful_stop(kind: Kind) {
    let server = TestServer::start(kind).await;
    let release = Arc::new(Notify::new());
    let runs = Arc::new(AtomicUsize::new(0));
    let (started_tx, mut started) = mpsc::unbounded_channel::<()>();
    let (go, r) = (release.clone(), runs.clone());
    let mut worker = RunningWorker::spawn(
        worker_for(&[&server])
            .concurrency(2)
            .function("gs", move |job| {
                let (go, r, started) = (go.clone(), r.clone(), started_tx.clone());
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    let _ = started.send(());
                    if job.data() == "slow" {
                        go.notified().await;
                    }
                    Ok::<_, WorkError>(format!("did {}", String::from_utf8_lossy(job.data())))
                }
            })
            .build()
            .expect("worker"),
    );
    let client = server.client();
    let slow = {
        let client = client.clone();
        tokio::spawn(async move { client.run("gs", "slow").await })
    };
    within("the slow job to start", started.recv())
        .await
        .expect("started");
    // New work comes once the worker has taken the stop (a fixed wait could
    // be too short on a loaded machine, and the job would be taken).
    worker.request_stop_and_wait_taken().await;
    let queued = client.submit_background("gs", "new").await.expect("submit");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let st = client.status(&queued).await.expect("status");
    assert!(
        st.known && !st.running,
        "a stopping worker took a job: {st:?}"
    );
    assert!(!worker.is_finished(), "the worker left with a job running");
    release.notify_one();
    let out = within("the slow result", slow)
        .await
        .expect("caller task")
        .expect("run");
    assert_eq!(out, "did slow");
    worker.join().await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let st = client.status(&queued).await.expect("status");
    assert!(st.known && !st.running, "{st:?}");
}

/// Rounds of [`one_job_per_stop`]: without the fixes, the races it catches
/// went the wrong way within the first few rounds.
const STOP_RACE_ROUNDS: usize = 40;

#[tokio::test(flavor = "current_thread")]
async fn stop_wins_over_free_slot_gearshift() {
    common::bounded(stop_wins_over_free_slot(Kind::Gearshift)).await
}

#[tokio::test(flavor = "current_thread")]
async fn stop_wins_over_free_slot_gearmand() {
    common::bounded(stop_wins_over_free_slot(Kind::Gearmand)).await
}

/// A stop that comes in the same instant as a free job slot wins. The
/// handler requests the stop and returns in the same poll; on a
/// current-thread runtime the session then wakes to the stop and the freed
/// permit at once.
async fn stop_wins_over_free_slot(kind: Kind) {
    one_job_per_stop(kind, false).await;
}

/// A stop requested as a job starts (what `gearshift work --count` does)
/// holds once that job ends. Multi-thread runtime: the handler finishes on
/// a worker thread, possibly while the session is still in the poll that
/// started it, or before the shutdown future is polled again.
async fn stop_requested_as_job_starts(kind: Kind) {
    one_job_per_stop(kind, true).await;
}

/// Round after round, a fresh worker with one job slot runs one job whose
/// handler requests the worker's stop (as it is called, or as its future
/// returns); the queue holds a job more than there are rounds. Every worker
/// must take exactly one job: no GRAB after the stop, the others stay
/// queued. `run` is awaited in the test's own task (as `gearshift work`
/// does in `block_on`), not spawned.
async fn one_job_per_stop(kind: Kind, stop_as_called: bool) {
    let server = TestServer::start(kind).await;
    let client = server.client();
    let jobs = STOP_RACE_ROUNDS + 1;
    for i in 0..jobs {
        client
            .submit_background("last", i.to_string())
            .await
            .expect("submit");
    }
    let runs = Arc::new(AtomicUsize::new(0));
    for round in 0..STOP_RACE_ROUNDS {
        let stop = watch::Sender::new(false);
        let (s, r) = (stop.clone(), runs.clone());
        let worker = worker_for(&[&server])
            .concurrency(1)
            .function("last", move |_job| {
                r.fetch_add(1, Ordering::SeqCst);
                if stop_as_called {
                    s.send_replace(true);
                }
                let s = s.clone();
                async move {
                    s.send_replace(true);
                    Ok::<_, WorkError>("done")
                }
            })
            .build()
            .expect("worker");
        let mut stopped = stop.subscribe();
        let run = worker.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        });
        within("the worker to stop", run).await;
        assert_eq!(
            runs.load(Ordering::SeqCst),
            round + 1,
            "round {round}: the worker took another job after its stop"
        );
        let left = u64::try_from(jobs - round - 1).expect("small");
        let addr = server.addr;
        eventually("the job done, the others still queued", || async move {
            let Ok(mut admin) = gearshift_client::AdminClient::connect(addr).await else {
                return false;
            };
            let status = admin.status().await.expect("status");
            let ours = status.iter().find(|s| s.function == "last");
            ours.is_some_and(|s| s.total == left && s.running == 0 && s.workers == 0)
        })
        .await;
        let shown = server.admin().await.show_jobs().await.expect("show jobs");
        assert_eq!(shown.len() as u64, left, "round {round}: {shown:?}");
        assert!(shown.iter().all(|j| j.queued), "round {round}: {shown:?}");
    }
}

/// The server restarts on the same port; the worker reconnects with backoff
/// and serves again, and the client reconnects too.
async fn reconnect_after_restart(kind: Kind) {
    let mut server = TestServer::start(kind).await;
    let _w = RunningWorker::spawn(
        worker_for(&[&server])
            .client_id("phoenix")
            .function(
                "up",
                |job| async move { Ok::<_, WorkError>(job.data().clone()) },
            )
            .build()
            .expect("worker"),
    );
    let client = server.client();
    assert_eq!(client.run("up", "before").await.expect("run"), "before");
    server.restart().await;
    let addr = server.addr;
    eventually("the worker to register again", || async move {
        let Ok(mut admin) = gearshift_client::AdminClient::connect(addr).await else {
            return false;
        };
        let workers = admin.workers().await.expect("workers");
        workers
            .iter()
            .any(|w| w.client_id == "phoenix" && w.functions == ["up"])
    })
    .await;
    assert_eq!(client.run("up", "after").await.expect("run"), "after");
}

/// A function registered with CAN_DO_TIMEOUT: the server takes a job back
/// from a handler that overruns the limit and another worker finishes it.
/// gearmand runs with `-t 1` here: single-threaded (`-t 0`) it never fires
/// the timer.
async fn can_do_timeout(kind: Kind) {
    let server = TestServer::start_threaded(kind, 1).await;
    overrun_then_rescue(&server, 1).await;
}

/// The same with a worker running two jobs at once, so it sends PRE_SLEEP
/// while the overrunning job is held. Gearshift times each assignment; gearmand
/// 1.1.20 keeps one timer per connection and PRE_SLEEP deletes it, so this
/// only holds on Gearshift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn can_do_timeout_while_sleeping_gearshift() {
    common::bounded(async {
        let server = TestServer::start(Kind::Gearshift).await;
        overrun_then_rescue(&server, 2).await;
    })
    .await
}

async fn overrun_then_rescue(server: &TestServer, concurrency: usize) {
    let (started_tx, mut started) = mpsc::unbounded_channel::<()>();
    let _stuck = RunningWorker::spawn(
        worker_for(&[server])
            .concurrency(concurrency)
            .function_with_timeout("overrun", Duration::from_millis(1000), move |job| {
                let started = started_tx.clone();
                async move {
                    if job.data() == "stuck" {
                        let _ = started.send(());
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, WorkError>("quick")
                }
            })
            .build()
            .expect("worker"),
    );
    let client = server.client();
    let caller = {
        let client = client.clone();
        tokio::spawn(async move { client.run("overrun", "stuck").await })
    };
    within("the first attempt", started.recv())
        .await
        .expect("started");
    if concurrency > 1 {
        // A free slot: the stuck worker runs this, then GRABs, gets NO_JOB
        // and sends PRE_SLEEP while it still holds the stuck job.
        assert_eq!(client.run("overrun", "other").await.expect("run"), "quick");
    }
    let _rescuer = RunningWorker::spawn(
        worker_for(&[server])
            .function("overrun", |_job| async { Ok::<_, WorkError>("second try") })
            .build()
            .expect("worker"),
    );
    let out = within("the requeued job's result", caller)
        .await
        .expect("caller task")
        .expect("run");
    assert_eq!(out, "second try");
}
