//! The harvester: every third of harvest_after it lists `<P>workers/` and
//! takes every `ALIVE` entry whose heartbeat is older than harvest_after,
//! Gearshift's or a native worker's: one transaction marks it `DEAD` and
//! puts its unfinished job back to `QUEUED`, compared on both revisions.
//! A bridge's own entry takes every job that bridge claimed with it. At
//! start, this node's entries from a previous run are taken at once.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::doc::{harvested_job, same_gearshift, JobDoc, State, WorkerDoc};
use crate::stats::Stats;
use crate::store::{Entry, Write};
use crate::time::{now_ms, now_text};
use crate::Shared;

/// Jobs put back per transaction (etcd allows 128 operations by default).
const CHUNK: usize = 50;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Entries whose heartbeat lapsed.
    Stale,
    /// This node's entries left `ALIVE` by a previous run.
    PreviousRun,
}

/// Runs a round every third of harvest_after until aborted.
pub async fn run(shared: Arc<Shared>) {
    let every = (shared.cfg.harvest_after / 3).max(Duration::from_millis(100));
    let mut reported = HashSet::new();
    loop {
        tokio::time::sleep(every).await;
        let _ = round(&shared, Mode::Stale, &mut reported).await;
        if shared.unsure_claims.swap(false, Ordering::Relaxed) && !orphans(&shared).await {
            shared.unsure_claims.store(true, Ordering::Relaxed);
        }
    }
}

/// Puts back jobs `STARTED` under this bridge's own name that no task of
/// it holds: claims whose reply was lost and that applied after all.
/// Fenced on each job's revision. False when etcd could not be read.
async fn orphans(shared: &Shared) -> bool {
    let jobs = match shared
        .etcd
        .range(&shared.keys.job_dir(State::Started))
        .await
    {
        Ok((j, _)) => j,
        Err(e) => {
            Stats::bump(&shared.stats.etcd_errors);
            tracing::debug!("etcd: cannot list the jobs: {e}");
            return false;
        }
    };
    for j in jobs {
        let Some(id) = j.key.rsplit('/').next() else {
            continue;
        };
        let Ok(doc) = JobDoc::parse(&j.value) else {
            continue;
        };
        if doc.state() != Ok(State::Started)
            || doc.owner() != Some(shared.owner.as_str())
            || shared.queue().is_held(id)
        {
            continue;
        }
        let mut back = doc.clone();
        back.requeue("gearshift lost its claim", &now_text());
        let mut write = Write::default();
        add_requeue(shared, &mut write, id, &j, &back);
        if let Ok(Some(_)) = shared.etcd.write(&write).await {
            Stats::bump(&shared.stats.jobs_harvested);
            tracing::warn!(key = j.key, "etcd: put back a claim whose reply was lost");
        }
    }
    true
}

