//! Partitions with their own owners: every function lives in one partition
//! ([`Placement`]); each partition has a row in `gearshift_partitions` with
//! its owning node, lease (`expires_at`) and epoch. A node beats on its own
//! connection: it heartbeats its `gearshift_nodes` row, renews the
//! partitions it owns, and takes unowned or expired ones up to its fair
//! share, raising each one's epoch, which fences the previous owner's
//! store ([`super::PgOptions::partition`]). All times are the database's.
//!
//! The fair share: `count / live` partitions each, and one more for the
//! first `count % live` live nodes in name order (bytewise), so the nodes
//! agree without talking. A node past its share is told which partitions
//! to give up, and hands them over with [`PartitionLeases::release`].
//! A lease that expired is never renewed, only taken again (by any node,
//! this one included) at the next epoch: an owned partition whose epoch
//! changed between two beats was lost meanwhile, and must be replayed.
//! Handle numbers for a node come in blocks from the cluster's one
//! reservation row ([`PartitionLeases::reserve_ids`]).

use std::collections::BTreeMap;
use std::ops::Range;
use std::time::{Duration, Instant};

use bytes::Bytes;
use gearshift_core::placement::{Placement, DEFAULT_PARTITIONS};
use postgres::{Client, GenericClient, Transaction};

use super::lease::{heartbeat, register, NodeAddrs};
use super::session::Session;
use super::PgOptions;
use crate::{StoreError, MAX_ID};

/// A partition count a new cluster gets unless told otherwise.
pub const DEFAULT_COUNT: u32 = DEFAULT_PARTITIONS;

/// The advisory lock that makes two opens set up the partitions one after
/// the other (`gsparts!` in ASCII).
pub(super) const SETUP_LOCK: i64 = 0x6773_7061_7274_7321;

/// The partitions a partitioned node's store holds ([`super::PgOptions::partitions`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionSet {
    /// The partitions and their epochs.
    pub owned: Vec<(u32, i64)>,
    /// Where each function's rows go (with the pins).
    pub placement: Placement,
    /// The job ids the store's core hands out: a block from
    /// [`PartitionLeases::reserve_ids`].
    pub ids: Range<u64>,
}

/// What one beat found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owned {
    /// The partitions this node owns now, with their epochs, in order.
    pub owned: Vec<(u32, i64)>,
    /// Owned partitions past the fair share: drain them, then
    /// [`PartitionLeases::release`] them.
    pub give_up: Vec<u32>,
    /// Until when this node may act as the owner of `owned` without
    /// another beat (three quarters of the timeout after the beat was sent,
    /// which is before the database's expiry).
    pub trusted_until: Instant,
    /// Live nodes (heartbeat within the timeout), this one included.
    pub live: u32,
    /// This node's fair share.
    pub share: u32,
}

/// A partition as `gearshift_partitions` has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionOwner {
    /// Its number.
    pub partition: u32,
    /// Raised by every takeover.
    pub epoch: i64,
    /// The owner, unless unowned or its lease expired (its addresses are
    /// empty if its node row is gone).
    pub node: Option<NodeAddrs>,
}

/// A node's session with the partitions.
pub struct PartitionLeases {
    db: Session,
    me: NodeAddrs,
    timeout: Duration,
    count: u32,
}

impl std::fmt::Debug for PartitionLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionLeases")
            .field("server", &self.db.server())
            .field("node", &self.me.name)
            .field("count", &self.count)
            .finish()
    }
}

/// How long a lease is trusted after the beat that renewed it was sent.
pub fn trusted_for(timeout: Duration) -> Duration {
    timeout * 3 / 4
}

/// A duration in whole milliseconds, as SQL takes it.
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A partition number from its `INT` column.
fn number(p: i32) -> Result<u32, StoreError> {
    u32::try_from(p)
        .map_err(|_| StoreError::Corrupt(format!("gearshift_partitions holds partition {p}")))
}

/// This node's fair share of `count` among the `live` names.
fn share_of(count: u32, live: &[String], me: &str) -> u32 {
    let mut names: Vec<&[u8]> = live.iter().map(|n| n.as_bytes()).collect();
    if !names.contains(&me.as_bytes()) {
        names.push(me.as_bytes());
    }
    names.sort_unstable();
    let n = names.len() as u32;
    let rank = names.iter().position(|&n| n == me.as_bytes()).unwrap_or(0) as u32;
    count / n + u32::from(rank < count % n)
}

