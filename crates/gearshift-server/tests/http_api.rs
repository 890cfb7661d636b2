//! The JSON API over real HTTP: every route's reads and errors,
//! submissions and actions, the token rules, gearmand's HTTP protocol and
//! the overview's sampling. The newer actions' cases are in http_actions.rs.

mod http_common;

use std::time::Duration;

use http_common::{client, config, eventually, get, post, reverser, send, start};
use serde_json::{json, Value};

#[tokio::test]
async fn reads_and_their_errors() {
    let s = start(config()).await;
    let b = &s.base;
    let (st, v) = get(b, "/api/v1/overview").await;
    assert_eq!(st, 200);
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["totals"]["queued"], 0);
    assert!(v["connections"]["client"].is_u64());
    assert_eq!(
        v["store"],
        json!({"failures": 0, "last_failure_ms": null, "refused": 0})
    );
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
