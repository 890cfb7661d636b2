//! The JSON API over real HTTP: every route, its errors, submissions
//! (background, foreground, timeouts and what becomes of the job), actions
//! (cancel twice, a function's creation, limits and removal, dropping a
//! schedule or an epoch job), unknown body fields, and the token rules.

mod http_common;

use std::sync::Arc;
use std::time::Duration;

use gearshift_client::{WorkError, Worker};
use gearshift_core::policy::{Policies, Policy, Reason, Reasons, Rule};
use http_common::{client, config, eventually, reverser, start};
use serde_json::{json, Value};
use tokio::sync::oneshot;

async fn get(base: &str, path: &str) -> (u16, Value) {
    let r = client()
        .get(format!("{base}{path}"))
        .send()
        .await
        .expect("get");
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn send(
    method: reqwest::Method,
    base: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = client().request(method, format!("{base}{path}"));
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.expect("send");
    let s = r.status().as_u16();
    (s, r.json().await.unwrap_or(Value::Null))
}

async fn post(base: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    send(reqwest::Method::POST, base, path, body).await
}

#[tokio::test]
async fn reads_and_their_errors() {
    let s = start(config()).await;
    let b = &s.base;
    let (st, v) = get(b, "/api/v1/overview").await;
    assert_eq!(st, 200);
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["totals"]["queued"], 0);
    assert!(v["connections"]["client"].is_u64());
    assert!(v["series"].is_array());
    assert_eq!(
        get(b, "/api/v1/functions").await,
        (200, json!({"functions": []}))
    );
    assert_eq!(
        get(b, "/api/v1/workers").await,
        (200, json!({"workers": []}))
    );
    assert_eq!(
        get(b, "/api/v1/schedules").await,
        (200, json!({"schedules": [], "epoch_total": 0}))
    );
    assert_eq!(
        get(b, "/api/v1/dead").await,
        (200, json!({"dead": [], "next_cursor": null}))
    );
    assert_eq!(
        get(b, "/api/v1/jobs").await,
        (200, json!({"jobs": [], "next_cursor": null}))
    );
    for bad in [
        "/api/v1/jobs?state=bogus",
        "/api/v1/jobs?cursor=x",
        "/api/v1/jobs?limit=0",
        "/api/v1/dead?limit=-1",
    ] {
        let (st, v) = get(b, bad).await;
        assert_eq!(st, 400, "{bad}");
        assert!(v["error"].is_string());
    }
    let (st, v) = get(b, "/api/v1/jobs/H:test:99").await;
    assert_eq!((st, v["error"].is_string()), (404, true));
    let (st, v) = get(b, "/api/v1/nope").await;
    assert_eq!((st, v["error"].is_string()), (404, true));
    let (st, v) = send(reqwest::Method::DELETE, b, "/api/v1/overview", None).await;
    assert_eq!((st, v["error"].is_string()), (405, true));
    // The dashboard is served.
    let r = client().get(format!("{b}/")).send().await.expect("index");
    assert_eq!(r.status().as_u16(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .unwrap_or("")
        .starts_with("text/html"));
    for (path, kind) in [
        ("/assets/app.js", "text/javascript"),
        ("/assets/app.css", "text/css"),
    ] {
        let r = client()
            .get(format!("{b}{path}"))
            .send()
            .await
            .expect("asset");
        assert_eq!(r.status().as_u16(), 200);
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap_or("")
            .starts_with(kind));
        assert!(r.headers().contains_key("cache-control"));
    }
}