impl PartitionLeases {
    /// Connects, brings the schema up to date, and registers this node.
    /// The first node to open a database sets the partition count to
    /// `count` (later ones read it), creates the partitions' rows, and
    /// places rows written before partitions ([`place_unplaced`]).
    /// `timeout` is how long a partition's lease lasts without renewal.
    pub fn open(
        url: &str,
        opts: &PgOptions,
        me: NodeAddrs,
        timeout: Duration,
        count: u32,
    ) -> Result<PartitionLeases, StoreError> {
        let wanted = i32::try_from(count)
            .ok()
            .filter(|&c| c > 0)
            .ok_or_else(|| StoreError::InvalidRequest(format!("{count} partitions")))?;
        let mut db = Session::open(url, opts)?;
        let (count, placed) = db.with("setting up the partitions", |c| {
            let mut tx = setup_tx(c)?;
            tx.execute(
                "INSERT INTO gearshift_settings (one, partitions) VALUES (TRUE, $1)
                 ON CONFLICT (one) DO NOTHING",
                &[&wanted],
            )?;
            let count: i32 = tx
                .query_one("SELECT partitions FROM gearshift_settings", &[])?
                .try_get(0)?;
            tx.execute(
                "INSERT INTO gearshift_partitions (partition)
                 SELECT generate_series(0, $1::int - 1) ON CONFLICT (partition) DO NOTHING",
                &[&count],
            )?;
            let placement = Placement {
                count: count as u32,
                pins: read_pins(&mut tx)?,
            };
            let placed = place_unplaced(&mut tx, &placement)?;
            register(&mut tx, &me)?;
            tx.commit()?;
            Ok((count, placed))
        })?;
        if placed > 0 {
            tracing::info!(rows = placed, "placed rows written before partitions");
        }
        Ok(PartitionLeases {
            db,
            me,
            timeout,
            count: number(count)?,
        })
    }

    /// `postgres://user@host:port/db`, without the password.
    pub fn server(&self) -> &str {
        self.db.server()
    }

    /// This node.
    pub fn me(&self) -> &NodeAddrs {
        &self.me
    }

    /// The cluster's partition count.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// One beat, in one transaction: heartbeats this node, renews the
    /// partitions it owns, takes free or expired ones up to its share
    /// (skipping rows other transactions hold), and says which to give up.
    pub fn beat(&mut self) -> Result<Owned, StoreError> {
        let sent = Instant::now();
        let me = &self.me;
        let timeout = millis(self.timeout);
        let count = self.count;
        let (mut rows, live, share) = self.db.with("the partitions' heartbeat", |c| {
            let mut tx = c.transaction()?;
            heartbeat(&mut tx, me)?;
            let mut rows = tx.query(
                "UPDATE gearshift_partitions
                 SET expires_at = now() + $2::bigint * interval '1 millisecond'
                 WHERE node = $1 AND expires_at >= now()
                 RETURNING partition, epoch",
                &[&me.name, &timeout],
            )?;
            let live: Vec<String> = tx
                .query(
                    "SELECT name FROM gearshift_nodes
                     WHERE heartbeat_at >= now() - $1::bigint * interval '1 millisecond'",
                    &[&timeout],
                )?
                .iter()
                .map(|r| r.try_get(0))
                .collect::<Result<_, _>>()?;
            let share = share_of(count, &live, &me.name);
            let missing = i64::from(share).saturating_sub(rows.len() as i64);
            if missing > 0 {
                rows.extend(tx.query(
                    "UPDATE gearshift_partitions p
                     SET epoch = p.epoch + 1, node = $1,
                         expires_at = now() + $3::bigint * interval '1 millisecond'
                     FROM (SELECT partition FROM gearshift_partitions
                           WHERE node IS NULL OR expires_at IS NULL OR expires_at < now()
                           ORDER BY partition LIMIT $2 FOR UPDATE SKIP LOCKED) free
                     WHERE p.partition = free.partition
                     RETURNING p.partition, p.epoch",
                    &[&me.name, &missing, &timeout],
                )?);
            }
            tx.commit()?;
            Ok((rows, live.len().max(1) as u32, share))
        })?;
        let mut owned = Vec::with_capacity(rows.len());
        for row in rows.drain(..) {
            let (p, epoch): (i32, i64) = (get(&row, 0)?, get(&row, 1)?);
            owned.push((number(p)?, epoch));
        }
        owned.sort_unstable();
        let surplus = owned.len().saturating_sub(share as usize);
        let give_up = owned[owned.len() - surplus..]
            .iter()
            .map(|&(p, _)| p)
            .collect();
        Ok(Owned {
            owned,
            give_up,
            trusted_until: sent + trusted_for(self.timeout),
            live,
            share,
        })
    }

