//! Checking a log offline, and saving what a damaged one still holds (the
//! server refuses to open a log with a damaged frame before its end).
//!
//! A repair keeps every frame that checks out, byte for byte and in order,
//! and skips each damaged stretch to the next such frame. A frame header
//! that checks out is trusted for its extent (so is one whose length leads
//! to a readable frame), so a frame inside a damaged frame's job data is
//! not taken for a real one. What a skipped stretch held is
//! lost: jobs submitted in it are gone, and jobs that ended in it run
//! again. The handle counter is moved past anything the stretch may have
//! reserved, and the original file stays beside the new one.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use super::frame::{self, FRAME_HEADER, HEADER_LEN};
use super::{lock_dir, replay, sync_dir, synced, FILE_NAME};
use crate::record::{Op, MAX_ID};
use crate::StoreError;

/// The smallest frame that can hold a reservation (header and one
/// `Reserve` op): how many reservations a damaged stretch may have hidden.
const SMALLEST_RESERVING_FRAME: u64 = (FRAME_HEADER + 9) as u64;

/// What a log holds, and what of it cannot be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// The file's length on disk.
    pub file_len: u64,
    /// Frames that check out.
    pub frames: u64,
    /// Whether the server refuses the file as it is.
    pub refused: bool,
    /// Stretches between readable frames that do not check out.
    pub damaged: Vec<Range<u64>>,
    /// Bytes after the last readable frame that are not zeros written
    /// ahead: a torn last write (the server cuts it off), or, in a damaged
    /// file, unreadable data with nothing readable after it.
    pub tail: u64,
    /// Where the server cuts the file, with every frame after it, because
    /// the first damaged frame lies after the last sync an `interval` run
    /// recorded: writes a power loss tore before they were on disk.
    pub cut_after_sync: Option<u64>,
    /// What the server would hold after opening the file (after a repair,
    /// for a damaged one): live jobs, dead jobs, schedules, kept records.
    pub jobs: usize,
    /// Dead jobs.
    pub dead: usize,
    /// Schedules.
    pub schedules: usize,
    /// Kept records.
    pub kept: usize,
}

impl Report {
    /// Bytes the damaged stretches cover.
    pub fn damaged_bytes(&self) -> u64 {
        self.damaged.iter().map(|r| r.end - r.start).sum()
    }
}

/// A repair done.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repaired {
    /// What the damaged file held, and what the repaired one holds.
    pub report: Report,
    /// Where the damaged file was kept.
    pub kept_as: PathBuf,
    /// The handle counter's new start.
    pub reserved: u64,
}

/// Reads the log in `dir` (no server may be running on it) and reports
/// what it holds and whether the server would refuse it.
pub fn check(dir: &Path) -> Result<Report, StoreError> {
    let _lock = lock_log(dir)?;
    let (raw, on_disk) = read_log(dir)?;
    Ok(examine(&raw, on_disk, dir)?.0)
}

