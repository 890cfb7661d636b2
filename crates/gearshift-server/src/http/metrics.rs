//! `GET /metrics`: the Prometheus text exposition format 0.0.4, written by
//! hand from the core's function views and totals and the store's commit
//! latencies; also gearman-exporter's series, so its dashboards work.

use std::fmt::Write;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use gearshift_core::function::{Histogram, BUCKETS_MS, REASONS};
use gearshift_core::view::{FunctionView, Totals};

use super::ApiError;
use crate::histogram::COMMIT_BUCKETS;
use crate::store_task::StoreFigures;

/// The exposition's media type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value escaped as the format wants (backslash, quote, newline).
pub fn escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Per-function series: `name{function="f"} value`.
fn per_function(
    out: &mut String,
    fs: &[(String, &FunctionView)],
    name: &str,
    kind: &str,
    help: &str,
    value: impl Fn(&FunctionView) -> u64,
) {
    head(out, name, kind, help);
    for (n, f) in fs {
        let _ = writeln!(out, "{name}{{function=\"{n}\"}} {}", value(f));
    }
}

fn job_histogram(
    out: &mut String,
    fs: &[(String, &FunctionView)],
    name: &str,
    help: &str,
    pick: impl Fn(&FunctionView) -> &Histogram,
) {
    head(out, name, "histogram", help);
    for (n, f) in fs {
        let h = pick(f);
        let mut acc = 0;
        for (bound, count) in BUCKETS_MS.iter().zip(h.buckets) {
            acc += count;
            let le = *bound as f64 / 1000.0;
            let _ = writeln!(out, "{name}_bucket{{function=\"{n}\",le=\"{le}\"}} {acc}");
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{function=\"{n}\",le=\"+Inf\"}} {}",
            h.count
        );
        let sum = h.sum_ms as f64 / 1000.0;
        let _ = writeln!(out, "{name}_sum{{function=\"{n}\"}} {sum}");
        let _ = writeln!(out, "{name}_count{{function=\"{n}\"}} {}", h.count);
    }
}

/// The whole exposition.
pub fn render(
    fs: &[FunctionView],
    t: &Totals,
    store: &StoreFigures,
    conns: crate::counters::Counts,
) -> String {
    let mut out = String::with_capacity(4096 + fs.len() * 2048);
    let named: Vec<(String, &FunctionView)> = fs
        .iter()
        .map(|f| (escape(&String::from_utf8_lossy(&f.name)), f))
        .collect();
    let fs = &named[..];
    head(
        &mut out,
        "gearshift_jobs_queued",
        "gauge",
        "Jobs waiting for a worker, by priority.",
    );
    for (n, f) in fs {
        for (p, q) in ["high", "normal", "low"].iter().zip(f.queued) {
            let _ = writeln!(
                out,
                "gearshift_jobs_queued{{function=\"{n}\",priority=\"{p}\"}} {q}"
            );
        }
    }
    per_function(
        &mut out,
        fs,
        "gearshift_jobs_scheduled",
        "gauge",
        "Epoch jobs not yet due and retries waiting out their delay.",
        |f| u64::from(f.scheduled),
    );
    per_function(
        &mut out,
        fs,
        "gearshift_jobs_running",
        "gauge",
        "Jobs held by workers.",
        |f| u64::from(f.running),
    );
    per_function(
        &mut out,
        fs,
        "gearshift_workers",
        "gauge",
        "Connections that registered the function.",
        |f| u64::from(f.workers),
    );
    per_function(
        &mut out,
        fs,
        "gearshift_jobs_submitted_total",
        "counter",
        "Jobs submitted since start.",
        |f| f.stats.submitted,
    );
    per_function(
        &mut out,
        fs,
        "gearshift_jobs_completed_total",
        "counter",
        "Runs that ended with WORK_COMPLETE.",
        |f| f.stats.completed,
    );
    head(
        &mut out,
        "gearshift_jobs_failed_total",
        "counter",
        "Runs that ended without a result, by reason.",
    );
    for (n, f) in fs {
        for (r, c) in REASONS.iter().zip(f.stats.failed) {
            let _ = writeln!(
                out,
                "gearshift_jobs_failed_total{{function=\"{n}\",reason=\"{r}\"}} {c}"
            );
        }
    }
    per_function(
        &mut out,
        fs,
        "gearshift_jobs_retried_total",
        "counter",
        "Retries scheduled and requeues.",
        |f| f.stats.retried,
    );
    per_function(
        &mut out,
        fs,
        "gearshift_jobs_dead",
        "gauge",
        "Jobs in the dead set.",
        |f| f.dead,
    );
    job_histogram(
        &mut out,
        fs,
        "gearshift_job_wait_seconds",
        "Time from queued (or due) to started.",
        |f| &f.stats.wait,
    );
    job_histogram(
        &mut out,
        fs,
        "gearshift_job_run_seconds",
        "Time from started to ended.",
        |f| &f.stats.run,
    );
    head(
        &mut out,
        "gearshift_connections",
        "gauge",
        "Open connections by role.",
    );
    for (role, n) in [
        ("client", t.client_conns),
        ("worker", t.worker_conns),
        ("admin", t.admin_conns),
    ] {
        let _ = writeln!(out, "gearshift_connections{{role=\"{role}\"}} {n}");
    }
    head(
        &mut out,
        "gearshift_job_bytes",
        "gauge",
        "Bytes of job data held (unique ids, payloads, reducers).",
    );
    let _ = writeln!(out, "gearshift_job_bytes {}", t.job_bytes);
    head(
        &mut out,
        "gearshift_submissions_refused_total",
        "counter",
        "Submissions refused: a full queue, or a store that could not write them.",
    );
    for (reason, n) in [
        ("maxqueue", t.refused_maxqueue),
        ("queue_memory", t.refused_memory),
        ("store", t.refused_store),
    ] {
        let _ = writeln!(
            out,
            "gearshift_submissions_refused_total{{reason=\"{reason}\"}} {n}"
        );
    }
    head(
        &mut out,
        "gearshift_connections_idle_closed_total",
        "counter",
        "Connections closed for sending nothing within --idle-timeout.",
    );
    let crate::counters::Counts {
        idle_closed,
        output_closed,
        tls_failed,
        links_opened,
        linked_conns,
        core_busy_nanos,
        core_rounds,
    } = conns;
    let _ = writeln!(out, "gearshift_connections_idle_closed_total {idle_closed}");
    head(
        &mut out,
        "gearshift_connections_output_closed_total",
        "counter",
        "Connections closed because their peer did not read what it was sent (--max-output).",
    );
    let _ = writeln!(
        out,
        "gearshift_connections_output_closed_total {output_closed}"
    );
    head(
        &mut out,
        "gearshift_tls_handshake_failures_total",
        "counter",
        "TLS connections closed because their handshake failed or timed out.",
    );
    let _ = writeln!(out, "gearshift_tls_handshake_failures_total {tls_failed}");
    head(
        &mut out,
        "gearshift_cluster_links_opened_total",
        "counter",
        "Links other cluster nodes opened to this one to carry their clients' connections.",
    );
    let _ = writeln!(out, "gearshift_cluster_links_opened_total {links_opened}");
    head(
        &mut out,
        "gearshift_cluster_linked_connections_total",
        "counter",
        "Client connections other cluster nodes carried to this one over links.",
    );
    let _ = writeln!(
        out,
        "gearshift_cluster_linked_connections_total {linked_conns}"
    );
    head(
        &mut out,
        "gearshift_core_busy_seconds_total",
        "counter",
        "Time the hub shared by the I/O threads was held: the serial part of the work (0 with one I/O thread).",
    );
    let _ = writeln!(
        out,
        "gearshift_core_busy_seconds_total {}",
        core_busy_nanos as f64 / 1e9
    );
    head(
        &mut out,
        "gearshift_core_rounds_total",
        "counter",
        "Rounds run while holding the shared hub.",
    );
    let _ = writeln!(out, "gearshift_core_rounds_total {core_rounds}");
    head(
        &mut out,
        "gearshift_access_denied_total",
        "counter",
        "Requests the [access] rules refused, by the right they needed.",
    );
    for (right, n) in ["submit", "work", "admin_read", "admin_change"]
        .iter()
        .zip(t.denied)
    {
        let _ = writeln!(
            out,
            "gearshift_access_denied_total{{right=\"{right}\"}} {n}"
        );
    }
    let name = "gearshift_store_commit_seconds";
    head(
        &mut out,
        name,
        "histogram",
        "Latency of the store's group commits.",
    );
    let commits = &store.commits;
    for (bound, c) in COMMIT_BUCKETS.iter().zip(commits.cumulative) {
        let _ = writeln!(out, "{name}_bucket{{le=\"{bound}\"}} {c}");
    }
    let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", commits.count);
    let _ = writeln!(out, "{name}_sum {}", commits.sum_seconds);
    let _ = writeln!(out, "{name}_count {}", commits.count);
    head(
        &mut out,
        "gearshift_store_failures_total",
        "counter",
        "Store flushes, syncs and housekeeping that failed.",
    );
    let _ = writeln!(out, "gearshift_store_failures_total {}", store.failures);
    let version = escape(env!("CARGO_PKG_VERSION"));
    head(
        &mut out,
        "gearshift_build_info",
        "gauge",
        "The running version (always 1).",
    );
    let _ = writeln!(out, "gearshift_build_info{{version=\"{version}\"}} 1");
    // gearman-exporter's names.
    head(
        &mut out,
        "gearman_up",
        "gauge",
        "Whether the server answers (always 1 here).",
    );
    let _ = writeln!(out, "gearman_up 1");
    head(
        &mut out,
        "gearman_version_info",
        "gauge",
        "The server's version (always 1).",
    );
    let _ = writeln!(out, "gearman_version_info{{version=\"{version}\"}} 1");
    per_function(
        &mut out,
        fs,
        "gearman_jobs",
        "gauge",
        "Jobs of the function, queued and running.",
        |f| f.queued.iter().map(|&q| u64::from(q)).sum::<u64>() + u64::from(f.running),
    );
    per_function(
        &mut out,
        fs,
        "gearman_jobs_running",
        "gauge",
        "Jobs running.",
        |f| u64::from(f.running),
    );
    per_function(
        &mut out,
        fs,
        "gearman_jobs_waiting",
        "gauge",
        "Jobs queued.",
        |f| f.queued.iter().map(|&q| u64::from(q)).sum(),
    );
    per_function(
        &mut out,
        fs,
        "gearman_workers",
        "gauge",
        "Workers of the function.",
        |f| u64::from(f.workers),
    );
    out
}

/// `GET /metrics`.
pub async fn scrape(State(app): State<super::State>) -> Result<Response, ApiError> {
    let (fs, t) = app
        .ctx
        .control
        .call(|c| (c.functions_view(), c.totals()))
        .await?;
    let t = app.ctx.node_totals(t);
    let conns = app.ctx.counters.snapshot();
    let mut body = render(&fs, &t, &app.ctx.store_stats.snapshot(), conns);
    super::extra_metrics::append(&mut body);
    Ok((StatusCode::OK, [(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_label_values() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
