//! The `gearshift` command: `serve` runs the job server with gearmand's
//! familiar flags; `import` moves a gearmand persistent queue into the
//! embedded store.

mod import;
mod serve;

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
    Serve(serve::ServeArgs),
    /// Import a stopped gearmand's libsqlite3 queue into the data directory.
    Import(import::ImportArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::main(args),
        Command::Import(args) => import::main(args),
    }
}
