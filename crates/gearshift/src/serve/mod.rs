//! `gearshift serve`: parses gearmand-style flags, sets up logging, and runs
//! the server until SIGINT/SIGTERM or an admin `shutdown`. A first signal
//! stops gracefully; a second exits at once.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;

use std::time::Duration;

use crate::logging::LogFile;
use clap::Args;
use gearshift_core::CoreConfig;
use gearshift_server::allow::AllowList;
use gearshift_server::cluster::ClusterConfig;
use gearshift_server::tls::{TlsFiles, TlsServer};
use gearshift_server::{policy_file, LocalIo, Server, ServerConfig, StoreConfig};
use gearshift_store::Durability;

use crate::logging::LogFormat;

mod bridges;
mod etcd;
mod gearmonkey;
mod link_tls;
mod node;
mod values;
use values::{
    durability_word, level, parse_bytes, parse_durability, parse_idle, parse_size, parse_timeout,
};
pub(crate) use values::{is_postgres_url, parse_store};

/// Flags of `gearshift serve`, named as gearmand names them.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Port to listen on.
    #[arg(short = 'p', long, env = "GEARMAND_PORT", default_value_t = 4730)]
    port: u16,
    /// Address to listen on (repeatable; `host` or `host:port`). Default is
    /// loopback only; use `-L 0.0.0.0` (and `-L ::`) to serve other hosts.
    #[arg(short = 'L', long = "listen", default_value = "127.0.0.1")]
    listen: Vec<String>,
    /// Requeues before a job is failed for good (0 = unlimited, as gearmand 1.1).
    #[arg(short = 'j', long, default_value_t = 0)]
    job_retries: u32,
    /// Job handle prefix (default `H:<hostname>`); handles are `<prefix>:<n>`.
    #[arg(long)]
    job_handle_prefix: Option<String>,
    /// Sleeping workers woken per new job (0 = all).
    #[arg(short = 'w', long, default_value_t = 0)]
    worker_wakeup: u32,
    /// Forward WORK_EXCEPTION to every client, not only those that asked.
    #[arg(long)]
    exceptions: bool,
    /// Log destination: a file path, `stderr` or `none`.
    #[arg(short = 'l', long, default_value = "stderr")]
    log_file: String,
    /// Log lines: `text`, or `json` (one object per line).
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Log level: FATAL, ALERT, CRITICAL, ERROR, WARNING, NOTICE, INFO, DEBUG.
    #[arg(long, default_value = "INFO")]
    verbose: String,
    /// Largest packet body accepted, in bytes (suffixes K, M, G allowed).
    #[arg(long, default_value = "64M", value_parser = parse_size)]
    max_packet_size: usize,
    /// Most bytes of job data (unique ids, payloads, reducers) the server
    /// holds before it refuses new submissions with ERROR QUEUE_ERROR
    /// (K, M, G suffixes; 0 = no cap).
    #[arg(long, default_value = "0", value_parser = parse_bytes)]
    max_queue_memory: u64,
    /// Networks (besides loopback) whose peers may send admin commands that
    /// change things (cancel, drop, maxqueue, shutdown, dead set, pause)
    /// and HTTP changes without the token: `10.0.0.0/8`, `192.0.2.7`
    /// (repeatable, or comma-separated; `0.0.0.0/0,::/0` for anyone).
    #[arg(long, value_delimiter = ',')]
    admin_allow: Vec<String>,
    /// Speak TLS on the Gearman port: every `-L` address, or only the
    /// `--ssl-listen` ones when given. Needs --ssl-certificate and --ssl-key.
    #[arg(long)]
    ssl: bool,
    /// The server's certificate chain (PEM).
    #[arg(long, env = "GEARMAND_SERVER_PEM", value_name = "FILE")]
    ssl_certificate: Option<PathBuf>,
    /// The server's private key (PEM).
    #[arg(long, env = "GEARMAND_SERVER_KEY", value_name = "FILE")]
    ssl_key: Option<PathBuf>,
    /// CA certificates (PEM) that sign client certificates; a client that
    /// presents one is named by its subject in `workers` and the API.
    #[arg(long, env = "GEARMAND_CA_CERTIFICATE", value_name = "FILE")]
    ssl_ca_file: Option<PathBuf>,
    /// Refuse TLS clients without a certificate signed by --ssl-ca-file.
    #[arg(long)]
    ssl_verify_client: bool,
    /// TLS listen address `HOST:PORT` (repeatable; implies --ssl): TLS
    /// there, plaintext on the `-L` addresses.
    #[arg(long, value_name = "HOST:PORT")]
    ssl_listen: Vec<String>,
    /// Close a connection that sends nothing this long after connecting
    /// (e.g. `30s`; `0`: never).
    #[arg(long, default_value = "0", value_parser = parse_idle)]
    idle_timeout: Duration,
    /// Most simultaneous connections; more wait in the listen backlog.
    #[arg(long, default_value_t = 100_000)]
    max_connections: usize,
    /// Where jobs are kept: `log` (the embedded durable store), `memory`
    /// (gearmand's default: a restart loses every job) or a PostgreSQL URL
    /// (`postgres://user:pass@host:port/db`; PGHOST, PGUSER, PGPASSWORD,
    /// PGDATABASE, PGPORT fill what it leaves out). Every node started on
    /// the same database is a member of one cluster (docs/cluster.md).
    #[arg(long, env = "GEARSHIFT_STORE", hide_env_values = true, default_value = "log", value_parser = parse_store)]
    store: String,
    /// Directory of the embedded store (default: `$XDG_DATA_HOME/gearshift`,
    /// else `~/.local/share/gearshift`).
    #[arg(long, env = "GEARSHIFT_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// `fsync` (acknowledged means on disk) or `interval=<ms>` (written at
    /// once, forced to disk at that interval: a power loss can take at most
    /// that much).
    #[arg(long, default_value = "fsync", value_parser = parse_durability)]
    durability: Durability,
    /// Write the process id to this file.
    #[arg(short = 'P', long)]
    pid_file: Option<String>,
    /// Accepted for gearmand compatibility; Gearshift sizes its own threads.
    #[arg(short = 't', long, hide = true)]
    threads: Option<usize>,
    /// Threads that run connections (framing, parsing, encoding, socket
    /// I/O). 0 (default) follows the machine: 1 on one or two cores, where
    /// that thread also runs the job routing; else one per core but one, at
    /// most 16, handing work in batches to one routing thread.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(0..=256))]
    io_threads: u16,
    /// Unwritten output (bytes; K, M, G suffixes) past which a connection is
    /// not read until it drains to half; past twice that plus
    /// --max-packet-size it is closed (its peer does not read).
    #[arg(long, default_value = "4M", value_parser = parse_size)]
    max_output: usize,
    /// Per-function policy file (TOML: retries, timeouts, kept results; see
    /// docs/config.md). Reloaded on SIGHUP; a bad file on reload keeps the
    /// policies in force.
    #[arg(long, env = "GEARSHIFT_CONFIG")]
    config: Option<PathBuf>,
    /// Accepted for gearmand compatibility; round-robin is always on.
    #[arg(short = 'R', long, hide = true)]
    round_robin: bool,
    /// HTTP listener (metrics, JSON API, dashboard; docs/http.md):
    /// `ADDR:PORT`, or `off`. Default: the first -L address, Gearman port + 1
    /// (port 0 with -p 0).
    #[arg(long)]
    http: Option<String>,
    /// File whose first line is the token HTTP changes must carry.
    #[arg(long)]
    http_token_file: Option<PathBuf>,
    /// Let any HTTP peer read (GET) without the token.
    #[arg(long)]
    http_public_read: bool,
    /// Serve the HTTP port over HTTPS only, with --ssl-certificate and
    /// --ssl-key (and --ssl-ca-file's client certificates, if given).
    #[arg(long)]
    http_tls: bool,
    /// This node's name in a cluster (PostgreSQL store); default the
    /// address other nodes reach it at. With --etcd, its name in the
    /// registry's `gearshift-<node>` entries (default `<host>-<port>`).
    #[arg(long)]
    node_name: Option<String>,
    /// `HOST:PORT` other cluster nodes reach this node's Gearman listener
    /// at; default the first -L address (the host name for 0.0.0.0).
    #[arg(long)]
    advertise: Option<String>,
    /// How long a cluster's leader may go without heartbeating before
    /// another node takes over its jobs (e.g. `5s`, `1500ms`).
    #[arg(long, default_value = "5s", value_parser = parse_timeout)]
    node_timeout: Duration,
    /// Experimental: every node of a PostgreSQL cluster owns a share of
    /// the partitions (each function lives in one) instead of one node
    /// leading them all (docs/cluster.md, "Partitioned nodes").
    #[arg(long)]
    partitioned: bool,
    #[command(flatten)]
    link_tls: link_tls::LinkTlsArgs,
    /// Bridge GearMonkey jobs on this Redis (docs/gearmonkey.md):
    /// `redis://[user:pass@]host:port[/db]` or `rediss://...`.
    #[arg(long, value_name = "URL")]
    gearmonkey: Option<String>,
    /// Functions the GearMonkey bridge serves, as globs (repeatable;
    /// default all).
    #[arg(long, value_name = "GLOB")]
    gearmonkey_match: Vec<String>,
    /// CA bundle (PEM) a `rediss://` GearMonkey Redis's certificate must
    /// chain to (default: the public roots).
    #[arg(long, value_name = "FILE")]
    gearmonkey_ca: Option<PathBuf>,
    #[command(flatten)]
    etcd: etcd::EtcdArgs,
}

