//! Placing a function by hand (`gearshift pin`). A pin is asked for, and
//! the node that owns the partition the function lives in moves it once
//! its running jobs are done ([`move_asked`], called by that node's store):
//! in one transaction the function's stored rows move to the new
//! partition and the pin is put in force, so nothing is fenced and
//! nothing runs twice. Where no live node owns that partition, the pin
//! moves the rows at once ([`Pins::pin`]) and takes the partitions they
//! left from any owner, so a node still writing the function there is
//! fenced. Nodes serve the new placement from their next beat.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use gearshift_core::placement::{fnv1a64, Placement};
use postgres::GenericClient;

use super::partitions::{check_partition_epoch, read_pins, setup_tx, setup_tx_named};
use super::session::Session;
use super::PgOptions;
use crate::StoreError;

/// The tables whose rows carry a function's partition.
const TABLES: [&str; 4] = [
    "gearshift_jobs",
    "gearshift_schedules",
    "gearshift_kept",
    "gearshift_functions",
];

/// What a pin changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pinned {
    /// Where the function lived before.
    pub from: u32,
    /// Where it lives now.
    pub to: u32,
    /// Stored rows moved there (jobs, schedules, kept results, settings).
    pub moved: u64,
    /// The partitions taken from their owners, to be served again.
    pub fenced: Vec<u32>,
}

/// What asking for a pin did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// Moved at once: the function stays where it is, or no live node
    /// owns the partition it leaves.
    Moved(Pinned),
    /// Waiting for `owner`, the live owner of partition `from`, to move it
    /// to `to` once the function's running jobs are done.
    Waiting {
        /// Where the function lives.
        from: u32,
        /// Where it is asked to live.
        to: u32,
        /// The node that owns `from` and moves it.
        owner: String,
    },
}

/// A pin asked for and not in force yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinMove {
    /// The function to move.
    pub function: Bytes,
    /// The partition asked for; None: back where its name places it.
    pub partition: Option<u32>,
    /// When it was asked for (µs since the Unix epoch, the database's
    /// clock): a pin asked for again is another move.
    pub asked_us: i64,
}

/// A session for reading and changing the pins of a partitioned cluster.
pub struct Pins {
    db: Session,
    count: u32,
}

impl Pins {
    /// Connects (bringing the schema up to date); fails unless a node has
    /// set up the partitions (`serve --partitioned`).
    pub fn open(url: &str, opts: &PgOptions) -> Result<Pins, StoreError> {
        let mut db = Session::open(url, opts)?;
        let count: Option<i32> = db.with("reading the partition count", |c| {
            c.query_opt("SELECT partitions FROM gearshift_settings", &[])?
                .map(|r| r.try_get(0))
                .transpose()
        })?;
        let count = count.and_then(|c| u32::try_from(c).ok()).ok_or_else(|| {
            StoreError::InvalidRequest(format!(
                "{} has no partitions: no node has run there with --partitioned",
                db.server()
            ))
        })?;
        Ok(Pins { db, count })
    }

    /// The placement in force: the count and the pins.
    pub fn placement(&mut self) -> Result<Placement, StoreError> {
        let pins = self.db.with("reading the pins", read_pins)?;
        Ok(Placement {
            count: self.count,
            pins,
        })
    }

    /// The live owner of `partition`, if any.
    pub fn owner_of(&mut self, partition: u32) -> Result<Option<String>, StoreError> {
        self.db
            .with("reading a partition's owner", |c| live_owner(c, partition))
    }

    /// Asks for `function` to be placed in `partition` (None: back where
    /// its name hashes): waiting for the owner of the partition it lives
    /// in, if a live node owns it, else moved at once as [`Pins::pin`].
    pub fn ask(&mut self, function: &[u8], partition: Option<u32>) -> Result<Asked, StoreError> {
        self.in_range(partition)?;
        let count = self.count;
        self.db.with("asking for a pin", |c| {
            let mut tx = setup_tx(c)?;
            let (from, to) = from_to(&mut tx, count, function, partition)?;
            if from != to {
                if let Some(owner) = live_owner(&mut tx, from)? {
                    tx.execute(
                        "INSERT INTO gearshift_pin_moves (function, partition, asked_at)
                         VALUES ($1, $2, clock_timestamp())
                         ON CONFLICT (function) DO UPDATE
                         SET partition = EXCLUDED.partition, asked_at = EXCLUDED.asked_at",
                        &[&function, &partition.map(|p| p as i32)],
                    )?;
                    tx.commit()?;
                    return Ok(Asked::Waiting { from, to, owner });
                }
            }
            let pinned = pin_at_once(&mut tx, count, function, partition)?;
            tx.commit()?;
            Ok(Asked::Moved(pinned))
        })
    }

