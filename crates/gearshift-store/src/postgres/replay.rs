//! Reading the stored state back: every table in id (or name) order,
//! each column checked and converted (a value no writer could have stored
//! is [`StoreError::Corrupt`], never a panic).

use bytes::Bytes;
use postgres::{Client, Row};

use super::connect::unreachable_or_refused;
use crate::{
    DeadMark, FunctionRecord, JobRecord, KeptRecord, ScheduleRecord, Sets, StoreError, MAX_ID,
};

/// Which rows a store holds.
pub(super) enum Scope {
    All,
    Partitions(Vec<i32>),
    /// One function's rows in its partition.
    Function(i32, Vec<u8>),
}

/// The whole stored state, or some partitions', read in one
/// repeatable-read snapshot. The reservation is the cluster's either way.
pub(super) fn load(client: &mut Client, server: &str, scope: &Scope) -> Result<Sets, StoreError> {
    let err = |e: postgres::Error| unreachable_or_refused(&e, server, "the replay");
    let mut tx = client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(err)?;
    // One partition's rows, or all of them.
    let (only, params): (&str, Vec<&(dyn postgres::types::ToSql + Sync)>) = match scope {
        Scope::Partitions(p) => (" WHERE partition = ANY($1)", vec![p]),
        Scope::Function(p, f) => (" WHERE partition = $1 AND function = $2", vec![p, f]),
        Scope::All => ("", vec![]),
    };
    let jobs = tx
        .query(
            &format!(
                "SELECT id, handle, function, unique_id, priority, data, reducer, due_ms, \
                 attempts, created_ms, died_ms, error FROM gearshift_jobs{only} ORDER BY id"
            ),
            &params,
        )
        .map_err(err)?;
    let schedules = tx
        .query(
            &format!(
                "SELECT id, handle, when_fields, monday_zero, function, unique_id, data, \
                 priority, next_ms, from_config FROM gearshift_schedules{only} ORDER BY id"
            ),
            &params,
        )
        .map_err(err)?;
    let kept = tx
        .query(
            &format!(
                "SELECT id, handle, function, unique_id, priority, background, outcome, \
                 attempts, created_ms, started_ms, finished_ms, expires_ms, worker, error, \
                 result, history FROM gearshift_kept{only} ORDER BY id"
            ),
            &params,
        )
        .map_err(err)?;
    let functions = tx
        .query(
            &format!(
                "SELECT function, paused, max_high, max_normal, max_low \
                 FROM gearshift_functions{only} ORDER BY function"
            ),
            &params,
        )
        .map_err(err)?;
    // A run mark belongs to its job's partition.
    let running = match scope {
        Scope::Partitions(_) => tx.query(
            "SELECT r.id FROM gearshift_running r JOIN gearshift_jobs j ON j.id = r.id \
             WHERE j.partition = ANY($1) ORDER BY r.id",
            &params,
        ),
        Scope::Function(..) => tx.query(
            "SELECT r.id FROM gearshift_running r JOIN gearshift_jobs j ON j.id = r.id \
             WHERE j.partition = $1 AND j.function = $2 ORDER BY r.id",
            &params,
        ),
        Scope::All => tx.query("SELECT id FROM gearshift_running ORDER BY id", &[]),
    }
    .map_err(err)?;
    let last_reserved: i64 = tx
        .query_one("SELECT last_reserved FROM gearshift_reservation", &[])
        .and_then(|r| r.try_get(0))
        .map_err(err)?;
    tx.commit().map_err(err)?;

    let mut sets = Sets {
        high: u64::try_from(last_reserved.saturating_add(1))
            .map_err(|_| corrupt("gearshift_reservation", last_reserved, "a negative mark"))?,
        ..Sets::default()
    };
    for row in &running {
        let id: i64 = row.try_get(0).map_err(err)?;
        let id =
            u64::try_from(id).map_err(|_| corrupt("gearshift_running", id, "a negative id"))?;
        sets.running.insert(id);
    }
    for row in &jobs {
        let c = Cols::new(row, "gearshift_jobs")?;
        let r = JobRecord {
            id: c.id,
            handle: c.bytes(1)?,
            function: c.bytes(2)?,
            unique: c.bytes(3)?,
            priority: c.small(4)?,
            data: c.bytes(5)?,
            reducer: c.opt_bytes(6)?,
            due_ms: c.opt_time(7)?,
            attempts: c.count(8)?,
            created_ms: c.time(9)?,
        };
        match (c.opt_time(10)?, c.opt_bytes(11)?) {
            (Some(died_ms), Some(error)) => {
                sets.dead.insert(r.id, (r, DeadMark { died_ms, error }));
            }
            (None, None) => {
                sets.live.insert(r.id, r);
            }
            _ => return Err(corrupt("gearshift_jobs", c.id, "half a dead mark")),
        }
    }
    for row in &schedules {
        let c = Cols::new(row, "gearshift_schedules")?;
        let s = ScheduleRecord {
            id: c.id,
            handle: c.bytes(1)?,
            when: c.bytes(2)?,
            monday_zero: c.get(3)?,
            function: c.bytes(4)?,
            unique: c.bytes(5)?,
            data: c.bytes(6)?,
            priority: c.small(7)?,
            next_ms: c.opt_time(8)?,
            from_config: c.get(9)?,
        };
        sets.schedules.insert(s.id, s);
    }
    for row in &kept {
        let c = Cols::new(row, "gearshift_kept")?;
        let k = KeptRecord {
            id: c.id,
            handle: c.bytes(1)?,
            function: c.bytes(2)?,
            unique: c.bytes(3)?,
            priority: c.small(4)?,
            background: c.get(5)?,
            outcome: c.small(6)?,
            attempts: c.count(7)?,
            created_ms: c.time(8)?,
            started_ms: c.opt_time(9)?,
            finished_ms: c.time(10)?,
            expires_ms: c.time(11)?,
            worker: c.bytes(12)?,
            error: c.opt_bytes(13)?,
            result: c.bytes(14)?,
            history: c.bytes(15)?,
        };
        if k.outcome > crate::record::KEPT_LAST_OUTCOME {
            return Err(corrupt("gearshift_kept", k.id, "an unknown outcome"));
        }
        sets.kept.insert(k.id, k);
    }
    for row in &functions {
        let f = function(row)?;
        // A row at the defaults says nothing is set: as if absent.
        if !f.is_default() {
            sets.functions.insert(f.name.clone(), f);
        }
    }
    // Every stored id counts toward the high-water mark, as in the log.
    let last = [
        sets.live.keys().next_back(),
        sets.dead.keys().next_back(),
        sets.schedules.keys().next_back(),
        sets.kept.keys().next_back(),
    ];
    for id in last.into_iter().flatten() {
        sets.high = sets.high.max(id + 1);
    }
    Ok(sets)
}

