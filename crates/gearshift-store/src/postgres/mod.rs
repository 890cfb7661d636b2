//! The PostgreSQL backend. Opened plainly, a store takes the database for
//! itself (an advisory lock); opened fenced, it is a cluster leader's and
//! each flush writes only while the cluster's lease is at its epoch
//! ([`lease`]); opened for a partition, it holds that partition's rows only
//! and each flush writes only while the partition is at its epoch
//! ([`partitions`]).
//!
//! The store keeps a copy of the stored state in memory (as the memory
//! store does): a flush applies the buffered ops to it with the shared
//! [`crate::apply_ops`], so the semantics are exactly the other
//! backends', and then writes each touched id as it now stands, in one
//! statement ([`flush`]). A failed flush puts the copy back; a lost
//! connection is re-opened at the next flush or replay, which then
//! re-reads the state (the failed batch may or may not have committed).
//!
//! - `connect`: the URL, libpq's environment defaults and `sslmode`,
//!   error mapping; `tls`: the rustls connector and certificate checks;
//! - `schema`: tables and versioned migrations;
//! - `flush`: the batch statement, `cols` its parameter columns;
//!   `replay`: reading the state back;
//! - `lease`: the cluster's node table and leader lease, on a `session`
//!   of its own (re-opened after it was lost);
//! - `partitions`: partitions with their own owners, leases and epochs,
//!   and placing rows written before partitions;
//! - `imports`: the record of gearmand queues `gearshift import` loaded;
//! - `repartition`: a set's store taking partitions on and letting them go.

mod client_cert;
mod cols;
mod connect;

pub use connect::{causes, describe, libpq_defaults};
mod flush;
mod imports;
pub mod lease;
pub mod partitions;
pub mod pins;
mod repartition;
mod replay;
mod schema;
mod session;
mod statement;
mod tls;
mod tls_params;

use std::time::Duration;

use postgres::{Client, Config, Statement};
use tracing::{debug, warn};

use crate::batch::{Batch, Taken};
use crate::{Op, Repartition, Replayed, Sets, Store, StoreError};
use flush::{Fence, FenceKind};
pub use imports::ImportRecord;
pub use schema::SCHEMA_VERSION;

/// More to write in the transaction of a flush, after its batch (an
/// import's record): it commits with the batch or not at all.
type AlsoWrite<'a> = &'a dyn Fn(&mut postgres::Transaction<'_>) -> Result<(), postgres::Error>;

/// How to connect.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// Connect timeout, unless the URL sets `connect_timeout` itself.
    pub connect_timeout: Duration,
    /// How long sent data may stay unacknowledged before the connection
    /// counts as lost (TCP_USER_TIMEOUT, Linux), unless the URL sets
    /// `tcp_user_timeout`: a vanished database fails a flush instead of
    /// blocking the store thread for TCP's ~15 minutes.
    pub tcp_user_timeout: Duration,
    /// How long to wait for another holder of the database to let go
    /// (a node restarting while the database still ends its old session).
    pub lock_wait: Duration,
    /// A cluster leader's lease epoch: no advisory lock is taken, and a
    /// flush stores nothing (failing with [`StoreError::Fenced`]) once the
    /// lease has moved past this epoch.
    pub fence: Option<i64>,
    /// A partition and its epoch ([`partitions`]): no advisory lock is
    /// taken; the store replays and writes only that partition's rows, and
    /// a flush stores nothing (failing with [`StoreError::Fenced`]) once
    /// the partition has moved past this epoch. Not with `fence`.
    pub partition: Option<(u32, i64)>,
    /// A set of partitions, each at its epoch (a partitioned node's
    /// store): as `partition` for each, every row written to its
    /// function's partition, and job ids from the set's reserved block.
    pub partitions: Option<partitions::PartitionSet>,
}

impl Default for PgOptions {
    fn default() -> Self {
        PgOptions {
            connect_timeout: Duration::from_secs(10),
            tcp_user_timeout: Duration::from_secs(30),
            lock_wait: Duration::from_secs(5),
            fence: None,
            partition: None,
            partitions: None,
        }
    }
}

