//! `--gearmonkey`: starts the GearMonkey bridge (crate
//! `gearshift-gearmonkey`) beside the server, speaking Gearman to the
//! server's own first plaintext listener, and stops it before the server;
//! its counters join `/metrics`. On a cluster node it runs while the
//! cluster has it run there (`bridges::while_hosted`).

use std::net::SocketAddr;
use std::sync::Arc;

use gearshift_gearmonkey::glob::Routing;
use gearshift_gearmonkey::stats::Stats;
use gearshift_gearmonkey::BridgeConfig;
use gearshift_server::policy_file::GearmonkeyDecl;
use gearshift_server::StoreConfig;
use tokio::sync::watch;

use super::bridges::{loopback, Running};
use super::ServeArgs;

/// Where the bridge's settings came from, for a SIGHUP's reload of the
/// `[[gearmonkey]]` sections.
#[derive(Debug, Clone, Default)]
struct Origin {
    /// The `--gearmonkey-match` globs (always in force).
    flags: Vec<String>,
    /// The file's `url` when `--gearmonkey` did not give one.
    url_file: Option<String>,
    /// The file's `ca` when `--gearmonkey-ca` did not give one (`None`
    /// inside: the file named none).
    ca_file: Option<Option<String>>,
}

/// A bridge to start: its configuration and where that came from.
pub(super) struct Planned {
    config: BridgeConfig,
    origin: Origin,
}

/// The bridge's configuration from the flags and the config file's
/// `[[gearmonkey]]` sections (flags win for the URL and CA; the globs of
/// both apply), checked; its Gearman address is filled in once the server
/// listens. `None` when neither names a Redis.
pub(super) fn config(
    args: &ServeArgs,
    file: Option<GearmonkeyDecl>,
) -> Result<Option<Planned>, String> {
    let file = file.unwrap_or_default();
    let origin = Origin {
        flags: args.gearmonkey_match.clone(),
        url_file: args
            .gearmonkey
            .is_none()
            .then(|| file.url.clone())
            .flatten(),
        ca_file: args.gearmonkey_ca.is_none().then(|| file.ca.clone()),
    };
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
        routing: Routing { matches, routed },
        gearman: SocketAddr::from(([127, 0, 0, 1], 0)),
        ca,
        instance: String::new(),
        http: None,
    };
    gearshift_gearmonkey::check(&config).map_err(|e| e.to_string())?;
    Ok(Some(Planned { config, origin }))
}

/// Puts a reloaded file's `[[gearmonkey]]` globs and routes in force.
#[derive(Clone)]
pub(super) struct Reroute {
    origin: Origin,
    tx: Arc<watch::Sender<Routing>>,
}

impl Reroute {
    /// Applies the sections of a reloaded config file, or says why not.
    pub(super) fn apply(&self, file: Option<&GearmonkeyDecl>) {
        match rerouted(&self.origin, file) {
            Ok((routing, warnings)) => {
                for w in warnings {
                    tracing::warn!("SIGHUP: gearmonkey: {w}");
                }
                let changed = self.tx.send_if_modified(|now| {
                    let changed = *now != routing;
                    *now = routing.clone();
                    changed
                });
                if changed {
                    tracing::info!(
                        functions = ?gearshift_gearmonkey::glob::shown(&routing.matches),
                        routed = ?routing.routed,
                        "SIGHUP: gearmonkey bridge functions reloaded"
                    );
                }
            }
            Err(e) => tracing::error!("SIGHUP: gearmonkey: {e}; keeping its functions"),
        }
    }
}

/// The routing a reloaded file gives (with what it changed that only a
/// restart puts in force), or why it is refused.
fn rerouted(
    origin: &Origin,
    file: Option<&GearmonkeyDecl>,
) -> Result<(Routing, Vec<String>), String> {
    let mut warnings = Vec::new();
    let Some(file) = file else {
        if origin.url_file.is_some() {
            return Err("the [[gearmonkey]] sections that name the bridge's Redis are gone; a restart stops the bridge".into());
        }
        return Ok((
            Routing {
                matches: origin.flags.clone(),
                routed: Vec::new(),
            },
            warnings,
        ));
    };
    if let Some(url) = &origin.url_file {
        match &file.url {
            None => return Err("no [[gearmonkey]] section names the bridge's Redis any more; a restart stops the bridge".into()),
            Some(u) if u != url => warnings.push(format!(
                "a new url ({}) takes a restart; the bridge stays on {}",
                gearshift_gearmonkey::redacted(u),
                gearshift_gearmonkey::redacted(url)
            )),
            Some(_) => {}
        }
    }
    if let Some(ca) = &origin.ca_file {
        if *ca != file.ca {
            warnings.push("a new ca takes a restart".to_owned());
        }
    }
    let mut matches = origin.flags.clone();
    matches.extend(file.matches.iter().cloned());
    Ok((
        Routing {
            matches,
            routed: file.routed.clone(),
        },
        warnings,
    ))
}

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

