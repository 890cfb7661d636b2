//! What the client-side subcommands (`submit`, `work`, `admin`) share: the
//! `--server` list (repeatable, or `GEARSHIFT_SERVERS`, default
//! `127.0.0.1:4730`), their exit codes, a tokio runtime, and turning a
//! library [`Error`] into one readable line.
//!
//! The library reports "no server reachable" with the last failure as text;
//! to say *which* server is down and why, [`explain`] then tries a plain TCP
//! connection to each configured server (no Gearman traffic).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use gearshift_client::{Error, ServerAddr};

/// Exit code of a job that failed (WORK_FAIL, WORK_EXCEPTION, timeout) or
/// of an admin command the server refused (`ERR …`).
pub const EXIT_FAILED: u8 = 1;
/// Exit code of a usage error or a server that cannot be reached.
pub const EXIT_UNREACHABLE: u8 = 2;

/// The hint appended to "cannot reach" messages.
const HINT: &str = "is a server running? (--server / GEARSHIFT_SERVERS)";

/// `--server host:port`, repeatable.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// Gearman server, `host[:port]` (repeatable; port 4730 by default).
    #[arg(
        short = 's',
        long = "server",
        value_name = "HOST:PORT",
        env = "GEARSHIFT_SERVERS",
        value_delimiter = ',',
        default_value = "127.0.0.1:4730",
        global = true
    )]
    servers: Vec<String>,
}

impl ServerArgs {
    /// The servers, normalised, blanks (from `a,,b` or a trailing comma) dropped.
    pub fn list(&self) -> Vec<ServerAddr> {
        self.servers
            .iter()
            .map(|s| s.trim())
            .filter(|s| !s.is_empty())
            .map(ServerAddr::new)
            .collect()
    }
}

/// A runtime for one subcommand; `threads == 0` means current-thread.
pub fn runtime(threads: usize) -> Result<tokio::runtime::Runtime, ExitCode> {
    let built = if threads == 0 {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
    } else {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_all()
            .build()
    };
    built.map_err(|e| fail(EXIT_UNREACHABLE, &format!("cannot start the runtime: {e}")))
}

/// Prints `gearshift: {msg}` on stderr and returns `code`.
pub fn fail(code: u8, msg: &str) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "gearshift: {msg}");
    ExitCode::from(code)
}

/// True for errors that mean "could not talk to the server" (exit 2),
/// false for the server's or the job's own answers (exit 1).
pub fn is_connection_error(e: &Error) -> bool {
    matches!(
        e,
        Error::Connect { .. }
            | Error::NoServerAvailable { .. }
            | Error::NotConnected
            | Error::ConnectionLost
            | Error::Io(_)
            | Error::NoServers
    )
}

/// The exit code for an error: [`EXIT_UNREACHABLE`] for connection and
/// usage trouble, [`EXIT_FAILED`] otherwise.
pub fn exit_code_for(e: &Error) -> u8 {
    if is_connection_error(e) || matches!(e, Error::InvalidArgument(_)) {
        EXIT_UNREACHABLE
    } else {
        EXIT_FAILED
    }
}

/// `io::Error` as a short lowercase reason ("connection refused").
fn reason(e: &std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused
        | K::ConnectionReset
        | K::ConnectionAborted
        | K::TimedOut
        | K::AddrNotAvailable
        | K::HostUnreachable
        | K::NetworkUnreachable => e.kind().to_string(),
        _ => e.to_string(),
    }
}

/// The "cannot reach" line for one server.
pub fn unreachable(addr: &str, e: &std::io::Error) -> String {
    format!("cannot reach {addr}: {} — {HINT}", reason(e))
}

/// Connects to `addr` over plain TCP (no Gearman traffic), within 2 s.
pub async fn probe(addr: &ServerAddr) -> Result<(), std::io::Error> {
    let attempt = tokio::net::TcpStream::connect(addr.as_str());
    match tokio::time::timeout(Duration::from_secs(2), attempt).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

/// One readable line for `e`; for "no server reachable" each configured
/// server is probed so the message names the ones that are down.
pub async fn explain(e: &Error, servers: &[ServerAddr]) -> String {
    match e {
        Error::Connect { addr, source } => unreachable(addr, source),
        Error::NoServerAvailable { last } => {
            let mut down = Vec::new();
            for s in servers {
                if let Err(io) = probe(s).await {
                    down.push(format!("{s}: {}", reason(&io)));
                }
            }
            if down.is_empty() {
                format!("no server reachable ({last}) — {HINT}")
            } else {
                format!("cannot reach {} — {HINT}", down.join(", "))
            }
        }
        Error::ConnectionLost => "the connection to the server was lost".to_owned(),
        Error::JobException { handle, data } => format!(
            "job {handle} raised an exception: {}",
            String::from_utf8_lossy(data)
        ),
        Error::Admin { message, .. } => format!("server refused: {message}"),
        other => other.to_string(),
    }
}

/// Fails with a readable error unless at least one server accepts a TCP
/// connection; warns on stderr about the others. For the worker, which
/// otherwise retries silently forever.
pub async fn require_one(servers: &[ServerAddr]) -> Result<(), ExitCode> {
    let mut down = Vec::new();
    for s in servers {
        if let Err(e) = probe(s).await {
            down.push(unreachable(s.as_str(), &e));
        }
    }
    if down.len() == servers.len() {
        return Err(fail(EXIT_UNREACHABLE, &down.join("\ngearshift: ")));
    }
    for d in down {
        let _ = writeln!(
            std::io::stderr(),
            "gearshift: warning: {d} (will keep retrying)"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_short() {
        let e = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        assert_eq!(
            unreachable("127.0.0.1:1", &e),
            format!("cannot reach 127.0.0.1:1: connection refused — {HINT}")
        );
    }

    #[test]
    fn blank_servers_dropped() {
        let a = ServerArgs {
            servers: vec!["a".into(), " ".into(), "b:1".into()],
        };
        let names: Vec<String> = a.list().iter().map(|s| s.to_string()).collect();
        assert_eq!(names, ["a:4730", "b:1"]);
    }
}