/// A store in a PostgreSQL database.
pub struct PgStore {
    config: Config,
    /// The `sslmode` and the connector for it.
    tls: connect::Tls,
    /// `postgres://user@host:port/db`, for messages (no password).
    server: String,
    /// The connection and its prepared flush statements; None after the
    /// connection was lost, until the next flush or replay re-opens it.
    conn: Option<(Client, Flushes)>,
    /// The stored state as of the last flush; None until read (at the
    /// first replay or flush, and again after a lost connection).
    sets: Option<Sets>,
    /// Operations since the last flush.
    batch: Batch,
    /// Schema versions this open applied.
    applied: Vec<u32>,
    /// How long a reconnect waits for the node lock.
    lock_wait: Duration,
    /// What the flushes are fenced on.
    fence: Fence,
    /// The fewest jobs stored since the flush statement was last prepared
    /// ([`REPLAN_FROM`]).
    planned_for: usize,
}

/// The flush statement without functions' settings, with them
/// ([`statement::flush_sql`]), and for a batch of submissions only
/// ([`statement::adds_sql`]).
struct Flushes {
    plain: Statement,
    functions: Statement,
    adds: Statement,
}

/// The flush's generic plan is made on the table as it is then: made on an
/// empty `gearshift_jobs`, its deletes hash the whole table at every flush
/// until something re-plans it. So the statement is prepared again each time
/// the stored jobs have doubled since the fewest since the last plan, from
/// this many on.
const REPLAN_FROM: usize = 1024;

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("server", &self.server)
            .field("connected", &self.conn.is_some())
            .field("pending", &self.batch.len())
            .finish()
    }
}

/// The advisory lock a node holds on its database for as long as its
/// session lives (`gearshif` in ASCII).
const NODE_LOCK: i64 = 0x6765_6172_7368_6966;

/// Takes the database for this store, or says another Gearshift holds it:
/// two single-node stores on one database would overwrite each other.
/// The lock is the session's, so a crashed node's goes with its connection.
/// Waits up to `wait` for a holder to let go.
fn claim(client: &mut postgres::Client, server: &str, wait: Duration) -> Result<(), StoreError> {
    let until = std::time::Instant::now() + wait;
    loop {
        let row = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&NODE_LOCK])
            .map_err(|e| connect::unreachable_or_refused(&e, server, "the node lock"))?;
        let got: bool = row
            .try_get(0)
            .map_err(|e| connect::unreachable_or_refused(&e, server, "the node lock"))?;
        if got {
            return Ok(());
        }
        if std::time::Instant::now() >= until {
            return Err(StoreError::Locked(server.to_owned()));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

impl PgStore {
    /// Connects to `url` (`postgres://user:pass@host:port/db`, or libpq's
    /// `key=value` form; `PGHOST`, `PGPORT`, `PGUSER`, `PGPASSWORD` and
    /// `PGDATABASE` fill what it leaves out) with TLS as libpq's `sslmode`
    /// and `sslrootcert` (or `PGSSLMODE`, `PGSSLROOTCERT`) ask, takes the
    /// database for this node (`StoreError::Locked` if another Gearshift
    /// holds it), and brings the schema up to date.
    pub fn open(url: &str, opts: PgOptions) -> Result<PgStore, StoreError> {
        let number = |partition: u32| {
            i32::try_from(partition).map_err(|_| {
                StoreError::InvalidRequest(format!("partition {partition} is out of range"))
            })
        };
        let fence = match (opts.fence, opts.partition, &opts.partitions) {
            (None, None, None) => Fence::None,
            (Some(epoch), None, None) => Fence::Leader(epoch),
            (None, Some((partition, epoch)), None) => Fence::Partition {
                partition: number(partition)?,
                epoch,
            },
            (None, None, Some(set)) => Fence::Set(std::sync::Arc::new(flush::SetFence {
                parts: set
                    .owned
                    .iter()
                    .map(|&(p, _)| number(p))
                    .collect::<Result<_, _>>()?,
                epochs: set.owned.iter().map(|&(_, e)| e).collect(),
                placement: set.placement.clone(),
                ids: set.ids.clone(),
            })),
            _ => {
                return Err(StoreError::InvalidRequest(
                    "a store is fenced by the leader's lease, a partition or a set of them, \
                     one only"
                        .into(),
                ))
            }
        };
        let (config, tls, server) = base_config(url, &opts)?;
        let mut client = connect::connect(&config, &tls, &server)?;
        if fence == Fence::None {
            claim(&mut client, &server, opts.lock_wait)?;
        }
        let applied = schema::migrate(&mut client, &server)?;
        let statement = prepare(&mut client, &server, fence.kind())?;
        debug!(%server, fence = ?fence.kind(), sslmode = %tls.mode(), "opened the PostgreSQL store");
        Ok(PgStore {
            config,
            tls,
            server,
            conn: Some((client, statement)),
            sets: None,
            batch: Batch::default(),
            applied,
            lock_wait: opts.lock_wait,
            fence,
            planned_for: 0,
        })
    }

    /// The schema versions this open applied (empty when the database was
    /// already current).
    pub fn applied_migrations(&self) -> &[u32] {
        &self.applied
    }

    /// `postgres://user@host:port/db`, without the password.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The connection, re-opened if it was lost (the state is then read
    /// anew: a batch that failed with it may have committed).
    fn conn(&mut self) -> Result<&mut (Client, Flushes), StoreError> {
        if self.conn.as_ref().is_some_and(|(c, _)| c.is_closed()) {
            self.conn = None;
        }
        if self.conn.is_none() {
            let mut client = connect::connect(&self.config, &self.tls, &self.server)?;
            if self.fence == Fence::None {
                claim(&mut client, &self.server, self.lock_wait)?;
            }
            let statement = prepare(&mut client, &self.server, self.fence.kind())?;
            self.sets = None;
            self.planned_for = 0;
            debug!(server = %self.server, "reconnected to PostgreSQL");
            self.conn = Some((client, statement));
        }
        let server = self.server.clone();
        self.conn.as_mut().ok_or_else(|| StoreError::Unreachable {
            server,
            why: "no connection".into(),
        })
    }

    /// Notes a failed statement: a lost connection is dropped so the next
    /// call reconnects.
    fn failed(&mut self, e: StoreError) -> StoreError {
        if matches!(e, StoreError::Unreachable { .. }) {
            self.conn = None;
            self.sets = None;
        }
        e
    }

    /// Reads the stored state unless it is already in memory.
    fn load(&mut self) -> Result<(), StoreError> {
        if self.sets.is_some() {
            return Ok(());
        }
        let server = self.server.clone();
        let scope = match &self.fence {
            Fence::Partition { partition, .. } => replay::Scope::Partitions(vec![*partition]),
            Fence::Set(set) => replay::Scope::Partitions(set.parts.clone()),
            _ => replay::Scope::All,
        };
        let first_id = match &self.fence {
            Fence::Set(set) => Some(set.ids.start),
            _ => None,
        };
        let (client, _) = self.conn()?;
        match replay::load(client, &server, &scope) {
            Ok(mut sets) => {
                if let Some(first) = first_id {
                    sets.high = first;
                }
                self.sets = Some(sets);
                Ok(())
            }
            Err(e) => Err(self.failed(e)),
        }
    }
}

impl Drop for PgStore {
    /// The sync client closes its connection by blocking on its own
    /// runtime, which panics inside an async task: the server may drop a
    /// store there (a failed bind), so the close happens on a thread.
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            let closing = std::thread::Builder::new()
                .name("gearshift-pg-close".into())
                .spawn(move || drop(conn));
            if let Err(e) = closing {
                warn!(error = %e, "cannot close the PostgreSQL connection on a thread");
            }
        }
    }
}

