//! The `gearshift` command: `serve` runs the job server with gearmand's
//! familiar flags; `import` moves a gearmand persistent queue into the
//! embedded store or PostgreSQL; `check` reads (and repairs) the embedded
//! store's file; `pin` places a function of a partitioned cluster; `submit`, `work` and `admin` are the
//! everyday client, worker and admin tools, built on the `gearshift-client`
//! library.
//!
//! - `serve` (with `logging`), `import/`, `check` (the queue file,
//!   offline), `pin` (a cluster's placement): the server side.
//! - `docs_cmd`: shell completions and man pages from the clap definitions.
//! - `submit` (and `batch` for `--lines`), `work`, `admin_cmd` (with
//!   `table`): the tools; `bench/` the load tool; `servers` holds what they
//!   share (`--server`, exit codes, readable errors), `top` the live view,
//!   `when` the time and
//!   duration parsers.

mod admin_cmd;
mod batch;
mod bench;
mod check;
mod docs_cmd;
mod hangup;
mod import;
mod logging;
mod pin;
mod sd_notify;
mod serve;
mod servers;
mod submit;
mod table;
mod top;
mod when;
mod work;

use clap::{Parser, Subcommand};

/// Gearshift: a Gearman job server, drop-in for gearmand 1.1.
#[derive(Parser, Debug)]
#[command(name = "gearshift", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the job server.
    Serve(Box<serve::ServeArgs>),
    /// Import a stopped gearmand's libsqlite3, Postgres or MySQL queue into the data directory or PostgreSQL.
    Import(import::ImportArgs),
    /// Check the embedded store's queue file offline; --repair saves what a damaged one holds.
    Check(check::CheckArgs),
    /// Place a function of a partitioned cluster in a partition by hand (or list the pins).
    Pin(pin::PinArgs),
    /// Submit a job (or one per input line) and print its result.
    Submit(submit::SubmitArgs),
    /// Run a worker: a command per job (stdin: workload, stdout: result).
    Work(work::WorkArgs),
    /// Query or manage a server (status, workers, jobs, ...).
    Admin(admin_cmd::AdminArgs),
    /// Measure a server: submit, drain, roundtrip and echo scenarios.
    Bench(bench::BenchArgs),
    /// A live view of a server's functions and workers, refreshed every second.
    Top(top::TopArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(docs_cmd::CompletionsArgs),
    /// Print the man page, or write every page into a directory (--out).
    Man(docs_cmd::ManArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::main(*args),
        Command::Import(args) => import::main(args),
        Command::Check(args) => check::main(args),
        Command::Pin(args) => pin::main(args),
        Command::Submit(args) => submit::main(args),
        Command::Work(args) => work::main(args),
        Command::Admin(args) => admin_cmd::main(args),
        Command::Bench(args) => bench::main(args),
        Command::Top(args) => top::main(args),
        Command::Completions(args) => docs_cmd::completions(args),
        Command::Man(args) => docs_cmd::man(args),
    }
}
