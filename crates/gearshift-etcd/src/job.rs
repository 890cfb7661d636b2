//! One etcd job from its claim to its `FINISHED` state. The claimer takes
//! jobs from the [`crate::queue::Queue`] while Gearman workers are free;
//! each job claims by compare-and-swap on the revision read, runs as a
//! foreground Gearshift job (unique `etcd:<P><id>`), and writes every
//! later change fenced on the revision of its own previous write, so a job
//! taken away (harvested) cannot be written by its old owner.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use gearshift_client::JobEvent;

use crate::doc::{JobDoc, State};
use crate::queue::Candidate;
use crate::stats::Stats;
use crate::store::Write;
use crate::time::now_text;
use crate::uncertain::Uncertain;
use crate::{Running, Shared};

/// Most of a WORK_DATA chunk or a result kept in `Step` or `Info`.
const MAX_TEXT: usize = 64 * 1024;

/// Least time between two `Step` writes of one job (a chatty worker's
/// progress is coalesced, the latest kept).
const STEP_EVERY: Duration = Duration::from_millis(100);

/// A claimed job: its key and the revision and document of the last own
/// write (what the next write compares).
pub struct Held {
    /// Its key (it moves in the split layout).
    pub key: String,
    /// The revision of the last own write.
    pub rev: i64,
    /// The document as last written.
    pub doc: JobDoc,
    /// Writes whose reply was lost: one of them may have applied.
    uncertain: Uncertain,
    /// Taken away: nothing more is written.
    pub lost: bool,
    /// Retries announced so far (a later one supersedes an earlier one's
    /// wait).
    retries: u64,
}

/// Why a fenced write did not apply.
#[derive(Debug, PartialEq, Eq)]
pub enum WriteError {
    /// The job changed under us: taken away.
    Fenced,
    /// etcd did not answer.
    Etcd,
}

/// Writes `doc` in state `state` over the held job, fenced; on success the
/// held revision, key and document follow.
pub async fn write_held(
    shared: &Shared,
    held: &mut Held,
    doc: JobDoc,
    state: State,
) -> Result<(), WriteError> {
    if held.lost {
        return Err(WriteError::Fenced);
    }
    if held.uncertain.is_full() {
        settle(shared, held).await?;
    }
    let id = held.key.rsplit('/').next().unwrap_or_default().to_owned();
    let key = shared.keys.job(&id, state);
    let bytes = doc.to_vec();
    for _ in 0..2 {
        let mut w = Write {
            expect: vec![(held.key.clone(), held.rev)],
            put: vec![(key.clone(), bytes.clone())],
            ..Write::default()
        };
        if key != held.key {
            w.delete.push(held.key.clone());
        }
        match shared.etcd.write(&w).await {
            Ok(Some(rev)) => {
                held.rev = rev;
                held.key = key;
                held.doc = doc;
                held.uncertain.clear();
                return Ok(());
            }
            Ok(None) => {
                // A lost reply may have applied an earlier write: then the
                // revision moved because of us.
                match adopt(shared, held).await? {
                    None => return Err(taken_away(shared, held)),
                    Some(applied) if applied == bytes => {
                        held.doc = doc;
                        return Ok(());
                    }
                    Some(_) => {}
                }
            }
            Err(e) => {
                Stats::bump(&shared.stats.etcd_errors);
                tracing::debug!(key = held.key, "etcd: write failed: {e}");
                held.uncertain.add(key, bytes);
                return Err(WriteError::Etcd);
            }
        }
    }
    Err(WriteError::Etcd)
}

/// Reads the keys of the held job's lost writes and takes on the one that
/// applied: its bytes, or `None` when none did.
async fn adopt(shared: &Shared, held: &mut Held) -> Result<Option<Vec<u8>>, WriteError> {
    let mut now = Vec::new();
    for key in held.uncertain.keys() {
        match shared.etcd.get(&key).await {
            Ok(Some(e)) => now.push(e),
            Ok(None) => {}
            // Still unknown: asked again next time.
            Err(_) => return Err(WriteError::Etcd),
        }
    }
    let Some(e) = held.uncertain.applied(&now) else {
        return Ok(None);
    };
    held.key = e.key.clone();
    held.rev = e.mod_rev;
    if let Ok(doc) = JobDoc::parse(&e.value) {
        held.doc = doc;
    }
    held.uncertain.clear();
    Ok(Some(e.value.clone()))
}

