//! The `gearshift` command: `serve` runs the job server with gearmand's
//! familiar flags.

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
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => serve::main(args),
    }
}
