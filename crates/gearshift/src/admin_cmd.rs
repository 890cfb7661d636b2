//! `gearshift admin`: the admin text protocol through the library's
//! [`AdminClient`], as aligned tables (or `--json`), with a non-zero exit
//! code when a server answers `ERR …` (1) or cannot be reached (2), unlike
//! `gearadmin`.
//!
//! Every command goes to every `--server`; with several, tables gain a
//! SERVER column. JSON is always an array of objects, each with its
//! `"server"`, keys being the lowercased column names (`client_id`, …).
//! `cancel` and `job` succeed if any server knew the job, `drop-schedule`
//! if any knew the schedule.
//!
//! Gearshift's own words have their own subcommands: `job H` (`show job`,
//! printed as `key  value` lines), `dead [F]` (`show dead`), `retry-dead`
//! and `drop-dead H|all [F]` (`retry dead` / `drop dead`, printing the
//! count), `pause F`, `resume F`, `workers --all` (`show workers`, the
//! worker registry), `schedules` (`show schedules`) and `drop-schedule H`
//! (`drop schedule`). The dead-set ones are named `retry-dead` / `drop-dead`
//! after the server words, as `drop-function` is after `drop function`: a
//! bare `drop F` would read as dropping a function. Text fields are printed
//! as the server escaped them (`\xNN` for control bytes).
//!
//! A function name or handle holding a space or a line break is refused
//! before anything is sent ([`words`]): the text protocol would carry it as
//! other words. The refusal names the HTTP API route that does the same.
//! `retry-dead H` / `drop-dead H` of a handle no server has in its dead set
//! fail (exit 1) rather than print 0.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use gearshift_client::admin::LastFailure;
use gearshift_client::{AdminClient, AdminErrorKind, Error, Priority, ServerAddr, TlsConfig};

use crate::servers::{self, ServerArgs, TlsArgs, EXIT_FAILED, EXIT_UNREACHABLE};
use crate::when;

mod render;
mod words;

use render::{json, num, table, text_or_null, Cell, Reply};

/// Flags of `gearshift admin`.
#[derive(Args, Debug)]
pub struct AdminArgs {
    #[command(flatten)]
    servers: ServerArgs,
    #[command(flatten)]
    tls: TlsArgs,
    /// Print JSON (an array of objects, each with its "server") instead of a table.
    #[arg(long, global = true)]
    json: bool,
    /// Limit on each command.
    #[arg(long, global = true, value_name = "DURATION", default_value = "10s",
          value_parser = when::parse_timeout)]
    timeout: Duration,
    #[command(subcommand)]
    command: AdminCommand,
}

/// The admin commands.
#[derive(Subcommand, Debug, Clone)]
enum AdminCommand {
    /// Jobs (queued + running), running jobs and workers per function.
    Status,
    /// Queued jobs per priority, per function.
    #[command(alias = "priority-status")]
    Prioritystatus,
    /// Every connection (clients too) and the functions it can do.
    Workers {
        /// The worker registry instead (Gearshift `show workers`): every
        /// connection that registered a function or holds a job, with when
        /// it connected and was last seen, jobs done and failed, and the
        /// handles it runs.
        #[arg(long)]
        all: bool,
    },
    /// Every job: handle, retries, flags.
    Jobs,
    /// The unique id of every job.
    UniqueJobs,
    /// Cancel a queued job; its waiting clients get WORK_FAIL.
    Cancel {
        /// Job handle, e.g. H:host:17.
        handle: String,
    },
    /// The server's version.
    Version,
    /// The server's process id.
    Getpid,
    /// Create an (empty) function queue.
    CreateFunction {
        /// Function name.
        function: String,
    },
    /// Drop an idle function (refused if it has jobs or workers).
    DropFunction {
        /// Function name.
        function: String,
    },
    /// Limit a function's queue: N for every priority, or HIGH NORMAL LOW
    /// (0 or less: unlimited).
    Maxqueue {
        /// Function name.
        function: String,
        /// N, or HIGH NORMAL LOW.
        #[arg(num_args = 1..=3, required = true, allow_negative_numbers = true)]
        limits: Vec<i64>,
    },
    /// One job's state, times, worker, error and history (Gearshift), live
    /// or kept after it ended (dead, or under `keep_results`).
    Job {
        /// Job handle, e.g. H:host:17.
        handle: String,
    },
    /// The dead set: background jobs that failed for good under a policy (Gearshift).
    Dead {
        /// Only this function's.
        function: Option<String>,
    },
    /// Queue dead jobs again; prints how many (Gearshift `retry dead`).
    RetryDead {
        /// A job handle, or `all`.
        target: String,
        /// Only if of this function (with `all`: only this function's).
        function: Option<String>,
    },
    /// Forget dead jobs; prints how many (Gearshift `drop dead`).
    DropDead {
        /// A job handle, or `all`.
        target: String,
        /// Only if of this function (with `all`: only this function's).
        function: Option<String>,
    },
    /// Stop handing a function's jobs to workers; they are still accepted
    /// and queued (Gearshift).
    Pause {
        /// Function name.
        function: String,
    },
    /// Hand a paused function's jobs out again (Gearshift).
    Resume {
        /// Function name.
        function: String,
    },
    /// Recurring jobs: handle, function, time fields, next firing, source
    /// (`client`: SUBMIT_JOB_SCHED, `config`: a `[[schedule]]`) and unique
    /// (Gearshift `show schedules`).
    Schedules,
    /// Remove a schedule a client submitted (Gearshift `drop schedule`);
    /// one from the config file is refused.
    DropSchedule {
        /// Schedule handle, as `schedules` lists it.
        handle: String,
    },
    /// Stop the server (Gearshift; gearmand 1.1 refuses it).
    Shutdown {
        /// Finish running jobs first.
        #[arg(long)]
        graceful: bool,
    },
}

