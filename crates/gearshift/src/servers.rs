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
use std::sync::atomic::{AtomicBool, Ordering};
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

/// The hint for a plain connection the server closed or answered in TLS.
const TLS_HINT: &str = "pass --tls / --tls-ca FILE";

/// Whether this run connects with TLS (set by [`TlsArgs::config`]), so a
/// lost connection is not blamed on a TLS port when TLS is already on.
static TLS_ON: AtomicBool = AtomicBool::new(false);

/// One `--server` value: an address, or nothing for a blank between commas.
#[derive(Debug, Clone)]
struct ServerEntry(Option<ServerAddr>);

/// Parses a `--server` value; a bad port or address is a usage error.
fn server_entry(text: &str) -> Result<ServerEntry, String> {
    if text.trim().is_empty() {
        return Ok(ServerEntry(None));
    }
    ServerAddr::parse(text)
        .map(|a| ServerEntry(Some(a)))
        .map_err(|e| e.to_string())
}

/// Parses a function name (`-f`): an empty one is a usage error, since the
/// server would queue the job under a name no worker can ask for.
pub fn function_name(text: &str) -> Result<String, String> {
    if text.is_empty() {
        return Err("a function name cannot be empty".to_owned());
    }
    Ok(text.to_owned())
}

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
        value_parser = server_entry,
        global = true
    )]
    servers: Vec<ServerEntry>,
}

impl ServerArgs {
    /// The servers, normalised, blanks (from `a,,b` or a trailing comma) dropped.
    pub fn list(&self) -> Vec<ServerAddr> {
        self.servers.iter().filter_map(|s| s.0.clone()).collect()
    }
}

/// The `--tls` flags as clap sees them; [`TlsArgs`] adds where they came from.
#[derive(Args, Debug, Clone, Default)]
struct TlsFlags {
    /// Connect with TLS; the server's certificate must chain to --tls-ca
    /// (else to the system CA bundle) and name the server's host.
    #[arg(long, global = true)]
    tls: bool,
    /// CA bundle (PEM) to check the server's certificate against; given
    /// here it implies --tls. With --tls and no --tls-ca,
    /// GEARMAND_CA_CERTIFICATE names the file (it never turns TLS on).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "GEARMAND_CA_CERTIFICATE",
        hide_env = true
    )]
    tls_ca: Option<PathBuf>,
    /// Client certificate (PEM), for servers that verify clients; given here
    /// it implies --tls. With --tls and no --tls-cert, GEARMAN_CLIENT_PEM
    /// names the file (it never turns TLS on).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "GEARMAN_CLIENT_PEM",
        hide_env = true
    )]
    tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM); given here it implies
    /// --tls. With --tls and no --tls-key, GEARMAN_CLIENT_KEY names the file
    /// (it never turns TLS on).
    #[arg(
        long,
        global = true,
        value_name = "FILE",
        env = "GEARMAN_CLIENT_KEY",
        hide_env = true
    )]
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
        TLS_ON.store(true, Ordering::Relaxed);
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
            | Error::TlsPort { .. }
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

/// The words for a connection the server closed without a word, with the
/// TLS hint when this run speaks plain TCP (a TLS server may just close).
fn closed_without_answer(what: &str) -> String {
    if TLS_ON.load(Ordering::Relaxed) {
        what.to_owned()
    } else {
        format!("{what} (if that port serves TLS, {TLS_HINT})")
    }
}

/// One readable line for `e`; for "no server reachable" each configured
/// server is probed so the message names the ones that are down.
pub async fn explain(e: &Error, servers: &[ServerAddr]) -> String {
    match e {
        Error::Connect { addr, source } => unreachable(addr, source),
        Error::TlsPort { .. } => format!("{e}: {TLS_HINT}"),
        Error::NoServerAvailable { last } => {
            let mut down = Vec::new();
            for s in servers {
                if let Err(io) = probe(s).await {
                    down.push(format!("{s}: {}", reason(&io)));
                }
            }
            let tls_port = servers.iter().any(|s| {
                *last
                    == Error::TlsPort {
                        addr: s.to_string(),
                    }
                    .to_string()
            });
            if down.is_empty() && last.starts_with("TLS handshake") {
                // Reachable, but TLS failed: the hint would mislead.
                format!("no server reachable: {last}")
            } else if down.is_empty() && tls_port {
                format!("no server reachable: {last}: {TLS_HINT}")
            } else if down.is_empty() && last == &Error::ConnectionLost.to_string() {
                // It accepted the connection: "is a server running?" would mislead.
                let closed =
                    closed_without_answer("the server closed the connection without answering");
                format!("no server reachable: {closed}")
            } else if down.is_empty() {
                format!("no server reachable ({last}) — {HINT}")
            } else {
                format!("cannot reach {} — {HINT}", down.join(", "))
            }
        }
        Error::ConnectionLost => closed_without_answer("the connection to the server was lost"),
        Error::JobException { handle, data } => format!(
            "job {handle} raised an exception: {}",
            String::from_utf8_lossy(data)
        ),
        Error::Admin { .. } => format!("server refused: {}", e.admin_message().unwrap_or_default()),
        Error::Server { code, text } => format!("server refused the request: {code}: {text}"),
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
        } else if let Err(e) = plain_answers(s).await {
            down.push(e);
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

/// Asks a plain server for its `version`: a TLS port answers with a TLS
/// alert, which is an error here; other trouble is left to the worker's
/// own retries (some servers may refuse admin commands).
async fn plain_answers(addr: &ServerAddr) -> Result<(), String> {
    let asked = async {
        let mut admin = AdminClient::connect(addr).await?;
        admin.set_timeout(Some(Duration::from_secs(2)));
        admin.version().await
    };
    match asked.await {
        Err(e @ Error::TlsPort { .. }) => Err(format!("{e}: {TLS_HINT}")),
        _ => Ok(()),
    }
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
        let servers = ["a", " ", "", "b:1", "[::1]:2"]
            .iter()
            .map(|s| server_entry(s).expect("valid"))
            .collect();
        let names: Vec<String> = ServerArgs { servers }
            .list()
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(names, ["a:4730", "b:1", "[::1]:2"]);
    }

    #[test]
    fn bad_servers_and_function_names_are_refused() {
        assert_eq!(
            server_entry("127.0.0.1:99999").expect_err("port out of range"),
            "invalid port 99999 in 127.0.0.1:99999 (1-65535)"
        );
        assert!(function_name("").is_err());
        assert_eq!(function_name("f").as_deref(), Ok("f"));
    }

    #[tokio::test]
    async fn refusals_are_decoded_for_people() {
        let e = Error::Admin {
            kind: gearshift_client::AdminErrorKind::UnknownJob,
            message: "UNKNOWN_JOB job+not+found+or+expired".into(),
        };
        assert_eq!(
            explain(&e, &[]).await,
            "server refused: UNKNOWN_JOB job not found or expired"
        );
    }
}
