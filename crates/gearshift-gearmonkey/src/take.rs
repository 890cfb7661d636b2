//! GearMonkey clients -> Gearman workers: one taker per bridged function
//! moves jobs from the GearMonkey queues into Gearshift's processing list
//! only while Gearman workers are free, runs each as a foreground Gearshift
//! job (from a client that asked for the dead set, so a job that fails for
//! good under a policy is kept there), and writes the result back as a
//! GearMonkey worker would.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use gearshift_client::{Client, JobEvent};
use tokio::sync::Notify;

use crate::keys::{self, Prio};
use crate::stats::Stats;
use crate::wake::Listening;
use crate::{scripts, Shared};

/// What the supervisor tells a taker: how many jobs it may have in
/// Gearshift at once (free Gearman workers), and what it has.
#[derive(Debug, Default)]
pub struct Gate {
    /// Jobs this taker may have in flight.
    pub capacity: AtomicUsize,
    /// Jobs it has in flight.
    pub inflight: AtomicUsize,
    /// Signalled when a job finishes or the capacity grows.
    pub wake: Notify,
    /// The processing entries this run holds (the sweep puts back others).
    held: Mutex<HashSet<Vec<u8>>>,
}

/// How often a taker looks for processing entries no task holds: a take
/// whose reply was lost when Redis went away leaves one behind.
const SWEEP_EVERY: Duration = Duration::from_secs(30);

/// The taker's first and longest waits when the queues are empty.
const IDLE_MIN: Duration = Duration::from_millis(1);
const IDLE_MAX: Duration = Duration::from_millis(20);

/// How long the queues stay empty before the taker waits for announcements
/// (a subscription, let go at the next take) instead of polling: jobs
/// flowing with shorter gaps cost no announcements to read.
const LISTEN_AFTER: Duration = Duration::from_millis(100);

/// The longest an idle taker waits for a job announcement before it looks
/// anyway (a client that pushes a job without announcing it).
const SAFETY_LOOK: Duration = Duration::from_millis(500);

/// `{PRIO}:{ID}`, a processing-list entry.
fn entry_of(prio: &str, raw_id: &[u8]) -> Vec<u8> {
    let mut entry = prio.as_bytes().to_vec();
    entry.push(b':');
    entry.extend_from_slice(raw_id);
    entry
}