    /// Hands `partitions` over on purpose (those this node still owns):
    /// unowned and expired now, at the same epoch, so the next owner takes
    /// them at once and raises it. Returns the partitions released.
    pub fn release(&mut self, partitions: &[u32]) -> Result<Vec<u32>, StoreError> {
        let me = &self.me;
        let list: Vec<i32> = partitions
            .iter()
            .filter_map(|&p| i32::try_from(p).ok())
            .collect();
        let rows = self.db.with("releasing partitions", |c| {
            c.query(
                "UPDATE gearshift_partitions SET node = NULL, expires_at = now()
                 WHERE node = $1 AND partition = ANY($2) RETURNING partition",
                &[&me.name, &list],
            )
        })?;
        let mut released = rows
            .iter()
            .map(|r| number(get(r, 0)?))
            .collect::<Result<Vec<_>, _>>()?;
        released.sort_unstable();
        Ok(released)
    }

    /// Releases every partition this node owns and removes its node row
    /// (a graceful stop).
    pub fn leave(&mut self) -> Result<(), StoreError> {
        let me = &self.me;
        self.db.with("leaving the cluster", |c| {
            let mut tx = c.transaction()?;
            tx.execute(
                "UPDATE gearshift_partitions SET node = NULL, expires_at = now()
                 WHERE node = $1",
                &[&me.name],
            )?;
            tx.execute("DELETE FROM gearshift_nodes WHERE name = $1", &[&me.name])?;
            tx.commit()
        })
    }

    /// Every partition's owner and epoch, in order.
    pub fn owners(&mut self) -> Result<Vec<PartitionOwner>, StoreError> {
        let rows = self.db.with("listing the partitions", |c| {
            c.query(
                "SELECT p.partition, p.epoch, p.node, n.gearman_addr, n.http_addr,
                   (p.node IS NOT NULL AND p.expires_at >= now()) IS TRUE
                 FROM gearshift_partitions p LEFT JOIN gearshift_nodes n ON n.name = p.node
                 ORDER BY p.partition",
                &[],
            )
        })?;
        rows.iter()
            .map(|r| {
                let node: Option<String> = get(r, 2)?;
                let live: bool = get(r, 5)?;
                let node = match node.filter(|_| live) {
                    Some(name) => Some(NodeAddrs {
                        name,
                        gearman: get::<Option<String>>(r, 3)?.unwrap_or_default(),
                        http: get(r, 4)?,
                    }),
                    None => None,
                };
                Ok(PartitionOwner {
                    partition: number(get(r, 0)?)?,
                    epoch: get(r, 1)?,
                    node,
                })
            })
            .collect()
    }

    /// The placement in force: the count and the pins.
    pub fn placement(&mut self) -> Result<Placement, StoreError> {
        Ok(Placement {
            count: self.count,
            pins: self.db.with("reading the pins", read_pins)?,
        })
    }

    /// The pins asked for and not in force yet (`gearshift pin`): each is
    /// moved by the owner of the partition its function lives in.
    pub fn pin_moves(&mut self) -> Result<Vec<super::pins::PinMove>, StoreError> {
        self.db
            .with("reading the pins asked for", super::pins::read_moves)
    }

    /// Takes the next `n` handle numbers from the cluster's one
    /// reservation row, atomically, so every node's numbers differ.
    pub fn reserve_ids(&mut self, n: u64) -> Result<Range<u64>, StoreError> {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        let max = MAX_ID as i64;
        let row = self.db.with("reserving handles", |c| {
            c.query_opt(
                "UPDATE gearshift_reservation SET last_reserved = last_reserved + $1
                 WHERE last_reserved <= $2::bigint - $1::bigint RETURNING last_reserved",
                &[&n, &max],
            )
        })?;
        let Some(row) = row else {
            return Err(StoreError::IdOutOfRange(MAX_ID.saturating_add(1)));
        };
        let last: i64 = get(&row, 0)?;
        let end = u64::try_from(last + 1)
            .map_err(|_| StoreError::Corrupt(format!("gearshift_reservation holds {last}")))?;
        Ok(end - n as u64..end)
    }
}

/// A column, or [`StoreError::Corrupt`].
fn get<'a, T: postgres::types::FromSql<'a>>(
    row: &'a postgres::Row,
    i: usize,
) -> Result<T, StoreError> {
    row.try_get(i)
        .map_err(|e| StoreError::Corrupt(format!("gearshift_partitions, column {i}: {e}")))
}

