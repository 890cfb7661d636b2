//! The partitions' beat thread: renews this node's partition leases on its
//! own database connection, takes its fair share, and publishes what this
//! node owns and who owns every partition.

use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gearshift_core::placement::Placement;
use gearshift_store::postgres::lease::Lease;
use gearshift_store::postgres::partitions::{Owned, PartitionLeases};
use gearshift_store::postgres::pins::PinMove;
use tokio::sync::watch;

use super::owners::{Ownership, Slots};
use crate::cluster::lease_thread::beat_every;
use crate::cluster::trust::LeaseTrust;
use crate::cluster::view::ClusterView;

/// What this node owns, as the last beat found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mine {
    /// The partitions to serve, with their epochs (owned, minus those to
    /// give up).
    pub serve: Vec<(u32, i64)>,
    /// Owned partitions past the fair share, to release once not served.
    pub give_up: Vec<u32>,
    /// Until when the owned leases are surely valid.
    pub trusted_until: Instant,
    /// Where each function lives (a pin changes it).
    pub placement: Placement,
    /// Pins asked for, moved by the owner of where each function lives
    /// (read before `placement`: a pin not listed here is in it).
    pub moves: Vec<PinMove>,
}

impl Mine {
    fn of(o: &Owned, placement: Placement, moves: Vec<PinMove>) -> Mine {
        Mine {
            serve: o
                .owned
                .iter()
                .filter(|(p, _)| !o.give_up.contains(p))
                .copied()
                .collect(),
            give_up: o.give_up.clone(),
            trusted_until: o.trusted_until,
            placement,
            moves,
        }
    }
}

/// Orders for the beat thread.
#[derive(Debug)]
pub enum Cmd {
    /// These partitions are no longer served: hand them over.
    Release(Vec<u32>),
    /// Reserve this many job ids for a new core.
    Reserve(
        u64,
        tokio::sync::oneshot::Sender<Option<std::ops::Range<u64>>>,
    ),
    /// The node stops: release everything and leave.
    Stop,
}

/// The beat thread's database sessions: the partitions', and the node
/// table's (for the cluster view).
pub struct Sessions {
    /// The partition leases.
    pub leases: PartitionLeases,
    /// The node table, read for the cluster view.
    pub nodes: Lease,
}

/// Beats until [`Cmd::Stop`] (or the sender is gone).
#[allow(clippy::too_many_arguments)]
pub fn run(
    sessions: Sessions,
    timeout: Duration,
    mut slots: Slots,
    mine: watch::Sender<Option<Mine>>,
    ownership: watch::Sender<Arc<Ownership>>,
    trust: Arc<LeaseTrust>,
    view: &ClusterView,
    cmds: mpsc::Receiver<Cmd>,
) {
    let Sessions {
        mut leases,
        nodes: mut node_table,
    } = sessions;
    let every = beat_every(timeout);
    let mut next = Instant::now();
    let mut failing = false;
    loop {
        match cmds.recv_timeout(next.saturating_duration_since(Instant::now())) {
            Ok(Cmd::Release(parts)) => {
                match leases.release(&parts) {
                    Ok(done) => tracing::info!(partitions = ?done, "handed partitions over"),
                    Err(e) => tracing::warn!("cannot hand partitions over: {e}"),
                }
                next = Instant::now();
                continue;
            }
            Ok(Cmd::Reserve(n, reply)) => {
                let ids = leases.reserve_ids(n);
                if let Err(e) = &ids {
                    tracing::warn!("cannot reserve job ids: {e}");
                }
                let _ = reply.send(ids.ok());
                continue;
            }
            Ok(Cmd::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                if let Err(e) = leases.leave() {
                    tracing::warn!("cannot leave the cluster: {e}");
                }
                return;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        next = Instant::now() + every;
        let beat = leases.beat().and_then(|o| {
            let owners = leases.owners()?;
            let moves = leases.pin_moves()?;
            let placement = leases.placement()?;
            Ok((o, owners, placement, moves))
        });
        match beat {
            Ok((owned, owners, placement, moves)) => {
                view.set_partitions(owners.clone(), placement.clone(), moves.clone());
                if let Ok(rows) = node_table.nodes() {
                    view.set(rows);
                }
                if failing {
                    tracing::info!(server = %leases.server(), "the cluster's database answers again");
                    failing = false;
                }
                let next_view = Ownership::new(placement.clone(), &owners, leases.me(), &mut slots);
                ownership.send_if_modified(|cur| {
                    if **cur == next_view {
                        false
                    } else {
                        *cur = Arc::new(next_view);
                        true
                    }
                });
                trust.extend(owned.trusted_until);
                let m = Mine::of(&owned, placement, moves);
                mine.send_if_modified(|cur| {
                    let changed = cur.as_ref().is_none_or(|c| {
                        c.serve != m.serve
                            || c.give_up != m.give_up
                            || c.placement != m.placement
                            || c.moves != m.moves
                    });
                    *cur = Some(m);
                    changed
                });
            }
            Err(e) => {
                if !failing {
                    tracing::warn!("partitions' heartbeat failed: {e}");
                    failing = true;
                }
            }
        }
    }
}
