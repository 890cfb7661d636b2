//! Placing a function by hand (`gearshift pin`): the pin is written, the
//! function's stored rows move to its new partition, and the partitions
//! they left (and the one its name placed it in before) are taken from
//! their owners, all in one transaction. A node still writing the function
//! where it was is therefore fenced, and nodes serve the new placement
//! from their next beat.

use std::collections::BTreeSet;

use bytes::Bytes;
use gearshift_core::placement::Placement;
use postgres::GenericClient;

use super::partitions::{read_pins, SETUP_LOCK};
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
        let row = self.db.with("reading a partition's owner", |c| {
            c.query_opt(
                "SELECT node FROM gearshift_partitions
                 WHERE partition = $1 AND node IS NOT NULL AND expires_at >= now()",
                &[&(partition as i32)],
            )
        })?;
        Ok(row.and_then(|r| r.get::<_, Option<String>>(0)))
    }

    /// Places `function` in `partition` (None: back where its name
    /// hashes), moves its stored rows there, and takes the partitions it
    /// leaves from their owners (epoch raised, lease ended).
    pub fn pin(&mut self, function: &[u8], partition: Option<u32>) -> Result<Pinned, StoreError> {
        if let Some(p) = partition.filter(|&p| p >= self.count) {
            return Err(StoreError::InvalidRequest(format!(
                "partition {p} is past the cluster's {} partitions (0 to {})",
                self.count,
                self.count - 1
            )));
        }
        let count = self.count;
        self.db.with("pinning a function", |c| {
            let mut tx = c.transaction()?;
            // One change of placement at a time, and none while a node
            // places rows written before partitions.
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SETUP_LOCK])?;
            let mut pins = read_pins(&mut tx)?;
            let from = Placement {
                count,
                pins: pins.clone(),
            }
            .partition_of(function);
            match partition {
                Some(p) => {
                    tx.execute(
                        "INSERT INTO gearshift_pins (function, partition) VALUES ($1, $2)
                         ON CONFLICT (function) DO UPDATE SET partition = EXCLUDED.partition",
                        &[&function, &(p as i32)],
                    )?;
                    pins.insert(Bytes::copy_from_slice(function), p);
                }
                None => {
                    tx.execute(
                        "DELETE FROM gearshift_pins WHERE function = $1",
                        &[&function],
                    )?;
                    pins.remove(function);
                }
            }
            let to = Placement { count, pins }.partition_of(function);
            let mut fenced = partitions_holding(&mut tx, function, to)?;
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
            let moved = move_rows(&mut tx, function, to)?;
            tx.execute(
                "UPDATE gearshift_partitions SET epoch = epoch + 1, node = NULL, expires_at = now()
                 WHERE partition = ANY($1) AND node IS NOT NULL",
                &[&parts],
            )?;
            tx.commit()?;
            Ok(Pinned {
                from,
                to,
                moved,
                fenced,
            })
        })
    }
}

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