/// Takes this node's entries from a previous run (before anything is
/// claimed), retrying while etcd does not answer.
pub async fn previous_run(shared: &Shared, shutdown: &tokio::sync::watch::Receiver<bool>) {
    let mut reported = HashSet::new();
    for attempt in 0u32.. {
        if round(shared, Mode::PreviousRun, &mut reported).await {
            return;
        }
        if *shutdown.borrow() {
            return;
        }
        if attempt.is_multiple_of(30) {
            tracing::warn!("etcd: cannot read the workers yet (retrying every second)");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// One round; false when etcd could not be read.
async fn round(shared: &Shared, mode: Mode, reported: &mut HashSet<(String, i64)>) -> bool {
    let entries = match shared.etcd.range(&shared.keys.workers_dir()).await {
        Ok((e, _)) => e,
        Err(e) => {
            Stats::bump(&shared.stats.etcd_errors);
            tracing::debug!("etcd: cannot list the workers: {e}");
            return false;
        }
    };
    let now = now_ms();
    let timeout = i64::try_from(shared.cfg.harvest_after.as_millis()).unwrap_or(i64::MAX);
    let mine = format!("{}-", shared.owner);
    for e in entries {
        let w = match WorkerDoc::parse(&e.value) {
            Ok(w) => w,
            Err(err) => {
                if reported.insert((e.key.clone(), e.mod_rev)) {
                    Stats::bump(&shared.stats.bad_json);
                    tracing::warn!(key = e.key, "etcd: worker entry is {err}; left alone");
                }
                continue;
            }
        };
        // This node's live entries are this process's: its registry
        // rewrites them (after an outage too), so they are never taken here.
        let own = w
            .instance()
            .is_some_and(|i| i == shared.owner || i.starts_with(&mine));
        let take = match mode {
            Mode::Stale => !own && w.stale(now, timeout),
            Mode::PreviousRun => w.alive() && own,
        };
        if take {
            let why = match mode {
                Mode::Stale => "its heartbeat lapsed",
                Mode::PreviousRun => "a previous run of this node left it ALIVE",
            };
            harvest(shared, &e, &w, why).await;
        }
    }
    true
}

/// Takes one worker entry and its job(s).
async fn harvest(shared: &Shared, entry: &Entry, w: &WorkerDoc, why: &str) {
    let date = now_text();
    if w.is_bridge() && !harvest_claims(shared, entry, w, &date).await {
        return;
    }
    let mut dead = w.clone();
    dead.mark_dead();
    let mut write = Write {
        expect: vec![(entry.key.clone(), entry.mod_rev)],
        put: vec![(entry.key.clone(), dead.to_vec())],
        ..Write::default()
    };
    let mut requeued = None;
    if let Some(id) = w.job() {
        let key = shared.keys.job(&id, State::Started);
        match shared.etcd.get(&key).await {
            Ok(Some(j)) => {
                if let Some(back) = JobDoc::parse(&j.value)
                    .ok()
                    .and_then(|doc| harvested_job(&doc, w, &date))
                {
                    add_requeue(shared, &mut write, &id, &j, &back);
                    requeued = Some(id);
                }
            }
            Ok(None) => {}
            Err(e) => {
                Stats::bump(&shared.stats.etcd_errors);
                tracing::debug!("etcd: cannot read {key}: {e}");
                return;
            }
        }
    }
    match shared.etcd.write(&write).await {
        Ok(Some(_)) => {
            Stats::bump(&shared.stats.workers_harvested);
            if requeued.is_some() {
                Stats::bump(&shared.stats.jobs_harvested);
            }
            tracing::info!(
                key = entry.key,
                job = requeued.as_deref().unwrap_or("-"),
                "etcd: harvested a worker: {why}"
            );
        }
        // Another harvester was first, or the worker came back.
        Ok(None) => {}
        Err(e) => {
            Stats::bump(&shared.stats.etcd_errors);
            tracing::debug!("etcd: cannot harvest {}: {e}", entry.key);
        }
    }
}

/// Adds "put job `id` back" to a write, compared on its revision.
fn add_requeue(shared: &Shared, write: &mut Write, id: &str, job: &Entry, back: &JobDoc) {
    write.expect.push((job.key.clone(), job.mod_rev));
    let to = shared.keys.job(id, State::Queued);
    if to != job.key {
        write.delete.push(job.key.clone());
    }
    write.put.push((to, back.to_vec()));
}

/// Puts back every `STARTED` job a lost bridge owns (itself, or one of its
/// connections' entries since the job started), in chunks compared on
/// the bridge entry's revision too (a bridge that comes back stops it).
/// False when not all could be put back (tried again next round).
async fn harvest_claims(shared: &Shared, entry: &Entry, w: &WorkerDoc, date: &str) -> bool {
    let Some(owner) = w.instance() else {
        return true;
    };
    let jobs = match shared
        .etcd
        .range(&shared.keys.job_dir(State::Started))
        .await
    {
        Ok((j, _)) => j,
        Err(e) => {
            Stats::bump(&shared.stats.etcd_errors);
            tracing::debug!("etcd: cannot list the jobs: {e}");
            return false;
        }
    };
    let claimed: Vec<(Entry, JobDoc)> = jobs
        .into_iter()
        .filter_map(|j| {
            let doc = JobDoc::parse(&j.value).ok()?;
            let its = same_gearshift(owner, doc.owner()?);
            (doc.state() == Ok(State::Started) && its).then_some((j, doc))
        })
        .collect();
    for chunk in claimed.chunks(CHUNK) {
        let mut write = Write {
            expect: vec![(entry.key.clone(), entry.mod_rev)],
            ..Write::default()
        };
        for (j, doc) in chunk {
            let id = j.key.rsplit('/').next().unwrap_or_default();
            let mut back = doc.clone();
            back.requeue(&format!("harvested: worker {} lost", w.name()), date);
            add_requeue(shared, &mut write, id, j, &back);
        }
        match shared.etcd.write(&write).await {
            Ok(Some(_)) => {
                for _ in chunk {
                    Stats::bump(&shared.stats.jobs_harvested);
                }
                tracing::info!(
                    owner,
                    jobs = chunk.len(),
                    "etcd: put back the jobs of a lost Gearshift"
                );
            }
            Ok(None) => return false,
            Err(e) => {
                Stats::bump(&shared.stats.etcd_errors);
                tracing::debug!("etcd: cannot put back jobs of {owner}: {e}");
                return false;
            }
        }
    }
    true
}
