//! What the servers say about a function, through the admin text protocol
//! (`status`), summed over every server: how many jobs it holds, and
//! whether the workers a scenario started have all registered.

use std::time::{Duration, Instant};

use gearshift_client::ServerAddr;

use crate::bench::config::Config;

/// Pause between two polls.
const POLL: Duration = Duration::from_millis(20);
/// Limit on one admin command.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The `total` (queued and running) and `workers` of `function` on one
/// server; zeros when the server does not list it.
async fn one(cfg: &Config, addr: &ServerAddr, function: &str) -> Result<(u64, u64), String> {
    let mut admin = cfg
        .admin(addr)
        .await
        .map_err(|e| format!("admin connection to {addr}: {e}"))?;
    admin.set_timeout(Some(ADMIN_TIMEOUT));
    let rows = admin
        .status()
        .await
        .map_err(|e| format!("admin status on {addr}: {e}"))?;
    Ok(rows
        .iter()
        .find(|r| r.function == function)
        .map_or((0, 0), |r| (r.total, r.workers)))
}

/// Jobs of `function` (queued and running), summed over `servers`.
pub async fn total(cfg: &Config, function: &str) -> Result<u64, String> {
    let mut sum = 0;
    for s in &cfg.servers {
        sum += one(cfg, s, function).await?.0;
    }
    Ok(sum)
}

/// Polls [`total`] until it equals `want` or `limit` has passed; returns
/// the last value seen. (A worker's last WORK_COMPLETE may still be on its
/// way when the admin connection asks.)
pub async fn settle(
    cfg: &Config,
    function: &str,
    want: u64,
    limit: Duration,
) -> Result<u64, String> {
    let deadline = Instant::now() + limit;
    loop {
        let now = total(cfg, function).await?;
        if now == want || Instant::now() >= deadline {
            return Ok(now);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until every server lists at least `n` workers for `function`.
pub async fn wait_workers(
    cfg: &Config,
    function: &str,
    n: u64,
    limit: Duration,
) -> Result<(), String> {
    let deadline = Instant::now() + limit;
    loop {
        let mut least = u64::MAX;
        for s in &cfg.servers {
            least = least.min(one(cfg, s, function).await?.1);
        }
        if least >= n {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "only {least} of {n} workers registered for {function} within {limit:?}"
            ));
        }
        tokio::time::sleep(POLL).await;
    }
}
