//! The roll call: Gearshift's Gearman workers counted in `count:{FN}`, each
//! Gearshift's share kept apart (`gearshift:shares:{FN}`, one field per
//! instance) beside a liveness key with a time to live that a heartbeat
//! refreshes (`gearshift:alive:{INSTANCE}`). Any live Gearshift takes the
//! share of an instance whose liveness key expired out of `count:{FN}`, so a
//! crashed one's workers leave the roll call even if it never restarts.

use std::time::Duration;

use crate::keys;
use crate::stats::Stats;
use crate::{scripts, Shared};

/// How often the liveness key is refreshed and dead shares looked for.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// How long a liveness key lives without a heartbeat: a crashed instance's
/// share leaves the roll call this long (plus one heartbeat) after it died.
pub const ALIVE_TTL: Duration = Duration::from_secs(5);

/// Sets this instance's share of `count:{FN}` to `workers` (and marks it
/// alive). A share another instance took out while this one was thought
/// dead is added back whole: the change is counted from the share's field.
pub async fn set(shared: &Shared, function: &str, workers: usize) {
    let mut redis = shared.redis.clone();
    let r: redis::RedisResult<i64> = scripts::set_share()
        .key(keys::count(function))
        .key(keys::shares(function))
        .key(keys::alive(&shared.instance))
        .key(keys::SHARED_FUNCTIONS)
        .arg(&shared.instance)
        .arg(workers)
        .arg(millis(ALIVE_TTL))
        .arg(function)
        .invoke_async(&mut redis)
        .await;
    if let Err(e) = r {
        Stats::bump(&shared.stats.redis_errors);
        tracing::warn!(function, "gearmonkey: cannot update the roll call: {e}");
    }
}

/// Refreshes this instance's liveness key and takes the shares of dead
/// instances out of every roll call; with `mine`, this instance's own
/// shares too (a start after a crash: the previous run's workers are gone).
/// False when Redis did not answer every step.
pub async fn heartbeat(shared: &Shared, mine: bool) -> bool {
    let mut redis = shared.redis.clone();
    let alive = redis::cmd("SET")
        .arg(keys::alive(&shared.instance))
        .arg(1)
        .arg("PX")
        .arg(millis(ALIVE_TTL))
        .query_async::<()>(&mut redis)
        .await;
    if let Err(e) = alive {
        Stats::bump(&shared.stats.redis_errors);
        tracing::debug!("gearmonkey: cannot refresh the liveness key: {e}");
        return false;
    }
    let functions: Vec<String> = match redis::cmd("SMEMBERS")
        .arg(keys::SHARED_FUNCTIONS)
        .query_async(&mut redis)
        .await
    {
        Ok(f) => f,
        Err(e) => {
            Stats::bump(&shared.stats.redis_errors);
            tracing::debug!("gearmonkey: cannot list the roll calls: {e}");
            return false;
        }
    };
    let mut answered = true;
    for function in functions {
        let r: redis::RedisResult<i64> = scripts::reap()
            .key(keys::count(&function))
            .key(keys::shares(&function))
            .key(keys::SHARED_FUNCTIONS)
            .arg(&function)
            .arg(if mine { shared.instance.as_str() } else { "" })
            .arg(keys::ALIVE_PREFIX)
            .invoke_async(&mut redis)
            .await;
        match r {
            Ok(0) => {}
            Ok(n) => tracing::info!(
                function,
                workers = n,
                "gearmonkey: took a stopped Gearshift's workers out of count:{function}"
            ),
            Err(e) => {
                Stats::bump(&shared.stats.redis_errors);
                tracing::warn!(function, "gearmonkey: cannot correct the roll call: {e}");
                answered = false;
            }
        }
    }
    answered
}

/// Takes out what a bridge before shares per instance added (a string
/// `gearshift:count:{FN}`), once at start.
pub async fn clear_legacy(shared: &Shared) {
    for function in crate::watch::scan(shared, keys::ADDED_PREFIX).await {
        let mut redis = shared.redis.clone();
        let r: redis::RedisResult<i64> = scripts::roll_call()
            .key(keys::count(&function))
            .key(keys::added(&function))
            .arg(0)
            .invoke_async(&mut redis)
            .await;
        if let Err(e) = r {
            Stats::bump(&shared.stats.redis_errors);
            tracing::warn!(
                function,
                "gearmonkey: cannot clear an old roll call key: {e}"
            );
        }
    }
}

/// Stops being alive: the liveness key goes (after the shares were set to 0).
pub async fn leave(shared: &Shared) {
    let mut redis = shared.redis.clone();
    let r = redis::cmd("DEL")
        .arg(keys::alive(&shared.instance))
        .query_async::<()>(&mut redis)
        .await;
    if let Err(e) = r {
        tracing::debug!("gearmonkey: cannot drop the liveness key: {e}");
    }
}

/// GearMonkey's own workers for `function`: `count:{FN}` less every
/// Gearshift's share.
pub async fn gearmonkey_workers(shared: &Shared, function: &str) -> i64 {
    let mut redis = shared.redis.clone();
    let r: redis::RedisResult<(Option<String>, Vec<String>)> = redis::pipe()
        .cmd("GET")
        .arg(keys::count(function))
        .cmd("HVALS")
        .arg(keys::shares(function))
        .query_async(&mut redis)
        .await;
    match r {
        Ok((count, shares)) => own_workers(count.as_deref(), &shares),
        Err(e) => {
            Stats::bump(&shared.stats.redis_errors);
            tracing::warn!(function, "gearmonkey: cannot read the roll call: {e}");
            0
        }
    }
}

/// `count:{FN}` (absent or not an integer: 0) less the shares.
fn own_workers(count: Option<&str>, shares: &[String]) -> i64 {
    let count = count
        .and_then(|c| c.trim().parse::<i64>().ok())
        .unwrap_or(0);
    let ours: i64 = shares.iter().filter_map(|s| s.parse::<i64>().ok()).sum();
    count - ours
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gearmonkeys_own_workers_leave_out_every_share() {
        assert_eq!(own_workers(Some("5"), &["2".into(), "1".into()]), 2);
        assert_eq!(own_workers(None, &[]), 0);
        assert_eq!(own_workers(Some("x"), &["1".into()]), -1);
        assert_eq!(own_workers(Some(" 3 "), &["bad".into()]), 3);
    }

    #[test]
    fn a_dead_share_leaves_within_a_few_heartbeats() {
        assert!(
            ALIVE_TTL >= HEARTBEAT * 3,
            "a live instance must not look dead"
        );
    }
}
