//! `--gearmonkey`: starts the GearMonkey bridge (crate
//! `gearshift-gearmonkey`) beside the server, speaking Gearman to the
//! server's own first plaintext listener, and stops it after the server;
//! its counters join `/metrics`.

use std::net::SocketAddr;
use std::sync::Arc;

use gearshift_gearmonkey::stats::Stats;
use gearshift_gearmonkey::BridgeConfig;
use gearshift_server::policy_file::GearmonkeyDecl;
use tokio::sync::watch;

use super::bridges::{loopback, Running};
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
    };
    gearshift_gearmonkey::check(&config).map_err(|e| e.to_string())?;
    Ok(Some(config))
}

/// Starts the bridge once the server listens at `addrs`.
pub(super) fn start(config: Option<BridgeConfig>, addrs: &[SocketAddr]) -> Result<Running, String> {
    let Some(mut cfg) = config else {
        return Ok(None);
    };
    let Some(gearman) = loopback(addrs) else {
        return Err("--gearmonkey needs a plaintext Gearman listener to speak to".into());
    };
    cfg.gearman = gearman;
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
