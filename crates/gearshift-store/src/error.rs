//! Store errors: I/O failures (the server keeps running and answers the
//! affected submissions with ERROR QUEUE_ERROR) and unreadable files (the
//! server refuses to start rather than discard jobs).

use thiserror::Error;

/// Why a store operation failed.
#[derive(Debug, Error)]
pub enum StoreError {
    /// Reading, writing or syncing failed (disk full, I/O error, ...).
    #[error("store I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The file is damaged in a way a crash cannot explain.
    #[error("store file is corrupt: {0}")]
    Corrupt(String),
    /// The file was written by a newer Gearshift.
    #[error("store file has format version {found}, newer than this Gearshift understands ({supported}); upgrade Gearshift or point --data-dir elsewhere")]
    NewerFormat {
        /// Version in the file.
        found: u32,
        /// Highest version this build reads.
        supported: u32,
    },
    /// Another process holds the data directory.
    #[error("{0} is in use by another Gearshift process")]
    Locked(String),
    /// A job id beyond [`crate::MAX_ID`] was added: the batch is refused,
    /// so the store never writes what it would refuse to read back.
    #[error(
        "job id {0} is beyond the largest a store keeps ({max}): the handle counter has run out",
        max = crate::MAX_ID
    )]
    IdOutOfRange(u64),
    /// A record the store could not read back (a kept job's outcome past
    /// 2): the batch is refused, as for [`StoreError::IdOutOfRange`].
    #[error("{0}: refused, as the store could not read it back")]
    InvalidRecord(String),
    /// The PostgreSQL URL does not parse (the message never echoes it: it
    /// may hold a password).
    #[error("cannot parse the PostgreSQL URL: {0}")]
    BadUrl(String),
    /// The database server could not be reached (refused, timed out, the
    /// connection dropped): the server keeps running, as for an I/O error.
    #[error("cannot reach PostgreSQL at {server}: {why}")]
    Unreachable {
        /// `postgres://user@host:port/db`, without the password.
        server: String,
        /// The driver's error with its causes.
        why: String,
    },
    /// TLS to the database cannot be set up as asked (a root certificate
    /// file missing or unreadable).
    #[error("cannot set up TLS to PostgreSQL at {server}: {why}")]
    Tls {
        /// `postgres://user@host:port/db`, without the password.
        server: String,
        /// What is missing or wrong.
        why: String,
    },
    /// The database refused a statement (permissions, a constraint, a
    /// schema it does not expect).
    #[error("PostgreSQL at {server} refused {what}: {why}")]
    Database {
        /// `postgres://user@host:port/db`, without the password.
        server: String,
        /// What was being done ("the flush", "migration 1", ...).
        what: String,
        /// The server's message with its causes.
        why: String,
    },
    /// Another node took the cluster's lease (or, for a partition's
    /// store, the partition): this node's writes are refused (nothing of
    /// the batch was stored) and it must stop leading (or serving it).
    #[error(
        "PostgreSQL at {0}: another node leads the cluster (or owns the partition) now; this \
         node's writes are fenced off"
    )]
    Fenced(String),
    /// A request the store cannot carry out as asked (options that
    /// contradict each other, a partition out of range).
    #[error("invalid store request: {0}")]
    InvalidRequest(String),
    /// A fault injected by a test.
    #[error("injected fault: {0}")]
    Injected(String),
}

impl From<gearshift_persist::Corrupt> for StoreError {
    fn from(c: gearshift_persist::Corrupt) -> Self {
        StoreError::Corrupt(c.0)
    }
}
