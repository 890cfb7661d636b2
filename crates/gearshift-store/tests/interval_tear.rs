//! A power loss under `interval` durability: the kernel may have written
//! the pages of unsynced frames in any order, so a frame after the last
//! sync can be damaged (or zeros, a page never written) while a later one
//! is whole. The marker the store records after each sync lets the next
//! open cut such a tear with everything after it; damage before the last
//! sync stays corruption, and so does damage in a file the marker is not
//! about, or when the marker is gone.

use std::fs;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Duration;

use gearshift_store::conformance::job;
use gearshift_store::log::salvage;
use gearshift_store::log::{FILE_NAME, SYNCED_FILE_NAME};
use gearshift_store::{Durability, LogOptions, LogStore, Store, StoreError};
use tempfile::TempDir;

fn opts(durability: Durability) -> LogOptions {
    LogOptions {
        durability,
        compact_min_bytes: u64::MAX,
        background_compaction: false,
        direct_io: false,
    }
}

fn interval() -> LogOptions {
    opts(Durability::Interval(Duration::from_secs(3600)))
}

/// Three flushes of one job each (ids 1, 2, 3), the store's `sync` called
/// after the first `synced` of them; returns where each frame starts and
/// ends.
fn three_frames(dir: &Path, synced: usize) -> Vec<(u64, u64)> {
    let mut s = LogStore::open(dir, interval()).expect("open");
    s.replay().expect("replay");
    let mut frames = Vec::new();
    for id in 1..=3u64 {
        let start = s.file_len();
        s.add(&job(id, "f", "", 1, &[id as u8; 100]));
        s.flush().expect("flush");
        frames.push((start, s.file_len()));
        if id as usize == synced {
            s.sync().expect("sync");
        }
    }
    frames
}

/// Overwrites the log's bytes `at..at + len` with `byte`, in place (the
/// same file: the marker stays about it).
fn damage(dir: &Path, at: u64, len: usize, byte: u8) {
    let f = fs::OpenOptions::new()
        .write(true)
        .open(dir.join(FILE_NAME))
        .expect("open log");
    f.write_all_at(&vec![byte; len], at).expect("damage");
}

/// A log whose first of three frames was synced and whose second lost its
/// middle (zeros: pages never written), the third whole after it.
fn torn() -> (TempDir, Vec<(u64, u64)>) {
    let dir = TempDir::new().expect("tempdir");
    let frames = three_frames(dir.path(), 1);
    damage(dir.path(), frames[1].0 + 20, 40, 0);
    (dir, frames)
}

fn ids(s: &mut LogStore) -> Vec<u64> {
    s.replay()
        .expect("replay")
        .jobs
        .iter()
        .map(|j| j.id)
        .collect()
}

fn log_len(dir: &Path) -> u64 {
    fs::metadata(dir.join(FILE_NAME)).expect("log").len()
}

#[test]
fn a_damaged_frame_after_the_last_sync_is_cut_with_what_follows() {
    for (what, byte) in [("a page never written", 0u8), ("garbage", 0x5A)] {
        let dir = TempDir::new().expect("tempdir");
        let frames = three_frames(dir.path(), 1);
        // Frame 2's middle lost, frame 3 whole after it.
        damage(dir.path(), frames[1].0 + 20, 40, byte);
        let report = salvage::check(dir.path()).expect("check");
        assert!(!report.refused, "{what}: check agrees with the server");
        assert_eq!(report.cut_after_sync, Some(frames[1].0), "{what}");
        assert_eq!(report.jobs, 1, "{what}");
        let mut s = LogStore::open(dir.path(), interval())
            .unwrap_or_else(|e| panic!("{what}: a tear after the last sync opens: {e}"));
        assert_eq!(ids(&mut s), [1], "{what}: what was synced comes back");
        assert_eq!(log_len(dir.path()), frames[1].0, "{what}: cut at the tear");
        // The store goes on at the cut.
        s.add(&job(9, "f", "", 1, b"after"));
        s.flush().expect("flush");
        s.sync().expect("sync");
        drop(s);
        let mut again = LogStore::open(dir.path(), interval()).expect("reopen");
        assert_eq!(ids(&mut again), [1, 9], "{what}");
    }
}

