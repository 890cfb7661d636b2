//! The embedded default store: one append-only file of checksummed frames
//! in the data directory, one frame per flush (so one `fsync` covers every
//! job of a group commit), rewritten to only its live and dead jobs, its
//! schedules and its kept records when obsolete records outgrow them, so
//! its size stays bounded. (A dead job is one that used all its attempts;
//! it is kept, so its records count as live for the size rule. So does
//! each schedule's and each kept record's latest op; their older versions
//! are obsolete.)

mod compact;
mod direct;
pub mod frame;
mod replay;
pub mod salvage;
mod sizes;
mod swap;
mod synced;

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;

use crate::record::{
    encode_add, encode_dead, encode_function, encode_kept, encode_schedule, FunctionRecord, Op,
    FORMAT_VERSION,
};
use crate::{
    apply_ops, capped, replayed, DeadMark, JobRecord, KeptRecord, Refusal, Replayed,
    ScheduleRecord, Sets, Store, StoreError,
};
use frame::FrameReader;
use sizes::{IdHash, LiveSizes, Sizing};

/// Name of the log file inside the data directory.
pub const FILE_NAME: &str = "queue.gslog";

/// Name of the marker of how much of the log is on disk, kept with
/// `interval` durability (`log/synced.rs`).
pub const SYNCED_FILE_NAME: &str = "queue.gslog.synced";

/// When written data counts as durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Every flush ends with `fsync`: acknowledged means on disk.
    Fsync,
    /// Flushes only write; the server calls [`Store::sync`] at this interval,
    /// bounding what a power loss can take.
    Interval(Duration),
}

/// Tuning of the log store.
#[derive(Debug, Clone, Copy)]
pub struct LogOptions {
    /// Durability of a flush.
    pub durability: Durability,
    /// The file is never compacted below this size.
    pub compact_min_bytes: u64,
    /// Compact on a thread of its own while flushes go on (the default),
    /// instead of inside the flush that found the file worth compacting.
    pub background_compaction: bool,
    /// With `fsync` durability, write each frame with one
    /// `O_DIRECT|O_DSYNC` write (the default) where the file system takes
    /// it, instead of `pwrite` + `fdatasync`.
    pub direct_io: bool,
}

impl Default for LogOptions {
    fn default() -> Self {
        LogOptions {
            durability: Durability::Fsync,
            compact_min_bytes: 8 << 20,
            background_compaction: true,
            direct_io: true,
        }
    }
}

/// What a replay hands out: live jobs, dead ones (with their marks),
/// schedules and kept records, each in id order.
#[derive(Debug)]
struct Stored {
    jobs: Vec<JobRecord>,
    dead: Vec<(JobRecord, DeadMark)>,
    schedules: Vec<ScheduleRecord>,
    kept: Vec<KeptRecord>,
    functions: Vec<FunctionRecord>,
}

/// Zeros written ahead of the frames at a time with `fsync` durability.
pub const PREALLOC: u64 = 8 << 20;

/// The append-only log store.
#[derive(Debug)]
pub struct LogStore {
    dir: PathBuf,
    file: File,
    /// Direct durable writes (`fsync` durability, where the file system
    /// allows them); `None`: through the page cache.
    direct: Option<direct::Appender>,
    opts: LogOptions,
    /// Room for a frame header, then the ops buffered since the last flush.
    pending: Vec<u8>,
    /// Ops buffered since the last flush, for the size bookkeeping.
    pending_ops: Vec<Sizing>,
    /// The newest format version an op buffered since the last flush needs.
    pending_version: u32,
    /// Format version in the file's header: 1 for an old file until a
    /// version 2 op is first appended to it (or it is compacted).
    version: u32,
    /// End of the last good frame: where the next flush writes.
    len: u64,
    /// Length of the file on disk: `len` plus zeros written ahead.
    allocated: u64,
    /// Whether to write zeros ahead (off after a failure, until the next
    /// compaction).
    prealloc: bool,
    /// Encoded size of each live or dead job's Add op.
    live: LiveSizes,
    /// Encoded size of each dead job's Dead op.
    dead: LiveSizes,
    /// Encoded size of each live schedule's latest Schedule op.
    schedules: LiveSizes,
    /// Encoded size of each kept record's latest Kept op.
    kept: LiveSizes,
    /// What a compaction would keep: the sizes in `live`, `dead`,
    /// `schedules` and `kept`.
    live_bytes: u64,
    high: u64,
    /// The live and dead jobs, schedules and kept records read at open,
    /// until the first replay.
    replay: Option<Stored>,
    /// Set when the file handle can no longer be trusted; every flush fails.
    broken: Option<String>,
    /// Something replay would refuse (an id beyond `MAX_ID`, a kept
    /// record's unknown outcome) was buffered since the last flush: the
    /// flush refuses the batch, so the log never holds what replay refuses.
    refused: Refusal,
    /// A compaction running on its own thread.
    compaction: Option<compact::Background>,
    /// With `interval` durability, the marker of how much of the log is on
    /// disk, recorded after each sync.
    synced: Option<synced::Synced>,
    /// Compactions swapped in since the store was opened.
    compactions: u64,
    /// Held for the store's lifetime: one process per data directory.
    _lock: File,
}

