//! Interval durability (`Durability::Interval`): a flush only writes, and
//! `sync` makes it durable later. Short of a power loss the replay
//! semantics are those of `Durability::Fsync`: what a flush wrote is in the
//! OS's page cache, so a new handle in the same OS reads it back, and the
//! bytes on disk are the same as with fsync.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use gearshift_store::conformance::{self, job, live_ids};
use gearshift_store::log::FILE_NAME;
use gearshift_store::{Durability, LogOptions, LogStore, Replayed, Store, StoreError};
use tempfile::TempDir;

/// An interval long enough that no test depends on anything calling sync.
const HOUR: Duration = Duration::from_secs(3600);

fn interval(compact_min_bytes: u64) -> LogOptions {
    LogOptions {
        durability: Durability::Interval(HOUR),
        compact_min_bytes,
        // Compaction inside the flush, so both runs write the same bytes.
        background_compaction: false,
        ..LogOptions::default()
    }
}

fn fsync(compact_min_bytes: u64) -> LogOptions {
    LogOptions {
        durability: Durability::Fsync,
        compact_min_bytes,
        // Compaction inside the flush, so both runs write the same bytes.
        background_compaction: false,
        direct_io: true,
    }
}

/// `fsync` durability through the page cache (`pwrite` + `fdatasync`).
fn fsync_buffered(compact_min_bytes: u64) -> LogOptions {
    LogOptions {
        direct_io: false,
        ..fsync(compact_min_bytes)
    }
}

fn replay_at(dir: &Path, opts: LogOptions) -> Replayed {
    LogStore::open(dir, opts)
        .expect("reopen")
        .replay()
        .expect("replay")
}

/// The ids of the jobs a reopened store replays, in order.
fn replayed_ids(dir: &Path, opts: LogOptions) -> Vec<u64> {
    replay_at(dir, opts).jobs.iter().map(|j| j.id).collect()
}

#[test]
fn interval_durability_passes_the_conformance_suite() {
    for compact_min_bytes in [8 << 20, 0] {
        let mut dirs = Vec::new();
        conformance::run(|| {
            let dir = TempDir::new().expect("tempdir");
            let path = dir.path().to_path_buf();
            dirs.push(dir);
            move || LogStore::open(&path, interval(compact_min_bytes)).expect("open")
        });
    }
}

#[test]
fn unsynced_flushes_are_read_back_by_a_new_handle() {
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), interval(8 << 20)).expect("open");
    s.replay().expect("replay");
    for id in 1..=30u64 {
        s.add(&job(id, "f", "", (id % 3) as u8, &[id as u8; 50]));
        if id.is_multiple_of(4) {
            s.done(id - 2);
            s.update(id - 1, 2);
            s.flush().expect("flush");
        }
    }
    s.reserve(500);
    s.flush().expect("flush");
    s.add(&job(31, "f", "", 1, b"never flushed"));
    drop(s); // no sync() anywhere

    let r = replay_at(dir.path(), interval(8 << 20));
    let mut want: Vec<(u64, u32)> = Vec::new();
    for id in 1..=30u64 {
        let done = id % 4 == 2 && id + 2 <= 28;
        if !done {
            let attempts = if id % 4 == 3 && id < 30 { 2 } else { 0 };
            want.push((id, attempts));
        }
    }
    let got: Vec<(u64, u32)> = r.jobs.iter().map(|j| (j.id, j.attempts)).collect();
    assert_eq!(got, want, "every flushed op, none of the unflushed");
    assert!(r.next_id >= 500, "the unsynced reservation is read back");
}

/// Runs one op sequence with `opts`; returns the file and the replay.
fn run_sequence(opts: LogOptions) -> (Vec<u8>, Replayed) {
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), opts).expect("open");
    s.replay().expect("replay");
    for id in 1..=200u64 {
        let mut j = job(id, "f", &format!("u{id}"), (id % 3) as u8, &[7; 40]);
        if id.is_multiple_of(5) {
            j.reducer = Some(Bytes::from_static(b"r"));
            j.due_ms = Some(1_800_000_000_000);
        }
        s.add(&j);
        if id > 10 && id.is_multiple_of(3) {
            s.done(id - 10);
        }
        if id.is_multiple_of(7) {
            s.update(id - 1, 1);
            s.reserve(id + 50);
            s.flush().expect("flush");
        }
    }
    s.flush().expect("flush");
    drop(s);
    let bytes = fs::read(dir.path().join(FILE_NAME)).expect("read");
    (bytes, replay_at(dir.path(), opts))
}