/// Settles the lost writes before more would be kept: the one that
/// applied is taken on; if none did and the job is as last written, they
/// are forgotten.
async fn settle(shared: &Shared, held: &mut Held) -> Result<(), WriteError> {
    if adopt(shared, held).await?.is_some() {
        return Ok(());
    }
    match shared.etcd.get(&held.key).await {
        Ok(Some(e)) if e.mod_rev == held.rev => {
            held.uncertain.clear();
            Ok(())
        }
        Ok(_) => Err(taken_away(shared, held)),
        Err(_) => Err(WriteError::Etcd),
    }
}

/// Marks the held job taken away: nothing more of it is written.
fn taken_away(shared: &Shared, held: &mut Held) -> WriteError {
    Stats::bump(&shared.stats.fenced);
    held.lost = true;
    tracing::warn!(
        key = held.key,
        "etcd: job taken away (harvested); its result here is dropped"
    );
    WriteError::Fenced
}

/// Like [`write_held`], retrying while etcd does not answer (a result or a
/// requeue must not be lost to an outage).
pub async fn write_held_surely(
    shared: &Shared,
    held: &mut Held,
    doc: JobDoc,
    state: State,
) -> Result<(), WriteError> {
    for attempt in 0u32.. {
        match write_held(shared, held, doc.clone(), state).await {
            Err(WriteError::Etcd) => {
                if attempt.is_multiple_of(20) {
                    tracing::warn!(key = held.key, "etcd: cannot write the job yet (retrying)");
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            other => return other,
        }
    }
    Err(WriteError::Etcd)
}

/// Claims jobs while Gearman workers are free, until aborted.
pub async fn claimer(shared: Arc<Shared>) {
    loop {
        let taken = shared.queue().take();
        for (function, c) in taken {
            let shared = shared.clone();
            tokio::spawn(async move {
                let id = c.id.clone();
                let mut slot = Slot {
                    shared: &shared,
                    function: &function,
                    released: false,
                };
                run_one(&mut slot, c).await;
                slot.release();
                shared.queue().unhold(&id);
            });
        }
        // Re-checked now and then in case a wake was missed.
        let _ = tokio::time::timeout(Duration::from_millis(100), shared.wake.notified()).await;
    }
}

/// A taken job's share of its function's capacity, given back as soon as
/// its Gearman worker is free (before the result is written to etcd).
struct Slot<'a> {
    shared: &'a Shared,
    function: &'a str,
    released: bool,
}

impl Slot<'_> {
    fn release(&mut self) {
        if !self.released {
            self.released = true;
            self.shared.queue().release(self.function);
            self.shared.wake.notify_one();
        }
    }
}

/// How a claim went.
enum Claim {
    Won(Held),
    Lost,
    /// It did not apply, for want of an answer: the job may be tried again.
    Failed,
}

/// The claim: `Owner` and `STARTED`, compared on the revision read.
async fn claim(shared: &Shared, c: &Candidate) -> Claim {
    let mut doc = c.doc.clone();
    doc.claim(&shared.owner, &now_text());
    let key = shared.keys.job(&c.id, State::Started);
    let bytes = doc.to_vec();
    let mut w = Write {
        expect: vec![(c.key.clone(), c.mod_rev)],
        put: vec![(key.clone(), bytes.clone())],
        ..Write::default()
    };
    if key != c.key {
        w.delete.push(c.key.clone());
    }
    let rev = match shared.etcd.write(&w).await {
        Ok(Some(rev)) => rev,
        Ok(None) => {
            Stats::bump(&shared.stats.claim_lost);
            return Claim::Lost;
        }
        Err(e) => {
            Stats::bump(&shared.stats.etcd_errors);
            tracing::warn!(key = c.key, "etcd: claim failed: {e}");
            // Its reply may be what was lost: look, once etcd answers (a
            // claim that applied unseen would leave the job STARTED here
            // with no one running it).
            loop {
                match shared.etcd.get(&key).await {
                    Ok(Some(e)) if e.value == bytes => break e.mod_rev,
                    Ok(_) => {
                        // It may yet apply (etcd can commit a timed-out
                        // request): the harvester looks for it.
                        shared.unsure_claims.store(true, Ordering::Relaxed);
                        return Claim::Failed;
                    }
                    Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                }
            }
        }
    };
    Stats::bump(&shared.stats.claimed);
    Claim::Won(Held {
        key,
        rev,
        doc,
        uncertain: Uncertain::default(),
        lost: false,
        retries: 0,
    })
}

