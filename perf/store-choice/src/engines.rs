//! The three engines behind one small trait. Each keeps the same data: a job
//! id mapped to the job's record, encoded with gearshift-store's own record
//! encoding (so the engines differ only in how they make it durable).

use std::path::Path;

use bytes::Bytes;
use gearshift_store::{Durability, JobRecord, LogOptions, LogStore, Op, Store};
use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use rusqlite::Connection;

pub type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// An open engine that can group-commit.
pub trait Engine {
    /// Durably adds `adds` and removes `dones`, as one commit.
    fn commit(&mut self, adds: &[JobRecord], dones: &[u64]) -> Result<()>;
}

/// Which engine (and setting) to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Log,
    Redb,
    SqliteFull,
    SqliteNormal,
}

impl Kind {
    pub const ALL: [Kind; 4] = [Kind::Log, Kind::Redb, Kind::SqliteFull, Kind::SqliteNormal];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Log => "log (Fsync)",
            Kind::Redb => "redb (Immediate)",
            Kind::SqliteFull => "sqlite WAL sync=FULL",
            Kind::SqliteNormal => "sqlite WAL sync=NORMAL",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Kind::Log => "log",
            Kind::Redb => "redb",
            Kind::SqliteFull => "sqlite-full",
            Kind::SqliteNormal => "sqlite-normal",
        }
    }

    /// Opens (creating if needed) the engine's files in `dir`.
    pub fn open(self, dir: &Path) -> Result<Box<dyn Engine>> {
        Ok(match self {
            Kind::Log => Box::new(LogEngine::open(dir)?),
            Kind::Redb => Box::new(RedbEngine::open(dir)?),
            Kind::SqliteFull => Box::new(SqliteEngine::open(dir, "FULL")?),
            Kind::SqliteNormal => Box::new(SqliteEngine::open(dir, "NORMAL")?),
        })
    }

    /// Opens the engine in `dir` and reads every live job back, decoded:
    /// what a server does at startup.
    pub fn replay(self, dir: &Path) -> Result<Vec<JobRecord>> {
        match self {
            Kind::Log => Ok(LogEngine::open(dir)?.0.replay()?.jobs),
            Kind::Redb => RedbEngine::open(dir)?.replay(),
            Kind::SqliteFull => SqliteEngine::open(dir, "FULL")?.replay(),
            Kind::SqliteNormal => SqliteEngine::open(dir, "NORMAL")?.replay(),
        }
    }
}

fn encode(job: &JobRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(64 + job.data.len());
    Op::Add(job.clone()).encode(&mut out);
    out
}

fn decode(bytes: &[u8]) -> Result<JobRecord> {
    match Op::decode_all(&Bytes::copy_from_slice(bytes))?.pop() {
        Some(Op::Add(r)) => Ok(r),
        other => Err(format!("stored value is not a job: {other:?}").into()),
    }
}

// ---------------------------------------------------------------- (a) log

struct LogEngine(LogStore);

impl LogEngine {
    fn open(dir: &Path) -> Result<LogEngine> {
        let opts = LogOptions {
            durability: Durability::Fsync,
            ..LogOptions::default()
        };
        Ok(LogEngine(LogStore::open(dir, opts)?))
    }
}

impl Engine for LogEngine {
    fn commit(&mut self, adds: &[JobRecord], dones: &[u64]) -> Result<()> {
        for job in adds {
            self.0.add(job);
        }
        for &id in dones {
            self.0.done(id);
        }
        self.0.flush()?;
        Ok(())
    }
}

// ---------------------------------------------------------------- (b) redb

const JOBS: TableDefinition<u64, &[u8]> = TableDefinition::new("jobs");

struct RedbEngine(redb::Database);

impl RedbEngine {
    fn open(dir: &Path) -> Result<RedbEngine> {
        std::fs::create_dir_all(dir)?;
        let db = redb::Database::create(dir.join("queue.redb"))?;
        // Create the table once so readers always find it.
        let tx = db.begin_write()?;
        tx.open_table(JOBS)?;
        tx.commit()?;
        Ok(RedbEngine(db))
    }

    fn replay(&self) -> Result<Vec<JobRecord>> {
        let tx = self.0.begin_read()?;
        let table = tx.open_table(JOBS)?;
        let mut jobs = Vec::new();
        for entry in table.iter()? {
            let (_, v) = entry?;
            jobs.push(decode(v.value())?);
        }
        Ok(jobs)
    }
}

impl Engine for RedbEngine {
    fn commit(&mut self, adds: &[JobRecord], dones: &[u64]) -> Result<()> {
        // Default durability is Immediate: commit() returns once it is on disk.
        let tx = self.0.begin_write()?;
        {
            let mut table = tx.open_table(JOBS)?;
            for job in adds {
                table.insert(job.id, encode(job).as_slice())?;
            }
            for id in dones {
                table.remove(id)?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

// -------------------------------------------------------------- (c) SQLite

struct SqliteEngine(Connection);

impl SqliteEngine {
    fn open(dir: &Path, synchronous: &str) -> Result<SqliteEngine> {
        std::fs::create_dir_all(dir)?;
        let conn = Connection::open(dir.join("queue.sqlite"))?;
        let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(format!("journal_mode is {mode}, not wal").into());
        }
        conn.execute_batch(&format!(
            "PRAGMA synchronous={synchronous};
             CREATE TABLE IF NOT EXISTS jobs (id INTEGER PRIMARY KEY, rec BLOB NOT NULL);"
        ))?;
        Ok(SqliteEngine(conn))
    }

    fn replay(&self) -> Result<Vec<JobRecord>> {
        let mut stmt = self.0.prepare("SELECT rec FROM jobs ORDER BY id")?;
        let mut rows = stmt.query([])?;
        let mut jobs = Vec::new();
        while let Some(row) = rows.next()? {
            jobs.push(decode(row.get_ref(0)?.as_blob()?)?);
        }
        Ok(jobs)
    }
}

impl Engine for SqliteEngine {
    fn commit(&mut self, adds: &[JobRecord], dones: &[u64]) -> Result<()> {
        let tx = self.0.transaction()?;
        {
            let mut insert = tx.prepare_cached("INSERT INTO jobs (id, rec) VALUES (?1, ?2)")?;
            for job in adds {
                insert.execute((job.id as i64, encode(job)))?;
            }
            let mut delete = tx.prepare_cached("DELETE FROM jobs WHERE id = ?1")?;
            for &id in dones {
                delete.execute([id as i64])?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}