/// The HTTP listener's settings from the flags; `None`: off.
fn http_config(
    args: &ServeArgs,
    listen: &[SocketAddr],
) -> Result<Option<gearshift_server::HttpConfig>, String> {
    let addr = match args.http.as_deref() {
        Some("off") => return Ok(None),
        Some(a) => a
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve --http address {a:?}: {e}"))?
            .next()
            .ok_or_else(|| format!("--http address {a:?} resolves to nothing"))?,
        None => {
            let Some(first) = listen.first() else {
                return Ok(None);
            };
            let port = if first.port() == 0 {
                0
            } else {
                first
                    .port()
                    .checked_add(1)
                    .ok_or("the Gearman port is 65535: pass --http ADDR:PORT or --http off")?
            };
            SocketAddr::new(first.ip(), port)
        }
    };
    let token = match &args.http_token_file {
        None => None,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --http-token-file {}: {e}", path.display()))?;
            let token = text.lines().next().unwrap_or("").trim().to_owned();
            if token.is_empty() {
                return Err(format!(
                    "--http-token-file {}: the first line is empty",
                    path.display()
                ));
            }
            Some(token)
        }
    };
    let mut cfg = gearshift_server::HttpConfig::new(addr);
    cfg.token = token;
    cfg.public_read = args.http_public_read;
    Ok(Some(cfg))
}