#[tokio::test]
async fn submissions_and_actions() {
    let mut cfg = config();
    cfg.max_packet_size = 4096;
    let s = start(cfg).await;
    let b = &s.base;
    // Bad bodies.
    assert_eq!(
        post(b, "/api/v1/jobs", Some(json!({"data": "x"}))).await.0,
        400
    );
    assert_eq!(
        post(
            b,
            "/api/v1/jobs",
            Some(json!({"function": "f", "priority": "urgent"}))
        )
        .await
        .0,
        400
    );
    assert_eq!(
        post(
            b,
            "/api/v1/jobs",
            Some(json!({"function": "f", "data_base64": "!!"}))
        )
        .await
        .0,
        400
    );
    assert_eq!(
        post(
            b,
            "/api/v1/jobs",
            Some(json!({"function": "f", "at": "tomorrow"}))
        )
        .await
        .0,
        400
    );
    let r = client()
        .post(format!("{b}/api/v1/jobs"))
        .body("{not json")
        .send()
        .await
        .expect("post");
    assert_eq!(r.status().as_u16(), 400);
    let big = json!({"function": "f", "data": "x".repeat(10_000)});
    let (st, v) = post(b, "/api/v1/jobs", Some(big)).await;
    assert_eq!((st, v["error"].is_string()), (413, true));

    // Background submissions, listed and shown.
    let (st, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "rev", "data": "hello", "unique": "u1", "priority": "high"})),
    )
    .await;
    assert_eq!(st, 202, "{v}");
    let h1 = v["handle"].as_str().expect("handle").to_owned();
    let (st, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "rev", "data_base64": "AAE="})),
    )
    .await;
    assert_eq!(st, 202);
    let h2 = v["handle"].as_str().expect("handle").to_owned();
    let (st, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "later", "at": "2999-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!(st, 202, "{v}");
    let (_, v) = get(b, "/api/v1/jobs?function=rev&state=queued").await;
    let handles: Vec<&str> = v["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .filter_map(|j| j["handle"].as_str())
        .collect();
    assert_eq!(handles, [h1.as_str(), h2.as_str()]);
    assert_eq!(v["jobs"][0]["priority"], "high");
    assert_eq!(v["jobs"][0]["unique"], "u1");
    assert_eq!(v["jobs"][0]["size"], 5);
    let (_, v) = get(b, "/api/v1/jobs?state=scheduled").await;
    assert_eq!(v["jobs"][0]["function"], "later");
    // Paging: a page of one has a cursor to the next.
    let (_, p1) = get(b, "/api/v1/jobs?function=rev&limit=1").await;
    assert_eq!(p1["jobs"].as_array().map(Vec::len), Some(1));
    let c = p1["next_cursor"].as_str().expect("cursor").to_owned();
    let (_, p2) = get(b, &format!("/api/v1/jobs?function=rev&limit=1&cursor={c}")).await;
    assert_eq!(p2["jobs"][0]["handle"], h2.as_str());
    let (st, v) = get(b, &format!("/api/v1/jobs/{h1}")).await;
    assert_eq!(st, 200);
    assert_eq!(v["state"], "queued");
    assert!(v["history"].is_array());
    let (_, v) = get(b, "/api/v1/functions").await;
    assert_eq!(v["functions"][0]["name"], "later");
    assert_eq!(
        v["functions"][1]["queued"],
        json!({"high": 1, "normal": 1, "low": 0})
    );
    assert_eq!(v["functions"][1]["policy"], Value::Null);

    // Pause and resume.
    assert_eq!(
        post(b, "/api/v1/functions/rev/pause", None).await,
        (200, json!({"name": "rev", "paused": true}))
    );
    let (_, v) = get(b, "/api/v1/functions").await;
    assert_eq!(v["functions"][1]["paused"], true);
    assert_eq!(
        post(b, "/api/v1/functions/rev/resume", None).await,
        (200, json!({"name": "rev", "paused": false}))
    );

    // Cancel: a queued job goes; an unknown one is 404.
    assert_eq!(
        post(b, &format!("/api/v1/jobs/{h2}/cancel"), None).await,
        (
            200,
            json!({"handle": h2, "cancelled": true, "running": false})
        )
    );
    assert_eq!(post(b, "/api/v1/jobs/H:test:999/cancel", None).await.0, 404);

    // Dead-set actions on nothing.
    assert_eq!(post(b, "/api/v1/dead/H:test:999/retry", None).await.0, 404);
    assert_eq!(
        send(reqwest::Method::DELETE, b, "/api/v1/dead/H:test:999", None)
            .await
            .0,
        404
    );
    assert_eq!(
        post(b, "/api/v1/dead/retry", Some(json!({"function": "rev"}))).await,
        (200, json!({"retried": 0}))
    );
    assert_eq!(
        post(b, "/api/v1/dead/retry", Some(json!({"handles": 3})))
            .await
            .0,
        400
    );
    assert_eq!(
        send(
            reqwest::Method::DELETE,
            b,
            "/api/v1/dead?function=rev",
            None
        )
        .await,
        (200, json!({"dropped": 0}))
    );

    // Foreground: no worker yet, so it times out; then a worker answers.
    let (st, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "rev2", "data": "x", "background": false, "wait_timeout": 0.3})),
    )
    .await;
    assert_eq!((st, v["error"].is_string()), (504, true));
    let _w = reverser(s.gearman, "rev", false);
    let (st, v) = post(
        b,
        "/api/v1/jobs",
        Some(json!({"function": "rev", "data": "abc", "background": false})),
    )
    .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["status"], "completed");
    assert_eq!(v["result"], "cba");
    assert_eq!(v["result_base64"], "Y2Jh");
    // The worker drained h1; its workers show.
    eventually(|| async {
        get(b, "/api/v1/workers").await.1["workers"][0]["jobs_done"].as_u64() >= Some(2)
    })
    .await;
    let (_, v) = get(b, "/api/v1/workers").await;
    assert_eq!(v["workers"][0]["client_id"], "w1");
    assert_eq!(v["workers"][0]["functions"], json!(["rev"]));
}

