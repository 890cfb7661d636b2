//! Durable appends that bypass the page cache: with `fsync` durability a
//! frame goes to disk in one `O_DIRECT|O_DSYNC` write instead of a `pwrite`
//! and an `fdatasync` (one system call, no writeback; figures in
//! perf/history.md, "Store hand-off").
//!
//! Direct I/O moves whole blocks from block-aligned memory to block-aligned
//! offsets. So the appender keeps a copy of the log's last, partly filled
//! block. Each append rewrites that block from its start: the bytes
//! already there, the new frame, zeros up to the next block boundary. The
//! bytes of earlier frames in it are the same in the old and the new copy,
//! so a write torn by a crash cannot damage them; the zeros land in room
//! the store wrote ahead (or extend the file, which replay reads as room).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// Size and alignment of a direct write. 4 KiB covers the logical block
/// size of every common device (512 B or 4 KiB) and the page size.
pub const BLOCK: usize = 4096;

/// Most bytes one direct write carries (the kept tail and the frame). A
/// bigger frame costs its data more than its system calls, so the store
/// writes it through the page cache instead, and the aligned copy a direct
/// write needs never holds more than this (an import's single frame can
/// be gigabytes).
pub const DIRECT_MAX: usize = 1 << 20;

/// Writes frames at the log's end with `O_DIRECT|O_DSYNC`.
#[derive(Debug)]
pub struct Appender {
    file: File,
    /// The log's bytes from the start of its last block to its end
    /// (shorter than a block).
    tail: Vec<u8>,
    /// Scratch room, a block larger than the biggest write so far (at
    /// most [`DIRECT_MAX`]), so that a block-aligned window fits inside it.
    room: Vec<u8>,
}

impl Appender {
    /// Opens the log at `path` for direct writes, its frames ending at
    /// `len` (`reader` reads the last partial block). Fails where the file
    /// system does not take `O_DIRECT`; the caller then writes through the
    /// page cache.
    pub fn open(path: &Path, reader: &File, len: u64) -> io::Result<Appender> {
        let file = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_DIRECT | libc::O_DSYNC)
            .open(path)?;
        let start = block_start(len);
        let mut tail = vec![0u8; (len - start) as usize];
        reader.read_exact_at(&mut tail, start)?;
        Ok(Appender {
            file,
            tail,
            room: Vec::new(),
        })
    }

    /// Whether a frame of `len` bytes is small enough to write directly
    /// (see [`DIRECT_MAX`]).
    pub fn takes(&self, len: usize) -> bool {
        self.tail.len() + len <= DIRECT_MAX
    }

    /// The log grew by `bytes` at `len` through the page cache: keeps its
    /// new last partial block for the next direct write.
    pub fn skipped(&mut self, len: u64, bytes: &[u8]) {
        let keep = ((len + bytes.len() as u64) % BLOCK as u64) as usize;
        if bytes.len() >= keep {
            self.tail.clear();
            self.tail.extend_from_slice(&bytes[bytes.len() - keep..]);
        } else {
            // Still inside the same block: the old tail, then all of it.
            self.tail.extend_from_slice(bytes);
        }
    }

    /// Makes `bytes` durable at `len`, the log's end, and returns the end
    /// of the blocks written (the file is at least that long afterwards).
    /// On an error nothing is known about the blocks written; the kept
    /// tail is still right, so the next append rewrites them whole.
    pub fn append(&mut self, len: u64, bytes: &[u8]) -> io::Result<u64> {
        let start = block_start(len);
        if len - start != self.tail.len() as u64 {
            // The store and the appender disagree on where the log ends: a
            // bug, refused rather than written over good frames.
            return Err(io::Error::other(format!(
                "direct append at {len} does not follow the kept tail ({} bytes from {start})",
                self.tail.len()
            )));
        }
        let used = self.tail.len() + bytes.len();
        let whole = used.next_multiple_of(BLOCK);
        if self.room.len() < whole + BLOCK {
            self.room = vec![0u8; whole + BLOCK];
        }
        let skip = self.room.as_ptr().align_offset(BLOCK);
        let window = &mut self.room[skip..skip + whole];
        window[..self.tail.len()].copy_from_slice(&self.tail);
        window[self.tail.len()..used].copy_from_slice(bytes);
        window[used..].fill(0);
        self.file.write_all_at(window, start)?;
        // The new last partial block (empty when the data ends on a
        // boundary).
        let keep = used % BLOCK;
        self.tail.clear();
        self.tail.extend_from_slice(&window[used - keep..used]);
        Ok(start + whole as u64)
    }
}

/// Start of the block holding offset `len` (the block a write at `len`
/// begins in).
fn block_start(len: u64) -> u64 {
    len - len % BLOCK as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Appends of every size up to a few blocks, each read back through
    /// the page cache, leave exactly the appended bytes, in order, followed
    /// by zeros up to a block boundary.
    #[test]
    fn appends_of_any_size_read_back_whole() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("log");
        let reader = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .expect("create");
        reader.write_all_at(b"HEAD", 0).expect("header");
        let Ok(mut a) = Appender::open(&path, &reader, 4) else {
            // A file system without O_DIRECT: nothing to test here.
            return;
        };
        let mut expected = b"HEAD".to_vec();
        let mut len = 4u64;
        for (i, size) in [1usize, 100, 4091, 4096, 1, 9000, 4095, 3, 5000]
            .into_iter()
            .enumerate()
        {
            let bytes: Vec<u8> = (0..size).map(|j| (i * 31 + j) as u8 | 1).collect();
            let end = a.append(len, &bytes).expect("append");
            expected.extend_from_slice(&bytes);
            len += size as u64;
            assert_eq!(end % BLOCK as u64, 0);
            assert!(end >= len && end - len < BLOCK as u64);
            let mut back = vec![0u8; end as usize];
            reader.read_exact_at(&mut back, 0).expect("read back");
            assert_eq!(&back[..len as usize], &expected[..], "after append {i}");
            assert!(back[len as usize..].iter().all(|&b| b == 0));
        }
        // Bytes written some other way (through the page cache) are taken
        // into the kept tail, whatever their size.
        for size in [10usize, 5000, 4096 * 3 + 7] {
            let bytes: Vec<u8> = (0..size).map(|j| (j * 7) as u8 | 1).collect();
            reader.write_all_at(&bytes, len).expect("buffered write");
            reader.sync_data().expect("sync");
            a.skipped(len, &bytes);
            expected.extend_from_slice(&bytes);
            len += size as u64;
            let end = a.append(len, b"direct again").expect("append");
            expected.extend_from_slice(b"direct again");
            len += 12;
            let mut back = vec![0u8; end as usize];
            reader.read_exact_at(&mut back, 0).expect("read back");
            assert_eq!(
                &back[..len as usize],
                &expected[..],
                "after skipping {size}"
            );
        }
        // An append anywhere but at the end is refused.
        assert!(a.append(len - 1, b"x").is_err());
        assert!(a.append(len + 1, b"x").is_err());
        // A new appender picks the tail up from the file.
        let mut b = Appender::open(&path, &reader, len).expect("reopen");
        b.append(len, b"more").expect("append after reopen");
        expected.extend_from_slice(b"more");
        let mut back = vec![0u8; expected.len()];
        reader.read_exact_at(&mut back, 0).expect("read back");
        assert_eq!(back, expected);
    }
}
