//! The bridge itself (feature `etcd`): settings checked at start, files
//! read, and the server's events forwarded.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gearshift_etcd::keys::Layout;
use gearshift_etcd::server::{Api, Server};
use gearshift_etcd::stats::Stats;
use gearshift_etcd::BridgeConfig;
use gearshift_server::events::EventBus;
use gearshift_server::policy_file::EtcdDecl;
use tokio::sync::watch;

use super::EtcdArgs;
use crate::serve::bridges::{loopback, Running};

/// The checked settings, and this node's name if `--node-name` gave one.
pub(in crate::serve) type Config = (BridgeConfig, Option<String>);

fn read(flag: &str, path: &std::path::Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{flag} {}: {e}", path.display()))
}

/// The settings from the flags and the `[etcd]` table (flags win); `None`
/// when neither asks for the bridge.
pub(in crate::serve) fn config(
    args: &EtcdArgs,
    file: Option<EtcdDecl>,
    node: Option<&str>,
) -> Result<Option<Config>, String> {
    if !args.wanted(file.as_ref()) {
        return Ok(None);
    }
    let file = file.unwrap_or_default();
    let endpoints = if args.etcd.is_empty() {
        file.endpoints
    } else {
        args.etcd.clone()
    };
    if endpoints.is_empty() {
        return Err("[etcd] needs endpoints (or --etcd URL)".into());
    }
    let path = |flag: &Option<std::path::PathBuf>, file: Option<String>| {
        flag.clone().or(file.map(std::path::PathBuf::from))
    };
    let ca = match path(&args.etcd_ca, file.ca) {
        Some(p) => Some(read("--etcd-ca", &p)?),
        None => None,
    };
    let identity = match (
        path(&args.etcd_cert, file.cert),
        path(&args.etcd_key, file.key),
    ) {
        (Some(c), Some(k)) => Some((read("--etcd-cert", &c)?, read("--etcd-key", &k)?)),
        (None, None) => None,
        _ => return Err("--etcd-cert and --etcd-key go together".into()),
    };
    let user = match (
        args.etcd_user.clone().or(file.user),
        args.etcd_password.clone().or(file.password),
    ) {
        (Some(u), Some(p)) => Some((u, p)),
        (None, None) => None,
        (Some(_), None) => {
            return Err("--etcd-user needs --etcd-password (or GEARSHIFT_ETCD_PASSWORD)".into())
        }
        (None, Some(_)) => return Err("--etcd-password needs --etcd-user".into()),
    };
    let layout_word = args
        .etcd_layout
        .clone()
        .or(file.layout)
        .unwrap_or_else(|| "single".into());
    let layout = Layout::parse(&layout_word)
        .ok_or_else(|| format!("--etcd-layout {layout_word}: single or split"))?;
    let config = BridgeConfig {
        endpoints,
        prefix: args
            .etcd_prefix
            .clone()
            .or(file.prefix)
            .unwrap_or_else(|| "/".into()),
        user,
        ca,
        identity,
        function_field: args
            .etcd_function_field
            .clone()
            .or(file.function_field)
            .unwrap_or_else(|| "Function".into()),
        default_function: args
            .etcd_default_function
            .clone()
            .or(file.default_function)
            .unwrap_or_else(|| "etcd-job".into()),
        harvest_after: Duration::from_secs(
            args.etcd_harvest_after.or(file.harvest_after).unwrap_or(60),
        ),
        layout,
        node: String::new(),
        gearman: SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    gearshift_etcd::check(&config).map_err(|e| e.to_string())?;
    Ok(Some((config, node.map(str::to_owned))))
}

/// The bridge, ready to run beside a job server: once on a single server,
/// each time a leader-mode cluster node leads.
pub(in crate::serve) struct Bridge {
    cfg: BridgeConfig,
    stats: Arc<Stats>,
}

/// Readies the bridge once the server listens at `addrs`: its Gearman
/// address and node name, and its counters in `/metrics`.
pub(in crate::serve) fn prepare(
    config: Option<Config>,
    addrs: &[SocketAddr],
) -> Result<Option<Bridge>, String> {
    let Some((mut cfg, node)) = config else {
        return Ok(None);
    };
    let gearman = loopback(addrs).ok_or("--etcd needs a plaintext Gearman listener to speak to")?;
    cfg.gearman = gearman;
    // The node names this Gearshift's entries: stable across restarts on
    // the same host and port, distinct for two servers on one host.
    cfg.node = node.unwrap_or_else(|| {
        format!(
            "{}-{}",
            gethostname::gethostname().to_string_lossy(),
            gearman.port()
        )
    });
    let stats = Arc::new(Stats::default());
    let section = stats.clone();
    gearshift_server::http::extra_metrics::register(Box::new(move |out| section.prometheus(out)));
    Ok(Some(Bridge { cfg, stats }))
}

/// Starts the bridge beside the job server whose events and core it
/// follows.
pub(in crate::serve) fn spawn(
    bridge: &Bridge,
    bus: Arc<EventBus>,
    control: gearshift_server::Control,
) -> Running {
    let events = gearshift_etcd::events::forward(&bus);
    start(bridge, events, Server::Core(control))
}

/// Starts the bridge on a partitioned node, following the cluster's
/// workers and events through the node's HTTP API at `http` (`token`: the
/// node's, which other nodes may want when asked for their part).
pub(in crate::serve) fn spawn_on_partitioned(
    bridge: &Bridge,
    http: SocketAddr,
    token: Option<String>,
) -> Running {
    let api = Api::new(bridge_side(http), token);
    start(bridge, api.events(), Server::Api(api))
}

/// Where a bridge in this process reaches a listener bound to `addr`.
fn bridge_side(addr: SocketAddr) -> SocketAddr {
    loopback(&[addr]).unwrap_or(addr)
}

fn start(
    bridge: &Bridge,
    events: tokio::sync::mpsc::UnboundedReceiver<gearshift_etcd::ServerEvent>,
    server: Server,
) -> Running {
    let (tx, rx) = watch::channel(false);
    let (cfg, stats) = (bridge.cfg.clone(), bridge.stats.clone());
    let task = tokio::spawn(async move {
        if let Err(e) = gearshift_etcd::run(cfg, stats, events, server, rx).await {
            tracing::error!("{e}");
        }
    });
    Some((tx, task))
}
