//! The lease thread: heartbeats on its own database connection, takes the
//! lease when it is free, renews it while this node leads, and publishes
//! where the lease stands. A blocked database call cannot keep a deposed
//! leader running: the status carries the instant this node's lease is
//! sure to be valid until, and the node stops leading when it passes.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use gearshift_store::postgres::lease::{Leader, Lease};
use tokio::sync::watch;

/// Where the lease stands, as this node last learned.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// The leader, None while the lease is free or unknown.
    pub leader: Option<Leader>,
    /// This node's epoch and how long its lease surely lasts, if it leads.
    pub leading: Option<(i64, Instant)>,
}

/// Orders for the lease thread.
#[derive(Debug)]
pub enum Cmd {
    /// This node stopped leading (fenced or failed to start): follow.
    StepDown,
    /// The node stops: give the lease up (if held) and leave.
    Stop,
}

/// How often to beat: four times per timeout, so three lost beats still
/// leave the lease valid.
pub fn beat_every(timeout: Duration) -> Duration {
    (timeout / 4).max(Duration::from_millis(50))
}

/// How long past a renewal this node trusts its lease: less than the
/// timeout the database counts from (which started later), so a deposed
/// leader has stopped before another node may take over.
pub fn trusted_for(timeout: Duration) -> Duration {
    timeout * 3 / 4
}

/// The first beat, made before the node serves: a node that finds the
/// lease free starts out leading instead of relaying for a moment.
pub fn first(lease: &mut Lease, timeout: Duration) -> Result<Status, gearshift_store::StoreError> {
    let beat = lease.beat(None)?;
    if beat.leader.is_some() {
        return Ok(Status {
            leader: beat.leader,
            leading: None,
        });
    }
    let asked = Instant::now();
    Ok(match lease.try_take()? {
        Some(epoch) => {
            tracing::info!(epoch, node = %lease.me().name, "this node leads the cluster");
            Status {
                leader: Some(Leader {
                    epoch,
                    node: lease.me().clone(),
                }),
                leading: Some((epoch, asked + trusted_for(timeout))),
            }
        }
        None => Status::default(),
    })
}

/// Runs until [`Cmd::Stop`] (or the sender is dropped), from `start`.
pub fn run(
    mut lease: Lease,
    timeout: Duration,
    start: Status,
    tx: watch::Sender<Status>,
    cmds: mpsc::Receiver<Cmd>,
    view: &super::view::ClusterView,
) {
    let every = beat_every(timeout);
    let mut leading = start.leading;
    let mut leader = start.leader;
    let mut failing = false;
    let mut next = Instant::now() + every;
    // After stepping down, the lease is left to the other nodes this long.
    let mut hold_off: Option<Instant> = None;
    loop {
        let wait = next.saturating_duration_since(Instant::now());
        match cmds.recv_timeout(wait) {
            Ok(Cmd::StepDown) => {
                if let Some((epoch, _)) = leading.take() {
                    // Another node need not wait out the timeout.
                    let _ = lease.release(epoch);
                }
                hold_off = Some(Instant::now() + timeout);
                publish(&tx, &None, None);
                next = Instant::now();
                continue;
            }
            Ok(Cmd::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Some((epoch, _)) = leading {
                    if let Err(e) = lease.release(epoch) {
                        tracing::warn!("cannot give the cluster lease up: {e}");
                    }
                }
                if let Err(e) = lease.leave() {
                    tracing::warn!("cannot leave the cluster's node table: {e}");
                }
                return;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        next = Instant::now() + every;
        let sent = Instant::now();
        match lease.beat(leading.map(|(e, _)| e)) {
            Ok(beat) => {
                if failing {
                    tracing::info!(server = %lease.server(), "the cluster's database answers again");
                    failing = false;
                }
                if let Some((epoch, _)) = leading {
                    if beat.renewed {
                        leading = Some((epoch, sent + trusted_for(timeout)));
                    } else {
                        tracing::error!(epoch, "this node lost the cluster lease");
                        leading = None;
                    }
                }
                leader = beat.leader;
                let held_off = hold_off.is_some_and(|t| Instant::now() < t);
                if leading.is_none() && leader.is_none() && !held_off {
                    let asked = Instant::now();
                    match lease.try_take() {
                        Ok(Some(epoch)) => {
                            tracing::info!(epoch, node = %lease.me().name, "this node leads the cluster");
                            leading = Some((epoch, asked + trusted_for(timeout)));
                            leader = Some(Leader {
                                epoch,
                                node: lease.me().clone(),
                            });
                        }
                        Ok(None) => {}
                        Err(e) => tracing::warn!("cannot take the cluster lease: {e}"),
                    }
                }
            }
            Err(e) => {
                if !failing {
                    tracing::warn!("cluster heartbeat failed: {e}");
                    failing = true;
                }
            }
        }
        publish(&tx, &leader, leading);
        if !failing {
            if let Ok(nodes) = lease.nodes() {
                view.set(nodes);
            }
        }
    }
}

fn publish(tx: &watch::Sender<Status>, leader: &Option<Leader>, leading: Option<(i64, Instant)>) {
    let status = Status {
        leader: leader.clone(),
        leading,
    };
    tx.send_if_modified(|s| {
        if *s == status {
            false
        } else {
            *s = status;
            true
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leader_trusts_its_lease_less_long_than_others_wait() {
        for ms in [200, 1000, 5000] {
            let t = Duration::from_millis(ms);
            assert!(trusted_for(t) < t);
            // Two lost beats still leave the lease trusted.
            assert!(beat_every(t) * 2 < trusted_for(t));
        }
    }
}
