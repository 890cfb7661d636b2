//! `gearshift admin`: the admin text protocol through the library's
//! [`AdminClient`], as aligned tables (or `--json`), with a non-zero exit
//! code when a server answers `ERR …` (1) or cannot be reached (2), unlike
//! `gearadmin`.
//!
//! Every command goes to every `--server`; with several, tables gain a
//! SERVER column. JSON is always an array of objects, each with its
//! `"server"`, keys being the lowercased column names (`client_id`, …).
//! `cancel` succeeds if any server knew the job.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use gearshift_client::{AdminClient, AdminErrorKind, Error, ServerAddr};
use serde_json::{Map, Value};

use crate::servers::{self, ServerArgs, EXIT_UNREACHABLE};
use crate::table::Table;
use crate::when;

/// Flags of `gearshift admin`.
#[derive(Args, Debug)]
pub struct AdminArgs {
    #[command(flatten)]
    servers: ServerArgs,
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
    Workers,
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
    /// Stop the server (Gearshift; gearmand 1.1 refuses it).
    Shutdown {
        /// Finish running jobs first.
        #[arg(long)]
        graceful: bool,
    },
}

/// One cell of a reply row.
enum Cell {
    Text(String),
    Num(i64),
    Flag(bool),
    List(Vec<String>),
}

impl Cell {
    fn text(&self) -> String {
        match self {
            Cell::Text(s) => s.clone(),
            Cell::Num(n) => n.to_string(),
            Cell::Flag(b) => if *b { "yes" } else { "no" }.to_owned(),
            Cell::List(l) => l.join(" "),
        }
    }

    fn json(self) -> Value {
        match self {
            Cell::Text(s) => Value::String(s),
            Cell::Num(n) => Value::from(n),
            Cell::Flag(b) => Value::Bool(b),
            Cell::List(l) => Value::from(l),
        }
    }
}

/// A command's answer from one server: columns (name, right-aligned) and rows.
struct Reply {
    columns: &'static [(&'static str, bool)],
    rows: Vec<Vec<Cell>>,
    /// A one-value answer (version, getpid, OK): printed bare for one server.
    scalar: bool,
}

fn num(n: u64) -> Cell {
    Cell::Num(i64::try_from(n).unwrap_or(i64::MAX))
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
    let addrs = args.servers.list();
    if addrs.is_empty() {
        return servers::fail(EXIT_UNREACHABLE, "no server given");
    }
    let rt = match servers::runtime(0) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    rt.block_on(run(args, addrs))
}

async fn run(args: AdminArgs, addrs: Vec<ServerAddr>) -> ExitCode {
    let mut answers: Vec<(String, Reply)> = Vec::new();
    let mut errors: Vec<(String, Error)> = Vec::new();
    for addr in &addrs {
        match one(addr, &args.command, args.timeout).await {
            Ok(reply) => answers.push((addr.to_string(), reply)),
            Err(e) => errors.push((addr.to_string(), e)),
        }
    }
    // A handle lives on one server: the others not knowing it is no error.
    if matches!(args.command, AdminCommand::Cancel { .. }) && !answers.is_empty() {
        errors.retain(|(_, e)| {
            !matches!(
                e,
                Error::Admin {
                    kind: AdminErrorKind::UnknownJob,
                    ..
                }
            )
        });
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
async fn one(addr: &ServerAddr, command: &AdminCommand, timeout: Duration) -> Result<Reply, Error> {
    let mut admin = AdminClient::connect(addr).await?;
    admin.set_timeout(Some(timeout));
    let done = || Reply {
        columns: &[("RESULT", false)],
        rows: vec![vec![Cell::Text("OK".into())]],
        scalar: true,
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
        },
        AdminCommand::Workers => Reply {
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
        },
        AdminCommand::UniqueJobs => Reply {
            columns: &[("UNIQUE", false)],
            rows: (admin.show_unique_jobs().await?.into_iter())
                .map(|u| vec![Cell::Text(u)])
                .collect(),
            scalar: false,
        },
        AdminCommand::Version => Reply {
            columns: &[("VERSION", false)],
            rows: vec![vec![Cell::Text(admin.version().await?)]],
            scalar: true,
        },
        AdminCommand::Getpid => Reply {
            columns: &[("PID", true)],
            rows: vec![vec![Cell::Num(i64::from(admin.getpid().await?))]],
            scalar: true,
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
        AdminCommand::Shutdown { graceful } => {
            admin.shutdown(*graceful).await?;
            done()
        }
    };
    Ok(reply)
}

/// The answers as one table (with a SERVER column when `several`).
fn table(answers: Vec<(String, Reply)>, several: bool) -> String {
    let Some(columns) = answers.first().map(|(_, r)| r.columns) else {
        return String::new();
    };
    if !several && answers[0].1.scalar {
        let rows = &answers[0].1.rows;
        return rows.iter().flatten().map(|c| c.text() + "\n").collect();
    }
    let mut t = Table::new(columns);
    let mut servers = Vec::new();
    for (server, reply) in answers {
        for row in reply.rows {
            servers.push(server.clone());
            t.row(row.iter().map(Cell::text).collect());
        }
    }
    if several {
        t = t.with_first_column("SERVER", servers);
    }
    t.render()
}

/// The answers as a JSON array of row objects.
fn json(answers: Vec<(String, Reply)>) -> String {
    let mut rows = Vec::new();
    for (server, reply) in answers {
        for row in reply.rows {
            let mut obj = Map::new();
            obj.insert("server".into(), Value::String(server.clone()));
            for (&(name, _), cell) in reply.columns.iter().zip(row) {
                let key = name.to_ascii_lowercase().replace(' ', "_");
                let value = match (name, cell) {
                    ("RESULT", Cell::Text(_)) => ("ok".to_owned(), Value::Bool(true)),
                    (_, cell) => (key, cell.json()),
                };
                obj.insert(value.0, value.1);
            }
            rows.push(Value::Object(obj));
        }
    }
    let mut text = serde_json::to_string_pretty(&Value::Array(rows)).unwrap_or_default();
    text.push('\n');
    text
}
