//! The few OS facts the bench reads: file sizes, this process's I/O
//! counters, and evicting files from the page cache.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;

use crate::engines::Result;

/// Apparent and allocated bytes of every file in `dir` (not recursive).
pub fn dir_size(dir: &Path) -> Result<(u64, u64)> {
    let (mut len, mut alloc) = (0, 0);
    for entry in std::fs::read_dir(dir)? {
        let m = entry?.metadata()?;
        if m.is_file() {
            len += m.len();
            alloc += m.blocks() * 512;
        }
    }
    Ok((len, alloc))
}

/// (wchar, write_bytes) from /proc/self/io: bytes handed to write calls, and
/// bytes this process caused to be sent to the storage layer (page-granular).
pub fn proc_io() -> (u64, u64) {
    let text = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (field("wchar:"), field("write_bytes:"))
}

/// Syncs every file in `dir` and asks the kernel to drop it from the page
/// cache (POSIX_FADV_DONTNEED), so the next open reads from the device.
/// (This VM's host may still cache it.)
pub fn drop_cache(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_file() {
            let f = File::open(&path)?;
            f.sync_all()?;
            // SAFETY: a valid open descriptor; fadvise only drops clean cache.
            let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
            if rc != 0 {
                return Err(format!("posix_fadvise({}) failed: {rc}", path.display()).into());
            }
        }
    }
    Ok(())
}