#[test]
fn interval_and_both_fsync_writers_write_the_same_bytes_and_replay_the_same() {
    for compact_min_bytes in [8 << 20, 2048, 0] {
        let (a_bytes, a) = run_sequence(interval(compact_min_bytes));
        for (name, opts) in [
            ("direct", fsync(compact_min_bytes)),
            ("buffered", fsync_buffered(compact_min_bytes)),
        ] {
            let (b_bytes, b) = run_sequence(opts);
            assert_eq!(
                a, b,
                "same replay ({name}, compact_min_bytes {compact_min_bytes})"
            );
            // Fsync durability also writes zeros ahead of the frames (and
            // direct writes pad the last block with zeros).
            assert!(
                b_bytes.len() >= a_bytes.len()
                    && b_bytes[..a_bytes.len()] == a_bytes[..]
                    && b_bytes[a_bytes.len()..].iter().all(|&b| b == 0),
                "same frames, then only zeros ({name}, compact_min_bytes {compact_min_bytes})"
            );
        }
        assert!(!a.jobs.is_empty());
    }
}

#[test]
fn sync_works_on_the_file_that_replaced_the_old_one() {
    // Compaction swaps the file handle; a torn tail is cut on open. sync()
    // must reach the current file in both cases, and so must later writes.
    let dir = TempDir::new().expect("tempdir");
    let path: PathBuf = dir.path().join(FILE_NAME);
    let mut s = LogStore::open(dir.path(), interval(0)).expect("open");
    s.replay().expect("replay");
    for id in 1..=10 {
        s.add(&job(id, "f", "", 1, b"x"));
    }
    s.flush().expect("flush");
    for id in 1..=8 {
        s.done(id);
    }
    let before = s.file_len();
    s.flush().expect("flush that compacts");
    assert!(s.file_len() < before, "compacted");
    s.sync().expect("sync after compaction");
    s.add(&job(11, "f", "", 1, b"y"));
    s.flush().expect("flush after compaction");
    s.sync().expect("sync");
    drop(s);

    // A torn tail, cut on open; sync and write after that.
    let mut bytes = fs::read(&path).expect("read");
    bytes.extend_from_slice(&[0x31, 0x46]);
    fs::write(&path, &bytes).expect("write");
    let mut s = LogStore::open(dir.path(), interval(0)).expect("open");
    let ids = live_ids(&mut s);
    assert_eq!(ids, vec![9, 10, 11]);
    s.sync().expect("sync after the cut");
    s.add(&job(12, "f", "", 1, b"z"));
    s.flush().expect("flush");
    s.sync().expect("sync");
    drop(s);
    let ids = replayed_ids(dir.path(), interval(0));
    assert_eq!(ids, vec![9, 10, 11, 12]);
}

/// Fsync durability writes zeros ahead, so a commit's `fdatasync` does not
/// also have to commit a new file size. A crash can then leave a frame cut
/// short *inside* the file, followed by zeros: open must treat it as the
/// torn tail it is (cut it, replay everything before it), not as damage.
#[test]
fn fsync_writes_room_ahead_and_a_frame_torn_inside_it_is_cut_at_open() {
    let dir = TempDir::new().expect("tempdir");
    let path = dir.path().join(FILE_NAME);
    let mut s = LogStore::open(dir.path(), fsync(8 << 20)).expect("open");
    s.replay().expect("replay");
    for id in 1..=3u64 {
        s.add(&job(id, "f", "", 1, &[id as u8; 100]));
    }
    s.flush().expect("flush");
    let first = s.file_len() as usize;
    assert!(s.disk_len() > s.file_len(), "room written ahead");
    assert_eq!(fs::metadata(&path).expect("metadata").len(), s.disk_len());
    s.add(&job(4, "f", "", 1, &[4; 100]));
    s.flush().expect("flush");
    let second = s.file_len() as usize;
    let disk = s.disk_len() as usize;
    drop(s);
    let whole = fs::read(&path).expect("read");
    assert_eq!(whole.len(), disk);
    assert!(
        whole[second..].iter().all(|&b| b == 0),
        "zeros after the frames"
    );
    let frame = whole[first..second].to_vec();

    // Every cut of the second frame, the rest of the room still zeros.
    for keep in [1, 8, 15, frame.len() / 2, frame.len() - 1] {
        let mut torn = whole.clone();
        torn[first..second].fill(0);
        torn[first..first + keep].copy_from_slice(&frame[..keep]);
        fs::write(&path, &torn).expect("write torn");
        let r = replay_at(dir.path(), fsync(8 << 20));
        let ids: Vec<u64> = r.jobs.iter().map(|j| j.id).collect();
        assert_eq!(ids, [1, 2, 3], "cut after {keep} bytes of the frame");
        assert_eq!(
            fs::metadata(&path).expect("metadata").len() as usize,
            first,
            "open cut the file to the last whole frame (kept {keep})"
        );
        fs::write(&path, &whole).expect("restore");
    }
    // The whole file, zeros included, replays all four jobs.
    let r = replay_at(dir.path(), fsync(8 << 20));
    assert_eq!(r.jobs.len(), 4);

    // A damaged first frame followed by a valid one is still refused.
    let mut bad = whole.clone();
    bad[first - 3] ^= 0xFF;
    fs::write(&path, &bad).expect("write damaged");
    match LogStore::open(dir.path(), fsync(8 << 20)) {
        Err(StoreError::Corrupt(_)) => {}
        Err(e) => panic!("expected Corrupt, got {e:?}"),
        Ok(_) => panic!("damage before a valid frame was accepted"),
    }
}

