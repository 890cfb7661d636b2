//! `gearshift import`: moves a gearmand 1.1 persistent queue (the table of
//! its `libsqlite3`, `Postgres` or `MySQL` plugin) into the embedded store or a
//! PostgreSQL store (`--store postgres://...`), so a migration loses no
//! job.
//!
//! Everything is read and checked before anything is written: a missing
//! table, an unreadable row or a store in use by a running server stops
//! the import with nothing written. The jobs are then appended after any
//! the store already holds, with new handle numbers (gearmand never stored
//! handles), in one flush (one `fsync`, or one PostgreSQL transaction).
//! Each import is recorded (in [`MARKER`] in the data directory, or in the
//! database's `gearshift_imports` table, in the jobs' own transaction), and
//! importing the same queue again (a file with the same path, size and
//! mtime; a table at the same address with the same rows) is refused
//! unless `--force`: a second import would queue every job twice.
//!
//! A PostgreSQL store is a cluster's: the import takes the cluster's lease
//! as a node would (and is refused while a node holds it), so no node
//! writes while it does, and its flush is fenced by the lease's epoch.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use clap::{ArgGroup, Args};
use gearshift_core::CoreConfig;
use gearshift_store::postgres::describe_url;
use gearshift_store::postgres::lease::{Lease, NodeAddrs};
use gearshift_store::{JobRecord, LogOptions, LogStore, PgOptions, PgStore, Store, StoreError};

use crate::serve::{default_data_dir, default_handle_prefix, is_postgres_url, parse_store};

mod marker;
mod mysql;
mod postgres;
mod sqlite;
mod table;
#[cfg(test)]
mod tests;

use marker::{check_imports, check_marker, record_import, Source};
use mysql::read_gearmand_mysql;
use postgres::read_gearmand_postgres;
use sqlite::read_gearmand_sqlite;

/// File in the data directory that lists every import, one line each.
pub const MARKER: &str = "imported-gearmand.txt";

/// How long the import's hold on a PostgreSQL cluster's lease lasts
/// unrenewed (it is renewed just before the flush, and released at the end).
const LEASE: Duration = Duration::from_secs(30);

/// gearmand refuses longer uniques (`GEARMAN_MAX_UNIQUE_SIZE`).
const MAX_UNIQUE: usize = 64;

/// Flags of `gearshift import`.
#[derive(Args, Debug)]
#[group(skip)]
#[command(group(ArgGroup::new("source").required(true).multiple(false)))]
pub struct ImportArgs {
    /// gearmand's libsqlite3 queue database (its `--libsqlite3-db`); opened
    /// read-only. Stop gearmand first.
    #[arg(long, value_name = "FILE", group = "source")]
    gearmand_sqlite: Option<PathBuf>,
    /// gearmand's Postgres queue: its `--libpq-conninfo` (libpq's
    /// `key=value` form, e.g. "host=db port=5432 dbname=gearman user=g
    /// password=...", or a postgresql:// URL; PGHOST, PGPORT, PGUSER,
    /// PGDATABASE and PGPASSWORD fill what it leaves out), read in one
    /// read-only transaction, without TLS. Stop gearmand first.
    #[arg(long, value_name = "CONNINFO", group = "source")]
    gearmand_postgres: Option<String>,
    /// gearmand's MySQL (or MariaDB) queue, as
    /// mysql://user:password@host:port/database (its `--mysql-user`,
    /// `--mysql-password`, `--mysql-host`, `--mysql-port`, `--mysql-db`;
    /// MYSQL_PWD gives a password the URL leaves out), read in one
    /// read-only consistent snapshot, without TLS. Stop gearmand first.
    #[arg(long, value_name = "URL", group = "source")]
    gearmand_mysql: Option<String>,
    /// Table holding the queue (gearmand's `--libsqlite3-table` or
    /// `--mysql-table`, default gearman_queue, or `--libpq-table`, default
    /// queue).
    #[arg(long)]
    table: Option<String>,
    /// Store to import into, as `serve --store` names it: `log` (the
    /// embedded store in --data-dir) or a PostgreSQL URL
    /// (`postgres://user:pass@host:port/db`; PGHOST, PGUSER, PGPASSWORD,
    /// PGDATABASE, PGPORT fill what it leaves out). No node of the
    /// database's cluster may be running: stop them all, import, start them.
    #[arg(long, env = "GEARSHIFT_STORE", hide_env_values = true, default_value = "log", value_parser = parse_store)]
    store: String,
    /// Directory of the embedded store to import into (default as for
    /// `serve`). No server may be running on it. Unused with a PostgreSQL
    /// --store.
    #[arg(long, env = "GEARSHIFT_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// Job handle prefix of the new handles (default `H:<hostname>`); give
    /// the one `gearshift serve` will use.
    #[arg(long)]
    job_handle_prefix: Option<String>,
    /// Import even if this queue was imported into this store before (its
    /// jobs are then queued twice).
    #[arg(long)]
    force: bool,
}

