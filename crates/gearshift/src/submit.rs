//! `gearshift submit`: one job (or one per input line, see [`crate::batch`])
//! through the `gearshift-client` library.
//!
//! A foreground job streams WORK_DATA to stdout as it comes, then the
//! result; warnings go to stderr. Exit codes: 0 success, 1 WORK_FAIL,
//! WORK_EXCEPTION (its text on stderr) or timeout, 2 usage or connection
//! errors. A background job (`--background`, or `--at` for an epoch job)
//! prints its handle; a foreground one prints it on stderr with
//! `--verbose` (stdout stays the job's output, byte for byte).
//!
//! `--timeout` bounds the whole job, submission included, and applies to
//! every job of `--lines`. `--wait-timeout` bounds only the wait for one
//! foreground job's result, once the server has accepted it: past it the
//! command says so, naming the handle, and exits 1. Leaving does not cancel
//! the job: one a worker is already running runs to its end (and with a
//! `keep_results` policy `gearshift admin job H` shows how it ended); one
//! still queued is dropped by the server once no client waits for it, as
//! gearmand does.

use std::ffi::OsString;
use std::io::{IsTerminal, Read, Write};
use std::os::unix::ffi::OsStringExt;
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use clap::{Args, ValueEnum};
use gearshift_client::{Client, Error, JobBuilder, JobEvent, Priority, ServerAddr};

use crate::servers::{self, ServerArgs, TlsArgs, EXIT_FAILED, EXIT_UNREACHABLE};
use crate::when;

/// Flags of `gearshift submit`.
#[derive(Args, Debug)]
pub struct SubmitArgs {
    #[command(flatten)]
    servers: ServerArgs,
    #[command(flatten)]
    tls: TlsArgs,
    /// Function to run.
    #[arg(short = 'f', long = "function", value_name = "FN",
          value_parser = servers::function_name)]
    function: String,
    /// The workload; standard input is read when it is absent.
    #[arg(value_name = "DATA")]
    data: Option<OsString>,
    /// Queue the job and print its handle instead of waiting for the result.
    #[arg(short = 'b', long)]
    background: bool,
    /// Queue priority.
    #[arg(long, value_enum, default_value_t = PriorityArg::Normal)]
    priority: PriorityArg,
    /// Unique id: jobs with the same function and unique coalesce.
    #[arg(short = 'u', long, value_name = "U")]
    unique: Option<OsString>,
    /// Run no earlier than TIME (implies --background): Unix seconds,
    /// RFC 3339 (2026-11-22T10:00:00Z) or from now (+30s, +5m, +2h).
    #[arg(long, value_name = "TIME", value_parser = when::parse_at)]
    at: Option<i64>,
    /// Give up on a job after this long (30s, 500ms, 5m; default: wait forever).
    #[arg(long, value_name = "DURATION", value_parser = when::parse_timeout)]
    timeout: Option<Duration>,
    /// Foreground: stop waiting for the result after this long (from when
    /// the server accepted the job) and exit 1; a job a worker already runs
    /// goes on without this client.
    #[arg(long, value_name = "DURATION", value_parser = when::parse_timeout,
          conflicts_with_all = ["background", "at", "lines"])]
    wait_timeout: Option<Duration>,
    /// Print the job handle of a foreground job on stderr (`handle: H`)
    /// once the server accepted it.
    #[arg(short = 'v', long, conflicts_with = "lines")]
    verbose: bool,
    /// One job per input line (newline stripped, empty lines skipped),
    /// several in flight; results printed one per line in input order.
    #[arg(short = 'n', long)]
    lines: bool,
    /// With --lines: most jobs in flight at once.
    #[arg(short = 'c', long, default_value_t = 16, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: u32,
}

/// `--priority`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum PriorityArg {
    High,
    Normal,
    Low,
}