/// Runs `gearshift admin`.
pub fn main(args: AdminArgs) -> ExitCode {
    if let AdminCommand::Maxqueue { limits, .. } = &args.command {
        if limits.len() == 2 {
            return servers::fail(
                EXIT_UNREACHABLE,
                "maxqueue takes one limit (N) or three (HIGH NORMAL LOW)",
            );
        }
    }
    if let Some(why) = words::refusal(&args.command) {
        return servers::fail(EXIT_UNREACHABLE, &why);
    }
    let addrs = args.servers.list();
    if addrs.is_empty() {
        return servers::fail(EXIT_UNREACHABLE, "no server given");
    }
    let tls = match args.tls.config() {
        Ok(tls) => tls,
        Err(code) => return code,
    };
    let rt = match servers::runtime(0) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(run(args, addrs, tls))
}

async fn run(args: AdminArgs, addrs: Vec<ServerAddr>, tls: Option<TlsConfig>) -> ExitCode {
    let mut answers: Vec<(String, Reply)> = Vec::new();
    let mut errors: Vec<(String, Error)> = Vec::new();
    for addr in &addrs {
        match one(addr, tls.as_ref(), &args.command, args.timeout).await {
            Ok(reply) => answers.push((addr.to_string(), reply)),
            Err(e) => errors.push((addr.to_string(), e)),
        }
    }
    // A handle lives on one server: the others not knowing it is no error.
    let unknown = match args.command {
        AdminCommand::Cancel { .. } | AdminCommand::Job { .. } => Some(AdminErrorKind::UnknownJob),
        AdminCommand::DropSchedule { .. } => Some(AdminErrorKind::UnknownSchedule),
        _ => None,
    };
    if let Some(unknown) = unknown.filter(|_| !answers.is_empty()) {
        errors.retain(|(_, e)| !matches!(e, Error::Admin { kind, .. } if *kind == unknown));
    }
    // A handle no server has in its dead set is an error, as `job H` of an
    // unknown one is (HTTP: 404); `all` matching nothing is not.
    if let AdminCommand::RetryDead { target, function }
    | AdminCommand::DropDead { target, function } = &args.command
    {
        let none = answers.iter().all(|(_, r)| r.count() == Some(0));
        if target != "all" && none && !answers.is_empty() {
            answers.clear();
            let of = function
                .as_ref()
                .map_or(String::new(), |f| format!(" of function {f}"));
            let c = servers::fail(EXIT_FAILED, &format!("no dead job {target}{of}"));
            if errors.is_empty() {
                return c;
            }
        }
    }
    if !answers.is_empty() {
        let text = if args.json {
            json(answers)
        } else {
            table(answers, addrs.len() > 1)
        };
        let mut o = std::io::stdout().lock();
        let _ = o.write_all(text.as_bytes());
        let _ = o.flush();
    }
    let mut code = ExitCode::SUCCESS;
    let mut worst = 0;
    for (addr, e) in &errors {
        let exit = servers::exit_code_for(e);
        let msg = match e {
            Error::Admin { .. } | Error::Protocol(_) | Error::Timeout => {
                format!("{addr}: {}", servers::explain(e, &addrs).await)
            }
            _ => servers::explain(e, &addrs).await,
        };
        let c = servers::fail(exit, &msg);
        if exit > worst {
            worst = exit;
            code = c;
        }
    }
    code
}