/// Runs the import; prints the summary or why nothing was imported.
pub fn main(args: ImportArgs) -> ExitCode {
    match run(&args, gearshift_server::clock::unix_ms()) {
        Ok(summary) => {
            println!("{}", summary.line);
            for w in summary.warnings {
                eprintln!("gearshift: warning: {w}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gearshift: import failed, nothing was written: {e}");
            ExitCode::FAILURE
        }
    }
}

/// What a successful import reports.
#[derive(Debug)]
struct Summary {
    line: String,
    warnings: Vec<String>,
}

/// One row of gearmand's queue table.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    unique: Bytes,
    function: Bytes,
    priority: u8,
    data: Bytes,
    /// `when_to_run`, Unix seconds; 0 for a job that runs at once.
    when: i64,
}

fn run(args: &ImportArgs, now: u64) -> Result<Summary, String> {
    if args.store == "memory" {
        return Err(
            "--store memory keeps no job across a restart; import into `log` \
                    (--data-dir) or a postgres:// URL"
                .into(),
        );
    }
    let prefix = args
        .job_handle_prefix
        .clone()
        .unwrap_or_else(default_handle_prefix);
    CoreConfig {
        handle_prefix: prefix.clone(),
        ..CoreConfig::default()
    }
    .validate()?;
    let queue = read(args)?;
    if is_postgres_url(&args.store) {
        check_size(&queue.rows, &prefix)?;
        return into_postgres(&args.store, &queue, &prefix, args.force, now);
    }
    into_log(args, &queue, &prefix, now)
}

/// A queue read from gearmand's table.
struct Queue {
    rows: Vec<Row>,
    /// What identifies it for the import record.
    source: Source,
    /// How the summary names it.
    from: String,
}

/// Imports into the embedded store in `--data-dir`.
fn into_log(args: &ImportArgs, queue: &Queue, prefix: &str, now: u64) -> Result<Summary, String> {
    let Queue { rows, source, from } = queue;
    let dir = args.data_dir.clone().unwrap_or_else(default_data_dir);
    // Checked before anything is written, and again under the store's lock
    // (held until the import is recorded) against a concurrent import.
    let mut warnings: Vec<String> = check_marker(&dir, source, args.force)?
        .into_iter()
        .collect();
    check_size(rows, prefix)?;

    let mut store = LogStore::open(&dir, LogOptions::default()).map_err(|e| match e {
        StoreError::Locked(_) => format!(
            "{} is in use by a running Gearshift server; stop it, import, then start it again",
            dir.display()
        ),
        StoreError::Corrupt(_) => damaged(&dir, e),
        e => format!("cannot open the store in {}: {e}", dir.display()),
    })?;
    check_marker(&dir, source, args.force)?;
    append(&mut store, rows, prefix, now)
        .map_err(|e| format!("cannot write the store in {}: {e}", dir.display()))?;
    // The jobs are durable now: a failure to record the import must not
    // read as "nothing imported", or a retry would queue them twice.
    if let Err(e) = record_import(&dir, source, rows.len(), now) {
        warnings.push(format!(
            "the jobs were imported, but recording the import in {} failed ({e}): \
             do not import {from} again",
            dir.join(MARKER).display(),
        ));
    }
    drop(store);
    Ok(Summary {
        line: summary_line(rows, from, &dir.display().to_string()),
        warnings,
    })
}

/// A damaged queue file (found at open) stops the import before it
/// writes, naming the way out.
fn damaged(dir: &Path, e: StoreError) -> String {
    format!(
        "nothing imported: the store in {} is damaged: {e}\n{}",
        dir.display(),
        crate::check::repair_hint(dir)
    )
}

