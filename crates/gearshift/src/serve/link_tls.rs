//! `serve`'s flags for TLS between cluster nodes (docs/cluster.md, "TLS
//! between nodes").

use std::path::PathBuf;

use clap::Args;
use gearshift_server::cluster::node_tls::{LinkTls, LinkTlsFiles};

/// The three files node TLS takes; all or none.
#[derive(Args, Debug, Clone, Default)]
pub(super) struct LinkTlsArgs {
    /// Links and relays between cluster nodes in TLS (none in the clear):
    /// this node's certificate (PEM), valid for the address other nodes
    /// dial (`--advertise`) and for client authentication too.
    #[arg(long, value_name = "FILE", requires_all = ["link_tls_key", "link_tls_ca"])]
    link_tls_certificate: Option<PathBuf>,
    /// The private key of --link-tls-certificate (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["link_tls_certificate", "link_tls_ca"])]
    link_tls_key: Option<PathBuf>,
    /// The CA (PEM) that signs every node's --link-tls-certificate.
    #[arg(long, value_name = "FILE", requires_all = ["link_tls_certificate", "link_tls_key"])]
    link_tls_ca: Option<PathBuf>,
    /// While turning node TLS on one node at a time: also take nodes in
    /// the clear, and link in the clear to a node that refuses TLS. Leave
    /// it out once every node has the --link-tls-* files.
    #[arg(long, requires = "link_tls_ca")]
    link_tls_allow_clear: bool,
}

impl LinkTlsArgs {
    /// Whether node TLS was asked for.
    pub(super) fn given(&self) -> bool {
        self.link_tls_ca.is_some()
    }

    /// Whether nodes in the clear are let in (`--link-tls-allow-clear`).
    pub(super) fn allows_clear(&self) -> bool {
        self.link_tls_allow_clear
    }

    /// The loaded files, if given.
    pub(super) fn load(&self) -> Result<Option<LinkTls>, String> {
        let (Some(certificate), Some(key), Some(ca)) = (
            self.link_tls_certificate.clone(),
            self.link_tls_key.clone(),
            self.link_tls_ca.clone(),
        ) else {
            return Ok(None);
        };
        LinkTls::load(&LinkTlsFiles {
            certificate,
            key,
            ca,
            allow_clear: self.link_tls_allow_clear,
        })
        .map(Some)
    }
}