/// The default data directory, as the README names it.
pub fn default_data_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("gearshift");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".local/share/gearshift");
    }
    PathBuf::from("gearshift-data")
}

/// The default job handle prefix, as gearmand's: `H:<hostname>`.
pub fn default_handle_prefix() -> String {
    format!("H:{}", gethostname::gethostname().to_string_lossy())
}

fn listen_addrs(args: &ServeArgs) -> Result<Vec<SocketAddr>, String> {
    let mut out = Vec::new();
    for l in &args.listen {
        if let Ok(a) = l.parse::<SocketAddr>() {
            out.push(a);
        } else if let Ok(ip) = l.trim_matches(['[', ']']).parse::<IpAddr>() {
            out.push(SocketAddr::new(ip, args.port));
        } else {
            let found = (l.as_str(), args.port)
                .to_socket_addrs()
                .map_err(|e| format!("cannot resolve listen address {l:?}: {e}"))?;
            out.extend(found);
        }
    }
    Ok(out)
}

/// The TLS settings: with `--ssl` and no `--ssl-listen`, every `-L`
/// address speaks TLS (as gearmand's `--ssl`); with `--ssl-listen`, those
/// addresses do and the `-L` ones stay plaintext.
fn tls_config(
    args: &ServeArgs,
    listen: &mut Vec<SocketAddr>,
) -> Result<(Option<TlsServer>, Vec<SocketAddr>), String> {
    let gearman_tls = args.ssl || !args.ssl_listen.is_empty();
    if !gearman_tls && !args.http_tls {
        for (flag, set) in [("--ssl-verify-client", args.ssl_verify_client)] {
            if set {
                return Err(format!("{flag} needs --ssl or --ssl-listen"));
            }
        }
        return Ok((None, Vec::new()));
    }
    let (Some(certificate), Some(key)) = (&args.ssl_certificate, &args.ssl_key) else {
        return Err("--ssl and --http-tls need --ssl-certificate and --ssl-key (or GEARMAND_SERVER_PEM and GEARMAND_SERVER_KEY); refusing to serve plaintext instead".into());
    };
    let files = TlsFiles {
        certificate: certificate.clone(),
        key: key.clone(),
        ca: args.ssl_ca_file.clone(),
        verify_client: args.ssl_verify_client,
    };
    let tls = TlsServer::load(&files)?;
    let tls_listen = if !gearman_tls {
        Vec::new()
    } else if args.ssl_listen.is_empty() {
        std::mem::take(listen)
    } else {
        let mut out = Vec::new();
        for l in &args.ssl_listen {
            let found = l
                .to_socket_addrs()
                .map_err(|e| format!("--ssl-listen {l:?}: {e} (give HOST:PORT)"))?;
            out.extend(found);
        }
        out
    };
    Ok((Some(tls), tls_listen))
}