/// A `gearshift_functions` row.
fn function(row: &Row) -> Result<FunctionRecord, StoreError> {
    let get_err = |e: postgres::Error| {
        StoreError::Corrupt(format!("gearshift_functions: unreadable row: {e}"))
    };
    let name: Vec<u8> = row.try_get(0).map_err(get_err)?;
    let limit = |i: usize| row.try_get::<_, i64>(i).map_err(get_err);
    Ok(FunctionRecord {
        name: Bytes::from(name),
        paused: row.try_get(1).map_err(get_err)?,
        max_queue: [limit(2)?, limit(3)?, limit(4)?],
    })
}

/// A stored value no writer could have stored.
fn corrupt(table: &str, id: impl std::fmt::Display, what: &str) -> StoreError {
    StoreError::Corrupt(format!("{table} row {id} holds {what}"))
}

/// One row's columns, with its id (column 0) checked.
struct Cols<'a> {
    row: &'a Row,
    table: &'static str,
    id: u64,
}

impl<'a> Cols<'a> {
    fn new(row: &'a Row, table: &'static str) -> Result<Self, StoreError> {
        let raw: i64 = row
            .try_get(0)
            .map_err(|e| StoreError::Corrupt(format!("{table}: unreadable id: {e}")))?;
        let id = u64::try_from(raw)
            .ok()
            .filter(|&id| id <= MAX_ID)
            .ok_or_else(|| corrupt(table, raw, "a negative id"))?;
        Ok(Cols { row, table, id })
    }

    fn get<T: postgres::types::FromSql<'a>>(&self, i: usize) -> Result<T, StoreError> {
        self.row.try_get(i).map_err(|e| {
            StoreError::Corrupt(format!("{} row {}, column {i}: {e}", self.table, self.id))
        })
    }

    fn bytes(&self, i: usize) -> Result<Bytes, StoreError> {
        Ok(Bytes::from(self.get::<Vec<u8>>(i)?))
    }

    fn opt_bytes(&self, i: usize) -> Result<Option<Bytes>, StoreError> {
        Ok(self.get::<Option<Vec<u8>>>(i)?.map(Bytes::from))
    }

    /// A `u64` stored bit for bit in a `BIGINT`.
    fn time(&self, i: usize) -> Result<u64, StoreError> {
        Ok(self.get::<i64>(i)? as u64)
    }

    fn opt_time(&self, i: usize) -> Result<Option<u64>, StoreError> {
        Ok(self.get::<Option<i64>>(i)?.map(|t| t as u64))
    }

    fn small(&self, i: usize) -> Result<u8, StoreError> {
        let v: i16 = self.get(i)?;
        u8::try_from(v).map_err(|_| corrupt(self.table, self.id, &format!("{v} in column {i}")))
    }

    fn count(&self, i: usize) -> Result<u32, StoreError> {
        let v: i64 = self.get(i)?;
        u32::try_from(v).map_err(|_| corrupt(self.table, self.id, &format!("{v} in column {i}")))
    }
}