/// Seconds since the epoch (the scheduled set's scores).
fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Runs the taker of `function` until the process ends.
pub async fn run(shared: Arc<Shared>, function: String, gate: Arc<Gate>) {
    let take = scripts::take();
    let mut redis = shared.redis.clone();
    let mut next_sweep = Instant::now() + SWEEP_EVERY;
    let mut idle = IDLE_MIN;
    // The subscription held while idle, and since when the queues are empty.
    let mut listening: Option<Listening> = None;
    let mut empty_since: Option<Instant> = None;
    loop {
        if Instant::now() >= next_sweep {
            // A sweep Redis did not answer is tried again soon.
            let again = if sweep(&shared, &function, &gate).await {
                SWEEP_EVERY
            } else {
                Duration::from_secs(2)
            };
            next_sweep = Instant::now() + again;
        }
        if gate.inflight.load(Ordering::Acquire) >= gate.capacity.load(Ordering::Acquire) {
            // Re-checked at least every 50 ms in case a wake was missed.
            let _ = tokio::time::timeout(Duration::from_millis(50), gate.wake.notified()).await;
            continue;
        }
        let got: redis::RedisResult<Option<(String, Vec<u8>)>> = take
            .key(keys::queue(&function, Prio::Scheduled))
            .key(keys::queue(&function, Prio::High))
            .key(keys::queue(&function, Prio::Normal))
            .key(keys::queue(&function, Prio::Low))
            .key(keys::processing(&function))
            .arg(now())
            .invoke_async(&mut redis)
            .await;
        match got {
            Ok(Some((prio, id))) => {
                idle = IDLE_MIN;
                // Busy again: announcements are not read while jobs flow.
                (listening, empty_since) = (None, None);
                Stats::bump(&shared.stats.taken);
                gate.inflight.fetch_add(1, Ordering::AcqRel);
                let entry = entry_of(&prio, &id);
                hold(&gate).insert(entry.clone());
                let (shared, function, gate) = (shared.clone(), function.clone(), gate.clone());
                tokio::spawn(async move {
                    run_one(&shared, &function, &prio, &id).await;
                    hold(&gate).remove(&entry);
                    gate.inflight.fetch_sub(1, Ordering::AcqRel);
                    gate.wake.notify_one();
                });
            }
            Ok(None) if empty_since.get_or_insert_with(Instant::now).elapsed() < LISTEN_AFTER => {
                // Empty: look again soon after a job or an announcement (a
                // blocking client's next job follows quickly, and a client
                // announces a job before it pushes it), backing off to 20 ms.
                tokio::time::sleep(idle).await;
                idle = (idle * 2).min(IDLE_MAX);
            }
            Ok(None) => match &listening {
                None => {
                    // Idle: subscribe, then look once more (a job announced
                    // before is not heard); without announcements, poll.
                    listening = shared.wakes.listen(&function, None).await;
                    if listening.is_none() {
                        tokio::time::sleep(IDLE_MAX).await;
                    }
                }
                Some(l) => {
                    // Wait for an announcement, the next scheduled job's
                    // time, or a safety look (a client that announces nothing).
                    let wait = quiet_wait(&shared, &function).await;
                    tokio::select! {
                        // Polled again for a while: the job may be announced
                        // before it is pushed.
                        _ = l.woken.notified() => (idle, empty_since) = (IDLE_MIN, None),
                        _ = gate.wake.notified() => {}
                        _ = tokio::time::sleep(wait) => {}
                    }
                }
            },
            Err(e) => {
                Stats::bump(&shared.stats.redis_errors);
                tracing::warn!(function, "gearmonkey: cannot take a job from Redis: {e}");
                // The take may have run with its reply lost: sweep soon.
                next_sweep = next_sweep.min(Instant::now() + Duration::from_secs(2));
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// How long an idle taker waits for an announcement at most: until its
/// next scheduled job is due, and never longer than `SAFETY_LOOK`.
async fn quiet_wait(shared: &Shared, function: &str) -> Duration {
    let mut redis = shared.redis.clone();
    let next: redis::RedisResult<Vec<(String, f64)>> = redis::cmd("ZRANGE")
        .arg(keys::queue(function, Prio::Scheduled))
        .arg(0)
        .arg(0)
        .arg("WITHSCORES")
        .query_async(&mut redis)
        .await;
    let due_ms = match next {
        Ok(first) => first.first().map(|&(_, score)| score.max(0.0) * 1000.0),
        Err(_) => {
            Stats::bump(&shared.stats.redis_errors);
            None
        }
    };
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1000.0);
    match due_ms {
        Some(due) => Duration::from_millis((due - now_ms).max(0.0) as u64).min(SAFETY_LOOK),
        None => SAFETY_LOOK,
    }
}

/// The held set (a poisoned lock still holds a usable set).
fn hold(gate: &Gate) -> std::sync::MutexGuard<'_, HashSet<Vec<u8>>> {
    gate.held.lock().unwrap_or_else(|p| p.into_inner())
}

/// Puts back the processing entries of `function` that no task holds. Runs
/// in the taker's own loop, so no entry is between taken and held. False
/// when Redis could not be read.
async fn sweep(shared: &Shared, function: &str, gate: &Gate) -> bool {
    let mut redis = shared.redis.clone();
    let listed: redis::RedisResult<Vec<Vec<u8>>> = redis::cmd("LRANGE")
        .arg(keys::processing(function))
        .arg(0)
        .arg(-1)
        .query_async(&mut redis)
        .await;
    let Ok(listed) = listed else { return false };
    let orphans: Vec<Vec<u8>> = {
        let held = hold(gate);
        listed.into_iter().filter(|e| !held.contains(e)).collect()
    };
    for entry in orphans {
        tracing::warn!(function, entry = %String::from_utf8_lossy(&entry), "gearmonkey: a taken job no task holds; back to its queue");
        put_back(shared, function, &entry).await;
    }
    true
}

/// One taken job, from its processing entry to its written result.
async fn run_one(shared: &Shared, function: &str, prio: &str, raw_id: &[u8]) {
    let entry = entry_of(prio, raw_id);
    let mut redis = shared.redis.clone();
    let Some(id) = keys::parse_id(raw_id) else {
        Stats::bump(&shared.stats.bad_id);
        tracing::warn!(
            function,
            entry = %String::from_utf8_lossy(raw_id),
            "gearmonkey: queue entry is not an integer job id; kept in gearshift:rejected:{function}"
        );
        reject(shared, function, &entry).await;
        return;
    };
    let job_key = keys::job(function, id);
    let input: redis::RedisResult<Option<Vec<u8>>> = redis::cmd("HGET")
        .arg(&job_key)
        .arg("input")
        .query_async(&mut redis)
        .await;
    let input = match input {
        Ok(Some(input)) => input,
        Ok(None) => {
            Stats::bump(&shared.stats.missing_job);
            tracing::warn!(
                function,
                id,
                "gearmonkey: queue entry names no job hash with an input ({job_key}); kept in gearshift:rejected:{function}"
            );
            reject(shared, function, &entry).await;
            return;
        }
        Err(e) => {
            // Left in the processing list; put back on the next start.
            Stats::bump(&shared.stats.redis_errors);
            tracing::warn!(function, id, "gearmonkey: cannot read {job_key}: {e}");
            put_back(shared, function, &entry).await;
            return;
        }
    };
    let started = redis::pipe()
        .atomic()
        .cmd("HSET")
        .arg(&job_key)
        .arg("status")
        .arg("busy")
        .ignore()
        .cmd("PUBLISH")
        .arg(keys::channel(function))
        .arg(format!("start:{id}"))
        .ignore()
        .query_async::<()>(&mut redis)
        .await;
    if let Err(e) = started {
        Stats::bump(&shared.stats.redis_errors);
        tracing::warn!(function, id, "gearmonkey: cannot mark {job_key} busy: {e}");
    }
    let gm_prio = Prio::parse(prio).unwrap_or(Prio::Normal);
    let outcome = run_in_gearshift(shared, function, id, gm_prio, input).await;
    let Some((status, output)) = outcome else {
        put_back(shared, function, &entry).await;
        return;
    };
    finish(shared, function, id, &entry, status, &output).await;
}

/// Submits the job to Gearshift and follows it; `None` when Gearshift could
/// not be reached (the job goes back to its queue).
async fn run_in_gearshift(
    shared: &Shared,
    function: &str,
    id: u64,
    prio: Prio,
    input: Vec<u8>,
) -> Option<(&'static str, Bytes)> {
    let client: &Client = &shared.client;
    let submitted = client
        .job(function.to_owned(), input)
        .unique(keys::unique(function, id))
        .priority(prio.gearman())
        .no_timeout()
        .submit()
        .await;
    let mut job = match submitted {
        Ok(job) => job,
        Err(e) => {
            Stats::bump(&shared.stats.gearman_errors);
            tracing::warn!(function, id, "gearmonkey: cannot submit to Gearshift: {e}");
            return None;
        }
    };
    let mut redis = shared.redis.clone();
    let job_key = keys::job(function, id);
    loop {
        match job.next_event().await {
            Ok(Some(JobEvent::Status {
                numerator,
                denominator,
            })) => {
                let r = redis::cmd("HSET")
                    .arg(&job_key)
                    .arg("status:dividend")
                    .arg(numerator)
                    .arg("status:divisor")
                    .arg(denominator)
                    .query_async::<()>(&mut redis)
                    .await;
                if let Err(e) = r {
                    Stats::bump(&shared.stats.redis_errors);
                    tracing::warn!(function, id, "gearmonkey: cannot write progress: {e}");
                }
            }
            Ok(Some(JobEvent::Complete(out))) => return Some(("success", out)),
            Ok(Some(JobEvent::Fail)) => {
                // WORK_FAIL carries no text: the server's record has the last error.
                let handle = String::from_utf8_lossy(job.handle().handle()).into_owned();
                // (gone when the server keeps no ended jobs: then the reason word).
                let text = shared
                    .admin
                    .last_error(&handle)
                    .await
                    .unwrap_or_else(|| "fail".to_owned());
                return Some(("error", Bytes::from(text)));
            }
            Ok(Some(JobEvent::Exception(text))) => return Some(("error", text)),
            Ok(Some(JobEvent::Data(_) | JobEvent::Warning(_))) => {}
            Ok(None) | Err(_) => {
                Stats::bump(&shared.stats.gearman_errors);
                tracing::warn!(
                    function,
                    id,
                    "gearmonkey: lost the Gearshift job; back to its queue"
                );
                return None;
            }
        }
    }
}

/// Writes the result exactly as a GearMonkey worker does, and drops the
/// processing entry in the same transaction.
async fn finish(
    shared: &Shared,
    function: &str,
    id: u64,
    entry: &[u8],
    status: &str,
    output: &[u8],
) {
    let job_key = keys::job(function, id);
    let lock_key = keys::lock(function, id);
    let mut pipe = redis::pipe();
    pipe.atomic()
        .cmd("HSET")
        .arg(&job_key)
        .arg("status")
        .arg(status)
        .arg("output")
        .arg(output)
        .ignore()
        .cmd("EXPIRE")
        .arg(&job_key)
        .arg(90000)
        .ignore()
        .cmd("PUBLISH")
        .arg(keys::channel(function))
        .arg(format!("finish:{id}"))
        .ignore()
        .cmd("LPUSH")
        .arg(&lock_key)
        .arg("OK")
        .ignore()
        .cmd("EXPIRE")
        .arg(&lock_key)
        .arg(10)
        .ignore()
        .cmd("LREM")
        .arg(keys::processing(function))
        .arg(1)
        .arg(entry)
        .ignore();
    // Redis may be restarting: retry, the Gearshift result is kept meanwhile.
    let mut redis = shared.redis.clone();
    for attempt in 0u32.. {
        match pipe.query_async::<()>(&mut redis).await {
            Ok(()) => {
                Stats::bump(&shared.stats.finished);
                return;
            }
            Err(e) => {
                Stats::bump(&shared.stats.redis_errors);
                if attempt % 10 == 0 {
                    tracing::warn!(function, id, "gearmonkey: cannot write the result yet: {e}");
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Moves a processing entry to the rejected list (kept, never run).
async fn reject(shared: &Shared, function: &str, entry: &[u8]) {
    let mut redis = shared.redis.clone();
    let r = redis::pipe()
        .atomic()
        .cmd("LREM")
        .arg(keys::processing(function))
        .arg(1)
        .arg(entry)
        .ignore()
        .cmd("LPUSH")
        .arg(keys::rejected(function))
        .arg(entry)
        .ignore()
        .query_async::<()>(&mut redis)
        .await;
    if let Err(e) = r {
        Stats::bump(&shared.stats.redis_errors);
        tracing::warn!(function, "gearmonkey: cannot move a rejected entry: {e}");
    }
}

/// Puts a processing entry back at the head of its queue.
pub async fn put_back(shared: &Shared, function: &str, entry: &[u8]) {
    let Some((prio, id)) = keys::parse_entry(entry) else {
        reject(shared, function, entry).await;
        return;
    };
    let (kind, score) = if prio == Prio::Scheduled {
        ("zset", now())
    } else {
        ("list", 0)
    };
    let mut redis = shared.redis.clone();
    let r: redis::RedisResult<i64> = scripts::put_back()
        .key(keys::processing(function))
        .key(keys::queue(function, prio))
        .arg(entry)
        .arg(id)
        .arg(kind)
        .arg(score)
        .invoke_async(&mut redis)
        .await;
    match r {
        Ok(n) => {
            if n > 0 {
                Stats::bump(&shared.stats.put_back);
            }
        }
        Err(e) => {
            Stats::bump(&shared.stats.redis_errors);
            tracing::warn!(
                function,
                "gearmonkey: cannot put a job back (kept in its processing list): {e}"
            );
        }
    }
}
