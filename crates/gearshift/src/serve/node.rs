//! `serve` on a cluster node (a PostgreSQL store): the node, its SIGHUP
//! handling, and the bridges: GearMonkey's while the cluster has it run
//! here, etcd's while this leader-mode node leads (or, partitioned, while
//! the cluster has it run here).

use std::path::PathBuf;

use gearshift_server::cluster::{ClusterConfig, Node};
use gearshift_server::ServerConfig;

use super::{bridges, etcd, gearmonkey, shutdown_signal};
use crate::logging::LogFile;

/// Runs a cluster node (a PostgreSQL store).
pub(super) async fn run_node(
    cfg: ServerConfig,
    cluster: ClusterConfig,
    gearmonkey: Option<gearmonkey::Planned>,
    etcd: Option<etcd::Config>,
    pid_file: Option<String>,
    config_path: Option<PathBuf>,
    log_file: Option<LogFile>,
) -> Result<(), String> {
    let store = cfg.store.describe();
    let cfg_store = cfg.store.clone();
    let admin_allow = cfg.access.admin_allow.clone();
    let certs = crate::hangup::Certs::of(&cfg, cluster.link_tls.clone());
    let (partitioned, token) = (
        cluster.partitioned,
        cfg.http.as_ref().and_then(|h| h.token.clone()),
    );
    let node = Node::bind(cfg, cluster).await.map_err(|e| e.to_string())?;
    tracing::info!(
        "jobs are stored in PostgreSQL at {store}; node {} of its cluster",
        node.name()
    );
    for a in node.local_addrs() {
        tracing::info!("listening on {a}");
    }
    for a in node.tls_addrs() {
        tracing::info!("listening on {a} (TLS)");
    }
    if let Some(a) = node.http_addr() {
        tracing::info!("http listening on {a}");
    }
    let prepared = gearmonkey::prepare(
        gearmonkey,
        &node.local_addrs(),
        node.http_addr(),
        &cfg_store,
    )?;
    let (bridge, reroute) = prepared.unzip();
    let on_gearmonkey =
        reroute.map(|r| -> crate::hangup::OnGearmonkey { Box::new(move |d| r.apply(d)) });
    tokio::spawn(crate::hangup::on_hangup(
        config_path,
        admin_allow,
        node.reloader(),
        log_file,
        on_gearmonkey,
        certs,
    ));
    let bridges = bridges::OnNode {
        gearmonkey: bridge,
        etcd: etcd::prepare(etcd, &node.local_addrs())?,
        partitioned_api: node
            .http_addr()
            .filter(|_| partitioned)
            .map(|http| (http, token)),
    };
    let stop = bridges.until(&node, shutdown_signal(pid_file));
    crate::sd_notify::notify("READY=1");
    node.run(stop).await;
    Ok(())
}
