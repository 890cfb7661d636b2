//! The job watch: reads the queue directory once (on start and after any
//! reconnect or compaction), then follows a watch from the revision after
//! that read. Every `QUEUED` job becomes a [`Candidate`]; bad documents are
//! logged and counted once per revision and never claimed.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{EventType, WatchOptions};

use crate::doc::{DocError, JobDoc, State};
use crate::queue::Candidate;
use crate::stats::Stats;
use crate::{Shared, MAX_DOC};

/// Follows the queue directory until aborted.
pub async fn run(shared: Arc<Shared>) {
    let dir = shared.keys.queue_dir();
    let mut reported: HashSet<(String, i64)> = HashSet::new();
    let mut failures = 0u32;
    loop {
        let (entries, revision) = match shared.etcd.range(&dir).await {
            Ok(r) => r,
            Err(e) => {
                Stats::bump(&shared.stats.etcd_errors);
                if failures.is_multiple_of(30) {
                    tracing::warn!("etcd: cannot read {dir}: {e} (retrying every second)");
                }
                failures += 1;
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if failures > 0 {
            tracing::info!("etcd: reading {dir} again after {failures} failed tries");
            failures = 0;
        }
        {
            let mut q = shared.queue();
            q.clear();
            drop(q);
            for e in entries {
                consider(&shared, &e.key, &e.value, e.mod_rev, &mut reported);
            }
        }
        shared.wake.notify_one();
        let opts = WatchOptions::new()
            .with_prefix()
            .with_start_revision(revision + 1);
        let mut client = shared.etcd.client();
        let (_watcher, mut stream) = match client.watch(dir.as_str(), Some(opts)).await {
            Ok(w) => w,
            Err(e) => {
                Stats::bump(&shared.stats.etcd_errors);
                tracing::warn!("etcd: cannot watch {dir}: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        loop {
            match stream.message().await {
                Ok(Some(resp)) => {
                    if resp.canceled() || resp.compact_revision() != 0 {
                        tracing::warn!(
                            "etcd: the watch of {dir} was cancelled ({}); reading it again",
                            resp.cancel_reason()
                        );
                        break;
                    }
                    for ev in resp.events() {
                        let Some(kv) = ev.kv() else { continue };
                        let key = String::from_utf8_lossy(kv.key());
                        match ev.event_type() {
                            EventType::Put => consider(
                                &shared,
                                &key,
                                kv.value(),
                                kv.mod_revision(),
                                &mut reported,
                            ),
                            EventType::Delete => {
                                if let Some(id) = shared.keys.id_of(&key) {
                                    shared.queue().remove(id);
                                }
                            }
                        }
                    }
                    shared.wake.notify_one();
                }
                Ok(None) => {
                    Stats::bump(&shared.stats.etcd_errors);
                    tracing::warn!("etcd: the watch of {dir} ended; reading it again");
                    break;
                }
                Err(e) => {
                    Stats::bump(&shared.stats.etcd_errors);
                    tracing::warn!("etcd: the watch of {dir} failed: {e}; reading it again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    break;
                }
            }
        }
        Stats::bump(&shared.stats.watch_restarts);
    }
}

/// One key of the queue directory as read or watched.
fn consider(
    shared: &Shared,
    key: &str,
    value: &[u8],
    mod_rev: i64,
    reported: &mut HashSet<(String, i64)>,
) {
    let Some(id) = shared.keys.id_of(key) else {
        return;
    };
    let mut report = |what: &str, counter: &std::sync::atomic::AtomicU64| {
        if reported.len() > 100_000 {
            reported.clear();
        }
        if reported.insert((key.to_owned(), mod_rev)) {
            Stats::bump(counter);
            tracing::warn!(key, mod_rev, "etcd: {what}; left alone");
        }
    };
    if value.len() > MAX_DOC {
        report(
            &format!(
                "job document of {} bytes is over the {} byte bound",
                value.len(),
                MAX_DOC
            ),
            &shared.stats.too_big,
        );
        shared.queue().remove(id);
        return;
    }
    match JobDoc::parse(value) {
        Ok(doc) if doc.state() == Ok(State::Queued) => {
            let function = doc.function(&shared.cfg.function_field, &shared.cfg.default_function);
            let c = Candidate {
                id: id.to_owned(),
                key: key.to_owned(),
                mod_rev,
                doc,
            };
            shared.queue().offer(function, c);
        }
        Ok(_) => shared.queue().remove(id),
        Err(e @ DocError::Malformed(_)) => {
            report(&format!("job document is {e}"), &shared.stats.bad_json);
            shared.queue().remove(id);
        }
        Err(e) => {
            report(
                &format!("job document has {e}"),
                &shared.stats.unknown_state,
            );
            shared.queue().remove(id);
        }
    }
}
