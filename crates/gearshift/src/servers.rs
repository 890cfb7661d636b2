//! What the client-side subcommands (`submit`, `work`, `admin`, `bench`,
//! `top`) share: the `--server` list (repeatable, or `GEARSHIFT_SERVERS`,
//! default `127.0.0.1:4730`), the `--tls` flags, their exit codes, a tokio
//! runtime, and turning a library [`Error`] into one readable line.
//!
//! The library reports "no server reachable" with the last failure as text;
//! to say *which* server is down and why, [`explain`] then tries a plain TCP
//! connection to each configured server (no Gearman traffic).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, Args, FromArgMatches};
use gearshift_client::{AdminClient, Error, ServerAddr, TlsConfig};

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

/// The `--tls` flags as clap sees them; [`TlsArgs`] adds where they came from.
#[derive(Args, Debug, Clone, Default)]
struct TlsFlags {
    /// Connect with TLS; the server's certificate must chain to --tls-ca
    /// (else to the system CA bundle) and name the server's host.
    #[arg(long, global = true)]
    tls: bool,
    /// CA bundle (PEM) to check the server's certificate against; implies --tls.
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "GEARMAND_CA_CERTIFICATE"
    )]
    tls_ca: Option<PathBuf>,
    /// Client certificate (PEM), for servers that verify clients; implies --tls.
    #[arg(long, global = true, value_name = "FILE", env = "GEARMAN_CLIENT_PEM")]
    tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM); implies --tls.
    #[arg(long, global = true, value_name = "FILE", env = "GEARMAN_CLIENT_KEY")]
    tls_key: Option<PathBuf>,
    /// Name the server's certificate must carry (default: each --server's
    /// host); implies --tls.
    #[arg(long, global = true, value_name = "NAME")]
    tls_server_name: Option<String>,
}

/// `--tls`, `--tls-ca`, `--tls-cert`, `--tls-key`, `--tls-server-name`.
///
/// A file flag given on the command line turns TLS on; the same file from
/// libgearman's environment variables (`GEARMAND_CA_CERTIFICATE`,
/// `GEARMAN_CLIENT_PEM`, `GEARMAN_CLIENT_KEY`) is only a fallback used once
/// TLS is on, as in libgearman, so a stray variable never breaks plain TCP.
#[derive(Debug, Clone, Default)]
pub struct TlsArgs {
    flags: TlsFlags,
    /// A `--tls-*` value was given on the command line.
    implied: bool,
}

impl FromArgMatches for TlsArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let flags = TlsFlags::from_arg_matches(m)?;
        let typed = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
        let implied = ["tls_ca", "tls_cert", "tls_key", "tls_server_name"]
            .into_iter()
            .any(typed);
        Ok(TlsArgs { flags, implied })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = TlsArgs::from_arg_matches(m)?;
        Ok(())
    }
}

impl Args for TlsArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        TlsFlags::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        TlsFlags::augment_args_for_update(cmd)
    }
}

impl TlsArgs {
    /// The TLS settings (`None`: plain TCP); a missing or bad file is a
    /// readable error and exit code 2.
    pub fn config(&self) -> Result<Option<TlsConfig>, ExitCode> {
        let f = &self.flags;
        if !f.tls && !self.implied {
            return Ok(None);
        }
        let mut b = TlsConfig::builder();
        if let Some(ca) = &f.tls_ca {
            b = b.ca_file(ca);
        }
        match (&f.tls_cert, &f.tls_key) {
            (Some(cert), Some(key)) => b = b.client_cert_files(cert, key),
            (None, None) => {}
            (Some(_), None) => {
                return Err(fail(
                    EXIT_UNREACHABLE,
                    "--tls-cert needs --tls-key (or GEARMAN_CLIENT_KEY)",
                ))
            }
            (None, Some(_)) => {
                return Err(fail(
                    EXIT_UNREACHABLE,
                    "--tls-key needs --tls-cert (or GEARMAN_CLIENT_PEM)",
                ))
            }
        }
        if let Some(name) = &f.tls_server_name {
            b = b.server_name(name);
        }
        b.build()
            .map(Some)
            .map_err(|e| fail(EXIT_UNREACHABLE, &e.to_string()))
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
            | Error::TlsHandshake { .. }
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
    if is_connection_error(e) || matches!(e, Error::InvalidArgument(_) | Error::TlsConfig(_)) {
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
            if down.is_empty() && last.starts_with("TLS handshake") {
                // Reachable, but TLS failed: the hint would mislead.
                format!("no server reachable: {last}")
            } else if down.is_empty() {
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
/// connection (and, with `tls`, a TLS handshake); warns on stderr about
/// the others. For the worker, which otherwise retries silently forever.
pub async fn require_one(servers: &[ServerAddr], tls: Option<&TlsConfig>) -> Result<(), ExitCode> {
    let mut down = Vec::new();
    for s in servers {
        if let Err(e) = probe(s).await {
            down.push(unreachable(s.as_str(), &e));
        } else if let Some(tls) = tls {
            // An admin connection is a handshake without Gearman traffic.
            if let Err(e) = AdminClient::connect_with(s, Some(tls)).await {
                down.push(e.to_string());
            }
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