#[test]
fn a_damaged_frame_before_the_last_sync_is_corruption() {
    let dir = TempDir::new().expect("tempdir");
    let frames = three_frames(dir.path(), 2);
    damage(dir.path(), frames[1].0 + 20, 40, 0);
    let before = fs::read(dir.path().join(FILE_NAME)).expect("read");
    assert!(salvage::check(dir.path()).expect("check").refused);
    match LogStore::open(dir.path(), interval()) {
        Err(StoreError::Corrupt(_)) => {}
        other => panic!("expected Corrupt, got {:?}", other.map(|_| ())),
    }
    let after = fs::read(dir.path().join(FILE_NAME)).expect("read");
    assert_eq!(before, after, "a refused file is never modified");
}

#[test]
fn without_a_marker_about_the_file_damage_is_corruption() {
    // No marker: a file whose syncs nobody recorded.
    let (dir, _) = torn();
    fs::remove_file(dir.path().join(SYNCED_FILE_NAME)).expect("remove marker");
    assert!(matches!(
        LogStore::open(dir.path(), interval()),
        Err(StoreError::Corrupt(_))
    ));
    // A marker about another file (the log replaced under the same name,
    // as a compaction's rename does).
    let (dir, _) = torn();
    let log = dir.path().join(FILE_NAME);
    let copy = dir.path().join("copy");
    fs::copy(&log, &copy).expect("copy");
    fs::rename(&copy, &log).expect("rename");
    assert!(matches!(
        LogStore::open(dir.path(), interval()),
        Err(StoreError::Corrupt(_))
    ));
    // A marker that does not check out.
    let (dir, _) = torn();
    let marker = fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join(SYNCED_FILE_NAME))
        .expect("marker");
    marker.write_all_at(&[0xFF], 17).expect("damage marker");
    assert!(matches!(
        LogStore::open(dir.path(), interval()),
        Err(StoreError::Corrupt(_))
    ));
}

#[test]
fn fsync_durability_cuts_what_an_interval_run_tore_then_drops_the_marker() {
    let (dir, _) = torn();
    let mut s = LogStore::open(dir.path(), opts(Durability::Fsync)).expect("open");
    assert_eq!(ids(&mut s), [1]);
    assert!(
        !dir.path().join(SYNCED_FILE_NAME).exists(),
        "no marker under fsync: every frame is on disk"
    );
    // Frames fsync put on disk are never excused.
    let start = s.file_len();
    s.add(&job(7, "f", "", 1, &[7; 100]));
    s.flush().expect("flush");
    s.add(&job(8, "f", "", 1, &[8; 100]));
    s.flush().expect("flush");
    drop(s);
    damage(dir.path(), start + 20, 40, 0);
    assert!(matches!(
        LogStore::open(dir.path(), opts(Durability::Fsync)),
        Err(StoreError::Corrupt(_))
    ));
    assert!(matches!(
        LogStore::open(dir.path(), interval()),
        Err(StoreError::Corrupt(_))
    ));
}

#[test]
fn a_compacted_file_is_recorded_as_synced_when_it_is_swapped_in() {
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(
        dir.path(),
        LogOptions {
            compact_min_bytes: 4096,
            ..interval()
        },
    )
    .expect("open");
    s.replay().expect("replay");
    s.add(&job(1, "f", "", 1, b"stays"));
    for id in 2..200u64 {
        s.add(&job(id, "f", "", 1, &[0; 100]));
        s.flush().expect("flush");
        s.done(id);
        s.flush().expect("flush");
    }
    assert!(s.compactions() > 0, "compacted");
    let start = s.file_len();
    s.add(&job(500, "f", "", 1, &[5; 100]));
    s.flush().expect("flush");
    s.add(&job(501, "f", "", 1, &[6; 100]));
    s.flush().expect("flush");
    drop(s);
    damage(dir.path(), start + 20, 40, 0);
    let mut s = LogStore::open(dir.path(), interval()).expect("a tear after the swap opens");
    assert_eq!(ids(&mut s), [1]);
}
