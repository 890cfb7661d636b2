//! The JSON API's actions over real HTTP: what becomes of a foreground
//! job whose wait times out, cancelling twice, unknown body fields, a
//! function's creation, limits and removal, epoch jobs as schedules, and a
//! job's outcome apart from its last failure.

mod http_common;

use std::sync::Arc;
use std::time::Duration;

use gearshift_client::{WorkError, Worker};
use gearshift_core::policy::{Policies, Policy, Reason, Reasons, Rule};
use http_common::{config, delete, eventually, get, post, reverser, send, start};
use serde_json::{json, Value};
use tokio::sync::oneshot;

/// A worker for `function` that takes `ms` per job, then echoes it.
fn sleeper(gearman: std::net::SocketAddr, function: &str, ms: u64) -> oneshot::Sender<()> {
    let worker = Worker::builder()
        .server(gearman)
        .client_id("sleeper")
        .function(function.to_owned(), move |job| async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            Ok::<_, WorkError>(job.data().to_vec())
        })
        .build()
        .expect("worker");
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(worker.run(async move {
        let _ = rx.await;
    }));
    tx
}

/// The `functions` row named `name`.
async fn function_row(b: &str, name: &str) -> Value {
    let v = get(b, "/api/v1/functions").await.1;
    v["functions"]
        .as_array()
        .and_then(|fs| fs.iter().find(|f| f["name"] == name))
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_foreground_wait_that_times_out_drops_a_queued_job_and_leaves_a_running_one() {
    let s = start(config()).await;
    let b = &s.base;
    // No worker: still queued at the timeout, so dropped, as `gearshift
    // submit --wait-timeout` leaving drops it.
    let (st, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "nobody", "data": "x", "background": false, "wait_timeout": 0.3})),
    )
    .await;
    assert_eq!(st, 504, "{v}");
    assert_eq!(v["job"], "dropped", "{v}");
    let h = v["handle"].as_str().expect("a handle").to_owned();
    assert!(h.starts_with("H:test:"), "{v}");
    assert!(v["error"].as_str().unwrap_or("").contains("dropped"), "{v}");
    assert_eq!(get(b, &format!("/api/v1/jobs/{h}")).await.0, 404);
    assert_eq!(function_row(b, "nobody").await["queued"]["normal"], 0);
    // An HTTP client that hangs up leaves it the same way.
    let gone = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .expect("client")
        .post(format!("{b}/api/v1/jobs"))
        .json(&json!({"function": "nobody", "data": "z", "background": false}))
        .send()
        .await;
    assert!(gone.is_err(), "the request was cut short");
    eventually(|| async { function_row(b, "nobody").await["queued"]["normal"] == 0 }).await;
    assert_eq!(function_row(b, "nobody").await["submitted"], 2);
    // A worker arriving later finds nothing to run.
    let _w = reverser(s.gearman, "nobody", false);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(function_row(b, "nobody").await["submitted"], 2);
    assert_eq!(function_row(b, "nobody").await["completed"], 0);

    // A worker runs it: it goes on, and completes with nobody waiting.
    let _slow = sleeper(s.gearman, "slow", 1_500);
    eventually(|| async { function_row(b, "slow").await["workers"] == 1 }).await;
    let (st, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "slow", "data": "y", "background": false, "wait_timeout": 0.5})),
    )
    .await;
    assert_eq!(st, 504, "{v}");
    assert_eq!(v["job"], "running", "{v}");
    let h = v["handle"].as_str().expect("a handle").to_owned();
    assert!(v["error"].as_str().unwrap_or("").contains("goes on"), "{v}");
    assert_eq!(
        get(b, &format!("/api/v1/jobs/{h}")).await.1["state"],
        "running"
    );
    eventually(|| async { function_row(b, "slow").await["completed"] == 1 }).await;
}