impl LogStore {
    /// Opens (or creates) the store in `dir`, reading the whole log once.
    /// A torn tail from a crash is cut off; corruption or a newer format
    /// is an error, so no job is ever silently dropped.
    pub fn open(dir: &Path, opts: LogOptions) -> Result<LogStore, StoreError> {
        std::fs::create_dir_all(dir)?;
        let lock = lock_dir(dir)?;
        // A compaction cut short by a crash leaves its copy behind; the log
        // itself is intact, so the copy is only wasted space.
        match std::fs::remove_file(swap::compact_tmp(dir)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!(error = %e, "cannot remove a leftover compaction file");
            }
            _ => {}
        }
        let path = dir.join(FILE_NAME);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        let mut raw = Vec::new();
        file.read_to_end(&mut raw)?;
        if raw.is_empty() {
            file.write_all(&frame::file_header())?;
            file.sync_all()?;
            sync_dir(dir)?;
            raw = frame::file_header().to_vec();
        }
        let on_disk = synced::on_disk(dir, &file);
        let disk_len = raw.len();
        let (
            replay::Replay {
                jobs,
                dead,
                schedules,
                kept,
                functions,
                sizes: live_sizes,
                dead_sizes,
                schedule_sizes,
                kept_sizes,
                high,
                valid_len,
                version,
            },
            raw,
        ) = synced::replay(Bytes::from(raw), on_disk, &path)?;
        if valid_len < disk_len {
            // Zeros are room written ahead (see `preallocate`); anything
            // else is a frame a crash cut short.
            if raw[valid_len..].iter().any(|&b| b != 0) {
                tracing::warn!(
                    file = %path.display(),
                    cut = raw.len() - valid_len,
                    "queue file ends in a torn write (crash during a flush); cutting it off"
                );
            }
            file.set_len(valid_len as u64)?;
            file.sync_all()?;
        }
        let synced = synced::keep(dir, &file, valid_len as u64, opts.durability)?;
        file.seek(SeekFrom::End(0))?;
        let live_bytes = live_sizes.values().sum::<u64>()
            + dead_sizes.values().sum::<u64>()
            + schedule_sizes.values().sum::<u64>()
            + kept_sizes.values().sum::<u64>();
        let direct = open_direct(&path, &file, valid_len as u64, opts);
        Ok(LogStore {
            dir: dir.to_path_buf(),
            file,
            direct,
            opts,
            pending: vec![0; frame::FRAME_HEADER],
            pending_ops: Vec::new(),
            pending_version: 1,
            version,
            len: valid_len as u64,
            allocated: valid_len as u64,
            prealloc: true,
            live: live_sizes,
            dead: dead_sizes,
            schedules: schedule_sizes,
            kept: kept_sizes,
            live_bytes,
            high,
            replay: Some(Stored {
                jobs,
                dead,
                schedules,
                kept,
                functions,
            }),
            broken: None,
            refused: Refusal::default(),
            compaction: None,
            compactions: 0,
            synced,
            _lock: lock,
        })
    }

    /// Bytes of the log that hold frames (the file on disk may be longer
    /// by the zeros written ahead of them, see [`LogStore::disk_len`]).
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// Whether flushes write frames with `O_DIRECT|O_DSYNC` (see
    /// [`LogOptions::direct_io`]) rather than through the page cache.
    pub fn direct_writes(&self) -> bool {
        self.direct.is_some()
    }

    /// Length of the file on disk: [`LogStore::file_len`] plus any zeros
    /// written ahead.
    pub fn disk_len(&self) -> u64 {
        self.allocated.max(self.len)
    }

    /// With `fsync` durability, writes zeros ahead of `end` ([`PREALLOC`]
    /// at a time), so a commit's `fdatasync` need not also commit a new file
    /// size (zeros, not `fallocate`, whose unwritten extents still change
    /// metadata; figures in perf/history.md, "Store hand-off"). A failure
    /// (a full disk) gives the space back and turns this off until the next
    /// compaction.
    fn preallocate(&mut self, end: u64) {
        if !self.prealloc || self.opts.durability != Durability::Fsync || end <= self.allocated {
            return;
        }
        let from = self.allocated.max(self.len);
        let to = end.next_multiple_of(PREALLOC).max(from);
        let zeros = vec![0u8; 1 << 20];
        let mut at = from;
        let written = (|| {
            while at < to {
                let n = (to - at).min(zeros.len() as u64) as usize;
                self.file.write_all_at(&zeros[..n], at)?;
                at += n as u64;
            }
            self.file.sync_data()
        })();
        match written {
            Ok(()) => self.allocated = to,
            Err(e) => {
                tracing::warn!(error = %e, "cannot write room ahead in the queue file; appending without it");
                let _ = self.file.set_len(self.len);
                self.allocated = self.len;
                self.prealloc = false;
            }
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.join(FILE_NAME)
    }

    /// Writes the sealed frame at the log's end, durably with `fsync`
    /// durability: directly when it can (frames up to
    /// [`direct::DIRECT_MAX`]), else through the page cache. A file system
    /// that refuses a direct write (`EINVAL`: its blocks are larger than
    /// the appender's) turns direct writes off for good.
    fn write_pending(&mut self) -> std::io::Result<()> {
        if let Some(d) = self.direct.as_mut().filter(|d| d.takes(self.pending.len())) {
            match d.append(self.len, &self.pending) {
                Ok(end) => {
                    self.allocated = self.allocated.max(end);
                    return Ok(());
                }
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    tracing::warn!(error = %e, "direct writes refused; writing the queue file through the page cache");
                    self.direct = None;
                }
                Err(e) => return Err(e),
            }
        }
        self.file.write_all_at(&self.pending, self.len)?;
        match self.opts.durability {
            Durability::Fsync => self.file.sync_data()?,
            Durability::Interval(_) => {}
        }
        if let Some(d) = &mut self.direct {
            d.skipped(self.len, &self.pending);
        }
        Ok(())
    }

    /// Reads the flushed file again, a frame at a time: its live and dead
    /// jobs, its schedules and its kept records by id.
    fn read_live(&self) -> Result<Sets, StoreError> {
        let mut sets = Sets {
            high: self.high,
            ..Sets::default()
        };
        let mut frames = self.frames()?;
        let version = frames.version();
        while let Some(payload) = frames.next_payload()? {
            // Decoded records keep slices of their frame: a copy of it.
            let mut ops = Vec::new();
            Op::decode_each_in(version, &Bytes::copy_from_slice(payload), |op, _| {
                ops.push(op)
            })?;
            apply_ops(&mut sets, ops);
        }
        Ok(sets)
    }

    /// Format version in the file's header (see the migration notes in
    /// [`crate::record`]).
    pub fn format_version(&self) -> u32 {
        self.version
    }

    /// Raises an older file's header to the current version before an op
    /// that version lacks is first appended, synced whatever the
    /// durability, so no crash leaves such an op behind an old header.
    fn raise_version(&mut self) -> std::io::Result<()> {
        self.file.write_all_at(&frame::file_header(), 0)?;
        self.file.sync_data()?;
        self.version = FORMAT_VERSION;
        if self.direct.is_some() {
            // The appender keeps a copy of the log's last block, which in a
            // small file is the one holding the header.
            self.direct = open_direct(&self.path(), &self.file, self.len, self.opts);
        }
        Ok(())
    }

    /// Reads the log's frames one at a time, from the start to the last
    /// flushed frame.
    fn frames(&self) -> Result<FrameReader<impl Read>, StoreError> {
        compact::frames(&self.path(), self.len)
    }
}

