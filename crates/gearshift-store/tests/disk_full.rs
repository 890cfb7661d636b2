//! Real file-system failures on a small tmpfs: a full disk (64 KiB) and a
//! read-only mount. These tests mount a tmpfs, which needs root: they are
//! ignored unless asked for (`-- --ignored`; scripts/test.sh does as root),
//! and then a mount that fails fails the test. Every mount is undone when
//! its guard drops, also when a test panics.
//!
//! The rule under test: a flush that fails for want of space stores nothing
//! of its batch and leaves the file readable, reopening replays exactly the
//! acknowledged jobs, and the store works again once space is freed.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard};

use gearshift_store::conformance::job;
use gearshift_store::log::FILE_NAME;
use gearshift_store::{Durability, JobRecord, LogOptions, LogStore, Replayed, Store, StoreError};
use tempfile::TempDir;

fn ids(jobs: &[JobRecord]) -> Vec<u64> {
    jobs.iter().map(|j| j.id).collect()
}

fn replay_at(dir: &Path, opts: LogOptions) -> Replayed {
    LogStore::open(dir, opts)
        .expect("reopen")
        .replay()
        .expect("replay")
}

/// Serialises the tests of this file. Each spawns `mount`/`umount`, and a
/// spawned child holds copies of every open descriptor of the process until
/// it execs: run beside another test, it can keep that test's store lock
/// (so a reopen finds the directory locked) or a deleted file's space on
/// the tiny tmpfs alive for a moment. The tests are about the store, not
/// that race.
static SERIAL: Mutex<()> = Mutex::new(());

/// A tmpfs mounted on a temporary directory, unmounted when dropped (also
/// when the test panics).
struct Mount {
    dir: TempDir,
    /// Held until after the unmount.
    _serial: MutexGuard<'static, ()>,
}

