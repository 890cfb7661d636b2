//! Startup: the core rebuilt from what the store replays (jobs, dead jobs,
//! schedules, kept results) and the first handle reservation made durable
//! before any handle is handed out.

use gearshift_core::{Core, Effect, StoreOp};
use gearshift_store::Store;

use crate::{clock, ServerConfig, ServerError, StoreConfig};

/// The core with the store's jobs, dead jobs, schedules and kept records
/// restored, and its first handle reservation flushed (blocking).
pub(crate) fn restore(
    cfg: &ServerConfig,
    store: Option<&mut Box<dyn Store>>,
) -> Result<Core, ServerError> {
    let durable = store.is_some();
    let store_err = |source| {
        let dir = match &cfg.store {
            StoreConfig::Memory => "the supplied store".to_owned(),
            other => other.describe(),
        };
        ServerError::Store { dir, source }
    };
    let mut core_cfg = cfg.core.clone();
    core_cfg.durable = durable;
    let mut core = Core::new(core_cfg);
    core.set_now(clock::Clock::new().now());
    core.set_policies(cfg.policies.clone());
    // A store a cluster shares remembers runs in flight for a takeover.
    core.track_runs(matches!(cfg.store, StoreConfig::Postgres { .. }));
    if let Some(store) = store {
        let replayed = store.replay().map_err(store_err)?;
        let count = replayed.jobs.len();
        let cut_off = replayed.running.clone();
        core.restore(replayed.jobs, replayed.next_id, clock::Clock::new().now());
        let dead_count = replayed.dead.len();
        core.restore_dead(replayed.dead);
        if dead_count > 0 {
            tracing::info!(jobs = dead_count, "restored dead jobs");
        }
        core.restore_schedules(replayed.schedules);
        core.set_config_schedules(cfg.schedules.clone())
            .map_err(ServerError::Config)?;
        core.restore_kept(replayed.kept);
        core.restore_functions(replayed.functions);
        if !cut_off.is_empty() {
            tracing::warn!(
                jobs = cut_off.len(),
                "jobs were running when their node stopped: counted as lost with their workers"
            );
            core.restore_cut_off_runs(&cut_off, clock::Clock::new().now());
        }
        // The first handle reservation is on disk before any handle is
        // handed out, so no handle can repeat after a crash (and dead
        // jobs past the retention limits are dropped there too).
        let ops: Vec<StoreOp> = core
            .take_effects()
            .into_iter()
            .filter_map(|e| match e {
                Effect::Store(op) => Some(op),
                _ => None,
            })
            .collect();
        store.append(&ops);
        // Synced too: under `interval` durability a flush only writes.
        store
            .flush()
            .and_then(|()| store.sync())
            .map_err(store_err)?;
        if count > 0 {
            tracing::info!(jobs = count, "restored stored jobs");
        }
    }
    if !durable {
        core.set_config_schedules(cfg.schedules.clone())
            .map_err(ServerError::Config)?;
        let _ = core.take_effects();
    }
    Ok(core)
}