#[tokio::test]
async fn a_second_cancel_of_a_running_job_says_it_still_runs() {
    let s = start(config()).await;
    let b = &s.base;
    let _slow = sleeper(s.gearman, "slow", 1_000);
    let (_, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "slow", "data": "x"})),
    )
    .await;
    let h = v["handle"].as_str().expect("a handle").to_owned();
    eventually(|| async { get(b, &format!("/api/v1/jobs/{h}")).await.1["state"] == "running" })
        .await;
    let cancel = format!("/api/v1/jobs/{h}/cancel");
    assert_eq!(
        post(b, &cancel, None).await,
        (
            200,
            json!({"handle": h, "cancelled": true, "running": true})
        )
    );
    // Marked, its worker still holds it: the second cancel says so.
    let (st, v) = post(b, &cancel, None).await;
    assert_eq!(st, 202, "{v}");
    assert_eq!(
        v,
        json!({"handle": h, "cancelled": true, "running": true,
               "detail": "cancel already requested; the job is still running on its worker, and ends when the worker reports"})
    );
    assert_eq!(
        get(b, &format!("/api/v1/jobs/{h}")).await.1["state"],
        "cancelled"
    );
    // Once the worker reports, it is gone.
    eventually(|| async { post(b, &cancel, None).await.0 == 404 }).await;
}

#[tokio::test]
async fn unknown_body_fields_are_refused_by_name() {
    let s = start(config()).await;
    let b = &s.base;
    // A typo would have made a background job of a foreground one.
    let (st, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "f", "data": "x", "backgound": false})),
    )
    .await;
    assert_eq!(st, 400, "{v}");
    assert!(
        v["error"].as_str().unwrap_or("").contains("`backgound`"),
        "{v}"
    );
    assert_eq!(
        function_row(b, "f").await,
        Value::Null,
        "nothing was queued"
    );
    for (method, path, body, field) in [
        (
            reqwest::Method::POST,
            "/api/v1/dead/retry",
            json!({"funktion": "f"}),
            "`funktion`",
        ),
        (
            reqwest::Method::DELETE,
            "/api/v1/dead",
            json!({"handle": ["H:x:1"]}),
            "`handle`",
        ),
        (
            reqwest::Method::POST,
            "/api/v1/functions/f/maxqueue",
            json!({"limit": 3, "max": 4}),
            "`max`",
        ),
    ] {
        let (st, v) = send(method, b, path, Some(body)).await;
        assert_eq!(st, 400, "{path}: {v}");
        assert!(
            v["error"].as_str().unwrap_or("").contains(field),
            "{path}: {v}"
        );
    }
    // Known fields still pass.
    let (st, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "f", "data": "x", "background": true, "unique": null})),
    )
    .await;
    assert_eq!(st, 202, "{v}");
}

#[tokio::test]
async fn functions_are_created_limited_and_dropped_by_any_name() {
    let s = start(config()).await;
    let b = &s.base;
    // A name with a space, which the admin text protocol cannot carry.
    let f = "/api/v1/functions/my%20func";
    assert_eq!(
        post(b, f, None).await,
        (201, json!({"name": "my func", "created": true}))
    );
    assert_eq!(
        post(b, f, None).await,
        (200, json!({"name": "my func", "created": false}))
    );
    assert_eq!(post(b, "/api/v1/functions/p%09b", None).await.0, 201);
    assert_eq!(
        post(b, "/api/v1/functions/a%2Fb", None).await,
        (201, json!({"name": "a/b", "created": true}))
    );
    let (st, v) = post(b, &format!("{f}/maxqueue"), Some(json!({"limit": 1}))).await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["max_queue"], json!({"high": 1, "normal": 1, "low": 1}));
    assert_eq!(
        post(b, &format!("{f}/maxqueue"), Some(json!({"high": 1})))
            .await
            .0,
        400
    );
    assert_eq!(
        post(
            b,
            "/api/v1/functions/nope/maxqueue",
            Some(json!({"limit": 1}))
        )
        .await
        .0,
        404
    );
    // The limit holds the queue of that very function.
    let job = json!({"function": "my func", "data": "x"});
    let (st, v) = post(b, "/api/v1/jobs", Some(job.clone())).await;
    assert_eq!(st, 202, "{v}");
    let h = v["handle"].as_str().expect("a handle").to_owned();
    let (st, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "my func", "data": "y"})),
    )
    .await;
    assert_ne!(st, 202, "past the limit: {v}");
    assert_eq!(function_row(b, "my func").await["queued"]["normal"], 1);
    assert_eq!(
        post(b, &format!("{f}/pause"), None).await,
        (200, json!({"name": "my func", "paused": true}))
    );
    // Dropped only once empty.
    let (st, v) = delete(b, f).await;
    assert_eq!(st, 409, "{v}");
    assert_eq!(
        post(b, &format!("/api/v1/jobs/{h}/cancel"), None).await.0,
        200
    );
    assert_eq!(
        delete(b, f).await,
        (200, json!({"name": "my func", "dropped": true}))
    );
    assert_eq!(function_row(b, "my func").await, Value::Null);
    assert_eq!(delete(b, f).await.0, 404);
}