/// Runs the command on one server.
async fn one(
    addr: &ServerAddr,
    tls: Option<&TlsConfig>,
    command: &AdminCommand,
    timeout: Duration,
) -> Result<Reply, Error> {
    let mut admin = AdminClient::connect_with(addr, tls).await?;
    admin.set_timeout(Some(timeout));
    let done = || Reply {
        columns: &[("RESULT", false)],
        rows: vec![vec![Cell::Text("OK".into())]],
        scalar: true,
        record: false,
    };
    let count = |column: &'static [(&'static str, bool)], n: u64| Reply {
        columns: column,
        rows: vec![vec![num(n)]],
        scalar: true,
        record: false,
    };
    let reply = match command {
        AdminCommand::Status => Reply {
            columns: &[
                ("FUNCTION", false),
                ("TOTAL", true),
                ("RUNNING", true),
                ("WORKERS", true),
            ],
            rows: (admin.status().await?.into_iter())
                .map(|s| {
                    let f = Cell::Text(s.function);
                    vec![f, num(s.total), num(s.running), num(s.workers)]
                })
                .collect(),
            scalar: false,
            record: false,
        },
        AdminCommand::Prioritystatus => Reply {
            columns: &[
                ("FUNCTION", false),
                ("HIGH", true),
                ("NORMAL", true),
                ("LOW", true),
                ("WORKERS", true),
            ],
            rows: (admin.priority_status().await?.into_iter())
                .map(|p| {
                    let f = Cell::Text(p.function);
                    vec![f, num(p.high), num(p.normal), num(p.low), num(p.workers)]
                })
                .collect(),
            scalar: false,
            record: false,
        },
        AdminCommand::Workers { all: true } => Reply {
            columns: &[
                ("FD", true),
                ("ADDRESS", false),
                ("CLIENT ID", false),
                ("CONNECTED", false),
                ("LAST SEEN", false),
                ("DONE", true),
                ("FAILED", true),
                ("HELD", false),
                ("FUNCTIONS", false),
            ],
            rows: (admin.show_workers().await?.into_iter())
                .map(|w| {
                    vec![
                        Cell::Num(w.fd),
                        Cell::Text(w.address),
                        Cell::Text(w.client_id),
                        Cell::Text(w.connected),
                        Cell::Text(w.last_seen),
                        num(w.done),
                        num(w.failed),
                        Cell::Words(w.held),
                        Cell::Words(w.functions),
                    ]
                })
                .collect(),
            scalar: false,
            record: false,
        },
        AdminCommand::Workers { all: false } => Reply {
            columns: &[
                ("FD", true),
                ("IP", false),
                ("CLIENT ID", false),
                ("FUNCTIONS", false),
            ],
            rows: (admin.workers().await?.into_iter())
                .map(|w| {
                    vec![
                        Cell::Num(w.fd),
                        Cell::Text(w.ip),
                        Cell::Text(w.client_id),
                        Cell::List(w.functions),
                    ]
                })
                .collect(),
            scalar: false,
            record: false,
        },
        AdminCommand::Jobs => Reply {
            columns: &[
                ("HANDLE", false),
                ("RETRIES", true),
                ("IGNORED", false),
                ("QUEUED", false),
            ],
            rows: (admin.show_jobs().await?.into_iter())
                .map(|j| {
                    let h = Cell::Text(j.handle);
                    vec![
                        h,
                        num(j.retries),
                        Cell::Flag(j.ignored),
                        Cell::Flag(j.queued),
                    ]
                })
                .collect(),
            scalar: false,
            record: false,
        },
        AdminCommand::UniqueJobs => Reply {
            columns: &[("UNIQUE", false)],
            rows: (admin.show_unique_jobs().await?.into_iter())
                .map(|u| vec![Cell::Text(u)])
                .collect(),
            scalar: false,
            record: false,
        },
        AdminCommand::Version => Reply {
            columns: &[("VERSION", false)],
            rows: vec![vec![Cell::Text(admin.version().await?)]],
            scalar: true,
            record: false,
        },
        AdminCommand::Getpid => Reply {
            columns: &[("PID", true)],
            rows: vec![vec![Cell::Num(i64::from(admin.getpid().await?))]],
            scalar: true,
            record: false,
        },
        AdminCommand::Cancel { handle } => {
            admin.cancel_job(handle).await?;
            done()
        }
        AdminCommand::CreateFunction { function } => {
            admin.create_function(function).await?;
            done()
        }
        AdminCommand::DropFunction { function } => {
            admin.drop_function(function).await?;
            done()
        }
        AdminCommand::Maxqueue { function, limits } => {
            match limits[..] {
                [n] => admin.max_queue(function, n).await?,
                [h, n, l] => admin.max_queue_by_priority(function, h, n, l).await?,
                _ => return Err(Error::InvalidArgument("one limit or three".into())),
            }
            done()
        }
        AdminCommand::Job { handle } => {
            let j = admin.show_job(handle).await?;
            Reply {
                columns: &[
                    ("handle", false),
                    ("function", false),
                    ("unique", false),
                    ("priority", false),
                    ("state", false),
                    ("outcome", false),
                    ("attempts", true),
                    ("created", false),
                    ("started", false),
                    ("finished", false),
                    ("worker", false),
                    ("last_failure", false),
                    ("error", false),
                    ("result_size", true),
                    ("history", false),
                ],
                rows: vec![vec![
                    Cell::Text(j.handle),
                    Cell::Text(j.function),
                    Cell::Text(j.unique),
                    Cell::Text(priority_word(j.priority).to_owned()),
                    Cell::Text(j.state),
                    text_or_null(j.outcome),
                    num(j.attempts),
                    Cell::Text(j.created),
                    text_or_null(j.started),
                    text_or_null(j.finished),
                    text_or_null(j.worker),
                    text_or_null(j.last_failure.as_ref().map(last_failure_text)),
                    // Kept for scripts; a reader has `outcome` and `last_failure`.
                    Cell::JsonOnly(Box::new(text_or_null(j.error))),
                    num(j.result_size),
                    Cell::History(j.history),
                ]],
                scalar: false,
                record: true,
            }
        }
        AdminCommand::Dead { function } => Reply {
            columns: &[
                ("HANDLE", false),
                ("FUNCTION", false),
                ("ATTEMPTS", true),
                ("DIED AT", false),
                ("ERROR", false),
            ],
            rows: (admin.show_dead(function.as_deref()).await?.into_iter())
                .map(|d| {
                    vec![
                        Cell::Text(d.handle),
                        Cell::Text(d.function),
                        num(d.attempts),
                        Cell::Text(d.died_at),
                        text_or_null(d.error),
                    ]
                })
                .collect(),
            scalar: false,
            record: false,
        },
        AdminCommand::RetryDead { target, function } => count(
            &[("RETRIED", true)],
            admin.retry_dead(target, function.as_deref()).await?,
        ),
        AdminCommand::DropDead { target, function } => count(
            &[("DROPPED", true)],
            admin.drop_dead(target, function.as_deref()).await?,
        ),
        AdminCommand::Pause { function } => {
            admin.pause(function).await?;
            done()
        }
        AdminCommand::Resume { function } => {
            admin.resume(function).await?;
            done()
        }
        AdminCommand::Schedules => Reply {
            columns: &[
                ("HANDLE", false),
                ("FUNCTION", false),
                ("WHEN", false),
                ("NEXT", false),
                ("SOURCE", false),
                ("UNIQUE", false),
            ],
            rows: (admin.show_schedules().await?.into_iter())
                .map(|s| {
                    vec![
                        Cell::Text(s.handle),
                        Cell::Text(s.function),
                        Cell::Text(s.when),
                        text_or_null(s.next),
                        Cell::Text(s.source),
                        Cell::Text(s.unique),
                    ]
                })
                .collect(),
            scalar: false,
            record: false,
        },
        AdminCommand::DropSchedule { handle } => {
            admin.drop_schedule(handle).await?;
            done()
        }
        AdminCommand::Shutdown { graceful } => {
            admin.shutdown(*graceful).await?;
            done()
        }
    };
    Ok(reply)
}

/// A job's last failure as a reader wants it: `DETAIL (attempt N, TIME)`,
/// leaving out what the server did not know.
fn last_failure_text(f: &LastFailure) -> String {
    let mut when = Vec::new();
    if let Some(n) = f.attempt {
        when.push(format!("attempt {n}"));
    }
    when.extend(f.time.clone());
    if when.is_empty() {
        f.detail.clone()
    } else {
        format!("{} ({})", f.detail, when.join(", "))
    }
}

fn priority_word(p: Priority) -> &'static str {
    match p {
        Priority::High => "high",
        Priority::Normal => "normal",
        Priority::Low => "low",
    }
}

#[cfg(test)]
mod tests {
    use super::last_failure_text;
    use gearshift_client::admin::LastFailure;

    #[test]
    fn a_last_failure_reads_as_a_sentence() {
        let text = |line: &str| last_failure_text(&LastFailure::parse(line).expect("parses"));
        assert_eq!(
            text("2 2026-11-25T18:49:17.250Z fail: disk full"),
            "fail: disk full (attempt 2, 2026-11-25T18:49:17.250Z)"
        );
        assert_eq!(text("3 - timeout"), "timeout (attempt 3)");
        assert_eq!(text("- - fail"), "fail");
    }
}