/// Whether the file system under `dir` takes `O_DIRECT` at all.
fn takes_o_direct(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let probe = dir.join("probe");
    let ok = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    let _ = fs::remove_file(&probe);
    ok
}

#[test]
fn fsync_writes_directly_where_it_can_and_the_options_choose() {
    let dir = TempDir::new().expect("tempdir");
    let direct = takes_o_direct(dir.path());
    for (opts, expected) in [
        (fsync(8 << 20), direct),
        (fsync_buffered(8 << 20), false),
        (interval(8 << 20), false),
    ] {
        let mut s = LogStore::open(dir.path(), opts).expect("open");
        assert_eq!(s.direct_writes(), expected, "{opts:?}");
        s.replay().expect("replay");
        s.add(&job(1, "f", "", 1, b"x"));
        s.flush().expect("flush");
        s.done(1);
        s.flush().expect("flush");
    }
    // After a compaction swapped the file, direct writes go on in the new one.
    let dir = TempDir::new().expect("tempdir");
    let mut s = LogStore::open(dir.path(), fsync(0)).expect("open");
    s.replay().expect("replay");
    for id in 1..=20u64 {
        s.add(&job(id, "f", "", 1, &[id as u8; 300]));
        s.flush().expect("flush");
        if id > 1 {
            s.done(id - 1);
        }
    }
    s.flush().expect("flush");
    assert!(s.compactions() > 0, "the file was compacted");
    assert_eq!(s.direct_writes(), direct);
    s.add(&job(21, "f", "", 1, b"after"));
    s.flush().expect("flush");
    drop(s);
    let ids = replayed_ids(dir.path(), fsync(0));
    assert_eq!(ids, [20, 21]);
}

#[test]
fn frames_too_big_for_one_direct_write_go_through_the_page_cache_and_direct_writes_resume() {
    let dir = TempDir::new().expect("tempdir");
    let direct = takes_o_direct(dir.path());
    let mut s = LogStore::open(dir.path(), fsync(8 << 20)).expect("open");
    s.replay().expect("replay");
    s.add(&job(1, "f", "", 1, b"small"));
    s.flush().expect("flush");
    // Three 600 KB jobs in one frame: past the direct write's 1 MiB cap.
    for id in 2..=4u64 {
        s.add(&job(id, "f", "", 1, &vec![id as u8; 600_000]));
    }
    s.flush().expect("flush the big frame");
    assert_eq!(s.direct_writes(), direct, "still writing directly after");
    for id in 5..=7u64 {
        s.add(&job(id, "f", "", 1, &[id as u8; 3000]));
        s.flush().expect("flush");
    }
    drop(s);
    let r = replay_at(dir.path(), fsync(8 << 20));
    let ids: Vec<u64> = r.jobs.iter().map(|j| j.id).collect();
    assert_eq!(ids, (1..=7).collect::<Vec<_>>());
    assert!(r.jobs[1..4]
        .iter()
        .all(|j| j.data.len() == 600_000 && j.data.iter().all(|&b| b == j.id as u8)));
    assert!(r.jobs[4..]
        .iter()
        .all(|j| j.data.len() == 3000 && j.data.iter().all(|&b| b == j.id as u8)));
}