impl Mount {
    /// Mounts a tmpfs; panics with the reason when it cannot.
    fn tmpfs(options: &str) -> Mount {
        let serial = SERIAL
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let dir = TempDir::new().expect("tempdir");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Mount {
                dir,
                _serial: serial,
            },
            Ok(o) => panic!(
                "cannot mount a tmpfs (this test needs root): {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
            Err(e) => panic!("cannot run mount: {e}"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn remount(&self, options: &str) {
        let ok = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(self.path())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "remount {options}");
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let unmounted = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

#[test]
#[ignore = "mounts a tmpfs, which needs root: run with --ignored (scripts/test.sh does as root)"]
fn a_read_only_file_system_is_an_error_and_nothing_is_lost() {
    let m = Mount::tmpfs("size=1m");
    let data = m.path().join("data");
    let opts = LogOptions::default();
    let mut s = LogStore::open(&data, opts).expect("open");
    s.add(&job(1, "f", "", 1, b"kept"));
    s.flush().expect("flush");
    drop(s);
    m.remount("ro");
    let err = LogStore::open(&data, opts).expect_err("a read-only file cannot be a store");
    assert!(matches!(err, StoreError::Io(_)), "{err:?}");
    let err = LogStore::open(&m.path().join("fresh"), opts).expect_err("cannot create");
    assert!(matches!(err, StoreError::Io(_)), "{err:?}");
    m.remount("rw");
    assert_eq!(ids(&replay_at(&data, opts).jobs), vec![1]);
}

fn is_disk_full(e: &StoreError) -> bool {
    const ENOSPC: i32 = 28;
    matches!(e, StoreError::Io(io) if io.raw_os_error() == Some(ENOSPC))
}

fn disk_len(path: &Path) -> u64 {
    fs::metadata(path).expect("metadata").len()
}

/// Adds batches of three 1000-byte jobs until a flush fails; returns the
/// ids of every acknowledged job and the id to use next.
fn fill(s: &mut LogStore, first: u64) -> (Vec<u64>, u64) {
    let mut acked = Vec::new();
    let mut id = first;
    for _ in 0..200 {
        let batch: Vec<u64> = (id..id + 3).collect();
        id += 3;
        for &i in &batch {
            s.add(&job(i, "fill", "", 1, &[i as u8; 1000]));
        }
        match s.flush() {
            Ok(()) => acked.extend(batch),
            Err(e) => {
                assert!(is_disk_full(&e), "expected ENOSPC, got {e:?}");
                return (acked, id);
            }
        }
    }
    panic!("the disk never filled up");
}

#[test]
#[ignore = "mounts a tmpfs, which needs root: run with --ignored (scripts/test.sh does as root)"]
fn a_full_disk_fails_flushes_cleanly_and_recovers_once_space_is_freed() {
    full_disk(true);
}

#[test]
#[ignore = "mounts a tmpfs, which needs root: run with --ignored (scripts/test.sh does as root)"]
fn a_full_disk_fails_buffered_flushes_cleanly_too() {
    full_disk(false);
}

/// With `direct_io` the log is written with O_DIRECT where the file
/// system takes it, else through the page cache.
fn full_disk(direct_io: bool) {
    let m = Mount::tmpfs("size=64k");
    let filler = m.path().join("filler");
    fs::write(&filler, vec![0u8; 16 << 10]).expect("filler");
    let data = m.path().join("data");
    let file: PathBuf = data.join(FILE_NAME);
    let opts = LogOptions {
        durability: Durability::Fsync,
        compact_min_bytes: u64::MAX,
        background_compaction: false,
        direct_io,
    };
    let mut s = LogStore::open(&data, opts).expect("open");
    s.replay().expect("replay");
    let (mut acked, mut id) = fill(&mut s, 1);
    assert!(
        acked.len() >= 20,
        "{} jobs fit before the disk filled",
        acked.len()
    );
    assert_eq!(
        disk_len(&file),
        s.file_len(),
        "the failed frame was cut off"
    );

    // Still full: another attempt fails the same way and damages nothing.
    s.add(&job(id, "fill", "", 1, &[0; 3000]));
    id += 1;
    let err = s.flush().expect_err("still full");
    assert!(is_disk_full(&err), "{err:?}");
    assert_eq!(disk_len(&file), s.file_len());
    drop(s);

    // Reopening on the full disk replays exactly what was acknowledged.
    let mut s = LogStore::open(&data, opts).expect("reopen on a full disk");
    let r = s.replay().expect("replay");
    assert_eq!(ids(&r.jobs), acked, "exactly the acknowledged jobs");
    assert!(r.next_id > *acked.last().expect("acked"));

    fs::remove_file(&filler).expect("free space");
    for i in id..id + 3 {
        s.add(&job(i, "after", "", 1, &[1; 1000]));
        acked.push(i);
    }
    s.flush().expect("flush after space was freed");
    drop(s);
    assert_eq!(
        ids(&replay_at(&data, opts).jobs),
        acked,
        "later flushes survive"
    );
}

#[test]
#[ignore = "mounts a tmpfs, which needs root: run with --ignored (scripts/test.sh does as root)"]
fn a_compaction_that_fails_on_a_full_disk_gives_its_space_back() {
    compaction_on_a_full_disk(false);
}

#[test]
#[ignore = "mounts a tmpfs, which needs root: run with --ignored (scripts/test.sh does as root)"]
fn a_background_compaction_that_fails_on_a_full_disk_gives_its_space_back() {
    compaction_on_a_full_disk(true);
}

fn compaction_on_a_full_disk(background_compaction: bool) {
    let m = Mount::tmpfs("size=64k");
    let spare = m.path().join("spare");
    fs::write(&spare, vec![0u8; 8 << 10]).expect("spare");
    let data = m.path().join("data");
    let tmp = data.join(format!("{FILE_NAME}.compact"));
    let opts = LogOptions {
        durability: Durability::Fsync,
        compact_min_bytes: 0,
        background_compaction,
        ..LogOptions::default()
    };
    let mut s = LogStore::open(&data, opts).expect("open");
    s.replay().expect("replay");
    let (acked, _) = fill(&mut s, 1);
    // Two pages free; ending half the jobs makes dead bytes outgrow live
    // ones, so the next flush compacts, and the rewrite cannot fit.
    fs::remove_file(&spare).expect("free two pages");
    let (gone, kept) = acked.split_at(acked.len() / 2 + 1);
    for &id in gone {
        s.done(id);
    }
    let before = s.file_len();
    s.flush()
        .expect("a small append fits; the compaction failure is logged");
    if background_compaction {
        assert!(s.compacting(), "the flush started a compaction");
        let failed = s.finish_compaction();
        assert!(failed.is_err(), "the copy cannot fit: {failed:?}");
    }
    assert!(s.file_len() > before, "the compaction did not happen");
    assert!(
        !tmp.exists(),
        "the failed compaction left {} bytes of temp file on a full disk",
        fs::metadata(&tmp).map(|m| m.len()).unwrap_or(0)
    );
    // The space the temp file took is back: small flushes keep working
    // for more than a page (without it, not even the rest of the file's
    // last page), each retrying the compaction.
    let start = s.file_len();
    let mut k = 0;
    while s.file_len() - start < 4096 {
        for id in kept {
            s.update(*id, k);
        }
        s.flush().unwrap_or_else(|e| {
            let n = s.file_len() - start;
            panic!("small flush {k}, {n} bytes after the compaction failed: {e}")
        });
        // Each retry fails too; in the background it fails on its thread,
        // which must give the space back before the next flush needs it.
        let _ = s.finish_compaction();
        k += 1;
    }
    assert!(!tmp.exists(), "no temp file after the retries either");
    drop(s);
    let r = replay_at(&data, opts);
    assert_eq!(ids(&r.jobs), kept);
    assert!(
        r.jobs.iter().all(|j| j.attempts == k - 1),
        "the last updates are kept"
    );
}