impl From<PriorityArg> for Priority {
    fn from(p: PriorityArg) -> Priority {
        match p {
            PriorityArg::High => Priority::High,
            PriorityArg::Normal => Priority::Normal,
            PriorityArg::Low => Priority::Low,
        }
    }
}

/// The options every job of one `submit` run shares.
#[derive(Debug, Clone)]
pub struct JobOpts {
    /// Function name.
    pub function: Bytes,
    /// Queue priority.
    pub priority: Priority,
    /// Unique id, if any.
    pub unique: Option<Bytes>,
    /// SUBMIT_JOB_EPOCH time, if any.
    pub epoch: Option<i64>,
    /// Background submission.
    pub background: bool,
    /// Per-job limit (none: wait forever).
    pub timeout: Option<Duration>,
}

impl JobOpts {
    /// A library submission of `data` with these options.
    pub fn builder<'a>(&self, client: &'a Client, data: Bytes) -> JobBuilder<'a> {
        let mut b = client
            .job(self.function.clone(), data)
            .priority(self.priority);
        if let Some(u) = &self.unique {
            b = b.unique(u.clone());
        }
        if let Some(at) = self.epoch {
            b = b.epoch(at);
        }
        match self.timeout {
            Some(t) => b.timeout(t),
            None => b.no_timeout(),
        }
    }
}

/// Runs `gearshift submit`.
pub fn main(args: SubmitArgs) -> ExitCode {
    if args.at.is_some() && args.priority != PriorityArg::Normal {
        return servers::fail(
            EXIT_UNREACHABLE,
            "--at jobs always have normal priority (the protocol has no other)",
        );
    }
    if args.lines && args.unique.is_some() {
        return servers::fail(
            EXIT_UNREACHABLE,
            "--unique cannot be used with --lines (every line would coalesce into one job)",
        );
    }
    let addrs = args.servers.list();
    if addrs.is_empty() {
        return servers::fail(EXIT_UNREACHABLE, "no server given");
    }
    let opts = JobOpts {
        function: Bytes::from(args.function.into_bytes()),
        priority: args.priority.into(),
        unique: args.unique.map(|u| Bytes::from(u.into_vec())),
        epoch: args.at,
        background: args.background || args.at.is_some(),
        timeout: args.timeout,
    };
    let data = match args.data {
        Some(d) => d.into_vec(),
        None => match read_stdin() {
            Ok(d) => d,
            Err(e) => return servers::fail(EXIT_UNREACHABLE, &format!("cannot read stdin: {e}")),
        },
    };
    let mut builder = Client::builder().servers(&addrs).no_timeout();
    match args.tls.config() {
        Ok(Some(tls)) => builder = builder.tls(tls),
        Ok(None) => {}
        Err(code) => return code,
    }
    let client = match builder.build() {
        Ok(c) => c,
        Err(e) => return servers::fail(EXIT_UNREACHABLE, &e.to_string()),
    };
    let rt = match servers::runtime(0) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async {
        if args.lines {
            let concurrency = usize::try_from(args.concurrency).unwrap_or(1);
            crate::batch::run(&client, &opts, &addrs, &data, concurrency).await
        } else {
            let wait = Wait {
                limit: args.wait_timeout,
                verbose: args.verbose,
            };
            single(&client, &opts, &addrs, Bytes::from(data), wait).await
        }
    })
}

fn read_stdin() -> std::io::Result<Vec<u8>> {
    let mut stdin = std::io::stdin();
    if stdin.is_terminal() {
        let _ = writeln!(
            std::io::stderr(),
            "gearshift: reading the workload from stdin (end with Ctrl-D)"
        );
    }
    let mut data = Vec::new();
    stdin.read_to_end(&mut data)?;
    Ok(data)
}

