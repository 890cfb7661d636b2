//! `--gearmonkey`: starts the GearMonkey bridge (crate
//! `gearshift-gearmonkey`) beside the server, speaking Gearman to the
//! server's own first plaintext listener, and stops it after the server;
//! its counters join `/metrics`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use gearshift_gearmonkey::stats::Stats;
use gearshift_gearmonkey::BridgeConfig;
use gearshift_server::policy_file::GearmonkeyDecl;
use gearshift_server::StoreConfig;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::ServeArgs;

/// The bridge's configuration from the flags and the config file's
/// `[[gearmonkey]]` sections (flags win for the URL and CA; the globs of
/// both apply), checked; its Gearman address is filled in once the server
/// listens. `None` when neither names a Redis.
pub(super) fn config(
    args: &ServeArgs,
    file: Option<GearmonkeyDecl>,
) -> Result<Option<BridgeConfig>, String> {
    let file = file.unwrap_or_default();
    let Some(url) = args.gearmonkey.clone().or(file.url) else {
        if !args.gearmonkey_match.is_empty()
            || args.gearmonkey_ca.is_some()
            || !file.matches.is_empty()
        {
            return Err("--gearmonkey-match, --gearmonkey-ca and [[gearmonkey]] need a Redis: --gearmonkey URL or `url` in [[gearmonkey]]".into());
        }
        return Ok(None);
    };
    let ca_path = args
        .gearmonkey_ca
        .clone()
        .or(file.ca.map(std::path::PathBuf::from));
    let ca = match &ca_path {
        Some(path) => Some(
            std::fs::read(path).map_err(|e| format!("--gearmonkey-ca {}: {e}", path.display()))?,
        ),
        None => None,
    };
    let routed = file.routed;
    let mut matches = args.gearmonkey_match.clone();
    matches.extend(file.matches);
    let config = BridgeConfig {
        url,
        matches,
        routed,
        gearman: SocketAddr::from(([127, 0, 0, 1], 0)),
        ca,
        instance: String::new(),
        http: None,
    };
    gearshift_gearmonkey::check(&config).map_err(|e| e.to_string())?;
    Ok(Some(config))
}

/// A running bridge: its stop switch and task.
pub(super) type Running = Option<(watch::Sender<bool>, JoinHandle<()>)>;

/// This server's name in the roll call's shares: its host and data
/// directory, the same across restarts; a server without one (memory store)
/// gets a new name per start, so its previous run's share waits out the
/// liveness time instead.
fn instance(store: &StoreConfig) -> String {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    match store {
        StoreConfig::Log { dir, .. } => {
            let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
            format!("{host}:{}", dir.display())
        }
        _ => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            format!("{host}:pid{}:{nanos}", std::process::id())
        }
    }
}

/// A listener's address as the bridge reaches it: a wildcard one over loopback.
fn reachable(addr: SocketAddr) -> SocketAddr {
    match addr.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), addr.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv6Addr::LOCALHOST.into(), addr.port())
        }
        _ => addr,
    }
}

/// Starts the bridge once the server listens at `addrs` (and `http`, whose
/// event stream wakes it).
pub(super) fn start(
    config: Option<BridgeConfig>,
    addrs: &[SocketAddr],
    http: Option<SocketAddr>,
    store: &StoreConfig,
) -> Result<Running, String> {
    let Some(mut cfg) = config else {
        return Ok(None);
    };
    let Some(first) = addrs.first() else {
        return Err("--gearmonkey needs a plaintext Gearman listener to speak to".into());
    };
    cfg.gearman = reachable(*first);
    cfg.http = http.map(reachable);
    cfg.instance = instance(store);
    let (tx, rx) = watch::channel(false);
    let stats = Arc::new(Stats::default());
    let section = stats.clone();
    gearshift_server::http::extra_metrics::register(Box::new(move |out| section.prometheus(out)));
    let task = tokio::spawn(async move {
        if let Err(e) = gearshift_gearmonkey::run(cfg, stats, rx).await {
            tracing::error!("{e}");
        }
    });
    Ok(Some((tx, task)))
}

/// The server's stop future, made to stop the bridge first: the bridge's
/// own Gearman jobs must not hold up a graceful stop.
pub(super) fn stop_first(
    running: &Running,
    stop: impl std::future::Future<Output = ()>,
) -> impl std::future::Future<Output = ()> {
    let tx = running.as_ref().map(|(tx, _)| tx.clone());
    async move {
        stop.await;
        if let Some(tx) = tx {
            let _ = tx.send(true);
        }
    }
}

/// Stops the bridge (it takes Gearshift's share out of the roll call),
/// waiting a few seconds at most.
pub(super) async fn stop(running: Running) {
    if let Some((tx, task)) = running {
        let _ = tx.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(3), task).await;
    }
}
