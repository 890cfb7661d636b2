//! How much of the log is known to be on disk, for `interval` durability.
//! Between two syncs the kernel may write the log's pages in any order, so
//! a power loss can tear unsynced frames anywhere after the last sync, not
//! only at the end. After each sync the store records the log's length in a
//! small marker file (`queue.gslog.synced`); at open, a damaged frame at or
//! past that length is such a tear and the log is cut there, while one
//! before it is corruption and stops the server as always (whatever the
//! durability the server opens it with: the marker tells how the last run
//! left the file). `fsync` durability keeps no marker: each flush is on
//! disk before it is answered.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;

use bytes::Bytes;

use super::frame;
use super::replay::{self, Replay};
use super::{Durability, SYNCED_FILE_NAME};
use crate::StoreError;

/// What the marker holds: magic, the log's inode, its length on disk, and
/// a CRC-32 of those 24 bytes.
const MAGIC: &[u8; 8] = b"GSSYNCED";
const RECORD: usize = 28;

/// The open marker of a data directory.
#[derive(Debug)]
pub(super) struct Synced {
    file: File,
    /// The inode and length last recorded.
    last: Option<(u64, u64)>,
}

impl Synced {
    /// Opens the marker of `dir`, creating it (and making its name durable).
    fn open(dir: &Path) -> Result<Synced, StoreError> {
        let path = dir.join(SYNCED_FILE_NAME);
        let existed = path.exists();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        if !existed {
            File::open(dir)?.sync_all()?;
        }
        Ok(Synced { file, last: None })
    }

    /// Records that `log` is on disk up to `len` (the caller synced it).
    pub(super) fn record(&mut self, log: &File, len: u64) -> std::io::Result<()> {
        let ino = log.metadata()?.ino();
        if self.last == Some((ino, len)) {
            return Ok(());
        }
        let mut buf = [0u8; RECORD];
        buf[..8].copy_from_slice(MAGIC);
        buf[8..16].copy_from_slice(&ino.to_le_bytes());
        buf[16..24].copy_from_slice(&len.to_le_bytes());
        let crc = crc32fast::hash(&buf[..24]);
        buf[24..].copy_from_slice(&crc.to_le_bytes());
        self.file.write_all_at(&buf, 0)?;
        self.file.sync_data()?;
        self.last = Some((ino, len));
        Ok(())
    }
}

/// At open, once the log is replayed and cut to `len`: with `interval`
/// durability, the marker, recording `log` (synced first) up to `len`;
/// with `fsync`, none, and a marker left by an `interval` run goes (it
/// would excuse damage in frames that `fsync` put on disk).
pub(super) fn keep(
    dir: &Path,
    log: &File,
    len: u64,
    durability: Durability,
) -> Result<Option<Synced>, StoreError> {
    match durability {
        Durability::Interval(_) => {
            let mut marker = Synced::open(dir)?;
            log.sync_data()?;
            marker.record(log, len)?;
            Ok(Some(marker))
        }
        Durability::Fsync => {
            remove(dir)?;
            Ok(None)
        }
    }
}

/// The length of `log` that the marker in `dir` says is on disk, if the
/// marker is whole and about this very file (a compaction's rename
/// replaces the log by another inode).
pub(super) fn on_disk(dir: &Path, log: &File) -> Option<u64> {
    let raw = std::fs::read(dir.join(SYNCED_FILE_NAME)).ok()?;
    let buf: &[u8; RECORD] = raw.get(..RECORD)?.try_into().ok()?;
    let crc = u32::from_le_bytes(buf[24..].try_into().ok()?);
    if &buf[..8] != MAGIC || crc32fast::hash(&buf[..24]) != crc {
        return None;
    }
    let ino = u64::from_le_bytes(buf[8..16].try_into().ok()?);
    let len = u64::from_le_bytes(buf[16..24].try_into().ok()?);
    (log.metadata().ok()?.ino() == ino).then_some(len)
}

/// Removes the marker of `dir` (durably).
fn remove(dir: &Path) -> Result<(), StoreError> {
    match std::fs::remove_file(dir.join(SYNCED_FILE_NAME)) {
        Ok(()) => Ok(File::open(dir)?.sync_all()?),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Replays `raw`. Where it is corrupt and the first frame that fails its
/// checksum starts at or past `on_disk`, that frame and all after it were
/// never synced: the replay stops there. Returns the bytes replayed.
pub(super) fn replay(
    raw: Bytes,
    on_disk: Option<u64>,
    path: &Path,
) -> Result<(Replay, Bytes), StoreError> {
    match replay::read(&raw) {
        Err(StoreError::Corrupt(why)) => {
            let at = frame::first_damaged(&raw);
            match on_disk {
                Some(synced) if at as u64 >= synced => {
                    tracing::warn!(
                        file = %path.display(),
                        at,
                        synced,
                        cut = raw.len() - at,
                        "a damaged frame after the last sync: a power loss tore writes not yet \
                         on disk (interval durability); cutting the file there, with what follows"
                    );
                    let raw = raw.slice(..at);
                    Ok((replay::read(&raw)?, raw))
                }
                _ => Err(StoreError::Corrupt(why)),
            }
        }
        read => Ok((read?, raw)),
    }
}