#[tokio::test]
async fn a_token_guards_changes() {
    let dir = config();
    let mut cfg = dir;
    if let Some(h) = cfg.http.as_mut() {
        h.token = Some("s3cret".into());
    }
    let s = start(cfg).await;
    let b = &s.base;
    let body = json!({"function": "f", "data": "x"});
    let r = client()
        .post(format!("{b}/api/v1/jobs"))
        .json(&body)
        .send()
        .await
        .expect("post");
    assert_eq!(r.status().as_u16(), 401);
    let v: Value = r.json().await.expect("json");
    assert!(v["error"].is_string());
    let r = client()
        .post(format!("{b}/api/v1/jobs"))
        .bearer_auth("wrong")
        .json(&body)
        .send()
        .await
        .expect("post");
    assert_eq!(r.status().as_u16(), 401);
    let r = client()
        .post(format!("{b}/api/v1/jobs"))
        .bearer_auth("s3cret")
        .json(&body)
        .send()
        .await
        .expect("post");
    assert_eq!(r.status().as_u16(), 202);
    // gearmand's protocol is a change too.
    let r = client()
        .post(format!("{b}/f"))
        .body("x")
        .send()
        .await
        .expect("post");
    assert_eq!(r.status().as_u16(), 401);
    // Reads from loopback need no token.
    assert_eq!(get(b, "/api/v1/overview").await.0, 200);
    assert_eq!(
        client()
            .get(format!("{b}/metrics"))
            .send()
            .await
            .expect("m")
            .status()
            .as_u16(),
        200
    );
}

#[tokio::test]
async fn gearmand_http_protocol() {
    let s = start(config()).await;
    let b = &s.base;
    let _w = reverser(s.gearman, "reverse", false);
    let r = client()
        .post(format!("{b}/reverse"))
        .body("hello")
        .send()
        .await
        .expect("post");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["x-gearman-command"], "WORK_COMPLETE");
    assert!(r.headers()["x-gearman-job-handle"]
        .to_str()
        .unwrap_or("")
        .starts_with("H:test:"));
    assert_eq!(r.text().await.expect("body"), "olleh");
    let r = client()
        .post(format!("{b}/reverse"))
        .header("X-Gearman-Background", "true")
        .header("X-Gearman-Unique", "u1")
        .header("X-Gearman-Priority", "high")
        .body("hello")
        .send()
        .await
        .expect("post");
    assert_eq!(r.status().as_u16(), 200);
    assert_eq!(r.headers()["x-gearman-command"], "JOB_CREATED");
    let handle = r.headers()["x-gearman-job-handle"]
        .to_str()
        .unwrap_or("")
        .to_owned();
    assert!(handle.starts_with("H:test:"));
    assert_eq!(r.text().await.expect("body"), "");
    // The background job runs.
    eventually(|| async {
        let v = get(b, "/api/v1/functions").await.1;
        v["functions"][0]["completed"].as_u64() == Some(2)
    })
    .await;
    // A GET (a browser's /favicon.ico, a prefetch) never submits a job.
    for path in ["/favicon.ico", "/reverse"] {
        let r = client()
            .get(format!("{b}{path}"))
            .send()
            .await
            .expect("get");
        assert_eq!(r.status().as_u16(), 404, "{path}");
    }
    let v = get(b, "/api/v1/functions").await.1;
    assert_eq!(v["functions"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["functions"][0]["submitted"].as_u64(), Some(2), "{v}");
}

#[tokio::test]
async fn the_overview_samples_once_a_second() {
    let s = start(config()).await;
    let b = &s.base;
    for _ in 0..3 {
        post(
            b,
            "/api/v1/jobs",
            Some(json!({"function": "f", "data": "x"})),
        )
        .await;
    }
    eventually(|| async {
        let v = get(b, "/api/v1/overview").await.1;
        let total: u64 = v["series"].as_array().map_or(0, |a| {
            a.iter().filter_map(|p| p["submitted"].as_u64()).sum()
        });
        total == 3 && v["series"][0]["at_ms"].is_u64()
    })
    .await;
    let v = get(b, "/api/v1/overview").await.1;
    assert_eq!(v["totals"]["queued"], 3);
    assert_eq!(v["totals"]["submitted"], 3);
    let _ = Duration::ZERO;
}

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

async fn delete(base: &str, path: &str) -> (u16, Value) {
    send(reqwest::Method::DELETE, base, path, None).await
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