/// Imports into the PostgreSQL store at `url`, holding its cluster's lease
/// (refused while a node holds it); the lease is released and the
/// import's node row removed whatever happens.
fn into_postgres(
    url: &str,
    queue: &Queue,
    prefix: &str,
    force: bool,
    now: u64,
) -> Result<Summary, String> {
    let server = describe_url(url);
    let me = NodeAddrs {
        name: format!(
            "import-{}@{}",
            std::process::id(),
            gethostname::gethostname().to_string_lossy()
        ),
        // Not a Gearman listener: no node relays to an import.
        gearman: "-".into(),
        http: None,
    };
    let mut lease =
        Lease::open(url, &PgOptions::default(), me, LEASE).map_err(|e| e.to_string())?;
    let mut after = Vec::new();
    let result = match lease.try_take() {
        Err(e) => Err(e.to_string()),
        Ok(None) => Err(format!(
            "a Gearshift node leads the cluster on {server}; stop every node first, \
             import, then start them again"
        )),
        Ok(Some(epoch)) => {
            let r = import_leading(url, &server, epoch, &mut lease, queue, prefix, force, now);
            if let Err(e) = lease.release(epoch) {
                after.push(format!(
                    "cannot release the cluster's lease ({e}): a node takes over only once \
                     it expires, within {} s",
                    LEASE.as_secs()
                ));
            }
            r
        }
    };
    if let Err(e) = lease.leave() {
        after.push(format!(
            "cannot remove the import's row {:?} from gearshift_nodes ({e}); delete it by hand",
            lease.me().name
        ));
    }
    match result {
        Ok(mut summary) => {
            summary.warnings.extend(after);
            Ok(summary)
        }
        Err(e) if after.is_empty() => Err(e),
        Err(e) => Err(format!("{e} (and: {})", after.join("; "))),
    }
}

/// The import proper, under the lease at `epoch`: the record of earlier
/// imports checked, then the jobs and the new record in one fenced
/// transaction.
#[allow(clippy::too_many_arguments)]
fn import_leading(
    url: &str,
    server: &str,
    epoch: i64,
    lease: &mut Lease,
    queue: &Queue,
    prefix: &str,
    force: bool,
    now: u64,
) -> Result<Summary, String> {
    let Queue { rows, source, from } = queue;
    let opts = PgOptions {
        fence: Some(epoch),
        ..PgOptions::default()
    };
    let mut store = PgStore::open(url, opts).map_err(|e| e.to_string())?;
    let warnings: Vec<String> = check_imports(&mut store, server, source, force)?
        .into_iter()
        .collect();
    stage(&mut store, rows, prefix, now).map_err(|e| e.to_string())?;
    // A long replay may have used up much of the lease: renew it, so no
    // node takes over (and fences the flush out) while it runs.
    let beat = lease.beat(Some(epoch)).map_err(|e| e.to_string())?;
    if !beat.renewed {
        return Err(format!(
            "the import's hold on the cluster's lease expired (after {} s) before it wrote",
            LEASE.as_secs()
        ));
    }
    store
        .flush_recording_import(source.key(), &source.fingerprint(), rows.len() as u64)
        .map_err(|e| match e {
            StoreError::Fenced(_) => {
                format!("a Gearshift node took the cluster's lease on {server} during the import")
            }
            e => format!("cannot write the store at {server}: {e}"),
        })?;
    Ok(Summary {
        line: summary_line(rows, from, server),
        warnings,
    })
}

/// Reads the queue the flags name: its rows, what identifies it for the
/// import record, and how the summary names it.
fn read(args: &ImportArgs) -> Result<Queue, String> {
    let read = match (&args.gearmand_postgres, &args.gearmand_mysql) {
        (Some(conninfo), _) => Some(read_gearmand_postgres(
            conninfo,
            args.table.as_deref().unwrap_or("queue"),
        )?),
        (_, Some(url)) => Some(read_gearmand_mysql(
            url,
            args.table.as_deref().unwrap_or("gearman_queue"),
        )?),
        _ => None,
    };
    if let Some(read) = read {
        let source = Source::table(&read.name, read.rows.len(), read.fingerprint);
        return Ok(Queue {
            rows: read.rows,
            source,
            from: read.name,
        });
    }
    let Some(file) = &args.gearmand_sqlite else {
        return Err(
            "name the queue to import: --gearmand-sqlite, --gearmand-postgres or --gearmand-mysql"
                .into(),
        );
    };
    let table = args.table.as_deref().unwrap_or("gearman_queue");
    let source = Source::of(file)?;
    let rows = read_gearmand_sqlite(file, table)?;
    Ok(Queue {
        rows,
        source,
        from: file.display().to_string(),
    })
}

/// Adds the jobs after every handle number the store has used, reserves
/// past the last one, and makes it all durable in one flush.
fn append(store: &mut dyn Store, rows: &[Row], prefix: &str, now: u64) -> Result<(), StoreError> {
    stage(store, rows, prefix, now)?;
    store.flush()
}