/// A URL as messages name it: `postgres://user@host:port/db`, without the
/// password (the URL itself if it does not parse).
pub fn describe_url(url: &str) -> String {
    match connect::config(url) {
        Ok((c, _)) => connect::describe(&c),
        Err(_) => "PostgreSQL (an unparsable URL)".into(),
    }
}

/// The URL parsed, with the options' defaults where it sets nothing, and
/// its name for messages.
fn base_config(url: &str, opts: &PgOptions) -> Result<(Config, connect::Tls, String), StoreError> {
    let (mut config, tls) = connect::config(url)?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(opts.connect_timeout);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(opts.tcp_user_timeout);
    }
    if config.get_application_name().is_none() {
        config.application_name("gearshift");
    }
    let server = connect::describe(&config);
    let tls = connect::Tls::new(tls, &server)?;
    Ok((config, tls, server))
}

/// Prepares the flush statements (once per connection: a flush is then
/// one round trip).
fn prepare(client: &mut Client, server: &str, fence: FenceKind) -> Result<Flushes, StoreError> {
    // The statements' shapes never change, only their arrays: planning
    // them once saves the planner's time at every flush.
    client
        .batch_execute("SET plan_cache_mode = force_generic_plan")
        .map_err(|e| connect::unreachable_or_refused(&e, server, "setting the plan cache"))?;
    let mut one = |functions| {
        client
            .prepare(&statement::flush_sql(fence, functions))
            .map_err(|e| connect::unreachable_or_refused(&e, server, "preparing the flush"))
    };
    let (plain, functions) = (one(false)?, one(true)?);
    let adds = client
        .prepare(&statement::adds_sql(fence))
        .map_err(|e| connect::unreachable_or_refused(&e, server, "preparing the flush"))?;
    Ok(Flushes {
        plain,
        functions,
        adds,
    })
}

