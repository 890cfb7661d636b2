use std::path::Path;

use bytes::Bytes;

use super::*;
use crate::conformance::job;
use crate::log::{LogOptions, LogStore};
use crate::Store;

const STEP: u64 = 100_000;

/// No fsync per flush (the tests read the file back, they do not crash),
/// no compaction.
fn opts() -> LogOptions {
    LogOptions {
        durability: crate::log::Durability::Interval(std::time::Duration::from_secs(3600)),
        compact_min_bytes: u64::MAX,
        background_compaction: false,
        direct_io: false,
    }
}

/// A log of four frames: jobs 1-2, jobs 3-4 and the end of job 1, job 5,
/// job 6. Returns where each frame starts and ends.
fn four_frames(dir: &Path, data_of_3: &[u8]) -> Vec<Range<usize>> {
    let mut s = LogStore::open(dir, opts()).expect("open");
    s.replay().expect("replay");
    let mut frames = Vec::new();
    let mut at = s.file_len() as usize;
    let mut flush = |s: &mut LogStore, frames: &mut Vec<Range<usize>>| {
        s.flush().expect("flush");
        let end = s.file_len() as usize;
        frames.push(at..end);
        at = end;
    };
    s.add(&job(1, "f", "", 1, b"one"));
    s.add(&job(2, "f", "", 1, b"two"));
    flush(&mut s, &mut frames);
    s.add(&job(3, "f", "", 1, data_of_3));
    s.add(&job(4, "f", "", 1, b"four"));
    s.done(1);
    flush(&mut s, &mut frames);
    s.add(&job(5, "f", "", 1, b"five"));
    flush(&mut s, &mut frames);
    s.add(&job(6, "f", "", 1, b"six"));
    flush(&mut s, &mut frames);
    frames
}

/// Changes the log file with `change`; returns what it then holds. No
/// sync of it stays recorded: damage before its end is corruption.
fn rewrite(dir: &Path, change: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let path = dir.join(FILE_NAME);
    let mut raw = std::fs::read(&path).expect("read");
    change(&mut raw);
    std::fs::write(&path, &raw).expect("write");
    let _ = std::fs::remove_file(dir.join(crate::log::SYNCED_FILE_NAME));
    raw
}

fn poke(dir: &Path, at: usize) {
    rewrite(dir, |raw| raw[at] ^= 0x55);
}

fn live_ids(dir: &Path) -> (Vec<u64>, u64) {
    let mut s = LogStore::open(dir, opts()).expect("the log opens");
    let r = s.replay().expect("replay");
    (r.jobs.iter().map(|j| j.id).collect(), r.next_id)
}

/// Checks that `frame` is the one damaged stretch, repairs, and returns
/// the live jobs the repaired log holds.
fn repaired_without(dir: &Path, frame: &Range<usize>) -> Vec<u64> {
    let report = check(dir).expect("check");
    assert!(report.refused);
    assert_eq!(report.damaged, vec![frame.start as u64..frame.end as u64]);
    repair(dir, STEP).expect("repair").expect("repaired");
    live_ids(dir).0
}

#[test]
fn a_damaged_payload_loses_its_frame_only_and_the_original_is_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let frames = four_frames(dir.path(), b"three");
    let (_, next_before) = live_ids(dir.path());
    poke(dir.path(), frames[1].end - 2);
    let damaged = std::fs::read(dir.path().join(FILE_NAME)).expect("read");
    assert!(matches!(
        LogStore::open(dir.path(), opts()),
        Err(StoreError::Corrupt(_))
    ));

    let report = check(dir.path()).expect("check");
    assert!(report.refused);
    assert_eq!(report.frames, 3);
    assert_eq!(
        report.damaged,
        vec![frames[1].start as u64..frames[1].end as u64]
    );
    assert_eq!(report.tail, 0);
    // What a repair keeps: job 1's end went with the frame, jobs 3 and 4 too.
    assert_eq!(report.jobs, 4);

    let done = repair(dir.path(), STEP).expect("repair").expect("repaired");
    assert_eq!(done.report, report);
    assert_eq!(std::fs::read(&done.kept_as).expect("kept"), damaged);
    let (ids, next) = live_ids(dir.path());
    assert_eq!(ids, vec![1, 2, 5, 6]);
    // Past whatever the lost frame may have reserved.
    assert!(next >= next_before + STEP, "{next} {next_before}");
    assert_eq!(next, done.reserved);
    // A repaired log is sound: nothing more to do.
    assert!(!check(dir.path()).expect("check").refused);
    assert_eq!(repair(dir.path(), STEP).expect("repair"), None);
}

#[test]
fn a_damaged_header_is_skipped_to_the_next_frame() {
    let dir = tempfile::tempdir().expect("tempdir");
    let frames = four_frames(dir.path(), b"three");
    poke(dir.path(), frames[2].start + 5);
    assert_eq!(repaired_without(dir.path(), &frames[2]), vec![2, 3, 4, 6]);
}

#[test]
fn a_frame_inside_a_damaged_frames_job_data_is_not_taken_for_one() {
    // Job 3's data is itself a sealed frame adding job 99.
    let mut inner = Vec::new();
    Op::Add(job(99, "f", "", 1, b"planted")).encode(&mut inner);
    let mut planted = Vec::new();
    frame::put_frame(&mut planted, &inner);
    // The frame's last byte (its payload), or its payload checksum (its
    // header, whose length is still right).
    for at in [|f: &Range<usize>| f.end - 1, |f: &Range<usize>| f.start + 9] {
        let dir = tempfile::tempdir().expect("tempdir");
        let frames = four_frames(dir.path(), &planted);
        poke(dir.path(), at(&frames[1]));
        assert_eq!(repaired_without(dir.path(), &frames[1]), vec![1, 2, 5, 6]);
    }
}

