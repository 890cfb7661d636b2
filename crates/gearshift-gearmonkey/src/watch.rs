//! The supervisor: every quarter second it asks Gearshift (admin `status`
//! and `workers`) which functions have Gearman workers and queued jobs,
//! and from that sets each taker's capacity, starts or stops the bridge's
//! Gearman workers, and keeps Gearshift's share of `count:{FN}` right.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gearshift_client::admin::Load;
use gearshift_client::AdminClient;

use crate::give::{self, Giver, BRIDGE_ID};
use crate::keys;
use crate::stats::Stats;
use crate::take::{self, Gate};
use crate::{glob, scripts, Shared};

/// Reads the load of every function from Gearshift (the bridge's own
/// worker left out).
async fn snapshot(admin: &mut AdminClient) -> gearshift_client::Result<HashMap<String, Load>> {
    admin.loads(Some(BRIDGE_ID)).await
}

/// Runs the supervisor until `shutdown`; then sets Gearshift's share of
/// every roll call back to zero.
pub async fn run(shared: Arc<Shared>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
    let mut gates: HashMap<String, Arc<Gate>> = HashMap::new();
    let mut givers: HashMap<String, Giver> = HashMap::new();
    // Functions whose roll call Gearshift may have added to (from a run
    // before this one, too), so a count that fell to zero is corrected.
    let mut counted: HashSet<String> = previous_counts(&shared).await;
    let mut admin: Option<AdminClient> = None;
    let mut last_stats = Instant::now();
    loop {
        if *shutdown.borrow() {
            break;
        }
        if admin.is_none() {
            match AdminClient::connect(shared.gearman).await {
                Ok(a) => admin = Some(a),
                Err(e) => {
                    Stats::bump(&shared.stats.gearman_errors);
                    tracing::warn!("gearmonkey: cannot reach Gearshift's admin port: {e}");
                }
            }
        }
        // Each taker's jobs in flight as the snapshot starts: the snapshot's
        // counts hold those, not the ones taken while it is read.
        let before: HashMap<String, usize> = gates
            .iter()
            .map(|(f, g)| (f.clone(), g.inflight.load(Ordering::Acquire)))
            .collect();
        let loads = match admin.as_mut() {
            Some(a) => match snapshot(a).await {
                Ok(l) => Some(l),
                Err(e) => {
                    Stats::bump(&shared.stats.gearman_errors);
                    tracing::warn!("gearmonkey: admin status failed: {e}");
                    admin = None;
                    None
                }
            },
            None => None,
        };
        match loads {
            Some(mut loads) => {
                // A routed function named exactly is served before its first job.
                for p in shared.routed.iter().filter(|p| !p.contains(['*', '?'])) {
                    loads.entry(p.clone()).or_default();
                }
                step(
                    &shared,
                    &loads,
                    &before,
                    &mut gates,
                    &mut givers,
                    &mut counted,
                )
                .await
            }
            // Gearshift unknown: take nothing more until it answers again.
            None => gates
                .values()
                .for_each(|g| g.capacity.store(0, Ordering::Release)),
        }
        if last_stats.elapsed() >= Duration::from_secs(60) {
            last_stats = Instant::now();
            tracing::info!("gearmonkey bridge: {}", shared.stats.line());
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(250)) => {}
            _ = shutdown.changed() => {}
        }
    }
    // Stopping: take nothing more, hand back the Gearman jobs out at
    // GearMonkey workers, and leave the roll call.
    gates
        .values()
        .for_each(|g| g.capacity.store(0, Ordering::Release));
    for (_, g) in givers.drain() {
        g.task.abort();
    }
    for function in &counted {
        set_roll_call(&shared, function, 0).await;
    }
    tracing::info!("gearmonkey bridge stopped: {}", shared.stats.line());
}