/// Repairs the log in `dir` if the server would refuse it: the readable
/// frames go to a new file, which replaces the log once it reads back;
/// the damaged file is kept as `queue.gslog.damaged-<unix seconds>`. The
/// handle counter moves `reserve_step` (the server's reservation) past
/// what each skipped stretch may have reserved. `None`: nothing to repair.
pub fn repair(dir: &Path, reserve_step: u64) -> Result<Option<Repaired>, StoreError> {
    let _lock = lock_log(dir)?;
    let (raw, on_disk) = read_log(dir)?;
    let (report, saved) = examine(&raw, on_disk, dir)?;
    drop(raw);
    let Some((mut saved, high)) = saved else {
        return Ok(None);
    };
    // Each skipped stretch may have held reservations, each at most one
    // step past the one before it.
    let hidden = (report.damaged_bytes() + report.tail) / SMALLEST_RESERVING_FRAME + 1;
    let reserved = reserve_step
        .saturating_mul(hidden)
        .saturating_add(high)
        .min(MAX_ID + 1);
    let mut payload = Vec::new();
    Op::Reserve(reserved).encode(&mut payload);
    frame::put_frame(&mut saved, &payload);
    // The new file must open before it replaces anything.
    let saved = Bytes::from(saved);
    let check = replay::read(&saved)?;
    if check.valid_len != saved.len() || check.high < reserved {
        return Err(StoreError::Corrupt(
            "the repaired log does not read back whole".into(),
        ));
    }
    let path = dir.join(FILE_NAME);
    let tmp = dir.join(format!("{FILE_NAME}.repair"));
    let written = write_like(&path, &tmp, &saved);
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    // A second name for the damaged file first, then the new one over the
    // log: a crash in between leaves one of the two whole under the log's name.
    let kept = keep_name(dir).and_then(|kept_as| {
        std::fs::hard_link(&path, &kept_as)?;
        sync_dir(dir)?;
        Ok(kept_as)
    });
    let kept_as = kept.inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })?;
    std::fs::rename(&tmp, &path)?;
    sync_dir(dir)?;
    Ok(Some(Repaired {
        report,
        kept_as,
        reserved,
    }))
}

/// Writes `bytes` to `tmp` durably, with the owner and mode of `like`: a
/// repair run as root must leave a file the server's own user can open.
fn write_like(like: &Path, tmp: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    use std::os::unix::fs::MetadataExt;
    let was = std::fs::metadata(like)?;
    let mut out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)?;
    out.write_all(bytes)?;
    out.set_permissions(was.permissions())?;
    let now = out.metadata()?;
    if (now.uid(), now.gid()) != (was.uid(), was.gid()) {
        std::os::unix::fs::fchown(&out, Some(was.uid()), Some(was.gid())).map_err(|e| {
            StoreError::Io(std::io::Error::new(
                e.kind(),
                format!(
                    "cannot give the repaired file the damaged one's owner ({}:{}): {e}; run the repair as that user or as root",
                    was.uid(),
                    was.gid()
                ),
            ))
        })?;
    }
    out.sync_all()?;
    Ok(())
}

/// The data directory's lock, once its log is known to be there (a check
/// of a directory without one leaves no lock file behind).
fn lock_log(dir: &Path) -> Result<std::fs::File, StoreError> {
    let path = dir.join(FILE_NAME);
    if !path.is_file() {
        return Err(StoreError::Io(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "no queue file {} (no store in this directory)",
                path.display()
            ),
        )));
    }
    lock_dir(dir)
}

/// The log's bytes, and how much of it the last `interval` run recorded
/// as on disk.
fn read_log(dir: &Path) -> Result<(Bytes, Option<u64>), StoreError> {
    let mut raw = Vec::new();
    let mut file = std::fs::File::open(dir.join(FILE_NAME))?;
    file.read_to_end(&mut raw)?;
    Ok((Bytes::from(raw), synced::on_disk(dir, &file)))
}

/// A free `queue.gslog.damaged-<unix seconds>[.n]` in `dir`.
fn keep_name(dir: &Path) -> Result<PathBuf, StoreError> {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let base = format!("{FILE_NAME}.damaged-{secs}");
    for n in 0..1000 {
        let name = match n {
            0 => base.clone(),
            n => format!("{base}.{n}"),
        };
        let path = dir.join(name);
        if !path.exists() {
            return Ok(path);
        }
    }
    Err(StoreError::Io(std::io::Error::other(
        "no free name to keep the damaged queue file under",
    )))
}

/// The readable frames behind the file header (what a repair writes,
/// before its reservation), and the handle counter's high-water mark in them.
type Saved = (Vec<u8>, u64);

