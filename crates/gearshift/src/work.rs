//! `gearshift work`: a worker on the `gearshift-client` library that runs a
//! command per job, like `gearman -w`, with `-c N` jobs at once.
//!
//! The workload goes to the command's stdin; its stdout is the result
//! (WORK_COMPLETE); a non-zero exit (or death by a signal) is WORK_FAIL;
//! each line it writes to stderr is sent as a WORK_WARNING. Without a
//! command the workload is echoed: printed on stdout and returned.
//!
//! After each job it reports its commands' CPU time and largest resident
//! set so far (getrusage of its children) with Gearshift's `stats` option;
//! a server that refuses it (gearmand) is not sent it again.
//!
//! Commands run in their own process group, so a Ctrl-C in the terminal
//! reaches only `gearshift`: the first SIGINT/SIGTERM stops taking jobs and
//! lets the running ones finish and report; a second one kills them (the
//! server requeues their jobs) and exits with 130.

use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use clap::Args;
use gearshift_client::{WorkError, Worker, WorkerJob, WorkerStats};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;
use tokio::sync::{watch, Notify};

use crate::servers::{self, ServerArgs, TlsArgs, EXIT_UNREACHABLE};

/// Exit code after a second signal killed the running jobs.
const EXIT_KILLED: u8 = 130;

/// Flags of `gearshift work`.
#[derive(Args, Debug)]
pub struct WorkArgs {
    #[command(flatten)]
    servers: ServerArgs,
    #[command(flatten)]
    tls: TlsArgs,
    /// Function to serve (repeatable; every one runs the same command).
    #[arg(short = 'f', long = "function", value_name = "FN", required = true,
          value_parser = servers::function_name)]
    functions: Vec<String>,
    /// Jobs run at once.
    #[arg(short = 'c', long, default_value_t = 1, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: u32,
    /// Name shown by `gearshift admin workers` (SET_CLIENT_ID).
    #[arg(long, value_name = "ID")]
    client_id: Option<String>,
    /// Exit after taking N jobs, once they have finished (with -c, jobs
    /// already taken alongside the Nth also finish).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    count: Option<u64>,
    /// Command run per job, after `--` (none: echo the workload).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// Runs `gearshift work`.
pub fn main(args: WorkArgs) -> ExitCode {
    crate::logging::init_tool("warn");
    let addrs = args.servers.list();
    if addrs.is_empty() {
        return servers::fail(EXIT_UNREACHABLE, "no server given");
    }
    if let Some(program) = args.command.first() {
        if !runnable(program) {
            let name = program.to_string_lossy();
            return servers::fail(EXIT_UNREACHABLE, &format!("command not found: {name}"));
        }
    }
    let tls = match args.tls.config() {
        Ok(tls) => tls,
        Err(code) => return code,
    };
    let rt = match servers::runtime(2) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(async move {
        if let Err(code) = servers::require_one(&addrs, tls.as_ref()).await {
            return code;
        }
        let stop = watch::Sender::new(false);
        let kill = Arc::new(Notify::new());
        let taken = Arc::new(AtomicU64::new(0));
        let command = Arc::new(args.command);
        let mut builder = Worker::builder()
            .servers(&addrs)
            .concurrency(usize::try_from(args.concurrency).unwrap_or(1));
        if let Some(tls) = tls {
            builder = builder.tls(tls);
        }
        if let Some(id) = args.client_id {
            builder = builder.client_id(id);
        }
        if !command.is_empty() {
            builder = builder.report_stats(children_stats);
        }
        for f in &args.functions {
            let (command, stop, taken) = (command.clone(), stop.clone(), taken.clone());
            let count = args.count;
            builder = builder.function(f.clone(), move |job| {
                // The Nth job asks for the stop as it starts, so the worker
                // takes no further job while it runs.
                let n = taken.fetch_add(1, Ordering::SeqCst) + 1;
                if count.is_some_and(|c| n >= c) {
                    stop.send_replace(true);
                }
                run_job(command.clone(), job)
            });
        }
        let worker = match builder.build() {
            Ok(w) => w,
            Err(e) => return servers::fail(EXIT_UNREACHABLE, &e.to_string()),
        };
        tokio::spawn(signals(stop.clone(), kill.clone()));
        let mut stopped = stop.subscribe();
        let run = worker.run(async move {
            let _ = stopped.wait_for(|s| *s).await;
        });
        tokio::select! {
            () = run => ExitCode::SUCCESS,
            () = kill.notified() => servers::fail(EXIT_KILLED, "killed the running jobs"),
        }
        // Leaving the runtime drops the handlers' children (kill_on_drop).
    })
}

