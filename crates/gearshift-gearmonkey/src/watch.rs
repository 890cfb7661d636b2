//! The supervisor: when Gearshift's event stream says a worker came or went
//! or a job of a bridged function was created or ended (every quarter
//! second while the stream is down, every 2 s while it is up), it asks
//! Gearshift (admin `status` and `workers`) which functions have Gearman
//! workers and queued jobs,
//! and from that sets each taker's capacity, starts or stops the bridge's
//! Gearman workers, and keeps Gearshift's share of `count:{FN}` right.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gearshift_client::admin::Load;
use gearshift_client::AdminClient;

use crate::give::{self, Giver, BRIDGE_ID};
use crate::glob::Routing;
use crate::stats::Stats;
use crate::take::{self, Gate};
use crate::{roll, Shared};

/// How often the supervisor looks without the event stream.
const POLL: Duration = Duration::from_millis(250);

/// How often it looks while the event stream is up (in case an event that
/// mattered was of a kind it does not follow, such as a second CAN_DO).
const SAFETY_POLL: Duration = Duration::from_secs(2);

/// The least time between two looks woken by events.
const MIN_GAP: Duration = Duration::from_millis(20);

/// Reads the load of every function from Gearshift (the bridge's own
/// worker left out).
async fn snapshot(admin: &mut AdminClient) -> gearshift_client::Result<HashMap<String, Load>> {
    admin.loads(Some(BRIDGE_ID)).await
}

/// Runs the supervisor until `shutdown`; then sets Gearshift's share of
/// every roll call back to zero.
/// `cleared`: the previous run's shares already left the roll call (else
/// the heartbeat takes them out once Redis answers).
pub async fn run(
    shared: Arc<Shared>,
    mut shutdown: tokio::sync::watch::Receiver<bool>,
    cleared: bool,
) {
    let mut gates: HashMap<String, Arc<Gate>> = HashMap::new();
    let mut givers: HashMap<String, Giver> = HashMap::new();
    // Functions whose roll call this run added to, so a count that fell to
    // zero is corrected (a previous run's shares went at start).
    let mut counted: HashSet<String> = HashSet::new();
    let heartbeat = tokio::spawn(beat(shared.clone(), cleared));
    let mut routing = shared.routing.clone();
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
                let routed = shared.routing.borrow().routed.clone();
                for p in routed.iter().filter(|p| !p.contains(['*', '?'])) {
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
        let last_look = Instant::now();
        let poll = if shared.push.live.load(Ordering::Acquire) {
            SAFETY_POLL
        } else {
            POLL
        };
        tokio::select! {
            _ = tokio::time::sleep(poll) => {}
            _ = shared.push.wake.notified() => {
                // Events come in bursts: one look per MIN_GAP at most.
                tokio::time::sleep(MIN_GAP.saturating_sub(last_look.elapsed())).await;
            }
            _ = routing.changed() => {}
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
    heartbeat.abort();
    for function in &counted {
        roll::set(&shared, function, 0).await;
    }
    roll::leave(&shared).await;
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
    let routing = shared.routing.borrow().clone();
    unroute(&routing, gates, givers);
    for (function, load) in loads {
        if !routing.bridged(function) {
            continue;
        }
        let routed = routing.routed(function);
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
        // Part 2: Gearman jobs with no Gearman worker go to GearMonkey's; a
        // routed function's always, beside any Gearman worker.
        let serving = givers.contains_key(function);
        let want = routed
            || (load.workers == 0
                && (serving
                    || (load.total > load.running
                        && roll::gearmonkey_workers(shared, function).await > 0)));
        if want && !serving {
            match give::start(shared.clone(), function.clone(), routed) {
                Ok(g) => {
                    givers.insert(function.clone(), g);
                }
                Err(e) => tracing::warn!(function, "gearmonkey: cannot start a bridge worker: {e}"),
            }
        } else if !want {
            if let Some(g) = givers.remove(function) {
                // A Gearman worker is back: it serves the function again.
                let _ = g.stop.send(());
                tracing::info!(function, "gearmonkey: {function} has Gearman workers again");
            }
        }
    }
    // Roll call: Gearshift's workers for every bridged function (none for a
    // routed one: they never run its GearMonkey jobs).
    for function in loads.keys().filter(|f| routing.bridged(f)) {
        let routed = routing.routed(function);
        let workers = if routed {
            0
        } else {
            loads.get(function).map_or(0, |l| l.workers)
        };
        if workers > 0 || counted.contains(function) {
            roll::set(shared, function, workers).await;
            if workers == 0 {
                counted.remove(function);
            } else {
                counted.insert(function.clone());
            }
        }
    }
    // Functions Gearshift no longer lists at all have no worker; those no
    // longer bridged (a SIGHUP) are no longer counted.
    let gone: Vec<String> = counted
        .iter()
        .filter(|f| !loads.contains_key(*f) || !routing.bridged(f))
        .cloned()
        .collect();
    for function in gone {
        roll::set(shared, &function, 0).await;
        counted.remove(&function);
    }
}

/// After a change of routing (a SIGHUP): takers of functions no longer
/// bridged, or now routed, take nothing more; bridge workers of functions
/// no longer bridged, or whose route changed, stop (the next steps start
/// what the new routing wants).
fn unroute(
    routing: &Routing,
    gates: &HashMap<String, Arc<Gate>>,
    givers: &mut HashMap<String, Giver>,
) {
    for (function, gate) in gates {
        if !routing.bridged(function) || routing.routed(function) {
            gate.capacity.store(0, Ordering::Release);
        }
    }
    let stale: Vec<String> = givers
        .iter()
        .filter(|(f, g)| !routing.bridged(f) || g.routed != routing.routed(f))
        .map(|(f, _)| f.clone())
        .collect();
    for function in stale {
        if let Some(g) = givers.remove(&function) {
            let _ = g.stop.send(());
            tracing::info!(
                function,
                "gearmonkey: {function} is no longer routed as before; its bridge worker stops"
            );
        }
    }
}

/// Keeps this instance alive in Redis and takes dead instances' shares
/// out of the roll call, until aborted.
async fn beat(shared: Arc<Shared>, mut cleared: bool) {
    loop {
        tokio::time::sleep(roll::HEARTBEAT).await;
        let ok = roll::heartbeat(&shared, !cleared).await;
        cleared |= ok;
    }
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
