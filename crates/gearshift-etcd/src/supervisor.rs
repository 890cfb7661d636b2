//! The supervisor: every quarter second it reads Gearshift's load (admin
//! `status` and `workers`, as the GearMonkey bridge does) and sets how many
//! jobs each function may claim (its free Gearman workers); while bridged
//! jobs run it also reads `show workers` to tell the registry which worker
//! runs which etcd job.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gearshift_client::AdminClient;
use tokio::sync::mpsc;

use crate::stats::Stats;
use crate::Shared;

/// Per worker file descriptor, the etcd job it runs (id, Gearman handle).
pub type JobsByFd = HashMap<i64, (String, String)>;

/// Runs until aborted.
pub async fn run(shared: Arc<Shared>, jobs: mpsc::UnboundedSender<JobsByFd>) {
    let mut admin: Option<AdminClient> = None;
    let mut last_jobs = JobsByFd::new();
    let mut last_stats = Instant::now();
    loop {
        if admin.is_none() {
            match AdminClient::connect(shared.gearman).await {
                Ok(a) => admin = Some(a),
                Err(e) => {
                    Stats::bump(&shared.stats.gearman_errors);
                    tracing::warn!("etcd: cannot reach Gearshift's admin port: {e}");
                }
            }
        }
        if let Some(a) = admin.as_mut() {
            if let Err(e) = step(&shared, a, &jobs, &mut last_jobs).await {
                Stats::bump(&shared.stats.gearman_errors);
                tracing::warn!("etcd: admin status failed: {e}");
                admin = None;
                // Gearshift unknown: claim nothing more until it answers.
                shared.queue().set_capacity(HashMap::new());
            }
        }
        if last_stats.elapsed() >= Duration::from_secs(60) {
            last_stats = Instant::now();
            tracing::info!("etcd bridge: {}", shared.stats.line());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn step(
    shared: &Shared,
    admin: &mut AdminClient,
    jobs: &mpsc::UnboundedSender<JobsByFd>,
    last_jobs: &mut JobsByFd,
) -> gearshift_client::Result<()> {
    // Jobs in flight as the snapshot starts: its counts hold those.
    let before = shared.queue().inflight();
    let loads = admin.loads(None).await?;
    let capacity: HashMap<String, usize> = loads
        .iter()
        .filter(|(_, l)| l.workers > 0)
        .map(|(f, l)| (f.clone(), l.free(before.get(f).copied().unwrap_or(0))))
        .collect();
    shared.queue().set_capacity(capacity);
    shared.wake.notify_one();
    let by_handle: HashMap<String, String> = shared
        .running()
        .iter()
        .map(|(h, r)| (h.clone(), r.id.clone()))
        .collect();
    if by_handle.is_empty() && last_jobs.is_empty() {
        return Ok(());
    }
    let mut now = JobsByFd::new();
    for w in admin.show_workers().await? {
        if let Some((h, id)) = w.held.iter().find_map(|h| by_handle.get_key_value(h)) {
            now.insert(w.fd, (id.clone(), h.clone()));
        }
    }
    if now != *last_jobs {
        let _ = jobs.send(now.clone());
        *last_jobs = now;
    }
    Ok(())
}