/// One job: claim, run in Gearshift, write the end.
async fn run_one(slot: &mut Slot<'_>, c: Candidate) {
    let (shared, function) = (slot.shared, slot.function);
    let held = match claim(shared, &c).await {
        Claim::Won(held) => held,
        Claim::Lost => return,
        Claim::Failed => {
            // Not lost to anyone: tried again a little later (the watch
            // may say nothing more of it).
            tokio::time::sleep(Duration::from_secs(1)).await;
            shared.queue().retry(function.to_owned(), c);
            return;
        }
    };
    let workload = held.doc.to_vec();
    let held = Arc::new(tokio::sync::Mutex::new(held));
    let unique = format!("etcd:{}{}", shared.keys.prefix(), c.id);
    let submitted = shared
        .client
        .job(function.to_owned(), workload)
        .unique(unique)
        .no_timeout()
        .submit()
        .await;
    let mut job = match submitted {
        Ok(job) => job,
        Err(e) => {
            Stats::bump(&shared.stats.gearman_errors);
            tracing::warn!(id = c.id, "etcd: cannot submit to Gearshift: {e}");
            put_back(shared, &held, "gearshift could not take the job").await;
            return;
        }
    };
    let handle = String::from_utf8_lossy(job.handle().handle()).into_owned();
    shared.running().insert(
        handle.clone(),
        Running {
            id: c.id.clone(),
            held: held.clone(),
        },
    );
    // Progress is written at most every STEP_EVERY; the last one waits
    // for its turn (or goes into the FINISHED write).
    let mut pending: Option<String> = None;
    let mut last_step: Option<Instant> = None;
    let end = loop {
        let due = last_step.map_or_else(Instant::now, |t| t + STEP_EVERY);
        let event = tokio::select! {
            e = job.next_event() => e,
            _ = tokio::time::sleep_until(due.into()), if pending.is_some() => {
                if let Some(t) = pending.take() {
                    step(shared, &held, &t).await;
                    last_step = Some(Instant::now());
                }
                continue;
            }
        };
        let progress = match event {
            Ok(Some(JobEvent::Status {
                numerator,
                denominator,
            })) => format!("{numerator}/{denominator}"),
            Ok(Some(JobEvent::Data(d))) => text(&d),
            Ok(Some(JobEvent::Warning(_))) => continue,
            Ok(Some(JobEvent::Complete(out))) => break Some((true, text(&out))),
            Ok(Some(JobEvent::Exception(e))) => break Some((false, text(&e))),
            Ok(Some(JobEvent::Fail)) => {
                // WORK_FAIL carries no text: the server's record has the last error.
                let why = shared
                    .admin
                    .last_error(&handle)
                    .await
                    .unwrap_or_else(|| "fail".into());
                break Some((false, why));
            }
            Ok(None) | Err(_) => break None,
        };
        if last_step.is_some_and(|t| t.elapsed() < STEP_EVERY) {
            pending = Some(progress);
        } else {
            step(shared, &held, &progress).await;
            last_step = Some(Instant::now());
        }
    };
    shared.running().remove(&handle);
    slot.release();
    match end {
        Some((success, info)) => {
            let mut h = held.lock().await;
            let mut doc = h.doc.clone();
            if doc.state() == Ok(State::Queued) {
                // A retry ran before its STARTED was written.
                restart(shared, &mut doc);
            }
            if let Some(t) = pending {
                doc.set_step(&t);
            }
            doc.finish(success, &info, &now_text());
            if write_held_surely(shared, &mut h, doc, State::Finished)
                .await
                .is_ok()
            {
                Stats::bump(&shared.stats.finished);
            }
        }
        None => {
            Stats::bump(&shared.stats.gearman_errors);
            tracing::warn!(id = c.id, "etcd: lost the Gearshift job; back to QUEUED");
            put_back(shared, &held, "gearshift lost the job").await;
        }
    }
}