/// Runs the server; the exit code says whether it started.
pub fn main(args: ServeArgs) -> ExitCode {
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gearshift: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: ServeArgs) -> Result<(), String> {
    let filter = level(&args.verbose)?;
    let log_file = crate::logging::init(&args.log_file, args.log_format, filter)?;
    let to_file = log_file.is_some();
    // A server that cannot start says why in its log file too, where an
    // operator looking at the log of a service that stopped will look.
    serve(args, log_file).inspect_err(|e| {
        if to_file {
            tracing::error!("{e}");
        }
    })
}

fn serve(args: ServeArgs, log_file: Option<LogFile>) -> Result<(), String> {
    let prefix = args
        .job_handle_prefix
        .clone()
        .unwrap_or_else(default_handle_prefix);
    let core = CoreConfig {
        handle_prefix: prefix,
        job_retries: args.job_retries,
        worker_wakeup: args.worker_wakeup,
        exceptions: args.exceptions,
        pid: std::process::id(),
        version: CoreConfig::default().version,
        verbose: args.verbose.to_ascii_uppercase(),
        durable: false,
        max_job_bytes: args.max_queue_memory,
    };
    let store = match args.store.as_str() {
        "memory" => StoreConfig::Memory,
        url if is_postgres_url(url) => StoreConfig::Postgres {
            url: url.to_owned(),
        },
        _ => StoreConfig::Log {
            dir: args.data_dir.clone().unwrap_or_else(default_data_dir),
            durability: args.durability,
        },
    };
    let admin_allow = AllowList::parse(args.admin_allow.iter().map(String::as_str))
        .map_err(|e| format!("--admin-allow: {e}"))?;
    let jobs = match &args.config {
        Some(path) => {
            let file = policy_file::load(path).map_err(|e| e.to_string())?;
            tracing::info!(
                rules = file.policies.rules.len(),
                schedules = file.schedules.len(),
                "policies loaded from {}",
                path.display()
            );
            file
        }
        None => policy_file::PolicyFile::default(),
    };
    let gearmonkey_file = jobs.gearmonkey.clone();
    let etcd_file = jobs.etcd.clone();
    let jobs = crate::hangup::reload_of(jobs, &admin_allow);
    let mut listen = listen_addrs(&args)?;
    let (tls, tls_listen) = tls_config(&args, &mut listen)?;
    let mut http = http_config(&args, &listen)?;
    match http.as_mut() {
        Some(h) if args.http_tls => h.tls = tls.clone(),
        None if args.http_tls => {
            return Err("--http-tls needs the HTTP listener (not --http off)".into())
        }
        _ => {}
    }
    // The certificate served HTTPS alone leaves the Gearman port plaintext.
    let tls = tls.filter(|_| args.ssl || !args.ssl_listen.is_empty());
    let access = jobs.access.clone().unwrap_or_default();
    let cfg = ServerConfig {
        http,
        policies: jobs.policies,
        schedules: jobs.schedules,
        listen,
        max_packet_size: args.max_packet_size,
        max_connections: args.max_connections,
        core,
        store,
        io_threads: usize::from(args.io_threads),
        max_output: args.max_output,
        access,
        tls,
        tls_listen,
        idle_timeout: (!args.idle_timeout.is_zero()).then_some(args.idle_timeout),
    };
    if let Some(path) = &args.pid_file {
        std::fs::write(path, format!("{}\n", std::process::id()))
            .map_err(|e| format!("cannot write pid file {path}: {e}"))?;
    }
    // This runtime only accepts connections and waits for signals; the
    // server starts its own I/O threads. A partitioned node also splits
    // its connections' packets here: past two I/O threads it gets a thread
    // per I/O thread (on fewer cores one thread costs less per job).
    let routes = cfg.resolved_io_threads();
    let rt = match args.partitioned && routes > 2 {
        false => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        true => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(routes)
            .thread_name("gearshift-route")
            .enable_all()
            .build(),
    }
    .map_err(|e| format!("cannot start runtime: {e}"))?;
    let cfg_store = cfg.store.clone();
    let cfg_threads = cfg.resolved_io_threads();
    let pid_file = args.pid_file.clone();
    let config_path = args.config.clone();
    let gearmonkey = gearmonkey::config(&args, gearmonkey_file)?;
    let etcd = etcd::config(&args.etcd, etcd_file, args.node_name.as_deref())?;
    if args.http_tls && args.partitioned && (!args.link_tls.given() || args.link_tls.allows_clear())
    {
        return Err("--http-tls on partitioned nodes needs --link-tls-* (and not --link-tls-allow-clear): their HTTP calls to each other go in node TLS".into());
    }
    if args.link_tls.given() && !matches!(cfg.store, StoreConfig::Postgres { .. }) {
        return Err("--link-tls-ca is for cluster nodes (a PostgreSQL store)".into());
    }
    if matches!(cfg.store, StoreConfig::Postgres { .. }) {
        // The bridge follows the cluster through the node's HTTP API, in
        // plain HTTP over loopback.
        if etcd.is_some() && args.partitioned && (cfg.http.is_none() || args.http_tls) {
            return Err("--etcd on a partitioned node follows the cluster through the node's plain HTTP API: leave --http on, without --http-tls".into());
        }
        let mut cluster = ClusterConfig {
            name: args.node_name.clone(),
            advertise: args.advertise.clone(),
            node_timeout: args.node_timeout,
            partitioned: args.partitioned,
            link_tls: args.link_tls.load()?,
            local_io: None,
        };
        let pid_file = args.pid_file.clone();
        let config = args.config.clone();
        // A partitioned node whose job server has one I/O thread runs it on
        // the router's thread: a packet for its own partitions then wakes
        // no other thread.
        let result = match args.partitioned && routes == 1 {
            true => tokio::task::LocalSet::new().block_on(&rt, async move {
                cluster.local_io = Some(LocalIo::start());
                node::run_node(cfg, cluster, gearmonkey, etcd, pid_file, config, log_file).await
            }),
            false => rt.block_on(node::run_node(
                cfg, cluster, gearmonkey, etcd, pid_file, config, log_file,
            )),
        };
        if let Some(path) = &args.pid_file {
            let _ = std::fs::remove_file(path);
        }
        return result;
    }
    let certs = crate::hangup::Certs::of(&cfg, None);
    let result = rt.block_on(async move {
        let server = Server::bind(cfg)
            .await
            .map_err(|e| crate::check::explain(e, &cfg_store))?;
        match &cfg_store {
            StoreConfig::Log { dir, durability } => {
                tracing::info!(
                    "jobs are stored in {} (--durability {})",
                    dir.display(),
                    durability_word(durability)
                )
            }
            StoreConfig::Memory => {
                tracing::info!("jobs are kept in memory only (--store memory): a restart loses them")
            }
            StoreConfig::Postgres { .. } => {
                tracing::info!("jobs are stored in PostgreSQL at {}", cfg_store.describe())
            }
        }
        let addrs = server.local_addrs();
        for a in &addrs {
            tracing::info!("listening on {a}");
        }
        for a in server.tls_addrs() {
            tracing::info!("listening on {a} (TLS)");
        }
        if let Some(a) = server.http_addr() {
            tracing::info!("http listening on {a}");
        }
        tracing::info!(io_threads = cfg_threads, "connection threads");
        if addrs.iter().chain(&server.tls_addrs()).all(|a| a.ip().is_loopback()) {
            tracing::info!("only loopback clients can connect; pass -L 0.0.0.0 (and -L ::) to serve other hosts");
        }
        let (bridge, reroute) = gearmonkey::prepare(gearmonkey, &addrs, server.http_addr(), &cfg_store)?.unzip();
        let bridge = bridge.and_then(|b| b.spawn());
        let on_gearmonkey = reroute.map(|r| -> crate::hangup::OnGearmonkey { Box::new(move |d| r.apply(d)) });
        tokio::spawn(crate::hangup::on_hangup(config_path, admin_allow, server.reloader(), log_file, on_gearmonkey, certs));
        let etcd_bridge = etcd::prepare(etcd, &addrs)?;
        let etcd_bridge = etcd_bridge.and_then(|b| etcd::spawn(&b, server.events(), server.control()));
        let stop = bridges::stop_first(&[&bridge, &etcd_bridge], shutdown_signal(pid_file));
        crate::sd_notify::notify("READY=1");
        server.run(stop).await;
        bridges::stop(bridge).await;
        bridges::stop(etcd_bridge).await;
        Ok::<(), String>(())
    });
    if let Some(path) = &args.pid_file {
        let _ = std::fs::remove_file(path);
    }
    result
}