#[test]
fn a_torn_tail_is_for_the_server_to_cut_not_a_repair() {
    let dir = tempfile::tempdir().expect("tempdir");
    let frames = four_frames(dir.path(), b"three");
    // The last frame cut short: its header intact, its payload incomplete.
    let raw = rewrite(dir.path(), |raw| raw.truncate(frames[3].end - 3));
    let report = check(dir.path()).expect("check");
    assert!(!report.refused);
    assert!(report.damaged.is_empty());
    assert!(report.tail > 0);
    assert_eq!(report.jobs, 4);
    assert_eq!(repair(dir.path(), STEP).expect("repair"), None);
    let now = std::fs::read(dir.path().join(FILE_NAME)).expect("read");
    assert_eq!(now, raw, "left as it was");
}

#[test]
fn data_after_a_damaged_last_frame_is_cut_by_a_repair() {
    let dir = tempfile::tempdir().expect("tempdir");
    let frames = four_frames(dir.path(), b"three");
    // The last frame damaged, then bytes that are not a frame.
    rewrite(dir.path(), |raw| {
        raw.truncate(frames[3].end);
        raw[frames[3].end - 1] ^= 1;
        raw.extend_from_slice(b"not a frame");
    });
    assert!(LogStore::open(dir.path(), opts()).is_err());
    let report = check(dir.path()).expect("check");
    assert!(report.refused);
    assert!(report.damaged.is_empty());
    assert_eq!(report.frames, 3);
    repair(dir.path(), STEP).expect("repair").expect("repaired");
    assert_eq!(live_ids(dir.path()).0, vec![2, 3, 4, 5]);
}

#[test]
fn a_running_server_or_a_newer_file_is_left_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    four_frames(dir.path(), b"three");
    {
        let _running = LogStore::open(dir.path(), opts()).expect("open");
        assert!(matches!(check(dir.path()), Err(StoreError::Locked(_))));
        assert!(matches!(
            repair(dir.path(), STEP),
            Err(StoreError::Locked(_))
        ));
    }
    let raw = rewrite(dir.path(), |raw| raw[8] = 99);
    assert!(matches!(
        check(dir.path()),
        Err(StoreError::NewerFormat { .. })
    ));
    assert!(matches!(
        repair(dir.path(), STEP),
        Err(StoreError::NewerFormat { .. })
    ));
    let now = std::fs::read(dir.path().join(FILE_NAME)).expect("read");
    assert_eq!(now, raw);
    let empty = tempfile::tempdir().expect("tempdir");
    let err = check(empty.path()).expect_err("no log");
    assert!(err.to_string().contains("no queue file"), "{err}");
    let left = std::fs::read_dir(empty.path()).expect("dir").count();
    assert_eq!(left, 0, "a check of an empty directory leaves nothing");
    let err = check(&empty.path().join("absent")).expect_err("no directory");
    assert!(err.to_string().contains("no queue file"), "{err}");
}

#[test]
fn walking_a_sound_log_finds_every_frame() {
    let dir = tempfile::tempdir().expect("tempdir");
    let frames = four_frames(dir.path(), b"three");
    let raw = Bytes::from(std::fs::read(dir.path().join(FILE_NAME)).expect("read"));
    let w = walk(&raw, crate::record::FORMAT_VERSION);
    assert_eq!(w.frames, frames);
    assert!(w.damaged.is_empty());
    assert_eq!(w.end, frames[3].end);
}

mod damage {
    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;

    /// A log of `frames` flushes of two jobs each (every third frame also
    /// ends an earlier job); returns each job's data by id.
    fn log(dir: &Path, frames: u64) -> HashMap<u64, Bytes> {
        let mut s = LogStore::open(dir, opts()).expect("open");
        s.replay().expect("replay");
        let mut written = HashMap::new();
        for f in 0..frames {
            for id in [2 * f + 1, 2 * f + 2] {
                let data = format!("job {id} {}", "x".repeat(id as usize % 40));
                let j = job(id, "f", "", 1, data.as_bytes());
                written.insert(id, j.data.clone());
                s.add(&j);
            }
            if f % 3 == 2 {
                s.done(2 * f - 1);
            }
            s.flush().expect("flush");
        }
        written
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Whatever bytes are damaged after the file header, `check` agrees
        /// with the server, and a repaired file opens holding only jobs
        /// that were written, with their data.
        #[test]
        fn check_agrees_with_the_server_and_a_repair_opens(
            frames in 2u64..12,
            hits in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let written = log(dir.path(), frames);
            rewrite(dir.path(), |raw| {
                let end = raw.len() - raw.iter().rev().take_while(|&&b| b == 0).count();
                for (at, flip) in &hits {
                    raw[HEADER_LEN + at.index(end - HEADER_LEN)] ^= flip;
                }
            });
            let report = check(dir.path()).expect("check");
            let opens = LogStore::open(dir.path(), opts()).is_ok();
            prop_assert_eq!(opens, !report.refused);
            if report.refused {
                let done = repair(dir.path(), STEP).expect("repair");
                prop_assert!(done.is_some());
            }
            let mut s = LogStore::open(dir.path(), opts()).expect("opens after a repair");
            let r = s.replay().expect("replay");
            prop_assert_eq!(r.jobs.len(), report.jobs);
            for j in &r.jobs {
                prop_assert_eq!(written.get(&j.id), Some(&j.data));
            }
        }
    }
}