/// A bridge ready to run beside the server: once on a single server, each
/// time the cluster chooses this node on a cluster node.
pub(super) struct Bridge {
    cfg: BridgeConfig,
    store: StoreConfig,
    stats: Arc<Stats>,
    routing: watch::Receiver<Routing>,
}

impl Bridge {
    /// Starts the bridge, under a new name in the roll call.
    pub(super) fn spawn(&self) -> Running {
        let mut cfg = self.cfg.clone();
        cfg.instance = instance(&self.store);
        let (tx, rx) = watch::channel(false);
        let (stats, routing) = (self.stats.clone(), self.routing.clone());
        let task = tokio::spawn(async move {
            if let Err(e) = gearshift_gearmonkey::run(cfg, stats, rx, routing).await {
                tracing::error!("{e}");
            }
        });
        Some((tx, task))
    }
}

/// Readies the bridge once the server listens at `addrs` (and `http`,
/// whose event stream wakes it): its counters join `/metrics` and a
/// SIGHUP's reload reaches it through the [`Reroute`].
pub(super) fn prepare(
    config: Option<Planned>,
    addrs: &[SocketAddr],
    http: Option<SocketAddr>,
    store: &StoreConfig,
) -> Result<Option<(Bridge, Reroute)>, String> {
    let Some(Planned {
        config: mut cfg,
        origin,
    }) = config
    else {
        return Ok(None);
    };
    let Some(gearman) = loopback(addrs) else {
        return Err("--gearmonkey needs a plaintext Gearman listener to speak to".into());
    };
    cfg.gearman = gearman;
    cfg.http = http.and_then(|a| loopback(&[a]));
    let stats = Arc::new(Stats::default());
    let section = stats.clone();
    gearshift_server::http::extra_metrics::register(Box::new(move |out| section.prometheus(out)));
    let (routing_tx, routing) = watch::channel(cfg.routing.clone());
    let reroute = Reroute {
        origin,
        tx: Arc::new(routing_tx),
    };
    let bridge = Bridge {
        cfg,
        store: store.clone(),
        stats,
        routing,
    };
    Ok(Some((bridge, reroute)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(url: Option<&str>, matches: &[&str], routed: &[&str]) -> GearmonkeyDecl {
        GearmonkeyDecl {
            url: url.map(str::to_owned),
            matches: matches.iter().map(|m| (*m).to_owned()).collect(),
            ca: None,
            routed: routed.iter().map(|m| (*m).to_owned()).collect(),
        }
    }

    #[test]
    fn a_reload_takes_the_files_globs_and_routes_beside_the_flags() {
        let origin = Origin {
            flags: vec!["img_*".into()],
            url_file: Some("redis://a:1".into()),
            ca_file: Some(None),
        };
        let (r, warnings) = rerouted(
            &origin,
            Some(&decl(Some("redis://a:1"), &["pdf_*"], &["pdf_*"])),
        )
        .expect("a good reload");
        assert_eq!(r.matches, ["img_*", "pdf_*"]);
        assert_eq!(r.routed, ["pdf_*"]);
        assert!(warnings.is_empty());
        // A new URL or CA is only warned about; the globs still change.
        let mut d = decl(Some("redis://b:1"), &["x"], &[]);
        d.ca = Some("/ca.pem".into());
        let (r, warnings) = rerouted(&origin, Some(&d)).expect("a reload with warnings");
        assert_eq!((r.matches.len(), warnings.len()), (2, 2));
        // The sections that gave the Redis cannot go while it runs.
        assert!(rerouted(&origin, None).is_err());
        assert!(rerouted(&origin, Some(&decl(None, &["x"], &[]))).is_err());
    }

    #[test]
    fn with_the_url_from_the_flag_the_sections_may_go() {
        let origin = Origin {
            flags: vec![],
            url_file: None,
            ca_file: None,
        };
        let (r, _) = rerouted(&origin, None).expect("sections may go");
        assert_eq!(r, Routing::default());
        let (r, w) = rerouted(&origin, Some(&decl(Some("redis://other:1"), &["a"], &[])))
            .expect("the flag's url");
        assert_eq!((r.matches, w.len()), (vec!["a".to_owned()], 0));
    }
}