impl Drop for LogStore {
    fn drop(&mut self) {
        if let Some(bg) = self.compaction.take() {
            bg.abandon();
        }
    }
}

/// The direct appender for the log at `path` (frames ending at `len`), if
/// the options ask for one and the file system takes `O_DIRECT`.
fn open_direct(path: &Path, file: &File, len: u64, opts: LogOptions) -> Option<direct::Appender> {
    if opts.durability != Durability::Fsync || !opts.direct_io {
        return None;
    }
    match direct::Appender::open(path, file, len) {
        Ok(a) => Some(a),
        Err(e) => {
            tracing::info!(error = %e, "no direct writes here; writing the queue file through the page cache");
            None
        }
    }
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// Takes the data directory's lock (one process per directory), held as
/// long as the returned file is.
fn lock_dir(dir: &Path) -> Result<File, StoreError> {
    let lock = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.join("LOCK"))?;
    match lock.try_lock() {
        Ok(()) => Ok(lock),
        Err(std::fs::TryLockError::WouldBlock) => {
            Err(StoreError::Locked(dir.display().to_string()))
        }
        Err(std::fs::TryLockError::Error(e)) => Err(e.into()),
    }
}

impl LogStore {
    /// Encodes one op into the pending frame, noting what the flush must
    /// refuse and what compaction must account for.
    fn push(&mut self, op: &Op) {
        if !self.refused.admit(op) {
            return;
        }
        self.pending_version = self.pending_version.max(op.min_version());
        let sizing = match op {
            Op::Add(job) => Sizing::Add(job.id, encode_add(job, &mut self.pending) as u64),
            Op::Dead { id, attempts, mark } => Sizing::Dead(
                *id,
                encode_dead(*id, *attempts, mark, &mut self.pending) as u64,
            ),
            Op::Schedule(s) => Sizing::Schedule(s.id, encode_schedule(s, &mut self.pending) as u64),
            Op::Kept(r) => Sizing::Kept(r.id, encode_kept(r, &mut self.pending) as u64),
            Op::Done(id) => {
                op.encode(&mut self.pending);
                Sizing::Done(*id)
            }
            Op::Retry { id, .. } => {
                op.encode(&mut self.pending);
                Sizing::Retry(*id)
            }
            Op::Unschedule(id) => {
                op.encode(&mut self.pending);
                Sizing::Unschedule(*id)
            }
            Op::Forget(id) => {
                op.encode(&mut self.pending);
                Sizing::Forget(*id)
            }
            Op::Update { .. } => {
                op.encode(&mut self.pending);
                return;
            }
            Op::Reserve(upto) => {
                let upto = capped(*upto);
                Op::Reserve(upto).encode(&mut self.pending);
                self.high = self.high.max(upto);
                return;
            }
            // A restarted single node requeues its running jobs: no record.
            Op::Started(_) => return,
            // A few bytes per function: not counted for compaction.
            Op::Function(f) => {
                encode_function(f, &mut self.pending);
                return;
            }
        };
        self.pending_ops.push(sizing);
    }
}