/// Resolves at the first SIGINT/SIGTERM, which starts the graceful stop
/// (accept nothing new, exit once running jobs finish), and leaves a task
/// that exits the process at once on the second.
fn shutdown_signal(pid_file: Option<String>) -> impl std::future::Future<Output = ()> {
    // Installed now, before the server says it is ready: a signal sent
    // right after that must start the graceful stop, not kill the process.
    let signals = StopSignals::install();
    async move {
        let Some(mut signals) = signals else {
            tracing::error!(
                "cannot install signal handlers: only an admin `shutdown` stops the server"
            );
            return std::future::pending().await;
        };
        let (name, _) = signals.next().await;
        tracing::info!(
            "{name} received: stopping once running jobs finish (signal again to exit at once)"
        );
        crate::sd_notify::notify("STOPPING=1");
        // The streams stay registered in this task: dropped, they would leave
        // tokio's handler catching (and ignoring) every later signal.
        tokio::spawn(async move {
            let (name, code) = signals.next().await;
            tracing::warn!("{name} received again: exiting at once with {code}");
            if let Some(path) = &pid_file {
                let _ = std::fs::remove_file(path);
            }
            // No flush: the log store acknowledges a job only once written and
            // cuts a torn last write at replay, so this is no worse than a crash.
            std::process::exit(code);
        });
    }
}

/// SIGINT and SIGTERM, as streams.
struct StopSignals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
}

impl StopSignals {
    fn install() -> Option<StopSignals> {
        use tokio::signal::unix::{signal, SignalKind};
        Some(StopSignals {
            int: signal(SignalKind::interrupt()).ok()?,
            term: signal(SignalKind::terminate()).ok()?,
        })
    }

    /// The next signal: its name, and the exit code it gives as a second
    /// signal (128 + its number, as a shell reports a process it killed).
    async fn next(&mut self) -> (&'static str, i32) {
        tokio::select! {
            _ = self.int.recv() => ("SIGINT", 130),
            _ = self.term.recv() => ("SIGTERM", 143),
        }
    }
}
