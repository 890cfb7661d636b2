//! The schema and its versioned migrations. `gearshift_schema` holds one
//! row per applied version; [`migrate`] applies the missing ones in one
//! transaction at open, under a lock, and refuses a database whose
//! schema is newer than this build knows.
//!
//! # Changing the schema
//! Append a migration to [`MIGRATIONS`]; never edit a released one. Ids
//! and times are `BIGINT` (a `u64` time is stored bit for bit, so even
//! `u64::MAX - 1` round-trips); names and payloads are `BYTEA` (binary
//! safe whatever the database's encoding).

use postgres::Client;
use tracing::info;

use super::connect::unreachable_or_refused;
use crate::StoreError;

/// The migrations, in order: version `i + 1` is `MIGRATIONS[i]`.
pub(super) const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6, V7];

/// The highest schema version this build knows.
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Version 1: jobs (live and dead; a dead job has `died_ms` set), schedules,
/// kept results and the handle reservation (one row). `node` on jobs is
/// reserved for a cluster of nodes sharing the database; unused now.
const V1: &str = "
CREATE TABLE gearshift_jobs (
    id          BIGINT PRIMARY KEY,
    handle      BYTEA NOT NULL,
    function    BYTEA NOT NULL,
    unique_id   BYTEA NOT NULL,
    priority    SMALLINT NOT NULL,
    data        BYTEA NOT NULL,
    reducer     BYTEA,
    due_ms      BIGINT,
    attempts    BIGINT NOT NULL,
    created_ms  BIGINT NOT NULL,
    died_ms     BIGINT,
    error       BYTEA,
    node        TEXT,
    CHECK ((died_ms IS NULL) = (error IS NULL))
);
CREATE TABLE gearshift_schedules (
    id          BIGINT PRIMARY KEY,
    handle      BYTEA NOT NULL,
    when_fields BYTEA NOT NULL,
    monday_zero BOOLEAN NOT NULL,
    function    BYTEA NOT NULL,
    unique_id   BYTEA NOT NULL,
    data        BYTEA NOT NULL,
    priority    SMALLINT NOT NULL,
    next_ms     BIGINT,
    from_config BOOLEAN NOT NULL
);
CREATE TABLE gearshift_kept (
    id          BIGINT PRIMARY KEY,
    handle      BYTEA NOT NULL,
    function    BYTEA NOT NULL,
    unique_id   BYTEA NOT NULL,
    priority    SMALLINT NOT NULL,
    background  BOOLEAN NOT NULL,
    outcome     SMALLINT NOT NULL,
    attempts    BIGINT NOT NULL,
    created_ms  BIGINT NOT NULL,
    started_ms  BIGINT,
    finished_ms BIGINT NOT NULL,
    expires_ms  BIGINT NOT NULL,
    worker      BYTEA NOT NULL,
    error       BYTEA,
    result      BYTEA NOT NULL,
    history     BYTEA NOT NULL
);
-- The handle high-water mark minus one (so MAX_ID + 1 fits a BIGINT).
CREATE TABLE gearshift_reservation (
    one           BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    last_reserved BIGINT NOT NULL
);
INSERT INTO gearshift_reservation (one, last_reserved) VALUES (TRUE, -1);
";

