//! SIGHUP, as logrotate and `systemctl reload` send it: the log file is
//! reopened, the config file reloaded (policies, schedules, access) and
//! the TLS certificates read again.

use std::path::PathBuf;

use gearshift_core::schedule::ScheduleSpec;
use gearshift_proto::Priority;
use gearshift_server::access::AccessRules;
use gearshift_server::allow::AllowList;
use gearshift_server::cluster::node_tls::LinkTls;
use gearshift_server::tls::TlsServer;
use gearshift_server::{policy_file, Reload, Reloader};

use crate::logging::LogFile;

/// What a loaded policy file puts in force.
pub fn reload_of(file: policy_file::PolicyFile, admin_allow: &AllowList) -> Reload {
    let schedules = file
        .schedules
        .into_iter()
        .map(|d| ScheduleSpec {
            cron: d.cron,
            function: d.function.into(),
            unique: d.unique.unwrap_or_default().into(),
            data: d.workload.into(),
            priority: match d.priority.as_str() {
                "high" => Priority::High,
                "low" => Priority::Low,
                _ => Priority::Normal,
            },
        })
        .collect();
    let access = AccessRules {
        admin_allow: admin_allow.clone(),
        ..file.access.unwrap_or_default()
    };
    Reload {
        policies: file.policies,
        schedules,
        access: Some(access),
    }
}

/// What a reload does with the file's `[[gearmonkey]]` sections (the
/// running bridge's globs and routes).
pub type OnGearmonkey = Box<dyn Fn(Option<&policy_file::GearmonkeyDecl>) + Send>;

/// The certificates a SIGHUP reads again: the TLS listeners' (`--ssl`)
/// and node TLS's (`--link-tls-*`), for the handshakes that follow.
#[derive(Default)]
pub struct Certs {
    /// `--ssl-certificate` and friends.
    pub ssl: Option<TlsServer>,
    /// `--link-tls-certificate` and friends.
    pub link: Option<LinkTls>,
}

impl Certs {
    /// A server's certificates: one `--ssl` certificate serves the Gearman
    /// TLS listeners and `--http-tls` (one reload renews both).
    pub fn of(cfg: &gearshift_server::ServerConfig, link: Option<LinkTls>) -> Certs {
        let https = || cfg.http.as_ref().and_then(|h| h.tls.clone());
        Certs {
            ssl: cfg.tls.clone().or_else(https),
            link,
        }
    }

    /// Reads every certificate again; one that does not load is kept.
    fn reload(&self) {
        let said = |what: &str, file: &std::path::Path, r: Result<(), String>| match r {
            Ok(()) => tracing::info!("SIGHUP: {what} reloaded from {}", file.display()),
            Err(e) => tracing::error!("SIGHUP: keeping the {what} in force: {e}"),
        };
        if let Some(t) = &self.ssl {
            said("TLS certificate", t.certificate(), t.reload());
        }
        if let Some(t) = &self.link {
            said("node TLS certificate", t.certificate(), t.reload());
        }
    }
}

/// At each SIGHUP: reopens the log file (logrotate moved it away), reads
/// the certificates again and reloads the policy file (and, with
/// `gearmonkey`, the bridge's sections); a file that does not load leaves
/// what it held in force, and the log says why.
pub async fn on_hangup(
    config: Option<PathBuf>,
    admin_allow: AllowList,
    reloader: Reloader,
    log: Option<LogFile>,
    gearmonkey: Option<OnGearmonkey>,
    certs: Certs,
) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        tracing::error!("cannot install the SIGHUP handler: no log reopening or policy reload");
        return;
    };
    while hup.recv().await.is_some() {
        if let Some(log) = &log {
            match log.reopen() {
                Ok(()) => tracing::info!("SIGHUP: log file {} reopened", log.path().display()),
                Err(e) => tracing::error!(
                    "SIGHUP: cannot reopen the log file {}: {e}; logging on to the old one",
                    log.path().display()
                ),
            }
        }
        certs.reload();
        let Some(path) = &config else { continue };
        match policy_file::load(path) {
            Ok(file) => {
                tracing::info!(
                    rules = file.policies.rules.len(),
                    schedules = file.schedules.len(),
                    "SIGHUP: policies reloaded from {}",
                    path.display()
                );
                if let Some(apply) = &gearmonkey {
                    apply(file.gearmonkey.as_ref());
                }
                reloader.reload(reload_of(file, &admin_allow));
            }
            Err(e) => tracing::error!("SIGHUP: keeping the policies in force: {e}"),
        }
    }
}