pub(super) fn read_pins(
    c: &mut impl GenericClient,
) -> Result<BTreeMap<Bytes, u32>, postgres::Error> {
    let mut pins = BTreeMap::new();
    for row in c.query("SELECT function, partition FROM gearshift_pins", &[])? {
        let (f, p): (Vec<u8>, i32) = (row.try_get(0)?, row.try_get(1)?);
        // The column's CHECK keeps it from being negative.
        pins.insert(Bytes::from(f), p.max(0) as u32);
    }
    Ok(pins)
}

/// A transaction holding the lock under which partitions are set up and
/// pins change: one such change at a time.
pub(super) fn setup_tx(c: &mut Client) -> Result<Transaction<'_>, postgres::Error> {
    let mut tx = c.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SETUP_LOCK])?;
    Ok(tx)
}

/// [`setup_tx`], its session named `name` until it ends (named before it
/// waits for the lock, so a session still waiting is named too).
pub(super) fn setup_tx_named<'c>(
    c: &'c mut Client,
    name: &str,
) -> Result<Transaction<'c>, postgres::Error> {
    let mut tx = c.transaction()?;
    tx.execute("SELECT set_config('application_name', $1, true)", &[&name])?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SETUP_LOCK])?;
    Ok(tx)
}

/// Fails with [`StoreError::Fenced`] unless `partition` is still at
/// `epoch`; otherwise key-share-locks its row until `tx` ends, so a
/// takeover (which raises the epoch) waits for `tx` to commit, as a
/// partition store's flush does.
pub fn check_partition_epoch(
    tx: &mut Transaction<'_>,
    server: &str,
    partition: u32,
    epoch: i64,
) -> Result<(), StoreError> {
    let p = i32::try_from(partition)
        .map_err(|_| StoreError::InvalidRequest(format!("partition {partition}")))?;
    let row = tx
        .query_opt(
            "SELECT 1 FROM gearshift_partitions WHERE partition = $1 AND epoch = $2
             FOR KEY SHARE",
            &[&p, &epoch],
        )
        .map_err(|e| super::connect::unreachable_or_refused(&e, server, "the partition's fence"))?;
    match row {
        Some(_) => Ok(()),
        None => Err(StoreError::Fenced(format!(
            "{server} (partition {partition})"
        ))),
    }
}

/// Gives every row without a partition (written before partitions, or by
/// a single leader) the partition `placement` puts its function in, and
/// takes each partition that gained rows from its owner (epoch raised), so
/// it is replayed with them. Returns how many rows were placed. Run it in
/// a transaction.
pub fn place_unplaced(
    c: &mut impl GenericClient,
    placement: &Placement,
) -> Result<u64, postgres::Error> {
    let functions: Vec<Vec<u8>> = c
        .query(
            "SELECT function FROM gearshift_jobs WHERE partition IS NULL
             UNION SELECT function FROM gearshift_schedules WHERE partition IS NULL
             UNION SELECT function FROM gearshift_kept WHERE partition IS NULL
             UNION SELECT function FROM gearshift_functions WHERE partition IS NULL",
            &[],
        )?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<Result<_, _>>()?;
    if functions.is_empty() {
        return Ok(0);
    }
    // Counts fit an INT (the settings column), so partitions do.
    let parts: Vec<i32> = functions
        .iter()
        .map(|f| placement.partition_of(f) as i32)
        .collect();
    let mut placed = 0;
    for table in [
        "gearshift_jobs",
        "gearshift_schedules",
        "gearshift_kept",
        "gearshift_functions",
    ] {
        placed += c.execute(
            &format!(
                "UPDATE {table} t SET partition = m.p
                 FROM UNNEST($1::bytea[], $2::int[]) AS m(f, p)
                 WHERE t.partition IS NULL AND t.function = m.f"
            ),
            &[&functions, &parts],
        )?;
    }
    c.execute(
        "UPDATE gearshift_partitions SET epoch = epoch + 1, node = NULL, expires_at = now()
         WHERE partition = ANY($1) AND node IS NOT NULL",
        &[&parts],
    )?;
    Ok(placed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn shares_add_up_and_the_first_names_get_the_extra() {
        let live = names(&["c", "a", "b"]);
        let shares: Vec<u32> = ["a", "b", "c"]
            .iter()
            .map(|m| share_of(64, &live, m))
            .collect();
        assert_eq!(shares, [22, 21, 21]);
        assert_eq!(share_of(64, &names(&["a"]), "a"), 64);
        // A node not (yet) counted live counts itself.
        assert_eq!(share_of(64, &names(&["a"]), "b"), 32);
        assert_eq!(share_of(2, &live, "c"), 0);
    }
}