/// The report on `raw`, and what a repair saves of a file the server refuses.
fn examine(
    raw: &Bytes,
    on_disk: Option<u64>,
    dir: &Path,
) -> Result<(Report, Option<Saved>), StoreError> {
    let version = frame::check_header(raw)?;
    let walk = walk(raw, version);
    let mut cut_after_sync = None;
    let (saved, replayed) = match synced::replay(raw.clone(), on_disk, &dir.join(FILE_NAME)) {
        Ok((r, read)) => {
            cut_after_sync = (read.len() < raw.len()).then_some(read.len() as u64);
            (None, r)
        }
        Err(StoreError::Corrupt(_)) => {
            let mut saved = raw[..HEADER_LEN].to_vec();
            for f in &walk.frames {
                saved.extend_from_slice(&raw[f.clone()]);
            }
            let saved = Bytes::from(saved);
            (Some(saved.clone()), replay::read(&saved)?)
        }
        Err(e) => return Err(e),
    };
    let tail = raw[walk.end..].iter().filter(|&&b| b != 0).count() as u64;
    let report = Report {
        file_len: raw.len() as u64,
        frames: walk.frames.len() as u64,
        refused: saved.is_some(),
        damaged: walk
            .damaged
            .into_iter()
            .map(|r| r.start as u64..r.end as u64)
            .collect(),
        tail,
        cut_after_sync,
        jobs: replayed.jobs.len(),
        dead: replayed.dead.len(),
        schedules: replayed.schedules.len(),
        kept: replayed.kept.len(),
    };
    let high = replayed.high;
    // The records hold slices of `saved`: gone, it is taken back uncopied.
    drop(replayed);
    Ok((report, saved.map(|s| (Vec::from(s), high))))
}

/// The readable frames of a log and the stretches between them.
#[derive(Debug, Default)]
struct Walk {
    frames: Vec<Range<usize>>,
    damaged: Vec<Range<usize>>,
    /// Where the last readable frame ends (what follows is a tail).
    end: usize,
}

impl Walk {
    fn damage(&mut self, r: Range<usize>) {
        match self.damaged.last_mut() {
            Some(last) if last.end == r.start => last.end = r.end,
            _ => self.damaged.push(r),
        }
    }
}

/// Walks `file` frame by frame; a frame that does not check out, or whose
/// ops do not decode, is skipped to the next readable frame: after its
/// extent if its header is intact, else the first one after it.
fn walk(file: &Bytes, version: u32) -> Walk {
    let mut w = Walk::default();
    let mut pos = HEADER_LEN;
    let mut readable_end = pos;
    while pos < file.len() {
        if let Some((payload, next)) = frame::frame_at(file, pos) {
            match Op::decode_each_in(version, &payload, |_, _| {}) {
                Ok(()) => {
                    w.frames.push(pos..next);
                    readable_end = next;
                }
                Err(_) => w.damage(pos..next),
            }
            pos = next;
            continue;
        }
        let from = match frame::header_at(file, pos) {
            Some((len, _)) => pos.saturating_add(FRAME_HEADER).saturating_add(len),
            // A damaged header whose length still leads to a readable frame
            // is trusted for it; else the next readable frame anywhere.
            None => Some(claimed_end(file, pos))
                .filter(|&end| frame::frame_at(file, end).is_some())
                .unwrap_or(pos + 1),
        };
        match (from..file.len()).find(|&p| frame::frame_at(file, p).is_some()) {
            Some(p) => {
                w.damage(pos..p);
                pos = p;
            }
            None => break,
        }
    }
    // Damage after the last readable frame is the tail's, not a stretch.
    while w.damaged.last().is_some_and(|d| d.start >= readable_end) {
        w.damaged.pop();
    }
    w.end = readable_end;
    w
}

/// Where the frame at `pos` ends by the length its header gives.
fn claimed_end(file: &Bytes, pos: usize) -> usize {
    let len = file
        .get(pos + 4..pos + 8)
        .map_or(0, |w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as usize);
    pos.saturating_add(FRAME_HEADER).saturating_add(len)
}

#[cfg(test)]
mod tests;
