//! Gearman clients -> GearMonkey workers: for a function GearMonkey workers
//! serve and no Gearman worker does, the bridge registers as a Gearman
//! worker (client id `gearmonkey-bridge`), writes each job it is given as a
//! GearMonkey job, and follows the hash until a GearMonkey worker finishes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use gearshift_client::worker::WorkerJob;
use gearshift_client::{WorkError, Worker};
use tokio::sync::{oneshot, watch};

use crate::keys;
use crate::stats::Stats;
use crate::{scripts, Shared};

/// The client id the bridge's Gearman worker sets, so the supervisor does
/// not count it as a Gearman worker (and `workers` shows whose it is).
pub const BRIDGE_ID: &str = "gearmonkey-bridge";

/// Jobs one bridged function may have out at GearMonkey workers at once.
const CONCURRENCY: usize = 256;

/// Epoch jobs one bridged function may have in GearMonkey's scheduled set
/// at once; more wait in Gearshift and go to a queue when due.
const SCHEDULED: usize = 4096;

/// The longest a followed job's hash goes unread while its end would be
/// announced (how late its progress may reach the Gearman client).
const PROGRESS_LOOK: Duration = Duration::from_millis(250);

/// The longest it goes unread otherwise.
const FAST_LOOK: Duration = Duration::from_millis(20);

/// How long a followed job runs before it is followed by announcement.
const LISTEN_AFTER: Duration = Duration::from_secs(1);

/// How long the bridge remembers which GearMonkey job a Gearman job
/// became after it is due (GearMonkey's own result lifetime).
const GIVEN_TTL: u64 = 90_000;

/// A running bridge worker for one function.
pub struct Giver {
    /// Sent (or dropped) to stop the worker once its jobs are done.
    pub stop: oneshot::Sender<()>,
    /// Aborted when Gearshift stops: the connection drops, Gearshift takes
    /// the jobs back, and a durable one given again later resumes following
    /// its GearMonkey job (`gearshift:given:`), so a stop never waits on
    /// GearMonkey workers.
    pub task: tokio::task::JoinHandle<()>,
    /// Started for a routed function (not by the roll call).
    pub routed: bool,
}

/// Starts the Gearman workers for `function` that hand its jobs to Redis:
/// one for jobs to run now, and one that asks for epoch jobs at submission
/// (OPTION_REQ epoch-early) and puts them in GearMonkey's scheduled set.
pub fn start(
    shared: Arc<Shared>,
    function: String,
    routed: bool,
) -> Result<Giver, gearshift_client::Error> {
    let now = worker(&shared, &function, false, CONCURRENCY)?;
    let scheduler = worker(&shared, &function, true, SCHEDULED)?;
    let (stop, stopped) = oneshot::channel::<()>();
    let (tx, rx) = watch::channel(false);
    let until = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|&stop| stop).await;
    };
    let (a, b) = (until(rx.clone()), until(rx));
    let task = tokio::spawn(async move {
        let signal = async move {
            let _ = stopped.await;
            let _ = tx.send(true);
        };
        tokio::join!(signal, now.run(a), scheduler.run(b));
    });
    tracing::info!(
        function,
        "gearmonkey: Gearman jobs of {function} now go to GearMonkey workers"
    );
    Ok(Giver { stop, task, routed })
}

/// One of the bridge's Gearman workers for `function`.
fn worker(
    shared: &Arc<Shared>,
    function: &str,
    epoch_early: bool,
    concurrency: usize,
) -> Result<Worker, gearshift_client::Error> {
    let (handler_shared, name) = (shared.clone(), function.to_owned());
    Worker::builder()
        .server(shared.gearman)
        .client_id(BRIDGE_ID)
        .exceptions(true)
        .epoch_early(epoch_early)
        .concurrency(concurrency)
        .function(function.to_owned(), move |job: WorkerJob| {
            let (shared, function) = (handler_shared.clone(), name.clone());
            async move { give_one(&shared, &function, job).await }
        })
        .build()
}

