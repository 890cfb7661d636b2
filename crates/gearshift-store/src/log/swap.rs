//! When the log is compacted and how the compacted file takes its place:
//! the store's side of compaction (`compact.rs` holds the copying). A
//! compaction starts after a flush once obsolete records outweigh the ones
//! it keeps (live and dead jobs', each schedule's and kept record's
//! latest), runs on its own thread (or inside the flush), and is swapped
//! in between flushes with a rename, after the store copied the frames
//! appended since.

use std::fs::OpenOptions;
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::{compact, open_direct, sync_dir, LogStore, FILE_NAME};
use crate::StoreError;

impl LogStore {
    /// Whether the file, past the size threshold, holds more obsolete
    /// bytes than live ones (the records a compaction keeps, dead jobs'
    /// and each schedule's and kept record's latest included).
    fn should_compact(&self) -> bool {
        let obsolete = self.len.saturating_sub(self.live_bytes);
        self.len > self.opts.compact_min_bytes && obsolete > self.live_bytes
    }

    /// Whether a compaction is running on its own thread.
    pub fn compacting(&self) -> bool {
        self.compaction.is_some()
    }

    /// Compactions swapped in since the store was opened.
    pub fn compactions(&self) -> u64 {
        self.compactions
    }

    /// Waits for a running background compaction and swaps its file in.
    pub fn finish_compaction(&mut self) -> Result<(), StoreError> {
        self.poll_compaction(true)
    }

    /// After a flush: swaps in a background compaction that has finished,
    /// and starts one (or, without background compaction, compacts here)
    /// when obsolete records outweigh live ones. A failed compaction leaves the
    /// log as it was; a later flush tries again.
    ///
    /// Should flushes outrun a background compaction (appending more than
    /// the file held when it started), the flush waits for it and, if the
    /// file is still worth compacting, compacts at once: the file never
    /// exceeds twice the size at which the running compaction started,
    /// whatever the load, at the price of a pause only when the disk cannot
    /// keep up anyway. (A live set that shrinks meanwhile, as in a drain,
    /// is no reason to wait: the next compaction drops what died.)
    pub(super) fn maybe_compact(&mut self) {
        if let Err(e) = self.poll_compaction(false) {
            tracing::error!(error = %e, "queue file compaction failed");
        }
        let mut waited = false;
        if let Some(bg) = &self.compaction {
            if self.len > 2 * bg.end {
                tracing::warn!(
                    len = self.len,
                    started_at = bg.end,
                    "flushes outran the background compaction; waiting for it"
                );
                if let Err(e) = self.poll_compaction(true) {
                    tracing::error!(error = %e, "queue file compaction failed");
                }
                waited = true;
            }
        }
        if self.compaction.is_some() || !self.should_compact() {
            return;
        }
        let tmp = compact_tmp(&self.dir);
        if self.opts.background_compaction && !waited {
            match compact::Background::start(self.path(), tmp, self.len, self.high) {
                Ok(bg) => self.compaction = Some(bg),
                Err(e) => tracing::error!(error = %e, "cannot start the compaction thread"),
            }
            return;
        }
        let done = compact::compact(&self.path(), &tmp, self.len, self.high, None);
        let installed = match done {
            Ok(c) => self.install(c),
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                Err(e)
            }
        };
        if let Err(e) = installed {
            tracing::error!(error = %e, "queue file compaction failed");
        }
    }

    /// Tells a background compaction how far the log is written; once it
    /// has finished (or, with `wait`, when it finishes), swaps its file in.
    pub(super) fn poll_compaction(&mut self, wait: bool) -> Result<(), StoreError> {
        let Some(bg) = &self.compaction else {
            return Ok(());
        };
        bg.progress.written.store(self.len, Ordering::Release);
        if !wait && !bg.thread.is_finished() {
            return Ok(());
        }
        let Some(bg) = self.compaction.take() else {
            return Ok(());
        };
        let result = bg.thread.join().unwrap_or_else(|_| {
            Err(StoreError::Io(std::io::Error::other(
                "the compaction thread panicked",
            )))
        });
        match result {
            Ok(c) => self.install(c),
            Err(e) => {
                let _ = std::fs::remove_file(&bg.tmp);
                Err(e)
            }
        }
    }

    /// Swaps a compacted file in: appends the frames flushed since its copy
    /// ended, syncs it, renames it over the log atomically and reopens it.
    /// Runs between flushes, so nothing is appended meanwhile.
    fn install(&mut self, c: compact::Compacted) -> Result<(), StoreError> {
        let tmp = compact_tmp(&self.dir);
        let tail = self.len - c.upto.min(self.len);
        let renamed = (|| {
            if tail > 0 {
                let mut f = OpenOptions::new().write(true).open(&tmp)?;
                f.seek(SeekFrom::Start(c.len))?;
                compact::copy_range(&self.file, c.upto, self.len, &mut f)?;
                f.sync_data()?;
            }
            std::fs::rename(&tmp, self.path())?;
            Ok::<_, StoreError>(c.len + tail)
        })();
        let new_len = match renamed {
            Ok(total) => total,
            Err(e) => {
                // Give the space back: on a full disk a half-written copy
                // would otherwise hold what little is left and fail every
                // append.
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        // From here on the old handle points at a replaced file: if the new
        // one cannot be opened, refuse every later write rather than append
        // to a file nobody will read.
        let reopened = sync_dir(&self.dir).and_then(|()| {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(self.path())?;
            file.seek(SeekFrom::End(0))?;
            Ok(file)
        });
        let file = match reopened {
            Ok(f) => f,
            Err(e) => {
                self.broken = Some(format!(
                    "queue file could not be reopened after compaction: {e}"
                ));
                return Err(e);
            }
        };
        let before = self.len;
        let old = std::mem::replace(&mut self.file, file);
        // The old file's last link went with the rename: closing it frees
        // its blocks, which for a deep queue's log takes tens of
        // milliseconds. Not on the store thread's time.
        let closed = std::thread::Builder::new()
            .name("gearshift-close".into())
            .spawn(move || drop(old));
        if let Err(e) = closed {
            tracing::debug!(error = %e, "closing the old queue file here");
        }
        self.len = new_len;
        self.allocated = new_len;
        self.prealloc = true;
        // Compaction writes the current format (the copied tail holds no op
        // it lacks).
        self.version = crate::FORMAT_VERSION;
        if self.direct.is_some() {
            self.direct = open_direct(&self.path(), &self.file, new_len, self.opts);
        }
        // The new file is on disk whole (synced before the rename).
        if let Some(marker) = &mut self.synced {
            if let Err(e) = marker.record(&self.file, new_len) {
                tracing::warn!(error = %e, "cannot record the compacted queue file as synced");
            }
        }
        self.compactions += 1;
        tracing::info!(
            before,
            after = self.len,
            copied_at_swap = tail,
            live = self.live.len(),
            kept = self.kept.len(),
            "compacted the queue file"
        );
        Ok(())
    }
}

/// Where compaction writes the new log before renaming it into place.
pub(super) fn compact_tmp(dir: &Path) -> PathBuf {
    dir.join(format!("{FILE_NAME}.compact"))
}