impl Store for PgStore {
    fn replay(&mut self) -> Result<Replayed, StoreError> {
        // Always read back: what the database holds is what counts.
        self.sets = None;
        self.load()?;
        Ok(self.sets.as_ref().map(Sets::replayed).unwrap_or_default())
    }

    fn append(&mut self, ops: &[Op]) {
        self.batch.append(ops);
    }

    fn discard(&mut self) {
        self.batch.discard();
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        self.flush_with(None)
    }

    fn repartition(&mut self) -> Option<&mut dyn Repartition> {
        match self.fence {
            Fence::Set(_) => Some(self),
            _ => None,
        }
    }
}

impl PgStore {
    /// The flush; with `also`, the batch and what `also` writes are one
    /// transaction (run even when nothing is buffered).
    fn flush_with(&mut self, also: Option<AlsoWrite<'_>>) -> Result<(), StoreError> {
        let Taken { ops, started } = self.batch.take()?;
        if ops.is_empty() && started.is_empty() && also.is_none() {
            return Ok(());
        }
        // Nothing buffered counts as written unless the statement commits.
        self.load()?;
        let Some(sets) = self.sets.as_mut() else {
            return Err(StoreError::Corrupt("the state was not read".into()));
        };
        let ends = flush::run_ends(&ops);
        let running_before = sets.running.clone();
        let (mut params, undo) = flush::apply(sets, ops);
        flush::mark_runs(sets, &ends, &started);
        (params.run_gone, params.run_new) = flush::run_changes(&running_before, &sets.running);
        let rows = params.rows();
        let stored = sets.live.len() + sets.dead.len();
        let replan = stored >= REPLAN_FROM && stored >= 2 * self.planned_for;
        let server = self.server.clone();
        // A connection lost since the load (reconnect failing) is undone
        // like a failed statement.
        let fence = self.fence.clone();
        if let Fence::Set(set) = &fence {
            if let Err(function) = params.place(set) {
                undo.restore(sets);
                sets.running = running_before;
                return Err(StoreError::InvalidRequest(format!(
                    "function {:?} is not in this node's partitions",
                    String::from_utf8_lossy(&function)
                )));
            }
        }
        let written = self.conn().and_then(|(client, flushes)| {
            let err =
                |e: postgres::Error| connect::unreachable_or_refused(&e, &server, "the flush");
            if replan {
                *flushes = prepare(client, &server, fence.kind())?;
                debug!(
                    stored,
                    "prepared the flush statements again for a grown queue"
                );
            }
            let (statement, values) = match (params.has_functions(), params.only_adds()) {
                (true, _) => (&flushes.functions, params.as_sql(&fence)),
                (false, true) => (&flushes.adds, params.as_sql_adds(&fence)),
                (false, false) => (&flushes.plain, params.as_sql(&fence)),
            };
            let updated = match also {
                None => client.execute(statement, &values).map_err(err)?,
                Some(also) => {
                    let mut tx = client.transaction().map_err(err)?;
                    let updated = tx.execute(statement, &values).map_err(err)?;
                    // Fenced out: dropping `tx` rolls it back. Otherwise the
                    // statement share-locked the lease row, so no takeover
                    // commits before this transaction does.
                    if updated > 0 {
                        also(&mut tx).map_err(err)?;
                        tx.commit().map_err(err)?;
                    }
                    updated
                }
            };
            // The statement returns its one row unless the fence stopped
            // every part of it.
            if updated == 0 {
                return Err(StoreError::Fenced(match &fence {
                    Fence::Partition { partition, .. } => {
                        format!("{server} (partition {partition})")
                    }
                    Fence::Set(set) => format!("{server} (partitions {:?})", set.parts),
                    _ => server.clone(),
                }));
            }
            Ok(updated)
        });
        match written {
            Ok(_) => {
                self.planned_for = if replan {
                    stored
                } else {
                    self.planned_for.min(stored)
                };
                debug!(rows, "flushed a batch to PostgreSQL");
                Ok(())
            }
            Err(e) => {
                warn!(error = %e, rows, "a flush to PostgreSQL failed; its batch is not stored");
                if let Some(sets) = self.sets.as_mut() {
                    undo.restore(sets);
                    sets.running = running_before;
                }
                Err(self.failed(e))
            }
        }
    }
}