/// One round of decisions from one snapshot.
async fn step(
    shared: &Arc<Shared>,
    loads: &HashMap<String, Load>,
    before: &HashMap<String, usize>,
    gates: &mut HashMap<String, Arc<Gate>>,
    givers: &mut HashMap<String, Giver>,
    counted: &mut HashSet<String>,
) {
    for (function, load) in loads {
        if !glob::any(&shared.matches, function) {
            continue;
        }
        let routed = shared.routed.iter().any(|p| glob::matches(p, function));
        // Part 1: take GearMonkey jobs while Gearman workers are free.
        if !routed && (load.workers > 0 || gates.contains_key(function)) {
            let gate = gates.entry(function.clone()).or_insert_with(|| {
                let gate = Arc::new(Gate::default());
                tokio::spawn(take::run(shared.clone(), function.clone(), gate.clone()));
                gate
            });
            // Gearshift's own jobs for it (not the bridge's) also use workers.
            let mine = before.get(function).copied().unwrap_or(0);
            let capacity = load.free(mine);
            gate.capacity.store(capacity, Ordering::Release);
            gate.wake.notify_one();
        }
        // Part 2: Gearman jobs with no Gearman worker go to GearMonkey's.
        if routed {
            // Routed by the config file: the bridge serves it beside any
            // Gearman worker, whether or not GearMonkey's answer the roll call.
            if !givers.contains_key(function) {
                match give::start(shared.clone(), function.clone()) {
                    Ok(g) => {
                        givers.insert(function.clone(), g);
                    }
                    Err(e) => {
                        tracing::warn!(function, "gearmonkey: cannot start a bridge worker: {e}")
                    }
                }
            }
        } else if load.workers == 0 {
            let queued = load.total > load.running;
            if !givers.contains_key(function)
                && queued
                && gearmonkey_workers(shared, function).await > 0
            {
                match give::start(shared.clone(), function.clone()) {
                    Ok(g) => {
                        givers.insert(function.clone(), g);
                    }
                    Err(e) => {
                        tracing::warn!(function, "gearmonkey: cannot start a bridge worker: {e}")
                    }
                }
            }
        } else if let Some(g) = givers.remove(function) {
            // A Gearman worker is back: it serves the function again.
            let _ = g.stop.send(());
            tracing::info!(function, "gearmonkey: {function} has Gearman workers again");
        }
    }
    // Roll call: Gearshift's workers for every bridged function (none for a
    // routed one: they never run its GearMonkey jobs).
    for function in loads.keys().filter(|f| glob::any(&shared.matches, f)) {
        let routed = shared.routed.iter().any(|p| glob::matches(p, function));
        let workers = if routed {
            0
        } else {
            loads.get(function).map_or(0, |l| l.workers)
        };
        if workers > 0 || counted.contains(function) {
            set_roll_call(shared, function, workers).await;
            if workers == 0 {
                counted.remove(function);
            } else {
                counted.insert(function.clone());
            }
        }
    }
    // Functions Gearshift no longer lists at all have no worker.
    let gone: Vec<String> = counted
        .iter()
        .filter(|f| !loads.contains_key(*f))
        .cloned()
        .collect();
    for function in gone {
        set_roll_call(shared, &function, 0).await;
        counted.remove(&function);
    }
}

/// GearMonkey's own workers for `function`: `count:{FN}` less what
/// Gearshift added.
async fn gearmonkey_workers(shared: &Shared, function: &str) -> i64 {
    let mut redis = shared.redis.clone();
    let r: redis::RedisResult<(Option<String>, Option<i64>)> = redis::pipe()
        .cmd("GET")
        .arg(keys::count(function))
        .cmd("GET")
        .arg(keys::added(function))
        .query_async(&mut redis)
        .await;
    match r {
        Ok((count, added)) => {
            let count = count
                .and_then(|c| c.trim().parse::<i64>().ok())
                .unwrap_or(0);
            count - added.unwrap_or(0)
        }
        Err(e) => {
            Stats::bump(&shared.stats.redis_errors);
            tracing::warn!(function, "gearmonkey: cannot read the roll call: {e}");
            0
        }
    }
}

/// Sets Gearshift's share of `count:{FN}` to `workers`.
async fn set_roll_call(shared: &Shared, function: &str, workers: usize) {
    let mut redis = shared.redis.clone();
    let r: redis::RedisResult<i64> = scripts::roll_call()
        .key(keys::count(function))
        .key(keys::added(function))
        .arg(workers)
        .invoke_async(&mut redis)
        .await;
    if let Err(e) = r {
        Stats::bump(&shared.stats.redis_errors);
        tracing::warn!(function, "gearmonkey: cannot update the roll call: {e}");
    }
}

/// Functions a previous run left a share of the roll call for.
async fn previous_counts(shared: &Shared) -> HashSet<String> {
    scan(shared, keys::ADDED_PREFIX).await.into_iter().collect()
}

/// Function names of every key starting with `prefix` (SCAN, not KEYS).
pub async fn scan(shared: &Shared, prefix: &str) -> Vec<String> {
    let mut redis = shared.redis.clone();
    let mut cursor: u64 = 0;
    let mut out = Vec::new();
    loop {
        let r: redis::RedisResult<(u64, Vec<String>)> = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(format!("{prefix}*"))
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut redis)
            .await;
        match r {
            Ok((next, found)) => {
                out.extend(
                    found
                        .into_iter()
                        .filter_map(|k| k.strip_prefix(prefix).map(str::to_owned)),
                );
                if next == 0 {
                    return out;
                }
                cursor = next;
            }
            Err(e) => {
                Stats::bump(&shared.stats.redis_errors);
                tracing::warn!("gearmonkey: cannot scan {prefix}*: {e}");
                return out;
            }
        }
    }
}
