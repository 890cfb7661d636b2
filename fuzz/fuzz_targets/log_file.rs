//! A queue file built from pieces: frames sealed around any payload (so the
//! op decoder is reached past the checksums), raw bytes, frame headers that
//! check out but claim any length, and runs of zeros, behind a header of
//! any format version. `gearshift check` never panics and agrees with the
//! server: the store opens exactly when check says it is not refused. A
//! refused file is repaired, and the repaired file opens holding the jobs
//! check said it would, with a handle counter past every id it holds.
#![no_main]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use gearshift_store::log::frame::{file_header, put_frame, seal, FRAME_HEADER};
use gearshift_store::log::salvage;
use gearshift_store::log::{Durability, LogOptions, LogStore, FILE_NAME};
use gearshift_store::{Store, StoreError, FORMAT_VERSION};
use libfuzzer_sys::fuzz_target;

/// The file the pieces in `input` make.
fn build(input: &[u8]) -> Vec<u8> {
    let Some((&pick, mut rest)) = input.split_first() else {
        return Vec::new();
    };
    let mut file = file_header().to_vec();
    // Versions 1 to the current one, and now and then one from the future.
    let version = 1 + u32::from(pick) % (FORMAT_VERSION + 1);
    file[8..12].copy_from_slice(&version.to_le_bytes());
    while let [kind, len, r @ ..] = rest {
        let (bytes, r) = r.split_at(usize::from(*len).min(r.len()));
        match kind % 4 {
            0 => put_frame(&mut file, bytes),
            1 => file.extend_from_slice(bytes),
            // A header that checks out, claiming the bytes' first word (or
            // their length) as its payload's length, then the bytes.
            2 => {
                let start = file.len();
                file.resize(start + FRAME_HEADER, 0);
                file.extend_from_slice(bytes);
                seal(&mut file[start..]);
                if let Some(w) = bytes.get(..4) {
                    file[start + 4..start + 8].copy_from_slice(w);
                    let crc = crc32fast::hash(&file[start..start + 12]);
                    file[start + 12..start + 16].copy_from_slice(&crc.to_le_bytes());
                }
            }
            _ => file.resize(file.len() + 16 * usize::from(*len), 0),
        }
        rest = r;
    }
    file
}

fn opts() -> LogOptions {
    LogOptions {
        // Interval durability: no zeros written ahead, no fsync per open.
        durability: Durability::Interval(std::time::Duration::from_secs(3600)),
        compact_min_bytes: u64::MAX,
        background_compaction: false,
        direct_io: false,
    }
}

/// A directory of its own for each input, removed after it.
struct Dir(PathBuf);

impl Dir {
    fn new() -> Dir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("gs-fuzz-log-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("temp dir");
        Dir(path)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fuzz_target!(|input: &[u8]| {
    let file = build(input);
    if file.is_empty() {
        return;
    }
    let dir = Dir::new();
    std::fs::write(dir.0.join(FILE_NAME), &file).expect("write");
    let report = match salvage::check(&dir.0) {
        Ok(r) => r,
        Err(StoreError::NewerFormat { .. }) => {
            assert!(LogStore::open(&dir.0, opts()).is_err());
            return;
        }
        Err(e) => panic!("check failed on a file it should read: {e}"),
    };
    assert_eq!(std::fs::read(dir.0.join(FILE_NAME)).expect("read"), file, "check wrote");
    let opened = LogStore::open(&dir.0, opts());
    assert_eq!(opened.is_ok(), !report.refused, "check and the server disagree: {report:?}");
    drop(opened);
    if report.refused {
        let done = salvage::repair(&dir.0, 100_000).expect("repair").expect("repaired");
        assert_eq!(done.report.jobs, report.jobs);
    }
    let mut store = LogStore::open(&dir.0, opts()).expect("opens after a repair");
    let held = store.replay().expect("replay");
    assert_eq!(held.jobs.len(), report.jobs);
    assert_eq!(held.dead.len(), report.dead);
    let highest = held.jobs.iter().map(|j| j.id).max().unwrap_or(0);
    assert!(held.next_id > highest);
});
