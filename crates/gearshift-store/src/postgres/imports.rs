//! `gearshift_imports`: the gearmand queues `gearshift import` loaded into
//! this database, one row per queue (its address), so that importing the
//! same queue twice, which would queue every job twice, is noticed. The
//! row is written in the transaction of the flush that stores the jobs
//! ([`PgStore::flush_recording_import`]): both are stored or neither.

use postgres::GenericClient;

use super::connect::unreachable_or_refused;
use super::PgStore;
use crate::StoreError;

/// An earlier import, as `gearshift_imports` holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportRecord {
    /// Where the queue was: a file path, or a database address and table.
    pub source: String,
    /// What identified the queue's content then (the importer's format).
    pub fingerprint: String,
    /// When, in Unix milliseconds (the database's clock).
    pub imported_at_ms: i64,
    /// How many jobs it brought.
    pub jobs: i64,
}

/// The import of `source`, if one was recorded.
pub(super) fn read(
    client: &mut impl GenericClient,
    source: &str,
) -> Result<Option<ImportRecord>, postgres::Error> {
    let row = client.query_opt(
        "SELECT source, fingerprint,
           (extract(epoch FROM imported_at) * 1000)::bigint, jobs
         FROM gearshift_imports WHERE source = $1",
        &[&source],
    )?;
    row.map(|r| {
        Ok(ImportRecord {
            source: r.try_get(0)?,
            fingerprint: r.try_get(1)?,
            imported_at_ms: r.try_get(2)?,
            jobs: r.try_get(3)?,
        })
    })
    .transpose()
}

/// Records an import of `source` now; a later import of the same source
/// (with `--force`, or after it changed) replaces the row.
pub(super) fn write(
    client: &mut impl GenericClient,
    source: &str,
    fingerprint: &str,
    jobs: i64,
) -> Result<(), postgres::Error> {
    client.execute(
        "INSERT INTO gearshift_imports (source, fingerprint, jobs) VALUES ($1, $2, $3)
         ON CONFLICT (source) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
           imported_at = now(), jobs = EXCLUDED.jobs",
        &[&source, &fingerprint, &jobs],
    )?;
    Ok(())
}

impl PgStore {
    /// The recorded import of `source` (see [`ImportRecord`]), if any.
    pub fn imported(&mut self, source: &str) -> Result<Option<ImportRecord>, StoreError> {
        let server = self.server.clone();
        let (client, _) = self.conn()?;
        match read(client, source) {
            Ok(r) => Ok(r),
            Err(e) => {
                let e = unreachable_or_refused(&e, &server, "reading gearshift_imports");
                Err(self.failed(e))
            }
        }
    }

    /// [`crate::Store::flush`], and in the same transaction records that
    /// `jobs` jobs were imported from `source` (whose content `fingerprint`
    /// identifies). Fenced, the row too is written only while the lease
    /// is at the store's epoch. Written even when nothing is buffered (an
    /// empty queue was imported).
    pub fn flush_recording_import(
        &mut self,
        source: &str,
        fingerprint: &str,
        jobs: u64,
    ) -> Result<(), StoreError> {
        let jobs = i64::try_from(jobs).unwrap_or(i64::MAX);
        self.flush_with(Some(&|tx: &mut postgres::Transaction<'_>| {
            write(tx, source, fingerprint, jobs)
        }))
    }
}