impl Store for LogStore {
    fn replay(&mut self) -> Result<Replayed, StoreError> {
        let read = match self.replay.take() {
            // The jobs read at open, handed over once without a copy.
            Some(read) => read,
            // Asked again: read what is on disk now.
            None => {
                let sets = self.read_live()?;
                Stored {
                    jobs: sets.live.into_values().collect(),
                    dead: sets.dead.into_values().collect(),
                    schedules: sets
                        .schedules
                        .into_values()
                        .map(ScheduleRecord::detached)
                        .collect(),
                    kept: sets.kept.into_values().map(KeptRecord::detached).collect(),
                    functions: sets
                        .functions
                        .into_values()
                        .map(FunctionRecord::detached)
                        .collect(),
                }
            }
        };
        let mut r = replayed(read.jobs, read.dead, read.schedules, read.kept, self.high);
        r.functions = read.functions;
        Ok(r)
    }

    fn append(&mut self, ops: &[Op]) {
        for op in ops {
            self.push(op);
        }
    }

    fn discard(&mut self) {
        self.pending.truncate(frame::FRAME_HEADER);
        self.pending_ops.clear();
        self.pending_version = 1;
        self.refused.clear();
    }

    fn flush(&mut self) -> Result<(), StoreError> {
        if let Some(e) = self.refused.refusal() {
            self.discard();
            return Err(e);
        }
        if let Some(why) = self.broken.clone() {
            self.discard();
            return Err(StoreError::Io(std::io::Error::other(why)));
        }
        if self.pending.len() == frame::FRAME_HEADER {
            return Ok(());
        }
        if self.pending_version > self.version {
            if let Err(e) = self.raise_version() {
                self.discard();
                return Err(e.into());
            }
        }
        // The frame header goes into the room kept at the front: no copy.
        frame::seal(&mut self.pending);
        self.preallocate(self.len + self.pending.len() as u64);
        let written = self.write_pending();
        if let Err(e) = written {
            // Whatever part reached the file is not acknowledged: cut it off
            // (and the room ahead with it) so the next flush writes at a
            // clean end.
            self.discard();
            let _ = self.file.set_len(self.len);
            self.allocated = self.len;
            return Err(e.into());
        }
        self.len += self.pending.len() as u64;
        self.pending.truncate(frame::FRAME_HEADER);
        self.pending_version = 1;
        // Taken out and put back, so its allocation is reused.
        let mut ops = std::mem::take(&mut self.pending_ops);
        for op in ops.drain(..) {
            self.account(op);
        }
        self.pending_ops = ops;
        self.maybe_compact();
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StoreError> {
        self.file.sync_data()?;
        if let Some(marker) = &mut self.synced {
            marker.record(&self.file, self.len)?;
        }
        Ok(())
    }

    fn idle(&mut self) -> Result<(), StoreError> {
        self.poll_compaction(false)
    }
}