/// Prints a readable line for a library error and returns its exit code.
pub async fn report(e: &Error, addrs: &[ServerAddr], opts: &JobOpts) -> ExitCode {
    if matches!(e, Error::Timeout) {
        let limit = opts
            .timeout
            .map_or(String::new(), |t| format!(" after {t:?}"));
        return servers::fail(EXIT_FAILED, &format!("timed out{limit}"));
    }
    servers::fail(servers::exit_code_for(e), &servers::explain(e, addrs).await)
}

/// Writes to stdout, ignoring a closed pipe (`| head`).
fn out(bytes: &[u8]) {
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(bytes);
    let _ = o.flush();
}

/// Writes one warning line to stderr.
pub fn warn_line(prefix: &str, w: &[u8]) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(prefix.as_bytes());
    let _ = e.write_all(w);
    if !w.ends_with(b"\n") {
        let _ = e.write_all(b"\n");
    }
}

/// How a single foreground job is waited for.
#[derive(Debug, Clone, Copy)]
struct Wait {
    /// `--wait-timeout`.
    limit: Option<Duration>,
    /// `--verbose`: the handle on stderr.
    verbose: bool,
}

async fn single(
    client: &Client,
    opts: &JobOpts,
    addrs: &[ServerAddr],
    data: Bytes,
    wait: Wait,
) -> ExitCode {
    if opts.background {
        return match opts.builder(client, data).background().await {
            Ok(handle) => {
                out(format!("{handle}\n").as_bytes());
                ExitCode::SUCCESS
            }
            Err(e) => report(&e, addrs, opts).await,
        };
    }
    let mut job = match opts.builder(client, data).submit().await {
        Ok(job) => job,
        Err(e) => return report(&e, addrs, opts).await,
    };
    let handle = job.handle().to_string();
    if wait.verbose {
        warn_line("handle: ", handle.as_bytes());
    }
    let deadline = wait.limit.map(|d| tokio::time::Instant::now() + d);
    // On a terminal, end the output with a newline so the prompt starts on
    // its own line; piped output stays byte for byte.
    let tty = std::io::stdout().is_terminal();
    let mut ends_in_newline = true;
    loop {
        let event = match deadline {
            Some(at) => match tokio::time::timeout_at(at, job.next_event()).await {
                Ok(event) => event,
                Err(_) => {
                    let limit = wait.limit.unwrap_or_default();
                    return servers::fail(
                        EXIT_FAILED,
                        &format!(
                            "gave up waiting for job {handle} after {limit:?} \
                             (a worker already running it finishes it; \
                             a job still queued is dropped)"
                        ),
                    );
                }
            },
            None => job.next_event().await,
        };
        match event {
            Ok(Some(JobEvent::Data(d))) => {
                if !d.is_empty() {
                    ends_in_newline = d.ends_with(b"\n");
                }
                out(&d);
            }
            Ok(Some(JobEvent::Warning(w))) => warn_line("", &w),
            Ok(Some(JobEvent::Status { .. })) => {}
            Ok(Some(JobEvent::Complete(r))) => {
                if !r.is_empty() {
                    ends_in_newline = r.ends_with(b"\n");
                }
                out(&r);
                if tty && !ends_in_newline {
                    out(b"\n");
                }
                return ExitCode::SUCCESS;
            }
            Ok(Some(JobEvent::Fail)) => {
                return servers::fail(EXIT_FAILED, &format!("job {handle} failed"))
            }
            Ok(Some(JobEvent::Exception(e))) => {
                let text = String::from_utf8_lossy(&e);
                return servers::fail(
                    EXIT_FAILED,
                    &format!("job {handle} raised an exception: {text}"),
                );
            }
            Ok(None) => return servers::fail(EXIT_FAILED, &format!("job {handle} ended")),
            Err(Error::ConnectionLost) => {
                // The server took the job, so it speaks Gearman: no TLS hint.
                return servers::fail(
                    EXIT_UNREACHABLE,
                    &format!(
                        "the connection to the server was lost while waiting for job {handle}"
                    ),
                );
            }
            Err(e) => return report(&e, addrs, opts).await,
        }
    }
}
