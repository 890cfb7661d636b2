//! `--etcd`: the etcd bridge (crate `gearshift-etcd`, cargo feature `etcd`)
//! beside the server: its settings from the flags and the `[etcd]` table
//! (flags win), the server's worker and retry events forwarded to it (on a
//! partitioned node, the cluster's, through the node's HTTP API), its
//! counters in `/metrics`. Built without the feature, `serve` refuses
//! `--etcd` and `[etcd]` saying how to build with it.

use std::path::PathBuf;

use clap::Args;
use gearshift_server::policy_file::EtcdDecl;

/// The etcd bridge's flags (docs/etcd.md).
#[derive(Args, Debug, Default)]
pub struct EtcdArgs {
    /// Bridge the etcd job queue on these endpoints (docs/etcd.md):
    /// `http://HOST:PORT` or `https://...`, comma-separated or repeated.
    #[arg(long, value_name = "URL[,URL...]", value_delimiter = ',')]
    etcd: Vec<String>,
    /// Key prefix of the queue (`<P>jobs/`, `<P>workers/`) [default: /].
    #[arg(long, value_name = "P")]
    etcd_prefix: Option<String>,
    /// etcd user (with --etcd-password).
    #[arg(long, value_name = "U")]
    etcd_user: Option<String>,
    /// etcd password.
    #[arg(
        long,
        value_name = "PW",
        env = "GEARSHIFT_ETCD_PASSWORD",
        hide_env_values = true
    )]
    etcd_password: Option<String>,
    /// CA bundle (PEM) an https:// etcd's certificate must chain to.
    #[arg(long, value_name = "FILE")]
    etcd_ca: Option<PathBuf>,
    /// Client certificate (PEM) for etcd.
    #[arg(long, value_name = "FILE")]
    etcd_cert: Option<PathBuf>,
    /// Its private key (PEM).
    #[arg(long, value_name = "FILE")]
    etcd_key: Option<PathBuf>,
    /// The job document field naming the Gearman function (a dotted path
    /// into nested objects) [default: Function].
    #[arg(long, value_name = "NAME")]
    etcd_function_field: Option<String>,
    /// The function of a job that names none [default: etcd-job].
    #[arg(long, value_name = "NAME")]
    etcd_default_function: Option<String>,
    /// Seconds without a heartbeat before a worker is harvested;
    /// heartbeats every third of it [default: 60].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    etcd_harvest_after: Option<u64>,
    /// `single` (every job under jobs/) or `split` (new/, running/,
    /// finished/) [default: single].
    #[arg(long, value_name = "LAYOUT", value_parser = ["single", "split"])]
    etcd_layout: Option<String>,
}

impl EtcdArgs {
    /// Whether anything asks for the bridge.
    fn wanted(&self, file: Option<&EtcdDecl>) -> bool {
        !self.etcd.is_empty() || file.is_some()
    }
}

#[cfg(not(feature = "etcd"))]
mod imp {
    use super::*;
    use crate::serve::bridges::Running;

    /// Nothing to configure without the feature.
    pub(in crate::serve) type Config = std::convert::Infallible;

    pub(in crate::serve) fn config(
        args: &EtcdArgs,
        file: Option<EtcdDecl>,
        _node: Option<&str>,
    ) -> Result<Option<Config>, String> {
        if args.wanted(file.as_ref()) {
            return Err("--etcd (or an [etcd] table) needs a gearshift built with the `etcd` feature: `cargo build --release -p gearshift --features etcd` (its build needs protoc: `apt-get install protobuf-compiler`)".into());
        }
        Ok(None)
    }

    /// Nothing to run without the feature.
    pub(in crate::serve) type Bridge = std::convert::Infallible;

    pub(in crate::serve) fn prepare(
        config: Option<Config>,
        _addrs: &[std::net::SocketAddr],
    ) -> Result<Option<Bridge>, String> {
        match config {
            None => Ok(None),
            Some(never) => match never {},
        }
    }

    pub(in crate::serve) fn spawn(
        bridge: &Bridge,
        _bus: std::sync::Arc<gearshift_server::events::EventBus>,
        _control: gearshift_server::Control,
    ) -> Running {
        match *bridge {}
    }

    pub(in crate::serve) fn spawn_on_partitioned(
        bridge: &Bridge,
        _http: std::net::SocketAddr,
        _token: Option<String>,
    ) -> Running {
        match *bridge {}
    }
}

#[cfg(feature = "etcd")]
#[path = "etcd_on.rs"]
mod imp;

pub(super) use imp::{config, prepare, spawn, spawn_on_partitioned, Bridge, Config};
