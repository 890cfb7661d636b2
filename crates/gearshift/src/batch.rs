//! `gearshift submit --lines`: one job per input line, up to `--concurrency`
//! in flight, results printed one per line in input order as soon as every
//! earlier line is done, a progress bar on stderr when stderr is a terminal,
//! and a closing `N succeeded, M failed` on stderr.

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use std::sync::Arc;

use bytes::Bytes;
use gearshift_client::{Client, Error, JobEvent, ServerAddr};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;

use crate::servers::EXIT_FAILED;
use crate::submit::{report, warn_line, JobOpts};

/// What one line's job came to.
struct Outcome {
    /// WORK_WARNING payloads, in order.
    warnings: Vec<Bytes>,
    /// WORK_DATA chunks and the result (or the handle of a background job),
    /// or why the job failed.
    result: Result<Vec<u8>, String>,
}

/// Runs one job per non-empty line of `input`; exit code 1 if any failed.
pub async fn run(
    client: &Client,
    opts: &JobOpts,
    addrs: &[ServerAddr],
    input: &[u8],
    concurrency: usize,
) -> ExitCode {
    let lines: Vec<(usize, Bytes)> = input
        .split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, l)| (i + 1, l.strip_suffix(b"\r").unwrap_or(l)))
        .filter(|(_, l)| !l.is_empty())
        .map(|(n, l)| (n, Bytes::copy_from_slice(l)))
        .collect();
    // One round trip first, so a server that is down is one clear error
    // rather than one per line.
    if !lines.is_empty() {
        if let Err(e) = client.echo("").await {
            return report(&e, addrs, opts).await;
        }
    }
    let bar = progress_bar(lines.len());
    let permits = Arc::new(Semaphore::new(concurrency));
    let mut pending: VecDeque<(usize, JoinHandle<Outcome>)> = VecDeque::new();
    let mut tally = Tally::default();
    for (n, line) in lines {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let (job_client, job_opts, job_bar) = (client.clone(), opts.clone(), bar.clone());
        let task = tokio::spawn(async move {
            let outcome = one(&job_client, &job_opts, line).await;
            job_bar.inc(1);
            drop(permit);
            outcome
        });
        pending.push_back((n, task));
        while pending.front().is_some_and(|(_, t)| t.is_finished()) {
            if let Some((n, task)) = pending.pop_front() {
                tally.emit(n, task.await, &bar);
            }
        }
    }
    while let Some((n, task)) = pending.pop_front() {
        tally.emit(n, task.await, &bar);
    }
    bar.finish_and_clear();
    let _ = writeln!(
        std::io::stderr(),
        "{} succeeded, {} failed",
        tally.succeeded,
        tally.failed
    );
    if tally.failed > 0 {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    }
}

/// A bar on stderr when it is a terminal; otherwise a hidden one.
fn progress_bar(len: usize) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(
        Some(u64::try_from(len).unwrap_or(u64::MAX)),
        ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = ProgressStyle::with_template(
        "[{bar:40}] {pos}/{len} jobs, {elapsed} elapsed, eta {eta} {msg}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.tick();
    bar
}

#[derive(Default)]
struct Tally {
    succeeded: u64,
    failed: u64,
}

impl Tally {
    /// Prints line `n`'s warnings and result (or error), above the bar.
    fn emit(
        &mut self,
        n: usize,
        joined: Result<Outcome, tokio::task::JoinError>,
        bar: &ProgressBar,
    ) {
        let outcome = joined.unwrap_or_else(|e| Outcome {
            warnings: Vec::new(),
            result: Err(format!("internal error: {e}")),
        });
        bar.suspend(|| {
            let prefix = format!("line {n}: ");
            for w in &outcome.warnings {
                warn_line(&prefix, w);
            }
            match &outcome.result {
                Ok(out) => {
                    let mut o = std::io::stdout().lock();
                    let _ = o.write_all(out);
                    if !out.ends_with(b"\n") {
                        let _ = o.write_all(b"\n");
                    }
                    let _ = o.flush();
                }
                Err(msg) => {
                    let _ = writeln!(std::io::stderr(), "gearshift: line {n}: {msg}");
                }
            }
        });
        match outcome.result {
            Ok(_) => self.succeeded += 1,
            Err(_) => {
                self.failed += 1;
                bar.set_message(format!("({} failed)", self.failed));
            }
        }
    }
}

/// Runs one line's job to its end.
async fn one(client: &Client, opts: &JobOpts, line: Bytes) -> Outcome {
    let mut warnings = Vec::new();
    if opts.background {
        let result = match opts.builder(client, line).background().await {
            Ok(handle) => Ok(handle.to_string().into_bytes()),
            Err(e) => Err(describe(&e)),
        };
        return Outcome { warnings, result };
    }
    let mut job = match opts.builder(client, line).submit().await {
        Ok(job) => job,
        Err(e) => {
            return Outcome {
                warnings,
                result: Err(describe(&e)),
            }
        }
    };
    let handle = job.handle().to_string();
    let mut output = Vec::new();
    let result = loop {
        match job.next_event().await {
            Ok(Some(JobEvent::Data(d))) => output.extend_from_slice(&d),
            Ok(Some(JobEvent::Warning(w))) => warnings.push(w),
            Ok(Some(JobEvent::Status { .. })) => {}
            Ok(Some(JobEvent::Complete(r))) => {
                output.extend_from_slice(&r);
                break Ok(output);
            }
            Ok(Some(JobEvent::Fail)) => break Err(format!("job {handle} failed")),
            Ok(Some(JobEvent::Exception(e))) => {
                let text = String::from_utf8_lossy(&e);
                break Err(format!("job {handle} raised an exception: {text}"));
            }
            Ok(None) => break Err(format!("job {handle} ended")),
            Err(e) => break Err(format!("job {handle}: {}", describe(&e))),
        }
    };
    Outcome { warnings, result }
}

fn describe(e: &Error) -> String {
    match e {
        Error::Timeout => "timed out".to_owned(),
        other => other.to_string(),
    }
}