/// Updates the last state's `Step` (one try: progress is not worth a wait).
async fn step(shared: &Shared, held: &tokio::sync::Mutex<Held>, text: &str) {
    let mut h = held.lock().await;
    let mut doc = h.doc.clone();
    doc.set_step(text);
    let _ = write_held(shared, &mut h, doc, State::Started).await;
}

/// Gives a held job back: `QUEUED` saying why, `Owner` cleared.
pub async fn put_back(shared: &Shared, held: &tokio::sync::Mutex<Held>, why: &str) {
    let mut h = held.lock().await;
    let mut doc = h.doc.clone();
    doc.requeue(why, &now_text());
    let _ = write_held_surely(shared, &mut h, doc, State::Queued).await;
}

/// Output as text for `Step`/`Info` (UTF-8 lossily, bounded).
fn text(b: &Bytes) -> String {
    let cut = &b[..b.len().min(MAX_TEXT)];
    String::from_utf8_lossy(cut).into_owned()
}

/// A retry of a bridged job: `QUEUED` with the retry time in `Step` (the
/// job stays this Gearshift's), and `STARTED` again when it is due. A job
/// taken away meanwhile is cancelled in Gearshift.
pub async fn retrying(shared: Arc<Shared>, handle: String, at_ms: i64) {
    let Some(held) = shared.running().get(&handle).map(|r| r.held.clone()) else {
        return;
    };
    let when = crate::time::format_ms(at_ms);
    let mine;
    let queued = {
        let mut h = held.lock().await;
        let mut doc = h.doc.clone();
        match doc.state() {
            Ok(State::Started) => {}
            // The run before this failure started before its STARTED was
            // written (its wait had not ended): it ran, so say so first.
            Ok(State::Queued) => restart(&shared, &mut doc),
            // Ended meanwhile: nothing to say.
            _ => return,
        }
        h.retries += 1;
        mine = h.retries;
        doc.push_retry(&format!("retry at {when}"), &now_text());
        write_held_surely(&shared, &mut h, doc, State::Queued).await
    };
    if queued.is_ok() {
        Stats::bump(&shared.stats.retried);
        let wait = at_ms.saturating_sub(crate::time::now_ms()).max(0);
        tokio::time::sleep(Duration::from_millis(u64::try_from(wait).unwrap_or(0))).await;
        let mut h = held.lock().await;
        if h.lost || h.retries != mine || h.doc.state() != Ok(State::Queued) {
            // Ended first (its end wrote STARTED itself), taken away, or
            // a later retry took over.
            return;
        }
        let mut doc = h.doc.clone();
        restart(&shared, &mut doc);
        if write_held_surely(&shared, &mut h, doc, State::Started)
            .await
            .is_ok()
        {
            return;
        }
    }
    // Someone else has it now: this run must not go on.
    shared.admin.cancel_job(&handle).await;
}

/// `STARTED` again after this bridge's retry `QUEUED`, `Owner` kept.
fn restart(shared: &Shared, doc: &mut JobDoc) {
    let owner = doc.owner().unwrap_or(&shared.owner).to_owned();
    doc.claim(&owner, &now_text());
}

/// The job runs on the worker whose entry is `owner`: `Owner` names it, as
/// a native worker's claim names its own entry (one fenced write).
pub async fn set_owner(shared: Arc<Shared>, handle: String, owner: String) {
    let Some(held) = shared.running().get(&handle).map(|r| r.held.clone()) else {
        return;
    };
    let mut h = held.lock().await;
    if h.doc.owner() == Some(owner.as_str()) || h.doc.state() != Ok(State::Started) {
        return;
    }
    let mut doc = h.doc.clone();
    doc.set_owner(&owner);
    let _ = write_held(&shared, &mut h, doc, State::Started).await;
}