    /// Places `function` in `partition` (None: back where its name
    /// hashes) at once: moves its stored rows there, and takes the
    /// partitions it leaves from their owners (epoch raised, lease ended),
    /// so jobs running there run again, as after a takeover.
    pub fn pin(&mut self, function: &[u8], partition: Option<u32>) -> Result<Pinned, StoreError> {
        self.in_range(partition)?;
        let count = self.count;
        self.db.with("pinning a function", |c| {
            let mut tx = setup_tx(c)?;
            let pinned = pin_at_once(&mut tx, count, function, partition)?;
            tx.commit()?;
            Ok(pinned)
        })
    }

    /// The placement in force once no move of `function` is in flight. A
    /// move whose connection was lost may still commit (its COMMIT already
    /// sent) or hold its locks until the database notices: its session is
    /// ended first, so what is read is final.
    pub fn placement_settled(&mut self, function: &[u8]) -> Result<Placement, StoreError> {
        let tag = move_tag(function);
        let deadline = Instant::now() + SETTLE_WAIT;
        loop {
            let left: i64 = self.db.with("ending a lost pin's move", |c| {
                c.query_one(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                     WHERE application_name = $1 AND pid <> pg_backend_pid()",
                    &[&tag],
                )?
                .try_get(0)
            })?;
            if left == 0 {
                break;
            }
            if Instant::now() > deadline {
                return Err(StoreError::InvalidRequest(format!(
                    "a lost move of this pin still runs in {} after {} s",
                    self.db.server(),
                    SETTLE_WAIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let pins = self.db.with("reading the pins", |c| {
            let mut tx = setup_tx(c)?;
            let pins = read_pins(&mut tx)?;
            tx.commit()?;
            Ok(pins)
        })?;
        Ok(Placement {
            count: self.count,
            pins,
        })
    }

    /// The pins asked for and not in force yet.
    pub fn asked(&mut self) -> Result<Vec<PinMove>, StoreError> {
        self.db.with("reading the pins asked for", read_moves)
    }

    fn in_range(&self, partition: Option<u32>) -> Result<(), StoreError> {
        match partition.filter(|&p| p >= self.count) {
            Some(p) => Err(StoreError::InvalidRequest(format!(
                "partition {p} is past the cluster's {} partitions (0 to {})",
                self.count,
                self.count - 1
            ))),
            None => Ok(()),
        }
    }
}

/// The partition `function` lives in, and the one it would live in with
/// `partition` pinned (None: unpinned).
fn from_to(
    c: &mut impl GenericClient,
    count: u32,
    function: &[u8],
    partition: Option<u32>,
) -> Result<(u32, u32), postgres::Error> {
    let mut placement = Placement {
        count,
        pins: read_pins(c)?,
    };
    let from = placement.partition_of(function);
    placement.set_pin(function, partition);
    Ok((from, placement.partition_of(function)))
}

/// Writes the pin (or removes it) in the pins table.
fn write_pin(
    c: &mut impl GenericClient,
    function: &[u8],
    partition: Option<u32>,
) -> Result<(), postgres::Error> {
    match partition {
        Some(p) => c.execute(
            "INSERT INTO gearshift_pins (function, partition) VALUES ($1, $2)
             ON CONFLICT (function) DO UPDATE SET partition = EXCLUDED.partition",
            &[&function, &(p as i32)],
        )?,
        None => c.execute(
            "DELETE FROM gearshift_pins WHERE function = $1",
            &[&function],
        )?,
    };
    Ok(())
}

/// The live owner of `partition`, if any.
fn live_owner(
    c: &mut impl GenericClient,
    partition: u32,
) -> Result<Option<String>, postgres::Error> {
    let row = c.query_opt(
        "SELECT node FROM gearshift_partitions
         WHERE partition = $1 AND node IS NOT NULL AND expires_at >= now()",
        &[&(partition as i32)],
    )?;
    Ok(row.and_then(|r| r.get::<_, Option<String>>(0)))
}

/// The pins asked for, by function.
pub(super) fn read_moves(c: &mut impl GenericClient) -> Result<Vec<PinMove>, postgres::Error> {
    c.query(
        "SELECT function, partition, (extract(epoch FROM asked_at) * 1000000)::bigint
         FROM gearshift_pin_moves ORDER BY function",
        &[],
    )?
    .iter()
    .map(|row| {
        let (f, p): (Vec<u8>, Option<i32>) = (row.try_get(0)?, row.try_get(1)?);
        // The column's CHECK keeps it from being negative.
        Ok(PinMove {
            function: Bytes::from(f),
            partition: p.map(|p| p.max(0) as u32),
            asked_us: row.try_get(2)?,
        })
    })
    .collect()
}

/// [`Pins::pin`] in `tx` (which holds the set-up lock); any pin asked for
/// the function is dropped.
fn pin_at_once(
    tx: &mut postgres::Transaction<'_>,
    count: u32,
    function: &[u8],
    partition: Option<u32>,
) -> Result<Pinned, postgres::Error> {
    let (from, to) = from_to(tx, count, function, partition)?;
    write_pin(tx, function, partition)?;
    tx.execute(
        "DELETE FROM gearshift_pin_moves WHERE function = $1",
        &[&function],
    )?;
    let mut fenced = partitions_holding(tx, function, to)?;
    if from != to {
        fenced.insert(from);
    }
    let fenced: Vec<u32> = fenced.into_iter().collect();
    let parts: Vec<i32> = fenced.iter().map(|&p| p as i32).collect();
    // Their rows first, as a flush takes them: a flush in flight
    // ends before the rows move, and none starts after.
    tx.query(
        "SELECT 1 FROM gearshift_partitions WHERE partition = ANY($1)
         ORDER BY partition FOR UPDATE",
        &[&parts],
    )?;
    let moved = move_rows(tx, function, to)?;
    tx.execute(
        "UPDATE gearshift_partitions SET epoch = epoch + 1, node = NULL, expires_at = now()
         WHERE partition = ANY($1) AND node IS NOT NULL",
        &[&parts],
    )?;
    Ok(Pinned {
        from,
        to,
        moved,
        fenced,
    })
}

/// The pin asked for `function` (to `asked`), moved by the node whose
/// store holds the partition it lives in, `from` at `epoch` (nothing of it
/// buffered): its rows go to the partition asked for and the pin is put in
/// force, in one transaction fenced on that epoch. Returns `current` (the
/// store's placement) with that pin in force, or unchanged when the pin is
/// no longer asked for (asked again otherwise meanwhile, or dropped). Other
/// pins stored meanwhile are left to the node's beats, which take on what
/// they move in.
pub(super) fn move_asked(
    c: &mut postgres::Client,
    server: &str,
    current: &Placement,
    (function, asked): (&[u8], Option<u32>),
    (from, epoch): (u32, i64),
) -> Result<Placement, StoreError> {
    let err =
        |e: postgres::Error| super::connect::unreachable_or_refused(&e, server, "a pin's move");
    let mut tx = setup_tx_named(c, &move_tag(function)).map_err(err)?;
    let row = tx
        .query_opt(
            "SELECT partition FROM gearshift_pin_moves WHERE function = $1",
            &[&function],
        )
        .map_err(err)?
        .map(|r| r.try_get::<_, Option<i32>>(0))
        .transpose()
        .map_err(err)?;
    let stored = Placement {
        count: current.count,
        pins: read_pins(&mut tx).map_err(err)?,
    };
    let mut placement = current.clone();
    let still = row.filter(|p| p.map(|p| p.max(0) as u32) == asked);
    if let Some(partition) = still {
        if stored.partition_of(function) != from {
            return Err(StoreError::InvalidRequest(format!(
                "the function does not live in partition {from}"
            )));
        }
        check_partition_epoch(&mut tx, server, from, epoch)?;
        let partition = partition.map(|p| p.max(0) as u32);
        placement.set_pin(function, partition);
        let to = placement.partition_of(function);
        move_rows(&mut tx, function, to).map_err(err)?;
        write_pin(&mut tx, function, partition).map_err(err)?;
        tx.execute(
            "DELETE FROM gearshift_pin_moves WHERE function = $1",
            &[&function],
        )
        .map_err(err)?;
    }
    tx.commit().map_err(err)?;
    Ok(placement)
}

/// The name a move of `function` gives its session while it runs, so that
/// [`Pins::placement_settled`] can end it.
fn move_tag(function: &[u8]) -> String {
    format!("gearshift pin move {:016x}", fnv1a64(function))
}

/// How long [`Pins::placement_settled`] waits for a move's session to end.
const SETTLE_WAIT: Duration = Duration::from_secs(10);

/// The partitions other than `to` that hold rows of `function`.
fn partitions_holding(
    c: &mut impl GenericClient,
    function: &[u8],
    to: u32,
) -> Result<BTreeSet<u32>, postgres::Error> {
    let mut held = BTreeSet::new();
    for table in TABLES {
        for row in c.query(
            &format!(
                "SELECT DISTINCT partition FROM {table}
                 WHERE function = $1 AND partition IS DISTINCT FROM $2 AND partition IS NOT NULL"
            ),
            &[&function, &(to as i32)],
        )? {
            let p: i32 = row.try_get(0)?;
            held.insert(p.max(0) as u32);
        }
    }
    Ok(held)
}

/// Moves `function`'s rows in every table to partition `to`; how many.
fn move_rows(c: &mut impl GenericClient, function: &[u8], to: u32) -> Result<u64, postgres::Error> {
    let mut moved = 0;
    for table in TABLES {
        moved += c.execute(
            &format!(
                "UPDATE {table} SET partition = $2
                 WHERE function = $1 AND partition IS DISTINCT FROM $2 AND partition IS NOT NULL"
            ),
            &[&function, &(to as i32)],
        )?;
    }
    Ok(moved)
}
