//! Compaction: rewriting the log with only its live and dead jobs, its
//! schedules and its kept records, on the store's thread or on one of its
//! own while the store keeps appending.
//!
//! A compaction reads a prefix of the log, `[0, end)`, which the store no
//! longer changes. Behind one reservation of the handle counter come the
//! schedules stored at `end`, each its latest Schedule op as it lies, then,
//! in the order they lie, the jobs stored there (added and not yet done,
//! live or dead), copied as they lie, attempt counts and due times patched,
//! each dead one followed by a Dead op with its mark, and the latest Kept
//! op of each kept record, copied as it lies. Whatever the store appends
//! after `end` meanwhile is copied after them frame for frame, so
//! replaying the new file gives what replaying the old one gives: a Done,
//! Update, Retry, Dead, Schedule, Unschedule, Kept or Forget in the copied
//! tail finds its job, schedule or kept record in the compacted prefix (or
//! finds nothing, as it would have).
//! The store swaps the new file in with a rename, after copying the last
//! few frames itself, so no append is ever lost between the copy and the
//! swap.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, OpenOptions};
use std::hash::BuildHasherDefault;
use std::io::{BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use bytes::Bytes;

use super::frame::{self, FrameReader};
use super::IdHash;
use crate::record::{encode_dead, scan_ops_in, Op, RawOp, ADD_ATTEMPTS_AT, ADD_DUE_AT};
use crate::{DeadMark, StoreError};

/// A background compaction stops copying the store's new frames once fewer
/// than this many bytes are left; the store copies those itself at the swap.
pub(super) const TAIL_LEFT_TO_SWAP: u64 = 1 << 20;

/// Rounds of copying the store's new frames before a background compaction
/// leaves the rest to the swap anyway (a store appending as fast as the
/// copy goes would otherwise keep it chasing).
const CATCH_UP_ROUNDS: u32 = 8;

/// A finished compaction's file, not yet swapped in.
#[derive(Debug)]
pub(super) struct Compacted {
    /// Bytes written to the new file.
    pub len: u64,
    /// The old log's frames are in the new file up to here.
    pub upto: u64,
}

/// Where a background compaction learns how far the store has written and
/// whether to give up.
#[derive(Debug)]
pub(super) struct Progress {
    /// End of the store's last flushed frame.
    pub written: AtomicU64,
    /// The store is closing: stop and remove the new file.
    pub cancel: AtomicBool,
}

/// A compaction running on its own thread.
#[derive(Debug)]
pub(super) struct Background {
    /// The thread; its result is the file to swap in.
    pub thread: JoinHandle<Result<Compacted, StoreError>>,
    /// Shared with the thread.
    pub progress: Arc<Progress>,
    /// The new file.
    pub tmp: PathBuf,
    /// The log's length when the compaction started.
    pub end: u64,
}

impl Background {
    /// Starts compacting `[0, end)` of `log` into `tmp` on a new thread.
    pub fn start(log: PathBuf, tmp: PathBuf, end: u64, high: u64) -> std::io::Result<Background> {
        let progress = Arc::new(Progress {
            written: AtomicU64::new(end),
            cancel: AtomicBool::new(false),
        });
        let shared = progress.clone();
        let out = tmp.clone();
        let thread = std::thread::Builder::new()
            .name("gearshift-compact".into())
            .spawn(move || {
                let result = compact(&log, &out, end, high, Some(&shared));
                if result.is_err() {
                    // Give the space back at once: on a full disk a
                    // half-written copy would hold what little is left.
                    let _ = std::fs::remove_file(&out);
                }
                result
            })?;
        Ok(Background {
            thread,
            progress,
            tmp,
            end,
        })
    }

    /// Stops the thread and removes its file (the store is closing).
    pub fn abandon(self) {
        self.progress.cancel.store(true, Ordering::Release);
        let _ = self.thread.join();
        let _ = std::fs::remove_file(&self.tmp);
    }
}

fn cancelled(progress: Option<&Progress>) -> Result<(), StoreError> {
    match progress {
        Some(p) if p.cancel.load(Ordering::Acquire) => Err(StoreError::Io(std::io::Error::other(
            "compaction cancelled: the store is closing",
        ))),
        _ => Ok(()),
    }
}

/// Reads the log's frames one at a time, from the start up to `end`.
pub(super) fn frames(log: &Path, end: u64) -> Result<FrameReader<impl Read>, StoreError> {
    let file = File::open(log)?.take(end);
    FrameReader::new(BufReader::with_capacity(1 << 20, file), end)
}

/// Writes the compacted log to `tmp`: the handle reservation `high`, the
/// latest Schedule op of every schedule stored at `end` and the latest
/// Function op of every function with settings, then every job
/// stored there with its latest attempt count and due time, a dead one
/// followed by its Dead op, and the latest Kept op of every kept record
/// stored there (jobs and kept records in the order they lie). Two
/// streaming passes over `[0, end)`, a frame at a time (the first finds
/// the stored jobs, their changed counts and due times, the dead ones'
/// marks, the schedules and which Kept op is each kept record's latest);
/// Adds and Kept ops are copied as they lie, never decoded, so memory
/// stays at a frame or two plus sets of ids, the changes, the marks and
/// the (few) schedules' latest ops, whatever the file's size (kept
/// records, which carry results, are never held). With `progress` (a
/// background compaction) the frames the store appends meanwhile are then
/// copied too, until fewer than [`TAIL_LEFT_TO_SWAP`] bytes are left (or
/// for [`CATCH_UP_ROUNDS`] rounds). The file is synced before this returns.
pub(super) fn compact(
    log: &Path,
    tmp: &Path,
    end: u64,
    high: u64,
    progress: Option<&Progress>,
) -> Result<Compacted, StoreError> {
    type ById<T> = HashMap<u64, T, BuildHasherDefault<IdHash>>;
    // Every job stored (live or dead); the rest only for jobs whose Add
    // must be patched or followed by a Dead op.
    let mut live: HashSet<u64, BuildHasherDefault<IdHash>> = HashSet::default();
    let mut attempts: ById<u32> = HashMap::default();
    let mut due: ById<u64> = HashMap::default();
    let mut dead: ById<DeadMark> = HashMap::default();
    // Each live schedule's latest op, encoded; in id order for the copy.
    let mut schedules: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    // Each kept record's latest Kept op, by its place among the prefix's
    // Kept ops (counted alike in both passes): the second pass copies
    // those.
    let mut kept: ById<u64> = HashMap::default();
    let mut kept_ops = 0u64;
    // Each function's latest settings op, encoded (none at the defaults).
    let mut functions: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let mut reader = frames(log, end)?;
    let version = reader.version();
    while let Some(payload) = reader.next_payload()? {
        cancelled(progress)?;
        scan_ops_in(version, payload, |op| match op {
            RawOp::Add { id, .. } => {
                // The same id twice (never written): the later Add wins
                // whole, as in replay.
                live.insert(id);
                attempts.remove(&id);
                due.remove(&id);
                dead.remove(&id);
            }
            RawOp::Done(id) => {
                live.remove(&id);
                attempts.remove(&id);
                due.remove(&id);
                dead.remove(&id);
            }
            RawOp::Update { id, attempts: a } => {
                // A dead job keeps the count it died with.
                if live.contains(&id) && !dead.contains_key(&id) {
                    attempts.insert(id, a);
                }
            }
            RawOp::Retry {
                id,
                attempts: a,
                due_word,
            } => {
                if live.contains(&id) {
                    attempts.insert(id, a);
                    due.insert(id, due_word);
                    dead.remove(&id);
                }
            }
            RawOp::Dead {
                id,
                attempts: a,
                died_ms,
                error,
            } => {
                if live.contains(&id) {
                    attempts.insert(id, a);
                    let error = Bytes::copy_from_slice(error);
                    dead.insert(id, DeadMark { died_ms, error });
                }
            }
            RawOp::Schedule { id, bytes } => {
                // A new version replaces the old (its buffer reused).
                let kept = schedules.entry(id).or_default();
                kept.clear();
                kept.extend_from_slice(bytes);
            }
            // A Done leaves schedules alone; only this drops one.
            RawOp::Unschedule(id) => {
                schedules.remove(&id);
            }
            RawOp::Kept { id, .. } => {
                // A new version replaces the old.
                kept.insert(id, kept_ops);
                kept_ops += 1;
            }
            // A Done leaves kept records alone too.
            RawOp::Forget(id) => {
                kept.remove(&id);
            }
            RawOp::Reserve(_) => {}
            RawOp::Function {
                name,
                default: true,
                ..
            } => {
                functions.remove(name);
            }
            RawOp::Function { name, bytes, .. } => {
                functions.insert(name.to_vec(), bytes.to_vec());
            }
        })?;
    }
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)?;
    let mut f = std::io::BufWriter::with_capacity(1 << 20, f);
    f.write_all(&frame::file_header())?;
    let mut total = frame::HEADER_LEN as u64;
    let mut buf = vec![0; frame::FRAME_HEADER];
    Op::Reserve(high).encode(&mut buf);
    for op in schedules.values().chain(functions.values()) {
        buf.extend_from_slice(op);
    }
    drop(schedules);
    drop(functions);
    let mut reader = frames(log, end)?;
    let mut kept_ops = 0u64;
    while let Some(payload) = reader.next_payload()? {
        cancelled(progress)?;
        scan_ops_in(version, payload, |op| {
            let (id, bytes) = match op {
                RawOp::Add { id, bytes } => (id, bytes),
                RawOp::Kept { id, bytes } => {
                    if kept.get(&id) == Some(&kept_ops) {
                        buf.extend_from_slice(bytes);
                    }
                    kept_ops += 1;
                    return;
                }
                _ => return,
            };
            if !live.contains(&id) {
                return;
            }
            let start = buf.len();
            buf.extend_from_slice(bytes);
            let a = attempts.get(&id);
            if let Some(a) = a {
                let at = start + ADD_ATTEMPTS_AT;
                buf[at..at + 4].copy_from_slice(&a.to_le_bytes());
            }
            if let Some(d) = due.get(&id) {
                let at = start + ADD_DUE_AT;
                buf[at..at + 8].copy_from_slice(&d.to_le_bytes());
            }
            if let (Some(mark), Some(&a)) = (dead.get(&id), a) {
                encode_dead(id, a, mark, &mut buf);
            }
        })?;
        if buf.len() > 1 << 20 {
            frame::seal(&mut buf);
            f.write_all(&buf)?;
            total += buf.len() as u64;
            buf.truncate(frame::FRAME_HEADER);
        }
    }
    if buf.len() > frame::FRAME_HEADER {
        frame::seal(&mut buf);
        f.write_all(&buf)?;
        total += buf.len() as u64;
    }
    let mut f = f.into_inner().map_err(|e| e.into_error())?;
    let mut upto = end;
    if let Some(p) = progress {
        // Catch up with the store: copy what it appended while we worked,
        // again and again, until what is left is small enough for the swap.
        let src = File::open(log)?;
        for _ in 0..CATCH_UP_ROUNDS {
            cancelled(Some(p))?;
            let written = p.written.load(Ordering::Acquire);
            if written.saturating_sub(upto) < TAIL_LEFT_TO_SWAP {
                break;
            }
            copy_range(&src, upto, written, &mut f)?;
            total += written - upto;
            upto = written;
        }
    }
    f.sync_all()?;
    Ok(Compacted { len: total, upto })
}

/// Appends bytes `[from, to)` of `src` to `dst`.
pub(super) fn copy_range(
    src: &File,
    from: u64,
    to: u64,
    dst: &mut impl Write,
) -> Result<(), StoreError> {
    let mut buf = vec![0u8; (to - from).min(1 << 20) as usize];
    let mut at = from;
    while at < to {
        let n = (to - at).min(buf.len() as u64) as usize;
        src.read_exact_at(&mut buf[..n], at)?;
        dst.write_all(&buf[..n])?;
        at += n as u64;
    }
    Ok(())
}
