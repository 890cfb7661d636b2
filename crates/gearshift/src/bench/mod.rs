//! `gearshift bench`: a load tool for measuring a Gearman server (Gearshift,
//! gearmand, or any other) with the `gearshift-client` library, in four
//! scenarios run in this order:
//!
//! - `submit`: background submissions with no worker attached; admin
//!   `status` must then show them all queued.
//! - `drain`: workers take what `submit` queued; each job must run exactly
//!   once (told apart by the `seq:N;` at the front of every workload).
//! - `roundtrip`: foreground jobs through echo workers, with per-job latency.
//! - `echo`: ECHO_REQ round trips, the request path without jobs.
//!
//! Every client connection carries many requests at once (`--inflight`),
//! so one process can load a fast server. Each scenario ends in a check;
//! the summary (a table, or one JSON object per scenario with `--json`)
//! says what it found, and the exit code is 1 when any check failed, 2 when
//! a server cannot be reached.
//!
//! - `config`: the flags and the settings they resolve to.
//! - `load`: clients × in-flight tasks until a count or a deadline.
//! - `workers`: the workers of `drain` and `roundtrip`; `queue`: admin
//!   `status` queries.
//! - `submit`, `drain`, `roundtrip`, `echo`: the scenarios.
//! - `payload`, `seqset`, `histogram`: workloads, seen-sets, latencies.
//! - `progress`: the display on stderr; `report`: the summary.

mod config;
mod drain;
mod echo;
mod histogram;
mod load;
mod payload;
mod progress;
mod queue;
mod report;
mod roundtrip;
mod seqset;
mod submit;
mod workers;

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use gearshift_client::{Client, ServerAddr};

pub use config::BenchArgs;
use config::{Config, Scenario};
use report::Report;

use crate::servers::{self, EXIT_FAILED, EXIT_UNREACHABLE};

/// Limit on the first round trip to each server.
const PREFLIGHT: Duration = Duration::from_secs(5);

/// Runs `gearshift bench`.
pub fn main(args: BenchArgs) -> ExitCode {
    let tls = match args.tls.config() {
        Ok(tls) => tls,
        Err(code) => return code,
    };
    let cfg = Config::from_args(&args, tls);
    if cfg.servers.is_empty() {
        return servers::fail(EXIT_UNREACHABLE, "no server given");
    }
    let rt = match servers::runtime(cfg.threads) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(run(cfg))
}

async fn run(cfg: Config) -> ExitCode {
    for (i, addr) in cfg.servers.iter().enumerate() {
        if let Err(code) = preflight(&cfg, i, addr).await {
            return code;
        }
    }
    if !cfg.json {
        out(&header(&cfg));
    }
    let mut reports = Vec::new();
    let mut queued = None;
    for &scenario in &cfg.scenarios {
        let report = match scenario {
            Scenario::Submit => {
                let (report, q) = submit::run(&cfg, "submit").await;
                queued = q;
                report
            }
            Scenario::Drain => drain_after_submit(&cfg, queued.take()).await,
            Scenario::Roundtrip => roundtrip::run(&cfg).await,
            Scenario::Echo => echo::run(&cfg).await,
        };
        if cfg.json {
            out(&format!("{}\n", report.to_json(&cfg)));
        }
        reports.push(report);
    }
    if !cfg.json {
        out(&report::render(&reports));
    }
    if let Some(q) = queued.filter(|q| q.count > 0) {
        let _ = writeln!(
            std::io::stderr(),
            "gearshift: note: submit left {} jobs queued under {}",
            q.count,
            cfg.function
        );
    }
    if reports.iter().all(Report::ok) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_FAILED)
    }
}

/// `drain`, queueing its jobs first when `submit` did not run before it.
async fn drain_after_submit(cfg: &Config, queued: Option<submit::Queued>) -> Report {
    if let Some(q) = queued {
        return drain::run(cfg, &q).await;
    }
    if !cfg.json {
        let _ = writeln!(
            std::io::stderr(),
            "gearshift: drain: queueing {} jobs first (submit did not run)",
            cfg.jobs
        );
    }
    let (setup, q) = submit::run(cfg, "queueing").await;
    let mut report = match q {
        Some(q) => drain::run(cfg, &q).await,
        None => Report::new(Scenario::Drain),
    };
    for f in setup.failures {
        report.fail(format!("queueing the jobs: {f}"));
    }
    report
}

/// One ECHO round trip to server `i`, so that a server that is down or is
/// not a Gearman server is one clear error before any load.
async fn preflight(cfg: &Config, i: usize, addr: &ServerAddr) -> Result<(), ExitCode> {
    let all = &cfg.servers;
    let mut builder = Client::builder().server(addr);
    if let Some(tls) = &cfg.tls {
        builder = builder.tls(tls.clone());
    }
    let client = builder
        .timeout(PREFLIGHT)
        .connect_timeout(PREFLIGHT)
        .build()
        .map_err(|e| servers::fail(EXIT_UNREACHABLE, &e.to_string()))?;
    match client.echo_on(0, "gearshift-bench").await {
        Ok(reply) if reply == "gearshift-bench" => Ok(()),
        Ok(_) => Err(servers::fail(
            EXIT_UNREACHABLE,
            &format!("{addr} answered ECHO with other bytes"),
        )),
        Err(e) => {
            let why = servers::explain(&e, &all[i..=i]).await;
            Err(servers::fail(servers::exit_code_for(&e), &why))
        }
    }
}

/// The settings line printed above the table (only what the chosen
/// scenarios use).
fn header(cfg: &Config) -> String {
    let has = |s: Scenario| cfg.scenarios.contains(&s);
    let servers: Vec<String> = cfg.servers.iter().map(ToString::to_string).collect();
    let mut parts = vec![servers.join(",")];
    if has(Scenario::Submit) || has(Scenario::Drain) || has(Scenario::Roundtrip) {
        parts.push(format!("function {}", cfg.function));
    }
    parts.push(format!(
        "{} clients x {} in flight",
        cfg.clients, cfg.inflight
    ));
    if has(Scenario::Drain) || has(Scenario::Roundtrip) {
        parts.push(format!("{} workers", cfg.workers));
    }
    parts.push(format!("{} B payloads", cfg.size));
    if has(Scenario::Submit) || has(Scenario::Drain) {
        parts.push(format!("{} jobs queued", cfg.jobs));
    }
    if has(Scenario::Roundtrip) || has(Scenario::Echo) {
        parts.push(match (cfg.timed_jobs, cfg.timed_duration) {
            (Some(n), Some(d)) => format!("timed runs: {n} jobs or {d:?}"),
            (Some(n), None) => format!("timed runs: {n} jobs"),
            (None, Some(d)) => format!("timed runs: {d:?}"),
            (None, None) => String::new(),
        });
    }
    format!("gearshift bench: {}\n\n", parts.join(" | "))
}

/// Writes to stdout, ignoring a closed pipe.
fn out(text: &str) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(text.as_bytes());
    let _ = o.flush();
}