/// [`append`] without the flush: the jobs and the reservation buffered.
fn stage(store: &mut dyn Store, rows: &[Row], prefix: &str, now: u64) -> Result<(), StoreError> {
    let next_id = store.replay()?.next_id;
    let records = to_records(rows, next_id, prefix, now);
    for r in &records {
        store.add(r);
    }
    store.reserve(next_id + records.len() as u64);
    Ok(())
}

/// `imported N jobs from <queue> into <store> (functions: ...)`.
fn summary_line(rows: &[Row], from: &str, into: &str) -> String {
    let mut per_function: BTreeMap<String, usize> = BTreeMap::new();
    for r in rows {
        *per_function
            .entry(String::from_utf8_lossy(&r.function).into_owned())
            .or_default() += 1;
    }
    let functions = if per_function.is_empty() {
        "none".to_owned()
    } else {
        let parts: Vec<String> = per_function
            .iter()
            .map(|(f, n)| format!("{f} {n}"))
            .collect();
        parts.join(", ")
    };
    format!(
        "imported {} jobs from {} into {} (functions: {functions})",
        rows.len(),
        from,
        into
    )
}

/// Unix milliseconds as `YYYY-MM-DD HH:MM:SS UTC` (civil-from-days).
fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Why the queue table was not found, naming the tables that were; `hint`
/// says how to name the right one.
fn no_table(place: &str, table: &str, found: &[String], hint: &str) -> String {
    let found = if found.is_empty() {
        "none".to_owned()
    } else {
        found.join(", ")
    };
    format!("{place} has no table {table:?} (tables found: {found}); {hint}")
}

/// Checks that a table (`what`, for messages) has the columns of every
/// gearmand queue, `has` telling whether a column is there; returns whether
/// it also has `when_to_run` (tables from before epoch jobs lack it).
fn queue_columns(
    columns: &[String],
    has: impl Fn(&str) -> bool,
    what: &str,
) -> Result<bool, String> {
    for c in ["unique_key", "function_name", "priority", "data"] {
        if !has(c) {
            return Err(format!(
                "table {what} has no column {c} (columns: {}); is it a gearmand queue?",
                columns.join(", ")
            ));
        }
    }
    Ok(has("when_to_run"))
}

/// A row's unique as Gearman allows it (at most [`MAX_UNIQUE`] bytes).
fn check_unique(unique: Bytes) -> Result<Bytes, String> {
    if unique.len() > MAX_UNIQUE {
        return Err(format!(
            "unique_key has {} bytes; Gearman allows at most {MAX_UNIQUE}",
            unique.len()
        ));
    }
    Ok(unique)
}

/// A row's function name: never empty.
fn check_function(function: Bytes) -> Result<Bytes, String> {
    if function.is_empty() {
        return Err("function_name is empty".to_owned());
    }
    Ok(function)
}

/// gearmand's 0 high, 1 normal, 2 low; anything else runs as normal.
fn priority_of(p: i64) -> u8 {
    match p {
        0..=2 => p as u8,
        _ => 1,
    }
}

/// Refuses a batch that would not fit one log frame (a u32 length).
fn check_size(rows: &[Row], prefix: &str) -> Result<(), String> {
    // Op::Add: fixed fields, length prefixes, handle of at most prefix + 21.
    let total: u64 = rows
        .iter()
        .map(|r| 64 + (prefix.len() + r.function.len() + r.unique.len() + r.data.len()) as u64)
        .sum();
    if total >= u64::from(u32::MAX) {
        return Err(format!(
            "the queue holds about {} MiB of jobs, more than one atomic write of the store \
             takes (4 GiB)",
            total >> 20
        ));
    }
    Ok(())
}

fn to_records(rows: &[Row], next_id: u64, prefix: &str, now: u64) -> Vec<JobRecord> {
    rows.iter()
        .zip(next_id..)
        .map(|(r, id)| {
            let due = u64::try_from(r.when)
                .ok()
                .map(|s| s.saturating_mul(1000))
                .filter(|&d| d > now);
            JobRecord {
                id,
                handle: Bytes::from(format!("{prefix}:{id}")),
                function: r.function.clone(),
                unique: r.unique.clone(),
                priority: r.priority,
                data: r.data.clone(),
                reducer: None,
                due_ms: due,
                attempts: 0,
                created_ms: now,
            }
        })
        .collect()
}
