//! `gearshift completions SHELL` and `gearshift man`: shell completions and
//! man pages generated from the same clap definitions as the flags, so
//! they never drift from `--help`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory};

/// Flags of `gearshift completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Flags of `gearshift man`.
#[derive(Args, Debug)]
pub struct ManArgs {
    /// Write `gearshift.1` and one page per subcommand (`gearshift-serve.1`,
    /// ...) into this directory; without it, print `gearshift.1`.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Prints the completion script.
pub fn completions(args: CompletionsArgs) -> ExitCode {
    let mut cmd = crate::Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "gearshift", &mut script);
    print(&script)
}

/// Prints or writes the man pages.
pub fn man(args: ManArgs) -> ExitCode {
    let cmd = crate::Cli::command();
    let Some(dir) = &args.out else {
        let mut page = Vec::new();
        if let Err(e) = clap_mangen::Man::new(cmd).render(&mut page) {
            eprintln!("gearshift: cannot render the man page: {e}");
            return ExitCode::FAILURE;
        }
        return print(&page);
    };
    match std::fs::create_dir_all(dir).and_then(|()| clap_mangen::generate_to(cmd, dir)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!(
                "gearshift: cannot write the man pages into {}: {e}",
                dir.display()
            );
            ExitCode::FAILURE
        }
    }
}

/// Writes to stdout; a reader that went away (`| head`) is not an error.
fn print(bytes: &[u8]) -> ExitCode {
    use std::io::Write;
    match std::io::stdout().write_all(bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gearshift: cannot write to stdout: {e}");
            ExitCode::FAILURE
        }
    }
}
