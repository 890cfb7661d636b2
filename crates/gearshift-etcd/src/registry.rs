//! Gearshift's workers in the etcd registry: one entry per Gearman worker
//! connection (`<P>workers/gearshift-<node>-<conn>`, from the server's
//! `worker_joined`/`worker_left` events), `Job` from the supervisor,
//! `Heartbeat` every third of harvest_after, `DEAD` when it disconnects.
//! The bridge has an entry of its own (`gearshift-<node>`, `Role`
//! `gearshift-bridge`): harvesting it puts back every job it claimed.
//! Every heartbeat (and at once after missed events) it also reads the
//! server's worker list: `Stats` the workers reported, `Name` changes,
//! and entries for workers whose join or leave events it missed. Where no
//! events tell of workers (a partitioned node: [`Server::Api`]), the list
//! is read every second, and an entry's key is the worker's node, address
//! and port rather than its connection id.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use gearshift_core::view::WorkerView;
use tokio::sync::{mpsc, watch};

use crate::doc::WorkerDoc;
use crate::outage::{Change, Outage};
use crate::server::{key_of_event, Server};
use crate::stats::Stats;
use crate::store::Write;
use crate::supervisor::JobsByFd;
use crate::time::now_text;
use crate::{job, ServerEvent, Shared};

/// The `Role` of the bridge's own entry.
pub const BRIDGE_ROLE: &str = "gearshift-bridge";

struct Entry {
    key: String,
    doc: WorkerDoc,
    fd: i64,
    job: Option<String>,
    /// The last write failed: written again on the next heartbeat.
    dirty: bool,
}

/// Writes an entry (unconditionally: this Gearshift is alive, so an entry a
/// harvester marked `DEAD` during an outage comes back `ALIVE`).
async fn put(shared: &Shared, e: &mut Entry) {
    let w = Write {
        put: vec![(e.key.clone(), e.doc.to_vec())],
        ..Write::default()
    };
    match shared.etcd.write(&w).await {
        Ok(_) => e.dirty = false,
        Err(err) => {
            if !e.dirty {
                tracing::warn!(key = e.key, "etcd: cannot write a worker entry: {err}");
            }
            Stats::bump(&shared.stats.etcd_errors);
            e.dirty = true;
        }
    }
}

/// An entry's `Name`: the CN of the worker's TLS client certificate (its
/// whole subject if it has no CN), else `label` (client id, else `fd@address`).
pub fn entry_name(identity: Option<&str>, label: &str) -> String {
    let Some(subject) = identity.filter(|s| !s.is_empty()) else {
        return label.to_owned();
    };
    subject
        .split(',')
        .find_map(|part| part.trim().strip_prefix("CN="))
        .unwrap_or(subject)
        .to_owned()
}

/// How events label a worker: its client id, else `fd@address`.
fn view_label(w: &WorkerView) -> String {
    if w.client_id.is_empty() || w.client_id[..] == b"-"[..] {
        format!("{}@{}", w.fd, w.address)
    } else {
        String::from_utf8_lossy(&w.client_id).into_owned()
    }
}

fn entry(shared: &Shared, key: &str, fd: i64, name: &str, address: &str) -> Entry {
    let instance = format!("{}-{key}", shared.owner);
    Entry {
        key: shared.keys.worker(&instance),
        doc: WorkerDoc::new(name, &instance, address, &now_text()),
        fd,
        job: None,
        dirty: true,
    }
}

/// A worker connection is gone: its entry `DEAD` (kept for rewriting if
/// etcd did not take it).
async fn left(shared: &Shared, mut e: Entry, gone: &mut Vec<Entry>) {
    e.doc.mark_dead();
    e.doc.set_job(None);
    put(shared, &mut e).await;
    if e.dirty {
        gone.push(e);
    }
}

/// Brings the entries in line with the server's worker list: new entries
/// for workers it has and the bridge missed, `DEAD` for entries it no longer
/// has, `Stats` and `Name` as they are now. Entries it changes are marked
/// dirty (`write`: written here, else on the caller's heartbeat).
async fn sync(
    shared: &Shared,
    server: &mut Server,
    conns: &mut HashMap<String, Entry>,
    gone: &mut Vec<Entry>,
    write: bool,
) {
    let Some(view) = server.workers().await else {
        return;
    };
    let live: HashMap<&str, &WorkerView> = view.iter().map(|(k, w)| (k.as_str(), w)).collect();
    let lost: Vec<String> = conns
        .keys()
        .filter(|k| !live.contains_key(k.as_str()))
        .cloned()
        .collect();
    if !lost.is_empty() {
        tracing::info!(
            n = lost.len(),
            "etcd: workers left unseen; their entries go DEAD"
        );
    }
    for id in lost {
        if let Some(e) = conns.remove(&id) {
            left(shared, e, gone).await;
        }
    }
    for (key, w) in &view {
        let name = entry_name(w.identity.as_deref(), &view_label(w));
        let e = conns.entry(key.clone()).or_insert_with(|| {
            if server.poll().is_none() {
                tracing::info!(worker = name, "etcd: a worker joined unseen; entry added");
            }
            entry(shared, key, w.fd, &name, &w.address)
        });
        let mut changed = e.doc.set_name(&name);
        if let Some(s) = w.stats {
            changed |= e.doc.set_stats(s.cpu_ms, s.max_rss_kib);
        }
        e.dirty |= changed;
        if write && e.dirty {
            put(shared, e).await;
        }
    }
}