/// Version 2: the cluster. `gearshift_nodes` has a row per node with its
/// addresses and last heartbeat; `gearshift_leader` (one row) is the lease
/// of the node that runs the jobs, with the epoch that fences a deposed
/// leader's writes (a key, so a flush's `FOR KEY SHARE` of the row makes a
/// takeover wait while a renewal does not); `gearshift_cluster` holds the secret relays present.
const V2: &str = "
CREATE TABLE gearshift_nodes (
    name          TEXT PRIMARY KEY,
    gearman_addr  TEXT NOT NULL,
    http_addr     TEXT,
    version       TEXT NOT NULL,
    started_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    heartbeat_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE gearshift_leader (
    one           BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    epoch         BIGINT NOT NULL UNIQUE,
    node          TEXT,
    gearman_addr  TEXT,
    http_addr     TEXT,
    expires_at    TIMESTAMPTZ NOT NULL
);
INSERT INTO gearshift_leader (one, epoch, expires_at) VALUES (TRUE, 0, '-infinity');
CREATE TABLE gearshift_cluster (
    one           BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    secret        TEXT NOT NULL
);
INSERT INTO gearshift_cluster (one, secret)
    VALUES (TRUE, encode(sha256((gen_random_uuid()::text || gen_random_uuid()::text)::bytea), 'hex'));
";

/// Version 3: the jobs a leader was running, so the node that takes over
/// counts their cut-off run (`worker_lost`) instead of running them as if
/// never tried.
const V3: &str = "
CREATE TABLE gearshift_running (
    id            BIGINT PRIMARY KEY
);
";

/// Version 4: `gearshift import`'s record of the gearmand queues imported
/// into this database (as the log store's `imported-gearmand.txt`): one
/// row per queue, by its address (`source`), with what identified its
/// content at the last import (`fingerprint`), so the same queue is not
/// queued twice by accident.
const V4: &str = "
CREATE TABLE gearshift_imports (
    source        TEXT PRIMARY KEY,
    fingerprint   TEXT NOT NULL,
    imported_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
    jobs          BIGINT NOT NULL
);
";

/// Version 5: partitions, each with its own owner, lease and epoch
/// (`partitions.rs`). `gearshift_partitions` has a row per partition (the
/// epoch is a key, as in `gearshift_leader`, so a flush's `FOR KEY SHARE`
/// makes a takeover wait and a renewal not); `gearshift_settings` holds
/// the partition count, written once by the first node; `gearshift_pins`
/// the functions placed by hand. Rows carry their partition; NULL means
/// not placed yet (written before this version, or by a single leader).
const V5: &str = "
CREATE TABLE gearshift_partitions (
    partition     INT PRIMARY KEY,
    epoch         BIGINT NOT NULL DEFAULT 0,
    node          TEXT,
    expires_at    TIMESTAMPTZ,
    UNIQUE (partition, epoch)
);
CREATE TABLE gearshift_settings (
    one           BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (one),
    partitions    INT NOT NULL CHECK (partitions > 0)
);
CREATE TABLE gearshift_pins (
    function      BYTEA PRIMARY KEY,
    partition     INT NOT NULL CHECK (partition >= 0)
);
ALTER TABLE gearshift_jobs ADD COLUMN partition INT;
ALTER TABLE gearshift_schedules ADD COLUMN partition INT;
ALTER TABLE gearshift_kept ADD COLUMN partition INT;
CREATE INDEX gearshift_jobs_partition ON gearshift_jobs (partition, id);
CREATE INDEX gearshift_schedules_partition ON gearshift_schedules (partition, id);
CREATE INDEX gearshift_kept_partition ON gearshift_kept (partition, id);
";

/// Version 6: functions' admin settings (paused, queue limits per
/// priority; 0 or less is no limit), a row per function not at its
/// defaults. `partition` as on the other tables: NULL until placed.
const V6: &str = "
CREATE TABLE gearshift_functions (
    function      BYTEA PRIMARY KEY,
    paused        BOOLEAN NOT NULL,
    max_high      BIGINT NOT NULL,
    max_normal    BIGINT NOT NULL,
    max_low       BIGINT NOT NULL,
    partition     INT
);
CREATE INDEX gearshift_functions_partition ON gearshift_functions (partition, function);
";

/// Version 7: pins asked for and not yet in force (`pins.rs`): the owner
/// of the partition a function lives in moves it once its running jobs
/// are done. `partition` NULL asks it back where its name places it.
const V7: &str = "
CREATE TABLE gearshift_pin_moves (
    function      BYTEA PRIMARY KEY,
    partition     INT CHECK (partition >= 0),
    asked_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
";

/// Brings the schema up to [`SCHEMA_VERSION`]; returns the versions this
/// call applied (none when it was already current).
pub(super) fn migrate(client: &mut Client, server: &str) -> Result<Vec<u32>, StoreError> {
    let err = |what: &str| {
        let what = what.to_string();
        move |e: postgres::Error| unreachable_or_refused(&e, server, &what)
    };
    let mut tx = client.transaction().map_err(err("the schema check"))?;
    // The locks make a second process opening the same database wait
    // instead of applying the same migration twice (the advisory one also
    // covers creating the schema table: two first opens at once would
    // otherwise race on it).
    tx.batch_execute(
        "SET LOCAL client_min_messages = warning;
         SELECT pg_advisory_xact_lock(7433851261848593510);
         CREATE TABLE IF NOT EXISTS gearshift_schema (
             version    INTEGER PRIMARY KEY,
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
         );
         LOCK TABLE gearshift_schema IN EXCLUSIVE MODE;",
    )
    .map_err(err("the schema table"))?;
    let current: i32 = tx
        .query_one(
            "SELECT COALESCE(max(version), 0) FROM gearshift_schema",
            &[],
        )
        .and_then(|r| r.try_get(0))
        .map_err(err("the schema check"))?;
    let current = u32::try_from(current).map_err(|_| StoreError::Database {
        server: server.into(),
        what: "the schema check".into(),
        why: format!("gearshift_schema holds version {current}"),
    })?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::Database {
            server: server.into(),
            what: "the schema".into(),
            why: format!(
                "its version {current} is newer than this Gearshift understands \
                 ({SCHEMA_VERSION}); upgrade Gearshift or use another database"
            ),
        });
    }
    let mut applied = Vec::new();
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        let version = i as u32 + 1;
        let what = format!("migration {version}");
        tx.batch_execute(sql).map_err(err(&what))?;
        tx.execute(
            "INSERT INTO gearshift_schema (version) VALUES ($1)",
            &[&(version as i32)],
        )
        .map_err(err(&what))?;
        applied.push(version);
    }
    tx.commit().map_err(err("the migrations' commit"))?;
    if !applied.is_empty() {
        info!(%server, ?applied, "applied schema migrations");
    }
    Ok(applied)
}