/// Retries a Redis call every half second until it works (Redis may be
/// restarting); the Gearman job waits meanwhile, other functions do not.
async fn retry<T, F, Fut>(shared: &Shared, what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = redis::RedisResult<T>>,
{
    for attempt in 0u32.. {
        match call().await {
            Ok(v) => return v,
            Err(e) => {
                Stats::bump(&shared.stats.redis_errors);
                if attempt % 10 == 0 {
                    tracing::warn!("gearmonkey: {what}: {e} (retrying)");
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
    unreachable!("the retry loop only ends by returning")
}

/// One Gearman job written to Redis (once per handle) and followed to its end.
async fn give_one(shared: &Shared, function: &str, job: WorkerJob) -> Result<Bytes, WorkError> {
    let handle = String::from_utf8_lossy(job.handle()).into_owned();
    // Its Gearman priority picks the queue; an epoch job not yet due (one
    // handed early) goes into the scheduled set under its time.
    let now = unix_ms();
    let (prio, due) = crate::admin::placement(&shared.admin, &handle, now).await;
    let keep = due.map_or(GIVEN_TTL, |d| {
        d.saturating_sub(now as u64 / 1000)
            .saturating_add(GIVEN_TTL)
    });
    let script = scripts::give();
    let redis = shared.redis.clone();
    let (created, raw_id): (i64, String) = retry(shared, "cannot write the job", || {
        let mut r = redis.clone();
        let mut call = script.key(keys::given(function, &handle));
        call.key(keys::uid(function))
            .key(keys::channel(function))
            .arg(function)
            .arg(job.data().as_ref())
            .arg(prio.word())
            .arg(due.unwrap_or(0))
            .arg(keep);
        async move { call.invoke_async(&mut r).await }
    })
    .await;
    let Some(id) = keys::parse_id(raw_id.as_bytes()) else {
        Stats::bump(&shared.stats.bad_id);
        tracing::warn!(
            function,
            "gearmonkey: uid:{function} gave a job id that is not an integer: {raw_id:?}"
        );
        return Err(WorkError::exception(format!(
            "gearmonkey: bad job id {raw_id:?}"
        )));
    };
    if created == 1 {
        Stats::bump(&shared.stats.given);
    } else {
        tracing::info!(
            function,
            id,
            "gearmonkey: {handle} was given before; following job:{function}:{id} again"
        );
    }
    if let Some(due) = due {
        // Nothing happens to it before its time: follow it from then on.
        let wait = (due * 1000).saturating_sub(unix_ms() as u64);
        tokio::time::sleep(Duration::from_millis(wait)).await;
    }
    let outcome = follow(shared, function, id, &job).await;
    if outcome.is_err() {
        // A retry of the Gearman job is a new GearMonkey job, not this one.
        let mut r = shared.redis.clone();
        let gone: redis::RedisResult<()> = redis::cmd("DEL")
            .arg(keys::given(function, &handle))
            .query_async(&mut r)
            .await;
        if gone.is_err() {
            Stats::bump(&shared.stats.redis_errors);
        }
    }
    outcome
}

/// Now, in Unix milliseconds.
fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Polls the hash until `status` is success or error, forwarding progress.
async fn follow(
    shared: &Shared,
    function: &str,
    id: u64,
    job: &WorkerJob,
) -> Result<Bytes, WorkError> {
    let job_key = keys::job(function, id);
    let mut last_progress: Option<(u32, u32)> = None;
    // Reading from 1 ms, a quarter longer each time, at most 20 ms; a job
    // still running after a second then subscribes to its `finish:`
    // announcement and is read at most every 250 ms (for its progress) and
    // at once when it ends. (Shorter jobs are cheaper polled: announcements
    // of every job of the function would be read meanwhile.)
    let mut pause = Duration::from_millis(1);
    let mut listening: Option<crate::wake::Listening> = None;
    let mut next_listen = tokio::time::Instant::now() + LISTEN_AFTER;
    let redis = shared.redis.clone();
    loop {
        match &listening {
            Some(l) => {
                let _ = tokio::time::timeout(pause, l.woken.notified()).await;
            }
            None => tokio::time::sleep(pause).await,
        }
        if listening.is_none() && tokio::time::Instant::now() >= next_listen {
            // Read right after (an end announced before is not heard).
            listening = shared.wakes.listen(function, Some(id)).await;
            next_listen = tokio::time::Instant::now() + Duration::from_secs(1);
        }
        let longest = if listening.is_some() {
            PROGRESS_LOOK
        } else {
            FAST_LOOK
        };
        pause = (pause * 5 / 4).min(longest);
        type Fields = (
            Option<Vec<u8>>,
            Option<Vec<u8>>,
            Option<Vec<u8>>,
            Option<Vec<u8>>,
        );
        let (status, dividend, divisor, output): Fields =
            retry(shared, "cannot read a job", || {
                let mut r = redis.clone();
                let key = job_key.clone();
                async move {
                    redis::cmd("HMGET")
                        .arg(key)
                        .arg("status")
                        .arg("status:dividend")
                        .arg("status:divisor")
                        .arg("output")
                        .query_async(&mut r)
                        .await
                }
            })
            .await;
        if let (Some(a), Some(b)) = (&dividend, &divisor) {
            match (parse_u32(a), parse_u32(b)) {
                (Some(a), Some(b)) if last_progress != Some((a, b)) => {
                    last_progress = Some((a, b));
                    if job.send_status(a, b).await.is_err() {
                        Stats::bump(&shared.stats.gearman_errors);
                    }
                }
                (Some(_), Some(_)) => {}
                _ if last_progress != Some((u32::MAX, u32::MAX)) => {
                    last_progress = Some((u32::MAX, u32::MAX));
                    Stats::bump(&shared.stats.bad_field);
                    tracing::warn!(
                        function,
                        id,
                        "gearmonkey: {job_key} has a dividend or divisor that is not an integer"
                    );
                }
                _ => {}
            }
        }
        let output = Bytes::from(output.unwrap_or_default());
        match status.as_deref() {
            Some(b"success") => return Ok(output),
            Some(b"error") => return Err(WorkError::Exception(output)),
            Some(b"idle" | b"busy") => {}
            None => {
                // Deleted or expired under us: nothing will ever finish it.
                Stats::bump(&shared.stats.missing_job);
                tracing::warn!(
                    function,
                    id,
                    "gearmonkey: {job_key} vanished before it finished; failing the Gearman job"
                );
                return Err(WorkError::exception(format!(
                    "gearmonkey: {job_key} vanished"
                )));
            }
            Some(other) => {
                Stats::bump(&shared.stats.bad_field);
                tracing::warn!(function, id, status = %String::from_utf8_lossy(other), "gearmonkey: {job_key} has an unknown status; failing the Gearman job");
                return Err(WorkError::exception(format!(
                    "gearmonkey: unknown status in {job_key}"
                )));
            }
        }
    }
}

/// A dividend or divisor: an integer that fits WORK_STATUS.
fn parse_u32(raw: &[u8]) -> Option<u32> {
    std::str::from_utf8(raw).ok()?.trim().parse().ok()
}