/// etcd out of reach, as the bridge's own heartbeat sees it: one line
/// when it goes, one (with how long) when it is back, and a count.
fn heartbeat(outage: &mut Outage, shared: &Shared, failed: bool) {
    match outage.note(failed) {
        Change::Went => {
            Stats::bump(&shared.stats.etcd_outages);
            tracing::warn!(
                "etcd: out of reach; Gearman work goes on, etcd jobs and the registry wait for it"
            );
        }
        Change::Back(d) => {
            let secs = d.as_secs();
            tracing::warn!(
                "etcd: reachable again after about {secs} s; results and entries are written now"
            );
        }
        Change::Same => {}
    }
}

/// Runs until `stop`; then puts back the jobs still running here and
/// marks every entry `DEAD`.
pub async fn run(
    shared: Arc<Shared>,
    mut server: Server,
    mut events: mpsc::UnboundedReceiver<ServerEvent>,
    mut jobs: mpsc::UnboundedReceiver<JobsByFd>,
    mut stop_rx: watch::Receiver<bool>,
) {
    let mut bridge = Entry {
        key: shared.keys.worker(&shared.owner),
        doc: WorkerDoc::bridge(&shared.owner, &shared.gearman.ip().to_string(), &now_text()),
        fd: -1,
        job: None,
        dirty: true,
    };
    put(&shared, &mut bridge).await;
    let mut conns: HashMap<String, Entry> = HashMap::new();
    let mut gone: Vec<Entry> = Vec::new();
    let beat = (shared.cfg.harvest_after / 3).max(Duration::from_millis(100));
    let mut tick = tokio::time::interval(beat);
    // Only where no events tell of joins and leaves.
    let mut poll = server.poll().map(tokio::time::interval);
    let mut events_open = true;
    let mut outage = Outage::default();
    loop {
        tokio::select! {
            ev = events.recv(), if events_open => match ev {
                Some(ServerEvent::WorkerJoined { id, fd, label, address, identity }) => {
                    let name = entry_name(identity.as_deref(), &label);
                    let key = key_of_event(id);
                    let mut e = entry(&shared, &key, fd, &name, &address);
                    put(&shared, &mut e).await;
                    conns.insert(key, e);
                }
                Some(ServerEvent::WorkerLeft { id }) => {
                    if let Some(e) = conns.remove(&key_of_event(id)) {
                        left(&shared, e, &mut gone).await;
                    }
                }
                Some(ServerEvent::Retrying { handle, at_ms }) => {
                    tokio::spawn(job::retrying(shared.clone(), handle, at_ms));
                }
                Some(ServerEvent::Lagged) => {
                    tracing::warn!("etcd: fell behind the server's worker events; resynchronising the registry from its worker list");
                    Stats::bump(&shared.stats.events_lagged);
                    sync(&shared, &mut server, &mut conns, &mut gone, true).await;
                }
                None => events_open = false,
            },
            _ = next_tick(poll.as_mut()) => sync(&shared, &mut server, &mut conns, &mut gone, true).await,
            Some(map) = jobs.recv() => {
                for e in conns.values_mut() {
                    let now = map.get(&e.fd);
                    if now.map(|(id, _)| id) != e.job.as_ref() {
                        e.job = now.map(|(id, _)| id.clone());
                        e.doc.set_job(e.job.as_deref());
                        put(&shared, e).await;
                        if let (Some((_, handle)), Some(instance)) = (now, e.doc.instance()) {
                            let owner = instance.to_owned();
                            tokio::spawn(job::set_owner(shared.clone(), handle.clone(), owner));
                        }
                    }
                }
            }
            _ = tick.tick() => {
                // Polled every second otherwise (written there too).
                if poll.is_none() {
                    sync(&shared, &mut server, &mut conns, &mut gone, false).await;
                }
                let now = now_text();
                bridge.doc.set_heartbeat(&now);
                put(&shared, &mut bridge).await;
                heartbeat(&mut outage, &shared, bridge.dirty);
                for e in conns.values_mut() {
                    e.doc.set_heartbeat(&now);
                    put(&shared, e).await;
                }
                let mut still = Vec::new();
                for mut e in gone.drain(..) {
                    put(&shared, &mut e).await;
                    if e.dirty {
                        still.push(e);
                    }
                }
                gone = still;
            }
            _ = stop_rx.changed() => break,
        }
    }
    stop(&shared, bridge, conns).await;
}

/// The next tick of `poll`, or never.
async fn next_tick(poll: Option<&mut tokio::time::Interval>) {
    match poll {
        Some(p) => {
            p.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// The way out: running jobs back to `QUEUED`, every entry `DEAD`, within a
/// few seconds (a graceful stop never waits on etcd for long).
async fn stop(shared: &Shared, mut bridge: Entry, conns: HashMap<String, Entry>) {
    let held: Vec<_> = shared.running().values().map(|r| r.held.clone()).collect();
    let work = async {
        for h in &held {
            job::put_back(shared, h, "gearshift stopped").await;
            h.lock().await.lost = true;
        }
        for mut e in conns.into_values() {
            e.doc.mark_dead();
            e.doc.set_job(None);
            put(shared, &mut e).await;
        }
        bridge.doc.mark_dead();
        put(shared, &mut bridge).await;
    };
    if tokio::time::timeout(Duration::from_secs(3), work)
        .await
        .is_err()
    {
        tracing::warn!("etcd: stopped before every entry was marked DEAD; harvesters will");
    }
}

#[cfg(test)]
mod tests {
    use super::entry_name;

    #[test]
    fn a_certificate_names_the_entry_before_the_client_id() {
        assert_eq!(entry_name(Some("C=DE,O=Acme,CN=thumbs"), "cid"), "thumbs");
        assert_eq!(entry_name(Some("O=Acme,OU=ops"), "cid"), "O=Acme,OU=ops");
        assert_eq!(entry_name(Some(""), "cid"), "cid");
        assert_eq!(entry_name(None, "7@10.0.0.1"), "7@10.0.0.1");
    }
}