/// What the commands run so far cost: user + system CPU and the largest
/// resident set of any one of them (the kernel's RUSAGE_CHILDREN, which
/// counts every command this process has waited for).
fn children_stats() -> Option<WorkerStats> {
    use nix::sys::resource::{getrusage, UsageWho};
    let u = getrusage(UsageWho::RUSAGE_CHILDREN).ok()?;
    let ms = |t: nix::sys::time::TimeVal| {
        u64::try_from(t.tv_sec()).unwrap_or(0) * 1000
            + u64::try_from(t.tv_usec()).unwrap_or(0) / 1000
    };
    Some(WorkerStats {
        cpu_ms: ms(u.user_time()) + ms(u.system_time()),
        max_rss_kib: u64::try_from(u.max_rss()).unwrap_or(0),
    })
}

/// True if `program` names an executable file, directly (with a `/`) or
/// through `PATH`: a typo fails at start rather than every job.
fn runnable(program: &OsStr) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.as_bytes().contains(&b'/') {
        return executable(Path::new(program));
    }
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| executable(&dir.join(program))))
}

/// First SIGINT/SIGTERM: graceful stop. Second: kill.
async fn signals(stop: watch::Sender<bool>, kill: Arc<Notify>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        let _ = writeln!(
            std::io::stderr(),
            "gearshift: cannot install signal handlers"
        );
        return;
    };
    let mut seen = 0;
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        seen += 1;
        if seen == 1 {
            let _ = writeln!(
                std::io::stderr(),
                "gearshift: stopping: finishing running jobs (signal again to kill them)"
            );
            stop.send_replace(true);
        } else {
            kill.notify_one();
            return;
        }
    }
}

/// Runs one job: the command, or the echo.
async fn run_job(command: Arc<Vec<OsString>>, job: WorkerJob) -> Result<Bytes, WorkError> {
    let Some((program, args)) = command.split_first() else {
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(job.data());
        let _ = o.flush();
        return Ok(job.data().clone());
    };
    let handle = String::from_utf8_lossy(job.handle()).into_owned();
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("GEARSHIFT_FUNCTION", OsStr::from_bytes(job.function()))
        .env("GEARSHIFT_HANDLE", OsStr::from_bytes(job.handle()))
        .env("GEARSHIFT_UNIQUE", OsStr::from_bytes(job.unique()))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("cannot run {}: {e}", program.to_string_lossy());
            let _ = writeln!(std::io::stderr(), "gearshift: job {handle}: {msg}");
            let _ = job.send_warning(msg).await;
            return Err(WorkError::Fail);
        }
    };
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let data = job.data().clone();
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A command that does not read its input closes the pipe early.
            let _ = stdin.write_all(&data).await;
        }
    };
    let collect = async move {
        let mut out = Vec::new();
        if let Some(mut stdout) = stdout {
            let _ = stdout.read_to_end(&mut out).await;
        }
        out
    };
    let warn = async {
        let Some(stderr) = stderr else { return };
        let mut reader = BufReader::new(stderr);
        let mut line = Vec::new();
        loop {
            line.clear();
            match reader.read_until(b'\n', &mut line).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    let text = line.strip_suffix(b"\n").unwrap_or(&line);
                    let text = text.strip_suffix(b"\r").unwrap_or(text);
                    let _ = job.send_warning(Bytes::copy_from_slice(text)).await;
                }
            }
        }
    };
    let ((), out, ()) = tokio::join!(feed, collect, warn);
    match child.wait().await {
        Ok(status) if status.success() => Ok(Bytes::from(out)),
        Ok(status) => {
            let _ = writeln!(std::io::stderr(), "gearshift: job {handle}: {status}");
            Err(WorkError::Fail)
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "gearshift: job {handle}: {e}");
            Err(WorkError::Fail)
        }
    }
}