#[tokio::test]
async fn epoch_jobs_are_schedules_and_dropping_one_cancels_it() {
    let s = start(config()).await;
    let b = &s.base;
    let at = 4_000_000_000i64;
    let (st, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "report", "data": "x", "unique": "daily", "at": at})),
    )
    .await;
    assert_eq!(st, 202, "{v}");
    let h = v["handle"].as_str().expect("a handle").to_owned();
    let (st, v) = get(b, "/api/v1/schedules").await;
    assert_eq!(st, 200);
    assert_eq!(v["epoch_total"], 1, "{v}");
    assert_eq!(
        v["schedules"][0],
        json!({"id": v["schedules"][0]["id"], "handle": h, "kind": "epoch", "function": "report",
               "when": "once", "unique": "daily", "priority": "normal",
               "next_ms": at * 1000, "source": "client"}),
    );
    let path = format!("/api/v1/schedules/{h}");
    assert_eq!(
        delete(b, &path).await,
        (200, json!({"handle": h, "dropped": true, "kind": "epoch"}))
    );
    assert_eq!(get(b, &format!("/api/v1/jobs/{h}")).await.0, 404);
    assert_eq!(
        get(b, "/api/v1/schedules").await.1,
        json!({"schedules": [], "epoch_total": 0})
    );
    assert_eq!(delete(b, &path).await.0, 404);
}

#[tokio::test]
async fn a_job_that_completed_on_a_later_attempt_has_an_outcome_and_its_last_failure() {
    let mut cfg = config();
    cfg.policies = Policies {
        rules: vec![Rule {
            pattern: "flaky".into(),
            policy: Arc::new(Policy {
                max_attempts: 3,
                retry_on: Reasons::of(&[Reason::Fail]),
                initial_delay: 10,
                jitter: false,
                keep_results: 60_000,
                ..Policy::default()
            }),
        }],
        ..Policies::default()
    };
    let s = start(cfg).await;
    let b = &s.base;
    let _w = reverser(s.gearman, "flaky", true);
    let (_, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "flaky", "data": "abc"})),
    )
    .await;
    let h = v["handle"].as_str().expect("a handle").to_owned();
    eventually(|| async { get(b, &format!("/api/v1/jobs/{h}")).await.1["state"] == "completed" })
        .await;
    let v = get(b, &format!("/api/v1/jobs/{h}")).await.1;
    assert_eq!(v["outcome"], "completed", "{v}");
    assert_eq!(v["attempts"], 2, "{v}");
    let f = &v["last_failure"];
    assert_eq!(
        (&f["attempt"], &f["reason"], &f["error"]),
        (&json!(1), &json!("fail"), &json!("fail")),
        "{v}"
    );
    assert!(f["at_ms"].is_u64(), "{v}");
    // `error` keeps its meaning (the last failure's text).
    assert_eq!(v["error"], "fail");
}
