//! SIGHUP, as logrotate and `systemctl reload` send it: the log file is
//! reopened and the config file reloaded (policies, schedules, access).

use std::path::PathBuf;

use gearshift_core::schedule::ScheduleSpec;
use gearshift_proto::Priority;
use gearshift_server::access::AccessRules;
use gearshift_server::allow::AllowList;
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

/// At each SIGHUP: reopens the log file (logrotate moved it away) and
/// reloads the policy file (and, with `gearmonkey`, the bridge's sections);
/// a file that does not load leaves everything in force, and the log says why.
pub async fn on_hangup(
    config: Option<PathBuf>,
    admin_allow: AllowList,
    reloader: Reloader,
    log: Option<LogFile>,
    gearmonkey: Option<OnGearmonkey>,
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
